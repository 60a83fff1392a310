"""Honest verdicts (issue 18): every file a folder holds that no reader took is listed,
with why; a trace with no analysable event gets no order class, and the run counts it.

The discovery and ledger tests need no Spark. One test runs `ingest`, `clocks` and
`detect` through the command line's own entry point (`cli.main`, in this process, on the
session's Spark: no new JVM) on a folder of two traces and five files no reader takes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from causal_spark import tables
from causal_spark.app import cli, gating
from causal_spark.config import IngestSettings
from causal_spark.io.ledger import Ledger
from causal_spark.io.sinks import Warehouse
from causal_spark.io.sources import InputError, discover_inputs
from tests.conftest import ROOT

GOOD = [
    {"process": "A", "seq": 1, "kind": "send", "msg_id": "m1", "peer": "B", "ts": 0.0},
    {"process": "B", "seq": 1, "kind": "receive", "msg_id": "m1", "peer": "A", "ts": 1.0},
]
# every row of this trace is malformed: an unknown kind, no process, not a record
ALL_BAD = [
    '{"process":"A","seq":1,"kind":"teleport","msg_id":"m1","peer":"B"}',
    '{"seq":2,"kind":"internal"}',
    "this line is not json",
]

# (name, why no reader took it), as discovery words it
SKIPPED = {
    ".git": "hidden or underscore folder: not entered",
    ".hidden": "hidden or underscore name",
    "LICENSE": "no extension, and its content is no known format",
    "_x.jsonl": "hidden or underscore name",
    "notes.log": "its content is no format that reads .log",
    "notes.xyz": "no reader for extension .xyz",
}
TAKEN = ("all_bad.jsonl", "good.jsonl")


def _folder(root: Path) -> Path:
    """Two traces (`good`, `all_bad`) and the six entries of `SKIPPED`."""
    folder = root / "logs"
    folder.mkdir()
    (folder / "good.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GOOD))
    (folder / "all_bad.jsonl").write_text("\n".join(ALL_BAD) + "\n")
    (folder / "notes.xyz").write_text("a note\n")
    (folder / "notes.log").write_text("hello, this is no log format\n")
    (folder / "LICENSE").write_text("Permission is hereby granted\n")
    (folder / "_x.jsonl").write_text(json.dumps(GOOD[0]) + "\n")
    (folder / ".hidden").write_text("x\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / ".git" / "objects.jsonl").write_text(json.dumps(GOOD[0]) + "\n")
    return folder


def test_every_entry_no_reader_took_is_listed_with_why(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    found = discover_inputs([str(folder)], IngestSettings())
    taken = sorted(Path(f.path).name for f in found.files)
    skipped = {Path(s.path).name: s.why for s in found.skipped}
    assert taken == list(TAKEN)
    assert skipped == SKIPPED
    # read + skipped = what the folder holds (a hidden folder is one entry, not entered)
    assert len(taken) + len(skipped) == len(list(folder.iterdir()))
    assert [s.path for s in found.skipped] == sorted(str(folder / n) for n in SKIPPED)


def test_a_folder_nothing_reads_says_what_it_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "README.md").write_text("# notes\n")
    with pytest.raises(InputError, match=r"no reader for extension \.md"):
        discover_inputs([str(folder)], IngestSettings())


def test_the_warehouse_bookkeeping_is_never_listed(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    (folder / "_causal").mkdir(parents=True)
    (folder / "_causal" / "writer.json").write_text("{}\n")
    (folder / "good.jsonl").write_text(json.dumps(GOOD[0]) + "\n")
    assert discover_inputs([str(folder)], IngestSettings()).skipped == ()


def _row(run_id: str, **extra: object) -> dict[str, object]:
    now = datetime.now(UTC)
    row: dict[str, object] = {
        "id": run_id,
        "command": "ingest",
        "start": now,
        "end": now,
        "inputs": [],
        "config": "{}",
        "table_versions": {},
        "counts": {},
        "written": [],
        "lineage": {},
        "stage_seconds": {},
    }
    row.update(extra)
    return row


def test_a_ledger_written_before_skipped_existed_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row of the old schema (no `skipped` column) reads as null next to new rows."""
    declared = tables.arrow_schema

    def old_schema(table: str):  # type: ignore[no-untyped-def]
        schema = declared(table)
        return schema.remove(schema.get_field_index("skipped")) if table == tables.RUNS else schema

    ledger = Ledger(str(tmp_path / "warehouse"))
    with monkeypatch.context() as patch:
        patch.setattr(tables, "arrow_schema", old_schema)
        ledger.append(_row("r1"))
    listed = [{"path": "logs/a.xyz", "reason": "no reader for extension .xyz"}]
    ledger.append(_row("r2", skipped=listed))
    ledger.append(_row("r3", skipped=[]))
    assert [(r["id"], r["skipped"]) for r in ledger.rows()] == [
        ("r1", None),
        ("r2", listed),
        ("r3", []),
    ]


def test_fail_on_names_traces_with_no_order_class() -> None:
    conditions = gating.parse_conditions("unanalysable")
    outcome = gating.evaluate(conditions, {"traces_unanalysable": 1})[0]
    assert outcome.held
    assert outcome.line() == (
        "fail-on HELD: unanalysable > 0 (1 traces with no analysable event (no order class))"
    )


@pytest.mark.slow
def test_skipped_files_and_a_trace_with_no_event_through_the_cli(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path)
    warehouse = tmp_path / "warehouse"
    common = ["--warehouse", str(warehouse), "--conf", str(ROOT / "conf" / "test.yml")]
    ingest_json = tmp_path / "ingest.json"
    assert (
        cli.main(["ingest", str(folder), *common, "--summary-json", str(ingest_json)], spark) == 0
    )
    err = capsys.readouterr().err
    paths = sorted(str(folder / n) for n in SKIPPED)
    expected_line = (
        "ingest: 2 file(s) taken by a reader, 6 skipped ("
        "hidden or underscore folder: not entered: 1; hidden or underscore name: 2; "
        "its content is no format that reads .log: 1; "
        "no extension, and its content is no known format: 1; "
        "no reader for extension .xyz: 1): "
        f"{paths[0]}, {paths[1]}, {paths[2]} and 3 more"
    )
    assert expected_line in err.splitlines()
    listed = [{"path": str(folder / n), "reason": SKIPPED[n]} for n in sorted(SKIPPED)]
    assert Ledger(str(warehouse)).rows()[-1]["skipped"] == listed
    summary = json.loads(ingest_json.read_text())
    assert summary["skipped"] == listed
    assert summary["files"] == {"taken": 2, "skipped": 6}
    assert summary["files"]["taken"] + summary["files"]["skipped"] == len(list(folder.iterdir()))

    assert cli.main(["clocks", *common], spark) == 0
    detect_json = tmp_path / "detect.json"
    code = cli.main(
        ["detect", *common, "--fail-on", "unanalysable", "--summary-json", str(detect_json)],
        spark,
    )
    out = capsys.readouterr().out
    assert code == 1  # committed, and the condition held: not "all fine"
    assert (
        "detect: 0 violation row(s), 0 crown component(s); traces by order class: "
        "RSC 1, CO 0, FIFO 0, ASYNC 0, INVALID 0; "
        "traces with no analysable event (no order class): 1"
    ) in out.splitlines()
    detected = json.loads(detect_json.read_text())
    assert detected["findings"]["unanalysable"] == 1
    assert detected["classes"]["RSC"] == 1
    assert detected["skipped"] is None  # detect read no input

    columns = ["trace_id", "n_events", "n_quarantined", "order_class", "order_class_reason"]
    got = (
        Warehouse(spark, warehouse, "deltalake")
        .read(tables.TRACE_SUMMARY)
        .select(*columns)
        .orderBy("trace_id")
    )
    expected = spark.createDataFrame(
        [
            ("all_bad", 0, 3, None, "no analysable event: all 3 input row(s) quarantined"),
            ("good", 2, 0, "RSC", None),
        ],
        T.StructType([tables.table_schema(tables.TRACE_SUMMARY)[c] for c in columns]),
    )
    assert_df_equality(got, expected, ignore_nullable=True)

    # the readers' words: `runs` lists the skipped files, `explain` and `report` say why
    # the trace has no order class
    assert cli.main(["runs", "--warehouse", str(warehouse)]) == 0
    assert (
        f"  skipped 6 file(s) no reader took: {paths[0]}, {paths[1]}, {paths[2]} and 3 more"
    ) in capsys.readouterr().out.splitlines()
    assert cli.main(["explain", "--trace", "all_bad", *common], spark) == 0
    assert capsys.readouterr().out.startswith(
        "trace all_bad: order class none: no analysable event: all 3 input row(s) "
        "quarantined (0 processes, 0 events, 0 messages, 3 rows quarantined;"
    )
    page = tmp_path / "report"
    assert cli.main(["report", "--warehouse", str(warehouse), "--out", str(page)]) == 0
    assert "<td>all_bad</td><td>none</td>" in (page / "index.html").read_text()
