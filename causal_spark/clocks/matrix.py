"""Matrix clocks (docs/clocks.md), derived rather than propagated, stored sparse.

mc(e)[i][j] = the number of messages from i to j whose send happens before e
or is e. Process i's events that happen before-or-are e are exactly its first
vc(e)[i] events, so mc(e)[i][j] is the number of sends on channel i -> j among
i's first vc(e)[i] events: a binary search in the channel's sorted send
positions. No n x n matrix is ever propagated; each event costs
O(sum over i of the channels leaving i, times log) and only its non-zero
entries are stored. Computed per trace in a grouped Arrow UDF, on request.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark import tables


@njit(cache=True)
def _sparse_matrix(
    vc: np.ndarray,
    chan_src_ptr: np.ndarray,
    chan_dst: np.ndarray,
    chan_ptr: np.ndarray,
    send_lseq: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    events, n = vc.shape
    counts = np.zeros(events, dtype=np.int64)
    for e in range(events):
        for i in range(n):
            k = vc[e, i]
            if k == 0:
                continue
            for c in range(chan_src_ptr[i], chan_src_ptr[i + 1]):
                if chan_ptr[c] < chan_ptr[c + 1] and send_lseq[chan_ptr[c]] <= k:
                    counts[e] += 1
    offsets = np.zeros(events + 1, dtype=np.int64)
    for e in range(events):
        offsets[e + 1] = offsets[e] + counts[e]
    total = offsets[events]
    out_src = np.empty(total, dtype=np.int32)
    out_dst = np.empty(total, dtype=np.int32)
    out_count = np.empty(total, dtype=np.int64)
    at = 0
    for e in range(events):
        for i in range(n):
            k = vc[e, i]
            if k == 0:
                continue
            for c in range(chan_src_ptr[i], chan_src_ptr[i + 1]):
                lo = chan_ptr[c]
                hi = chan_ptr[c + 1]
                if lo == hi or send_lseq[lo] > k:
                    continue
                # number of sends with lseq <= k: binary search in the sorted slice
                a, b = lo, hi
                while a < b:
                    mid = (a + b) // 2
                    if send_lseq[mid] <= k:
                        a = mid + 1
                    else:
                        b = mid
                out_src[at] = i
                out_dst[at] = chan_dst[c]
                out_count[at] = a - lo
                at += 1
    return offsets, out_src, out_dst, out_count


def trace_matrix_clocks(events: pa.Table, sends: pa.Table) -> pa.Table:
    """One trace: events (trace_id, process, pidx, lseq, vc) and its messages' sends
    (src_pidx, dst_pidx, send_lseq) -> the `matrix_clocks` rows of its clocked events."""
    schema = _udf_schema()
    events = events.filter(pc.is_valid(events.column(C.VC)))
    if len(events) == 0:
        return schema.empty_table()
    vectors = events.column(C.VC).combine_chunks()
    n = len(vectors[0])
    vc = pc.list_flatten(vectors).to_numpy().astype(np.int64).reshape(len(events), n)
    sends = sends.sort_by(
        [(C.SRC_PIDX, "ascending"), (C.DST_PIDX, "ascending"), (C.SEND_LSEQ, "ascending")]
    )
    src = sends.column(C.SRC_PIDX).to_numpy().astype(np.int64)
    dst = sends.column(C.DST_PIDX).to_numpy().astype(np.int64)
    lseq = sends.column(C.SEND_LSEQ).to_numpy().astype(np.int64)
    channel_key = src * n + dst
    first = np.flatnonzero(np.r_[True, np.diff(channel_key) != 0]) if len(src) else np.array([])
    chan_ptr = np.r_[first, len(src)].astype(np.int64)
    chan_src = src[first.astype(np.int64)] if len(src) else np.zeros(0, np.int64)
    chan_dst = dst[first.astype(np.int64)] if len(src) else np.zeros(0, np.int64)
    chan_src_ptr = np.searchsorted(chan_src, np.arange(n + 1)).astype(np.int64)
    offsets, out_src, out_dst, out_count = _sparse_matrix(
        vc, chan_src_ptr, chan_dst, chan_ptr, lseq
    )
    entry = schema.field("mc").type.value_type
    entries = pa.StructArray.from_arrays(
        [pa.array(out_src), pa.array(out_dst), pa.array(out_count)],
        fields=list(entry),
    )
    matrix = pa.ListArray.from_arrays(
        pa.array(offsets.astype(np.int32)), entries, type=schema.field("mc").type
    )
    return pa.table(
        {
            C.TRACE_ID: events.column(C.TRACE_ID),
            C.PROCESS: events.column(C.PROCESS),
            C.PIDX: events.column(C.PIDX),
            C.LSEQ: events.column(C.LSEQ),
            "mc": matrix,
        },
        schema=schema,
    )


def _udf_schema() -> pa.Schema:
    declared = tables.nullable_type(tables.table_schema(tables.MATRIX_CLOCKS))
    return tables.to_arrow(declared)  # type: ignore[arg-type]


def with_matrix_clocks(clocked: DataFrame, messages: DataFrame) -> DataFrame:
    """The `matrix_clocks` table: one row per clocked event with its sparse matrix clock.

    clocked: `events` with `vc` (events whose vc is null, of an INVALID component or one
    too wide for vectors, get no row). messages: the `messages` table (every message with
    a send counts, delivered or in flight).
    """
    # no null vc reaches Python: Spark's Arrow batch sizing is quadratic in consecutive null
    # lists, and a trace too wide for vectors has only those
    events = clocked.where(F.col(C.VC).isNotNull()).select(
        C.TRACE_ID, C.PROCESS, C.PIDX, C.LSEQ, C.VC
    )
    # a message to a process that has no event in the trace has no pidx: no matrix column
    sends = messages.where(F.col(C.SEND_LSEQ).isNotNull() & F.col(C.DST_PIDX).isNotNull()).select(
        C.TRACE_ID, C.SRC_PIDX, C.DST_PIDX, C.SEND_LSEQ
    )
    schema = tables.table_schema(tables.MATRIX_CLOCKS)
    return (
        events.groupBy(C.TRACE_ID)
        .cogroup(sends.groupBy(C.TRACE_ID))
        .applyInArrow(trace_matrix_clocks, tables.nullable_type(schema))  # type: ignore[arg-type]
    )
