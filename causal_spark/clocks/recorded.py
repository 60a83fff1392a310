"""Recorded vector clocks against the computed ones: the `clock_mismatches` table.

Logs that record a vector clock per event (ShiViz / GoVector, DistributedClocks
tracing; docs/formats.md) keep it on `events.recorded_vc`, in pidx order and in
the log's own units: entry q numbers q's events as the log does, by their `seq`.
Ours count events (`lseq`), and a ShiViz event that receives several messages
becomes several events that share its `seq`; so the computed clock is compared
in the log's units: its entry q is the `seq` of q's event at lseq `vc[q]` (0
when `vc[q]` is 0). A difference is a row of `clock_mismatches`; a recorded
clock never changes what is computed, and an event of a trace without clocks
(INVALID: a causal cycle) is not compared.

The comparison is Spark joins over (event, process) entries, so no task holds a
whole trace. The clocks engines carry `recorded_vc` through their grouped UDFs
as an empty list where it is null (`carried`, `restored`): Spark fills the
offsets of a batch's null lists one row at a time.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark import tables

RECORDED_VC = "recorded_vc"
RECORDED = "recorded"
COMPUTED = "computed"
DIFFERING = "differing"

_Q = "__rc_q"  # a process's pidx, as an entry of a clock
_AT = "__rc_at"  # an lseq of process _Q
_UNIT = "__rc_unit"  # the seq of _Q's event at lseq _AT
_NAME = "__rc_name"
_ENTRIES = "__rc_entries"
_EVENT = (C.TRACE_ID, C.PIDX, C.LSEQ)


def carried() -> Column:
    """`recorded_vc` as the clocks engines carry it: an empty list where it is null."""
    recorded = F.col(RECORDED_VC)
    return F.coalesce(recorded, F.array().cast("array<bigint>")).alias(RECORDED_VC)


def restored(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """`carried`'s column as `events` holds it: null where it is empty."""
    empty = pc.equal(pc.list_value_length(column), 0)
    return pc.if_else(empty, pa.scalar(None, column.type), column)


def clock_mismatches(events: DataFrame) -> DataFrame:
    """The events whose recorded clock differs from the computed one (`clock_mismatches`).

    Input: `events` with clocks (trace_id, process, pidx, lseq, seq, source, line, vc,
    recorded_vc). Output, one row per differing event: trace_id, process, lseq, seq,
    source, line, `recorded` and `computed` (in pidx order and in the log's units) and
    `differing` (the processes whose entries differ, in pidx order).
    """
    compared = events.where(F.col(RECORDED_VC).isNotNull() & F.col(C.VC).isNotNull())
    # one row per (event, process q): the recorded entry and the computed one, counted
    entries = compared.select(
        *_EVENT,
        F.posexplode(F.arrays_zip(F.col(RECORDED_VC).alias(RECORDED), F.col(C.VC).alias(C.VC))),
    ).select(
        *_EVENT,
        F.col("pos").alias(_Q),
        F.col(f"col.{RECORDED}").alias(RECORDED),
        F.col(f"col.{C.VC}").cast("long").alias(_AT),
    )
    # q's event at lseq vc[q], and its seq: the computed entry in the log's units
    units = events.join(compared.select(C.TRACE_ID).distinct(), C.TRACE_ID, "left_semi").select(
        C.TRACE_ID,
        F.col(C.PIDX).alias(_Q),
        F.col(C.LSEQ).alias(_AT),
        F.col(C.SEQ).alias(_UNIT),
        F.col(C.PROCESS).alias(_NAME),
    )

    def judged(rows: DataFrame, at: DataFrame) -> DataFrame:
        counted = F.col(_AT)
        in_log_units = F.when(counted == 0, F.lit(0)).otherwise(F.coalesce(F.col(_UNIT), counted))
        return rows.join(at.drop(_NAME), [C.TRACE_ID, _Q, _AT], "left").select(
            *_EVENT, _Q, RECORDED, in_log_units.cast("long").alias(COMPUTED)
        )

    differs = ~F.col(RECORDED).eqNullSafe(F.col(COMPUTED))
    wrong = judged(entries, units).where(differs).select(*_EVENT).distinct()
    # the few events that differ: every entry again, with the processes' names
    their_entries = entries.join(wrong, list(_EVENT), "left_semi")
    their_units = units.join(wrong.select(C.TRACE_ID).distinct(), C.TRACE_ID, "left_semi")
    names = their_units.where(F.col(_AT) == 1).select(C.TRACE_ID, _Q, _NAME)
    rebuilt = (
        judged(their_entries, their_units)
        .join(names, [C.TRACE_ID, _Q], "left")
        .groupBy(*_EVENT)
        .agg(
            F.sort_array(
                F.collect_list(
                    F.struct(_Q, RECORDED, COMPUTED, F.when(differs, F.col(_NAME)).alias(_NAME))
                )
            ).alias(_ENTRIES)
        )
    )
    entries_of = F.col(_ENTRIES)
    mismatches = rebuilt.join(compared, list(_EVENT)).select(
        C.TRACE_ID,
        C.PROCESS,
        C.LSEQ,
        C.SEQ,
        C.SOURCE,
        C.LINE,
        F.transform(entries_of, lambda e: e[RECORDED]).alias(RECORDED),
        F.transform(entries_of, lambda e: e[COMPUTED]).alias(COMPUTED),
        F.filter(F.transform(entries_of, lambda e: e[_NAME]), lambda n: n.isNotNull()).alias(
            DIFFERING
        ),
    )
    return tables.conform(mismatches, tables.CLOCK_MISMATCHES)
