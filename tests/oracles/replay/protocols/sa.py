"""The reference `sa`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.sa` are held to it, event for event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine

Sparse = dict[tuple[int, int], int]


class Sa(Protocol):
    spec = SPECS["sa"]

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        k = self.parsed["k"]  # None, or an integer of at least 2 (the spec parses it)
        self.k = k if isinstance(k, int) else n + 1
        self.matrix: list[Sparse] = [{} for _ in range(n)]
        self.deliv = [[0] * n for _ in range(n)]
        self.carried: dict[int, Sparse] = {}
        # per copy: the constraints of its destination's column, (row, value)
        self.need: dict[int, list[tuple[int, int]]] = {}
        self.extras: list[list[tuple[int, Sparse]]] = [[] for _ in range(n)]
        self.extra_messages = 0

    def not_applicable(self) -> str | None:
        n = self.engine.n
        if self.k <= n:
            return f"sa.k = {self.k} must exceed n = {n} (Sánchez & Álvarez §3: n < k <= n^2)"
        return None

    def send(self, p: int, copies: list[int], t: float) -> bool:
        before = self.matrix[p]
        after = dict(before)
        dst = self.engine.trace.dst
        targets = [dst[m] for m in copies]
        for d in targets:
            _reset_column(after, p, d, before.get((p, d), 0) + 1)
        for m, d in zip(copies, targets, strict=True):
            carried = {key: v for key, v in after.items() if key[1] != d}
            carried.update({key: v for key, v in before.items() if key[1] == d})
            self.carried[m] = carried
            self.need[m] = [(x, v) for (x, column), v in carried.items() if column == d]
            self.engine.post(m, p, t, 3 * len(carried))
        self.matrix[p] = after
        self._thin(p, t)
        return True

    def _thin(self, p: int, t: float) -> None:
        mine = self.matrix[p]
        while len(mine) >= self.k:
            count: dict[int, int] = {}
            for _, column in mine:
                count[column] = count.get(column, 0) + 1
            j = min(count, key=lambda c: (-count[c], c))
            constraints = {key: v for key, v in mine.items() if key[1] == j}
            self.engine.control(p, j, t, "extra", 3 * len(constraints), p, constraints)
            self.extra_messages += 1
            _reset_column(mine, p, j, constraints.get((p, j), 0) + 1)

    def control(self, p: int, kind: str, payload: tuple[object, ...], t: float) -> None:
        sender, column = payload
        assert isinstance(sender, int) and isinstance(column, dict)
        self.extras[p].append((sender, column))

    def settle(self, p: int, t: float) -> None:
        progress = True
        while progress:
            progress = False
            for entry in self.extras[p]:
                sender, column = entry
                if self._satisfied(p, column):
                    self.extras[p].remove(entry)
                    self.deliv[p][sender] += 1
                    progress = True
                    break

    def _satisfied(self, p: int, carried: Sparse) -> bool:
        deliv = self.deliv[p]
        return all(deliv[x] >= v for (x, column), v in carried.items() if column == p)

    def deliverable(self, p: int, m: int) -> bool:
        deliv = self.deliv[p]
        return all(deliv[x] >= v for x, v in self.need[m])

    def delivered(self, p: int, m: int, t: float) -> None:
        carried = self.carried.pop(m)
        del self.need[m]
        self.deliv[p][self.engine.trace.src[m]] += 1
        mine = self.matrix[p]
        for key, v in carried.items():
            if key[1] != p and v > mine.get(key, 0):
                mine[key] = v
        self._thin(p, t)


def _reset_column(matrix: Sparse, p: int, column: int, own: int) -> None:
    for key in [key for key in matrix if key[1] == column]:
        del matrix[key]
    matrix[(p, column)] = own
