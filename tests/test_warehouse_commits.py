"""Issue 17, the commit points: a warehouse that loses nothing and is never read half-committed.

Each test here failed on the code before this branch (d63b0b3); the docstring says how.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from causal_spark import tables
from causal_spark.app.cli import run as run_cli
from causal_spark.app.runs import LineageError
from causal_spark.io.ledger import Ledger, WarehouseError
from causal_spark.io.sinks import Warehouse
from tests.conftest import read_delta

CONF = ["--conf", "conf/test.yml"]
DATA = ["events", "messages", "quarantine"]


class InjectedFailure(RuntimeError):
    pass


def _two_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """Two input folders of different traces."""
    first, second = tmp_path / "in-a", tmp_path / "in-b"
    first.mkdir()
    second.mkdir()
    for name in ("fifo_violation", "causal_chat"):
        shutil.copy(f"data-samples/{name}.jsonl", first)
    for name in ("nested_crowns", "sync_deadlock"):
        shutil.copy(f"data-samples/{name}.jsonl", second)
    return first, second


def _traces(warehouse: Path, table: str) -> set[str]:
    return {r["trace_id"] for r in read_delta(warehouse / table).to_pylist()}


def _drop_last_runs_commit(warehouse: Path) -> None:
    """What a run killed after its table commits and before its `runs` row leaves:
    its table versions, no runs row (and no intent: the crash before the intent
    existed is the harder case, nothing says which run the versions belong to)."""
    log = warehouse / "runs" / "_delta_log"
    last = sorted(p for p in log.iterdir() if p.suffix == ".json")[-1]
    last.unlink()
    shutil.rmtree(warehouse / "_causal" / "pending", ignore_errors=True)


@pytest.mark.parametrize("name", ["wh x", "wh[1]#?"], ids=["space", "glob"])
def test_a_warehouse_path_with_special_characters_works_for_writers_and_readers(
    spark: SparkSession, tmp_path: Path, name: str
) -> None:
    """Before: a space broke every read of committed tables (the encoded URIs delta-rs
    returns were handed to Spark as paths); `[` made Spark glob."""
    warehouse = tmp_path / name
    run_cli(["ingest", "data-samples", "--warehouse", str(warehouse), *CONF], session=spark)
    record = run_cli(["clocks", "--warehouse", str(warehouse), *CONF], session=spark)
    assert record.table_versions["events"] == 1
    reader = Warehouse(spark, warehouse, "deltalake")
    assert reader.read("events").count() == 56
    assert reader.read("trace_clocks").count() == 9
    assert read_delta(warehouse / "messages").num_rows == 30


def test_a_warehouse_path_with_percent_is_refused_before_anything_is_written(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Before: under `wh%20x` delta-rs wrote version 0 and then read `wh x` back, the
    commit "failed" after it happened, and the cleanup deleted the files version 0
    names (a table that cannot be read). delta-rs 1.6.6 cannot hold a table there at
    all: the warehouse is refused with a clear error before anything is written."""
    warehouse = tmp_path / "wh%20x"
    with pytest.raises(WarehouseError, match="holds '%'"):
        run_cli(["ingest", "data-samples", "--warehouse", str(warehouse), *CONF], session=spark)
    assert not warehouse.exists()


def test_no_stage_runs_on_versions_no_committed_run_wrote_together(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Before: a run that died between its table commits and its runs row left the
    tables at its versions and the next stage command read them (`clocks` here clocked
    the dead run's events). Now readers read the versions the last runs row names, and
    the next writing run rolls the dead run's versions back first and says so."""
    first, second = _two_inputs(tmp_path)
    warehouse = tmp_path / "wh"
    run_cli(["ingest", str(first), "--warehouse", str(warehouse), *CONF], session=spark)
    run_cli(["ingest", str(second), "--warehouse", str(warehouse), *CONF], session=spark)
    _drop_last_runs_commit(warehouse)
    assert _traces(warehouse, "events") == {"nested_crowns", "sync_deadlock"}  # uncommitted
    reader = Warehouse(spark, warehouse, "deltalake")
    committed = {r["trace_id"] for r in reader.read("events").select("trace_id").collect()}
    assert committed == {"fifo_violation", "causal_chat"}
    record = run_cli(["clocks", "--warehouse", str(warehouse), *CONF], session=spark)
    assert record.repaired is not None
    # quarantine is empty in both runs: its version changed no data and stays
    assert set(record.repaired.rolled_back) == {"events", "messages"}
    assert _traces(warehouse, "trace_clocks") == {"fifo_violation", "causal_chat"}
    assert _traces(warehouse, "messages") == {"fifo_violation", "causal_chat"}
    commands = [r["command"] for r in Ledger(str(warehouse)).rows()]
    assert commands == ["ingest", "repair", "clocks"]


def test_an_error_after_a_commit_keeps_the_files_that_version_names(
    spark: SparkSession, config, tmp_path: Path
) -> None:
    """Before: an error after delta-rs had written a table's version made the cleanup
    remove the staged files that version names (there was no hook either). Now abort
    keeps every file a log names; the next run rolls the version back."""
    from causal_spark.app.runs import run_job
    from causal_spark.app.stages import ingest_stage

    first, second = _two_inputs(tmp_path)
    warehouse = Warehouse(spark, tmp_path / "wh", "deltalake")
    run_job("ingest", [ingest_stage([str(first)])], spark=spark, config=config, warehouse=warehouse)

    def fail(table: str) -> None:
        if table == "messages":
            raise InjectedFailure("failing right after committing messages")

    with pytest.raises(InjectedFailure):
        run_job(
            "ingest",
            [ingest_stage([str(second)])],
            spark=spark,
            config=config,
            warehouse=warehouse,
            on_committed=fail,
        )
    # the uncommitted version of messages is whole: every file it names is there
    latest = read_delta(tmp_path / "wh" / "messages").to_pylist()
    assert {r["trace_id"] for r in latest} == {"nested_crowns", "sync_deadlock"}
    record = run_job(
        "ingest", [ingest_stage([str(first)])], spark=spark, config=config, warehouse=warehouse
    )
    assert record.repaired is not None and "messages" in record.repaired.rolled_back
    assert_df_equality(
        warehouse.read("messages"),
        warehouse.read("messages", as_of=record.previous_run),
        ignore_row_order=True,
    )


def test_stage_commands_refuse_inputs_from_different_ingests(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Before: `ingest` then `detect` (skipping `clocks`) committed a summary of the new
    events with the old clocks' statuses."""
    first, second = _two_inputs(tmp_path)
    warehouse = str(tmp_path / "wh")
    for argv in (["ingest", str(first)], ["clocks"], ["detect"], ["ingest", str(second)]):
        run_cli([*argv, "--warehouse", warehouse, *CONF], session=spark)
    before = Ledger(warehouse).rows()
    with pytest.raises(LineageError, match="different ingests"):
        run_cli(["detect", "--warehouse", warehouse, *CONF], session=spark)
    assert len(Ledger(warehouse).rows()) == len(before)  # nothing committed
    assert _traces(tmp_path / "wh", "trace_summary") == {"fifo_violation", "causal_chat"}


def test_staged_files_of_a_killed_run_are_removed_by_the_next_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Before: files a killed run had staged stayed for ever."""
    warehouse = tmp_path / "wh"
    run_cli(["ingest", "data-samples", "--warehouse", str(warehouse), *CONF], session=spark)
    # what a run killed while staging leaves: parquet files no log names, a scratch folder
    dead = warehouse / "events" / "data" / "20000101T000000-deadbeef"
    dead.mkdir(parents=True)
    shutil.copy(next((warehouse / "events" / "data").rglob("*.parquet")), dead / "part-0.parquet")
    scratch = warehouse / "_staging" / "20000101T000000-deadbeef" / "_scratch-events-1"
    scratch.mkdir(parents=True)
    (scratch / "links.parquet").write_bytes(b"x")
    committed = sorted(
        str(p) for p in (warehouse / "events" / "data").rglob("*.parquet") if dead not in p.parents
    )
    record = run_cli(["clocks", "--warehouse", str(warehouse), *CONF], session=spark)
    assert record.repaired is not None and record.repaired.removed_files == 2
    assert not dead.exists() and not (warehouse / "_staging").exists()
    # the files committed versions name are all still there
    assert all(os.path.exists(p) for p in committed)
    reader = Warehouse(spark, warehouse, "deltalake")
    assert reader.read("events", as_of=record.previous_run).count() == 56
    assert Ledger(str(warehouse)).rows()[-2]["command"] == "repair"


def test_a_run_that_committed_every_table_but_not_its_row_is_rolled_forward(
    spark: SparkSession, config, tmp_path: Path
) -> None:
    """DESIGN §6: forward if every table of that run is there (its intent lists them)."""
    from causal_spark.app.runs import run_job
    from causal_spark.app.stages import ingest_stage

    first, second = _two_inputs(tmp_path)
    warehouse = Warehouse(spark, tmp_path / "wh", "deltalake")
    run_job("ingest", [ingest_stage([str(first)])], spark=spark, config=config, warehouse=warehouse)

    def fail(table: str) -> None:
        if table == "quarantine":  # the last of ingest's tables
            raise InjectedFailure("dying before the runs row")

    with pytest.raises(InjectedFailure):
        run_job(
            "ingest",
            [ingest_stage([str(second)])],
            spark=spark,
            config=config,
            warehouse=warehouse,
            on_committed=fail,
        )
    assert len(warehouse.ledger.rows()) == 1
    record = run_job("clocks-free read", [], spark=spark, config=config, warehouse=warehouse)
    assert record.repaired is not None and record.repaired.rolled_forward is not None
    rows = warehouse.ledger.rows()
    assert [r["command"] for r in rows] == ["ingest", "ingest", "clocks-free read"]
    assert "rolled forward" in rows[1]["note"]
    events = {r["trace_id"] for r in warehouse.read("events").select("trace_id").collect()}
    assert events == {"nested_crowns", "sync_deadlock"}
    assert tables.RUNS not in rows[1]["table_versions"]
