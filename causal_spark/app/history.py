"""Findings over time: what changed between two committed runs (docs/scheduling.md).

A finding is identified by its natural key:
- a violation by (trace, kind, overtaken message); its value is the overtaking
  message and the witness chain;
- a crown component by (trace, its smallest message id); its value is its size and
  witness crown;
- a trace's order class, and its quarantined-row count, by the trace.

`findings_diff` compares the findings of two views (the versions two `runs` rows
name) and returns one row per finding that appeared, disappeared or changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import tables
from causal_spark.io.ledger import View
from causal_spark.io.sinks import Warehouse

DIFF_SCHEMA = T.StructType(
    [
        T.StructField("trace_id", T.StringType(), False),
        T.StructField("finding", T.StringType(), False),
        T.StructField("key", T.StringType(), False),
        T.StructField("change", T.StringType(), False),
        T.StructField("before", T.StringType(), True),
        T.StructField("after", T.StringType(), True),
    ]
)
APPEARED, DISAPPEARED, CHANGED = "appeared", "disappeared", "changed"
_FINDING = T.StructType(
    [
        T.StructField("trace_id", T.StringType(), False),
        T.StructField("finding", T.StringType(), False),
        T.StructField("key", T.StringType(), False),
        T.StructField("value", T.StringType(), True),
    ]
)


def _read(warehouse: Warehouse, view: View, table: str) -> DataFrame | None:
    version = view.versions.get(table)
    if version is None:
        return None
    return warehouse.read_version(table, version)


def _ids(column: str) -> Column:
    return F.concat_ws(",", F.col(column))


def findings(warehouse: Warehouse, view: View, traces: Sequence[str] | None = None) -> DataFrame:
    """Every finding of a view as (trace_id, finding, key, value)."""
    spark: SparkSession = warehouse.spark
    parts: list[DataFrame] = []
    violations = _read(warehouse, view, tables.VIOLATIONS)
    if violations is not None:
        parts.append(
            violations.select(
                "trace_id",
                F.concat(F.lit("violation "), F.col("kind")).alias("finding"),
                F.col("overtaken_msg").alias("key"),
                F.format_string(
                    "overtaken by %s via [%s]", F.col("overtaking_msg"), _ids("chain")
                ).alias("value"),
            )
        )
    crowns = _read(warehouse, view, tables.CROWNS)
    members = _read(warehouse, view, tables.CROWN_MEMBERS)
    if crowns is not None and members is not None:
        smallest = members.groupBy("trace_id", "scc_id").agg(F.min("msg_id").alias("key"))
        parts.append(
            crowns.join(smallest, ["trace_id", "scc_id"]).select(
                "trace_id",
                F.lit("crown").alias("finding"),
                "key",
                F.format_string(
                    "%d messages, witness [%s]", F.col("scc_size"), _ids("crown")
                ).alias("value"),
            )
        )
    summary = _read(warehouse, view, tables.TRACE_SUMMARY)
    if summary is not None:
        parts.append(
            summary.select(
                "trace_id",
                F.lit("order_class").alias("finding"),
                F.lit("").alias("key"),
                F.coalesce("order_class", F.lit("none")).alias("value"),
            )
        )
        parts.append(
            summary.where(F.col("n_quarantined") > 0).select(
                "trace_id",
                F.lit("quarantine").alias("finding"),
                F.lit("").alias("key"),
                F.format_string("%d rows", F.col("n_quarantined")).alias("value"),
            )
        )
    result = spark.createDataFrame([], _FINDING)
    for part in parts:
        result = result.unionByName(part)
    if traces is not None:
        touched = spark.createDataFrame([(t,) for t in traces], "trace_id string")
        result = result.join(F.broadcast(touched), "trace_id", "left_semi")
    return result


def findings_diff(
    warehouse: Warehouse, before: View, after: View, traces: Sequence[str] | None = None
) -> DataFrame:
    """The findings that appeared, disappeared or changed from `before` to `after`
    (`DIFF_SCHEMA`); `traces`: only those traces (an incremental run's)."""
    keys = ["trace_id", "finding", "key"]
    old = findings(warehouse, before, traces).withColumnRenamed("value", "before")
    new = findings(warehouse, after, traces).withColumnRenamed("value", "after")
    joined = old.join(new, keys, "full")
    change = (
        F.when(F.col("before").isNull() & F.col("after").isNotNull(), F.lit(APPEARED))
        .when(F.col("after").isNull() & F.col("before").isNotNull(), F.lit(DISAPPEARED))
        .when(~F.col("before").eqNullSafe(F.col("after")), F.lit(CHANGED))
    )
    return (
        joined.select(*keys, change.alias("change"), "before", "after")
        .where(F.col("change").isNotNull())
        .select(*[F.col(f.name) for f in DIFF_SCHEMA.fields])
    )


def format_diff(rows: Sequence[dict[str, str | None]], before: str, after: str) -> str:
    """The diff as text: a header with totals, then per trace its changed findings."""
    totals = {c: sum(1 for r in rows if r["change"] == c) for c in (APPEARED, DISAPPEARED, CHANGED)}
    lines = [
        f"diff {before} -> {after}: {totals[APPEARED]} appeared, "
        f"{totals[DISAPPEARED]} disappeared, {totals[CHANGED]} changed"
    ]
    mark = {APPEARED: "+", DISAPPEARED: "-", CHANGED: "~"}
    trace = None
    for row in sorted(rows, key=lambda r: (r["trace_id"], r["finding"], r["key"])):
        if row["trace_id"] != trace:
            trace = row["trace_id"]
            lines.append(f"trace {trace}")
        name = f"{row['finding']} {row['key']}".rstrip()
        if row["change"] == APPEARED:
            detail = f"{row['after']}"
        elif row["change"] == DISAPPEARED:
            detail = f"{row['before']}"
        else:
            detail = f"{row['before']} -> {row['after']}"
        lines.append(f"  {mark[str(row['change'])]} {name}: {detail}")
    return "\n".join(lines)
