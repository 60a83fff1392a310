"""The OTLP JSON parse as it was written in Spark SQL before `otlp.parse_requests`
(`from_json` of each request, then of each span): the reference the Python parse is
held to. Kept as it was."""

from __future__ import annotations

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
    absolute_files,
    capped,
    read_lines,
    read_whole_files,
)
from causal_spark.io.readers.otlp import KINDS, is_json_lines

_WHAT = "an OTLP JSON ExportTraceServiceRequest with resourceSpans"

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
