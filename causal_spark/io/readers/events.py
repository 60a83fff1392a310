"""Our own row format (docs/ingest.md): JSON Lines, CSV with a header, Parquet, a Delta table.

Text files (JSON Lines, CSV, and their `.gz`) are read by Spark's text source in
parallel splits (a `.gz` file is one split: gzip cannot be cut). A row's line
number is its position in the split plus the lines of the file's earlier
splits, which one small aggregate over the splits' line counts gives (a scan of
the text without parsing it). Parquet rows are numbered by Spark's own
`_metadata.row_index`.

Strictness: a JSON line must hold exactly one object (a second object or
trailing text on the line is `malformed`, never silently dropped), with no key
twice; a line that is not valid UTF-8 is `malformed` (its bytes would otherwise merge
distinct names); CSV
follows RFC 4180 (`""` inside quotes is one quote). A file that cannot be
read at all (unreadable, not Parquet, an empty CSV, a CSV whose header names a
column twice) is one quarantine row at line 0; the other files are read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark.config import IngestSettings
from causal_spark.io.raw import (
    FILE_ID,
    INPUT_FIELDS,
    PARSE_ERROR,
    RAW_SCHEMA,
    InputFile,
    RawRead,
    TaskRows,
    file_reader,
    spark_path,
    typed_fields,
    union_reads,
    whole_file_rows,
    with_file_ids,
)
from causal_spark.io.readers.jsonl import planned_jsonl
from causal_spark.io.readers.parquet_ranges import columns_of, plan_ranges

# compressed files Spark's text source would decompress by their name (`.gz`: ours)
_OTHER_CODECS = (".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".br")
_BLOCK = "__cs_block_start"
_ROW_ID = "__cs_row_id"
_PATH = "__cs_file_uri"


def _union(parts: Sequence[DataFrame]) -> DataFrame:
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def _union_reads(parts: Sequence[RawRead]) -> RawRead:
    return union_reads(parts) if len(parts) > 1 else parts[0]


def _finish(rows: DataFrame, keep: Mapping[str, T.DataType] | None = None) -> DataFrame:
    """Select the raw-row contract: every field a string (but the typed ones `keep` names,
    `raw.TYPED_FIELDS`), the reader's columns null."""
    present = set(rows.columns)
    kept = keep or {}
    return rows.select(
        *[
            (F.col(f.name) if f.name in present else F.lit(None))
            .cast(kept.get(f.name, f.dataType))
            .alias(f.name)
            for f in RAW_SCHEMA.fields
        ]
    )


def _text_lines(spark: SparkSession, files: Sequence[InputFile]) -> DataFrame:
    """Every line of the files with `file_id` and its 1-based `line`, blank lines included.

    Within a split, `monotonically_increasing_id` is consecutive; a split's offset in its
    file is the number of lines of the file's earlier splits (one small aggregate)."""
    text = (
        file_reader(spark)
        .text([spark_path(f.path) for f in files])
        .select(
            F.col("value"),
            F.col("_metadata.file_path").alias(_PATH),
            F.col("_metadata.file_block_start").alias(_BLOCK),
            F.monotonically_increasing_id().alias(_ROW_ID),
        )
    )
    blocks = text.groupBy(_PATH, _BLOCK).agg(
        F.min(_ROW_ID).alias("__cs_first_id"), F.count(F.lit(1)).alias("__cs_n")
    )
    offsets = blocks.select(
        _PATH,
        _BLOCK,
        "__cs_first_id",
        F.coalesce(
            F.sum("__cs_n").over(
                Window.partitionBy(_PATH).orderBy(_BLOCK).rowsBetween(Window.unboundedPreceding, -1)
            ),
            F.lit(0),
        ).alias("__cs_offset"),
    )
    line = F.col("__cs_offset") + F.col(_ROW_ID) - F.col("__cs_first_id") + 1
    numbered = text.join(F.broadcast(offsets), [_PATH, _BLOCK]).select(
        "value", _PATH, line.cast("long").alias(C.LINE)
    )
    return with_file_ids(numbered, F.col(_PATH), files).drop(_PATH)


def _unreadable(files: Sequence[InputFile]) -> tuple[list[InputFile], list[tuple[InputFile, str]]]:
    ok, bad = [], []
    for f in files:
        if not os.access(f.path, os.R_OK):
            bad.append((f, "the file cannot be read (permission denied)"))
        else:
            ok.append(f)
    return ok, bad


def _invalid_utf8(value: Column) -> Column:
    # the text source keeps a line's bytes as they are: check them
    return ~F.is_valid_utf8(value)


@dataclass(frozen=True)
class JsonLinesReader:
    """One JSON object per line; blank lines are skipped but keep their line numbers."""

    name: str = "jsonl"

    def extensions(self, settings: IngestSettings) -> tuple[str, ...]:
        return settings.jsonl_extensions

    def sniff(self, head: bytes) -> bool:
        for line in head.splitlines():
            if line.strip():
                return line.strip().startswith(b"{")
        return False

    def read(self, spark: SparkSession, files: Sequence[InputFile], options: object) -> DataFrame:
        return self.planned(spark, files, options, text=True).rows

    def read_without_text(
        self, spark: SparkSession, files: Sequence[InputFile], options: object
    ) -> DataFrame:
        """As `read`, with `raw` only on the rows rejected here: a line's text would cross
        from Python to the JVM and back for every row, and only rejected rows need it
        (ingest reads theirs again)."""
        return self.planned(spark, files, options, text=False).rows

    def planned(
        self, spark: SparkSession, files: Sequence[InputFile], options: object, text: bool
    ) -> RawRead:
        """`read` (text=False: `read_without_text`) and the plan of its Python tasks."""
        readable, bad = _unreadable(files)
        parts = [RawRead(whole_file_rows(spark, bad))] if bad else []
        if readable:
            parts.append(self._read_planned(spark, readable, text))
        return _union_reads(parts)

    def _read(
        self, spark: SparkSession, files: Sequence[InputFile], text: bool = True
    ) -> DataFrame:
        return self._read_planned(spark, files, text).rows

    def _read_planned(
        self, spark: SparkSession, files: Sequence[InputFile], text: bool = True
    ) -> RawRead:
        # read in Python tasks (io.readers.jsonl); a file another Hadoop codec would
        # decompress (by its name) is left to Spark's text source
        ours = [f for f in files if not f.path.lower().endswith(_OTHER_CODECS)]
        theirs = [f for f in files if f.path.lower().endswith(_OTHER_CODECS)]
        parts = []
        if ours:
            made = planned_jsonl(spark, ours, text)
            parts.append(RawRead(lambda: _finish(made.rows), made.plan))
        if theirs:
            parts.append(RawRead(self._read_spark(spark, theirs)))
        return _union_reads(parts)

    def _read_spark(self, spark: SparkSession, files: Sequence[InputFile]) -> DataFrame:
        fields = ", ".join(f"`{n}`: STRING" for n in INPUT_FIELDS)
        # wrapped in [ ]: Jackson then rejects a second object or trailing text on the line
        parsed = F.from_json(
            F.concat(F.lit("["), F.col("value"), F.lit("]")),
            f"ARRAY<STRUCT<{fields}>>",
        )
        keys = F.json_object_keys(F.col("value"))
        ours = F.filter(keys, lambda k: k.isin(*INPUT_FIELDS))
        error = (
            F.when(_invalid_utf8(F.col("value")), F.lit("not valid UTF-8"))
            .when(keys.isNull(), F.lit("not a JSON object"))
            .when(
                parsed.isNull() | (F.size(parsed) != 1) | parsed[0].isNull(),
                F.lit("more than one JSON object on the line (a second object or trailing text)"),
            )
            .when(
                F.size(ours) != F.size(F.array_distinct(ours)),
                F.lit("a field is given twice in one object"),
            )
        )
        return (
            _text_lines(spark, files)
            .where(F.trim(F.col("value")) != "")
            .select(
                FILE_ID,
                C.LINE,
                F.col("value").alias(C.RAW),
                parsed[0].alias("__cs_json"),
                error.alias(PARSE_ERROR),
            )
            .select(
                FILE_ID,
                C.LINE,
                C.RAW,
                *[
                    F.when(F.col(PARSE_ERROR).isNull(), F.col(f"__cs_json.{n}")).alias(n)
                    for n in INPUT_FIELDS
                ],
                PARSE_ERROR,
            )
            .transform(_finish)
        )


def _csv_header(file: InputFile) -> list[str]:
    import csv
    import gzip
    import io

    opener = gzip.open if file.path.lower().endswith(".gz") else open
    with opener(file.path, "rb") as fh:
        first = fh.readline()
    text = first.decode("utf-8", errors="replace").rstrip("\r\n")
    if not text.strip():
        return []
    return [h.strip().lower() for h in next(csv.reader(io.StringIO(text)))]


@dataclass(frozen=True)
class CsvReader:
    """CSV files with a header row (`line` does not count the header).

    Files may order their columns differently: each is parsed with its own header.
    A record must fit on one line (no quoted newlines)."""

    name: str = "csv"

    def extensions(self, settings: IngestSettings) -> tuple[str, ...]:
        return settings.csv_extensions

    def sniff(self, head: bytes) -> bool:
        first = head.split(b"\n", 1)[0].lower()
        return b"process" in first and b"kind" in first and b"," in first

    def read(self, spark: SparkSession, files: Sequence[InputFile], options: object) -> DataFrame:
        readable, bad = _unreadable(files)
        by_header: dict[tuple[str, ...], list[InputFile]] = {}
        for file in readable:
            header = _csv_header(file)
            if not header:
                bad.append((file, "a CSV file without a header row"))
            elif len(set(header)) != len(header):
                twice = sorted({h for h in header if header.count(h) > 1})
                bad.append((file, f"the CSV header names column(s) {twice} twice"))
            else:
                by_header.setdefault(tuple(header), []).append(file)
        parts = [whole_file_rows(spark, bad)] if bad else []
        for names, group in sorted(by_header.items()):
            parts.append(self._read(spark, names, group))
        return _union(parts)

    def _read(
        self, spark: SparkSession, header: tuple[str, ...], files: Sequence[InputFile]
    ) -> DataFrame:
        known = [h for h in header if h in INPUT_FIELDS]
        names = [h if h in INPUT_FIELDS else f"__cs_extra_{i}" for i, h in enumerate(header)]
        ddl = ", ".join(f"`{n}` STRING" for n in [*names, "__cs_corrupt"])
        parsed = F.from_csv(
            F.col("value"),
            ddl,
            {"columnNameOfCorruptRecord": "__cs_corrupt", "mode": "PERMISSIVE", "escape": '"'},
        )
        n_fields = F.size(F.split(F.col("value"), ","))
        wrong_width = (~F.col("value").contains('"')) & (n_fields != len(header))
        error = (
            F.when(_invalid_utf8(F.col("value")), F.lit("not valid UTF-8"))
            .when(wrong_width, F.lit(f"CSV row does not have the header's {len(header)} fields"))
            .when(F.col("__cs_csv.__cs_corrupt").isNotNull(), F.lit("unparseable CSV row"))
        )
        return (
            _text_lines(spark, files)
            .where((F.col(C.LINE) > 1) & (F.trim(F.col("value")) != ""))
            .select(
                FILE_ID,
                (F.col(C.LINE) - 1).alias(C.LINE),
                F.col("value").alias(C.RAW),
                parsed.alias("__cs_csv"),
                error.alias(PARSE_ERROR),
            )
            .select(
                FILE_ID,
                C.LINE,
                C.RAW,
                *[
                    (F.col(f"__cs_csv.{n}") if n in known else F.lit(None).cast("string")).alias(n)
                    for n in INPUT_FIELDS
                ],
                PARSE_ERROR,
            )
            .transform(_finish)
        )


def _parquet_schema(file: InputFile) -> tuple[tuple[str, str], ...] | str:
    """The file's columns and their Parquet types, or why it cannot be read."""
    try:
        schema = pq.read_schema(file.path)
    except (OSError, ValueError) as e:
        return f"not a readable Parquet file ({str(e).splitlines()[0][:200]})"
    # the whole schema: files that differ in any column are read apart, so `raw` shows all
    return tuple((f.name, str(f.type)) for f in schema)


@dataclass(frozen=True)
class ParquetReader:
    """Parquet files (and a Delta table's data files); `raw` is the row as JSON.

    Files are grouped by their input columns' types, each group read with its own
    schema, and every field cast to a string: files that disagree on a column's type
    are both read."""

    name: str = "parquet"

    def extensions(self, settings: IngestSettings) -> tuple[str, ...]:
        return settings.parquet_extensions

    def sniff(self, head: bytes) -> bool:
        return head.startswith(b"PAR1")

    def read(self, spark: SparkSession, files: Sequence[InputFile], options: object) -> DataFrame:
        return self.planned(spark, files, options, text=True).rows

    def read_without_text(
        self, spark: SparkSession, files: Sequence[InputFile], options: object
    ) -> DataFrame:
        """As `read`, with `raw` null: making each row's JSON text costs more than the rest
        of reading it, and only rejected rows need it (ingest reads theirs again)."""
        return self.planned(spark, files, options, text=False).rows

    def planned(
        self, spark: SparkSession, files: Sequence[InputFile], options: object, text: bool
    ) -> RawRead:
        """`read` (text=False: `read_without_text`) and the plan of its Python tasks."""
        readable, bad = _unreadable(files)
        by_schema: dict[tuple[tuple[str, str], ...], list[InputFile]] = {}
        for file in readable:
            schema = _parquet_schema(file)
            if isinstance(schema, str):
                bad.append((file, schema))
            else:
                by_schema.setdefault(schema, []).append(file)
        parts = [RawRead(whole_file_rows(spark, bad))] if bad else []
        for group in by_schema.values():
            parts.append(self._read(spark, group, text))
        return union_reads(parts)

    def _read(self, spark: SparkSession, files: Sequence[InputFile], text: bool) -> RawRead:
        fields = None if text or not files else columns_of(pq.read_schema(files[0].path))
        if fields is None or self.name != "parquet":
            return RawRead(self._read_spark(spark, files, text))
        # without text, Python tasks can make these rows themselves (`parquet_ranges`)
        cores = spark.sparkContext.defaultParallelism
        ranges = plan_ranges([(f.file_id, f.path) for f in files], fields, cores)
        if not ranges.tasks:
            return RawRead(self._read_spark(spark, files, text))
        # Spark's read is made only if asked for (its schema inference is a Spark job)
        return RawRead(lambda: self._read_spark(spark, files, text), TaskRows((ranges,)))

    def _read_spark(self, spark: SparkSession, files: Sequence[InputFile], text: bool) -> DataFrame:
        data = file_reader(spark).parquet(*[spark_path(f.path) for f in files])
        present = {c.lower(): c for c in data.columns}
        located = with_file_ids(
            data.select(
                "*",
                (F.col("_metadata.row_index") + 1).alias(C.LINE),
                F.col("_metadata.file_path").alias(_PATH),
            ),
            F.col(_PATH),
            files,
        )
        raw = (
            F.to_json(F.struct(*[F.col(f"`{c}`") for c in data.columns]))
            if text
            else F.lit(None).cast("string")
        )
        # without text (ingest's read), numbers stay typed: their string form would only be
        # parsed back (`raw.TYPED_FIELDS` says which types keep the same value and rules)
        kept = {} if text else typed_fields({n: data.schema[present[n]].dataType for n in present})
        rows = located.select(
            FILE_ID,
            C.LINE,
            raw.alias(C.RAW),
            *[
                (
                    F.col(f"`{present[n]}`").cast(kept.get(n, T.StringType()))
                    if n in present
                    else F.lit(None).cast("string")
                ).alias(n)
                for n in INPUT_FIELDS
            ],
        )
        return _finish(rows, keep=kept)


@dataclass(frozen=True)
class DeltaReader(ParquetReader):
    """A Delta table's data files (listed by delta-rs at discovery), read as Parquet."""

    name: str = "delta"

    def extensions(self, settings: IngestSettings) -> tuple[str, ...]:
        return ()

    def sniff(self, head: bytes) -> bool:
        return False


JSONL = JsonLinesReader()
CSV = CsvReader()
PARQUET = ParquetReader()
DELTA = DeltaReader()
