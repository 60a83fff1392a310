"""Benchmark the clocks stage against same-run baselines; write bench/clocks.{json,md}.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/clocks.py            # the sweep below (about 20 minutes here; 10^7 x 256 peaks near 20 GB)
    .venv/bin/python bench/clocks.py --quick    # 10^5 events only, a smoke run (written to
                                                # bench/out/clocks/quick/)

Every case is a generated trace whose `events` and `messages` Delta tables are
built once with Arrow (set-up, not measured). Then, in the same process:

- `spark per-trace` / `spark distributed`: the real `clocks` job (Delta in, Delta
  out: events with clocks and trace_clocks), engine forced in the config; the
  per-trace engine keeps the profile's slab_events (the size of its batches of
  traces) and output_parts (a trace above slab_events is written by that many
  tasks), the distributed engine cuts the trace into 8 slabs;
- `baseline`: one process reads the same two tables with delta-rs/pyarrow, runs
  the single-core compiled reference kernel and writes the same events table
  with delta-rs: what a user without Spark would do;
- `kernel` / `reference kernel`: the compute alone, on the same arrays in memory:
  the engine's kernel (causal order found on the fly) against the reference (a
  Kahn topological sort, then one sweep in that order), both Numba, one core;
  above 2^30 vector entries (10^7 x 256) also `rolling kernel`, the one the
  engine runs there (rows kept only while needed; `clocks.units_kernel.DENSE_MAX_CELLS`);
- `pure Python`: dicts and lists, for the sizes it finishes in reasonable time.

Times are medians of the repeats (1 above 10^6 events unless --repeats); memory is the peak RSS
of the process tree for Spark and of this process for the baselines. Both
engines first run once, untimed, on a 20 000-event trace: the first job of a
process pays the JVM's and the Python workers' start-up, which would otherwise
land on whichever case is measured first (23 s on 10^7 x 64 with Spark's own
writer, 5 s with the tasks writing the files; a spark-submit job pays it once).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import platform
import shutil
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties
from numba import njit
from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

import itertools

from baselines import generate_reference
from run import measure

from causal_spark import tables
from causal_spark.app.runs import run_job
from causal_spark.app.session import build_session
from causal_spark.app.stages import clocks_stage
from causal_spark.clocks.kernel import Seeds, export_clocks, group_clocks
from causal_spark.clocks.units_kernel import DENSE_MAX_CELLS
from causal_spark.config import Config, load_config
from causal_spark.generate import GeneratorSpec
from causal_spark.io import delta
from causal_spark.io.ledger import Ledger
from causal_spark.sinks import Warehouse

HERE = Path(__file__).resolve().parent
SCRATCH = HERE / "out" / "clocks"
NOTES_MARKER = "<!-- notes: kept by bench/clocks.py -->"


# ------------------------------------------------------------------------- set-up (not timed)


def _read(path: Path, columns: list[str] | None = None) -> pa.Table:
    return DeltaTable(str(path)).to_pyarrow_table(
        columns=columns, filesystem=pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem())
    )


# the events table's inputs: the Spark runs before have filled its `lamport` and `vc` (10 GB at
# 10^7 x 256, beyond int32 list offsets when sorted), which the baselines compute themselves
EVENT_INPUTS = [
    f.name for f in tables.arrow_schema(tables.EVENTS) if f.name not in ("lamport", "vc")
]


def build_tables(raw: pa.Table, warehouse: Path) -> int:
    """`events` and `messages` Delta tables from raw generated rows, with Arrow (one pass)."""
    raw = raw.sort_by([("trace_id", "ascending"), ("process", "ascending"), ("seq", "ascending")])
    trace = raw.column("trace_id").to_numpy(zero_copy_only=False)
    proc_names = raw.column("process").to_numpy(zero_copy_only=False)
    seq = raw.column("seq").to_numpy()
    new_proc = np.ones(len(seq), bool)
    new_proc[1:] = (trace[1:] != trace[:-1]) | (proc_names[1:] != proc_names[:-1])
    new_event = new_proc.copy()
    new_event[1:] |= seq[1:] != seq[:-1]
    run = np.cumsum(new_event)
    lseq = run - np.maximum.accumulate(np.where(new_proc, run - 1, 0))
    # pidx: rank of the process name within its trace
    names = pd.DataFrame({"t": trace, "p": proc_names})
    pidx = (names.groupby("t")["p"].rank(method="dense") - 1).to_numpy().astype(np.int32)
    is_send = pc.equal(raw.column("kind"), "send").to_numpy(zero_copy_only=False)
    event_id = run - 1
    n_msgs = np.bincount(event_id, weights=is_send, minlength=run[-1]).astype(np.int32)
    first = np.flatnonzero(new_event)
    n = len(first)
    columns = {
        "trace_id": raw.column("trace_id").take(first),
        "process": raw.column("process").take(first),
        "pidx": pa.array(pidx[first]),
        "lseq": pa.array(lseq[first].astype(np.int64)),
        "kind": raw.column("kind").take(first),
        "ts": raw.column("ts").take(first),
        "label": pa.nulls(n, pa.string()),
        "n_msgs": pa.array(n_msgs),
        "seq": raw.column("seq").take(first),
        "source": pa.array(np.full(n, "generated", dtype=object)),
        "line": pa.array(np.arange(1, n + 1, dtype=np.int64)),
        "lamport": pa.nulls(n, pa.int64()),
        "vc": pa.nulls(n, pa.list_(pa.field("element", pa.int32()))),
    }
    # a column the generated rows have no value for (`recorded_vc`, a native log's own clock,
    # added after this benchmark was written) is null, of the table's own type
    schema = tables.arrow_schema(tables.EVENTS)
    events = pa.table({f.name: columns.get(f.name, pa.nulls(n, f.type)) for f in schema}).cast(
        schema
    )
    ends = pa.table(
        {
            "trace_id": raw.column("trace_id"),
            "msg_id": raw.column("msg_id"),
            "kind": raw.column("kind"),
            "process": raw.column("process"),
            "pidx": pa.array(pidx),
            "lseq": pa.array(lseq.astype(np.int64)),
            "ts": raw.column("ts"),
            "size_bytes": raw.column("size_bytes"),
        }
    )
    sends = ends.filter(is_send).rename_columns(
        ["trace_id", "msg_id", "kind", "src", "src_pidx", "send_lseq", "send_ts", "size_bytes"]
    )
    receives = (
        ends.filter(pc.equal(ends.column("kind"), "receive"))
        .drop_columns(["kind", "size_bytes"])
        .rename_columns(["trace_id", "msg_id", "dst", "dst_pidx", "recv_lseq", "recv_ts"])
    )
    pairs_table = sends.drop_columns(["kind"]).join(
        receives, ["trace_id", "msg_id"], join_type="left outer"
    )
    status = pc.if_else(pc.is_valid(pairs_table.column("recv_lseq")), "delivered", "in_flight")
    messages = pa.table(
        {
            name: pairs_table.column(name) if name in pairs_table.column_names else status
            for name in tables.arrow_schema(tables.MESSAGES).names
        }
    ).cast(tables.arrow_schema(tables.MESSAGES))
    _commit_as_a_run(warehouse, {"events": events, "messages": messages})
    return n


def _commit_as_a_run(warehouse: Path, written: dict[str, pa.Table]) -> None:
    """Write `written` as one run of the warehouse would: each commit carries the run's id
    and a `runs` row names the versions, so the clocks job's repair check (which refuses a
    table that another tool wrote) takes the tables as committed."""
    run_id = f"bench-build-{datetime.now(UTC):%Y%m%dT%H%M%S}-{hashlib.sha1(str(warehouse).encode()).hexdigest()[:8]}"
    props = CommitProperties(custom_metadata={delta.RUN_ID_KEY: run_id})
    versions = {}
    for name, table in written.items():
        path = str(warehouse / name)
        write_deltalake(path, table, mode="overwrite", commit_properties=props)
        versions[name] = DeltaTable(path).version()
    now = datetime.now(UTC)
    Ledger(str(warehouse)).append(
        {
            "id": run_id,
            "command": "bench-build",
            "start": now,
            "end": now,
            "inputs": [],
            "config": "{}",
            "table_versions": versions,
            "counts": {name: table.num_rows for name, table in written.items()},
            "written": sorted(written),
            "lineage": {},
            "stage_seconds": {},
            "mode": None,
            "note": "bench/clocks.py: events and messages built with Arrow",
        }
    )


def ping_pong_raw(messages: int) -> pa.Table:
    """Two processes bouncing one message: a causal chain as long as the trace."""
    i = np.arange(messages)
    src = np.where(i % 2 == 0, "a", "b")
    dst = np.where(i % 2 == 0, "b", "a")
    # each process alternates send / receive; seq = position on the process
    send_seq = i + 1  # the k-th message is the (k+1)-th event of its sender...
    recv_seq = i + 1  # ...and of its receiver (a: s r s r ..., b: r s r s ...)
    ids = np.char.add("m", i.astype(str)).astype(object)
    return pa.table(
        {
            "trace_id": pa.array(np.full(2 * messages, "ping-pong", dtype=object)),
            "process": pa.array(np.concatenate([src, dst]).astype(object)),
            "seq": pa.array(np.concatenate([send_seq, recv_seq]).astype(np.int64)),
            "kind": pa.array(np.array(["send"] * messages + ["receive"] * messages, object)),
            "msg_id": pa.array(np.concatenate([ids, ids])),
            "peer": pa.array(np.concatenate([dst, src]).astype(object)),
            "ts": pa.array(np.concatenate([2.0 * i, 2.0 * i + 1]).astype(float)),
            "size_bytes": pa.array(np.zeros(2 * messages, np.int64)),
        }
    )


# ------------------------------------------------------------------------- baselines


@njit(cache=True, nogil=True)  # without the GIL, the memory sampler thread sees its peak
def reference_kernel(
    pidx: np.ndarray, send_row: np.ndarray, start: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Kahn's topological sort of the event graph, then one sweep in that order."""
    events = pidx.shape[0]
    indegree = np.zeros(events, np.int64)
    receiver_of = np.full(events, -1, np.int64)  # a send's receive (multicast: linked below)
    next_receiver = np.full(events, -1, np.int64)
    for e in range(events):
        if e > start[pidx[e]]:
            indegree[e] += 1
        s = send_row[e]
        if s >= 0:
            indegree[e] += 1
            next_receiver[e] = receiver_of[s]
            receiver_of[s] = e
    order = np.empty(events, np.int64)
    head, tail = 0, 0
    for e in range(events):
        if indegree[e] == 0:
            order[tail] = e
            tail += 1
    end = np.empty(n, np.int64)
    for p in range(n):
        end[p] = start[p + 1]
    while head < tail:
        e = order[head]
        head += 1
        nxt = e + 1
        if nxt < end[pidx[e]]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                order[tail] = nxt
                tail += 1
        r = receiver_of[e]
        while r >= 0:
            indegree[r] -= 1
            if indegree[r] == 0:
                order[tail] = r
                tail += 1
            r = next_receiver[r]
    vc = np.empty((events, n), np.int32)
    lamport = np.empty(events, np.int64)
    for k in range(tail):
        e = order[k]
        p = pidx[e]
        s = send_row[e]
        first = e == start[p]
        lam = 0 if first else lamport[e - 1]
        if first:
            for j in range(n):
                vc[e, j] = 0
        else:
            for j in range(n):
                vc[e, j] = vc[e - 1, j]
        if s >= 0:
            for j in range(n):
                if vc[s, j] > vc[e, j]:
                    vc[e, j] = vc[s, j]
            if lamport[s] > lam:
                lam = lamport[s]
        vc[e, p] = e - start[p] + 1
        lamport[e] = lam + 1
    return vc, lamport


def kernel_inputs(events: pa.Table, messages: pa.Table) -> dict[str, np.ndarray | int]:
    events = events.sort_by([("pidx", "ascending"), ("lseq", "ascending")])
    pidx = events.column("pidx").to_numpy().astype(np.int64)
    lseq = events.column("lseq").to_numpy().astype(np.int64)
    n = int(pidx.max()) + 1
    start = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(pidx, minlength=n), out=start[1:])
    delivered = messages.filter(pc.equal(messages.column("status"), "delivered"))
    dst = delivered.column("dst_pidx").to_numpy().astype(np.int64)
    recv = delivered.column("recv_lseq").to_numpy().astype(np.int64)
    src = delivered.column("src_pidx").to_numpy().astype(np.int64)
    snd = delivered.column("send_lseq").to_numpy().astype(np.int64)
    send_proc = np.full(len(pidx), -1, np.int64)
    send_lseq = np.full(len(pidx), -1, np.int64)
    rows = start[dst] + recv - 1
    send_proc[rows] = src
    send_lseq[rows] = snd
    send_row = np.full(len(pidx), -1, np.int64)
    send_row[rows] = start[src] + snd - 1
    return {
        "events": events, "pidx": pidx, "lseq": lseq, "n": n, "start": start,
        "send_proc": send_proc, "send_lseq": send_lseq, "send_row": send_row,
    }  # fmt: skip


def baseline_single_process(warehouse: Path, out: Path) -> None:
    """Read both tables with delta-rs, run the reference kernel per trace, write events."""
    events = _read(warehouse / "events", EVENT_INPUTS).sort_by([("trace_id", "ascending")])
    messages = _read(warehouse / "messages").sort_by([("trace_id", "ascending")])
    parts = []
    ev_ids = events.column("trace_id").to_numpy(zero_copy_only=False)
    ms_ids = messages.column("trace_id").to_numpy(zero_copy_only=False)
    ev_cut = np.flatnonzero(np.r_[True, ev_ids[1:] != ev_ids[:-1], True])
    for a, b in itertools.pairwise(ev_cut):
        trace = ev_ids[a]
        lo, hi = np.searchsorted(ms_ids, trace, "left"), np.searchsorted(ms_ids, trace, "right")
        inputs = kernel_inputs(events.slice(a, b - a), messages.slice(lo, hi - lo))
        vc, lamport = reference_kernel(
            inputs["pidx"], inputs["send_row"], inputs["start"], inputs["n"]
        )
        vectors = _vector_chunks(vc)
        clocked = inputs["events"]
        parts.append(
            clocked.append_column("lamport", pa.array(lamport)).append_column("vc", vectors)
        )
    schema = tables.arrow_schema(tables.EVENTS)
    table = pa.concat_tables(parts)
    table = table.select([n for n in schema.names if n in table.column_names]).cast(
        pa.schema([schema.field(n) for n in schema.names if n in table.column_names])
    )
    write_deltalake(str(out), table, mode="overwrite")


_CHUNK_CELLS = 1 << 24  # vector entries per list chunk: int32 offsets (10^7 x 256 has 2.56 * 10^9)


def _vector_chunks(vc: np.ndarray) -> pa.ChunkedArray:
    """The rows of vc as list<int32> chunks viewing vc (no copy of the matrix)."""
    rows, n = vc.shape
    step = max(1, _CHUNK_CELLS // max(n, 1))
    kind = pa.list_(pa.field("element", pa.int32()))
    chunks = []
    for lo in range(0, rows, step):
        part = vc[lo : lo + step]
        offsets = pa.array(np.arange(0, len(part) * n + 1, n, dtype=np.int32))
        chunks.append(pa.ListArray.from_arrays(offsets, pa.array(part.reshape(-1)), type=kind))
    return pa.chunked_array(chunks, kind)


def clock_digests(vc: np.ndarray, lamport: np.ndarray) -> list[bytes]:
    """Digests of successive row chunks of (vc, lamport): equal lists mean equal clocks, and
    one result can be freed before the other is computed (two 10^7 x 256 copies need 20 GB)."""
    step = max(1, _CHUNK_CELLS // max(vc.shape[1], 1))
    out = []
    for lo in range(0, len(lamport), step):
        digest = hashlib.blake2b(np.ascontiguousarray(vc[lo : lo + step]).data)
        digest.update(np.ascontiguousarray(lamport[lo : lo + step]).data)
        out.append(digest.digest())
    return out


def pure_python_clocks(events: pa.Table, messages: pa.Table) -> int:
    """Dicts and lists: repeatedly advance any process whose next receive's send is done."""
    per_proc: dict[int, list[int]] = {}
    for p in events.column("pidx").to_pylist():
        per_proc[p] = per_proc.get(p, [0, 0])
        per_proc[p][1] += 1
    n = max(per_proc) + 1
    send_of = {}
    delivered = messages.filter(pc.equal(messages.column("status"), "delivered"))
    for d, r, s, sl in zip(
        delivered.column("dst_pidx").to_pylist(),
        delivered.column("recv_lseq").to_pylist(),
        delivered.column("src_pidx").to_pylist(),
        delivered.column("send_lseq").to_pylist(),
        strict=True,
    ):
        send_of[(d, r)] = (s, sl)
    clocks: dict[tuple[int, int], list[int]] = {}
    progress = True
    done = 0
    while progress:
        progress = False
        for p in range(n):
            at, total = per_proc.get(p, [0, 0])
            while at < total:
                key = (p, at + 1)
                send = send_of.get(key)
                if send is not None and send not in clocks:
                    break
                vc = list(clocks[(p, at)]) if at else [0] * n
                if send is not None:
                    vc = [max(a, b) for a, b in zip(vc, clocks[send], strict=True)]
                vc[p] = at + 1
                clocks[key] = vc
                at += 1
                done += 1
                progress = True
            if p in per_proc:
                per_proc[p][0] = at
    return done


# ------------------------------------------------------------------------- measuring


@dataclasses.dataclass
class Result:
    case: str
    impl: str
    events: int
    processes: int
    traces: int
    seconds: float
    peak_mb: float
    repeats: int
    run: str = ""  # when the run that measured it started (UTC)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10^5 events only")
    parser.add_argument("--only", default=None, help="comma-separated case names to run")
    parser.add_argument(
        "--no-distributed", action="store_true", help="skip the distributed engine's runs"
    )
    parser.add_argument(
        "--no-per-trace",
        action="store_true",
        help="skip the per-trace engine's runs (ratios then use an earlier run's, marked)",
    )
    parser.add_argument(
        "--output-parts",
        type=int,
        default=None,
        help="the per-trace engine's output_parts instead of the profile's (each part runs the "
        "kernel over the whole trace: 2 parts of 10^7 x 256 hold 2 x 10 GB of vectors at once)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="runs per measurement (median) instead of 3 up to 10^6 events and 1 above",
    )
    args = parser.parse_args()

    # a smoke run's figures do not replace the committed ones (bench/replay.py's --quick too)
    into = SCRATCH / "quick" if args.quick else HERE
    grid = [(100_000, 64)] if args.quick else [
        (1_000_000, 8), (1_000_000, 64), (1_000_000, 256), (10_000_000, 8), (10_000_000, 64),
        (10_000_000, 256),
    ]  # fmt: skip
    cases: list[tuple[str, Callable[[], pa.Table], int, int]] = []
    for events, processes in grid:
        spec = GeneratorSpec(processes=processes, events=events, seed=3)
        cases.append((f"all_to_all-{events}-{processes}", _generated(spec), processes, 1))
    if not args.quick:
        cases.append(("ping_pong-1000000msgs", lambda: ping_pong_raw(1_000_000), 2, 1))
        spec = GeneratorSpec(processes=1024, events=1_000_000, seed=4)
        cases.append(("all_to_all-1000000-1024", _generated(spec), 1024, 1))
        spec = GeneratorSpec(processes=8, events=1_000, traces=10_000, seed=5)
        cases.append(("many_traces-10000x1000", _generated(spec), 8, 10_000))
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c[0] in wanted]

    config = load_config()  # the embedded local profile, as users run it
    spark = build_session(config.spark)
    results: list[Result] = []
    started = datetime.now(UTC).isoformat(timespec="minutes")
    warm_up(spark, config)

    def record(case: str, impl: str, events: int, processes: int, traces: int,
               fn: Callable[[], object], repeats: int, tree: bool) -> None:  # fmt: skip
        seconds, peak = measure(fn, repeats, tree)
        results.append(
            Result(case, impl, events, processes, traces, seconds, peak, repeats, started)
        )
        save(results, into)
        print(f"{case:28} {impl:20} {seconds:9.2f} s  peak {peak:8.0f} MB", flush=True)

    for case, make_raw, processes, traces in cases:
        folder = SCRATCH / case
        shutil.rmtree(folder, ignore_errors=True)
        warehouse = folder / "warehouse"
        warehouse.mkdir(parents=True)
        events = build_tables(make_raw(), warehouse)
        pa.default_memory_pool().release_unused()  # set-up buffers are not the runs' memory
        repeats = args.repeats or (3 if events <= 1_000_000 else 1)
        per_group = events // traces

        def spark_clocks(engine: str, slab_events: int) -> Callable[[], object]:
            settings = dataclasses.replace(config.clocks, engine=engine, slab_events=slab_events)
            if args.output_parts is not None:
                settings = dataclasses.replace(settings, output_parts=args.output_parts)
            forced = dataclasses.replace(config, clocks=settings)

            def run() -> object:
                return run_job(
                    "clocks",
                    [clocks_stage()],
                    spark=spark,
                    config=forced,
                    warehouse=Warehouse(spark, warehouse, "deltalake"),
                )

            return run

        # the per-trace engine with the profile's slab_events (it sizes the batches of traces)
        if not args.no_per_trace:
            record(case, "spark per-trace", events, processes, traces,
                   spark_clocks("per_trace", config.clocks.slab_events), repeats, tree=True)  # fmt: skip
        # the distributed engine's first pass keeps only rows still needed (O(n * (n + entries))
        # per in-flight send and export), its other passes one slab's vectors per task: it runs
        # at every size. The baseline and the in-memory kernels hold one dense copy of the
        # matrix at a time (the kernels are compared by chunk digests): up to 3*10^9 vector
        # entries (12 GB of int32) on this 24 GiB machine shared with other work
        fits = events * processes <= 3_000_000_000
        if traces == 1 and not args.no_distributed:
            record(case, "spark distributed", events, processes, traces,
                   spark_clocks("distributed", max(1, per_group // 8)), repeats, tree=True)  # fmt: skip
        if fits:
            record(case, "baseline", events, processes, traces,
                   lambda: baseline_single_process(warehouse, folder / "baseline"), repeats,
                   tree=False)  # fmt: skip
        if traces == 1 and fits:
            loaded = kernel_inputs(_read(warehouse / "events", EVENT_INPUTS),
                                   _read(warehouse / "messages"))  # fmt: skip
            kernel_args = (loaded["pidx"], loaded["lseq"], loaded["send_proc"],
                           loaded["send_lseq"], np.full(len(loaded["pidx"]), -1), loaded["n"])  # fmt: skip
            ours = group_clocks(*kernel_args)  # also warms the JIT
            expected = clock_digests(ours.vc, ours.lamport)
            del ours  # never two dense copies at once
            theirs = reference_kernel(loaded["pidx"], loaded["send_row"], loaded["start"],
                                      loaded["n"])  # fmt: skip
            assert clock_digests(*theirs) == expected, f"{case}: kernel and reference differ"
            del theirs
            record(case, "kernel", events, processes, traces,
                   lambda: group_clocks(*kernel_args), 3, tree=False)  # fmt: skip
            record(case, "reference kernel", events, processes, traces,
                   lambda: reference_kernel(loaded["pidx"], loaded["send_row"], loaded["start"],
                                            loaded["n"]), 3, tree=False)  # fmt: skip
            if events * processes > DENSE_MAX_CELLS:
                # what the engine runs for a unit this large (clocks.units_kernel.units_clocks_at):
                # rows kept only while needed; here every row is wanted, as in one part
                every = np.arange(len(loaded["pidx"]))
                rolled = export_clocks(*kernel_args, Seeds.none(loaded["n"]), every)
                assert clock_digests(rolled.vc, rolled.lamport) == expected, case
                del rolled
                record(case, "rolling kernel", events, processes, traces,
                       lambda: export_clocks(*kernel_args, Seeds.none(loaded["n"]), every), 3,
                       tree=False)  # fmt: skip
            if events <= 1_000_000 and processes <= 64:
                ev, ms = _read(warehouse / "events", EVENT_INPUTS), _read(warehouse / "messages")
                record(case, "pure python", events, processes, traces,
                       lambda: pure_python_clocks(ev, ms), 1, tree=False)  # fmt: skip
            del loaded, kernel_args
        shutil.rmtree(folder, ignore_errors=True)
    spark.stop()
    save(results, into)
    print(f"wrote {into / 'clocks.md'}")
    return 0


def warm_up(spark: SparkSession, config: Config) -> None:
    """Both engines once on a small trace, not timed: the first job of a process pays the
    JVM's start (class loading, JIT of the readers and writers) and the Python workers'
    imports, about 5-25 s that would land on whichever case runs first."""
    folder = SCRATCH / "warm-up"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "warehouse").mkdir(parents=True)
    build_tables(
        _generated(GeneratorSpec(processes=8, events=20_000, seed=1))(), folder / "warehouse"
    )
    began = time.perf_counter()
    for engine, slab_events in (("per_trace", config.clocks.slab_events), ("distributed", 5_000)):
        settings = dataclasses.replace(config.clocks, engine=engine, slab_events=slab_events)
        run_job(
            "clocks",
            [clocks_stage()],
            spark=spark,
            config=dataclasses.replace(config, clocks=settings),
            warehouse=Warehouse(spark, folder / "warehouse", "deltalake"),
        )
    print(f"warm-up (not timed): {time.perf_counter() - began:.1f} s", flush=True)
    shutil.rmtree(folder, ignore_errors=True)


def _generated(spec: GeneratorSpec) -> Callable[[], pa.Table]:
    def make() -> pa.Table:
        path = SCRATCH / "raw.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        generate_reference(spec, path)
        return pq.read_table(path)

    return make


def save(results: list[Result], into: Path = HERE) -> None:
    """Write this run's results into folder `into` (clocks.json, clocks.md), keeping earlier
    runs' results for (case, impl) not re-run here."""
    earlier: list[dict] = []
    path = into / "clocks.json"
    if path.exists():
        rerun = {(r.case, r.impl) for r in results}
        earlier = [
            r
            for r in json.loads(path.read_text())["results"]
            if (r["case"], r["impl"]) not in rerun
        ]
    payload = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}",
        "results": earlier + [dataclasses.asdict(r) for r in results],
    }
    into.mkdir(parents=True, exist_ok=True)
    (into / "clocks.json").write_text(json.dumps(payload, indent=1) + "\n")
    markdown = into / "clocks.md"
    # hand-written notes below the marker (runs made outside this script) are kept
    notes = markdown.read_text().partition(NOTES_MARKER)[2] if markdown.exists() else ""
    markdown.write_text(render(payload) + (NOTES_MARKER + notes if notes else ""))


def render(payload: dict) -> str:
    rows = [Result(**r) for r in payload["results"]]
    lines = [
        "# Clocks benchmark",
        "",
        f"Run {payload['when']} on {payload['machine']} by `bench/clocks.py`.",
        "Medians (3 repeats up to 10^6 events, 1 above, unless a run says --repeats). Ratios are same-run: the",
        "baseline's time over the engine's (above 1: the engine is faster). A `--only`",
        "run keeps the results it did not re-measure; `run` says which run measured each",
        "case (several runs: a ratio across runs is marked *).",
        "",
        "| run | case | events | n | per-trace s | distributed s | baseline s | baseline / per-trace "
        "| distributed / per-trace | kernel Mev/s | reference Mev/s | kernel / reference "
        "| rolling kernel Mev/s | pure Python s | traces/s | per-trace peak MB "
        "| distributed peak MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in dict.fromkeys(r.case for r in rows):
        got = {r.impl: r for r in rows if r.case == case}
        if "spark per-trace" not in got:
            continue
        base = got["spark per-trace"]
        runs = sorted({r.run for r in got.values()})

        def s(impl: str) -> str:
            return f"{got[impl].seconds:.2f}" if impl in got else "-"

        def ratio(a: str, b: str) -> str:
            if a not in got or b not in got:
                return "-"
            across = "*" if got[a].run != got[b].run else ""
            return f"{got[a].seconds / got[b].seconds:.2f}{across}"

        def peak(impl: str) -> str:
            return f"{got[impl].peak_mb:.0f}" if impl in got else "-"

        def rate(impl: str) -> str:
            return f"{base.events / got[impl].seconds / 1e6:.1f}" if impl in got else "-"

        kernel_ratio = (
            f"{got['reference kernel'].seconds / got['kernel'].seconds:.2f}"
            if "kernel" in got and "reference kernel" in got
            else "-"
        )
        lines.append(
            f"| {' / '.join(runs)} | {case} | {base.events:,} | {base.processes} | {s('spark per-trace')} "
            f"| {s('spark distributed')} | {s('baseline')} | {ratio('baseline', 'spark per-trace')} "
            f"| {ratio('spark distributed', 'spark per-trace')} | {rate('kernel')} "
            f"| {rate('reference kernel')} | {kernel_ratio} | {rate('rolling kernel')} "
            f"| {s('pure python')} "
            f"| {base.traces / base.seconds:.0f} | {base.peak_mb:.0f} | {peak('spark distributed')} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
