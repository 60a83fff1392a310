"""The replay UDF's kernel alone on one long trace: events per second and peak bytes per
message for every protocol, the reference engine beside it (issue 22's acceptance).

    .venv/bin/python bench/replay.py --kernel 1000000,10000000 --reference-at 1000000

(`bench/replay.py --kernel` runs `main` here.) Per trace length, one generated
all-to-all trace of 16 processes (`replay_rows.write_programs`: the generator's
kernel, lognormal(0, 1) latencies, no loss; the program rows the UDF would get,
kept under bench/out/replay/rows-<messages>-<n>.parquet). Per protocol, in a
fresh Python process (the protocol's loop loaded from the Numba cache first):

- `loop`: what one (trace, protocol) group costs the UDF: the rows taken as
  Arrow batches of 10 000 (`LayoutBuilder.add`), `finish`, `replay_compiled`, and
  the `deliveries` batches built (`replay._deliveries_batches`), not written.
  Its seconds leave out decoding the Parquet file (`phases.parquet`: the UDF
  gets its batches decoded); its peak includes the batches;
- `reference` (at the lengths in `--reference-at`): `replay_engine.build_trace`
  and `replay` on the same rows.

Events: the program's events, plus every message copy and control message put
on the network (copies posted and control messages the run counts). Peak: the
process's peak RSS (VmHWM, reset before the run) less its RSS before the rows
are read, per message copy of the trace. Statuses and verification must agree
between loop and reference (exit 3 otherwise). Writes bench/replay_kernel.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
# the reference engine the `reference` figures time lives in tests/oracles/replay/
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from replay_rows import read_batches, spec_for, write_programs

HERE = Path(__file__).resolve().parent
SCRATCH = HERE / "out" / "replay"
JSON = HERE / "replay_kernel.json"
PROCESSES = 16


def rows_file(messages: int, processes: int = PROCESSES) -> Path:
    """The program rows of the case, written once."""
    path = SCRATCH / f"rows-{messages}-{processes}.parquet"
    if not path.exists():
        began = time.perf_counter()
        part = path.with_suffix(".part")
        write_programs(part, spec_for(messages, processes))
        part.rename(path)
        print(f"rows of {messages:,} messages x {processes}: "
              f"{time.perf_counter() - began:.0f} s", flush=True)  # fmt: skip
    return path


def _memory() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("VmRSS", "VmHWM")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) * 1024
    return out


def _reset_peak() -> int:
    """Reset VmHWM to the current RSS; returns that RSS."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _memory()["VmRSS"]


def measure_loop(path: Path, name: str) -> dict[str, Any]:
    """The UDF's kernel on the rows of `path` under `name`, in this process."""
    from causal_spark.replay import adapter as R
    from causal_spark.replay.layout import LayoutBuilder
    from causal_spark.replay.run import replay_compiled
    from causal_spark.replay.warmup import compile_protocol

    compile_protocol(name)
    base = _reset_peak()
    began = time.perf_counter()
    builder = LayoutBuilder("g")
    reading = 0.0  # decoding Parquet: the UDF gets its batches decoded (Arrow IPC)
    batches = read_batches(path, name)
    while True:
        before = time.perf_counter()
        batch = next(batches, None)
        reading += time.perf_counter() - before
        if batch is None:
            break
        builder.add(batch)
    read = time.perf_counter()
    trace = builder.finish()
    del builder
    laid = time.perf_counter()
    run = replay_compiled(trace, name, {}, False, 1.0)
    ran = time.perf_counter()
    head = {"trace_id": "g", "protocol": name, "receive_mode": "nonselective"}
    rows = sum(batch.num_rows for batch in R._deliveries_batches(head, trace, run))
    done = time.perf_counter()
    peak = _memory()["VmHWM"] - base
    figures = run.figures
    events = int(trace.layout.ev_start[-1])
    return {
        "seconds": done - began - reading,
        "phases": {
            "parquet": reading,
            "add": read - began - reading,
            "finish": laid - read,
            "loop": ran - laid,
            "output": done - ran,
        },
        "events": events,
        "messages": trace.messages,
        "simulated": _simulated(events, figures),
        "peak_bytes": peak,
        "status": run.status,
        "verified": run.verified,
        "control_messages": figures["control_messages"],
        "held_back": figures["held_back"],
        "deliveries_rows": rows,
    }


def _simulated(events: int, figures: dict[str, Any]) -> int:
    """Program events + copies posted + control messages."""
    posted = int(figures["app_messages"] or 0) - int(figures["unsent"] or 0)
    return events + posted + int(figures["control_messages"] or 0)


def measure_reference(path: Path, name: str) -> dict[str, Any]:
    """The reference engine on the rows of `path` under `name`, in this process."""
    from causal_spark.replay.model import KIND_CODES
    from tests.oracles.replay.engine import build_trace, replay
    from tests.oracles.replay.protocols import protocol

    kinds = {code: kind for kind, code in KIND_CODES.items()}
    base = _reset_peak()
    began = time.perf_counter()
    table = pq.read_table(path)
    pidx = table.column("pidx").to_numpy().astype(np.int64)
    n = int(pidx.max()) + 1
    trace = build_trace(
        "g",
        [f"p{p:02d}" for p in range(n)],
        pidx,
        table.column("lseq").to_numpy().astype(np.int64),
        [kinds[k] for k in table.column("kind").to_numpy().tolist()],
        table.column("ts").to_numpy().astype(np.float64),
        table.column("lamport").to_numpy().astype(np.int64),
        table.column("msg_id").to_pylist(),
        table.column("peer").to_numpy().astype(np.int64),
    )
    del table
    run = replay(trace, protocol(name), {}, False, 1.0)
    done = time.perf_counter()
    peak = _memory()["VmHWM"] - base
    events = sum(len(kinds_of) for kinds_of in trace.kind)
    return {
        "seconds": done - began,
        "events": events,
        "messages": len(trace.msg_id),
        "simulated": _simulated(events, run.figures),
        "peak_bytes": peak,
        "status": run.status,
        "verified": run.verified,
        "control_messages": run.figures["control_messages"],
        "held_back": run.figures["held_back"],
    }


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, check=False, cwd=HERE)  # fmt: skip
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=False, cwd=HERE)  # fmt: skip
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def main(lengths: list[int], names: list[str], reference_at: set[int]) -> int:
    """Every protocol at every length, each in a fresh process; print and save the rows."""
    started = datetime.now(UTC).isoformat(timespec="minutes")
    commit = _commit()
    results: list[dict[str, Any]] = []
    disagree = []
    for messages in lengths:
        path = rows_file(messages)
        for name in names:
            impls = ["loop", *(["reference"] if messages in reference_at else [])]
            got: dict[str, dict[str, Any]] = {}
            for impl in impls:
                out = subprocess.run(
                    [sys.executable, __file__, impl, str(path), name],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                if out.returncode:
                    row: dict[str, Any] = {"error": out.stderr.strip().splitlines()[-3:]}
                else:
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                row.update(impl=impl, protocol=name, trace_messages=messages,
                           processes=PROCESSES, run=started, commit=commit)  # fmt: skip
                got[impl] = row
                results.append(row)
                _print(row)
                JSON.write_text(json.dumps(results, indent=1) + "\n")
            if len(got) == 2 and all("status" in r for r in got.values()):
                a, b = got["loop"], got["reference"]
                if (a["status"], a["verified"]) != (b["status"], b["verified"]):
                    disagree.append(f"{name} at {messages}: loop {a['status']} "
                                    f"{a['verified']}, reference {b['status']} {b['verified']}")  # fmt: skip
    print(f"wrote {JSON}")
    if disagree:
        print("STATUSES DISAGREE:\n  " + "\n  ".join(disagree), file=sys.stderr)
        return 3
    return 0


def _print(row: dict[str, Any]) -> None:
    if "error" in row:
        print(f"{row['protocol']:13} {row['impl']:9} {row['trace_messages']:>9}  ERROR "
              f"{row['error']}", flush=True)  # fmt: skip
        return
    rate = row["simulated"] / row["seconds"] if row["simulated"] else float("nan")
    print(f"{row['protocol']:13} {row['impl']:9} {row['trace_messages']:>9} "
          f"{row['seconds']:8.2f} s  {row['simulated'] / 1e6:7.2f} M events "
          f"{rate / 1e6:6.2f} M/s  peak {row['peak_bytes'] / row['trace_messages']:7.0f} "
          f"B/msg  {row['status']} verified={row['verified']}", flush=True)  # fmt: skip


if __name__ == "__main__":  # one measurement: IMPL PATH PROTOCOL
    impl, where, protocol_name = sys.argv[1:4]
    measure = measure_loop if impl == "loop" else measure_reference
    print(json.dumps(measure(Path(where), protocol_name)))
