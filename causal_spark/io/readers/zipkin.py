"""Zipkin v2 JSON (docs/formats.md): a JSON array of spans, or an array of such arrays.

The schema is openzipkin/zipkin-api `zipkin2-api.yaml` (Span, Endpoint):
`traceId`, `id`, `parentId`, `kind` (CLIENT, SERVER, PRODUCER, CONSUMER, absent:
local), `timestamp` and `duration` in epoch microseconds, `shared` (a SERVER
span contributing to its CLIENT's id), `localEndpoint` {serviceName, ipv4, ipv6,
port}. One document per file: a file is one task. `line` is the span's 1-based
index in the document (arrays of arrays flattened in order).

A span is its service on its instance: `localEndpoint.serviceName` (`unknown`
when absent) plus `@ipv4:port` (ipv6 in brackets; `@ipv4` or `@:port` when only
one is given). A span without timestamp is not usable (`unparseable`); a span
without duration ends when it starts (the label says "duration unknown").
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import _spark
from causal_spark import columns as C
from causal_spark.io.readers import spans as S
from causal_spark.io.readers._json import integer, is_object, lower_id, unreadable_documents
from causal_spark.io.readers.base import (
    PARSE_ERROR,
    PARSE_REASON,
    RECORD,
    UNPARSEABLE,
    Reader,
    ReaderOptions,
    capped,
    read_whole_files,
)

NAME = "zipkin"
EXTENSIONS: tuple[str, ...] = (".json",)

_STRINGS = T.ArrayType(T.StringType())
ENDPOINT = T.StructType(
    [T.StructField(n, T.StringType()) for n in ("serviceName", "ipv4", "ipv6", "port")]
)
SPAN = T.StructType(
    [
        T.StructField(n, T.StringType())
        for n in (
            "traceId",
            "id",
            "parentId",
            "kind",
            "name",
            "timestamp",
            "duration",
            "shared",
            "localEndpoint",
        )
    ]
)


def sniff(head: bytes) -> bool:
    """A JSON array whose first span has `traceId` and `id` (not Jaeger's `traceID`)."""
    text = head.decode("utf-8", errors="replace").lstrip()
    return text.startswith("[") and '"traceId"' in text and '"id"' in text


def instance_of(endpoint: Column) -> Column:
    """`ipv4:port`, `[ipv6]:port`, `ipv4`, `:port`..., or null when the endpoint names
    no address or port."""
    ipv4, ipv6, port = (F.trim(endpoint[n]) for n in ("ipv4", "ipv6", "port"))
    address = F.coalesce(
        F.when(ipv4 != "", ipv4),
        F.when(
            ipv6 != "",
            F.when(port.isNotNull(), F.concat(F.lit("["), ipv6, F.lit("]"))).otherwise(ipv6),
        ),
    )
    with_port = F.concat(F.coalesce(address, F.lit("")), F.lit(":"), port)
    return F.when(port.isNotNull() & (port != ""), with_port).otherwise(address)


def span_records(spark: SparkSession, files: Sequence[str]) -> tuple[DataFrame, DataFrame]:
    """(span records in `spans.SPAN_SCHEMA`, reject rows of unreadable documents)."""
    documents = read_whole_files(spark, files)
    top = F.from_json(F.col("value"), _STRINGS)
    nested = F.flatten(
        F.transform(
            top,
            lambda e: F.when(
                F.ltrim(e).startswith("["), F.coalesce(F.from_json(e, _STRINGS), F.array(e))
            ).otherwise(F.array(e)),
        )
    )
    records = documents.where(top.isNotNull()).select(
        C.SOURCE, F.posexplode(nested).alias("__zk_pos", "__zk_text")
    )
    span = F.from_json(F.col("__zk_text"), SPAN)
    parsed = records.select(
        C.SOURCE,
        (F.col("__zk_pos") + 1).cast("long").alias(C.LINE),
        F.lit(1).cast("long").alias(RECORD),
        capped(F.col("__zk_text")).alias(C.RAW),
        span.alias("s"),
        is_object(F.col("__zk_text")).alias("__is_object"),
    ).select(
        "*",
        F.from_json(F.col("s.localEndpoint"), ENDPOINT).alias("e"),
        integer(F.col("s.timestamp")).alias("__zk_start"),
        integer(F.col("s.duration")).alias("__zk_duration"),
    )
    trace_id, span_id = lower_id(F.col("s.traceId")), lower_id(F.col("s.id"))
    unusable = (
        F.when(F.col("s").isNull() | ~F.col("__is_object"), F.lit("not a span object"))
        .when(trace_id.isNull() | span_id.isNull(), F.lit("not a span: no traceId or id"))
        .when(F.col("s.timestamp").isNull(), F.lit("span without timestamp"))
        .when(
            F.col("__zk_start").isNull(),
            F.format_string("timestamp '%s' is not epoch microseconds", F.col("s.timestamp")),
        )
    )
    malformed = F.when(
        F.col("s.duration").isNotNull() & F.coalesce(F.col("__zk_duration") < 0, F.lit(True)),
        F.format_string("duration '%s' is not a count of microseconds", F.col("s.duration")),
    )
    error = F.coalesce(unusable, malformed)
    reason = F.when(unusable.isNotNull(), F.lit(UNPARSEABLE))
    start = F.col("__zk_start") * 1000
    spans = parsed.select(
        C.SOURCE,
        C.LINE,
        RECORD,
        C.RAW,
        trace_id.alias(C.TRACE_ID),
        span_id.alias(S.SPAN_ID),
        F.when(
            lower_id(F.col("s.parentId")).isNotNull(),
            F.struct(
                F.lit(None).cast("string").alias(C.TRACE_ID),
                lower_id(F.col("s.parentId")).alias(S.SPAN_ID),
            ),
        ).alias(S.PARENT),
        S.normalized_kind(F.col("s.kind")).alias(S.KIND),
        (_spark.lower(F.trim(F.col("s.shared"))) == "true").alias(S.SHARED),
        F.col("e.serviceName").alias(S.SERVICE),
        instance_of(F.col("e")).alias(S.INSTANCE),
        start.alias(S.START_NS),
        (start + F.coalesce(F.col("__zk_duration"), F.lit(0)) * 1000).alias(S.END_NS),
        F.col("s.name").alias(S.NAME),
        F.lit(None).cast(T.ArrayType(S.REFERENCE)).alias(S.LINKS),
        F.when(F.col("s.duration").isNull(), F.lit("duration unknown")).alias(S.NOTE),
        error.alias(PARSE_ERROR),
        reason.alias(PARSE_REASON),
    )
    return spans, unreadable_documents(documents, top, "a JSON array of Zipkin v2 spans")


def read(spark: SparkSession, files: Sequence[str], options: ReaderOptions) -> DataFrame:
    """Zipkin v2 JSON files as raw rows (see the module docstring and `spans`)."""
    spans, unreadable = span_records(spark, files)
    return S.pair_spans(spans, options.span_process).unionByName(unreadable)


READER = Reader(name=NAME, extensions=EXTENSIONS, sniff=sniff, read=read)
