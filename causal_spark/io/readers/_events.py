"""Events with the messages they receive and send -> raw rows (the `sub` expansion).

Shared by the readers whose records do not map one-to-one to events (ShiViz
inference, spans): one logged event that receives k messages becomes k receive
events at its place, then, if it sends, send events; all keep the logged event's
`seq` and are told apart and ordered by `sub` (docs/formats.md).

A send event holds at most one message per destination (docs/ingest.md: a second
copy to the same destination would be a `duplicate_event`), so sends that repeat
a destination go to a further send event: the i-th message to each destination
is in the i-th send event.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark.io.readers.base import CLOCK_TYPE, RECORDED_VC, SUB, conform

RECEIVES = "__rd_receives"
SENDS = "__rd_sends"

# element type of RECEIVES and SENDS
MESSAGE_END = T.StructType(
    [T.StructField(C.MSG_ID, T.StringType()), T.StructField(C.PEER, T.StringType())]
)
MESSAGE_ENDS = T.ArrayType(MESSAGE_END)

_ROW = "__rd_row"


def _send_rounds(sends: Column) -> Column:
    """For each send, how many earlier sends of the event go to the same peer."""
    return F.transform(
        sends,
        lambda s, i: F.size(
            F.filter(F.slice(sends, 1, i), lambda t: t[C.PEER].eqNullSafe(s[C.PEER]))
        ),
    )


def expand_events(events: DataFrame) -> DataFrame:
    """Events -> raw rows.

    Input columns: the raw-row fields of the logged event (source, line, record,
    raw, trace_id, trace_suffix, process, seq, ts, size_bytes, label, recorded_vc; the
    optional ones may be absent)
    and `RECEIVES`, `SENDS`: arrays of (msg_id, peer) in the order wanted (null
    or empty: none). Output: the raw-row contract; the label stays on the first
    row's event, the recorded clock on the last event (the logged one's state).
    """
    if RECORDED_VC not in events.columns:
        events = events.withColumn(RECORDED_VC, F.lit(None).cast(CLOCK_TYPE))
    receives = F.coalesce(F.col(RECEIVES), F.array().cast(MESSAGE_ENDS))
    sends = F.coalesce(F.col(SENDS), F.array().cast(MESSAGE_ENDS))
    n_recv = F.size(receives)
    rounds = _send_rounds(sends)
    last_sub = F.when(F.size(sends) > 0, n_recv + F.array_max(rounds)).otherwise(
        F.greatest(n_recv - 1, F.lit(0))
    )

    def row(kind: str | None, end: Column | None, sub: Column) -> Column:
        return F.struct(
            F.lit(kind).cast("string").alias(C.KIND),
            (end[C.MSG_ID] if end is not None else F.lit(None).cast("string")).alias(C.MSG_ID),
            (end[C.PEER] if end is not None else F.lit(None).cast("string")).alias(C.PEER),
            sub.cast("long").alias(SUB),
        )

    receive_rows = F.transform(receives, lambda r, i: row(C.RECEIVE, r, i))
    send_rows = F.transform(
        F.arrays_zip(sends.alias("end"), rounds.alias("round")),
        lambda x: row(C.SEND, x["end"], n_recv + x["round"]),
    )
    internal = F.array(row(C.INTERNAL, None, F.lit(0)))
    expanded = F.when((F.size(receives) + F.size(sends)) == 0, internal).otherwise(
        F.concat(receive_rows, send_rows)
    )
    rows = events.select(
        "*", last_sub.alias("__rd_last_sub"), F.explode(expanded).alias(_ROW)
    ).select(
        "*",
        F.col(f"{_ROW}.{C.KIND}").alias(C.KIND),
        F.col(f"{_ROW}.{C.MSG_ID}").alias(C.MSG_ID),
        F.col(f"{_ROW}.{C.PEER}").alias(C.PEER),
        F.col(f"{_ROW}.{SUB}").alias(SUB),
    )
    first_event = F.col(SUB) == 0
    last_event = F.col(SUB) == F.col("__rd_last_sub")
    return conform(
        rows.withColumn(C.LABEL, F.when(first_event, F.col(C.LABEL))).withColumn(
            RECORDED_VC, F.when(last_event, F.col(RECORDED_VC))
        )
    )
