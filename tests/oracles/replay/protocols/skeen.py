"""The reference `skeen`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.skeen` are held to it, event for event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine

Group = tuple[int, int]  # (sender, send lseq): one multicast


class Skeen(Protocol):
    spec = SPECS["skeen"]

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        self.clock = [0] * n
        self.stamp: dict[int, int] = {}
        self.group: dict[int, Group] = {}
        self.copies: dict[Group, list[int]] = {}
        self.proposals: dict[Group, list[int]] = {}
        # per process: copy -> [timestamp, final?]
        self.entries: list[dict[int, list[int]]] = [{} for _ in range(n)]

    def send(self, p: int, copies: list[int], t: float) -> bool:
        self.clock[p] += 1
        trace = self.engine.trace
        group = (p, trace.send_lseq[copies[0]])
        self.copies[group] = list(copies)
        self.proposals[group] = []
        for m in copies:
            self.stamp[m] = self.clock[p]
            self.group[m] = group
            self.engine.post(m, p, t, 1)
        return True

    def arrived(self, p: int, m: int, t: float) -> None:
        self.clock[p] = max(self.clock[p], self.stamp[m]) + 1
        self.entries[p][m] = [self.clock[p], 0]
        group = self.group[m]
        if group[0] == p:
            self._proposed(group, self.clock[p], t)
        else:
            self.engine.control(p, group[0], t, "propose", 1, group, self.clock[p])
            self.clock[p] += 1  # sending the proposal is an event

    def _proposed(self, group: Group, proposal: int, t: float) -> None:
        got = self.proposals[group]
        got.append(proposal)
        copies = self.copies[group]
        if len(got) < len(copies):
            return
        final = max(got)
        sender = group[0]
        dst = self.engine.trace.dst
        if any(dst[m] != sender for m in copies):
            self.clock[sender] += 1  # sending the finals is one event
        for m in copies:
            if dst[m] == sender:
                self._finalised(sender, m, final)
            else:
                self.engine.control(sender, dst[m], t, "final", 1, m, final)

    def _finalised(self, p: int, m: int, final: int) -> None:
        entry = self.entries[p][m]
        entry[0], entry[1] = final, 1

    def control(self, p: int, kind: str, payload: tuple[object, ...], t: float) -> None:
        if kind == "propose":
            group, proposal = payload
            assert isinstance(group, tuple) and isinstance(proposal, int)
            self.clock[p] = max(self.clock[p], proposal) + 1
            self._proposed(group, proposal, t)
        else:
            m, final = payload
            assert isinstance(m, int) and isinstance(final, int)
            self.clock[p] = max(self.clock[p], final) + 1
            self._finalised(p, m, final)

    def _key(self, p: int, m: int) -> tuple[int, int, int]:
        group = self.group[m]
        return (self.entries[p][m][0], group[0], group[1])

    def deliverable(self, p: int, m: int) -> bool:
        entries = self.entries[p]
        if not entries[m][1]:
            return False
        mine = self._key(p, m)
        return all(self._key(p, other) >= mine for other in entries)

    def delivered(self, p: int, m: int, t: float) -> None:
        del self.entries[p][m]
