"""The protocol replay section: charts across protocols and per-trace delivery timelines.

Read from protocol_runs, protocol_comparison, messages and deliveries with pyarrow (no
Spark). A trace's latency spread is the coefficient of variation (standard deviation /
mean) of its recorded latencies, `recv_ts - send_ts` of its delivered messages, clamped
at 0 as the replay clamps them: a pure number, so traces recorded in different units or
at different mean latencies share one axis (a variance would grow with the square of
the unit). Traces without `ts` (replayed on Lamport time) have no recorded latency and
are left off those charts.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from causal_spark import tables
from causal_spark.report import charts, timeline
from causal_spark.report.data import Tables

SPREAD_GROUPS = 8  # points per protocol on the charts against latency spread
MAX_TIMELINES = 6


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def latency_spread(messages: pa.Table) -> dict[str, tuple[float, float]]:
    """Per trace: (mean, coefficient of variation) of the recorded latencies of its
    delivered messages with both times (population standard deviation); traces whose
    mean latency is 0 have no coefficient and are left out."""
    ok = pc.and_(
        pc.equal(messages.column("status"), "delivered"),
        pc.and_(pc.is_valid(messages.column("send_ts")), pc.is_valid(messages.column("recv_ts"))),
    )
    rows = messages.filter(ok)
    latency = pc.max_element_wise(
        pc.subtract(rows.column("recv_ts"), rows.column("send_ts")), pa.scalar(0.0)
    )
    grouped = (
        pa.table({"trace_id": rows.column("trace_id"), "latency": latency})
        .group_by("trace_id")
        .aggregate(
            [
                ("latency", "mean"),
                ("latency", "stddev", pc.VarianceOptions(ddof=0)),
            ]
        )
        .to_pylist()
    )
    return {
        g["trace_id"]: (g["latency_mean"], g["latency_stddev"] / g["latency_mean"])
        for g in grouped
        if g["latency_mean"]
    }


def spread_groups(spread: Mapping[str, float], groups: int = SPREAD_GROUPS) -> list[list[str]]:
    """The traces in ascending spread (then id), cut into at most `groups` consecutive
    groups of as equal sizes as can be (each trace its own group when they are few)."""
    order = sorted(spread, key=lambda t: (spread[t], t))
    k = min(groups, len(order))
    return [order[i * len(order) // k : (i + 1) * len(order) // k] for i in range(k)]


def against_spread(
    values: Mapping[tuple[str, str], float],
    spread: Mapping[str, float],
    groups: int = SPREAD_GROUPS,
) -> dict[str, list[tuple[float, float]]]:
    """Per protocol, one point per group of traces: (median spread of the group, median of
    the protocol's `values[(protocol, trace)]` over the group's traces it ran on)."""
    protocols = sorted({p for p, _ in values})
    out: dict[str, list[tuple[float, float]]] = {p: [] for p in protocols}
    for group in spread_groups(spread, groups):
        x = _median([spread[t] for t in group])
        for p in protocols:
            ys = [values[(p, t)] for t in group if (p, t) in values]
            if ys:
                out[p].append((x, _median(ys)))
    return {p: points for p, points in out.items() if points}


def timeline_traces(
    runs: Sequence[Mapping[str, Any]], first: Sequence[str], limit: int = MAX_TIMELINES
) -> tuple[list[str], int]:
    """The traces whose delivery timeline is drawn: the replayed ones among `first` (the
    traces whose findings are drawn), then those with the most held-back messages; and how
    many replayed traces are left out."""
    held: dict[str, int] = defaultdict(int)
    for r in runs:
        held[r["trace_id"]] += int(r["held_back"] or 0)
    order = [t for t in dict.fromkeys(first) if t in held]
    chosen = set(order)
    order += sorted((t for t in held if t not in chosen), key=lambda t: (-held[t], t))
    return order[:limit], max(len(order) - limit, 0)


def windowed(
    deliveries: pa.Table, max_messages: int = timeline.MAX_MESSAGES
) -> tuple[list[dict[str, Any]], int]:
    """The rows of one trace's deliveries that its timeline's window keeps, and the trace's
    messages: the window is chosen in Arrow, so a trace of a million messages never
    becomes a million Python rows."""
    arrival = deliveries.column("arrival_time")
    send = pc.coalesce(deliveries.column("send_time"), arrival)
    delay = pc.if_else(
        pc.fill_null(deliveries.column("held_back"), False),
        pc.subtract(deliveries.column("delivery_time"), arrival),
        0.0,
    )
    per = (
        pa.table({"msg_id": deliveries.column("msg_id"), "send": send, "delay": delay})
        .group_by("msg_id")
        .aggregate([("send", "min"), ("delay", "max")])
        .to_pydict()
    )
    inf = float("inf")
    ids = per["msg_id"]
    sent = {m: inf if s is None else s for m, s in zip(ids, per["send_min"], strict=True)}
    longest = {m: d or 0.0 for m, d in zip(ids, per["delay_max"], strict=True)}
    keep = timeline.window_of(sent, longest, max_messages)
    inside = pc.is_in(deliveries.column("msg_id"), pa.array(keep, pa.string()))
    rows = deliveries.filter(inside).to_pylist()
    return rows, len(ids)


def protocol_section(
    source: Tables, first: Sequence[str], only: str | None = None
) -> dict[str, Any] | None:
    """The charts and timelines of the replay section; None when the run replayed nothing.
    `first`: the traces whose findings the page draws; `only`: the one trace of the page."""
    if not source.has(tables.PROTOCOL_RUNS):
        return None
    runs = source.read(
        tables.PROTOCOL_RUNS,
        columns=[
            "trace_id",
            "protocol",
            "receive_mode",
            "n_processes",
            "app_messages",
            "control_messages",
            "piggyback_ints_total",
            "held_back",
            "holdback_delay_total",
        ],
    ).to_pylist()
    runs = [r for r in runs if r["app_messages"]]
    if not runs:
        return None
    modes = {r["receive_mode"] for r in runs}

    def name(r: Mapping[str, Any]) -> str:
        return r["protocol"] if len(modes) == 1 else f"{r['protocol']}/{r['receive_mode']}"

    palette = charts.styles([name(r) for r in runs])
    ints: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    control: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        ints[name(r)][r["n_processes"]].append(r["piggyback_ints_total"] / r["app_messages"])
        control[name(r)][r["n_processes"]].append(r["control_messages"] / r["app_messages"])

    def medians(by: dict[str, dict[int, list[float]]]) -> dict[str, list[tuple[float, float]]]:
        return {p: [(float(n), _median(v)) for n, v in xs.items()] for p, xs in by.items()}

    lines = [
        charts.line_chart(
            "piggybacked integers per message (median)",
            "processes",
            "integers",
            medians(ints),
            palette,
        ),
        charts.line_chart(
            "control messages per message (median)",
            "processes",
            "messages",
            medians(control),
            palette,
        ),
    ]
    traces = sorted({r["trace_id"] for r in runs})
    spread = latency_spread(
        source.read(tables.MESSAGES, traces, ["trace_id", "send_ts", "recv_ts", "status"])
    )
    if spread:
        cv = {t: c for t, (_, c) in spread.items()}
        per_ints = {
            (name(r), r["trace_id"]): r["piggyback_ints_total"] / r["app_messages"]
            for r in runs
            if r["trace_id"] in cv
        }
        per_delay = {
            (name(r), r["trace_id"]): (r["holdback_delay_total"] or 0.0)
            / r["app_messages"]
            / spread[r["trace_id"]][0]
            for r in runs
            if r["trace_id"] in cv
        }
        xlabel = "latency spread (coefficient of variation)"
        lines.append(
            charts.line_chart(
                "piggybacked integers per message against latency spread",
                xlabel,
                "integers",
                against_spread(per_ints, cv),
                palette,
                integer_x=False,
            )
        )
        lines.append(
            charts.line_chart(
                "hold-back delay per message against latency spread",
                xlabel,
                "delay / mean latency",
                against_spread(per_delay, cv),
                palette,
                integer_x=False,
            )
        )
    dots = []
    comparison = source.read(tables.PROTOCOL_COMPARISON).to_pylist()
    for metric, title, label in (
        ("holdback_delay_mean", "hold-back delay per message", "seconds (median, line to p99)"),
        ("makespan_ratio", "makespan ratio to the recorded run", "ratio (median, line to p99)"),
    ):
        values = {
            name(r): (float(r["median"] or 0.0), float(r["p99"] or 0.0))
            for r in comparison
            if r["metric"] == metric and name(r) in palette
        }
        if values:
            dots.append(charts.dot_chart(title, label, values, palette))
    if only is None:
        drawn, left_out = timeline_traces(runs, first)
    else:
        drawn, left_out = timeline_traces([r for r in runs if r["trace_id"] == only], [only], 1)
    deliveries = source.read(tables.DELIVERIES, drawn)
    timelines = []
    for t in drawn:
        rows, total = windowed(deliveries.filter(pc.equal(deliveries.column("trace_id"), t)))
        if rows:
            timelines.append(timeline.timeline(t, rows, palette, name, total=total))
    return {
        "palette": palette,
        "lines": lines,
        "dots": dots,
        "spread_traces": len(spread),
        "replayed_traces": len(traces),
        "timelines": timelines,
        "timelines_left_out": left_out,
    }
