"""Planning the clocks (docs/clocks.md): units, slabs and receive links, shared by both engines.

The unit of work is a *component*: the processes of one trace that exchange
messages with one another (connected components of the trace's process graph,
`causal_spark.clocks.components`). Components are independent, so each is
processed on its own. Each component is cut into `n_slabs` slabs, each a band
of every process's stream: by time when every event has `ts` (slab s holds the
events from the s-th time step of the component on), else by equal shares of
each process's events. Slab borders only decide how much crosses them (cost),
never the result. A component of one slab goes to the per-trace engine
(`clocks.per_trace`), one of several to the distributed engine
(`clocks.distributed`).

Also here: the helper column names and the output schema and wrapper both
engines' grouped UDFs use.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark import tables
from causal_spark._spark import checkpoint
from causal_spark.clocks import size
from causal_spark.clocks.components import COMPONENT, connected_components
from causal_spark.clocks.recorded import RECORDED_VC, carried
from causal_spark.config import ClockSettings
from causal_spark.sinks import FILES_SCHEMA, FileWriter

VC_ARROW = pa.list_(pa.field("element", pa.int32()))

# helper columns (dropped before anything leaves the package)
PROC_EVENTS = "proc_events"
N_PROCS = "n_processes"
N_SLABS = "n_slabs"
UNIT_EVENTS = "unit_events"
SLAB = "slab"
LINK = "link"
PEER_PIDX = "peer_pidx"
PEER_LSEQ = "peer_lseq"
PEER_SLAB = "peer_slab"
SEED_VC = "seed_vc"
SEED_LAMPORT = "seed_lamport"
INVALID = "invalid"
NEXT_SLAB = "next_slab"
IS_LAST = "is_last"
BOUNDS = "bounds"
T_MIN = "__t_min"
T_MAX = "__t_max"
CYCLE = "cycle"
PART = "part"
PARTS = "parts"
IN_PLACE = "in_place"  # a whole unit larger than slab_events: clocked where its events are read
GROUP_KEY = "group_key"
CLOCKS = "clocks"  # per unit: size.VECTORS, LAMPORT_ONLY or NO_CLOCKS (byte), shipped to tasks
ESTIMATE = "estimate"  # per unit: the estimated peak of its vectors' task (bytes)
REASON = "reason"  # per unit clocked without vectors: why (null otherwise)
BATCH = "batch"
UNIT_CODE = "unit"  # a unit's number within its batch (the per-trace engine's events carry it)
SOURCE_CODE = "source_code"
KIND_CODE = "kind_code"
KINDS = (C.SEND, C.RECEIVE, C.INTERNAL)  # kind_code is the index here
UNIT = [C.TRACE_ID, COMPONENT]
GROUP = [C.TRACE_ID, COMPONENT, SLAB]

LINK_RECV = "recv"  # a receive in this slab; its send is in the slab or imported
LINK_OUT = "out"  # a send in this slab whose message is received in another slab
LINK_SEED = "seed"  # the resolved clocks of a process's last event before this slab


# ---------------------------------------------------------------------------------------------
# planning: components, slabs


def _n_slabs(settings: ClockSettings) -> Column:
    events = F.col(UNIT_EVENTS)
    slabs = F.greatest(F.lit(1), F.ceil(events / F.lit(settings.slab_events))).cast("int")
    if settings.engine == "per_trace":
        return F.lit(1)
    if settings.engine == "distributed":
        return slabs
    return F.when(events > settings.per_trace_max_events, slabs).otherwise(F.lit(1))


def _mib(size_bytes: Column) -> Column:
    return F.format_string("%.1f MiB", size_bytes / F.lit(float(1 << 20)))


def _clock_choice(settings: ClockSettings) -> tuple[Column, Column, Column]:
    """Per unit (UNIT_EVENTS, N_PROCS, N_SLABS): what its clocks' largest task would hold
    (`size.component_bytes`), what to compute within `max_component_bytes` (vectors, Lamport
    only or nothing: `size.VECTORS` ...) and, without vectors, why, with the estimate."""
    events, n, slabs = F.col(UNIT_EVENTS), F.col(N_PROCS), F.col(N_SLABS)
    limit = settings.max_component_bytes
    vectors = size.component_bytes(events, n, slabs, settings.slab_events, settings.output_parts)
    lamport = size.lamport_bytes(events, n)
    choice = (
        F.when(vectors <= limit, F.lit(size.VECTORS))
        .when(lamport <= limit, F.lit(size.LAMPORT_ONLY))
        .otherwise(F.lit(size.NO_CLOCKS))
        .cast("byte")
    )
    shape = F.format_string("a component of %d events, n = %d processes; docs/clocks.md", events, n)
    exceeds = F.format_string(
        "estimated peak %s exceeds clocks.max_component_bytes %s",
        _mib(vectors),
        F.lit(f"{limit / 2**20:.1f} MiB"),
    )
    reason = F.when(
        choice == size.LAMPORT_ONLY,
        F.format_string(
            "vector clocks not computed: %s (%s); Lamport clocks computed", exceeds, shape
        ),
    ).when(
        choice == size.NO_CLOCKS,
        F.format_string(
            "no clocks computed: %s, and Lamport clocks alone %s (%s)",
            exceeds,
            _mib(lamport),
            shape,
        ),
    )
    return vectors, choice, reason


@dataclass(frozen=True)
class Plan:
    """units: one row per (trace, process), see `plan_units`. names: one row per (trace,
    pidx, process, source) found in the events, with source_code (int: the source's rank
    among its process's sources, from 0), so the per-trace engine can ship codes instead
    of strings. Both small; units is checkpointed, names is a window over a checkpoint
    (its one reader, the placement, checkpoints what it makes of it). max_slabs: the
    most slabs of any unit (1 when none is split: every process then has as many slab
    starts, max_slabs - 1); whole_events, whole_units: the events and the number of the
    units of one slab (the per-trace engine's)."""

    units: DataFrame
    names: DataFrame
    component_rounds: int
    max_slabs: int = 1
    whole_events: int = 0
    whole_units: int = 0


def plan_units(events: DataFrame, messages: DataFrame, settings: ClockSettings) -> Plan:
    """One row per (trace, process): component, N_p, the trace's n, its component's slabs.

    Output units: trace_id, pidx, component, proc_events (long), n_processes (int),
    unit_events (long), n_slabs (int), bounds (array<long>: the first lseq of
    slabs 1..n_slabs-1 on this process), and the component's size guard
    (`_clock_choice`): clocks (byte: `size.VECTORS`, `LAMPORT_ONLY` or `NO_CLOCKS`),
    estimate (long, bytes), reason (string, null with vectors); a component without
    vectors is one slab (the per-trace engine). Checkpointed (it is small). The first
    aggregation groups by process and source names too (a few more hashed bytes per
    event, no extra pass over the events) to give `Plan.names`.
    """
    named = checkpoint(
        events.groupBy(C.TRACE_ID, C.PIDX, C.PROCESS, C.SOURCE).agg(
            F.count(F.lit(1)).alias(PROC_EVENTS),
            F.min(C.TS).alias("__ts_min"),
            F.max(C.TS).alias("__ts_max"),
            F.count(C.TS).alias("__ts_known"),
        )
    )
    counts = named.groupBy(C.TRACE_ID, C.PIDX).agg(
        F.sum(PROC_EVENTS).alias(PROC_EVENTS),
        F.min("__ts_min").alias("__ts_min"),
        F.max("__ts_max").alias("__ts_max"),
        F.sum("__ts_known").alias("__ts_known"),
    )
    # not checkpointed: a small aggregate of the checkpointed `named`, read by the components
    # and joined to them, both inside the checkpoint of `info` below
    names = named.select(
        C.TRACE_ID,
        F.col(C.PIDX).cast("int").alias(C.PIDX),
        C.PROCESS,
        C.SOURCE,
        (F.dense_rank().over(Window.partitionBy(C.TRACE_ID, C.PIDX).orderBy(C.SOURCE)) - 1).alias(
            SOURCE_CODE
        ),
    )
    edges = (
        messages.where(F.col(C.STATUS) == C.DELIVERED)
        .select(C.TRACE_ID, C.SRC_PIDX, C.DST_PIDX)
        .distinct()
    )
    found = connected_components(
        counts.select(C.TRACE_ID, C.PIDX),
        edges,
        backend=settings.graph_backend,
        checkpoint_interval=settings.checkpoint_interval,
    )
    per_trace = Window.partitionBy(C.TRACE_ID)
    per_unit = Window.partitionBy(C.TRACE_ID, COMPONENT)
    info = (
        counts.join(found.labels, [C.TRACE_ID, C.PIDX])
        .withColumn(N_PROCS, (F.max(C.PIDX).over(per_trace) + 1).cast("int"))
        .withColumn(UNIT_EVENTS, F.sum(PROC_EVENTS).over(per_unit))
        .withColumn(N_SLABS, _n_slabs(settings))
    )
    estimate, choice, reason = _clock_choice(settings)
    info = (
        info.withColumn(ESTIMATE, estimate)
        .withColumn(CLOCKS, choice)
        .withColumn(REASON, reason)
        # without vectors, the per-trace engine's traversal (the distributed one needs them)
        .withColumn(N_SLABS, F.when(F.col(CLOCKS) == size.VECTORS, F.col(N_SLABS)).otherwise(1))
        .withColumn(
            "__timed",
            (F.sum("__ts_known").over(per_unit) == F.col(UNIT_EVENTS))
            & (F.max("__ts_max").over(per_unit) > F.min("__ts_min").over(per_unit)),
        )
        .withColumn(T_MIN, F.min("__ts_min").over(per_unit))
        .withColumn(T_MAX, F.max("__ts_max").over(per_unit))
    )
    info = checkpoint(info)
    split = F.col(N_SLABS) > 1
    shape = info.agg(
        F.max(N_SLABS).alias(N_SLABS),
        F.max((split & F.col("__timed")).cast("int")).alias("timed_split"),
        F.sum(F.when(~split, F.col(PROC_EVENTS))).alias("whole_events"),
        # a component's number is its smallest pidx: one row of each unit has pidx = component
        # (a count, not a count_distinct: one aggregation, not three Spark jobs)
        F.count(F.when(~split & (F.col(C.PIDX) == F.col(COMPONENT)), F.lit(1))).alias(
            "whole_units"
        ),
    ).first()
    assert shape is not None  # an aggregate without grouping has one row
    if shape["timed_split"]:
        bounds = _time_bounds(events, info)
        slabbed = info.join(F.broadcast(bounds), [C.TRACE_ID, C.PIDX], "left")
        timed_bounds = F.col(BOUNDS)
    else:  # no split unit is timed: no pass over the events for time bands
        slabbed, timed_bounds = info, F.lit(None).cast("array<long>")
    planned = slabbed.select(
        C.TRACE_ID,
        F.col(C.PIDX).cast("int").alias(C.PIDX),
        COMPONENT,
        F.col(PROC_EVENTS).cast("long").alias(PROC_EVENTS),
        N_PROCS,
        F.col(UNIT_EVENTS).cast("long").alias(UNIT_EVENTS),
        N_SLABS,
        F.when(F.col(N_SLABS) == 1, F.array().cast("array<long>"))
        .when(F.col("__timed"), timed_bounds)
        .otherwise(_fraction_bounds())
        .alias(BOUNDS),
        CLOCKS,
        F.col(ESTIMATE).cast("long").alias(ESTIMATE),
        F.col(REASON).cast("string").alias(REASON),
    )
    # `names` is read once, by the placement of the whole units, which checkpoints its join
    return Plan(
        checkpoint(planned),
        names,
        found.rounds,
        max_slabs=shape[N_SLABS] or 1,
        whole_events=shape["whole_events"] or 0,
        whole_units=shape["whole_units"],
    )


def _fraction_bounds() -> Column:
    """Slab s starts at the event ceil(s * N_p / n_slabs) + 1: equal shares of each process."""
    return F.transform(
        F.sequence(F.lit(1), F.col(N_SLABS) - 1),
        lambda s: (F.ceil(s * F.col(PROC_EVENTS) / F.col(N_SLABS)) + 1).cast("long"),
    )


def _time_bounds(events: DataFrame, info: DataFrame) -> DataFrame:
    """Per process of a split unit whose events all have `ts`: slab s starts at the first
    event at or after the unit's s-th time step, so a slab is a band of time across every
    process and few messages cross slab borders (equal lseq shares drift apart across
    processes by far more than a latency). A `ts` that goes back in time on a process can
    only move a border later (the first lseq is a minimum over a shrinking set)."""
    split = info.where((F.col(N_SLABS) > 1) & F.col("__timed")).select(
        C.TRACE_ID, C.PIDX, N_SLABS, PROC_EVENTS, T_MIN, T_MAX
    )
    raw = F.least(
        F.floor((F.col(C.TS) - F.col(T_MIN)) / (F.col(T_MAX) - F.col(T_MIN)) * F.col(N_SLABS)),
        F.col(N_SLABS) - 1,
    ).cast("int")
    firsts = (
        events.join(F.broadcast(split), [C.TRACE_ID, C.PIDX])
        .groupBy(C.TRACE_ID, C.PIDX, raw.alias("__raw"))
        .agg(
            F.min(C.LSEQ).alias("__first"),
            F.first(N_SLABS).alias(N_SLABS),
            F.first(PROC_EVENTS).alias(PROC_EVENTS),
        )
        .groupBy(C.TRACE_ID, C.PIDX)
        .agg(
            F.collect_list(F.struct("__raw", "__first")).alias("__firsts"),
            F.first(N_SLABS).alias(N_SLABS),
            F.first(PROC_EVENTS).alias(PROC_EVENTS),
        )
    )
    return firsts.select(
        C.TRACE_ID,
        C.PIDX,
        F.transform(
            F.sequence(F.lit(1), F.col(N_SLABS) - 1),
            lambda s: F.coalesce(
                F.array_min(
                    F.transform(
                        F.filter("__firsts", lambda x: x["__raw"] >= s), lambda x: x["__first"]
                    )
                ),
                F.col(PROC_EVENTS) + 1,
            ).cast("long"),
        ).alias(BOUNDS),
    )


# beyond this many slab starts per process, `_slab_of` counts them with an interpreted
# array filter; up to it, with one compiled comparison per start
UNROLLED_BOUNDS = 64


def _slab_of(lseq: Column, bounds: Column, max_bounds: int | None = None) -> Column:
    """The slab of event `lseq`: how many slab starts are at or before it (0 when the unit is
    one slab). Given `max_bounds` (no process has more starts), the count is a sum of that
    many compiled comparisons: Spark interprets higher-order functions row by row, and the
    array filter cost 0.3 us a row (10^7 events and twice per link in each pass: about 10 s
    of CPU at 10^7 events), the sum 0.06 us."""
    if max_bounds is not None and max_bounds <= UNROLLED_BOUNDS:
        if max_bounds == 0:
            return F.lit(0)
        starts = [
            F.coalesce(F.get(bounds, i) <= lseq, F.lit(False)).cast("int")
            for i in range(max_bounds)
        ]
        return reduce(operator.add, starts).cast("int")
    return (
        F.when(F.size(bounds) == 0, F.lit(0))
        .otherwise(F.size(F.filter(bounds, lambda b: b <= lseq)))
        .cast("int")
    )


def _keyed_events(events: DataFrame, info: DataFrame, max_bounds: int | None = None) -> DataFrame:
    if RECORDED_VC in events.columns:
        events = events.withColumn(RECORDED_VC, carried())
    return (
        events.drop(C.LAMPORT, C.VC)
        .join(F.broadcast(info), [C.TRACE_ID, C.PIDX])
        .withColumn(SLAB, _slab_of(F.col(C.LSEQ), F.col(BOUNDS), max_bounds))
        .drop(BOUNDS, CLOCKS, ESTIMATE, REASON)
    )


def _delivered(messages: DataFrame, *extra: str) -> DataFrame:
    """Delivered messages as (trace_id, pidx, lseq of the receive, peer_pidx, peer_lseq of
    the send, `extra` columns)."""
    return messages.where(F.col(C.STATUS) == C.DELIVERED).select(
        C.TRACE_ID,
        F.col(C.DST_PIDX).alias(C.PIDX),
        F.col(C.RECV_LSEQ).alias(C.LSEQ),
        F.col(C.SRC_PIDX).alias(PEER_PIDX),
        F.col(C.SEND_LSEQ).alias(PEER_LSEQ),
        *extra,
    )


def _receive_links(
    messages: DataFrame, info: DataFrame, max_bounds: int | None = None
) -> DataFrame:
    """Every delivered message as a `recv` link of its receive's slab (with its send's slab)."""
    senders = info.select(
        C.TRACE_ID,
        F.col(C.PIDX).alias(PEER_PIDX),
        F.col(BOUNDS).alias("__send_bounds"),
    )
    return (
        _delivered(messages, C.MSG_ID)
        .join(F.broadcast(info), [C.TRACE_ID, C.PIDX])
        .join(F.broadcast(senders), [C.TRACE_ID, PEER_PIDX])
        .select(
            F.lit(LINK_RECV).alias(LINK),
            C.TRACE_ID,
            COMPONENT,
            _slab_of(F.col(C.LSEQ), F.col(BOUNDS), max_bounds).alias(SLAB),
            C.PIDX,
            C.LSEQ,
            PEER_PIDX,
            PEER_LSEQ,
            _slab_of(F.col(PEER_LSEQ), F.col("__send_bounds"), max_bounds).alias(PEER_SLAB),
            C.MSG_ID,
            N_SLABS,
            UNIT_EVENTS,
        )
    )


def _links_schema() -> T.StructType:
    return T.StructType(
        [
            T.StructField(LINK, T.StringType()),
            T.StructField(C.TRACE_ID, T.StringType()),
            T.StructField(COMPONENT, T.IntegerType()),
            T.StructField(SLAB, T.IntegerType()),
            T.StructField(C.PIDX, T.IntegerType()),
            T.StructField(C.LSEQ, T.LongType()),
            T.StructField(PEER_PIDX, T.IntegerType()),
            T.StructField(PEER_LSEQ, T.LongType()),
            T.StructField(PEER_SLAB, T.IntegerType()),
            T.StructField(C.MSG_ID, T.StringType()),
            T.StructField(SEED_VC, T.ArrayType(T.IntegerType())),
            T.StructField(SEED_LAMPORT, T.LongType()),
        ]
    )


def _with_link_columns(frame: DataFrame) -> DataFrame:
    """`frame` with every links column (missing ones null), in the links schema's order.

    A missing `seed_vc` is an empty array, not null: before each row it sends to Python,
    Spark measures the Arrow batch, and for a list column that back-fills the offsets of
    every null since the last non-null list. A batch of null lists costs rows^2 / 2
    (3.5 of the 8 s of the per-trace pass at 10^6 events x 64 processes).
    """
    schema = _links_schema()

    def column(field: T.StructField) -> Column:
        given = F.col(field.name) if field.name in frame.columns else F.lit(None)
        if isinstance(field.dataType, T.ArrayType):
            given = F.coalesce(given.cast(field.dataType), F.array().cast(field.dataType))
        return given.cast(field.dataType).alias(field.name)

    return frame.select(*[column(f) for f in schema.fields])


# ---------------------------------------------------------------------------------------------
# shared by both engines' grouped UDFs


def _events_output_schema() -> T.StructType:
    return tables.udf_schema(tables.EVENTS)


def _plain(table: pa.Table) -> pa.Table:
    """`table` with its dictionary columns decoded (what Spark's Arrow reader expects)."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(i, field.name, table.column(i).cast(field.type.value_type))
    return table


def _output(
    clocks: Callable[[pa.Table, pa.Table], pa.Table], writer: FileWriter | None
) -> tuple[Callable[[pa.Table, pa.Table], pa.Table], T.StructType]:
    """A cogrouped clocks function and its output schema: the events it returns, or, given a
    writer, the rows naming the file it wrote them to."""
    if writer is None:
        return (lambda events, links: _plain(clocks(events, links))), _events_output_schema()

    def write(events: pa.Table, links: pa.Table) -> pa.Table:
        return writer.write(clocks(events, links))

    return write, FILES_SCHEMA
