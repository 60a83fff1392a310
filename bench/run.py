"""Benchmark every heavy stage against same-run baselines; write bench/results.{json,md}.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/run.py            # full sweep (about 20 minutes here)
    .venv/bin/python bench/run.py --quick    # 10^4 and 10^5 events only
    .venv/bin/python bench/plot.py           # bench/*.png from bench/results.json

Stages: generate (Spark, writes Parquet) and ingest (Spark, Parquet in, Delta
out via the real job). Baselines, measured in the same run on the same data:
a pure-Python implementation and a single-core compiled reference (NumPy /
Arrow C++ on one thread). Times are medians of the repeats; memory is the
peak resident set sampled every 20 ms: of the whole process tree (driver,
JVM, Python workers) for Spark, of this process for the in-process baselines.
The Spark session is started once, before any measurement.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _measure import PeakMemory
from baselines import (
    generate_pure_python,
    generate_reference,
    ingest_pure_python,
    ingest_reference,
)

from causal_spark.app.runs import run_job
from causal_spark.app.session import build_session
from causal_spark.app.stages import ingest_stage
from causal_spark.config import load_config
from causal_spark.generate import GeneratorSpec, generate_traces, write_generated
from causal_spark.sinks import Warehouse

HERE = Path(__file__).resolve().parent
SCRATCH = HERE / "out"


@dataclass
class Result:
    stage: str
    impl: str
    events: int
    processes: int
    seconds: float
    peak_mb: float
    repeats: int


def measure(fn: Callable[[], object], repeats: int, tree: bool) -> tuple[float, float]:
    times, peaks = [], []
    for _ in range(repeats):
        with PeakMemory(tree) as memory:
            began = time.perf_counter()
            fn()
            times.append(time.perf_counter() - began)
        peaks.append(memory.peak / 2**20)
    return statistics.median(times), max(peaks)


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="only 10^4 and 10^5 events")
    parser.add_argument(
        "--max-python-events",
        type=int,
        default=1_000_000,
        help="largest size the pure-Python baselines run at",
    )
    args = parser.parse_args()

    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000, 10_000_000]
    cases = [(e, 64) for e in sizes]
    if not args.quick:
        cases += [(1_000_000, 4), (1_000_000, 256)]
    config = load_config()  # the embedded local profile, as users run it
    spark = build_session(config.spark)
    results: list[Result] = []

    def record(
        stage: str,
        impl: str,
        events: int,
        processes: int,
        fn: Callable[[], object],
        repeats: int,
        tree: bool,
    ) -> None:
        seconds, peak = measure(fn, repeats, tree)
        results.append(Result(stage, impl, events, processes, seconds, peak, repeats))
        save(results)  # after every measurement: a cut-off sweep still leaves its results
        print(
            f"{stage:9} {impl:12} events={events:>10} processes={processes:>4} "
            f"{seconds:9.2f} s  peak {peak:8.0f} MB",
            flush=True,
        )

    for events, processes in cases:
        repeats = 3 if events <= 100_000 else 1
        spec = GeneratorSpec(processes=processes, events=events, seed=1)
        case = SCRATCH / f"e{events}-p{processes}"
        generated = case / "generated"

        def spark_generate() -> None:
            write_generated(generate_traces(spark, spec), str(generated), "parquet", spec)

        record("generate", "spark", events, processes, spark_generate, repeats, tree=True)
        record(
            "generate",
            "reference",
            events,
            processes,
            lambda: generate_reference(spec, fresh(case / "ref") / "g.parquet"),
            repeats,
            tree=False,
        )
        if events <= args.max_python_events:
            record(
                "generate",
                "pure_python",
                events,
                processes,
                lambda: generate_pure_python(spec, fresh(case / "py") / "g.parquet"),
                repeats,
                tree=False,
            )

        single = fresh(case / "single") / "input.parquet"
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq

        pq.write_table(ds.dataset(str(generated)).to_table(), single)

        def spark_ingest() -> None:
            warehouse = Warehouse(spark, fresh(case / "warehouse"), "deltalake")
            run_job(
                "ingest",
                [ingest_stage([str(generated)])],
                spark=spark,
                config=config,
                warehouse=warehouse,
            )

        record("ingest", "spark", events, processes, spark_ingest, repeats, tree=True)
        record(
            "ingest",
            "reference",
            events,
            processes,
            lambda: ingest_reference(single, fresh(case / "ingest-ref")),
            repeats,
            tree=False,
        )
        if events <= args.max_python_events:
            record(
                "ingest",
                "pure_python",
                events,
                processes,
                lambda: ingest_pure_python(single, fresh(case / "ingest-py")),
                repeats,
                tree=False,
            )
        shutil.rmtree(case, ignore_errors=True)

    spark.stop()
    save(results)
    print(f"wrote {HERE / 'results.md'}")
    return 0


def save(results: list[Result]) -> None:
    payload = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}",
        "results": [asdict(r) for r in results],
    }
    (HERE / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
    md = HERE / "results.md"
    kept = _other_sections(md.read_text()) if md.exists() else ""
    md.write_text(render(payload) + ("\n" + kept if kept else ""))


STAGES = ("generate", "ingest")


def _other_sections(text: str) -> str:
    """The `## ...` sections of results.md that other scripts write (bench/replay.py's
    `## replay`): kept as they are when this script rewrites its own."""
    parts = text.split("\n## ")[1:]
    kept = [part for part in parts if part.split("\n", 1)[0].strip() not in STAGES]
    return "".join(f"## {part.rstrip()}\n\n" for part in kept).rstrip("\n") + "\n" if kept else ""


def render(payload: dict) -> str:
    rows = [Result(**r) for r in payload["results"]]
    by_key = {(r.stage, r.impl, r.events, r.processes): r for r in rows}
    lines = [
        "# Benchmark results",
        "",
        f"Run {payload['when']} on {payload['machine']} by `bench/run.py`.",
        "Times are medians (3 repeats up to 10^5 events, 1 above); `x` columns are the",
        "baseline's time divided by Spark's (above 1: Spark is faster).",
        "",
    ]
    for stage in STAGES:
        lines += [
            f"## {stage}",
            "",
            "| events | processes | spark s | spark peak MB | reference s | x ref | pure Python s | x py | spark µs/event |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        keys = sorted({(r.events, r.processes) for r in rows if r.stage == stage})
        for events, processes in keys:
            s = by_key.get((stage, "spark", events, processes))
            ref = by_key.get((stage, "reference", events, processes))
            py = by_key.get((stage, "pure_python", events, processes))
            if s is None:
                continue

            def cell(b: Result | None) -> tuple[str, str]:
                if b is None:
                    return "skipped", "-"
                return f"{b.seconds:.2f}", f"{b.seconds / s.seconds:.2f}"

            rs, rx = cell(ref)
            ps, px = cell(py)
            lines.append(
                f"| {events:,} | {processes} | {s.seconds:.2f} | {s.peak_mb:.0f} | {rs} | {rx} | "
                f"{ps} | {px} | {1e6 * s.seconds / events:.2f} |"
            )
        spark_64 = sorted(
            (r.events, r.seconds)
            for r in rows
            if r.stage == stage and r.impl == "spark" and r.processes == 64
        )
        if len(spark_64) >= 2:
            import math

            (e0, t0), (e1, t1) = spark_64[-2], spark_64[-1]
            slope = math.log(t1 / t0) / math.log(e1 / e0)
            lines += [
                "",
                f"Growth of Spark time between {e0:,} and {e1:,} events (64 processes): "
                f"time ∝ events^{slope:.2f}.",
            ]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
