"""Readers: one per input format, each turning files into raw rows (`io.sources.RAW_SCHEMA`).

The registry is explicit: `READERS` maps a reader's name to it. A reader has
the extensions it claims, a `sniff` that recognises its files by their first
bytes (for `--format auto` where the extension does not decide), and `read`.

Our own row format has four readers (`events`: JSON lines, CSV, Parquet, Delta).
The logs other tools record (docs/formats.md: ShiViz/GoVector, DistributedClocks
tracing, Zipkin, Jaeger, OpenTelemetry) have one module each; `NativeReader`
puts each behind the same contract (their rows name a file by its path, ours by
its id). See docs/formats.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark._spark import checkpoint
from causal_spark.config import IngestSettings
from causal_spark.io.raw import RAW_SCHEMA, SUB, InputError, InputFile, with_file_ids
from causal_spark.io.readers import base as native
from causal_spark.io.readers import dctracing, events, jaeger, otlp, shiviz, zipkin

SNIFF_BYTES = 4096


class Reader(Protocol):
    """Reads files of one format as raw rows."""

    @property
    def name(self) -> str: ...

    def extensions(self, settings: IngestSettings) -> tuple[str, ...]: ...

    def sniff(self, head: bytes) -> bool: ...

    def read(
        self, spark: SparkSession, files: Sequence[InputFile], options: object
    ) -> DataFrame: ...


# a record of a native reader is (line, record); ours is (line, sub): records after
# the first on one line (OTLP JSON lines) move their events' `sub` past this stride
RECORD_STRIDE = 1 << 20


@dataclass(frozen=True)
class NativeReader:
    """A reader of another tool's log format behind the ingest contract."""

    inner: native.Reader

    @property
    def name(self) -> str:
        return self.inner.name

    def extensions(self, settings: IngestSettings) -> tuple[str, ...]:
        return self.inner.extensions

    def sniff(self, head: bytes) -> bool:
        return bool(self.inner.sniff(head))

    def read(self, spark: SparkSession, files: Sequence[InputFile], options: object) -> DataFrame:
        given = reader_options(options)
        rows = self.inner.read(spark, [f.path for f in files], given)
        record = F.coalesce(F.col(native.RECORD), F.lit(1))
        sub = F.coalesce(F.col(native.SUB), F.lit(0)) + (record - 1) * RECORD_STRIDE
        joined = with_file_ids(rows, F.col(C.SOURCE), files, by="path")
        # computed once: a native reader's plan is large (parsing, pairing spans, clock
        # deltas) and ingest reads its rows several times
        return _materialised(
            joined.select(
                *[
                    (sub if f.name == SUB else F.col(f.name)).cast(f.dataType).alias(f.name)
                    for f in RAW_SCHEMA.fields
                ]
            )
        )


_CONSTRAINTS = "spark.sql.constraintPropagation.enabled"


def _materialised(frame: DataFrame) -> DataFrame:
    """`frame` checkpointed, with no optimizer constraints kept.

    Spark keeps a checkpoint's constraints; for these readers' plans some of them name
    columns the checkpoint does not output (`(isnotnull(label#299) OR ...)`), and a union
    of it with other inputs later fails in the optimizer ("key not found: label#299").
    With constraint propagation off while it is built, the checkpoint keeps none."""
    conf = frame.sparkSession.conf
    before = conf.get(_CONSTRAINTS, "true")
    conf.set(_CONSTRAINTS, "false")
    try:
        return checkpoint(frame)
    finally:
        conf.set(_CONSTRAINTS, before or "true")


def reader_options(options: object) -> native.ReaderOptions:
    """The native readers' options from the `ingest` settings (or as given; default if None)."""
    if isinstance(options, native.ReaderOptions):
        return options
    if isinstance(options, IngestSettings):
        return native.ReaderOptions(
            shiviz_regex=options.shiviz_regex,
            shiviz_delimiter=options.shiviz_delimiter,
            span_process=options.span_process,  # type: ignore[arg-type]
        )
    return native.ReaderOptions()


# `--format events`: our row format, whatever its file type
EVENTS = "events"
OURS: tuple[Reader, ...] = (events.JSONL, events.CSV, events.PARQUET, events.DELTA)
# natives first: their sniffers look for their own signatures, ours for any object
NATIVE: tuple[Reader, ...] = tuple(
    NativeReader(module.READER) for module in (otlp, jaeger, zipkin, dctracing, shiviz)
)
READERS: dict[str, Reader] = {reader.name: reader for reader in (*NATIVE, *OURS)}
# the readers whose rows carry the clock the log recorded (`recorded_vc`)
RECORDING_CLOCKS: frozenset[str] = frozenset({dctracing.NAME, shiviz.NAME})


def sniff_format(head: bytes) -> str | None:
    """The native format a file's first bytes show, else None (their signatures exclude
    each other: OTLP's `resourceSpans`, Jaeger's `traceID`, Zipkin's array of
    `traceId`, a `TracerIdentity` line, a `host {clock}` line)."""
    for reader in NATIVE:
        if reader.sniff(head):
            return reader.name
    return None


def reader_named(name: str) -> Reader:
    try:
        return READERS[name]
    except KeyError:
        raise InputError(f"unknown input format '{name}'; known: {sorted(READERS)}") from None


def known_extensions(settings: IngestSettings) -> tuple[str, ...]:
    return tuple(sorted({ext for r in READERS.values() for ext in r.extensions(settings)}))


def extension_of(file: Path) -> str:
    """The lower-cased extension of `file` (`.log`; of `x.log.gz` too), or ""."""
    name = file.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return "." + name.rsplit(".", 1)[-1] if "." in name else ""


def choose_reader(
    file: Path,
    settings: IngestSettings,
    sniff: bool = True,
    among: Sequence[Reader] | None = None,
) -> str | None:
    """The reader of `file`: the one claiming its extension whose sniff accepts its head,
    else our own reader of that extension, else any whose sniff accepts it; None if
    none (a `.txt` or `.log` that no native format recognises is not input: a licence,
    a note; `--format` forces a reader). `among`: choose only among these readers."""
    candidates = list(among) if among is not None else list(READERS.values())
    extension = extension_of(file)
    claiming = [r for r in candidates if extension in r.extensions(settings)]
    ours = [r for r in claiming if r in OURS]
    if not sniff:
        return (ours or claiming)[0].name if claiming else None
    try:
        with open(file, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
        if file.name.lower().endswith(".gz"):
            import gzip
            import zlib

            try:
                head = gzip.decompress(head)
            except (OSError, EOFError, zlib.error):
                head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head)
    except OSError:
        return (ours or claiming)[0].name if claiming else None
    for reader in claiming:
        if reader.sniff(head):
            return reader.name
    if ours:
        return ours[0].name
    for reader in candidates:
        if reader.sniff(head):
            return reader.name
    return None
