"""The stages a job chains: each reads what it needs, calls library transforms, stages tables."""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pyspark.sql import DataFrame

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.anomalies import (
    NOT_ANALYSED,
    ORDER_CLASSES,
    analysable_messages,
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
from causal_spark.app.readings import readings_of
from causal_spark.app.runs import Stage, StageContext
from causal_spark.clocks import (
    CLOCK_STATUS_INVALID,
    CLOCK_STATUS_NOT_APPLICABLE,
    trace_clock_status,
    with_clocks,
)
from causal_spark.clocks.matrix import with_matrix_clocks
from causal_spark.clocks.recorded import RECORDED_VC, clock_mismatches
from causal_spark.ingest import IngestTargets, ingest
from causal_spark.io.sources import only_files, read_raw_rows
from causal_spark.replay import ReplayRequest, compare_protocols, program_rows, replay_protocols
from causal_spark.replay.warmup import warm_up

log = logging.getLogger(__name__)


@contextmanager
def _timed(step: str) -> Iterator[None]:
    began = time.perf_counter()
    yield
    log.info("%s: %.1f s", step, time.perf_counter() - began)


def ingest_stage(paths: Sequence[str], reader: str = "auto") -> Stage:
    """Read the inputs and stage `events`, `messages` and `quarantine`."""

    def run(context: StageContext) -> None:
        spark = context.spark
        inputs, read = context.raw_rows(paths, reader)
        events, messages = context.writer(tables.EVENTS), context.writer(tables.MESSAGES)
        targets = IngestTargets(events, messages, os.path.join(events.scratch, "ingest"))
        try:
            ingested = ingest(
                read,
                inputs,
                targets,
                reread=lambda ids: read_raw_rows(
                    spark, only_files(inputs, ids), context.config.ingest
                ),
                settings=context.config.ingest,
            )
            context.stage_files(tables.EVENTS, events, ingested.written[tables.EVENTS])
            context.stage_files(tables.MESSAGES, messages, ingested.written[tables.MESSAGES])
            if ingested.nothing_rejected:  # an empty table: no Spark job to write it
                context.stage_arrow(
                    tables.QUARANTINE, tables.arrow_schema(tables.QUARANTINE).empty_table()
                )
            else:
                context.stage(tables.QUARANTINE, ingested.quarantine)
        finally:
            context.remove_scratch(events)
            context.remove_scratch(messages)
        context.record_file_traces(ingested.file_traces)
        seen = ingested.event_counts()
        counts = IngestCounts(
            rows_read=ingested.rows_read,
            internal_events=seen["internal_events"],
            send_events=seen["send_events"],
            receive_events=seen["receive_events"],
            send_rows=seen["send_rows"],
            receive_rows=seen["receive_rows"],
            quarantined=context.counts.rows[tables.QUARANTINE],
            in_flight=seen[C.IN_FLIGHT],
            orphan=seen[C.ORPHAN],
        )
        counts.require_accounted()
        context.counts.ingest = counts

    return run


def clocks_stage(matrix: bool = False) -> Stage:
    """Stage `events` with Lamport and vector clocks, `trace_clocks`, `matrix_clocks` if asked."""

    def run(context: StageContext) -> None:
        settings = context.config.clocks
        context.derive_from(tables.EVENTS, tables.MESSAGES)
        events = context.table(tables.EVENTS)
        messages = context.table(tables.MESSAGES)
        result = with_clocks(events, messages, settings)
        # the tasks that compute the vectors write them (they never cross into the JVM)
        clocked = context.stage_through(tables.EVENTS, result.run_and_write)
        if context.staged_values(tables.EVENTS, RECORDED_VC):
            context.stage(tables.CLOCK_MISMATCHES, clock_mismatches(clocked))
        else:  # no event carries a recorded clock: nothing to compare, no Spark job
            context.stage_arrow(
                tables.CLOCK_MISMATCHES, tables.arrow_schema(tables.CLOCK_MISMATCHES).empty_table()
            )
        # no null Lamport clock in the files just written: no broken component to look for
        all_clocked = context.staged_nulls(tables.EVENTS, C.LAMPORT) == 0
        context.stage(
            tables.TRACE_CLOCKS,
            trace_clock_status(clocked, events, messages, result.plan, all_clocked),
        )
        if matrix or settings.matrix:
            context.stage(tables.MATRIX_CLOCKS, with_matrix_clocks(clocked, messages))
        by_status = context.staged_value_counts(tables.TRACE_CLOCKS, "status")
        context.counts.clocks = ClockCounts(
            traces=sum(by_status.values()),
            invalid_traces=by_status.get(CLOCK_STATUS_INVALID, 0),
            not_applicable_traces=by_status.get(CLOCK_STATUS_NOT_APPLICABLE, 0),
            clock_passes=result.clock_passes,
            component_rounds=result.component_rounds,
            clock_mismatches=context.counts.rows[tables.CLOCK_MISMATCHES],
        )

    return run


def detect_stage() -> Stage:
    """Stage `violations`, `crowns`, `crown_members` and `trace_summary` (docs/anomalies.md)."""

    def run(context: StageContext) -> None:
        settings = context.config.detect
        context.derive_from(
            tables.EVENTS,
            tables.MESSAGES,
            tables.TRACE_CLOCKS,
            tables.QUARANTINE,
            tables.CLOCK_MISMATCHES,
        )
        events = context.table(tables.EVENTS)
        messages = context.table(tables.MESSAGES)
        trace_clocks = context.table(tables.TRACE_CLOCKS)
        # traces too large for detect's tasks (detect.max_trace_bytes) are left out, named
        delivered, too_large = analysable_messages(messages, trace_clocks, settings)
        with _timed("detect: violations"):
            violations = context.stage(tables.VIOLATIONS, find_violations(events, delivered))
        with _timed("detect: crowns"):
            found = find_crowns(
                delivered, settings.crown_search_budget, events=events, settings=settings
            )
            crowns = context.stage(tables.CROWNS, found.crowns)
            context.stage(tables.CROWN_MEMBERS, found.members)
        with _timed("detect: trace_summary"):
            context.stage(
                tables.TRACE_SUMMARY,
                summarize_traces(
                    trace_clocks,
                    messages,
                    context.table(tables.QUARANTINE),
                    violations,
                    crowns,
                    readings=readings_of(context),
                    clock_mismatches=_clock_mismatches(context),
                    too_large=too_large,
                ),
            )
        # the counts from the staged files, on the driver (no Spark job)
        classes = context.staged_columns(
            tables.TRACE_SUMMARY, ["order_class", "order_class_reason"]
        ).to_pylist()
        by_class: Counter[str | None] = Counter(
            "too_large"
            if (row["order_class_reason"] or "").startswith(NOT_ANALYSED)
            else row["order_class"]
            for row in classes
        )
        by_kind = context.staged_value_counts(tables.VIOLATIONS, "kind")
        context.counts.detect = DetectCounts(
            violations=context.counts.rows[tables.VIOLATIONS],
            crowns=context.counts.rows[tables.CROWNS],
            by_class={name: by_class.get(name, 0) for name in ORDER_CLASSES},
            by_kind=dict(by_kind),
            unanalysable=by_class.get(None, 0),
            too_large=by_class.get("too_large", 0),
        )

    return run


def _clock_mismatches(context: StageContext) -> DataFrame | None:
    """`clock_mismatches` as the clocks stage left it (None: a warehouse from before it)."""
    known = tables.CLOCK_MISMATCHES in context.outputs or tables.CLOCK_MISMATCHES in (
        context.view.versions
    )
    return context.table(tables.CLOCK_MISMATCHES) if known else None


def replay_stage(request: ReplayRequest, compiled: bool = False) -> Stage:
    """Stage `protocol_runs` and `deliveries`: every trace replayed under each protocol (§4).

    `compiled`: the job's warm-up (`app/warmup.py`) compiles the protocols' loops, so
    the stage does not."""

    def run(context: StageContext) -> None:
        context.derive_from(tables.EVENTS, tables.MESSAGES, tables.TRACE_CLOCKS)
        programs = program_rows(
            context.table(tables.EVENTS),
            context.table(tables.MESSAGES),
            context.table(tables.TRACE_CLOCKS),
        )
        master = programs.sparkSession.conf.get("spark.master", "") or ""
        if not compiled and master.startswith("local"):
            # Python workers here share this machine's Numba cache: compile the loop once,
            # protocols side by side, rather than in every worker (executors elsewhere
            # compile on their first group)
            with _timed("replay loop compiled"):
                warm_up(request.protocols)
        with _timed("replay"):
            replayed = replay_protocols(programs, request)
            context.stage(tables.PROTOCOL_RUNS, replayed.runs)
            context.stage(tables.DELIVERIES, replayed.deliveries)
        context.counts.replay = ReplayCounts(
            by_status=dict(context.staged_value_counts(tables.PROTOCOL_RUNS, "status")),
            unverified=context.staged_value_counts(tables.PROTOCOL_RUNS, "verified")[False],
        )

    return run


def compare_stage() -> Stage:
    """Stage `protocol_comparison`: protocols x overhead, medians and p99 across traces."""

    def run(context: StageContext) -> None:
        context.derive_from(tables.PROTOCOL_RUNS)
        context.stage(
            tables.PROTOCOL_COMPARISON, compare_protocols(context.whole(tables.PROTOCOL_RUNS))
        )

    return run
