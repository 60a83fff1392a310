"""`sa`: Sánchez-Álvarez sparse matrix with threshold k and extra messages (seed 002 §3).

Process Pi keeps a matrix M of constraints and DELIV[j], the messages from
Pj it delivered. The seed's rules, with DESIGN §4's choices:
- a message to Pj carries M with "M_m[-, j]" the constraints Pj must meet;
  then column j is zeroed except M[i, j], incremented for the message. A
  multicast copy to d carries column d as it was before the send and the
  other columns as they are after the whole multicast;
- Pj delivers a message once DELIV_j[x] >= W[x, j] for every x, then
  increments DELIV_j[i] and takes M[-, l] := max(M[-, l], W[-, l]) for
  l != j (its own column stays zero);
- after every send and delivery, while M has at least k non-zero entries
  (default k = n + 1, the seed's particular case; n < k <= n^2), an extra
  message takes the fullest column j (ties: lowest pidx) to Pj, which
  delivers it under the same condition (it only counts in DELIV), and the
  column is reset to M[i, j] + 1.
Matrices travel sparse, as (row, column, value) triples: 3 integers per
non-zero entry, for copies (piggyback) and extra messages (control).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from causal_spark.protocols.base import Protocol, ProtocolParamError, int_param

if TYPE_CHECKING:
    from causal_spark.replay_engine import Engine

Sparse = dict[tuple[int, int], int]


class Sa(Protocol):
    name = "sa"
    source = "seed 002 §3 (Sánchez-Álvarez): sparse matrix, threshold k, extra messages"
    causal = True
    params: ClassVar[Mapping[str, str]] = {
        "k": "threshold of non-zero entries (default n + 1; n < k <= n^2)"
    }

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        k = int_param(self.name, params, "k", None)
        if k is not None and k < 2:
            raise ProtocolParamError(f"sa.k must be at least 2, found {k}")
        self.k = k if k is not None else n + 1
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
            return f"sa.k = {self.k} must exceed n = {n} (seed 002 §3: n < k <= n^2)"
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
