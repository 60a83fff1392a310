"""Incremental audits (DESIGN §6, issue 20): four nights of logs landing in one folder.

After each incremental run every table equals a full audit of the folder as it then
is, and the run read only the new or changed files (plus, for the traces those
files continue, the older files holding their rows), as `runs.inputs` records.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

from causal_spark import tables
from causal_spark.app.cli import run as run_cli
from causal_spark.io import delta
from causal_spark.io.ledger import Ledger
from causal_spark.io.sinks import Warehouse
from causal_spark.io.sources import Inputs
from tests.helpers import write_jsonl as _write_jsonl

CONF = ["--conf", "conf/test.yml", "--protocols", "none,fifo,sync"]
PER_RUN = {"trace_summary": ["run_id"]}  # columns that name the run that wrote a row


def _row(
    trace: str, process: str, seq: int, kind: str, msg: str | None, peer: str | None, ts: float
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "trace_id": trace,
        "process": process,
        "seq": seq,
        "kind": kind,
        "ts": ts,
    }
    if msg is not None:
        row["msg_id"], row["peer"] = msg, peer
    return row


def _ping_pong(trace: str, start: int, messages: int, t0: float = 0.0) -> list[dict[str, Any]]:
    """A sends to B and B answers, `messages` times, seqs from `start`."""
    rows = []
    for i in range(messages):
        seq = start + i * 2
        m, r = f"{trace}-m{start + i}", f"{trace}-r{start + i}"
        rows += [
            _row(trace, "A", seq, "send", m, "B", t0 + 4 * i),
            _row(trace, "B", seq, "receive", m, "A", t0 + 4 * i + 1),
            _row(trace, "B", seq + 1, "send", r, "A", t0 + 4 * i + 2),
            _row(trace, "A", seq + 1, "receive", r, "B", t0 + 4 * i + 3),
        ]
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return _write_jsonl(path, rows)


def _fifo_violation(trace: str) -> list[dict[str, Any]]:
    return [
        _row(trace, "A", 1, "send", "x1", "B", 0.0),
        _row(trace, "A", 2, "send", "x2", "B", 1.0),
        _row(trace, "B", 1, "receive", "x2", "A", 2.0),
        _row(trace, "B", 2, "receive", "x1", "A", 3.0),
    ]


def _night(logs: Path, night: int) -> bool:
    """Land night `night`'s logs in `logs`; return whether the run prunes."""
    if night == 1:
        write_jsonl(
            logs / "n1" / "a.jsonl",
            [*_ping_pong("alpha", 1, 2), _row("alpha", "A", 5, "send", "alpha-late", "B", 9.0)],
        )
        write_jsonl(logs / "n1" / "b.jsonl", _fifo_violation("beta"))
    elif night == 2:  # a new trace, and alpha continued (its in-flight message arrives)
        write_jsonl(logs / "n2" / "c.jsonl", _ping_pong("gamma", 1, 1))
        write_jsonl(
            logs / "n2" / "alpha-cont.jsonl",
            [
                _row("alpha", "B", 5, "receive", "alpha-late", "A", 10.0),
                *_ping_pong("alpha", 6, 1, 11.0),
            ],
        )
    elif night == 3:  # a changed file (gamma gets a FIFO violation), a new trace, bad input
        write_jsonl(
            logs / "n2" / "c.jsonl",
            [
                *_ping_pong("gamma", 1, 1),
                *[{**r, "seq": r["seq"] + 2} for r in _fifo_violation("gamma")],
            ],
        )
        # a new trace, and bad input (quarantine, a trace named by its file)
        write_jsonl(logs / "n4" / "d.jsonl", _ping_pong("delta", 1, 3))
        shutil.copy("data-samples/bad_input.jsonl", logs / "n4" / "bad_input.jsonl")  # n4/ exists
    elif night == 4:  # a file is gone: pruned
        (logs / "n1" / "b.jsonl").unlink()
        return True
    return False


def _comparable(frame: DataFrame, table: str) -> DataFrame:
    return frame.drop(*PER_RUN.get(table, []))


def _files(row: dict[str, Any], logs: Path) -> dict[str, dict[str, Any]]:
    """The run's file records by path under `logs`."""
    return {
        f["path"].removeprefix(f"{logs}/"): f
        for given in row["inputs"]
        for f in given["files"] or []
    }


def _traces_of_files(table: Path) -> dict[str, set[str]]:
    """The trace ids in each data file of the latest version of `table` (by relative path)."""
    import pyarrow.parquet as pq

    version = delta.latest_version(table) or 0
    return {
        f.relative: set(pq.read_table(f.path, columns=["trace_id"]).column(0).to_pylist())
        for f in delta.data_files(table, version)
    }


@pytest.mark.slow
def test_four_nights_of_incremental_audits_equal_full_audits(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Also: a service that logs to the same file name every day gives a trace per day; a
    run rewrites no data file that holds only traces it does not touch; a fifth night with
    nothing new commits a runs row and no table version."""
    logs = tmp_path / "logs"
    logs.mkdir()
    incremental = tmp_path / "incremental"
    expected_read = {
        1: {"n1/a.jsonl", "n1/b.jsonl", "n1/svc.jsonl"},
        # a.jsonl: alpha's earlier rows; n2/svc.jsonl is a new trace, not n1/svc continued
        2: {"n2/c.jsonl", "n2/alpha-cont.jsonl", "n1/a.jsonl", "n2/svc.jsonl"},
        3: {"n2/c.jsonl", "n4/d.jsonl", "n4/bad_input.jsonl"},
        4: set(),  # beta's only file is gone: its rows go, nothing is read
    }
    # one service's log, the same file name each day, rows without trace_id
    service = [{k: v for k, v in r.items() if k != "trace_id"} for r in _ping_pong("x", 1, 2)]
    untouched_files_kept = 0
    for night in range(1, 5):
        prune = _night(logs, night)
        if night in (1, 2):
            write_jsonl(logs / f"n{night}" / "svc.jsonl", service)
        before = _traces_of_files(incremental / "events") if night > 1 else {}
        flags = ["--incremental", *(["--prune"] if prune else [])]
        record = run_cli(
            ["audit", str(logs), "--warehouse", str(incremental), *flags, *CONF], session=spark
        )
        full = tmp_path / f"full-{night}"
        run_cli(["audit", str(logs), "--warehouse", str(full), *CONF], session=spark)
        ours, theirs = (
            Warehouse(spark, incremental, "deltalake"),
            Warehouse(spark, full, "deltalake"),
        )
        assert set(ours.view().versions) == set(theirs.view().versions), night
        for table in sorted(theirs.view().versions):
            assert_df_equality(
                _comparable(ours.read(table), table),
                _comparable(theirs.read(table), table),
                ignore_row_order=True,
                ignore_nullable=True,
            )
        row = Ledger(str(incremental)).rows()[-1]
        assert row["id"] == record.run_id and row["mode"] == "incremental"
        files = _files(row, logs)
        read = {name for name, f in files.items() if f["read"]}
        assert read == expected_read[night], (night, files)
        changed = {name for name, f in files.items() if f["status"] in ("new", "changed")}
        assert changed <= read
        if night == 4:
            assert files["n1/b.jsonl"]["status"] == "deleted"
        # trace_summary names, per trace, the run that last analysed it
        summary = {r["trace_id"]: r["run_id"] for r in ours.read("trace_summary").collect()}
        analysed = {t for t, run in summary.items() if run == record.run_id}
        touched = {t for name in changed for t in files[name]["traces"] or []}
        assert analysed == touched - ({"beta"} if night == 4 else set())
        if night == 2:
            assert {"n1/svc", "n2/svc"} <= set(summary)
            assert ours.read("quarantine").count() == 0
        # a data file holding only traces this run did not touch is not rewritten
        gone = touched | ({"beta"} if night == 4 else set())
        after = _traces_of_files(incremental / "events")
        for path, traces in before.items():
            if not traces & gone:
                assert path in after, (night, path, traces)
                untouched_files_kept += 1
    assert untouched_files_kept > 0  # the check above was not vacuous
    assert "beta" not in {
        r["trace_id"] for r in Warehouse(spark, incremental, "deltalake").read("events").collect()
    }
    # night 5: nothing new; the run commits its runs row and no table version
    versions = Warehouse(spark, incremental, "deltalake").view().versions
    record = run_cli(
        ["audit", str(logs), "--warehouse", str(incremental), "--incremental", *CONF],
        session=spark,
    )
    assert set(record.table_versions) == {tables.RUNS}
    assert Warehouse(spark, incremental, "deltalake").view().versions == versions


def _inputs_of(folder: Path) -> Inputs:
    from causal_spark.config import IngestSettings
    from causal_spark.io.sources import discover_inputs

    return discover_inputs([str(folder)], IngestSettings())


def _traces_in_files(inputs: Inputs) -> dict[str, set[str]]:
    """The traces of each file, read with json (the selection's Spark read, done by hand)."""
    import json

    found: dict[str, set[str]] = {}
    for file in inputs.files:
        rows = [
            json.loads(line) for line in Path(file.path).read_text().splitlines() if line.strip()
        ]
        found[file.shown] = {r["trace_id"] for r in rows}
    return found


def test_the_selection_reads_new_and_changed_files_and_the_touched_traces_older_files(
    tmp_path: Path,
) -> None:
    from causal_spark.app.incremental import (
        IncrementalInputError,
        previous_files,
        records_of,
        select_incremental,
    )

    logs = tmp_path / "logs"
    _night(logs, 1)
    first = select_incremental(_inputs_of(logs), {}, _traces_in_files, prune=False)
    assert first.traces == ["alpha", "beta"]
    runs = [{"inputs": [{"path": str(logs), "files": records_of(first)[str(logs)]}]}]
    _night(logs, 2)
    second = select_incremental(
        _inputs_of(logs), previous_files(runs), _traces_in_files, prune=False
    )
    assert second.traces == ["alpha", "gamma"]
    chosen = {Path(f.path).relative_to(logs).as_posix() for f in second.inputs.files}
    assert chosen == {"n1/a.jsonl", "n2/alpha-cont.jsonl", "n2/c.jsonl"}
    status = {
        r.path.removeprefix(f"{logs}/"): (r.status, r.read)
        for rs in second.records.values()
        for r in rs
    }
    assert status == {
        "n1/a.jsonl": ("unchanged", True),
        "n1/b.jsonl": ("unchanged", False),
        "n2/alpha-cont.jsonl": ("new", True),
        "n2/c.jsonl": ("new", True),
    }
    # unchanged content, new mtime: changed (the fingerprint has the mtime)
    runs.append({"inputs": [{"path": str(logs), "files": records_of(second)[str(logs)]}]})
    os.utime(logs / "n1" / "b.jsonl", ns=(10**18, 10**18))
    third = select_incremental(
        _inputs_of(logs), previous_files(runs), _traces_in_files, prune=False
    )
    assert third.traces == ["beta"]
    # a trace with new rows whose earlier file is gone: refused without --prune
    runs.append({"inputs": [{"path": str(logs), "files": records_of(third)[str(logs)]}]})
    (logs / "n1" / "a.jsonl").unlink()
    write_jsonl(logs / "n3" / "more-alpha.jsonl", _ping_pong("alpha", 20, 1))
    with pytest.raises(IncrementalInputError, match="alpha"):
        select_incremental(_inputs_of(logs), previous_files(runs), _traces_in_files, prune=False)
    pruned = select_incremental(
        _inputs_of(logs), previous_files(runs), _traces_in_files, prune=True
    )
    assert pruned.traces == ["alpha"]
    assert [r.path.removeprefix(f"{logs}/") for r in pruned.deleted] == ["n1/a.jsonl"]
