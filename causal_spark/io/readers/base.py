"""The raw-row contract every native-format reader returns, and helpers they share.

A reader turns files into *raw rows*: strings for every input field of docs/ingest.md
(typing and the ingest rules happen later, in ingest), plus where each row came
from. One input *record* (a ShiViz match, a JSON line, one span) yields one or
more rows; a record the reader cannot use yields one row with `parse_error` set.

Columns (`RAW_SCHEMA`, in this order):

- `source` string: the file's absolute local path;
- `line` long: 1-based line where the record starts (for one JSON document: the
  record's 1-based index in it, docs/formats.md);
- `record` long: 1-based number of the record among the records that start on
  the same line (1 everywhere except OTLP JSON lines, where one line holds many
  spans): (source, line, record) names one input record, so a file's record
  count is the number of distinct (line, record) pairs among its rows;
- `raw` string: the record's text;
- `trace_id`, `process`, `seq`, `kind`, `msg_id`, `peer`, `ts`, `size_bytes`,
  `label`: strings or null (docs/ingest.md fields; `ts` in seconds; a null trace_id
  means the file's default trace id);
- `trace_suffix` string: appended to the default trace id with `:` (ShiViz
  executions split by a delimiter), else null;
- `sub` long: order of the events one record became within (process, seq);
  rows with equal (trace, process, seq, sub) are one event (a multicast); null
  means 0;
- `parse_error` string: why the reader rejected the record, in words;
- `parse_reason` string: the reason code (`unparseable`, `bad_clock`,
  `duplicate_span`); null with a parse_error means `malformed`;
- `recorded_vc` map<string,bigint>: the vector clock the log recorded for the
  event, as written (ShiViz, dctracing), else null.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark.io.raw import INPUT_FIELDS, file_reader, local_path, spark_path

RECORD = "record"
TRACE_SUFFIX = "trace_suffix"
SUB = "sub"
PARSE_ERROR = "parse_error"
PARSE_REASON = "parse_reason"
RECORDED_VC = "recorded_vc"

# reason codes of reader rejects (null reason with a parse_error: `malformed`)
UNPARSEABLE = "unparseable"
BAD_CLOCK = "bad_clock"
DUPLICATE_SPAN = "duplicate_span"

FIELDS: tuple[str, ...] = INPUT_FIELDS

CLOCK_TYPE = T.MapType(T.StringType(), T.LongType())

RAW_SCHEMA = T.StructType(
    [
        T.StructField(C.SOURCE, T.StringType()),
        T.StructField(C.LINE, T.LongType()),
        T.StructField(RECORD, T.LongType()),
        T.StructField(C.RAW, T.StringType()),
        *[T.StructField(name, T.StringType()) for name in FIELDS],
        T.StructField(TRACE_SUFFIX, T.StringType()),
        T.StructField(SUB, T.LongType()),
        T.StructField(PARSE_ERROR, T.StringType()),
        T.StructField(PARSE_REASON, T.StringType()),
        T.StructField(RECORDED_VC, CLOCK_TYPE),
    ]
)
RAW_COLUMNS: tuple[str, ...] = tuple(RAW_SCHEMA.fieldNames())

# how much of a record's text a quarantine row keeps (a whole JSON document can be large)
RAW_LIMIT = 4000

SpanProcess = Literal["instance", "span"]
SPAN_PROCESSES: tuple[str, ...] = ("instance", "span")


class ReaderError(ValueError):
    """A reader was asked for something it cannot do (a bad regex or option)."""


@dataclass(frozen=True)
class ReaderOptions:
    """Options of the native readers (the CLI's --shiviz-regex, --shiviz-delimiter,
    --span-process).

    `shiviz_regex` / `shiviz_delimiter`: ShiViz parser and delimiter regexes, with
    `(?<name>...)` or `(?P<name>...)` groups; None: a GoVector header line if the
    file has one, else ShiViz's default. `span_process`: `instance` (a service
    instance is one process) or `span` (every span is its own process).
    """

    shiviz_regex: str | None = None
    shiviz_delimiter: str | None = None
    span_process: SpanProcess = "instance"

    def __post_init__(self) -> None:
        if self.span_process not in SPAN_PROCESSES:
            raise ReaderError(
                f"span_process must be one of {SPAN_PROCESSES}; found {self.span_process!r}"
            )


@dataclass(frozen=True)
class Reader:
    """One native format: its name, default extensions, content sniffer and reader."""

    name: str
    extensions: tuple[str, ...]
    sniff: Callable[[bytes], bool]
    read: Callable[[SparkSession, Sequence[str], ReaderOptions], DataFrame]


def absolute_files(files: Sequence[str]) -> list[str]:
    """The files as absolute local paths (what `source` will hold)."""
    if not files:
        raise ReaderError("a reader needs at least one file")
    return [os.path.abspath(f) for f in files]


def read_whole_files(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """One row per file: `source` (absolute path) and `value` (the whole text).

    A file is one task: for formats that cannot be split (one JSON document, a
    regex that spans lines)."""
    paths = [spark_path(f) for f in absolute_files(files)]
    return (
        file_reader(spark)
        .text(paths, wholetext=True)
        .select(local_path(F.col("_metadata.file_path")).alias(C.SOURCE), F.col("value"))
    )


def read_lines(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """One row per line: `source`, `line` (1-based) and `value`; files split across tasks.

    Line numbers come without collecting anything: within one split the rows are
    consecutive in `monotonically_increasing_id`, and a split's offset in its file
    is the number of lines of the file's earlier splits (one small aggregate)."""
    block, row_id = "__rd_block", "__rd_row"
    text = (
        file_reader(spark)
        .text([spark_path(f) for f in absolute_files(files)])
        .select(
            local_path(F.col("_metadata.file_path")).alias(C.SOURCE),
            F.col("_metadata.file_block_start").alias(block),
            F.monotonically_increasing_id().alias(row_id),
            F.col("value"),
        )
    )
    blocks = text.groupBy(C.SOURCE, block).agg(
        F.min(row_id).alias("__rd_first"), F.count(F.lit(1)).alias("__rd_n")
    )
    earlier = Window.partitionBy(C.SOURCE).orderBy(block).rowsBetween(Window.unboundedPreceding, -1)
    offsets = blocks.select(
        C.SOURCE,
        block,
        "__rd_first",
        F.coalesce(F.sum("__rd_n").over(earlier), F.lit(0)).alias("__rd_offset"),
    )
    line = F.col("__rd_offset") + F.col(row_id) - F.col("__rd_first") + 1
    return text.join(F.broadcast(offsets), [C.SOURCE, block]).select(
        C.SOURCE, line.cast("long").alias(C.LINE), F.col("value")
    )


def capped(text: Column, limit: int = RAW_LIMIT) -> Column:
    """`text`, cut to `limit` characters with a note of how long it was."""
    return F.when(
        F.length(text) > limit,
        F.concat(
            F.substring(text, 1, limit),
            F.format_string(" ... [%d characters in all]", F.length(text)),
        ),
    ).otherwise(text)


def conform(rows: DataFrame) -> DataFrame:
    """Select the raw-row contract, in order and with its types; missing columns are null."""
    present = set(rows.columns)
    return rows.select(
        *[
            (F.col(f.name) if f.name in present else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in RAW_SCHEMA.fields
        ]
    )


def rejected(
    rows: DataFrame, error: Column, reason: Column | str | None, **known: Column
) -> DataFrame:
    """Reject rows (one per record): `parse_error` = error, `parse_reason` = reason,
    plus whatever fields are known (e.g. process); the other fields are null."""
    reason_col = F.lit(reason) if reason is None or isinstance(reason, str) else reason
    return conform(
        rows.select(
            C.SOURCE,
            C.LINE,
            RECORD,
            C.RAW,
            *[col.alias(name) for name, col in known.items()],
            error.alias(PARSE_ERROR),
            reason_col.cast("string").alias(PARSE_REASON),
        )
    )
