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
# - site[p * W : (p + 1) * W], W = 2n + n^2 (`_record`): site p's record, contiguous so a
#   send snapshots it in one pass: VT(p), its vector time (n); ORD_BUFF_p as has (n,
#   whether it holds a pair for site s) and pairs (n x n, that pair's vector time; a pair
#   is absent when has is 0, and its vector is then zeros);
# - pool: one row per send event, shared by its copies and released when the last
#   one is delivered: the sender's record at the send, VT(M) in place of its time (W),
#   then which sites the send event's copies go to (n). A copy to d carries that buffer
#   with (d', VT(M)) for every other destination d';
# - slot[m]: copy m's pool row (-1 before it is sent).
# The dict order of the reference's buffers never shows (only their sizes count and
# the pairs of different sites merge independently), so dense arrays reproduce it.

State = namedtuple("State", "site pool slot")


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    n = trace.n
    count = trace.counter_type()  # vector times count sends and deliveries
    width = 2 * n + n * n  # `_record`
    state = State(
        np.zeros(n * width, count),
        new_pool(width + n, dtype=count),
        np.full(trace.messages, -1, np.int32),
    )
    return state, None


@njit(cache=True, inline="always")
def _record(n):  # type: ignore[no-untyped-def]
    """The integers of one site's record (and of a snapshot before its destinations):
    vector time, has, pairs."""
    return 2 * n + n * n


@njit(cache=True, inline="always")
def _c_below(a, i, b, j, n):  # type: ignore[no-untyped-def]
    """a[i:i+n] < b[j:j+n] for vector times: every component <= and the vectors differ.
    Branch-free (vectorised): an early exit per component cost a mispredicted branch."""
    over = False  # some component of a exceeds b's
    differ = False
    for k in range(n):
        x = a[i + k]
        y = b[j + k]
        over |= x > y
        differ |= x != y
    return differ and not over


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    n = lay.n
    width = _record(n)
    mine = p * width
    site = st.site
    slot = pool_take(st.pool, len(own))
    row = pool_at(st.pool, slot)
    # the snapshot: VT(M) (the time after the tick), ORD_BUFF before the send, in one pass
    # (the tick after it: a store then a wider load of the same integers stalled)
    for i in range(width):
        row[i] = site[mine + i]
    row[p] += 1
    site[mine + p] = row[p]
    held = 0  # pairs of the buffer before the send (has is 0 or 1)
    for k in range(n):
        row[width + k] = 0
        held += row[n + k]
    for m in own:
        row[width + lay.dst[m]] = 1
    for m in own:
        d = lay.dst[m]
        size = held  # the buffer's pairs, and (d', VT(M)) for destinations d' it lacks
        for o in own:
            e = lay.dst[o]
            if e != d and row[n + e] == 0:
                size += 1
        st.slot[m] = slot
        prefetch(st.slot, m + 16)  # the sender's later copies (`prefetch_sent`)
        post(eng, lay, m, p, t, n + size * (n + 1))
    for m in own:
        d = lay.dst[m]
        site[mine + n + d] = 1
        at = mine + 2 * n + d * n
        for k in range(n):
            site[at + k] = row[k]
    return True


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    n = lay.n
    row = pool_at(st.pool, st.slot[m])
    # the copy's pair for its destination p is the sender's, from before the send
    if row[n + p] == 0:
        return True
    return _c_below(row, 2 * n + p * n, st.site, p * _record(n), n)


@njit(cache=True)
def c_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    n = lay.n
    width = _record(n)
    row = pool_at(st.pool, st.slot[m])
    site = st.site
    mine = p * width
    # the copy's buffer merges into ORD_BUFF_p by component-wise sup, pair by pair, except
    # the pair for p itself. An absent pair's vector is all zeros (in ORD_BUFF and so in
    # every copy's snapshot: `_drop` clears it), so sup with it copies the other side, and
    # ORD_BUFF_p never holds a pair for p (sends to p itself skip the protocol): the merge
    # is one branch-free pass over the n^2 integers, then the pair for p is cleared again
    # (vectorised: n-long passes were too short for LLVM's vector loop)
    pairs = mine + 2 * n
    for i in range(n * n):
        a = site[pairs + i]
        b = row[2 * n + i]
        site[pairs + i] = a if a > b else b
    for k in range(n):
        site[pairs + p * n + k] = 0
    others = 0  # other destinations of the multicast
    for s in range(n):  # flags are 0 or 1: or them in without a branch, but for p
        site[mine + n + s] |= row[width + s] | row[n + s]
        others |= row[width + s] if s != p else 0
    site[mine + n + p] = 0
    if others != 0:
        for s in range(n):
            # another destination of the multicast: (s, VT(M)). The copy's own pair for s,
            # if any, is below VT(M) (every pair a site holds is below its vector time), so
            # the sup with both, taken above and here, is the sup with VT(M) alone
            if s != p and row[width + s] != 0:
                at = pairs + s * n
                for k in range(n):
                    a = site[at + k]
                    b = row[k]
                    site[at + k] = a if a > b else b
    for k in range(n):
        a = site[mine + k]
        b = row[k]
        site[mine + k] = a if a > b else b
    site[mine + p] += 1
    sender = lay.src[m]
    at = pairs + sender * n
    if site[mine + n + sender] != 0 and _c_below(site, at, row, 0, n):
        # the pair for the sender is obsolete (§4.2.4): deleted, its vector zeros
        site[mine + n + sender] = 0
        for k in range(n):
            site[at + k] = 0
    pool_release(st.pool, st.slot[m])
