"""A run's figures from its per-message columns (docs/replay.md, "Overhead")."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from numba import njit

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.model import STATUS_OK, STATUS_STALLED, Execution


def makespan_figures(
    status: str, replayed_end: float, recorded_end: float, start: float, end: float
) -> tuple[float | None, float | None]:
    """(makespan, makespan_ratio) of a run (docs/replay.md, "Stalled runs").

    A run that finished has a makespan (its last completion - the trace's earliest
    time), set against the recorded one. A run that did not finish has none; a
    `stalled` one (the log was cut) still has a ratio over the part of the program
    it ran: the latest completion among the events it completed, set against the
    latest recorded time of the same events. `replayed_end` is the former,
    `recorded_end` the latter; `start` and `end` are the trace's earliest and latest
    recorded times. A `deadlock` (the protocol itself stopped) has no ratio.
    """
    if status == STATUS_OK:
        makespan = replayed_end - start
        recorded = end - start
        return makespan, (makespan / recorded if recorded > 0 else None)
    if status == STATUS_STALLED:
        recorded = recorded_end - start
        return None, ((replayed_end - start) / recorded if recorded > 0 else None)
    return None, None


# where the copies of a run end, besides taken (docs/replay.md, "Every copy ends in one place")
ACCOUNTS = ("untaken", "undelivered", "lost", "unsent")


def accounting_error(
    figures: Mapping[str, float | int | None], taken: int, copies: int
) -> str | None:
    """Why a run's copies do not add up (taken + untaken + undelivered + lost + unsent
    = the trace's copies, docs/replay.md), or None when they do. A run that fails this check
    is reported `error` with this reason: its figures cannot be trusted."""
    counts = {"taken": taken, **{key: figures.get(key) for key in ACCOUNTS}}
    total = sum(int(v or 0) for v in counts.values())
    if total == copies and all(v is not None for v in counts.values()):
        return None
    parts = " + ".join(f"{key} {value}" for key, value in counts.items())
    return f"the copies do not add up: {parts} = {total}, but the trace has {copies} copies"


FIGURES = (
    "app_messages", "control_messages", "control_ints", "piggyback_ints_total",
    "piggyback_ints_mean", "piggyback_ints_max", "piggyback_bytes_total", "held_back",
    "holdback_delay_total", "holdback_delay_mean", "holdback_delay_p99", "holdback_delay_max",
    "sender_delay_total", "max_holdback_buffer", "makespan", "makespan_ratio", "lost",
    "undelivered", "untaken", "unsent",
)  # fmt: skip


@njit(cache=True)
def _tally(send_ev, recv_ev, latency, etime, send_t, post_t, del_t, take_t, arrived, pig, held):  # type: ignore[no-untyped-def]  # fmt: skip
    """Counts and sums over the messages (docs/replay.md, "Overhead"): held-back delays go
    to `held` (its first `held_count` entries)."""
    app = ints = ints_total = ints_max = held_count = 0
    lost = undelivered = untaken = unsent = taken = 0
    held_total = held_max = sender = 0.0
    for m in range(len(send_ev)):
        posted = not np.isnan(post_t[m])
        if send_ev[m] >= 0:
            app += 1
            if pig[m] >= 0:
                ints += 1
                ints_total += pig[m]
                if pig[m] > ints_max:
                    ints_max = pig[m]
            if posted and not np.isnan(send_t[m]):
                sender += post_t[m] - send_t[m]
            if not posted:
                unsent += 1
            elif np.isnan(latency[m]):
                lost += 1
        delivered = not np.isnan(del_t[m])
        if arrived[m]:
            if not delivered:
                undelivered += 1
            elif send_ev[m] >= 0:
                arrival = post_t[m] + latency[m]
                if del_t[m] > arrival:
                    wait = del_t[m] - arrival
                    held[held_count] = wait
                    held_count += 1
                    held_total += wait
                    if wait > held_max:
                        held_max = wait
        if not np.isnan(take_t[m]):
            taken += 1
        elif delivered:
            untaken += 1
    return (app, ints, ints_total, ints_max, held_count, held_total, held_max, sender, lost,
            undelivered, untaken, unsent, taken)  # fmt: skip


def figures_of(
    trace: CompiledTrace,
    execution: Execution,
    status: str,
    sender_delay: Callable[[float], float],
) -> tuple[dict[str, float | int | None], int]:
    """The figures of a run that started (`protocol_runs`, docs/replay.md "Overhead") and
    how many copies it took. `sender_delay` turns the summed post - send of the copies
    into the protocol's sender-side delay (a blocking send counts its own)."""
    lay = trace.layout
    held = np.empty(trace.messages, np.float64)
    (app, ints, ints_total, ints_max, held_count, held_total, held_max, sender, lost,
     undelivered, untaken, unsent, taken) = _tally(
        lay.send_ev, lay.recv_ev, lay.latency, lay.etime, execution.send_time,
        execution.post_time, execution.delivery_time, execution.take_time, execution.arrived,
        execution.piggyback, held,
    )  # fmt: skip
    held = held[:held_count]
    done = [
        lay.etime[lay.ev_start[p] : lay.ev_start[p] + k].max()
        for p, k in enumerate(execution.completed.tolist())
        if k
    ]
    makespan, ratio = makespan_figures(
        status,
        float(execution.now.max()) if trace.n else trace.start,
        float(max(done, default=trace.start)),
        trace.start,
        trace.end,
    )
    figures: dict[str, float | int | None] = {
        "app_messages": app,
        "control_messages": execution.control_messages,
        "control_ints": execution.control_ints,
        "piggyback_ints_total": ints_total,
        "piggyback_ints_mean": ints_total / ints if ints else 0.0,
        "piggyback_ints_max": ints_max,
        "piggyback_bytes_total": 8 * ints_total,
        "held_back": held_count,
        "holdback_delay_total": float(held.sum()) if held_count else 0.0,
        "holdback_delay_mean": float(held.mean()) if held_count else None,
        "holdback_delay_p99": float(np.percentile(held, 99)) if held_count else None,
        "holdback_delay_max": held_max if held_count else None,
        "sender_delay_total": sender_delay(sender),
        "max_holdback_buffer": execution.max_holdback_buffer,
        "makespan": makespan,
        "makespan_ratio": ratio,
        # where each copy ends (docs/replay.md): besides taken, exactly one of these
        "lost": lost,
        "undelivered": undelivered,
        "untaken": untaken,
        "unsent": unsent,
    }
    del held_total
    return figures, taken
