"""Running a job: one run id, stages in order, tables committed together, a `runs` row.

A stage is a function `(StageContext) -> None` that stages tables and adds
counts. `run_job` holds the warehouse's writer lock, repairs what a dead run left
(`causal_spark.app.repair`), runs the stages, and commits only after every stage
has succeeded; the `runs` row, written last, is the commit (docs/scheduling.md).

Stages read their inputs as the last committed run left them (never a version no
run committed), and every table carries a *lineage*: the run whose ingest its rows
derive from. A stage refuses inputs of different lineages (`detect` right after
`ingest` would otherwise pair new events with old clocks).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark import tables
from causal_spark.app import incremental as inc
from causal_spark.app.counts import RunCounts
from causal_spark.app.lock import writer_lock
from causal_spark.app.repair import RepairReport, repair
from causal_spark.config import Config
from causal_spark.io.ledger import NEW_TABLE, View, WarehouseError
from causal_spark.io.raw import RawRead
from causal_spark.io.sinks import FileWriter, RunTransaction, Warehouse
from causal_spark.io.sources import Inputs, InputSet, Skipped

log = logging.getLogger(__name__)

RUN_ID = "run_id"


class LineageError(WarehouseError):
    """A stage's input tables derive from different ingests (a stage was skipped)."""


# progress callbacks: (stage name) on start, (stage name, rows staged, seconds) on end
StageStarted = Callable[[str], None]
StageEnded = Callable[[str, dict[str, int], float], None]


@dataclass
class StageContext:
    """What a stage may use: the session, config, warehouse and the open transaction."""

    spark: SparkSession
    config: Config
    warehouse: Warehouse
    txn: RunTransaction
    view: View = field(default_factory=lambda: View(None))
    inputs: list[InputSet] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    counts: RunCounts = field(default_factory=RunCounts)
    outputs: dict[str, DataFrame] = field(default_factory=dict)
    lineage: dict[str, str] = field(default_factory=dict)
    current_lineage: str | None = None
    staged_order: list[str] = field(default_factory=list)
    selection: inc.Selection | None = None
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def raw_rows(self, paths: Sequence[str], reader: str = "auto") -> tuple[Inputs, RawRead]:
        """The files ingest reads and their raw rows (with the readers' plan of them): every
        file of `paths`, or (an incremental audit, chosen before the stages ran) the new
        and changed files and the touched traces' rows of the others. Records each file's
        fingerprint and traces for `runs`, and the files no reader took."""
        if self.selection is None:
            found = self.discover(paths, reader)
            self.selection = inc.select_full(found)
            raw = inc.read_selection(self.spark, self.selection, self.config.ingest, text=False)
            # the files' traces are filled in by `record_file_traces`, from ingest's rows
        else:
            # chosen (and its inputs recorded) before the stages ran
            raw = inc.read_selection(self.spark, self.selection, self.config.ingest, text=False)
        self.files = inc.records_of(self.selection)
        return self.selection.inputs, raw

    def record_file_traces(self, file_traces: Mapping[int, Collection[str]]) -> None:
        """A full audit: record the traces each file read holds rows of (`file_traces`,
        by file_id, as ingest counted them), for later incremental audits. An incremental
        audit chose its files by their traces before it read them: nothing to add."""
        if self.selection is None or self.selection.traces is not None:
            return
        shown = {f.file_id: f.shown for f in self.selection.inputs.files}
        by_path = {shown[i]: traces for i, traces in file_traces.items() if i in shown}
        inc.fill_traces(self.selection.records, by_path)
        self.files = inc.records_of(self.selection)

    def discover(self, paths: Sequence[str], reader: str = "auto") -> Inputs:
        """The input files under `paths` (never the warehouse itself), recorded for `runs`."""
        found = inc.discover(
            paths, self.config.ingest, exclude=[self.warehouse.root], reader=reader
        )
        if self.selection is None:
            self.record_inputs(found)
        return found

    def record_inputs(self, found: Inputs) -> None:
        self.inputs.extend(found.sets)
        self.skipped.extend(found.skipped)

    def table(self, name: str) -> DataFrame:
        """A table staged earlier in this run, else the version the last committed run
        names."""
        if name in self.outputs:
            return self.outputs[name]
        version = self.view.versions.get(name)
        if version is None:
            raise WarehouseError(
                f"table '{name}' does not exist under {self.warehouse.root}"
                + (f" as of run {self.view.run_id}" if self.view.run_id else "")
                + "; run the job that writes it first"
            )
        return self.warehouse.read_version(name, version)

    def whole(self, name: str) -> DataFrame:
        """All the rows `name` will hold once this run commits: in an incremental run,
        the committed rows of the traces it does not re-analyse and its own (for the
        stages whose result spans traces: compare)."""
        staged = self.table(name)
        traces = self.txn.replace_traces
        committed = self.view.versions.get(name)
        if not self.txn.incremental or name not in self.outputs or committed is None:
            return staged
        touched = self.spark.createDataFrame([(t,) for t in traces], "trace_id string")
        kept = self.warehouse.read_version(name, committed).join(
            F.broadcast(touched), "trace_id", "left_anti"
        )
        return kept.unionByName(staged)

    def derive_from(self, *names: str) -> str | None:
        """Require `names` to share one lineage; the tables this stage stages get it."""
        found = {name: self.lineage.get(name) for name in names}
        known = {lineage for lineage in found.values() if lineage is not None}
        if len(known) > 1:
            by_run = ", ".join(f"{n} from run {lin}" for n, lin in sorted(found.items()) if lin)
            raise LineageError(
                f"the inputs of this stage come from different ingests ({by_run}): a stage "
                "was skipped or failed since the last ingest; run the stages in order "
                "(ingest, clocks, detect, replay, compare) or `audit`"
            )
        self.current_lineage = known.pop() if known else None
        return self.current_lineage

    def stage(self, name: str, frame: DataFrame) -> DataFrame:
        if RUN_ID in tables.table_schema(name).names and RUN_ID not in frame.columns:
            frame = frame.withColumn(RUN_ID, F.lit(self.txn.run_id))
        return self._record(name, self.txn.stage(name, frame, self._mode(name)))

    def stage_through(self, name: str, produce: Callable[[FileWriter], DataFrame]) -> DataFrame:
        """Stage `name` from files its tasks write themselves (`RunTransaction.stage_through`)."""
        return self._record(name, self.txn.stage_through(name, produce, self._mode(name)))

    def writer(self, name: str) -> FileWriter:
        """A writer for tasks that write `name`'s next content (`stage_files` stages it)."""
        return self.txn.writer(name)

    def stage_files(self, name: str, writer: FileWriter, written: Mapping[str, int]) -> DataFrame:
        """Stage the files `writer` wrote that `written` names (path -> rows)."""
        return self._record(name, self.txn.stage_files(name, writer, written, self._mode(name)))

    def stage_arrow(self, name: str, rows: pa.Table) -> DataFrame:
        """Stage rows the driver holds (`RunTransaction.stage_arrow`: no Spark job)."""
        if RUN_ID in tables.table_schema(name).names and RUN_ID not in rows.column_names:
            rows = rows.append_column(RUN_ID, pa.array([self.txn.run_id] * rows.num_rows))
        return self._record(name, self.txn.stage_arrow(name, rows, self._mode(name)))

    def staged_values(self, name: str, column: str) -> bool:
        """Whether a row this run staged for `name` has `column` not null (mostly from the
        files' footers, no Spark job)."""
        return self.txn.staged_values(name, column)

    def staged_nulls(self, name: str, column: str) -> int | None:
        """Nulls in `column` of what this run staged for `name`, from the files' footers."""
        return self.txn.staged_nulls(name, column)

    def staged_columns(self, name: str, columns: list[str]) -> pa.Table:
        """`columns` of the rows this run staged for `name` (read on the driver, no Spark job)."""
        return self.txn.staged_columns(name, columns)

    def staged_value_counts(self, name: str, column: str) -> Counter[Any]:
        """Each value's rows in `column` of what this run staged for `name` (None: null),
        counted file by file on the driver, no Spark job."""
        return self.txn.staged_value_counts(name, column)

    def remove_scratch(self, writer: FileWriter) -> None:
        self.txn.remove_scratch(writer)

    def _mode(self, name: str) -> Any:
        per_trace = "trace_id" in tables.table_schema(name).names
        return "replace" if self.txn.incremental and per_trace else "overwrite"

    def _record(self, name: str, staged: DataFrame) -> DataFrame:
        self.outputs[name] = staged
        self.counts.rows[name] = self.txn.staged_rows(name)
        self.staged_order.append(name)
        self.lineage[name] = self.current_lineage or self.txn.run_id
        return staged


Stage = Callable[[StageContext], None]


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    command: str
    start: datetime
    end: datetime
    table_versions: dict[str, int]
    stages: RunCounts
    view: dict[str, int] = field(default_factory=dict)
    previous_run: str | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)
    repaired: RepairReport | None = None
    mode: str | None = None
    # the files under the input folders that no reader took (None: the run read no input)
    skipped: tuple[Skipped, ...] | None = None
    # the files a reader took (every input's files, read or, incremental, unchanged)
    files_taken: int = 0

    @property
    def counts(self) -> dict[str, int]:
        """The `runs.counts` map of this run: rows per table and every stage's counts."""
        return self.stages.flat()


def new_run_id(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


def run_job(
    command: str,
    stages: Sequence[Stage],
    *,
    spark: SparkSession,
    config: Config,
    warehouse: Warehouse,
    on_staged: Callable[[str], None] | None = None,
    on_committed: Callable[[str], None] | None = None,
    stage_names: Sequence[str] | None = None,
    started: StageStarted | None = None,
    ended: StageEnded | None = None,
    incremental: inc.Incremental | None = None,
    mode: str | None = None,
) -> RunRecord:
    """Run `stages` under one run id; commit their tables and a `runs` row at the end.

    Holds the writer lock of the warehouse (re-entrant: the CLI takes it first) and
    repairs the warehouse before anything else. `on_staged` / `on_committed` are
    called after each table is staged / committed (tests fail or stop a run there);
    `started` / `ended` report each stage (progress); `incremental`: choose the files
    and traces after the repair, before the stages, and replace only those traces' rows.
    """
    with writer_lock(warehouse.root, command):
        start = datetime.now(UTC)
        run_id = new_run_id(start)
        repaired = repair(warehouse.root, f"{run_id}-repair", config.to_json())
        view = warehouse.view()
        log.info("run %s: %s (after run %s)", run_id, command, view.run_id)
        names = list(stage_names or [f"stage {i + 1}" for i in range(len(stages))])
        seconds: dict[str, float] = {}
        with warehouse.transaction(run_id) as txn:
            txn.on_staged = on_staged
            txn.on_committed = on_committed
            # the version each table starts from (the view's, or a later one that changes no
            # data: vacuum's commits; NEW_TABLE: none); a commit that finds the table
            # elsewhere met a concurrent writer
            txn.base = {
                t: NEW_TABLE if (v := warehouse.version(t)) is None else v for t in tables.TABLES
            }
            context = StageContext(
                spark=spark,
                config=config,
                warehouse=warehouse,
                txn=txn,
                view=view,
                lineage=dict(view.lineage),
            )
            chosen = list(zip(names, stages, strict=True))
            if incremental is not None:
                chosen = _prepare_incremental(context, incremental, chosen)
            for name, stage in chosen:
                if started is not None:
                    started(name)
                staged_before = len(context.staged_order)
                began = time.monotonic()
                stage(context)
                seconds[name] = time.monotonic() - began
                if ended is not None:
                    rows = {t: context.counts.rows[t] for t in context.staged_order[staged_before:]}
                    ended(name, rows, seconds[name])

            def row(versions: dict[str, int]) -> dict[str, Any]:
                full = dict(view.versions)
                full.update(versions)
                return _run_row(
                    run_id, command, start, context, full, sorted(versions), seconds, mode
                )

            txn.commit_run(row)
            end = datetime.now(UTC)
        written = dict(txn.versions)
    full = dict(view.versions)
    full.update({t: v for t, v in written.items() if t != tables.RUNS})
    return RunRecord(
        run_id,
        command,
        start,
        end,
        written,
        context.counts,
        view=full,
        previous_run=view.run_id,
        stage_seconds=seconds,
        repaired=repaired if repaired else None,
        mode=mode,
        skipped=tuple(context.skipped) if context.inputs else None,
        files_taken=sum(len(i.files) for i in context.inputs),
    )


def _prepare_incremental(
    context: StageContext, spec: inc.Incremental, stages: list[tuple[str, Stage]]
) -> list[tuple[str, Stage]]:
    """Choose the files and traces of an incremental audit; return the stages to run.

    Nothing new: no stage runs (the run records the files it saw). Only rows removed
    (deleted files pruned, no new row for those traces): every per-trace table drops
    the traces' rows, and only `compare` runs again.
    """
    spark = context.spark
    found = context.discover(spec.paths, spec.reader)
    selection = inc.select_incremental(
        found,
        inc.previous_files(context.warehouse.ledger.rows()),
        lambda fresh: inc.traces_by_file(spark, fresh, context.config.ingest),
        spec.prune,
    )
    context.selection = selection
    context.txn.incremental = True
    context.txn.replace_traces = list(selection.traces or [])
    context.counts.rows.clear()
    if not selection.traces:
        context.files = inc.records_of(selection)
        return []
    if selection.inputs.files:  # files holding rows of the traces (an empty file is left out)
        return stages
    context.files = inc.records_of(selection)
    for table, _ in context.view.versions.items():
        if "trace_id" in tables.table_schema(table).names:
            context.stage(table, spark.createDataFrame([], tables.table_schema(table)))
    return [(name, stage) for name, stage in stages if name == "compare"]


def input_files(context: StageContext) -> list[list[dict[str, Any]] | None]:
    """`runs.inputs[].files` of each input set: the records of its own files (a folder
    read by several readers is one set per reader); the records of no set's file (gone
    files) go with the path's first set."""
    taken: dict[str, set[str]] = {}
    for given in context.inputs:
        taken.setdefault(given.path, set()).update(f.shown for f in given.files)
    first: set[str] = set()
    result: list[list[dict[str, Any]] | None] = []
    for given in context.inputs:
        records = context.files.get(given.path)
        own = {f.shown for f in given.files}
        leader = given.path not in first
        first.add(given.path)
        result.append(
            None
            if records is None
            else [
                r
                for r in records
                if r["path"] in own or (leader and r["path"] not in taken[given.path])
            ]
        )
    return result


def _run_row(
    run_id: str,
    command: str,
    start: datetime,
    context: StageContext,
    versions: dict[str, int],
    written: list[str],
    seconds: dict[str, float],
    mode: str | None,
) -> dict[str, Any]:
    inputs = [
        {
            "path": i.path,
            "format": i.format,
            "n_files": len(i.files),
            "bytes": i.n_bytes,
            "fingerprint": i.fingerprint,
            "files": files,
        }
        for i, files in zip(context.inputs, input_files(context), strict=True)
    ]
    lineage = {t: lin for t, lin in context.lineage.items() if t in versions}
    return {
        "id": run_id,
        "command": command,
        "start": start,
        "end": datetime.now(UTC),
        "inputs": inputs,
        "config": context.config.to_json(),
        "table_versions": versions,
        "counts": context.counts.flat(),
        "written": written,
        "lineage": lineage,
        "stage_seconds": dict(seconds),
        "mode": mode,
        "note": None,
        "skipped": ([s.as_record() for s in context.skipped] if context.inputs else None),
    }
