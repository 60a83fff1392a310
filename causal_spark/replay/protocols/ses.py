"""`ses`: Schiper-Eggli-Sandoz with (destination, vector time) pairs (Schiper, Eggli & Sandoz §4.2).

Source: Schiper, Eggli & Sandoz, "A New Algorithm to Implement Causal Ordering", §4.2.

Each site S keeps a vector time and ORD_BUFF_S, at most one pair (S', VT)
per other site. Rules, by the paper's sections and docs/replay.md:
- vector time ticks on each send event and each delivery (not on internal
  events); a send event's copies carry VT(M), the time after its tick;
- emission (§4.2.1): a copy carries ORD_BUFF_S as it was before the send;
  a multicast copy to d also carries (d', VT(M)) for every other destination
  d'; after the send, (d, VT(M)) replaces the pair of each destination d;
- arrival (§4.2.2): a copy whose buffer holds a pair (S2, VT) for its
  destination S2 is delivered only once VT < VT(S2); on delivery the
  buffer's other pairs merge into ORD_BUFF_S2 by component-wise sup, and
  VT(S2) := sup(VT(S2), VT(M)), then ticks;
- obsolete pairs (§4.2.4): on delivery of M from S1, the pair (S1, VT) of
  ORD_BUFF_S2 is deleted when VT < VT(M).
A copy carries n integers of VT(M) plus n + 1 per pair.
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

SPEC = SPECS["ses"]

#
# State, for n processes (Schiper, Eggli & Sandoz §4.2, as the reference class in
# tests/oracles/replay/protocols/ses.py), every array flat (1-D: the loop indexes each
# through its data pointer, with no reference counted per access, `loop._pointers`):
# - time[p * n + k]: VT(p), the vector time of site p (n x n);
# - has[p * n + s], pairs[(p * n + s) * n + k]: ORD_BUFF_p, whether it holds a pair for
#   site s and that pair's vector time (n x n and n x n x n; a pair is absent when has
#   is 0);
# - pool: one row per send event, shared by its copies and released when the last
#   one is delivered: VT(M) (n), which sites the send event's copies go to (n), and
#   ORD_BUFF of the sender before the send, as has (n) and pairs (n x n). A copy to
#   d carries that buffer with (d', VT(M)) for every other destination d';
# - slot[m]: copy m's pool row (-1 before it is sent).
# The dict order of the reference's buffers never shows (only their sizes count and
# the pairs of different sites merge independently), so dense arrays reproduce it.

State = namedtuple("State", "time has pairs pool slot")


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    n = trace.n
    count = trace.counter_type()  # vector times count sends and deliveries
    state = State(
        np.zeros(n * n, count),
        np.zeros(n * n, count),
        np.zeros(n * n * n, count),
        new_pool(3 * n + n * n, dtype=count),
        np.full(trace.messages, -1, np.int32),
    )
    return state, None


@njit(cache=True, inline="always")
def _c_below(a, i, b, j, n):  # type: ignore[no-untyped-def]
    """a[i:i+n] < b[j:j+n] for vector times: every component <= and the vectors differ.
    Branch-free (vectorised): an early exit per component cost a mispredicted branch."""
    over = 0  # > 0 when some component of a exceeds b's
    differ = 0
    for k in range(n):
        x = a[i + k]
        y = b[j + k]
        over = max(over, x - y)
        differ |= x ^ y
    return over <= 0 and differ != 0


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    n = lay.n
    mine = p * n
    st.time[mine + p] += 1
    slot = pool_take(st.pool, len(own))
    row = pool_at(st.pool, slot)
    held = 0  # pairs of the buffer before the send (has is 0 or 1)
    for k in range(n):
        row[k] = st.time[mine + k]
        row[n + k] = 0
        row[2 * n + k] = st.has[mine + k]
        held += st.has[mine + k]
    base = mine * n
    for i in range(n * n):
        row[3 * n + i] = st.pairs[base + i]
    for m in own:
        row[n + lay.dst[m]] = 1
    for m in own:
        d = lay.dst[m]
        size = held  # the buffer's pairs, and (d', VT(M)) for destinations d' it lacks
        for o in own:
            e = lay.dst[o]
            if e != d and row[2 * n + e] == 0:
                size += 1
        st.slot[m] = slot
        prefetch(st.slot, m + 16)  # the sender's later copies (`prefetch_sent`)
        post(eng, lay, m, p, t, n + size * (n + 1))
    for m in own:
        d = lay.dst[m]
        st.has[mine + d] = 1
        at = base + d * n
        for k in range(n):
            st.pairs[at + k] = row[k]
    return True


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    n = lay.n
    row = pool_at(st.pool, st.slot[m])
    # the copy's pair for its destination p is the sender's, from before the send
    if row[2 * n + p] == 0:
        return True
    return _c_below(row, 3 * n + p * n, st.time, p * n, n)


@njit(cache=True)
def c_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    n = lay.n
    row = pool_at(st.pool, st.slot[m])
    mine = p * n
    base = mine * n
    # the copy's buffer merges into ORD_BUFF_p by component-wise sup, pair by pair, except
    # the pair for p itself. An absent pair's vector is all zeros (in ORD_BUFF and so in
    # every copy's snapshot: `_drop` clears it), so sup with it copies the other side and
    # the merge is one branch-free pass over n^2 integers (vectorised: n-long passes were
    # too short for LLVM's vector loop, so they ran one integer at a time)
    _sup_into(st.pairs, base, row, 3 * n, p * n)
    _sup_into(st.pairs, base + (p + 1) * n, row, 3 * n + (p + 1) * n, (n - 1 - p) * n)
    own = st.has[mine + p]  # flags are 0 or 1: or them in without a branch, but for p
    for s in range(n):
        st.has[mine + s] |= row[n + s] | row[2 * n + s]
    st.has[mine + p] = own
    for s in range(n):
        # another destination of the multicast: (s, VT(M)). The copy's own pair for s, if
        # any, is below VT(M) (every pair a site holds is below its vector time), so the
        # sup with both, taken above and here, is the sup with VT(M) alone
        if s != p and row[n + s] != 0:
            _sup_into(st.pairs, base + s * n, row, 0, n)
    for k in range(n):
        a = st.time[mine + k]
        b = row[k]
        st.time[mine + k] = a if a > b else b
    st.time[mine + p] += 1
    sender = lay.src[m]
    if st.has[mine + sender] != 0 and _c_below(st.pairs, (mine + sender) * n, row, 0, n):
        _drop(st, base, mine, sender, n)
    pool_release(st.pool, st.slot[m])


@njit(cache=True, inline="always")
def _sup_into(a, i, b, j, count):  # type: ignore[no-untyped-def]
    """a[i:i+count] := sup(a[i:i+count], b[j:j+count]), branch-free."""
    for k in range(count):
        x = a[i + k]
        y = b[j + k]
        a[i + k] = x if x > y else y


@njit(cache=True, inline="always")
def _drop(st, base, mine, s, n):  # type: ignore[no-untyped-def]
    """Delete the pair for s from ORD_BUFF (obsolete, §4.2.4); its vector becomes zeros."""
    st.has[mine + s] = 0
    for k in range(n):
        st.pairs[base + s * n + k] = 0
