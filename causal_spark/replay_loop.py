"""The compiled replay engine: `replay_engine`'s model as one Numba event loop (docs/replay.md).

`replay_engine` is the reference: plain Python, one object per message, easy
to read against the seeds. This module runs the same model, event for event,
over flat arrays, so one (trace, protocol) group replays at compiled speed
inside the Spark task:

- `layout(...)` turns one trace's rows (the arguments of
  `replay_engine.build_trace`) into a `CompiledTrace`: per event (CSR by
  process) kind, lseq, recorded Lamport clock, gap, the copies of a send and
  the message a receive took; per message src, dst, send/receive lseq,
  latency (NaN: lost) and an orphan's arrival time.
- `replay_compiled(trace, name, params, selective, default_latency)` runs
  protocol `name` and returns a `Run` whose per-message columns are arrays
  (NaN / -1 where the reference has None).

Each protocol module keeps its reference class and, next to it, its compiled
form: a `State` namedtuple of arrays, `make_state(trace, params)` and the
hooks `c_send`, `c_arrived`, `c_control`, `c_settle`, `c_deliverable`,
`c_delivered`, `c_taken` (absent hooks take the defaults below, which are
`none`'s behaviour). The loop is compiled once per protocol (its State type)
and cached on disk. Protocol hooks call back `post`, `control`, `resume` and
`notify`, and read `eng.pend_head` / `eng.pnext` for the pending copies.

The heap orders items exactly as the reference does: (time, recorded Lamport
clock, arrival before step, process, order, insertion). Control messages carry
a kind and three integers (`CTL_*` columns); a protocol that needs more keeps
the payload in its own state and sends its index.

Numba keys a function's disk cache on its own source file; the loop here
inlines the protocols' hooks, so `_ProtocolStampedLocator` adds the protocol
modules' files to this module's stamp: editing a hook recompiles the loop.
"""

from __future__ import annotations

import math
import os
import sys
from collections import namedtuple
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit, types
from numba.core import caching
from numba.experimental import structref
from numba.extending import overload
from numba.typed import Dict, List

from causal_spark.anomalies.kernel import overtaking
from causal_spark.clocks.kernel import vector_clocks
from causal_spark.replay_engine import (
    EXTERNAL,
    INTERNAL,
    KIND_CODES,
    RECEIVE,
    SEND,
    STATUS_DEADLOCK,
    STATUS_ERROR,
    STATUS_NOT_APPLICABLE,
    STATUS_OK,
    STATUS_STALLED,
    Run,
    TraceShapeError,
    accounting_error,
    makespan_figures,
)


class _ProtocolStampedLocator:
    """Numba's usual cache locator for this module, stamped with the protocol modules too."""

    _protocols = os.path.join(os.path.dirname(os.path.abspath(__file__)), "protocols")

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_source_stamp(self) -> Any:
        stamps = []
        for name in sorted(os.listdir(self._protocols)):
            if name.endswith(".py"):
                st = os.stat(os.path.join(self._protocols, name))
                stamps.append((name, st.st_mtime, st.st_size))
        return (self._inner.get_source_stamp(), tuple(stamps))

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if os.path.abspath(py_file) != os.path.abspath(__file__):
            return None
        for base in _LOCATORS:
            if base is not cls:
                inner = base.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner)
        return None


_LOCATORS: list[Any] = caching.CacheImpl._locator_classes
if _ProtocolStampedLocator not in _LOCATORS:
    _LOCATORS.insert(0, _ProtocolStampedLocator)

# program states, heap priorities and item kinds (as in replay_engine)
READY, WAIT_RECEIVE, WAIT_SEND, DONE = 0, 1, 2, 3
ARRIVAL, STEP = 0, 1
ITEM_STEP, ITEM_APP, ITEM_EXT, ITEM_CTL = 0, 1, 2, 3
LAST = 1 << 62
# heap integer columns
H_LAM, H_PRIO, H_KEY, H_ORDER, H_SEQ, H_ITEM, H_CKIND, H_A, H_B, H_C = range(10)
_H_WIDTH = 10
# engine counters
K_CONTROL, K_CONTROL_INTS, K_MAX_BUFFER, K_SEQ, K_HEAP, K_EXEC = range(6)
# flags
F_CAUSAL, F_FIFO_TRANSPORT, F_P2P, F_SELECTIVE = range(4)
# the executed program, per entry: internal, a send event (its copies), one copy, a receive
EX_INTERNAL, EX_SEND_EVENT, EX_SEND_COPY, EX_RECEIVE = 0, 1, 2, 3

Layout = namedtuple(
    "Layout",
    "n ev_start kind lseq lamport gap etime copy_start copy_msg take "
    "src dst send_lseq recv_lseq latency arrival rec_send rec_recv "
    "ch_keys ch_lat trace_lat start",
)
Eng = namedtuple(
    "Eng",
    "flags send_t post_t arr_t del_t take_t taken_by pig "
    "pc state now pend_head pend_tail pend_count pnext pprev "
    "rdy_head rdy_tail rnext cnt hf hi chan_last scratch ex_p ex_what ex_val default_latency",
)


# The loop's functions take the trace and the engine state as StructRefs: one pointer per
# call. As namedtuples of some 50 arrays they were passed member by member, hundreds of
# machine words per call, which cost more than the work of an event. Python keeps the
# namedtuples above (same arrays, so the loop's writes show there).


@structref.register
class _LayoutType(types.StructRef):
    def preprocess_fields(self, fields: Any) -> Any:
        return tuple((name, types.unliteral(typ)) for name, typ in fields)  # type: ignore[no-untyped-call]


class LayoutRef(structref.StructRefProxy):
    """The `Layout` as the loop sees it."""


@structref.register
class _EngType(types.StructRef):
    def preprocess_fields(self, fields: Any) -> Any:
        return tuple((name, types.unliteral(typ)) for name, typ in fields)  # type: ignore[no-untyped-call]


class EngRef(structref.StructRefProxy):
    """The engine state (`Eng`) as the loop sees it."""


structref.define_proxy(LayoutRef, _LayoutType, list(Layout._fields))  # type: ignore[no-untyped-call]
structref.define_proxy(EngRef, _EngType, list(Eng._fields))  # type: ignore[no-untyped-call]


@njit(cache=True)
def _layout_ref(lay):  # type: ignore[no-untyped-def]
    return LayoutRef(  # type: ignore[no-untyped-call]
        lay.n,
        lay.ev_start,
        lay.kind,
        lay.lseq,
        lay.lamport,
        lay.gap,
        lay.etime,
        lay.copy_start,
        lay.copy_msg,
        lay.take,
        lay.src,
        lay.dst,
        lay.send_lseq,
        lay.recv_lseq,
        lay.latency,
        lay.arrival,
        lay.rec_send,
        lay.rec_recv,
        lay.ch_keys,
        lay.ch_lat,
        lay.trace_lat,
        lay.start,
    )


@njit(cache=True)
def _eng_ref(eng):  # type: ignore[no-untyped-def]
    return EngRef(  # type: ignore[no-untyped-call]
        eng.flags,
        eng.send_t,
        eng.post_t,
        eng.arr_t,
        eng.del_t,
        eng.take_t,
        eng.taken_by,
        eng.pig,
        eng.pc,
        eng.state,
        eng.now,
        eng.pend_head,
        eng.pend_tail,
        eng.pend_count,
        eng.pnext,
        eng.pprev,
        eng.rdy_head,
        eng.rdy_tail,
        eng.rnext,
        eng.cnt,
        eng.hf,
        eng.hi,
        eng.chan_last,
        eng.scratch,
        eng.ex_p,
        eng.ex_what,
        eng.ex_val,
        eng.default_latency,
    )


@dataclass
class CompiledTrace:
    """One trace laid out for the compiled loop, with what the tables need about it."""

    trace_id: str
    names: list[str]
    msg_id: list[str]
    layout: Any  # Layout
    start: float
    end: float
    skewed: bool
    timebase: str

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def lost(self) -> int:
        lay = self.layout
        return int(np.count_nonzero((lay.send_lseq >= 0) & np.isnan(lay.latency)))

    def events_of(self, p: int) -> range:
        return range(int(self.layout.ev_start[p]), int(self.layout.ev_start[p + 1]))


# ---- building a layout from rows ---------------------------------------------------------


_BAD_ROW, _JUMP, _TWO_ROWS, _NO_MSG_ID = 1, 2, 3, 4
_KIND_NAMES = {code: name for name, code in KIND_CODES.items()}


@njit(cache=True)
def _build(p_of, q_of, code_of, time_of, lam_of, mcode_of, peer_of, out_ev, out_msg):  # type: ignore[no-untyped-def]
    """Fill the event columns (out_ev) and message columns (out_msg) from the sorted rows.

    Returns (error, row, last lseq, events, copies, messages); error 0 when the rows form
    programs. Messages are numbered by first appearance, as the reference does.
    """
    ev_p, kind, lseq, lamport, copy_start, copy_msg, take, last = out_ev
    src, dst, send_lseq, recv_lseq, send_time, recv_time, remap, first_code, etime = out_msg
    events = 0
    copies = 0
    messages = 0
    for row in range(len(p_of)):
        p = p_of[row]
        q = q_of[row]
        code = code_of[row]
        if code < 0 or p < 0 or p >= len(last):
            return _BAD_ROW, row, 0, events, copies, messages
        if last[p] != q:
            if q != last[p] + 1:
                return _JUMP, row, last[p], events, copies, messages
            ev_p[events] = p
            kind[events] = code
            lseq[events] = q
            lamport[events] = lam_of[row]
            etime[events] = time_of[row]
            copy_start[events] = copies
            events += 1
            copy_start[events] = copies
            last[p] = q
        elif code != SEND or kind[events - 1] != SEND:
            return _TWO_ROWS, row, 0, events, copies, messages
        if code == INTERNAL:
            continue
        c = mcode_of[row]
        if c < 0:
            return _NO_MSG_ID, row, 0, events, copies, messages
        m = remap[c]
        if m < 0:
            m = remap[c] = messages
            first_code[messages] = c
            messages += 1
        if code == SEND:
            src[m] = p
            dst[m] = peer_of[row]
            send_lseq[m] = q
            send_time[m] = time_of[row]
            copy_msg[copies] = m
            copies += 1
            copy_start[events] = copies
        else:
            if send_lseq[m] < 0:
                src[m] = peer_of[row] if peer_of[row] >= 0 else EXTERNAL
            dst[m] = p
            recv_lseq[m] = q
            recv_time[m] = time_of[row]
            take[events - 1] = m
    return 0, 0, 0, events, copies, messages


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
    msg_codes: tuple[list[str], np.ndarray] | None = None,
) -> CompiledTrace:
    """One trace's rows (as `replay_engine.build_trace` takes them) laid out for the loop.

    `kind` may be the strings or their `KIND_CODES` (-1: unknown); `msg_codes`,
    when given, replaces `msg_id` by (distinct ids, per-row index or -1), as
    Arrow's dictionary encoding gives them. Raises `TraceShapeError` with the
    reference's message when the rows cannot form programs.
    """
    n = len(names)
    pidx = np.asarray(pidx, dtype=np.int64)
    lseq = np.asarray(lseq, dtype=np.int64)
    ts = np.asarray(ts, dtype=np.float64)
    lamport = np.asarray(lamport, dtype=np.int64)
    peer = np.asarray(peer, dtype=np.int64)
    if isinstance(kind, np.ndarray) and kind.dtype.kind == "i":
        codes = kind.astype(np.int64)
        kind_text = None
    else:
        kind_text = list(kind)
        codes = np.asarray([KIND_CODES.get(k, -1) for k in kind_text], dtype=np.int64)
    ids, mcode = msg_codes if msg_codes is not None else _factorize(msg_id)
    mcode = np.asarray(mcode, dtype=np.int64)
    use_ts = len(ts) > 0 and not np.isnan(ts).any()
    time = ts if use_ts else lamport.astype(np.float64)
    order = np.lexsort((peer, lseq, pidx))
    rows = len(order)
    codes_count = len(ids)

    def filled(size: int, value: float, dtype: type = np.int64) -> np.ndarray:
        return np.full(size, value, dtype=dtype)

    out_ev = (
        filled(rows, 0), filled(rows, 0), filled(rows, 0), filled(rows, 0),
        filled(rows + 1, 0), filled(rows, 0), filled(rows, -1), filled(n, 0),
    )  # fmt: skip
    out_msg = (
        filled(codes_count, EXTERNAL), filled(codes_count, -1), filled(codes_count, -1),
        filled(codes_count, -1), filled(codes_count, np.nan, np.float64),
        filled(codes_count, np.nan, np.float64), filled(codes_count, -1),
        filled(codes_count, 0), filled(rows, np.nan, np.float64),
    )  # fmt: skip
    error, at, before, events, copies, messages = _build(
        pidx[order], lseq[order], codes[order], time[order], lamport[order], mcode[order],
        peer[order], out_ev, out_msg,
    )  # fmt: skip
    if error:
        row = int(order[at])
        p = int(pidx[row])
        what = kind_text[row] if kind_text is not None else _KIND_NAMES.get(int(codes[row]), "?")
        if error == _BAD_ROW:
            raise TraceShapeError(f"trace {trace_id}: bad event row (process {p}, kind {what})")
        name = names[p]
        if error == _JUMP:
            raise TraceShapeError(
                f"trace {trace_id}: process {name} jumps to lseq {lseq[row]} after {before}"
            )
        if error == _TWO_ROWS:
            raise TraceShapeError(f"trace {trace_id}: two rows for event {name}#{lseq[row]}")
        raise TraceShapeError(f"trace {trace_id}: {what} {name}#{lseq[row]} has no msg_id")
    ev_p, ekind, elseq, elam, copy_start, copy_msg, take, _ = out_ev
    src, dst, send_lseq, recv_lseq, send_time, recv_time, _, first_code, etime = out_msg
    ev_p, ekind, elseq, elam, etime, take = (
        a[:events] for a in (ev_p, ekind, elseq, elam, etime, take)
    )
    copy_start, copy_msg = copy_start[: events + 1], copy_msg[:copies]
    src, dst, send_lseq, recv_lseq, send_time, recv_time = (
        a[:messages] for a in (src, dst, send_lseq, recv_lseq, send_time, recv_time)
    )
    ev_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ev_p, minlength=n), out=ev_start[1:])
    start = float(etime.min()) if events else 0.0
    end = float(etime.max()) if events else 0.0
    previous = np.full(events, start)
    follows = np.ones(events, dtype=bool)
    follows[ev_start[:-1][ev_start[:-1] < events]] = False
    previous[1:][follows[1:]] = etime[:-1][follows[1:]]
    gap = etime - previous
    skewed = bool((gap < 0).any())
    gap = np.maximum(gap, 0.0)
    both = (send_lseq >= 0) & (recv_lseq >= 0)
    latency = np.full(messages, np.nan)
    latency[both] = recv_time[both] - send_time[both]
    skewed = skewed or bool((latency[both] < 0).any())
    latency[both] = np.maximum(latency[both], 0.0)
    arrival = np.where((send_lseq < 0) & (recv_lseq >= 0), recv_time, np.nan)
    keys = src[both] * max(n, 1) + dst[both]
    ch_keys, ch_lat, trace_lat = _medians(keys, latency[both])
    lay = Layout(
        n, ev_start, ekind, elseq, elam, gap, etime, copy_start, copy_msg, take,
        src, dst, send_lseq, recv_lseq, latency, arrival,
        np.where(send_lseq >= 0, send_time, np.nan), recv_time,
        ch_keys, ch_lat, trace_lat, start,
    )  # fmt: skip
    return CompiledTrace(
        trace_id=trace_id,
        names=list(names),
        msg_id=[ids[c] for c in first_code[:messages].tolist()],
        layout=lay,
        start=start,
        end=end,
        skewed=skewed,
        timebase="ts" if use_ts else "lamport",
    )


def _factorize(msg_id: Sequence[str | None]) -> tuple[list[str], np.ndarray]:
    index: dict[str, int] = {}
    codes = np.empty(len(msg_id), dtype=np.int64)
    for i, mid in enumerate(msg_id):
        if mid is None:
            codes[i] = -1
        else:
            codes[i] = index.setdefault(mid, len(index))
    return list(index), codes


def _medians(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Median latency per channel key (as np.median: the mean of the two middle values)."""
    if len(values) == 0:
        return np.empty(0, np.int64), np.empty(0, np.float64), math.nan
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    count = np.diff(np.r_[first, len(k)])
    low = first + (count - 1) // 2
    high = first + count // 2
    return k[first].copy(), (v[low] + v[high]) / 2.0, float(np.median(values))


# ---- the heap ----------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _before(hf, hi, i, j):  # type: ignore[no-untyped-def]
    if hf[i] != hf[j]:
        return hf[i] < hf[j]
    for c in range(H_SEQ + 1):
        if hi[i, c] != hi[j, c]:
            return hi[i, c] < hi[j, c]
    return False


@njit(cache=True)
def _swap(hf, hi, i, j):  # type: ignore[no-untyped-def]
    hf[i], hf[j] = hf[j], hf[i]
    for c in range(_H_WIDTH):
        hi[i, c], hi[j, c] = hi[j, c], hi[i, c]


@njit(cache=True)
def push(eng, t, lam, prio, key, order, item, ckind, a, b, c):  # type: ignore[no-untyped-def]
    """Schedule an item (a step, an arrival or a control message) at t."""
    size = eng.cnt[K_HEAP]
    hf = eng.hf[0]
    hi = eng.hi[0]
    if size == len(hf):
        grown_f = np.empty(2 * len(hf), np.float64)
        grown_i = np.empty((2 * len(hf), _H_WIDTH), np.int64)
        grown_f[:size] = hf
        grown_i[:size] = hi
        eng.hf[0] = grown_f
        eng.hi[0] = grown_i
        hf, hi = grown_f, grown_i
    eng.cnt[K_SEQ] += 1
    hf[size] = t
    row = hi[size]
    row[H_LAM], row[H_PRIO], row[H_KEY], row[H_ORDER], row[H_SEQ] = (
        lam,
        prio,
        key,
        order,
        eng.cnt[K_SEQ],
    )
    row[H_ITEM], row[H_CKIND], row[H_A], row[H_B], row[H_C] = item, ckind, a, b, c
    eng.cnt[K_HEAP] = size + 1
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(hf, hi, i, parent):
            break
        _swap(hf, hi, i, parent)
        i = parent


@njit(cache=True)
def _pop(eng, out):  # type: ignore[no-untyped-def]
    """Remove the first item into out (its integer columns); return its time."""
    hf = eng.hf[0]
    hi = eng.hi[0]
    size = eng.cnt[K_HEAP] - 1
    t = hf[0]
    out[:] = hi[0]
    eng.cnt[K_HEAP] = size
    if size > 0:
        hf[0] = hf[size]
        hi[0] = hi[size]
        i = 0
        while True:
            left = 2 * i + 1
            if left >= size:
                break
            best = left
            if left + 1 < size and _before(hf, hi, left + 1, left):
                best = left + 1
            if not _before(hf, hi, best, i):
                break
            _swap(hf, hi, i, best)
            i = best
    return t


# ---- protocol hooks: generic stubs resolved per State type -----------------------------


def _send(st: Any, eng: Any, lay: Any, p: Any, own: Any, t: Any) -> Any:
    raise NotImplementedError


def _arrived(st: Any, eng: Any, lay: Any, p: Any, m: Any, t: Any) -> Any:
    raise NotImplementedError


def _control(
    st: Any, eng: Any, lay: Any, p: Any, ckind: Any, a: Any, b: Any, c: Any, t: Any
) -> Any:
    raise NotImplementedError


def _settle(st: Any, eng: Any, lay: Any, p: Any, t: Any) -> Any:
    raise NotImplementedError


def _deliverable(st: Any, eng: Any, lay: Any, p: Any, m: Any) -> Any:
    raise NotImplementedError


def _delivered(st: Any, eng: Any, lay: Any, p: Any, m: Any, t: Any) -> Any:
    raise NotImplementedError


def _taken(st: Any, eng: Any, lay: Any, p: Any, m: Any, t: Any) -> Any:
    raise NotImplementedError


@njit(cache=True)
def default_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    for m in own:
        post(eng, lay, m, p, t, 0)
    return True


@njit(cache=True)
def default_arrived(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    return


@njit(cache=True)
def default_control(st, eng, lay, p, ckind, a, b, c, t):  # type: ignore[no-untyped-def]
    return


@njit(cache=True)
def default_settle(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    return


@njit(cache=True)
def default_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    return True


@njit(cache=True)
def default_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    return


@njit(cache=True)
def default_taken(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    return


_DEFAULTS = {
    "send": default_send,
    "arrived": default_arrived,
    "control": default_control,
    "settle": default_settle,
    "deliverable": default_deliverable,
    "delivered": default_delivered,
    "taken": default_taken,
}


def _hook(st: Any, name: str) -> Any:
    """The protocol module's compiled hook `c_<name>` for this State type, or the default.

    The overloads return the hook's Python function, compiled into its caller (a
    wrapper function per hook cost a fifth more compile time).
    """
    module = sys.modules[st.instance_class.__module__]
    return getattr(module, f"c_{name}", None) or _DEFAULTS[name]


@overload(_send)
def _ov_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    f = _hook(st, "send")
    return f.py_func


@overload(_arrived)
def _ov_arrived(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    f = _hook(st, "arrived")
    return f.py_func


@overload(_control)
def _ov_control(st, eng, lay, p, ckind, a, b, c, t):  # type: ignore[no-untyped-def]
    f = _hook(st, "control")
    return f.py_func


@overload(_settle)
def _ov_settle(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    f = _hook(st, "settle")
    return f.py_func


@overload(_deliverable)
def _ov_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    f = _hook(st, "deliverable")
    return f.py_func


@overload(_delivered)
def _ov_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    f = _hook(st, "delivered")
    return f.py_func


@overload(_taken)
def _ov_taken(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    f = _hook(st, "taken")
    return f.py_func


# ---- what protocols call -----------------------------------------------------------------


@njit(cache=True)
def control_latency(eng, lay, sender, dst):  # type: ignore[no-untyped-def]
    key = sender * max(lay.n, 1) + dst
    keys = lay.ch_keys
    i = np.searchsorted(keys, key)
    if i < len(keys) and keys[i] == key:
        return lay.ch_lat[i]
    if not np.isnan(lay.trace_lat):
        return lay.trace_lat
    return eng.default_latency


@njit(cache=True)
def _arrive_at(eng, lay, sender, dst, t, item, ckind, a, b, c):  # type: ignore[no-untyped-def]
    if eng.flags[F_FIFO_TRANSPORT]:
        key = sender * max(lay.n, 1) + dst
        last = eng.chan_last.get(key, -np.inf)
        if last > t:
            t = last
        eng.chan_last[key] = t
    order = LAST
    lam = LAST
    if item == ITEM_APP and not eng.flags[F_FIFO_TRANSPORT]:
        received = lay.recv_lseq[a]
        if received >= 0:
            order = received
            lam = lay.lamport[lay.ev_start[dst] + received - 1]
    push(eng, t, lam, ARRIVAL, dst, order, item, ckind, a, b, c)


@njit(cache=True)
def post(eng, lay, m, sender, t, ints):  # type: ignore[no-untyped-def]
    """Put application copy m on the network at t from `sender`, carrying `ints` integers."""
    eng.post_t[m] = t
    eng.pig[m] = ints
    latency = lay.latency[m]
    if np.isnan(latency):
        return  # lost: it never arrives
    _arrive_at(eng, lay, sender, lay.dst[m], t + latency, ITEM_APP, 0, m, 0, 0)


@njit(cache=True)
def control(eng, lay, sender, dst, t, ckind, ints, a, b, c):  # type: ignore[no-untyped-def]
    """Send a control message of kind `ckind` with payload (a, b, c) counted as `ints`."""
    eng.cnt[K_CONTROL] += 1
    eng.cnt[K_CONTROL_INTS] += ints
    latency = control_latency(eng, lay, sender, dst)
    _arrive_at(eng, lay, sender, dst, t + latency, ITEM_CTL, ckind, a, b, c)


@njit(cache=True)
def _schedule_step(eng, lay, p, t):  # type: ignore[no-untyped-def]
    lam = lay.lamport[lay.ev_start[p] + eng.pc[p]]
    push(eng, t, lam, STEP, p, 0, ITEM_STEP, 0, 0, 0, 0)


@njit(cache=True)
def _complete(eng, lay, p, t):  # type: ignore[no-untyped-def]
    eng.now[p] = t
    eng.pc[p] += 1
    k = eng.pc[p]
    e = lay.ev_start[p] + k
    if e < lay.ev_start[p + 1]:
        gap = 0.0 if lay.kind[e] == RECEIVE else lay.gap[e]
        _schedule_step(eng, lay, p, t + gap)
    else:
        eng.state[p] = DONE


@njit(cache=True)
def resume(eng, lay, p, t):  # type: ignore[no-untyped-def]
    """A blocked sender's send event completes at t."""
    eng.state[p] = READY
    _complete(eng, lay, p, t)


@njit(cache=True)
def bypass(eng, lay, m):  # type: ignore[no-untyped-def]
    """Orphans' messages, and self-addressed ones under a causal protocol, skip the protocol."""
    return lay.send_lseq[m] < 0 or (eng.flags[F_CAUSAL] != 0 and lay.src[m] == lay.dst[m])


@njit(cache=True)
def queue_append(head, tail, nxt, p, m):  # type: ignore[no-untyped-def]
    """Append m to p's FIFO queue, a linked list over message indices (head/tail per process)."""
    nxt[m] = -1
    if tail[p] >= 0:
        nxt[tail[p]] = m
    else:
        head[p] = m
    tail[p] = m


@njit(cache=True)
def queue_pop(head, tail, nxt, p):  # type: ignore[no-untyped-def]
    """Remove and return the first message of p's queue (which must not be empty)."""
    m = head[p]
    head[p] = nxt[m]
    if head[p] < 0:
        tail[p] = -1
    return m


@njit(cache=True)
def _unlink_pending(eng, p, m):  # type: ignore[no-untyped-def]
    before = eng.pprev[m]
    after = eng.pnext[m]
    if before >= 0:
        eng.pnext[before] = after
    else:
        eng.pend_head[p] = after
    if after >= 0:
        eng.pprev[after] = before
    else:
        eng.pend_tail[p] = before
    eng.pend_count[p] -= 1


@njit(cache=True)
def _record(eng, p, what, value):  # type: ignore[no-untyped-def]
    i = eng.cnt[K_EXEC]
    eng.ex_p[i] = p
    eng.ex_what[i] = what
    eng.ex_val[i] = value
    eng.cnt[K_EXEC] = i + 1


@njit(cache=True)
def _take(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    eng.take_t[m] = t
    eng.taken_by[m] = lay.lseq[lay.ev_start[p] + eng.pc[p]]
    _record(eng, p, EX_RECEIVE, m)
    if not bypass(eng, lay, m):
        _taken(st, eng, lay, p, m, t)


@njit(cache=True)
def _try_take(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    if not eng.flags[F_SELECTIVE]:
        if eng.rdy_head[p] < 0:
            return False
        m = queue_pop(eng.rdy_head, eng.rdy_tail, eng.rnext, p)
        _take(st, eng, lay, p, m, t)
        return True
    recorded = lay.take[lay.ev_start[p] + eng.pc[p]]
    source = lay.src[recorded] if recorded >= 0 else EXTERNAL
    m = eng.pend_head[p]
    while m >= 0:
        following = eng.pnext[m]
        if lay.src[m] == source:
            skip = bypass(eng, lay, m)
            if skip or _deliverable(st, eng, lay, p, m):
                _unlink_pending(eng, p, m)
                eng.del_t[m] = t
                if not skip:
                    _delivered(st, eng, lay, p, m, t)
                _take(st, eng, lay, p, m, t)
                _settle(st, eng, lay, p, t)
                return True
        m = following
    return False


@njit(cache=True)
def notify(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    """Protocol state at p changed: deliver what can be delivered, wake a blocked receive."""
    _settle(st, eng, lay, p, t)
    if not eng.flags[F_SELECTIVE]:
        # the earliest-arrived deliverable copy, then the scan starts again from the
        # beginning (docs/replay.md): a delivery may enable an earlier copy
        m = eng.pend_head[p]
        while m >= 0:
            following = eng.pnext[m]
            skip = bypass(eng, lay, m)
            if skip or _deliverable(st, eng, lay, p, m):
                _unlink_pending(eng, p, m)
                eng.del_t[m] = t
                queue_append(eng.rdy_head, eng.rdy_tail, eng.rnext, p, m)
                if not skip:  # the state changed: held-back control messages, then copies
                    _delivered(st, eng, lay, p, m, t)
                    _settle(st, eng, lay, p, t)
                    following = eng.pend_head[p]
            m = following
    if eng.state[p] == WAIT_RECEIVE and _try_take(st, eng, lay, p, t):
        eng.state[p] = READY
        _complete(eng, lay, p, t)


# ---- a pool of fixed-width integer rows (a send event's snapshot, shared by its copies) ----

Pool = namedtuple("Pool", "rows free refs")


def new_pool(width: int, slots: int = 64) -> Any:
    rows = List()
    rows.append(np.zeros((slots, max(width, 1)), np.int64))
    refs = List()
    refs.append(np.zeros(slots, np.int64))
    free = List()
    for slot in range(slots - 1, -1, -1):
        free.append(slot)
    return Pool(rows, free, refs)


@njit(cache=True)
def pool_take(pool, holders):  # type: ignore[no-untyped-def]
    """A free row for `holders` copies (released when each has called pool_release)."""
    if len(pool.free) == 0:
        old = pool.rows[0]
        size = old.shape[0]
        grown = np.zeros((2 * size, old.shape[1]), np.int64)
        grown[:size] = old
        pool.rows[0] = grown
        refs = np.zeros(2 * size, np.int64)
        refs[:size] = pool.refs[0]
        pool.refs[0] = refs
        for slot in range(2 * size - 1, size - 1, -1):
            pool.free.append(slot)
    slot = pool.free.pop()
    pool.refs[0][slot] = holders
    return slot


@njit(cache=True)
def pool_release(pool, slot):  # type: ignore[no-untyped-def]
    refs = pool.refs[0]
    refs[slot] -= 1
    if refs[slot] == 0:
        pool.free.append(slot)


@njit(cache=True)
def send_event(lay, m):  # type: ignore[no-untyped-def]
    """The index of the send event of copy m."""
    return lay.ev_start[lay.src[m]] + lay.send_lseq[m] - 1


# ---- the loop ----------------------------------------------------------------------------


@njit(cache=True)
def _arrival(st, eng, lay, p, t, row):  # type: ignore[no-untyped-def]
    item = row[H_ITEM]
    if item == ITEM_CTL:
        _control(st, eng, lay, p, row[H_CKIND], row[H_A], row[H_B], row[H_C], t)
    else:
        m = row[H_A]
        # post + latency, also when a FIFO channel hands m over later (docs/replay.md)
        eng.arr_t[m] = eng.post_t[m] + lay.latency[m] if item == ITEM_APP else t
        if item == ITEM_APP and not bypass(eng, lay, m):
            _arrived(st, eng, lay, p, m, t)
        eng.pnext[m] = -1
        eng.pprev[m] = eng.pend_tail[p]
        if eng.pend_tail[p] >= 0:
            eng.pnext[eng.pend_tail[p]] = m
        else:
            eng.pend_head[p] = m
        eng.pend_tail[p] = m
        eng.pend_count[p] += 1
    notify(st, eng, lay, p, t)
    if eng.pend_count[p] > eng.cnt[K_MAX_BUFFER]:
        eng.cnt[K_MAX_BUFFER] = eng.pend_count[p]


@njit(cache=True)
def _step(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    e = lay.ev_start[p] + eng.pc[p]
    kind = lay.kind[e]
    if kind == INTERNAL:
        _record(eng, p, EX_INTERNAL, e)
        _complete(eng, lay, p, t)
    elif kind == SEND:
        lo = lay.copy_start[e]
        hi = lay.copy_start[e + 1]
        causal = eng.flags[F_CAUSAL] != 0
        own = 0
        for i in range(lo, hi):
            m = lay.copy_msg[i]
            eng.send_t[m] = t
        for i in range(lo, hi):
            m = lay.copy_msg[i]
            d = lay.dst[m]
            if d < 0:
                eng.post_t[m] = t  # to a process without events: lost
                eng.pig[m] = 0
            elif causal and d == p:
                post(eng, lay, m, p, t, 0)
            else:
                eng.scratch[own] = m
                own += 1
        if eng.flags[F_P2P]:
            for i in range(lo, hi):
                _record(eng, p, EX_SEND_COPY, lay.copy_msg[i])
        else:
            _record(eng, p, EX_SEND_EVENT, e)
        if own == 0 or _send(st, eng, lay, p, eng.scratch[:own], t):
            _complete(eng, lay, p, t)
        else:
            eng.state[p] = WAIT_SEND
    else:
        eng.state[p] = WAIT_RECEIVE
        notify(st, eng, lay, p, t)


@njit(cache=True)
def run_loop(st, eng, lay):  # type: ignore[no-untyped-def]
    """Run the programs to the end (or until every process waits for ever)."""
    n = lay.n
    for p in range(n):
        e = lay.ev_start[p]
        if e < lay.ev_start[p + 1]:
            first = lay.gap[e] if lay.kind[e] != RECEIVE else 0.0
            _schedule_step(eng, lay, p, lay.start + first)
    for m in range(len(lay.arrival)):
        at = lay.arrival[m]
        d = lay.dst[m]
        if not np.isnan(at) and d >= 0:
            lam = lay.lamport[lay.ev_start[d] + lay.recv_lseq[m] - 1]
            push(eng, at, lam, ARRIVAL, d, lay.recv_lseq[m], ITEM_EXT, 0, m, 0, 0)
    row = np.empty(_H_WIDTH, np.int64)
    while eng.cnt[K_HEAP] > 0:
        t = _pop(eng, row)
        p = row[H_KEY]
        if row[H_ITEM] == ITEM_STEP:
            _step(st, eng, lay, p, t)
        else:
            _arrival(st, eng, lay, p, t, row)


def _new_engine(trace: CompiledTrace, flags: Sequence[bool], default_latency: float) -> Any:
    lay = trace.layout
    n = trace.n
    count = len(trace.msg_id)
    events = int(lay.ev_start[-1])
    copies = np.diff(lay.copy_start)
    hf = List()
    hf.append(np.empty(max(64, 2 * n), np.float64))
    hi = List()
    hi.append(np.empty((max(64, 2 * n), _H_WIDTH), np.int64))
    chan_last = Dict.empty(key_type=types.int64, value_type=types.float64)

    def floats() -> np.ndarray:
        return np.full(count, np.nan)

    def ints(size: int, value: int = -1) -> np.ndarray:
        return np.full(size, value, dtype=np.int64)

    return Eng(
        np.asarray(flags, dtype=np.int64),
        floats(), floats(), floats(), floats(), floats(),
        ints(count), ints(count),
        ints(n, 0), ints(n, READY), np.full(n, lay.start),
        ints(n), ints(n), ints(n, 0), ints(count), ints(count),
        ints(n), ints(n), ints(count),
        np.zeros(6, dtype=np.int64), hf, hi, chan_last,
        ints(int(copies.max()) if len(copies) else 1, 0),
        ints(events + len(lay.copy_msg) + 1, 0),
        ints(events + len(lay.copy_msg) + 1, 0),
        ints(events + len(lay.copy_msg) + 1, 0),
        float(default_latency),
    )  # fmt: skip


# ---- the Python entry point --------------------------------------------------------------


def replay_compiled(
    trace: CompiledTrace,
    name: str,
    params: Mapping[str, str] | None = None,
    selective: bool = False,
    default_latency: float = 1.0,
) -> Run:
    """Replay `trace` under protocol `name` with the compiled loop (same result as `replay`)."""
    from causal_spark.protocols import protocol
    from causal_spark.protocols.base import check_params

    cls = protocol(name)
    module = sys.modules[cls.__module__]
    given = dict(params or {})
    check_params(cls, given)
    state, reason, fifo_transport = module.make_state(trace, given)
    if reason is not None:
        return _result(trace, None, cls, state, STATUS_NOT_APPLICABLE, reason, None)
    flags = (cls.causal, fifo_transport, cls.point_to_point, selective)
    eng = _new_engine(trace, flags, default_latency)
    run_loop(state, _eng_ref(eng), _layout_ref(trace.layout))
    lay = trace.layout
    pc = eng.pc
    length = np.diff(lay.ev_start)
    unfinished = np.flatnonzero(pc < length)
    if len(unfinished):
        lost = trace.lost
        status = STATUS_STALLED if lost else STATUS_DEADLOCK
        blocked = ", ".join(
            f"{trace.names[p]} at #{lay.lseq[lay.ev_start[p] + pc[p]]}" for p in unfinished[:5]
        )
        reason = f"{len(unfinished)} process(es) wait for ever: {blocked}"
        if status == STATUS_STALLED:
            reason += f" (the log lost {lost} message(s))"
        return _result(trace, eng, cls, state, status, reason, _verify(trace, eng, cls))
    return _result(trace, eng, cls, state, STATUS_OK, None, _verify(trace, eng, cls))


def _result(
    trace: CompiledTrace,
    eng: Any,
    cls: Any,
    state: Any,
    status: str,
    reason: str | None,
    verified: bool | None,
) -> Run:
    lay = trace.layout
    count = len(trace.msg_id)
    if eng is None:
        nan = np.full(count, np.nan)
        none = np.full(count, -1, dtype=np.int64)
        figures: dict[str, float | int | None] = {name: None for name in _FIGURES}
        return Run(status, reason, verified, figures, nan, nan, nan, nan, nan, none, none,
                   np.full(count, np.nan))  # fmt: skip
    app = lay.send_lseq >= 0
    deliv, arr = eng.del_t, eng.arr_t
    both = ~np.isnan(deliv) & ~np.isnan(arr)
    held_mask = app & both & (deliv > arr)
    held = (deliv - arr)[held_mask]
    pig = eng.pig[app]
    ints = pig[pig >= 0]
    timed = app & ~np.isnan(eng.post_t) & ~np.isnan(eng.send_t)
    sender_delay = _sender_delay(state, float((eng.post_t - eng.send_t)[timed].sum()))
    done = [
        lay.etime[lay.ev_start[p] : lay.ev_start[p] + k].max() for p, k in enumerate(eng.pc) if k
    ]
    makespan, ratio = makespan_figures(
        status,
        float(eng.now.max()) if trace.n else trace.start,
        float(max(done, default=trace.start)),
        trace.start,
        trace.end,
    )
    posted = ~np.isnan(eng.post_t)
    taken = ~np.isnan(eng.take_t)
    delivered = ~np.isnan(deliv)
    figures = {
        "app_messages": int(app.sum()),
        "control_messages": int(eng.cnt[K_CONTROL]),
        "control_ints": int(eng.cnt[K_CONTROL_INTS]),
        "piggyback_ints_total": int(ints.sum()),
        "piggyback_ints_mean": float(ints.mean()) if len(ints) else 0.0,
        "piggyback_ints_max": int(ints.max()) if len(ints) else 0,
        "piggyback_bytes_total": 8 * int(ints.sum()),
        "held_back": len(held),
        "holdback_delay_total": float(held.sum()),
        "holdback_delay_mean": float(held.mean()) if len(held) else None,
        "holdback_delay_p99": float(np.percentile(held, 99)) if len(held) else None,
        "holdback_delay_max": float(held.max()) if len(held) else None,
        "sender_delay_total": sender_delay,
        "max_holdback_buffer": int(eng.cnt[K_MAX_BUFFER]),
        "makespan": makespan,
        "makespan_ratio": ratio,
        # where each copy ends (docs/replay.md): besides taken, exactly one of these
        "lost": int((app & posted & np.isnan(lay.latency)).sum()),
        "undelivered": int((~np.isnan(arr) & ~delivered).sum()),
        "untaken": int((delivered & ~taken).sum()),
        "unsent": int((app & ~posted).sum()),
    }
    wrong = accounting_error(figures, int(taken.sum()), count)
    if wrong is not None:
        status, reason = STATUS_ERROR, wrong
    held_back = np.where(both, (deliv > arr).astype(np.float64), np.nan)
    return Run(
        status=status,
        reason=reason,
        verified=verified,
        figures=figures,
        send_time=eng.send_t,
        post_time=eng.post_t,
        arrival_time=eng.arr_t,
        delivery_time=deliv,
        take_time=eng.take_t,
        taken_by=eng.taken_by,
        piggyback=eng.pig,
        held_back=held_back,  # 1.0 / 0.0 / NaN
    )


_FIGURES = (
    "app_messages", "control_messages", "control_ints", "piggyback_ints_total",
    "piggyback_ints_mean", "piggyback_ints_max", "piggyback_bytes_total", "held_back",
    "holdback_delay_total", "holdback_delay_mean", "holdback_delay_p99", "holdback_delay_max",
    "sender_delay_total", "max_holdback_buffer", "makespan", "makespan_ratio", "lost",
    "undelivered", "untaken", "unsent",
)  # fmt: skip


def _sender_delay(state: Any, post_minus_send: float) -> float:
    module = sys.modules[type(state).__module__]
    own = getattr(module, "sender_delay", None)
    return float(own(state, post_minus_send)) if own is not None else post_minus_send


# ---- verification ------------------------------------------------------------------------


def _verify(trace: CompiledTrace, eng: Any, cls: Any) -> bool | None:
    if cls.name == "none":
        return None if trace.skewed else _reproduces_recording(trace, eng)
    if cls.total_order:
        return _one_total_order(trace, eng)
    if cls.causal or cls.fifo:
        return _no_violation(trace, eng, cls.causal)
    return None


def _close(a: np.ndarray, b: np.ndarray) -> Any:
    missing = np.isnan(a) | np.isnan(b)
    same_missing = np.isnan(a) & np.isnan(b)
    scale = np.maximum(1.0, np.maximum(np.abs(np.nan_to_num(a)), np.abs(np.nan_to_num(b))))
    near = np.abs(np.nan_to_num(a) - np.nan_to_num(b)) <= 1e-9 * scale
    return np.where(missing, same_missing, near)


def _reproduces_recording(trace: CompiledTrace, eng: Any) -> bool:
    lay = trace.layout
    got = lay.recv_lseq >= 0
    if not (eng.taken_by[got] == lay.recv_lseq[got]).all():
        return False
    if not _close(eng.take_t[got], lay.rec_recv[got]).all():
        return False
    sent = lay.send_lseq >= 0
    return bool(_close(eng.send_t[sent], lay.rec_send[sent]).all())


def ranges(first: np.ndarray, count: np.ndarray) -> Any:
    """The concatenation of arange(first[i], first[i] + count[i]) for every i."""
    total = int(count.sum())
    ends = np.cumsum(count)
    return np.arange(total, dtype=np.int64) + np.repeat(first - (ends - count), count)


def _executed(eng: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    size = int(eng.cnt[K_EXEC])
    order = np.argsort(eng.ex_p[:size], kind="stable")
    return eng.ex_p[:size][order], eng.ex_what[:size][order], eng.ex_val[:size][order]


def _one_total_order(trace: CompiledTrace, eng: Any) -> bool:
    lay = trace.layout
    if not len(trace.msg_id):
        return True
    ex_p, what, val = _executed(eng)
    pick = (what == EX_RECEIVE) & (lay.send_lseq[np.where(what == EX_RECEIVE, val, 0)] >= 0)
    procs = ex_p[pick]
    msgs = val[pick]
    # a multicast is one send event, numbered by its (sender, lseq)
    key = lay.src[msgs] * (int(lay.lseq.max(initial=0)) + 1) + lay.send_lseq[msgs]
    _, group = np.unique(key, return_inverse=True)
    return bool(_one_order(procs, group.astype(np.int64), trace.n, int(group.max(initial=-1)) + 1))


@njit(cache=True)
def _one_order(procs, group, n, groups):  # type: ignore[no-untyped-def]
    """Every two processes take their common groups in one order (procs sorted, stable)."""
    start = np.zeros(n + 1, np.int64)
    for p in procs:
        start[p + 1] += 1
    for p in range(n):
        start[p + 1] += start[p]
    position = np.full(groups, -1, np.int64)
    for q in range(n):
        for i in range(start[q], start[q + 1]):
            position[group[i]] = i - start[q]
        for p in range(q + 1, n):
            last = -1
            for i in range(start[p], start[p + 1]):
                at = position[group[i]]
                if at >= 0:
                    if at < last:
                        return False
                    last = at
        for i in range(start[q], start[q + 1]):
            position[group[i]] = -1
    return True


def _no_violation(trace: CompiledTrace, eng: Any, causal: bool) -> bool:
    """The detector's Prop. 2 kernel over the vector clocks of the replayed execution."""
    lay = trace.layout
    ex_p, what, val = _executed(eng)
    rows = len(ex_p)
    n = trace.n
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ex_p, minlength=n), out=start[1:])
    lseq = np.arange(rows, dtype=np.int64) - start[ex_p] + 1
    # where each message was sent in the replayed execution
    count = len(trace.msg_id)
    sent_p = np.full(count, -1, dtype=np.int64)
    sent_lseq = np.full(count, -1, dtype=np.int64)
    copy = what == EX_SEND_COPY
    sent_p[val[copy]] = ex_p[copy]
    sent_lseq[val[copy]] = lseq[copy]
    event = np.flatnonzero(what == EX_SEND_EVENT)
    if len(event):
        g = val[event]
        per = lay.copy_start[g + 1] - lay.copy_start[g]
        rows_of = np.repeat(event, per)
        msgs = lay.copy_msg[ranges(lay.copy_start[g], per)]
        sent_p[msgs] = ex_p[rows_of]
        sent_lseq[msgs] = lseq[rows_of]
    recv = np.flatnonzero(what == EX_RECEIVE)
    recv = recv[sent_p[val[recv]] >= 0]
    if not len(recv):
        return True
    send_pidx = np.full(rows, -1, dtype=np.int64)
    send_lseq = np.full(rows, -1, dtype=np.int64)
    send_pidx[recv] = sent_p[val[recv]]
    send_lseq[recv] = sent_lseq[val[recv]]
    vc, _ = vector_clocks(ex_p, lseq, send_pidx, send_lseq, n)
    for d in np.unique(ex_p[recv]).tolist():
        rs = recv[ex_p[recv] == d]
        msgs = val[rs]
        src = sent_p[msgs]
        s_lseq = sent_lseq[msgs]
        knows = vc[start[src] + s_lseq - 1, d].astype(np.int64)
        causal_hit, fifo_hit = overtaking(d, src, s_lseq, vc[rs], knows)
        hit = (causal_hit >= 0) & (src != d) if causal else fifo_hit >= 0
        if hit.any():
            return False
    return True


# ---- compiling ahead of the first group ----------------------------------------------------


def _tiny_trace() -> CompiledTrace:
    """P sends m1 to Q, Q replies m2: two broadcasts, so every protocol runs its loop."""
    return layout(
        "warm-up",
        ["P", "Q"],
        np.asarray([0, 0, 0, 1, 1, 1]),
        np.asarray([1, 2, 3, 1, 2, 3]),
        ["internal", "send", "receive", "receive", "send", "internal"],
        np.asarray([0.0, 1.0, 4.0, 2.0, 3.0, 5.0]),
        np.asarray([1, 2, 5, 3, 4, 6]),
        [None, "m1", "m2", "m1", "m2", None],
        np.asarray([-1, 1, 1, 0, 0, -1]),
    )


def compile_protocol(name: str) -> str:
    """Compile (or load from the disk cache) the loop for protocol `name`; returns the name."""
    trace = _tiny_trace()
    for selective in (False, True):
        replay_compiled(trace, name, {}, selective)
    return name


def warm_up(names: Sequence[str], processes: int | None = None) -> None:
    """Compile the loop for `names` into the disk cache, protocols side by side in processes.

    A cold compile takes 10-30 s per protocol. Python workers on this machine
    (Spark local mode, the tests) then load the cached code in well under a
    second instead of each compiling every protocol it meets. Executors on
    other machines compile (once per machine) on their first group. With a
    warm cache this only loads the code here (about 0.3 s per protocol).
    """
    import concurrent.futures
    import multiprocessing
    import time

    if not names:
        return
    began = time.perf_counter()
    compile_protocol(names[0])
    rest = list(names[1:])
    workers = max(1, min(len(rest), processes or os.cpu_count() or 1))
    if time.perf_counter() - began > _CACHED_LOAD_SECONDS and workers > 1:
        context = multiprocessing.get_context("spawn")  # no fork of a process holding a JVM
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            list(pool.map(compile_protocol, rest))
    for name in rest:  # load here (and recompile what a racing cache-index write lost)
        compile_protocol(name)


# loading one protocol's loop from a warm cache takes a fraction of this; compiling, 10 s+
_CACHED_LOAD_SECONDS = 3.0
