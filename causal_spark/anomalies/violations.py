"""Violations (docs/anomalies.md): overtaken messages and their witness chains.

Two grouped Arrow UDFs over the clocked tables, each a thin adapter around a
kernel of `causal_spark.anomalies.kernel`:

1. per (trace, destination process): the overtaken messages, from the vector
   clocks of the destination's receives, in constant work per receive
   (Schiper, Eggli and Sandoz, "A new algorithm to implement causal ordering",
   Proposition 2) plus a binary search for the first-received overtaking
   message;
2. per trace: a witness chain (shortest causal path in messages) for each
   causal violation whose two messages have different senders.

Only delivered messages of traces whose clocks are `ok` take part. Every kernel
sorts its group's rows first, so the tables do not depend on partitioning.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark import tables
from causal_spark._arrow import int_column, lists, matrix
from causal_spark.anomalies import kernel as K
from causal_spark.anomalies.errors import ChainNotFoundError
from causal_spark.anomalies.inputs import _MESSAGE_ENDS, _message_order

CAUSAL = "causal"
FIFO = "fifo"

KNOWS_DST = "send_knows_dst"
OVERTAKING_PIDX = "overtaking_src_pidx"
OVERTAKING_SEND = "overtaking_send_lseq"


# ---------------------------------------------------------------------------------------------
# 1. overtaken messages, per (trace, destination)

_OVERTAKEN_FIELDS = [
    T.StructField(C.TRACE_ID, T.StringType()),
    T.StructField(C.KIND, T.StringType()),
    T.StructField(C.DST, T.StringType()),
    T.StructField(C.SRC, T.StringType()),
    T.StructField("overtaken_msg", T.StringType()),
    T.StructField("overtaking_msg", T.StringType()),
    T.StructField("overtaking_src", T.StringType()),
    T.StructField(C.SRC_PIDX, T.LongType()),
    T.StructField(C.SEND_LSEQ, T.LongType()),
    T.StructField(OVERTAKING_PIDX, T.LongType()),
    T.StructField(OVERTAKING_SEND, T.LongType()),
]
OVERTAKEN_SCHEMA = T.StructType(_OVERTAKEN_FIELDS)


def overtaken_at_destination(receives: pa.Table, received: pa.Table) -> pa.Table:
    """The overtaken messages of one (trace, destination): a `causal` and a `fifo` row each.

    receives: the destination's receive events (trace_id, pidx, lseq, vc);
    received: the delivered messages it received (`delivered_messages` columns
    plus `send_knows_dst`, vc(send)[dst], or null when no self-message needs it).
    """
    schema = tables.to_arrow(OVERTAKEN_SCHEMA)
    if received.num_rows == 0:
        return schema.empty_table()
    received = received.sort_by([(C.RECV_LSEQ, "ascending")])
    dst = int(received.column(C.DST_PIDX)[0].as_py())
    event_lseq = int_column(receives, C.LSEQ)
    order = np.argsort(event_lseq, kind="stable")
    recv_lseq = int_column(received, C.RECV_LSEQ)
    rows = order[np.searchsorted(event_lseq[order], recv_lseq)]
    n = len(receives.column(C.VC)[0]) if receives.num_rows else 0
    vc = matrix(receives.column(C.VC), n, np.int32)[rows]
    knows = received.column(KNOWS_DST).fill_null(0).to_numpy().astype(np.int64)
    src = int_column(received, C.SRC_PIDX)
    send = int_column(received, C.SEND_LSEQ)
    causal, fifo = K.overtaking(dst, src, send, vc, knows)
    parts = []
    for kind, which in ((CAUSAL, causal), (FIFO, fifo)):
        overtaken = np.flatnonzero(which >= 0)
        if overtaken.size == 0:
            continue
        by = pa.array(which[overtaken])
        at = pa.array(overtaken)
        parts.append(
            pa.table(
                {
                    C.TRACE_ID: received.column(C.TRACE_ID).take(at),
                    C.KIND: pa.array([kind] * overtaken.size, pa.string()),
                    C.DST: received.column(C.DST).take(at),
                    C.SRC: received.column(C.SRC).take(at),
                    "overtaken_msg": received.column(C.MSG_ID).take(at),
                    "overtaking_msg": received.column(C.MSG_ID).take(by),
                    "overtaking_src": received.column(C.SRC).take(by),
                    C.SRC_PIDX: pa.array(src[overtaken]),
                    C.SEND_LSEQ: pa.array(send[overtaken]),
                    OVERTAKING_PIDX: pa.array(src[which[overtaken]]),
                    OVERTAKING_SEND: pa.array(send[which[overtaken]]),
                },
                schema=schema,
            )
        )
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _with_send_knowledge(delivered: DataFrame, events: DataFrame) -> DataFrame:
    """`send_knows_dst` = vc(send)[dst] for the messages into a process that receives a
    self-message; null elsewhere (only a self-message's test needs what the sends of the
    other messages to its destination knew of it)."""
    self_dsts = (
        delivered.where(F.col(C.SRC_PIDX) == F.col(C.DST_PIDX))
        .select(C.TRACE_ID, C.DST_PIDX)
        .distinct()
    )
    if self_dsts.isEmpty():
        # the common case: no self-messages, and no second pass over the events' vectors
        return delivered.withColumn(KNOWS_DST, F.lit(None).cast("long"))
    needing = delivered.join(F.broadcast(self_dsts), [C.TRACE_ID, C.DST_PIDX], "left_semi")
    sends = events.select(
        C.TRACE_ID,
        F.col(C.PIDX).cast("long").alias(C.SRC_PIDX),
        F.col(C.LSEQ).alias(C.SEND_LSEQ),
        C.VC,
    )
    knowledge = needing.join(sends, [C.TRACE_ID, C.SRC_PIDX, C.SEND_LSEQ]).select(
        C.TRACE_ID,
        C.MSG_ID,
        F.element_at(C.VC, (F.col(C.DST_PIDX) + 1).cast("int")).cast("long").alias(KNOWS_DST),
    )
    return delivered.join(knowledge, [C.TRACE_ID, C.MSG_ID], "left")


def overtaken_messages(events: DataFrame, delivered: DataFrame) -> DataFrame:
    """Violation rows (without chains) of every ok trace; columns of OVERTAKEN_SCHEMA.

    events: the clocked `events` table; delivered: `delivered_messages(...)`.
    """
    # no null vc reaches Python: Spark's Arrow batch sizing is quadratic in consecutive null
    # lists (INVALID traces' receives have none, and have nothing to detect)
    receives = events.where((F.col(C.KIND) == C.RECEIVE) & F.col(C.VC).isNotNull()).select(
        C.TRACE_ID, F.col(C.PIDX).cast("long").alias(C.DST_PIDX), C.LSEQ, C.VC
    )
    received = _with_send_knowledge(delivered.select(*_MESSAGE_ENDS), events)
    return (
        receives.groupBy(C.TRACE_ID, C.DST_PIDX)
        .cogroup(received.groupBy(C.TRACE_ID, C.DST_PIDX))
        .applyInArrow(overtaken_at_destination, OVERTAKEN_SCHEMA)
    )


# ---------------------------------------------------------------------------------------------
# 2. witness chains, per trace


def chains_of_trace(messages: pa.Table, overtaken: pa.Table) -> pa.Table:
    """The violation rows of one trace with their witness chains (`violations` columns)."""
    schema = tables.to_arrow(tables.udf_schema(tables.VIOLATIONS))
    if overtaken.num_rows == 0:
        return schema.empty_table()
    overtaken = overtaken.sort_by([("overtaken_msg", "ascending"), (C.KIND, "ascending")])
    messages = _message_order(messages)
    src = int_column(messages, C.SRC_PIDX)
    dst = int_column(messages, C.DST_PIDX)
    n = int(max(src.max(), dst.max())) + 1
    index = K.channels(
        n, src, dst, int_column(messages, C.SEND_LSEQ), int_column(messages, C.RECV_LSEQ)
    )
    from_pidx = int_column(overtaken, C.SRC_PIDX)
    to_pidx = int_column(overtaken, OVERTAKING_PIDX)
    kinds = overtaken.column(C.KIND).to_numpy(zero_copy_only=False)
    needs = np.flatnonzero((kinds == CAUSAL) & (from_pidx != to_pidx))
    path, offsets = K.shortest_chains(
        index,
        src,
        from_pidx[needs],
        int_column(overtaken, C.SEND_LSEQ)[needs],
        to_pidx[needs],
        int_column(overtaken, OVERTAKING_SEND)[needs],
    )
    lengths = np.zeros(overtaken.num_rows, dtype=np.int64)
    lengths[needs] = np.diff(offsets)
    if np.any(lengths[needs] == 0):
        bad = overtaken.column("overtaken_msg")[int(needs[lengths[needs] == 0][0])]
        raise ChainNotFoundError(
            f"trace {overtaken.column(C.TRACE_ID)[0]}: no causal path from the send of "
            f"{bad} to the send of the message that overtook it"
        )
    all_offsets = np.zeros(overtaken.num_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=all_offsets[1:])
    # rows needing a chain are in `needs` order, which is row order: paths line up
    chain = lists(
        messages.column(C.MSG_ID).combine_chunks().take(pa.array(path)), all_offsets, pa.string()
    )
    return pa.table(
        {
            C.TRACE_ID: overtaken.column(C.TRACE_ID),
            C.KIND: overtaken.column(C.KIND),
            C.DST: overtaken.column(C.DST),
            C.SRC: overtaken.column(C.SRC),
            "overtaken_msg": overtaken.column("overtaken_msg"),
            "overtaking_msg": overtaken.column("overtaking_msg"),
            "overtaking_src": overtaken.column("overtaking_src"),
            "chain": chain,
        },
        schema=schema,
    )


def find_violations(events: DataFrame, delivered: DataFrame) -> DataFrame:
    """The `violations` table (docs/anomalies.md): a `causal` row per overtaken message with the
    first-received overtaking message and a witness chain, a `fifo` row per message
    overtaken on its own channel.

    events: clocked `events`; delivered: `delivered_messages(messages, trace_clocks)`.
    """
    overtaken = overtaken_messages(events, delivered)
    return (
        delivered.select(*_MESSAGE_ENDS)
        .groupBy(C.TRACE_ID)
        .cogroup(overtaken.groupBy(C.TRACE_ID))
        .applyInArrow(chains_of_trace, tables.udf_schema(tables.VIOLATIONS))
    )
