"""Readers of the logs other tools record (DESIGN §1b), each a `Reader`: its name,
default extensions, a sniffer of a file's first bytes and `read(spark, files,
options) -> DataFrame` of raw rows (`base.RAW_SCHEMA`). See docs/formats.md.
"""

from __future__ import annotations

from causal_spark.io.readers import dctracing, jaeger, otlp, shiviz, zipkin
from causal_spark.io.readers.base import (
    RAW_COLUMNS,
    RAW_SCHEMA,
    Reader,
    ReaderError,
    ReaderOptions,
)

READERS: dict[str, Reader] = {
    reader.name: reader
    for reader in (shiviz.READER, dctracing.READER, zipkin.READER, jaeger.READER, otlp.READER)
}
# how many bytes of a file `sniff_format` wants
SNIFF_BYTES = 1024


def sniff_format(head: bytes) -> str | None:
    """The name of the reader whose format a file's first bytes show, else None (the
    formats' signatures exclude each other: OTLP's `resourceSpans`, Jaeger's `traceID`,
    Zipkin's array of `traceId`, a `TracerIdentity` line, a `host {clock}` line)."""
    for name in ("otlp", "jaeger", "zipkin", "dctracing", "shiviz"):
        if READERS[name].sniff(head):
            return name
    return None


__all__ = [
    "RAW_COLUMNS",
    "RAW_SCHEMA",
    "READERS",
    "SNIFF_BYTES",
    "Reader",
    "ReaderError",
    "ReaderOptions",
    "sniff_format",
]
