"""Issue 20: history over committed runs: --as-of, `runs`, `diff`, `vacuum`, gating rules."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from causal_spark.app import gating
from causal_spark.app.cli import main
from causal_spark.app.history import findings_diff
from causal_spark.io.ledger import Ledger
from causal_spark.io.sinks import Warehouse
from tests.helpers import write_jsonl

pytestmark = pytest.mark.slow  # every test here reads one ingest or audit of the module

CONF = ["--conf", "conf/test.yml"]


def _fixed_fifo(folder: Path) -> Path:
    """fifo_violation with its receives in send order: no violation any more."""
    rows = [
        json.loads(line)
        for line in Path("data-samples/fifo_violation.jsonl").read_text().splitlines()
    ]
    receives = [r for r in rows if r["kind"] == "receive"]
    receives.sort(key=lambda r: r["msg_id"])
    for seq, row in enumerate(receives, start=1):
        row["seq"] = seq
    sends = [r for r in rows if r["kind"] != "receive"]
    return write_jsonl(folder / "fifo_violation.jsonl", sends + receives)


@pytest.fixture(scope="module")
def history(
    spark: SparkSession, detected_samples: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """data-samples detected (run 1), then a folder with fifo_violation fixed and
    nested_crowns ingested, clocked and detected (runs 2-4)."""
    root = tmp_path_factory.mktemp("history")
    warehouse = root / "wh"
    shutil.copytree(detected_samples, warehouse)
    later = root / "in"
    later.mkdir()
    _fixed_fifo(later)
    shutil.copy("data-samples/nested_crowns.jsonl", later)
    for argv in (["ingest", str(later)], ["clocks"], ["detect"]):
        assert main([*argv, "--warehouse", str(warehouse), "--quiet", *CONF], session=spark) == 0
    return warehouse


def _out(capsys: pytest.CaptureFixture[str], run: Callable[[], int]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run()
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_read_as_of_a_run_gives_the_tables_that_run_left(
    spark: SparkSession, history: Path, detected_samples: Path
) -> None:
    first = Ledger(str(history)).rows()[0]["id"]
    now = Warehouse(spark, history, "deltalake")
    then = Warehouse(spark, detected_samples, "deltalake")
    for table in ("events", "trace_summary", "violations", "crown_members"):
        assert_df_equality(now.read(table, as_of=first), then.read(table), ignore_row_order=True)
    traces = {r["trace_id"] for r in now.read("trace_summary").collect()}
    assert traces == {"fifo_violation", "nested_crowns"}
    # a unique prefix names the run too
    assert now.read("events", as_of=first[:18]).count() == 56


def test_explain_and_compare_take_as_of(
    spark: SparkSession, history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = Ledger(str(history)).rows()[0]["id"]
    argv = ["explain", "--warehouse", str(history), "--trace", "causal_chat", "--msg", "q1", *CONF]
    code, out, _ = _out(capsys, lambda: main([*argv, "--as-of", first], session=spark))
    assert code == 0 and "causal_chat" in out
    code, _, err = _out(capsys, lambda: main(argv, session=spark))
    assert code == 2 and "causal_chat" in err  # the trace is not in the last run's tables
    code, _, err = _out(capsys, lambda: main([*argv, "--as-of", "nosuchrun"], session=spark))
    assert code == 2 and "no committed run 'nosuchrun'" in err
    code, _, err = _out(
        capsys,
        lambda: main(
            ["compare", "--warehouse", str(history), "--as-of", first, *CONF], session=spark
        ),
    )
    assert code == 2 and "protocol_comparison" in err  # that run wrote no comparison


def test_runs_lists_every_committed_run(
    spark: SparkSession, history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = Ledger(str(history)).rows()
    code, out, _ = _out(capsys, lambda: main(["runs", "--warehouse", str(history)]))
    assert code == 0
    for row in rows:
        assert f"{row['id']}  {row['command']}" in out
    assert "input data-samples (jsonl, 9 file(s), 9 of 9 file(s) read)" in out
    assert "events 0, " in out or "events 0*" in out
    code, out, _ = _out(
        capsys, lambda: main(["runs", "--warehouse", str(history), "--as-of", rows[1]["id"]])
    )
    assert code == 0 and rows[1]["id"] in out and rows[2]["id"] not in out
    code, out, _ = _out(capsys, lambda: main(["runs", "--warehouse", str(history), "--json"]))
    parsed = [json.loads(line) for line in out.splitlines()]
    assert [p["id"] for p in parsed] == [r["id"] for r in rows]
    assert parsed[-1]["lineage"]["trace_summary"] == rows[1]["id"]  # from the second ingest


def test_diff_lists_findings_by_natural_key(
    spark: SparkSession, history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = Ledger(str(history)).rows()
    first, last = rows[0]["id"], rows[-1]["id"]
    warehouse = Warehouse(spark, history, "deltalake")
    before = warehouse.read("trace_summary", as_of=first)
    after = warehouse.read("trace_summary")
    classes = {
        side: {r["trace_id"]: r["order_class"] for r in frame.collect()}
        for side, frame in (("before", before), ("after", after))
    }
    code, out, _ = _out(
        capsys, lambda: main(["diff", "--warehouse", str(history), *CONF], session=spark)
    )
    assert code == 0
    # default --from: the last run before --to that analysed (detect wrote trace_summary)
    assert out.splitlines()[0].startswith(f"diff {first} -> {last}: ")
    lines = out.splitlines()
    fifo = lines[lines.index("trace fifo_violation") + 1 :]
    fifo = fifo[: next((i for i, line in enumerate(fifo) if line.startswith("trace ")), len(fifo))]
    old_fifo = {
        r["overtaken_msg"]
        for r in warehouse.read("violations", as_of=first).collect()
        if r["trace_id"] == "fifo_violation" and r["kind"] == "fifo"
    }
    assert old_fifo and all(
        any(line.startswith(f"  - violation fifo {m}:") for line in fifo) for m in old_fifo
    )
    assert (
        f"  ~ order_class: {classes['before']['fifo_violation']} -> {classes['after']['fifo_violation']}"
        in fifo
    )
    assert "trace nested_crowns" not in lines  # unchanged: no line
    for trace in set(classes["before"]) - set(classes["after"]):
        assert f"trace {trace}" in lines
        assert f"  - order_class: {classes['before'][trace]}" in lines
    # the diff rows against a brute-force comparison of the two sides' order classes
    diff = findings_diff(warehouse, warehouse.view(first), warehouse.view(last)).where(
        "finding = 'order_class'"
    )
    expected = {
        t: (
            "appeared"
            if t not in classes["before"]
            else "disappeared"
            if t not in classes["after"]
            else "changed"
        )
        for t in set(classes["before"]) | set(classes["after"])
        if classes["before"].get(t) != classes["after"].get(t)
    }
    assert {r["trace_id"]: r["change"] for r in diff.collect()} == expected
    code, out, _ = _out(
        capsys,
        lambda: main(
            ["diff", "--warehouse", str(history), "--from", last, "--to", last, *CONF],
            session=spark,
        ),
    )
    assert out.strip() == f"diff {last} -> {last}: 0 appeared, 0 disappeared, 0 changed"


def test_vacuum_keeps_the_history_asked_for_and_no_more(
    spark: SparkSession, history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(history, warehouse)
    first = Ledger(str(warehouse)).rows()[0]["id"]
    explain = [
        "explain",
        "--warehouse",
        str(warehouse),
        "--trace",
        "causal_chat",
        "--msg",
        "q1",
        "--as-of",
        first,
        *CONF,
    ]
    code, out, _ = _out(
        capsys, lambda: main(["vacuum", "--warehouse", str(warehouse), "--retain-days", "30"])
    )
    assert code == 0 and "removed 0 file(s)" in out
    assert main(explain, session=spark) == 0
    code, out, _ = _out(
        capsys, lambda: main(["vacuum", "--warehouse", str(warehouse), "--retain-days", "0"])
    )
    assert code == 0 and "removed 0 file(s)" not in out
    code, _, err = _out(capsys, lambda: main(explain, session=spark))
    assert code == 2 and "vacuumed" in err
    reader = Warehouse(spark, warehouse, "deltalake")
    assert {r["trace_id"] for r in reader.read("trace_summary").collect()} == {
        "fifo_violation",
        "nested_crowns",
    }
    assert [r["command"] for r in Ledger(str(warehouse)).rows()][-2:] == ["vacuum", "vacuum"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("causal", [("causal", ">", 0)]),
        (
            "causal,fifo,crown,invalid,quarantine>100",
            [
                ("causal", ">", 0),
                ("fifo", ">", 0),
                ("crown", ">", 0),
                ("invalid", ">", 0),
                ("quarantine", ">", 100),
            ],
        ),
        (" async >= 2 , new", [("async", ">=", 2), ("new", ">", 0)]),
        ("orphan=0", [("orphan", "=", 0)]),
    ],
    ids=["bare", "issue-example", "spaces", "equal"],
)
def test_fail_on_conditions_parse(text: str, expected: list[tuple[str, str, int]]) -> None:
    parsed = gating.parse_conditions(text)
    assert [(c.name, c.op, c.threshold) for c in parsed] == expected


@pytest.mark.parametrize(
    "text",
    ["causa", "causal>", "causal>x", "quarantine>>1", ""],
    ids=["typo", "no-number", "not-a-number", "double-op", "empty"],
)
def test_bad_fail_on_conditions_are_refused(text: str) -> None:
    with pytest.raises(gating.FailOnError, match="cannot read condition"):
        gating.parse_conditions(text)


def test_fail_on_evaluates_each_condition_on_the_counts() -> None:
    conditions = gating.parse_conditions("causal,quarantine>3,orphan<1")
    outcomes = gating.evaluate(conditions, {"violations_causal": 2, "quarantine": 3})
    assert [(str(o.condition), o.value, o.held) for o in outcomes] == [
        ("causal > 0", 2, True),
        ("quarantine > 3", 3, False),
        ("orphan < 1", 0, True),
    ]
    with pytest.raises(gating.FailOnError, match="'quarantine' \\(needs ingest\\)"):
        gating.require_stages(conditions, "detect", ["detect"])
