"""`compare_protocols`: protocols x overhead across traces (`protocol_comparison`)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from causal_spark import tables
from causal_spark.replay.model import PROTOCOL, STATUS_STALLED

# the prefix of a comparison row counting runs whose figure was NaN or infinite
NOT_COMPUTED = "not_computed_"
# the prefix of a comparison row counting the runs behind a figure that stalled: their
# figures cover the part of the program that ran (docs/replay.md, "Stalled runs")
STALLED = "stalled_"

COMPARED_METRICS: Mapping[str, str] = {
    "control_per_app": "control messages per application message",
    "piggyback_ints_mean": "integers piggybacked per application message",
    "piggyback_bytes_total": "bytes piggybacked per trace",
    "held_back_fraction": "share of application messages held back",
    "holdback_delay_mean": "mean hold-back delay of held-back messages (s)",
    "sender_delay_per_app": "sender-side delay per application message (s)",
    "max_holdback_buffer": "largest hold-back buffer",
    "makespan_ratio": "makespan / recorded makespan (of the events run, for stalled runs)",
}


def _metric_columns() -> dict[str, Column]:
    app = F.col("app_messages")
    per_app = F.when(app > 0, app.cast("double"))
    return {
        "control_per_app": F.col("control_messages") / per_app,
        "piggyback_ints_mean": F.col("piggyback_ints_mean"),
        "piggyback_bytes_total": F.col("piggyback_bytes_total").cast("double"),
        "held_back_fraction": F.col("held_back") / per_app,
        "holdback_delay_mean": F.col("holdback_delay_mean"),
        "sender_delay_per_app": F.col("sender_delay_total") / per_app,
        "max_holdback_buffer": F.col("max_holdback_buffer").cast("double"),
        "makespan_ratio": F.col("makespan_ratio"),
    }


def compare_protocols(runs: DataFrame) -> DataFrame:
    """Protocols x overhead: median and p99 across traces of each metric (`protocol_comparison`).

    Input: `protocol_runs`. Runs that did not replay (not_applicable, error)
    have no figures and count in no metric; a metric's `traces` says how many
    traces it is over. Status counts come as metrics `status_<status>` (median
    and p99 are then null; `traces` is the count). A figure that could not be
    computed (NaN or infinite: a time beyond the range of a double) counts in no
    median or p99; how many runs had one comes as `not_computed_<metric>`. A `stalled`
    run (the log was cut) counts with the figures of the part of its program that ran;
    how many of a metric's `traces` stalled comes as `stalled_<metric>`.
    """
    metrics = _metric_columns()
    stack = F.explode(
        F.array(
            *[
                F.struct(F.lit(name).alias("metric"), column.cast("double").alias("value"))
                for name, column in metrics.items()
            ]
        )
    )
    long = runs.select(PROTOCOL, "receive_mode", "status", stack.alias("m")).select(
        PROTOCOL, "receive_mode", "status", "m.metric", "m.value"
    )
    value = F.col("value")
    computed = ~F.isnan(value) & (F.abs(value) != F.lit(float("inf")))
    figures = (
        long.where(value.isNotNull() & computed)
        .groupBy(PROTOCOL, "receive_mode", "metric")
        .agg(
            F.count("*").alias("traces"),
            F.percentile(F.col("value"), F.lit(0.5)).alias("median"),
            F.percentile(F.col("value"), F.lit(0.99)).alias("p99"),
        )
    )
    not_computed = (
        long.where(value.isNotNull() & ~computed)
        .groupBy(PROTOCOL, "receive_mode", "metric")
        .agg(F.count("*").alias("traces"))
        .select(
            PROTOCOL,
            "receive_mode",
            F.concat(F.lit(NOT_COMPUTED), F.col("metric")).alias("metric"),
            "traces",
            F.lit(None).cast("double").alias("median"),
            F.lit(None).cast("double").alias("p99"),
        )
    )
    stalled = (
        long.where(value.isNotNull() & computed & (F.col("status") == F.lit(STATUS_STALLED)))
        .groupBy(PROTOCOL, "receive_mode", "metric")
        .agg(F.count("*").alias("traces"))
        .select(
            PROTOCOL,
            "receive_mode",
            F.concat(F.lit(STALLED), F.col("metric")).alias("metric"),
            "traces",
            F.lit(None).cast("double").alias("median"),
            F.lit(None).cast("double").alias("p99"),
        )
    )
    statuses = runs.groupBy(PROTOCOL, "receive_mode", "status").agg(F.count("*").alias("traces"))
    status_rows = statuses.select(
        PROTOCOL,
        "receive_mode",
        F.concat(F.lit("status_"), F.col("status")).alias("metric"),
        "traces",
        F.lit(None).cast("double").alias("median"),
        F.lit(None).cast("double").alias("p99"),
    )
    unverified = (
        runs.where(F.col("verified") == F.lit(False))
        .groupBy(PROTOCOL, "receive_mode")
        .agg(F.count("*").alias("traces"))
    )
    unverified_rows = unverified.select(
        PROTOCOL,
        "receive_mode",
        F.lit("verification_failed").alias("metric"),
        "traces",
        F.lit(None).cast("double").alias("median"),
        F.lit(None).cast("double").alias("p99"),
    )
    return tables.conform(
        figures.unionByName(status_rows)
        .unionByName(unverified_rows)
        .unionByName(not_computed)
        .unionByName(stalled),
        tables.PROTOCOL_COMPARISON,
    )
