"""Running a job: one run id, stages in order, tables committed together, a `runs` row.

A stage is a function `(StageContext) -> None` that stages tables and adds
counts. `run_job` commits only after every stage has succeeded.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pyspark.sql import DataFrame, Row, SparkSession

from causal_spark import tables
from causal_spark.app.counts import RunCounts
from causal_spark.config import Config
from causal_spark.sinks import FileWriter, RunTransaction, Warehouse
from causal_spark.sources import InputSet

log = logging.getLogger(__name__)


@dataclass
class StageContext:
    """What a stage may use: the session, config, warehouse and the open transaction."""

    spark: SparkSession
    config: Config
    warehouse: Warehouse
    txn: RunTransaction
    inputs: list[InputSet] = field(default_factory=list)
    counts: RunCounts = field(default_factory=RunCounts)
    outputs: dict[str, DataFrame] = field(default_factory=dict)

    def table(self, name: str) -> DataFrame:
        """A table staged earlier in this run, else its committed version."""
        if name in self.outputs:
            return self.outputs[name]
        return self.warehouse.read(name)

    def stage(self, name: str, frame: DataFrame) -> DataFrame:
        return self._record(name, self.txn.stage(name, frame))

    def stage_through(self, name: str, produce: Callable[[FileWriter], DataFrame]) -> DataFrame:
        """Stage `name` from files its tasks write themselves (`RunTransaction.stage_through`)."""
        return self._record(name, self.txn.stage_through(name, produce))

    def _record(self, name: str, staged: DataFrame) -> DataFrame:
        self.outputs[name] = staged
        self.counts.rows[name] = self.txn.staged_rows(name)
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
) -> RunRecord:
    """Run `stages` under one run id; commit their tables and a `runs` row at the end.

    `on_staged` is called after each table is staged (tests use it to fail a
    run part-way on purpose).
    """
    start = datetime.now(UTC)
    run_id = new_run_id(start)
    log.info("run %s: %s", run_id, command)
    with warehouse.transaction(run_id) as txn:
        txn.on_staged = on_staged
        context = StageContext(spark=spark, config=config, warehouse=warehouse, txn=txn)
        for stage in stages:
            stage(context)
        versions = txn.commit()
        end = datetime.now(UTC)
        run_row = _run_row(run_id, command, start, end, context, versions)
        txn.stage(
            tables.RUNS,
            spark.createDataFrame([run_row], tables.table_schema(tables.RUNS)),
            mode="append",
        )
        versions = txn.commit()
    return RunRecord(run_id, command, start, end, versions, context.counts)


def _run_row(
    run_id: str,
    command: str,
    start: datetime,
    end: datetime,
    context: StageContext,
    versions: dict[str, int],
) -> Row:
    inputs = [
        Row(
            path=i.path,
            format=i.format,
            n_files=len(i.files),
            bytes=i.n_bytes,
            fingerprint=i.fingerprint,
        )
        for i in context.inputs
    ]
    return Row(
        id=run_id,
        command=command,
        start=start,
        end=end,
        inputs=inputs,
        config=context.config.to_json(),
        table_versions=dict(versions),
        counts=context.counts.flat(),
    )
