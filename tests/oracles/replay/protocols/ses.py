"""The reference `ses`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.ses` are held to it, event for event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine

Vector = tuple[int, ...]


def _below(a: Vector, b: Vector) -> bool:
    """a < b for vector times: every component <= and the vectors differ."""
    return a != b and all(x <= y for x, y in zip(a, b, strict=True))


def _sup(a: Vector, b: Vector) -> Vector:
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


class Ses(Protocol):
    spec = SPECS["ses"]

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        self.time: list[Vector] = [(0,) * n for _ in range(n)]
        self.pairs: list[dict[int, Vector]] = [{} for _ in range(n)]
        self.carried: dict[int, tuple[Vector, dict[int, Vector]]] = {}

    def _tick(self, p: int) -> Vector:
        now = list(self.time[p])
        now[p] += 1
        self.time[p] = tuple(now)
        return self.time[p]

    def send(self, p: int, copies: list[int], t: float) -> bool:
        stamp = self._tick(p)
        dst = self.engine.trace.dst
        before = self.pairs[p]
        targets = [dst[m] for m in copies]
        n = self.engine.n
        for m, d in zip(copies, targets, strict=True):
            buffer = dict(before)
            for other in targets:
                if other != d:
                    buffer[other] = stamp
            self.carried[m] = (stamp, buffer)
            self.engine.post(m, p, t, n + len(buffer) * (n + 1))
        after = dict(before)
        for d in targets:
            after[d] = stamp
        self.pairs[p] = after
        return True

    def deliverable(self, p: int, m: int) -> bool:
        _, buffer = self.carried[m]
        condition = buffer.get(p)
        return condition is None or _below(condition, self.time[p])

    def delivered(self, p: int, m: int, t: float) -> None:
        stamp, buffer = self.carried.pop(m)
        mine = self.pairs[p]
        for site, vt in buffer.items():
            if site != p:
                mine[site] = _sup(mine[site], vt) if site in mine else vt
        self.time[p] = _sup(self.time[p], stamp)
        self._tick(p)
        sender = self.engine.trace.src[m]
        old = mine.get(sender)
        if old is not None and _below(old, stamp):
            del mine[sender]
