"""The replayed execution checked against its protocol's invariant, from its columns
(docs/replay.md, "Invariant"): `none` reproduces the recording, total-order protocols
take common multicasts in one order. FIFO and causal order are checked as the loop runs
(`loop.py`, `V_*`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.model import Execution
from causal_spark.replay.protocols.spec import ProtocolSpec
from causal_spark.replay.structs import V_CAUSAL, V_FIFO, V_NONE, layout_ref


@njit(cache=True, inline="always")
def _close(a, b):  # type: ignore[no-untyped-def]
    if np.isnan(a) or np.isnan(b):
        return np.isnan(a) and np.isnan(b)
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


@njit(cache=True)
def _reproduces(lay, taken_by, take_t, send_t):  # type: ignore[no-untyped-def]
    """`none` took every recorded message with its recorded receive at its recorded time,
    and sent every message at its recorded time."""
    for m in range(lay.messages):
        r = lay.recv_ev[m]
        if r >= 0:
            if taken_by[m] != r - lay.ev_start[lay.dst[m]] + 1:
                return False
            if not _close(take_t[m], lay.etime[r]):
                return False
        s = lay.send_ev[m]
        if s >= 0 and not _close(send_t[m], lay.etime[s]):
            return False
    return True


def inline_check(spec: ProtocolSpec) -> int:
    """What the loop checks as it runs for this protocol (`V_*`): FIFO order for `fifo`,
    causal order for the causal protocols; the rest are checked afterwards (`verify`)."""
    if spec.name != "none" and not spec.total_order and (spec.causal or spec.fifo):
        return V_CAUSAL if spec.causal else V_FIFO
    return V_NONE


def verify(trace: CompiledTrace, spec: ProtocolSpec, execution: Execution) -> bool | None:
    """Did the replayed execution keep the protocol's promise (docs/replay.md, "Invariant")?
    None where nothing is promised (or `none` on a skewed trace, which cannot reproduce)."""
    if spec.name == "none":
        return None if trace.skewed else reproduces_recording(trace, execution)
    if spec.total_order:
        return one_total_order(trace, execution)
    if inline_check(spec) != V_NONE:
        return not execution.violated
    return None


def reproduces_recording(trace: CompiledTrace, execution: Execution) -> bool:
    return bool(
        _reproduces(
            layout_ref(trace.layout),
            execution.taken_by,
            execution.take_time,
            execution.send_time,
        )
    )


def one_total_order(trace: CompiledTrace, execution: Execution) -> bool:
    lay = trace.layout
    procs, group = _by_receive(lay.ev_start, lay.dst, lay.send_ev, execution.taken_by, trace.n)
    if not len(procs):
        return True
    return bool(_one_order(procs, group, trace.n, int(lay.ev_start[-1])))


@njit(cache=True)
def _by_receive(ev_start, dst, send_ev, taken_by, n):  # type: ignore[no-untyped-def]
    """The sent messages taken, by receiver then the receive that took them (its event
    index: no sort), as (receiver, send event: a multicast is one send event)."""
    events = ev_start[n]
    at = np.full(events, -1, np.int32)  # receive event -> the send event of what it took
    count = 0
    for m in range(len(dst)):
        if taken_by[m] >= 0 and send_ev[m] >= 0:
            at[ev_start[dst[m]] + taken_by[m] - 1] = send_ev[m]
            count += 1
    procs = np.empty(count, np.int32)
    group = np.empty(count, np.int32)
    i = 0
    for p in range(n):
        for e in range(ev_start[p], ev_start[p + 1]):
            if at[e] >= 0:
                procs[i] = p
                group[i] = at[e]
                i += 1
    return procs, group


@njit(cache=True)
def _one_order(procs, group, n, groups):  # type: ignore[no-untyped-def]
    """Every two processes take their common groups in one order (procs sorted, stable)."""
    start = np.zeros(n + 1, np.int64)
    for p in procs:
        start[p + 1] += 1
    for p in range(n):
        start[p + 1] += start[p]
    position = np.full(groups, -1, np.int32)
    for q in range(n):
        for i in range(start[q], start[q + 1]):
            position[group[i]] = i - start[q]
        for p in range(q + 1, n):
            last = -1
            for i in range(start[p], start[p + 1]):
                at = position[group[i]]
                if at >= 0:
                    if at < last:
                        return False
                    last = at
        for i in range(start[q], start[q + 1]):
            position[group[i]] = -1
    return True
