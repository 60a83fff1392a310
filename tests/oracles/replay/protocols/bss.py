"""The reference `bss`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.bss` are held to it, event for event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine


class Bss(Protocol):
    spec = SPECS["bss"]

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        self.vt = [[0] * n for _ in range(n)]
        self.stamp: dict[int, list[int]] = {}

    def not_applicable(self) -> str | None:
        trace = self.engine.trace
        n = trace.n
        for p in range(n):
            for k, copies in enumerate(trace.copies[p]):
                if not copies:
                    continue
                targets = sorted(trace.dst[m] for m in copies)
                others = [q for q in range(n) if q != p]
                if targets != others:
                    names = [
                        trace.names[d] if d >= 0 else "a process without events" for d in targets
                    ]
                    return (
                        f"send {trace.names[p]}#{trace.lseq[p][k]} goes to {', '.join(names)}, "
                        f"not to exactly the {n - 1} other process(es); BSS needs every send "
                        "to be a broadcast to all others"
                    )
        return None

    def send(self, p: int, copies: list[int], t: float) -> bool:
        vt = self.vt[p]
        vt[p] += 1
        stamp = list(vt)
        for m in copies:
            self.stamp[m] = stamp
            self.engine.post(m, p, t, len(stamp))
        return True

    def deliverable(self, p: int, m: int) -> bool:
        i = self.engine.trace.src[m]
        vt, mine = self.stamp[m], self.vt[p]
        if vt[i] != mine[i] + 1:
            return False
        return all(mine[k] >= vt[k] for k in range(len(vt)) if k != i)

    def delivered(self, p: int, m: int, t: float) -> None:
        mine, vt = self.vt[p], self.stamp[m]
        for k in range(len(mine)):
            if vt[k] > mine[k]:
                mine[k] = vt[k]
