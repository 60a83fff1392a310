"""One protocol over one trace with the compiled loop: `replay_compiled` and its `CompiledRun`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

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
        arrival = np.where(
            lay.send_ev[m] >= 0,
            self.post_time[m] + lay.latency[m],
            lay.etime[np.maximum(lay.recv_ev[m], 0)],
        )
        arrival = np.where(self._arrived[m], arrival, np.nan)
        delivery = self.delivery_time[m]
        both = ~np.isnan(arrival) & ~np.isnan(delivery)
        return {
            "send_time": self.send_time[m],
            "post_time": self.post_time[m],
            "arrival_time": arrival,
            "delivery_time": delivery,
            "take_time": self.take_time[m],
            "taken_by": self.taken_by[m],
            "piggyback": self.piggyback[m],
            "held_back": np.where(both, (delivery > arrival).astype(np.float64), np.nan),
        }

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
