"""A small audit's Spark jobs and seconds per stage, in one warm process.

    .venv/bin/python bench/small_audit.py [--rounds 3] [--protocols none] [--conf PROFILE]

Builds the profile's session (conf/local.yml by default), audits data-samples/ into a
fresh warehouse `--rounds` times and prints, for each round, the Spark jobs, tasks and
seconds of each stage: the first round compiles and warms the JVM, the later ones are
what a warm audit costs. The stages are told apart by Spark job groups set when each
stage starts (the status tracker's jobs of a group; nothing in the product changes).
`--event-log DIR` also writes Spark's event log there (start/end of every job).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from causal_spark.app.cli import _parser, run_job_of
from causal_spark.app.progress import Progress
from causal_spark.app.session import build_session
from causal_spark.config import load_config

ROOT = Path(__file__).resolve().parent.parent


class Grouped(Progress):
    """Progress that puts each stage's Spark jobs in a job group named after the round."""

    def __init__(self, label: str) -> None:
        super().__init__(quiet=True)
        self.label = label
        self.seconds: dict[str, float] = {}

    def started(self, stage: str) -> None:
        assert self.spark is not None
        self.spark.sparkContext.setJobGroup(f"{self.label}:{stage}", stage)

    def ended(self, stage: str, rows: dict[str, int], seconds: float) -> None:
        assert self.spark is not None
        self.seconds[stage] = seconds
        self.spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def jobs_of(spark, group: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Jobs and tasks the status tracker knows for `group` (after the listener bus drained)."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    tracker = spark.sparkContext.statusTracker()
    ids = tracker.getJobIdsForGroup(group)
    tasks = 0
    for job in ids:
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else []:
            stage_info = tracker.getStageInfo(stage)
            tasks += stage_info.numTasks if stage_info else 0
    return len(ids), tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--protocols", default="none")
    parser.add_argument("--conf", default=str(ROOT / "conf" / "local.yml"))
    parser.add_argument("--inputs", default=str(ROOT / "data-samples"))
    parser.add_argument("--event-log", default=None)
    parser.add_argument("--json", default=None, help="also write the rounds here")
    args = parser.parse_args(argv)
    config = load_config(args.conf)
    if args.event_log:
        Path(args.event_log).mkdir(parents=True, exist_ok=True)
        logged = {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": args.event_log,
            "spark.eventLog.compress": "false",
        }
        spark_settings = replace(config.spark, conf={**config.spark.conf, **logged})
        config = replace(config, spark=spark_settings)
    began = time.perf_counter()
    spark = build_session(config.spark)
    print(f"session {time.perf_counter() - began:.1f} s", flush=True)
    rounds = []
    for n in range(1, args.rounds + 1):
        folder = tempfile.mkdtemp(prefix="small-audit-")
        try:
            argv_ = ["audit", args.inputs, "--warehouse", folder, "--quiet"]
            argv_ += ["--conf", args.conf, "--protocols", args.protocols]
            parsed = _parser().parse_args(argv_)
            progress = Grouped(f"round{n}")
            began = time.perf_counter()
            run_job_of(parsed, spark, progress=progress, config=config)
            wall = time.perf_counter() - began
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        stages = {}
        for stage, seconds in progress.seconds.items():
            jobs, tasks = jobs_of(spark, f"round{n}:{stage}")
            stages[stage] = {"jobs": jobs, "tasks": tasks, "seconds": round(seconds, 2)}
        total = sum(s["jobs"] for s in stages.values())
        line = ", ".join(f"{k} {v['jobs']} jobs {v['seconds']:.1f} s" for k, v in stages.items())
        print(f"round {n}: {wall:.1f} s, {total} jobs: {line}", flush=True)
        rounds.append({"round": n, "wall": round(wall, 2), "jobs": total, "stages": stages})
    if args.json:
        Path(args.json).write_text(json.dumps(rounds, indent=1) + "\n", encoding="utf-8")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
