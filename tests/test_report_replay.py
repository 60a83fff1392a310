"""The report's protocol replay section without Spark and without a browser: latency spread,
the charts against it, the delivery timeline's bars, checked against the rows they were
given (small, hand-computed); and a report built from a small warehouse that delta-rs
commits here (`replay_warehouse`, also what tests/test_report_browser.py opens)."""

from __future__ import annotations

import math
import os
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from causal_spark import tables
from causal_spark.io.ledger import Ledger, commit_files
from causal_spark.report import charts, protocols, timeline
from causal_spark.report.build import write_report


def _messages(rows: list[tuple[str, str, float | None, float | None, str]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"trace_id": t, "msg_id": m, "send_ts": s, "recv_ts": r, "status": status}
            for t, m, s, r, status in rows
        ]
    )


def test_latency_spread_is_the_coefficient_of_variation_of_delivered_latencies() -> None:
    table = _messages(
        [
            ("t1", "a", 0.0, 1.0, "delivered"),  # latencies 1, 1, 4: mean 2, variance 2
            ("t1", "b", 1.0, 2.0, "delivered"),
            ("t1", "c", 2.0, 6.0, "delivered"),
            ("t1", "lost", 3.0, None, "in_flight"),
            ("t2", "a", 0.0, 2.0, "delivered"),  # equal latencies: no spread
            ("t2", "b", 5.0, 7.0, "delivered"),
            ("skew", "a", 2.0, 1.0, "delivered"),  # -1 clamps to 0, as the replay does
            ("skew", "b", 0.0, 3.0, "delivered"),
            ("lamport", "a", None, None, "delivered"),  # no ts: no recorded latency
            ("zero", "a", 1.0, 1.0, "delivered"),  # mean 0: no coefficient
        ]
    )
    spread = protocols.latency_spread(table)
    assert set(spread) == {"t1", "t2", "skew"}
    assert spread["t1"][0] == 2.0 and math.isclose(spread["t1"][1], math.sqrt(2) / 2)
    assert spread["t2"] == (2.0, 0.0)
    assert spread["skew"][0] == 1.5 and math.isclose(spread["skew"][1], 1.0)


def test_traces_are_grouped_by_spread_and_each_point_is_a_median() -> None:
    spread = {"a": 0.5, "b": 0.1, "c": 0.3}
    assert protocols.spread_groups(spread, 2) == [["b"], ["c", "a"]]
    assert protocols.spread_groups(spread, 8) == [["b"], ["c"], ["a"]]
    values = {("bss", "a"): 4.0, ("bss", "c"): 2.0, ("bss", "b"): 1.0, ("none", "a"): 0.0}
    points = protocols.against_spread(values, spread, 2)
    assert points == {"bss": [(0.1, 1.0), (0.4, 3.0)], "none": [(0.4, 0.0)]}


def test_eleven_protocols_against_spread_get_a_log_axis_and_eleven_styles() -> None:
    names = [f"p{i:02d}" for i in range(11)]
    spread = {"t1": 0.01, "t2": 0.5, "t3": 3.0}
    values = {(p, t): float(i + 1) for i, p in enumerate(names) for t in spread}
    c = charts.line_chart(
        "t", "spread", "ints", protocols.against_spread(values, spread), charts.styles(names),
        integer_x=False,
    )  # fmt: skip
    assert c.log_x and not c.log_y
    assert len({s.style for s in c.series}) == 11
    assert all(len(s.points) == 3 for s in c.series)


def test_timeline_traces_put_the_drawn_findings_first_then_the_most_held_back() -> None:
    runs = [
        {"trace_id": "quiet", "held_back": 0},
        {"trace_id": "busy", "held_back": 5},
        {"trace_id": "busy", "held_back": 2},
        {"trace_id": "some", "held_back": 3},
        {"trace_id": "finding", "held_back": 0},
    ]
    assert protocols.timeline_traces(runs, ["finding", "not-replayed"], 3) == (
        ["finding", "busy", "some"],
        1,
    )


def _delivery(
    protocol: str,
    msg: str,
    send: float | None,
    arrival: float | None,
    delivery: float | None,
    trace: str = "t1",
) -> dict[str, Any]:
    held = None if arrival is None or delivery is None else delivery > arrival
    return {
        "trace_id": trace,
        "protocol": protocol,
        "receive_mode": "nonselective",
        "msg_id": msg,
        "send_time": send,
        "post_time": send,
        "arrival_time": arrival,
        "delivery_time": delivery,
        "take_time": delivery,
        "taken_by_lseq": None,
        "piggyback_ints": 0,
        "held_back": held,
    }


# t1 replayed by none (every message at once) and bss (m2 held 3 s, m3 never delivered,
# m4 lost)
T1 = [
    _delivery("none", "m1", 0.0, 1.0, 1.0),
    _delivery("none", "m2", 0.0, 2.0, 2.0),
    _delivery("none", "m3", 1.0, 6.0, 6.0),
    _delivery("none", "m4", 2.0, 4.0, 4.0),
    _delivery("bss", "m1", 0.0, 1.0, 1.0),
    _delivery("bss", "m2", 0.0, 2.0, 5.0),
    _delivery("bss", "m3", 1.0, 6.0, None),
    _delivery("bss", "m4", 2.0, None, None),
]


def _name(r: Any) -> str:
    return str(r["protocol"])


def test_timeline_draws_each_arrived_copy_from_arrival_to_delivery() -> None:
    palette = charts.styles(["bss", "none"])
    t = timeline.timeline("t1", T1, palette, _name)
    assert [b.protocol for b in t.bands] == ["bss", "none"]
    assert {b.protocol: b.lost for b in t.bands} == {"bss": 1, "none": 0}
    bars = {(b.protocol, b.msg): b for b in t.bars}
    assert set(bars) == {(r["protocol"], r["msg_id"]) for r in T1 if r["arrival_time"] is not None}
    assert {k for k, b in bars.items() if b.held} == {("bss", "m2")}
    assert bars[("bss", "m2")].delay == 3.0 and bars[("bss", "m3")].status == "undelivered"
    assert all(b.delay == 0 for k, b in bars.items() if k != ("bss", "m2"))
    # one time axis: a bar's length is its delay at the scale of the axis
    scale = (bars[("none", "m3")].x - bars[("none", "m1")].x) / (6.0 - 1.0)
    assert math.isclose(bars[("bss", "m2")].width, 3.0 * scale)
    assert bars[("bss", "m2")].x == bars[("none", "m2")].x
    assert bars[("bss", "m3")].x + bars[("bss", "m3")].width == timeline.WIDTH - timeline.RIGHT
    for band in t.bands:  # bars of a band inside it, and those of one lane apart
        mine = [b for b in t.bars if b.protocol == band.protocol]
        assert all(band.y <= b.y and b.y + timeline.BAR <= band.y + band.height for b in mine)
        for a in mine:
            for b in mine:
                if a is not b and a.y == b.y:
                    assert a.x + a.width < b.x or b.x + b.width < a.x
    assert (t.messages, t.omitted_messages) == (4, 0)


def test_a_long_trace_draws_a_window_around_the_longest_hold_back() -> None:
    rows = [_delivery("fifo", f"m{k:03d}", float(k), k + 1.0, k + 1.0) for k in range(200)]
    rows[150] = _delivery("fifo", "m150", 150.0, 151.0, 170.0)
    t = timeline.timeline("long", rows, charts.styles(["fifo"]), _name, max_messages=20)
    drawn = [b.msg for b in t.bars]
    assert len(drawn) == 20 == t.messages and t.omitted_messages == 180
    assert drawn == sorted(drawn) and "m150" in drawn
    assert drawn[0] == "m140"  # consecutive in send order, centred on m150
    (held,) = [b for b in t.bars if b.held]
    assert held.msg == "m150" and held.delay == 19.0


def test_the_window_chosen_in_arrow_is_the_window_of_the_rows() -> None:
    rows = [
        _delivery(p, f"m{k:03d}", float(k), k + 1.0, k + 1.0) for p in ("a", "b") for k in range(90)
    ]
    rows[30] = _delivery("a", "m030", 30.0, 31.0, 45.0)  # the longest hold-back
    rows[90 + 70] = _delivery("b", "m070", None, 69.5, 80.0)  # no send: its arrival counts
    table = pa.Table.from_pylist(rows, schema=tables.arrow_schema(tables.DELIVERIES))
    kept, total = protocols.windowed(table, 10)
    assert total == 90
    assert {r["msg_id"] for r in kept} == set(timeline.window(rows, 10))
    assert sorted({r["msg_id"] for r in kept}) == [f"m{k:03d}" for k in range(25, 35)]
    assert len(kept) == 20  # both protocols' rows of the ten messages
    t = timeline.timeline("t", kept, charts.styles(["a", "b"]), _name, 10, total)
    assert (t.messages, t.omitted_messages) == (10, 80)
    assert protocols.windowed(table.slice(0, 0)) == ([], 0)


def _commit(root: Path, table: str, rows: list[dict[str, Any]], run_id: str) -> int:
    folder = root / table / "data"
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / "part-0.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=tables.arrow_schema(table)), file)
    return commit_files(str(root / table), table, [str(file)], run_id, mode="overwrite")


def _run(trace: str, protocol: str, held: int, delay: float) -> dict[str, Any]:
    return {
        "trace_id": trace,
        "protocol": protocol,
        "receive_mode": "nonselective",
        "params": "{}",
        "n_processes": 3,
        "timebase": "ts",
        "skewed": False,
        "app_messages": 4,
        "control_messages": 0,
        "control_ints": 0,
        "piggyback_ints_total": 12 if protocol == "bss" else 0,
        "held_back": held,
        "holdback_delay_total": delay if held else None,
        "recorded_makespan": 6.0,
        "status": "ok",
    }


def replay_warehouse(root: Path) -> Path:
    """A committed warehouse holding only replay tables and messages: t1 as above (ts,
    latencies 1, 1, 4 and one lost message: coefficient of variation sqrt(2)/2), t2 with
    equal latencies, both replayed by none and bss."""
    run_id = "20260101T000000Z-replay"
    messages = [
        {"trace_id": "t1", "msg_id": "m1", "send_ts": 0.0, "recv_ts": 1.0},
        {"trace_id": "t1", "msg_id": "m2", "send_ts": 1.0, "recv_ts": 2.0},
        {"trace_id": "t1", "msg_id": "m3", "send_ts": 2.0, "recv_ts": 6.0},
        {"trace_id": "t1", "msg_id": "m4", "send_ts": 2.0, "recv_ts": None},
        {"trace_id": "t2", "msg_id": "a", "send_ts": 0.0, "recv_ts": 2.0},
        {"trace_id": "t2", "msg_id": "b", "send_ts": 1.0, "recv_ts": 3.0},
    ]
    for m in messages:
        m.update(size_bytes=0, status="delivered" if m["recv_ts"] is not None else "in_flight")
    t2 = [_delivery(p, m, 0.0, 2.0, 2.0, "t2") for p in ("none", "bss") for m in ("a", "b")]
    versions = {
        tables.MESSAGES: _commit(root, tables.MESSAGES, messages, run_id),
        tables.DELIVERIES: _commit(root, tables.DELIVERIES, T1 + t2, run_id),
        tables.PROTOCOL_RUNS: _commit(
            root,
            tables.PROTOCOL_RUNS,
            [_run("t1", "none", 0, 0), _run("t1", "bss", 1, 3.0)]
            + [_run("t2", p, 0, 0) for p in ("none", "bss")],
            run_id,
        ),
    }
    now = datetime(2026, 1, 1)
    Ledger(str(root)).append(
        {
            "id": run_id,
            "command": "audit",
            "start": now,
            "end": now,
            "inputs": [],
            "config": "{}",
            "table_versions": versions,
            "counts": {},
            "written": sorted(versions),
            "lineage": {},
            "stage_seconds": {},
        }
    )
    return root


class _Rects(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "rect" and ("class", "delivery") in attrs:
            self.found.append(dict(attrs))


def test_report_of_a_replayed_warehouse_has_timelines_and_spread_charts(tmp_path: Path) -> None:
    root = replay_warehouse(tmp_path / "warehouse")
    page = write_report(str(root), tmp_path / "out")
    html = page.read_text("utf-8")
    assert "against latency spread" in html
    assert "2 of 2 replayed trace(s) have recorded latencies" in html
    parser = _Rects()
    parser.feed(html)
    shown = {(r["data-protocol"], r["data-msg"]): r for r in parser.found}
    rows = [r for r in T1 if r["arrival_time"] is not None]
    assert {k[1] for k in shown} == {"m1", "m2", "m3", "m4", "a", "b"}
    for r in rows:
        rect = shown[(r["protocol"], r["msg_id"])]
        assert rect["data-held"] == ("yes" if r["held_back"] else "no")
    assert float(shown[("bss", "m2")]["data-delay"] or 0) == 3.0
    assert os.path.getsize(page) < 200_000


def test_charts_against_spread_hold_the_runs_numbers(tmp_path: Path) -> None:
    from causal_spark.report.data import Tables

    section = protocols.protocol_section(Tables(str(replay_warehouse(tmp_path / "w"))), [])
    assert section is not None
    by_title = {c.title: c for c in section["lines"]}
    ints = by_title["piggybacked integers per message against latency spread"]
    delay = by_title["hold-back delay per message against latency spread"]
    cv = math.sqrt(2) / 2  # t2 has none: 0.0
    points = {s.name: [(x, y) for x, y, _, _ in s.points] for s in ints.series}
    assert points == {"bss": [(0.0, 3.0), (cv, 3.0)], "none": [(0.0, 0.0), (cv, 0.0)]}
    points = {s.name: [(x, y) for x, y, _, _ in s.points] for s in delay.series}
    # bss on t1: 3 s of hold-back over 4 messages, at a mean latency of 2 s
    assert points == {"bss": [(0.0, 0.0), (cv, 3.0 / 4 / 2.0)], "none": [(0.0, 0.0), (cv, 0.0)]}
    assert [t.trace for t in section["timelines"]] == ["t1", "t2"]
    assert section["timelines_left_out"] == 0
