"""Graph algorithms on DataFrames, with a thin GraphFrames adapter.

Everything here works on plain Spark (iterative joins, checkpointed every
`checkpoint_interval` rounds). Where the GraphFrames JVM package is on the
classpath, `connected_components` hands the work to GraphFrames instead; the
adapter only translates ids and column names, so both paths return the same
DataFrame.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
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


def checkpoint(frame: DataFrame) -> DataFrame:
    """Cut lineage: a reliable checkpoint when a checkpoint dir is set, else a local one."""
    directory = frame.sparkSession.conf.get("spark.checkpoint.dir", None)
    if directory:
        return frame.checkpoint(eager=True)
    return frame.localCheckpoint(eager=True)


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
    of the causal chains.
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
