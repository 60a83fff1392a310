"""The detector's inputs: the delivered messages of the traces whose clocks are ok."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark._spark import checkpoint
from causal_spark.clocks.status import CLOCK_STATUS_OK


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


_MESSAGE_ENDS = (C.TRACE_ID, C.MSG_ID, C.SRC, C.DST, C.SRC_PIDX, C.DST_PIDX, C.SEND_LSEQ,
                 C.RECV_LSEQ)  # fmt: skip


def _message_order(messages: pa.Table) -> pa.Table:
    # one row per message, in an order that does not depend on partitioning
    return messages.sort_by(
        [(C.SRC_PIDX, "ascending"), (C.SEND_LSEQ, "ascending"), (C.DST_PIDX, "ascending")]
    )
