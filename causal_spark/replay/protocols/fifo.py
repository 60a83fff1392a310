"""`fifo`: per-channel sequence numbers (Mattern & Fünfroeken §2; Garg §12.1).

Source: Mattern & Fünfroeken, "A Non-Blocking Lightweight Implementation of Causal Order
Message Delivery", §2; Garg, "Message Ordering" (chapter 12), §12.1.

"A FIFO-ordered computation is implemented generally by using sequence
numbers for messages ... When a message is received out of order, its
processing must be delayed" (Garg §12.1). Each copy carries one integer,
its number on its channel; the receiver delivers copy k of channel j -> i
once it has delivered copies 1..k-1.
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

SPEC = SPECS["fifo"]

State = namedtuple("State", "sent got number")


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    n = trace.n
    state = State(
        np.zeros(n * n, np.int64),  # sent[p * n + d]
        np.zeros(n * n, np.int64),  # got[j * n + p]
        np.zeros(trace.messages, np.int32),
    )
    return state, None


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    for m in own:
        channel = p * lay.n + lay.dst[m]
        st.sent[channel] += 1
        st.number[m] = st.sent[channel]
        post(eng, lay, m, p, t, 1)
    return True


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    return st.number[m] == st.got[lay.src[m] * lay.n + p] + 1


@njit(cache=True)
def c_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    st.got[lay.src[m] * lay.n + p] += 1
