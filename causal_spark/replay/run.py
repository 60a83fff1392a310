"""One protocol over one trace with the compiled loop: `replay_compiled` and its `CompiledRun`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from causal_spark.replay.figures import FIGURES, accounting_error, makespan_figures, tally
from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.loop import new_engine, run_loop
from causal_spark.replay.model import (
    STATUS_DEADLOCK,
    STATUS_ERROR,
    STATUS_NOT_APPLICABLE,
    STATUS_OK,
    STATUS_STALLED,
)
from causal_spark.replay.protocols.registry import module_of
from causal_spark.replay.protocols.spec import ProtocolSpec
from causal_spark.replay.structs import (
    K_CONTROL,
    K_CONTROL_INTS,
    K_MAX_BUFFER,
    K_VIOLATED,
    M_PENDING,
    V_CAUSAL,
    V_FIFO,
    V_NONE,
    eng_ref,
    layout_ref,
)
from causal_spark.replay.verify import one_total_order, reproduces_recording

# --------------------------------------------------------------


class CompiledRun:
    """The result of one protocol over one trace from the compiled loop: a `protocol_runs`
    row and, per message (layout order), the columns of `deliveries` (NaN: no time; -1: no
    receive or piggyback). Arrival and held-back are derived when asked (`columns`)."""

    def __init__(
        self,
        trace: CompiledTrace,
        status: str,
        reason: str | None,
        verified: bool | None,
        figures: dict[str, float | int | None],
        eng: Any,
    ) -> None:
        self.status = status
        self.reason = reason
        self.verified = verified
        self.figures = figures
        self._lay = trace.layout
        count = trace.messages
        if eng is None:
            nan = np.full(count, np.nan)
            self.send_time = self.post_time = self.delivery_time = self.take_time = nan
            self.taken_by = self.piggyback = np.full(count, -1, np.int32)
            self._arrived = np.zeros(count, bool)
        else:
            self.send_time, self.post_time = eng.send_t, eng.post_t
            self.delivery_time, self.take_time = eng.del_t, eng.take_t
            self.taken_by, self.piggyback = eng.taken_by, eng.pig
            self._arrived = eng.mst >= M_PENDING

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


def replay_compiled(
    trace: CompiledTrace,
    name: str,
    params: Mapping[str, str] | None = None,
    selective: bool = False,
    default_latency: float = 1.0,
) -> CompiledRun:
    """Replay `trace` under protocol `name` with the compiled loop."""

    module = module_of(name)
    spec: ProtocolSpec = module.SPEC
    parsed = spec.parse(dict(params or {}))
    state, reason = module.make_state(trace, parsed)
    if reason is not None:
        figures: dict[str, float | int | None] = dict.fromkeys(FIGURES)
        return CompiledRun(trace, STATUS_NOT_APPLICABLE, reason, None, figures, None)
    verify = V_NONE
    if spec.name != "none" and not spec.total_order and (spec.causal or spec.fifo):
        verify = V_CAUSAL if spec.causal else V_FIFO
    fifo_transport = spec.uses_fifo_transport(parsed)
    flags = (int(spec.causal), int(fifo_transport), int(spec.point_to_point), int(selective))
    eng = new_engine(trace, flags, default_latency, verify)
    run_loop(state, eng_ref(eng), layout_ref(trace.layout))
    lay = trace.layout
    length = np.diff(lay.ev_start)
    unfinished = np.flatnonzero(eng.pc < length)
    status, reason = STATUS_OK, None
    if len(unfinished):
        lost = trace.lost
        status = STATUS_STALLED if lost else STATUS_DEADLOCK
        blocked = ", ".join(
            f"{trace.names[p]} at #{eng.pc[p] + 1}" for p in unfinished[:5].tolist()
        )
        reason = f"{len(unfinished)} process(es) wait for ever: {blocked}"
        if status == STATUS_STALLED:
            reason += f" (the log lost {lost} message(s))"
    if spec.name == "none":
        verified = None if trace.skewed else reproduces_recording(layout_ref(lay), eng)
    elif spec.total_order:
        verified = one_total_order(trace, eng)
    elif verify != V_NONE:
        verified = not eng.cnt[K_VIOLATED]
    else:
        verified = None
    return _result(trace, eng, module, state, status, reason, verified)


def _result(
    trace: CompiledTrace,
    eng: Any,
    module: Any,
    state: Any,
    status: str,
    reason: str | None,
    verified: bool | None,
) -> CompiledRun:
    lay = trace.layout
    held = np.empty(trace.messages, np.float64)
    (app, ints, ints_total, ints_max, held_count, held_total, held_max, sender, lost,
     undelivered, untaken, unsent, taken) = tally(
        lay.send_ev, lay.recv_ev, lay.latency, lay.etime, eng.send_t, eng.post_t, eng.del_t,
        eng.take_t, eng.mst, eng.pig, held,
    )  # fmt: skip
    held = held[:held_count]
    done = [
        lay.etime[lay.ev_start[p] : lay.ev_start[p] + k].max()
        for p, k in enumerate(eng.pc.tolist())
        if k
    ]
    makespan, ratio = makespan_figures(
        status,
        float(eng.now.max()) if trace.n else trace.start,
        float(max(done, default=trace.start)),
        trace.start,
        trace.end,
    )
    figures: dict[str, float | int | None] = {
        "app_messages": app,
        "control_messages": int(eng.cnt[K_CONTROL]),
        "control_ints": int(eng.cnt[K_CONTROL_INTS]),
        "piggyback_ints_total": ints_total,
        "piggyback_ints_mean": ints_total / ints if ints else 0.0,
        "piggyback_ints_max": ints_max,
        "piggyback_bytes_total": 8 * ints_total,
        "held_back": held_count,
        "holdback_delay_total": float(held.sum()) if held_count else 0.0,
        "holdback_delay_mean": float(held.mean()) if held_count else None,
        "holdback_delay_p99": float(np.percentile(held, 99)) if held_count else None,
        "holdback_delay_max": held_max if held_count else None,
        "sender_delay_total": _sender_delay(module, state, sender),
        "max_holdback_buffer": int(eng.cnt[K_MAX_BUFFER]),
        "makespan": makespan,
        "makespan_ratio": ratio,
        # where each copy ends (docs/replay.md): besides taken, exactly one of these
        "lost": lost,
        "undelivered": undelivered,
        "untaken": untaken,
        "unsent": unsent,
    }
    del held, held_total
    wrong = accounting_error(figures, taken, trace.messages)
    if wrong is not None:
        status, reason = STATUS_ERROR, wrong
    return CompiledRun(trace, status, reason, verified, figures, eng)


def _sender_delay(module: Any, state: Any, post_minus_send: float) -> float:
    own = getattr(module, "sender_delay", None)
    return float(own(state, post_minus_send)) if own is not None else post_minus_send
