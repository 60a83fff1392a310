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
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from causal_spark.protocols.base import Protocol
from causal_spark.replay_loop import CompiledTrace, control, post, send_event

if TYPE_CHECKING:
    from causal_spark.replay_engine import Engine

Group = tuple[int, int]  # (sender, send lseq): one multicast


class Skeen(Protocol):
    name = "skeen"
    source = "Garg §12.3.3: Skeen's algorithm"
    total_order = True

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        self.clock = [0] * n
        self.stamp: dict[int, int] = {}
        self.group: dict[int, Group] = {}
        self.copies: dict[Group, list[int]] = {}
        self.proposals: dict[Group, list[int]] = {}
        # per process: copy -> [timestamp, final?]
        self.entries: list[dict[int, list[int]]] = [{} for _ in range(n)]

    def send(self, p: int, copies: list[int], t: float) -> bool:
        self.clock[p] += 1
        trace = self.engine.trace
        group = (p, trace.send_lseq[copies[0]])
        self.copies[group] = list(copies)
        self.proposals[group] = []
        for m in copies:
            self.stamp[m] = self.clock[p]
            self.group[m] = group
            self.engine.post(m, p, t, 1)
        return True

    def arrived(self, p: int, m: int, t: float) -> None:
        self.clock[p] = max(self.clock[p], self.stamp[m]) + 1
        self.entries[p][m] = [self.clock[p], 0]
        group = self.group[m]
        if group[0] == p:
            self._proposed(group, self.clock[p], t)
        else:
            self.engine.control(p, group[0], t, "propose", 1, group, self.clock[p])
            self.clock[p] += 1  # sending the proposal is an event

    def _proposed(self, group: Group, proposal: int, t: float) -> None:
        got = self.proposals[group]
        got.append(proposal)
        copies = self.copies[group]
        if len(got) < len(copies):
            return
        final = max(got)
        sender = group[0]
        dst = self.engine.trace.dst
        if any(dst[m] != sender for m in copies):
            self.clock[sender] += 1  # sending the finals is one event
        for m in copies:
            if dst[m] == sender:
                self._finalised(sender, m, final)
            else:
                self.engine.control(sender, dst[m], t, "final", 1, m, final)

    def _finalised(self, p: int, m: int, final: int) -> None:
        entry = self.entries[p][m]
        entry[0], entry[1] = final, 1

    def control(self, p: int, kind: str, payload: tuple[object, ...], t: float) -> None:
        if kind == "propose":
            group, proposal = payload
            assert isinstance(group, tuple) and isinstance(proposal, int)
            self.clock[p] = max(self.clock[p], proposal) + 1
            self._proposed(group, proposal, t)
        else:
            m, final = payload
            assert isinstance(m, int) and isinstance(final, int)
            self.clock[p] = max(self.clock[p], final) + 1
            self._finalised(p, m, final)

    def _key(self, p: int, m: int) -> tuple[int, int, int]:
        group = self.group[m]
        return (self.entries[p][m][0], group[0], group[1])

    def deliverable(self, p: int, m: int) -> bool:
        entries = self.entries[p]
        if not entries[m][1]:
            return False
        mine = self._key(p, m)
        return all(self._key(p, other) >= mine for other in entries)

    def delivered(self, p: int, m: int, t: float) -> None:
        del self.entries[p][m]


# ---- compiled form (causal_spark.replay_loop) ---------------------------------------------
#
# A group (sender, send lseq) is its send event e = send_event(lay, m); events are laid out
# by process then lseq, so ordering by e is ordering by (sender, lseq). State: clock[p];
# per copy stamp[m] (the send timestamp), entry[m] (its timestamp at its destination: the
# proposal, then the final) and final[m]; per send event, at the index of its first copy
# g = copy_start[e], need[g] (its copies to processes), got[g] and best[g] (proposals
# received, their maximum). p's entries are the copies arrived and not delivered at p: the
# pending list without orphans' messages.

State = namedtuple("State", "clock stamp entry final need got best")
_PROPOSE, _FINAL = 0, 1


def make_state(trace: CompiledTrace, params: Mapping[str, str]) -> tuple[Any, str | None, bool]:
    count = trace.messages
    state = State(
        np.zeros(trace.n, np.int64),
        np.zeros(count, np.int64),
        np.zeros(count, np.int64),
        np.zeros(count, np.int8),
        np.zeros(count, np.int32),
        np.zeros(count, np.int32),
        np.zeros(count, np.int64),
    )
    return state, None, False


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    st.clock[p] += 1
    g = lay.copy_start[send_event(lay, own[0])]
    st.need[g] = len(own)
    st.got[g] = 0
    for m in own:
        st.stamp[m] = st.clock[p]
        post(eng, lay, m, p, t, 1)
    return True


@njit(cache=True)
def _finalised(st, m, final):  # type: ignore[no-untyped-def]
    st.entry[m] = final
    st.final[m] = 1


@njit(cache=True)
def _proposed(st, eng, lay, e, proposal, t):  # type: ignore[no-untyped-def]
    g = lay.copy_start[e]
    if st.got[g] == 0 or proposal > st.best[g]:
        st.best[g] = proposal
    st.got[g] += 1
    if st.got[g] < st.need[g]:
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
    st.clock[p] = max(st.clock[p], st.stamp[m]) + 1
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
