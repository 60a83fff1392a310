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
from numba import njit

from causal_spark.protocols.base import Protocol, ProtocolParamError, int_param
from causal_spark.replay_loop import (
    CompiledTrace,
    control,
    new_pool,
    pool_release,
    pool_row,
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
# - nnz[p], columns[p * n + c]: the non-zero entries of matrix[p], and of its column c
#   (kept up to date, so the threshold check and the fullest column cost n, not n^2);
# - deliv[p * n + x]: DELIV_p[x];
# - pool: one row per send event, shared by its copies and released when the last
#   one is delivered: the sender's M after the whole multicast (n x n) and before
#   it (n x n); a copy to d carries column d of the second, the rest of the first;
# - slot[m]: copy m's pool row;
# - extra_pool: one row per extra message: the column's constraints (n), the sender
#   and the next extra message waiting at the same process; the control message
#   carries only its row (released on its delivery);
# - head[p], tail[p]: the extra messages that reached p and wait, a list in arrival
#   order (the order `settle` scans them in, as the reference's list).

State = namedtuple("State", "k matrix nnz columns deliv pool slot extra_pool head tail")
_EXTRA = 0


def make_state(trace: CompiledTrace, params: Mapping[str, str]) -> tuple[Any, str | None, bool]:
    n = trace.n
    k = int_param("sa", params, "k", None)
    if k is not None and k < 2:
        raise ProtocolParamError(f"sa.k must be at least 2, found {k}")
    threshold = k if k is not None else n + 1
    state = State(
        np.array([threshold], np.int64),
        np.zeros((n, n, n), np.int64),
        np.zeros(n, np.int64),
        np.zeros(n * n, np.int64),
        np.zeros(n * n, np.int64),
        new_pool(2 * n * n),
        np.full(trace.messages, -1, np.int32),
        new_pool(n + 2),
        np.full(n, -1, np.int64),
        np.full(n, -1, np.int64),
    )
    if threshold <= n:
        why = f"sa.k = {threshold} must exceed n = {n} (Sánchez & Álvarez §3: n < k <= n^2)"
        return state, why, False
    return state, None, False


@njit(cache=True)
def _thin(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    n = lay.n
    mine = st.matrix[p]
    base = p * n
    while st.nnz[p] >= st.k[0]:
        j = 0  # the fullest column, ties to the lowest index
        for c in range(1, n):
            if st.columns[base + c] > st.columns[base + j]:
                j = c
        slot = pool_take(st.extra_pool, 1)
        row = pool_row(st.extra_pool, slot)
        for x in range(n):
            row[x] = mine[x, j]
        row[n] = p
        row[n + 1] = -1
        count = st.columns[base + j]
        control(eng, lay, p, j, t, _EXTRA, 3 * count, slot, 0, 0)
        own = mine[p, j]
        for x in range(n):
            mine[x, j] = 0
        mine[p, j] = own + 1
        st.nnz[p] -= count - 1
        st.columns[base + j] = 1


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    n = lay.n
    base = p * n
    mine = st.matrix[p]
    slot = pool_take(st.pool, len(own))
    row = pool_row(st.pool, slot)
    after = row[: n * n].reshape((n, n))
    before = row[n * n :].reshape((n, n))
    before[:, :] = mine
    after[:, :] = mine
    total = st.nnz[p]  # the non-zero entries after the send: each column d becomes M[i, d]
    for m in own:
        d = lay.dst[m]
        after[:, d] = 0
        after[p, d] = before[p, d] + 1
        total -= st.columns[base + d] - 1
    for m in own:
        # column d as before the send, the others as after it
        size = total - 1 + st.columns[base + lay.dst[m]]
        st.slot[m] = slot
        post(eng, lay, m, p, t, 3 * size)
    for m in own:
        d = lay.dst[m]
        for x in range(n):
            mine[x, d] = after[x, d]
        st.columns[base + d] = 1
    st.nnz[p] = total
    _thin(st, eng, lay, p, t)
    return True


@njit(cache=True)
def c_control(st, eng, lay, p, ckind, a, b, c, t):  # type: ignore[no-untyped-def]
    n = lay.n
    if st.tail[p] >= 0:
        pool_row(st.extra_pool, st.tail[p])[n + 1] = a
    else:
        st.head[p] = a
    st.tail[p] = a


@njit(cache=True)
def c_settle(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    n = lay.n
    base = p * n
    progress = True
    while progress:
        progress = False
        before = -1
        slot = st.head[p]
        while slot >= 0:
            row = pool_row(st.extra_pool, slot)
            following = row[n + 1]
            met = True
            for x in range(n):
                if st.deliv[base + x] < row[x]:
                    met = False
                    break
            if met:
                if before >= 0:
                    pool_row(st.extra_pool, before)[n + 1] = following
                else:
                    st.head[p] = following
                if following < 0:
                    st.tail[p] = before
                st.deliv[base + row[n]] += 1
                pool_release(st.extra_pool, slot)
                progress = True
                break
            before = slot
            slot = following


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    n = lay.n
    row = pool_row(st.pool, st.slot[m])
    # the constraints of column p, from the sender's matrix before the send
    for x in range(n):  # noqa: SIM110 (a loop compiles; a generator does not)
        if st.deliv[p * n + x] < row[n * n + x * n + p]:
            return False
    return True


@njit(cache=True)
def c_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    n = lay.n
    base = p * n
    row = pool_row(st.pool, st.slot[m])
    st.deliv[base + lay.src[m]] += 1
    mine = st.matrix[p]
    for x in range(n):
        for c in range(n):
            value = row[x * n + c]
            if c != p and value > mine[x, c]:
                if mine[x, c] == 0:
                    st.columns[base + c] += 1
                    st.nnz[p] += 1
                mine[x, c] = value
    pool_release(st.pool, st.slot[m])
    _thin(st, eng, lay, p, t)
