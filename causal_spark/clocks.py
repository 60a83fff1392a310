"""Clocks (DESIGN §2): Lamport and vector clocks of every event, at any scale.

The unit of work is a *component*: the processes of one trace that exchange
messages with one another (connected components of the trace's process graph,
`causal_spark.graphs`). Components are independent, so each is processed on
its own. Each component is cut into `n_slabs` slabs, each a band of every
process's stream: by time when every event has `ts` (slab s holds the events
from the s-th time step of the component on), else by equal shares of each
process's events. Slab borders only decide how much crosses them (cost),
never the result.

- **Per-trace engine** (n_slabs = 1): a grouped Arrow UDF runs the compiled
  kernel of `causal_spark.clock_kernel` over whole components (many per group)
  and builds the output from flat buffers. A component larger than
  `slab_events` is, when the rows are written by the tasks (`files`), clocked
  where its events are read (`_in_place_pass`: its links are staged once, and
  each task holding some of its events runs the kernel over the whole
  component and writes its own rows, with no shuffle of the events); without
  a writer it is cogrouped as up to `output_parts` equal lseq shares of every
  process, each with all the component's receive links. Either way the kernel
  is cheap next to converting and writing the vectors, which this spreads.
- **Distributed engine** (n_slabs > 1), for a component too large for one task:
  1. every slab runs the kernel *symbolically*, seeded with "the last event of
     p before the slab" and "the send of each message arriving from another
     slab" as unknowns; for its *export* events (each process's last event in
     the slab, and every send received in another slab) it records which
     unknowns reach them, with the in-slab part of their vector clock and the
     longest in-slab path from each unknown;
  2. one task per component resolves the export events in a topological order
     of that small graph (vc = max of the in-slab part and of the resolved
     unknowns; Lamport = max over unknowns of its Lamport + path length);
  3. every slab runs the kernel again, seeded with the resolved clocks.
  The number of Spark rounds is three, whatever the length of causal chains; the
  work is about twice the per-trace engine's plus the export graph, which is
  small when slabs are nearly consistent cuts (few messages cross them).

Choice: `auto` uses the per-trace engine for components up to
`per_trace_max_events` events and slabs of about `slab_events` events beyond;
`per_trace` and `distributed` force one engine (conf `clocks.engine`).

A component whose matched ids form a causal cycle gets null clocks;
`trace_clock_status` marks its trace INVALID with a witness cycle.
"""

from __future__ import annotations

import logging
import math
import operator
import os
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import reduce

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numba import njit
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.clock_kernel import (
    CausalCycleError,
    Seeds,
    export_clocks,
    group_clocks,
    group_layout,
    units_clocks_at,
)
from causal_spark.config import ClockSettings
from causal_spark.graphs import COMPONENT, checkpoint, connected_components
from causal_spark.sinks import FILES_SCHEMA, FileWriter

log = logging.getLogger(__name__)

VC_ARROW = pa.list_(pa.field("element", pa.int32()))

# helper columns (dropped before anything leaves this module)
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


@dataclass(frozen=True)
class ClockResult:
    """Events with clocks, and the units (components) they were computed in.

    events: the `events` columns with `lamport` and `vc` (null for a component
    with a causal cycle). files: the same rows written by the tasks that compute
    them, with the writer given (sinks.FileWriter); the DataFrame it returns names
    the files (sinks.FILES_SCHEMA), and the vectors never enter the JVM. With a
    writer that has a scratch folder, calling `files` already runs small jobs and
    stages the large components' links there (`_in_place_pass`): collect the
    DataFrame it returns before that folder is removed (`stage_through` does).
    plan: one row per (trace, process) with its
    component, N_p, the trace's n, the component's events and slabs (small,
    checkpointed).
    rounds: Spark rounds spent on components and on the clock passes.
    """

    events: DataFrame
    files: Callable[[FileWriter], DataFrame]
    plan: DataFrame
    component_rounds: int
    clock_passes: int


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


@dataclass(frozen=True)
class Plan:
    """units: one row per (trace, process), see `plan_units`. names: one row per (trace,
    pidx, process, source) found in the events, with source_code (int: the source's rank
    among its process's sources, from 0), so the per-trace engine can ship codes instead
    of strings. Both small and checkpointed."""

    units: DataFrame
    names: DataFrame
    component_rounds: int


def plan_units(events: DataFrame, messages: DataFrame, settings: ClockSettings) -> Plan:
    """One row per (trace, process): component, N_p, the trace's n, its component's slabs.

    Output units: trace_id, pidx, component, proc_events (long), n_processes (int),
    unit_events (long), n_slabs (int), bounds (array<long>: the first lseq of
    slabs 1..n_slabs-1 on this process); checkpointed (it is small). The first
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
    counts = checkpoint(counts)  # read twice: by the components and joined to them
    names = named.select(
        C.TRACE_ID,
        F.col(C.PIDX).cast("int").alias(C.PIDX),
        C.PROCESS,
        C.SOURCE,
        (
            F.dense_rank().over(Window.partitionBy(C.TRACE_ID, C.PIDX).orderBy(C.SOURCE)) - 1
        ).alias(SOURCE_CODE),
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
        .withColumn(
            "__timed",
            (F.sum("__ts_known").over(per_unit) == F.col(UNIT_EVENTS))
            & (F.max("__ts_max").over(per_unit) > F.min("__ts_min").over(per_unit)),
        )
        .withColumn(T_MIN, F.min("__ts_min").over(per_unit))
        .withColumn(T_MAX, F.max("__ts_max").over(per_unit))
    )
    info = checkpoint(info)
    bounds = _time_bounds(events, info)
    planned = info.join(F.broadcast(bounds), [C.TRACE_ID, C.PIDX], "left").select(
        C.TRACE_ID,
        F.col(C.PIDX).cast("int").alias(C.PIDX),
        COMPONENT,
        F.col(PROC_EVENTS).cast("long").alias(PROC_EVENTS),
        N_PROCS,
        F.col(UNIT_EVENTS).cast("long").alias(UNIT_EVENTS),
        N_SLABS,
        F.when(F.col(N_SLABS) == 1, F.array().cast("array<long>"))
        .when(F.col("__timed"), F.col(BOUNDS))
        .otherwise(_fraction_bounds())
        .alias(BOUNDS),
    )
    return Plan(checkpoint(planned), checkpoint(names), found.rounds)


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
    return (
        events.drop(C.LAMPORT, C.VC)
        .join(F.broadcast(info), [C.TRACE_ID, C.PIDX])
        .withColumn(SLAB, _slab_of(F.col(C.LSEQ), F.col(BOUNDS), max_bounds))
        .drop(BOUNDS)
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
# pass 3 (and the whole per-trace engine): exact clocks of one slab, given its seeds


def _events_output_schema() -> T.StructType:
    return tables.udf_schema(tables.EVENTS)


def _int_column(table: pa.Table, name: str, fill: int = -1) -> np.ndarray:
    column = table.column(name)
    if column.null_count:
        column = column.fill_null(fill)
    values: np.ndarray = column.to_numpy().astype(np.int64)
    return values


def _matrix(vectors: pa.ChunkedArray | pa.Array, n: int, dtype: type = np.int32) -> np.ndarray:
    """A list<int> column whose rows all have n entries -> a rows x n matrix."""
    if isinstance(vectors, pa.ChunkedArray):
        vectors = vectors.combine_chunks()
    if len(vectors) == 0:
        return np.zeros((0, n), dtype=dtype)
    flat: np.ndarray = pc.list_flatten(vectors).to_numpy(zero_copy_only=False).astype(dtype)
    return flat.reshape(len(vectors), n)


def _list_matrix(matrix: np.ndarray, kind: pa.DataType | None = None) -> pa.Array:
    """A rows x n matrix -> a list<element: kind> column (int32 by default), from one buffer."""
    kind = kind or pa.int32()
    rows, n = matrix.shape
    offsets = pa.array(np.arange(0, rows * n + 1, n, dtype=np.int32))
    return pa.ListArray.from_arrays(
        offsets, pa.array(matrix.reshape(-1), kind), type=pa.list_(pa.field("element", kind))
    )


def _arrow(schema: T.StructType) -> pa.Schema:
    return to_arrow_schema(schema, timezone="UTC")


@dataclass(frozen=True)
class _Slab:
    """A slab's events sorted by (pidx, lseq) and its links, as kernel inputs."""

    events: pa.Table
    n: int
    proc: np.ndarray
    lseq: np.ndarray
    start: np.ndarray  # first row of each process
    first_lseq: np.ndarray  # lseq of that row
    length: np.ndarray  # events of each process in the slab
    send_proc: np.ndarray
    send_lseq: np.ndarray
    import_of: np.ndarray
    imports: pa.Table  # the recv links whose send is in another slab, in import order
    seeds: pa.Table  # LINK_SEED rows
    outs: pa.Table  # LINK_OUT rows
    receive_msg: np.ndarray  # msg_id index per event row (-1 if not a receive) for witnesses
    msg_ids: pa.Array


def _slab_inputs(events: pa.Table, links: pa.Table) -> _Slab:
    order = pc.sort_indices(events, [(C.PIDX, "ascending"), (C.LSEQ, "ascending")])
    events = events.take(order)
    proc = _int_column(events, C.PIDX)
    lseq = _int_column(events, C.LSEQ)
    n = int(events.column(N_PROCS)[0].as_py())
    start, first_lseq = group_layout(proc, lseq, n)
    length = np.bincount(proc, minlength=n)
    kind = links.column(LINK)
    receives = links.filter(pc.equal(kind, LINK_RECV))
    slab = int(events.column(SLAB)[0].as_py())
    send_proc = np.full(len(proc), -1, dtype=np.int64)
    send_lseq = np.full(len(proc), -1, dtype=np.int64)
    import_of = np.full(len(proc), -1, dtype=np.int64)
    receive_msg = np.full(len(proc), -1, dtype=np.int64)
    r_proc = _int_column(receives, C.PIDX)
    r_lseq = _int_column(receives, C.LSEQ)
    r_row = start[r_proc] + r_lseq - first_lseq[r_proc]
    if len(r_row) and (
        np.any(r_row < start[r_proc]) or np.any(r_row >= start[r_proc] + length[r_proc])
    ):
        raise ValueError("a receive link names an event that is not in its slab")
    inside = _int_column(receives, PEER_SLAB) == slab
    send_proc[r_row[inside]] = _int_column(receives, PEER_PIDX)[inside]
    send_lseq[r_row[inside]] = _int_column(receives, PEER_LSEQ)[inside]
    crossing = np.flatnonzero(~inside)
    import_of[r_row[crossing]] = np.arange(len(crossing))
    receive_msg[r_row] = np.arange(len(r_row))
    return _Slab(
        events=events,
        n=n,
        proc=proc,
        lseq=lseq,
        start=start,
        first_lseq=first_lseq,
        length=length,
        send_proc=send_proc,
        send_lseq=send_lseq,
        import_of=import_of,
        imports=receives.take(pa.array(crossing, pa.int64())),
        seeds=links.filter(pc.equal(kind, LINK_SEED)),
        outs=links.filter(pc.equal(kind, LINK_OUT)),
        receive_msg=receive_msg,
        msg_ids=receives.column(C.MSG_ID).combine_chunks(),
    )


def _resolved_seeds(slab: _Slab) -> Seeds:
    seeds = Seeds.none(slab.n, len(slab.imports))
    if len(slab.seeds):
        at = _int_column(slab.seeds, C.PIDX)
        seeds.init_vc[at] = _matrix(slab.seeds.column(SEED_VC), slab.n)
        seeds.init_lamport[at] = _int_column(slab.seeds, SEED_LAMPORT, 0)
    if len(slab.imports):
        if pc.any(pc.not_equal(pc.list_value_length(slab.imports.column(SEED_VC)), slab.n)).as_py():
            raise ValueError("an imported send has no resolved clocks")
        seeds.import_vc[:] = _matrix(slab.imports.column(SEED_VC), slab.n)
        seeds.import_lamport[:] = _int_column(slab.imports, SEED_LAMPORT, 0)
    return seeds


def _exact_slab_clocks(events: pa.Table, links: pa.Table) -> pa.Table:
    """Pass 3 / per-trace engine: one slab's events with exact clocks (null if INVALID)."""
    out_names = [f.name for f in _events_output_schema().fields]
    keep = [name for name in out_names if name not in (C.LAMPORT, C.VC)]
    if len(events) == 0:
        return pa.Table.from_pylist([], schema=_arrow(_events_output_schema()))
    slab = _slab_inputs(events, links)
    rows = len(slab.proc)
    body = slab.events.select(keep)
    invalid = bool(pc.any(slab.events.column(INVALID)).as_py())
    if not invalid:
        try:
            found = group_clocks(
                slab.proc,
                slab.lseq,
                slab.send_proc,
                slab.send_lseq,
                slab.import_of,
                slab.n,
                _resolved_seeds(slab),
            )
        except CausalCycleError:
            invalid = True
    if invalid:
        return body.append_column(C.LAMPORT, pa.nulls(rows, pa.int64())).append_column(
            C.VC, pa.nulls(rows, VC_ARROW)
        )
    return body.append_column(C.LAMPORT, pa.array(found.lamport)).append_column(
        C.VC, _list_matrix(found.vc)
    )


_CHUNK_CELLS = 1 << 24  # vector entries per output chunk: int32 list offsets, modest batches


def _ragged_lists(values: np.ndarray, offsets: np.ndarray, valid: np.ndarray) -> pa.ChunkedArray:
    """Rows values[offsets[e]:offsets[e+1]] (null where not valid) as list<int32> chunks."""
    rows = len(offsets) - 1
    chunks: list[pa.Array] = []
    lo = 0
    while lo < rows or not chunks:
        hi = int(np.searchsorted(offsets, offsets[lo] + _CHUNK_CELLS, "right")) - 1
        hi = min(max(hi, lo + 1), rows)
        base = offsets[lo]
        chunks.append(
            pa.ListArray.from_arrays(
                pa.array((offsets[lo : hi + 1] - base).astype(np.int32)),
                # no type given: pyarrow wraps the int32 buffer (given one, it scans it)
                pa.array(values[base : offsets[hi]].astype(np.int32, copy=False)),
                type=VC_ARROW,
                mask=pa.array(~valid[lo:hi]),
            )
        )
        lo = hi
    return pa.chunked_array(chunks, VC_ARROW)


def _codes_in(codes: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per value of `wanted`, its index in the sorted `codes`, and whether it is there."""
    at = np.searchsorted(codes, wanted)
    found = at < len(codes)
    found[found] = codes[at[found]] == wanted[found]
    return at, found


def _dictionary(indices: np.ndarray, values: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    """values[indices] as a dictionary array of the distinct non-null values (a row whose
    value is null is a null row, so `null_count` sees it)."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    distinct = pc.unique(values).drop_null()  # Parquet cannot write a null dictionary value
    remap = pc.fill_null(pc.index_in(values, value_set=distinct), -1).to_numpy()
    codes = remap[indices]
    null = codes < 0
    return pa.DictionaryArray.from_arrays(
        pa.array(np.maximum(codes, 0).astype(np.int32), mask=null if null.any() else None),
        distinct,
    )


def _plain(table: pa.Table) -> pa.Table:
    """`table` with its dictionary columns decoded (what Spark's Arrow reader expects)."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(i, field.name, table.column(i).cast(field.type.value_type))
    return table


def _batch_clocks(events: pa.Table, links: pa.Table) -> pa.Table:
    """Per-trace engine: exact clocks of the events of a batch of units (whole components).

    `events` are some events of each unit (`_narrow_events`' rows: unit number,
    pidx, lseq, kind and source codes, the other body columns). `links` holds *all*
    the receive links of those units (a unit split into output parts sends them to
    every part) and their name rows (n_processes set): one per (unit, process,
    source), with the trace, process and source strings and the process's event
    count. The kernel runs over every row of each unit with events here, unit after
    unit in one compiled call (a small trace costs microseconds, not a Python group
    of its own); the given events are returned in the order they came (the kernel
    writes each row's clocks where it belongs), with `trace_id`, `process`, `kind`
    and `source` as dictionary columns. A unit with a causal cycle gets null clocks.
    """
    if len(events) == 0:
        return _arrow(_events_output_schema()).empty_table()
    is_name = pc.is_valid(links.column(N_PROCS))
    names, links = links.filter(is_name), links.filter(pc.invert(is_name))
    # units: those with events here (a part may get no event of a small unit)
    codes = np.unique(_int_column(names, UNIT_CODE))
    row_unit, found = _codes_in(codes, _int_column(events, UNIT_CODE))
    if not found.all():
        raise ValueError("an event's unit has no name rows in its group")
    present = np.zeros(len(codes), dtype=bool)
    present[row_unit] = True
    row_unit = (np.cumsum(present) - 1)[row_unit]
    codes = codes[present]
    units = len(codes)
    name_unit, found = _codes_in(codes, _int_column(names, UNIT_CODE))
    names, name_unit = names.filter(pa.array(found)), name_unit[found]
    name_pidx = _int_column(names, C.PIDX)
    name_source = _int_column(names, SOURCE_CODE)
    order = np.lexsort((name_source, name_pidx, name_unit))
    names, name_unit = names.take(pa.array(order)), name_unit[order]
    name_pidx, name_source = name_pidx[order], name_source[order]
    name_n = _int_column(names, N_PROCS)
    unit_n = np.zeros(units, dtype=np.int64)
    unit_n[name_unit] = name_n
    if np.any(unit_n[name_unit] != name_n):
        raise ValueError("the name rows of a unit disagree on its number of processes")
    if np.any(name_pidx < 0) or np.any(name_pidx >= name_n):
        raise ValueError("a name row's pidx is outside its trace's 0..n-1")
    unit_proc = np.zeros(units + 1, dtype=np.int64)
    np.cumsum(unit_n, out=unit_proc[1:])
    name_proc = unit_proc[name_unit] + name_pidx
    first = np.r_[True, name_proc[1:] != name_proc[:-1]]
    first_name = np.full(int(unit_proc[-1]), -1, dtype=np.int64)
    first_name[name_proc[first]] = np.flatnonzero(first)
    given = names.column(C.PROCESS)
    first_given = given.take(first_name[name_proc])
    same = pc.fill_null(
        pc.equal(given, first_given), pc.and_(pc.is_null(given), pc.is_null(first_given))
    )
    if not pc.all(same).as_py():
        at = int(np.flatnonzero(~same.to_numpy(zero_copy_only=False))[0])
        raise ValueError(
            f"trace {names.column(C.TRACE_ID)[at]}: process index {name_pidx[at]} has two "
            f"process names, {names.column(C.PROCESS)[int(first_name[name_proc[at]])]} and "
            f"{names.column(C.PROCESS)[at]}"
        )
    if np.any(name_source != np.arange(len(names)) - first_name[name_proc]):
        raise ValueError("the source codes of a process are not 0, 1, ... in its name rows")
    sources = np.bincount(name_proc, minlength=len(first_name))
    length = np.zeros(len(first_name), dtype=np.int64)
    length[name_proc] = _int_column(names, PROC_EVENTS)
    # events
    pidx = _int_column(events, C.PIDX)
    if np.any(pidx < 0) or np.any(pidx >= unit_n[row_unit]):
        raise ValueError("an event's pidx is outside its trace's 0..n-1")
    proc = unit_proc[row_unit] + pidx
    lseq = _int_column(events, C.LSEQ)
    if np.any(lseq < 1) or np.any(lseq > length[proc]):
        raise ValueError("an event's lseq is outside 1..its process's event count")
    source = _int_column(events, SOURCE_CODE)
    if np.any(source < 0) or np.any(source >= sources[proc]):
        raise ValueError("an event's source code has no name row")
    # links of units with no event here are unused
    link_unit, used = _codes_in(codes, _int_column(links, UNIT_CODE))
    links, link_unit = links.filter(pa.array(used)), link_unit[used]
    link_n = unit_n[link_unit]
    ends = []
    for pidx_name, lseq_name in ((C.PIDX, C.LSEQ), (PEER_PIDX, PEER_LSEQ)):
        at_pidx, at_lseq = _int_column(links, pidx_name), _int_column(links, lseq_name)
        if np.any(at_pidx < 0) or np.any(at_pidx >= link_n):
            raise ValueError("a receive link's pidx is outside its trace's 0..n-1")
        at_proc = unit_proc[link_unit] + at_pidx
        if np.any(at_lseq < 1) or np.any(at_lseq > length[at_proc]):
            raise ValueError("a receive link names an event outside its process's 1..count")
        ends.append((at_proc, at_lseq))
    (recv_proc, recv_lseq), (send_proc, send_lseq) = ends
    start = np.zeros(len(length), dtype=np.int64)
    np.cumsum(length[:-1], out=start[1:])
    rows = start[proc] + lseq - 1
    # stable: events mostly arrive in (process, lseq) runs, which timsort merges cheaply
    out_pos = np.argsort(rows, kind="stable")
    out_rows = rows[out_pos]
    if len(out_rows) > 1 and np.any(np.diff(out_rows) == 0):
        raise ValueError("two events of a batch have the same (trace, component, pidx, lseq)")
    send_event = np.full(int(length.sum()), -1, dtype=np.int64)
    send_event[start[recv_proc] + recv_lseq - 1] = start[send_proc] + send_lseq - 1
    clocks = units_clocks_at(
        np.append(start[unit_proc[:-1]], len(send_event)),
        unit_proc,
        length,
        send_event,
        out_rows,
        out_pos,
    )
    valid = clocks.ok[row_unit]
    kind = _int_column(events, KIND_CODE)
    if np.any(kind < 0) or np.any(kind >= len(KINDS)):
        raise ValueError("an event's kind code is not an index of KINDS")
    unit_first = np.flatnonzero(np.r_[True, name_unit[1:] != name_unit[:-1]])
    built = {
        C.TRACE_ID: _dictionary(row_unit, names.column(C.TRACE_ID).take(pa.array(unit_first))),
        C.PROCESS: _dictionary(first_name[proc], names.column(C.PROCESS)),
        C.KIND: _dictionary(kind, pa.array(KINDS)),
        C.SOURCE: _dictionary(first_name[proc] + source, names.column(C.SOURCE)),
        C.LAMPORT: pa.array(clocks.lamport, pa.int64(), mask=~valid),
        C.VC: _ragged_lists(clocks.vc, clocks.offsets, valid),
    }
    schema = _arrow(_events_output_schema())
    return pa.table(
        [built[f.name] if f.name in built else events.column(f.name) for f in schema],
        names=schema.names,
    )


# ---------------------------------------------------------------------------------------------
# pass 1: symbolic clocks of a slab's export events


def _exports_schema() -> T.StructType:
    return T.StructType(
        [
            T.StructField(C.TRACE_ID, T.StringType()),
            T.StructField(COMPONENT, T.IntegerType()),
            T.StructField(C.PIDX, T.IntegerType()),
            T.StructField(C.LSEQ, T.LongType()),
            T.StructField("vin", T.ArrayType(T.IntegerType())),
            T.StructField("vdep", T.ArrayType(T.LongType())),
            T.StructField("local_lamport", T.LongType()),
            T.StructField("ldep_pidx", T.ArrayType(T.IntegerType())),
            T.StructField("ldep_lseq", T.ArrayType(T.LongType())),
            T.StructField("ldep_dist", T.ArrayType(T.IntegerType())),
            T.StructField(IS_LAST, T.BooleanType()),
            T.StructField(CYCLE, T.BooleanType()),
        ]
    )


def _symbolic_slab(events: pa.Table, links: pa.Table) -> pa.Table:
    """Pass 1: for each export event, its in-slab vc, the unknowns it depends on, path lengths."""
    if len(events) == 0:
        return _arrow(_exports_schema()).empty_table()
    slab = _slab_inputs(events, links)
    n = slab.n
    trace = slab.events.column(C.TRACE_ID)[0].as_py()
    component = slab.events.column(COMPONENT)[0].as_py()
    start, first_lseq, length = slab.start, slab.first_lseq, slab.length
    present = length > 0
    # unknowns: each present process's last event before the slab, then each imported send
    frontier_procs = np.flatnonzero(present & (first_lseq > 1))
    entry_first = np.full(n, -1, dtype=np.int64)
    entry_first[frontier_procs] = np.arange(len(frontier_procs))
    imp_proc = _int_column(slab.imports, PEER_PIDX)
    imp_lseq = _int_column(slab.imports, PEER_LSEQ)
    keys = np.stack([imp_proc, imp_lseq], axis=1) if len(imp_proc) else np.zeros((0, 2), np.int64)
    distinct, import_key = np.unique(keys, axis=0, return_inverse=True)
    import_key = import_key.reshape(-1)
    entry_proc = np.concatenate([frontier_procs, distinct[:, 0]]).astype(np.int64)
    entry_lseq = np.concatenate([first_lseq[frontier_procs] - 1, distinct[:, 1]]).astype(np.int64)
    seeds = Seeds.none(n, len(imp_proc))
    seeds = Seeds(
        init_vc=seeds.init_vc,
        init_lamport=seeds.init_lamport,
        import_vc=seeds.import_vc,
        import_lamport=seeds.import_lamport,
        entry_first=entry_first,
        import_entry=(len(frontier_procs) + import_key).astype(np.int64),
        n_entries=len(entry_proc),
    )
    seeds.init_vc[frontier_procs, frontier_procs] = first_lseq[frontier_procs] - 1
    if len(imp_proc):
        seeds.import_vc[np.arange(len(imp_proc)), imp_proc] = imp_lseq
    schema = _exports_schema()
    # export rows: each present process's last event, and every send received elsewhere
    last_rows = (start + length - 1)[present]
    out_rows = (
        start[_int_column(slab.outs, C.PIDX)]
        + _int_column(slab.outs, C.LSEQ)
        - first_lseq[_int_column(slab.outs, C.PIDX)]
    )
    rows = np.unique(np.concatenate([last_rows, out_rows]).astype(np.int64))
    try:
        # only the export rows: the slab's dense (events x entries) matrix would not fit
        found = export_clocks(
            slab.proc, slab.lseq, slab.send_proc, slab.send_lseq, slab.import_of, n, seeds, rows
        )
    except CausalCycleError:
        return pa.Table.from_pylist(
            [{C.TRACE_ID: trace, COMPONENT: component, CYCLE: True}],
            schema=_arrow(schema),
        )
    g = found.vc.astype(np.int64)
    # an import can carry a later event of q than the slab holds: only [first, last] is in-slab
    last_lseq = first_lseq + length - 1
    inslab = present[None, :] & (g >= first_lseq[None, :]) & (g <= last_lseq[None, :])
    vin = np.where(inslab, g, 0).astype(np.int32)
    frontier_of = np.where(present & (first_lseq > 1), first_lseq - 1, 0)
    vdep = np.where(inslab, frontier_of[None, :], np.where(g > 0, g, 0)).astype(np.int64)
    dist = found.dist
    reach_rows, reach_entries = np.nonzero(dist > 0)
    counts = np.bincount(reach_rows, minlength=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    proc_events = _int_column(slab.events, PROC_EVENTS)
    row_lseq = slab.lseq[rows]
    row_proc = slab.proc[rows]
    is_last = np.isin(rows, last_rows) & (row_lseq < proc_events[rows])

    def lists(values: np.ndarray, kind: pa.DataType) -> pa.Array:
        return pa.ListArray.from_arrays(
            pa.array(offsets), pa.array(values, kind), type=pa.list_(pa.field("element", kind))
        )

    count = len(rows)
    return pa.table(
        {
            C.TRACE_ID: pa.array([trace] * count, pa.string()),
            COMPONENT: pa.array(np.full(count, component), pa.int32()),
            C.PIDX: pa.array(row_proc, pa.int32()),
            C.LSEQ: pa.array(row_lseq, pa.int64()),
            "vin": _list_matrix(vin, pa.int32()),
            "vdep": _list_matrix(vdep, pa.int64()),
            "local_lamport": pa.array(found.lamport, pa.int64()),
            "ldep_pidx": lists(entry_proc[reach_entries], pa.int32()),
            "ldep_lseq": lists(entry_lseq[reach_entries], pa.int64()),
            "ldep_dist": lists(dist[reach_rows, reach_entries], pa.int32()),
            IS_LAST: pa.array(is_last),
            CYCLE: pa.array(np.zeros(count, dtype=bool)),
        },
        schema=_arrow(schema),
    )


# ---------------------------------------------------------------------------------------------
# pass 2: resolve the export graph of one component


@njit(cache=True)
def _resolve(
    vin: np.ndarray,
    vdep_node: np.ndarray,
    local_lamport: np.ndarray,
    dep_ptr: np.ndarray,
    dep_node: np.ndarray,
    dep_dist: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, bool]:
    nodes, n = vin.shape
    indegree = np.zeros(nodes, dtype=np.int64)
    for x in range(nodes):
        indegree[x] = dep_ptr[x + 1] - dep_ptr[x]
    # reverse adjacency (dep -> dependants) in CSR
    out_count = np.zeros(nodes + 1, dtype=np.int64)
    for i in range(dep_node.shape[0]):
        out_count[dep_node[i] + 1] += 1
    for x in range(nodes):
        out_count[x + 1] += out_count[x]
    fill = out_count[:-1].copy()
    dependants = np.empty(dep_node.shape[0], dtype=np.int64)
    for x in range(nodes):
        for i in range(dep_ptr[x], dep_ptr[x + 1]):
            d = dep_node[i]
            dependants[fill[d]] = x
            fill[d] += 1
    vc = vin.copy()
    lamport = local_lamport.copy()
    queue = np.empty(nodes, dtype=np.int64)
    head = 0
    tail = 0
    for x in range(nodes):
        if indegree[x] == 0:
            queue[tail] = x
            tail += 1
    while head < tail:
        x = queue[head]
        head += 1
        for q in range(n):
            d = vdep_node[x, q]
            if d >= 0:
                for j in range(n):
                    if vc[d, j] > vc[x, j]:
                        vc[x, j] = vc[d, j]
        for i in range(dep_ptr[x], dep_ptr[x + 1]):
            candidate = lamport[dep_node[i]] + dep_dist[i]
            if candidate > lamport[x]:
                lamport[x] = candidate
        for i in range(out_count[x], out_count[x + 1]):
            y = dependants[i]
            indegree[y] -= 1
            if indegree[y] == 0:
                queue[tail] = y
                tail += 1
    return vc, lamport, tail == nodes


def _resolved_schema() -> T.StructType:
    return T.StructType(
        [
            T.StructField(C.TRACE_ID, T.StringType()),
            T.StructField(COMPONENT, T.IntegerType()),
            T.StructField(C.PIDX, T.IntegerType()),
            T.StructField(C.LSEQ, T.LongType()),
            T.StructField(SEED_VC, T.ArrayType(T.IntegerType())),
            T.StructField(SEED_LAMPORT, T.LongType()),
            T.StructField(IS_LAST, T.BooleanType()),
            T.StructField(CYCLE, T.BooleanType()),
        ]
    )


def _resolve_component(exports: pa.Table) -> pa.Table:
    """Pass 2: exact clocks of every export event of one component."""
    schema = _arrow(_resolved_schema())
    trace = exports.column(C.TRACE_ID)[0].as_py()
    component = exports.column(COMPONENT)[0].as_py()
    invalid = pa.Table.from_pylist(
        [{C.TRACE_ID: trace, COMPONENT: component, CYCLE: True}], schema=schema
    )
    if pc.any(exports.column(CYCLE)).as_py():
        return invalid
    order = pc.sort_indices(exports, [(C.PIDX, "ascending"), (C.LSEQ, "ascending")])
    exports = exports.take(order)
    proc = _int_column(exports, C.PIDX)
    lseq = _int_column(exports, C.LSEQ)
    span = int(lseq.max()) + 2
    key = proc * span + lseq
    if np.any(np.diff(key) == 0):
        keep = np.concatenate([[True], np.diff(key) != 0])
        exports = exports.filter(pa.array(keep))
        proc, lseq, key = proc[keep], lseq[keep], key[keep]
    vin = np.ascontiguousarray(_matrix(exports.column("vin"), len(exports.column("vin")[0])))
    n = vin.shape[1]

    def node_of(dep_proc: np.ndarray, dep_lseq: np.ndarray) -> np.ndarray:
        wanted = dep_proc * span + dep_lseq
        at: np.ndarray = np.minimum(np.searchsorted(key, wanted), len(key) - 1)
        if len(wanted) and not np.array_equal(key[at], wanted):
            raise ValueError(f"trace {trace}: a slab depends on an event no slab exported")
        return at

    vdep = _matrix(exports.column("vdep"), n, np.int64)
    vdep_node = np.full(vdep.shape, -1, dtype=np.int64)
    wanted = np.nonzero(vdep > 0)
    vdep_node[wanted] = node_of(wanted[1].astype(np.int64), vdep[wanted])
    dep_lists = exports.column("ldep_pidx").combine_chunks()
    dep_ptr = dep_lists.offsets.to_numpy().astype(np.int64)
    dep_ptr = dep_ptr - dep_ptr[0]
    dep_proc = pc.list_flatten(dep_lists).to_numpy().astype(np.int64)
    dep_lseq = pc.list_flatten(exports.column("ldep_lseq").combine_chunks()).to_numpy()
    dep_dist = pc.list_flatten(exports.column("ldep_dist").combine_chunks()).to_numpy()
    dep_node = node_of(dep_proc, dep_lseq.astype(np.int64))
    vc, lamport, complete = _resolve(
        vin,
        vdep_node,
        _int_column(exports, "local_lamport"),
        dep_ptr,
        dep_node.astype(np.int64),
        dep_dist.astype(np.int64),
    )
    if not complete:
        return invalid
    return pa.table(
        {
            C.TRACE_ID: exports.column(C.TRACE_ID),
            COMPONENT: exports.column(COMPONENT),
            C.PIDX: exports.column(C.PIDX),
            C.LSEQ: exports.column(C.LSEQ),
            SEED_VC: _list_matrix(vc.astype(np.int32), pa.int32()),
            SEED_LAMPORT: pa.array(lamport, pa.int64()),
            IS_LAST: exports.column(IS_LAST),
            CYCLE: pa.array(np.zeros(len(exports), dtype=bool)),
        },
        schema=schema,
    )


# ---------------------------------------------------------------------------------------------
# the engine


def with_clocks(
    events: DataFrame, messages: DataFrame, settings: ClockSettings | None = None
) -> ClockResult:
    """`events` with `lamport` and `vc` (DESIGN §2) computed by the engine `settings` choose.

    Requires the `events` and `messages` tables (columns as in schemas/).
    Output events: the `events` columns; a component whose matched ids form
    a causal cycle gets null `lamport` and `vc` (see `trace_clock_status`).
    """
    settings = settings or ClockSettings()
    plan = plan_units(events, messages, settings)
    info, component_rounds = plan.units, plan.component_rounds
    split = F.col(N_SLABS) > 1
    shape = info.agg(
        F.max(N_SLABS).alias(N_SLABS),
        F.max(F.size(BOUNDS)).alias(BOUNDS),
        F.sum(F.when(~split, F.col(PROC_EVENTS))).alias("whole_events"),
        F.count_distinct(F.when(~split, F.struct(*UNIT))).alias("whole_units"),
    ).first()
    assert shape is not None  # an aggregate without grouping has one row
    max_bounds = max(0, shape[BOUNDS] or 0)
    keyed = _keyed_events(events, info, max_bounds)
    receives = _receive_links(messages, info, max_bounds)
    batches = _n_batches(
        events.sparkSession, settings, shape["whole_events"] or 0, shape["whole_units"]
    )

    # built once (its small checkpoints and key probe are Spark jobs), run per writer
    placed = _place_units(
        info.where(~split), plan.names, batches, settings.slab_events, settings.output_parts
    )
    every_events, every_links = _cogroup_inputs(placed, events, messages)
    small_events, small_links = _cogroup_inputs(placed, events, messages, ~F.col(IN_PLACE))

    def whole(writer: FileWriter | None) -> DataFrame:
        if writer is None or not writer.scratch:
            return _batch_pass(every_events, every_links, writer)
        # output parts per kind of whole unit (a small job on the checkpointed placement)
        parts = {
            row[IN_PLACE]: row[PARTS]
            for row in placed.procs.select(C.TRACE_ID, COMPONENT, IN_PLACE, PARTS)
            .distinct()
            .groupBy(IN_PLACE)
            .agg(F.sum(PARTS).alias(PARTS))
            .collect()
        }
        if True not in parts:
            return _batch_pass(every_events, every_links, writer)
        # with a writer, the large units are clocked where their events are read
        written = _in_place_pass(placed, events, messages, writer, parts[True])
        if False in parts:
            written = _batch_pass(small_events, small_links, writer).unionByName(written)
        return written

    if (shape[N_SLABS] or 1) == 1:
        return ClockResult(whole(None), whole, info, component_rounds, 1)

    slab_events = keyed.where(split).select(*GROUP, C.PIDX, C.LSEQ, PROC_EVENTS, N_SLABS, N_PROCS)
    crossing = receives.where(F.col(PEER_SLAB) != F.col(SLAB))
    outs = crossing.select(
        F.lit(LINK_OUT).alias(LINK),
        C.TRACE_ID,
        COMPONENT,
        F.col(PEER_SLAB).alias(SLAB),
        F.col(PEER_PIDX).alias(C.PIDX),
        F.col(PEER_LSEQ).alias(C.LSEQ),
    )
    split_units = info.where(split).select(*UNIT).distinct()
    symbolic_links = _with_link_columns(
        receives.join(F.broadcast(split_units), UNIT).unionByName(outs, allowMissingColumns=True)
    )
    exports = (
        slab_events.groupBy(*GROUP)
        .cogroup(symbolic_links.groupBy(*GROUP))
        .applyInArrow(_symbolic_slab, _exports_schema())
    )
    resolved = checkpoint(
        exports.groupBy(*UNIT).applyInArrow(_resolve_component, _resolved_schema())
    )
    bad_units = resolved.where(F.col(CYCLE)).select(*UNIT).distinct()
    good = resolved.where(~F.col(CYCLE))
    imported = crossing.join(
        good.select(
            C.TRACE_ID,
            COMPONENT,
            F.col(C.PIDX).alias(PEER_PIDX),
            F.col(C.LSEQ).alias(PEER_LSEQ),
            SEED_VC,
            SEED_LAMPORT,
        ),
        [C.TRACE_ID, COMPONENT, PEER_PIDX, PEER_LSEQ],
        "left",
    )
    # the last event of p in a slab seeds p's next slab: the slab of the event after it
    seeds = (
        good.where(F.col(IS_LAST))
        .join(F.broadcast(info.select(C.TRACE_ID, C.PIDX, BOUNDS)), [C.TRACE_ID, C.PIDX])
        .withColumn(NEXT_SLAB, _slab_of(F.col(C.LSEQ) + 1, F.col(BOUNDS), max_bounds))
    ).select(
        F.lit(LINK_SEED).alias(LINK),
        C.TRACE_ID,
        COMPONENT,
        F.col(NEXT_SLAB).alias(SLAB),
        C.PIDX,
        C.LSEQ,
        SEED_VC,
        SEED_LAMPORT,
    )
    links = _with_link_columns(
        receives.where(split & (F.col(PEER_SLAB) == F.col(SLAB)))
        .unionByName(imported, allowMissingColumns=True)
        .unionByName(seeds, allowMissingColumns=True)
    )
    flagged = (
        keyed.where(split)
        .join(F.broadcast(bad_units.withColumn(INVALID, F.lit(True))), UNIT, "left")
        .withColumn(INVALID, F.coalesce(F.col(INVALID), F.lit(False)))
    )

    def clocked(writer: FileWriter | None) -> DataFrame:
        return _exact_pass(flagged, links, writer).unionByName(whole(writer))

    return ClockResult(clocked(None), clocked, info, component_rounds, 3)


def _n_batches(spark: SparkSession, settings: ClockSettings, events: int, units: int) -> int:
    """Groups for the whole (unsplit) units: about `slab_events` events each, and at least
    one per shuffle partition (while there are units) so every core gets some."""
    wanted = max(1, math.ceil(events / settings.slab_events))
    return max(wanted, min(_shuffle_partitions(spark), units))


def _output_parts(part_events: int, max_parts: int) -> Column:
    """Output parts of a whole unit: one per `part_events` events, at most `max_parts`."""
    wanted = F.ceil(F.col(UNIT_EVENTS) / F.lit(part_events))
    return F.least(F.greatest(F.lit(1), wanted), F.lit(max(1, max_parts))).cast("int")


def _shuffle_partitions(spark: SparkSession) -> int:
    partitions = spark.conf.get("spark.sql.shuffle.partitions") or "1"
    return int(partitions) if partitions.isdigit() else 1


def _group_keys(spark: SparkSession, batches: int, parts: int) -> list[int]:
    """Grouping keys of the groups (batch b, part k), at index b * parts + k.

    Spark places a group in the shuffle partition its key hashes to, so two parts of one
    large unit would share a partition (and a core) as often as hashes collide. The key of
    group (b, k) is instead a distinct int that Spark's own hash partitioning sends to
    partition (b + k) mod partitions: the parts of a unit, and the first `partitions`
    batches, get different partitions. Found by hashing a range of ints with Spark's
    `hash` (the function its hash partitioning uses), a few hundred rows.
    """
    partitions = _shuffle_partitions(spark)
    wanted = [(b + k) % partitions for b in range(batches) for k in range(parts)]
    need = Counter(wanted)
    found: dict[int, list[int]] = defaultdict(list)
    low, span = 0, max(64, 4 * len(wanted))
    while any(len(found[p]) < count for p, count in need.items()):
        key = F.col("id").cast("int")
        probe = spark.range(low, low + span).select(
            key.alias("key"), F.pmod(F.hash(key), F.lit(partitions)).alias("partition")
        )
        for row in probe.collect():
            found[row["partition"]].append(row["key"])
        low, span = low + span, span * 2
    taken: Counter[int] = Counter()
    keys = []
    for p in wanted:
        keys.append(found[p][taken[p]])
        taken[p] += 1
    return keys


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


def _batch_pass(
    unit_events: DataFrame, links: DataFrame, writer: FileWriter | None = None
) -> DataFrame:
    """Per-trace engine: `_cogroup_inputs`' groups through `_batch_clocks` (and the writer)."""
    return (
        unit_events.groupBy(GROUP_KEY)
        .cogroup(links.groupBy(GROUP_KEY))
        .applyInArrow(*_output(_batch_clocks, writer))
    )


@dataclass(frozen=True)
class _Placed:
    """The per-trace engine's whole units, placed (`_place_units`).

    procs: one row per (trace, pidx) with its unit's batch, output parts, number in the
    batch (UNIT_CODE) and IN_PLACE; named: the same with the name rows' columns, one row
    per (trace, pidx, source). Both small and checkpointed. keys: the group keys of
    (batch, part), `_group_keys`.
    """

    procs: DataFrame
    named: DataFrame
    keys: list[int]
    max_parts: int


def _place_units(
    units: DataFrame, names: DataFrame, batches: int, part_events: int, max_parts: int
) -> _Placed:
    """Batches, output parts and in-place flags of the whole units of `units` (plan rows).

    A unit goes to batch hash(trace, component) mod `batches`. A unit larger than
    `part_events` is IN_PLACE: with a writer, its events are clocked where they are read
    (`_in_place_pass`); without one, its output is split into parts (`_cogroup_inputs`).
    """
    spark = units.sparkSession
    max_parts = max(1, max_parts)
    per_batch = Window.partitionBy(BATCH).orderBy(C.TRACE_ID, COMPONENT)
    procs = checkpoint(
        units.select(
            C.TRACE_ID,
            C.PIDX,
            COMPONENT,
            N_PROCS,
            PROC_EVENTS,
            F.pmod(F.xxhash64(C.TRACE_ID, COMPONENT), F.lit(batches)).cast("int").alias(BATCH),
            _output_parts(part_events, max_parts).alias(PARTS),
            (F.col(UNIT_EVENTS) > F.lit(part_events)).alias(IN_PLACE),
        ).withColumn(UNIT_CODE, (F.dense_rank().over(per_batch) - 1).cast("int"))
    )
    named = checkpoint(procs.join(names, [C.TRACE_ID, C.PIDX]))
    return _Placed(procs, named, _group_keys(spark, batches, max_parts), max_parts)


def _narrow_events(events: DataFrame, named: DataFrame, key: Column) -> DataFrame:
    """The events of `named`'s units as narrow rows, `key` first (see `_cogroup_inputs`).

    `key` may use BATCH, PARTS and PROC_EVENTS of the event's process. The join is a
    broadcast of `named`, so the events keep the partitioning they were read with.
    """
    lookup = named.select(
        F.col(C.TRACE_ID).alias("__trace"),
        F.col(C.PIDX).alias("__pidx"),
        F.col(C.SOURCE).alias("__source"),
        BATCH,
        PARTS,
        UNIT_CODE,
        PROC_EVENTS,
        SOURCE_CODE,
    )
    found = (
        (F.col(C.TRACE_ID) == F.col("__trace"))
        & (F.col(C.PIDX) == F.col("__pidx"))
        & F.col(C.SOURCE).eqNullSafe(F.col("__source"))
    )
    # the events and the name rows both take `unit` from `named`: Spark rejects a cogroup
    # whose two sides share one attribute of a checkpointed plan (an ambiguous self-join),
    # so each side gets it under a new alias
    return events.join(F.broadcast(lookup), found).select(
        key,
        F.col(UNIT_CODE).alias(UNIT_CODE),
        F.col(C.PIDX).cast("int").alias(C.PIDX),
        C.LSEQ,
        _kind_code(F.col(C.KIND)).alias(KIND_CODE),
        C.TS,
        C.LABEL,
        C.N_MSGS,
        C.SEQ,
        C.LINE,
        SOURCE_CODE,
    )


def _cogroup_inputs(
    placed: _Placed, events: DataFrame, messages: DataFrame, where: Column | None = None
) -> tuple[DataFrame, DataFrame]:
    """Per-trace engine's groups: the placed units (those `where` keeps), many per group,
    as (events, links) keyed by GROUP_KEY.

    A unit larger than `part_events` has its output split into parts (equal lseq shares
    of every process): each part's group gets its share of the events and all the
    unit's links, runs the kernel over the whole unit and returns its share, so one
    large trace converts and writes its vectors on several cores instead of one.

    The rows shipped to the groups are narrow: an event carries its unit's number in
    the batch, `kind` as a code and `source` as its code among its process's sources,
    not `trace_id`, `process`, `kind` and `source` as strings; the links side carries
    one *name row* per (unit, process, source) with those strings, the process's event
    count and the unit's n. Strings were most of what the shuffle and Spark's conversion
    of rows to Arrow cost (half the conversion time at 10^7 x 64); the task writes them
    back as Parquet dictionary columns.
    """
    procs, named = placed.procs, placed.named
    if where is not None:
        procs, named = procs.where(where), named.where(where)
    max_parts, parts = placed.max_parts, F.col(PARTS)

    def group(part: Column) -> Column:
        index = F.col(BATCH) * max_parts + part + 1
        return F.element_at(F.array(*[F.lit(k) for k in placed.keys]), index).alias(GROUP_KEY)

    # clamped: an lseq outside 1..N_p still reaches its own unit's group, whose task
    # rejects it (another part's key could hold another unit with the same number)
    share = F.least(
        F.greatest(F.floor((F.col(C.LSEQ) - 1) * parts / F.col(PROC_EVENTS)), F.lit(0)),
        parts - 1,
    ).cast("int")
    unit_events = _narrow_events(events, named, group(share))
    every_part = F.explode(F.sequence(F.lit(0), parts - 1))
    receives = (
        _delivered(messages)
        .join(
            F.broadcast(procs.select(C.TRACE_ID, C.PIDX, BATCH, PARTS, UNIT_CODE)),
            [C.TRACE_ID, C.PIDX],
        )
        .withColumn(PART, every_part)
        .select(group(F.col(PART)), UNIT_CODE, C.PIDX, C.LSEQ, PEER_PIDX, PEER_LSEQ)
    )
    name_rows = named.withColumn(PART, every_part).select(group(F.col(PART)), *_name_columns())
    return unit_events, receives.unionByName(name_rows, allowMissingColumns=True)


def _name_columns() -> list[Column | str]:
    """A name row's columns after its key (the links side of `_batch_clocks`)."""
    return [
        F.col(UNIT_CODE).alias(UNIT_CODE),
        C.PIDX,
        C.TRACE_ID,
        N_PROCS,
        PROC_EVENTS,
        C.PROCESS,
        C.SOURCE,
        SOURCE_CODE,
    ]


def _in_place_pass(
    placed: _Placed, events: DataFrame, messages: DataFrame, writer: FileWriter, tasks: int
) -> DataFrame:
    """Per-trace engine for the IN_PLACE units: their events are clocked and written by
    the tasks that read them, with no shuffle; the DataFrame names the files.

    A large unit's events are the bulk of the job, and the kernel needs none of them,
    only each process's event count and the receive links: events are needed only to be
    written back with their clocks. So the links and name rows of these units are
    written once, by batch, under the writer's scratch folder (this runs a Spark job
    now), and the narrow events go, as they were read (a broadcast join gives their
    units), to `tasks` tasks or the default parallelism if more (`coalesce`: merges
    input splits, no shuffle; the scan of `events` runs in those tasks, filtered on the
    units' traces so Parquet statistics can skip other row groups). Each task reads
    the links of the batches its rows belong to and runs `_batch_clocks` on its rows:
    the kernel over each whole unit, keeping the rows it holds (the rolling kernel when
    they are a part of a large unit).

    A task holding rows of several units runs the kernel of each: one kernel traversal
    per (task, unit) pair. That is cheap when the events table is clustered by trace,
    as ingest writes it (a trace's rows are in few input splits), and is why small
    units take the cogroup path. Two rows with one (trace, pidx, lseq) are found within
    a task only; ingest numbers lseq, so the events table has none.
    """
    if not writer.scratch:
        raise ValueError("the in-place clocks pass needs a writer with a scratch folder")
    procs = placed.procs.where(F.col(IN_PLACE))
    named = placed.named.where(F.col(IN_PLACE))
    folder = os.path.join(writer.scratch, f"clock-links-{uuid.uuid4().hex}")
    receives = _delivered(messages).join(
        F.broadcast(procs.select(C.TRACE_ID, C.PIDX, BATCH, UNIT_CODE)), [C.TRACE_ID, C.PIDX]
    )
    _stage_by_batch(
        receives.select(BATCH, UNIT_CODE, C.PIDX, C.LSEQ, PEER_PIDX, PEER_LSEQ).unionByName(
            named.select(BATCH, *_name_columns()), allowMissingColumns=True
        ),
        folder,
    )

    def clock(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch, mine in _by_batch(batches):
            links = pq.read_table(os.path.join(folder, f"{BATCH}={batch}"))
            yield from writer.write(_batch_clocks(mine, links)).to_batches()

    traces = [r[C.TRACE_ID] for r in procs.select(C.TRACE_ID).distinct().limit(10_001).collect()]
    if len(traces) <= 10_000:  # large units: few traces (a pushed-down filter)
        events = events.where(F.col(C.TRACE_ID).isin(traces))
    parallelism = events.sparkSession.sparkContext.defaultParallelism
    narrow = _narrow_events(events, named, F.col(BATCH)).coalesce(max(1, tasks, parallelism))
    return narrow.mapInArrow(clock, FILES_SCHEMA)


def _stage_by_batch(rows: DataFrame, folder: str) -> None:
    """Write `rows` (BATCH first) as Parquet files under folder/batch=<BATCH>/ (runs a job).

    The tasks write with pyarrow, one file per (input partition, batch) with a name of
    its own, so a retried or speculative attempt replaces its file rather than adding
    duplicate links. (Spark's partitioned writer was tried first; right after it the
    in-place stage's JVM side ran up to 2x slower in 3 of 5 repeats of a scratch A/B,
    2026-11-23, before `spark.sql.execution.arrow.maxBytesPerBatch` was set.)
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        if context is None:  # every writer would then name its file part-00000
            raise RuntimeError("staging the in-place links must run in a Spark task")
        for batch, part in _by_batch(batches):
            where = os.path.join(folder, f"{BATCH}={batch}")
            os.makedirs(where, exist_ok=True)
            # written under a name pyarrow's readers skip (a leading "."), then renamed
            name = f"part-{context.partitionId():05d}.parquet"
            temporary = os.path.join(where, f".{name}.{uuid.uuid4().hex}")
            pq.write_table(part, temporary)
            os.replace(temporary, os.path.join(where, name))
            yield pa.RecordBatch.from_pydict({"rows": [part.num_rows]}, schema=_ROWS)

    rows.mapInArrow(write, "rows long").collect()


_ROWS = pa.schema([("rows", pa.int64())])


def _by_batch(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.Table]]:
    """A task's rows (BATCH first) as (batch, its rows without BATCH), batch by batch."""
    read = list(batches)
    if not read:
        return
    rows = pa.Table.from_batches(read)
    batch_of = rows.column(BATCH).to_numpy()
    rows = rows.drop_columns([BATCH])
    for batch in np.unique(batch_of):
        wanted = batch_of == batch
        yield int(batch), rows if wanted.all() else rows.filter(pa.array(wanted))


def _kind_code(kind: Column) -> Column:
    """The index of `kind` in KINDS; any other kind fails the job, naming it."""
    code = F.when(kind == KINDS[0], F.lit(0))
    for index, name in enumerate(KINDS[1:], start=1):
        code = code.when(kind == name, F.lit(index))
    bad = F.format_string("events.kind must be one of %s, not '%s'", F.lit(", ".join(KINDS)), kind)
    return code.otherwise(F.raise_error(bad)).cast("byte")


def _exact_pass(keyed: DataFrame, links: DataFrame, writer: FileWriter | None) -> DataFrame:
    return (
        keyed.groupBy(*GROUP)
        .cogroup(links.groupBy(*GROUP))
        .applyInArrow(*_output(_exact_slab_clocks, writer))
    )


# ---------------------------------------------------------------------------------------------
# trace status: INVALID traces and their witness cycles

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
