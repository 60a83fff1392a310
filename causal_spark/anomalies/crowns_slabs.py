"""Crown components of traces too large for one task (docs/anomalies.md): the slab method.

The contracted message graph has one node per send event (a multicast and its
receives are one node) and an edge between the nodes of consecutive message
events of a process. Its strongly connected components with two or more nodes
are the crown components. `anomalies.crowns.crowns_of_trace` finds them in one task
per trace; here a trace is cut into slabs and the number of Spark rounds does
not depend on the length of causal chains:

0. Every message event (send or receive) gets a slab: a band of its time
   (`ts`, or `lseq` when a trace lacks times) of about `slab_events` events.
   A *port* is an event with an edge to another slab: the previous or next
   message event of its process is in another slab, or its message's other end
   is. Cross-slab edges come from one window over each process's events.
1. Per slab, in parallel: the slab's graph (its events, each process's events
   chained in order, events of one node merged), its strongly connected
   components (Tarjan), and for each component the earliest event it reaches on
   each process (reached events of a process are a suffix of its chain). A
   port node then reaches, on each process, the first port event at or after
   that point, and port events of a process reach the next one: those edges
   keep exactly the reachability among ports. Memory: 4 B x processes per
   local component.
2. One task per trace: Tarjan on the port graph (those edges, the cross-slab
   edges, and each node's copies in several slabs linked both ways), and a
   topological index t of its components (increasing along edges).
3. Per slab, in parallel: a local component L is in the global component of
   the port graph's component C iff some port of C reaches L in the slab and L
   reaches some port of C in the slab; since t grows along paths, that holds
   iff min t over the ports L reaches == max t over the ports reaching L (one
   pass each over the slab's component DAG). Any other local component is a
   whole global component (none of its cycles leaves the slab).

Witnesses (checked by the caller against the vector clocks before writing):
a 2-cycle u -> v -> u of the contracted graph (a self-join of its edges) is a
crown of two messages, the shortest possible; a component without one is
gathered into one task (it has at most as many messages as its trace) and the
per-trace kernel runs on its messages alone: every causal path between two of
its messages runs through its own messages, so its crowns, girth and the
budget's `shortest` flag mean the same there. `is_crown` checks that witness
inside the task.

With the GraphFrames jar on the classpath (`crown_graph_backend: auto` or
`graphframes`), step 1-3 are replaced by GraphFrames' stronglyConnectedComponents
on the contracted graph; its rounds follow the graph, not a bound of ours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark import tables
from causal_spark._arrow import int_column
from causal_spark._spark import checkpoint
from causal_spark.anomalies.crown_kernel import crown_components, is_crown
from causal_spark.anomalies.errors import ComponentMismatchError, WitnessError
from causal_spark.anomalies.kernel import channels
from causal_spark.anomalies.slab_kernel import (
    NODE_SHIFT,
    port_graph_order,
    slab_labels,
    slab_port_edges,
)
from causal_spark.clocks.components import (
    COMPONENT,
    GraphFramesUnavailable,
    graphframes_available,
    strong_components_graphframes,
)
from causal_spark.config import CrownGraphBackend

NODE = "node"  # a send event: src_pidx << NODE_SHIFT | send_lseq
SLAB = "slab"
PORT = "is_port"
IS_SEND = "is_send"
LABEL = "label"  # a global component of one trace
TOPO = "t"
FROM_SLAB = "from_slab"
FROM_NODE = "from_node"
TO_SLAB = "to_slab"
TO_NODE = "to_node"
ENTER = "enter_msg"  # the message by which an edge enters its head node
SEND_SLAB = "send_slab"
RECV_SLAB = "recv_slab"
_KEY = "__key"
_PREV_SLAB = "__prev_slab"
_PREV_NODE = "__prev_node"
_NEXT_SLAB = "__next_slab"
_FIRST = "__first_node"
_N_NODES = "__n_nodes"
_U, _V, _M1, _M2 = "__u", "__v", "__m1", "__m2"


@dataclass(frozen=True)
class DistributedCrowns:
    """`crowns` rows (crowns columns) and `crown_members`, and how the components were found."""

    crowns: DataFrame
    members: DataFrame
    backend: str  # "slabs" or "graphframes"


def node_key(src_pidx: Column, send_lseq: Column) -> Column:
    """The contracted graph's node of a message: its send event as one long."""
    return F.shiftleft(src_pidx.cast("long"), NODE_SHIFT) + send_lseq.cast("long")


# ---------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------
# grouped UDF adapters

_PORT_EDGES_SCHEMA = T.StructType(
    [
        T.StructField(C.TRACE_ID, T.StringType()),
        T.StructField(SLAB, T.LongType()),
        T.StructField(FROM_NODE, T.LongType()),
        T.StructField(TO_NODE, T.LongType()),
    ]
)
_ORDER_SCHEMA = T.StructType(
    [
        T.StructField(C.TRACE_ID, T.StringType()),
        T.StructField(SLAB, T.LongType()),
        T.StructField(NODE, T.LongType()),
        T.StructField(TOPO, T.LongType()),
    ]
)
_MESSAGE_FIELDS = [
    T.StructField(C.TRACE_ID, T.StringType()),
    T.StructField(C.MSG_ID, T.StringType()),
    T.StructField(C.SRC_PIDX, T.LongType()),
    T.StructField(C.SEND_LSEQ, T.LongType()),
    T.StructField(C.DST_PIDX, T.LongType()),
    T.StructField(C.RECV_LSEQ, T.LongType()),
]
_LABELED_SCHEMA = T.StructType(
    [*_MESSAGE_FIELDS, T.StructField(NODE, T.LongType()), T.StructField(LABEL, T.LongType())]
)
_WITNESS_SCHEMA = T.StructType(
    [
        T.StructField(C.TRACE_ID, T.StringType()),
        T.StructField(LABEL, T.LongType()),
        T.StructField("crown", T.ArrayType(T.StringType())),
        T.StructField("k", T.IntegerType()),
        T.StructField("shortest", T.BooleanType()),
    ]
)


def _port_edges_of_slab(events: pa.Table) -> pa.Table:
    schema = tables.to_arrow(_PORT_EDGES_SCHEMA)
    if events.num_rows == 0:
        return schema.empty_table()
    src, dst = slab_port_edges(
        int_column(events, C.PIDX),
        int_column(events, C.LSEQ),
        int_column(events, NODE),
        events.column(PORT).to_numpy(zero_copy_only=False),
    )
    return pa.table(
        {
            C.TRACE_ID: pa.array([events.column(C.TRACE_ID)[0].as_py()] * len(src), pa.string()),
            SLAB: pa.array(np.full(len(src), events.column(SLAB)[0].as_py(), dtype=np.int64)),
            FROM_NODE: pa.array(src),
            TO_NODE: pa.array(dst),
        },
        schema=schema,
    )


def _order_of_trace(edges: pa.Table) -> pa.Table:
    schema = tables.to_arrow(_ORDER_SCHEMA)
    if edges.num_rows == 0:
        return schema.empty_table()
    slab, node, topo = port_graph_order(
        int_column(edges, FROM_SLAB), int_column(edges, FROM_NODE), int_column(edges, TO_SLAB),
        int_column(edges, TO_NODE),
    )  # fmt: skip
    return pa.table(
        {
            C.TRACE_ID: pa.array([edges.column(C.TRACE_ID)[0].as_py()] * len(slab), pa.string()),
            SLAB: pa.array(slab),
            NODE: pa.array(node),
            TOPO: pa.array(topo),
        },
        schema=schema,
    )


def _labels_of_slab(events: pa.Table, ports: pa.Table) -> pa.Table:
    schema = tables.to_arrow(_LABELED_SCHEMA)
    if events.num_rows == 0:
        return schema.empty_table()
    slab = int(events.column(SLAB)[0].as_py())
    label = slab_labels(
        slab,
        int_column(events, C.PIDX),
        int_column(events, C.LSEQ),
        int_column(events, NODE),
        int_column(ports, NODE),
        int_column(ports, TOPO),
    )
    # one row per message, from its send event's slab
    sends = events.column(IS_SEND).to_numpy(zero_copy_only=False)
    at = pa.array(np.flatnonzero(sends))
    out = {f.name: events.column(f.name).take(at) for f in _MESSAGE_FIELDS}
    out[NODE] = events.column(NODE).take(at)
    out[LABEL] = pa.array(label[sends])
    return pa.table(out, schema=schema)


def witness_of_component(messages: pa.Table, budget: int) -> pa.Table:
    """The witness crown of one crown component, by the per-trace kernel on its messages alone
    (`_MESSAGE_FIELDS` plus `label`), checked with `is_crown` before it is returned."""
    schema = tables.to_arrow(_WITNESS_SCHEMA)
    if messages.num_rows == 0:
        return schema.empty_table()
    messages = messages.sort_by(
        [(C.SRC_PIDX, "ascending"), (C.SEND_LSEQ, "ascending"), (C.DST_PIDX, "ascending")]
    )
    src, send = int_column(messages, C.SRC_PIDX), int_column(messages, C.SEND_LSEQ)
    dst, recv = int_column(messages, C.DST_PIDX), int_column(messages, C.RECV_LSEQ)
    n = int(max(src.max(), dst.max())) + 1
    found = crown_components(n, src, send, dst, recv, budget)
    trace = messages.column(C.TRACE_ID)[0].as_py()
    label = messages.column(LABEL)[0].as_py()
    if found.n_components != 1 or np.any(found.component != 0):
        raise ComponentMismatchError(
            f"trace {trace}: a component of {messages.num_rows} messages from the slab method "
            f"is {found.n_components} component(s) for the per-trace kernel"
        )
    crown = found.crown[found.crown_start[0] : found.crown_start[1]]
    ids = messages.column(C.MSG_ID).combine_chunks()
    if not is_crown(channels(n, src, dst, send, recv), src, send, dst, recv, crown):
        raise WitnessError(
            f"trace {trace}: the witness {ids.take(pa.array(crown)).to_pylist()} is not a crown"
        )
    return pa.table(
        {
            C.TRACE_ID: pa.array([trace], pa.string()),
            LABEL: pa.array([label], pa.int64()),
            "crown": pa.array([ids.take(pa.array(crown)).to_pylist()], pa.list_(pa.string())),
            "k": pa.array([len(crown)], pa.int32()),
            "shortest": pa.array([bool(found.shortest[0])]),
        },
        schema=schema,
    )


# ---------------------------------------------------------------------------------------------
# Spark


def slabbed_events(delivered: DataFrame, slab_events: int) -> DataFrame:
    """One row per message event (a multicast send has a row per message) with its slab,
    its node, the previous event's slab and node on its process, and whether it is a port.

    delivered: `delivered_messages(...)` (with send_ts and recv_ts). Slabs are bands of
    ts when every delivered message of the trace has both, else of lseq, with about
    `slab_events` events each.
    """
    stats = delivered.groupBy(C.TRACE_ID).agg(
        (2 * F.count("*")).alias("__events"),
        ((F.count(C.SEND_TS) == F.count("*")) & (F.count(C.RECV_TS) == F.count("*"))).alias(
            "__timed"
        ),
        F.min(F.least(C.SEND_TS, C.RECV_TS)).alias("__ts_lo"),
        F.max(F.greatest(C.SEND_TS, C.RECV_TS)).alias("__ts_hi"),
        F.min(F.least(C.SEND_LSEQ, C.RECV_LSEQ)).cast("double").alias("__lseq_lo"),
        F.max(F.greatest(C.SEND_LSEQ, C.RECV_LSEQ)).cast("double").alias("__lseq_hi"),
    )
    lo = F.when(F.col("__timed"), F.col("__ts_lo")).otherwise(F.col("__lseq_lo"))
    hi = F.when(F.col("__timed"), F.col("__ts_hi")).otherwise(F.col("__lseq_hi"))
    n_slabs = F.greatest(F.lit(1), F.ceil(F.col("__events") / F.lit(slab_events)))
    plan = stats.select(
        C.TRACE_ID,
        "__timed",
        lo.alias("__lo"),
        n_slabs.alias("__n_slabs"),
        F.when(hi > lo, (hi - lo) / n_slabs).otherwise(F.lit(1.0)).alias("__width"),
    )

    def band(ts: str, lseq: str) -> Column:
        key = F.when(F.col("__timed"), F.col(ts)).otherwise(F.col(lseq).cast("double"))
        raw = F.floor((key - F.col("__lo")) / F.col("__width"))
        return F.least(F.greatest(raw, F.lit(0)), F.col("__n_slabs") - 1).cast("long")

    messages = delivered.join(F.broadcast(plan), C.TRACE_ID).select(
        *[f.name for f in _MESSAGE_FIELDS],
        node_key(F.col(C.SRC_PIDX), F.col(C.SEND_LSEQ)).alias(NODE),
        band(C.SEND_TS, C.SEND_LSEQ).alias(SEND_SLAB),
        band(C.RECV_TS, C.RECV_LSEQ).alias(RECV_SLAB),
    )
    payload = [f.name for f in _MESSAGE_FIELDS] + [NODE]
    crosses = F.col(SEND_SLAB) != F.col(RECV_SLAB)
    rows = messages.select(
        *payload,
        F.col(C.SRC_PIDX).alias(C.PIDX),
        F.col(C.SEND_LSEQ).alias(C.LSEQ),
        F.col(SEND_SLAB).alias(SLAB),
        F.lit(True).alias(IS_SEND),
        crosses.alias("__crosses"),
        SEND_SLAB,
        RECV_SLAB,
    ).unionByName(
        messages.select(
            *payload,
            F.col(C.DST_PIDX).alias(C.PIDX),
            F.col(C.RECV_LSEQ).alias(C.LSEQ),
            F.col(RECV_SLAB).alias(SLAB),
            F.lit(False).alias(IS_SEND),
            crosses.alias("__crosses"),
            SEND_SLAB,
            RECV_SLAB,
        )
    )
    # deterministic order within a multicast (one lseq, several rows)
    process = Window.partitionBy(C.TRACE_ID, C.PIDX).orderBy(C.LSEQ, C.MSG_ID)
    ordered = rows.select(
        "*",
        F.lag(SLAB).over(process).alias(_PREV_SLAB),
        F.lag(NODE).over(process).alias(_PREV_NODE),
        F.lead(SLAB).over(process).alias(_NEXT_SLAB),
    )
    border = (F.coalesce(F.col(_PREV_SLAB), F.col(SLAB)) != F.col(SLAB)) | (
        F.coalesce(F.col(_NEXT_SLAB), F.col(SLAB)) != F.col(SLAB)
    )
    return ordered.select(
        *payload,
        C.PIDX,
        C.LSEQ,
        SLAB,
        IS_SEND,
        (F.col("__crosses") | border).alias(PORT),
        _PREV_SLAB,
        _PREV_NODE,
        SEND_SLAB,
        RECV_SLAB,
    )


def contracted_edges(events: DataFrame) -> DataFrame:
    """Edges of the contracted graph (trace_id, src, dst node, enter_msg) from `slabbed_events`:
    consecutive message events of a process; `enter_msg` is the head event's message."""
    return events.where(F.col(_PREV_NODE).isNotNull() & (F.col(_PREV_NODE) != F.col(NODE))).select(
        C.TRACE_ID,
        F.col(_PREV_NODE).alias(C.SRC),
        F.col(NODE).alias(C.DST),
        F.col(C.MSG_ID).alias(ENTER),
    )


def _labels_by_slabs(events: DataFrame) -> DataFrame:
    """Rounds 1-3: every delivered message with the global component label of its node."""
    intra = (
        events.select(C.TRACE_ID, SLAB, C.PIDX, C.LSEQ, NODE, PORT)
        .groupBy(C.TRACE_ID, SLAB)
        .applyInArrow(_port_edges_of_slab, _PORT_EDGES_SCHEMA)
        .select(
            C.TRACE_ID,
            F.col(SLAB).alias(FROM_SLAB),
            FROM_NODE,
            F.col(SLAB).alias(TO_SLAB),
            TO_NODE,
        )
    )
    across = events.where(F.col(_PREV_SLAB) != F.col(SLAB)).select(
        C.TRACE_ID,
        F.col(_PREV_SLAB).alias(FROM_SLAB),
        F.col(_PREV_NODE).alias(FROM_NODE),
        F.col(SLAB).alias(TO_SLAB),
        F.col(NODE).alias(TO_NODE),
    )
    # a node with events in several slabs: its copies are one node, linked both ways (each
    # send row knows both slabs of its message: no join)
    forward = events.where(F.col(IS_SEND) & (F.col(SEND_SLAB) != F.col(RECV_SLAB))).select(
        C.TRACE_ID,
        F.col(SEND_SLAB).alias(FROM_SLAB),
        F.col(NODE).alias(FROM_NODE),
        F.col(RECV_SLAB).alias(TO_SLAB),
        F.col(NODE).alias(TO_NODE),
    )
    backward = forward.select(
        C.TRACE_ID,
        F.col(TO_SLAB).alias(FROM_SLAB),
        F.col(TO_NODE).alias(FROM_NODE),
        F.col(FROM_SLAB).alias(TO_SLAB),
        F.col(FROM_NODE).alias(TO_NODE),
    )
    port_graph = intra.unionByName(across).unionByName(forward).unionByName(backward)
    order = checkpoint(port_graph.groupBy(C.TRACE_ID).applyInArrow(_order_of_trace, _ORDER_SCHEMA))
    return (
        events.select(SLAB, C.PIDX, C.LSEQ, NODE, IS_SEND, *[f.name for f in _MESSAGE_FIELDS])
        .groupBy(C.TRACE_ID, SLAB)
        .cogroup(order.groupBy(C.TRACE_ID, SLAB))
        .applyInArrow(_labels_of_slab, _LABELED_SCHEMA)
    )


def _labels_by_graphframes(events: DataFrame, edges: DataFrame) -> DataFrame:
    nodes = events.where(F.col(IS_SEND)).select(C.TRACE_ID, NODE).distinct()
    found = strong_components_graphframes(nodes, edges)
    return (
        events.where(F.col(IS_SEND))
        .join(found, [C.TRACE_ID, NODE])
        .select(*[f.name for f in _MESSAGE_FIELDS], NODE, F.col(COMPONENT).alias(LABEL))
    )


def _two_crowns(edges: DataFrame, labeled: DataFrame) -> DataFrame:
    """Per component with a 2-cycle u -> v -> u of the contracted graph: the crown of the two
    messages entering v and u (the least (u, v) of the component), k = 2, shortest."""
    forward = edges.where(F.col(C.SRC) < F.col(C.DST)).select(
        C.TRACE_ID, F.col(C.SRC).alias(_U), F.col(C.DST).alias(_V), F.col(ENTER).alias(_M1)
    )
    backward = edges.where(F.col(C.SRC) > F.col(C.DST)).select(
        C.TRACE_ID, F.col(C.DST).alias(_U), F.col(C.SRC).alias(_V), F.col(ENTER).alias(_M2)
    )
    cycles = forward.join(backward, [C.TRACE_ID, _U, _V])
    node_labels = labeled.select(C.TRACE_ID, F.col(NODE).alias(_U), LABEL).dropDuplicates()
    best = (
        cycles.join(node_labels, [C.TRACE_ID, _U])
        .groupBy(C.TRACE_ID, LABEL)
        .agg(F.min(F.struct(_U, _V, _M1, _M2)).alias("__best"))
    )
    return best.select(
        C.TRACE_ID,
        LABEL,
        F.array(F.col("__best").getField(_M1), F.col("__best").getField(_M2)).alias("crown"),
        F.lit(2).cast("int").alias("k"),
        F.lit(True).alias("shortest"),
    )


def distributed_crowns(
    delivered: DataFrame,
    budget: int,
    *,
    slab_events: int,
    backend: CrownGraphBackend = "auto",
) -> DistributedCrowns:
    """`crowns` (udf schema of `crowns`) and `crown_members` of every trace in `delivered`, with
    the same components, ids and sizes as the per-trace kernel; witnesses are valid crowns,
    `shortest` true only when proved (the caller checks them against the vector clocks).

    delivered: `delivered_messages(...)` restricted to the traces to solve this way.
    """
    if backend == "graphframes" and not graphframes_available(delivered):
        raise GraphFramesUnavailable(
            "detect.crown_graph_backend 'graphframes' requested but org.graphframes.GraphFrame "
            "is not on the classpath"
        )
    use_graphframes = backend == "graphframes" or (
        backend == "auto" and graphframes_available(delivered)
    )
    events = checkpoint(slabbed_events(delivered, slab_events))
    edges = contracted_edges(events)
    if use_graphframes:
        labeled = checkpoint(_labels_by_graphframes(events, edges))
    else:
        labeled = checkpoint(_labels_by_slabs(events))
    # crown components: two or more nodes; numbered by their first node, as per trace
    components = checkpoint(
        labeled.groupBy(C.TRACE_ID, LABEL)
        .agg(
            F.count_distinct(NODE).alias(_N_NODES),
            F.min(NODE).alias(_FIRST),
            F.count("*").alias("scc_size"),
        )
        .where(F.col(_N_NODES) > 1)
        .select(
            C.TRACE_ID,
            LABEL,
            "scc_size",
            (F.row_number().over(Window.partitionBy(C.TRACE_ID).orderBy(_FIRST)) - 1)
            .cast("int")
            .alias("scc_id"),
        )
    )
    members = labeled.join(F.broadcast(components), [C.TRACE_ID, LABEL]).select(
        C.TRACE_ID, "scc_id", C.MSG_ID
    )
    two = checkpoint(_two_crowns(edges, labeled))
    rest = components.join(F.broadcast(two.select(C.TRACE_ID, LABEL)), [C.TRACE_ID, LABEL],
                           "left_anti")  # fmt: skip

    def witness(messages: pa.Table) -> pa.Table:
        return witness_of_component(messages, budget)

    gathered = (
        labeled.join(F.broadcast(rest.select(C.TRACE_ID, LABEL)), [C.TRACE_ID, LABEL])
        .groupBy(C.TRACE_ID, LABEL)
        .applyInArrow(witness, _WITNESS_SCHEMA)
    )
    witnesses = two.unionByName(gathered)
    crowns = components.join(witnesses, [C.TRACE_ID, LABEL], "left").select(
        *[f.name for f in tables.udf_schema(tables.CROWNS).fields]
    )
    return DistributedCrowns(
        crowns=checkpoint(crowns),
        members=members,
        backend="graphframes" if use_graphframes else "slabs",
    )
