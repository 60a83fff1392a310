"""Helpers shared by tests: write small inputs, run ingest without the job layer."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from causal_spark.config import IngestSettings
from causal_spark.ingest import Ingested, ingest
from causal_spark.io.sources import discover_inputs, only_files, read_raw_rows


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any] | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def ingest_paths(spark: SparkSession, paths: Sequence[Path | str]) -> Ingested:
    inputs = discover_inputs([str(p) for p in paths], IngestSettings())
    return ingest(
        read_raw_rows(spark, inputs),
        inputs,
        reread=lambda ids: read_raw_rows(spark, only_files(inputs, ids)),
    )


def spark_jobs(spark: SparkSession, run: Callable[[], Any]) -> int:
    """How many Spark jobs `run()` starts (counted through a job group)."""
    tracker = spark.sparkContext.statusTracker()
    group = f"count-{random.random()}"
    spark.sparkContext.setJobGroup(group, "counting rounds")
    try:
        run()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return len(tracker.getJobIdsForGroup(group))
