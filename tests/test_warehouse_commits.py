"""Issue 17, the commit points: a warehouse that loses nothing and is never read half-committed.

Each test here failed on the code before this branch (d63b0b3); the docstring says how.

Two input folders of different traces; the first is ingested once per module (`ingested`)
and the tests run their jobs on copies of it, or of the session's `detected_samples`.
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
from causal_spark.app.runs import LineageError, run_job
from causal_spark.app.stages import ingest_stage
from causal_spark.config import Config
from causal_spark.io.ledger import Ledger, WarehouseError
from causal_spark.io.sinks import Warehouse
from tests.conftest import read_delta

CONF = ["--conf", "conf/test.yml"]
DATA = ["events", "messages", "quarantine"]


class InjectedFailure(RuntimeError):
    pass


class Ingested:
    """Two input folders of different traces, and a warehouse that ingested the first."""

    def __init__(self, root: Path, spark: SparkSession, config: Config) -> None:
        self.first, self.second = root / "in-a", root / "in-b"
        self.first.mkdir()
        self.second.mkdir()
        for name in ("fifo_violation", "causal_chat"):
            shutil.copy(f"data-samples/{name}.jsonl", self.first)
        for name in ("nested_crowns", "sync_deadlock"):
            shutil.copy(f"data-samples/{name}.jsonl", self.second)
        self.warehouse = root / "wh"
        run_job(
            "ingest",
            [ingest_stage([str(self.first)])],
            spark=spark,
            config=config,
            warehouse=Warehouse(spark, self.warehouse, "deltalake"),
        )

    def copy(self, target: Path) -> Path:
        """A private copy of the warehouse, for a test that runs jobs on it."""
        return shutil.copytree(self.warehouse, target)


@pytest.fixture(scope="module")
def ingested(
    spark: SparkSession, config: Config, tmp_path_factory: pytest.TempPathFactory
) -> Ingested:
    return Ingested(tmp_path_factory.mktemp("commits"), spark, config)


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


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wh x", "wh[1]#?"], ids=["space", "glob"])
def test_a_warehouse_path_with_special_characters_works_for_writers_and_readers(
    spark: SparkSession, tmp_path: Path, ingested: Ingested, name: str
) -> None:
    """Before: a space broke every read of committed tables (the encoded URIs delta-rs
    returns were handed to Spark as paths); `[` made Spark glob.

    `clocks` under the path reads committed tables, writes a new version of one (events,
    from its tasks' files) and creates another (trace_clocks, by Spark's writer)."""
    warehouse = ingested.copy(tmp_path / name)
    assert not (warehouse / "trace_clocks").exists()
    record = run_cli(["clocks", "--warehouse", str(warehouse), *CONF], session=spark)
    assert record.table_versions == {
        "events": 1,
        "trace_clocks": 0,
        "clock_mismatches": 0,
        "runs": 1,
    }
    reader = Warehouse(spark, warehouse, "deltalake")
    events = reader.read("events")
    assert events.count() == 10 and events.where("vc is not null").count() == 10
    assert reader.read("trace_clocks").count() == 2
    assert read_delta(warehouse / "messages").num_rows == 6


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


@pytest.mark.slow
def test_no_stage_runs_on_versions_no_committed_run_wrote_together(
    spark: SparkSession, tmp_path: Path, ingested: Ingested
) -> None:
    """Before: a run that died between its table commits and its runs row left the
    tables at its versions and the next stage command read them (`clocks` here clocked
    the dead run's events). Now readers read the versions the last runs row names, and
    the next writing run rolls the dead run's versions back first and says so."""
    warehouse = ingested.copy(tmp_path / "wh")
    run_cli(["ingest", str(ingested.second), "--warehouse", str(warehouse), *CONF], session=spark)
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


@pytest.mark.slow
def test_an_error_after_a_commit_keeps_the_files_that_version_names(
    spark: SparkSession, config: Config, tmp_path: Path, ingested: Ingested
) -> None:
    """Before: an error after delta-rs had written a table's version made the cleanup
    remove the staged files that version names (there was no hook either). Now abort
    keeps every file a log names; the next run rolls the version back."""
    first, second = ingested.first, ingested.second
    warehouse = Warehouse(spark, ingested.copy(tmp_path / "wh"), "deltalake")

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


@pytest.mark.slow
def test_stage_commands_refuse_inputs_from_different_ingests(
    spark: SparkSession, tmp_path: Path, ingested: Ingested, detected_samples: Path
) -> None:
    """Before: `ingest` then `detect` (skipping `clocks`) committed a summary of the new
    events with the old clocks' statuses.

    The warehouse ingested, clocked and detected data-samples (the session's audit),
    then ingests the second folder alone."""
    warehouse = str(shutil.copytree(detected_samples, tmp_path / "wh"))
    summary = sorted(map(str, read_delta(tmp_path / "wh" / "trace_summary").to_pylist()))
    assert len(summary) > 2  # every trace of data-samples, not only the second folder's
    run_cli(["ingest", str(ingested.second), "--warehouse", warehouse, *CONF], session=spark)
    before = Ledger(warehouse).rows()
    assert [r["command"] for r in before] == ["audit", "ingest"]
    with pytest.raises(LineageError, match="different ingests"):
        run_cli(["detect", "--warehouse", warehouse, *CONF], session=spark)
    assert len(Ledger(warehouse).rows()) == len(before)  # nothing committed
    assert sorted(map(str, read_delta(tmp_path / "wh" / "trace_summary").to_pylist())) == summary


@pytest.mark.slow
def test_staged_files_of_a_killed_run_are_removed_by_the_next_run(
    spark: SparkSession, tmp_path: Path, detected_samples: Path
) -> None:
    """Before: files a killed run had staged stayed for ever."""
    warehouse = shutil.copytree(detected_samples, tmp_path / "wh")  # data-samples audited
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


@pytest.mark.slow
def test_a_run_that_committed_every_table_but_not_its_row_is_rolled_forward(
    spark: SparkSession, config: Config, tmp_path: Path, ingested: Ingested
) -> None:
    """DESIGN §6: forward if every table of that run is there (its intent lists them)."""
    second = ingested.second
    warehouse = Warehouse(spark, ingested.copy(tmp_path / "wh"), "deltalake")

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
