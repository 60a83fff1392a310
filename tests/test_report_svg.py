"""`explain --svg FILE`: the diagram of one message, checked against the violations table
(in-process, on the session's `detected_samples` warehouse); and the diagram docs/report.md
shows is what the code draws."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from causal_spark.app.cli import main
from causal_spark.report.build import message_svg
from tests.conftest import ROOT, read_delta

SVG = "{http://www.w3.org/2000/svg}"


def _arrows(svg: str) -> dict[str, str]:
    root = ET.fromstring(svg)
    lines = root.iter(f"{SVG}line")
    return {e.get("data-msg", ""): e.get("data-role", "") for e in lines if e.get("data-msg")}


@pytest.mark.slow
def test_explain_svg_draws_the_violation_of_the_message(
    spark: SparkSession, detected_samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.svg"
    code = main(
        [
            "explain",
            "--warehouse",
            str(detected_samples),
            "--conf",
            str(ROOT / "conf" / "test.yml"),
            "--trace",
            "overtaken_by_chain",
            "--msg",
            "x",
            "--svg",
            str(out),
        ],
        session=spark,
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "causal-order violation at P3" in printed and f"diagram: {out}" in printed
    (v,) = [
        r
        for r in read_delta(detected_samples / "violations").to_pylist()
        if r["trace_id"] == "overtaken_by_chain" and r["overtaken_msg"] == "x"
    ]
    expected = {m: "witness" for m in v["chain"]}
    expected.update({v["overtaken_msg"]: "overtaken", v["overtaking_msg"]: "overtaking"})
    messages = {
        m["msg_id"]
        for m in read_delta(detected_samples / "messages").to_pylist()
        if m["trace_id"] == "overtaken_by_chain"
    }
    arrows = _arrows(out.read_text("utf-8"))
    assert set(arrows) == messages
    assert {m: r for m, r in arrows.items() if r != "other"} == expected
    # the diagram docs/report.md shows is this one
    shown = (ROOT / "docs" / "report-overtaken-by-chain.svg").read_text("utf-8")
    assert _arrows(shown) == arrows


@pytest.mark.slow
def test_a_message_in_no_finding_is_drawn_as_the_subject(detected_samples: Path) -> None:
    rows = read_delta(detected_samples / "messages").to_pylist()
    (m,) = [r for r in rows if r["trace_id"] == "selective_xy"][:1]
    arrows = _arrows(message_svg(str(detected_samples), "selective_xy", m["msg_id"]))
    assert arrows[m["msg_id"]] == "subject"
    assert set(arrows) == {r["msg_id"] for r in rows if r["trace_id"] == "selective_xy"}


def test_report_of_a_warehouse_without_runs_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["report", "--warehouse", str(tmp_path / "none"), "--out", str(tmp_path / "r")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("causal-spark: error: no committed run in") and "Traceback" not in err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_report_of_an_unknown_run_or_trace_is_a_clear_error(
    detected_samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["report", "--warehouse", str(detected_samples), "--out", str(tmp_path / "r")]
    assert main([*base, "--as-of", "no-such-run"]) == 2
    assert "no committed run 'no-such-run'" in capsys.readouterr().err
    assert main([*base, "--trace", "no-such-trace"]) == 2
    assert "trace 'no-such-trace' is not in trace_summary" in capsys.readouterr().err


@pytest.mark.slow
def test_the_report_is_bounded_and_says_what_it_left_out(
    detected_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from causal_spark.report import build
    from causal_spark.report.data import Tables

    summaries = read_delta(detected_samples / "trace_summary").to_pylist()
    total = len(read_delta(detected_samples / "violations")) + len(
        read_delta(detected_samples / "crowns")
    )
    total += sum(1 for s in summaries if s["order_class"] == "INVALID")
    monkeypatch.setattr(build, "MAX_FINDINGS", 3)
    monkeypatch.setattr(build, "MAX_TRACES", 2)
    context = build.gather(Tables(str(detected_samples)))
    assert len(context["findings"]) == 3
    assert context["findings_left_out"] == total - 3
    assert len(context["traces"]) == 2 and context["n_traces"] == len(summaries)
    html = build.environment().get_template("report.html").render(**context)
    assert f"{total - 3} more finding(s) not drawn" in html
    assert f"the {len(summaries) - 2} with the fewest findings left out" in html
