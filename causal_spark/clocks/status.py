"""The `trace_clocks` table: one row per trace, how its clocks were computed, ok or INVALID.

A component whose matched ids form a causal cycle gets null clocks from either
engine; its trace is INVALID here, with a witness cycle (the msg_ids of the
receives on a cycle of waits) found by running that component once more as
one group, which only corrupt components pay for.
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
from causal_spark.clocks.kernel import CausalCycleError, group_clocks
from causal_spark.clocks.plan import (
    CYCLE,
    GROUP,
    N_PROCS,
    N_SLABS,
    PROC_EVENTS,
    UNIT,
    _keyed_events,
    _receive_links,
    _with_link_columns,
)

CLOCK_STATUS_OK = "ok"
CLOCK_STATUS_INVALID = "INVALID"


def _witness(events: pa.Table, links: pa.Table) -> pa.Table:
    """One component as a single slab: its witness cycle (msg_ids), or no row if none."""
    schema = pa.schema([(C.TRACE_ID, pa.string()), (CYCLE, pa.list_(pa.string()))])
    slab = _slab_inputs(events, links)
    try:
        group_clocks(slab.proc, slab.lseq, slab.send_proc, slab.send_lseq, slab.import_of, slab.n)
    except CausalCycleError as cycle:
        ids = slab.msg_ids.take(pa.array(slab.receive_msg[cycle.receive_rows])).to_pylist()
        trace = slab.events.column(C.TRACE_ID)[0].as_py()
        return pa.table({C.TRACE_ID: [trace], CYCLE: [ids]}, schema=schema)
    return schema.empty_table()


def trace_clock_status(
    clocked: DataFrame, events: DataFrame, messages: DataFrame, plan: DataFrame
) -> DataFrame:
    """One row per trace: its size, how its clocks were computed, ok or INVALID with a witness.

    clocked: `with_clocks(...).events`, best read back from where it was
    written (this costs one narrow scan of `lamport`). events, messages: the
    tables it was computed from; plan: `with_clocks(...).plan`. The witness of
    an INVALID component is found by running that component once more as one
    group, which only corrupt components pay for.
    Output: the columns of the `trace_clocks` table.
    """
    broken = checkpoint(
        clocked.where(F.col(C.LAMPORT).isNull())
        .select(C.TRACE_ID, C.PIDX)
        .distinct()
        .join(F.broadcast(plan.select(C.TRACE_ID, C.PIDX, COMPONENT)), [C.TRACE_ID, C.PIDX])
        .select(*UNIT)
        .distinct()
    )
    witness_schema = T.StructType(
        [
            T.StructField(C.TRACE_ID, T.StringType()),
            T.StructField(CYCLE, T.ArrayType(T.StringType())),
        ]
    )
    if broken.isEmpty():
        witnesses = clocked.sparkSession.createDataFrame([], witness_schema)
    else:
        info = plan.join(F.broadcast(broken), UNIT).withColumn(N_SLABS, F.lit(1))
        keyed = _keyed_events(events, info)
        links = _with_link_columns(_receive_links(messages, info))
        witnesses = (
            keyed.groupBy(*GROUP)
            .cogroup(links.groupBy(*GROUP))
            .applyInArrow(_witness, witness_schema)
            .groupBy(C.TRACE_ID)
            .agg(F.min(CYCLE).alias(CYCLE))
        )
    per_trace = plan.groupBy(C.TRACE_ID).agg(
        F.first(N_PROCS).alias(N_PROCS),
        F.sum(PROC_EVENTS).alias("n_events"),
        F.count_distinct(COMPONENT).alias("n_components"),
        F.max(N_SLABS).alias(N_SLABS),
    )
    return per_trace.join(witnesses, C.TRACE_ID, "left").select(
        C.TRACE_ID,
        N_PROCS,
        F.col("n_events").cast("long").alias("n_events"),
        F.col("n_components").cast("int").alias("n_components"),
        F.when(F.col(N_SLABS) > 1, F.lit("distributed"))
        .otherwise(F.lit("per_trace"))
        .alias("engine"),
        F.col(N_SLABS).cast("int").alias(N_SLABS),
        F.when(F.col(CYCLE).isNotNull(), F.lit(CLOCK_STATUS_INVALID))
        .otherwise(F.lit(CLOCK_STATUS_OK))
        .alias("status"),
        CYCLE,
    )
