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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Protocol

import pyarrow as pa
from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C

INPUT_FIELDS = C.INPUT_FIELDS
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

_INTEGERS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
# input fields a reader may give typed instead of as strings (ingest's read of Parquet),
# by the types that keep them so: the value ingest would parse from the string form (an
# integer's digits; a double's shortest round-trip digits) and the same rules. Any other
# type (a float, a decimal, a timestamp) is read as its string, as before
TYPED_FIELDS: dict[str, tuple[T.DataType, tuple[type[T.DataType], ...]]] = {
    C.SEQ: (T.LongType(), _INTEGERS),
    C.SIZE_BYTES: (T.LongType(), _INTEGERS),
    C.TS: (T.DoubleType(), (T.DoubleType, *_INTEGERS)),
}


def typed_fields(types: dict[str, T.DataType]) -> dict[str, T.DataType]:
    """Of a file's input fields and their types, those kept typed (`TYPED_FIELDS`), with the
    type they are given as."""
    kept: dict[str, T.DataType] = {}
    for name, given in types.items():
        if name in TYPED_FIELDS and isinstance(given, TYPED_FIELDS[name][1]):
            kept[name] = TYPED_FIELDS[name][0]
    return kept


def union_raw(parts: Sequence[DataFrame], extra: Sequence[str] = ()) -> DataFrame:
    """Raw rows of several reads as one DataFrame: when they disagree on a typed field's
    type (`TYPED_FIELDS`), every field is cast back to its string (`RAW_SCHEMA`).
    `extra`: columns every part has besides the raw rows', kept as they are."""
    types = {(f.name, f.dataType) for part in parts for f in part.schema.fields
             if f.name not in extra}  # fmt: skip
    if len(types) != len(RAW_SCHEMA.fields):
        parts = [
            part.select(
                *[F.col(f.name).cast(f.dataType).alias(f.name) for f in RAW_SCHEMA.fields],
                *extra,
            )
            for part in parts
        ]
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


class TaskSource(Protocol):
    """Raw rows that Python tasks make themselves (a reader's own parsing, no JVM): task
    `i` of `tasks` yields the rows of one piece of one file (`file_of(i)`) as Arrow
    batches of raw-row columns (`schema`: some of `RAW_SCHEMA`'s, the absent ones null;
    a field `TYPED_FIELDS` names may be given typed)."""

    @property
    def tasks(self) -> int: ...

    @property
    def schema(self) -> pa.Schema: ...

    def file_of(self, index: int) -> int: ...

    def rows(self, index: int) -> Iterator[pa.RecordBatch]: ...


def typed_rows(
    source: TaskSource, index: int
) -> tuple[Iterator[pa.RecordBatch], Callable[[pa.RecordBatch], pa.RecordBatch]]:
    """Task `index`'s rows with a `TYPED_FIELDS` field typed wherever the source can give it
    so batch by batch (its `typed_rows`, whose batches may differ in their types; else
    `rows`), and how to give one of those batches `source.schema` again (its `untyped`)."""
    typed = getattr(source, "typed_rows", None)
    if typed is None:
        return source.rows(index), _same
    return typed(index), source.untyped  # type: ignore[attr-defined]


def _same(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch


@dataclass(frozen=True)
class TaskRows:
    """How Python tasks make a read's raw rows: its `sources`, and the `rest` (parts only
    Spark reads). Ingest uses it to type the rows where they are made (`ingest.plain`)
    instead of sending each through the JVM."""

    sources: tuple[TaskSource, ...]
    rest: tuple[DataFrame, ...] = ()


@dataclass(frozen=True, eq=False)
class RawRead:
    """What a reader read: the raw rows (`rows`, for every use) and, when Python tasks can
    make them themselves, the `plan` of those tasks (None: only Spark makes them). A
    value the caller hands to ingest (`ingest(read, ...)`, or `ingest(read.rows, ...,
    plan=read.plan)`).

    `made`: the rows, or how to make their DataFrame when first asked (`rows`): where a
    plan makes the rows, ingest may never ask (a Spark read of Parquet plans a job to
    read the files' schemas as soon as it is made)."""

    made: DataFrame | Callable[[], DataFrame]
    plan: TaskRows | None = None

    @cached_property
    def rows(self) -> DataFrame:
        return self.made if isinstance(self.made, DataFrame) else self.made()


def union_reads(parts: Sequence[RawRead]) -> RawRead:
    """Several reads as one (`union_raw` of their rows, made when first asked): made by
    the parts' task sources and, for the parts with no plan, by Spark (the plan's
    `rest`)."""
    if all(p.plan is None for p in parts):
        return RawRead(union_raw([p.rows for p in parts]))

    def rows() -> DataFrame:
        return union_raw([p.rows for p in parts])

    sources: list[TaskSource] = []
    rest: list[DataFrame] = []
    for part in parts:
        if part.plan is None:
            rest.append(part.rows)
        else:
            sources.extend(part.plan.sources)
            rest.extend(part.plan.rest)
    return RawRead(rows, TaskRows(tuple(sources), tuple(rest)))


# a whole file that cannot be read is one quarantine row at this line
WHOLE_FILE_LINE = 0

# up to this many (file, key) pairs, file ids come from comparisons instead of a join: a
# broadcast hash join costs a hash and a probe per row, more than a few string compares
FEW_FILE_KEYS = 32


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
    whole = 1 << 30
    stripped = (
        F.when(uri.startswith("file://"), F.substring(uri, 8, whole))
        .when(uri.startswith("file:"), F.substring(uri, 6, whole))
        .otherwise(uri)
    )
    # url_decode is form decoding ('+' is a space): protect literal '+' first; a path
    # without '%' has nothing to decode (every row runs this: keep it cheap)
    decoded = F.url_decode(F.replace(stripped, F.lit("+"), F.lit("%2B")))
    return F.when(stripped.contains("%"), decoded).otherwise(stripped)


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


# what java.net.URI leaves unquoted in a path (RFC 2396: unreserved, and the punctuation
# a path may hold); any other character is quoted as its UTF-8 bytes, except non-ASCII
# printable characters, which it keeps
_URI_PATH_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'()" + ";:@&=+$,/"
)


def spark_uri(path: str) -> str:
    """The URI Spark reports for a local file (`_metadata.file_path`): `file:` and the
    absolute path as Hadoop's `Path.toUri` quotes it."""
    quoted = []
    for ch in str(Path(path).resolve()):
        if ch in _URI_PATH_CHARS or (ord(ch) > 127 and ch.isprintable() and not ch.isspace()):
            quoted.append(ch)
        else:
            quoted.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "file:" + "".join(quoted)


def with_file_ids(
    frame: DataFrame, where: Column, files: Sequence[InputFile], by: str = "uri"
) -> DataFrame:
    """Add `file_id` to rows read from `files`, by where they were read: the URI Spark
    reports for their file (`_metadata.file_path`, compared as Spark writes it: no
    per-row decoding), or (by="path") the file's absolute local path. A row that names
    no input file fails the job (never a silent drop).

    A few files are told apart by comparing `where` with each one's keys in turn (one
    expression, no join); more are looked up in a broadcast table."""
    spark = frame.sparkSession
    keys = [
        (key, f.file_id)
        for f in files
        for key in (_uri_forms(f.path) if by == "uri" else (f.path,))
    ]
    unknown = F.raise_error(
        F.concat(F.lit("a row was read from a file that is not an input: "), F.col("__cs_at"))
    )
    if 0 < len(keys) <= FEW_FILE_KEYS:
        at = F.col("__cs_at")
        chosen = F.when(at == F.lit(keys[0][0]), F.lit(keys[0][1]))
        for key, file_id in keys[1:]:
            chosen = chosen.when(at == F.lit(key), F.lit(file_id))
        return (
            frame.withColumn("__cs_at", where)
            .withColumn(FILE_ID, chosen.otherwise(unknown).cast("int"))
            .drop("__cs_at")
        )
    table = spark.createDataFrame(keys, "__cs_uri string, __cs_file_id int")
    return (
        frame.withColumn("__cs_at", where)
        .join(F.broadcast(table), F.col("__cs_at") == F.col("__cs_uri"), "left")
        .withColumn(FILE_ID, F.coalesce(F.col("__cs_file_id"), unknown.cast("int")))
        .drop("__cs_at", "__cs_uri", "__cs_file_id")
    )


def _uri_forms(path: str) -> tuple[str, str]:
    uri = spark_uri(path)
    return uri, "file://" + uri[len("file:") :]


def whole_file_rows(spark: SparkSession, rejected: Sequence[tuple[InputFile, str]]) -> DataFrame:
    """One raw row per file that cannot be read at all (line 0), rejected with the reason."""
    rows = [
        {FILE_ID: f.file_id, C.LINE: WHOLE_FILE_LINE, C.RAW: "", PARSE_ERROR: why}
        for f, why in rejected
    ]
    return (
        spark.createDataFrame(rows, RAW_SCHEMA) if rows else spark.createDataFrame([], RAW_SCHEMA)
    )
