"""A trace as a ShiViz log in GoVector's format (docs/export.md).

The log starts with GoVector's header (ShiViz's default parser regex, then a
blank line) and holds two lines per event, in a linear extension of
happened-before (Lamport time, then process):

    <process> {"<process>":<count>, ...}
    <description>

The clock is the event's vector clock with its non-zero entries, keyed by
process name: entry q counts q's events that happen before the event or are it,
so a process's own entry is its 1, 2, 3, ... (what ShiViz requires).

ShiViz, and our reader (`causal_spark.io.readers.shiviz`), infer each message
from the clocks alone: a receive whose clock rose for another process gets a
message from the event that clock names. With our clocks that is exactly the
recorded message (a receive has one message, its sender's entry rises to the send
event, and every other entry that rose is known to that send), except for a
message its receiver already knew of (the overtaken message of a causal-order
violation, or one sent to itself): its receive changes no clock, so no tool can
see it. The description therefore names each message by its recorded id and
marks those receives `(already known: not in the clocks)`; reading the log back
gives the same vector clocks for every event, with messages named by their
clock positions (`q#v>p#s`) instead of their recorded ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark.export.errors import ExportError
from causal_spark.io.readers.shiviz import DEFAULT_REGEX

HEADER = DEFAULT_REGEX
HOST_LINE = "host_line"
EVENT_LINE = "event_line"
_SENT = "__ex_sent"
_RECEIVED = "__ex_received"
_PREV_VC = "__ex_prev_vc"
_NAMES = "__ex_names"


def require_hosts(trace_id: str, processes: Sequence[str]) -> None:
    """ShiViz's parser reads a host name as `\\S*` at the start of a line: names with
    white space (or none) cannot be written."""
    bad = [p for p in processes if not p or any(c.isspace() for c in p)]
    if bad:
        raise ExportError(
            f"trace {trace_id!r}: process name(s) {bad[:5]} contain white space or are "
            "empty; a ShiViz host name cannot"
        )


def _process_names(events: DataFrame) -> DataFrame:
    """Per trace, its process names in `pidx` order (the positions of `vc`)."""
    pairs = F.array_sort(F.collect_set(F.struct(C.PIDX, C.PROCESS)))
    return events.groupBy(C.TRACE_ID).agg(
        F.transform(pairs, lambda pair: pair[C.PROCESS]).alias(_NAMES)
    )


def _clock_json() -> Column:
    """The event's vc as a JSON object of its non-zero entries, keyed by process name."""
    counts = F.map_from_arrays(F.col(_NAMES), F.col(C.VC))
    return F.to_json(F.map_filter(counts, lambda _, v: v > 0))


def _sends(messages: DataFrame) -> DataFrame:
    """Per send event: `send m1 to B, m2 to C` (messages by id)."""
    return (
        messages.where(F.col(C.SEND_LSEQ).isNotNull())
        .groupBy(C.TRACE_ID, F.col(C.SRC).alias(C.PROCESS), F.col(C.SEND_LSEQ).alias(C.LSEQ))
        .agg(
            F.array_sort(
                F.collect_list(F.format_string("%s to %s", F.col(C.MSG_ID), F.col(C.DST)))
            ).alias(_SENT)
        )
        .select(C.TRACE_ID, C.PROCESS, C.LSEQ, F.concat_ws(", ", _SENT).alias(_SENT))
    )


def _receives(messages: DataFrame) -> DataFrame:
    """Per receive event: its message, sender and send position."""
    return messages.where(F.col(C.RECV_LSEQ).isNotNull()).select(
        C.TRACE_ID,
        F.col(C.DST).alias(C.PROCESS),
        F.col(C.RECV_LSEQ).alias(C.LSEQ),
        F.struct(C.MSG_ID, C.SRC, C.SRC_PIDX, C.SEND_LSEQ).alias(_RECEIVED),
    )


def _description() -> Column:
    received = F.col(_RECEIVED)
    known = F.coalesce(
        F.get(F.col(_PREV_VC), received[C.SRC_PIDX]) >= received[C.SEND_LSEQ], F.lit(False)
    )
    receive = F.concat(
        F.lit("receive "),
        received[C.MSG_ID],
        F.when(received[C.SRC].isNotNull(), F.concat(F.lit(" from "), received[C.SRC])).otherwise(
            F.lit("")
        ),
        F.when(received[C.SEND_LSEQ].isNull(), F.lit(" (orphan: no send in the trace)"))
        .when(known, F.lit(" (already known: not in the clocks)"))
        .otherwise(F.lit("")),
    )
    what = (
        F.when(F.col(_SENT).isNotNull(), F.concat(F.lit("send "), F.col(_SENT)))
        .when(F.col(_RECEIVED).isNotNull(), receive)
        .otherwise(F.col(C.KIND))
    )
    label = F.regexp_replace(F.col(C.LABEL), r"[\r\n]+", " ")
    return F.when(
        F.col(C.LABEL).isNotNull() & (F.length(label) > 0),
        F.concat(what, F.lit(" -- "), label),
    ).otherwise(what)


def shiviz_records(events: DataFrame, messages: DataFrame) -> DataFrame:
    """The two log lines of each event, in each trace's log order.

    Requires `events` (with clocks: `vc` not null) and `messages` (columns as in
    schemas/); process names must suit ShiViz (`require_hosts`). Output:
    `trace_id` (string), `lamport` (long), `pidx` (int), `lseq` (long), `host_line`
    and `event_line` (strings), sorted by (trace_id, lamport, pidx)."""
    by_process = Window.partitionBy(C.TRACE_ID, C.PROCESS).orderBy(C.LSEQ)
    keys = [C.TRACE_ID, C.PROCESS, C.LSEQ]
    return (
        events.withColumn(_PREV_VC, F.lag(C.VC).over(by_process))
        .join(_process_names(events), C.TRACE_ID)
        .join(_sends(messages), keys, "left")
        .join(_receives(messages), keys, "left")
        .select(
            C.TRACE_ID,
            C.LAMPORT,
            C.PIDX,
            C.LSEQ,
            F.concat(F.col(C.PROCESS), F.lit(" "), _clock_json()).alias(HOST_LINE),
            _description().alias(EVENT_LINE),
        )
        .orderBy(C.TRACE_ID, C.LAMPORT, C.PIDX, C.LSEQ)
    )
