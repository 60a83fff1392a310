"""OTLP JSON (docs/formats.md): `ExportTraceServiceRequest`s, one per file or one per line.

The schema is open-telemetry/opentelemetry-proto `opentelemetry/proto/trace/v1/
trace.proto` with the OTLP JSON encoding its specification gives: lowerCamelCase
keys, trace and span ids as hex strings (case-insensitive), enums as integers
(the names, e.g. `SPAN_KIND_SERVER`, are accepted too), 64-bit integers as
decimal strings or numbers. A request holds `resourceSpans` [{resource
{attributes}, scopeSpans [{spans}]}] (the deprecated `instrumentationLibrarySpans`
is read as well); a span has traceId, spanId, parentSpanId, name, kind (2 SERVER,
3 CLIENT, 4 PRODUCER, 5 CONSUMER), startTimeUnixNano, endTimeUnixNano, links
[{traceId, spanId}].

A file whose first non-blank line is a whole JSON object is JSON lines: one
request per line, files split across tasks, `line` the request's line and
`record` the span's 1-based index in it. Any other file (a pretty-printed
request) is one document: one task, `line` the span's 1-based index. The service
is the resource's `service.name` (`unknown_service` when absent, as OpenTelemetry
says), the instance its `service.instance.id`, else `host.name`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

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
    absolute_files,
    capped,
    read_lines,
    read_whole_files,
)

NAME = "otlp"
EXTENSIONS: tuple[str, ...] = (".json", ".jsonl")
KINDS: dict[str, str] = {
    "2": S.SERVER,
    "3": S.CLIENT,
    "4": S.PRODUCER,
    "5": S.CONSUMER,
    "SPAN_KIND_SERVER": S.SERVER,
    "SPAN_KIND_CLIENT": S.CLIENT,
    "SPAN_KIND_PRODUCER": S.PRODUCER,
    "SPAN_KIND_CONSUMER": S.CONSUMER,
}
_WHAT = "an OTLP JSON ExportTraceServiceRequest with resourceSpans"
# how much of a file's start is read to tell JSON lines from one document
HEAD_BYTES = 1 << 16

_ATTRIBUTES = T.ArrayType(
    T.StructType(
        [
            T.StructField("key", T.StringType()),
            T.StructField(
                "value",
                T.StructType(
                    [T.StructField(n, T.StringType()) for n in ("stringValue", "intValue")]
                ),
            ),
        ]
    )
)
_SCOPES = T.ArrayType(T.StructType([T.StructField("spans", T.ArrayType(T.StringType()))]))
_CORRUPT = "__ot_corrupt"
REQUEST = T.StructType(
    [
        T.StructField(_CORRUPT, T.StringType()),
        T.StructField(
            "resourceSpans",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField(
                            "resource", T.StructType([T.StructField("attributes", _ATTRIBUTES)])
                        ),
                        T.StructField("scopeSpans", _SCOPES),
                        T.StructField("instrumentationLibrarySpans", _SCOPES),
                    ]
                )
            ),
        ),
    ]
)
_LINKS = T.ArrayType(
    T.StructType([T.StructField(n, T.StringType()) for n in ("traceId", "spanId")])
)
SPAN = T.StructType(
    [
        *[
            T.StructField(n, T.StringType())
            for n in (
                "traceId",
                "spanId",
                "parentSpanId",
                "name",
                "kind",
                "startTimeUnixNano",
                "endTimeUnixNano",
            )
        ],
        T.StructField("links", _LINKS),
    ]
)


def sniff(head: bytes) -> bool:
    """A JSON object with `resourceSpans` near its start."""
    text = head.decode("utf-8", errors="replace").lstrip()
    return text.startswith("{") and '"resourceSpans"' in text


def is_json_lines(path: str) -> bool:
    """True when the file's first non-blank line is a whole JSON value (or longer than
    `HEAD_BYTES`: a one-line request is read as JSON lines all the same)."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    text = head.decode("utf-8", errors="replace").lstrip()
    first, newline, _ = text.partition("\n")
    if not newline and len(head) == HEAD_BYTES:
        return True
    try:
        json.loads(first)
    except ValueError:
        return False
    return True


def _attribute(attributes: Column, key: str) -> Column:
    match = F.try_element_at(F.filter(attributes, lambda a: a["key"] == key), F.lit(1))
    return F.coalesce(match["value"]["stringValue"], match["value"]["intValue"])


def _spans_of(request: Column) -> Column:
    """The request's spans as an array of (span text, resource attributes)."""
    return F.flatten(
        F.transform(
            F.coalesce(request["resourceSpans"], F.array()),
            lambda rs: F.flatten(
                F.transform(
                    F.concat(
                        F.coalesce(rs["scopeSpans"], F.array()),
                        F.coalesce(rs["instrumentationLibrarySpans"], F.array()),
                    ),
                    lambda ss: F.transform(
                        F.coalesce(ss["spans"], F.array()),
                        lambda s: F.struct(
                            s.alias("text"), rs["resource"]["attributes"].alias("attributes")
                        ),
                    ),
                )
            ),
        )
    )


def _request(text: Column) -> Column:
    """The request, or null when the text is not JSON or has no `resourceSpans`."""
    request = F.from_json(
        text, REQUEST, {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"}
    )
    return F.when(request[_CORRUPT].isNull() & request["resourceSpans"].isNotNull(), request)


def _records(requests: DataFrame, lines: bool) -> DataFrame:
    """Requests (`source`, `line`, `value`) -> one row per span: source, line, record,
    raw, `__ot_span` (the span text) and `__ot_attributes`."""
    request = _request(F.col("value"))
    exploded = requests.where(request.isNotNull()).select(
        C.SOURCE, C.LINE, F.posexplode(_spans_of(request)).alias("__ot_pos", "__ot_r")
    )
    position = (F.col("__ot_pos") + 1).cast("long")
    return exploded.select(
        C.SOURCE,
        (F.col(C.LINE) if lines else position).alias(C.LINE),
        (position if lines else F.lit(1).cast("long")).alias(RECORD),
        capped(F.col("__ot_r.text")).alias(C.RAW),
        F.col("__ot_r.text").alias("__ot_span"),
        F.col("__ot_r.attributes").alias("__ot_attributes"),
    )


def span_records(spark: SparkSession, files: Sequence[str]) -> tuple[DataFrame, DataFrame]:
    """(span records in `spans.SPAN_SCHEMA`, reject rows of unreadable requests)."""
    paths = absolute_files(files)
    by_lines = [p for p in paths if is_json_lines(p)]
    documents = [p for p in paths if p not in by_lines]
    parts: list[DataFrame] = []
    rejects: list[DataFrame] = []
    if by_lines:
        lines = read_lines(spark, by_lines).where(F.trim(F.col("value")) != "")
        parts.append(_records(lines, lines=True))
        rejects.append(unreadable_documents(lines, _request(F.col("value")), _WHAT))
    if documents:
        whole = read_whole_files(spark, documents).withColumn(C.LINE, F.lit(1).cast("long"))
        parts.append(_records(whole, lines=False))
        rejects.append(unreadable_documents(whole, _request(F.col("value")), _WHAT))
    records = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    unreadable = rejects[0] if len(rejects) == 1 else rejects[0].unionByName(rejects[1])
    span = F.from_json(F.col("__ot_span"), SPAN)
    parsed = (
        records.withColumn("s", span)
        .withColumn("__is_object", is_object(F.col("__ot_span")))
        .select(
            "*",
            integer(F.col("s.startTimeUnixNano")).alias("__ot_start"),
            integer(F.col("s.endTimeUnixNano")).alias("__ot_end"),
        )
    )
    kind_map = F.create_map(*[F.lit(x) for pair in KINDS.items() for x in pair])
    trace_id, span_id = lower_id(F.col("s.traceId")), lower_id(F.col("s.spanId"))
    parent_id = lower_id(F.col("s.parentSpanId"))
    unusable = (
        F.when(F.col("s").isNull() | ~F.col("__is_object"), F.lit("not a span object"))
        .when(trace_id.isNull() | span_id.isNull(), F.lit("not a span: no traceId or spanId"))
        .when(F.col("s.startTimeUnixNano").isNull(), F.lit("span without startTimeUnixNano"))
        .when(
            F.col("__ot_start").isNull(),
            F.format_string(
                "startTimeUnixNano '%s' is not epoch nanoseconds", F.col("s.startTimeUnixNano")
            ),
        )
    )
    malformed = F.when(
        F.col("s.endTimeUnixNano").isNotNull()
        & F.coalesce(F.col("__ot_end") < F.col("__ot_start"), F.lit(True)),
        F.format_string(
            "endTimeUnixNano '%s' is not epoch nanoseconds at or after the start",
            F.col("s.endTimeUnixNano"),
        ),
    )
    attributes = F.coalesce(F.col("__ot_attributes"), F.array())
    links = F.transform(
        F.coalesce(F.col("s.links"), F.array()),
        lambda link: F.struct(
            lower_id(link["traceId"]).alias(C.TRACE_ID), lower_id(link["spanId"]).alias(S.SPAN_ID)
        ),
    )
    spans = parsed.select(
        C.SOURCE,
        C.LINE,
        RECORD,
        C.RAW,
        trace_id.alias(C.TRACE_ID),
        span_id.alias(S.SPAN_ID),
        F.when(
            parent_id.isNotNull(),
            F.struct(F.lit(None).cast("string").alias(C.TRACE_ID), parent_id.alias(S.SPAN_ID)),
        ).alias(S.PARENT),
        F.try_element_at(kind_map, F.upper(F.trim(F.col("s.kind")))).alias(S.KIND),
        F.lit(False).alias(S.SHARED),
        F.coalesce(_attribute(attributes, "service.name"), F.lit("unknown_service")).alias(
            S.SERVICE
        ),
        F.coalesce(
            _attribute(attributes, "service.instance.id"), _attribute(attributes, "host.name")
        ).alias(S.INSTANCE),
        F.col("__ot_start").alias(S.START_NS),
        F.coalesce(F.col("__ot_end"), F.col("__ot_start")).alias(S.END_NS),
        F.col("s.name").alias(S.NAME),
        links.alias(S.LINKS),
        F.when(F.col("s.endTimeUnixNano").isNull(), F.lit("duration unknown")).alias(S.NOTE),
        F.coalesce(unusable, malformed).alias(PARSE_ERROR),
        F.when(unusable.isNotNull(), F.lit(UNPARSEABLE)).alias(PARSE_REASON),
    )
    return spans, unreadable


def read(spark: SparkSession, files: Sequence[str], options: ReaderOptions) -> DataFrame:
    """OTLP JSON files as raw rows (see the module docstring and `spans`)."""
    spans, unreadable = span_records(spark, files)
    return S.pair_spans(spans, options.span_process).unionByName(unreadable)


READER = Reader(name=NAME, extensions=EXTENSIONS, sniff=sniff, read=read)
