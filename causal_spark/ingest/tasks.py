"""The task side of one ingest pass: the two kernels as Spark map functions, and their files.

A pass is three Spark jobs (`ingest.passes`), each over the files of the one before:

- `split_rows` (step 1's end, where the rows are read and typed) writes the typed rows
  in buckets by (trace, pproc) (`rows_kernel.buckets_of`: the same key, the same
  bucket, in every task) and returns one *carrier* row per file it wrote;
- `by_process` (step 2) runs one task per bucket: `kernel.judge_events` over the
  bucket's rows, writing its events (without pidx), its rejected rows, per-file facts
  and its processes to the pass's scratch folder, and its send and receive rows there
  too, in buckets by (trace, msg_id). It returns a carrier row per file it wrote;
- `by_message` (step 3) runs one task per bucket: `kernel.judge_messages` over the
  bucket's message rows (every task's files of that bucket), writing the `messages`
  files; then, for the events files the driver handed it, it numbers the processes
  (pidx, from every task's processes: step 2's job is over, so they are all written)
  and writes the `events` files. Its rejected rows and risky messages go to the scratch
  folder. It returns one row per file written, and counts.

After the scan no row crosses into the JVM: no Arrow-to-row conversion, no shuffle.
Only files named by a carrier (a task attempt that succeeded: Spark returns the rows of
those only) or returned by step 3 are read; a failed attempt's files are never read,
and the scratch folder goes when the ingest ends.
"""

from __future__ import annotations

import gc
import os
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from causal_spark import columns as C
from causal_spark.ingest import kernel as K
from causal_spark.ingest import plain as P
from causal_spark.ingest import rows_kernel as R
from causal_spark.io.raw import TaskSource, typed_rows
from causal_spark.sinks import FileWriter

ROLE = "role"
PATH = "path"
BUCKET = "bucket"
ENDS_FILE, EVENTS_FILE, REJECTS_FILE, FACTS_FILE, TYPED_FILE, UNPLAIN_FILE = range(6)
# step 1's rows go to step 2 by these keys (the process, or a spread key for rejected rows)
SPLIT_KEYS = (C.TRACE_ID, R.PPROC)
# typed rows one step-1 task buckets at a time (each bucket of each is one file)
ROWS_PER_SPLIT = 2_000_000

# what step 2 returns: a carrier of each file it wrote (with its bucket, for ends files)
CARRIED = pa.schema([(ROLE, pa.int8()), (PATH, pa.string()), (BUCKET, pa.int32())])

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
LATE, RISKY = "_late", "_risky"

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


_settled = False


def settle_worker() -> None:
    """In a Python worker, once: the heap its imports built collected and frozen
    (`gc.freeze`). A reused worker's daemon runs `gc.collect()` after every task, which
    otherwise walks every object of pyarrow's, NumPy's and pandas' modules each time
    (about 40 ms a task); frozen, it walks only what the tasks left."""
    global _settled
    from pyspark import TaskContext

    if _settled or TaskContext.get() is None:
        return
    gc.collect()
    gc.freeze()
    _settled = True


# NumPy's switch for `madvise(MADV_HUGEPAGE)` on its arrays of 4 MB and more (private API:
# absent, the arrays keep NumPy's default)
_HUGE_PAGES: Callable[[bool], bool] | None = getattr(
    getattr(getattr(np, "_core", None), "multiarray", None), "_set_madvise_hugepage", None
)


@contextmanager
def task_memory() -> Iterator[None]:
    """An ingest task's allocations (then the worker's own again): Arrow's buffers from the
    C allocator, NumPy's large arrays on ordinary pages. A task allocates and frees
    several times its input's bytes; Arrow's default pool (mimalloc) hands freed pages
    back to the kernel within milliseconds and NumPy asks for transparent huge pages, so
    the next array of that size faults in (and the kernel zeroes, or compacts for) pages
    again (the kernel's time, page faults and file writes, was 27-37% of the Python
    workers' CPU in a 10^7-row ingest). glibc keeps freed blocks for reuse (the replay's
    `memory.give_back` trims them)."""
    pool = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    huge = _HUGE_PAGES(False) if _HUGE_PAGES is not None else None
    try:
        yield
    finally:
        pa.set_memory_pool(pool)
        if _HUGE_PAGES is not None and huge is not None:
            _HUGE_PAGES(huge)


TaskFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def _task(run: TaskFunction) -> TaskFunction:
    """`run` as an ingest task's `mapInArrow` function: the worker settled
    (`settle_worker`), the task's allocations in `task_memory`."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        settle_worker()
        with task_memory():
            yield from run(batches)

    return task


def _task_tag() -> str:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return f"driver-{uuid.uuid4().hex}"
    return f"{context.partitionId():05d}-{context.taskAttemptId()}-{uuid.uuid4().hex}"


def write_scratch(folder: str, rows: pa.Table, arrow: bool = False) -> str:
    """One Parquet file under `folder` (an Arrow IPC file, uncompressed, with `arrow`: for
    files only tasks read back, written and read back with no encoding; lz4 cost the
    ingest's tasks CPU to pack bytes that stay in the page cache), complete or absent
    (written aside, then renamed)."""
    os.makedirs(folder, exist_ok=True)
    name = f"part-{_task_tag()}.{'arrow' if arrow else 'parquet'}"
    aside = os.path.join(folder, f".{name}.tmp")
    if arrow:
        options = pa.ipc.IpcWriteOptions(compression=None)
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
    with pa.memory_map(path, "r") as source:
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


def _carrier(role: int, path: str, bucket: int = -1) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {ROLE: [role], PATH: [path], BUCKET: [bucket]}, schema=CARRIED
    )


def write_buckets(
    folder: str, rows: pa.Table, keys: Sequence[str], buckets: int
) -> Iterator[tuple[int, str]]:
    """`rows` split into `buckets` buckets by their `keys` (`rows_kernel.buckets_of`), each
    non-empty one an Arrow file under `folder`/bucket: (bucket, path) of each."""
    if rows.num_rows == 0:
        return
    bucket = R.buckets_of([rows[k] for k in keys], buckets)
    # NumPy's stable sort of 16-bit integers is a radix sort: 14x faster than of int64
    narrow = np.int16 if buckets <= np.iinfo(np.int16).max else np.int64
    order = np.argsort(bucket.astype(narrow), kind="stable")
    grouped = R.take_rows(rows, order)
    bounds = np.searchsorted(bucket[order], np.arange(buckets + 1))
    for b in range(buckets):
        if bounds[b + 1] > bounds[b]:
            part = grouped.slice(int(bounds[b]), int(bounds[b + 1] - bounds[b]))
            yield b, write_scratch(os.path.join(folder, f"{b:05d}"), part, arrow=True)


def _chunks(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.Table]:
    """The batches as tables of about ROWS_PER_SPLIT rows (the last one shorter)."""
    held: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if batch.num_rows:
            held.append(batch)
            count += batch.num_rows
        if count >= ROWS_PER_SPLIT:
            yield pa.Table.from_batches(held).cast(schema).combine_chunks()
            held, count = [], 0
    if held:
        # one chunk: a gather from many small chunks costs 3-4x one from one
        yield pa.Table.from_batches(held).cast(schema).combine_chunks()


def split_rows(
    files: PassFiles, buckets: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Step 1's typed rows (a `mapInArrow` function where they are read) written in
    `buckets` buckets of files by (trace, pproc): step 2 takes one bucket a task. It
    stands for a shuffle whose rows would cross into the JVM's row format and back."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk in _chunks(batches, R.TYPED):
            for b, path in write_buckets(files.folder("typed"), chunk, SPLIT_KEYS, buckets):
                yield _carrier(TYPED_FILE, path, b)

    return _task(run)


def _typed_chunks(held: list[pa.Table], folder: str, buckets: int) -> Iterator[pa.RecordBatch]:
    rows = pa.concat_tables(held).combine_chunks()
    for b, path in write_buckets(folder, rows, SPLIT_KEYS, buckets):
        yield _carrier(TYPED_FILE, path, b)


def split_carried(
    files: PassFiles, buckets: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """`split_rows` over `typed.type_rows`' rows with (ROLE, PATH, BUCKET) kept: a row
    with a role is a carrier of a file written already (`made_and_split`), passed on."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        held: list[pa.Table] = []
        count = 0
        for batch in batches:
            if not batch.num_rows:
                continue
            carrier = batch.column(ROLE).is_valid()
            if carrier.true_count:
                yield pa.RecordBatch.from_arrays(
                    [batch.column(n).filter(carrier).cast(CARRIED.field(n).type)
                     for n in CARRIED.names],
                    schema=CARRIED,
                )  # fmt: skip
                batch = batch.filter(pc.invert(carrier))
            if batch.num_rows:
                held.append(pa.Table.from_batches([batch.select(R.TYPED.names)]).cast(R.TYPED))
                count += batch.num_rows
            if count >= ROWS_PER_SPLIT:
                yield from _typed_chunks(held, files.folder("typed"), buckets)
                held, count = [], 0
        if held:
            yield from _typed_chunks(held, files.folder("typed"), buckets)

    return _task(run)


def made_and_split(
    files: PassFiles,
    buckets: int,
    sources: Sequence[TaskSource],
    default_traces: Sequence[str | None],
    schema: pa.Schema,
    aside: tuple[str, int] | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Step 1 where a reader's Python tasks make the rows (`io.raw.TaskSource`), as a
    `mapInArrow` function over task numbers: the plain rows typed here (`plain`) and
    written in buckets as `split_rows` writes them, each file returned as a carrier
    row; every other row returned as it was made (`schema`: raw-row columns and
    ROLE, PATH, BUCKET), for `typed.type_rows` and `split_carried`.

    `aside` (a folder, a group number): the other rows are written there instead, as
    Parquet files of the sources' own columns, each returned as a carrier (UNPLAIN_FILE,
    its path, the group number); every row returned is then a carrier (`CARRIED`)."""
    at = [(s, i) for s in sources for i in range(s.tasks)]

    def carrier(file_id: int, row: pa.RecordBatch) -> pa.RecordBatch:
        if aside is not None:
            return row
        n = row.num_rows
        given = {R.FILE_ID: pa.array([file_id] * n, pa.int32()), C.LINE: pa.array([0] * n)}
        given.update({name: row.column(name) for name in CARRIED.names})
        return _conformed(given, n, schema)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        numbers = [int(i) for b in batches for i in b.column(0).to_pylist()]
        for number in numbers:
            source, index = at[number]
            file_id = source.file_of(index)
            held: list[pa.Table] = []
            unplain: list[pa.RecordBatch] = []
            count = 0
            # numbers typed by the reader where it can (fewer string round trips);
            # the rows left to `typed.type_rows` get the source's strings back
            batches, untyped = typed_rows(source, index)
            for batch in batches:
                plain = P.plain_rows(batch)
                if plain.all():
                    held.append(P.typed_rows(batch, default_traces))
                else:
                    mask = pa.array(plain)
                    if plain.any():
                        held.append(P.typed_rows(batch.filter(mask), default_traces))
                    rest = untyped(batch.filter(pc.invert(mask)))
                    if aside is not None:
                        unplain.append(rest)
                    else:
                        yield _conformed(
                            {n: rest.column(n) for n in rest.schema.names}, rest.num_rows, schema
                        )
                count += int(plain.sum())
                if count >= ROWS_PER_SPLIT:
                    for written in _typed_chunks(held, files.folder("typed"), buckets):
                        yield carrier(file_id, written)
                    held, count = [], 0
            if count:
                for written in _typed_chunks(held, files.folder("typed"), buckets):
                    yield carrier(file_id, written)
            if aside is not None and unplain:
                rest_rows = pa.Table.from_batches(unplain)
                yield _carrier(UNPLAIN_FILE, write_scratch(aside[0], rest_rows), aside[1])

    return _task(run)


def _conformed(given: dict[str, pa.Array], n: int, schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [given[f.name].cast(f.type) if f.name in given else pa.nulls(n, f.type) for f in schema],
        schema=schema,
    )


def by_process(
    files: PassFiles, mixed_files: Collection[int], work: Sequence[tuple[str, ...]], buckets: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Step 2 as a `mapInArrow` function over task numbers (`work`'s index: the typed
    files of one (trace, pproc) bucket); its message rows go to `buckets` buckets of
    files by (trace, msg_id)."""
    mixed = frozenset(mixed_files)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        numbers = [int(i) for b in batches for i in b.column(0).to_pylist()]
        for number in numbers:
            paths = work[number]
            typed = (
                pa.concat_tables([read_arrow_scratch(p, R.TYPED) for p in paths])
                if paths
                else R.TYPED.empty_table()
            )
            yield from _step2(files, mixed, typed, buckets)

    return _task(run)


def _step2(
    files: PassFiles, mixed: frozenset[int], typed: pa.Table, buckets: int
) -> Iterator[pa.RecordBatch]:
    judged = K.judge_events(typed, mixed)
    if judged.procs.num_rows:
        write_scratch(files.folder("procs"), judged.procs)
    for start in range(0, judged.events.num_rows, EVENTS_PER_FILE):
        chunk = judged.events.slice(start, EVENTS_PER_FILE)
        yield _carrier(EVENTS_FILE, write_scratch(files.folder("events"), chunk, arrow=True))
    if judged.rejects.num_rows:
        yield _carrier(REJECTS_FILE, write_scratch(files.folder("rejects"), judged.rejects))
    if judged.facts.num_rows:
        yield _carrier(FACTS_FILE, write_scratch(files.folder("facts"), judged.facts))
    ends = judged.ends.cast(R.ENDS)
    for b, path in write_buckets(files.folder("ends"), ends, (C.TRACE_ID, C.MSG_ID), buckets):
        yield _carrier(ENDS_FILE, path, b)


def _by_bucket(carried: pa.Table, role: int, buckets: int) -> list[tuple[str, ...]]:
    """The paths of `carried`'s files of `role`, by bucket (sorted within each)."""
    found: list[list[str]] = [[] for _ in range(buckets)]
    for r, p, b in zip(
        carried[ROLE].to_pylist(),
        carried[PATH].to_pylist(),
        carried[BUCKET].to_pylist(),
        strict=True,
    ):
        if r == role:
            found[b].append(p)
    return [tuple(sorted(paths)) for paths in found]


def typed_work(carried: pa.Table, buckets: int) -> list[tuple[str, ...]]:
    """Step 2's tasks from step 1's carriers: task b takes bucket b's typed files."""
    return _by_bucket(carried, TYPED_FILE, buckets)


@dataclass(frozen=True)
class Work:
    """What one step-3 task reads: the message rows of its bucket, and events files."""

    ends: tuple[str, ...]
    events: tuple[str, ...]


def plan(carried: pa.Table, buckets: int) -> list[Work]:
    """Step 3's tasks from step 2's carriers: task b takes bucket b's message files and
    every `buckets`-th events file (events files hold about as many rows each)."""
    ends = _by_bucket(carried, ENDS_FILE, buckets)
    events = sorted(
        p
        for r, p in zip(carried[ROLE].to_pylist(), carried[PATH].to_pylist(), strict=True)
        if r == EVENTS_FILE
    )
    return [Work(ends[b], tuple(events[b::buckets])) for b in range(buckets)]


def _result(table: str, path: str, rows: int, **counts: int) -> pa.RecordBatch:
    values: dict[str, list[object]] = {"table": [table], PATH: [path], "rows": [rows]}
    for name in COUNTS:
        values[name] = [counts.get(name, 0)]
    return pa.RecordBatch.from_pydict(values, schema=RESULT)


def _written(rows: pa.Table) -> Iterator[tuple[str, int]]:
    for row in rows.to_pylist():
        yield str(row["path"]), int(row["rows"])


def by_message(
    files: PassFiles, shown: Sequence[str], work: Sequence[Work]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Step 3 as a `mapInArrow` function over task numbers (one per task: `work`'s
    index); `shown`: each file's name as the user gave it, by file id."""
    names = pa.array(list(shown), pa.string())

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        numbers = [int(i) for b in batches for i in b.column(0).to_pylist()]
        for number in numbers:
            yield from _step3(files, names, work[number])

    return _task(run)


def _step3(files: PassFiles, names: pa.Array, work: Work) -> Iterator[pa.RecordBatch]:
    ends = (
        pa.concat_tables([read_arrow_scratch(p, R.ENDS) for p in work.ends])
        if work.ends
        else R.ENDS.empty_table()
    )
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
    for path in work.events:
        events = read_arrow_scratch(path, R.EVENTS)
        yield from _write_events(files.events, events, procs, names)


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
