"""`rst`: the Raynal-Schiper-Toueg matrix protocol (Garg §12.2; Sánchez & Álvarez §3).

Source: Garg, "Message Ordering" (chapter 12), §12.2, Fig. 12.2 and 12.4; Sánchez &
Álvarez, "A lightweight asynchronous algorithm for causal delivery using extra message
insertion", §3.

Each process keeps M, M[j][k] = the messages from j to k it knows of. "To
send a message to Pj: M[i,j] := M[i,j] + 1; piggyback M". A multicast first
increments M[i][d] for each destination, then every copy carries that one
matrix (Fig. 12.4, `multicast`). A message with matrix W from Pj is
"enabled if (W[j,i] = M[j,i] + 1) and (for all k != j: M[k,i] >= W[k,i])";
on delivery M := max(M, W). A copy carries n^2 integers.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.loop import post
from causal_spark.replay.protocols.spec import SPECS
from causal_spark.replay.structs import new_pool, pool_at, pool_release, pool_take, prefetch

SPEC = SPECS["rst"]

# matrix[(p * n + k) * n + j]: M[j, k] of process p, flat (the loop indexes a 1-D array
# through its data pointer, with no reference counted per access, `loop._pointers`), by
# column: the enabling test reads column p of M and of W, which are contiguous so (by row,
# one cache line per entry, compared one by one); pool: one matrix per send event, shared by
# its copies (the same layout); slot[m]: copy m's pool row.
State = namedtuple("State", "matrix pool slot")


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    n = trace.n
    count = trace.counter_type()  # entries count messages
    state = State(
        np.zeros(n * n * n, count),
        new_pool(n * n, dtype=count),
        np.full(trace.messages, -1, np.int32),
    )
    return state, None


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    n = lay.n
    mine = p * n * n
    matrix = st.matrix
    slot = pool_take(st.pool, len(own))
    row = pool_at(st.pool, slot)
    # M[p, d] += 1 for each destination d, then every copy carries M: copied first, and
    # incremented in the copy and then in M (a store then a wider load of the same
    # integers stalled the copy)
    for i in range(n * n):
        row[i] = matrix[mine + i]
    for m in own:
        row[lay.dst[m] * n + p] += 1  # M[p, d]
    for m in own:
        at = lay.dst[m] * n + p
        matrix[mine + at] = row[at]
    for m in own:
        st.slot[m] = slot
        prefetch(st.slot, m + 16)  # the sender's later copies (`prefetch_sent`)
        post(eng, lay, m, p, t, n * n)
    return True


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    n = lay.n
    j = lay.src[m]
    w = pool_at(st.pool, st.slot[m])
    column = p * n * n + p * n  # M[., p] of process p; w's column p is at p * n
    if w[p * n + j] != st.matrix[column + j] + 1:
        return False
    # some M[k, p] < W[k, p] for k != j: compared, not subtracted (no widening), and
    # branch-free (vectorised); W[j, p] = M[j, p] + 1 passes as M[j, p] + 1
    short = False
    for k in range(n):
        short |= w[p * n + k] > st.matrix[column + k] + (1 if k == j else 0)
    return not short


@njit(cache=True)
def c_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    n = lay.n
    w = pool_at(st.pool, st.slot[m])
    mine = p * n * n
    for i in range(n * n):  # M := max(M, W), branch-free over contiguous rows (vectorised)
        a = st.matrix[mine + i]
        b = w[i]
        st.matrix[mine + i] = a if a > b else b
    pool_release(st.pool, st.slot[m])
