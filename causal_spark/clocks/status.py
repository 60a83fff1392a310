"""The `trace_clocks` table: one row per trace, how its clocks were computed, ok, INVALID or
not_applicable.

A component whose matched ids form a causal cycle gets null clocks from either
engine (the distributed one finds the cycle in its own passes: inside a slab, or
as a cycle of its export graph); its trace is INVALID here, with a witness
cycle (the msg_ids of the receives on a cycle of waits) found by running that
component once more as one group, whatever its slabs were: a cycle across slab
borders shows only there. That run computes no clocks (O(events) memory, not
O(events x n)) and only corrupt components pay for it; it gives both engines
the same witness.

A component the plan kept from its vectors (too wide for `clocks.max_component_bytes`,
`clocks.size`) has Lamport clocks only, or none; its trace is `not_applicable` with
the plan's reason (the estimate and the limit), unless it is INVALID.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark._spark import checkpoint
from causal_spark.clocks.components import COMPONENT
from causal_spark.clocks.distributed import _slab_inputs
from causal_spark.clocks.kernel import cycle_witness
from causal_spark.clocks.plan import (
    BOUNDS,
    CLOCKS,
    CYCLE,
    GROUP,
    INVALID,
    N_PROCS,
    N_SLABS,
    PROC_EVENTS,
    REASON,
    UNIT,
    _keyed_events,
    _receive_links,
    _with_link_columns,
)
from causal_spark.clocks.size import LAMPORT_ONLY, VECTORS

CLOCK_STATUS_OK = "ok"
CLOCK_STATUS_INVALID = "INVALID"
# some component too wide for its vectors (`clocks.size`): vc null, `reason` says why
CLOCK_STATUS_NOT_APPLICABLE = "not_applicable"


def _witness(events: pa.Table, links: pa.Table) -> pa.Table:
    """One component as a single slab: its witness cycle (msg_ids), or no row if none."""
    schema = pa.schema([(C.TRACE_ID, pa.string()), (CYCLE, pa.list_(pa.string()))])
    slab = _slab_inputs(events, links)
    rows = cycle_witness(slab.proc, slab.lseq, slab.send_proc, slab.send_lseq, slab.n)
    if rows is None:
        return schema.empty_table()
    ids = slab.msg_ids.take(pa.array(slab.receive_msg[rows])).to_pylist()
    trace = slab.events.column(C.TRACE_ID)[0].as_py()
    return pa.table({C.TRACE_ID: [trace], CYCLE: [ids]}, schema=schema)


def trace_clock_status(
    clocked: DataFrame,
    events: DataFrame,
    messages: DataFrame,
    plan: DataFrame,
    all_clocked: bool = False,
) -> DataFrame:
    """One row per trace: its size, how its clocks were computed, ok, INVALID with a witness,
    or not_applicable with the reason.

    clocked: `with_clocks(...).events`, best read back from where it was
    written (this costs one narrow scan of `lamport`). events, messages: the
    tables it was computed from; plan: `with_clocks(...).plan`. A trace with a
    component of null clocks is INVALID; the witness is found by running that
    component once more as one group (whatever its slabs were) through a
    traversal that computes no clocks, which only corrupt components pay for.
    A trace with a component the plan kept from its vectors (or from any clocks) is
    otherwise `not_applicable`, with the plan's reason (`clocks.size`).
    `all_clocked`: no event of `clocked` has a null `lamport` (known, e.g. from the
    written files' statistics): no component is broken, and no Spark job looks for one.
    Output: the columns of the `trace_clocks` table.
    """
    # a component the plan gave no clocks at all has null Lamport clocks without a cycle
    clocked_units = plan.where(F.col(CLOCKS) >= LAMPORT_ONLY).select(C.TRACE_ID, C.PIDX, COMPONENT)
    witness_schema = T.StructType(
        [
            T.StructField(C.TRACE_ID, T.StringType()),
            T.StructField(CYCLE, T.ArrayType(T.StringType())),
        ]
    )
    unit_schema = T.StructType(
        [T.StructField(C.TRACE_ID, T.StringType()), T.StructField(COMPONENT, T.IntegerType())]
    )
    broken = (
        clocked.sparkSession.createDataFrame([], unit_schema)
        if all_clocked
        else checkpoint(
            clocked.where(F.col(C.LAMPORT).isNull())
            .select(C.TRACE_ID, C.PIDX)
            .distinct()
            .join(F.broadcast(clocked_units), [C.TRACE_ID, C.PIDX])
            .select(*UNIT)
            .distinct()
        )
    )
    if all_clocked or broken.isEmpty():
        witnesses = clocked.sparkSession.createDataFrame([], witness_schema)
    else:
        # every broken component as one slab (no slab starts): a cycle across slab borders
        # shows only there; the traversal needs the events' positions only
        info = (
            plan.join(F.broadcast(broken), UNIT)
            .withColumn(N_SLABS, F.lit(1))
            .withColumn(BOUNDS, F.array().cast("array<long>"))
        )
        keyed = _keyed_events(events.select(C.TRACE_ID, C.PIDX, C.LSEQ), info)
        links = _with_link_columns(_receive_links(messages, info))
        witnesses = (
            keyed.groupBy(*GROUP)
            .cogroup(links.groupBy(*GROUP))
            .applyInArrow(_witness, witness_schema)
            .groupBy(C.TRACE_ID)
            .agg(F.min(CYCLE).alias(CYCLE))
        )
    invalid = broken.select(C.TRACE_ID).distinct().withColumn(INVALID, F.lit(True))
    per_trace = plan.groupBy(C.TRACE_ID).agg(
        F.first(N_PROCS).alias(N_PROCS),
        F.sum(PROC_EVENTS).alias("n_events"),
        F.count_distinct(COMPONENT).alias("n_components"),
        F.max(N_SLABS).alias(N_SLABS),
        F.min(CLOCKS).alias(CLOCKS),
        F.min(REASON).alias(REASON),  # a trace's components without vectors: the first reason
    )
    # INVALID because its clocks are null (what every later stage reads), not because a
    # witness was found: the two agree, and a trace is never `ok` with null clocks
    return (
        per_trace.join(witnesses, C.TRACE_ID, "left")
        .join(F.broadcast(invalid), C.TRACE_ID, "left")
        .select(
            C.TRACE_ID,
            N_PROCS,
            F.col("n_events").cast("long").alias("n_events"),
            F.col("n_components").cast("int").alias("n_components"),
            F.when(F.col(N_SLABS) > 1, F.lit("distributed"))
            .otherwise(F.lit("per_trace"))
            .alias("engine"),
            F.col(N_SLABS).cast("int").alias(N_SLABS),
            F.when(F.col(INVALID), F.lit(CLOCK_STATUS_INVALID))
            .when(F.col(CLOCKS) < VECTORS, F.lit(CLOCK_STATUS_NOT_APPLICABLE))
            .otherwise(F.lit(CLOCK_STATUS_OK))
            .alias("status"),
            CYCLE,
            F.when(~F.coalesce(F.col(INVALID), F.lit(False)), F.col(REASON)).alias(REASON),
        )
    )
