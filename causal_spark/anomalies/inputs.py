"""The detector's inputs: the delivered messages of the traces whose clocks are ok and whose
estimated peak fits `detect.max_trace_bytes` (`size`)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark._spark import checkpoint
from causal_spark.anomalies import size
from causal_spark.clocks.status import CLOCK_STATUS_OK
from causal_spark.config import DetectSettings

REASON = "reason"


def ok_traces(trace_clocks: DataFrame) -> DataFrame:
    """(trace_id) of the traces whose clocks are ok."""
    return trace_clocks.where(F.col("status") == CLOCK_STATUS_OK).select(C.TRACE_ID)


def delivered_messages(messages: DataFrame, trace_clocks: DataFrame) -> DataFrame:
    """Delivered messages of ok traces: trace_id, msg_id, src, dst, pidx, lseq and ts of both
    ends.

    Checkpointed: the detector reads it three times.
    """
    return checkpoint(
        messages.where(F.col(C.STATUS) == C.DELIVERED)
        .join(F.broadcast(ok_traces(trace_clocks)), C.TRACE_ID)
        .select(
            C.TRACE_ID,
            C.MSG_ID,
            C.SRC,
            C.DST,
            F.col(C.SRC_PIDX).cast("long").alias(C.SRC_PIDX),
            F.col(C.DST_PIDX).cast("long").alias(C.DST_PIDX),
            C.SEND_LSEQ,
            C.RECV_LSEQ,
            C.SEND_TS,
            C.RECV_TS,
        )
    )


def too_large_traces(
    messages: DataFrame, trace_clocks: DataFrame, settings: DetectSettings
) -> DataFrame:
    """(trace_id, reason) of the ok traces whose detect tasks would hold more than
    `settings.max_trace_bytes` at their estimated peak (`size.detect_bytes`); small, checkpointed.

    Two aggregations of the delivered messages give each trace's shape: its messages, the
    most received by one process and the largest multicast (messages of one send event).
    """
    delivered = messages.where(F.col(C.STATUS) == C.DELIVERED).join(
        F.broadcast(ok_traces(trace_clocks)), C.TRACE_ID
    )
    per_destination = (
        delivered.groupBy(C.TRACE_ID, C.DST_PIDX)
        .count()
        .groupBy(C.TRACE_ID)
        .agg(F.sum("count").alias("__messages"), F.max("count").alias("__receives"))
    )
    per_send = (
        delivered.groupBy(C.TRACE_ID, C.SRC_PIDX, C.SEND_LSEQ)
        .count()
        .groupBy(C.TRACE_ID)
        .agg(F.max("count").alias("__fanout"))
    )
    shape = per_destination.join(per_send, C.TRACE_ID).join(
        trace_clocks.select(C.TRACE_ID, F.col("n_processes").alias("__n")), C.TRACE_ID
    )
    count, n, receives = F.col("__messages"), F.col("__n"), F.col("__receives")
    estimate = size.detect_bytes(
        count, n, receives, F.col("__fanout"), settings.per_trace_max_messages, settings.slab_events
    )
    limit = settings.max_trace_bytes
    return checkpoint(
        shape.where(estimate > limit).select(
            C.TRACE_ID,
            F.format_string(
                "estimated peak %s exceeds detect.max_trace_bytes %s (%d delivered messages, "
                "n = %d processes, up to %d received by one process; docs/anomalies.md)",
                _mib(estimate),
                F.lit(f"{limit / 2**20:.1f} MiB"),
                count,
                n,
                receives,
            ).alias(REASON),
        )
    )


def _mib(size_bytes: Column) -> Column:
    return F.format_string("%.1f MiB", size_bytes / F.lit(float(1 << 20)))


def analysable_messages(
    messages: DataFrame, trace_clocks: DataFrame, settings: DetectSettings
) -> tuple[DataFrame, DataFrame]:
    """(`delivered_messages` of the ok traces within `settings.max_trace_bytes`, the
    `too_large_traces` left out)."""
    too_large = too_large_traces(messages, trace_clocks, settings)
    within = trace_clocks.join(F.broadcast(too_large.select(C.TRACE_ID)), C.TRACE_ID, "left_anti")
    return delivered_messages(messages, within), too_large


_MESSAGE_ENDS = (C.TRACE_ID, C.MSG_ID, C.SRC, C.DST, C.SRC_PIDX, C.DST_PIDX, C.SEND_LSEQ,
                 C.RECV_LSEQ)  # fmt: skip


def _message_order(messages: pa.Table) -> pa.Table:
    # one row per message, in an order that does not depend on partitioning
    return messages.sort_by(
        [(C.SRC_PIDX, "ascending"), (C.SEND_LSEQ, "ascending"), (C.DST_PIDX, "ascending")]
    )
