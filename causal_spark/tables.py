"""The table schemas, loaded from the JSON files in `schemas/` (one source of truth).

Each file is a Spark `StructType` in its JSON form; column comments live in the
field metadata so the files double as the tables' documentation.
"""

from __future__ import annotations

import json
from functools import cache

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

EVENTS = "events"
MESSAGES = "messages"
QUARANTINE = "quarantine"
RUNS = "runs"
TRACE_CLOCKS = "trace_clocks"
CLOCK_MISMATCHES = "clock_mismatches"
MATRIX_CLOCKS = "matrix_clocks"
VIOLATIONS = "violations"
CROWNS = "crowns"
CROWN_MEMBERS = "crown_members"
TRACE_SUMMARY = "trace_summary"
PROTOCOL_RUNS = "protocol_runs"
DELIVERIES = "deliveries"
PROTOCOL_COMPARISON = "protocol_comparison"

TABLES: tuple[str, ...] = (
    EVENTS,
    MESSAGES,
    QUARANTINE,
    RUNS,
    TRACE_CLOCKS,
    CLOCK_MISMATCHES,
    MATRIX_CLOCKS,
    VIOLATIONS,
    CROWNS,
    CROWN_MEMBERS,
    TRACE_SUMMARY,
    PROTOCOL_RUNS,
    DELIVERIES,
    PROTOCOL_COMPARISON,
)


class SchemaMismatchError(ValueError):
    """A DataFrame lacks a column its table requires."""


@cache
def table_schema(table: str) -> T.StructType:
    """The declared Spark schema of `table`."""
    from importlib import resources

    try:
        text = resources.files("causal_spark.schemas").joinpath(f"{table}.json").read_text("utf-8")
    except FileNotFoundError as e:
        raise KeyError(f"no schema declared for table '{table}' in schemas/") from e
    return T.StructType.fromJson(json.loads(text))


def to_arrow(schema: T.StructType) -> pa.Schema:
    """A Spark schema as Arrow (UTC timestamps): what a grouped UDF's batches must match."""
    return to_arrow_schema(schema, timezone="UTC")


def arrow_schema(table: str) -> pa.Schema:
    """The declared schema of `table` as Arrow (for delta-rs and Arrow kernels)."""
    return to_arrow_schema(table_schema(table), timezone="UTC")


def nullable_type(data_type: T.DataType) -> T.DataType:
    """`data_type` with nested nulls allowed: Spark cannot cast to non-null elements."""
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(nullable_type(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(data_type.keyType, nullable_type(data_type.valueType), True)
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [T.StructField(f.name, nullable_type(f.dataType), True) for f in data_type.fields]
        )
    return data_type


def udf_schema(table: str) -> T.StructType:
    """The schema of `table` with every field nullable: what a grouped UDF declares, since
    Spark cannot cast to non-null types; `conform` restores the table's promises."""
    return T.StructType(
        [
            T.StructField(f.name, nullable_type(f.dataType), True, f.metadata)
            for f in table_schema(table).fields
        ]
    )


def _not_null(column: Column, table: str, name: str) -> Column:
    # Fail the write rather than store a null the schema promises never to hold.
    return F.coalesce(column, F.raise_error(F.lit(f"{table}.{name} must not be null")))


def conform(frame: DataFrame, table: str) -> DataFrame:
    """Select exactly the declared columns of `table`, in order, cast to their types.

    Extra columns are dropped; a missing column raises `SchemaMismatchError`.
    Non-nullable columns fail the job at write time if a null reaches them.
    """
    schema = table_schema(table)
    missing = [f.name for f in schema.fields if f.name not in frame.columns]
    if missing:
        raise SchemaMismatchError(
            f"table '{table}' needs columns {missing}; the DataFrame has {frame.columns}"
        )
    columns = []
    for fld in schema.fields:
        column = F.col(fld.name).cast(nullable_type(fld.dataType))
        if not fld.nullable:
            column = _not_null(column, table, fld.name)
        columns.append(column.alias(fld.name, metadata=fld.metadata))
    return frame.select(*columns)
