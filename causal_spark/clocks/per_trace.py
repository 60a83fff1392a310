"""The per-trace clocks engine: whole components, many per grouped Arrow UDF call.

A grouped Arrow UDF runs the compiled kernel of `causal_spark.clocks.units_kernel`
over whole components (units, many per group) and builds the output from flat
buffers. A component larger than `slab_events` is, when the rows are written by
the tasks (a writer), clocked where its events are read (`_in_place_pass`: its
links are staged once, and each task holding some of its events runs the
kernel over the whole component and writes its own rows, with no shuffle of
the events); without a writer it is cogrouped as up to `output_parts` equal
lseq shares of every process, each with all the component's receive links.
Either way the kernel is cheap next to converting and writing the vectors,
which this spreads. A unit with a causal cycle gets null clocks.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark import tables
from causal_spark._arrow import int_column
from causal_spark._spark import checkpoint, partition_keys, shuffle_partitions
from causal_spark.clocks.components import COMPONENT
from causal_spark.clocks.plan import (
    BATCH,
    CLOCKS,
    GROUP_KEY,
    IN_PLACE,
    KIND_CODE,
    KINDS,
    N_PROCS,
    N_SLABS,
    PART,
    PARTS,
    PEER_LSEQ,
    PEER_PIDX,
    PROC_EVENTS,
    SOURCE_CODE,
    UNIT_CODE,
    UNIT_EVENTS,
    VC_ARROW,
    Plan,
    _delivered,
    _events_output_schema,
    _output,
)
from causal_spark.clocks.recorded import RECORDED_VC, carried, restored
from causal_spark.clocks.scratch import read_staged, rows_by_key, stage_by_key
from causal_spark.clocks.size import LAMPORT_ONLY, VECTORS
from causal_spark.clocks.units_kernel import units_clocks_at
from causal_spark.config import ClockSettings
from causal_spark.sinks import FILES_SCHEMA, FileWriter

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


def _batch_clocks(events: pa.Table, links: pa.Table) -> pa.Table:
    """Per-trace engine: exact clocks of the events of a batch of units (whole components).

    `events` are some events of each unit (`_narrow_events`' rows: unit number,
    pidx, lseq, kind and source codes, the other body columns). `links` holds *all*
    the receive links of those units (a unit split into output parts sends them to
    every part) and their name rows (n_processes set): one per (unit, process,
    source), with the trace, process and source strings, the process's event count
    and the unit's `clocks` (`size.VECTORS`; without vectors, Lamport only or none,
    the other clocks null). The kernel runs over every row of each unit with events
    here, unit after unit in one compiled call (a small trace costs microseconds, not a
    Python group of its own); the given events are returned in the order they came (the
    kernel writes each row's clocks where it belongs), with `trace_id`, `process`, `kind`
    and `source` as dictionary columns. A unit with a causal cycle gets null clocks.
    """
    if len(events) == 0:
        return tables.to_arrow(_events_output_schema()).empty_table()
    is_name = pc.is_valid(links.column(N_PROCS))
    names, links = links.filter(is_name), links.filter(pc.invert(is_name))
    # units: those with events here (a part may get no event of a small unit)
    codes = np.unique(int_column(names, UNIT_CODE))
    row_unit, found = _codes_in(codes, int_column(events, UNIT_CODE))
    if not found.all():
        raise ValueError("an event's unit has no name rows in its group")
    present = np.zeros(len(codes), dtype=bool)
    present[row_unit] = True
    row_unit = (np.cumsum(present) - 1)[row_unit]
    codes = codes[present]
    units = len(codes)
    name_unit, found = _codes_in(codes, int_column(names, UNIT_CODE))
    names, name_unit = names.filter(pa.array(found)), name_unit[found]
    name_pidx = int_column(names, C.PIDX)
    name_source = int_column(names, SOURCE_CODE)
    order = np.lexsort((name_source, name_pidx, name_unit))
    names, name_unit = names.take(pa.array(order)), name_unit[order]
    name_pidx, name_source = name_pidx[order], name_source[order]
    name_n = int_column(names, N_PROCS)
    unit_n = np.zeros(units, dtype=np.int64)
    unit_n[name_unit] = name_n
    if np.any(unit_n[name_unit] != name_n):
        raise ValueError("the name rows of a unit disagree on its number of processes")
    name_clocks = (  # no column: every unit gets vectors
        int_column(names, CLOCKS, VECTORS)
        if CLOCKS in names.column_names
        else np.full(len(names), VECTORS, dtype=np.int64)
    )
    unit_clocks = np.zeros(units, dtype=np.int64)
    unit_clocks[name_unit] = name_clocks
    if np.any(unit_clocks[name_unit] != name_clocks):
        raise ValueError("the name rows of a unit disagree on the clocks it gets")
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
    length[name_proc] = int_column(names, PROC_EVENTS)
    # events
    pidx = int_column(events, C.PIDX)
    if np.any(pidx < 0) or np.any(pidx >= unit_n[row_unit]):
        raise ValueError("an event's pidx is outside its trace's 0..n-1")
    proc = unit_proc[row_unit] + pidx
    lseq = int_column(events, C.LSEQ)
    if np.any(lseq < 1) or np.any(lseq > length[proc]):
        raise ValueError("an event's lseq is outside 1..its process's event count")
    source = int_column(events, SOURCE_CODE)
    if np.any(source < 0) or np.any(source >= sources[proc]):
        raise ValueError("an event's source code has no name row")
    # links of units with no event here are unused
    link_unit, used = _codes_in(codes, int_column(links, UNIT_CODE))
    links, link_unit = links.filter(pa.array(used)), link_unit[used]
    link_n = unit_n[link_unit]
    ends = []
    for pidx_name, lseq_name in ((C.PIDX, C.LSEQ), (PEER_PIDX, PEER_LSEQ)):
        at_pidx, at_lseq = int_column(links, pidx_name), int_column(links, lseq_name)
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
        vectors=unit_clocks == VECTORS,
    )
    # a unit with a causal cycle has no clocks; one too wide has no vectors (`size`)
    valid = clocks.ok[row_unit] & (unit_clocks[row_unit] >= LAMPORT_ONLY)
    with_vectors = valid & (unit_clocks[row_unit] == VECTORS)
    kind = int_column(events, KIND_CODE)
    if np.any(kind < 0) or np.any(kind >= len(KINDS)):
        raise ValueError("an event's kind code is not an index of KINDS")
    unit_first = np.flatnonzero(np.r_[True, name_unit[1:] != name_unit[:-1]])
    built = {
        C.TRACE_ID: _dictionary(row_unit, names.column(C.TRACE_ID).take(pa.array(unit_first))),
        C.PROCESS: _dictionary(first_name[proc], names.column(C.PROCESS)),
        C.KIND: _dictionary(kind, pa.array(KINDS)),
        C.SOURCE: _dictionary(first_name[proc] + source, names.column(C.SOURCE)),
        C.LAMPORT: pa.array(clocks.lamport, pa.int64(), mask=~valid),
        C.VC: _ragged_lists(clocks.vc, clocks.offsets, with_vectors),
    }
    schema = tables.to_arrow(_events_output_schema())
    # events that never carried a recorded clock (a table from before the column) have none
    built[RECORDED_VC] = (
        restored(events.column(RECORDED_VC))
        if RECORDED_VC in events.column_names
        else pa.nulls(events.num_rows, schema.field(RECORDED_VC).type)
    )
    return pa.table(
        [built[f.name] if f.name in built else events.column(f.name) for f in schema],
        names=schema.names,
    )


def _n_batches(spark: SparkSession, settings: ClockSettings, events: int, units: int) -> int:
    """Groups for the whole (unsplit) units: about `slab_events` events each, and at least
    one per shuffle partition (while there are units) so every core gets some."""
    wanted = max(1, math.ceil(events / settings.slab_events))
    return max(wanted, min(shuffle_partitions(spark), units))


def _output_parts(part_events: int, max_parts: int) -> Column:
    """Output parts of a whole unit: one per `part_events` events, at most `max_parts`."""
    wanted = F.ceil(F.col(UNIT_EVENTS) / F.lit(part_events))
    return F.least(F.greatest(F.lit(1), wanted), F.lit(max(1, max_parts))).cast("int")


def _group_keys(spark: SparkSession, batches: int, parts: int) -> list[int]:
    """Grouping keys of the groups (batch b, part k), at index b * parts + k.

    Spark places a group in the shuffle partition its key hashes to, so two parts of one
    large unit would share a partition (and a core) as often as hashes collide. The key of
    group (b, k) is instead a distinct int that Spark's own hash partitioning sends to
    partition (b + k) mod partitions (`_spark.partition_keys`): the parts of a unit, and the
    first `partitions` batches, get different partitions. Found once per process for each
    (partitions, batches, parts) (`_GROUP_KEYS`).
    """
    partitions = shuffle_partitions(spark)
    shape = (partitions, batches, parts)
    if shape not in _GROUP_KEYS:
        _GROUP_KEYS[shape] = partition_keys(
            spark, [(b + k) % partitions for b in range(batches) for k in range(parts)]
        )
    return list(_GROUP_KEYS[shape])


# `_group_keys` by (shuffle partitions, batches, parts): the keys depend on nothing else
# (Spark's `hash` of an int is the same in every session), and finding them is a Spark job
_GROUP_KEYS: dict[tuple[int, int, int], list[int]] = {}


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
            CLOCKS,
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
        *([carried()] if RECORDED_VC in events.columns else []),
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
        CLOCKS,
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
    stage_by_key(
        receives.select(BATCH, UNIT_CODE, C.PIDX, C.LSEQ, PEER_PIDX, PEER_LSEQ).unionByName(
            named.select(BATCH, *_name_columns()), allowMissingColumns=True
        ),
        folder,
        BATCH,
    )

    def clock(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch, mine in rows_by_key(batches, BATCH):
            links = read_staged(folder, BATCH, batch)
            yield from writer.write(_batch_clocks(mine, links)).to_batches()

    traces = [r[C.TRACE_ID] for r in procs.select(C.TRACE_ID).distinct().limit(10_001).collect()]
    if len(traces) <= 10_000:  # large units: few traces (a pushed-down filter)
        events = events.where(F.col(C.TRACE_ID).isin(traces))
    parallelism = events.sparkSession.sparkContext.defaultParallelism
    narrow = _narrow_events(events, named, F.col(BATCH)).coalesce(max(1, tasks, parallelism))
    return narrow.mapInArrow(clock, FILES_SCHEMA)


def _kind_code(kind: Column) -> Column:
    """The index of `kind` in KINDS; any other kind fails the job, naming it."""
    code = F.when(kind == KINDS[0], F.lit(0))
    for index, name in enumerate(KINDS[1:], start=1):
        code = code.when(kind == name, F.lit(index))
    bad = F.format_string("events.kind must be one of %s, not '%s'", F.lit(", ".join(KINDS)), kind)
    return code.otherwise(F.raise_error(bad)).cast("byte")


@dataclass(frozen=True)
class WholeUnits:
    """The per-trace engine over a plan's whole (one-slab) units, built once (`whole_units`)
    and run per writer (`clock`)."""

    placed: _Placed
    events: DataFrame
    messages: DataFrame
    every: tuple[DataFrame, DataFrame]  # `_cogroup_inputs` of every whole unit
    small: tuple[DataFrame, DataFrame]  # ... of those not clocked in place (with a writer)

    def clock(self, writer: FileWriter | None) -> DataFrame:
        """The whole units' events with clocks (no writer: lazy), or, given a writer, the
        rows naming the files its tasks wrote. With a writer that has a scratch folder this
        runs Spark jobs now: a small one on the placement and, when some units are large,
        the staging of their links (`_in_place_pass`)."""
        if writer is None or not writer.scratch:
            return _batch_pass(*self.every, writer)
        # output parts per kind of whole unit (a small job on the checkpointed placement)
        parts = {
            row[IN_PLACE]: row[PARTS]
            for row in self.placed.procs.select(C.TRACE_ID, COMPONENT, IN_PLACE, PARTS)
            .distinct()
            .groupBy(IN_PLACE)
            .agg(F.sum(PARTS).alias(PARTS))
            .collect()
        }
        if True not in parts:
            return _batch_pass(*self.every, writer)
        # with a writer, the large units are clocked where their events are read
        written = _in_place_pass(self.placed, self.events, self.messages, writer, parts[True])
        if False in parts:
            written = _batch_pass(*self.small, writer).unionByName(written)
        return written


def whole_units(
    events: DataFrame,
    messages: DataFrame,
    plan: Plan,
    settings: ClockSettings,
    whole_events: int,
    whole_count: int,
) -> WholeUnits:
    """Place the whole units of `plan` (those of one slab) in batches and output parts.

    whole_events, whole_count: their events and their number (from the plan). This runs
    Spark jobs now: the placement's small checkpoints and the group-key probe.
    """
    batches = _n_batches(events.sparkSession, settings, whole_events, whole_count)
    placed = _place_units(
        plan.units.where(~(F.col(N_SLABS) > 1)),
        plan.names,
        batches,
        settings.slab_events,
        settings.output_parts,
    )
    return WholeUnits(
        placed,
        events,
        messages,
        _cogroup_inputs(placed, events, messages),
        _cogroup_inputs(placed, events, messages, ~F.col(IN_PLACE)),
    )
