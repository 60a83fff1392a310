"""The reference `rst`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.rst` are held to it, event for event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine


class Rst(Protocol):
    spec = SPECS["rst"]

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        self.matrix = [[[0] * n for _ in range(n)] for _ in range(n)]
        self.carried: dict[int, list[list[int]]] = {}

    def send(self, p: int, copies: list[int], t: float) -> bool:
        mine = self.matrix[p]
        dst = self.engine.trace.dst
        for m in copies:
            mine[p][dst[m]] += 1
        snapshot = [list(row) for row in mine]
        n = self.engine.n
        for m in copies:
            self.carried[m] = snapshot
            self.engine.post(m, p, t, n * n)
        return True

    def deliverable(self, p: int, m: int) -> bool:
        j = self.engine.trace.src[m]
        w, mine = self.carried[m], self.matrix[p]
        if w[j][p] != mine[j][p] + 1:
            return False
        return all(mine[k][p] >= w[k][p] for k in range(len(w)) if k != j)

    def delivered(self, p: int, m: int, t: float) -> None:
        mine, w = self.matrix[p], self.carried.pop(m)
        for row, other in zip(mine, w, strict=True):
            for k, value in enumerate(other):
                if value > row[k]:
                    row[k] = value
