"""Benchmark protocol replay per protocol: the Spark job, the compiled loop alone and the
Python reference engine alone, in the same run; write bench/replay.json and the
`## replay` section of bench/results.md (the other sections are left as they are).

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/replay.py --warm-up             # compile the loops (Numba disk cache)
    .venv/bin/python bench/replay.py                       # every case, every protocol
    .venv/bin/python bench/replay.py --quick               # small cases, a smoke run (a few
                                                           # minutes), written to bench/out/replay/quick.*
    .venv/bin/python bench/replay.py --only many-1000x1000 --protocols none,fifo
    .venv/bin/python bench/replay.py --only big-1e6 --profile rst,sa --cap 600
    .venv/bin/python bench/replay.py --kernel 1000000,10000000 --reference-at 1000000
                                                           # the UDF's kernel alone, one trace of
                                                           # each length (bench/replay_kernel.py)

Cases (issue 6): generated all-to-all traces of 16 processes, lognormal(0, 1)
latencies (the generator's default), no loss:

- `big-1e6`: one trace of 10^6 messages (2 111 111 events);
- `many-1000x1000`: 1 000 traces of 1 000 messages (2 112 events each);
- `bcast-1e6` (only with --only): one broadcast trace of about 10^6 message
  copies, the only shape `bss` applies to.

Set-up, once per case and kept under bench/out/replay/<case> while its spec
does not change (not timed; `--set-up-only` stops there): the generator writes
Parquet, the real `ingest` and `clocks` jobs write the warehouse, and
`program_rows` (the replay's own input transform) is saved as Parquet for the
two single-process measurements.

Then, per protocol, in the same process:

- `reference`: the traces replayed by the Python reference engine
  (`replay_engine`) alone (per trace: Arrow columns to arrays, `build_trace`,
  `replay`; no Spark, no output table), capped by `--cap`;
- `loop`: the same traces replayed by the compiled loop (`replay_loop`) alone
  (per trace: Arrow columns to arrays as the UDF converts them, `layout`,
  `replay_compiled`), for protocols whose module has the compiled form
  (`make_state`); also capped by `--cap`;
- `spark`: the real `replay` job for that one protocol (Delta in: events,
  messages, trace_clocks; Delta out: protocol_runs and deliveries), with the
  profile's replay settings; it runs the compiled loop in its grouped Arrow UDF
  where the protocol has it, the reference engine otherwise (the `note` says
  which). Its statuses and verification results are read back from
  `protocol_runs`.

Statuses and verification results must agree across the three: a disagreement
is printed, marked in the tables, and makes the run exit with status 3 (the
other protocols are still measured). The summed figures (control messages,
held-back, piggybacked integers) of loop and reference are compared too.

Before any timing, every protocol's loop and the reference's Numba
verification kernels are compiled on two small traces (point-to-point and
broadcast, both receive modes): Numba caches the loop on disk next to the code,
so the Spark workers load it instead of compiling (`--warm-up` does only this,
without Spark: run it before a measured run, outside any machine lock). Times
are medians of the repeats (3 for the small cases, 1 for the 10^6 one; no
further repeat once one measurement has taken `--repeat-budget` seconds);
memory is the peak RSS of the process tree (driver, JVM, Python workers) for
Spark and of this process (which also holds the case's program rows and the
idle Spark driver) for loop and reference. A `spark` run of a protocol without
its compiled form whose reference run was capped is skipped (it would replay
the same traces in Python, at least as long). `--profile P,...` runs cProfile
over the reference engine on the first case for those protocols (also capped)
and records the top functions by own time (cProfile cannot see inside the
compiled loop).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import itertools
import json
import platform
import pstats
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
# the reference engine the `reference` figures time lives in tests/oracles/replay/
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _measure import PeakMemory

from causal_spark import tables
from causal_spark.app.runs import run_job
from causal_spark.app.session import build_session
from causal_spark.app.stages import clocks_stage, ingest_stage, replay_stage
from causal_spark.config import Config, load_config
from causal_spark.generate import GeneratorSpec, generate_traces, write_generated
from causal_spark.replay import ReplayRequest, program_rows
from causal_spark.replay.adapter import PEER
from causal_spark.replay.layout import LayoutBuilder, layout
from causal_spark.replay.model import Run
from causal_spark.replay.run import replay_compiled
from causal_spark.sinks import Warehouse
from tests.oracles.replay.engine import build_trace, replay
from tests.oracles.replay.protocols import PROTOCOLS, protocol

HERE = Path(__file__).resolve().parent
SCRATCH = HERE / "out" / "replay"
JSON = HERE / "replay.json"
RESULTS_MD = HERE / "results.md"
QUICK_JSON = SCRATCH / "quick.json"  # --quick never touches the recorded results
QUICK_MD = SCRATCH / "quick.md"
SECTION = "## replay"
IMPLS = ("spark", "loop", "reference")


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    spec: GeneratorSpec
    repeats: int


def cases(quick: bool) -> list[Case]:
    if quick:
        return [
            Case("quick-big-1e4", GeneratorSpec(processes=16, events=21_112, seed=61), 1),
            Case(
                "quick-many-5x1000",
                GeneratorSpec(processes=16, events=2_112, traces=5, seed=62),
                1,
            ),
        ]
    return [
        Case("big-1e6", GeneratorSpec(processes=16, events=2_111_111, seed=61), 1),
        Case("many-1000x1000", GeneratorSpec(processes=16, events=2_112, traces=1000, seed=62), 3),
    ]


EXTRA_CASES = [
    Case(
        "bcast-1e6",
        GeneratorSpec(processes=16, events=1_071_000, topology="broadcast", seed=63),
        1,
    ),
]


@dataclasses.dataclass
class Result:
    case: str
    protocol: str
    impl: str  # spark | loop | reference
    traces: int
    messages: int  # application message copies replayed (per protocol, all traces)
    events: int  # program events (all traces)
    seconds: float | None  # median; None when capped, skipped or not available
    seconds_all: list[float]
    peak_mb: float
    repeats: int
    capped: bool
    statuses: dict[str, int]  # status -> runs
    verified: dict[str, int]  # true / false / null -> runs
    figures: dict[str, float]  # sums across traces of a few figures (control messages, ...)
    prep_seconds: float | None = None  # loop: of which layout; reference: of which build_trace
    start_mb: float | None = None  # loop / reference: this process's RSS before the run
    run: str = ""
    commit: str = ""
    note: str = ""
    disagree: bool = False  # statuses or verification differ from another implementation
    udf: str = ""  # spark: what its grouped UDF ran (loop | reference)


def _read(path: Path) -> pa.Table:
    return DeltaTable(str(path)).to_pyarrow_table(
        filesystem=pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem())
    )


class Capped(Exception):
    """The measurement ran past its cap."""


# ------------------------------------------------------------------------------ set-up


def _fingerprint(case: Case) -> str:
    # "programs": 2 since the rows carry peer_lseq (the layout matches receives by it)
    spec = {**dataclasses.asdict(case.spec), "programs": 2}
    return json.dumps(spec, sort_keys=True, default=str)


def set_up(case: Case, spark, config: Config) -> tuple[Path, pa.Table]:
    """The case's warehouse (events, messages, trace_clocks) and its program rows."""
    folder = SCRATCH / case.name
    marker = folder / "spec.json"
    warehouse_dir = folder / "warehouse"
    programs_path = folder / "programs.parquet"
    if not (marker.exists() and marker.read_text() == _fingerprint(case)):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        began = time.perf_counter()
        generated = folder / "generated"
        write_generated(generate_traces(spark, case.spec), str(generated), "parquet", case.spec)
        warehouse = Warehouse(spark, warehouse_dir, "deltalake")
        run_job(
            "ingest", [ingest_stage([str(generated)])], spark=spark, config=config,
            warehouse=warehouse,
        )  # fmt: skip
        run_job("clocks", [clocks_stage()], spark=spark, config=config, warehouse=warehouse)
        shutil.rmtree(generated, ignore_errors=True)
        w = Warehouse(spark, warehouse_dir, "deltalake")
        rows = program_rows(w.read(tables.EVENTS), w.read(tables.MESSAGES),
                            w.read(tables.TRACE_CLOCKS))  # fmt: skip
        pq.write_table(rows.toArrow(), programs_path)
        marker.write_text(_fingerprint(case))
        print(f"{case.name}: set-up (generate, ingest, clocks, program rows) "
              f"{time.perf_counter() - began:.0f} s", flush=True)  # fmt: skip
    programs = pq.read_table(programs_path)
    return warehouse_dir, programs


def split_traces(programs: pa.Table) -> list[pa.Table]:
    """One table per trace (sorted by trace_id), as a (trace, protocol) group gets them."""
    programs = programs.sort_by([("trace_id", "ascending")])
    ids = programs.column("trace_id").to_numpy(zero_copy_only=False)
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    bounds = [0, *cuts.tolist(), len(ids)]
    return [programs.slice(a, b - a) for a, b in itertools.pairwise(bounds)]


# ------------------------------------------------------------------------------ replays


def compiled(name: str) -> bool:
    """Whether protocol `name` has its compiled form (in the product's registry)."""
    from causal_spark.replay.protocols.registry import MODULES

    return hasattr(MODULES.get(name), "make_state")


def _names(pidx: np.ndarray, process: list[str]) -> list[str]:
    names_by_pidx: dict[int, str] = {}
    for i, p in zip(pidx.tolist(), process, strict=True):
        names_by_pidx.setdefault(i, p)
    n = max(names_by_pidx) + 1 if names_by_pidx else 0
    return [names_by_pidx.get(i, f"#{i}") for i in range(n)]


def reference_trace(table: pa.Table):
    """`build_trace` from one trace's program rows, converting columns as the UDF does."""
    pidx = table.column("pidx").to_numpy(zero_copy_only=False).astype(np.int64)
    return build_trace(
        str(table.column("trace_id")[0].as_py()),
        _names(pidx, table.column("process").to_pylist()),
        pidx,
        table.column("lseq").to_numpy(zero_copy_only=False).astype(np.int64),
        table.column("kind").to_pylist(),
        table.column("ts").to_numpy(zero_copy_only=False).astype(np.float64),
        table.column("lamport").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64),
        table.column("msg_id").to_pylist(),
        table.column(PEER).to_numpy(zero_copy_only=False).astype(np.int64),
    )


def loop_trace(table: pa.Table):
    """The layout of one trace's program rows, built from its batches as the UDF does."""
    builder = LayoutBuilder(str(table.column("trace_id")[0].as_py()))
    for batch in table.to_batches():
        builder.add(batch)
    return builder.finish()


@dataclasses.dataclass
class Outcome:
    runs: list[Run]
    prep_seconds: float


def reference_all(traces: list[pa.Table], name: str, request: ReplayRequest) -> Outcome:
    cls = protocol(name)
    params = request.params_of(name)
    selective = request.receive_mode == "selective"
    runs: list[Run] = []
    prep = 0.0
    for table in traces:
        began = time.perf_counter()
        trace = reference_trace(table)
        prep += time.perf_counter() - began
        runs.append(replay(trace, cls, params, selective, request.default_latency))
    return Outcome(runs, prep)


def loop_all(traces: list[pa.Table], name: str, request: ReplayRequest) -> Outcome:
    params = dict(request.params_of(name))
    selective = request.receive_mode == "selective"
    runs: list[Run] = []
    prep = 0.0
    for table in traces:
        began = time.perf_counter()
        trace = loop_trace(table)
        prep += time.perf_counter() - began
        runs.append(replay_compiled(trace, name, params, selective, request.default_latency))
    return Outcome(runs, prep)


def _warm_traces() -> list[tuple]:
    """Rows (as build_trace / layout take them) of two tiny traces: point-to-point, broadcast."""
    p2p = (
        "warm-p2p", ["a", "b"], np.array([0, 0, 1, 1]), np.array([1, 2, 1, 2]),
        ["send", "receive", "receive", "send"], np.array([0.0, 3.0, 1.0, 2.0]),
        np.array([1, 4, 2, 3]), ["x", "y", "x", "y"], np.array([1, 1, 0, 0]),
    )  # fmt: skip
    bcast = (
        "warm-bcast", ["a", "b", "c"], np.array([0, 0, 1, 2, 0]), np.array([1, 1, 1, 1, 2]),
        ["send", "send", "receive", "receive", "internal"],
        np.array([0.0, 0.0, 1.0, 1.5, 2.0]), np.array([1, 1, 2, 2, 2]),
        ["m.b", "m.c", "m.b", "m.c", None], np.array([1, 2, 0, 0, -1]),
    )  # fmt: skip
    return [p2p, bcast]


def warm_up(names: tuple[str, ...], params) -> list[str]:
    """Compile the loop of every protocol asked and the verification kernels (Numba, cached
    on disk) before any timing; returns the protocols that have no compiled form."""
    missing = []
    for name in names:
        given = dict(params.get(name, {}))
        has_loop = compiled(name)
        if not has_loop:
            missing.append(name)
        for rows in _warm_traces():
            for selective in (False, True):
                replay(build_trace(*rows), protocol(name), given, selective)
                if has_loop:
                    replay_compiled(layout(*rows), name, given, selective)
    return missing


def _alarm(_signum: int, _frame: object) -> None:
    raise Capped


def capped_call(fn: Callable[[], object], cap: float) -> object:
    """fn() in the main thread, interrupted by SIGALRM after `cap` seconds."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, cap)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def measure_alone(
    out: Result, fn: Callable[[], Outcome], repeats: int, cap: float, budget: float
) -> None:
    """Time fn (capped) in this process, repeats times at most; fill `out`."""
    times: list[float] = []
    outcome: Outcome | None = None
    out.start_mb = _rss_mb()
    with PeakMemory(tree=False) as memory:
        for _ in range(repeats):
            if sum(times) > budget:
                break
            outcome = None
            began = time.perf_counter()
            try:
                outcome = capped_call(fn, cap)  # type: ignore[assignment]
            except Capped:
                out.capped = True
                out.note = f"stopped after {cap:.0f} s"
                break
            times.append(time.perf_counter() - began)
    out.peak_mb = memory.peak / 2**20
    out.seconds_all = times
    if not out.capped and outcome is not None:
        out.seconds = statistics.median(times)
        out.repeats = len(times)
        out.prep_seconds = outcome.prep_seconds
        out.statuses, out.verified, out.figures = _summarise_runs(outcome.runs)


# ------------------------------------------------------------------------------ main


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small cases (a few minutes)")
    parser.add_argument("--only", default=None, help="comma-separated case names to run")
    parser.add_argument("--protocols", default=None, help="comma-separated protocols")
    parser.add_argument("--cap", type=float, default=600.0,
                        help="seconds one loop or reference run of a protocol may take")  # fmt: skip
    parser.add_argument("--profile", default="",
                        help="protocols to profile (cProfile, reference, first case)")  # fmt: skip
    parser.add_argument("--profile-cap", type=float, default=180.0,
                        help="seconds a profiled reference run may take (a partial profile)")  # fmt: skip
    parser.add_argument("--repeat-budget", type=float, default=60.0,
                        help="no further repeat once a measurement has taken this long")  # fmt: skip
    parser.add_argument("--no-spark", action="store_true", help="loop and reference only")
    parser.add_argument("--warm-up", action="store_true",
                        help="compile the loops (Numba disk cache) and exit; no Spark")  # fmt: skip
    parser.add_argument("--set-up-only", action="store_true",
                        help="build the cases' warehouses and program rows, then exit")  # fmt: skip
    parser.add_argument("--kernel", default=None,
                        help="message counts: the UDF's kernel alone on one trace of each "
                        "(bench/replay_kernel.py), no Spark")  # fmt: skip
    parser.add_argument("--reference-at", default="",
                        help="with --kernel: the message counts the reference runs at too")  # fmt: skip
    parser.add_argument("--conf", default=None,
                        help="YAML profile (default: the embedded local profile)")  # fmt: skip
    args = parser.parse_args()

    global JSON, RESULTS_MD
    if args.quick:
        JSON, RESULTS_MD = QUICK_JSON, QUICK_MD
        SCRATCH.mkdir(parents=True, exist_ok=True)
    selected = cases(args.quick)
    if args.only:
        wanted = set(args.only.split(","))
        selected = [c for c in [*selected, *EXTRA_CASES] if c.name in wanted]
    config = load_config(args.conf)  # default: the embedded local profile, as users run it
    names = tuple(args.protocols.split(",")) if args.protocols else config.replay.protocols
    unknown = [n for n in names if n not in PROTOCOLS]
    if unknown:
        parser.error(f"unknown protocol(s) {unknown}")
    if args.kernel:
        import replay_kernel

        return replay_kernel.main(
            [int(m) for m in args.kernel.split(",")],
            list(names),
            {int(m) for m in args.reference_at.split(",") if m},
        )
    profiled = [p for p in args.profile.split(",") if p]
    began = time.perf_counter()
    missing = warm_up(names, config.replay.params)
    print(f"warm-up (compile or load the loops) {time.perf_counter() - began:.1f} s; "
          f"no compiled form: {', '.join(missing) or 'none'}", flush=True)  # fmt: skip
    if args.warm_up:
        return 0
    spark = build_session(config.spark)
    if args.set_up_only:
        for case in selected:
            set_up(case, spark, config)
        spark.stop()
        return 0
    started = datetime.now(UTC).isoformat(timespec="minutes")
    commit = _commit()
    results: list[Result] = []
    profiles: dict[str, dict[str, object]] = {}
    disagreements: list[str] = []

    def record(result: Result) -> None:
        results.append(result)
        save(results, profiles)
        secs = "-" if result.seconds is None else f"{result.seconds:9.2f} s"
        print(f"{result.case:20} {result.protocol:14} {result.impl:9} {secs:>11}  "
              f"peak {result.peak_mb:7.0f} MB  {dict(result.statuses)} verified "
              f"{dict(result.verified)} {result.note}", flush=True)  # fmt: skip

    for index, case in enumerate(selected):
        warehouse_dir, programs = set_up(case, spark, config)
        traces = split_traces(programs)
        n_events = int(
            pc.count_distinct(
                pc.binary_join_element_wise(
                    programs.column("trace_id"),
                    pc.cast(programs.column("pidx"), pa.string()),
                    pc.cast(programs.column("lseq"), pa.string()),
                    "/",
                )
            ).as_py()
        )
        n_messages = int(pc.sum(pc.equal(programs.column("kind"), "send")).as_py())
        print(f"{case.name}: {len(traces)} trace(s), {n_events:,} events, "
              f"{n_messages:,} message copies", flush=True)  # fmt: skip
        warehouse = Warehouse(spark, warehouse_dir, "deltalake")
        for name in names:
            request = ReplayRequest(
                protocols=(name,),
                receive_mode=config.replay.receive_mode,
                params=config.replay.params,
                default_latency=config.replay.default_latency,
            ).validate()
            has_loop = compiled(name)

            def base(impl: str, repeats: int) -> Result:
                return Result(case.name, name, impl, len(traces), n_messages, n_events, None,
                              [], 0.0, repeats, False, {}, {}, {}, run=started,
                              commit=commit)  # fmt: skip

            # the reference engine alone (the same-run baseline), capped
            ref = base("reference", case.repeats)
            measure_alone(
                ref, lambda name=name, request=request: reference_all(traces, name, request),
                case.repeats, args.cap, args.repeat_budget,
            )  # fmt: skip
            record(ref)

            if name in profiled and index == 0:
                profiles[f"{case.name}/{name}"] = {
                    **profile_reference(traces, name, request, args.profile_cap),
                    "run": started,
                    "commit": commit,
                }
                save(results, profiles)

            # the compiled loop alone, capped
            loop = base("loop", case.repeats)
            if has_loop:
                measure_alone(
                    loop, lambda name=name, request=request: loop_all(traces, name, request),
                    case.repeats, args.cap, args.repeat_budget,
                )  # fmt: skip
            else:
                loop.note = "no compiled form"
            _check(ref, loop, disagreements)
            record(loop)

            if args.no_spark:
                continue
            out_s = base("spark", case.repeats)
            out_s.udf = "loop" if has_loop else "reference"
            if not has_loop and ref.capped:
                out_s.note = "skipped: the reference alone ran past the cap"
                record(out_s)
                continue
            alone = loop.seconds if has_loop else ref.seconds
            spark_cap = max(args.cap, 3 * (alone or 0) + 120)

            def job(request: ReplayRequest = request) -> None:
                run_job("replay", [replay_stage(request)], spark=spark, config=config,
                        warehouse=warehouse)  # fmt: skip

            times: list[float] = []
            with PeakMemory(tree=True) as memory:
                for _ in range(case.repeats):
                    if sum(times) > args.repeat_budget:
                        break
                    timer = threading.Timer(spark_cap, spark.sparkContext.cancelAllJobs)
                    timer.start()
                    began = time.perf_counter()
                    try:
                        job()
                        times.append(time.perf_counter() - began)
                    except Exception as e:  # a cancelled job surfaces as any error
                        if time.perf_counter() - began < spark_cap:
                            raise
                        out_s.capped = True
                        out_s.note = f"cancelled after {spark_cap:.0f} s ({type(e).__name__})"
                        break
                    finally:
                        timer.cancel()
            out_s.peak_mb = memory.peak / 2**20
            out_s.seconds_all = times
            if not out_s.capped:
                out_s.seconds = statistics.median(times)
                out_s.repeats = len(times)
                out_s.statuses, out_s.verified, out_s.figures = _summarise_table(
                    _read(warehouse_dir / tables.PROTOCOL_RUNS)
                )
                _check(ref, out_s, disagreements)
                _check(loop, out_s, disagreements)
            record(out_s)
    spark.stop()
    save(results, profiles)
    print(f"wrote {JSON} and the replay section of {RESULTS_MD}")
    if disagreements:
        print("\n" + "!" * 78 + "\nSTATUSES DISAGREE between implementations:\n  "
              + "\n  ".join(disagreements) + "\n" + "!" * 78, file=sys.stderr)  # fmt: skip
        return 3
    return 0


def _check(a: Result, b: Result, disagreements: list[str]) -> None:
    """Statuses and verification of two measured implementations must agree (loudly)."""
    if a.seconds is None or b.seconds is None:
        return
    where = f"{b.case}/{b.protocol}"
    if (a.statuses, a.verified) != (b.statuses, b.verified):
        what = (f"{where}: {a.impl} {a.statuses} verified {a.verified}, "
                f"{b.impl} {b.statuses} verified {b.verified}")  # fmt: skip
        disagreements.append(what)
        a.disagree = b.disagree = True
        b.note = "; ".join(x for x in (b.note, f"STATUSES DIFFER from {a.impl}") if x)
        print(f"\n!!! STATUSES DISAGREE {what}\n", file=sys.stderr, flush=True)
        return
    differ = [
        k for k in FIGURES
        if not np.isclose(a.figures.get(k, 0.0), b.figures.get(k, 0.0), rtol=1e-9, atol=1e-6)
    ]  # fmt: skip
    if differ:
        b.note = "; ".join(x for x in (b.note, f"figures differ from {a.impl}: {differ}") if x)
        print(f"WARNING {where}: figures {differ} differ: {a.impl} {a.figures}, "
              f"{b.impl} {b.figures}", flush=True)  # fmt: skip


FIGURES = ("app_messages", "control_messages", "held_back", "piggyback_ints_total")


def _summarise_runs(runs: list[Run]) -> tuple[dict[str, int], dict[str, int], dict[str, float]]:
    statuses = Counter(r.status for r in runs)
    verified = Counter(_verified_key(r.verified) for r in runs)
    figures = {k: float(sum(r.figures.get(k) or 0 for r in runs)) for k in FIGURES}
    return dict(statuses), dict(verified), figures


def _summarise_table(runs: pa.Table) -> tuple[dict[str, int], dict[str, int], dict[str, float]]:
    statuses = Counter(runs.column("status").to_pylist())
    verified = Counter(_verified_key(v) for v in runs.column("verified").to_pylist())
    figures = {k: float(pc.sum(runs.column(k)).as_py() or 0) for k in FIGURES}
    return dict(statuses), dict(verified), figures


def _verified_key(value: bool | None) -> str:
    return "null" if value is None else str(value).lower()


def profile_reference(
    traces: list[pa.Table], name: str, request: ReplayRequest, cap: float
) -> dict[str, object]:
    """cProfile over the reference engine alone (capped: a partial profile is still recorded)."""
    profiler = cProfile.Profile()
    began = time.perf_counter()
    complete = True
    profiler.enable()
    try:
        capped_call(lambda: reference_all(traces, name, request), cap)
    except Capped:
        complete = False
    finally:
        profiler.disable()
    seconds = time.perf_counter() - began
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    stats.sort_stats("tottime").print_stats(25)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    (SCRATCH / f"profile-{name}.txt").write_text(stream.getvalue())
    top = []
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    ranked = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
    for (path, line, func), (_cc, calls, tottime, cumtime, _callers) in ranked[:10]:
        where = re.sub(r".*/(causal_spark|site-packages)/", r"\1/", path)
        top.append({"function": f"{where}:{line}({func})", "calls": calls,
                    "tottime": round(tottime, 2), "cumtime": round(cumtime, 2),
                    "share": round(tottime / total, 3) if total else 0.0})  # fmt: skip
    print(f"profile {name}: {seconds:.0f} s{'' if complete else ' (capped)'}")
    for row in top[:6]:
        print(f"  {row['share']:6.1%} {row['tottime']:8.2f} s {row['calls']:>10} {row['function']}")
    return {"seconds": round(seconds, 1), "complete": complete, "top": top}


def _commit() -> str:
    import causal_spark

    root = Path(causal_spark.__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "causal_spark"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}{'+dirty' if dirty else ''} ({root})"


# ------------------------------------------------------------------------------ output


def _upgrade(row: dict) -> dict:
    """A row written before the loop existed: its `engine` is the reference engine."""
    if row.get("impl") == "engine":
        row = {**row, "impl": "reference"}
    if "build_seconds" in row:
        row = {k: v for k, v in row.items() if k != "build_seconds"}
        row["prep_seconds"] = row.get("prep_seconds")
    if row.get("impl") == "spark":
        row.setdefault("udf", "reference")  # before the loop, the UDF ran the reference engine
    return row


def save(results: list[Result], profiles: dict[str, dict[str, object]]) -> None:
    """Write this run's results, keeping earlier runs' results for (case, protocol, impl)
    not re-run here; rewrite only the `## replay` section of results.md."""
    earlier = json.loads(JSON.read_text()) if JSON.exists() else {}
    mine = {(r.case, r.protocol, r.impl) for r in results}
    merged = [_upgrade(r) for r in earlier.get("results", [])]
    merged = [r for r in merged if (r["case"], r["protocol"], r["impl"]) not in mine]
    merged += [dataclasses.asdict(r) for r in results]
    payload = {
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}",
        "results": merged,
        "profiles": {**earlier.get("profiles", {}), **profiles},
    }
    JSON.write_text(json.dumps(payload, indent=1) + "\n")
    section = render(payload)
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else "# Benchmark results\n"
    start = text.find(f"\n{SECTION}\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[: start + 1] + section + (text[end + 1 :] if end >= 0 else "")
    RESULTS_MD.write_text(text)


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def render(payload: dict) -> str:
    rows = payload["results"]
    by_key = {(r["case"], r["protocol"], r["impl"]): r for r in rows}
    case_names = list(dict.fromkeys(r["case"] for r in rows))
    order = {name: i for i, name in enumerate(PROTOCOLS)}
    lines = [
        SECTION,
        "",
        f"By `bench/replay.py` on {payload['machine']}. Generated all-to-all traces of 16",
        "processes, lognormal(0, 1) latencies. Per protocol, in the same run: `spark s`, the",
        "`replay` job for that protocol (Delta in, protocol_runs and deliveries out; its grouped",
        "Arrow UDF runs the compiled loop, or the reference engine where the protocol has no",
        "compiled form: see `UDF`); `loop s`, the compiled loop alone in one Python process",
        "(columns to arrays, `layout`, `replay_compiled`; of which `layout s`); `reference s`,",
        "the Python reference engine alone (`build_trace` + `replay`). `ref / loop` is the",
        "compiled loop's speed-up, `spark / loop` Spark's overhead over the loop alone. msgs/s:",
        "application message copies replayed per second. Peak MB: the process tree for Spark",
        "(driver, JVM, Python workers), this process for loop and reference (it also holds the",
        "case's program rows and the Spark driver). Medians of the repeats shown; the machine",
        "has 2 cores shared with other work, so read ratios, not absolute times. A `deadlock`",
        "run stops where every process waits: its time covers the replay up to there only.",
        "Status and verified columns count runs (traces) by value; they agree across the three",
        "implementations unless a note says otherwise.",
        "",
    ]
    for case in case_names:
        protos = sorted({r["protocol"] for r in rows if r["case"] == case},
                        key=lambda p: order.get(p, 99))  # fmt: skip
        first = max((r for r in rows if r["case"] == case), key=lambda r: r.get("run", ""))
        commits = sorted({r["commit"] for r in rows if r["case"] == case and r["commit"]})
        lines += [
            f"### {case}: {first['traces']:,} trace(s), {first['events']:,} events, "
            f"{first['messages']:,} messages; code measured: commit {', '.join(commits)}",
            "",
            "| protocol | UDF | spark s | loop s | layout s | reference s | ref / loop | "
            "spark / loop | spark msgs/s | loop msgs/s | ref msgs/s | spark peak MB | "
            "loop peak MB | ref peak MB | repeats | status | verified | control msgs | "
            "held back | run | note |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
            "---:|---:|---|---|",
        ]
        for name in protos:
            s = by_key.get((case, name, "spark"))
            lp = by_key.get((case, name, "loop"))
            e = by_key.get((case, name, "reference"))
            measured = [r for r in (s, lp, e) if r is not None and r["seconds"] is not None]
            ref = measured[0] if measured else (s or lp or e)

            def secs(r: dict | None) -> float | None:
                return None if r is None else r["seconds"]

            def ratio(a: float | None, b: float | None) -> str:
                return _fmt(a / b) if a and b else "-"

            def rate(r: dict | None) -> str:
                if r is None or not r["seconds"]:
                    return "-"
                return f"{r['messages'] / r['seconds']:,.0f}"

            def cell(r: dict | None) -> str:
                if r is None:
                    return "not run"
                if r["seconds"] is None:
                    if r["capped"]:
                        return "capped"
                    return "n/a" if r["impl"] == "loop" else "skipped"
                return _fmt(r["seconds"])

            def peak(r: dict | None) -> str:
                return _fmt(r["peak_mb"], 0) if r and r["seconds"] is not None else "-"

            statuses = ", ".join(
                f"{k} {v}" for k, v in sorted((ref or {}).get("statuses", {}).items())
            )
            verified = ", ".join(
                f"{k} {v}" for k, v in sorted((ref or {}).get("verified", {}).items())
            )
            figures = (ref or {}).get("figures", {})
            udf = (s or {}).get("udf") or "-"
            notes = "; ".join(
                f"{r['impl']}: {r['note']}" for r in (e, lp, s) if r and r.get("note")
            )
            runs = sorted({r.get("run", "")[:16] for r in (s, lp, e) if r})
            lines.append(
                f"| {name} | {udf} | {cell(s)} | {cell(lp)} | "
                f"{_fmt((lp or {}).get('prep_seconds'))} | {cell(e)} | "
                f"{ratio(secs(e), secs(lp))} | {ratio(secs(s), secs(lp))} | "
                f"{rate(s)} | {rate(lp)} | {rate(e)} | {peak(s)} | {peak(lp)} | {peak(e)} | "
                f"{(s or lp or e or {}).get('repeats', '-')} | {statuses or '-'} | "
                f"{verified or '-'} | {_fmt(figures.get('control_messages'), 0)} | "
                f"{_fmt(figures.get('held_back'), 0)} | {', '.join(runs)} | {notes} |"
            )
        lines.append("")
    profiles = payload.get("profiles", {})
    if profiles:
        lines += ["### reference engine profiles (cProfile, own time)", ""]
        for key, prof in profiles.items():
            state = "" if prof["complete"] else ", capped: partial"
            when = (
                f"run {str(prof['run'])[:16]}, commit {prof['commit']}"
                if prof.get("run")
                else "an earlier run: the engine measured is older"
            )
            lines += [f"`{key}` ({prof['seconds']} s under the profiler{state}; {when}):", ""]
            lines += ["| share | own s | calls | function |", "|---:|---:|---:|---|"]
            for row in prof["top"][:8]:
                lines.append(f"| {row['share']:.1%} | {row['tottime']:.2f} | {row['calls']:,} | "
                             f"`{row['function']}` |")  # fmt: skip
            lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
