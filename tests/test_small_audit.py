"""A small audit's fixed cost: the Spark jobs each stage runs on `data-samples/` (issue 19).

The warm audit of 62 rows spends its time in Spark actions, not in rows: each job costs
its planning and scheduling whatever its size. This pins how many jobs each stage runs,
through the real session (a job group per stage, counted by Spark's status tracker), so
a change that adds actions to the small path shows here. A change that removes some
lowers the pins.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.app.cli import run
from causal_spark.app.progress import Progress
from causal_spark.app.warmup import LARGE_INPUT_BYTES, small_inputs
from causal_spark.clocks import per_trace, units_kernel
from causal_spark.clocks.recorded import RECORDED_VC
from causal_spark.clocks.units_kernel import units_clocks_at
from causal_spark.sinks import Warehouse

# jobs per stage of `audit data-samples/ --protocols none` with conf/test.yml (clocks 49 -> 45:
# clocks19k dropped fixed checkpoints and aggregates, bench/README.md "Stop 41")
JOBS = {"ingest": 8, "clocks": 45, "detect": 35, "replay": 7, "compare": 6}


class _Grouped(Progress):
    """Puts each stage's Spark jobs in a job group of its own (`<label>:<stage>`)."""

    def __init__(self, spark: SparkSession, label: str) -> None:
        super().__init__(quiet=True)
        self.spark = spark
        self.label = label
        self.stages: list[str] = []

    def started(self, stage: str) -> None:
        self.stages.append(stage)
        self.spark.sparkContext.setJobGroup(f"{self.label}:{stage}", stage)

    def ended(self, stage: str, rows: dict[str, int], seconds: float) -> None:
        self.spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def jobs_per_stage(spark: SparkSession, argv: list[str], label: str) -> dict[str, int]:
    """Run the job of `argv` in `spark`; the Spark jobs each of its stages ran."""
    grouped = _Grouped(spark, label)
    run(argv, session=spark, progress=grouped)
    # the status tracker learns of jobs from the listener bus: let it catch up first
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()  # type: ignore[union-attr]
    tracker = spark.sparkContext.statusTracker()
    return {stage: len(tracker.getJobIdsForGroup(f"{label}:{stage}")) for stage in grouped.stages}


def test_a_small_audit_runs_its_pinned_spark_jobs_per_stage(
    spark: SparkSession, tmp_path: Path
) -> None:
    argv = ["audit", "data-samples", "--warehouse", str(tmp_path / "wh"), "--conf", "conf/test.yml"]
    # as a fresh process runs it: the per-trace engine's group keys are found by a Spark job
    # once per process (`per_trace._GROUP_KEYS`), so an earlier test's run would hide it
    per_trace._GROUP_KEYS.clear()
    found = jobs_per_stage(spark, [*argv, "--protocols", "none"], "small-audit")
    assert found == JOBS


def _events(recorded: list[list[int] | None], lamport: list[int | None]) -> pa.Table:
    """`events` rows of one process, with the given recorded clocks and Lamport clocks."""
    rows = len(recorded)
    given = {
        C.TRACE_ID: ["t"] * rows,
        C.PROCESS: ["p"] * rows,
        C.PIDX: [0] * rows,
        C.LSEQ: list(range(1, rows + 1)),
        C.KIND: ["internal"] * rows,
        C.N_MSGS: [0] * rows,
        C.SOURCE: ["s"] * rows,
        C.LINE: list(range(1, rows + 1)),
        C.LAMPORT: lamport,
        RECORDED_VC: recorded,
    }
    schema = tables.arrow_schema(tables.EVENTS)
    return pa.table(
        [pa.array(given.get(f.name, [None] * rows), f.type) for f in schema], schema=schema
    )


@pytest.mark.parametrize(
    ("recorded", "lamport", "values", "nulls"),
    [
        ([None, None, None], [1, 2, 3], False, 0),  # no recorded clock, every Lamport clock
        ([None, [1, 2], None], [1, None, 3], True, 1),  # a value in the footers' statistics
        ([None, [], None], [None, None, 3], True, 2),  # an empty list: only a read tells
    ],
)
def test_the_staged_files_footers_tell_values_and_nulls(
    spark: SparkSession,
    tmp_path: Path,
    recorded: list[list[int] | None],
    lamport: list[int | None],
    values: bool,
    nulls: int,
) -> None:
    """What the clocks stage asks of its staged events before it skips a Spark job: whether
    some event carries a recorded clock, how many lack a Lamport clock."""
    with Warehouse(spark, tmp_path / "wh").transaction("run-1") as txn:
        staged = txn.stage_arrow(tables.EVENTS, _events(recorded, lamport))
        assert txn.staged_values(tables.EVENTS, RECORDED_VC) is values
        assert txn.staged_nulls(tables.EVENTS, C.LAMPORT) == nulls
        # and the rows read back as staged
        assert [r[C.LAMPORT] for r in staged.orderBy(C.LSEQ).collect()] == lamport


def test_the_units_kernel_without_rolling_serves_only_units_that_cannot_roll() -> None:
    """A small unit runs the kernel compiled without the rolling traversal; one at the
    rolling size (here made small by the thresholds) runs the whole kernel, and the
    dense-only kernel refuses it rather than compute it otherwise."""
    unit_row, unit_proc = np.array([0, 3, 5]), np.array([0, 2, 3])
    vectors = np.ones(2, dtype=np.bool_)
    assert units_kernel._kernel_for(unit_row, unit_proc, vectors, 1 << 30, 1 << 26) is (
        units_kernel._dense_units_clocks
    )
    # 3 rows x 2 processes = 6 cells: rolls from rolling_min_cells 6 (or dense_max_cells 5)
    for dense_max, rolling_min in ((1 << 30, 6), (5, 1 << 26)):
        chosen = units_kernel._kernel_for(unit_row, unit_proc, vectors, dense_max, rolling_min)
        assert chosen is units_kernel._units_clocks
    without = np.array([False, True])  # a unit without vectors never rolls
    assert units_kernel._kernel_for(unit_row, unit_proc, without, 5, 1 << 26) is (
        units_kernel._dense_units_clocks
    )
    length = np.array([2, 1, 2])
    send_event = np.array([-1, -1, 0, -1, -1])
    out_rows = np.arange(5)
    with pytest.raises(ValueError, match="rolling kernel"):
        units_kernel._dense_units_clocks(
            unit_row, unit_proc, np.array([0, 2, 3]), length, send_event, out_rows, out_rows,
            vectors, 0, 1 << 26,
        )  # fmt: skip
    rolled = units_clocks_at(unit_row, unit_proc, length, send_event, out_rows, dense_max_cells=0)
    dense = units_clocks_at(unit_row, unit_proc, length, send_event, out_rows)
    assert np.array_equal(rolled.vc, dense.vc) and np.array_equal(rolled.lamport, dense.lamport)
    # one disk-cache index each: two processes saving one variant each cannot mix them
    kernels = (units_kernel._units_clocks, units_kernel._dense_units_clocks)
    assert len({k._cache._cache_file._index_name for k in kernels}) == 2


def test_small_inputs_are_told_by_their_bytes(tmp_path: Path) -> None:
    """The job's warm-up leaves the large-input kernels out below LARGE_INPUT_BYTES."""
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.jsonl").write_bytes(b"x" * 1000)
    assert small_inputs([str(folder)])
    assert small_inputs([str(folder / "a.jsonl")], limit=1001)
    assert not small_inputs([str(folder / "a.jsonl")], limit=1000)
    with open(folder / "sub" / "big.parquet", "wb") as handle:
        handle.truncate(LARGE_INPUT_BYTES)  # sparse: its size, not its blocks
    assert not small_inputs([str(folder)])
    assert small_inputs([str(folder / "a.jsonl"), "data-samples"])


def test_the_counts_of_staged_values_are_sparks_counts_over_many_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The counts a stage reports of a table it staged (violations by kind, runs by status
    and verification) are counted on the driver file by file: they equal Spark's own count
    of the staged rows, nulls included, over a table of several files."""
    violations = [
        (f"t{i % 13}", "fifo" if i % 3 else "causal", f"p{i % 4}", "p9", f"m{i}", f"n{i}", "p9", [])
        for i in range(60)
    ]
    clocks = [
        (f"t{i}", 2, 10, 1, "per_trace", 0, "INVALID" if i % 4 else "ok", None,
         None if i % 3 else "why")
        for i in range(40)
    ]  # fmt: skip
    with Warehouse(spark, tmp_path / "wh").transaction("run-1") as txn:
        for table, rows, columns in (
            (tables.VIOLATIONS, violations, ("kind", "dst")),
            (tables.TRACE_CLOCKS, clocks, ("status", "reason")),
        ):
            frame = spark.createDataFrame(rows, tables.udf_schema(table))
            staged = txn.stage(table, frame.repartition(4, C.TRACE_ID))
            assert len(txn.staged[table].files) > 1
            for column in columns:
                counted = staged.groupBy(column).count().collect()
                expected = {row[column]: row["count"] for row in counted}
                assert dict(txn.staged_value_counts(table, column)) == expected
