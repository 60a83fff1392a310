"""The quarantine table, from the rows the passes rejected (small, a Spark transform)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.ingest import rows_kernel as R
from causal_spark.ingest.keys import MISSING_SEQ, REF
from causal_spark.io.raw import FILE_ID, SUB


def _located(
    detail: Column, own_file: Column, ref_file: Column, ref_line: Column, shown_ref: Column
) -> Column:
    """The detail with REF replaced by `line N`, or `line N of FILE` when in another file."""
    where = F.when(
        ref_file == own_file, F.concat(F.lit("line "), ref_line.cast("string"))
    ).otherwise(F.concat(F.lit("line "), ref_line.cast("string"), F.lit(" of "), shown_ref))
    return F.when(ref_line.isNull(), detail).otherwise(F.replace(detail, F.lit(REF), where))


def filtered_reread(raw: DataFrame) -> Callable[[Sequence[int]], DataFrame]:
    return lambda ids: raw.where(F.col(FILE_ID).isin(list(ids)))


def quarantine_of(
    rejects: DataFrame,
    files: DataFrame,
    seq_files: Sequence[int],
    reread: Callable[[Sequence[int]], DataFrame],
    textless: Sequence[int],
) -> DataFrame:
    """Every rejected row (`rows_kernel.REJECTS`) with its text, reason and a detail that says
    where the row it points at is.

    A row rejected by the row-local rules has its detail from its own parts, with
    "missing seq" between them when its file gives `seq` elsewhere. A row without its
    text (rejected after step 1, or read without text) has it read again from its file
    (`reread`, with text; for the files that have such rows only: `textless`, the
    caller knows them from the rejected rows' files).
    """
    step1 = F.col(R.STEP1)
    detail = F.when(
        step1,
        F.concat_ws(
            "; ",
            F.col(R.PRE),
            F.when(
                F.col(R.PARSED) & ~F.col(R.SEQ_GIVEN) & F.col(FILE_ID).isin(list(seq_files)),
                F.lit(MISSING_SEQ),
            ),
            F.col(R.POST),
        ),
    ).otherwise(F.col(C.DETAIL))
    rows = rejects.select(
        FILE_ID,
        C.LINE,
        SUB,
        C.TRACE_ID,
        C.REASON,
        R.REF_FILE,
        R.REF_LINE,
        step1,
        C.RAW,
        detail.alias(C.DETAIL),
    )
    # rows rejected after step 1 travelled without their text, and a reader may leave
    # it out of every row (Parquet): read it again, from those rows' files only
    if textless:
        texts = reread(sorted(textless)).select(
            FILE_ID,
            C.LINE,
            F.coalesce(F.col(SUB), F.lit(0)).alias(SUB),
            F.col(C.RAW).alias("__cs_text"),
        )
        rows = rows.join(texts, [FILE_ID, C.LINE, SUB], "left").select(
            *[c for c in rows.columns if c != C.RAW],
            F.coalesce(F.col(C.RAW), F.col("__cs_text")).alias(C.RAW),
        )
    shown = files.select(F.col(FILE_ID).alias("__cs_own"), F.col("shown").alias(C.SOURCE))
    shown_ref = files.select(F.col(FILE_ID).alias("__cs_ref"), F.col("shown").alias("__cs_rs"))
    named = (
        rows.join(F.broadcast(shown), F.col(FILE_ID) == F.col("__cs_own"))
        .join(F.broadcast(shown_ref), F.col(R.REF_FILE) == F.col("__cs_ref"), "left")
        .select(
            C.SOURCE,
            C.LINE,
            F.coalesce(F.col(C.RAW), F.lit("")).alias(C.RAW),
            C.REASON,
            _located(
                F.col(C.DETAIL),
                F.col(FILE_ID),
                F.col(R.REF_FILE),
                F.col(R.REF_LINE),
                F.col("__cs_rs"),
            ).alias(C.DETAIL),
            C.TRACE_ID,
        )
    )
    return tables.conform(named, tables.QUARANTINE)
