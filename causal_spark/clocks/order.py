"""Happened-before from vector clocks (docs/clocks.md), as Column helpers, SQL functions and cones.

e happens before f iff e != f and vc(f)[pidx(e)] >= lseq(e): one array
lookup, so any pair of events of a trace can be compared in a join or a SQL
query. Events of different traces are never ordered. An event without a vector
clock (an INVALID trace, or one too wide for vectors: `trace_clocks.status`) makes
the answer unknown: null, never a false "not before" or "concurrent".
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark import columns as C

BEFORE = "before"
AFTER = "after"
CONCURRENT = "concurrent"
SAME = "same"
SIDE = "side"
PAST = "past"
FUTURE = "future"


class EventNotFound(ValueError):
    """The event a cone was asked for is not in the table (or has no clocks)."""


def _field(event: Column | str, name: str) -> Column:
    base = F.col(event) if isinstance(event, str) else event
    return base.getField(name)


def _same(e: Column | str, f: Column | str) -> Column:
    return (
        (_field(e, C.TRACE_ID) == _field(f, C.TRACE_ID))
        & (_field(e, C.PIDX) == _field(f, C.PIDX))
        & (_field(e, C.LSEQ) == _field(f, C.LSEQ))
    )


def happened_before(e: Column | str, f: Column | str) -> Column:
    """True when event e happens before event f.

    e, f: struct columns (or their names) with fields trace_id, pidx, lseq, vc,
    e.g. `F.struct("trace_id", "pidx", "lseq", "vc")` on each side of a self-join.
    """
    vc = _field(f, C.VC)
    known = F.get(vc, _field(e, C.PIDX))
    # null when f has no vector clock (unknown), unless the answer is false anyway
    return (
        (_field(e, C.TRACE_ID) == _field(f, C.TRACE_ID))
        & ~_same(e, f)
        & F.when(vc.isNotNull(), F.coalesce(known >= _field(e, C.LSEQ), F.lit(False)))
    )


def concurrent(e: Column | str, f: Column | str) -> Column:
    """True when e and f are distinct events of one trace and neither happens before the other."""
    return (
        (_field(e, C.TRACE_ID) == _field(f, C.TRACE_ID))
        & ~_same(e, f)
        & ~happened_before(e, f)
        & ~happened_before(f, e)
    )


def relation(e: Column | str, f: Column | str) -> Column:
    """'before', 'after', 'concurrent' or 'same' (null for events of different traces, and
    for distinct events one of which has no vector clock)."""
    return (
        F.when(_field(e, C.TRACE_ID) != _field(f, C.TRACE_ID), F.lit(None))
        .when(_same(e, f), F.lit(SAME))
        .when(_field(e, C.VC).isNull() | _field(f, C.VC).isNull(), F.lit(None))
        .when(happened_before(e, f), F.lit(BEFORE))
        .when(happened_before(f, e), F.lit(AFTER))
        .otherwise(F.lit(CONCURRENT))
    )


SQL_FUNCTIONS = {
    "happened_before": (
        "e_pidx INT, e_lseq BIGINT, f_pidx INT, f_lseq BIGINT, f_vc ARRAY<INT>",
        "BOOLEAN",
        "NOT (e_pidx = f_pidx AND e_lseq = f_lseq)"
        " AND (CASE WHEN f_vc IS NOT NULL THEN coalesce(get(f_vc, e_pidx) >= e_lseq, false) END)",
    ),
    "concurrent_events": (
        "e_pidx INT, e_lseq BIGINT, e_vc ARRAY<INT>, f_pidx INT, f_lseq BIGINT, f_vc ARRAY<INT>",
        "BOOLEAN",
        "NOT (e_pidx = f_pidx AND e_lseq = f_lseq)"
        " AND NOT (CASE WHEN f_vc IS NOT NULL"
        " THEN coalesce(get(f_vc, e_pidx) >= e_lseq, false) END)"
        " AND NOT (CASE WHEN e_vc IS NOT NULL"
        " THEN coalesce(get(e_vc, f_pidx) >= f_lseq, false) END)",
    ),
}


def register_sql_functions(spark: SparkSession) -> list[str]:
    """Create the temporary SQL functions `happened_before` and `concurrent_events`.

    Both compare events of one trace (join on trace_id first):
    `happened_before(e.pidx, e.lseq, f.pidx, f.lseq, f.vc)` and
    `concurrent_events(e.pidx, e.lseq, e.vc, f.pidx, f.lseq, f.vc)`; null (unknown) for
    distinct events when a vector clock they need is null.
    """
    for name, (params, returns, body) in SQL_FUNCTIONS.items():
        spark.sql(
            f"CREATE OR REPLACE TEMPORARY FUNCTION {name}({params}) RETURNS {returns} RETURN {body}"
        )
    return sorted(SQL_FUNCTIONS)


def _event(events: DataFrame, trace_id: str, process: str, lseq: int) -> tuple[int, list[int]]:
    rows = (
        events.where(
            (F.col(C.TRACE_ID) == trace_id)
            & (F.col(C.PROCESS) == process)
            & (F.col(C.LSEQ) == lseq)
        )
        .select(C.PIDX, C.VC)
        .limit(2)
        .collect()
    )
    if len(rows) != 1 or rows[0][C.VC] is None:
        found = (
            "no event"
            if not rows
            else "an event without vector clocks (an INVALID trace, or one too wide for them: "
            "trace_clocks.status)"
        )
        raise EventNotFound(
            f"trace {trace_id!r}, process {process!r}, lseq {lseq}: found {found}; "
            "the cone needs the clocked events table"
        )
    return int(rows[0][C.PIDX]), [int(v) for v in rows[0][C.VC]]


def causal_past(events: DataFrame, trace_id: str, process: str, lseq: int) -> DataFrame:
    """The events that happen before (trace_id, process, lseq): f with lseq(f) <= vc(e)[pidx(f)]."""
    _, vc = _event(events, trace_id, process, lseq)
    known = F.element_at(F.array(*[F.lit(v) for v in vc]), F.col(C.PIDX) + 1)
    return events.where(
        (F.col(C.TRACE_ID) == trace_id)
        & (F.col(C.LSEQ) <= known)
        & ~((F.col(C.PROCESS) == process) & (F.col(C.LSEQ) == lseq))
    )


def causal_future(events: DataFrame, trace_id: str, process: str, lseq: int) -> DataFrame:
    """The events (trace_id, process, lseq) happens before: f with vc(f)[pidx(e)] >= lseq(e)."""
    pidx, _ = _event(events, trace_id, process, lseq)
    return events.where(
        (F.col(C.TRACE_ID) == trace_id)
        & (F.get(F.col(C.VC), F.lit(pidx)) >= lseq)
        & ~((F.col(C.PROCESS) == process) & (F.col(C.LSEQ) == lseq))
    )


def causal_cone(events: DataFrame, trace_id: str, process: str, lseq: int) -> DataFrame:
    """The event's causal past and future, with a `side` column ('past' or 'future')."""
    return (
        causal_past(events, trace_id, process, lseq)
        .withColumn(SIDE, F.lit(PAST))
        .unionByName(causal_future(events, trace_id, process, lseq).withColumn(SIDE, F.lit(FUTURE)))
    )
