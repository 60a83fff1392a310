"""`sync`: a blocking send, until the receiver takes the message and the ack returns.

Source: Mattern & Fünfroeken, "A Non-Blocking Lightweight Implementation of Causal Order
Message Delivery", §2, Fig. 1 and 3.

"In synchronous systems, deadlocks occur in situations like the one depicted
in Fig. 1, where each process is waiting for the delivery of its own message
before accepting the other message." The sender posts a copy and blocks;
the receiver acknowledges when its program takes the copy (a control
message); the sender continues when the ack arrives. A multicast's copies go
one after another in destination order. A deadlock is a result of the
replay, not a failure. Sender-side delay is ack return - post, summed: the
time senders block.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.loop import control, post, queue_append, queue_pop, resume
from causal_spark.replay.protocols.spec import SPECS

SPEC = SPECS["sync"]

# The copies a blocked sender still has to send, as FIFO linked lists: q_head[p] / q_tail[p]
# the first / last copy of p's send event not posted yet (-1: none), q_next[m] the copy after
# m; posted_at[m] when copy m was posted (its ack ends the wait, §2); blocked_total[0] the
# time senders blocked, summed in ack order (the sender delay figure).
State = namedtuple("State", "q_head q_tail q_next posted_at blocked_total")
_ACK = 0


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    n = trace.n
    count = trace.messages
    state = State(
        np.full(n, -1, np.int64),
        np.full(n, -1, np.int64),
        np.full(count, -1, np.int32),
        np.full(count, np.nan),
        np.zeros(1, np.float64),
    )
    return state, None


@njit(cache=True)
def _next(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    """Post p's next queued copy, or end p's send event when none is left (as `Sync._next`)."""
    if st.q_head[p] < 0:
        resume(eng, lay, p, t)
        return
    m = queue_pop(st.q_head, st.q_tail, st.q_next, p)
    st.posted_at[m] = t
    post(eng, lay, m, p, t, 0)  # a lost copy never arrives: the sender waits for ever


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    for m in own:
        queue_append(st.q_head, st.q_tail, st.q_next, p, m)
    _next(st, eng, lay, p, t)
    return False


@njit(cache=True)
def c_taken(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    control(eng, lay, p, lay.src[m], t, _ACK, 0, m, 0, 0)


@njit(cache=True)
def c_control(st, eng, lay, p, ckind, a, b, c, t):  # type: ignore[no-untyped-def]
    st.blocked_total[0] += t - st.posted_at[a]
    _next(st, eng, lay, p, t)


def sender_delay(state: Any, post_minus_send: float) -> float:
    """The time senders blocked (as `Sync.sender_delay`)."""
    return float(state.blocked_total[0])
