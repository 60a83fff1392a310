"""The Delta sink through real jobs: tables, idempotence, atomicity, the runs ledger.

data-samples is ingested once per module (`ingested`): tests read it, or run their job on a
copy; the audited warehouse is the session's `detected_samples` (ingest, clocks, detect)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark import tables
from causal_spark.app.cli import run as run_cli
from causal_spark.app.runs import RunRecord, run_job
from causal_spark.app.stages import clocks_stage, ingest_stage
from causal_spark.clocks import ClockResult, with_clocks
from causal_spark.config import ClockSettings, Config
from causal_spark.io.ledger import Ledger
from causal_spark.sinks import FILES_SCHEMA, FileWriter, Warehouse, WarehouseError
from tests.conftest import read_delta

DATA = ["events", "messages", "quarantine"]


class InjectedFailure(RuntimeError):
    pass


def _ingest(spark: SparkSession, config: Config, warehouse: Path, inputs: list[str], **kw):
    return run_job(
        "ingest",
        [ingest_stage(inputs)],
        spark=spark,
        config=config,
        warehouse=Warehouse(spark, warehouse, "deltalake"),
        **kw,
    )


def _sorted(table: str, warehouse: Path) -> list[dict[str, object]]:
    rows = read_delta(warehouse / table).to_pylist()
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _files(warehouse: Path) -> list[str]:
    """Every file under `warehouse` (folders are not counted: a run's cleanup may remove an
    empty one, such as the data folder of a table committed with no rows)."""
    return sorted(str(p.relative_to(warehouse)) for p in warehouse.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def ingested(
    spark: SparkSession, config: Config, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, RunRecord]:
    """data-samples ingested by one `ingest` run, and its record: read it, or copy it
    (`shutil.copytree`) to run a job on it."""
    warehouse = tmp_path_factory.mktemp("ingested") / "wh"
    return warehouse, _ingest(spark, config, warehouse, ["data-samples"])


@pytest.mark.slow
def test_ingest_writes_delta_tables_readable_by_delta_rs(
    ingested: tuple[Path, RunRecord],
) -> None:
    warehouse, record = ingested
    for table in [*DATA, "runs"]:
        assert (warehouse / table / "_delta_log").is_dir()
        arrow = read_delta(warehouse / table)
        assert arrow.schema.names == tables.table_schema(table).names
        assert arrow.num_rows == record.counts.get(table, 1)
    assert record.counts["events"] == 56 and record.counts["quarantine"] == 4


@pytest.mark.slow
def test_rerun_on_same_input_gives_same_content_and_new_versions(
    spark: SparkSession, config: Config, tmp_path: Path, ingested: tuple[Path, RunRecord]
) -> None:
    base, first = ingested
    warehouse = shutil.copytree(base, tmp_path / "wh")
    before = {t: _sorted(t, warehouse) for t in DATA}
    second = _ingest(spark, config, warehouse, ["data-samples"])
    after = {t: _sorted(t, warehouse) for t in DATA}
    assert before == after
    for table in DATA:
        assert second.table_versions[table] == first.table_versions[table] + 1
    runs = read_delta(warehouse / "runs").to_pylist()
    assert sorted(r["id"] for r in runs) == sorted([first.run_id, second.run_id])
    # superseded files are no longer part of the table
    assert len(read_delta(warehouse / "events")) == first.counts["events"]


@pytest.mark.slow
def test_tables_do_not_depend_on_partitioning(
    spark: SparkSession, config: Config, tmp_path: Path, ingested: tuple[Path, RunRecord]
) -> None:
    one = Warehouse(spark, ingested[0], "deltalake")  # ingested under conf/test.yml
    default = config.spark.conf["spark.sql.shuffle.partitions"]
    assert spark.conf.get("spark.sql.shuffle.partitions") == default != "13"
    spark.conf.set("spark.sql.shuffle.partitions", "13")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1024")
    try:
        many = Warehouse(spark, tmp_path / "b", "deltalake")
        run_job(
            "ingest", [ingest_stage(["data-samples"])], spark=spark, config=config, warehouse=many
        )
        for table in DATA:
            assert_df_equality(one.read(table), many.read(table), ignore_row_order=True)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", default)
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


@pytest.mark.slow
@pytest.mark.parametrize("fail_after", ["events", "quarantine"])
def test_failed_run_leaves_no_new_version_and_no_staged_files(
    spark: SparkSession,
    config: Config,
    tmp_path: Path,
    ingested: tuple[Path, RunRecord],
    fail_after: str,
) -> None:
    base, first = ingested
    warehouse_path = shutil.copytree(base, tmp_path / "wh")
    files_before = _files(warehouse_path)

    staged: list[str] = []

    def fail(table: str) -> None:
        staged.append(table)
        if table == fail_after:
            raise InjectedFailure(f"failing on purpose after staging {table}")

    with pytest.raises(InjectedFailure):
        _ingest(
            spark,
            config,
            warehouse_path,
            ["data-samples"],
            on_staged=fail,
        )
    assert staged[-1] == fail_after  # the run failed there, after staging it
    warehouse = Warehouse(spark, warehouse_path, "deltalake")
    for table in [*DATA, "runs"]:
        assert warehouse.version(table) == first.table_versions.get(table, 0)
    assert _files(warehouse_path) == files_before


@pytest.mark.slow
def test_failed_first_run_leaves_no_tables(
    spark: SparkSession, config: Config, tmp_path: Path
) -> None:
    def fail(table: str) -> None:
        raise InjectedFailure("failing on purpose")

    with pytest.raises(InjectedFailure):
        _ingest(spark, config, tmp_path / "wh", ["data-samples"], on_staged=fail)
    leftovers = (
        [p for p in (tmp_path / "wh").rglob("*") if p.is_file()]
        if (tmp_path / "wh").exists()
        else []
    )
    # only the writer lock (kept: removing a lock file races with its next taker)
    assert sorted(p.name for p in leftovers) == ["writer.json", "writer.lock"]
    assert {p.parent.name for p in leftovers} == {"_causal"}


def test_runs_table_records_inputs_config_and_versions(
    ingested: tuple[Path, RunRecord],
) -> None:
    warehouse, record = ingested
    (run,) = read_delta(warehouse / "runs").to_pylist()
    assert run["id"] == record.run_id and run["command"] == "ingest"
    assert run["start"] <= run["end"]
    (given,) = run["inputs"]
    assert (given["path"], given["format"], given["n_files"]) == ("data-samples", "jsonl", 9)
    assert len(given["fingerprint"]) == 64
    assert json.loads(run["config"])["profile"] == "test"
    assert dict(run["table_versions"]) == {"events": 0, "messages": 0, "quarantine": 0}
    counts = dict(run["counts"])
    assert counts["rows_read"] == 62
    assert counts["rows_read"] == (
        counts["internal_events"]
        + counts["send_rows"]
        + counts["receive_rows"]
        + counts["quarantine"]
    )


@pytest.mark.slow
def test_fingerprint_changes_when_an_input_changes(
    spark: SparkSession, config: Config, tmp_path: Path
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    sample = Path("data-samples/fifo_violation.jsonl").read_text()
    (inputs / "t.jsonl").write_text(sample)
    first = _ingest(spark, config, tmp_path / "wh", [str(inputs)])
    (inputs / "t.jsonl").write_text(sample + "\n")
    os.utime(inputs / "t.jsonl", ns=(1, 1))
    second = _ingest(spark, config, tmp_path / "wh", [str(inputs)])
    prints = {
        r["id"]: r["inputs"][0]["fingerprint"]
        for r in read_delta(tmp_path / "wh" / "runs").to_pylist()
    }
    assert prints[first.run_id] != prints[second.run_id]


def test_reading_a_missing_table_is_a_clear_error(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match="table 'events' does not exist"):
        Warehouse(spark, tmp_path, "deltalake").read("events")


def _audit(spark: SparkSession, config: Config, warehouse: Path, **kw):
    return run_job(
        "audit",
        [ingest_stage(["data-samples"]), clocks_stage()],
        spark=spark,
        config=config,
        warehouse=Warehouse(spark, warehouse, "deltalake"),
        **kw,
    )


@pytest.mark.slow
def test_audit_restages_events_with_clocks_and_keeps_one_copy(detected_samples: Path) -> None:
    # the session's audit of data-samples: ingest, clocks (and detect) in one run
    events = read_delta(detected_samples / "events").to_pylist()
    assert len(events) == 56 and sum(e["vc"] is None for e in events) == 4  # causal_cycle
    # the events staged by ingest were superseded by the clocked ones and removed
    assert len(list((detected_samples / "events" / "data").iterdir())) == 1
    (record,) = Ledger(str(detected_samples)).rows()
    assert record["command"] == "audit"
    assert record["table_versions"]["events"] == 0 and record["counts"]["invalid_traces"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("fail_after", ["trace_clocks"])
def test_failed_audit_after_restaging_leaves_nothing_behind(
    spark: SparkSession, config: Config, tmp_path: Path, detected_samples: Path, fail_after: str
) -> None:
    warehouse_path = shutil.copytree(detected_samples, tmp_path / "wh")
    (first,) = Ledger(str(warehouse_path)).rows()
    files_before = _files(warehouse_path)

    staged: list[str] = []

    def fail(table: str) -> None:
        staged.append(table)
        if table == fail_after:
            raise InjectedFailure(f"failing on purpose after staging {table}")

    with pytest.raises(InjectedFailure):
        _audit(
            spark,
            config,
            warehouse_path,
            on_staged=fail,
        )
    # it failed after clocks had restaged the events ingest staged
    assert staged.count("events") == 2 and staged[-1] == fail_after
    warehouse = Warehouse(spark, warehouse_path, "deltalake")
    for table in ["events", "trace_clocks", "runs"]:
        assert warehouse.version(table) == first["table_versions"].get(table, 0)
    assert _files(warehouse_path) == files_before


@pytest.mark.slow
def test_clocks_command_rewrites_events_of_an_ingested_warehouse(
    spark: SparkSession, tmp_path: Path, ingested: tuple[Path, RunRecord]
) -> None:
    warehouse = str(shutil.copytree(ingested[0], tmp_path / "wh"))
    conf = ["--conf", "conf/test.yml"]
    assert all(e["vc"] is None for e in read_delta(tmp_path / "wh" / "events").to_pylist())
    record = run_cli(["clocks", "--warehouse", warehouse, "--matrix", *conf], session=spark)
    assert set(record.table_versions) == {
        "events",
        "trace_clocks",
        "matrix_clocks",
        "clock_mismatches",
        "runs",
    }
    events = read_delta(tmp_path / "wh" / "events").to_pylist()
    assert sum(e["vc"] is not None for e in events) == 52
    status = {
        r["trace_id"]: r["status"] for r in read_delta(tmp_path / "wh" / "trace_clocks").to_pylist()
    }
    assert status.pop("causal_cycle") == "INVALID" and set(status.values()) == {"ok"}
    assert len(read_delta(tmp_path / "wh" / "matrix_clocks")) == 52


# --- stage_through: files written by the tasks that compute the rows ------------------------


def _clocked_samples(spark: SparkSession, ingested: Path, settings: ClockSettings) -> ClockResult:
    """The clocks (not yet written) of data-samples as `ingested` holds them (read only)."""
    source = Warehouse(spark, ingested, "deltalake")
    return with_clocks(source.read("events"), source.read("messages"), settings)


@pytest.fixture(scope="module")
def spark_written(
    spark: SparkSession,
    config: Config,
    tmp_path_factory: pytest.TempPathFactory,
    ingested: tuple[Path, RunRecord],
) -> Path:
    """A warehouse whose events are data-samples' clocked events written by Spark's writer
    (`txn.stage`), clocked once for the module by the profile's engine: the reference the
    tasks' files of every engine are held to (the engines give the same rows)."""
    result = _clocked_samples(spark, ingested[0], config.clocks)
    folder = tmp_path_factory.mktemp("spark-written")
    with Warehouse(spark, folder, "deltalake").transaction("a") as txn:
        txn.stage("events", result.events)
        txn.commit()
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(
    "settings",
    [
        # 4-event traces cogrouped, larger ones clocked in place (by the tasks reading them)
        ClockSettings(engine="per_trace", slab_events=5, output_parts=2),
        ClockSettings(engine="distributed", slab_events=5),
    ],
    ids=["per_trace", "distributed"],
)
def test_events_written_by_tasks_equal_sparks_write(
    spark: SparkSession,
    tmp_path: Path,
    ingested: tuple[Path, RunRecord],
    spark_written: Path,
    settings: ClockSettings,
) -> None:
    result = _clocked_samples(spark, ingested[0], settings)
    by_spark = Warehouse(spark, spark_written, "deltalake")
    by_tasks = Warehouse(spark, tmp_path / "tasks", "deltalake")
    scratches: list[str] = []

    def files(writer: FileWriter) -> DataFrame:
        written = result.run_and_write(writer)
        if settings.engine == "per_trace":  # the in-place pass has staged its links
            assert os.listdir(writer.scratch)
        scratches.append(writer.scratch)
        return written

    with by_tasks.transaction("b") as txn:
        staged = txn.stage_through("events", files)
        assert txn.staged_rows("events") == 56
        txn.commit()
    # the scratch folder (the per-trace engine's staged links) is gone with the job
    assert scratches and scratches[0].startswith(str(tmp_path / "tasks" / "_staging"))
    assert not os.path.exists(scratches[0])
    # the same table, read back by Spark and by delta-rs
    assert_df_equality(
        by_tasks.read_latest("events"), by_spark.read_latest("events"), ignore_row_order=True
    )
    assert_df_equality(staged, by_spark.read_latest("events"), ignore_row_order=True)
    assert _sorted("events", tmp_path / "tasks") == _sorted("events", spark_written)
    assert sum(e["vc"] is None for e in read_delta(tmp_path / "tasks" / "events").to_pylist()) == 4
    # the files themselves have the schema Spark's writer gives them
    files = {
        name: sorted((root / "events").rglob("*.parquet"))
        for name, root in (("spark", spark_written), ("tasks", tmp_path / "tasks"))
    }
    assert len(files["tasks"]) >= 2  # written by several tasks
    spark_schema = pq.read_schema(files["spark"][0]).remove_metadata()
    for file in files["tasks"]:
        assert pq.read_schema(file).remove_metadata().equals(spark_schema)
    group = pq.ParquetFile(files["tasks"][0]).metadata.row_group(0)
    leaves = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert not leaves["vc.list.element"].has_dictionary_page
    assert leaves["trace_id"].has_dictionary_page


def test_file_writer_refuses_a_null_the_schema_forbids(tmp_path: Path) -> None:
    writer = FileWriter("events", str(tmp_path / "out"))
    rows = pa.Table.from_pylist(
        [{f.name: None for f in tables.arrow_schema("events")}],
        schema=tables.to_arrow(tables.udf_schema("events")),
    )
    with pytest.raises(ValueError, match=r"events\.trace_id must not be null"):
        writer.write(rows)
    with pytest.raises(tables.SchemaMismatchError, match=r"needs columns \['vc'\]"):
        writer.write(rows.drop_columns(["vc"]))
    assert writer.write(rows.slice(0, 0)).num_rows == 0
    assert not (tmp_path / "out").exists()  # nothing written for no rows


def test_stage_through_commits_only_the_files_tasks_reported(
    spark: SparkSession, config: Config, tmp_path: Path, ingested: tuple[Path, RunRecord]
) -> None:
    result = _clocked_samples(spark, ingested[0], config.clocks)
    target = Warehouse(spark, tmp_path / "out", "deltalake")

    def with_a_stray_file(writer: FileWriter) -> DataFrame:
        # what a failed task attempt leaves behind: a file no returned row names
        os.makedirs(writer.folder, exist_ok=True)
        pq.write_table(pa.table({"x": [1]}), os.path.join(writer.folder, "part-stray.parquet"))
        return result.run_and_write(writer)

    with target.transaction("r") as txn:
        txn.stage_through("events", with_a_stray_file)
        txn.commit()
    folder = next((tmp_path / "out" / "events" / "data").iterdir())
    assert "part-stray.parquet" not in os.listdir(folder)
    assert len(read_delta(tmp_path / "out" / "events")) == 56


@pytest.mark.slow
def test_a_failing_in_place_clocks_stage_removes_its_scratch(
    spark: SparkSession, tmp_path: Path, ingested: tuple[Path, RunRecord]
) -> None:
    """The in-place pass stages links in the writer's scratch folder; when one of its tasks
    fails (an lseq past its process's count), the run fails and the folder is gone."""
    source = Warehouse(spark, ingested[0], "deltalake")
    events, messages = source.read("events"), source.read("messages")
    settings = ClockSettings(engine="per_trace", slab_events=5)
    plan = with_clocks(events, messages, settings).plan
    victim = plan.where(F.col("unit_events") > 5).orderBy("trace_id", "pidx").first()
    assert victim is not None
    hit = (F.col("trace_id") == victim["trace_id"]) & (F.col("pidx") == victim["pidx"])
    broken = events.withColumn(
        "lseq", F.when(hit & (F.col("lseq") == 1), F.lit(10_000)).otherwise(F.col("lseq"))
    )
    result = with_clocks(broken, messages, settings)
    target = Warehouse(spark, tmp_path / "out", "deltalake")
    staged: list[list[str]] = []

    def files(writer: FileWriter) -> DataFrame:
        written = result.run_and_write(writer)
        staged.append(os.listdir(writer.scratch))
        return written

    with (
        pytest.raises(Exception, match=r"lseq is outside 1\.\.its process.s event count"),
        target.transaction("r") as txn,
    ):
        txn.stage_through("events", files)
    assert staged and staged[0]  # the links were staged before the task failed
    assert not (tmp_path / "out" / "_staging").exists()
    assert not target.exists("events")


@pytest.mark.slow
def test_a_task_writing_a_forbidden_null_fails_the_run_and_stages_nothing(
    spark: SparkSession, config: Config, tmp_path: Path, ingested: tuple[Path, RunRecord]
) -> None:
    result = _clocked_samples(spark, ingested[0], config.clocks)
    broken = result.events.withColumn("process", F.lit(None).cast("string"))
    target = Warehouse(spark, tmp_path / "out", "deltalake")

    def produce(writer: FileWriter) -> DataFrame:
        def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            yield from writer.write(pa.Table.from_batches(list(batches))).to_batches()

        return broken.mapInArrow(write, FILES_SCHEMA)

    with (
        pytest.raises(Exception, match=r"events\.process must not be null"),
        target.transaction("r") as txn,
    ):
        txn.stage_through("events", produce)
    assert not target.exists("events")
    assert not (tmp_path / "out" / "events").exists()
    assert not (tmp_path / "out" / "_staging").exists()  # nor a scratch folder
