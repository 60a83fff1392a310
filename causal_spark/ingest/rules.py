"""Steps 2-4 of ingest: the rules over events and messages, in two shuffles, and the fix-ups."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark.ingest.keys import (
    BUCKET,
    DUP,
    EV_FILE,
    EV_LINE,
    EV_SEQ,
    EV_SUB,
    EVENT,
    NOSEQ,
    PPROC,
    RANK,
    REF,
    REF_FILE,
    REF_LINE,
    REPEATED,
    RISKY,
    ROW,
)
from causal_spark.ingest.typed import (
    accepted,
    file_order,
)
from causal_spark.io.sources import FILE_ID, SUB


def with_event_keys(rows: DataFrame, partitions: int) -> DataFrame:
    """Step 2's shuffle: rows by (trace, process), malformed ones spread by their line.

    An event is (trace, process, seq, sub) with a seq, else the row itself; local order
    is by seq, then rows without one in file order."""
    spread = F.concat(F.lit("\u0000"), F.pmod(F.hash(FILE_ID, C.LINE), F.lit(4096)).cast("string"))
    no_seq = F.col(C.SEQ).isNull()
    return rows.select(
        "*",
        F.when(accepted(), F.col(C.PROCESS)).otherwise(spread).alias(PPROC),
        no_seq.alias(NOSEQ),
        F.coalesce(F.col(C.SEQ), F.lit(0)).alias(EV_SEQ),
        F.when(no_seq, F.col(FILE_ID)).otherwise(F.lit(-1)).alias(EV_FILE),
        F.when(no_seq, F.col(C.LINE)).otherwise(F.lit(-1)).alias(EV_LINE),
        # never a constant, even when no reader gave a sub: Spark drops a constant from a
        # window's partition keys but not from its order, and the windows must share a sort
        F.when(F.col(C.LINE) < 0, F.col(C.LINE)).otherwise(F.col(SUB)).alias(EV_SUB),
    ).repartition(partitions, C.TRACE_ID, PPROC)


def event_rules(rows: DataFrame) -> DataFrame:
    """Step 2: duplicate events and multicast copies, and each event's tentative rank.

    The windows share the shuffle and one sort: by (trace, process), event, file order."""
    event = Window.partitionBy(*EVENT).orderBy(*file_order())
    whole_event = event.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    leader = F.first(F.struct(C.KIND, FILE_ID, C.LINE)).over(event)
    with_leader = rows.select(
        "*",
        F.row_number().over(event).alias("__cs_rn"),
        leader.alias("__cs_leader"),
    )
    is_copy = (F.col("__cs_leader.kind") == C.SEND) & (F.col(C.KIND) == C.SEND)
    copy_peer = F.when(is_copy, F.col(C.PEER))
    duplicate = accepted() & (F.col("__cs_rn") > 1) & ~is_copy
    flagged = with_leader.select(
        "*",
        duplicate.alias(DUP),
        (
            F.count(copy_peer).over(whole_event)
            != F.size(F.collect_set(copy_peer).over(whole_event))
        ).alias(REPEATED),
        (
            (F.count(F.when(is_copy, 1)).over(whole_event) > 1)
            & (F.count(F.when(is_copy & F.col(C.PEER).isNull(), 1)).over(whole_event) > 0)
        ).alias(RISKY),
    )
    # always true; it stops the optimizer moving the rank's window below the event windows
    # (TransposeWindow), which would sort every partition twice instead of once
    flagged = flagged.where(F.col("__cs_rn") >= 1)
    local = Window.partitionBy(C.TRACE_ID, PPROC).orderBy(NOSEQ, EV_SEQ, EV_FILE, EV_LINE, EV_SUB)
    detail = F.lit(f"same process and seq as {REF}, and not part of a multicast send")
    return flagged.select(
        *[c for c in flagged.columns if not c.startswith("__cs_rn") and c != "__cs_leader"],
        F.when(accepted(), F.dense_rank().over(local)).cast("long").alias(RANK),
        F.when(F.col(DUP), detail).alias("__cs_dup_detail"),
        F.col("__cs_leader.file_id").alias("__cs_leader_file"),
        F.col("__cs_leader.line").alias("__cs_leader_line"),
    )


def repeated_destinations(by_process: DataFrame) -> DataFrame:
    """Rejections: further copies of a multicast to a destination an earlier copy named.

    Only the (rare) events that have such a repeat are looked at."""
    copies = by_process.where(
        accepted() & F.col(REPEATED) & ~F.col(DUP) & F.col(C.PEER).isNotNull()
    )
    same_peer = Window.partitionBy(*EVENT, C.PEER).orderBy(*file_order())
    first = F.first(F.struct(FILE_ID, C.LINE)).over(same_peer)
    return (
        copies.select("*", F.row_number().over(same_peer).alias("__cs_n"), first.alias("__cs_f"))
        .where(F.col("__cs_n") > 1)
        .select(
            *ROW,
            C.TRACE_ID,
            PPROC,
            RANK,
            F.lit(C.DUPLICATE_EVENT).alias(C.REASON),
            F.format_string(
                "second copy of a multicast to '%s' (same process and seq as %s)",
                F.col(C.PEER),
                F.lit(REF),
            ).alias(C.DETAIL),
            F.col("__cs_f.file_id").alias(REF_FILE),
            F.col("__cs_f.line").alias(REF_LINE),
        )
    )


def message_rules(ends: DataFrame, partitions: int) -> DataFrame:
    """Step 3: duplicate messages and peer mismatches, one shuffle by (trace, msg_id)."""
    by_message = ends.repartition(partitions, C.TRACE_ID, C.MSG_ID)
    end = Window.partitionBy(C.TRACE_ID, C.MSG_ID, C.KIND).orderBy(*file_order())
    numbered = by_message.select(
        "*",
        F.row_number().over(end).alias("__cs_end_rn"),
        F.first(F.struct(FILE_ID, C.LINE)).over(end).alias("__cs_first"),
    )
    message = Window.partitionBy(C.TRACE_ID, C.MSG_ID)
    first_send = (F.col(C.KIND) == C.SEND) & (F.col("__cs_end_rn") == 1)
    sender = F.max(F.when(first_send, F.col(C.PROCESS))).over(message)
    send_peer = F.max(F.when(first_send, F.col(C.PEER))).over(message)
    judged = numbered.select("*", sender.alias("__cs_sender"), send_peer.alias("__cs_send_peer"))
    duplicate = F.col("__cs_end_rn") > 1
    wrong_dst = F.col("__cs_send_peer").isNotNull() & (F.col("__cs_send_peer") != F.col(C.PROCESS))
    wrong_src = (
        F.col("__cs_sender").isNotNull()
        & F.col(C.PEER).isNotNull()
        & (F.col(C.PEER) != F.col("__cs_sender"))
    )
    mismatch = (F.col(C.KIND) == C.RECEIVE) & ~duplicate & (wrong_dst | wrong_src)
    reason = F.when(duplicate, F.lit(C.DUPLICATE_MSG)).when(mismatch, F.lit(C.PEER_MISMATCH))
    detail = (
        F.when(
            duplicate,
            F.format_string(
                "second %s of msg_id '%s' (the first is %s)",
                F.col(C.KIND),
                F.col(C.MSG_ID),
                F.lit(REF),
            ),
        )
        .when(
            mismatch & wrong_dst,
            F.format_string(
                "msg_id '%s' was sent to '%s' but received by '%s'",
                F.col(C.MSG_ID),
                F.col("__cs_send_peer"),
                F.col(C.PROCESS),
            ),
        )
        .when(
            mismatch,
            F.format_string(
                "msg_id '%s' was sent by '%s' but the receive names peer '%s'",
                F.col(C.MSG_ID),
                F.col("__cs_sender"),
                F.col(C.PEER),
            ),
        )
    )
    return judged.select(
        *ROW,
        C.TRACE_ID,
        PPROC,
        RANK,
        C.PROCESS,
        C.KIND,
        C.MSG_ID,
        C.PEER,
        C.TS,
        C.SIZE_BYTES,
        RISKY,
        reason.alias(C.REASON),
        detail.alias(C.DETAIL),
        F.when(duplicate, F.col("__cs_first.file_id")).alias(REF_FILE),
        F.when(duplicate, F.col("__cs_first.line")).alias(REF_LINE),
    )


def message_rows(judged: DataFrame) -> DataFrame:
    """One row per msg_id from its accepted send and receive (grouped where they are)."""
    kept = judged.where(F.col(C.REASON).isNull())
    is_send = F.col(C.KIND) == C.SEND
    is_receive = F.col(C.KIND) == C.RECEIVE

    def side(condition: Column, column: str) -> Column:
        return F.max(F.when(condition, F.col(column)))

    return kept.groupBy(C.TRACE_ID, C.MSG_ID).agg(
        side(is_send, C.PROCESS).alias("__cs_sender"),
        side(is_send, C.PEER).alias("__cs_send_peer"),
        side(is_send, RANK).alias("__cs_send_rank"),
        side(is_send, C.TS).alias(C.SEND_TS),
        side(is_send, C.SIZE_BYTES).alias("__cs_send_size"),
        side(is_send, FILE_ID).alias("__cs_send_file"),
        side(is_send, C.LINE).alias("__cs_send_line"),
        side(is_send, SUB).alias("__cs_send_sub"),
        F.max(F.when(is_send, F.col(RISKY).cast("int"))).alias("__cs_risky"),
        side(is_receive, C.PROCESS).alias("__cs_receiver"),
        side(is_receive, C.PEER).alias("__cs_recv_peer"),
        side(is_receive, RANK).alias("__cs_recv_rank"),
        side(is_receive, C.TS).alias(C.RECV_TS),
        side(is_receive, C.SIZE_BYTES).alias("__cs_recv_size"),
        side(is_receive, FILE_ID).alias("__cs_recv_file"),
        side(is_receive, C.LINE).alias("__cs_recv_line"),
        side(is_receive, SUB).alias("__cs_recv_sub"),
    )


def second_copies(messages: DataFrame) -> DataFrame:
    """Rejections after matching: a multicast event's second copy to one destination.

    A copy that names no peer gets its destination from its receive; only events with
    such a copy can repeat a destination here (the event rules saw the named ones)."""
    dst = F.coalesce(F.col("__cs_receiver"), F.col("__cs_send_peer"))
    copies = messages.where((F.col("__cs_risky") == 1) & dst.isNotNull()).withColumn(
        "__cs_dst", dst
    )
    same = Window.partitionBy(C.TRACE_ID, "__cs_sender", "__cs_send_rank", "__cs_dst").orderBy(
        "__cs_send_file", "__cs_send_line", "__cs_send_sub"
    )
    seconds = copies.select(
        "*",
        F.row_number().over(same).alias("__cs_n"),
        F.first(F.struct(F.col("__cs_send_file").alias("f"), F.col("__cs_send_line").alias("l")))
        .over(same)
        .alias("__cs_first"),
    ).where(F.col("__cs_n") > 1)
    detail_send = F.format_string(
        "second copy of a multicast to '%s' (same process and seq as %s)",
        F.col("__cs_dst"),
        F.lit(REF),
    )
    detail_receive = F.format_string(
        "receive of msg_id '%s', a second copy of a multicast to '%s' (the first copy is %s)",
        F.col(C.MSG_ID),
        F.col("__cs_dst"),
        F.lit(REF),
    )

    def rejected(prefix: str, process: str, detail: Column) -> DataFrame:
        return seconds.where(F.col(f"__cs_{prefix}_file").isNotNull()).select(
            F.col(f"__cs_{prefix}_file").alias(FILE_ID),
            F.col(f"__cs_{prefix}_line").alias(C.LINE),
            F.col(f"__cs_{prefix}_sub").alias(SUB),
            C.TRACE_ID,
            F.col(process).alias(PPROC),
            F.col(f"__cs_{prefix}_rank").alias(RANK),
            F.lit(C.DUPLICATE_EVENT).alias(C.REASON),
            detail.alias(C.DETAIL),
            F.col("__cs_first.f").alias(REF_FILE),
            F.col("__cs_first.l").alias(REF_LINE),
        )

    return rejected("send", "__cs_sender", detail_send).unionByName(
        rejected("recv", "__cs_receiver", detail_receive)
    )


@dataclass(frozen=True)
class Removed:
    """Events every row of which a later rule rejected: lseq = rank - removed before it."""

    buckets: DataFrame | None  # trace_id, pproc, bucket, before (removed in earlier buckets), ranks
    totals: DataFrame | None  # trace_id, pproc, last, total (removed events of the process)

    def lseq(self, frame: DataFrame, trace: str, process: str, rank: str, out: str) -> DataFrame:
        if self.buckets is None or self.totals is None:
            return frame.withColumn(out, F.col(rank))
        b = self.buckets.select(
            F.col(C.TRACE_ID).alias("__cs_bt"),
            F.col(PPROC).alias("__cs_bp"),
            F.col("bucket").alias("__cs_bb"),
            F.col("before").alias("__cs_before"),
            F.col("ranks").alias("__cs_ranks"),
        )
        t = self.totals.select(
            F.col(C.TRACE_ID).alias("__cs_tt"),
            F.col(PPROC).alias("__cs_tp"),
            F.col("last").alias("__cs_last"),
            F.col("total").alias("__cs_total"),
        )
        bucket = F.floor(F.col(rank) / BUCKET)
        joined = frame.join(
            F.broadcast(b),
            (F.col(trace) == F.col("__cs_bt"))
            & (F.col(process) == F.col("__cs_bp"))
            & (bucket == F.col("__cs_bb")),
            "left",
        ).join(
            F.broadcast(t),
            (F.col(trace) == F.col("__cs_tt")) & (F.col(process) == F.col("__cs_tp")),
            "left",
        )
        r = F.col(rank)
        in_bucket = F.col("__cs_before") + F.size(F.filter("__cs_ranks", lambda x: x < r))
        removed = F.when(F.col("__cs_bb").isNotNull(), in_bucket).when(
            F.col("__cs_last").isNotNull() & (r > F.col("__cs_last")), F.col("__cs_total")
        )
        return joined.withColumn(out, r - F.coalesce(removed, F.lit(0))).drop(
            "__cs_bt",
            "__cs_bp",
            "__cs_bb",
            "__cs_before",
            "__cs_ranks",
            "__cs_tt",
            "__cs_tp",
            "__cs_last",
            "__cs_total",
        )


def removed_events(spark: SparkSession, removed: list[tuple[str, str, int]]) -> Removed:
    if not removed:
        return Removed(None, None)
    by_process: dict[tuple[str, str], list[int]] = {}
    for trace, process, rank in removed:
        by_process.setdefault((trace, process), []).append(rank)
    buckets, totals = [], []
    for (trace, process), ranks in by_process.items():
        ranks.sort()
        last = ranks[-1]
        for b in range(last // BUCKET + 1):
            lo, hi = b * BUCKET, (b + 1) * BUCKET
            before = bisect.bisect_left(ranks, lo)
            inside = ranks[before : bisect.bisect_left(ranks, hi)]
            buckets.append((trace, process, b, before, inside))
        totals.append((trace, process, last, len(ranks)))
    return Removed(
        spark.createDataFrame(
            buckets,
            f"{C.TRACE_ID} string, {PPROC} string, bucket long, before long, ranks array<long>",
        ),
        spark.createDataFrame(
            totals, f"{C.TRACE_ID} string, {PPROC} string, last long, total long"
        ),
    )
