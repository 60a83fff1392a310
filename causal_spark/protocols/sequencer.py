"""`sequencer`: total order through a central sequencer (Garg §12.3.1).

Source: Garg, "Message Ordering" (chapter 12), §12.3.1.

"A process that wants to multicast a message simply sends it to the
coordinator ... the coordinator will simply multicast the message ... Since
all multicast messages originate from the coordinator, and the channels are
FIFO, the total-order property holds." As docs/replay.md fixes it: the sequencer
is the first process by name (parameter `process`); a send event of another
process sends one control request to it (one integer per destination); the
sequencer relays the copies, each with its recorded latency, numbered per
channel (one piggybacked integer), and each receiver delivers the copies of
its channel from the sequencer in number order. Sender-side delay is relay
departure - send.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numba import njit

from causal_spark.protocols.base import Protocol
from causal_spark.replay_loop import CompiledTrace, control, post, send_event

if TYPE_CHECKING:
    from causal_spark.replay_engine import Engine


class Sequencer(Protocol):
    name = "sequencer"
    source = "Garg §12.3.1: centralized sequencer"
    total_order = True
    params: ClassVar[Mapping[str, str]] = {
        "process": "the sequencer's process name (default: the first by name)"
    }

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        names = engine.trace.names
        wanted = params.get("process")
        self.hub = names.index(wanted) if wanted in names else 0
        self.missing = wanted if wanted is not None and wanted not in names else None
        self.relayed: dict[int, int] = {}
        self.number: dict[int, int] = {}
        self.got = [0] * engine.n

    def not_applicable(self) -> str | None:
        if self.missing is not None:
            return f"sequencer.process '{self.missing}' is not a process of this trace"
        return None

    def send(self, p: int, copies: list[int], t: float) -> bool:
        if p == self.hub:
            self._relay(copies, t)
        else:
            self.engine.control(p, self.hub, t, "request", len(copies), tuple(copies))
        return True

    def _relay(self, copies: list[int] | tuple[int, ...], t: float) -> None:
        dst = self.engine.trace.dst
        for m in copies:
            d = dst[m]
            self.relayed[d] = self.number[m] = self.relayed.get(d, 0) + 1
            self.engine.post(m, self.hub, t, 1)

    def control(self, p: int, kind: str, payload: tuple[object, ...], t: float) -> None:
        (copies,) = payload
        assert isinstance(copies, tuple)
        self._relay(copies, t)

    def deliverable(self, p: int, m: int) -> bool:
        return self.number[m] == self.got[p] + 1

    def delivered(self, p: int, m: int, t: float) -> None:
        self.got[p] += 1


# ---- compiled form (causal_spark.replay_loop) ---------------------------------------------

State = namedtuple("State", "hub relayed number got")
_REQUEST = 0


def make_state(trace: CompiledTrace, params: Mapping[str, str]) -> tuple[Any, str | None, bool]:
    wanted = params.get("process")
    hub = trace.names.index(wanted) if wanted in trace.names else 0
    n = trace.n
    state = State(
        np.array([hub], np.int64),
        np.zeros(n, np.int64),
        np.zeros(trace.messages, np.int32),
        np.zeros(n, np.int64),
    )
    if wanted is not None and wanted not in trace.names:
        return state, f"sequencer.process '{wanted}' is not a process of this trace", False
    return state, None, False


@njit(cache=True)
def _relay(st, eng, lay, m, t):  # type: ignore[no-untyped-def]
    d = lay.dst[m]
    st.relayed[d] += 1
    st.number[m] = st.relayed[d]
    post(eng, lay, m, st.hub[0], t, 1)


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    if p == st.hub[0]:
        for m in own:
            _relay(st, eng, lay, m, t)
    else:
        # the request names the send event; the sequencer relays its copies to processes
        control(eng, lay, p, st.hub[0], t, _REQUEST, len(own), send_event(lay, own[0]), 0, 0)
    return True


@njit(cache=True)
def c_control(st, eng, lay, p, ckind, a, b, c, t):  # type: ignore[no-untyped-def]
    for m in range(lay.copy_start[a], lay.copy_start[a + 1]):  # the send event's copies
        if lay.dst[m] >= 0:
            _relay(st, eng, lay, m, t)


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    return st.number[m] == st.got[p] + 1


@njit(cache=True)
def c_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    st.got[p] += 1
