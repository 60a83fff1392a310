"""Progress of a job on stderr: a line when each stage starts and ends, and on a
terminal a bar of the Spark tasks the stage runs (tqdm). `--quiet` silences both.

The bar polls Spark's status tracker from a thread: the tasks of the active Spark
stages, done out of total. Lines go to stderr so that stdout keeps the report.
"""

from __future__ import annotations

import sys
import threading
import time
from datetime import UTC, datetime
from typing import TextIO

from pyspark.sql import SparkSession

POLL_SECONDS = 0.5


class Progress:
    """Stage start/end lines; a task bar while a stage runs when `stream` is a terminal."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.spark: SparkSession | None = None
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def say(self, text: str) -> None:
        if not self.quiet:
            stamp = datetime.now(UTC).strftime("%H:%M:%S")
            print(f"[{stamp}] {text}", file=self.stream, flush=True)

    def started(self, stage: str) -> None:
        self.say(f"{stage}: started")
        if not self.quiet and self.spark is not None and self.stream.isatty():
            self._start_bar(stage)

    def ended(self, stage: str, rows: dict[str, int], seconds: float) -> None:
        self._stop_bar()
        written = ", ".join(f"{table} {n}" for table, n in rows.items()) or "no table"
        self.say(f"{stage}: done in {seconds:.1f} s (rows staged: {written})")

    def _start_bar(self, stage: str) -> None:
        from tqdm import tqdm

        spark = self.spark
        assert spark is not None
        tracker = spark.sparkContext.statusTracker()
        stop = threading.Event()

        def poll() -> None:
            with tqdm(
                desc=stage, unit="task", file=self.stream, leave=False, dynamic_ncols=True
            ) as bar:
                while not stop.wait(POLL_SECONDS):
                    done = total = 0
                    for stage_id in tracker.getActiveStageIds():
                        info = tracker.getStageInfo(stage_id)
                        if info is not None:
                            done += info.numCompletedTasks
                            total += info.numTasks
                    if total:
                        bar.total = total
                        bar.n = done
                        bar.refresh()

        self._stop = stop
        self._thread = threading.Thread(target=poll, name="causal-spark-progress", daemon=True)
        self._thread.start()

    def _stop_bar(self) -> None:
        if self._stop is not None and self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
        self._stop = None
        self._thread = None


def elapsed(began: float) -> float:
    return time.monotonic() - began
