"""Crowns (docs/anomalies.md): the crown components of each trace and a witness crown of each.

Per trace, one grouped Arrow UDF runs the kernel of
`causal_spark.anomalies.crown_kernel`: the strongly connected components of
the contracted message graph, and a witness crown of each, checked before it
is written. Traces too large for one task go to the slab method
(`crowns_slabs`) when the settings ask, and its witnesses are checked against
the vector clocks (`require_valid_crowns`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark import tables
from causal_spark._arrow import int_column, lists
from causal_spark._spark import checkpoint
from causal_spark.anomalies import kernel as K
from causal_spark.anomalies.crown_kernel import crown_components, is_crown
from causal_spark.anomalies.crowns_slabs import distributed_crowns
from causal_spark.anomalies.errors import MissingClocksError, WitnessError
from causal_spark.anomalies.inputs import _message_order
from causal_spark.config import DetectSettings

MEMBERS = "members"


@dataclass(frozen=True)
class CrownTables:
    """`crowns` and `crown_members`, and the methods that found them."""

    crowns: DataFrame
    members: DataFrame
    engine: str = "per_trace"  # per_trace, slabs, graphframes, or per_trace+<distributed>


CROWN_ROWS_SCHEMA = T.StructType(
    [
        *tables.udf_schema(tables.CROWNS).fields,
        T.StructField(MEMBERS, T.ArrayType(T.StringType())),
    ]
)


def crowns_of_trace(messages: pa.Table, budget: int) -> pa.Table:
    """The crown components of one trace: `crowns` columns plus `members` (msg_ids)."""
    schema = tables.to_arrow(CROWN_ROWS_SCHEMA)
    if messages.num_rows == 0:
        return schema.empty_table()
    messages = _message_order(messages)
    src, send = int_column(messages, C.SRC_PIDX), int_column(messages, C.SEND_LSEQ)
    dst, recv = int_column(messages, C.DST_PIDX), int_column(messages, C.RECV_LSEQ)
    n = int(max(src.max(), dst.max())) + 1
    found = crown_components(n, src, send, dst, recv, budget)
    if found.n_components == 0:
        return schema.empty_table()
    ids = messages.column(C.MSG_ID).combine_chunks()
    # check every witness before it is written, by a reachability computed afresh
    index = K.channels(n, src, dst, send, recv)
    for c in range(found.n_components):
        rows = found.crown[found.crown_start[c] : found.crown_start[c + 1]]
        if not is_crown(index, src, send, dst, recv, rows):
            raise WitnessError(
                f"trace {messages.column(C.TRACE_ID)[0]} crown component {c}: the witness "
                f"{ids.take(pa.array(rows)).to_pylist()} is not a crown"
            )
    in_crown = np.flatnonzero(found.component >= 0)
    # members sorted by (component, msg_id), for readers
    members = pa.table(
        {"c": pa.array(found.component[in_crown]), C.MSG_ID: ids.take(pa.array(in_crown))}
    ).sort_by([("c", "ascending"), (C.MSG_ID, "ascending")])
    member_offsets = np.zeros(found.n_components + 1, dtype=np.int64)
    np.cumsum(
        np.bincount(found.component[in_crown], minlength=found.n_components),
        out=member_offsets[1:],
    )
    trace = messages.column(C.TRACE_ID)[0].as_py()
    return pa.table(
        {
            C.TRACE_ID: pa.array([trace] * found.n_components, pa.string()),
            "scc_id": pa.array(np.arange(found.n_components, dtype=np.int32)),
            "scc_size": pa.array(np.diff(member_offsets)),
            "crown": lists(ids.take(pa.array(found.crown)), found.crown_start, pa.string()),
            "k": pa.array(np.diff(found.crown_start).astype(np.int32)),
            "shortest": pa.array(found.shortest),
            MEMBERS: lists(members.column(C.MSG_ID).combine_chunks(), member_offsets, pa.string()),
        },
        schema=schema,
    )


def find_crowns(
    delivered: DataFrame,
    budget: int,
    *,
    events: DataFrame | None = None,
    settings: DetectSettings | None = None,
) -> CrownTables:
    """`crowns` and `crown_members` of every ok trace (docs/anomalies.md).

    delivered: `delivered_messages(...)`; budget: `DetectSettings.crown_search_budget`.
    Without `settings`, one task per trace. With them, `crown_engine` chooses: `auto` sends
    traces of more than `per_trace_max_messages` delivered messages to the distributed
    method (`crowns_slabs`), `distributed` sends every trace. The distributed method's
    witnesses are checked against the vector clocks of `events` (the clocked `events` table,
    required then) before they are returned; a wrong one raises `WitnessError`.
    """
    if settings is None or settings.crown_engine == "per_trace":
        return _crowns_per_trace(delivered, budget)
    if settings.crown_engine == "distributed":
        large, small = delivered, None
    else:
        sizes = delivered.groupBy(C.TRACE_ID).count()
        too_big = sizes.where(F.col("count") > settings.per_trace_max_messages).select(C.TRACE_ID)
        if too_big.isEmpty():
            return _crowns_per_trace(delivered, budget)
        large = delivered.join(F.broadcast(too_big), C.TRACE_ID, "left_semi")
        small = delivered.join(F.broadcast(too_big), C.TRACE_ID, "left_anti")
    if events is None:
        raise MissingClocksError(
            "the distributed crown method checks its witnesses against the vector clocks: "
            "pass the clocked events table (events=...)"
        )
    found = distributed_crowns(
        large, budget, slab_events=settings.slab_events, backend=settings.crown_graph_backend
    )
    require_valid_crowns(found.crowns, events, large)
    if small is None:
        return CrownTables(found.crowns, found.members, found.backend)
    per_trace = _crowns_per_trace(small, budget)
    return CrownTables(
        per_trace.crowns.unionByName(found.crowns),
        per_trace.members.unionByName(found.members),
        f"per_trace+{found.backend}",
    )


def _crowns_per_trace(delivered: DataFrame, budget: int) -> CrownTables:
    def per_trace(messages: pa.Table) -> pa.Table:
        return crowns_of_trace(messages, budget)

    rows = checkpoint(
        delivered.select(C.TRACE_ID, C.MSG_ID, C.SRC_PIDX, C.SEND_LSEQ, C.DST_PIDX, C.RECV_LSEQ)
        .groupBy(C.TRACE_ID)
        .applyInArrow(per_trace, CROWN_ROWS_SCHEMA)
    )
    crowns = rows.drop(MEMBERS)
    members = rows.select(C.TRACE_ID, "scc_id", F.explode(MEMBERS).alias(C.MSG_ID))
    return CrownTables(crowns=crowns, members=members)


def invalid_crowns(crowns: DataFrame, events: DataFrame, messages: DataFrame) -> DataFrame:
    """Witness crowns that fail s_i -> r_{i+1} (cyclically), checked with the vector clocks:
    e -> f iff vc(f)[pidx(e)] >= lseq(e) and e != f. Should be empty.

    Output: trace_id, scc_id, position (1-based), msg_id, next_msg_id.
    """
    steps = crowns.select(
        C.TRACE_ID,
        "scc_id",
        F.posexplode("crown").alias("position", C.MSG_ID),
        F.col("crown").alias("__crown"),
        "k",
    ).withColumn("next_msg_id", F.element_at("__crown", ((F.col("position") + 1) % F.col("k") + 1)))
    # the crowns are few: broadcast them (and what they need) against the large tables, so
    # neither `messages` nor the events' vectors are shuffled for the check
    ids = (
        steps.select(C.TRACE_ID, C.MSG_ID)
        .union(steps.select(C.TRACE_ID, F.col("next_msg_id").alias(C.MSG_ID)))
        .distinct()
    )
    ends = messages.join(F.broadcast(ids), [C.TRACE_ID, C.MSG_ID]).select(
        C.TRACE_ID, C.MSG_ID, C.SRC_PIDX, C.SEND_LSEQ, C.DST_PIDX, C.RECV_LSEQ
    )
    sends = ends.select(C.TRACE_ID, C.MSG_ID, C.SRC_PIDX, C.SEND_LSEQ)
    recvs = ends.select(
        C.TRACE_ID,
        F.col(C.MSG_ID).alias("next_msg_id"),
        F.col(C.DST_PIDX).alias(C.PIDX),
        F.col(C.RECV_LSEQ).alias(C.LSEQ),
    )
    located = steps.join(F.broadcast(sends), [C.TRACE_ID, C.MSG_ID], "left").join(
        F.broadcast(recvs), [C.TRACE_ID, "next_msg_id"], "left"
    )
    targets = located.select(C.TRACE_ID, C.PIDX, C.LSEQ).where(F.col(C.LSEQ).isNotNull())
    clocks = events.select(C.TRACE_ID, C.PIDX, C.LSEQ, C.VC).join(
        F.broadcast(targets.distinct()), [C.TRACE_ID, C.PIDX, C.LSEQ]
    )
    checked = located.join(F.broadcast(clocks), [C.TRACE_ID, C.PIDX, C.LSEQ], "left")
    before = F.element_at(C.VC, (F.col(C.SRC_PIDX) + 1).cast("int")) >= F.col(C.SEND_LSEQ)
    same = (F.col(C.SRC_PIDX) == F.col(C.PIDX)) & (F.col(C.SEND_LSEQ) == F.col(C.LSEQ))
    return checked.where(~F.coalesce(before & ~same, F.lit(False))).select(
        C.TRACE_ID, "scc_id", (F.col("position") + 1).alias("position"), C.MSG_ID, "next_msg_id"
    )


def require_valid_crowns(crowns: DataFrame, events: DataFrame, messages: DataFrame) -> None:
    """Raise `WitnessError` naming the first witness crown that is not a crown."""
    bad = invalid_crowns(crowns, events, messages).orderBy(C.TRACE_ID, "scc_id").limit(1).collect()
    if bad:
        row = bad[0]
        raise WitnessError(
            f"trace {row[C.TRACE_ID]} crown component {row['scc_id']}: the witness says "
            f"s({row[C.MSG_ID]}) -> r({row['next_msg_id']}) (position {row['position']}), "
            "but the vector clocks disagree"
        )
