"""Ingest: raw log rows -> classified rows -> `events`, `messages`, `quarantine`.

DESIGN §1. Every raw row ends in exactly one place: accepted rows become events
(a multicast group of send rows is one event) and message ends; rejected rows
become quarantine rows with a reason code and a detail in words:

- `malformed`: unparseable, missing required field, unknown kind, bad type;
- `duplicate_event`: same (trace, process, seq) as an earlier row, and not a
  further copy of a multicast send to a new destination;
- `duplicate_msg`: a second send, or a second receive, of one msg_id;
- `peer_mismatch`: send.peer is not the receiver or receive.peer is not the
  sender; the receive row is rejected and its message stays `in_flight`.

"Earlier" and "first" are file order: (source, line).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.sources import DEFAULT_TRACE, FILE_HAS_SEQ, PARSE_ERROR, RAW_COLUMNS

KIND_ALIASES: dict[str, str] = {
    "send": C.SEND,
    "snd": C.SEND,
    "receive": C.RECEIVE,
    "recv": C.RECEIVE,
    "rcv": C.RECEIVE,
    "deliver": C.RECEIVE,
    "internal": C.INTERNAL,
    "local": C.INTERNAL,
}

# columns of classified rows (besides the typed input fields)
EVENT_KEY = "event_key"
ORDER_KEY = "order_key"

_RAW_KIND = "__cs_kind_text"


class IngestError(ValueError):
    """The raw rows do not have the columns ingest needs."""


@dataclass(frozen=True)
class Ingested:
    """The three outputs of ingest, conformed to their table schemas."""

    events: DataFrame
    messages: DataFrame
    quarantine: DataFrame


def _blank_to_null(column: Column) -> Column:
    trimmed = F.trim(column)
    return F.when(trimmed != "", trimmed)


def _normalized_kind(raw_kind: Column) -> Column:
    lowered = F.lower(F.trim(raw_kind))
    mapping = F.create_map(*[F.lit(x) for pair in KIND_ALIASES.items() for x in pair])
    return mapping[lowered]


def _parsed_ts(raw_ts: Column) -> Column:
    """Seconds as a double, from a number or an ISO-8601 string (UTC when no offset)."""
    as_instant = F.unix_micros(F.try_to_timestamp(raw_ts)) / F.lit(1_000_000.0)
    return F.coalesce(raw_ts.try_cast("double"), as_instant)


def _try_long(raw: Column) -> Column:
    return F.trim(raw).try_cast("long")


def _is_structured(raw: Column) -> Column:
    trimmed = F.trim(raw)
    return (trimmed.startswith("{") & trimmed.endswith("}")) | (
        trimmed.startswith("[") & trimmed.endswith("]")
    )


def _rule(condition: Column, detail: Column | str) -> Column:
    return F.when(condition, detail if isinstance(detail, Column) else F.lit(detail))


def _malformed_rules(raw: DataFrame) -> list[Column]:
    """One Column per rule: its detail text when the row breaks it, else null."""
    kind = F.col(_RAW_KIND)
    seq_given = _blank_to_null(F.col("__cs_raw_seq")).isNotNull()
    ts_given = _blank_to_null(F.col("__cs_raw_ts")).isNotNull()
    size_given = _blank_to_null(F.col("__cs_raw_size")).isNotNull()
    parsed_ts = F.col(C.TS)
    needs_msg = F.col(C.KIND).isin(C.SEND, C.RECEIVE)
    rules = [
        _rule(F.col(PARSE_ERROR).isNotNull(), F.col(PARSE_ERROR)),
        _rule(
            F.col(PARSE_ERROR).isNull() & F.col(C.PROCESS).isNull(),
            "missing required field 'process'",
        ),
        _rule(F.col(PARSE_ERROR).isNull() & kind.isNull(), "missing required field 'kind'"),
        _rule(
            kind.isNotNull() & F.col(C.KIND).isNull(),
            F.format_string("unknown kind '%s'", kind),
        ),
        _rule(
            F.col(PARSE_ERROR).isNull() & ~seq_given & F.col(FILE_HAS_SEQ),
            "missing seq (other rows of this file have one)",
        ),
        _rule(
            seq_given & F.col("__cs_seq").isNull(),
            F.format_string("seq '%s' is not an integer", F.col("__cs_raw_seq")),
        ),
        _rule(
            needs_msg & F.col(C.MSG_ID).isNull(),
            F.format_string("%s without msg_id", F.col(C.KIND)),
        ),
        _rule(
            ts_given
            & (parsed_ts.isNull() | F.isnan(parsed_ts) | (F.abs(parsed_ts) == F.lit(float("inf")))),
            F.format_string(
                "ts '%s' is neither seconds nor an ISO-8601 time", F.col("__cs_raw_ts")
            ),
        ),
        _rule(
            size_given & (F.col("__cs_size").isNull() | (F.col("__cs_size") < 0)),
            F.format_string(
                "size_bytes '%s' is not a non-negative integer", F.col("__cs_raw_size")
            ),
        ),
    ]
    for name in (C.TRACE_ID, C.PROCESS, C.KIND, C.MSG_ID, C.PEER):
        rules.append(
            _rule(
                F.coalesce(_is_structured(F.col(f"__cs_raw_{name}")), F.lit(False)),
                f"field '{name}' must be a scalar, found an object or array",
            )
        )
    del raw
    return rules


def type_rows(raw: DataFrame) -> DataFrame:
    """Type the string fields of raw rows and mark malformed ones.

    Input: the raw-row contract of `causal_spark.sources` (`RAW_COLUMNS`).
    Output: source, line, raw, trace_id, process, seq (long), kind (normalised),
    msg_id, peer, ts (double seconds), size_bytes (long), label, reason, detail;
    reason is `malformed` or null.
    """
    missing = [c for c in RAW_COLUMNS if c not in raw.columns]
    if missing:
        raise IngestError(f"raw rows need columns {missing}; found {raw.columns}")
    typed = raw.select(
        C.SOURCE,
        C.LINE,
        C.RAW,
        FILE_HAS_SEQ,
        PARSE_ERROR,
        *[
            F.col(n).alias(f"__cs_raw_{n}")
            for n in (C.TRACE_ID, C.PROCESS, C.KIND, C.MSG_ID, C.PEER)
        ],
        F.col(C.SEQ).alias("__cs_raw_seq"),
        F.col(C.TS).alias("__cs_raw_ts"),
        F.col(C.SIZE_BYTES).alias("__cs_raw_size"),
        F.coalesce(_blank_to_null(F.col(C.TRACE_ID)), F.col(DEFAULT_TRACE)).alias(C.TRACE_ID),
        _blank_to_null(F.col(C.PROCESS)).alias(C.PROCESS),
        _blank_to_null(F.col(C.KIND)).alias(_RAW_KIND),
        _normalized_kind(F.col(C.KIND)).alias(C.KIND),
        _try_long(F.col(C.SEQ)).alias("__cs_seq"),
        _blank_to_null(F.col(C.MSG_ID)).alias(C.MSG_ID),
        _blank_to_null(F.col(C.PEER)).alias(C.PEER),
        _parsed_ts(_blank_to_null(F.col(C.TS))).alias(C.TS),
        _try_long(F.col(C.SIZE_BYTES)).alias("__cs_size"),
        F.col(C.LABEL),
    )
    details = F.array_compact(F.array(*_malformed_rules(typed)))
    return typed.select(
        C.SOURCE,
        C.LINE,
        C.RAW,
        C.TRACE_ID,
        C.PROCESS,
        F.col("__cs_seq").alias(C.SEQ),
        C.KIND,
        # an internal event has no message: an id on it is ignored, not an error
        F.when(F.col(C.KIND) != C.INTERNAL, F.col(C.MSG_ID)).alias(C.MSG_ID),
        C.PEER,
        C.TS,
        F.coalesce(F.col("__cs_size"), F.lit(0)).alias(C.SIZE_BYTES),
        C.LABEL,
        F.when(F.size(details) > 0, F.lit(C.MALFORMED)).alias(C.REASON),
        F.when(F.size(details) > 0, F.array_join(details, "; ")).alias(C.DETAIL),
    )


def _file_order() -> list[Column]:
    return [F.col(C.SOURCE), F.col(C.LINE)]


def _accepted() -> Column:
    return F.col(C.REASON).isNull()


def _with_event_keys(rows: DataFrame) -> DataFrame:
    """Event identity and local-order key of each row.

    With a seq, rows sharing (trace, process, seq) are one event (a multicast);
    without one, every row is its own event, ordered by file order.
    """
    event_key = F.when(
        F.col(C.SEQ).isNotNull(), F.concat(F.lit("s:"), F.col(C.SEQ).cast("string"))
    ).otherwise(F.concat(F.lit("l:"), F.col(C.SOURCE), F.lit(":"), F.col(C.LINE).cast("string")))
    return rows.withColumn(EVENT_KEY, event_key).withColumn(
        ORDER_KEY, F.coalesce(F.col(C.SEQ), F.col(C.LINE))
    )


def _reject(rows: DataFrame, condition: Column, reason: str, detail: Column) -> DataFrame:
    """Set reason/detail on still-accepted rows that meet `condition`."""
    hit = _accepted() & F.coalesce(condition, F.lit(False))
    return rows.withColumn(C.DETAIL, F.when(hit, detail).otherwise(F.col(C.DETAIL))).withColumn(
        C.REASON, F.when(hit, F.lit(reason)).otherwise(F.col(C.REASON))
    )


# Each check below is one window pass over all rows. Rows rejected by an earlier
# check sit in windows of their own (the partition includes "accepted so far"),
# so they never make an accepted row look like a duplicate.


def _mark_duplicate_events(rows: DataFrame) -> DataFrame:
    event_cols = [C.TRACE_ID, C.PROCESS, EVENT_KEY]
    event = Window.partitionBy(*event_cols, _accepted()).orderBy(*_file_order())
    # null peers never collide with each other
    peer_key = F.coalesce(F.col(C.PEER), F.concat(F.lit("\u0000"), F.col(C.LINE).cast("string")))
    same_peer = Window.partitionBy(*event_cols, peer_key, _accepted()).orderBy(*_file_order())
    leader_kind = F.first(C.KIND).over(event)
    leader_line = F.first(C.LINE).over(event)
    is_leader = F.row_number().over(event) == 1
    multicast_copy = (leader_kind == C.SEND) & (F.col(C.KIND) == C.SEND)
    repeated_destination = F.row_number().over(same_peer) > 1
    duplicate = ~is_leader & (~multicast_copy | repeated_destination)
    detail = F.when(
        multicast_copy,
        F.format_string(
            "second copy of a multicast to '%s' (same process and seq as line %d)",
            F.col(C.PEER),
            leader_line,
        ),
    ).otherwise(
        F.format_string(
            "same process and seq as line %d, and not part of a multicast send", leader_line
        )
    )
    return _reject(rows, duplicate, C.DUPLICATE_EVENT, detail)


def _mark_duplicate_messages(rows: DataFrame) -> DataFrame:
    end = Window.partitionBy(C.TRACE_ID, C.MSG_ID, C.KIND, _accepted()).orderBy(*_file_order())
    duplicate = F.col(C.KIND).isin(C.SEND, C.RECEIVE) & (F.row_number().over(end) > 1)
    detail = F.format_string(
        "second %s of msg_id '%s' (the first is line %d)",
        F.col(C.KIND),
        F.col(C.MSG_ID),
        F.first(C.LINE).over(end),
    )
    return _reject(rows, duplicate, C.DUPLICATE_MSG, detail)


def _mark_peer_mismatches(rows: DataFrame) -> DataFrame:
    # after the duplicate checks a msg_id has at most one accepted send
    message = Window.partitionBy(C.TRACE_ID, C.MSG_ID, _accepted())
    is_send = F.col(C.KIND) == C.SEND
    sender = F.max(F.when(is_send, F.col(C.PROCESS))).over(message)
    send_peer = F.max(F.when(is_send, F.col(C.PEER))).over(message)
    is_receive = F.col(C.KIND) == C.RECEIVE
    wrong_dst = send_peer.isNotNull() & (send_peer != F.col(C.PROCESS))
    wrong_src = sender.isNotNull() & F.col(C.PEER).isNotNull() & (F.col(C.PEER) != sender)
    detail = F.when(
        wrong_dst,
        F.format_string(
            "msg_id '%s' was sent to '%s' but received by '%s'",
            F.col(C.MSG_ID),
            send_peer,
            F.col(C.PROCESS),
        ),
    ).otherwise(
        F.format_string(
            "msg_id '%s' was sent by '%s' but the receive names peer '%s'",
            F.col(C.MSG_ID),
            sender,
            F.col(C.PEER),
        )
    )
    return _reject(rows, is_receive & (wrong_dst | wrong_src), C.PEER_MISMATCH, detail)


def _with_local_order(rows: DataFrame) -> DataFrame:
    """`lseq` and `pidx` on accepted rows (null on rejected ones)."""
    local = Window.partitionBy(C.TRACE_ID, C.PROCESS, _accepted()).orderBy(ORDER_KEY, EVENT_KEY)
    # processes per trace are few: rank them in a small aggregate, join back by broadcast
    processes = rows.where(_accepted()).select(C.TRACE_ID, C.PROCESS).distinct()
    index = processes.select(
        C.TRACE_ID,
        C.PROCESS,
        (F.dense_rank().over(Window.partitionBy(C.TRACE_ID).orderBy(C.PROCESS)) - 1).alias(
            "__cs_pidx"
        ),
    )
    return (
        rows.withColumn(C.LSEQ, F.when(_accepted(), F.dense_rank().over(local).cast("long")))
        .join(F.broadcast(index), [C.TRACE_ID, C.PROCESS], "left")
        .withColumn(C.PIDX, F.when(_accepted(), F.col("__cs_pidx")).cast("int"))
        .drop("__cs_pidx")
    )


def classify_rows(raw: DataFrame) -> DataFrame:
    """Raw rows -> typed rows, each accepted (reason null) or rejected with a reason.

    Input: the raw-row contract of `causal_spark.sources`.
    Output: the columns of `type_rows` plus `event_key`, `order_key`, and for
    accepted rows `lseq` and `pidx`. The result feeds three tables; callers
    should checkpoint it.
    """
    return (
        type_rows(raw)
        .transform(_with_event_keys)
        .transform(_mark_duplicate_events)
        .transform(_mark_duplicate_messages)
        .transform(_mark_peer_mismatches)
        .transform(_with_local_order)
    )


def quarantine_of(rows: DataFrame) -> DataFrame:
    """The rejected rows, as the `quarantine` table."""
    rejected = rows.where(~_accepted()).select(
        C.SOURCE, C.LINE, C.RAW, C.REASON, C.DETAIL, C.TRACE_ID
    )
    return tables.conform(rejected, tables.QUARANTINE)


def events_of(rows: DataFrame) -> DataFrame:
    """The accepted rows grouped into events (a multicast group is one), as `events`."""
    first = F.struct(C.SOURCE, C.LINE)
    events = (
        rows.where(_accepted())
        .groupBy(C.TRACE_ID, C.PROCESS, C.PIDX, C.LSEQ)
        .agg(
            F.min_by(C.KIND, first).alias(C.KIND),
            F.min_by(C.TS, first).alias(C.TS),
            F.min_by(C.LABEL, first).alias(C.LABEL),
            F.min_by(C.SEQ, first).alias(C.SEQ),
            F.min(first).alias("__cs_first"),
            F.sum((F.col(C.KIND) == C.SEND).cast("int")).alias(C.N_MSGS),
        )
        .select(
            "*",
            F.col("__cs_first.source").alias(C.SOURCE),
            F.col("__cs_first.line").alias(C.LINE),
            F.lit(None).cast("long").alias(C.LAMPORT),
            F.lit(None).cast("array<int>").alias(C.VC),
        )
    )
    return tables.conform(events, tables.EVENTS)


def messages_of(rows: DataFrame) -> DataFrame:
    """Sends and receives matched by (trace_id, msg_id), as `messages`."""
    accepted = rows.where(_accepted())
    sends = accepted.where(F.col(C.KIND) == C.SEND).select(
        C.TRACE_ID,
        C.MSG_ID,
        F.col(C.PROCESS).alias("__cs_sender"),
        F.col(C.PEER).alias("__cs_send_peer"),
        F.col(C.PIDX).alias(C.SRC_PIDX),
        F.col(C.LSEQ).alias(C.SEND_LSEQ),
        F.col(C.TS).alias(C.SEND_TS),
        F.col(C.SIZE_BYTES).alias("__cs_send_size"),
    )
    receives = accepted.where(F.col(C.KIND) == C.RECEIVE).select(
        C.TRACE_ID,
        C.MSG_ID,
        F.col(C.PROCESS).alias("__cs_receiver"),
        F.col(C.PEER).alias("__cs_recv_peer"),
        F.col(C.PIDX).alias(C.DST_PIDX),
        F.col(C.LSEQ).alias(C.RECV_LSEQ),
        F.col(C.TS).alias(C.RECV_TS),
        F.col(C.SIZE_BYTES).alias("__cs_recv_size"),
    )
    pairs = sends.join(receives, [C.TRACE_ID, C.MSG_ID], "full")
    status = (
        F.when(F.col(C.SEND_LSEQ).isNotNull() & F.col(C.RECV_LSEQ).isNotNull(), F.lit(C.DELIVERED))
        .when(F.col(C.SEND_LSEQ).isNotNull(), F.lit(C.IN_FLIGHT))
        .otherwise(F.lit(C.ORPHAN))
    )
    named = pairs.select(
        C.TRACE_ID,
        C.MSG_ID,
        F.coalesce(F.col("__cs_sender"), F.col("__cs_recv_peer")).alias(C.SRC),
        F.coalesce(F.col("__cs_receiver"), F.col("__cs_send_peer")).alias(C.DST),
        C.SRC_PIDX,
        C.DST_PIDX,
        C.SEND_LSEQ,
        C.RECV_LSEQ,
        C.SEND_TS,
        C.RECV_TS,
        F.coalesce(F.col("__cs_send_size"), F.col("__cs_recv_size"), F.lit(0)).alias(C.SIZE_BYTES),
        status.alias(C.STATUS),
    )
    # the missing end of an in-flight or orphan message may still be a process
    # with events in the trace: give it its pidx
    index = accepted.select(C.TRACE_ID, C.PROCESS, C.PIDX).distinct()
    src_index = index.select(
        C.TRACE_ID, F.col(C.PROCESS).alias(C.SRC), F.col(C.PIDX).alias("__cs_src_pidx")
    )
    dst_index = index.select(
        C.TRACE_ID, F.col(C.PROCESS).alias(C.DST), F.col(C.PIDX).alias("__cs_dst_pidx")
    )
    resolved = (
        named.join(F.broadcast(src_index), [C.TRACE_ID, C.SRC], "left")
        .join(F.broadcast(dst_index), [C.TRACE_ID, C.DST], "left")
        .withColumn(C.SRC_PIDX, F.coalesce(C.SRC_PIDX, "__cs_src_pidx"))
        .withColumn(C.DST_PIDX, F.coalesce(C.DST_PIDX, "__cs_dst_pidx"))
    )
    return tables.conform(resolved, tables.MESSAGES)


def build_tables(rows: DataFrame) -> Ingested:
    """Classified rows (from `classify_rows`) -> `events`, `messages`, `quarantine`."""
    return Ingested(
        events=events_of(rows), messages=messages_of(rows), quarantine=quarantine_of(rows)
    )


def ingest(raw: DataFrame) -> Ingested:
    """Raw rows -> `events`, `messages` and `quarantine` (DESIGN §1)."""
    return build_tables(classify_rows(raw))
