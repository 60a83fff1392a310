"""Discover input files and read them as raw rows with their provenance.

Every reader returns the same raw-row contract (`RAW_COLUMNS`): the source file,
the 1-based row number in that file, the row as text, every input field as a
string (typing happens in `ingest`, so a bad value becomes a quarantine row
instead of a silent null) and a parse error when the row could not be split
into fields at all.

Row numbers are computed without collecting anything: each file split is read
in order inside one partition, so within a split `monotonically_increasing_id`
is consecutive; the split's offset in its file is the number of rows of the
earlier splits of the same file (one small aggregate).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark.config import IngestSettings

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
PARSE_ERROR = "parse_error"
FILE_HAS_SEQ = "file_has_seq"
DEFAULT_TRACE = "default_trace"
RAW_COLUMNS: tuple[str, ...] = (
    C.SOURCE,
    C.LINE,
    C.RAW,
    *INPUT_FIELDS,
    PARSE_ERROR,
    DEFAULT_TRACE,
    FILE_HAS_SEQ,
)

JSONL, CSV, PARQUET, DELTA = "jsonl", "csv", "parquet", "delta"

_FILE_PATH = "__cs_file_path"
_BLOCK = "__cs_block_start"
_ROW_ID = "__cs_row_id"
_CORRUPT = "__cs_corrupt"


class InputError(ValueError):
    """An input path does not exist, or holds nothing this pipeline can read."""


@dataclass(frozen=True)
class InputSet:
    """The files of one input path, by format, with a fingerprint of the listing."""

    path: str
    format: str
    files: tuple[str, ...]
    n_bytes: int
    fingerprint: str


def _format_of(file: Path, settings: IngestSettings) -> str | None:
    suffix = file.suffix.lower()
    if suffix in settings.jsonl_extensions:
        return JSONL
    if suffix in settings.csv_extensions:
        return CSV
    if suffix in settings.parquet_extensions:
        return PARQUET
    return None


def _fingerprint(root: Path, files: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for file in files:
        stat = file.stat()
        rel = file.relative_to(root) if file != root else Path(file.name)
        digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _is_delta_table(path: Path) -> bool:
    return (path / "_delta_log").is_dir()


def discover_inputs(paths: Sequence[str], settings: IngestSettings) -> list[InputSet]:
    """List the readable files under each path, grouped by format.

    A folder is searched recursively (hidden and `_`-prefixed entries skipped,
    as Spark does); a folder with a `_delta_log` is read as one Delta table.
    Raises `InputError` for a path that does not exist or holds no input.
    """
    found: list[InputSet] = []
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise InputError(f"input path {given} does not exist")
        if root.is_dir() and _is_delta_table(root):
            found.append(_delta_input(root))
            continue
        if root.is_file():
            candidates = [root]
        else:
            candidates = sorted(
                p
                for p in root.rglob("*")
                if p.is_file()
                and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
            )
        by_format: dict[str, list[Path]] = {}
        for file in candidates:
            fmt = _format_of(file, settings)
            if fmt is None:
                if root.is_file():
                    known = (
                        settings.jsonl_extensions
                        + settings.csv_extensions
                        + settings.parquet_extensions
                    )
                    raise InputError(
                        f"input file {given} has an unknown extension; expected one of {known}"
                    )
                continue
            by_format.setdefault(fmt, []).append(file)
        if not by_format:
            raise InputError(f"input path {given} holds no .jsonl, .csv or .parquet file")
        for fmt, files in sorted(by_format.items()):
            found.append(
                InputSet(
                    path=given,
                    format=fmt,
                    files=tuple(str(f.resolve()) for f in files),
                    n_bytes=sum(f.stat().st_size for f in files),
                    fingerprint=_fingerprint(root if root.is_dir() else root.parent, files),
                )
            )
    return found


def _delta_input(root: Path) -> InputSet:
    from deltalake import DeltaTable

    table = DeltaTable(str(root))
    files = tuple(uri.removeprefix("file://") for uri in table.file_uris())
    return InputSet(
        path=str(root),
        format=DELTA,
        files=files,
        n_bytes=sum(os.path.getsize(f) for f in files),
        fingerprint=f"delta-version:{table.version()}",
    )


def _stem_of(path: Column) -> Column:
    name = F.regexp_extract(path, r"([^/]+)$", 1)
    return F.regexp_replace(name, r"\.[^.]*$", "")


def _local_path(path: Column) -> Column:
    return F.regexp_replace(path, r"^file:(//)?", "")


def _with_provenance(frame: DataFrame) -> DataFrame:
    return frame.select(
        "*",
        _local_path(F.col("_metadata.file_path")).alias(_FILE_PATH),
        F.col("_metadata.file_block_start").alias(_BLOCK),
        F.monotonically_increasing_id().alias(_ROW_ID),
    )


def _with_line_numbers(frame: DataFrame) -> DataFrame:
    """Add `line` (1-based row number in its file) to rows from `_with_provenance`."""
    blocks = (
        frame.groupBy(_FILE_PATH, _BLOCK)
        .agg(F.min(_ROW_ID).alias("__cs_first_id"), F.count(F.lit(1)).alias("__cs_n"))
        .select(
            _FILE_PATH,
            _BLOCK,
            "__cs_first_id",
            (
                F.sum("__cs_n").over(
                    Window.partitionBy(_FILE_PATH)
                    .orderBy(_BLOCK)
                    .rowsBetween(Window.unboundedPreceding, -1)
                )
            ).alias("__cs_offset"),
        )
    )
    line = F.coalesce(F.col("__cs_offset"), F.lit(0)) + F.col(_ROW_ID) - F.col("__cs_first_id") + 1
    return (
        frame.join(F.broadcast(blocks), [_FILE_PATH, _BLOCK])
        .withColumn(C.LINE, line.cast("long"))
        .drop("__cs_first_id", "__cs_offset", _BLOCK, _ROW_ID)
    )


def _finish(frame: DataFrame) -> DataFrame:
    """Add the per-file `file_has_seq` flag and select the raw-row contract."""
    has_seq = F.max(F.col(C.SEQ).isNotNull().cast("int")).over(Window.partitionBy(_FILE_PATH)) > 0
    return frame.select(
        F.col(_FILE_PATH).alias(C.SOURCE),
        F.col(C.LINE),
        F.col(C.RAW),
        *[F.col(name).cast("string").alias(name) for name in INPUT_FIELDS],
        F.col(PARSE_ERROR),
        _stem_of(F.col(_FILE_PATH)).alias(DEFAULT_TRACE),
        has_seq.alias(FILE_HAS_SEQ),
    )


def _string_schema(names: Sequence[str]) -> T.StructType:
    return T.StructType([T.StructField(n, T.StringType()) for n in names])


def read_jsonl(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """JSON Lines as raw rows; blank lines are skipped but keep their line numbers."""
    schema = _string_schema([*INPUT_FIELDS, _CORRUPT])
    text = _with_line_numbers(_with_provenance(spark.read.text(list(files))))
    parsed = F.from_json(
        F.col("value"), schema, {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"}
    )
    rows = (
        text.where(F.trim(F.col("value")) != "")
        .select(_FILE_PATH, C.LINE, F.col("value").alias(C.RAW), parsed.alias("__cs_json"))
        .select(
            _FILE_PATH,
            C.LINE,
            C.RAW,
            *[F.col(f"__cs_json.{n}").alias(n) for n in INPUT_FIELDS],
            F.when(
                F.col(f"__cs_json.{_CORRUPT}").isNotNull() | F.col("__cs_json").isNull(),
                F.lit("not a JSON object"),
            ).alias(PARSE_ERROR),
        )
    )
    return _finish(rows)


def _csv_header(spark: SparkSession, file: str) -> list[str]:
    first = spark.read.text(file).limit(1).collect()
    if not first:
        return []
    return [h.strip().strip('"').strip().lower() for h in first[0]["value"].split(",")]


def read_csv(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """CSV files with a header row, as raw rows (`line` does not count the header).

    Files may order their columns differently; each file is parsed with its own
    header. A record must fit on one line (no quoted newlines).
    """
    by_header: dict[tuple[str, ...], list[str]] = {}
    for file in files:
        by_header.setdefault(tuple(_csv_header(spark, file)), []).append(file)
    parts: list[DataFrame] = []
    for header, group in sorted(by_header.items()):
        if not header:
            continue
        known = [h for h in header if h in INPUT_FIELDS]
        names = [h if h in INPUT_FIELDS else f"__cs_extra_{i}" for i, h in enumerate(header)]
        ddl = ", ".join(f"`{n}` STRING" for n in [*names, _CORRUPT])
        text = _with_line_numbers(_with_provenance(spark.read.text(list(group))))
        parsed = F.from_csv(
            F.col("value"),
            ddl,
            {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"},
        )
        n_fields = F.size(F.split(F.col("value"), ","))
        wrong_width = (~F.col("value").contains('"')) & (n_fields != len(header))
        rows = (
            text.where((F.col(C.LINE) > 1) & (F.trim(F.col("value")) != ""))
            .select(
                _FILE_PATH,
                (F.col(C.LINE) - 1).alias(C.LINE),
                F.col("value").alias(C.RAW),
                parsed.alias("__cs_csv"),
                wrong_width.alias("__cs_wrong_width"),
            )
            .select(
                _FILE_PATH,
                C.LINE,
                C.RAW,
                *[
                    (F.col(f"__cs_csv.{n}") if n in known else F.lit(None).cast("string")).alias(n)
                    for n in INPUT_FIELDS
                ],
                F.when(
                    F.col("__cs_wrong_width"),
                    F.lit(f"CSV row does not have the header's {len(header)} fields"),
                )
                .when(F.col(f"__cs_csv.{_CORRUPT}").isNotNull(), F.lit("unparseable CSV row"))
                .alias(PARSE_ERROR),
            )
        )
        parts.append(_finish(rows))
    if not parts:
        raise InputError(f"CSV input {list(files)[:3]} has no header row")
    return _union(parts)


def read_parquet(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """Parquet files (or a Delta table's data files) as raw rows; `raw` is the row as JSON."""
    data = spark.read.option("mergeSchema", "true").parquet(*files)
    present = {c.lower(): c for c in data.columns}
    raw = F.to_json(F.struct(*[F.col(c) for c in data.columns]))
    rows = _with_line_numbers(_with_provenance(data)).select(
        _FILE_PATH,
        C.LINE,
        raw.alias(C.RAW),
        *[
            (
                F.col(present[n]).cast("string") if n in present else F.lit(None).cast("string")
            ).alias(n)
            for n in INPUT_FIELDS
        ],
        F.lit(None).cast("string").alias(PARSE_ERROR),
    )
    return _finish(rows)


def _as_given(source: Column, given: InputSet) -> Column:
    """Name files as the user did (`data-samples/x.jsonl`), not by absolute path,
    so tables do not depend on where the checkout lives."""
    root = Path(given.path).resolve()
    base = root if root.is_dir() else root.parent
    shown = given.path.rstrip("/") if root.is_dir() else str(Path(given.path).parent)
    prefix = str(base) + "/"
    relative = F.substring(source, len(prefix) + 1, 1 << 30)
    named = F.concat(F.lit("" if shown in ("", ".") else shown + "/"), relative)
    return F.when(source.startswith(prefix), named).otherwise(source)


def _union(parts: Sequence[DataFrame]) -> DataFrame:
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def read_raw_rows(spark: SparkSession, inputs: Sequence[InputSet]) -> DataFrame:
    """All inputs as one DataFrame of raw rows (columns `RAW_COLUMNS`)."""
    readers = {JSONL: read_jsonl, CSV: read_csv, PARQUET: read_parquet, DELTA: read_parquet}
    parts = []
    for given in inputs:
        if not given.files:
            continue
        part = readers[given.format](spark, given.files)
        part = part.withColumn(C.SOURCE, _as_given(F.col(C.SOURCE), given))
        if given.format == DELTA:
            # a Delta table's data files have generated names: default to the table's name
            part = part.withColumn(DEFAULT_TRACE, F.lit(Path(given.path).name))
        parts.append(part)
    if not parts:
        raise InputError("the inputs hold no files")
    return _union(parts)
