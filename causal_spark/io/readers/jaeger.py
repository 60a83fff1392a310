"""Jaeger JSON (docs/formats.md): the query API / UI export `{"data": [trace, ...]}`.

The schema is jaegertracing/jaeger `internal/uimodel/model.go` (the UI model the
query API returns): a trace is {traceID, spans, processes}; a span has traceID,
spanID, operationName, references [{refType CHILD_OF | FOLLOWS_FROM, traceID,
spanID}], startTime and duration in microseconds, tags [{key, type, value}]
(`span.kind`: client, server, producer, consumer), processID naming an entry of
the trace's processes {serviceName, tags} (or an embedded `process`). A single
trace object (without `data`) is read too. One document per file: a file is
one task; `line` is the span's 1-based index in the document.

The parent is the first CHILD_OF reference (else the deprecated parentSpanID,
else the first FOLLOWS_FROM, as Jaeger's UI does); the other FOLLOWS_FROM
references are links (a CONSUMER's producer). The instance is the process tag
`hostname`, else `ip`.
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

NAME = "jaeger"
EXTENSIONS: tuple[str, ...] = (".json",)

_TAGS = T.ArrayType(
    T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.StringType())])
)
_REFS = T.ArrayType(
    T.StructType([T.StructField(n, T.StringType()) for n in ("refType", "traceID", "spanID")])
)
_CORRUPT = "__jg_corrupt"
DOCUMENT = T.StructType(
    [
        T.StructField(_CORRUPT, T.StringType()),
        T.StructField("data", T.ArrayType(T.StringType())),
        T.StructField("spans", T.StringType()),
    ]
)
TRACE = T.StructType(
    [
        T.StructField("traceID", T.StringType()),
        T.StructField("spans", T.ArrayType(T.StringType())),
        T.StructField("processes", T.MapType(T.StringType(), T.StringType())),
    ]
)
SPAN = T.StructType(
    [
        *[
            T.StructField(n, T.StringType())
            for n in (
                "traceID",
                "spanID",
                "parentSpanID",
                "operationName",
                "startTime",
                "duration",
                "processID",
                "process",
            )
        ],
        T.StructField("references", _REFS),
        T.StructField("tags", _TAGS),
    ]
)
PROCESS = T.StructType([T.StructField("serviceName", T.StringType()), T.StructField("tags", _TAGS)])


def sniff(head: bytes) -> bool:
    """A JSON object with Jaeger's `traceID` / `spanID` keys (Zipkin and OTLP write `traceId`)."""
    text = head.decode("utf-8", errors="replace").lstrip()
    return text.startswith("{") and ('"traceID"' in text or '"spanID"' in text)


def _tag(tags: Column, key: str) -> Column:
    return F.try_element_at(F.filter(tags, lambda t: t["key"] == key), F.lit(1))["value"]


def _reference(ref: Column) -> Column:
    return F.struct(
        lower_id(ref["traceID"]).alias(C.TRACE_ID), lower_id(ref["spanID"]).alias(S.SPAN_ID)
    )


def span_records(spark: SparkSession, files: Sequence[str]) -> tuple[DataFrame, DataFrame]:
    """(span records in `spans.SPAN_SCHEMA`, reject rows of unreadable documents)."""
    documents = read_whole_files(spark, files)
    document = F.from_json(
        F.col("value"), DOCUMENT, {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"}
    )
    traces = F.when(
        document[_CORRUPT].isNull(),
        F.coalesce(
            document["data"], F.when(document["spans"].isNotNull(), F.array(F.col("value")))
        ),
    )
    records = F.flatten(
        F.transform(
            traces,
            lambda t: F.transform(
                F.coalesce(F.from_json(t, TRACE)["spans"], F.array()),
                lambda s: F.struct(
                    s.alias("text"), F.from_json(t, TRACE)["processes"].alias("processes")
                ),
            ),
        )
    )
    exploded = documents.where(traces.isNotNull()).select(
        C.SOURCE, F.posexplode(records).alias("__jg_pos", "__jg_r")
    )
    span = F.from_json(F.col("__jg_r.text"), SPAN)
    parsed = exploded.select(
        C.SOURCE,
        (F.col("__jg_pos") + 1).cast("long").alias(C.LINE),
        F.lit(1).cast("long").alias(RECORD),
        capped(F.col("__jg_r.text")).alias(C.RAW),
        span.alias("s"),
        is_object(F.col("__jg_r.text")).alias("__is_object"),
        F.col("__jg_r.processes").alias("__jg_processes"),
    ).select(
        "*",
        F.from_json(
            F.coalesce(
                F.col("s.process"), F.try_element_at(F.col("__jg_processes"), F.col("s.processID"))
            ),
            PROCESS,
        ).alias("p"),
        integer(F.col("s.startTime")).alias("__jg_start"),
        integer(F.col("s.duration")).alias("__jg_duration"),
    )
    refs = F.coalesce(F.col("s.references"), F.array())
    child_of = F.filter(refs, lambda r: _spark.upper(r["refType"]) == "CHILD_OF")
    follows = F.filter(refs, lambda r: _spark.upper(r["refType"]) == "FOLLOWS_FROM")
    deprecated_parent = F.when(
        lower_id(F.col("s.parentSpanID")).isNotNull(),
        F.struct(
            F.lit(None).cast("string").alias(C.TRACE_ID),
            lower_id(F.col("s.parentSpanID")).alias(S.SPAN_ID),
        ),
    )
    first_follows = F.try_element_at(follows, F.lit(1))
    parent = F.coalesce(
        F.try_element_at(F.transform(child_of, _reference), F.lit(1)),
        deprecated_parent,
        F.when(first_follows.isNotNull(), _reference(first_follows)),
    )
    parent_is_follows = (F.size(child_of) == 0) & deprecated_parent.isNull()
    links = F.transform(
        F.when(parent_is_follows, F.slice(follows, 2, 1 << 30)).otherwise(follows), _reference
    )
    trace_id, span_id = lower_id(F.col("s.traceID")), lower_id(F.col("s.spanID"))
    unusable = (
        F.when(F.col("s").isNull() | ~F.col("__is_object"), F.lit("not a span object"))
        .when(trace_id.isNull() | span_id.isNull(), F.lit("not a span: no traceID or spanID"))
        .when(F.col("s.startTime").isNull(), F.lit("span without startTime"))
        .when(
            F.col("__jg_start").isNull(),
            F.format_string("startTime '%s' is not epoch microseconds", F.col("s.startTime")),
        )
    )
    malformed = F.when(
        F.col("s.duration").isNotNull() & F.coalesce(F.col("__jg_duration") < 0, F.lit(True)),
        F.format_string("duration '%s' is not a count of microseconds", F.col("s.duration")),
    )
    start = F.col("__jg_start") * 1000
    tags = F.coalesce(F.col("p.tags"), F.array())
    spans = parsed.select(
        C.SOURCE,
        C.LINE,
        RECORD,
        C.RAW,
        trace_id.alias(C.TRACE_ID),
        span_id.alias(S.SPAN_ID),
        parent.alias(S.PARENT),
        S.normalized_kind(_tag(F.coalesce(F.col("s.tags"), F.array()), "span.kind")).alias(S.KIND),
        F.lit(False).alias(S.SHARED),
        F.col("p.serviceName").alias(S.SERVICE),
        F.coalesce(_tag(tags, "hostname"), _tag(tags, "ip")).alias(S.INSTANCE),
        start.alias(S.START_NS),
        (start + F.coalesce(F.col("__jg_duration"), F.lit(0)) * 1000).alias(S.END_NS),
        F.col("s.operationName").alias(S.NAME),
        links.alias(S.LINKS),
        F.when(F.col("s.duration").isNull(), F.lit("duration unknown")).alias(S.NOTE),
        F.coalesce(unusable, malformed).alias(PARSE_ERROR),
        F.when(unusable.isNotNull(), F.lit(UNPARSEABLE)).alias(PARSE_REASON),
    )
    return spans, unreadable_documents(documents, traces, 'a Jaeger JSON document {"data": [...]}')


def read(spark: SparkSession, files: Sequence[str], options: ReaderOptions) -> DataFrame:
    """Jaeger JSON files as raw rows (see the module docstring and `spans`)."""
    spans, unreadable = span_records(spark, files)
    return S.pair_spans(spans, options.span_process).unionByName(unreadable)


READER = Reader(name=NAME, extensions=EXTENSIONS, sniff=sniff, read=read)
