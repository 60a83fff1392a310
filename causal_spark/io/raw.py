"""The raw-row contract every reader produces, and the helpers readers share.

A reader (`causal_spark.io.readers`) turns files into *raw rows*
(`RAW_SCHEMA`): the file's id and the 1-based line where the record starts,
the record's text, every input field as a string (typing happens in
`ingest`, so a bad value becomes a quarantine row instead of a silent null),
and a rejection (`parse_error`, `parse_reason`) when the record could not be
used at all. Discovery (`io.sources`) names the files (`InputFile`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C

INPUT_FIELDS: tuple[str, ...] = (
    C.TRACE_ID,
    C.PROCESS,
    C.SEQ,
    C.KIND,
    C.MSG_ID,
    C.PEER,
    C.TS,
    C.SIZE_BYTES,
    C.LABEL,
)
FILE_ID = "file_id"
SUB = "sub"
TRACE_SUFFIX = "trace_suffix"
PARSE_ERROR = "parse_error"
PARSE_REASON = "parse_reason"
RECORDED_VC = "recorded_vc"

# what every reader returns, in this order
RAW_SCHEMA = T.StructType(
    [
        T.StructField(FILE_ID, T.IntegerType(), False),
        T.StructField(C.LINE, T.LongType(), False),
        T.StructField(C.RAW, T.StringType(), True),
        *[T.StructField(name, T.StringType(), True) for name in INPUT_FIELDS],
        # order within (process, seq) when one record makes several events (null: 0)
        T.StructField(SUB, T.LongType(), True),
        # appended to the default trace id as `:suffix` (ShiViz executions)
        T.StructField(TRACE_SUFFIX, T.StringType(), True),
        T.StructField(PARSE_ERROR, T.StringType(), True),
        # reason code of a reader's rejection (null with a parse_error: `malformed`)
        T.StructField(PARSE_REASON, T.StringType(), True),
        T.StructField(RECORDED_VC, T.MapType(T.StringType(), T.LongType()), True),
    ]
)
RAW_COLUMNS: tuple[str, ...] = tuple(f.name for f in RAW_SCHEMA.fields)

# a whole file that cannot be read is one quarantine row at this line
WHOLE_FILE_LINE = 0


class InputError(ValueError):
    """An input path does not exist, or holds nothing this pipeline can read."""


@dataclass(frozen=True)
class InputFile:
    """One file to read: where it is, how the user names it, who reads it."""

    file_id: int
    path: str  # absolute local path
    shown: str  # as the user named it: `data-samples/x.jsonl`
    reader: str
    default_trace: str
    size: int
    mtime_ns: int
    fingerprint: str


@dataclass(frozen=True)
class InputSet:
    """The files found under one given path and read by one reader (a `runs.inputs` row)."""

    path: str
    format: str
    files: tuple[InputFile, ...]

    @property
    def n_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for f in self.files:
            digest.update(f"{f.shown}\0{f.fingerprint}\n".encode())
        return digest.hexdigest()


@dataclass(frozen=True)
class Skipped:
    """A file under a given folder that no reader took, and why."""

    path: str
    why: str

    def as_record(self) -> dict[str, str]:
        """As `runs.skipped` and `--summary-json` hold it."""
        return {"path": self.path, "reason": self.why}


@dataclass(frozen=True)
class Inputs:
    """What discovery found: the input sets (files numbered 0..n-1 in order) and the rest."""

    sets: tuple[InputSet, ...]
    skipped: tuple[Skipped, ...] = field(default_factory=tuple)

    @property
    def files(self) -> tuple[InputFile, ...]:
        return tuple(f for s in self.sets for f in s.files)


def local_path_of(uri: str) -> str:
    """A `file:` URI (as Spark and delta-rs report files) as a local path, percent-decoded."""
    from urllib.parse import unquote

    if uri.startswith("file:"):
        uri = uri[len("file:") :]
        if uri.startswith("//"):
            uri = uri[2:]
        return unquote(uri)
    return uri


def local_path(uri: Column) -> Column:
    """`local_path_of` as a Column: Spark's `_metadata.file_path` is a percent-encoded URI."""
    stripped = F.regexp_replace(uri, r"^file:(//)?", "")
    # url_decode is form decoding ('+' is a space): protect literal '+' first
    return F.url_decode(F.replace(stripped, F.lit("+"), F.lit("%2B")))


def file_reader(spark: SparkSession) -> DataFrameReader:
    """`spark.read` for input files given by `spark_path`: the plain local file system, whose
    checksum layer would otherwise parse a `:` in a file's name as a URI scheme."""
    return spark.read.option("fs.file.impl.disable.cache", "true").option(
        "fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem"
    )


def spark_path(path: str) -> str:
    """A local path as Spark must be given it: absolute, with glob characters escaped."""
    escaped = "".join("\\" + ch if ch in "\\{}[]*?" else ch for ch in str(Path(path).resolve()))
    return "file://" + escaped


def with_file_ids(frame: DataFrame, path: Column, files: Sequence[InputFile]) -> DataFrame:
    """Add `file_id` to rows read from `files`, by their local path (a broadcast join)."""
    spark = frame.sparkSession
    table = spark.createDataFrame(
        [(f.path, f.file_id) for f in files], "__cs_path string, file_id int"
    )
    return (
        frame.withColumn("__cs_path", path).join(F.broadcast(table), "__cs_path").drop("__cs_path")
    )


def whole_file_rows(spark: SparkSession, rejected: Sequence[tuple[InputFile, str]]) -> DataFrame:
    """One raw row per file that cannot be read at all (line 0), rejected with the reason."""
    rows = [
        {FILE_ID: f.file_id, C.LINE: WHOLE_FILE_LINE, C.RAW: "", PARSE_ERROR: why}
        for f, why in rejected
    ]
    return (
        spark.createDataFrame(rows, RAW_SCHEMA) if rows else spark.createDataFrame([], RAW_SCHEMA)
    )


# events.recorded_vc: the recorded clock as an array in pidx order (the raw rows' map, keyed
# by process name, arranged by the trace's processes)
RECORDED_VC_TYPE = T.ArrayType(T.LongType())


def recorded_in_pidx_order(events: DataFrame, pidx: DataFrame) -> DataFrame:
    """`events` with `recorded_vc` (a raw row's map process -> count) as an array in pidx
    order: entry i is what the map gives the trace's process of pidx i, 0 where it names
    none (GoVector leaves zero entries out); null stays null.

    `pidx`: trace_id, process, pidx of every process of `events`' traces (broadcast, as
    ingest's own process index is). An entry naming a process the trace does not have
    (every row of it quarantined) has no place in the array and is left out."""
    order = "__cs_process_order"
    processes = pidx.groupBy(C.TRACE_ID).agg(
        F.sort_array(F.collect_list(F.struct(C.PIDX, C.PROCESS))).alias(order)
    )
    clock = F.col(RECORDED_VC)
    as_array = F.transform(
        F.col(order), lambda p: F.coalesce(F.try_element_at(clock, p[C.PROCESS]), F.lit(0))
    )
    return (
        events.join(F.broadcast(processes), C.TRACE_ID, "left")
        .withColumn(RECORDED_VC, F.when(clock.isNotNull(), as_array).cast(RECORDED_VC_TYPE))
        .drop(order)
    )
