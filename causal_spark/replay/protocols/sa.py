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
from typing import Any

import numpy as np
from numba import njit

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.loop import control, post
from causal_spark.replay.protocols.spec import SPECS
from causal_spark.replay.structs import new_pool, pool_at, pool_release, pool_take

SPEC = SPECS["sa"]

#
# State, for n processes (Sánchez & Álvarez §3, as the reference class in
# tests/oracles/replay/protocols/sa.py):
# - k[0]: the threshold of non-zero entries;
# - matrix[(p * n + c) * n + x]: M[x, c] of Pi, dense and flat, by column (n x n x n: the
#   loop indexes a 1-D array through its data pointer, with no reference counted per
#   access, `loop._pointers`; a column, which a copy's enabling test, an extra message and
#   a send read or reset, is contiguous); every entry the reference holds is >= 1, so 0
#   stands for an absent entry and the non-zero count is the dict's size;
# - nnz[p], columns[p * n + c]: the non-zero entries of matrix[p], and of its column c
#   (kept up to date, so the threshold check and the fullest column cost n, not n^2);
# - deliv[p * n + x]: DELIV_p[x];
# - pool: one row per send event, shared by its copies and released when the last
#   one is delivered: the sender's M after the whole multicast (n x n) and before
#   it (n x n), by column as `matrix`; a copy to d carries column d of the second, the
#   rest of the first;
# - slot[m]: copy m's pool row;
# - extra_pool: one row per extra message: the column's constraints (n), the sender,
#   the next extra message waiting at the same process, and the constraint that last
#   failed (DELIV only grows: `settle` tests it first, one comparison while it fails);
#   the control message carries only its row (released on its delivery);
# - head[p], tail[p]: the extra messages that reached p and wait, a list in arrival
#   order (the order `settle` scans them in, as the reference's list);
# - changed[p]: 1 when DELIV_p or p's waiting list changed since `settle` last found
#   nothing to deliver there (otherwise its scan would find nothing again).

State = namedtuple("State", "k matrix nnz columns deliv pool slot extra_pool head tail changed")
_EXTRA = 0


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    n = trace.n
    k = params["k"]  # None, or an integer of at least 2 (the spec parses it)
    threshold = k if isinstance(k, int) else n + 1
    count = trace.counter_type()  # M's entries and DELIV count messages
    state = State(
        np.array([threshold], np.int64),
        np.zeros(n * n * n, count),
        np.zeros(n, np.int64),
        np.zeros(n * n, np.int64),
        np.zeros(n * n, count),
        new_pool(2 * n * n, dtype=count),
        np.full(trace.messages, -1, np.int32),
        new_pool(n + 3),
        np.full(n, -1, np.int64),
        np.full(n, -1, np.int64),
        np.zeros(n, np.int8),
    )
    if threshold <= n:
        why = f"sa.k = {threshold} must exceed n = {n} (Sánchez & Álvarez §3: n < k <= n^2)"
        return state, why
    return state, None


@njit(cache=True)
def _thin(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    n = lay.n
    mine = p * n * n
    base = p * n
    while st.nnz[p] >= st.k[0]:
        j = 0  # the fullest column, ties to the lowest index
        for c in range(1, n):
            if st.columns[base + c] > st.columns[base + j]:
                j = c
        slot = pool_take(st.extra_pool, 1)
        row = pool_at(st.extra_pool, slot)
        column = mine + j * n
        for x in range(n):
            row[x] = st.matrix[column + x]
        row[n] = p
        row[n + 1] = -1
        row[n + 2] = 0
        count = st.columns[base + j]
        control(eng, lay, p, j, t, _EXTRA, 3 * count, slot, 0, 0)
        own = st.matrix[column + p]
        for x in range(n):
            st.matrix[column + x] = 0
        st.matrix[column + p] = own + 1
        st.nnz[p] -= count - 1
        st.columns[base + j] = 1


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    n = lay.n
    nn = n * n
    base = p * n
    mine = p * nn
    slot = pool_take(st.pool, len(own))
    row = pool_at(st.pool, slot)  # M after the whole multicast (nn), then before it (nn)
    for i in range(nn):
        value = st.matrix[mine + i]
        row[i] = value
        row[nn + i] = value
    total = st.nnz[p]  # the non-zero entries after the send: each column d becomes M[i, d]
    for m in own:
        d = lay.dst[m]
        for x in range(n):
            row[d * n + x] = 0
        row[d * n + p] = row[nn + d * n + p] + 1
        total -= st.columns[base + d] - 1
    for m in own:
        # column d as before the send, the others as after it
        size = total - 1 + st.columns[base + lay.dst[m]]
        st.slot[m] = slot
        post(eng, lay, m, p, t, 3 * size)
    for m in own:
        d = lay.dst[m]
        for x in range(n):
            st.matrix[mine + d * n + x] = row[d * n + x]
        st.columns[base + d] = 1
    st.nnz[p] = total
    _thin(st, eng, lay, p, t)
    return True


@njit(cache=True)
def c_control(st, eng, lay, p, ckind, a, b, c, t):  # type: ignore[no-untyped-def]
    n = lay.n
    if st.tail[p] >= 0:
        pool_at(st.extra_pool, st.tail[p])[n + 1] = a
    else:
        st.head[p] = a
    st.tail[p] = a
    st.changed[p] = 1


@njit(cache=True)
def c_settle(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    if st.changed[p] == 0:
        return
    st.changed[p] = 0
    n = lay.n
    base = p * n
    progress = True
    while progress:
        progress = False
        before = -1
        slot = st.head[p]
        while slot >= 0:
            row = pool_at(st.extra_pool, slot)
            following = row[n + 1]
            block = row[n + 2]
            if st.deliv[base + block] >= row[block]:  # else it still fails there
                for x in range(n):
                    if st.deliv[base + x] < row[x]:
                        block = x
                        break
                if st.deliv[base + block] >= row[block]:  # met
                    if before >= 0:
                        pool_at(st.extra_pool, before)[n + 1] = following
                    else:
                        st.head[p] = following
                    if following < 0:
                        st.tail[p] = before
                    st.deliv[base + row[n]] += 1
                    pool_release(st.extra_pool, slot)
                    progress = True
                    break
                row[n + 2] = block
            before = slot
            slot = following


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    n = lay.n
    row = pool_at(st.pool, st.slot[m])
    column = n * n + p * n  # the constraints of column p, from the sender's M before the send
    below = False
    for x in range(n):  # no early exit: a branch-free loop (vector instructions)
        below |= st.deliv[p * n + x] < row[column + x]
    return not below


@njit(cache=True)
def c_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    n = lay.n
    base = p * n
    mine = p * n * n
    row = pool_at(st.pool, st.slot[m])
    st.deliv[base + lay.src[m]] += 1
    st.changed[p] = 1
    # M[-, c] := max(M[-, c], W[-, c]) for c != p; entries are >= 0, so an entry is new
    # where M's is 0 and W's is not (branch-free: vector instructions)
    for c in range(n):
        if c == p:
            continue
        column = c * n
        added = 0
        for x in range(n):
            value = row[column + x]
            old = st.matrix[mine + column + x]
            added += (old == 0) & (value != 0)
            st.matrix[mine + column + x] = value if value > old else old
        st.columns[base + c] += added
        st.nnz[p] += added
    pool_release(st.pool, st.slot[m])
    _thin(st, eng, lay, p, t)
