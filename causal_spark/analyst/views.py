"""The warehouse as Spark SQL: each table of a committed run as a temporary view."""

from __future__ import annotations

from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from causal_spark import tables
from causal_spark.analyst.errors import QueryError
from causal_spark.analyst.text import format_table
from causal_spark.clocks.order import register_sql_functions
from causal_spark.io.ledger import View, WarehouseError
from causal_spark.io.sinks import Warehouse

PREVIOUS = "previous_"


def register_views(warehouse: Warehouse, view: View) -> list[str]:
    """Register in `warehouse.spark`, as temporary views: every table `view` names (the
    versions one committed run left), `runs` (the ledger up to that run) and, as
    `previous_<table>`, each of those tables as the committed run before it left them
    (empty, with the table's columns, where there is none); create the happened-before
    SQL functions. Returns the view names, sorted."""
    if view.run_id is None:
        raise WarehouseError(f"no committed run in {warehouse.root}: run `causal-spark audit`")
    spark = warehouse.spark
    rows = warehouse.ledger.rows()
    at = [r["id"] for r in rows].index(view.run_id)
    before = rows[at - 1]["table_versions"] if at > 0 else {}
    names = []
    for table in tables.TABLES:
        version = view.versions.get(table)
        if version is None:
            continue
        warehouse.read_version(table, version).createOrReplaceTempView(table)
        previous = before.get(table)
        if previous is None:
            old = spark.createDataFrame([], tables.table_schema(table))
        else:
            old = warehouse.read_version(table, previous)
        old.createOrReplaceTempView(PREVIOUS + table)
        names.extend([table, PREVIOUS + table])
    upto = [r["id"] for r in rows[: at + 1]]
    runs = warehouse.read_latest(tables.RUNS).where(F.col("id").isin(upto))
    runs.createOrReplaceTempView(tables.RUNS)
    names.append(tables.RUNS)
    register_sql_functions(spark)
    return sorted(names)


def _reason(error: CapturedException) -> str:
    """Spark's message without the query plan or the SQL echo that follow it."""
    text = str(error).strip()
    for cut in ("\n== SQL", "\nJVM stacktrace", ";\n"):
        text = text.split(cut, 1)[0]
    return text.strip()


def run_query(spark: SparkSession, statement: str) -> str:
    """Run one statement; its result as a text table (`OK` for a statement without
    columns). `QueryError` when Spark rejects it."""
    try:
        result = spark.sql(statement)
        columns = result.columns
        rows = result.collect() if columns else []
    except CapturedException as e:
        raise QueryError(_reason(e)) from e
    if not columns:
        return "OK"
    return format_table(columns, rows)
