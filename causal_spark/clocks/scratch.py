"""Task-side scratch staging: rows written as Parquet by the tasks, read back by later tasks.

The in-place clocks pass (`clocks.per_trace`) stages each batch's receive links
once, under the writer's scratch folder, and every task that holds events of a
batch reads that batch's links from there. This belongs with the sinks (the
scratch folder is theirs, `sinks.FileWriter.scratch`); it lives here, on its
own, until the sinks become a package. No clocks knowledge here: the rows are
split by an int column `key`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame

_ROWS = pa.schema([("rows", pa.int64())])


def stage_by_key(rows: DataFrame, folder: str, key: str) -> None:
    """Write `rows` (int column `key` first) as Parquet files under folder/<key>=<value>/
    (runs a Spark job).

    The tasks write with pyarrow, one file per (input partition, key value) with a name of
    its own, so a retried or speculative attempt replaces its file rather than adding
    duplicate rows. (Spark's partitioned writer was tried first; right after it the
    in-place stage's JVM side ran up to 2x slower in 3 of 5 repeats of a scratch A/B,
    2026-11-23, before `spark.sql.execution.arrow.maxBytesPerBatch` was set.)
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        if context is None:  # every writer would then name its file part-00000
            raise RuntimeError("staging scratch rows must run in a Spark task")
        for value, part in rows_by_key(batches, key):
            where = os.path.join(folder, f"{key}={value}")
            os.makedirs(where, exist_ok=True)
            # written under a name pyarrow's readers skip (a leading "."), then renamed
            name = f"part-{context.partitionId():05d}.parquet"
            temporary = os.path.join(where, f".{name}.{uuid.uuid4().hex}")
            pq.write_table(part, temporary)
            os.replace(temporary, os.path.join(where, name))
            yield pa.RecordBatch.from_pydict({"rows": [part.num_rows]}, schema=_ROWS)

    rows.mapInArrow(write, "rows long").collect()


def read_staged(folder: str, key: str, value: int) -> pa.Table:
    """The rows `stage_by_key` staged under folder for key value `value` (without `key`)."""
    return pq.read_table(os.path.join(folder, f"{key}={value}"))


def rows_by_key(batches: Iterator[pa.RecordBatch], key: str) -> Iterator[tuple[int, pa.Table]]:
    """A task's rows (int column `key` first) as (value, its rows without `key`), value by
    value."""
    read = list(batches)
    if not read:
        return
    rows = pa.Table.from_batches(read)
    key_of = rows.column(key).to_numpy()
    rows = rows.drop_columns([key])
    for value in np.unique(key_of):
        wanted = key_of == value
        yield int(value), rows if wanted.all() else rows.filter(pa.array(wanted))
