"""Ingest: raw rows -> `events`, `messages`, `quarantine` (docs/ingest.md).

Every raw row ends in exactly one place: accepted rows become events (a
multicast group of send rows is one event) and message ends; rejected rows
become quarantine rows with a reason code and a detail in words:

- `malformed`: unparseable, missing required field, unknown kind, bad type;
- `duplicate_event`: same (trace, process, seq) as an earlier row, and not a
  further copy of a multicast send to a new destination; also, once sends and
  receives are matched, a second copy of one multicast event to the same
  destination (its send row and its receive row);
- `duplicate_msg`: a second send, or a second receive, of one msg_id;
- `peer_mismatch`: send.peer is not the receiver or receive.peer is not the
  sender; the receive row is rejected and its message stays `in_flight`.

"Earlier" and "first" are file order: files in the order they were found, then
line. The rules apply in that order, each to the rows the earlier ones kept.

How it runs (two shuffles of narrow rows, each materialised once):

1. *Type* (map only): parse every field, apply the row-local rules. Only a row
   rejected here keeps its text (`raw`); the others travel without it.
2. *By process* (one shuffle by (trace, process), one sort): the event rules
   and a tentative rank of each event in its process's local order.
   Malformed rows ride along in groups of their own, spread by line.
3. *By message* (one shuffle by (trace, msg_id) of the send and receive rows):
   `duplicate_msg`, `peer_mismatch`, and the message rows.
4. Small fix-ups from small aggregates: which files have `seq` (a row without
   one there is `malformed`), the second copies of a multicast to one
   destination, and the events that rules 3-4 emptied. An event's `lseq` is its
   tentative rank less the removed events before it in its process (a
   broadcast step function; nothing to do on clean input).
5. `events` and `messages` are aggregated where the rows already are (no
   further shuffle); a rejected row's text is read again from its file only if
   a rule after step 1 rejected it.

A process's rows are ordered in one task (step 2); no step puts a whole trace
or a whole file into one task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark.ingest.keys import (
    DUP,
    KIND_ALIASES,
    MISSING_SEQ,
    PPROC,
    RANK,
    REF_FILE,
    REF_LINE,
    ROW,
    SEQ_GIVEN,
    IngestError,
)
from causal_spark.ingest.outputs import (
    events_of,
    filtered_reread,
    messages_of,
    process_index,
    quarantine_of,
)
from causal_spark.ingest.rules import (
    event_rules,
    message_rows,
    message_rules,
    removed_events,
    repeated_destinations,
    second_copies,
    with_event_keys,
)
from causal_spark.ingest.typed import (
    TRACE_OF,
    accepted,
    file_table,
    trace_ids,
    type_rows,
)
from causal_spark.io.readers import records_clocks
from causal_spark.io.sources import FILE_ID, Inputs

__all__ = [
    "KIND_ALIASES",
    "TRACE_OF",
    "IngestError",
    "Ingested",
    "file_table",
    "ingest",
    "trace_ids",
    "type_rows",
]


@dataclass(frozen=True)
class Ingested:
    """The three outputs of ingest, conformed to their table schemas, and what they counted.

    `events_seen` and `messages_seen` fill in when the frames are written (or collected).
    """

    events: DataFrame
    messages: DataFrame
    quarantine: DataFrame
    rows_read: int
    # file_id -> the traces it holds rows of (every row read, quarantined or not)
    file_traces: Mapping[int, frozenset[str]]
    events_seen: Observation
    messages_seen: Observation
    cached: tuple[DataFrame, ...] = ()

    def release(self) -> None:
        """Drop the cached intermediate rows (call once the tables are written)."""
        for frame in self.cached:
            frame.unpersist()

    def event_counts(self) -> dict[str, int]:
        """internal / send / receive events, and send / receive rows, in_flight and orphan."""
        seen = {**self.events_seen.get, **self.messages_seen.get}
        return {k: int(v or 0) for k, v in seen.items()}


def ingest(
    raw: DataFrame,
    inputs: Inputs,
    reread: Callable[[Sequence[int]], DataFrame] | None = None,
) -> Ingested:
    """Raw rows -> `events`, `messages` and `quarantine` (docs/ingest.md).

    `raw` holds the raw rows of `inputs`' files; `reread(file_ids)` reads the raw rows of
    some files again (to fetch the text of rows a later rule rejects; default: `raw`
    filtered). Runs the shuffles eagerly (two checkpoints); the outputs are lazy.
    """
    spark = raw.sparkSession
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or "200")
    files = file_table(spark, inputs)
    typed = type_rows(raw, files)

    # step 2: by process
    # cached, not checkpointed: a cached frame keeps its partitioning and order, so the
    # events and messages are later grouped where the rows are, without a shuffle
    by_process = event_rules(with_event_keys(typed, partitions)).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    # one small aggregate gives the rows read, the files that give `seq`, and the traces
    # each file holds rows of (which `runs` records, for later incremental audits)
    per_file_trace = (
        by_process.groupBy(FILE_ID, C.TRACE_ID)
        .agg(F.count(F.lit(1)).alias("rows"), F.max(SEQ_GIVEN).alias("has_seq"))
        .collect()
    )
    rows_read = sum(int(r["rows"]) for r in per_file_trace)
    seq_files = sorted({int(r[FILE_ID]) for r in per_file_trace if r["has_seq"]})
    file_traces: dict[int, set[str]] = {}
    for r in per_file_trace:
        file_traces.setdefault(int(r[FILE_ID]), set()).add(r[C.TRACE_ID])
    missing_seq = F.col(C.SEQ).isNull() & F.col(FILE_ID).isin(seq_files)
    good = by_process.where(accepted() & ~F.col(DUP))

    repeated = repeated_destinations(by_process).localCheckpoint()
    no_seq_rejects = good.where(missing_seq).select(
        *ROW,
        C.TRACE_ID,
        PPROC,
        RANK,
        F.lit(C.MALFORMED).alias(C.REASON),
        F.lit(MISSING_SEQ).alias(C.DETAIL),
        F.lit(None).cast("int").alias(REF_FILE),
        F.lit(None).cast("long").alias(REF_LINE),
    )
    early = repeated.unionByName(no_seq_rejects)

    # step 3: by message
    ends = good.where(F.col(C.KIND).isin(C.SEND, C.RECEIVE) & ~missing_seq).join(
        F.broadcast(repeated.select(*ROW)), list(ROW), "left_anti"
    )
    judged = message_rules(ends, partitions).persist(StorageLevel.MEMORY_AND_DISK)
    messages = message_rows(judged)
    seconds = second_copies(messages).localCheckpoint()
    late = judged.where(F.col(C.REASON).isNotNull()).select(*early.columns)
    # the rows the rules after step 1 rejected: few, and read by steps 4 and 5, so
    # materialised once; on clean input there are none and step 4 has nothing to do
    rejected = (
        early.unionByName(late).unionByName(seconds.select(*early.columns)).localCheckpoint()
    )

    # step 4: events emptied by the later rules
    if rejected.isEmpty():
        removed = removed_events(spark, [])
        kept_rows = good
    else:
        touched = rejected.select(C.TRACE_ID, PPROC, RANK).distinct()
        survivors = (
            good.join(F.broadcast(touched), [C.TRACE_ID, PPROC, RANK], "left_semi")
            .join(F.broadcast(rejected.select(*ROW)), list(ROW), "left_anti")
            .select(C.TRACE_ID, PPROC, RANK)
            .distinct()
        )
        emptied = [
            (r[C.TRACE_ID], r[PPROC], int(r[RANK]))
            for r in touched.join(survivors, [C.TRACE_ID, PPROC, RANK], "left_anti").collect()
        ]
        removed = removed_events(spark, emptied)
        kept_rows = good.join(F.broadcast(rejected.select(*ROW)), list(ROW), "left_anti")

    # step 5: the tables
    pidx = process_index(kept_rows)
    events = events_of(kept_rows, removed, pidx, files, records_clocks(inputs))
    final_messages = messages_of(messages, seconds, removed, pidx)
    quarantine = quarantine_of(
        by_process, rejected, files, seq_files, reread or filtered_reread(raw)
    )
    events_seen = Observation("events")
    messages_seen = Observation("messages")
    return Ingested(
        events=events.observe(
            events_seen,
            *[
                F.count(F.when(F.col(C.KIND) == kind, 1)).alias(f"{kind}_events")
                for kind in (C.INTERNAL, C.SEND, C.RECEIVE)
            ],
        ),
        messages=final_messages.observe(
            messages_seen,
            F.count(C.SEND_LSEQ).alias("send_rows"),
            F.count(C.RECV_LSEQ).alias("receive_rows"),
            F.count(F.when(F.col(C.STATUS) == C.IN_FLIGHT, 1)).alias(C.IN_FLIGHT),
            F.count(F.when(F.col(C.STATUS) == C.ORPHAN, 1)).alias(C.ORPHAN),
        ),
        quarantine=quarantine,
        rows_read=rows_read,
        file_traces={f: frozenset(t) for f, t in file_traces.items()},
        events_seen=events_seen,
        messages_seen=messages_seen,
        cached=(by_process, judged),
    )
