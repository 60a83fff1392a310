"""Readers: one per input format, each turning files into raw rows (`io.sources.RAW_SCHEMA`).

The registry is explicit: `READERS` maps a reader's name to it. A reader has
the extensions it claims, a `sniff` that recognises its files by their first
bytes (for `--format auto` where the extension does not decide), and `read`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession

from causal_spark.config import IngestSettings
from causal_spark.io.readers import events
from causal_spark.io.sources import InputError, InputFile

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


READERS: dict[str, Reader] = {
    reader.name: reader for reader in (events.JSONL, events.CSV, events.PARQUET, events.DELTA)
}


def reader_named(name: str) -> Reader:
    try:
        return READERS[name]
    except KeyError:
        raise InputError(f"unknown input format '{name}'; known: {sorted(READERS)}") from None


def known_extensions(settings: IngestSettings) -> tuple[str, ...]:
    return tuple(sorted({ext for r in READERS.values() for ext in r.extensions(settings)}))


def _extension_of(file: Path) -> str:
    name = file.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return "." + name.rsplit(".", 1)[-1] if "." in name else ""


def choose_reader(file: Path, settings: IngestSettings, sniff: bool = True) -> str | None:
    """The reader of `file`: the one claiming its extension whose sniff accepts its head,
    else the first that claims the extension, else any whose sniff accepts it; None if none."""
    extension = _extension_of(file)
    claiming = [r for r in READERS.values() if extension in r.extensions(settings)]
    if not sniff:
        return claiming[0].name if claiming else None
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
        return claiming[0].name if claiming else None
    for reader in claiming:
        if reader.sniff(head):
            return reader.name
    if claiming:
        return claiming[0].name
    for reader in READERS.values():
        if reader.sniff(head):
            return reader.name
    return None
