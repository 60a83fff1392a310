"""The Spark adapter of the replay (docs/replay.md): `program_rows` and `replay_protocols`.

`program_rows` flattens `events` and `messages` into the rows a replay needs
(one per internal event, per message copy of a send, per receive);
`replay_protocols` crosses them with the protocols and replays each (trace,
protocol) group with the compiled loop (`run.replay_compiled`) inside a grouped
Arrow UDF. A group holds one trace's rows, so one trace x protocol runs in one
Python worker; thousands of them run side by side.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark import tables
from causal_spark._spark import checkpoint
from causal_spark.clocks import CLOCK_STATUS_INVALID
from causal_spark.replay.layout import CompiledTrace, LayoutBuilder
from causal_spark.replay.model import (
    KIND_CODES,
    PROTOCOL,
    STATUS_ERROR,
    STATUS_NOT_APPLICABLE,
    TraceShapeError,
)
from causal_spark.replay.protocols.params import ProtocolParamError
from causal_spark.replay.request import SELECTIVE, ReplayRequest
from causal_spark.replay.run import CompiledRun, replay_compiled
from causal_spark.replay.size import GroupShape, too_big

PEER = "peer"
PEER_LSEQ = "peer_lseq"
VALID = "valid"
RUN = "run"

_RUN_FIELDS = tables.udf_schema(tables.PROTOCOL_RUNS)
_DELIVERY_FIELDS = tables.udf_schema(tables.DELIVERIES)
REPLAY_ROWS_SCHEMA = T.StructType([*_DELIVERY_FIELDS.fields, T.StructField(RUN, _RUN_FIELDS)])
_ARROW_ROWS = tables.to_arrow(REPLAY_ROWS_SCHEMA)


def program_rows(events: DataFrame, messages: DataFrame, trace_clocks: DataFrame) -> DataFrame:
    """The programs of every trace as rows: internal events, send copies, receives.

    Input: `events` (trace_id, process, pidx, lseq, kind, ts, lamport), `messages`
    (trace_id, msg_id, src_pidx, dst_pidx, send_lseq, recv_lseq) and
    `trace_clocks` (trace_id, status).
    Output: trace_id, process, pidx, lseq, kind (byte: `KIND_CODES`), ts,
    lamport, msg_id, peer (int: the destination of a send copy, the source of a
    receive, -1 when not a process of the trace), peer_lseq (long: a receive's
    send lseq, -1 for an orphan and for other rows: the layout finds a receive's
    message by it, not by msg_id), valid (boolean: the trace's clocks are OK).
    """
    event_cols = events.select(C.TRACE_ID, C.PROCESS, C.PIDX, C.LSEQ, C.KIND, C.TS, C.LAMPORT)
    sends = messages.where(F.col(C.SEND_LSEQ).isNotNull()).select(
        C.TRACE_ID,
        C.MSG_ID,
        F.col(C.SRC_PIDX).alias(C.PIDX),
        F.col(C.SEND_LSEQ).alias(C.LSEQ),
        F.coalesce(F.col(C.DST_PIDX), F.lit(-1)).alias(PEER),
        F.lit(-1).cast("long").alias(PEER_LSEQ),
    )
    receives = messages.where(F.col(C.RECV_LSEQ).isNotNull()).select(
        C.TRACE_ID,
        C.MSG_ID,
        F.col(C.DST_PIDX).alias(C.PIDX),
        F.col(C.RECV_LSEQ).alias(C.LSEQ),
        F.coalesce(F.col(C.SRC_PIDX), F.lit(-1)).alias(PEER),
        F.coalesce(F.col(C.SEND_LSEQ), F.lit(-1)).alias(PEER_LSEQ),
    )
    ends = sends.unionByName(receives).join(event_cols, [C.TRACE_ID, C.PIDX, C.LSEQ])
    internals = event_cols.where(F.col(C.KIND) == C.INTERNAL).select(
        "*",
        F.lit(None).cast("string").alias(C.MSG_ID),
        F.lit(-1).alias(PEER),
        F.lit(-1).cast("long").alias(PEER_LSEQ),
    )
    valid = trace_clocks.select(
        C.TRACE_ID, (F.col(C.STATUS) != F.lit(CLOCK_STATUS_INVALID)).alias(VALID)
    )
    return (
        ends.unionByName(internals)
        .join(valid, C.TRACE_ID, "left")
        .select(
            C.TRACE_ID,
            C.PROCESS,
            F.col(C.PIDX).cast("int").alias(C.PIDX),
            F.col(C.LSEQ).cast("long").alias(C.LSEQ),
            _kind_code(F.col(C.KIND)).alias(C.KIND),
            F.col(C.TS).cast("double").alias(C.TS),
            F.col(C.LAMPORT).cast("long").alias(C.LAMPORT),
            C.MSG_ID,
            F.col(PEER).cast("int").alias(PEER),
            F.col(PEER_LSEQ).cast("long").alias(PEER_LSEQ),
            F.coalesce(F.col(VALID), F.lit(False)).alias(VALID),
        )
    )


def _kind_code(kind: Column) -> Column:
    """`KIND_CODES` of a kind name, -1 for any other: the layout reads bytes, not names."""
    code = F.lit(-1)
    for name, value in KIND_CODES.items():
        code = F.when(kind == F.lit(name), F.lit(value)).otherwise(code)
    return code.cast("byte")


@dataclass(frozen=True)
class ReplayTables:
    runs: DataFrame
    deliveries: DataFrame


def replay_protocols(programs: DataFrame, request: ReplayRequest) -> ReplayTables:
    """`protocol_runs` and `deliveries` for every trace of `programs` x every protocol asked.

    `programs` is the output of `program_rows`. The replay runs once (its
    output is checkpointed); both tables are read from that one result.
    """
    request.validate()
    names = programs.sparkSession.createDataFrame(
        [(name,) for name in request.protocols],
        T.StructType([T.StructField(PROTOCOL, T.StringType())]),
    )
    mode = request.receive_mode
    params = {name: dict(request.params_of(name)) for name in request.protocols}
    latency = request.default_latency
    limit = request.max_run_bytes

    def per_group(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # batches in and out: the group is never one table, and its rows are kept narrow
        return _replay_group(batches, mode, params, latency, limit)

    rows = checkpoint(
        programs.crossJoin(F.broadcast(names))
        .groupBy(C.TRACE_ID, PROTOCOL)
        .applyInArrow(per_group, REPLAY_ROWS_SCHEMA)
    )
    runs = tables.conform(
        rows.where(F.col(RUN).isNotNull()).select(f"{RUN}.*"), tables.PROTOCOL_RUNS
    )
    deliveries = tables.conform(rows.where(F.col(RUN).isNull()).drop(RUN), tables.DELIVERIES)
    return ReplayTables(runs=runs, deliveries=deliveries)


def _replay_group(
    batches: Iterable[pa.RecordBatch] | pa.Table,
    mode: str,
    params: Mapping[str, Mapping[str, str]],
    default_latency: float,
    max_run_bytes: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """One (trace, protocol) group of program rows in, its `protocol_runs` row and its
    `deliveries` rows out, in batches of at most `DELIVERY_BATCH_ROWS` rows."""
    if isinstance(batches, pa.Table):
        batches = batches.to_batches()
    builder: LayoutBuilder | None = None
    valid = True
    name = ""
    for batch in batches:
        if builder is None:
            builder = LayoutBuilder(str(batch.column(C.TRACE_ID)[0].as_py()))
            name = str(batch.column(PROTOCOL)[0].as_py())
        valid = valid and bool(pc.all(batch.column(VALID)).as_py())
        if valid:
            builder.add(batch)
    if builder is None:
        return
    given = params.get(name, {})
    head = {
        C.TRACE_ID: builder.trace_id,
        PROTOCOL: name,
        "receive_mode": mode,
        "params": json.dumps(dict(sorted(given.items()))),
        "n_processes": builder.n,
    }
    if not valid:
        yield _run_batch(
            head,
            "lamport",
            False,
            0.0,
            STATUS_NOT_APPLICABLE,
            "the trace is INVALID (its matched messages form a causal cycle)",
            None,
            {},
        )
        return
    if not builder.timed and builder.unclocked:
        yield _run_batch(head, "lamport", False, 0.0, STATUS_NOT_APPLICABLE, _UNTIMED, None, {})
        return
    if max_run_bytes is not None:  # before the layout, which holds the whole trace
        shape = GroupShape(builder.n, builder.rows, builder.in_flight())
        oversize = too_big(shape, name, max_run_bytes)
        if oversize is not None:
            yield _run_batch(head, "ts", False, 0.0, STATUS_NOT_APPLICABLE, oversize, None, {})
            return
    try:
        ctrace = builder.finish()
        del builder
        run = replay_compiled(ctrace, name, given, mode == SELECTIVE, default_latency)
    except (TraceShapeError, ProtocolParamError) as e:
        yield _run_batch(head, "ts", False, 0.0, STATUS_ERROR, str(e), None, {})
        return
    recorded = ctrace.end - ctrace.start
    yield _run_batch(
        head, ctrace.timebase, ctrace.skewed, recorded, run.status, run.reason, run.verified,
        run.figures,
    )  # fmt: skip
    if run.status != STATUS_NOT_APPLICABLE:
        yield from _deliveries_batches(head, ctrace, run)


# a trace replays on its ts, or on its Lamport clocks when some event has no ts (docs/replay.md);
# clocks leave the Lamport clocks of a trace too wide for them null (trace_clocks.reason)
_UNTIMED = (
    "no times to replay on: some events have no ts and the trace has no Lamport clocks "
    "(trace_clocks is not_applicable: its reason says why)"
)


def _run_batch(
    head: Mapping[str, object],
    timebase: str,
    skewed: bool,
    recorded: float,
    status: str,
    reason: str | None,
    verified: bool | None,
    figures: Mapping[str, float | int | None],
) -> pa.RecordBatch:
    record: dict[str, object] = {
        **head,
        "timebase": timebase,
        "skewed": skewed,
        "recorded_makespan": recorded,
        "status": status,
        "reason": reason,
        "verified": verified,
    }
    for fld in _RUN_FIELDS.fields:
        record.setdefault(fld.name, figures.get(fld.name))
    schema = _ARROW_ROWS
    arrays = []
    for fld in schema:
        if fld.name == RUN:
            arrays.append(pa.array([record], type=fld.type))
        elif fld.name in (C.TRACE_ID, PROTOCOL, "receive_mode"):
            arrays.append(pa.array([head[fld.name]], type=fld.type))
        else:
            arrays.append(pa.nulls(1, type=fld.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# deliveries rows per output batch: a group's output is written in batches of this size, so
# its Arrow rows never hold the whole trace (docs/replay.md, "How big a trace one worker
# replays")
DELIVERY_BATCH_ROWS = 1 << 16


def _deliveries_batches(
    head: Mapping[str, object], trace: CompiledTrace, run: CompiledRun
) -> Iterator[pa.RecordBatch]:
    schema = _ARROW_ROWS
    # the group's strings and the null `run` column, built once per size
    constant: dict[tuple[str, int], pa.Array] = {}

    def repeated(name: str, count: int) -> pa.Array:
        if (name, count) not in constant:
            constant[(name, count)] = (
                pa.nulls(count, schema.field(RUN).type)
                if name == RUN
                else _repeated(head[name], count)
            )
        return constant[(name, count)]

    for ids, messages in trace.ids.slices(DELIVERY_BATCH_ROWS):
        count = len(ids)
        values: dict[str, pa.Array] = {
            C.TRACE_ID: repeated(C.TRACE_ID, count),
            PROTOCOL: repeated(PROTOCOL, count),
            "receive_mode": repeated("receive_mode", count),
            RUN: repeated(RUN, count),
            C.MSG_ID: ids,
            **run.arrow_columns(messages),
        }
        values["taken_by_lseq"] = values.pop("taken_by")
        values["piggyback_ints"] = values.pop("piggyback")
        arrays = [_typed(values[fld.name], fld.type) for fld in schema]
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _typed(values: pa.Array, typ: pa.DataType) -> pa.Array:
    return values if values.type == typ else values.cast(typ)


def _repeated(value: object, count: int) -> pa.Array:
    """`count` copies of one string."""
    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(count, np.int32)), pa.array([value], pa.string())
    ).cast(pa.string())
