"""Step 5 of ingest: `events`, `messages` and `quarantine` from the judged rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.ingest.keys import (
    DUP,
    EVENT,
    MISSING_SEQ,
    PARSED,
    POST,
    PPROC,
    PRE,
    RANK,
    REF,
    REF_FILE,
    REF_LINE,
    ROW,
    SEQ_GIVEN,
)
from causal_spark.ingest.rules import (
    Removed,
)
from causal_spark.ingest.typed import (
    accepted,
)
from causal_spark.io.raw import RECORDED_VC, recorded_in_pidx_order
from causal_spark.io.sources import FILE_ID, SUB


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


def process_index(kept: DataFrame) -> DataFrame:
    """trace_id, process, pidx: the processes with an accepted row, by name (small)."""
    processes = kept.select(C.TRACE_ID, F.col(PPROC).alias(C.PROCESS)).distinct()
    rank = F.dense_rank().over(Window.partitionBy(C.TRACE_ID).orderBy(C.PROCESS)) - 1
    return processes.select(C.TRACE_ID, C.PROCESS, rank.cast("int").alias(C.PIDX))


def events_of(
    kept: DataFrame, removed: Removed, pidx: DataFrame, files: DataFrame, recorded: bool = False
) -> DataFrame:
    """The accepted rows grouped into events where they are (a multicast group is one).

    `recorded`: the rows may carry recorded clocks (`recorded_in_pidx_order`)."""
    first = F.struct(FILE_ID, C.LINE, SUB)
    # grouped by the event's identity: the order the rows already have (no sort, no shuffle)
    grouped = kept.groupBy(*EVENT).agg(
        F.max(RANK).alias(RANK),
        F.min_by(C.KIND, first).alias(C.KIND),
        F.min_by(C.TS, first).alias(C.TS),
        F.min_by(C.LABEL, first).alias(C.LABEL),
        F.min_by(C.SEQ, first).alias(C.SEQ),
        F.min_by(RECORDED_VC, first).alias(RECORDED_VC),
        F.min(first).alias("__cs_first"),
        F.count(F.when(F.col(C.KIND) == C.SEND, 1)).cast("int").alias(C.N_MSGS),
    )
    numbered = removed.lseq(grouped, C.TRACE_ID, PPROC, RANK, C.LSEQ)
    events = (
        numbered.join(F.broadcast(pidx.withColumnRenamed(C.PROCESS, PPROC)), [C.TRACE_ID, PPROC])
        .join(
            F.broadcast(files.select(F.col(FILE_ID).alias("__cs_f"), "shown")),
            F.col("__cs_first.file_id") == F.col("__cs_f"),
        )
        .select(
            C.TRACE_ID,
            F.col(PPROC).alias(C.PROCESS),
            C.PIDX,
            F.col(C.LSEQ).cast("long").alias(C.LSEQ),
            C.KIND,
            C.TS,
            C.LABEL,
            C.N_MSGS,
            C.SEQ,
            F.col("shown").alias(C.SOURCE),
            F.col("__cs_first.line").alias(C.LINE),
            F.lit(None).cast("long").alias(C.LAMPORT),
            F.lit(None).cast("array<int>").alias(C.VC),
            RECORDED_VC,
        )
    )
    if recorded:
        events = recorded_in_pidx_order(events, pidx)
    else:  # no reader of these rows records clocks: no join
        events = events.withColumn(RECORDED_VC, F.lit(None))
    return tables.conform(events, tables.EVENTS)


def messages_of(
    messages: DataFrame, seconds: DataFrame, removed: Removed, pidx: DataFrame
) -> DataFrame:
    """Sends and receives matched by (trace_id, msg_id), as `messages`."""
    gone = seconds.where(F.col(C.DETAIL).startswith("second copy")).select(FILE_ID, C.LINE, SUB)
    kept = messages.join(
        F.broadcast(gone),
        (F.col("__cs_send_file") == F.col(FILE_ID))
        & (F.col("__cs_send_line") == F.col(C.LINE))
        & (F.col("__cs_send_sub") == F.col(SUB)),
        "left_anti",
    )
    numbered = removed.lseq(
        removed.lseq(kept, C.TRACE_ID, "__cs_sender", "__cs_send_rank", C.SEND_LSEQ),
        C.TRACE_ID,
        "__cs_receiver",
        "__cs_recv_rank",
        C.RECV_LSEQ,
    )
    status = (
        F.when(F.col(C.SEND_LSEQ).isNotNull() & F.col(C.RECV_LSEQ).isNotNull(), F.lit(C.DELIVERED))
        .when(F.col(C.SEND_LSEQ).isNotNull(), F.lit(C.IN_FLIGHT))
        .otherwise(F.lit(C.ORPHAN))
    )
    named = numbered.select(
        C.TRACE_ID,
        C.MSG_ID,
        F.coalesce(F.col("__cs_sender"), F.col("__cs_recv_peer")).alias(C.SRC),
        F.coalesce(F.col("__cs_receiver"), F.col("__cs_send_peer")).alias(C.DST),
        F.col(C.SEND_LSEQ).cast("long").alias(C.SEND_LSEQ),
        F.col(C.RECV_LSEQ).cast("long").alias(C.RECV_LSEQ),
        C.SEND_TS,
        C.RECV_TS,
        F.coalesce(F.col("__cs_send_size"), F.col("__cs_recv_size"), F.lit(0)).alias(C.SIZE_BYTES),
        status.alias(C.STATUS),
    )
    src_index = pidx.select(
        C.TRACE_ID, F.col(C.PROCESS).alias(C.SRC), F.col(C.PIDX).alias(C.SRC_PIDX)
    )
    dst_index = pidx.select(
        C.TRACE_ID, F.col(C.PROCESS).alias(C.DST), F.col(C.PIDX).alias(C.DST_PIDX)
    )
    resolved = named.join(F.broadcast(src_index), [C.TRACE_ID, C.SRC], "left").join(
        F.broadcast(dst_index), [C.TRACE_ID, C.DST], "left"
    )
    return tables.conform(resolved, tables.MESSAGES)


def quarantine_of(
    by_process: DataFrame,
    rejected: DataFrame,
    files: DataFrame,
    seq_files: list[int],
    reread: Callable[[Sequence[int]], DataFrame],
) -> DataFrame:
    """Every rejected row with its text, reason and a detail that says where the other row is."""
    malformed = by_process.where(~accepted()).select(
        *ROW,
        C.TRACE_ID,
        C.RAW,
        C.REASON,
        F.concat_ws(
            "; ",
            F.col(PRE),
            F.when(
                F.col(PARSED) & ~F.col(SEQ_GIVEN) & F.col(FILE_ID).isin(seq_files),
                F.lit(MISSING_SEQ),
            ),
            F.col(POST),
        ).alias(C.DETAIL),
        F.lit(None).cast("int").alias(REF_FILE),
        F.lit(None).cast("long").alias(REF_LINE),
    )
    duplicates = by_process.where(accepted() & F.col(DUP)).select(
        *ROW,
        C.TRACE_ID,
        F.lit(C.DUPLICATE_EVENT).alias(C.REASON),
        F.col("__cs_dup_detail").alias(C.DETAIL),
        F.col("__cs_leader_file").alias(REF_FILE),
        F.col("__cs_leader_line").alias(REF_LINE),
    )
    textless = duplicates.unionByName(rejected.drop(PPROC, RANK)).localCheckpoint()
    their_files = sorted(int(r[FILE_ID]) for r in textless.select(FILE_ID).distinct().collect())
    parts = [malformed]
    if their_files:
        texts = reread(their_files).select(
            FILE_ID, C.LINE, F.coalesce(F.col(SUB), F.lit(0)).alias(SUB), C.RAW
        )
        parts.append(textless.join(texts, list(ROW), "left"))
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    shown = files.select(F.col(FILE_ID).alias("__cs_own"), F.col("shown").alias(C.SOURCE))
    shown_ref = files.select(F.col(FILE_ID).alias("__cs_ref"), F.col("shown").alias("__cs_rs"))
    named = (
        rows.join(F.broadcast(shown), F.col(FILE_ID) == F.col("__cs_own"))
        .join(F.broadcast(shown_ref), F.col(REF_FILE) == F.col("__cs_ref"), "left")
        .select(
            C.SOURCE,
            C.LINE,
            F.coalesce(F.col(C.RAW), F.lit("")).alias(C.RAW),
            C.REASON,
            _located(
                F.col(C.DETAIL),
                F.col(FILE_ID),
                F.col(REF_FILE),
                F.col(REF_LINE),
                F.col("__cs_rs"),
            ).alias(C.DETAIL),
            C.TRACE_ID,
        )
    )
    return tables.conform(named, tables.QUARANTINE)
