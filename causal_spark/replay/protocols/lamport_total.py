"""`lamport_total`: Lamport's algorithm for total order (Garg §12.3.2).

Source: Garg, "Message Ordering" (chapter 12), §12.3.2.

"To send a broadcast message, a process sends a timestamped message to all
processes including itself ... On receiving a broadcast message, the message
and its timestamp are stored in the queue, and a timestamped acknowledgment
is returned. A process can mark a message as deliverable if its timestamp is
smallest in the request queue and the process has received acknowledgments
from all other processes ... it informs all other processes that the message
is deliverable ... On receiving this notification, the corresponding message
is delivered." As docs/replay.md fixes it: channels are FIFO at the transport
level; every send event goes to every process (copies to non-destinations
are control messages), acks and releases are control messages.

Queues are ordered by (timestamp, sender). A process hands released messages
over in that order: the head of its queue must be released before anything
behind it, so processes that learn of releases in different orders still
deliver in one order. Integers (docs/replay.md): one timestamp on a copy, an ack
and a release (the sender is the message's id, not counted).

Lamport's clock (docs/replay.md): sending any message (the copies of a send event,
an ack, the releases of one message) is one event that ticks the sender's clock
and carries it; receiving any message sets the clock to max(own, carried) + 1.
A copy carries its send event's timestamp (its order key), an ack and a
release the clock of the process that sent them.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.loop import control, notify, pending, post
from causal_spark.replay.protocols.spec import SPECS
from causal_spark.replay.structs import (
    grid_row,
    grid_widen,
    new_grid,
    new_pool,
    pool_at,
    pool_release,
    pool_take,
)

SPEC = SPECS["lamport_total"]

#
# A key (timestamp, sender) is the int64 timestamp * n + sender (same order). Each send
# event takes a pool row (released once every process has popped its key), width 2n + 2:
#   [0, n)   released: 1 once the key is in `released` at process q
#   [n, 2n)  the application copy the send posts to q (the reference's `to[q]`, so
#            `expect[q][key]`), -1 when q gets a control copy
#   2n       acks received by the sender;  2n + 1  the key
# State: clock[p]; per process a binary heap of (key, row) pairs (row p of the grid `heap`:
# key at 2i, pool row at 2i + 1, widened by doubling; `size[p]` entries); row[m] the pool
# row of copy m's send; ready[m] 1 while m is in `ready` (the released head's copy, arrived
# at its destination). A copy is in `engine.pending(p)` when it arrived and is not
# delivered (`pending`).

State = namedtuple("State", "clock heap size pool row ready")
_COPY, _ACK, _RELEASE = 0, 1, 2


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    n = trace.n
    count = trace.messages
    state = State(
        np.zeros(n, np.int64),
        new_grid(n),
        np.zeros(n, np.int64),
        new_pool(2 * n + 2),
        np.full(count, -1, np.int32),
        np.zeros(count, np.int8),
    )
    return state, None


@njit(cache=True)
def _push(st, p, key, slot):  # type: ignore[no-untyped-def]
    size = st.size[p]
    if 2 * size == st.heap.width:
        grid_widen(st.heap)
    h = grid_row(st.heap, p)
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if h[2 * parent] <= key:
            break
        h[2 * i] = h[2 * parent]
        h[2 * i + 1] = h[2 * parent + 1]
        i = parent
    h[2 * i] = key
    h[2 * i + 1] = slot
    st.size[p] = size + 1


@njit(cache=True)
def _pop(st, p):  # type: ignore[no-untyped-def]
    """Drop p's head; its pool row is released once every process has popped it."""
    h = grid_row(st.heap, p)
    pool_release(st.pool, h[1])
    size = st.size[p] - 1
    st.size[p] = size
    if size == 0:
        return
    key = h[2 * size]
    slot = h[2 * size + 1]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and h[2 * child + 2] < h[2 * child]:
            child += 1
        if h[2 * child] >= key:
            break
        h[2 * i] = h[2 * child]
        h[2 * i + 1] = h[2 * child + 1]
        i = child
    h[2 * i] = key
    h[2 * i + 1] = slot


@njit(cache=True)
def _see(st, p, stamp):  # type: ignore[no-untyped-def]
    st.clock[p] = max(st.clock[p], stamp) + 1


@njit(cache=True)
def _enqueue(st, eng, lay, p, slot, t):  # type: ignore[no-untyped-def]
    n = lay.n
    key = pool_at(st.pool, slot)[2 * n + 1]
    _see(st, p, key // n)
    _push(st, p, key, slot)
    st.clock[p] += 1  # sending the ack is an event
    control(eng, lay, p, key % n, t, _ACK, 1, slot, st.clock[p], 0)


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    n = lay.n
    st.clock[p] += 1
    key = st.clock[p] * n + p
    slot = pool_take(st.pool, n)
    row = pool_at(st.pool, slot)
    for q in range(n):
        row[q] = 0
        row[n + q] = -1
    for m in own:
        row[n + lay.dst[m]] = m  # the last copy to a destination is the one posted
        st.row[m] = slot
    row[2 * n] = 0
    row[2 * n + 1] = key
    _push(st, p, key, slot)
    if row[n + p] >= 0:
        post(eng, lay, row[n + p], p, t, 1)
    for q in range(n):
        if q == p:
            continue
        if row[n + q] >= 0:
            post(eng, lay, row[n + q], p, t, 1)
        else:
            control(eng, lay, p, q, t, _COPY, 1, slot, 0, 0)
    notify(st, eng, lay, p, t)
    return True


@njit(cache=True)
def c_arrived(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    slot = st.row[m]
    if pool_at(st.pool, slot)[2 * lay.n + 1] % lay.n != p:
        _enqueue(st, eng, lay, p, slot, t)


@njit(cache=True)
def c_control(st, eng, lay, p, ckind, a, b, c, t):  # type: ignore[no-untyped-def]
    n = lay.n
    if ckind == _COPY:
        _enqueue(st, eng, lay, p, a, t)
    elif ckind == _ACK:
        _see(st, p, b)
        row = pool_at(st.pool, a)
        row[2 * n] = row[2 * n] + 1
    else:
        _see(st, p, b)  # the releaser's clock
        pool_at(st.pool, a)[p] = 1


@njit(cache=True)
def c_settle(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    n = lay.n
    while st.size[p] > 0:
        h = grid_row(st.heap, p)
        key = h[0]
        slot = h[1]
        row = pool_at(st.pool, slot)
        if row[p] == 0:
            if key % n != p or row[2 * n] < n - 1:
                return
            row[p] = 1
            st.clock[p] += 1  # sending the releases is one event
            for q in range(n):
                if q != p:
                    control(eng, lay, p, q, t, _RELEASE, 1, slot, st.clock[p], 0)
            continue
        m = row[n + p]
        if m < 0:
            _pop(st, p)  # a control copy: p is not a destination
            continue
        if pending(eng, m):
            st.ready[m] = 1
        return


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    return st.ready[m] != 0


@njit(cache=True)
def c_next(st, eng, lay, p):  # type: ignore[no-untyped-def]
    """The only copy p may deliver now: its queue head's, once released and arrived (as
    `settle` marks it ready), or -1."""
    if st.size[p] == 0:
        return -1
    m = pool_at(st.pool, grid_row(st.heap, p)[1])[lay.n + p]
    return m if m >= 0 and st.ready[m] != 0 else -1


@njit(cache=True)
def c_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    st.ready[m] = 0
    _pop(st, p)
