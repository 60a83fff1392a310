"""Helpers shared by tests: write small inputs, run ingest without the job layer."""

from __future__ import annotations

import atexit
import json
import random
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pyspark.sql import SparkSession

from causal_spark import tables
from causal_spark.config import IngestSettings
from causal_spark.ingest import Ingested, IngestTargets, ingest
from causal_spark.io.sources import discover_inputs, only_files, read_raw, read_raw_rows
from causal_spark.sinks import FileWriter


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any] | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def ingest_targets() -> IngestTargets:
    """Folders for an ingest outside a warehouse: they live until the test run ends (the
    DataFrames ingest returns read them)."""
    root = Path(tempfile.mkdtemp(prefix="causal-ingest-"))
    atexit.register(shutil.rmtree, root, True)
    return IngestTargets(
        FileWriter(tables.EVENTS, str(root / "events")),
        FileWriter(tables.MESSAGES, str(root / "messages")),
        str(root / "scratch"),
    )


def ingest_paths(spark: SparkSession, paths: Sequence[Path | str]) -> Ingested:
    inputs = discover_inputs([str(p) for p in paths], IngestSettings())
    read = read_raw(spark, inputs, text=False)
    return ingest(
        read.rows,
        inputs,
        ingest_targets(),
        reread=lambda ids: read_raw_rows(spark, only_files(inputs, ids)),
        plan=read.plan,
    )


class Rows(NamedTuple):
    """The collected rows of one ingest case."""

    events: list[Any]
    messages: list[Any]
    quarantine: list[Any]


def ingest_cases(
    spark: SparkSession, given: Sequence[Path | str], folders: Mapping[str, Path]
) -> dict[str, Rows]:
    """Ingest every case's paths in one run and split the rows by the case folder each
    was read from (a message goes with its trace). Asserts that every row belongs to
    exactly one case: cases with distinct trace ids do not leak into each other."""
    out = ingest_paths(spark, given)
    events, messages = out.events.collect(), out.messages.collect()
    quarantine = out.quarantine.collect()
    split: dict[str, Rows] = {}
    for case, folder in folders.items():
        prefix = f"{folder}/"
        mine_e = [e for e in events if e["source"].startswith(prefix)]
        mine_q = [q for q in quarantine if q["source"].startswith(prefix)]
        traces = {e["trace_id"] for e in mine_e} | {q["trace_id"] for q in mine_q}
        mine_m = [m for m in messages if m["trace_id"] in traces]
        split[case] = Rows(mine_e, mine_m, mine_q)
    for got, everything in zip(zip(*split.values(), strict=True), (events, messages, quarantine),
                               strict=True):  # fmt: skip
        assert sum(len(rows) for rows in got) == len(everything)
    return split


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


def selected_tests(request: Any, name: str) -> list[Any]:
    """The tests of `request`'s module named `name` (parametrized ones: each case) that this
    run selected, in the order they run: what a module fixture starts ahead for them."""
    import pytest

    return [
        item
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is request.module
        and item.originalname == name
    ]
