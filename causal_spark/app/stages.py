"""The stages a job chains: each reads what it needs, calls library transforms, stages tables."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.anomalies import (
    ORDER_CLASSES,
    delivered_messages,
    find_crowns,
    find_violations,
    summarize_traces,
)
from causal_spark.app.counts import (
    ClockCounts,
    DetectCounts,
    IngestCounts,
    ReplayCounts,
)
from causal_spark.app.runs import Stage, StageContext
from causal_spark.clocks import CLOCK_STATUS_INVALID, trace_clock_status, with_clocks
from causal_spark.clocks.matrix import with_matrix_clocks
from causal_spark.ingest import build_tables, classify_rows
from causal_spark.replay import (
    ReplayRequest,
    compare_protocols,
    program_rows,
    replay_protocols,
)
from causal_spark.replay_loop import warm_up
from causal_spark.sources import discover_inputs, read_raw_rows

log = logging.getLogger(__name__)


@contextmanager
def _timed(step: str) -> Iterator[None]:
    began = time.perf_counter()
    yield
    log.info("%s: %.1f s", step, time.perf_counter() - began)


def ingest_stage(paths: Sequence[str]) -> Stage:
    """Read the inputs and stage `events`, `messages` and `quarantine`."""

    def run(context: StageContext) -> None:
        inputs = discover_inputs(paths, context.config.ingest)
        context.inputs.extend(inputs)
        rows = classify_rows(read_raw_rows(context.spark, inputs)).localCheckpoint()
        rows_read = rows.count()
        ingested = build_tables(rows)
        events = context.stage(tables.EVENTS, ingested.events)
        messages = context.stage(tables.MESSAGES, ingested.messages)
        context.stage(tables.QUARANTINE, ingested.quarantine)
        counts = _accounting(rows_read, events, messages, context.counts.rows[tables.QUARANTINE])
        counts.require_accounted()
        context.counts.ingest = counts

    return run


def clocks_stage(matrix: bool = False) -> Stage:
    """Stage `events` with Lamport and vector clocks, `trace_clocks`, `matrix_clocks` if asked."""

    def run(context: StageContext) -> None:
        settings = context.config.clocks
        events = context.table(tables.EVENTS)
        messages = context.table(tables.MESSAGES)
        result = with_clocks(events, messages, settings)
        # the tasks that compute the vectors write them (they never cross into the JVM)
        clocked = context.stage_through(tables.EVENTS, result.run_and_write)
        status = context.stage(
            tables.TRACE_CLOCKS, trace_clock_status(clocked, events, messages, result.plan)
        )
        if matrix or settings.matrix:
            context.stage(tables.MATRIX_CLOCKS, with_matrix_clocks(clocked, messages))
        per_status = status.groupBy("status").count().collect()
        by_status = {row["status"]: int(row["count"]) for row in per_status}
        context.counts.clocks = ClockCounts(
            traces=sum(by_status.values()),
            invalid_traces=by_status.get(CLOCK_STATUS_INVALID, 0),
            clock_passes=result.clock_passes,
            component_rounds=result.component_rounds,
        )

    return run


def detect_stage() -> Stage:
    """Stage `violations`, `crowns`, `crown_members` and `trace_summary` (DESIGN §3, §5)."""

    def run(context: StageContext) -> None:
        settings = context.config.detect
        events = context.table(tables.EVENTS)
        messages = context.table(tables.MESSAGES)
        trace_clocks = context.table(tables.TRACE_CLOCKS)
        delivered = delivered_messages(messages, trace_clocks)
        with _timed("detect: violations"):
            violations = context.stage(tables.VIOLATIONS, find_violations(events, delivered))
        with _timed("detect: crowns"):
            found = find_crowns(
                delivered, settings.crown_search_budget, events=events, settings=settings
            )
            crowns = context.stage(tables.CROWNS, found.crowns)
            context.stage(tables.CROWN_MEMBERS, found.members)
        with _timed("detect: trace_summary"):
            summary = context.stage(
                tables.TRACE_SUMMARY,
                summarize_traces(
                    trace_clocks, messages, context.table(tables.QUARANTINE), violations, crowns
                ),
            )
        per_class = summary.groupBy("order_class").count().collect()
        by_class = {row["order_class"]: int(row["count"]) for row in per_class}
        context.counts.detect = DetectCounts(
            violations=context.counts.rows[tables.VIOLATIONS],
            crowns=context.counts.rows[tables.CROWNS],
            by_class={name: by_class.get(name, 0) for name in ORDER_CLASSES},
        )

    return run


def replay_stage(request: ReplayRequest) -> Stage:
    """Stage `protocol_runs` and `deliveries`: every trace replayed under each protocol (§4)."""

    def run(context: StageContext) -> None:
        programs = program_rows(
            context.table(tables.EVENTS),
            context.table(tables.MESSAGES),
            context.table(tables.TRACE_CLOCKS),
        )
        if (programs.sparkSession.conf.get("spark.master", "") or "").startswith("local"):
            # Python workers here share this machine's Numba cache: compile the loop once,
            # protocols side by side, rather than in every worker (executors elsewhere
            # compile on their first group)
            with _timed("replay loop compiled"):
                warm_up(request.protocols)
        with _timed("replay"):
            replayed = replay_protocols(programs, request)
            runs = context.stage(tables.PROTOCOL_RUNS, replayed.runs)
            context.stage(tables.DELIVERIES, replayed.deliveries)
        per_status = runs.groupBy("status").agg(
            F.count("*").alias("runs"),
            F.count(F.when(F.col("verified") == F.lit(False), True)).alias("unverified"),
        )
        rows = per_status.collect()
        context.counts.replay = ReplayCounts(
            by_status={row["status"]: int(row["runs"]) for row in rows},
            unverified=sum(int(row["unverified"]) for row in rows),
        )

    return run


def compare_stage() -> Stage:
    """Stage `protocol_comparison`: protocols x overhead, medians and p99 across traces."""

    def run(context: StageContext) -> None:
        context.stage(
            tables.PROTOCOL_COMPARISON, compare_protocols(context.table(tables.PROTOCOL_RUNS))
        )

    return run


def _accounting(
    rows_read: int, events: DataFrame, messages: DataFrame, quarantined: int
) -> IngestCounts:
    per_kind = events.groupBy(C.KIND).agg(F.count("*").alias("n")).collect()
    by_kind = {row[C.KIND]: row["n"] for row in per_kind}
    ends = messages.agg(
        F.count(C.SEND_LSEQ).alias("send_rows"),
        F.count(C.RECV_LSEQ).alias("receive_rows"),
        F.sum((F.col(C.STATUS) == C.IN_FLIGHT).cast("long")).alias(C.IN_FLIGHT),
        F.sum((F.col(C.STATUS) == C.ORPHAN).cast("long")).alias(C.ORPHAN),
    ).collect()[0]
    return IngestCounts(
        rows_read=rows_read,
        internal_events=int(by_kind.get(C.INTERNAL, 0)),
        send_events=int(by_kind.get(C.SEND, 0)),
        receive_events=int(by_kind.get(C.RECEIVE, 0)),
        send_rows=int(ends["send_rows"]),
        receive_rows=int(ends["receive_rows"]),
        quarantined=quarantined,
        in_flight=int(ends[C.IN_FLIGHT] or 0),
        orphan=int(ends[C.ORPHAN] or 0),
    )
