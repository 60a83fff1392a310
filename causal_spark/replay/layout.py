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

import math
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
    EXTERNAL,
    INTERNAL,
    KIND_CODES,
    RECEIVE,
    SEND,
    TraceShapeError,
)
from causal_spark.replay.shape import BAD_ROW, OK, TWO_ROWS, first_error

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
            codes = _ints(kind.fill_null(-1)).astype(np.int8)
            codes[(codes < 0) | (codes > INTERNAL)] = -1
        else:
            found = pc.index_in(kind, value_set=_KINDS).fill_null(-1)
            codes = np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.int8)
        self._names(pidx, batch.column(PROCESS))
        msg_id = batch.column(MSG_ID)
        peer_lseq = _ints(_filled(batch.column(PEER_LSEQ), -1))
        named = (codes == SEND) | ((codes == RECEIVE) & (peer_lseq < 0))
        if msg_id.null_count:
            unnamed = (codes != INTERNAL) & (codes >= 0) & _null(msg_id)
            named &= ~unnamed
        else:
            unnamed = np.zeros(0, bool)
        self._keep(
            pidx,
            _ints(batch.column(LSEQ)),
            codes,
            batch.column(TS).to_numpy(zero_copy_only=False).astype(np.float64),
            _ints(self._clocks(batch.column(LAMPORT))),
            _ints(batch.column(PEER)),
            peer_lseq,
            msg_id.filter(pa.array(named)),
            unnamed,
            [(int(i), str(kind[int(i)].as_py())) for i in np.flatnonzero(codes < 0)],
        )

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

    def _keep(
        self,
        pidx: np.ndarray,
        lseq: np.ndarray,
        codes: np.ndarray,
        ts: np.ndarray,
        lamport: np.ndarray,
        peer: np.ndarray,
        plseq: np.ndarray,
        ids: pa.Array,
        unnamed: np.ndarray,
        unknown: list[tuple[int, str | None]],
    ) -> None:
        index = len(self.chunks)
        for row in np.flatnonzero(unnamed).tolist():  # a send or receive without msg_id
            self.odd[(index, row)] = None
        for row, text in unknown:
            self.odd[(index, row)] = text if text is not None else "None"
        self.timed = self.timed and not np.isnan(ts).any()
        wide = [a for a in (pidx, lseq, lamport, peer, plseq) if len(a)]
        if any(a.max() > _INT32 or a.min() < -1 for a in wide):
            self.wide = True
        if len(pidx) and pidx.min() >= 0:
            top = int(pidx.max()) + 1
            if top > len(self.max_lseq):
                self.max_lseq = np.concatenate(
                    [self.max_lseq, np.zeros(top - len(self.max_lseq), np.int64)]
                )
            _max_at(self.max_lseq, pidx.astype(np.int64, copy=False),
                    lseq.astype(np.int64, copy=False))  # fmt: skip
        self.chunks.append(
            _Chunk(
                _narrow(pidx),
                _narrow(lseq),
                codes,  # int8, its own copy (`add`)
                ts,
                _narrow(lamport),
                _narrow(peer),
                _narrow(plseq),
            )
        )
        self.ids.append(ids)
        self.rows += len(pidx)
        if len(self.chunks) % _GIVE_BACK_EVERY == 0:
            give_back()  # the decoded batches' garbage, between the chunks kept

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
        orphans = 0
        for i, c in enumerate(self.chunks):
            error, found = _place_events(
                c.p, c.lseq, c.kind, c.ts, c.lamport, c.plseq, ev_start, kind, lamport, etime,
                count,
            )  # fmt: skip
            if error:
                raise self._first_error(names)
            orphans += found
            # placed: only `_first_error` reads chunks from here on, not these (12 B a row)
            self.chunks[i] = c._replace(ts=_NO_TIMES, lamport=_NO_CLOCKS)
        give_back()
        if events and kind.min() < 0:  # an lseq no row has: a jump
            raise self._first_error(names)
        copy_start = count
        np.cumsum(count[:-1], out=copy_start[1:])
        copy_start[0] = 0
        copies = int(copy_start[-1])
        size = copies + orphans
        src = np.empty(size, np.int32)
        dst = np.empty(size, np.int32)
        send_ev = np.full(size, -1, np.int32)
        recv_ev = np.full(size, -1, np.int32)
        kept = np.empty(sum(len(i) for i in self.ids), np.int32)
        origin = np.empty(copies, np.int32)
        fill = np.zeros(events, np.int32)
        at = np.zeros(3, np.int64)  # kept rows so far, orphans so far, copies
        at[2] = copies
        for c in self.chunks:
            _place_sends(
                c.p, c.lseq, c.kind, c.peer, c.plseq, ev_start, copy_start, fill, src, dst,
                send_ev, recv_ev, take, origin, kept, at,
            )  # fmt: skip
        del fill
        if _sort_copies(copy_start, dst, origin, kept):
            raise self._first_error(names)
        del origin
        for c in self.chunks:
            if _place_receives(
                c.p, c.lseq, c.kind, c.peer, c.plseq, ev_start, copy_start, dst, recv_ev,
                take,
            ):  # fmt: skip
                raise TraceShapeError(
                    f"trace {self.trace_id}: a receive names a send copy that is not in the "
                    "trace, or a second receive of one message"
                )
        chunks, ids = self.chunks, self.ids
        self.chunks, self.ids = [], []  # the rows are laid out: let them go
        del chunks
        give_back()
        if not self.timed:
            etime[:] = lamport
        start = float(etime.min()) if events else 0.0
        end = float(etime.max()) if events else 0.0
        latency = np.full(size, np.nan)
        skewed = _times(ev_start, etime, send_ev, recv_ev, latency)
        ch_keys, ch_lat, trace_lat = _medians(n, src, dst, latency, send_ev, recv_ev)
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
_NO_CLOCKS = np.empty(0, np.int32)


def _ints(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A column's integers in their own signed type (int32 stays int32: `_narrow` copies
    once), others (nulls as NaN, unsigned) as int64."""
    values: np.ndarray = column.to_numpy(zero_copy_only=False)
    if values.dtype.kind == "i":
        return values
    return np.asarray(values, dtype=np.int64)


def _filled(column: pa.Array | pa.ChunkedArray, value: int) -> pa.Array | pa.ChunkedArray:
    return column.fill_null(value) if column.null_count else column


def _null(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _narrow(values: np.ndarray) -> np.ndarray:
    """int32 (values beyond it are caught before: `LayoutBuilder.wide`)."""
    return values.astype(np.int32)


# ---- placing rows (compiled, one call per chunk) -------------------------------------------


@njit(cache=True)
def _max_at(top, p_of, lseq_of):  # type: ignore[no-untyped-def]
    """top[p] = max(top[p], lseq) over the rows (np.maximum.at, ten times slower)."""
    for row in range(len(p_of)):
        p = p_of[row]
        if lseq_of[row] > top[p]:
            top[p] = lseq_of[row]


@njit(cache=True)
def _place_events(p_of, lseq_of, code_of, ts_of, lam_of, plseq_of, ev_start, kind, lamport,  # type: ignore[no-untyped-def]
                  etime, count):  # fmt: skip
    """Event columns from one chunk; count[e] = the copies of send event e. Returns
    (error, orphans' receives)."""
    orphans = 0
    for row in range(len(p_of)):
        p = p_of[row]
        code = code_of[row]
        q = lseq_of[row]
        if code < 0 or p < 0 or p + 1 >= len(ev_start) or q < 1:
            return BAD_ROW, 0
        e = ev_start[p] + q - 1
        if kind[e] >= 0:
            if code != SEND or kind[e] != SEND:
                return TWO_ROWS, 0
        else:
            kind[e] = code
            lamport[e] = lam_of[row]
            etime[e] = ts_of[row]
        if code == SEND:
            count[e] += 1
        elif code == RECEIVE and plseq_of[row] < 0:
            orphans += 1
    return OK, orphans


@njit(cache=True)
def _place_sends(p_of, lseq_of, code_of, peer_of, plseq_of, ev_start, copy_start, fill, src,  # type: ignore[no-untyped-def]
                 dst, send_ev, recv_ev, take, origin, kept, at):  # fmt: skip
    """Copies of send events (in row order within an event, sorted later) and orphans'
    messages (after the copies) from one chunk; `kept[i]` is the message named by the i-th
    row that names one (a copy's is fixed by `_sort_copies`). at: kept, orphans, copies."""
    for row in range(len(p_of)):
        code = code_of[row]
        if code == SEND:
            p = p_of[row]
            e = ev_start[p] + lseq_of[row] - 1
            slot = copy_start[e] + fill[e]
            fill[e] += 1
            src[slot] = p
            dst[slot] = peer_of[row]
            send_ev[slot] = e
            origin[slot] = at[0]
            at[0] += 1
        elif code == RECEIVE and plseq_of[row] < 0:
            p = p_of[row]
            e = ev_start[p] + lseq_of[row] - 1
            m = at[2] + at[1]
            at[1] += 1
            src[m] = peer_of[row] if peer_of[row] >= 0 else EXTERNAL
            dst[m] = p
            recv_ev[m] = e
            take[e] = m
            kept[at[0]] = m
            at[0] += 1


@njit(cache=True)
def _sort_copies(copy_start, dst, origin, kept):  # type: ignore[no-untyped-def]
    """A send event's copies by destination (as the reference, which sorts rows by peer);
    then each copy's message index goes to its row in `kept`. True if an event has two
    copies to one destination."""
    for e in range(len(copy_start) - 1):
        lo = copy_start[e]
        hi = copy_start[e + 1]
        for i in range(lo + 1, hi):
            d = dst[i]
            o = origin[i]
            j = i - 1
            while j >= lo and dst[j] > d:
                dst[j + 1] = dst[j]
                origin[j + 1] = origin[j]
                j -= 1
            dst[j + 1] = d
            origin[j + 1] = o
        for i in range(lo + 1, hi):
            if dst[i] == dst[i - 1] and dst[i] >= 0:
                return True
    for m in range(len(origin)):
        kept[origin[m]] = m
    return False


_BY_SENDER = 1024  # processes up to which `_place_receives` takes a chunk's rows by sender


@njit(cache=True)
def _place_receives(p_of, lseq_of, code_of, peer_of, plseq_of, ev_start, copy_start, dst,  # type: ignore[no-untyped-def]
                    recv_ev, take):  # fmt: skip
    """Each receive of a sent message finds its copy by the send's coordinates. True if one
    does not (a bad table: the send is not there, or the message is received twice).

    A chunk's rows are one receiver's (or a few), in lseq order; their sends are spread
    over the senders' events. Taken sender by sender, each sender's events are read in
    order (a few sequential runs, which the processor prefetches) instead of jumping
    between up to n senders' columns at every row (half of `finish` at 10^7 messages)."""
    n = len(ev_start) - 1
    rows = len(p_of)
    order = np.empty(rows, np.int32)
    if n <= _BY_SENDER:
        start = np.zeros(n + 1, np.int64)
        for row in range(rows):
            if code_of[row] == RECEIVE and plseq_of[row] >= 0:
                s = peer_of[row]
                if s < 0 or s >= n:
                    return True
                start[s + 1] += 1
        for s in range(n):
            start[s + 1] += start[s]
        total = start[n]
        for row in range(rows):
            if code_of[row] == RECEIVE and plseq_of[row] >= 0:
                s = peer_of[row]
                order[start[s]] = row
                start[s] += 1
    else:
        total = 0
        for row in range(rows):
            if code_of[row] == RECEIVE and plseq_of[row] >= 0:
                order[total] = row
                total += 1
    for i in range(total):
        row = order[i]
        p = p_of[row]
        s = peer_of[row]
        k = plseq_of[row]
        if s < 0 or s >= n or k > ev_start[s + 1] - ev_start[s]:
            return True
        es = ev_start[s] + k - 1
        found = -1  # only send events have copies (`_place_events`)
        for m in range(copy_start[es], copy_start[es + 1]):
            if dst[m] == p:
                found = m
                break
        if found < 0 or recv_ev[found] >= 0:
            return True
        e = ev_start[p] + lseq_of[row] - 1
        recv_ev[found] = e
        take[e] = found
    return False


@njit(cache=True)
def _times(ev_start, etime, send_ev, recv_ev, latency):  # type: ignore[no-untyped-def]
    """Latencies (recv - send time, clamped at 0) of messages with both ends; True when a
    gap or a latency is negative (clock skew)."""
    skewed = False
    for p in range(len(ev_start) - 1):
        for e in range(ev_start[p] + 1, ev_start[p + 1]):
            if etime[e] < etime[e - 1]:
                skewed = True
    for m in range(len(send_ev)):
        if send_ev[m] >= 0 and recv_ev[m] >= 0:
            lat = etime[recv_ev[m]] - etime[send_ev[m]]
            if lat < 0:
                skewed = True
                lat = 0.0
            latency[m] = lat
    return skewed


def _medians(
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    latency: np.ndarray,
    send_ev: np.ndarray,
    recv_ev: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Median latency per directed channel (as np.median: the mean of the two middle values)
    and of the whole trace, over messages with both ends."""
    channels = max(n, 1) ** 2
    if channels <= max(1 << 16, 2 * len(src)):  # bucket by channel: no sort of the keys
        keys, values, middle = _bucket_medians(n, src, dst, latency, send_ev, recv_ev)
        return keys, values, float(middle)
    both = np.flatnonzero((send_ev >= 0) & (recv_ev >= 0))
    if not len(both):
        return np.empty(0, np.int64), np.empty(0, np.float64), math.nan
    keys = src[both].astype(np.int64) * max(n, 1) + dst[both]
    values = latency[both]
    del both
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    del order, keys
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    count = np.diff(np.r_[first, len(k)])
    low = first + (count - 1) // 2
    high = first + count // 2
    return k[first].copy(), (v[low] + v[high]) / 2.0, float(np.median(values))


@njit(cache=True)
def _bucket_medians(n, src, dst, latency, send_ev, recv_ev):  # type: ignore[no-untyped-def]
    """`_medians` for up to a few channels per message: latencies bucketed by channel, each
    bucket's median found by selection; every channel has a value (the trace's median where
    it has none), so `loop.control_latency` indexes them."""
    width = max(n, 1)
    start = np.zeros(width * width + 1, np.int64)
    for m in range(len(src)):
        if send_ev[m] >= 0 and recv_ev[m] >= 0:
            start[src[m] * width + dst[m] + 1] += 1
    for k in range(width * width):
        start[k + 1] += start[k]
    total = start[-1]
    values = np.empty(total, np.float64)
    fill = start[:-1].copy()
    for m in range(len(src)):
        if send_ev[m] >= 0 and recv_ev[m] >= 0:
            k = src[m] * width + dst[m]
            values[fill[k]] = latency[m]
            fill[k] += 1
    if total == 0:
        return np.empty(0, np.int64), np.empty(0, np.float64), np.nan
    # every channel (dense: the loop indexes it by channel, no search per control message),
    # its median or, where none was recorded, the trace's
    middle = np.median(values)
    medians = np.full(width * width, middle)
    for k in range(width * width):
        if start[k + 1] > start[k]:
            # quickselect (a copy: `values` stays whole): the two middle values' mean, as
            # np.median, without sorting the bucket
            medians[k] = np.median(values[start[k] : start[k + 1]])
    return np.arange(width * width).astype(np.int64), medians, middle


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
