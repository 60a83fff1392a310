"""One pass of ingest as Spark jobs: typed rows -> buckets of files -> files (`ingest.tasks`)."""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark._spark import shuffle_partitions
from causal_spark.ingest import rows_kernel as R
from causal_spark.ingest import tasks
from causal_spark.ingest.typed import type_rows
from causal_spark.io.raw import RAW_SCHEMA, Inputs, TaskRows, TaskSource, spark_path, union_raw

# input bytes per row we plan for (Parquet packs rows in about 20 bytes; a line of text
# takes more: the generated JSON Lines about 140): an over-estimate of the rows gives
# more, smaller tasks, never too few
BYTES_PER_ROW = 20
TEXT_BYTES_PER_ROW = 60
_PACKED = frozenset({"parquet", "delta"})


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


def estimated_rows(inputs: Inputs) -> int:
    """The input's rows as we plan for them (from the files' sizes: an over-estimate)."""
    return sum(
        f.size // (BYTES_PER_ROW if f.reader in _PACKED else TEXT_BYTES_PER_ROW)
        for f in inputs.files
    )


def task_count(inputs: Inputs, rows_per_task: int, floor: int) -> int:
    """Shuffle partitions for a pass: enough that a task holds about rows_per_task rows."""
    return max(floor, math.ceil(estimated_rows(inputs) / max(1, rows_per_task)))


def split_typed(typed: DataFrame, files: tasks.PassFiles, partitions: int) -> list[tuple[str, ...]]:
    """Step 1's end, one Spark job: the typed rows (`rows_kernel.TYPED` columns) written in
    `partitions` buckets by (trace, process) where they are read; the files of each bucket.
    Every pass reads these (a later pass adds its markers: `with_markers`), so the input
    is read and typed once whatever the number of passes."""
    split = _collect(
        typed.mapInArrow(tasks.split_rows(files, partitions), tasks.spark_ddl(tasks.CARRIED))
    )
    return tasks.typed_work(split, partitions)


def split_made(
    spark: SparkSession,
    made: TaskRows,
    inputs: Inputs,
    files: tasks.PassFiles,
    partitions: int,
    hopeful: bool = False,
) -> list[tuple[str, ...]]:
    """`split_typed` where Python tasks make the raw rows (`made`: the readers'
    `io.raw.TaskRows`), in one Spark job: each task types its plain rows on Arrow and
    writes them in buckets (`tasks.made_and_split`), so they never cross into the JVM;
    the other rows (and the rest's, read by Spark) go through `typed.type_rows`, as
    `split_typed` takes them; the files of each bucket.

    `hopeful` (and no rest): the job builds no `type_rows` plan (planning it costs the
    driver seconds, serial); the tasks write the rows that are not plain aside, and only
    if some are, a second job types them (`_split_aside`)."""
    buckets = max(partitions, shuffle_partitions(spark))
    default_traces: list[str | None] = [None] * (max(f.file_id for f in inputs.files) + 1)
    for f in inputs.files:
        default_traces[f.file_id] = f.default_trace
    extra = (tasks.ROLE, tasks.PATH, tasks.BUCKET)
    by_schema: dict[pa.Schema, list[TaskSource]] = {}
    for source in made.sources:
        by_schema.setdefault(source.schema, []).append(source)
    if hopeful and not made.rest:
        return _split_aside(spark, list(by_schema.items()), inputs, files, buckets,
                            default_traces)  # fmt: skip
    parts = []
    for given, sources in by_schema.items():
        schema = pa.schema([*given, *tasks.CARRIED])
        count = sum(s.tasks for s in sources)
        rows = spark.range(0, count, 1, count).mapInArrow(
            tasks.made_and_split(files, buckets, sources, default_traces, schema),
            tasks.spark_ddl(schema),
        )
        parts.append(_as_raw(rows, given, extra))
    parts.extend(part.select(*part.columns, *_carried_nulls(extra)) for part in made.rest)
    typed = type_rows(union_raw(parts, extra), inputs, keep=extra)
    split = _collect(
        typed.mapInArrow(tasks.split_carried(files, buckets), tasks.spark_ddl(tasks.CARRIED))
    )
    return tasks.typed_work(split, buckets)


def _split_aside(
    spark: SparkSession,
    groups: Sequence[tuple[pa.Schema, list[TaskSource]]],
    inputs: Inputs,
    files: tasks.PassFiles,
    buckets: int,
    default_traces: Sequence[str | None],
) -> list[tuple[str, ...]]:
    """`split_made` in one job when every row is plain: the tasks write the plain rows in
    buckets and the others aside (`tasks.made_and_split`'s `aside`), Parquet files of
    each group's own columns; when there are such files, a second job reads them and
    types them (`typed.type_rows`, the one implementation of the rules) into buckets."""
    extra = (tasks.ROLE, tasks.PATH, tasks.BUCKET)
    ddl = tasks.spark_ddl(tasks.CARRIED)
    jobs = []
    for number, (given, sources) in enumerate(groups):
        count = sum(s.tasks for s in sources)
        schema = pa.schema([*given, *tasks.CARRIED])
        aside = (files.folder(f"unplain-{number}"), number)
        jobs.append(
            spark.range(0, count, 1, count).mapInArrow(
                tasks.made_and_split(files, buckets, sources, default_traces, schema, aside),
                ddl,
            )
        )
    union = jobs[0]
    for job in jobs[1:]:
        union = union.unionByName(job)
    found = _collect(union)
    unplain = pc.equal(found[tasks.ROLE], tasks.UNPLAIN_FILE).to_numpy(zero_copy_only=False)
    if not unplain.any():
        return tasks.typed_work(found, buckets)
    aside_files = found.filter(pa.array(unplain))
    aside_paths = aside_files[tasks.PATH].to_pylist()
    aside_groups = aside_files[tasks.BUCKET].to_pylist()
    parts = []
    for number, (given, _) in enumerate(groups):
        paths = [spark_path(p) for p, g in zip(aside_paths, aside_groups, strict=True)
                 if g == number]  # fmt: skip
        if not paths:
            continue
        rows = spark.read.schema(tasks.spark_ddl(given)).parquet(*paths)
        parts.append(_as_raw(rows, given, _carried_nulls(extra)))
    typed = type_rows(union_raw(parts, extra), inputs, keep=extra)
    split = _collect(
        typed.mapInArrow(tasks.split_carried(files, buckets), tasks.spark_ddl(tasks.CARRIED))
    )
    typed_files = found.filter(pa.array(~unplain))
    return tasks.typed_work(pa.concat_tables([typed_files, split]), buckets)


def bucket_count(typed: DataFrame, partitions: int) -> int:
    """The buckets of a pass: `partitions`, and at least the shuffle partitions."""
    return max(partitions, shuffle_partitions(typed.sparkSession))


def with_markers(
    typed_work: Sequence[tuple[str, ...]], later: pa.Table | None, files: tasks.PassFiles
) -> list[tuple[str, ...]]:
    """`typed_work` with the markers of the rows a later step rejected (`later`:
    `rows_kernel.REJECTS`, from an earlier pass) in the buckets of their rows."""
    if later is None or later.num_rows == 0:
        return list(typed_work)
    found = [list(paths) for paths in typed_work]
    marked = R.markers_of(later)
    for b, path in tasks.write_buckets(files.folder("markers"), marked, tasks.SPLIT_KEYS,
                                       len(found)):  # fmt: skip
        found[b].append(path)
    return [tuple(sorted(paths)) for paths in found]


def run_pass(
    spark: SparkSession,
    typed_work: Sequence[tuple[str, ...]],
    mixed_files: Collection[int],
    files: tasks.PassFiles,
    shown: Sequence[str],
) -> PassResult:
    """Steps 2 and 3 over the typed rows' buckets (`split_typed`, `with_markers`), in two
    jobs and no shuffle: step 2, a task a bucket, writing its message rows in as many
    buckets by (trace, msg_id); step 3, a task a bucket.

    mixed_files: files where some rows give `seq` and others do not.
    """
    partitions = len(typed_work)
    # the biggest buckets first: Spark starts a stage's tasks in order, and a big bucket
    # started last runs alone on one core (64 processes hash to buckets 5x apart)
    largest = [typed_work[b] for b in _largest_first(typed_work)]
    carried = _collect(
        spark.range(0, partitions, 1, partitions).mapInArrow(
            tasks.by_process(files, mixed_files, largest, partitions),
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
    planned = tasks.plan(carried, partitions)
    work = [planned[i] for i in _largest_first([w.ends + w.events for w in planned])]
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


def _largest_first(work: Sequence[Sequence[str]]) -> list[int]:
    """The tasks of `work` (the files each reads) in decreasing order of their bytes."""
    sizes = [sum(os.path.getsize(p) for p in paths) for paths in work]
    return sorted(range(len(work)), key=lambda i: -sizes[i])


def _collect(carriers: DataFrame) -> pa.Table:
    return pa.Table.from_pylist([r.asDict() for r in carriers.collect()], schema=tasks.CARRIED)


def _as_raw(rows: DataFrame, given: pa.Schema, tail: Sequence[Any]) -> DataFrame:
    """`rows` (columns `given`) as the raw rows' columns, a null for each one they lack,
    then `tail`."""
    return rows.select(
        *[
            F.col(f.name) if f.name in given.names else F.lit(None).cast(f.dataType).alias(f.name)
            for f in RAW_SCHEMA.fields
        ],
        *tail,
    )


def _carried_nulls(extra: Sequence[str]) -> list[Column]:
    """Null columns for the carried `extra` (role, path, bucket) of rows that have none."""
    return [F.lit(None).cast(t).alias(n) for n, t in zip(extra, ("byte", "string", "int"),
                                                         strict=True)]  # fmt: skip
