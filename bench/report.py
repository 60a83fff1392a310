"""The HTML report at scale: time and memory to build it, its size, and its load in Chromium.

Two runs are audited (one local[2] Spark session, the test profile's settings):
`--traces` traces of `--events-per-trace` events (many small traces: the page lists the
traces with the most findings and counts the rest), and one trace of `--big-events`
events (a diagram draws a window around each finding, never the whole trace). For each,
`causal-spark report` runs as a subprocess (it starts no Spark): wall time and the peak
memory of that process, the size of `index.html`, then the page's load time in headless
Chromium (`performance.timing`: navigation start to the load event).

No baseline ratio: nothing else builds this page. The claims are absolute (the issue's
acceptance): the page of either run loads in Chromium in under 5 s, and its size and
build time stay bounded as the run grows. Figures: `bench/report.md`.

    flock /tmp/causal-heavy.lock .venv/bin/python bench/report.py --out bench/report.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from causal_spark.app.cli import run as run_cli
from causal_spark.app.session import build_session
from causal_spark.config import load_config
from causal_spark.generate import GeneratorSpec, generate_traces, write_generated

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _audit(spark, out: Path, spec: GeneratorSpec, protocols: str) -> tuple[Path, float]:  # type: ignore[no-untyped-def]
    logs, warehouse = out / "logs", out / "warehouse"
    write_generated(generate_traces(spark, spec), str(logs), "parquet", spec)
    began = time.perf_counter()
    run_cli(
        [
            "audit",
            str(logs),
            "--warehouse",
            str(warehouse),
            "--conf",
            str(ROOT / "conf" / "test.yml"),
            "--protocols",
            protocols,
            "--quiet",
        ],
        session=spark,
    )
    return warehouse, time.perf_counter() - began


# runs one command and prints the peak RSS (KiB) of it (and its children) as the last line
_PEAK = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(done.returncode)"
)


def _report(warehouse: Path, out: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one `causal-spark report` process."""
    shutil.rmtree(out, ignore_errors=True)
    command = [
        str(BIN / "causal-spark"),
        "report",
        "--warehouse",
        str(warehouse),
        "--out",
        str(out),
    ]
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *command], capture_output=True, text=True, timeout=1800
    )
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return seconds, int(done.stdout.strip().splitlines()[-1])


def _load_seconds(page: Path) -> float:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=Service(executable_path=shutil.which("chromedriver") or "chromedriver"),
        options=options,
    )
    try:
        driver.get(page.as_uri())
        timing = driver.execute_script("return performance.timing.toJSON()")
        return (timing["loadEventEnd"] - timing["navigationStart"]) / 1000
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--events-per-trace", type=int, default=100)
    parser.add_argument("--big-events", type=int, default=1_000_000)
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--protocols", default="none,fifo")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", default=None)
    parser.add_argument(
        "--reuse", action="store_true", help="report on the warehouses --work already holds"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "report.md"))
    args = parser.parse_args()

    config = load_config(ROOT / "conf" / "test.yml")
    spark = build_session(config.spark)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-report-"))
    cases = {
        f"{args.traces} traces x {args.events_per_trace} events": GeneratorSpec(
            processes=4, events=args.events_per_trace, traces=args.traces, seed=1
        ),
        f"1 trace x {args.big_events} events": GeneratorSpec(
            processes=args.processes, events=args.big_events, traces=1, seed=2
        ),
    }
    rows = []
    for name, spec in cases.items():
        folder = work / name.replace(" ", "_")
        if args.reuse and (folder / "warehouse").is_dir():
            warehouse, audit_s = folder / "warehouse", None  # audited by an earlier run
        else:
            warehouse, audit_s = _audit(spark, folder, spec.validate(), args.protocols)
        builds, loads, peaks = [], [], []
        for _ in range(args.repeats):
            seconds, peak = _report(warehouse, folder / "report")
            builds.append(seconds)
            peaks.append(peak)
            loads.append(_load_seconds(folder / "report" / "index.html"))
        page = folder / "report" / "index.html"
        row = {
            "case": name,
            "events": spec.events * spec.traces,
            "audit_s": None if audit_s is None else round(audit_s, 1),
            "report_s": round(statistics.median(builds), 2),
            "peak_rss_mib": round(max(peaks) / 1024),
            "page_kib": round(page.stat().st_size / 1024),
            "load_s": round(statistics.median(loads), 2),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    spark.stop()
    _write(args, rows)


def _write(args: argparse.Namespace, rows: list[dict[str, object]]) -> None:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    lines = [
        "# The HTML report at scale",
        "",
        f"Run of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {commit}, `bench/report.py "
        f"--traces {args.traces} --events-per-trace {args.events_per_trace} --big-events "
        f"{args.big_events} --protocols {args.protocols}`; medians of {args.repeats} builds "
        "and loads.",
        "",
        "| run | events | audit (s) | report (s) | peak RSS of report (MiB) "
        "| index.html (KiB) | load in Chromium (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['events']} | {r['audit_s'] or '-'} | {r['report_s']} | "
            f"{r['peak_rss_mib']} | {r['page_kib']} | {r['load_s']} |"
        )
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
