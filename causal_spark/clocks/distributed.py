"""The distributed clocks engine (n_slabs > 1), for a component too large for one task.

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
small when slabs are nearly consistent cuts (few messages cross them). A
component whose matched ids form a causal cycle gets null clocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark import tables
from causal_spark._arrow import int_column, list_matrix, lists, matrix
from causal_spark._spark import checkpoint
from causal_spark.clocks.components import COMPONENT
from causal_spark.clocks.kernel import (
    CausalCycleError,
    Seeds,
    export_clocks,
    group_clocks,
    group_layout,
)
from causal_spark.clocks.plan import (
    BOUNDS,
    CYCLE,
    GROUP,
    INVALID,
    IS_LAST,
    LINK,
    LINK_OUT,
    LINK_RECV,
    LINK_SEED,
    N_PROCS,
    N_SLABS,
    NEXT_SLAB,
    PEER_LSEQ,
    PEER_PIDX,
    PEER_SLAB,
    PROC_EVENTS,
    SEED_LAMPORT,
    SEED_VC,
    SLAB,
    UNIT,
    VC_ARROW,
    _events_output_schema,
    _keyed_events,
    _output,
    _receive_links,
    _slab_of,
    _with_link_columns,
)
from causal_spark.clocks.recorded import RECORDED_VC, restored
from causal_spark.sinks import FileWriter


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
    proc = int_column(events, C.PIDX)
    lseq = int_column(events, C.LSEQ)
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
    r_proc = int_column(receives, C.PIDX)
    r_lseq = int_column(receives, C.LSEQ)
    r_row = start[r_proc] + r_lseq - first_lseq[r_proc]
    if len(r_row) and (
        np.any(r_row < start[r_proc]) or np.any(r_row >= start[r_proc] + length[r_proc])
    ):
        raise ValueError("a receive link names an event that is not in its slab")
    inside = int_column(receives, PEER_SLAB) == slab
    send_proc[r_row[inside]] = int_column(receives, PEER_PIDX)[inside]
    send_lseq[r_row[inside]] = int_column(receives, PEER_LSEQ)[inside]
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
        at = int_column(slab.seeds, C.PIDX)
        seeds.init_vc[at] = matrix(slab.seeds.column(SEED_VC), slab.n)
        seeds.init_lamport[at] = int_column(slab.seeds, SEED_LAMPORT, 0)
    if len(slab.imports):
        if pc.any(pc.not_equal(pc.list_value_length(slab.imports.column(SEED_VC)), slab.n)).as_py():
            raise ValueError("an imported send has no resolved clocks")
        seeds.import_vc[:] = matrix(slab.imports.column(SEED_VC), slab.n)
        seeds.import_lamport[:] = int_column(slab.imports, SEED_LAMPORT, 0)
    return seeds


def _exact_slab_clocks(events: pa.Table, links: pa.Table) -> pa.Table:
    """Pass 3 / per-trace engine: one slab's events with exact clocks (null if INVALID)."""
    out_names = [f.name for f in _events_output_schema().fields]
    keep = [name for name in out_names if name not in (C.LAMPORT, C.VC)]
    if len(events) == 0:
        return pa.Table.from_pylist([], schema=tables.to_arrow(_events_output_schema()))
    slab = _slab_inputs(events, links)
    rows = len(slab.proc)
    body = slab.events.select(keep)
    if RECORDED_VC in body.column_names:
        at = body.column_names.index(RECORDED_VC)
        body = body.set_column(at, RECORDED_VC, restored(body.column(at)))
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
        C.VC, list_matrix(found.vc)
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
        return tables.to_arrow(_exports_schema()).empty_table()
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
    imp_proc = int_column(slab.imports, PEER_PIDX)
    imp_lseq = int_column(slab.imports, PEER_LSEQ)
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
        start[int_column(slab.outs, C.PIDX)]
        + int_column(slab.outs, C.LSEQ)
        - first_lseq[int_column(slab.outs, C.PIDX)]
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
            schema=tables.to_arrow(schema),
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
    proc_events = int_column(slab.events, PROC_EVENTS)
    row_lseq = slab.lseq[rows]
    row_proc = slab.proc[rows]
    is_last = np.isin(rows, last_rows) & (row_lseq < proc_events[rows])

    count = len(rows)
    return pa.table(
        {
            C.TRACE_ID: pa.array([trace] * count, pa.string()),
            COMPONENT: pa.array(np.full(count, component), pa.int32()),
            C.PIDX: pa.array(row_proc, pa.int32()),
            C.LSEQ: pa.array(row_lseq, pa.int64()),
            "vin": list_matrix(vin, pa.int32()),
            "vdep": list_matrix(vdep, pa.int64()),
            "local_lamport": pa.array(found.lamport, pa.int64()),
            "ldep_pidx": lists(entry_proc[reach_entries], offsets, pa.int32()),
            "ldep_lseq": lists(entry_lseq[reach_entries], offsets, pa.int64()),
            "ldep_dist": lists(dist[reach_rows, reach_entries], offsets, pa.int32()),
            IS_LAST: pa.array(is_last),
            CYCLE: pa.array(np.zeros(count, dtype=bool)),
        },
        schema=tables.to_arrow(schema),
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
    schema = tables.to_arrow(_resolved_schema())
    trace = exports.column(C.TRACE_ID)[0].as_py()
    component = exports.column(COMPONENT)[0].as_py()
    invalid = pa.Table.from_pylist(
        [{C.TRACE_ID: trace, COMPONENT: component, CYCLE: True}], schema=schema
    )
    if pc.any(exports.column(CYCLE)).as_py():
        return invalid
    order = pc.sort_indices(exports, [(C.PIDX, "ascending"), (C.LSEQ, "ascending")])
    exports = exports.take(order)
    proc = int_column(exports, C.PIDX)
    lseq = int_column(exports, C.LSEQ)
    span = int(lseq.max()) + 2
    key = proc * span + lseq
    if np.any(np.diff(key) == 0):
        keep = np.concatenate([[True], np.diff(key) != 0])
        exports = exports.filter(pa.array(keep))
        proc, lseq, key = proc[keep], lseq[keep], key[keep]
    vin = np.ascontiguousarray(matrix(exports.column("vin"), len(exports.column("vin")[0])))
    n = vin.shape[1]

    def node_of(dep_proc: np.ndarray, dep_lseq: np.ndarray) -> np.ndarray:
        wanted = dep_proc * span + dep_lseq
        at: np.ndarray = np.minimum(np.searchsorted(key, wanted), len(key) - 1)
        if len(wanted) and not np.array_equal(key[at], wanted):
            raise ValueError(f"trace {trace}: a slab depends on an event no slab exported")
        return at

    vdep = matrix(exports.column("vdep"), n, np.int64)
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
        int_column(exports, "local_lamport"),
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
            SEED_VC: list_matrix(vc.astype(np.int32), pa.int32()),
            SEED_LAMPORT: pa.array(lamport, pa.int64()),
            IS_LAST: exports.column(IS_LAST),
            CYCLE: pa.array(np.zeros(len(exports), dtype=bool)),
        },
        schema=schema,
    )


@dataclass(frozen=True)
class SplitUnits:
    """The distributed engine's passes over a plan's split units: passes 1 and 2 already run
    (`split_units`), pass 3 run per writer (`clock`)."""

    flagged: DataFrame  # the split units' events, keyed by slab, INVALID units flagged
    links: DataFrame  # pass 3's links: in-slab receives, imported sends, seeds

    def clock(self, writer: FileWriter | None) -> DataFrame:
        """Pass 3: the split units' events with exact clocks (lazy), or, given a writer, the
        rows naming the files its tasks wrote."""
        return _exact_pass(self.flagged, self.links, writer)


def split_units(
    events: DataFrame, messages: DataFrame, info: DataFrame, max_bounds: int
) -> SplitUnits:
    """Run passes 1 and 2 over the units of `info` (plan rows) that have several slabs.

    max_bounds: the most slab starts of any process (`_slab_of`). This runs Spark jobs
    now: pass 1 and 2 end in a checkpoint of the resolved export events.
    """
    split = F.col(N_SLABS) > 1
    keyed = _keyed_events(events, info, max_bounds)
    receives = _receive_links(messages, info, max_bounds)
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
    split_ids = info.where(split).select(*UNIT).distinct()
    symbolic_links = _with_link_columns(
        receives.join(F.broadcast(split_ids), UNIT).unionByName(outs, allowMissingColumns=True)
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
    return SplitUnits(flagged, links)


def _exact_pass(keyed: DataFrame, links: DataFrame, writer: FileWriter | None) -> DataFrame:
    return (
        keyed.groupBy(*GROUP)
        .cogroup(links.groupBy(*GROUP))
        .applyInArrow(*_output(_exact_slab_clocks, writer))
    )
