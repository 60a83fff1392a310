"""Measure the peak memory of one (trace, protocol) replay group, to calibrate the size guard.

    .venv/bin/python bench/replay_memory.py --messages 100000,400000 --processes 16
    .venv/bin/python bench/replay_memory.py --messages 20000 --processes 200 --protocols rst

Each measurement runs in a fresh Python process: it warms the protocol's loop up
(Numba disk cache), notes its peak RSS, builds one generated all-to-all trace as
the Arrow group the UDF gets (lognormal(0, 1) latencies, no loss), runs the UDF's
kernel (`replay._replay_group`: layout, loop, figures, verification, output
batches) and notes the peak RSS again. The difference is the group's peak, set
against `replay_size.estimate_run_bytes` for the same group (docs/replay.md,
"How big a trace one worker replays"). Figures go to bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa


def group(n: int, messages: int, protocol: str, seed: int = 7) -> pa.Table:
    """One generated trace of `messages` point-to-point messages among n processes."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, messages)
    dst = (src + rng.integers(1, max(n, 2), messages)) % n
    send_ts = np.sort(rng.uniform(0.0, messages / n, messages))
    recv_ts = send_ts + rng.lognormal(0.0, 1.0, messages)
    pidx = np.concatenate([src, dst])
    ts = np.concatenate([send_ts, recv_ts])
    kind = np.array(["send"] * messages + ["receive"] * messages)
    peer = np.concatenate([dst, src])
    code = np.concatenate([np.arange(messages), np.arange(messages)])
    order = np.lexsort((ts, pidx))
    lseq = np.empty(len(order), np.int64)
    starts = np.searchsorted(pidx[order], np.arange(n))
    lseq[order] = np.arange(len(order)) - np.repeat(starts, np.bincount(pidx, minlength=n)) + 1
    lamport = np.empty(len(ts), np.int64)
    lamport[np.argsort(ts, kind="stable")] = np.arange(1, len(ts) + 1)
    ids = np.array([f"m{i}" for i in range(messages)])
    rows = len(ts)
    return pa.table(
        {
            "trace_id": pa.array(["g"] * rows),
            "protocol": pa.array([protocol] * rows),
            "process": pa.array([f"P{p}" for p in pidx]),
            "pidx": pa.array(pidx.astype(np.int32)),
            "lseq": pa.array(lseq),
            "kind": pa.array(kind),
            "ts": pa.array(ts),
            "lamport": pa.array(lamport),
            "msg_id": pa.array(ids[code]),
            "peer": pa.array(peer.astype(np.int32)),
            "peer_lseq": pa.array(  # a receive's send lseq (replay.program_rows)
                np.concatenate([np.zeros(messages, np.int64), lseq[:messages]]),
                mask=np.arange(rows) < messages,
            ),
            "valid": pa.array(np.ones(rows, bool)),
        }
    )


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(n: int, messages: int, protocol: str) -> dict[str, object]:
    """In this process: the group's peak RSS over the warmed-up baseline."""
    from causal_spark.replay.adapter import _replay_group
    from causal_spark.replay.size import estimate_run_bytes, group_shape
    from causal_spark.replay.warmup import compile_protocol

    compile_protocol(protocol)
    table = group(n, 8, protocol)
    list(_replay_group(table, "nonselective", {}, 1.0, None))
    before = _rss()
    table = group(n, messages, protocol)
    began = time.perf_counter()
    batches = list(_replay_group(table, "nonselective", {}, 1.0, None))
    seconds = time.perf_counter() - began
    peak = _rss() - before
    run = batches[0].column("run")[0].as_py()
    shape = group_shape(table)
    return {
        "protocol": protocol,
        "n": n,
        "messages": messages,
        "rows": table.num_rows,
        "status": run["status"],
        "seconds": round(seconds, 2),
        "peak_bytes": peak,
        "estimate_bytes": estimate_run_bytes(shape, protocol),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", default="100000,400000")
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument(
        "--protocols", default="none,fifo,bss,ses,rst,mf,sa,sync,sequencer,lamport_total,skeen"
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.processes, int(args.messages), args.protocols)))
        return 0
    for protocol in args.protocols.split(","):
        for messages in (int(m) for m in args.messages.split(",")):
            out = subprocess.run(
                [sys.executable, __file__, "--one", "--processes", str(args.processes),
                 "--messages", str(messages), "--protocols", protocol],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if out.returncode:
                print(json.dumps({"protocol": protocol, "messages": messages,
                                  "error": out.stderr.strip().splitlines()[-1:]}))  # fmt: skip
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row["bytes_per_message"] = round(int(row["peak_bytes"]) / messages)
            row["estimate_over_peak"] = round(
                int(row["estimate_bytes"]) / max(int(row["peak_bytes"]), 1), 2
            )
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
