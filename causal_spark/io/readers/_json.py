"""Helpers of the JSON span formats: documents as arrays of record texts, numbers."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from causal_spark import _spark
from causal_spark import columns as C
from causal_spark.io.readers.base import RECORD, UNPARSEABLE, capped, rejected


def integer(text: Column) -> Column:
    """A JSON integer given as a number or a decimal string (64-bit values are strings
    in protobuf JSON), else null."""
    trimmed = F.trim(text)
    return F.when(trimmed.rlike(r"^-?[0-9]+$"), trimmed.try_cast("long"))


def is_object(text: Column) -> Column:
    """The JSON text is an object (from_json gives a struct of nulls for `3` or `"x"`)."""
    return F.coalesce(F.ltrim(text).startswith("{"), F.lit(False))


def lower_id(text: Column) -> Column:
    """An id as lower-case text; blank is null."""
    trimmed = _spark.lower(F.trim(text))
    return F.when(trimmed != "", trimmed)


def unreadable_documents(documents: DataFrame, parsed: Column, what: str) -> DataFrame:
    """Reject rows for documents (`source`, `value`, and `line` for JSON lines, else 1)
    whose `parsed` form is null: one per document, its text cut to `base.RAW_LIMIT`
    characters. A blank document holds no record and gives no row."""
    line = F.col(C.LINE) if C.LINE in documents.columns else F.lit(1)
    return (
        documents.where(parsed.isNull() & (F.trim(F.col("value")) != ""))
        .select(
            C.SOURCE,
            line.cast("long").alias(C.LINE),
            F.lit(1).cast("long").alias(RECORD),
            capped(F.col("value")).alias(C.RAW),
        )
        .transform(
            rejected,
            F.lit(f"not {what} (invalid or truncated JSON)"),
            UNPARSEABLE,
        )
    )
