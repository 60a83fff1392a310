"""The report's geometry as pure functions (no Spark, no browser): diagram windows, roles,
arrows, chart axes and styles."""

from __future__ import annotations

import math

from causal_spark.report import charts, layout


def _events(spec: dict[str, int]) -> list[dict[str, object]]:
    """Events numbered per process, lamport = rank in a simple interleaving."""
    out: list[dict[str, object]] = []
    for pidx, (process, n) in enumerate(sorted(spec.items())):
        for lseq in range(1, n + 1):
            out.append(
                {"process": process, "pidx": pidx, "lseq": lseq, "kind": "send", "lamport": lseq}
            )
    return out


def _msg(
    mid: str, src: str | None, s: int | None, dst: str | None, r: int | None
) -> dict[str, object]:
    return {"msg_id": mid, "src": src, "send_lseq": s, "dst": dst, "recv_lseq": r}


def test_overtaken_by_chain_roles_and_arrows_point_right() -> None:
    # x: P1#1 -> P3#2 ; y: P1#2 -> P2#1 ; z: P2#2 -> P3#1 (the shape of data-samples)
    events = [
        {"process": "P1", "pidx": 0, "lseq": 1, "kind": "send", "lamport": 1},
        {"process": "P1", "pidx": 0, "lseq": 2, "kind": "send", "lamport": 2},
        {"process": "P2", "pidx": 1, "lseq": 1, "kind": "receive", "lamport": 3},
        {"process": "P2", "pidx": 1, "lseq": 2, "kind": "send", "lamport": 4},
        {"process": "P3", "pidx": 2, "lseq": 1, "kind": "receive", "lamport": 5},
        {"process": "P3", "pidx": 2, "lseq": 2, "kind": "receive", "lamport": 6},
    ]
    messages = [
        _msg("x", "P1", 1, "P3", 2),
        _msg("y", "P1", 2, "P2", 1),
        _msg("z", "P2", 2, "P3", 1),
    ]
    violation = {"overtaken_msg": "x", "overtaking_msg": "z", "chain": ["y"]}
    d = layout.layout(events, messages, layout.violation_roles(violation))
    roles = {a.msg: a.role for a in d.arrows}
    assert roles == {"x": "overtaken", "z": "overtaking", "y": "witness"}
    assert [lane.process for lane in d.lanes] == ["P1", "P2", "P3"]
    assert len(d.marks) == 6 and d.omitted_events == 0 and d.omitted_messages == 0
    assert all(a.x2 > a.x1 for a in d.arrows)  # clocks order the columns: arrows go forward
    lane_y = {lane.process: lane.y for lane in d.lanes}
    for a in d.arrows:
        assert (a.y1, a.y2) == (lane_y[a.src], lane_y[a.dst])


def test_crown_roles_keep_members_apart_from_the_witness() -> None:
    roles = layout.crown_roles(["a", "b"], ["a", "b", "c"])
    assert roles == {"a": "crown", "b": "crown", "c": "member"}
    assert layout.cycle_roles(["r1", "r2"]) == {"r1": "cycle", "r2": "cycle"}


def test_in_flight_and_orphan_messages_are_stubs() -> None:
    events = _events({"P1": 2, "P2": 1})
    messages = [_msg("lost", "P1", 1, "P2", None), _msg("orphan", None, None, "P2", 1)]
    d = layout.layout(events, messages, {})
    stubs = {a.msg: a for a in d.arrows}
    assert set(stubs) == {"lost", "orphan"} and all(a.stub for a in d.arrows)
    assert stubs["lost"].x2 > stubs["lost"].x1 and stubs["orphan"].x2 > stubs["orphan"].x1


def test_a_large_trace_is_drawn_in_a_bounded_window_around_the_finding() -> None:
    n = 5000
    events = [
        {"process": p, "pidx": i, "lseq": k, "kind": "send", "lamport": 2 * k + i}
        for i, p in enumerate(("A", "B"))
        for k in range(1, n + 1)
    ]
    # a message every step from A#k to B#k+1, the finding in the middle
    messages = [_msg(f"m{k}", "A", k, "B", k + 1) for k in range(1, n)]
    d = layout.layout(events, messages, {"m2500": layout.OVERTAKEN}, max_events=40, context=10)
    assert len(d.marks) <= 40
    assert d.omitted_events == 2 * n - len(d.marks)
    drawn = {a.msg for a in d.arrows}
    assert "m2500" in drawn
    assert len(drawn) + d.omitted_messages == len(messages)
    shown = {(m.process, m.lseq) for m in d.marks}
    for m in messages:  # exactly the messages with both ends in the window are drawn
        inside = ("A", m["send_lseq"]) in shown and ("B", m["recv_lseq"]) in shown
        assert (m["msg_id"] in drawn) == inside


def test_window_keeps_every_event_of_a_small_trace() -> None:
    order = [("P", i) for i in range(10)]
    assert layout.window(order, [("P", 3)], max_events=10) == order
    picked = layout.window(order, [("P", 5)], max_events=3, context=4)
    assert picked == [("P", 4), ("P", 5), ("P", 6)]


def test_invalid_trace_without_clocks_uses_local_order() -> None:
    events = [
        {"process": "P1", "pidx": 0, "lseq": 1, "kind": "receive", "lamport": None},
        {"process": "P1", "pidx": 0, "lseq": 2, "kind": "send", "lamport": None},
        {"process": "P2", "pidx": 1, "lseq": 1, "kind": "receive", "lamport": None},
        {"process": "P2", "pidx": 1, "lseq": 2, "kind": "send", "lamport": None},
    ]
    messages = [_msg("a", "P1", 2, "P2", 1), _msg("b", "P2", 2, "P1", 1)]
    d = layout.layout(events, messages, layout.cycle_roles(["a", "b"]))
    assert {a.role for a in d.arrows} == {"cycle"} and len(d.arrows) == 2


def test_styles_give_eleven_protocols_distinct_colours_and_markers() -> None:
    names = [f"p{i:02d}" for i in range(11)]
    s = charts.styles(names)
    assert len({v.colour for v in s.values()}) == 11
    assert len({v.marker for v in s.values()}) == 11
    assert charts.styles(list(reversed(names))) == s  # stable whatever the order


def test_axis_counts_get_integer_ticks() -> None:
    a = charts.axis([2, 3, 4, 5], integer=True)
    assert not a.log
    values = [v for v, _ in a.ticks]
    assert all(v == int(v) for v in values) and values == sorted(set(values))
    assert a.low <= 2 and a.high >= 5


def test_axis_is_logarithmic_across_decades() -> None:
    a = charts.axis([0.001, 0.5, 20.0])
    assert a.log and a.low <= 0.001 and a.high >= 20
    assert all(math.isclose(math.log10(v), round(math.log10(v))) for v, _ in a.ticks)
    assert 0 <= a.fraction(0.5) <= 1
    assert not charts.axis([1.0, 1.5, 3.0]).log


def test_line_chart_places_points_inside_the_plot() -> None:
    palette = charts.styles(["bss", "sync"])
    c = charts.line_chart(
        "t", "processes", "ints", {"bss": [(2, 4.0), (3, 9.0)], "sync": [(2, 0.0)]}, palette
    )
    assert [s.name for s in c.series] == ["bss", "sync"]
    assert c.series[0].style != c.series[1].style
    for s in c.series:
        for _, _, px, py in s.points:
            assert charts.LEFT - 20 <= px <= c.width - charts.RIGHT + 20
            assert charts.TOP <= py <= c.height - charts.BOTTOM
    assert [label for _, label in c.x_ticks] == ["2", "3"]  # processes: no fractions, no 0


def test_bar_chart_longest_first() -> None:
    bars = charts.bar_chart({"RSC": 3, "CAUSAL": 5, "INVALID": 1})
    assert [b.label for b in bars] == ["CAUSAL", "RSC", "INVALID"]
    assert bars[0].width > bars[1].width > bars[2].width


def test_trace_words_read_a_summary_read_without_spark() -> None:
    """The report reads trace_summary with delta-rs: its rows are dicts, not Spark Rows."""
    from causal_spark.anomalies.explain import trace_words

    summary: dict[str, object] = {
        "trace_id": "t",
        "order_class": "RSC",
        "order_class_reason": None,
        "n_processes": 2,
        "n_events": 4,
        "n_messages": 2,
        "n_quarantined": 0,
        "n_fifo_violations": None,
        "n_causal_violations": None,
        "n_crown_sccs": 0,
        "messages_inferred": True,
    }
    assert trace_words(summary) == (
        "trace t: order class RSC (2 processes, 4 events, 2 messages, 0 rows quarantined; "
        "FIFO and causal order not observable (messages inferred from clocks), "
        "0 crown component(s))"
    )
    summary.update(messages_inferred=False, n_fifo_violations=0, n_causal_violations=1)
    assert trace_words(summary).endswith(
        "; 0 FIFO and 1 causal violation row(s), 0 crown component(s))"
    )
