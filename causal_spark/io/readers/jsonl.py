"""JSON Lines read in Python tasks over byte-range splits (`jsonl_kernel`), as raw rows.

Two Spark jobs: the first counts the line ends of every split but each file's last (a
scan of bytes, no parsing), so that each split knows the number of its first line; the
second parses the splits, a task each (a `.gz` file is one split: gzip cannot be cut).
No task holds more than one split, and a split is at most `SPLIT_BYTES` (or Spark's
`spark.sql.files.maxPartitionBytes`, when smaller) of a file; where some file is cut, the
splits are as many as a multiple of the cores (`jsonl_kernel.split_counts`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from causal_spark.io.raw import InputFile, RawRead, TaskRows
from causal_spark.io.readers import jsonl_kernel as K

SPLIT_BYTES = 64 << 20
# what `_line_ends`' tasks return
ENDS = pa.schema([("split", pa.int64()), ("ends", pa.int64())])


def _split_bytes(spark: SparkSession) -> int:
    conf = spark._jsparkSession.sessionState().conf()  # the parsed byte size
    return max(1, min(SPLIT_BYTES, int(conf.filesMaxPartitionBytes())))


def _ddl(schema: pa.Schema) -> str:
    names = {pa.int32(): "int", pa.int64(): "long", pa.string(): "string"}
    return ", ".join(f"`{f.name}` {names[f.type]}" for f in schema)


@dataclass(frozen=True)
class Splits:
    """The splits of JSON Lines files as Python tasks make their raw rows (`io.raw.TaskSource`):
    (file_id, path, start, end, first line) each; `text`: `raw` on every row."""

    splits: tuple[tuple[int, str, int, int | None, int], ...]
    text: bool

    @property
    def tasks(self) -> int:
        return len(self.splits)

    @property
    def schema(self) -> pa.Schema:
        return K.SCHEMA

    def file_of(self, index: int) -> int:
        return self.splits[index][0]

    def rows(self, index: int) -> Iterator[pa.RecordBatch]:
        file_id, path, start, end, line = self.splits[index]
        return K.read_split(path, file_id, start, end, line, keep_text=self.text)

    def typed_rows(self, index: int) -> Iterator[pa.RecordBatch]:
        """`rows`, with numbers as Arrow read them where ingest's verdict on them stays
        (`jsonl_kernel._arrow_rows`)."""
        file_id, path, start, end, line = self.splits[index]
        return K.read_split(path, file_id, start, end, line, keep_text=self.text, typed=True)

    def untyped(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A batch of `typed_rows` in `schema`: its numbers as `rows` gives them."""
        return K.untyped(batch)


def _line_ends(spark: SparkSession, work: Sequence[tuple[int, str, int, int]]) -> dict[int, int]:
    """`count_line_ends` of each (split, path, start, end), a task each: a `mapInArrow`
    over task numbers, as the parse is, so that both run in the same Python worker
    daemon (an RDD's tasks start a second one, whose workers pay the preload again)."""

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                split, path, start, end = work[index]
                n = K.count_line_ends(path, start, end)
                yield pa.RecordBatch.from_pydict({"split": [split], "ends": [n]}, schema=ENDS)

    frame = spark.range(0, len(work), 1, len(work)).mapInArrow(count, _ddl(ENDS))
    return {int(r["split"]): int(r["ends"]) for r in frame.collect()}


def read_jsonl(spark: SparkSession, files: Sequence[InputFile], text: bool = True) -> DataFrame:
    """Raw rows (`jsonl_kernel.SCHEMA`) of the JSON Lines files: a row per non-blank line
    (text=False: `raw` only on rows rejected here)."""
    return planned_jsonl(spark, files, text).rows


def planned_jsonl(spark: SparkSession, files: Sequence[InputFile], text: bool = True) -> RawRead:
    """`read_jsonl`'s rows, and the plan of the Python tasks that make them."""
    split_bytes = _split_bytes(spark)
    sizes = [None if f.path.lower().endswith(".gz") else f.size for f in files]
    cores = spark.sparkContext.defaultParallelism
    splits: list[tuple[int, str, int, int | None]] = []
    for f, size, count in zip(files, sizes, K.split_counts(sizes, split_bytes, cores), strict=True):
        if size is None:
            splits.append((f.file_id, f.path, 0, None))
        else:
            cut = K.plan_splits(size, split_bytes, count)
            splits.extend((f.file_id, f.path, s, e) for s, e in cut)
    # line ends of every split followed by another of the same file
    counted = [
        i
        for i in range(len(splits) - 1)
        if splits[i][3] is not None and splits[i + 1][0] == splits[i][0]
    ]
    ends: dict[int, int] = {}
    if counted:
        work = [(i, splits[i][1], splits[i][2], int(splits[i][3] or 0)) for i in counted]
        ends = _line_ends(spark, work)
    tasks: list[tuple[int, str, int, int | None, int]] = []
    first = 1
    for i, (file_id, path, start, end) in enumerate(splits):
        if start == 0:
            first = 1
        tasks.append((file_id, path, start, end, first))
        first += ends.get(i, 0)

    source = Splits(tuple(tasks), text)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from source.rows(index)

    frame = spark.range(0, len(tasks), 1, max(1, len(tasks))).mapInArrow(run, _ddl(K.SCHEMA))
    return RawRead(frame, TaskRows((source,)) if tasks else None)
