"""The single-process pipeline `bench/audit.py` times beside the audit, and the table checks.

Each stage reads the job's committed input tables with delta-rs (as the stage does)
and writes its own tables under a folder of its own, in one Python process, no Spark:

- ingest: `bench/ingest_baseline.py`'s `ingest_single` (pyarrow and NumPy, the job's
  rules), when that module is present;
- clocks: `bench/clocks.py`'s `baseline_single_process` (a compiled Kahn sort and sweep
  per trace, delta-rs in and out);
- detect: the job's own grouped-UDF bodies (`overtaken_at_destination`,
  `chains_of_trace`, `crowns_of_trace`: the compiled kernels and their Arrow adapters)
  called group by group, and `trace_summary` by Arrow aggregates;
- replay: the job's own per-(trace, protocol) function (`replay._replay_group`: the
  size guard, layout, compiled loop, figures, verification and output rows) over
  program rows joined with Arrow;
- compare: medians and p99s (NumPy, linear interpolation as Spark's `percentile`)
  over the job's `protocol_runs`.

`COVERS` says which columns each baseline computes: those are the columns
`compare_table` checks against the job's tables (sorted rows; per-column digests
above `DIRECT_ROWS` rows, so that one table is in memory at a time).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.anomalies.crowns import MEMBERS, crowns_of_trace
from causal_spark.anomalies.inputs import _MESSAGE_ENDS
from causal_spark.anomalies.summary import ASYNC, CO, FIFO_CLASS, INVALID, NO_EVENT, RSC
from causal_spark.anomalies.violations import (
    CAUSAL,
    FIFO,
    KNOWS_DST,
    chains_of_trace,
    overtaken_at_destination,
)
from causal_spark.clocks.status import CLOCK_STATUS_INVALID, CLOCK_STATUS_OK
from causal_spark.config import Config
from causal_spark.replay import NOT_COMPUTED
from causal_spark.replay.adapter import _ARROW_ROWS, PEER, PEER_LSEQ, RUN, VALID, _replay_group
from causal_spark.replay.model import KIND_CODES, PROTOCOL

# ------------------------------------------------------------------------------ what is checked

ALL = "*"
# stage -> table -> the columns its baseline computes (ALL: every column of the schema)
# trace_summary's columns about native logs (how a trace was read, recorded clocks, skew):
# the generated row-format traces of this benchmark have none to compute
NATIVE_SUMMARY = ("messages_inferred", "span_process", "n_clock_mismatches", "n_skewed_messages")
COVERS: dict[str, dict[str, list[str] | str]] = {
    "ingest": {
        tables.EVENTS: [
            f.name for f in tables.arrow_schema(tables.EVENTS) if f.name not in (C.LAMPORT, C.VC)
        ],
        tables.MESSAGES: ALL,
        tables.QUARANTINE: ALL,
    },
    "clocks": {tables.EVENTS: [C.TRACE_ID, C.PIDX, C.LSEQ, C.LAMPORT, C.VC]},
    "detect": {
        tables.VIOLATIONS: ALL,
        tables.CROWNS: ALL,
        tables.CROWN_MEMBERS: ALL,
        tables.TRACE_SUMMARY: [
            f.name
            for f in tables.arrow_schema(tables.TRACE_SUMMARY)
            if f.name not in ("run_id", *NATIVE_SUMMARY)
        ],
    },
    "replay": {tables.PROTOCOL_RUNS: ALL, tables.DELIVERIES: ALL},
    "compare": {tables.PROTOCOL_COMPARISON: ALL},
}
COVERAGE_TEXT = {
    "ingest": "events (every column but lamport and vc), messages and quarantine, every row: "
    "bench/ingest_baseline.py (pyarrow + NumPy, the job's rules)",
    "clocks": "events.lamport and events.vc of every event (not trace_clocks, whose engine "
    "and slab columns describe the job's plan): bench/clocks.py's single process (compiled "
    "Kahn sort and sweep per trace, delta-rs in and out)",
    "detect": "violations with witness chains, crowns, crown_members, trace_summary (all "
    "but run_id and the four native-log columns, NATIVE_SUMMARY), every row: the job's grouped-UDF bodies (compiled kernels) group by "
    "group in one process, Arrow aggregates for the summary",
    "replay": "protocol_runs and deliveries, every row and column: the job's "
    "per-(trace, protocol) function (size guard, layout, compiled loop, figures, "
    "verification) in one process, program rows joined with Arrow",
    "compare": "protocol_comparison, every row: NumPy medians and p99s over the job's "
    "protocol_runs",
}
# sort keys (unique) of each table; the other plain columns follow them as tie-breakers
KEYS: dict[str, list[str]] = {
    tables.EVENTS: [C.TRACE_ID, C.PIDX, C.LSEQ],
    tables.MESSAGES: [C.TRACE_ID, C.MSG_ID],
    tables.QUARANTINE: [C.SOURCE, C.LINE],
    tables.VIOLATIONS: [C.TRACE_ID, C.KIND, "overtaken_msg"],
    tables.CROWNS: [C.TRACE_ID, "scc_id"],
    tables.CROWN_MEMBERS: [C.TRACE_ID, "scc_id", C.MSG_ID],
    tables.TRACE_SUMMARY: [C.TRACE_ID],
    tables.PROTOCOL_RUNS: [C.TRACE_ID, PROTOCOL, "receive_mode"],
    tables.DELIVERIES: [C.TRACE_ID, PROTOCOL, "receive_mode", C.MSG_ID],
    tables.PROTOCOL_COMPARISON: [PROTOCOL, "receive_mode", "metric"],
}
# compared one protocol at a time (millions of rows per protocol at 10^7 events)
SPLIT_BY = {tables.DELIVERIES: PROTOCOL}
DIRECT_ROWS = 3_000_000  # above: per-column digests, one table in memory at a time
FLOAT_RTOL = 1e-9  # direct comparison only: Spark's percentile and NumPy's may differ in ulps


class TableMismatch(Exception):
    """A baseline's table differs from the job's."""


# ------------------------------------------------------------------------------ reading


def read_delta(
    path: Path,
    columns: Sequence[str] | None = None,
    filters: list[tuple[str, str, Any]] | None = None,
) -> pa.Table:
    """A Delta table with delta-rs (a local filesystem given, as tests/conftest.py does).

    With `filters`, the snapshot's files are read by pyarrow's dataset instead: delta-rs
    1.6 prunes every file on a filter over a column its `stats` do not name when they name
    another (the warehouse's files carry trace_id ranges only), and returns no row."""
    table = DeltaTable(str(path))
    cols = list(columns) if columns else None
    if filters:
        expression = None
        for name, op, value in filters:
            if op not in ("=", "=="):
                raise ValueError(f"filter {name} {op} {value}: only equality")
            term = pc.field(name) == value
            expression = term if expression is None else expression & term
        files = ds.dataset(table.file_uris(), format="parquet")
        return files.to_table(columns=cols, filter=expression)
    local = pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem())
    return table.to_pyarrow_table(columns=cols, filesystem=local)


def read_any(path: Path, columns: Sequence[str] | None = None,
             filters: list[tuple[str, str, Any]] | None = None) -> pa.Table:  # fmt: skip
    """A table written as Delta (a folder with _delta_log), a Parquet folder or `path.parquet`."""
    if (path / "_delta_log").is_dir():
        return read_delta(path, columns, filters)
    target = path if path.exists() else path.with_suffix(".parquet")
    return pq.read_table(target, columns=list(columns) if columns else None, filters=filters)


def _write(path: Path, table: pa.Table) -> None:
    write_deltalake(str(path), table, mode="overwrite")


# ------------------------------------------------------------------------------ grouping


def _bounds(table: pa.Table, keys: Sequence[str]) -> list[int]:
    """Row offsets where the (sorted) key columns change, with 0 and num_rows."""
    n = table.num_rows
    if n == 0:
        return [0]
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for key in keys:
        col = table.column(key).combine_chunks()
        differs = pc.not_equal(col.slice(1), col.slice(0, n - 1))
        change[1:] |= differs.fill_null(True).to_numpy(zero_copy_only=False)
    return [*np.flatnonzero(change).tolist(), n]


def groups(table: pa.Table, keys: Sequence[str]) -> Iterator[tuple[tuple[Any, ...], pa.Table]]:
    """(key values, rows) of each group of `table` by `keys`, in key order (zero-copy slices)."""
    ordered = table.sort_by([(k, "ascending") for k in keys])
    cuts = _bounds(ordered, keys)
    for lo, hi in itertools.pairwise(cuts):
        yield tuple(ordered.column(k)[lo].as_py() for k in keys), ordered.slice(lo, hi - lo)


# ------------------------------------------------------------------------------ detect


def _with_send_knowledge(delivered: pa.Table, events: pa.Table) -> pa.Table:
    """`send_knows_dst` as `violations._with_send_knowledge`: vc(send)[dst] for the messages
    into a process that receives a self-message, null elsewhere."""
    src, dst = delivered.column(C.SRC_PIDX), delivered.column(C.DST_PIDX)
    selfs = delivered.filter(pc.equal(src, dst)).select([C.TRACE_ID, C.DST_PIDX])
    if selfs.num_rows == 0:
        return delivered.append_column(KNOWS_DST, pa.nulls(delivered.num_rows, pa.int64()))
    marked = delivered.append_column("__row", pa.array(np.arange(delivered.num_rows)))
    needing = marked.join(selfs.group_by([C.TRACE_ID, C.DST_PIDX]).aggregate([]),
                          [C.TRACE_ID, C.DST_PIDX], join_type="left semi")  # fmt: skip
    sends = pa.table({
        C.TRACE_ID: events.column(C.TRACE_ID),
        C.SRC_PIDX: events.column(C.PIDX).cast(pa.int64()),
        C.SEND_LSEQ: events.column(C.LSEQ),
        "__event": pa.array(np.arange(events.num_rows)),
    })  # fmt: skip
    found = needing.select([C.TRACE_ID, C.SRC_PIDX, C.SEND_LSEQ, C.DST_PIDX, "__row"]).join(
        sends, [C.TRACE_ID, C.SRC_PIDX, C.SEND_LSEQ]
    )
    vc = events.column(C.VC).combine_chunks()
    starts = vc.offsets.to_numpy()[found.column("__event").to_numpy()] - vc.offsets[0].as_py()
    flat = vc.flatten().to_numpy(zero_copy_only=False)
    knows = np.full(delivered.num_rows, -1, dtype=np.int64)
    knows[found.column("__row").to_numpy()] = flat[starts + found.column(C.DST_PIDX).to_numpy()]
    return delivered.append_column(KNOWS_DST, pa.array(knows, mask=knows < 0))


def detect_single(warehouse: Path, out: Path, config: Config) -> dict[str, int]:
    """violations, crowns, crown_members and trace_summary of the job's clocked tables."""
    events = read_delta(warehouse / tables.EVENTS, [C.TRACE_ID, C.PIDX, C.LSEQ, C.KIND, C.VC])
    messages = read_delta(warehouse / tables.MESSAGES)
    trace_clocks = read_delta(
        warehouse / tables.TRACE_CLOCKS, [C.TRACE_ID, "n_processes", "n_events", C.STATUS]
    )
    quarantine = read_delta(warehouse / tables.QUARANTINE, [C.TRACE_ID])
    ok = trace_clocks.filter(pc.equal(trace_clocks.column(C.STATUS), CLOCK_STATUS_OK))
    delivered = messages.filter(
        pc.and_(pc.equal(messages.column(C.STATUS), C.DELIVERED),
                pc.is_in(messages.column(C.TRACE_ID), value_set=ok.column(C.TRACE_ID)))
    )  # fmt: skip
    delivered = delivered.select(list(_MESSAGE_ENDS)).cast(
        pa.schema([
            f.with_type(pa.int64()) if f.name in (C.SRC_PIDX, C.DST_PIDX) else f
            for f in delivered.select(list(_MESSAGE_ENDS)).schema
        ])
    )  # fmt: skip
    receives = events.filter(
        pc.and_(pc.equal(events.column(C.KIND), C.RECEIVE), pc.is_valid(events.column(C.VC)))
    )
    receives = pa.table({
        C.TRACE_ID: receives.column(C.TRACE_ID),
        C.DST_PIDX: receives.column(C.PIDX).cast(pa.int64()),
        C.LSEQ: receives.column(C.LSEQ),
        C.VC: receives.column(C.VC),
    })  # fmt: skip
    received = _with_send_knowledge(delivered, events)
    del events
    # 1. overtaken messages, per (trace, destination): the cogroup of receives and received
    by_dst = {key: rows for key, rows in groups(receives, [C.TRACE_ID, C.DST_PIDX])}
    empty_receives = receives.schema.empty_table()
    parts = [
        overtaken_at_destination(by_dst.get(key, empty_receives), rows)
        for key, rows in groups(received, [C.TRACE_ID, C.DST_PIDX])
    ]
    del by_dst, receives, received
    overtaken = pa.concat_tables(parts) if parts else None
    # 2. witness chains, per trace with overtaken messages
    violation_parts = []
    if overtaken is not None and overtaken.num_rows:
        ends = {key[0]: rows for key, rows in groups(delivered, [C.TRACE_ID])}
        for key, rows in groups(overtaken, [C.TRACE_ID]):
            violation_parts.append(chains_of_trace(ends[key[0]], rows))
    violations = _cast_to(tables.VIOLATIONS, violation_parts)
    # 3. crowns, per trace
    budget = config.detect.crown_search_budget
    crown_parts = [crowns_of_trace(rows, budget) for _key, rows in groups(delivered, [C.TRACE_ID])]
    crown_rows = pa.concat_tables(crown_parts) if crown_parts else None
    if crown_rows is not None and crown_rows.num_rows:
        members_list = crown_rows.column(MEMBERS).combine_chunks()
        lengths = pc.list_value_length(members_list).to_numpy()
        at = np.repeat(np.arange(crown_rows.num_rows), lengths)
        members = pa.table({
            C.TRACE_ID: crown_rows.column(C.TRACE_ID).take(pa.array(at)),
            "scc_id": crown_rows.column("scc_id").take(pa.array(at)),
            C.MSG_ID: pc.list_flatten(members_list),
        })  # fmt: skip
        crowns = _cast_to(tables.CROWNS, [crown_rows.drop_columns([MEMBERS])])
        crown_members = _cast_to(tables.CROWN_MEMBERS, [members])
    else:
        crowns = _cast_to(tables.CROWNS, [])
        crown_members = _cast_to(tables.CROWN_MEMBERS, [])
    summary = summarize(trace_clocks, messages, quarantine, violations, crowns)
    for name, table in ((tables.VIOLATIONS, violations), (tables.CROWNS, crowns),
                        (tables.CROWN_MEMBERS, crown_members), (tables.TRACE_SUMMARY, summary)):  # fmt: skip
        _write(out / name, table)
    return {"violations": violations.num_rows, "crowns": crowns.num_rows}


def _cast_to(name: str, parts: list[pa.Table]) -> pa.Table:
    schema = tables.arrow_schema(name)
    if not parts:
        return schema.empty_table()
    return pa.concat_tables([p.select(schema.names) for p in parts]).cast(schema)


def _counts(table: pa.Table, key: str, flags: dict[str, pa.ChunkedArray | None]) -> pa.Table:
    """Per `key`: the row count (`__n`) and the number of rows where each flag holds."""
    cols: dict[str, Any] = {key: table.column(key)}
    aggs: list[tuple[str, str]] = [(key, "count")]
    for name, flag in flags.items():
        cols[name] = pc.cast(flag, pa.int64())
        aggs.append((name, "sum"))
    grouped = pa.table(cols).group_by(key).aggregate(aggs)
    return grouped.rename_columns([f"{c.rsplit('_', 1)[0]}" if c.endswith("_sum") else
                                   ("__n" if c == f"{key}_count" else c)
                                   for c in grouped.column_names])  # fmt: skip


def summarize(trace_clocks: pa.Table, messages: pa.Table, quarantine: pa.Table,
              violations: pa.Table, crowns: pa.Table) -> pa.Table:  # fmt: skip
    """`trace_summary` as `anomalies.summary.summarize_traces` writes it (without run_id)."""
    tid = C.TRACE_ID
    status = messages.column(C.STATUS)
    m = _counts(messages, tid, {"n_in_flight": pc.equal(status, C.IN_FLIGHT),
                                "n_orphans": pc.equal(status, C.ORPHAN)})  # fmt: skip
    m = m.rename_columns(["n_messages" if c == "__n" else c for c in m.column_names])
    rejected = quarantine.filter(pc.is_valid(quarantine.column(tid)))
    q = _counts(rejected, tid, {}).rename_columns([tid, "n_quarantined"])
    kinds = violations.column(C.KIND)
    v = _counts(
        violations, tid, {"__fifo": pc.equal(kinds, FIFO), "__causal": pc.equal(kinds, CAUSAL)}
    )
    v = v.drop_columns(["__n"])
    c = _counts(crowns, tid, {}).rename_columns([tid, "__crowns"])
    base = trace_clocks.join(q, tid, join_type="full outer")
    joined = (base.join(m, tid, join_type="left outer").join(v, tid, join_type="left outer")
              .join(c, tid, join_type="left outer"))  # fmt: skip

    def ints(name: str) -> np.ndarray:
        return np.asarray(joined.column(name).fill_null(0).to_numpy(zero_copy_only=False), np.int64)

    st = joined.column(C.STATUS).to_numpy(zero_copy_only=False)
    valid = np.array([s != CLOCK_STATUS_INVALID for s in st])  # null status: ok
    n_fifo, n_causal, n_crowns = ints("__fifo"), ints("__causal"), ints("__crowns")
    n_events, n_quarantined = ints("n_events"), ints("n_quarantined")
    no_event = n_events == 0
    order = np.where(~valid, INVALID, np.where(n_fifo > 0, ASYNC, np.where(
        n_causal > 0, FIFO_CLASS, np.where(n_crowns > 0, CO, RSC)))).astype(object)  # fmt: skip
    order[no_event] = None
    reason = np.array([None] * joined.num_rows, dtype=object)
    for i in np.flatnonzero(no_event):
        q_n = n_quarantined[i]
        reason[i] = f"{NO_EVENT}: all {q_n} input row(s) quarantined" if q_n > 0 else NO_EVENT
    masked = ~valid
    out = {
        tid: joined.column(tid),
        "n_processes": pa.array(ints("n_processes").astype(np.int32)),
        "n_events": pa.array(n_events),
        "n_messages": pa.array(ints("n_messages")),
        "n_in_flight": pa.array(ints("n_in_flight")),
        "n_orphans": pa.array(ints("n_orphans")),
        "n_quarantined": pa.array(n_quarantined),
        "n_fifo_violations": pa.array(n_fifo, mask=masked),
        "n_causal_violations": pa.array(n_causal, mask=masked),
        "n_crown_sccs": pa.array(n_crowns, mask=masked),
        "order_class": pa.array(order, pa.string()),
        "order_class_reason": pa.array(reason, pa.string()),
        "run_id": pa.nulls(joined.num_rows, pa.string()),
    }
    schema = tables.arrow_schema(tables.TRACE_SUMMARY)
    for name in NATIVE_SUMMARY:  # not computed here (COVERS leaves them out)
        out[name] = pa.nulls(joined.num_rows, schema.field(name).type)
    return pa.table({f.name: out[f.name] for f in schema}).cast(schema)


# ------------------------------------------------------------------------------ replay


def program_rows(events: pa.Table, messages: pa.Table, trace_clocks: pa.Table) -> pa.Table:
    """`replay.program_rows` with Arrow joins (same columns and rows)."""
    ev = events.select([C.TRACE_ID, C.PROCESS, C.PIDX, C.LSEQ, C.KIND, C.TS, C.LAMPORT])
    ev = ev.set_column(
        ev.schema.get_field_index(C.PIDX), C.PIDX, ev.column(C.PIDX).cast(pa.int64())
    )

    def end(lseq: str, own: str, other: str) -> pa.Table:
        rows = messages.filter(pc.is_valid(messages.column(lseq)))
        return pa.table({
            C.TRACE_ID: rows.column(C.TRACE_ID),
            C.MSG_ID: rows.column(C.MSG_ID),
            C.PIDX: rows.column(own).cast(pa.int64()),
            C.LSEQ: rows.column(lseq),
            PEER: rows.column(other).cast(pa.int64()).fill_null(-1),
            # a receive's send lseq (-1: an orphan, and on sends): the layout's key
            PEER_LSEQ: (rows.column(C.SEND_LSEQ).fill_null(-1) if lseq == C.RECV_LSEQ
                        else pa.array(np.full(rows.num_rows, -1, np.int64))),
        })  # fmt: skip

    ends = pa.concat_tables([end(C.SEND_LSEQ, C.SRC_PIDX, C.DST_PIDX),
                             end(C.RECV_LSEQ, C.DST_PIDX, C.SRC_PIDX)])  # fmt: skip
    ends = ends.join(ev, [C.TRACE_ID, C.PIDX, C.LSEQ])
    internals = ev.filter(pc.equal(ev.column(C.KIND), C.INTERNAL))
    internals = internals.append_column(C.MSG_ID, pa.nulls(internals.num_rows, pa.string()))
    internals = internals.append_column(PEER, pa.array(np.full(internals.num_rows, -1, np.int64)))
    internals = internals.append_column(
        PEER_LSEQ, pa.array(np.full(internals.num_rows, -1, np.int64))
    )
    valid = pa.table({
        C.TRACE_ID: trace_clocks.column(C.TRACE_ID),
        VALID: pc.not_equal(trace_clocks.column(C.STATUS), CLOCK_STATUS_INVALID),
    })  # fmt: skip
    names = [C.TRACE_ID, C.PROCESS, C.PIDX, C.LSEQ, C.KIND, C.TS, C.LAMPORT, C.MSG_ID, PEER,
             PEER_LSEQ]  # fmt: skip
    rows = pa.concat_tables(
        [ends.select(names), internals.select(names)], promote_options="permissive"
    )
    rows = rows.join(valid, C.TRACE_ID, join_type="left outer")
    kinds = rows.column(C.KIND).to_numpy(zero_copy_only=False)
    return pa.table({
        C.TRACE_ID: rows.column(C.TRACE_ID),
        C.PROCESS: rows.column(C.PROCESS),
        C.PIDX: rows.column(C.PIDX).cast(pa.int32()),
        C.LSEQ: rows.column(C.LSEQ).cast(pa.int64()),
        # the layout reads kinds as bytes (`KIND_CODES`), as `replay.program_rows` gives them
        C.KIND: pa.array(np.select(
            [kinds == name for name in KIND_CODES], list(KIND_CODES.values()), -1
        ).astype(np.int8)),
        C.TS: rows.column(C.TS).cast(pa.float64()),
        C.LAMPORT: rows.column(C.LAMPORT).cast(pa.int64()),
        C.MSG_ID: rows.column(C.MSG_ID),
        PEER: rows.column(PEER).cast(pa.int32()),
        PEER_LSEQ: rows.column(PEER_LSEQ).cast(pa.int64()),
        VALID: rows.column(VALID).fill_null(False),
    })  # fmt: skip


@dataclass
class ReplayOutcome:
    runs: int = 0
    deliveries: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


def replay_single(warehouse: Path, out: Path, config: Config) -> dict[str, Any]:
    """protocol_runs and deliveries of every trace x the profile's protocols."""
    settings = config.replay
    events = read_delta(warehouse / tables.EVENTS,
                        [C.TRACE_ID, C.PROCESS, C.PIDX, C.LSEQ, C.KIND, C.TS, C.LAMPORT])  # fmt: skip
    messages = read_delta(warehouse / tables.MESSAGES,
                          [C.TRACE_ID, C.MSG_ID, C.SRC_PIDX, C.DST_PIDX, C.SEND_LSEQ, C.RECV_LSEQ])  # fmt: skip
    trace_clocks = read_delta(warehouse / tables.TRACE_CLOCKS, [C.TRACE_ID, C.STATUS])
    programs = program_rows(events, messages, trace_clocks)
    del events, messages
    params = {name: dict(settings.params.get(name, {})) for name in settings.protocols}
    run_schema = tables.arrow_schema(tables.PROTOCOL_RUNS)
    delivery_schema = tables.arrow_schema(tables.DELIVERIES)
    runs: list[pa.RecordBatch] = []
    outcome = ReplayOutcome()

    def batches() -> Iterator[pa.RecordBatch]:
        for _key, trace in groups(programs, [C.TRACE_ID]):
            for name in settings.protocols:
                # the job's group carries the protocol on every row; the function reads row 0
                tagged = trace.append_column(PROTOCOL, pa.DictionaryArray.from_arrays(
                    pa.array(np.zeros(trace.num_rows, np.int8)), pa.array([name])))  # fmt: skip
                for batch in _replay_group(tagged, settings.receive_mode, params,
                                           settings.default_latency, settings.max_run_bytes):  # fmt: skip
                    if batch.column(RUN).null_count == 0:
                        run = pa.RecordBatch.from_struct_array(batch.column(RUN))
                        runs.append(_conform_batch(run, run_schema))
                        status = str(batch.column(RUN)[0]["status"].as_py())
                        outcome.statuses[status] = outcome.statuses.get(status, 0) + 1
                    else:
                        outcome.deliveries += batch.num_rows
                        yield _conform_batch(batch, delivery_schema)

    reader = pa.RecordBatchReader.from_batches(delivery_schema, batches())
    write_deltalake(str(out / tables.DELIVERIES), reader, mode="overwrite")
    table = pa.Table.from_batches(runs, run_schema) if runs else run_schema.empty_table()
    _write(out / tables.PROTOCOL_RUNS, table)
    outcome.runs = table.num_rows
    return {"runs": outcome.runs, "deliveries": outcome.deliveries, "statuses": outcome.statuses}


def _conform_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    arrays = [batch.column(f.name).cast(f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


assert _ARROW_ROWS.get_field_index(RUN) >= 0  # the job's replay rows carry their run struct


# ------------------------------------------------------------------------------ compare


def _metric_values(runs: pa.Table) -> dict[str, pa.Array]:
    """`replay._metric_columns` with Arrow compute (null where Spark's is null)."""
    app = runs.column("app_messages")
    per_app = pc.if_else(pc.greater(app, 0), pc.cast(app, pa.float64()),
                         pa.scalar(None, pa.float64()))  # fmt: skip

    def f64(name: str) -> pa.ChunkedArray:
        return pc.cast(runs.column(name), pa.float64())

    return {
        "control_per_app": pc.divide(f64("control_messages"), per_app),
        "piggyback_ints_mean": f64("piggyback_ints_mean"),
        "piggyback_bytes_total": f64("piggyback_bytes_total"),
        "held_back_fraction": pc.divide(f64("held_back"), per_app),
        "holdback_delay_mean": f64("holdback_delay_mean"),
        "sender_delay_per_app": pc.divide(f64("sender_delay_total"), per_app),
        "max_holdback_buffer": f64("max_holdback_buffer"),
        "makespan_ratio": f64("makespan_ratio"),
    }


def compare_single(warehouse: Path, out: Path) -> dict[str, int]:
    """protocol_comparison from the job's protocol_runs (`replay.compare_protocols`)."""
    runs = read_delta(warehouse / tables.PROTOCOL_RUNS)
    metrics = {k: np.asarray(v.to_numpy(zero_copy_only=False), dtype=np.float64)
               for k, v in _metric_values(runs).items()}  # fmt: skip
    present = {k: pc.is_valid(v).to_numpy(zero_copy_only=False)
               for k, v in _metric_values(runs).items()}  # fmt: skip
    protocol = np.asarray(runs.column(PROTOCOL).to_pylist(), dtype=object)
    mode = np.asarray(runs.column("receive_mode").to_pylist(), dtype=object)
    status = np.asarray(runs.column(C.STATUS).to_pylist(), dtype=object)
    verified = runs.column("verified").to_pylist()
    rows: list[tuple[str, str, str, int, float | None, float | None]] = []
    for p, mo in sorted(set(zip(protocol.tolist(), mode.tolist(), strict=True))):
        mine = (protocol == p) & (mode == mo)
        for metric, values in metrics.items():
            given = mine & present[metric]
            finite = given & np.isfinite(values)
            if finite.any():
                vals = values[finite]
                rows.append((p, mo, metric, int(finite.sum()),
                             float(np.percentile(vals, 50)), float(np.percentile(vals, 99))))  # fmt: skip
            if (given & ~finite).any():
                rows.append(
                    (p, mo, NOT_COMPUTED + metric, int((given & ~finite).sum()), None, None)
                )
        for s in sorted(set(status[mine].tolist())):
            rows.append((p, mo, f"status_{s}", int((mine & (status == s)).sum()), None, None))
        failed = sum(1 for i in np.flatnonzero(mine) if verified[i] is False)
        if failed:
            rows.append((p, mo, "verification_failed", failed, None, None))
    names = [PROTOCOL, "receive_mode", "metric", "traces", "median", "p99"]
    table = pa.table({name: [r[i] for r in rows] for i, name in enumerate(names)})
    table = table.cast(tables.arrow_schema(tables.PROTOCOL_COMPARISON))
    _write(out / tables.PROTOCOL_COMPARISON, table)
    return {"rows": table.num_rows}


# ------------------------------------------------------------------------------ checking


def _plain(t: pa.DataType) -> bool:
    return not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_struct(t)
                or pa.types.is_map(t))  # fmt: skip


def _normal(arr: pa.Array) -> pa.Array:
    """One type per kind, whoever wrote the table: large strings, int64, float64."""
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr.cast(pa.large_string())
    if pa.types.is_integer(t):
        return arr.cast(pa.int64())
    if pa.types.is_floating(t):
        return arr.cast(pa.float64())
    if pa.types.is_dictionary(t):
        return _normal(arr.dictionary_decode())
    return arr


def _order(table: pa.Table, keys: Sequence[str]) -> pa.Array:
    """Row order by the keys, then the other plain columns (tie-breakers)."""
    extra = [n for n in table.column_names if n not in keys and _plain(table.schema.field(n).type)]
    return pc.sort_indices(table, sort_keys=[(k, "ascending") for k in [*keys, *extra]])


def _sorted(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    return table.take(_order(table, keys))


class _Digest:
    """Streams of one column (validity, lengths, values; a child for list values), so that the
    digest does not depend on how the column is chunked."""

    def __init__(self) -> None:
        self.valid = hashlib.blake2b()
        self.lengths = hashlib.blake2b()
        self.values = hashlib.blake2b()
        self.child: _Digest | None = None

    def feed(self, arr: pa.Array) -> None:
        arr = _normal(arr)
        t = arr.type
        self.valid.update(
            pc.is_valid(arr).to_numpy(zero_copy_only=False).astype(np.uint8).tobytes()
        )
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            lengths = pc.list_value_length(arr).fill_null(0).to_numpy(zero_copy_only=False)
            self.lengths.update(np.asarray(lengths, np.int64).tobytes())
            self.child = self.child or _Digest()
            self.child.feed(pc.list_flatten(arr))
        elif pa.types.is_large_string(t):
            filled = pc.fill_null(arr, "")
            lengths = pc.binary_length(filled).to_numpy(zero_copy_only=False)
            self.lengths.update(np.asarray(lengths, np.int64).tobytes())
            buffers = filled.buffers()
            if buffers[2] is not None and len(filled):
                offsets = np.frombuffer(buffers[1], np.int64)[
                    filled.offset : filled.offset + len(filled) + 1
                ]
                self.values.update(memoryview(buffers[2])[offsets[0] : offsets[-1]])
        elif pa.types.is_boolean(t):
            self.values.update(
                arr.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8).tobytes()
            )
        elif pa.types.is_integer(t):
            self.values.update(arr.fill_null(0).to_numpy(zero_copy_only=False).tobytes())
        elif pa.types.is_floating(t):
            values = np.asarray(arr.fill_null(0.0).to_numpy(zero_copy_only=False), np.float64)
            self.values.update(np.where(np.isnan(values), np.nan, values).tobytes())
        else:
            raise TypeError(f"no digest for type {t}")

    def hexdigest(self) -> str:
        parts = [self.valid.hexdigest(), self.lengths.hexdigest(), self.values.hexdigest()]
        if self.child is not None:
            parts.append(self.child.hexdigest())
        return hashlib.blake2b("/".join(parts).encode()).hexdigest()[:16]


def _digests(table: pa.Table, keys: Sequence[str]) -> dict[str, str]:
    """Digest of each column in key order (one sorted column in memory at a time)."""
    order = _order(table, keys)
    out = {}
    for name in table.column_names:
        d = _Digest()
        for chunk in table.column(name).take(order).chunks:
            d.feed(chunk)
        out[name] = d.hexdigest()
    return out


def _row_diffs(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Per row: do the two (sorted, aligned) columns differ there?"""
    a, b = _normal(a), _normal(b)
    va = pc.is_valid(a).to_numpy(zero_copy_only=False)
    vb = pc.is_valid(b).to_numpy(zero_copy_only=False)
    differ = va != vb
    both = va & vb
    t = a.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        la = np.asarray(
            pc.list_value_length(a).fill_null(0).to_numpy(zero_copy_only=False), np.int64
        )
        lb = np.asarray(
            pc.list_value_length(b).fill_null(0).to_numpy(zero_copy_only=False), np.int64
        )
        differ |= both & (la != lb)
        if np.array_equal(la, lb):
            inner = _row_diffs(pc.list_flatten(a), pc.list_flatten(b))
            bad = np.flatnonzero(inner)
            if bad.size:
                offsets = np.concatenate([[0], np.cumsum(la)])
                differ[np.searchsorted(offsets, bad, side="right") - 1] = True
        return differ
    if pa.types.is_floating(t):
        x = np.asarray(a.fill_null(0.0).to_numpy(zero_copy_only=False), np.float64)
        y = np.asarray(b.fill_null(0.0).to_numpy(zero_copy_only=False), np.float64)
        return differ | (both & ~np.isclose(x, y, rtol=FLOAT_RTOL, atol=1e-12, equal_nan=True))
    if pa.types.is_boolean(t) or pa.types.is_integer(t):
        zero = False if pa.types.is_boolean(t) else 0
        x = a.fill_null(zero).to_numpy(zero_copy_only=False)
        y = b.fill_null(zero).to_numpy(zero_copy_only=False)
        return differ | (both & (x != y))
    same = pc.equal(a, b).fill_null(True).to_numpy(zero_copy_only=False)
    return differ | (both & ~same)


@dataclass
class Checked:
    table: str
    rows: int
    columns: list[str]
    method: str  # "rows" (sorted rows compared) or "digests"


def compare_table(name: str, job: Callable[..., pa.Table], base: Callable[..., pa.Table],
                  columns: list[str] | str) -> Checked:  # fmt: skip
    """Check the baseline's `name` against the job's on `columns` (ALL: the schema's);
    `job` / `base` read a table given columns (and filters). Raises `TableMismatch`."""
    cols = tables.arrow_schema(name).names if columns == ALL else list(columns)
    keys = [k for k in KEYS[name] if k in cols]
    split = SPLIT_BY.get(name)
    if split is None:
        parts: list[list[tuple[str, str, Any]] | None] = [None]
    else:
        values = set(job([split]).column(split).unique().to_pylist())
        values |= set(base([split]).column(split).unique().to_pylist())
        parts = [[(split, "=", v)] for v in sorted(values)]
    rows = 0
    method = "rows"
    for filters in parts:
        where = f"{name}" + (f" ({filters[0][0]} = {filters[0][2]})" if filters else "")
        a = job(cols, filters)
        n_job = a.num_rows
        if n_job > DIRECT_ROWS:
            method = "digests"
            ours = _digests(a, keys)
            del a
            b = base(cols, filters)
            n_base = b.num_rows
            theirs = _digests(b, keys)
            del b
            if n_job != n_base:
                raise TableMismatch(f"{where}: the job has {n_job} rows, the baseline {n_base}")
            differ = [c for c in cols if ours[c] != theirs[c]]
            if differ:
                raise TableMismatch(
                    f"{where}: {n_job} rows; the digests of columns {differ} differ"
                )
        else:
            b = base(cols, filters)
            _compare_rows(where, _sorted(a, keys), _sorted(b, keys), keys)
        rows += n_job
    return Checked(name, rows, cols, method)


def _compare_rows(where: str, a: pa.Table, b: pa.Table, keys: list[str]) -> None:
    if a.num_rows != b.num_rows:
        only_job = a.select(keys).join(b.select(keys), keys, join_type="left anti")
        only_base = b.select(keys).join(a.select(keys), keys, join_type="left anti")
        raise TableMismatch(
            f"{where}: the job has {a.num_rows} rows, the baseline {b.num_rows}; only in the "
            f"job: {only_job.slice(0, 3).to_pylist()}; only in the baseline: "
            f"{only_base.slice(0, 3).to_pylist()}"
        )
    for col in a.column_names:
        differ = _row_diffs(a.column(col).combine_chunks(), b.column(col).combine_chunks())
        bad = np.flatnonzero(differ)
        if bad.size:
            i = int(bad[0])
            key = {k: a.column(k)[i].as_py() for k in keys}
            raise TableMismatch(
                f"{where}: column {col} differs in {bad.size} of {a.num_rows} rows; first at "
                f"{json.dumps(key, default=str)}: job {a.column(col)[i].as_py()!r}, baseline "
                f"{b.column(col)[i].as_py()!r}"
            )
