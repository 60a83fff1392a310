"""Anomalies (DESIGN §3, §5): violations with witness chains, crowns, the order class of a trace.

Three grouped Arrow UDFs over the clocked tables, each a thin adapter around a
kernel of `anomaly_kernel`:

1. per (trace, destination process): the overtaken messages, from the vector
   clocks of the destination's receives, in constant work per receive
   (seed 001, Proposition 2) plus a binary search for the first-received
   overtaking message;
2. per trace: a witness chain (shortest causal path in messages) for each
   causal violation whose two messages have different senders;
3. per trace: the crown components (strongly connected components of the
   contracted message graph) and a witness crown of each.

Only delivered messages (a send and a receive) take part, and only traces
whose clocks are `ok`: an INVALID trace gets no rows here and null anomaly
counts in `trace_summary`. Every kernel sorts its group's rows first, so the
tables do not depend on partitioning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from causal_spark import anomaly_kernel as K
from causal_spark import columns as C
from causal_spark import tables
from causal_spark.clocks import CLOCK_STATUS_INVALID, CLOCK_STATUS_OK
from causal_spark.config import DetectSettings
from causal_spark.crowns_distributed import distributed_crowns
from causal_spark.graphs import checkpoint

CAUSAL = "causal"
FIFO = "fifo"

# order classes, strongest first (DESIGN §3)
RSC = "RSC"
CO = "CO"
FIFO_CLASS = "FIFO"
ASYNC = "ASYNC"
INVALID = CLOCK_STATUS_INVALID
ORDER_CLASSES: tuple[str, ...] = (RSC, CO, FIFO_CLASS, ASYNC, INVALID)

KNOWS_DST = "send_knows_dst"
OVERTAKING_PIDX = "overtaking_src_pidx"
OVERTAKING_SEND = "overtaking_send_lseq"
MEMBERS = "members"


class ChainNotFoundError(RuntimeError):
    """No causal path links two messages the clocks say are causally ordered (a bug)."""


class WitnessError(RuntimeError):
    """A witness crown failed its own check (a bug: the run is not committed)."""


class MissingClocksError(ValueError):
    """The distributed crown method was chosen but no clocked events were given to check with."""


@dataclass(frozen=True)
class CrownTables:
    """`crowns` and `crown_members`, and the methods that found them."""

    crowns: DataFrame
    members: DataFrame
    engine: str = "per_trace"  # per_trace, slabs, graphframes, or per_trace+<distributed>


def _arrow(schema: T.StructType) -> pa.Schema:
    return to_arrow_schema(schema, timezone="UTC")


def _ints(table: pa.Table, name: str) -> np.ndarray:
    values: np.ndarray = table.column(name).to_numpy().astype(np.int64)
    return values


def _vectors(column: pa.ChunkedArray, n: int) -> np.ndarray:
    """A list<int> column whose rows have n entries -> a rows x n int64 matrix."""
    if len(column) == 0:
        return np.zeros((0, n), dtype=np.int64)
    flat: np.ndarray = pc.list_flatten(column.combine_chunks()).to_numpy(zero_copy_only=False)
    matrix: np.ndarray = flat.astype(np.int64).reshape(len(column), n)
    return matrix


def _lists(values: pa.Array, offsets: np.ndarray) -> pa.Array:
    return pa.ListArray.from_arrays(
        pa.array(offsets.astype(np.int32)), values, type=pa.list_(pa.field("element", pa.string()))
    )


# ---------------------------------------------------------------------------------------------
# inputs


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
    schema = _arrow(OVERTAKEN_SCHEMA)
    if received.num_rows == 0:
        return schema.empty_table()
    received = received.sort_by([(C.RECV_LSEQ, "ascending")])
    dst = int(received.column(C.DST_PIDX)[0].as_py())
    event_lseq = _ints(receives, C.LSEQ)
    order = np.argsort(event_lseq, kind="stable")
    recv_lseq = _ints(received, C.RECV_LSEQ)
    rows = order[np.searchsorted(event_lseq[order], recv_lseq)]
    n = len(receives.column(C.VC)[0]) if receives.num_rows else 0
    vc = _vectors(receives.column(C.VC), n)[rows]
    knows = received.column(KNOWS_DST).fill_null(0).to_numpy().astype(np.int64)
    src = _ints(received, C.SRC_PIDX)
    send = _ints(received, C.SEND_LSEQ)
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


def _message_order(messages: pa.Table) -> pa.Table:
    # one row per message, in an order that does not depend on partitioning
    return messages.sort_by(
        [(C.SRC_PIDX, "ascending"), (C.SEND_LSEQ, "ascending"), (C.DST_PIDX, "ascending")]
    )


def chains_of_trace(messages: pa.Table, overtaken: pa.Table) -> pa.Table:
    """The violation rows of one trace with their witness chains (`violations` columns)."""
    schema = _arrow(tables.udf_schema(tables.VIOLATIONS))
    if overtaken.num_rows == 0:
        return schema.empty_table()
    overtaken = overtaken.sort_by([("overtaken_msg", "ascending"), (C.KIND, "ascending")])
    messages = _message_order(messages)
    src = _ints(messages, C.SRC_PIDX)
    dst = _ints(messages, C.DST_PIDX)
    n = int(max(src.max(), dst.max())) + 1
    index = K.channels(n, src, dst, _ints(messages, C.SEND_LSEQ), _ints(messages, C.RECV_LSEQ))
    from_pidx = _ints(overtaken, C.SRC_PIDX)
    to_pidx = _ints(overtaken, OVERTAKING_PIDX)
    kinds = overtaken.column(C.KIND).to_numpy(zero_copy_only=False)
    needs = np.flatnonzero((kinds == CAUSAL) & (from_pidx != to_pidx))
    path, offsets = K.shortest_chains(
        index,
        src,
        from_pidx[needs],
        _ints(overtaken, C.SEND_LSEQ)[needs],
        to_pidx[needs],
        _ints(overtaken, OVERTAKING_SEND)[needs],
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
    chain = _lists(messages.column(C.MSG_ID).combine_chunks().take(pa.array(path)), all_offsets)
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
    """The `violations` table (DESIGN §3): a `causal` row per overtaken message with the
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


# ---------------------------------------------------------------------------------------------
# 3. crowns, per trace

CROWN_ROWS_SCHEMA = T.StructType(
    [
        *tables.udf_schema(tables.CROWNS).fields,
        T.StructField(MEMBERS, T.ArrayType(T.StringType())),
    ]
)


def crowns_of_trace(messages: pa.Table, budget: int) -> pa.Table:
    """The crown components of one trace: `crowns` columns plus `members` (msg_ids)."""
    schema = _arrow(CROWN_ROWS_SCHEMA)
    if messages.num_rows == 0:
        return schema.empty_table()
    messages = _message_order(messages)
    src = _ints(messages, C.SRC_PIDX)
    dst = _ints(messages, C.DST_PIDX)
    n = int(max(src.max(), dst.max())) + 1
    found = K.crown_components(
        n, src, _ints(messages, C.SEND_LSEQ), dst, _ints(messages, C.RECV_LSEQ), budget
    )
    if found.n_components == 0:
        return schema.empty_table()
    ids = messages.column(C.MSG_ID).combine_chunks()
    # check every witness before it is written, by a reachability computed afresh
    index = K.channels(n, src, dst, _ints(messages, C.SEND_LSEQ), _ints(messages, C.RECV_LSEQ))
    for c in range(found.n_components):
        rows = found.crown[found.crown_start[c] : found.crown_start[c + 1]]
        if not K.is_crown(
            index, src, _ints(messages, C.SEND_LSEQ), dst, _ints(messages, C.RECV_LSEQ), rows
        ):
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
            "crown": _lists(ids.take(pa.array(found.crown)), found.crown_start),
            "k": pa.array(np.diff(found.crown_start).astype(np.int32)),
            "shortest": pa.array(found.shortest),
            MEMBERS: _lists(members.column(C.MSG_ID).combine_chunks(), member_offsets),
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
    """`crowns` and `crown_members` of every ok trace (DESIGN §3).

    delivered: `delivered_messages(...)`; budget: `DetectSettings.crown_search_budget`.
    Without `settings`, one task per trace. With them, `crown_engine` chooses: `auto` sends
    traces of more than `per_trace_max_messages` delivered messages to the distributed
    method (`crowns_distributed`), `distributed` sends every trace. The distributed method's
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


# ---------------------------------------------------------------------------------------------
# 4. trace_summary


def order_class(status: Column, n_fifo: Column, n_causal: Column, n_crown_sccs: Column) -> Column:
    """The strongest order class that holds (DESIGN §3): RSC ⊂ CO ⊂ FIFO ⊂ ASYNC, or INVALID."""
    invalid = status == CLOCK_STATUS_INVALID
    return (
        F.when(invalid, F.lit(INVALID))
        .when(n_fifo > 0, F.lit(ASYNC))
        .when(n_causal > 0, F.lit(FIFO_CLASS))
        .when(n_crown_sccs > 0, F.lit(CO))
        .otherwise(F.lit(RSC))
    )


def summarize_traces(
    trace_clocks: DataFrame,
    messages: DataFrame,
    quarantine: DataFrame,
    violations: DataFrame,
    crowns: DataFrame,
) -> DataFrame:
    """The `trace_summary` table: one row per trace seen in `trace_clocks` or `quarantine`.

    A trace whose every row was quarantined has no events and is trivially RSC.
    """
    message_counts = messages.groupBy(C.TRACE_ID).agg(
        F.count("*").alias("n_messages"),
        F.sum((F.col(C.STATUS) == C.IN_FLIGHT).cast("long")).alias("n_in_flight"),
        F.sum((F.col(C.STATUS) == C.ORPHAN).cast("long")).alias("n_orphans"),
    )
    rejected = (
        quarantine.where(F.col(C.TRACE_ID).isNotNull())
        .groupBy(C.TRACE_ID)
        .agg(F.count("*").alias("n_quarantined"))
    )
    violation_counts = violations.groupBy(C.TRACE_ID).agg(
        F.sum((F.col(C.KIND) == FIFO).cast("long")).alias("__fifo"),
        F.sum((F.col(C.KIND) == CAUSAL).cast("long")).alias("__causal"),
    )
    crown_counts = crowns.groupBy(C.TRACE_ID).agg(F.count("*").alias("__crowns"))
    base = trace_clocks.select(C.TRACE_ID, "n_processes", "n_events", "status").join(
        rejected, C.TRACE_ID, "full_outer"
    )
    joined = (
        base.join(message_counts, C.TRACE_ID, "left")
        .join(violation_counts, C.TRACE_ID, "left")
        .join(crown_counts, C.TRACE_ID, "left")
    )
    valid = F.coalesce(F.col("status"), F.lit(CLOCK_STATUS_OK)) != CLOCK_STATUS_INVALID

    def anomaly_count(name: str) -> Column:
        return F.when(valid, F.coalesce(F.col(name), F.lit(0))).cast("long")

    n_fifo = anomaly_count("__fifo")
    n_causal = anomaly_count("__causal")
    n_crowns = anomaly_count("__crowns")
    return joined.select(
        C.TRACE_ID,
        F.coalesce(F.col("n_processes"), F.lit(0)).cast("int").alias("n_processes"),
        F.coalesce(F.col("n_events"), F.lit(0)).cast("long").alias("n_events"),
        F.coalesce(F.col("n_messages"), F.lit(0)).cast("long").alias("n_messages"),
        F.coalesce(F.col("n_in_flight"), F.lit(0)).cast("long").alias("n_in_flight"),
        F.coalesce(F.col("n_orphans"), F.lit(0)).cast("long").alias("n_orphans"),
        F.coalesce(F.col("n_quarantined"), F.lit(0)).cast("long").alias("n_quarantined"),
        n_fifo.alias("n_fifo_violations"),
        n_causal.alias("n_causal_violations"),
        n_crowns.alias("n_crown_sccs"),
        order_class(F.col("status"), n_fifo, n_causal, n_crowns).alias("order_class"),
    )
