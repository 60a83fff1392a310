"""The task side of one ingest pass: the two kernels as Spark map functions, and their files.

A pass is one Spark job with two shuffles (`ingest.passes`):

- `by_process` (step 2) runs `kernel.judge_events` over a task's rows, writes its
  events (without pidx), its rejected rows, per-file facts and its processes to the
  pass's scratch folder, and hands on the send and receive rows, plus one *carrier*
  row per file it wrote;
- `by_message` (step 3) runs `kernel.judge_messages` over a task's message rows and
  writes the `messages` files; for each events carrier it receives it numbers the
  processes (pidx, from every task's processes: the stage boundary before it means
  they are all written) and writes the `events` files. Its rejected rows and risky
  messages go to the scratch folder. It returns one row per file written, and counts.

Only files named by a carrier (a task attempt that succeeded: Spark drops the shuffle
output of the others) or returned by step 3 are read; a failed attempt's files are
never read, and the scratch folder goes when the ingest ends.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from causal_spark import columns as C
from causal_spark.ingest import kernel as K
from causal_spark.ingest import rows_kernel as R
from causal_spark.sinks import FileWriter

ROLE = "role"
PATH = "path"
END, EVENTS_FILE, REJECTS_FILE, FACTS_FILE = range(4)

# what step 2 hands to step 3: message ends, and carriers of the files it wrote
HANDED = pa.schema([*R.ENDS, (ROLE, pa.int8()), (PATH, pa.string())])

# what step 3 returns: a file (table, path, rows) or, with an empty table, counts
COUNTS = (
    "internal_events",
    "send_events",
    "receive_events",
    "send_rows",
    "receive_rows",
    C.IN_FLIGHT,
    C.ORPHAN,
)
RESULT = pa.schema(
    [("table", pa.string()), (PATH, pa.string()), ("rows", pa.int64())]
    + [(name, pa.int64()) for name in COUNTS]
)
REJECTS, LATE, FACTS, RISKY = "_rejects", "_late", "_facts", "_risky"

# events files of at most this many rows, so that step 3 shares their writing out
EVENTS_PER_FILE = 1_000_000


def spark_ddl(schema: pa.Schema) -> str:
    names = {
        pa.int8(): "byte",
        pa.int32(): "int",
        pa.int64(): "long",
        pa.float64(): "double",
        pa.string(): "string",
        pa.bool_(): "boolean",
        R.RECORDED_MAP: "map<string, long>",
    }
    return ", ".join(f"`{f.name}` {names[f.type]}" for f in schema)


@dataclass(frozen=True)
class PassFiles:
    """Where one pass writes: the tables' writers and its scratch folder. Picklable."""

    events: FileWriter
    messages: FileWriter
    scratch: str

    def folder(self, kind: str) -> str:
        return os.path.join(self.scratch, kind)


def _task_tag() -> str:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return f"driver-{uuid.uuid4().hex}"
    return f"{context.partitionId():05d}-{context.taskAttemptId()}-{uuid.uuid4().hex}"


def write_scratch(folder: str, rows: pa.Table, arrow: bool = False) -> str:
    """One Parquet file under `folder` (an Arrow IPC file, lz4, with `arrow`: for files
    only tasks read back, 2-3x cheaper to write and read), complete or absent (written
    aside, then renamed)."""
    os.makedirs(folder, exist_ok=True)
    name = f"part-{_task_tag()}.{'arrow' if arrow else 'parquet'}"
    aside = os.path.join(folder, f".{name}.tmp")
    if arrow:
        options = pa.ipc.IpcWriteOptions(compression="lz4")
        with (
            pa.OSFile(aside, "wb") as sink,
            pa.ipc.new_file(sink, rows.schema, options=options) as out,
        ):
            out.write_table(rows)
    else:
        pq.write_table(rows, aside, compression="lz4")
    path = os.path.join(folder, name)
    os.replace(aside, path)
    return path


def read_arrow_scratch(path: str, schema: pa.Schema) -> pa.Table:
    """A file `write_scratch(..., arrow=True)` wrote."""
    with pa.OSFile(path, "rb") as source:
        return pa.ipc.open_file(source).read_all().cast(schema)


def read_scratch(paths: Sequence[str], schema: pa.Schema) -> pa.Table:
    if not paths:
        return schema.empty_table()
    return pa.concat_tables([pq.read_table(p, schema=schema) for p in paths])


def _gather(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    read = [b for b in batches if b.num_rows]
    if not read:
        return schema.empty_table()
    return pa.Table.from_batches(read).cast(schema)


def _carrier(role: int, path: str) -> pa.RecordBatch:
    empty = {f.name: pa.nulls(1, f.type) for f in R.ENDS}
    # a carrier is routed by its path (as a msg_id), so carriers spread over the tasks
    empty[C.TRACE_ID] = pa.array([""], pa.string())
    empty[C.MSG_ID] = pa.array([path], pa.string())
    empty[ROLE] = pa.array([role], pa.int8())
    empty[PATH] = pa.array([path], pa.string())
    return pa.RecordBatch.from_pydict(empty, schema=HANDED)


def by_process(
    files: PassFiles, mixed_files: Collection[int]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Step 2 as a `mapInArrow` function over (trace, process)-partitioned typed rows."""
    mixed = frozenset(mixed_files)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        judged = K.judge_events(_gather(batches, R.TYPED), mixed)
        if judged.procs.num_rows:
            write_scratch(files.folder("procs"), judged.procs)
        for start in range(0, judged.events.num_rows, EVENTS_PER_FILE):
            chunk = judged.events.slice(start, EVENTS_PER_FILE)
            yield _carrier(EVENTS_FILE, write_scratch(files.folder("events"), chunk, arrow=True))
        if judged.rejects.num_rows:
            yield _carrier(REJECTS_FILE, write_scratch(files.folder("rejects"), judged.rejects))
        if judged.facts.num_rows:
            yield _carrier(FACTS_FILE, write_scratch(files.folder("facts"), judged.facts))
        ends = judged.ends
        role = pa.array(np.zeros(ends.num_rows, dtype=np.int8))
        handed = ends.append_column(ROLE, role).append_column(
            PATH, pa.nulls(ends.num_rows, pa.string())
        )
        yield from handed.cast(HANDED).to_batches(max_chunksize=100_000)

    return run


def _result(table: str, path: str, rows: int, **counts: int) -> pa.RecordBatch:
    values: dict[str, list[object]] = {"table": [table], PATH: [path], "rows": [rows]}
    for name in COUNTS:
        values[name] = [counts.get(name, 0)]
    return pa.RecordBatch.from_pydict(values, schema=RESULT)


def _written(rows: pa.Table) -> Iterator[tuple[str, int]]:
    for row in rows.to_pylist():
        yield str(row["path"]), int(row["rows"])


def by_message(
    files: PassFiles, shown: Sequence[str]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Step 3 as a `mapInArrow` function over (trace, msg_id)-partitioned rows; `shown`:
    each file's name as the user gave it, by file id."""
    names = pa.array(list(shown), pa.string())

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        handed = _gather(batches, HANDED)
        role = handed[ROLE].to_numpy()
        ends = handed.filter(pa.array(role == END)).select(R.ENDS.names)
        judged = K.judge_messages(ends)
        procs = _processes(files.folder("procs"))
        messages = K.with_pidx(judged.messages, procs, [(C.SRC, C.SRC_PIDX), (C.DST, C.DST_PIDX)])
        for path, rows in _written(files.messages.write(messages)):
            yield _result("messages", path, rows)
        status = messages[C.STATUS]
        yield _result(
            "",
            "",
            0,
            send_rows=pc.count(messages[C.SEND_LSEQ]).as_py(),
            receive_rows=pc.count(messages[C.RECV_LSEQ]).as_py(),
            in_flight=pc.sum(pc.equal(status, C.IN_FLIGHT)).as_py() or 0,
            orphan=pc.sum(pc.equal(status, C.ORPHAN)).as_py() or 0,
        )
        if judged.rejects.num_rows:
            yield _result(LATE, write_scratch(files.folder("late"), judged.rejects), 0)
        if judged.risky.num_rows:
            yield _result(RISKY, write_scratch(files.folder("risky"), judged.risky), 0)
        carried = handed.filter(pa.array(role != END))
        for kind, path in zip(carried[ROLE].to_pylist(), carried[PATH].to_pylist(), strict=True):
            if kind == REJECTS_FILE:
                yield _result(REJECTS, path, 0)
            elif kind == FACTS_FILE:
                yield _result(FACTS, path, 0)
            else:
                events = read_arrow_scratch(path, R.EVENTS)
                yield from _write_events(files.events, events, procs, names)

    return run


def _processes(folder: str) -> pa.Table:
    if not os.path.isdir(folder):
        return R.PROCS.empty_table()
    done = sorted(
        os.path.join(folder, n)
        for n in os.listdir(folder)
        if n.endswith(".parquet") and not n.startswith(".")
    )
    return read_scratch(done, R.PROCS)


def _write_events(
    writer: FileWriter, events: pa.Table, procs: pa.Table, names: pa.Array
) -> Iterator[pa.RecordBatch]:
    numbered = K.with_pidx(events, procs, [(C.PROCESS, C.PIDX)])
    n = numbered.num_rows
    at = numbered.schema.get_field_index(R.RECORDED_VC)
    numbered = numbered.set_column(at, R.RECORDED_VC, K.recorded_in_pidx_order(numbered, procs))
    complete = numbered.append_column(
        C.SOURCE, names.take(numbered[R.FILE_ID].combine_chunks())
    ).append_column(C.LAMPORT, pa.nulls(n, pa.int64()))
    complete = complete.append_column(C.VC, pa.nulls(n, pa.list_(pa.int32())))
    kinds = complete[C.KIND]
    counts = {
        f"{kind}_events": int(pc.sum(pc.equal(kinds, kind)).as_py() or 0)
        for kind in (C.INTERNAL, C.SEND, C.RECEIVE)
    }
    for path, rows in _written(writer.write(complete)):
        yield _result("events", path, rows, **counts)
