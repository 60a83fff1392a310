"""The `trace_summary` table and the order class of a trace (docs/anomalies.md)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark.anomalies.violations import CAUSAL, FIFO
from causal_spark.clocks.status import CLOCK_STATUS_INVALID, CLOCK_STATUS_OK

# order classes, strongest first (docs/anomalies.md)
RSC = "RSC"
CO = "CO"
FIFO_CLASS = "FIFO"
ASYNC = "ASYNC"
INVALID = CLOCK_STATUS_INVALID
ORDER_CLASSES: tuple[str, ...] = (RSC, CO, FIFO_CLASS, ASYNC, INVALID)
# why a trace has no order class (`order_class_reason`): nothing of it could be analysed
NO_EVENT = "no analysable event"
# ... or it was too large for a task (clocks.max_component_bytes, detect.max_trace_bytes)
NOT_ANALYSED = "not analysed"

# how a trace's input was read (`app.readings`), as `summarize_traces` takes it
MESSAGES_INFERRED = "messages_inferred"
CLOCKS_RECORDED = "clocks_recorded"
SPAN_PROCESS = "span_process"
READINGS_SCHEMA = (
    f"trace_id string, {MESSAGES_INFERRED} boolean, {CLOCKS_RECORDED} boolean, "
    f"{SPAN_PROCESS} string"
)


def order_class(status: Column, n_fifo: Column, n_causal: Column, n_crown_sccs: Column) -> Column:
    """The strongest order class that holds: RSC ⊂ CO ⊂ FIFO ⊂ ASYNC, or INVALID.

    See docs/anomalies.md.
    """
    invalid = status == CLOCK_STATUS_INVALID
    return (
        F.when(invalid, F.lit(INVALID))
        .when(n_fifo > 0, F.lit(ASYNC))
        .when(n_causal > 0, F.lit(FIFO_CLASS))
        .when(n_crown_sccs > 0, F.lit(CO))
        .otherwise(F.lit(RSC))
    )


def summarize_traces(
    trace_clocks: DataFrame,
    messages: DataFrame,
    quarantine: DataFrame,
    violations: DataFrame,
    crowns: DataFrame,
    readings: DataFrame | None = None,
    clock_mismatches: DataFrame | None = None,
    too_large: DataFrame | None = None,
) -> DataFrame:
    """The `trace_summary` table: one row per trace seen in `trace_clocks` or `quarantine`.

    A trace with no event (every row of it quarantined) has no order class: null, and
    `order_class_reason` says why (no class holds vacuously; docs/anomalies.md). So has a
    trace not analysed for its size, with null anomaly counts: `not_applicable` in
    `trace_clocks` (no vector clocks; its reason), or one of `too_large` (trace_id,
    reason: `inputs.too_large_traces`).

    `readings` (trace_id, messages_inferred, clocks_recorded, span_process: how the input
    was read, `app.readings`) and `clock_mismatches` (that table) fill the columns of the
    same names; without them those are null. A trace whose messages were inferred from
    clocks has null FIFO and causal-order counts (not observable, docs/formats.md).
    """
    both_ts = F.col(C.SEND_TS).isNotNull() & F.col(C.RECV_TS).isNotNull()
    message_counts = messages.groupBy(C.TRACE_ID).agg(
        F.count("*").alias("n_messages"),
        F.sum((F.col(C.STATUS) == C.IN_FLIGHT).cast("long")).alias("n_in_flight"),
        F.sum((F.col(C.STATUS) == C.ORPHAN).cast("long")).alias("n_orphans"),
        F.count(F.when(both_ts, 1)).alias("__timed"),
        F.count(F.when(both_ts & (F.col(C.RECV_TS) < F.col(C.SEND_TS)), 1)).alias("__skewed"),
    )
    rejected = (
        quarantine.where(F.col(C.TRACE_ID).isNotNull())
        .groupBy(C.TRACE_ID)
        .agg(F.count("*").alias("n_quarantined"))
    )
    violation_counts = violations.groupBy(C.TRACE_ID).agg(
        F.sum((F.col(C.KIND) == FIFO).cast("long")).alias("__fifo"),
        F.sum((F.col(C.KIND) == CAUSAL).cast("long")).alias("__causal"),
    )
    crown_counts = crowns.groupBy(C.TRACE_ID).agg(F.count("*").alias("__crowns"))
    if too_large is None:
        too_large = crowns.sparkSession.createDataFrame([], "trace_id string, reason string")
    # a trace_clocks table written before its `reason` column reads without one
    clock_reason = F.col("reason") if "reason" in trace_clocks.columns else F.lit(None)
    base = trace_clocks.select(
        C.TRACE_ID, "n_processes", "n_events", "status", clock_reason.alias("__clock_reason")
    ).join(rejected, C.TRACE_ID, "full_outer")
    spark = trace_clocks.sparkSession
    if readings is None:
        readings = spark.createDataFrame([], READINGS_SCHEMA)
    if clock_mismatches is None:
        clock_mismatches = spark.createDataFrame([], "trace_id string")
    mismatch_counts = clock_mismatches.groupBy(C.TRACE_ID).agg(F.count("*").alias("__mismatches"))
    joined = (
        base.join(message_counts, C.TRACE_ID, "left")
        .join(violation_counts, C.TRACE_ID, "left")
        .join(crown_counts, C.TRACE_ID, "left")
        .join(F.broadcast(readings), C.TRACE_ID, "left")
        .join(mismatch_counts, C.TRACE_ID, "left")
        .join(
            too_large.select(C.TRACE_ID, F.col("reason").alias("__too_large")), C.TRACE_ID, "left"
        )
    )
    status = F.coalesce(F.col("status"), F.lit(CLOCK_STATUS_OK))
    valid = status != CLOCK_STATUS_INVALID
    # INVALID aside, a trace is analysed when its clocks are ok and it fits detect's limit
    analysed = (status == CLOCK_STATUS_OK) & F.col("__too_large").isNull()
    not_analysed = valid & ~analysed
    inferred = F.coalesce(F.col(MESSAGES_INFERRED), F.lit(False))

    def anomaly_count(name: str, observable: Column) -> Column:
        return F.when(analysed & observable, F.coalesce(F.col(name), F.lit(0))).cast("long")

    n_fifo = anomaly_count("__fifo", ~inferred)
    n_causal = anomaly_count("__causal", ~inferred)
    n_crowns = anomaly_count("__crowns", F.lit(True))
    n_events = F.coalesce(F.col("n_events"), F.lit(0)).cast("long")
    n_quarantined = F.coalesce(F.col("n_quarantined"), F.lit(0)).cast("long")
    no_event = n_events == 0
    reason = F.when(
        no_event,
        F.when(
            n_quarantined > 0,
            F.format_string(f"{NO_EVENT}: all %d input row(s) quarantined", n_quarantined),
        ).otherwise(F.lit(NO_EVENT)),
    ).when(
        not_analysed,
        F.concat(
            F.lit(f"{NOT_ANALYSED}: "),
            F.coalesce(
                F.col("__too_large"), F.col("__clock_reason"), F.concat(F.lit("clocks "), status)
            ),
        ),
    )
    return joined.select(
        C.TRACE_ID,
        F.coalesce(F.col("n_processes"), F.lit(0)).cast("int").alias("n_processes"),
        n_events.alias("n_events"),
        F.coalesce(F.col("n_messages"), F.lit(0)).cast("long").alias("n_messages"),
        F.coalesce(F.col("n_in_flight"), F.lit(0)).cast("long").alias("n_in_flight"),
        F.coalesce(F.col("n_orphans"), F.lit(0)).cast("long").alias("n_orphans"),
        n_quarantined.alias("n_quarantined"),
        n_fifo.alias("n_fifo_violations"),
        n_causal.alias("n_causal_violations"),
        n_crowns.alias("n_crown_sccs"),
        F.when(
            ~no_event & ~not_analysed, order_class(F.col("status"), n_fifo, n_causal, n_crowns)
        ).alias("order_class"),
        reason.cast("string").alias("order_class_reason"),
        F.col(MESSAGES_INFERRED).cast("boolean").alias(MESSAGES_INFERRED),
        F.col(SPAN_PROCESS).cast("string").alias(SPAN_PROCESS),
        F.when(
            valid & ~no_event & F.col(CLOCKS_RECORDED), F.coalesce(F.col("__mismatches"), F.lit(0))
        )
        .otherwise(F.col("__mismatches"))
        .cast("long")
        .alias("n_clock_mismatches"),
        F.when(F.col("__timed") > 0, F.col("__skewed")).cast("long").alias("n_skewed_messages"),
    )
