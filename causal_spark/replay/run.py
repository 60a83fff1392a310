"""One protocol over one trace with the compiled loop: `replay_compiled` and its `CompiledRun`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numba import njit

from causal_spark.replay.figures import FIGURES, accounting_error, figures_of
from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.loop import new_engine, run_loop
from causal_spark.replay.memory import small_pages
from causal_spark.replay.model import (
    STATUS_DEADLOCK,
    STATUS_ERROR,
    STATUS_NOT_APPLICABLE,
    STATUS_OK,
    STATUS_STALLED,
    Execution,
)
from causal_spark.replay.protocols.registry import module_of
from causal_spark.replay.protocols.spec import ProtocolSpec
from causal_spark.replay.structs import (
    K_CONTROL,
    K_CONTROL_INTS,
    K_MAX_BUFFER,
    K_VIOLATED,
    M_PENDING,
    eng_ref,
    layout_ref,
)
from causal_spark.replay.verify import inline_check, verify

# --------------------------------------------------------------


class CompiledRun:
    """The result of one protocol over one trace from the compiled loop: a `protocol_runs`
    row and its `Execution`, whose per-message columns (layout order) are those of
    `deliveries` (NaN: no time; -1: no receive or piggyback). Arrival and held-back are
    derived when asked (`columns`)."""

    def __init__(
        self,
        trace: CompiledTrace,
        status: str,
        reason: str | None,
        verified: bool | None,
        figures: dict[str, float | int | None],
        execution: Execution,
    ) -> None:
        self.status = status
        self.reason = reason
        self.verified = verified
        self.figures = figures
        self.execution = execution
        self._lay = trace.layout
        self.send_time, self.post_time = execution.send_time, execution.post_time
        self.delivery_time, self.take_time = execution.delivery_time, execution.take_time
        self.taken_by, self.piggyback = execution.taken_by, execution.piggyback
        self._arrived = execution.arrived

    def columns(self, m: np.ndarray | slice) -> dict[str, np.ndarray]:
        """The deliveries columns of messages `m`: times, taken_by, piggyback, held_back
        (1.0 / 0.0, NaN where arrival or delivery is missing)."""
        lay = self._lay
        if isinstance(m, slice):
            m = np.arange(len(lay.src))[m]
        out = _gather(
            np.asarray(m, np.int64), lay.send_ev, lay.recv_ev, lay.latency, lay.etime,
            self.send_time, self.post_time, self.delivery_time, self.take_time,
            np.asarray(self.taken_by, np.int32), np.asarray(self.piggyback, np.int32),
            np.asarray(self._arrived, np.bool_),
        )  # fmt: skip
        return dict(zip(_COLUMNS, out, strict=True))

    @property
    def arrival_time(self) -> np.ndarray:
        return self.columns(slice(None))["arrival_time"]

    @property
    def held_back(self) -> np.ndarray:
        return self.columns(slice(None))["held_back"]


@small_pages()
def replay_compiled(
    trace: CompiledTrace,
    name: str,
    params: Mapping[str, str] | None = None,
    selective: bool = False,
    default_latency: float = 1.0,
) -> CompiledRun:
    """Replay `trace` under protocol `name` with the compiled loop: its execution, then its
    figures and verification from that execution."""
    module = module_of(name)
    spec: ProtocolSpec = module.SPEC
    parsed = spec.parse(dict(params or {}))
    state, reason = module.make_state(trace, parsed)
    if reason is not None:
        figures: dict[str, float | int | None] = dict.fromkeys(FIGURES)
        empty = Execution.empty(trace.messages, trace.n)
        return CompiledRun(trace, STATUS_NOT_APPLICABLE, reason, None, figures, empty)
    fifo_transport = spec.uses_fifo_transport(parsed)
    flags = (int(spec.causal), int(fifo_transport), int(spec.point_to_point), int(selective))
    eng = new_engine(trace, flags, default_latency, inline_check(spec))
    run_loop(state, eng_ref(eng), layout_ref(trace.layout))
    execution = Execution(
        eng.send_t, eng.post_t, eng.del_t, eng.take_t, eng.taken_by, eng.pig,
        eng.mst >= M_PENDING, eng.pc, eng.now, int(eng.cnt[K_CONTROL]),
        int(eng.cnt[K_CONTROL_INTS]), int(eng.cnt[K_MAX_BUFFER]), bool(eng.cnt[K_VIOLATED]),
    )  # fmt: skip
    del eng  # the heap and the protocol's buffers go now
    status, reason = _ending(trace, execution)
    verified = verify(trace, spec, execution)
    own = getattr(module, "sender_delay", None)

    def sender_delay(post_minus_send: float) -> float:
        return float(own(state, post_minus_send)) if own is not None else post_minus_send

    figures, taken = figures_of(trace, execution, status, sender_delay)
    wrong = accounting_error(figures, taken, trace.messages)
    if wrong is not None:
        status, reason = STATUS_ERROR, wrong
    return CompiledRun(trace, status, reason, verified, figures, execution)


def _ending(trace: CompiledTrace, execution: Execution) -> tuple[str, str | None]:
    """ok when every process ran its program to the end; else stalled (the log lost
    messages) or deadlock, with the processes that wait for ever."""
    length = np.diff(trace.layout.ev_start)
    unfinished = np.flatnonzero(execution.completed < length)
    if not len(unfinished):
        return STATUS_OK, None
    lost = trace.lost
    status = STATUS_STALLED if lost else STATUS_DEADLOCK
    blocked = ", ".join(
        f"{trace.names[p]} at #{execution.completed[p] + 1}" for p in unfinished[:5].tolist()
    )
    reason = f"{len(unfinished)} process(es) wait for ever: {blocked}"
    if status == STATUS_STALLED:
        reason += f" (the log lost {lost} message(s))"
    return status, reason


_COLUMNS = (
    "send_time", "post_time", "arrival_time", "delivery_time", "take_time", "taken_by",
    "piggyback", "held_back",
)  # fmt: skip


@njit(cache=True)
def _gather(m, send_ev, recv_ev, latency, etime, send_t, post_t, del_t, take_t, taken_by,  # type: ignore[no-untyped-def]
            pig, arrived):  # fmt: skip
    """`CompiledRun.columns` in one pass over the messages `m` (a dozen NumPy gathers and
    `where`s before, a third of the output's time). Arrival: post + latency, an orphan's the
    recorded time of its receive, NaN if it never arrived."""
    count = len(m)
    send = np.empty(count, np.float64)
    post = np.empty(count, np.float64)
    arrival = np.empty(count, np.float64)
    delivery = np.empty(count, np.float64)
    take = np.empty(count, np.float64)
    by = np.empty(count, np.int32)
    piggy = np.empty(count, np.int32)
    held = np.empty(count, np.float64)
    for i in range(count):
        j = m[i]
        send[i] = send_t[j]
        post[i] = post_t[j]
        if not arrived[j]:
            a = np.nan
        elif send_ev[j] >= 0:
            a = post_t[j] + latency[j]
        else:
            a = etime[max(recv_ev[j], 0)]
        arrival[i] = a
        d = del_t[j]
        delivery[i] = d
        take[i] = take_t[j]
        by[i] = taken_by[j]
        piggy[i] = pig[j]
        held[i] = np.nan if np.isnan(a) or np.isnan(d) else (1.0 if d > a else 0.0)
    return send, post, arrival, delivery, take, by, piggy, held
