"""Clocks (DESIGN §2): Lamport and vector clocks of every event, per trace on Spark.

The per-trace engine: events are joined to the send of the message they
receive, grouped by trace, and each group runs the compiled sequential kernel
of `causal_spark.clock_kernel` inside a grouped Arrow UDF, building the
output from flat buffers. A trace whose matched ids form a causal cycle gets
null clocks and a witness cycle (the msg_ids of the receives on it).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.clock_kernel import CausalCycleError, vector_clocks

SEND_PIDX = "send_pidx"
VC_ARROW = pa.list_(pa.field("element", pa.int32()))
CYCLE = "cycle"


def _output_schema() -> T.StructType:
    events = tables.table_schema(tables.EVENTS)
    fields = [
        T.StructField(f.name, tables.nullable_type(f.dataType), True, f.metadata)
        for f in events.fields
    ]
    return T.StructType([*fields, T.StructField(CYCLE, T.ArrayType(T.StringType()), True)])


def trace_clocks(table: pa.Table) -> pa.Table:
    """One trace's events (+ send_pidx, send_lseq, msg_id of receives) -> events with clocks.

    Pure Arrow in, Arrow out: the kernel of the grouped UDF, testable without Spark.
    """
    order = pc.sort_indices(table, [(C.PIDX, "ascending"), (C.LSEQ, "ascending")])
    table = table.take(order)
    pidx = table.column(C.PIDX).to_numpy().astype(np.int64)
    lseq = table.column(C.LSEQ).to_numpy().astype(np.int64)
    send_pidx = table.column(SEND_PIDX).fill_null(-1).to_numpy().astype(np.int64)
    send_lseq = table.column(C.SEND_LSEQ).fill_null(-1).to_numpy().astype(np.int64)
    n = int(pidx.max()) + 1 if len(pidx) else 0
    events = len(pidx)
    keep = [
        f.name for f in tables.table_schema(tables.EVENTS).fields if f.name not in (C.LAMPORT, C.VC)
    ]
    out = table.select(keep)
    try:
        vc, lamport = vector_clocks(pidx, lseq, send_pidx, send_lseq, n)
    except CausalCycleError as cycle:
        msg_ids = table.column(C.MSG_ID).take(pa.array(cycle.receive_rows)).to_pylist()
        witness = pa.array([msg_ids] * events, pa.list_(pa.string()))
        return (
            out.append_column(C.LAMPORT, pa.nulls(events, pa.int64()))
            .append_column(C.VC, pa.nulls(events, VC_ARROW))
            .append_column(CYCLE, witness)
        )
    offsets = pa.array(np.arange(0, events * n + 1, n, dtype=np.int32))
    vectors = pa.ListArray.from_arrays(offsets, pa.array(vc.reshape(-1)), type=VC_ARROW)
    return (
        out.append_column(C.LAMPORT, pa.array(lamport))
        .append_column(C.VC, vectors)
        .append_column(CYCLE, pa.nulls(events, pa.list_(pa.string())))
    )


def with_clocks(events: DataFrame, messages: DataFrame) -> DataFrame:
    """`events` with `lamport` and `vc` filled, plus `cycle` (null unless the trace is INVALID).

    Requires `events` (the table) and `messages` (the table). Output: the
    `events` columns and `cycle` array<string>.
    """
    receives = messages.where(F.col(C.STATUS) == C.DELIVERED).select(
        C.TRACE_ID,
        F.col(C.DST_PIDX).alias(C.PIDX),
        F.col(C.RECV_LSEQ).alias(C.LSEQ),
        F.col(C.SRC_PIDX).alias(SEND_PIDX),
        C.SEND_LSEQ,
        C.MSG_ID,
    )
    joined = events.drop(C.LAMPORT, C.VC).join(receives, [C.TRACE_ID, C.PIDX, C.LSEQ], "left")
    return joined.groupBy(C.TRACE_ID).applyInArrow(trace_clocks, _output_schema())


def clock_cycles(clocked: DataFrame) -> DataFrame:
    """The INVALID traces of `with_clocks` output: trace_id, cycle (witness msg_ids)."""
    return clocked.where(F.col(CYCLE).isNotNull()).select(C.TRACE_ID, CYCLE).distinct()
