"""Nightly incremental audits onto one warehouse, against full re-audits (issue 20).

Each night a new folder of generated logs (`--events` events in `--traces` traces,
new trace ids every night) lands under one logs folder; `audit --incremental` runs
on the whole folder. Every `--full-every` nights (and on the first and last) a full
audit of the folder as it then is runs into a fresh warehouse. The claim: the
incremental run's time stays flat (the mean of the last 5 within 1.3x of the first
5) while the full audit's grows with the history.

    flock /tmp/causal-heavy.lock .venv/bin/python bench/incremental.py \
        --nights 30 --events 100000 --out bench/incremental.md

One Spark session runs every job (local[2], the test profile's settings), so the
times are the jobs', not Spark's start-up. Replay runs `--protocols` (default
none,fifo) in both modes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from causal_spark.app.cli import run as run_cli
from causal_spark.app.session import build_session
from causal_spark.config import load_config
from causal_spark.generate import GeneratorSpec, generate_traces, write_generated

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--events", type=int, default=100_000, help="new events per night")
    parser.add_argument("--traces", type=int, default=10, help="new traces per night")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--full-every", type=int, default=10)
    parser.add_argument("--protocols", default="none,fifo")
    parser.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "incremental.md"))
    args = parser.parse_args()

    config = load_config(ROOT / "conf" / "test.yml")
    spark = build_session(config.spark)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-incremental-"))
    logs, warehouse = work / "logs", work / "warehouse"
    common = ["--conf", str(ROOT / "conf" / "test.yml"), "--protocols", args.protocols]
    rows: list[dict[str, object]] = []
    full_nights = {1, args.nights, *range(args.full_every, args.nights + 1, args.full_every)}
    for night in range(1, args.nights + 1):
        spec = GeneratorSpec(
            processes=args.processes,
            events=args.events // args.traces,
            traces=args.traces,
            seed=night,
        ).validate()
        write_generated(
            generate_traces(spark, spec), str(logs / f"night-{night:02d}"), "parquet", spec
        )
        began = time.perf_counter()
        record = run_cli(
            ["audit", str(logs), "--warehouse", str(warehouse), "--incremental", *common],
            session=spark,
        )
        incremental = time.perf_counter() - began
        row: dict[str, object] = {
            "night": night,
            "events_total": night * spec.traces * spec.events,
            "incremental_s": round(incremental, 2),
            "incremental_events": record.counts.get("events", 0),
            "full_s": None,
        }
        if night in full_nights:
            fresh = work / f"full-{night}"
            began = time.perf_counter()
            run_cli(["audit", str(logs), "--warehouse", str(fresh), *common], session=spark)
            row["full_s"] = round(time.perf_counter() - began, 2)
            shutil.rmtree(fresh)
        rows.append(row)
        print(json.dumps(row), flush=True)
        _write(args, rows)
    spark.stop()


def _write(args: argparse.Namespace, rows: list[dict[str, object]]) -> None:
    out = Path(args.out)
    times = [float(r["incremental_s"]) for r in rows]  # type: ignore[arg-type]
    first, last = times[:5], times[-5:]
    ratio = statistics.mean(last) / statistics.mean(first) if len(times) >= 10 else None
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    lines = [
        "# Incremental audits: nightly runs onto one warehouse",
        "",
        f"Run of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {commit}, `bench/incremental.py "
        f"--nights {args.nights} --events {args.events} --traces {args.traces} --processes "
        f"{args.processes} --protocols {args.protocols}` (one local[2] session, shared machine).",
        "",
        "| night | events in the folder | incremental audit (s) | events it analysed | full audit (s) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        full = "" if r["full_s"] is None else f"{r['full_s']}"
        lines.append(
            f"| {r['night']} | {r['events_total']} | {r['incremental_s']} | "
            f"{r['incremental_events']} | {full} |"
        )
    if ratio is not None:
        lines += [
            "",
            f"Mean of the last 5 incremental runs / mean of the first 5: **{ratio:.2f}x** "
            f"({statistics.mean(last):.1f} s / {statistics.mean(first):.1f} s).",
        ]
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
