"""The reference `sequencer`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.sequencer` are held to it, event for event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine


class Sequencer(Protocol):
    spec = SPECS["sequencer"]

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        names = engine.trace.names
        wanted = params.get("process")
        self.hub = names.index(wanted) if wanted in names else 0
        self.missing = wanted if wanted is not None and wanted not in names else None
        self.relayed: dict[int, int] = {}
        self.number: dict[int, int] = {}
        self.got = [0] * engine.n

    def not_applicable(self) -> str | None:
        if self.missing is not None:
            return f"sequencer.process '{self.missing}' is not a process of this trace"
        return None

    def send(self, p: int, copies: list[int], t: float) -> bool:
        if p == self.hub:
            self._relay(copies, t)
        else:
            self.engine.control(p, self.hub, t, "request", len(copies), tuple(copies))
        return True

    def _relay(self, copies: list[int] | tuple[int, ...], t: float) -> None:
        dst = self.engine.trace.dst
        for m in copies:
            d = dst[m]
            self.relayed[d] = self.number[m] = self.relayed.get(d, 0) + 1
            self.engine.post(m, self.hub, t, 1)

    def control(self, p: int, kind: str, payload: tuple[object, ...], t: float) -> None:
        (copies,) = payload
        assert isinstance(copies, tuple)
        self._relay(copies, t)

    def deliverable(self, p: int, m: int) -> bool:
        return self.number[m] == self.got[p] + 1

    def delivered(self, p: int, m: int, t: float) -> None:
        self.got[p] += 1
