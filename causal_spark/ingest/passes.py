"""One pass of ingest as a Spark job: typed rows -> two shuffles -> files (`ingest.tasks`)."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark._spark import shuffle_partitions
from causal_spark.ingest import rows_kernel as R
from causal_spark.ingest import tasks
from causal_spark.io.raw import Inputs

# input bytes per row we plan for (Parquet packs rows in about 20 bytes; text takes
# more): an over-estimate of the rows gives more, smaller tasks, never too few
BYTES_PER_ROW = 20


@dataclass
class PassResult:
    """What one pass wrote: the tables' files, the scratch files to read, the counts."""

    events: dict[str, int] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)
    rejects: list[str] = field(default_factory=list)  # step 2's
    late: list[str] = field(default_factory=list)  # step 3's
    facts: list[str] = field(default_factory=list)
    risky: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(tasks.COUNTS, 0))


def task_count(inputs: Inputs, rows_per_task: int, floor: int) -> int:
    """Shuffle partitions for a pass: enough that a task holds about rows_per_task rows."""
    estimate = sum(f.size for f in inputs.files) // BYTES_PER_ROW
    return max(floor, math.ceil(estimate / max(1, rows_per_task)))


def run_pass(
    typed: DataFrame,
    later: DataFrame | None,
    mixed_files: Collection[int],
    files: tasks.PassFiles,
    shown: Sequence[str],
    partitions: int,
) -> PassResult:
    """Steps 2 and 3 over `typed` (`rows_kernel.TYPED` columns), in three jobs and no
    shuffle: the typed rows written in `partitions` buckets by (trace, process) where they
    are read; step 2, a task a bucket, writing its message rows in `partitions` buckets
    by (trace, msg_id); step 3, a task a bucket.

    later: rows a later step rejected (`rows_kernel.TYPED` markers), from an earlier pass;
    mixed_files: files where some rows give `seq` and others do not.
    """
    rows = typed if later is None else typed.unionByName(later)
    spark = rows.sparkSession
    partitions = max(partitions, shuffle_partitions(spark))
    split = _collect(
        rows.mapInArrow(tasks.split_rows(files, partitions), tasks.spark_ddl(tasks.CARRIED))
    )
    typed_work = tasks.typed_work(split, partitions)
    carried = _collect(
        spark.range(0, partitions, 1, partitions).mapInArrow(
            tasks.by_process(files, mixed_files, typed_work, partitions),
            tasks.spark_ddl(tasks.CARRIED),
        )
    )
    result = PassResult()
    for role, path in zip(carried[tasks.ROLE].to_pylist(), carried[tasks.PATH].to_pylist(),
                          strict=True):  # fmt: skip
        if role == tasks.REJECTS_FILE:
            result.rejects.append(path)
        elif role == tasks.FACTS_FILE:
            result.facts.append(path)
    work = tasks.plan(carried, partitions)
    written = (
        spark.range(0, len(work), 1, len(work))
        .mapInArrow(tasks.by_message(files, shown, work), tasks.spark_ddl(tasks.RESULT))
        .collect()
    )
    for row in written:
        table, path, n = row["table"], row["path"], int(row["rows"])
        if table == "events":
            result.events[path] = n
        elif table == "messages":
            result.messages[path] = n
        elif table == tasks.LATE:
            result.late.append(path)
        elif table == tasks.RISKY:
            result.risky.append(path)
        for name in tasks.COUNTS:
            result.counts[name] += int(row[name] or 0)
    return result


def _collect(carriers: DataFrame) -> pa.Table:
    return pa.Table.from_pylist([r.asDict() for r in carriers.collect()], schema=tasks.CARRIED)


def markers(frame: DataFrame) -> DataFrame:
    """Rejected rows (`rows_kernel.REJECTS`) as `rows_kernel.TYPED` markers of rows to leave out."""
    values = {
        R.FILE_ID: F.col(R.FILE_ID),
        C.LINE: F.col(C.LINE),
        R.SUB: F.col(R.SUB),
        C.TRACE_ID: F.col(C.TRACE_ID),
        R.PPROC: F.col(C.PROCESS),
        R.EXCLUDED: F.lit(True),
    }
    return frame.select(
        *[
            (values[f.name] if f.name in values else F.lit(None))
            .cast(tasks.spark_ddl(pa.schema([f])).split(" ", 1)[1])
            .alias(f.name)
            for f in R.TYPED
        ]
    )
