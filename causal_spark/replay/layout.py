"""One trace laid out for the compiled replay loop: narrow columns, built as rows arrive.

The grouped UDF gets one (trace, protocol) group as Arrow batches of program
rows (`replay.program_rows`). `LayoutBuilder.add` keeps each batch as seven
narrow NumPy columns (30 bytes a row) and the ids of the messages the output
names; `finish` places every row by its coordinates, with no sort: event
(process, lseq) at `ev_start[process] + lseq - 1`, a send event's copies by
destination. A receive finds its message by the coordinates of its send (the
row's `peer` and `peer_lseq`), so no dictionary of message ids is built.

The `Layout` (docs/replay.md, "How it runs"):
- per event (by process, then lseq; `ev_start` is the CSR over processes): kind,
  recorded Lamport clock, recorded time (`ts`, or the Lamport clock when some row
  has no ts), `copy_start` (a send event's copies are messages
  `copy_start[e] .. copy_start[e + 1]`) and `take` (the message a receive
  recorded taking, -1 for none);
- per message (the copies of sends in event order, then orphans' messages): src
  (pidx, or EXTERNAL), dst (pidx, or -1 for a process without events), its send
  and receive events (-1 for none) and latency (NaN when it never arrives);
- per directed channel the median recorded latency (control messages), the
  trace's median, and the earliest recorded time.
An event's lseq is its index less `ev_start` of its process, plus 1; a gap is
the difference of recorded times clamped at 0; an orphan's message arrives at
the recorded time of its receive. Nothing else is stored per row.

`layout(...)` lays out the same rows given as arrays (the reference engine's
`build_trace` arguments), for the tests and benchmarks.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from causal_spark.replay.memory import give_back, small_pages
from causal_spark.replay.model import (
    INTERNAL,
    KIND_CODES,
    RECEIVE,
    SEND,
    TraceShapeError,
)
from causal_spark.replay.placing import (
    bucket_medians,
    max_at,
    medians,
    place_events,
    place_receives,
    place_sends,
    scan_events,
    sort_copies,
    take_batch,
    unmatched,
)
from causal_spark.replay.shape import first_error

Layout = namedtuple(
    "Layout",
    "n ev_start kind lamport etime copy_start take "
    "src dst send_ev recv_ev latency ch_keys ch_lat trace_lat start",
)

# the program rows' columns the layout reads (replay.program_rows)
PIDX, LSEQ, KIND, TS, LAMPORT, PEER, PEER_LSEQ, MSG_ID, PROCESS = (
    "pidx", "lseq", "kind", "ts", "lamport", "peer", "peer_lseq", "msg_id", "process",
)  # fmt: skip
_KINDS = pa.array(sorted(KIND_CODES, key=KIND_CODES.__getitem__))
_INT32 = np.iinfo(np.int32).max
_GIVE_BACK_EVERY = 64  # batches added between two `give_back`s (well under 1 ms each)


class MessageIds:
    """The msg_id of every message, kept as Arrow strings in the order the rows came (the
    rows that name a message: send copies and orphans' receives) with each one's message
    index: the output is written from them in bounded slices, never as one list."""

    def __init__(self, chunks: list[pa.Array], message: np.ndarray) -> None:
        self.chunks = chunks
        self.message = message  # int32, one per kept row, in chunk order

    def __len__(self) -> int:
        return len(self.message)

    def in_order(self) -> list[str]:
        """The ids as a list in message order (small traces: tests, the reference)."""
        out: list[str] = [""] * len(self.message)
        at = 0
        for chunk in self.chunks:
            for mid in chunk.to_pylist():
                out[self.message[at]] = mid
                at += 1
        return out

    def slices(self, size: int) -> Iterator[tuple[pa.Array, np.ndarray]]:
        """(ids, message indices) of at most `size` messages at a time."""
        pending: list[pa.Array] = []
        held = 0
        at = 0
        for chunk in self.chunks:
            start = 0
            while start < len(chunk):
                take = min(size - held, len(chunk) - start)
                pending.append(chunk.slice(start, take))
                held += take
                start += take
                if held == size:
                    yield pa.concat_arrays(pending), self.message[at : at + held]
                    at += held
                    pending, held = [], 0
        if held:
            yield pa.concat_arrays(pending), self.message[at : at + held]


@dataclass
class CompiledTrace:
    """One trace laid out for the compiled loop, with what the tables need about it."""

    trace_id: str
    names: list[str]
    layout: Any  # Layout
    ids: MessageIds
    start: float
    end: float
    skewed: bool
    timebase: str

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def messages(self) -> int:
        return len(self.layout.src)

    @property
    def msg_id(self) -> list[str]:
        """Every message's id, in message order (builds a list: small traces only)."""
        return self.ids.in_order()

    @property
    def lost(self) -> int:
        lay = self.layout
        return int(np.count_nonzero((lay.send_ev >= 0) & np.isnan(lay.latency)))

    def events_of(self, p: int) -> range:
        return range(int(self.layout.ev_start[p]), int(self.layout.ev_start[p + 1]))

    def counter_type(self) -> Any:
        """int32 when every count or clock a protocol keeps fits (each counts events of the
        replay: < events + 5 per copy, its arrival, skeen's proposal and final), else int64."""
        bound = int(self.layout.ev_start[-1]) + 5 * self.messages + 1
        return np.int32 if bound < _INT32 else np.int64


class _Chunk(NamedTuple):
    """One batch of program rows as narrow columns."""

    p: np.ndarray  # int32 pidx
    lseq: np.ndarray  # int32
    kind: np.ndarray  # int8 KIND_CODES, -1 unknown
    ts: np.ndarray  # float64, NaN when missing
    lamport: np.ndarray  # int32
    peer: np.ndarray  # int32: a send's destination, a receive's source (-1 unknown)
    plseq: np.ndarray  # int32: a receive's send lseq (-1: no send, an orphan)


# errors found while placing rows send `finish` to `shape.first_error`, which names
# the first bad row in the reference engine's order (as the reference engine's trace builder does)


class LayoutBuilder:
    """Collects one trace's program rows batch by batch; `finish` lays them out."""

    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        self.chunks: list[_Chunk] = []
        self.ids: list[pa.Array] = []
        self.names: dict[int, str] = {}
        self.rows = 0
        self.timed = True
        self.unclocked = False  # some row has no recorded Lamport clock
        self.max_lseq = np.zeros(0, np.int64)
        # rows the fast path cannot place: (chunk, row) -> the kind text or None (no msg_id)
        self.odd: dict[tuple[int, int], str | None] = {}
        self.named = np.zeros(0, bool)  # pidx values with a name
        self.wide = False  # a value beyond int32: left to the error search

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Keep one batch of program rows (the columns of `replay.program_rows`; `kind` as
        its name or its `KIND_CODES`, -1 for any other)."""
        if not batch.num_rows:
            return
        pidx = _ints(batch.column(PIDX))
        kind = batch.column(KIND)
        if pa.types.is_integer(kind.type):
            codes = _ints(_filled(kind, -1))
        else:
            codes = _ints(pc.index_in(kind, value_set=_KINDS).fill_null(-1))
        msg_id = batch.column(MSG_ID)
        # the rows' columns, narrowed in one compiled pass (`placing.take_batch`)
        (p, lseq, codes, ts, lamport, peer, plseq, named, unknown, unnamed, nan, wide,
         low, high, new_name) = take_batch(
            pidx,
            _ints(batch.column(LSEQ)),
            codes,
            _floats(batch.column(TS)),
            _ints(self._clocks(batch.column(LAMPORT))),
            _ints(batch.column(PEER)),
            _ints(_filled(batch.column(PEER_LSEQ), -1)),
            *_validity(msg_id),
            self.max_lseq,
            self.named,
        )  # fmt: skip
        if new_name >= 0 or low < 0:
            self._names(pidx, batch.column(PROCESS))
        index = len(self.chunks)
        if unnamed:  # a send or receive without msg_id
            null = _null(msg_id)
            for row in np.flatnonzero(null & (codes >= 0) & (codes != INTERNAL)).tolist():
                self.odd[(index, row)] = None
        for row in np.flatnonzero(codes < 0).tolist() if unknown else ():
            text = kind[row].as_py()
            self.odd[(index, row)] = str(text) if text is not None else "None"
        self.timed = self.timed and not nan
        self.wide = self.wide or bool(wide)
        if low >= 0 and high + 1 > len(self.max_lseq):
            self.max_lseq = np.concatenate(
                [self.max_lseq, np.zeros(high + 1 - len(self.max_lseq), np.int64)]
            )
            max_at(self.max_lseq, p, lseq)
        self.chunks.append(_Chunk(p, lseq, codes, ts, lamport, peer, plseq))
        self.ids.append(msg_id.take(pa.array(named)))
        self.rows += len(p)
        if len(self.chunks) % _GIVE_BACK_EVERY == 0:
            give_back()  # the decoded batches' garbage, between the chunks kept

    def _clocks(self, lamport: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """The Lamport clocks of a batch, 0 where null (noted: `unclocked`)."""
        if lamport.null_count:
            self.unclocked = True
            return lamport.fill_null(0)
        return lamport

    def _names(self, pidx: np.ndarray, process: pa.Array | pa.ChunkedArray) -> None:
        top = int(pidx.max()) + 1 if len(pidx) else 0
        if top > len(self.named):
            self.named = np.concatenate([self.named, np.zeros(top - len(self.named), bool)])
        if pidx.min() < 0:
            pidx = pidx[pidx >= 0]
        new = np.flatnonzero(~self.named[pidx])
        while len(new):
            row = int(new[0])
            value = int(pidx[row])
            self.names[value] = str(process[row].as_py())
            self.named[value] = True
            new = new[pidx[new] != value]

    @property
    def n(self) -> int:
        return max(self.names) + 1 if self.names else 0

    @small_pages()
    def finish(self) -> CompiledTrace:
        """The layout of every row added (raises `TraceShapeError` as the reference does)."""
        n = self.n
        names = [self.names.get(i, f"#{i}") for i in range(n)]
        lengths = np.zeros(n, np.int64)
        lengths[: len(self.max_lseq)] = self.max_lseq[:n]
        events = int(lengths.sum())
        if self.odd or self.wide or events > self.rows or min(self.names, default=0) < 0:
            raise self._first_error(names)
        ev_start = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=ev_start[1:])
        give_back()  # what decoding the batches left free, before the layout's arrays
        kind = np.full(events, -1, np.int8)
        lamport = np.zeros(events, np.int32)
        etime = np.zeros(events, np.float64)
        take = np.full(events, -1, np.int32)
        count = np.zeros(events + 1, np.int32)  # copies per event, then copy_start
        # the receives of sent messages are counted by channel (by sender when there are
        # too many channels), put in those buckets by `place_sends`, and matched bucket by
        # bucket; by channel, their latencies are the buckets `medians` would make
        width = max(n, 1)
        by_channel = width * width <= 1 << 16  # `medians` buckets these too
        key = width if by_channel else 1
        bucket = np.zeros(width * key + 1, np.int64)
        orphans = 0
        bad = False
        for i, c in enumerate(self.chunks):
            error, found, bad_sender = place_events(
                c.p, c.lseq, c.kind, c.ts, c.lamport, c.peer, c.plseq, ev_start, kind,
                lamport, etime, count, key, bucket,
            )  # fmt: skip
            if error:
                raise self._first_error(names)
            orphans += found
            bad = bad or bad_sender
            # placed: only `_first_error` reads chunks from here on, not these (12 B a row)
            self.chunks[i] = c._replace(ts=_NO_TIMES, lamport=_NO_CLOCKS)
        give_back()
        jump, copies, start, end, skewed = scan_events(
            ev_start, kind, lamport, etime, count, self.timed
        )
        if jump:  # an lseq no row has
            raise self._first_error(names)
        copy_start = count
        size = copies + orphans
        src = np.empty(size, np.int32)
        dst = np.empty(size, np.int32)
        send_ev = np.empty(size, np.int32)
        recv_ev = np.full(size, -1, np.int32)
        kept = np.empty(sum(len(i) for i in self.ids), np.int32)
        at = np.zeros(3, np.int64)  # kept rows so far, orphans so far, copies
        at[2] = copies
        latency = np.empty(size)  # the send's time, then recv - send time, or NaN
        np.cumsum(bucket, out=bucket)
        fill = bucket[:-1].copy()
        received = int(bucket[-1])
        # each receive's send and receive events; then, on the same bytes, its latency
        pairs = np.empty(2 * received, np.int32)
        process_of = np.empty(0 if by_channel else received, np.int32)  # else: by the key
        before = False
        for c in self.chunks:
            beyond, low = place_sends(
                c.p, c.lseq, c.kind, c.peer, c.plseq, ev_start, copy_start, src, dst,
                send_ev, recv_ev, take, kept, at, etime, latency, key, fill, pairs,
                process_of,
            )  # fmt: skip
            bad = bad or beyond
            before = before or low
        del fill
        if sort_copies(copies, dst, send_ev, recv_ev, take, kept):
            raise self._first_error(names)
        values = pairs.view(np.float64) if by_channel and not bad else _NO_TIMES
        odd = False
        if not bad:
            bad, late, odd = place_receives(
                bucket, pairs, process_of, key, copy_start, dst, recv_ev, take, etime,
                latency, values,
            )  # fmt: skip
            skewed = skewed or late
        if bad:
            raise TraceShapeError(
                f"trace {self.trace_id}: a receive names a send copy that is not in the "
                "trace, or a second receive of one message"
            )
        del process_of
        unmatched(recv_ev, latency, copies)
        chunks, ids = self.chunks, self.ids
        self.chunks, self.ids = [], []  # the rows are laid out: let them go
        del chunks
        give_back()
        if len(values) and not (odd or before):  # the channels' buckets, filled
            ch_keys, ch_lat, middle = bucket_medians(bucket, values)
            trace_lat = float(middle)
        else:
            ch_keys, ch_lat, trace_lat = medians(n, src, dst, latency, send_ev, recv_ev)
        del values, pairs
        start, end = float(start), float(end)
        lay = Layout(
            n, ev_start, kind, lamport, etime, copy_start, take,
            src, dst, send_ev, recv_ev, latency, ch_keys, ch_lat, trace_lat, start,
        )  # fmt: skip
        return CompiledTrace(
            trace_id=self.trace_id,
            names=names,
            layout=lay,
            ids=MessageIds(ids, kept),
            start=start,
            end=end,
            skewed=skewed,
            timebase="ts" if self.timed else "lamport",
        )

    def in_flight(self) -> int:
        """The most copies sent and not yet received at one recorded time (before `finish`):
        what the size guard needs besides rows and processes (`size.py`)."""
        sends = []
        receives = []
        for c in self.chunks:
            time = c.ts if self.timed else c.lamport.astype(np.float64)
            sends.append(time[c.kind == SEND])
            receives.append(time[c.kind == RECEIVE])
        return int(_in_flight(np.sort(np.concatenate([np.empty(0), *sends])),
                              np.sort(np.concatenate([np.empty(0), *receives]))))  # fmt: skip

    def _first_error(self, names: list[str]) -> TraceShapeError:
        return first_error(self.trace_id, names, self.chunks, self.odd)


_NO_TIMES = np.empty(0, np.float64)
_NO_NULLS = np.empty(0, np.uint8)  # `take_batch`: no msg_id is null (read-only, as
_NO_NULLS.setflags(write=False)  # a bitmap from Arrow is: one compiled `take_batch`)
_NO_CLOCKS = np.empty(0, np.int32)


def _ints(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A column's integers in their own signed type (int32 stays int32: `take_batch` copies
    once), others (nulls as NaN, unsigned) as int64."""
    values: np.ndarray = column.to_numpy(zero_copy_only=False)
    if values.dtype.kind == "i":
        return values
    return np.asarray(values, dtype=np.int64)


def _filled(column: pa.Array | pa.ChunkedArray, value: int) -> pa.Array | pa.ChunkedArray:
    return column.fill_null(value) if column.null_count else column


def _null(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _validity(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """A column's validity bitmap as bytes and the bit of its first row (empty: no null)."""
    if not column.null_count:
        return _NO_NULLS, 0
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    bits = np.frombuffer(column.buffers()[0], np.uint8)
    # read-only whatever the buffer: Arrow's are mutable when built in this process (the
    # warm-up's trace) and read-only when read from Spark's stream (the grouped UDF's), and
    # each would compile its own `take_batch`, the job's in a worker after the warm-up
    bits.setflags(write=False)
    return bits, column.offset


def _floats(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    values: np.ndarray = column.to_numpy(zero_copy_only=False)
    return values if values.dtype == np.float64 else values.astype(np.float64)


@njit(cache=True)
def _in_flight(sends, receives):  # type: ignore[no-untyped-def]
    """The most sends ahead of receives at one time (receives first at equal times)."""
    i = j = 0
    now = best = 0
    while i < len(sends):
        if j < len(receives) and receives[j] <= sends[i]:
            now -= 1
            j += 1
        else:
            now += 1
            i += 1
            if now > best:
                best = now
    return best


# ---- the same rows as arrays -----------------------------------------------------------------


def layout(
    trace_id: str,
    names: Sequence[str],
    pidx: np.ndarray,
    lseq: np.ndarray,
    kind: Sequence[str] | np.ndarray,
    ts: np.ndarray,
    lamport: np.ndarray,
    msg_id: Sequence[str | None],
    peer: np.ndarray,
) -> CompiledTrace:
    """One trace's rows, as the reference engine's `build_trace` takes them, laid out for the loop.

    A receive is matched to its send by msg_id here (the rows carry no `peer_lseq`);
    raises `TraceShapeError` with the reference's message when the rows cannot form
    programs."""
    pidx = np.asarray(pidx, dtype=np.int64)
    lseq = np.asarray(lseq, dtype=np.int64)
    peer = np.asarray(peer, dtype=np.int64).copy()
    codes = np.asarray([KIND_CODES.get(k, -1) for k in kind], dtype=np.int64)
    ids = list(msg_id)
    sent: dict[str, tuple[int, int]] = {}
    for row in np.flatnonzero(codes == SEND).tolist():
        sent_id = ids[row]
        if sent_id is not None:
            sent.setdefault(sent_id, (int(pidx[row]), int(lseq[row])))
    peer_lseq = np.full(len(pidx), -1, np.int64)
    for row in np.flatnonzero(codes == RECEIVE).tolist():
        got_id = ids[row]
        found = sent.get(got_id) if got_id is not None else None
        if found is not None:
            peer[row], peer_lseq[row] = found
    rows = len(pidx)
    names_by_pidx = {i: names[i] for i in range(len(names))}
    batch = pa.RecordBatch.from_pydict(
        {
            PIDX: pa.array(pidx, pa.int64()),
            LSEQ: pa.array(lseq, pa.int64()),
            KIND: pa.array([str(k) for k in kind], pa.string()),
            TS: pa.array(np.asarray(ts, dtype=np.float64), pa.float64()),
            LAMPORT: pa.array(np.asarray(lamport, dtype=np.int64), pa.int64()),
            PEER: pa.array(peer, pa.int64()),
            PEER_LSEQ: pa.array(peer_lseq, pa.int64(), mask=peer_lseq < 0),
            MSG_ID: pa.array(ids, pa.string()),
            PROCESS: pa.array(
                [names_by_pidx.get(int(i), f"#{i}") for i in pidx.tolist()], pa.string()
            ),
        }
    )
    builder = LayoutBuilder(trace_id)
    builder.names = dict(names_by_pidx)
    if rows:
        builder.add(batch)
    return builder.finish()
