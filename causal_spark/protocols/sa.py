"""`sa`: Sánchez-Álvarez sparse matrix with threshold k and extra messages (Sánchez & Álvarez §3).

Source: Sánchez & Álvarez, "A lightweight asynchronous algorithm for causal delivery
using extra message insertion", §3.

Process Pi keeps a matrix M of constraints and DELIV[j], the messages from
Pj it delivered. The paper's rules, with the choices of docs/replay.md:
- a message to Pj carries M with "M_m[-, j]" the constraints Pj must meet;
  then column j is zeroed except M[i, j], incremented for the message. A
  multicast copy to d carries column d as it was before the send and the
  other columns as they are after the whole multicast;
- Pj delivers a message once DELIV_j[x] >= W[x, j] for every x, then
  increments DELIV_j[i] and takes M[-, l] := max(M[-, l], W[-, l]) for
  l != j (its own column stays zero);
- after every send and delivery, while M has at least k non-zero entries
  (default k = n + 1, the paper's particular case; n < k <= n^2), an extra
  message takes the fullest column j (ties: lowest pidx) to Pj, which
  delivers it under the same condition (it only counts in DELIV), and the
  column is reset to M[i, j] + 1.
Matrices travel sparse, as (row, column, value) triples: 3 integers per
non-zero entry, for copies (piggyback) and extra messages (control).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numba import njit, types
from numba.typed import List

from causal_spark.protocols.base import Protocol, ProtocolParamError, int_param
from causal_spark.replay_loop import (
    CompiledTrace,
    control,
    new_pool,
    pool_release,
    pool_take,
    post,
)

if TYPE_CHECKING:
    from causal_spark.replay_engine import Engine

Sparse = dict[tuple[int, int], int]


class Sa(Protocol):
    name = "sa"
    source = "Sánchez & Álvarez §3: sparse matrix, threshold k, extra messages"
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


# ---- compiled form (causal_spark.replay_loop) ---------------------------------------------
#
# State, for n processes (Sánchez & Álvarez §3, as the reference class above):
# - k[0]: the threshold of non-zero entries;
# - matrix[p]: M of Pi, dense (n x n x n); every entry the reference holds is >= 1,
#   so 0 stands for an absent entry and the non-zero count is the dict's size;
# - deliv[p, x]: DELIV_p[x] (n x n);
# - pool: one row per send event, shared by its copies and released when the last
#   one is delivered: the sender's M after the whole multicast (n x n) and before
#   it (n x n); a copy to d carries column d of the second, the rest of the first;
# - slot[m]: copy m's pool row;
# - extra_pool: one row per extra message: the column's constraints (n) and the
#   sender; the control message carries only its row (released on its delivery);
# - extras[p]: the rows of the extra messages that reached p and wait, in arrival
#   order (the order `settle` scans them in, as the reference's list).

State = namedtuple("State", "k matrix deliv pool slot extra_pool extras")
_EXTRA = 0


def make_state(trace: CompiledTrace, params: Mapping[str, str]) -> tuple[Any, str | None, bool]:
    n = trace.n
    k = int_param("sa", params, "k", None)
    if k is not None and k < 2:
        raise ProtocolParamError(f"sa.k must be at least 2, found {k}")
    threshold = k if k is not None else n + 1
    extras = List.empty_list(types.ListType(types.int64))  # type: ignore[no-untyped-call]
    for _ in range(n):
        extras.append(List.empty_list(types.int64))
    state = State(
        np.array([threshold], np.int64),
        np.zeros((n, n, n), np.int64),
        np.zeros((n, n), np.int64),
        new_pool(2 * n * n),
        np.full(len(trace.msg_id), -1, np.int64),
        new_pool(n + 1),
        extras,
    )
    if threshold <= n:
        why = f"sa.k = {threshold} must exceed n = {n} (Sánchez & Álvarez §3: n < k <= n^2)"
        return state, why, False
    return state, None, False


@njit(cache=True)
def _thin(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    n = lay.n
    mine = st.matrix[p]
    count = np.zeros(n, np.int64)
    while True:
        count[:] = 0
        total = 0
        for x in range(n):
            for c in range(n):
                if mine[x, c] != 0:
                    count[c] += 1
                    total += 1
        if total < st.k[0]:
            return
        j = 0  # the fullest column, ties to the lowest index
        for c in range(1, n):
            if count[c] > count[j]:
                j = c
        slot = pool_take(st.extra_pool, 1)
        row = st.extra_pool.rows[0][slot]
        row[:n] = mine[:, j]
        row[n] = p
        control(eng, lay, p, j, t, _EXTRA, 3 * count[j], slot, 0, 0)
        own = mine[p, j]
        mine[:, j] = 0
        mine[p, j] = own + 1


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    n = lay.n
    mine = st.matrix[p]
    slot = pool_take(st.pool, len(own))
    row = st.pool.rows[0][slot]
    after = row[: n * n].reshape((n, n))
    before = row[n * n :].reshape((n, n))
    before[:, :] = mine
    after[:, :] = mine
    for m in own:
        d = lay.dst[m]
        after[:, d] = 0
        after[p, d] = before[p, d] + 1
    total = 0
    for x in range(n):
        for c in range(n):
            if after[x, c] != 0:
                total += 1
    for m in own:
        d = lay.dst[m]
        size = total
        for x in range(n):
            if after[x, d] != 0:
                size -= 1
            if before[x, d] != 0:
                size += 1
        st.slot[m] = slot
        post(eng, lay, m, p, t, 3 * size)
    mine[:, :] = after
    _thin(st, eng, lay, p, t)
    return True


@njit(cache=True)
def c_control(st, eng, lay, p, ckind, a, b, c, t):  # type: ignore[no-untyped-def]
    st.extras[p].append(a)


@njit(cache=True)
def _satisfied(deliv, need):  # type: ignore[no-untyped-def]
    for x in range(len(deliv)):  # noqa: SIM110 (a loop compiles; a generator does not)
        if deliv[x] < need[x]:
            return False
    return True


@njit(cache=True)
def c_settle(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    n = lay.n
    waiting = st.extras[p]
    deliv = st.deliv[p]
    progress = True
    while progress:
        progress = False
        for i in range(len(waiting)):
            slot = waiting[i]
            row = st.extra_pool.rows[0][slot]
            if _satisfied(deliv, row[:n]):
                waiting.pop(i)
                deliv[row[n]] += 1
                pool_release(st.extra_pool, slot)
                progress = True
                break


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    n = lay.n
    row = st.pool.rows[0][st.slot[m]]
    # the constraints of column p, from the sender's matrix before the send
    return _satisfied(st.deliv[p], row[n * n :].reshape((n, n))[:, p])


@njit(cache=True)
def c_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    n = lay.n
    row = st.pool.rows[0][st.slot[m]]
    after = row[: n * n].reshape((n, n))
    st.deliv[p, lay.src[m]] += 1
    mine = st.matrix[p]
    for x in range(n):
        for c in range(n):
            if c != p and after[x, c] > mine[x, c]:
                mine[x, c] = after[x, c]
    pool_release(st.pool, st.slot[m])
    _thin(st, eng, lay, p, t)
