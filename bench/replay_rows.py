"""Program rows of one generated trace, written without Spark, for the replay benchmarks.

`write_programs(path, messages, processes, ...)` runs the generator's own NumPy
kernel (`causal_spark.generate.process_events`: Poisson sends and internal
events, all-to-all or broadcast, lognormal(0, 1) latencies) for every process,
routes each message to a receive at its arrival, numbers every process's
events by time as `generate_traces` does, computes the recorded Lamport clocks
and writes the rows `replay.program_rows` would give for that trace (as after
ingest and clocks) to Parquet, in row groups of 64 Ki rows: the input of one
(trace, protocol) group of the replay UDF. Building them through the real
ingest and clocks jobs takes about an hour at 10^7 messages here; the rows are
the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numba import njit

from causal_spark.generate import GeneratorSpec, allot, process_events

ROW_GROUP = 1 << 16


def spec_for(
    messages: int, processes: int, topology: str = "all_to_all", seed: int = 61
) -> GeneratorSpec:
    """A spec whose trace has `messages` message copies (10% internal events, no loss)."""
    if topology == "broadcast":
        sends = messages // (processes - 1)
        events = round(sends / 0.9) + sends * (processes - 1)
    else:
        events = round(messages / 0.9) + messages
    return GeneratorSpec(processes=processes, events=events, topology=topology, seed=seed)  # type: ignore[arg-type]


@njit(cache=True)
def _lamport(order, proc, send_row, lamport, last):  # type: ignore[no-untyped-def]
    """Lamport clocks over rows in time order (a receive's send comes earlier: latency > 0);
    the copies of one multicast share their event's clock (send_row < 0 for them)."""
    for i in order:
        p = proc[i]
        s = send_row[i]
        value = last[p]
        if s >= 0 and lamport[s] > value:
            value = lamport[s]
        lamport[i] = value + 1
        last[p] = value + 1


def program_rows(spec: GeneratorSpec) -> dict[str, np.ndarray]:
    """The program rows of trace 0 of `spec`, as NumPy columns (msg ids as integer codes)."""
    parts = []
    for p, share in enumerate(allot(spec)):
        for batch in process_events(spec, 0, p, share):
            parts.append({k: batch.column(k).to_numpy(zero_copy_only=False) for k in
                          ("process", "ev", "t", "is_send", "dst", "arrival", "lost", "copy")})  # fmt: skip
    col = {k: np.concatenate([x[k] for x in parts]) for k in parts[0]}
    del parts
    send = col["is_send"]
    spont = len(col["t"])
    # rows: spontaneous events (one per copy of a send) then receives
    recv = np.flatnonzero(send & ~col["lost"])
    proc = np.concatenate([col["process"], col["dst"][recv]]).astype(np.int32)
    t = np.concatenate([col["t"], col["arrival"][recv]])
    cls = np.concatenate([np.zeros(spont, np.int8), np.ones(len(recv), np.int8)])
    k1 = np.concatenate([col["ev"], col["process"][recv].astype(np.int64)])
    k2 = np.concatenate([np.zeros(spont, np.int64), col["copy"][recv]])
    kind = np.concatenate([np.where(send, 0, 2).astype(np.int8), np.ones(len(recv), np.int8)])
    peer = np.concatenate([np.where(send, col["dst"], -1), col["process"][recv]]).astype(np.int32)
    # a message: its sender and copy number there
    width = int(col["copy"].max(initial=0)) + 1
    code = np.concatenate([
        np.where(send, col["process"].astype(np.int64) * width + col["copy"], -1),
        col["process"][recv].astype(np.int64) * width + col["copy"][recv],
    ])  # fmt: skip
    order = np.lexsort((k2, k1, cls, t, proc))
    proc, t, kind, peer, code, k1, cls = (a[order] for a in (proc, t, kind, peer, code, k1, cls))
    del order, k2
    rows = len(proc)
    # lseq: a multicast's copies share (t, cls, k1) and so one lseq
    new_event = np.ones(rows, bool)
    new_event[1:] = (
        (proc[1:] != proc[:-1]) | (t[1:] != t[:-1]) | (cls[1:] != cls[:-1]) | (k1[1:] != k1[:-1])
    )
    event = np.cumsum(new_event) - 1
    first_of_proc = np.searchsorted(proc, np.arange(spec.processes))
    lseq = event - event[first_of_proc][proc] + 1
    # each receive's send row, and its lseq
    is_send = kind == 0
    send_at = np.full(int(code.max(initial=0)) + 1, -1, np.int64)
    send_at[code[is_send]] = np.flatnonzero(is_send)
    send_row = np.full(rows, -1, np.int64)
    is_recv = kind == 1
    send_row[is_recv] = send_at[code[is_recv]]
    peer_lseq = np.full(rows, -1, np.int64)
    peer_lseq[is_recv] = lseq[send_row[is_recv]]
    lamport = np.zeros(rows, np.int64)
    first_row = np.flatnonzero(new_event)  # one clock per event: its first row's
    rep = np.full(rows, -1, np.int64)
    rep[first_row] = first_row
    time_order = first_row[np.argsort(t[first_row], kind="stable")]
    _lamport(time_order, proc, np.where(is_recv, send_row, -1), lamport,
             np.zeros(spec.processes, np.int64))  # fmt: skip
    lamport = lamport[np.maximum.accumulate(rep)]  # copies of a multicast: their event's
    return {
        "pidx": proc, "lseq": lseq, "kind": kind, "ts": t, "lamport": lamport,
        "code": code, "peer": peer, "peer_lseq": peer_lseq, "width": np.asarray(width),
    }  # fmt: skip


def write_programs(path: Path, spec: GeneratorSpec) -> int:
    """Write the program rows of `spec`'s trace to `path`; returns the message copies."""
    rows = program_rows(spec)
    names = np.array([f"p{p:02d}" for p in range(spec.processes)])
    trace_id = f"gen{spec.seed}-00000"
    width = int(rows["width"])
    schema = pa.schema([
        ("trace_id", pa.string()), ("process", pa.string()), ("pidx", pa.int32()),
        ("lseq", pa.int64()), ("kind", pa.int8()), ("ts", pa.float64()),
        ("lamport", pa.int64()), ("msg_id", pa.string()), ("peer", pa.int32()),
        ("peer_lseq", pa.int64()), ("valid", pa.bool_()),
    ])  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    total = len(rows["pidx"])
    with pq.ParquetWriter(path, schema) as writer:
        for lo in range(0, total, ROW_GROUP):
            hi = min(total, lo + ROW_GROUP)
            code = rows["code"][lo:hi]
            ids = np.char.add(np.char.add(names[np.maximum(code // width, 0)], "-"),
                              (code % width).astype(str))  # fmt: skip
            count = hi - lo
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.array([trace_id] * count, pa.string()),
                    pa.array(names[rows["pidx"][lo:hi]]),
                    pa.array(rows["pidx"][lo:hi]),
                    pa.array(rows["lseq"][lo:hi]),
                    pa.array(rows["kind"][lo:hi]),
                    pa.array(rows["ts"][lo:hi]),
                    pa.array(rows["lamport"][lo:hi]),
                    pa.array(ids, mask=code < 0),
                    pa.array(rows["peer"][lo:hi]),
                    pa.array(rows["peer_lseq"][lo:hi]),
                    pa.array(np.ones(count, bool)),
                ],
                schema=schema,
            )
            writer.write_batch(batch, row_group_size=ROW_GROUP)
    return int(np.count_nonzero(rows["kind"] == 0))


def read_batches(path: Path, protocol: str) -> Iterator[pa.RecordBatch]:
    """The rows of `path` batch by batch, with the protocol column the UDF's groups have."""
    file = pq.ParquetFile(path)
    for batch in file.iter_batches(batch_size=10_000):
        yield batch.append_column("protocol", pa.array([protocol] * batch.num_rows))
