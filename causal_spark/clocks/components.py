"""Connected components of each trace's process graph (the clocks' units), and the GraphFrames
adapter (connected and strongly connected components).

Everything here works on plain Spark (iterative joins, checkpointed every
`checkpoint_interval` rounds, or one grouped pass in memory per trace). Where
the GraphFrames JVM package is on the classpath, `connected_components` hands
the work to GraphFrames instead; the adapter only translates ids and column
names, so both paths return the same DataFrame. This is the one module that
touches the JVM (`graphframes_available`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark._spark import checkpoint, shuffle_partitions
from causal_spark.config import GraphBackend

log = logging.getLogger(__name__)

COMPONENT = "component"
_NODE = "__node"
_NBR = "__nbr"
_LABEL = "__label"
_NEW = "__new"


class GraphFramesUnavailable(RuntimeError):
    """GraphFrames was asked for but its JVM package is not on the classpath."""


def graphframes_available(frame: DataFrame) -> bool:
    """True when the GraphFrames JVM classes can be loaded by this session."""
    spark = frame.sparkSession
    jvm = getattr(spark, "_jvm", None)  # the adapter is the one place that may touch the JVM
    if jvm is None:
        return False
    try:
        jvm.java.lang.Class.forName("org.graphframes.GraphFrame")
    except Exception:
        return False
    return True


@dataclass(frozen=True)
class Components:
    """(trace_id, pidx, component) for every vertex, and how it was computed."""

    labels: DataFrame
    backend: str
    rounds: int


def connected_components(
    vertices: DataFrame,
    edges: DataFrame,
    *,
    backend: GraphBackend = "auto",
    checkpoint_interval: int = 2,
) -> Components:
    """Connected components of each trace's process graph.

    vertices: trace_id, pidx. edges: trace_id, src_pidx, dst_pidx (direction
    ignored). Output labels: trace_id, pidx, component (int: the smallest
    pidx of the component). Rounds are those of min-label propagation with
    pointer jumping over the *process* graph (about log of its diameter), never
    of the causal chains. `auto` without GraphFrames solves each trace's process
    graph (n vertices, at most n^2 edges) in memory instead: one grouped pass, with
    many traces per group (hash buckets of trace ids), and no rounds.
    """
    use_graphframes = backend == "graphframes" or (
        backend == "auto" and graphframes_available(vertices)
    )
    if backend == "graphframes" and not graphframes_available(vertices):
        raise GraphFramesUnavailable(
            "graph backend 'graphframes' requested but org.graphframes.GraphFrame is not on "
            "the classpath; add the graphframes package to spark.jars.packages"
        )
    if use_graphframes:
        return _components_graphframes(vertices, edges, checkpoint_interval)
    if backend == "auto":
        return _components_grouped(vertices, edges)
    return _components_joins(vertices, edges, checkpoint_interval)


def _undirected(edges: DataFrame) -> DataFrame:
    forward = edges.select(
        C.TRACE_ID, F.col(C.SRC_PIDX).alias(_NODE), F.col(C.DST_PIDX).alias(_NBR)
    )
    backward = edges.select(
        C.TRACE_ID, F.col(C.DST_PIDX).alias(_NODE), F.col(C.SRC_PIDX).alias(_NBR)
    )
    return forward.unionByName(backward).where(F.col(_NODE) != F.col(_NBR)).distinct()


def _components_joins(vertices: DataFrame, edges: DataFrame, interval: int) -> Components:
    links = checkpoint(_undirected(edges))
    labels = checkpoint(
        vertices.select(C.TRACE_ID, F.col(C.PIDX).alias(_NODE), F.col(C.PIDX).alias(_LABEL))
    )
    rounds = 0
    while True:
        rounds += 1
        neighbour_min = (
            links.join(
                labels.select(C.TRACE_ID, F.col(_NODE).alias(_NBR), F.col(_LABEL).alias(_NEW)),
                [C.TRACE_ID, _NBR],
            )
            .groupBy(C.TRACE_ID, _NODE)
            .agg(F.min(_NEW).alias(_NEW))
        )
        hooked = labels.join(neighbour_min, [C.TRACE_ID, _NODE], "left").select(
            C.TRACE_ID, _NODE, F.least(_LABEL, F.coalesce(_NEW, _LABEL)).alias(_LABEL)
        )
        # pointer jumping: take the label of one's label, which shortens chains of labels
        jumped = (
            hooked.alias("v")
            .join(
                hooked.alias("l"),
                (F.col(f"v.{C.TRACE_ID}") == F.col(f"l.{C.TRACE_ID}"))
                & (F.col(f"v.{_LABEL}") == F.col(f"l.{_NODE}")),
            )
            .select(
                F.col(f"v.{C.TRACE_ID}").alias(C.TRACE_ID),
                F.col(f"v.{_NODE}").alias(_NODE),
                F.least(F.col(f"v.{_LABEL}"), F.col(f"l.{_LABEL}")).alias(_LABEL),
            )
        )
        if rounds % interval == 0:
            jumped = checkpoint(jumped)
        else:
            jumped = jumped.localCheckpoint(eager=True)
        changed = (
            jumped.join(labels.withColumnRenamed(_LABEL, _NEW), [C.TRACE_ID, _NODE])
            .where(F.col(_LABEL) != F.col(_NEW))
            .limit(1)
            .count()
        )
        labels = jumped
        if changed == 0:
            break
    log.info("connected components by joins: %d round(s)", rounds)
    out = labels.select(
        C.TRACE_ID, F.col(_NODE).alias(C.PIDX), F.col(_LABEL).cast("int").alias(COMPONENT)
    )
    return Components(out, "joins", rounds)


def _components_graphframes(vertices: DataFrame, edges: DataFrame, interval: int) -> Components:
    from graphframes import GraphFrame

    def vertex_id(trace: str, pidx: str) -> Column:
        return F.concat_ws("\u0000", F.col(trace), F.col(pidx).cast("string"))

    nodes = vertices.select(C.TRACE_ID, C.PIDX, vertex_id(C.TRACE_ID, C.PIDX).alias("id"))
    links = edges.select(
        vertex_id(C.TRACE_ID, C.SRC_PIDX).alias("src"),
        vertex_id(C.TRACE_ID, C.DST_PIDX).alias("dst"),
    )
    found = GraphFrame(nodes, links).connectedComponents(checkpointInterval=interval)
    smallest = found.groupBy(C.TRACE_ID, "component").agg(F.min(C.PIDX).alias(_LABEL))
    out = found.join(smallest, [C.TRACE_ID, "component"]).select(
        C.TRACE_ID, C.PIDX, F.col(_LABEL).cast("int").alias(COMPONENT)
    )
    return Components(out, "graphframes", 0)


_BUCKET = "__bucket"


@njit(cache=True)
def _union_find_labels(
    nodes: int, src: np.ndarray, dst: np.ndarray, pidx: np.ndarray
) -> np.ndarray:
    """Per node: the smallest pidx of its component (nodes joined by the src-dst edges)."""
    parent = np.arange(nodes)

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i in range(src.shape[0]):
        a = root(src[i])
        b = root(dst[i])
        if a != b:
            parent[max(a, b)] = min(a, b)
    smallest = np.full(nodes, np.iinfo(np.int64).max)
    for x in range(nodes):
        r = root(x)
        if pidx[x] < smallest[r]:
            smallest[r] = pidx[x]
    labels = np.empty(nodes, dtype=np.int64)
    for x in range(nodes):
        labels[x] = smallest[root(x)]
    return labels


def _label_traces(vertices: pa.Table, edges: pa.Table) -> pa.Table:
    """Components of every trace of one bucket: vertices (trace_id, pidx), edges."""
    schema = pa.schema([(C.TRACE_ID, pa.string()), (C.PIDX, pa.int32()), (COMPONENT, pa.int32())])
    if len(vertices) == 0:
        return schema.empty_table()
    traces = pc.unique(vertices.column(C.TRACE_ID))
    trace_of = pc.index_in(vertices.column(C.TRACE_ID), value_set=traces).to_numpy()
    pidx = vertices.column(C.PIDX).to_numpy().astype(np.int64)
    width = np.zeros(len(traces), dtype=np.int64)
    np.maximum.at(width, trace_of, pidx + 1)
    base = np.concatenate([[0], np.cumsum(width)])
    node_of_vertex = base[trace_of] + pidx
    nodes = int(base[-1])
    node_pidx = np.zeros(nodes, dtype=np.int64)
    node_pidx[node_of_vertex] = pidx
    edge_trace = pc.index_in(edges.column(C.TRACE_ID), value_set=traces).fill_null(-1)
    trace_of_edge = edge_trace.to_numpy().astype(np.int64)
    src = edges.column(C.SRC_PIDX).to_numpy().astype(np.int64)
    dst = edges.column(C.DST_PIDX).to_numpy().astype(np.int64)
    edge_width = np.where(trace_of_edge >= 0, width[trace_of_edge], 0)
    inside = (src < edge_width) & (dst < edge_width)  # both ends are vertices of that trace
    edge_base = base[trace_of_edge[inside]]
    labels = _union_find_labels(nodes, edge_base + src[inside], edge_base + dst[inside], node_pidx)
    return pa.table(
        {
            C.TRACE_ID: vertices.column(C.TRACE_ID),
            C.PIDX: pa.array(pidx, pa.int32()),
            COMPONENT: pa.array(labels[node_of_vertex], pa.int32()),
        },
        schema=schema,
    )


def _components_grouped(vertices: DataFrame, edges: DataFrame) -> Components:
    buckets = shuffle_partitions(vertices.sparkSession)
    bucket = F.pmod(F.xxhash64(C.TRACE_ID), F.lit(buckets)).alias(_BUCKET)
    schema = T.StructType(
        [
            T.StructField(C.TRACE_ID, T.StringType()),
            T.StructField(C.PIDX, T.IntegerType()),
            T.StructField(COMPONENT, T.IntegerType()),
        ]
    )
    labels = (
        vertices.select(bucket, C.TRACE_ID, F.col(C.PIDX).cast("int").alias(C.PIDX))
        .groupBy(_BUCKET)
        .cogroup(
            edges.select(
                bucket,
                C.TRACE_ID,
                F.col(C.SRC_PIDX).cast("int").alias(C.SRC_PIDX),
                F.col(C.DST_PIDX).cast("int").alias(C.DST_PIDX),
            ).groupBy(_BUCKET)
        )
        .applyInArrow(_label_traces, schema)
    )
    # not checkpointed: the plan, its one reader in the product, checkpoints its join to it
    return Components(labels, "grouped", 1)


NODE = "node"


def strong_components_graphframes(
    nodes: DataFrame, edges: DataFrame, *, max_iterations: int = 2**31 - 1
) -> DataFrame:
    """Strongly connected components of each trace's graph with GraphFrames (its jar needed).

    nodes: trace_id, node (long); edges: trace_id, src, dst (longs, nodes of one trace).
    Output: trace_id, node, component (long, equal for the nodes of one component, unique
    across the traces of one call). GraphFrames' rounds follow the graph's diameter, not a
    bound of ours; `max_iterations` is GraphX's outer-loop cap.
    Raises `GraphFramesUnavailable` without the jar.
    """
    if not graphframes_available(nodes):
        raise GraphFramesUnavailable(
            "strongly connected components with GraphFrames requested but "
            "org.graphframes.GraphFrame is not on the classpath; add the graphframes "
            "package to spark.jars.packages or choose the slab method"
        )
    from graphframes import GraphFrame

    def vertex_id(trace: str, node: str) -> Column:
        return F.concat_ws("\u0000", F.col(trace), F.col(node).cast("string"))

    vertices = nodes.select(C.TRACE_ID, NODE, vertex_id(C.TRACE_ID, NODE).alias("id"))
    links = edges.select(
        vertex_id(C.TRACE_ID, C.SRC).alias("src"), vertex_id(C.TRACE_ID, C.DST).alias("dst")
    )
    found: DataFrame = GraphFrame(vertices, links).stronglyConnectedComponents(
        maxIter=max_iterations
    )
    return found.select(C.TRACE_ID, F.col(NODE).cast("long"), F.col(COMPONENT).cast("long"))
