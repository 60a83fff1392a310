"""Ingest: raw rows -> `events`, `messages`, `quarantine` (docs/ingest.md).

Every raw row ends in exactly one place: accepted rows become events (a
multicast group of send rows is one event) and message ends; rejected rows
become quarantine rows with a reason code and a detail in words:

- `malformed`: unparseable, missing required field, unknown kind, bad type; a row
  without `seq` in a file where other rows have one;
- `duplicate_event`: same (trace, process, seq) as an earlier row, and not a
  further copy of a multicast send to a new destination; also, once sends and
  receives are matched, a second copy of one multicast event to the same
  destination (its send row and its receive row);
- `duplicate_msg`: a second send, or a second receive, of one msg_id;
- `peer_mismatch`: send.peer is not the receiver or receive.peer is not the
  sender; the receive row is rejected and its message stays `in_flight`.

"Earlier" and "first" are file order: files in the order they were found, then
line. The rules apply in that order, each to the rows the earlier ones kept.

How it runs, with no shuffle: step 1 types each row where it is read (`typed.type_rows`)
and writes the rows in buckets by (trace, process), once (`passes.split_typed`; where a
reader's Python tasks make the rows, by the `plan` the reader gave with them,
`io.raw.RawRead`, those tasks type the plain rows on Arrow themselves and only the
others cross into the JVM: `plain`, `passes.split_made`); a *pass* is two Spark jobs
over those files (`passes.run_pass`): step 2, a task a bucket, writes the send and
receive rows in buckets by (trace, msg_id); step 3 takes a bucket a task. Rows go from
one step to the next as Arrow files, each task running a sorted NumPy kernel (`kernel`)
and writing its `events` and `messages` files itself (`tasks`). Rules that a later step
applies change what an earlier one numbered: a row that step 3 rejects (or a row without
`seq` in a file where others have one, known only once every row was seen) takes no
place in its process. So when a pass finds such rows, another pass runs with them known
(at most three passes; on clean input, one): over step 1's files again, with markers of
the rejected rows added to their buckets. No step puts a whole trace or a whole file
into one task (a whole process, yes: its local order).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.config import IngestSettings
from causal_spark.ingest import kernel as K
from causal_spark.ingest import rows_kernel as R
from causal_spark.ingest.keys import KIND_ALIASES, IngestError
from causal_spark.ingest.outputs import filtered_reread, quarantine_of
from causal_spark.ingest.passes import (
    PassResult,
    bucket_count,
    estimated_rows,
    run_pass,
    split_made,
    split_typed,
    task_count,
    with_markers,
)
from causal_spark.ingest.tasks import PassFiles, read_scratch, spark_ddl, write_scratch
from causal_spark.ingest.typed import TRACE_OF, file_table, trace_ids, type_rows
from causal_spark.io.raw import RawRead, TaskRows
from causal_spark.io.sources import Inputs
from causal_spark.sinks import FileWriter

__all__ = [
    "KIND_ALIASES",
    "TRACE_OF",
    "IngestError",
    "IngestTargets",
    "Ingested",
    "file_table",
    "ingest",
    "trace_ids",
    "type_rows",
]

MAX_PASSES = 3
# an input of at least this many rows (as planned for) is typed without a `type_rows`
# plan when all its rows are plain (`passes.split_made`'s `hopeful`: a second job where
# some are not); a smaller one in one job whatever its rows (its fixed cost is the jobs).
# Half a million: the 10^6-row Parquet input plans 933 000 rows (20 bytes a row), and
# paid the cold `type_rows` plan on the driver, serial, for rows that were all plain
HOPEFUL_ROWS = 500_000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestTargets:
    """Where ingest writes: `events` and `messages` files through their writers, and its
    intermediate files under `scratch` (the caller removes it once `quarantine` is
    written)."""

    events: FileWriter
    messages: FileWriter
    scratch: str


@dataclass(frozen=True)
class Ingested:
    """The three outputs of ingest, and what it counted.

    `events` and `messages` read the files ingest wrote (`written` names them, with their
    rows); `quarantine` is lazy and reads the scratch folder: write it before that goes.
    """

    events: DataFrame
    messages: DataFrame
    # makes `quarantine` (an empty one only if asked for: the stage writes none from it)
    made_quarantine: Callable[[], DataFrame] = field(repr=False)
    rows_read: int
    # file_id -> the traces it holds rows of (every row read, quarantined or not)
    file_traces: Mapping[int, frozenset[str]]
    written: Mapping[str, Mapping[str, int]]
    counts: Mapping[str, int] = field(default_factory=dict)
    passes: int = 1
    # no row was rejected: `quarantine` is empty, and can be staged with no Spark job
    nothing_rejected: bool = False

    @cached_property
    def quarantine(self) -> DataFrame:
        return self.made_quarantine()

    def event_counts(self) -> dict[str, int]:
        """internal / send / receive events, and send / receive rows, in_flight and orphan."""
        return dict(self.counts)


def ingest(
    raw: DataFrame | RawRead,
    inputs: Inputs,
    targets: IngestTargets,
    reread: Callable[[Sequence[int]], DataFrame] | None = None,
    settings: IngestSettings | None = None,
    plan: TaskRows | None = None,
    hopeful_rows: int = HOPEFUL_ROWS,
) -> Ingested:
    """Raw rows -> `events`, `messages` and `quarantine` (docs/ingest.md).

    `raw` holds the raw rows of `inputs`' files, or is a reader's `io.raw.RawRead` (its
    rows, made only if needed, and its plan); `reread(file_ids)` reads the raw rows of
    some files again, to fetch the text of rows a rule after step 1 rejects (default:
    `raw` filtered); `plan`: how the readers' Python tasks make `raw`'s rows
    (`io.raw.RawRead.plan`), typed there (else in Spark, `type_rows`); `hopeful_rows`:
    from how many rows (`passes.estimated_rows`) step 1 plans no `type_rows` for them
    until some rows need it (`passes.split_made`'s `hopeful`). Runs the passes now.
    """
    if isinstance(raw, RawRead):
        read = raw
        plan = read.plan if plan is None else plan
        spark = SparkSession.active()
    else:
        read = RawRead(raw)
        spark = raw.sparkSession
    settings = settings or IngestSettings()
    # each file's name as the user gave it, at its file id (an incremental run reads a
    # selection of the files, which keep their ids: the other positions are empty)
    shown = [""] * (max(f.file_id for f in inputs.files) + 1)
    for f in inputs.files:
        shown[f.file_id] = f.shown
    partitions = task_count(inputs, settings.rows_per_task, 1)
    mixed: frozenset[int] = frozenset()
    later: list[str] = []
    typed_work: list[tuple[str, ...]] = []
    for number in range(1, MAX_PASSES + 1):
        scratch = os.path.join(targets.scratch, f"pass-{number}")
        files = PassFiles(targets.events, targets.messages, scratch)
        began = time.perf_counter()
        if number == 1:
            # read and typed once: a later pass takes these files, and its markers
            if plan is not None and plan.sources:
                # rows a reader's Python tasks make are typed there (`plain`)
                hopeful = estimated_rows(inputs) >= hopeful_rows
                typed_work = split_made(spark, plan, inputs, files, partitions, hopeful)
            else:
                typed = type_rows(read.rows, inputs)
                typed_work = split_typed(typed, files, bucket_count(typed, partitions))
        later_rows = read_scratch(later, R.REJECTS) if later else None
        work = with_markers(typed_work, later_rows, files)
        typed_at = time.perf_counter()
        result = run_pass(spark, work, mixed, files, shown)
        log.info("ingest pass %d: step 1 %.1f s, steps 2 and 3 %.1f s", number,
                 typed_at - began, time.perf_counter() - typed_at)  # fmt: skip
        facts = read_scratch(result.facts, R.FACTS)
        found_mixed = _mixed_files(facts)
        if not found_mixed <= mixed:
            # step 3 ran on rows that are malformed: again, with those rows known
            mixed, later = mixed | found_mixed, []
            continue
        late = _late_rejects(result, scratch)
        if late:
            if later:
                raise IngestError(
                    f"internal: pass {number} still rejected rows after matching "
                    f"({late[:3]}); the rules did not settle"
                )
            later = late
            continue
        break
    else:  # pragma: no cover - the rules settle in three passes (see the docstring)
        raise IngestError(f"internal: ingest did not settle in {MAX_PASSES} passes")

    rejects = [*result.rejects, *later]
    seq_files = sorted(set(facts.filter(facts["has_seq"])[R.FILE_ID].to_pylist()))
    made: Callable[[], DataFrame]
    if rejects:
        quarantine = quarantine_of(
            spark.read.schema(spark_ddl(R.REJECTS)).parquet(*rejects),
            file_table(spark, inputs),
            seq_files,
            reread or filtered_reread(read.rows),
            _textless_files(rejects),
        )
        made = lambda: quarantine  # noqa: E731
    else:
        # no plan of joins to stage (each broadcast is a Spark job), and no empty frame
        # unless asked for: the stage writes an empty quarantine from the driver
        made = partial(_empty_quarantine, spark)
    return Ingested(
        events=_read(spark, tables.EVENTS, result.events),
        messages=_read(spark, tables.MESSAGES, result.messages),
        made_quarantine=made,
        rows_read=int(pc.sum(facts["rows"]).as_py() or 0),
        file_traces=_file_traces(facts),
        written={tables.EVENTS: dict(result.events), tables.MESSAGES: dict(result.messages)},
        counts=dict(result.counts),
        passes=number,
        nothing_rejected=not rejects,
    )


def _empty_quarantine(spark: SparkSession) -> DataFrame:
    empty = spark.createDataFrame([], tables.table_schema(tables.QUARANTINE))
    return tables.conform(empty, tables.QUARANTINE)


def _mixed_files(facts: pa.Table) -> frozenset[int]:
    """Files where some rows give `seq` and an accepted row does not."""
    if facts.num_rows == 0:
        return frozenset()
    by_file = facts.group_by(R.FILE_ID).aggregate([("has_seq", "any"), ("has_noseq", "any")])
    both = pc.and_(by_file["has_seq_any"], by_file["has_noseq_any"])
    return frozenset(int(f) for f in by_file[R.FILE_ID].filter(both).to_pylist())


def _late_rejects(result: PassResult, scratch: str) -> list[str]:
    """The files of the rows step 3 rejected and of second copies of multicasts, found
    after matching (`kernel.second_copies`)."""
    late = list(result.late)
    seconds = K.second_copies(read_scratch(result.risky, R.RISKY_MESSAGES))
    if seconds.num_rows:
        late.append(write_scratch(os.path.join(scratch, "seconds"), seconds))
    return late


def _textless_files(rejects: Sequence[str]) -> list[int]:
    """The files of the rejected rows that travelled without their text (read here, on
    the driver: rejected rows are few, and a Spark job costs more than reading them)."""
    if not rejects:
        return []
    rows = pa.concat_tables(
        [pq.read_table(p, columns=[R.FILE_ID, C.RAW], schema=R.REJECTS) for p in rejects]
    )
    textless = rows[R.FILE_ID].filter(pc.is_null(rows[C.RAW]))
    return sorted({int(f) for f in pc.unique(textless).to_pylist()})


def _file_traces(facts: pa.Table) -> dict[int, frozenset[str]]:
    found: dict[int, set[str]] = {}
    for f, trace in zip(facts[R.FILE_ID].to_pylist(), facts[C.TRACE_ID].to_pylist(), strict=True):
        found.setdefault(int(f), set()).add(trace)
    return {f: frozenset(t) for f, t in found.items()}


def _read(spark: object, table: str, written: Mapping[str, int]) -> DataFrame:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    schema = tables.table_schema(table)
    paths = [p for p, rows in sorted(written.items()) if rows]
    if not paths:
        return spark.createDataFrame([], schema)
    from causal_spark.io import delta

    return spark.read.schema(schema).parquet(*[delta.spark_path(p) for p in paths])


def remove_scratch(targets: IngestTargets) -> None:
    shutil.rmtree(targets.scratch, ignore_errors=True)
