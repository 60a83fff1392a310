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
times are the jobs', not Spark's start-up; an untimed audit of data-samples/ runs
first, so that night 1 does not pay for the JVM's warm-up. Replay runs `--protocols`
(default none,fifo) in both modes. On the nights with a full audit the two warehouses
are compared table by table (every row, the run id aside): the run stops if they differ.
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

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from causal_spark.app.cli import run as run_cli
from causal_spark.app.session import build_session
from causal_spark.config import load_config
from causal_spark.generate import GeneratorSpec, generate_traces, write_generated
from causal_spark.sinks import Warehouse

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
    # one audit first, untimed: night 1 should not pay for the JVM's and Numba's warm-up
    run_cli(
        ["audit", str(ROOT / "data-samples"), "--warehouse", str(work / "warm-up"), *common],
        session=spark,
    )
    shutil.rmtree(work / "warm-up")
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
            row["tables_equal"] = _same_tables(spark, warehouse, fresh)
            shutil.rmtree(fresh)
            if not row["tables_equal"]:
                raise SystemExit(f"night {night}: the incremental tables differ from a full audit")
        rows.append(row)
        print(json.dumps(row), flush=True)
        _write(args, rows)
    spark.stop()


# columns that name the run that wrote a row
PER_RUN = {"trace_summary": ["run_id"]}


def _same_tables(spark: SparkSession, incremental: Path, full: Path) -> bool:
    """Every table of the full audit equals the incremental warehouse's, row for row."""
    ours, theirs = Warehouse(spark, incremental, "deltalake"), Warehouse(spark, full, "deltalake")
    if set(ours.view().versions) != set(theirs.view().versions):
        return False
    for table in sorted(theirs.view().versions):
        a, b = (_comparable(w.read(table).drop(*PER_RUN.get(table, []))) for w in (ours, theirs))
        if a.exceptAll(b).limit(1).count() or b.exceptAll(a).limit(1).count():
            print(f"{table}: differs", flush=True)
            return False
    return True


def _comparable(frame: DataFrame) -> DataFrame:
    """Map columns as sorted JSON (set operations cannot compare maps)."""
    return frame.select(
        *[
            F.to_json(F.array_sort(F.map_entries(F.col(f.name)))).alias(f.name)
            if isinstance(f.dataType, MapType)
            else F.col(f.name)
            for f in frame.schema.fields
        ]
    )


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
        "| night | events in the folder | incremental audit (s) | events it analysed "
        "| full audit (s) | tables equal |",
        "|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        full = "" if r["full_s"] is None else f"{r['full_s']}"
        equal = {True: "yes", False: "NO"}.get(r.get("tables_equal"), "")  # type: ignore[arg-type]
        lines.append(
            f"| {r['night']} | {r['events_total']} | {r['incremental_s']} | "
            f"{r['incremental_events']} | {full} | {equal} |"
        )
    if ratio is not None:
        medians = statistics.median(last) / statistics.median(first)
        lines += [
            "",
            f"Mean of the last 5 incremental runs / mean of the first 5: **{ratio:.2f}x** "
            f"({statistics.mean(last):.1f} s / {statistics.mean(first):.1f} s); medians: "
            f"{medians:.2f}x ({statistics.median(last):.1f} s / "
            f"{statistics.median(first):.1f} s).",
        ]
    fulls = [r for r in rows if r["full_s"] is not None]
    if len(fulls) >= 2:
        a, b = fulls[0], fulls[-1]
        lines.append(
            f"The full audit grew from {a['full_s']} s at {a['events_total']} events (night "
            f"{a['night']}) to {b['full_s']} s at {b['events_total']} (night {b['night']}); "
            f"the incremental run on night {b['night']} took {b['incremental_s']} s."
        )
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
