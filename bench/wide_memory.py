"""Measure the peak memory of one clocks task and of detect's groups on one trace, by width.

    .venv/bin/python bench/wide_memory.py --stage clocks --shapes 4000x2000,40000x2000
    .venv/bin/python bench/wide_memory.py --stage clocks --shapes 2100000x64 --wanted 0.5
    .venv/bin/python bench/wide_memory.py --stage clocks --shapes 2000000x64 --lamport-only
    .venv/bin/python bench/wide_memory.py --stage detect --parts violations --server \
        --shapes 20000x10000
    .venv/bin/python bench/wide_memory.py --stage detect --parts crowns,chains \
        --shapes 400000x20000
    .venv/bin/python bench/wide_memory.py --commands 2000,10000,20000

A shape is EVENTSxPROCESSES: one generated trace of EVENTS / 2 point-to-point
messages between random pairs of PROCESSES (`--server`: from random processes to
process 0), lognormal(0, 1) latencies, no loss, every event a send or a receive.
Each measurement runs in a fresh Python process: it warms every kernel it will
call up on a small trace (compiled, or loaded from Numba's disk cache), resets
the peak resident set to the current one (/proc/self/clear_refs, Linux), builds
the trace as the Arrow group the UDF gets, runs the UDF's body and reads the peak
(VmHWM). The peak less the resident set before is the group's peak, set against
the size guard's estimate for the same group (docs/clocks.md, "How wide a
component one task takes"; docs/anomalies.md, "How large a trace one task takes").

- clocks: `per_trace._batch_clocks` (the kernel, the output vectors) and the
  task's `FileWriter.write` of the rows (Parquet), on the share `--wanted` of
  the events (1: the cogroup path's whole unit; below 1: one in-place part, the
  rolling kernel when it is large); `--lamport-only`: the path of a component
  too wide for vectors. Estimate `clocks.size.task_bytes` (`lamport_bytes`).
- detect: `violations.overtaken_at_destination` on the destination with the most
  receives (its vector clocks from the real kernel, computed in another process),
  `chains_of_trace` (a greedy causal chain of up to 100 messages, a query to each)
  and `crowns_of_trace` on the whole trace, each in its own process; estimate
  `anomalies.size.destination_bytes` and `trace_bytes`.

`--commands 2000,10000,20000` runs the real `causal-spark ingest`, `clocks` and
`detect` on one trace of N messages between random pairs of N processes (the
shape issue 17 reported), each sampled every 0.1 s: the largest private resident
memory of one Python worker and of the JVM, and of the whole process tree (PSS).

Figures go to bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa


def trace(events: int, n: int, seed: int = 7, server: bool = False) -> dict[str, np.ndarray]:
    """A trace of events / 2 messages among n processes: per message its ends' pidx and lseq.
    Between random pairs, or (server) from random processes to process 0."""
    rng = np.random.default_rng(seed)
    messages = events // 2
    if server:
        src = rng.integers(1, max(n, 2), messages)
        dst = np.zeros(messages, dtype=np.int64)
    else:
        src = rng.integers(0, n, messages)
        dst = (src + rng.integers(1, max(n, 2), messages)) % n
    send_ts = np.sort(rng.uniform(0.0, max(messages / n, 1.0), messages))
    recv_ts = send_ts + rng.lognormal(0.0, 1.0, messages)
    pidx = np.concatenate([src, dst])
    ts = np.concatenate([send_ts, recv_ts])
    order = np.lexsort((ts, pidx))
    lseq = np.empty(len(order), np.int64)
    counts = np.bincount(pidx, minlength=n)
    starts = np.zeros(n, np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    lseq[order] = np.arange(len(order)) - np.repeat(starts, counts) + 1
    return {
        "pidx": pidx,
        "lseq": lseq,
        "ts": ts,
        "counts": counts,
        "src": src,
        "dst": dst,
        "send_lseq": lseq[:messages],
        "recv_lseq": lseq[messages:],
    }


def clocks_group(
    t: dict[str, np.ndarray], n: int, wanted: float, clocks: int = 2
) -> tuple[pa.Table, pa.Table]:
    """The per-trace engine's (events, links) group of one unit: `wanted` of its events,
    `clocks` as the plan chose (`clocks.size.VECTORS` ...)."""
    from causal_spark import columns as C
    from causal_spark.clocks import plan as P

    rows = len(t["pidx"])
    keep = (
        np.arange(rows)
        if wanted >= 1
        else np.flatnonzero(t["lseq"] <= np.ceil(t["counts"][t["pidx"]] * wanted))
    )
    messages = len(t["src"])
    kind = np.concatenate([np.zeros(messages, np.int8), np.ones(messages, np.int8)])
    events = pa.table(
        {
            P.UNIT_CODE: pa.array(np.zeros(len(keep), np.int32)),
            C.PIDX: pa.array(t["pidx"][keep].astype(np.int32)),
            C.LSEQ: pa.array(t["lseq"][keep]),
            P.KIND_CODE: pa.array(kind[keep]),
            C.TS: pa.array(t["ts"][keep]),
            C.LABEL: pa.nulls(len(keep), pa.string()),
            C.N_MSGS: pa.array(np.ones(len(keep), np.int32)),
            C.SEQ: pa.nulls(len(keep), pa.int64()),
            C.LINE: pa.array(np.arange(len(keep), dtype=np.int64)),
            P.SOURCE_CODE: pa.array(np.zeros(len(keep), np.int32)),
        }
    )
    width = len(str(n - 1))
    links = pa.table(
        {
            P.UNIT_CODE: pa.array(np.zeros(messages + n, np.int32)),
            C.PIDX: pa.array(np.concatenate([t["dst"], np.arange(n)]).astype(np.int32)),
            C.LSEQ: pa.array(np.concatenate([t["recv_lseq"], np.zeros(n, np.int64)])),
            P.PEER_PIDX: pa.array(
                np.concatenate([t["src"], np.zeros(n, np.int64)]).astype(np.int32)
            ),
            P.PEER_LSEQ: pa.array(np.concatenate([t["send_lseq"], np.zeros(n, np.int64)])),
            C.TRACE_ID: pa.array([None] * messages + ["wide"] * n, pa.string()),
            P.N_PROCS: pa.array([None] * messages + [n] * n, pa.int32()),
            P.PROC_EVENTS: pa.array([None] * messages + t["counts"].tolist(), pa.int64()),
            C.PROCESS: pa.array([None] * messages + [f"P{p:0{width}d}" for p in range(n)]),
            C.SOURCE: pa.array([None] * messages + ["wide.jsonl"] * n, pa.string()),
            P.SOURCE_CODE: pa.array([None] * messages + [0] * n, pa.int32()),
            P.CLOCKS: pa.array([None] * messages + [clocks] * n, pa.int8()),
        }
    )
    return events, links


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise OSError(f"no {field} in /proc/self/status")


def _start() -> int:
    """The resident memory now, with the peak (VmHWM) reset to it (Linux >= 4.0), so that
    transient memory before the group (imports, warm-up, the inputs' making) does not hide
    the group's own peak."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _status("VmRSS:")


def _peak_since(start: int) -> int:
    return _status("VmHWM:") - start


def measure_clocks(events: int, n: int, wanted: float, lamport_only: bool) -> dict[str, object]:
    from causal_spark.clocks.per_trace import _batch_clocks
    from causal_spark.clocks.size import LAMPORT_ONLY, VECTORS, lamport_bytes, task_bytes
    from causal_spark.clocks.units_kernel import units_clocks_at
    from causal_spark.sinks import FileWriter

    clocks = LAMPORT_ONLY if lamport_only else VECTORS

    with tempfile.TemporaryDirectory() as folder:
        writer = FileWriter("events", folder)
        # every kernel path compiled first: dense, rolling (a part of a unit made to take
        # it), Lamport only
        warm = trace(4000, 4)
        for mode in (VECTORS, LAMPORT_ONLY):
            writer.write(_batch_clocks(*clocks_group(warm, 4, 1.0, mode)))
        units_clocks_at(np.array([0, 4000]), np.array([0, 4]), warm["counts"],
                        np.full(4000, -1), np.arange(100), dense_max_cells=0)  # fmt: skip
        before = _start()
        t = trace(events, n)
        group = clocks_group(t, n, wanted, clocks)
        began = time.perf_counter()
        out = _batch_clocks(*group)
        writer.write(out)
        seconds = time.perf_counter() - began
        peak = _peak_since(before)
    rows = group[0].num_rows
    return {
        "stage": "clocks:lamport" if lamport_only else "clocks",
        "events": events,
        "n": n,
        "wanted_rows": rows,
        "seconds": round(seconds, 2),
        "peak_bytes": peak,
        "estimate_bytes": lamport_bytes(events, n) if lamport_only else task_bytes(events, n, rows),
    }


def _delivered(t: dict[str, np.ndarray], at: np.ndarray | None = None) -> pa.Table:
    from causal_spark import columns as C

    rows = np.arange(len(t["src"])) if at is None else at
    ids = np.array([f"m{i}" for i in rows])
    return pa.table(
        {
            C.TRACE_ID: pa.array(["wide"] * len(rows)),
            C.MSG_ID: pa.array(ids),
            C.SRC: pa.array([f"P{p}" for p in t["src"][rows]]),
            C.DST: pa.array([f"P{p}" for p in t["dst"][rows]]),
            C.SRC_PIDX: pa.array(t["src"][rows]),
            C.DST_PIDX: pa.array(t["dst"][rows]),
            C.SEND_LSEQ: pa.array(t["send_lseq"][rows]),
            C.RECV_LSEQ: pa.array(t["recv_lseq"][rows]),
        }
    )


def measure_detect(events: int, n: int, part: str, server: bool) -> dict[str, object]:
    from causal_spark.anomalies import size
    from causal_spark.anomalies.crowns import crowns_of_trace
    from causal_spark.anomalies.violations import chains_of_trace, overtaken_at_destination

    if part == "violations":
        small = trace(40, 4)
        overtaken_at_destination(*_destination_group(small, 4, 40))
        with tempfile.TemporaryDirectory() as folder:
            # the group's clocks come from a whole trace's vectors: another process computes
            # them, so that their peak is not this one's
            subprocess.run(
                [sys.executable, __file__, "--write-group", folder, "--one", f"{events}x{n}"]
                + (["--server"] if server else []),
                check=True,
            )
            before = _start()
            receives = pa.ipc.open_file(f"{folder}/receives").read_all()
            received = pa.ipc.open_file(f"{folder}/received").read_all()
        began = time.perf_counter()
        overtaken_at_destination(receives, received)
        estimate = size.destination_bytes(received.num_rows, n)
        group_rows = received.num_rows
    else:
        small = _delivered(trace(2000, 4))  # with crowns and chains: every kernel compiled
        if part == "chains":
            chains_of_trace(small, _overtaken(small))
        else:
            crowns_of_trace(small, 1000)
        before = _start()
        delivered = _delivered(trace(events, n, server=server))
        began = time.perf_counter()
        if part == "chains":
            chains_of_trace(delivered, _overtaken(delivered))
        else:
            crowns_of_trace(delivered, 20_000_000)
        estimate = size.trace_bytes(delivered.num_rows, n, 1)
        group_rows = delivered.num_rows
    seconds = time.perf_counter() - began
    return {
        "stage": f"detect:{part}",
        "events": events,
        "n": n,
        "server": server,
        "group_rows": group_rows,
        "seconds": round(seconds, 2),
        "peak_bytes": _peak_since(before),
        "estimate_bytes": estimate,
    }


def _destination_group(t: dict[str, np.ndarray], n: int, events: int) -> tuple[pa.Table, pa.Table]:
    """The violations UDF's (receives, received) group of the busiest destination."""
    from causal_spark.anomalies.violations import KNOWS_DST

    flat, at = _destination_clocks(t, n, events)
    received = _delivered(t, at)
    received = received.append_column(KNOWS_DST, pa.nulls(received.num_rows, pa.int64()))
    return _receives(received, flat.reshape(len(at), n)), received


def write_group(folder: str, events: int, n: int, server: bool) -> None:
    for name, table in zip(
        ("receives", "received"),
        _destination_group(trace(events, n, server=server), n, events),
        strict=True,
    ):
        with pa.ipc.new_file(f"{folder}/{name}", table.schema) as sink:
            sink.write_table(table)


def _destination_clocks(
    t: dict[str, np.ndarray], n: int, events: int
) -> tuple[np.ndarray, np.ndarray]:
    """(the vector clocks of the busiest destination's receives, flat; its messages)."""
    from causal_spark.clocks.kernel import vector_clocks

    messages = len(t["src"])
    order = np.lexsort((t["lseq"], t["pidx"]))
    key = t["pidx"][order] * (events + 1) + t["lseq"][order]
    send_pidx = np.full(2 * messages, -1, np.int64)
    send_lseq = np.full(2 * messages, -1, np.int64)
    receive_rows = np.searchsorted(key, t["dst"] * (events + 1) + t["recv_lseq"])
    send_pidx[receive_rows] = t["src"]
    send_lseq[receive_rows] = t["send_lseq"]
    vc, _ = vector_clocks(t["pidx"][order], t["lseq"][order], send_pidx, send_lseq, n)
    busiest = int(np.bincount(t["dst"], minlength=n).argmax())
    at = np.flatnonzero(t["dst"] == busiest)
    at = at[np.argsort(t["recv_lseq"][at])]
    return vc[receive_rows[at]].reshape(-1).copy(), at


def _receives(received: pa.Table, vc: np.ndarray) -> pa.Table:
    from causal_spark import columns as C
    from causal_spark._arrow import list_matrix

    return pa.table(
        {
            C.TRACE_ID: received.column(C.TRACE_ID),
            C.DST_PIDX: received.column(C.DST_PIDX),
            C.LSEQ: received.column(C.RECV_LSEQ),
            C.VC: list_matrix(vc),
        }
    )


def _overtaken(delivered: pa.Table) -> pa.Table:
    """Causal rows whose chains the kernel must find: a greedy causal chain m0, m1, ...
    (m_i+1 is the first message its receiver sends after receiving m_i), up to 100 long,
    and one row per m_i asking for a path from send(m0) to send(m_i)."""
    from causal_spark import columns as C
    from causal_spark.anomalies.violations import OVERTAKEN_SCHEMA, OVERTAKING_PIDX, OVERTAKING_SEND
    from causal_spark.tables import to_arrow

    src = delivered.column(C.SRC_PIDX).to_numpy()
    dst = delivered.column(C.DST_PIDX).to_numpy()
    send = delivered.column(C.SEND_LSEQ).to_numpy()
    recv = delivered.column(C.RECV_LSEQ).to_numpy()
    by_sender = np.lexsort((send, src))
    chain = [0]
    while len(chain) < 101:
        m = chain[-1]
        lo = np.searchsorted(src[by_sender] * (1 << 40) + send[by_sender],
                             dst[m] * (1 << 40) + recv[m])  # fmt: skip
        if lo >= len(by_sender) or src[by_sender[lo]] != dst[m]:
            break
        chain.append(int(by_sender[lo]))
    rows = len(chain) - 1
    at = pa.array(np.array(chain[1:], np.int64))
    first = pa.array(np.zeros(rows, np.int64))
    return pa.table(
        {
            C.TRACE_ID: delivered.column(C.TRACE_ID).take(at),
            C.KIND: pa.array(["causal"] * rows),
            C.DST: delivered.column(C.DST).take(at),
            C.SRC: delivered.column(C.SRC).take(at),
            "overtaken_msg": delivered.column(C.MSG_ID).take(first),
            "overtaking_msg": delivered.column(C.MSG_ID).take(at),
            "overtaking_src": delivered.column(C.SRC).take(at),
            C.SRC_PIDX: delivered.column(C.SRC_PIDX).take(first),
            C.SEND_LSEQ: delivered.column(C.SEND_LSEQ).take(first),
            OVERTAKING_PIDX: delivered.column(C.SRC_PIDX).take(at),
            OVERTAKING_SEND: delivered.column(C.SEND_LSEQ).take(at),
        },
        schema=to_arrow(OVERTAKEN_SCHEMA),
    )


# ---------------------------------------------------------------------------------------------
# the real commands on one wide trace (--commands)


def write_wide_log(path: str, n: int, messages: int, seed: int = 7) -> None:
    """One trace of `messages` messages between random pairs of n processes, as JSON Lines
    (process, kind, msg_id, peer, ts; each process's rows in time order)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, messages)
    dst = (src + rng.integers(1, n, messages)) % n
    send_ts = np.sort(rng.uniform(0.0, messages / n * 10, messages))
    recv_ts = send_ts + rng.lognormal(0.0, 1.0, messages)
    rows = [(int(src[i]), float(send_ts[i]), "send", i, int(dst[i])) for i in range(messages)]
    rows += [(int(dst[i]), float(recv_ts[i]), "receive", i, int(src[i])) for i in range(messages)]
    rows.sort(key=lambda r: (r[0], r[1]))
    width = len(str(n - 1))
    with open(path, "w") as out:
        for p, ts, kind, i, peer in rows:
            record = {"trace_id": "wide", "process": f"P{p:0{width}d}", "kind": kind,
                      "msg_id": f"m{i}", "peer": f"P{peer:0{width}d}", "ts": round(ts, 6)}  # fmt: skip
            out.write(json.dumps(record) + "\n")


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _field(path: str, name: str) -> int:
    try:
        with open(path) as text:
            for line in text:
                if line.startswith(name):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _kind(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            command = cmdline.read().decode(errors="replace")
    except OSError:
        return "gone"
    if command.split("\0")[0].endswith("java"):
        return "jvm"
    return "worker" if "pyspark.daemon" in command or "pyspark.worker" in command else "other"


def sampled(command: list[str]) -> dict[str, object]:
    """Run `command`, sampling its process tree every 0.1 s: the largest private (anonymous)
    resident memory of one Python worker and of the JVM, and the largest total PSS (MiB)."""
    began = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = {"worker": 0, "jvm": 0, "total_pss": 0}
    while child.poll() is None:
        total = 0
        for pid in _tree(child.pid):
            total += _field(f"/proc/{pid}/smaps_rollup", "Pss:")
            kind = _kind(pid)
            if kind in peak:
                peak[kind] = max(peak[kind], _field(f"/proc/{pid}/status", "RssAnon:"))
        peak["total_pss"] = max(peak["total_pss"], total)
        time.sleep(0.1)
    return {
        "exit": child.returncode,
        "seconds": round(time.perf_counter() - began, 1),
        **{f"{k}_mib": round(v / 2**20) for k, v in peak.items()},
    }


def run_commands(processes: list[int], conf: str | None) -> None:
    """For each n: a trace of n messages among n processes, then `causal-spark ingest`,
    `clocks` and `detect` on a fresh warehouse, each sampled; one JSON line per stage."""
    binary = os.path.join(os.path.dirname(sys.executable), "causal-spark")
    for n in processes:
        with tempfile.TemporaryDirectory() as folder:
            log = os.path.join(folder, "wide.jsonl")
            write_wide_log(log, n, n)
            warehouse = os.path.join(folder, "warehouse")
            common = ["--warehouse", warehouse, "-q"] + (["--conf", conf] if conf else [])
            for stage in ("ingest", "clocks", "detect"):
                given = [log] if stage == "ingest" else []
                row = sampled([binary, stage, *given, *common])
                print(json.dumps({"processes": n, "input_bytes": os.path.getsize(log),
                                  "stage": stage, **row}), flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=("clocks", "detect"), default="clocks")
    parser.add_argument("--shapes", default="4000x2000,40000x2000")
    parser.add_argument("--wanted", type=float, default=1.0)
    parser.add_argument("--parts", default="violations,chains,crowns")
    parser.add_argument("--server", action="store_true", help="every message to one process")
    parser.add_argument("--lamport-only", action="store_true", help="clocks: no vectors")
    parser.add_argument(
        "--commands", default="", help="N,N...: the real commands on a trace of N processes"
    )
    parser.add_argument("--conf", default=None, help="--commands: the profile (default: local)")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    parser.add_argument("--write-group", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.commands:
        run_commands([int(n) for n in args.commands.split(",")], args.conf)
        return 0
    if args.one:
        events, n = (int(v) for v in args.one.split("x"))
        if args.write_group:
            write_group(args.write_group, events, n, args.server)
            return 0
        if args.stage == "clocks":
            row = measure_clocks(events, n, args.wanted, args.lamport_only)
        else:
            row = measure_detect(events, n, args.parts, args.server)
        print(json.dumps(row))
        return 0
    parts = args.parts.split(",") if args.stage == "detect" else [""]
    for shape in args.shapes.split(","):
        for part in parts:
            command = [sys.executable, __file__, "--one", shape, "--stage", args.stage,
                       "--wanted", str(args.wanted), "--parts", part]  # fmt: skip
            command += ["--server"] if args.server else []
            command += ["--lamport-only"] if args.lamport_only else []
            out = subprocess.run(command, capture_output=True, text=True, check=False)
            if out.returncode:
                tail = out.stderr.strip().splitlines()[-1:]
                print(
                    json.dumps({"stage": args.stage, "part": part, "shape": shape, "error": tail})
                )
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row["estimate_over_peak"] = round(
                int(row["estimate_bytes"]) / max(int(row["peak_bytes"]), 1), 2
            )
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
