"""`skeen`: Skeen's algorithm for total order of multicasts (Garg §12.3.3).

Source: Garg, "Message Ordering" (chapter 12), §12.3.3.

"To send a multicast message, a process sends a timestamped message to all
the destination processes. On receiving a message, a process marks it as
undeliverable and sends the value of the logical clock as the proposed
timestamp to the initiator. When the initiator has received all the proposed
timestamps, it takes the maximum of all proposals and assigns that timestamp
as the final timestamp ... This value is sent to all the destinations. On
receiving the final timestamp of a message, it is marked as deliverable. A
deliverable message is delivered to the site if it has the smallest
timestamp in the message queue."

As docs/replay.md fixes it: propose and final are control messages (one integer
each). Lamport's clock (docs/replay.md): sending any message (the copies of a send
event, a proposal, the finals of one multicast) is one event that ticks the
sender's clock; receiving any message sets the clock to max(own, carried) + 1.
A copy carries its send timestamp, a proposal the proposer's clock after it
received the copy (the proposal), a final the final timestamp (the maximum of
the proposals). Ties between equal timestamps go to the lower (sender, send
lseq). When the initiator is itself a destination, its proposal and final are
local: not messages, so they neither tick nor move a clock.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.loop import control, post, send_event
from causal_spark.replay.protocols.spec import SPECS

SPEC = SPECS["skeen"]

#
# A group (sender, send lseq) is its send event e = send_event(lay, m); events are laid out
# by process then lseq, so ordering by e is ordering by (sender, lseq). State: clock[p];
# per copy entry[m] (its send timestamp until it arrives, then its timestamp at its
# destination: the proposal, then the final; the send timestamp is read only on arrival)
# and final[m]; per send event, at the index of its first copy g = copy_start[e], left[g]
# (its copies to processes whose proposal has not come) and best[g] (the largest proposal
# so far, 0 before the first: proposals are >= 1). p's entries are the copies arrived and
# not delivered at p: the pending list without orphans' messages. Per-copy values are int32
# when every clock fits (`CompiledTrace.counter_type`): 13 bytes a copy instead of 33.

State = namedtuple("State", "clock entry final left best")
_PROPOSE, _FINAL = 0, 1


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    count = trace.messages
    clock = trace.counter_type()  # each tick is one event of the replay
    state = State(
        np.zeros(trace.n, np.int64),
        np.zeros(count, clock),
        np.zeros(count, np.int8),
        np.zeros(count, np.int32),
        np.zeros(count, clock),
    )
    return state, None


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    st.clock[p] += 1
    g = lay.copy_start[send_event(lay, own[0])]
    st.left[g] = len(own)
    st.best[g] = 0
    for m in own:
        st.entry[m] = st.clock[p]
        post(eng, lay, m, p, t, 1)
    return True


@njit(cache=True)
def _finalised(st, m, final):  # type: ignore[no-untyped-def]
    st.entry[m] = final
    st.final[m] = 1


@njit(cache=True)
def _proposed(st, eng, lay, e, proposal, t):  # type: ignore[no-untyped-def]
    g = lay.copy_start[e]
    if proposal > st.best[g]:
        st.best[g] = proposal
    st.left[g] -= 1
    if st.left[g] > 0:
        return
    final = st.best[g]
    ticked = False
    for m in range(lay.copy_start[e], lay.copy_start[e + 1]):  # the send event's copies
        d = lay.dst[m]
        if d < 0:
            continue  # not one of the send's copies to processes
        if d == lay.src[m]:
            _finalised(st, m, final)
        else:
            if not ticked:
                st.clock[lay.src[m]] += 1  # sending the finals is one event
                ticked = True
            control(eng, lay, lay.src[m], d, t, _FINAL, 1, m, final, 0)


@njit(cache=True)
def c_arrived(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    st.clock[p] = max(st.clock[p], st.entry[m]) + 1  # entry: the send timestamp until now
    st.entry[m] = st.clock[p]
    st.final[m] = 0
    e = send_event(lay, m)
    if lay.src[m] == p:
        _proposed(st, eng, lay, e, st.clock[p], t)
    else:
        control(eng, lay, p, lay.src[m], t, _PROPOSE, 1, e, st.clock[p], 0)
        st.clock[p] += 1  # sending the proposal is an event


@njit(cache=True)
def c_control(st, eng, lay, p, ckind, a, b, c, t):  # type: ignore[no-untyped-def]
    st.clock[p] = max(st.clock[p], b) + 1  # b: the proposal or the final timestamp
    if ckind == _PROPOSE:
        _proposed(st, eng, lay, a, b, t)
    else:
        _finalised(st, a, b)


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    if not st.final[m]:
        return False
    mine = st.entry[m]
    e = send_event(lay, m)
    other = eng.pend_head[p]
    while other >= 0:
        if lay.send_ev[other] >= 0:
            theirs = st.entry[other]
            if theirs < mine or (theirs == mine and send_event(lay, other) < e):
                return False
        other = eng.pnext[other]
    return True


@njit(cache=True)
def c_next(st, eng, lay, p):  # type: ignore[no-untyped-def]
    """The only copy p may deliver now: the pending one with the smallest (timestamp,
    sender, lseq), once its timestamp is final; -1 when that one is not final yet."""
    best = -1
    other = eng.pend_head[p]
    while other >= 0:
        if lay.send_ev[other] >= 0 and (
            best < 0
            or st.entry[other] < st.entry[best]
            or (st.entry[other] == st.entry[best] and lay.send_ev[other] < lay.send_ev[best])
        ):
            best = other
        other = eng.pnext[other]
    return best if best >= 0 and st.final[best] else -1
