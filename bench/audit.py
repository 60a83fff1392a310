"""The whole audit measured end to end, stage by stage, against a single-process pipeline.

    .venv/bin/pip install -e '.[bench]'
    flock /tmp/causal-heavy.lock .venv/bin/python bench/audit.py            # 10^5, 10^6, 10^7 events + 1 000 x 1 000
    flock /tmp/causal-heavy.lock .venv/bin/python bench/audit.py --quick    # 10^4, 10^5 + 10 x 1 000 (bench/out/audit/quick.*)
    .venv/bin/python bench/audit.py --sizes 1e6,1e7 --many 0 --repeats 3   # some cases, medians of 3
    .venv/bin/python bench/audit.py --format jsonl                          # JSON Lines input instead of Parquet

Cases: generated all-to-all traces of `--processes` (16) processes with lognormal(0, 1)
latencies: one trace of each of `--sizes` events, and `--many` (1 000) traces of 1 000
events. The real `causal-spark generate` writes them (a subprocess; cached under
bench/out/audit/gen, keyed by the parameters). Then, per case:

1. **The audit**: the real `causal-spark audit LOGS --warehouse W` as a subprocess (every
   stage, the default protocol set, the embedded default profile), in a fresh warehouse.
   Its stderr is read as it arrives: the `<stage>: started` and `<stage>: done in` lines
   (and `audit: starting Spark`, and `run ... committed in` on stdout) cut the run into
   phases: start-up (Python, imports), JVM start-up (the Spark session, the warehouse's
   lock and repair), ingest, clocks, detect, replay, compare, the commit, and the report
   and exit. A thread samples the subprocess's whole tree (driver, JVM, Python workers)
   every 50 ms: RSS (peak per phase) and CPU seconds (user + system, per phase: robust on
   a shared machine, where wall time is not). Rows per second: input rows for ingest,
   events for clocks and detect, messages x protocols for replay.
2. **The single-process pipeline** (`audit_baseline.py`), stage by stage in this process,
   timed the same way (this process's peak RSS and CPU): each stage reads the job's
   committed inputs and writes its own tables; they must equal the job's tables on the
   columns that baseline computes (`audit_baseline.COVERS`; sorted rows, per-column digests
   above 3 million rows): a difference stops the run with exit status 3. The ingest
   baseline is `bench/ingest_baseline.py`'s `ingest_single` ("baseline missing" until
   that module exists). Numba kernels are compiled (or loaded from the disk cache) before
   the baseline is timed; the job's stages pay that in their time.

An untimed warm-up (an audit and the baseline pipeline of a 1 000-event trace) runs
first, so that the first case does not pay for compiling the kernels into the disk cache.
Times, CPU seconds and rows/s are medians of `--repeats` runs; peaks the maximum. The
growth exponent of each phase's time is taken from 10^6 to 10^7 events (one trace), or
between the two largest one-trace sizes run. Results: bench/audit.md, bench/audit.json
(cases not re-run are kept) and bench/audit.png (time per phase against events, log-log).
Exit status: 0; 3 a baseline's table differs from the job's; 4 a job failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _measure import PeakMemory, TreeSampler
from audit_baseline import (
    COVERAGE_TEXT,
    COVERS,
    TableMismatch,
    compare_single,
    compare_table,
    detect_single,
    read_any,
    read_delta,
    replay_single,
)
from clocks import baseline_single_process

from causal_spark.config import Config, load_config

try:  # written on another branch; until it lands, ingest has no baseline
    from ingest_baseline import ingest_single
except ImportError:
    ingest_single = None

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCRATCH = HERE / "out" / "audit"
STAGES = ("ingest", "clocks", "detect", "replay", "compare")
STARTUP, JVM, BETWEEN, COMMIT, EXIT = (
    "start-up", "JVM start-up", "between stages", "commit", "report and exit",
)  # fmt: skip
PHASES = (STARTUP, JVM, *STAGES, BETWEEN, COMMIT, EXIT)
STAGE_LINE = re.compile(
    r"^\[\d\d:\d\d:\d\d\] (\w+): (started|done in ([\d.]+) s \(rows staged: (.*)\))$"
)
COMMITTED = re.compile(r"^run \S+ \(audit.*\) committed in ([\d.]+) s")


@dataclasses.dataclass(frozen=True)
class Case:
    events: int  # per trace
    traces: int
    processes: int
    fmt: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.traces}x{self.events}-p{self.processes}-{self.fmt}"

    @property
    def total_events(self) -> int:
        return self.events * self.traces

    @property
    def title(self) -> str:
        if self.traces == 1:
            return f"one trace of {self.events:,} events x {self.processes} processes ({self.fmt})"
        return (f"{self.traces:,} traces of {self.events:,} events x {self.processes} processes "
                f"({self.fmt})")  # fmt: skip


# ------------------------------------------------------------------------------ subprocesses


def _causal_spark() -> list[str]:
    script = Path(sys.executable).parent / "causal-spark"
    return [str(script)] if script.exists() else [sys.executable, "-m", "causal_spark.app.cli"]


def generated(case: Case) -> tuple[Path, int]:
    """The case's logs (generated once, by the real command) and their number of rows."""
    folder = SCRATCH / "gen" / f"{case.name}-s{case.seed}"
    meta = folder / "meta.json"
    if meta.exists():
        return folder / "logs", int(json.loads(meta.read_text())["input_rows"])
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cmd = [*_causal_spark(), "generate", "--out", str(folder / "logs"),
           "--processes", str(case.processes), "--events", str(case.events),
           "--traces", str(case.traces), "--seed", str(case.seed), "--format", case.fmt]  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise JobFailed(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    rows = _input_rows(folder / "logs", case.fmt)
    meta.write_text(json.dumps({"input_rows": rows, "command": cmd,
                                "seconds": round(time.perf_counter() - began, 1)}))  # fmt: skip
    print(
        f"{case.name}: generated {rows:,} rows in {time.perf_counter() - began:.0f} s", flush=True
    )
    return folder / "logs", rows


def _input_rows(logs: Path, fmt: str) -> int:
    if fmt == "parquet":
        return sum(pq.ParquetFile(p).metadata.num_rows for p in sorted(logs.rglob("*.parquet")))
    total = 0
    for path in sorted(logs.rglob("*.json*")):
        if path.name.startswith((".", "_")):  # Spark's .crc files and markers
            continue
        with path.open("rb") as f:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda f=f: f.read(1 << 24), b""))
    return total


class JobFailed(Exception):
    """A `causal-spark` subprocess exited with an error."""


@dataclasses.dataclass
class Phase:
    seconds: float
    cpu_s: float
    peak_mb: float
    rows: int | None = None
    rate: float | None = None  # rows per second


@dataclasses.dataclass
class AuditRun:
    seconds: float
    cpu_s: float  # sampled, whole tree
    peak_mb: float
    phases: dict[str, Phase]
    job_seconds: dict[str, float]  # each stage's own `done in`
    staged: dict[str, dict[str, int]]
    samples: int
    replay_statuses: str  # the job's own `replay: runs by status: ...` line


def run_audit(logs: Path, warehouse: Path, log: Path, protocols: str | None = None) -> AuditRun:
    """The real `causal-spark audit`, its phases measured from its progress lines;
    `protocols`: its `--protocols` (None: the default set)."""
    shutil.rmtree(warehouse, ignore_errors=True)
    cmd = [*_causal_spark(), "audit", str(logs), "--warehouse", str(warehouse)]
    if protocols:
        cmd += ["--protocols", protocols]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    began = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1)  # fmt: skip
    job_seconds: dict[str, float] = {}
    replay_line: list[str] = []
    staged: dict[str, dict[str, int]] = {}
    log.parent.mkdir(parents=True, exist_ok=True)
    with TreeSampler(proc.pid, 0.05) as sampler, log.open("w") as out:
        sampler.mark(STARTUP, at=began)
        lock = threading.Lock()

        def follow(stream: TextIO, name: str) -> None:
            for line in stream:
                text = line.rstrip("\n")
                with lock:
                    out.write(f"{time.monotonic() - began:9.3f} {name} {text}\n")
                if text.endswith("] audit: starting Spark"):
                    sampler.mark(JVM)
                elif (found := STAGE_LINE.match(text)) and found.group(1) in STAGES:
                    stage = found.group(1)
                    if found.group(2) == "started":
                        sampler.mark(stage)
                    else:
                        sampler.mark(COMMIT if stage == STAGES[-1] else BETWEEN)
                        job_seconds[stage] = float(found.group(3))
                        staged[stage] = _staged(found.group(4))
                elif COMMITTED.match(text):
                    sampler.mark(EXIT)
                elif text.startswith("replay: runs by status: "):
                    replay_line.append(text.removeprefix("replay: "))

        readers = [threading.Thread(target=follow, args=(proc.stderr, "err"), daemon=True),
                   threading.Thread(target=follow, args=(proc.stdout, "out"), daemon=True)]  # fmt: skip
        for reader in readers:
            reader.start()
        code = proc.wait()
        ended = time.monotonic()
        for reader in readers:
            reader.join()
    if code != 0:
        raise JobFailed(f"{' '.join(cmd)} exited {code}; its output: {log}\n"
                        + "".join(log.read_text().splitlines(True)[-30:]))  # fmt: skip
    phases: dict[str, Phase] = {}
    marks = sorted(sampler.marks, key=lambda m: m.at)
    last = sampler.samples[-1]
    for i, mark in enumerate(marks):
        end = marks[i + 1] if i + 1 < len(marks) else None
        stop = end.at if end else ended
        cpu_end = end.sample.cpu if end else last.cpu
        seconds = max(0.0, stop - mark.at)
        figure = phases.setdefault(mark.label, Phase(0.0, 0.0, 0.0))
        figure.seconds += seconds
        figure.cpu_s += max(0.0, cpu_end - mark.sample.cpu)
        figure.peak_mb = max(figure.peak_mb, sampler.peak_between(mark.at, stop) / 2**20)
    missing = [s for s in STAGES if s not in phases]
    if missing:
        raise JobFailed(f"no progress lines for {missing} in {log}")
    return AuditRun(
        seconds=ended - began,
        cpu_s=last.cpu,
        peak_mb=max(s.rss for s in sampler.samples) / 2**20,
        phases=phases,
        job_seconds=job_seconds,
        staged=staged,
        samples=len(sampler.samples),
        replay_statuses=replay_line[0] if replay_line else "",
    )


def _staged(text: str) -> dict[str, int]:
    out = {}
    for part in text.split(", "):
        name, _, count = part.rpartition(" ")
        if name and count.isdigit():
            out[name] = int(count)
    return out


# ------------------------------------------------------------------------------ the baseline


@dataclasses.dataclass
class Baseline:
    stage: str
    status: str  # ok | baseline missing
    seconds: float | None = None
    cpu_s: float | None = None
    peak_mb: float | None = None
    start_mb: float | None = None
    checked: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    runs: list[float] = dataclasses.field(default_factory=list)


def _free() -> None:
    gc.collect()
    pa.default_memory_pool().release_unused()


def baseline_steps(logs: Path, warehouse: Path, out: Path,
                   config: Config) -> list[tuple[str, Callable[[], object] | None, Path]]:  # fmt: skip
    """(stage, the single-process step or None when missing, the folder of its tables)."""
    ingest = (lambda: ingest_single([str(logs)], out / "ingest")) if ingest_single else None
    return [
        ("ingest", ingest, out / "ingest"),
        ("clocks", lambda: baseline_single_process(warehouse, out / "clocks" / "events"),
         out / "clocks"),
        ("detect", lambda: detect_single(warehouse, out / "detect", config), out / "detect"),
        ("replay", lambda: replay_single(warehouse, out / "replay", config), out / "replay"),
        ("compare", lambda: compare_single(warehouse, out / "compare"), out / "compare"),
    ]  # fmt: skip


def run_baseline(logs: Path, warehouse: Path, out: Path, config: Config, repeats: int,
                 check: bool = True) -> dict[str, Baseline]:  # fmt: skip
    """Each stage's single-process step, timed `repeats` times, then its tables checked."""
    results: dict[str, Baseline] = {}
    me = psutil.Process()
    for stage, step, folder in baseline_steps(logs, warehouse, out, config):
        if step is None:
            results[stage] = Baseline(stage, "baseline missing")
            continue
        figure = Baseline(stage, "ok")
        cpus, peaks = [], []
        for _ in range(repeats):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            _free()
            figure.start_mb = me.memory_info().rss / 2**20
            cpu0 = me.cpu_times()
            with PeakMemory(tree=False) as memory:
                began = time.perf_counter()
                step()
                figure.runs.append(time.perf_counter() - began)
            cpu1 = me.cpu_times()
            cpus.append((cpu1.user + cpu1.system) - (cpu0.user + cpu0.system))
            peaks.append(memory.peak / 2**20)
        figure.seconds = statistics.median(figure.runs)
        figure.cpu_s = statistics.median(cpus)
        figure.peak_mb = max(peaks)
        _free()
        if check:
            for table, columns in COVERS[stage].items():
                done = compare_table(
                    table,
                    lambda cols, filters=None, t=table: read_delta(warehouse / t, cols, filters),
                    lambda cols, filters=None, t=table: read_any(folder / t, cols, filters),
                    columns,
                )
                figure.checked.append(dataclasses.asdict(done))
                _free()
        results[stage] = figure
        print(f"  baseline {stage:8} {figure.seconds:9.2f} s  cpu {figure.cpu_s:8.1f} s  "
              f"peak {figure.peak_mb:7.0f} MB  "
              f"{'tables equal: ' + ', '.join(_checked_text(c) for c in figure.checked) if figure.checked else ''}",
              flush=True)  # fmt: skip
    return results


def _checked_text(checked: dict[str, Any]) -> str:
    return f"{checked['table']} ({checked['rows']:,} rows, {checked['method']})"


# ------------------------------------------------------------------------------ one case


def measure_case(case: Case, config: Config, args: argparse.Namespace) -> dict[str, Any]:
    logs, input_rows = generated(case)
    started = datetime.now(UTC).isoformat(timespec="minutes")
    folder = SCRATCH / "runs" / case.name
    warehouse = folder / "warehouse"
    load_before = os.getloadavg()
    runs: list[AuditRun] = []
    for r in range(args.repeats):
        run = run_audit(logs, warehouse, folder / f"audit-{r + 1}.log", args.protocols)
        runs.append(run)
        print(f"{case.name} audit {r + 1}/{args.repeats}: {run.seconds:.1f} s, cpu {run.cpu_s:.0f} s, "
              f"peak {run.peak_mb:.0f} MB; " + ", ".join(
                  f"{p} {run.phases[p].seconds:.1f}" for p in PHASES if p in run.phases),
              flush=True)  # fmt: skip
    events = runs[-1].staged.get("ingest", {}).get("events", case.total_events)
    messages = runs[-1].staged.get("ingest", {}).get("messages", 0)
    protocols = len(config.replay.protocols)
    rows_of = {"ingest": input_rows, "clocks": events, "detect": events,
               "replay": messages * protocols}  # fmt: skip
    phases: dict[str, dict[str, Any]] = {}
    for name in PHASES:
        got = [r.phases[name] for r in runs if name in r.phases]
        if not got:
            continue
        seconds = statistics.median(p.seconds for p in got)
        rows = rows_of.get(name)
        phases[name] = dataclasses.asdict(Phase(
            seconds=seconds,
            cpu_s=statistics.median(p.cpu_s for p in got),
            peak_mb=max(p.peak_mb for p in got),
            rows=rows,
            rate=rows / seconds if rows and seconds > 0 else None,
        ))  # fmt: skip
    baseline: dict[str, Baseline] = {}
    if not args.no_baseline:
        baseline = run_baseline(logs, warehouse, folder / "baseline", config, args.repeats)
    if not args.keep:
        shutil.rmtree(folder / "baseline", ignore_errors=True)
        shutil.rmtree(warehouse, ignore_errors=True)
    return {
        "case": case.name,
        "title": case.title,
        "events": case.events,
        "traces": case.traces,
        "processes": case.processes,
        "format": case.fmt,
        "total_events": case.total_events,
        "input_rows": input_rows,
        "messages": messages,
        "protocols": protocols,
        "repeats": args.repeats,
        "when": started,
        "commit": _commit(),
        "load_average": [round(x, 1) for x in (*load_before, *os.getloadavg())],
        "total": {
            "seconds": statistics.median(r.seconds for r in runs),
            "cpu_s": statistics.median(r.cpu_s for r in runs),
            "peak_mb": max(r.peak_mb for r in runs),
        },
        "phases": phases,
        "job_seconds": runs[-1].job_seconds,
        "replay_statuses": runs[-1].replay_statuses,
        "runs": [dataclasses.asdict(r) for r in runs],
        "baseline": {k: dataclasses.asdict(v) for k, v in baseline.items()},
    }


def warm_up(config: Config, args: argparse.Namespace) -> None:
    """An audit and the baseline pipeline of a small trace, untimed: compile the kernels."""
    case = Case(1_000, 1, args.processes, args.format, args.seed)
    logs, _ = generated(case)
    folder = SCRATCH / "runs" / "warm-up"
    began = time.perf_counter()
    run_audit(logs, folder / "warehouse", folder / "audit.log", args.protocols)
    if not args.no_baseline:
        run_baseline(logs, folder / "warehouse", folder / "baseline", config, 1)
    shutil.rmtree(folder, ignore_errors=True)
    print(f"warm-up (not timed): {time.perf_counter() - began:.0f} s", flush=True)


# ------------------------------------------------------------------------------ output


def _commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "causal_spark"],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def _machine() -> str:
    return (f"{platform.machine()}, {psutil.cpu_count()} cores, "
            f"{psutil.virtual_memory().total / 2**30:.0f} GiB, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}")  # fmt: skip


def save(results: list[dict[str, Any]], prefix: Path, command: str) -> None:
    """Write PREFIX.json (keeping earlier cases not re-run), PREFIX.md and PREFIX.png."""
    path = prefix.with_suffix(".json")
    earlier = json.loads(path.read_text())["cases"] if path.exists() else []
    mine = {r["case"] for r in results}
    cases = [c for c in earlier if c["case"] not in mine] + results
    cases.sort(key=lambda c: (c["format"], c["traces"] > 1, c["total_events"]))
    payload = {"machine": _machine(), "command": command, "cases": cases,
               "coverage": COVERAGE_TEXT}  # fmt: skip
    prefix.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1) + "\n")
    prefix.with_suffix(".md").write_text(render(payload))
    plot(payload, prefix.with_suffix(".png"))


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1e6:.2f} M" if value >= 1e6 else f"{value / 1e3:.1f} k"


def growth(
    cases: list[dict[str, Any]],
) -> list[tuple[str, list[tuple[str, float, float, str, str, str]]]]:
    """Per format: (span, rows of (phase, time at lo, time at hi, time exponent, CPU exponent,
    the baseline's time exponent)),
    the exponents d log(y) / d log(events) from 10^6 to 10^7 events (one trace), else between
    the two largest one-trace sizes run."""
    out = []
    single = [c for c in cases if c["traces"] == 1]
    for fmt in ("parquet", "jsonl"):
        by_size = {c["total_events"]: c for c in single if c["format"] == fmt}
        if len(by_size) < 2:
            continue
        wanted = {1_000_000, 10_000_000}
        lo, hi = (1_000_000, 10_000_000) if wanted <= set(by_size) else sorted(by_size)[-2:]

        def figure(c: dict[str, Any], phase: str, key: str) -> float | None:
            got = c["total"] if phase == "whole audit" else c["phases"].get(phase)
            return got.get(key) if got else None

        def slope(a: float | None, b: float | None) -> str:
            if not a or not b or a <= 0 or b <= 0:
                return "-"
            return f"{math.log(b / a) / math.log(hi / lo):.2f}"

        rows = []
        for phase in (*PHASES, "whole audit"):
            t0, t1 = figure(by_size[lo], phase, "seconds"), figure(by_size[hi], phase, "seconds")
            if phase == BETWEEN or t0 is None or t1 is None:
                continue
            c0, c1 = figure(by_size[lo], phase, "cpu_s"), figure(by_size[hi], phase, "cpu_s")
            b0, b1 = (
                by_size[x].get("baseline", {}).get(phase, {}).get("seconds") for x in (lo, hi)
            )
            rows.append((phase, t0, t1, slope(t0, t1), slope(c0, c1), slope(b0, b1)))
        out.append((f"{lo:,} to {hi:,} events (one trace, {fmt})", rows))
    return out


def render(payload: dict[str, Any]) -> str:
    cases = payload["cases"]
    lines = [
        "# The whole audit, end to end",
        "",
        f"By `bench/audit.py` on {payload['machine']}; latest command: `{payload['command']}`.",
        "Each case names the commit it measured and when. The audit is the real",
        "`causal-spark audit` subprocess (every stage, the default protocols, the embedded",
        "profile); its phases are cut by its own progress lines. `CPU s` is user + system",
        "time of its whole process tree in the phase (sampled every 50 ms); `peak MB` the",
        "tree's peak RSS in the phase. The baseline is one Python process doing the same",
        "stage (its own CPU s; its peak RSS in the stage, and in brackets its RSS when the",
        "stage began); `base / job` above 1: the job is faster.",
        "Times are medians of the repeats. The machine is shared: read CPU seconds and",
        "same-run ratios before wall times.",
        "",
    ]
    for c in cases:
        base = c.get("baseline", {})
        lines += [
            f"## {c['title']}",
            "",
            f"Commit {c['commit']}, {c['when'][:16].replace('T', ' ')} UTC, {c['repeats']} "
            f"repeat(s); load average "
            f"before {c['load_average'][:3]}, after {c['load_average'][3:]}. "
            f"{c['input_rows']:,} input rows, {c['messages']:,} messages, "
            f"{c['protocols']} protocols; replay {c.get('replay_statuses') or '-'}.",
            "",
            "| phase | time s | share | rows | rows/s | peak MB | CPU s | baseline s | base / job "
            "| baseline CPU s | baseline peak MB | tables equal |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        total = c["total"]["seconds"]
        for phase in PHASES:
            p = c["phases"].get(phase)
            if p is None:
                continue
            b = base.get(phase)
            if phase not in STAGES:
                bcells = ["", "", "", "", ""]
            elif b is None:
                bcells = ["not run", "-", "-", "-", "-"]
            elif b["status"] != "ok":
                bcells = [b["status"], "-", "-", "-", "-"]
            else:
                bcells = [
                    _fmt(b["seconds"], 2),
                    _fmt(b["seconds"] / p["seconds"], 2) if p["seconds"] else "-",
                    _fmt(b["cpu_s"]),
                    f"{_fmt(b['peak_mb'], 0)} (start {_fmt(b['start_mb'], 0)})",
                    "; ".join(f"{k['table']} ({k['rows']:,}, {k['method']})" for k in b["checked"])
                    or "-",
                ]
            lines.append(
                f"| {phase} | {_fmt(p['seconds'], 2)} | {100 * p['seconds'] / total:.0f}% | "
                f"{'-' if p['rows'] is None else format(p['rows'], ',')} | {_rate(p['rate'])} | "
                f"{_fmt(p['peak_mb'], 0)} | {_fmt(p['cpu_s'])} | " + " | ".join(bcells) + " |"
            )
        t = c["total"]
        lines += [
            f"| **whole audit** | **{_fmt(total, 2)}** | 100% | | | {_fmt(t['peak_mb'], 0)} | "
            f"{_fmt(t['cpu_s'])} | | | | | |",
            "",
        ]
    for span, rows in growth(cases):
        lines += [
            f"## Growth of each phase, {span}",
            "",
            "Exponent of time (and of CPU seconds) against events: 1 is linear.",
            "",
            "| phase | time s, smaller | time s, larger | time exponent | CPU-s exponent "
            "| baseline time exponent |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {p} | {t0:,.2f} | {t1:,.2f} | {e} | {ce} | {be} |" for p, t0, t1, e, ce, be in rows
        ]
        lines.append("")
    lines += ["## What each baseline computes (and is checked on)", ""]
    lines += [f"- **{k}**: {v}." for k, v in payload["coverage"].items()]
    lines += [
        "",
        "Each baseline stage reads the job's committed inputs (delta-rs) and writes its own "
        "tables; its compiled kernels are warm (the job's stages pay compiling or loading "
        "them). The commit and the JVM start-up have no baseline.",
        "",
    ]
    return "\n".join(lines)


def plot(payload: dict[str, Any], path: Path) -> None:
    """Left: the audit's time per phase against events; right: each stage, job and baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (job_axis, base_axis) = plt.subplots(1, 2, figsize=(13, 5.2))
    drawn = [p for p in PHASES if p != BETWEEN]
    colors = {p: f"C{i}" for i, p in enumerate(drawn)}
    colors["whole audit"] = "black"
    for fmt, style in (("parquet", "-"), ("jsonl", "--")):
        single = sorted((c for c in payload["cases"] if c["traces"] == 1 and c["format"] == fmt),
                        key=lambda c: c["total_events"])  # fmt: skip
        many = [c for c in payload["cases"] if c["traces"] > 1 and c["format"] == fmt]

        def job_seconds(c: dict[str, Any], phase: str) -> float | None:
            if phase == "whole audit":
                return float(c["total"]["seconds"])
            got = c["phases"].get(phase)
            return got["seconds"] if got and got["seconds"] > 0 else None

        def base_seconds(c: dict[str, Any], phase: str) -> float | None:
            got = c.get("baseline", {}).get(phase)
            return got["seconds"] if got and got.get("seconds") else None

        for axis, phases, seconds in (
            (job_axis, [*drawn, "whole audit"], job_seconds),
            (base_axis, list(STAGES), job_seconds),
        ):
            for phase in phases:
                points = [
                    (c["total_events"], t) for c in single if (t := seconds(c, phase)) is not None
                ]
                if points:
                    axis.plot(*zip(*points, strict=True), style, marker="o", color=colors[phase],
                              label=f"{phase} ({fmt})",
                              linewidth=2.5 if phase == "whole audit" else 1.2)  # fmt: skip
                for c in many:
                    t = seconds(c, phase)
                    if t is not None:
                        axis.plot([c["total_events"]], [t], marker="s", color=colors[phase],
                                  fillstyle="none")  # fmt: skip
        for stage in STAGES:
            points = [
                (c["total_events"], t) for c in single if (t := base_seconds(c, stage)) is not None
            ]
            if points:
                base_axis.plot(*zip(*points, strict=True), ":", marker="^", color=colors[stage],
                               label=f"{stage}, one process ({fmt})")  # fmt: skip
            for c in many:
                t = base_seconds(c, stage)
                if t is not None:
                    base_axis.plot([c["total_events"]], [t], marker="^", color=colors[stage],
                                   fillstyle="none")  # fmt: skip
    job_axis.set(title="causal-spark audit: time per phase", ylabel="seconds")
    base_axis.set(title="each stage: the audit (solid) and the single-process baseline (dotted)")
    for axis in (job_axis, base_axis):
        axis.set(xscale="log", yscale="log",
                 xlabel="events (one trace; hollow squares: many traces of 1 000)")  # fmt: skip
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7, ncol=2)
    commits = sorted({c["commit"] for c in payload["cases"]})
    fig.suptitle(f"{payload['machine']}; commit {', '.join(commits)}", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------ main


def _size(text: str) -> int:
    value = float(text)
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a number of events: {text}")
    return int(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true",
                        help="10^4 and 10^5 events and 10 traces of 1 000; writes bench/out/audit/quick.*")  # fmt: skip
    parser.add_argument("--sizes", default=None,
                        help="events of the one-trace cases, comma-separated (default 1e5,1e6,1e7)")  # fmt: skip
    parser.add_argument("--many", type=int, default=None,
                        help="traces of 1 000 events in the many-traces case (default 1000; 0: none)")  # fmt: skip
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    parser.add_argument("--repeats", type=int, default=1, help="runs per measurement (median)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--protocols", default=None,
                        help="the audit's --protocols (default: every protocol); the "
                        "replay baseline runs the same ones")  # fmt: skip
    parser.add_argument("--no-baseline", action="store_true", help="measure the audit only")
    parser.add_argument("--no-warm-up", action="store_true", help="skip the untimed warm-up")
    parser.add_argument(
        "--keep", action="store_true", help="keep the warehouses (bench/out/audit/runs)"
    )
    parser.add_argument("--out", default=None,
                        help="prefix of the .md/.json/.png written (default bench/audit, "
                        "bench/out/audit/quick with --quick)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        sizes = [10_000, 100_000]
        many = 10 if args.many is None else args.many
    else:
        sizes = [100_000, 1_000_000, 10_000_000]
        many = 1000 if args.many is None else args.many
    if args.sizes is not None:
        sizes = [_size(s) for s in args.sizes.split(",") if s.strip()]
    prefix = Path(args.out) if args.out else (SCRATCH / "quick" if args.quick else HERE / "audit")
    cases = [Case(e, 1, args.processes, args.format, args.seed) for e in sizes]
    if many:
        cases.append(Case(1_000, many, args.processes, args.format, args.seed))
    command = "python bench/audit.py " + " ".join(argv if argv is not None else sys.argv[1:])
    config = load_config()  # the embedded profile: what the audit subprocess runs
    if args.protocols:
        chosen = tuple(p.strip() for p in args.protocols.split(",") if p.strip())
        config = dataclasses.replace(
            config, replay=dataclasses.replace(config.replay, protocols=chosen)
        )
    print(f"cases: {', '.join(c.name for c in cases)}; ingest baseline: "
          f"{'bench/ingest_baseline.py' if ingest_single else 'missing'}", flush=True)  # fmt: skip
    results: list[dict[str, Any]] = []
    try:
        if not args.no_warm_up:
            warm_up(config, args)
        for case in cases:
            result = measure_case(case, config, args)
            results.append(result)
            save(results, prefix, command)
            print(summary(result), flush=True)
    except TableMismatch as e:
        if results:
            save(results, prefix, command)
        print(f"\n!!! A BASELINE'S TABLE DIFFERS FROM THE JOB'S: {e}", file=sys.stderr)
        return 3
    except JobFailed as e:
        if results:
            save(results, prefix, command)
        print(f"\n!!! A JOB FAILED: {e}", file=sys.stderr)
        return 4
    print(f"wrote {prefix.with_suffix('.md')}, .json and .png")
    return 0


def summary(result: dict[str, Any]) -> str:
    """The case's table as printed lines."""
    total = result["total"]["seconds"]
    lines = [f"\n{result['title']} (commit {result['commit']}): whole audit {total:.1f} s, "
             f"CPU {result['total']['cpu_s']:.0f} s, peak {result['total']['peak_mb']:.0f} MB",
             f"  {'phase':16} {'time s':>8} {'share':>6} {'rows/s':>9} {'peak MB':>8} {'CPU s':>7} "
             f"{'base s':>8} {'base/job':>8}"]  # fmt: skip
    for phase, p in result["phases"].items():
        b = result["baseline"].get(phase)
        if b is None:
            bs = bx = ""
        elif b["status"] != "ok":
            bs, bx = b["status"], ""
        else:
            bs, bx = (
                f"{b['seconds']:.2f}",
                f"{b['seconds'] / p['seconds']:.2f}" if p["seconds"] else "-",
            )
        lines.append(f"  {phase:16} {p['seconds']:8.2f} {100 * p['seconds'] / total:5.0f}% "
                     f"{_rate(p['rate']):>9} {p['peak_mb']:8.0f} {p['cpu_s']:7.1f} {bs:>8} {bx:>8}")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
