"""`mf`: Mattern-Fünfroeken input/output buffers with acknowledgements (Mattern & Fünfroeken §3).

Source: Mattern & Fünfroeken, "A Non-Blocking Lightweight Implementation of Causal Order
Message Delivery", §3.

"To send a message, the sender process Pi hands the message to its dedicated
output buffer OBi and continues with its computation ... an output buffer
may transmit its next pending message only if it has received an
acknowledgement for its previously sent message" (§3.1). "When a message
arrives at the receiver's input buffer, the buffer immediately sends back an
acknowledgement" and the process takes messages from the FIFO input buffer
in the order they were inserted (§3.2). No integers are piggybacked; every
copy costs one acknowledgement (a control message, docs/replay.md).

Point-to-point: a multicast's copies enter the output buffer one after
another in destination order. With a selective receive, the process can
take only the head of its input buffer, and only if the head comes from the
receive's source; otherwise it blocks (§4.2).

Option `no_wait_same_receiver` (footnote 4): "If the transport layer does
not reorder messages, subsequent messages to the same receiver can be
transmitted by an output buffer without waiting for acknowledgements"; the
footnote's premise is made true by keeping channels FIFO in that mode (a
copy's wait behind an earlier one of its channel is hold-back: its arrival stays
post + latency, docs/replay.md).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.loop import control, post, queue_append, queue_pop
from causal_spark.replay.protocols.spec import SPECS
from causal_spark.replay.structs import F_SELECTIVE

SPEC = SPECS["mf"]

# The output buffers (§3.1) as FIFO linked lists of copies: out_head[p] / out_tail[p] the
# first / last copy waiting in p's output buffer (-1: empty), out_next[m] the copy after m
# (each copy enters one buffer once); outstanding[p] the copies p's buffer posted whose
# acknowledgement has not come back; last_receiver[p] the destination of the copy it posted
# last (-1: none yet); no_wait[0] 1 under no_wait_same_receiver (footnote 4). The input
# buffer (§3.2) is the engine's pending list; acknowledgements are control messages.
State = namedtuple("State", "out_head out_tail out_next outstanding last_receiver no_wait")
_ACK = 0


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    n = trace.n
    no_wait = bool(params["no_wait_same_receiver"])
    state = State(
        np.full(n, -1, np.int64),
        np.full(n, -1, np.int64),
        np.full(trace.messages, -1, np.int32),
        np.zeros(n, np.int64),
        np.full(n, -1, np.int64),
        np.array([1 if no_wait else 0], np.int64),
    )
    return state, None


@njit(cache=True)
def _post(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    """Transmit from p's output buffer what the acknowledgements allow (as `Mf._post`)."""
    while st.out_head[p] >= 0 and (
        st.outstanding[p] == 0
        or (st.no_wait[0] != 0 and lay.dst[st.out_head[p]] == st.last_receiver[p])
    ):
        m = queue_pop(st.out_head, st.out_tail, st.out_next, p)
        st.outstanding[p] += 1
        st.last_receiver[p] = lay.dst[m]
        post(eng, lay, m, p, t, 0)


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    for m in own:
        queue_append(st.out_head, st.out_tail, st.out_next, p, m)
    _post(st, eng, lay, p, t)
    return True


@njit(cache=True)
def c_arrived(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    # the get event: the input buffer acknowledges at once
    control(eng, lay, p, lay.src[m], t, _ACK, 0, 0, 0, 0)


@njit(cache=True)
def c_control(st, eng, lay, p, ckind, a, b, c, t):  # type: ignore[no-untyped-def]
    st.outstanding[p] -= 1
    _post(st, eng, lay, p, t)


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    if not eng.flags[F_SELECTIVE]:
        return True  # the FIFO input buffer hands messages over in the order they got in
    head = eng.pend_head[p]
    while head >= 0:
        if lay.send_ev[head] >= 0 and lay.src[head] != p:
            return head == m
        head = eng.pnext[head]
    return False
