"""Spans (Zipkin, Jaeger, OTLP) -> events and messages (docs/formats.md), shared by the three.

Each format's reader parses its files into *span records* (`SPAN_SCHEMA`); this
module pairs them. For each span:

- its process: the service, plus `@instance` when the span names one, or with
  `span_process="span"` that plus `/<span id>` (every span its own process);
- two events on it, its start and its end (ts in seconds); local order by ts,
  ties: starts before ends, then span id, then kind;
- the messages it receives, found through its references (parent, Zipkin's
  shared id, OTLP links / Jaeger FOLLOWS_FROM):
  * a SERVER span and its CLIENT (the CLIENT with the same id, Zipkin `shared`,
    else its parent if that is a CLIENT): request `<server id>:req` from the
    client's start to the server's start, response `<server id>:resp` from the
    server's end to the client's end;
  * a CONSUMER span and each PRODUCER it names (parent or link): one message
    from the producer's start to the consumer's start, `<consumer id>:msg`
    (`<consumer id>:msg:<producer id>` when it names several);
  * otherwise, a parent on another process: one message `<child id>:call` from
    the parent's start to the child's start (a call whose reply we cannot see);
    a parent on the same process adds nothing;
  * a SERVER whose client, or a CONSUMER whose producer, is absent from the
    input (its parent id, shared id or link names no span read) keeps its events
    and receives an orphan (no send, no peer): `:req` / `:msg`.

A reference to a span of another trace is absent (a trace is the unit). A span
whose (trace, id, kind) repeats an earlier one is rejected `duplicate_span`.

The pairing is one shuffle: span records grouped by trace, each trace paired in one
Python task by `spans_kernel` (NumPy and Arrow); a trace's records and rows (about
1 KB a span, the span's text included) are held by that task.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import _spark
from causal_spark import columns as C
from causal_spark.io.readers import spans_kernel
from causal_spark.io.readers.base import (
    PARSE_ERROR,
    PARSE_REASON,
    RAW_SCHEMA,
    RECORD,
    SpanProcess,
    conform,
)

CLIENT, SERVER, PRODUCER, CONSUMER = "CLIENT", "SERVER", "PRODUCER", "CONSUMER"

SPAN_ID = "span_id"
PARENT = "parent"
KIND = "span_kind"
SHARED = "shared"
SERVICE = "service"
INSTANCE = "instance"
START_NS = "start_ns"
END_NS = "end_ns"
NAME = "name"
LINKS = "links"
NOTE = "note"
# rows per Arrow batch the pairing hands back to Spark
_BATCH = 8192

REFERENCE = T.StructType(
    [T.StructField(C.TRACE_ID, T.StringType()), T.StructField(SPAN_ID, T.StringType())]
)
# what each format reader produces: one row per span record
SPAN_SCHEMA = T.StructType(
    [
        T.StructField(C.SOURCE, T.StringType()),
        T.StructField(C.LINE, T.LongType()),
        T.StructField(RECORD, T.LongType()),
        T.StructField(C.RAW, T.StringType()),
        T.StructField(C.TRACE_ID, T.StringType()),
        T.StructField(SPAN_ID, T.StringType()),
        # the parent (trace null: the span's own trace)
        T.StructField(PARENT, REFERENCE),
        T.StructField(KIND, T.StringType()),
        T.StructField(SHARED, T.BooleanType()),
        T.StructField(SERVICE, T.StringType()),
        T.StructField(INSTANCE, T.StringType()),
        T.StructField(START_NS, T.LongType()),
        T.StructField(END_NS, T.LongType()),
        T.StructField(NAME, T.StringType()),
        # OTLP links, Jaeger FOLLOWS_FROM references (trace null: the span's own)
        T.StructField(LINKS, T.ArrayType(REFERENCE)),
        # a remark for the label (e.g. "duration unknown")
        T.StructField(NOTE, T.StringType()),
        T.StructField(PARSE_ERROR, T.StringType()),
        T.StructField(PARSE_REASON, T.StringType()),
    ]
)


def normalized_kind(kind: Column) -> Column:
    """CLIENT, SERVER, PRODUCER, CONSUMER, or null (local, internal or unknown)."""
    upper = _spark.upper(F.trim(kind))
    return F.when(upper.isin(CLIENT, SERVER, PRODUCER, CONSUMER), upper)


def pair_spans(spans: DataFrame, span_process: SpanProcess) -> DataFrame:
    """Span records (`SPAN_SCHEMA`) -> raw rows (the contract of `base`): grouped by trace,
    each trace paired by `spans_kernel.pair` in one task."""

    def per_trace(records: pa.Table) -> pa.Table:
        # Spark sends each chunk as one Arrow batch: keep them small for the JVM
        rows = spans_kernel.pair(records, span_process)
        return pa.Table.from_batches(rows.to_batches(max_chunksize=_BATCH), rows.schema)

    rows = (
        spans.select(*SPAN_SCHEMA.fieldNames())
        .groupBy(C.TRACE_ID)
        .applyInArrow(per_trace, RAW_SCHEMA)
    )
    return conform(rows)
