"""The compiled replay engine: `replay_engine`'s model as one Numba event loop (docs/replay.md).

`replay_engine` is the reference: plain Python, one object per message, easy
to read against the sources. This module runs the same model, event for event,
over flat arrays, so one (trace, protocol) group replays at compiled speed
inside the Spark task:

- `replay_layout` lays one trace's rows out (`CompiledTrace`, re-exported here);
- `replay_compiled(trace, name, params, selective, default_latency)` runs
  protocol `name` and returns a `CompiledRun`: status, figures, verification,
  and per-message columns as arrays (NaN / -1 where the reference has None).

Each protocol module keeps its reference class and, next to it, its compiled
form: a `State` namedtuple of arrays, `make_state(trace, params)` and the
hooks `c_send`, `c_arrived`, `c_control`, `c_settle`, `c_deliverable`,
`c_delivered`, `c_taken` (absent hooks take the defaults below, which are
`none`'s behaviour). The loop is compiled once per protocol (its State type)
and cached on disk. Protocol hooks call back `post`, `control`, `resume` and
`notify`, and read `eng.pend_head` / `eng.pnext` for the pending copies.

The heap orders items exactly as the reference does: (time, recorded Lamport
clock, arrival before step, process, order, insertion), packed in three keys:
the time, lamport * 2 + priority, and process << 40 | (the recorded receive's
lseq, or the insertion number for items that have none). Its entries carry a
payload slot (item kind, control kind and three integers); a protocol that
needs more keeps the payload in its own state and sends its index.

Per message the engine holds four times (send, post, delivery, take), the
receive that took it, its piggybacked integers, its place in a pending or
ready list and a state byte; arrival is post + latency (an orphan's, its
recorded receive), computed when asked. The verification of fifo and the
causal protocols runs as the replay takes messages (`V_*`): per channel the
latest send taken (FIFO), or the receiver's vector clock and the sender's
clock carried by each send event still in flight (causal order, Schiper, Eggli
& Sandoz Proposition 2), so no vector clock is kept per event. Total order and
`none`'s exactness are checked from the per-message columns afterwards.

Numba keys a function's disk cache on its own source file; the loop here
inlines the protocols' hooks, and the protocols' helpers call the loop's
functions, so `_WingStampedLocator` stamps both with all of their files:
editing either recompiles what depends on it.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections import namedtuple
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numba import njit, types
from numba.core import caching
from numba.experimental import structref
from numba.extending import intrinsic, overload
from numba.np.numpy_support import carray

from causal_spark.replay_engine import (
    EXTERNAL,
    INTERNAL,
    RECEIVE,
    SEND,
    STATUS_DEADLOCK,
    STATUS_ERROR,
    STATUS_NOT_APPLICABLE,
    STATUS_OK,
    STATUS_STALLED,
    accounting_error,
    makespan_figures,
)
from causal_spark.replay_layout import CompiledTrace, layout

__all__ = ["CompiledRun", "CompiledTrace", "layout", "replay_compiled", "warm_up"]


class _WingStampedLocator:
    """Numba's usual cache locator for the loop's and the protocols' functions, stamped with
    all of their files: the loop inlines the protocols' hooks and the protocols' helpers
    call the loop's, so editing any of them recompiles what depends on it. The stamp's hash
    is in the cache files' names too, so an index written by older code (whose pickled
    types may name classes that are gone) is never read."""

    _here = os.path.dirname(os.path.abspath(__file__))
    _protocols = os.path.join(_here, "protocols")

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @classmethod
    def _files(cls) -> list[str]:
        found = sorted(
            os.path.join(cls._protocols, name)
            for name in os.listdir(cls._protocols)
            if name.endswith(".py")
        )
        return [os.path.join(cls._here, "replay_loop.py"), *found]

    @classmethod
    def _wing_stamp(cls) -> tuple[tuple[str, float, int], ...]:
        out = []
        for path in cls._files():
            st = os.stat(path)
            out.append((os.path.basename(path), st.st_mtime, st.st_size))
        return tuple(out)

    def get_source_stamp(self) -> Any:
        return (self._inner.get_source_stamp(), self._wing_stamp())

    def get_disambiguator(self) -> str:
        digest = zlib.crc32(repr(self._wing_stamp()).encode())
        return f"{self._inner.get_disambiguator()}-{digest:08x}"

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if os.path.abspath(py_file) not in cls._files():
            return None
        for base in _LOCATORS:
            if base is not cls:
                inner = base.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner)
        return None


_LOCATORS: list[Any] = caching.CacheImpl._locator_classes
if _WingStampedLocator not in _LOCATORS:
    _LOCATORS.insert(0, _WingStampedLocator)

# program states, heap priorities and item kinds (as in replay_engine)
READY, WAIT_RECEIVE, WAIT_SEND, DONE = 0, 1, 2, 3
ARRIVAL, STEP = 0, 1
ITEM_STEP, ITEM_APP, ITEM_EXT, ITEM_CTL = 0, 1, 2, 3
LAST = 1 << 61  # the Lamport clock of items that stand for no recorded event
_LOW = 40  # bits of the insertion number or receive lseq in the third heap key
# a message's state
M_NONE, M_POSTED, M_PENDING, M_READY, M_TAKEN = 0, 1, 2, 3, 4
# engine counters
(K_CONTROL, K_CONTROL_INTS, K_MAX_BUFFER, K_SEQ, K_HEAP, K_SLOTS, K_FREE, K_VIOLATED,
 K_HEAP_CAP, K_SLOTS_CAP) = range(10)  # fmt: skip
# flags
F_CAUSAL, F_FIFO_TRANSPORT, F_P2P, F_SELECTIVE, F_VERIFY = range(5)
# what the replay checks as it runs (flags[F_VERIFY])
V_NONE, V_FIFO, V_CAUSAL = 0, 1, 2
# what a protocol's `c_next` answers when it does not know the one copy it may deliver
SCAN = -2

Eng = namedtuple(
    "Eng",
    "flags send_t post_t del_t take_t mst taken_by pig pnext pprev "
    "pc state now pend_head pend_tail pend_count pend_bypass rdy_head rdy_tail cnt "
    "ht hk1 hk2 hs q_item q_kind q_a q_b q_c q_free chan_last scratch default_latency "
    "ex_count ex_send chan_max vc vpool vslot",
)


# The loop's functions take the trace, the engine state and pools as StructRefs: one pointer
# per call. As namedtuples of dozens of arrays they were passed member by member, hundreds of
# machine words per call, which cost more than the work of an event; a StructRef's fields can
# also be replaced (a heap or a pool grows). Python keeps the namedtuples (same arrays).


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


@structref.register
class _PoolType(types.StructRef):
    def preprocess_fields(self, fields: Any) -> Any:
        return tuple((name, types.unliteral(typ)) for name, typ in fields)  # type: ignore[no-untyped-call]


class PoolRef(structref.StructRefProxy):
    """Fixed-width integer rows, each shared by some holders (`new_pool`)."""


@structref.register
class _GridType(types.StructRef):
    def preprocess_fields(self, fields: Any) -> Any:
        return tuple((name, types.unliteral(typ)) for name, typ in fields)  # type: ignore[no-untyped-call]


class GridRef(structref.StructRefProxy):
    """A fixed number of integer rows whose width doubles on demand (`new_grid`)."""


_LAYOUT_FIELDS = (
    "n", "ev_start", "kind", "lamport", "etime", "copy_start", "take", "src", "dst",
    "send_ev", "recv_ev", "latency", "ch_keys", "ch_lat", "trace_lat", "start", "messages",
)  # fmt: skip
structref.define_proxy(LayoutRef, _LayoutType, list(_LAYOUT_FIELDS))  # type: ignore[no-untyped-call]
# the heap's and its payloads' columns grow: the engine holds each as an array (`<name>_a`,
# which keeps it alive) and the pointer the loop indexes (`<name>`)
_GROWING = ("ht", "hk1", "hk2", "hs", "q_item", "q_kind", "q_a", "q_b", "q_c", "q_free")
_ENG_FIELDS = [*Eng._fields, *(f"{name}_a" for name in _GROWING)]
structref.define_proxy(EngRef, _EngType, _ENG_FIELDS)  # type: ignore[no-untyped-call]
# rows, refs and free are the arrays (they keep the memory); data, refs_p and free_p their
# pointers, which the loop indexes
structref.define_proxy(  # type: ignore[no-untyped-call]
    PoolRef, _PoolType, ["rows", "refs", "free", "top", "width", "data", "refs_p", "free_p"]
)


def _intrinsic(fn: Any) -> Any:
    """`numba.extending.intrinsic`, seen by mypy as what it is called with in compiled code
    (the typing context is Numba's argument, not the caller's)."""
    return intrinsic(fn)


@_intrinsic
def _address(typingctx, array):  # type: ignore[no-untyped-def]
    """The data pointer of a contiguous array: the loop indexes it without counting
    references (the arrays stay alive in the Python-side namedtuple while it runs)."""
    sig = types.CPointer(array.dtype)(array)  # type: ignore[no-untyped-call]

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return context.make_array(array)(context, builder, args[0]).data

    return sig, codegen


# Per-message, per-event and per-process columns are raw pointers in the StructRefs: each
# access to an array member of a StructRef counts a reference (an atomic increment and
# decrement), which cost more than the work of most events. The arrays that grow (the heap,
# its payloads, pools) stay arrays.


@njit(cache=True)
def _layout_ref(lay):  # type: ignore[no-untyped-def]
    return LayoutRef(  # type: ignore[no-untyped-call]
        lay.n, _address(lay.ev_start), _address(lay.kind), _address(lay.lamport),
        _address(lay.etime), _address(lay.copy_start), _address(lay.take), _address(lay.src),
        _address(lay.dst), _address(lay.send_ev), _address(lay.recv_ev),
        _address(lay.latency), lay.ch_keys, lay.ch_lat, lay.trace_lat, lay.start,
        len(lay.src),
    )  # fmt: skip


@njit(cache=True)
def _eng_ref(e):  # type: ignore[no-untyped-def]
    return EngRef(  # type: ignore[no-untyped-call]
        _address(e.flags), _address(e.send_t), _address(e.post_t), _address(e.del_t),
        _address(e.take_t), _address(e.mst), _address(e.taken_by), _address(e.pig),
        _address(e.pnext), _address(e.pprev), _address(e.pc), _address(e.state),
        _address(e.now), _address(e.pend_head), _address(e.pend_tail),
        _address(e.pend_count), _address(e.pend_bypass), _address(e.rdy_head),
        _address(e.rdy_tail), _address(e.cnt),
        _address(e.ht), _address(e.hk1), _address(e.hk2), _address(e.hs), _address(e.q_item),
        _address(e.q_kind), _address(e.q_a), _address(e.q_b), _address(e.q_c),
        _address(e.q_free), _address(e.chan_last), _address(e.scratch), e.default_latency,
        _address(e.ex_count), _address(e.ex_send), _address(e.chan_max), e.vc, e.vpool,
        _address(e.vslot), e.ht, e.hk1, e.hk2, e.hs, e.q_item, e.q_kind, e.q_a, e.q_b, e.q_c,
        e.q_free,
    )  # fmt: skip


structref.define_proxy(GridRef, _GridType, ["cells", "width", "data"])  # type: ignore[no-untyped-call]


@njit(cache=True)
def _pool_ref(rows, refs, free):  # type: ignore[no-untyped-def]
    return PoolRef(  # type: ignore[no-untyped-call]
        rows, refs, free, len(free), rows.shape[1], _address(rows.ravel()), _address(refs),
        _address(free),
    )  # fmt: skip


# ---- a pool of fixed-width integer rows (a send event's snapshot, shared by its copies) ----


def new_pool(width: int, slots: int = 64, dtype: Any = np.int64) -> Any:
    """A pool of `slots` rows of `width` integers (it doubles when full)."""
    free = np.arange(slots - 1, -1, -1, dtype=np.int64)
    return _pool_ref(np.zeros((slots, max(width, 1)), dtype), np.zeros(slots, np.int64), free)


@njit(cache=True)
def _grow_pool(pool):  # type: ignore[no-untyped-def]
    size = pool.rows.shape[0]
    grown = np.zeros((2 * size, pool.width), pool.rows.dtype)
    grown[:size] = pool.rows
    pool.rows = grown
    pool.data = _address(grown.ravel())
    refs = np.zeros(2 * size, np.int64)
    refs[:size] = pool.refs
    pool.refs = refs
    pool.refs_p = _address(refs)
    free = np.empty(2 * size, np.int64)
    for i in range(size):
        free[i] = 2 * size - 1 - i
    pool.free = free
    pool.free_p = _address(free)
    pool.top = size


@njit(cache=True, inline="always")
def pool_take(pool, holders):  # type: ignore[no-untyped-def]
    """A free row for `holders` copies (released when each has called pool_release). Rows
    seen through `pool_row` before this call may have moved: take them again after it."""
    if pool.top == 0:
        _grow_pool(pool)
    pool.top -= 1
    slot = pool.free_p[pool.top]
    pool.refs_p[slot] = holders
    return slot


@njit(cache=True, inline="always")
def pool_release(pool, slot):  # type: ignore[no-untyped-def]
    pool.refs_p[slot] -= 1
    if pool.refs_p[slot] == 0:
        pool.free_p[pool.top] = slot
        pool.top += 1


@_intrinsic
def _shifted(typingctx, pointer, offset):  # type: ignore[no-untyped-def]
    sig = pointer(pointer, types.intp)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.gep(args[0], [args[1]])

    return sig, codegen


@njit(cache=True, inline="always")
def pool_row(pool, slot):  # type: ignore[no-untyped-def]
    """Row `slot` of the pool, as a view of its memory (valid until the next pool_take)."""
    return carray(_shifted(pool.data, slot * pool.width), pool.width)


# ---- a grid: one growable row per process (a protocol's per-process heap) -----------------


def new_grid(rows: int, width: int = 16) -> Any:
    """`rows` rows of `width` int64, widened by `grid_widen`."""
    return _grid_ref(np.zeros((max(rows, 1), width), np.int64))


@njit(cache=True)
def _grid_ref(cells):  # type: ignore[no-untyped-def]
    return GridRef(cells, cells.shape[1], _address(cells.ravel()))  # type: ignore[no-untyped-call]


@njit(cache=True)
def grid_widen(grid):  # type: ignore[no-untyped-def]
    """Double the width of every row (rows seen through `grid_row` before move)."""
    rows, width = grid.cells.shape
    grown = np.zeros((rows, 2 * width), np.int64)
    grown[:, :width] = grid.cells
    grid.cells = grown
    grid.width = 2 * width
    grid.data = _address(grown.ravel())


@njit(cache=True, inline="always")
def grid_row(grid, row):  # type: ignore[no-untyped-def]
    """Row `row` of the grid, as a view of its memory (valid until it widens)."""
    return carray(_shifted(grid.data, row * grid.width), grid.width)


# ---- the heap --------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _before(t1, a1, b1, t2, a2, b2):  # type: ignore[no-untyped-def]
    if t1 != t2:
        return t1 < t2
    if a1 != a2:
        return a1 < a2
    return b1 < b2


@njit(cache=True)
def _grown(values):  # type: ignore[no-untyped-def]
    out = np.empty(2 * len(values), values.dtype)
    out[: len(values)] = values
    return out


@njit(cache=True)
def _grow_heap(eng):  # type: ignore[no-untyped-def]
    eng.ht_a = _grown(eng.ht_a)
    eng.ht = _address(eng.ht_a)
    eng.hk1_a = _grown(eng.hk1_a)
    eng.hk1 = _address(eng.hk1_a)
    eng.hk2_a = _grown(eng.hk2_a)
    eng.hk2 = _address(eng.hk2_a)
    eng.hs_a = _grown(eng.hs_a)
    eng.hs = _address(eng.hs_a)
    eng.cnt[K_HEAP_CAP] = len(eng.ht_a)


@njit(cache=True)
def _grow_slots(eng):  # type: ignore[no-untyped-def]
    eng.q_item_a = _grown(eng.q_item_a)
    eng.q_item = _address(eng.q_item_a)
    eng.q_kind_a = _grown(eng.q_kind_a)
    eng.q_kind = _address(eng.q_kind_a)
    eng.q_a_a = _grown(eng.q_a_a)
    eng.q_a = _address(eng.q_a_a)
    eng.q_b_a = _grown(eng.q_b_a)
    eng.q_b = _address(eng.q_b_a)
    eng.q_c_a = _grown(eng.q_c_a)
    eng.q_c = _address(eng.q_c_a)
    eng.q_free_a = _grown(eng.q_free_a)
    eng.q_free = _address(eng.q_free_a)
    eng.cnt[K_SLOTS_CAP] = len(eng.q_item_a)


@njit(cache=True)
def push(eng, t, lam, prio, key, low, item, ckind, a, b, c):  # type: ignore[no-untyped-def]
    """Schedule an item (a step, an arrival or a control message) at t; `low` < 0: order
    it by insertion among items of the same (t, lam, prio, key)."""
    cnt = eng.cnt
    if cnt[K_FREE] > 0:
        cnt[K_FREE] -= 1
        slot = eng.q_free[cnt[K_FREE]]
    else:
        if cnt[K_SLOTS] == cnt[K_SLOTS_CAP]:
            _grow_slots(eng)
        slot = cnt[K_SLOTS]
        cnt[K_SLOTS] += 1
    q_item, q_kind, q_a, q_b, q_c = eng.q_item, eng.q_kind, eng.q_a, eng.q_b, eng.q_c
    q_item[slot] = item
    q_kind[slot] = ckind
    q_a[slot] = a
    q_b[slot] = b
    q_c[slot] = c
    cnt[K_SEQ] += 1
    if low < 0:
        low = cnt[K_SEQ]
    k1 = lam * 2 + prio
    k2 = (key << _LOW) | low
    size = cnt[K_HEAP]
    if size == cnt[K_HEAP_CAP]:
        _grow_heap(eng)
    cnt[K_HEAP] = size + 1
    ht, hk1, hk2, hs = eng.ht, eng.hk1, eng.hk2, eng.hs
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(t, k1, k2, ht[parent], hk1[parent], hk2[parent]):
            break
        ht[i] = ht[parent]
        hk1[i] = hk1[parent]
        hk2[i] = hk2[parent]
        hs[i] = hs[parent]
        i = parent
    ht[i] = t
    hk1[i] = k1
    hk2[i] = k2
    hs[i] = slot


@njit(cache=True)
def _pop(eng):  # type: ignore[no-untyped-def]
    """Remove the first item; returns its time, key and payload (its slot is freed)."""
    ht, hk1, hk2, hs = eng.ht, eng.hk1, eng.hk2, eng.hs
    t0 = ht[0]
    key = hk2[0] >> _LOW
    slot = hs[0]
    payload = (eng.q_item[slot], eng.q_kind[slot], eng.q_a[slot], eng.q_b[slot], eng.q_c[slot])
    cnt = eng.cnt
    eng.q_free[cnt[K_FREE]] = slot
    cnt[K_FREE] += 1
    size = eng.cnt[K_HEAP] - 1
    eng.cnt[K_HEAP] = size
    if size > 0:
        t = ht[size]
        k1 = hk1[size]
        k2 = hk2[size]
        s = hs[size]
        i = 0
        while True:
            child = 2 * i + 1
            if child >= size:
                break
            right = child + 1
            if right < size and _before(
                ht[right], hk1[right], hk2[right], ht[child], hk1[child], hk2[child]
            ):
                child = right
            if not _before(ht[child], hk1[child], hk2[child], t, k1, k2):
                break
            ht[i] = ht[child]
            hk1[i] = hk1[child]
            hk2[i] = hk2[child]
            hs[i] = hs[child]
            i = child
        ht[i] = t
        hk1[i] = k1
        hk2[i] = k2
        hs[i] = s
    return t0, key, payload[0], payload[1], payload[2], payload[3], payload[4]


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


def _next(st: Any, eng: Any, lay: Any, p: Any) -> Any:
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


@njit(cache=True)
def default_next(st, eng, lay, p):  # type: ignore[no-untyped-def]
    return SCAN


_DEFAULTS = {
    "send": default_send,
    "arrived": default_arrived,
    "control": default_control,
    "settle": default_settle,
    "deliverable": default_deliverable,
    "delivered": default_delivered,
    "taken": default_taken,
    "next": default_next,
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


@overload(_next)
def _ov_next(st, eng, lay, p):  # type: ignore[no-untyped-def]
    f = _hook(st, "next")
    return f.py_func


# ---- what protocols call -----------------------------------------------------------------


@njit(cache=True, inline="always")
def control_latency(eng, lay, sender, dst):  # type: ignore[no-untyped-def]
    key = sender * max(lay.n, 1) + dst
    keys = lay.ch_keys
    i = np.searchsorted(keys, key)
    if i < len(keys) and keys[i] == key:
        return lay.ch_lat[i]
    if not np.isnan(lay.trace_lat):
        return lay.trace_lat
    return eng.default_latency


@njit(cache=True, inline="always")
def _arrive_at(eng, lay, sender, dst, t, item, ckind, a, b, c):  # type: ignore[no-untyped-def]
    fifo = eng.flags[F_FIFO_TRANSPORT] != 0
    if fifo:
        key = sender * lay.n + dst
        last = eng.chan_last[key]
        if last > t:
            t = last
        eng.chan_last[key] = t
    low = -1
    lam = LAST
    if item == ITEM_APP and not fifo:
        received = lay.recv_ev[a]
        if received >= 0:
            low = received - lay.ev_start[dst] + 1
            lam = lay.lamport[received]
    push(eng, t, lam, ARRIVAL, dst, low, item, ckind, a, b, c)


@njit(cache=True, inline="always")
def post(eng, lay, m, sender, t, ints):  # type: ignore[no-untyped-def]
    """Put application copy m on the network at t from `sender`, carrying `ints` integers."""
    eng.post_t[m] = t
    eng.pig[m] = ints
    eng.mst[m] = M_POSTED
    latency = lay.latency[m]
    if np.isnan(latency):
        return  # lost: it never arrives
    _arrive_at(eng, lay, sender, lay.dst[m], t + latency, ITEM_APP, 0, m, 0, 0)


@njit(cache=True, inline="always")
def control(eng, lay, sender, dst, t, ckind, ints, a, b, c):  # type: ignore[no-untyped-def]
    """Send a control message of kind `ckind` with payload (a, b, c) counted as `ints`."""
    eng.cnt[K_CONTROL] += 1
    eng.cnt[K_CONTROL_INTS] += ints
    latency = control_latency(eng, lay, sender, dst)
    _arrive_at(eng, lay, sender, dst, t + latency, ITEM_CTL, ckind, a, b, c)


@njit(cache=True, inline="always")
def pending(eng, m):  # type: ignore[no-untyped-def]
    """Copy m arrived and is not delivered yet."""
    return eng.mst[m] == M_PENDING


@njit(cache=True, inline="always")
def send_event(lay, m):  # type: ignore[no-untyped-def]
    """The index of the send event of copy m (events by process, then lseq)."""
    return lay.send_ev[m]


@njit(cache=True, inline="always")
def _gap(lay, p, e):  # type: ignore[no-untyped-def]
    previous = lay.etime[e - 1] if e > lay.ev_start[p] else lay.start
    gap = lay.etime[e] - previous
    return gap if gap > 0.0 else 0.0


@njit(cache=True, inline="always")
def _schedule_step(eng, lay, p, t):  # type: ignore[no-untyped-def]
    lam = lay.lamport[lay.ev_start[p] + eng.pc[p]]
    push(eng, t, lam, STEP, p, 0, ITEM_STEP, 0, 0, 0, 0)


@njit(cache=True, inline="always")
def _complete(eng, lay, p, t):  # type: ignore[no-untyped-def]
    eng.now[p] = t
    eng.pc[p] += 1
    e = lay.ev_start[p] + eng.pc[p]
    if e < lay.ev_start[p + 1]:
        gap = 0.0 if lay.kind[e] == RECEIVE else _gap(lay, p, e)
        _schedule_step(eng, lay, p, t + gap)
    else:
        eng.state[p] = DONE


@njit(cache=True, inline="always")
def resume(eng, lay, p, t):  # type: ignore[no-untyped-def]
    """A blocked sender's send event completes at t."""
    eng.state[p] = READY
    _complete(eng, lay, p, t)


@njit(cache=True, inline="always")
def bypass(eng, lay, m):  # type: ignore[no-untyped-def]
    """Orphans' messages, and self-addressed ones under a causal protocol, skip the protocol."""
    return lay.send_ev[m] < 0 or (eng.flags[F_CAUSAL] != 0 and lay.src[m] == lay.dst[m])


@njit(cache=True, inline="always")
def queue_append(head, tail, nxt, p, m):  # type: ignore[no-untyped-def]
    """Append m to p's FIFO queue, a linked list over message indices (head/tail per process)."""
    nxt[m] = -1
    if tail[p] >= 0:
        nxt[tail[p]] = m
    else:
        head[p] = m
    tail[p] = m


@njit(cache=True, inline="always")
def queue_pop(head, tail, nxt, p):  # type: ignore[no-untyped-def]
    """Remove and return the first message of p's queue (which must not be empty)."""
    m = head[p]
    head[p] = nxt[m]
    if head[p] < 0:
        tail[p] = -1
    return m


@njit(cache=True, inline="always")
def _unlink_pending(eng, lay, p, m):  # type: ignore[no-untyped-def]
    if bypass(eng, lay, m):
        eng.pend_bypass[p] -= 1
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


# ---- the verification as the replay runs -------------------------------------------------


@njit(cache=True)
def _exec_send(eng, lay, p, lo, hi):  # type: ignore[no-untyped-def]
    """The send event of copies lo..hi enters p's replayed execution (one event, or one per
    copy for point-to-point protocols); under V_CAUSAL its clock goes with the copies that
    can be taken."""
    if eng.flags[F_P2P]:
        for m in range(lo, hi):
            eng.ex_count[p] += 1
            eng.ex_send[m] = eng.ex_count[p]
    else:
        eng.ex_count[p] += 1
        for m in range(lo, hi):
            eng.ex_send[m] = eng.ex_count[p]
    if eng.flags[F_VERIFY] != V_CAUSAL:
        return
    holders = 0
    for m in range(lo, hi):
        if lay.dst[m] >= 0 and not np.isnan(lay.latency[m]):
            holders += 1
    if holders == 0:
        return
    slot = pool_take(eng.vpool, holders)
    pool_row(eng.vpool, slot)[:] = eng.vc[p]
    for m in range(lo, hi):
        if lay.dst[m] >= 0 and not np.isnan(lay.latency[m]):
            eng.vslot[m] = slot


@njit(cache=True)
def _exec_take(eng, lay, p, m):  # type: ignore[no-untyped-def]
    """A receive of p took m: is m overtaken (FIFO: by a later send of its channel taken
    before; causal: the receiver already knows its send), then p learns what m knew."""
    eng.ex_count[p] += 1
    if lay.send_ev[m] < 0:
        return  # an orphan's message: no causal edge
    s = lay.src[m]
    k = eng.ex_send[m]
    if eng.flags[F_VERIFY] == V_FIFO:
        key = s * lay.n + p
        if eng.chan_max[key] > k:
            eng.cnt[K_VIOLATED] = 1
        elif eng.chan_max[key] < k:
            eng.chan_max[key] = k
        return
    mine = eng.vc[p]
    if s != p and mine[s] >= k:
        eng.cnt[K_VIOLATED] = 1
    slot = eng.vslot[m]
    row = pool_row(eng.vpool, slot)
    for q in range(lay.n):
        if row[q] > mine[q]:
            mine[q] = row[q]
    if k > mine[s]:
        mine[s] = k
    pool_release(eng.vpool, slot)


# ---- the loop ----------------------------------------------------------------------------


@njit(cache=True)
def _take(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    eng.take_t[m] = t
    eng.mst[m] = M_TAKEN
    eng.taken_by[m] = eng.pc[p] + 1
    if eng.flags[F_VERIFY] != V_NONE:
        _exec_take(eng, lay, p, m)
    if not bypass(eng, lay, m):
        _taken(st, eng, lay, p, m, t)


@njit(cache=True)
def _try_take(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    if not eng.flags[F_SELECTIVE]:
        if eng.rdy_head[p] < 0:
            return False
        m = queue_pop(eng.rdy_head, eng.rdy_tail, eng.pnext, p)
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
                _unlink_pending(eng, lay, p, m)
                eng.del_t[m] = t
                if not skip:
                    _delivered(st, eng, lay, p, m, t)
                _take(st, eng, lay, p, m, t)
                _settle(st, eng, lay, p, t)
                return True
        m = following
    return False


@njit(cache=True, inline="always")
def _deliver(st, eng, lay, p, m, t, skip):  # type: ignore[no-untyped-def]
    _unlink_pending(eng, lay, p, m)
    eng.del_t[m] = t
    eng.mst[m] = M_READY
    queue_append(eng.rdy_head, eng.rdy_tail, eng.pnext, p, m)
    if not skip:  # the state changed: held-back control messages, then copies
        _delivered(st, eng, lay, p, m, t)
        _settle(st, eng, lay, p, t)


@njit(cache=True)
def notify(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    """Protocol state at p changed: deliver what can be delivered, wake a blocked receive."""
    _settle(st, eng, lay, p, t)
    if not eng.flags[F_SELECTIVE]:
        # the earliest-arrived deliverable copy, then the scan starts again from the
        # beginning (docs/replay.md): a delivery may enable an earlier copy. A protocol that
        # knows the one copy it may deliver (`c_next`) spares the scan, unless messages that
        # skip the protocol are pending too
        scan = True
        while eng.pend_bypass[p] == 0:
            m = _next(st, eng, lay, p)
            if m == SCAN:
                break
            if m < 0:
                scan = False
                break
            _deliver(st, eng, lay, p, m, t, False)
        if scan:
            m = eng.pend_head[p]
            while m >= 0:
                following = eng.pnext[m]
                skip = bypass(eng, lay, m)
                if skip or _deliverable(st, eng, lay, p, m):
                    _deliver(st, eng, lay, p, m, t, skip)
                    if not skip:
                        following = eng.pend_head[p]
                m = following
    if eng.state[p] == WAIT_RECEIVE and _try_take(st, eng, lay, p, t):
        eng.state[p] = READY
        _complete(eng, lay, p, t)


@njit(cache=True)
def _arrival(st, eng, lay, p, t, item, ckind, a, b, c):  # type: ignore[no-untyped-def]
    if item == ITEM_CTL:
        _control(st, eng, lay, p, ckind, a, b, c, t)
    else:
        m = a
        eng.mst[m] = M_PENDING
        if bypass(eng, lay, m):
            eng.pend_bypass[p] += 1
        elif item == ITEM_APP:
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
        if eng.flags[F_VERIFY] != V_NONE:
            eng.ex_count[p] += 1
        _complete(eng, lay, p, t)
    elif kind == SEND:
        lo = lay.copy_start[e]
        hi = lay.copy_start[e + 1]
        causal = eng.flags[F_CAUSAL] != 0
        own = 0
        for m in range(lo, hi):
            eng.send_t[m] = t
        if eng.flags[F_VERIFY] != V_NONE:
            _exec_send(eng, lay, p, lo, hi)
        for m in range(lo, hi):
            d = lay.dst[m]
            if d < 0:
                eng.post_t[m] = t  # to a process without events: lost
                eng.pig[m] = 0
                eng.mst[m] = M_POSTED
            elif causal and d == p:
                post(eng, lay, m, p, t, 0)
            else:
                eng.scratch[own] = m
                own += 1
        if own == 0 or _send(st, eng, lay, p, carray(eng.scratch, own), t):
            _complete(eng, lay, p, t)
        else:
            eng.state[p] = WAIT_SEND
    else:
        eng.state[p] = WAIT_RECEIVE
        notify(st, eng, lay, p, t)


@_intrinsic
def _pointers(typingctx, state):  # type: ignore[no-untyped-def]
    """The protocol's State with each 1-D contiguous array as its data pointer (as the
    engine's columns: no reference counted per access); other members as they are."""

    def flat(t: Any) -> bool:
        return isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C"

    members = [types.CPointer(t.dtype) if flat(t) else t for t in state.types]  # type: ignore[no-untyped-call]
    out = types.NamedTuple(members, state.instance_class)  # type: ignore[no-untyped-call]

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        values = []
        for i, t in enumerate(state.types):
            value = builder.extract_value(args[0], i)
            if flat(t):
                value = context.make_array(t)(context, builder, value).data
            else:
                context.nrt.incref(builder, t, value)
            values.append(value)
        return context.make_tuple(builder, out, values)

    return out(state), codegen


@njit(cache=True)
def run_loop(state, eng, lay):  # type: ignore[no-untyped-def]
    """Run the programs to the end (or until every process waits for ever)."""
    st = _pointers(state)
    n = lay.n
    for p in range(n):
        e = lay.ev_start[p]
        if e < lay.ev_start[p + 1]:
            first = _gap(lay, p, e) if lay.kind[e] != RECEIVE else 0.0
            _schedule_step(eng, lay, p, lay.start + first)
    for m in range(lay.messages):
        if lay.send_ev[m] < 0 and lay.recv_ev[m] >= 0:  # an orphan's message
            at = lay.recv_ev[m]
            d = lay.dst[m]
            low = at - lay.ev_start[d] + 1
            push(eng, lay.etime[at], lay.lamport[at], ARRIVAL, d, low, ITEM_EXT, 0, m, 0, 0)
    while eng.cnt[K_HEAP] > 0:
        t, p, item, ckind, a, b, c = _pop(eng)
        if item == ITEM_STEP:
            _step(st, eng, lay, p, t)
        else:
            _arrival(st, eng, lay, p, t, item, ckind, a, b, c)


def _new_engine(
    trace: CompiledTrace, flags: Sequence[int], default_latency: float, verify: int
) -> Any:
    lay = trace.layout
    n = trace.n
    count = trace.messages
    copies = np.diff(lay.copy_start)
    heap = max(64, 2 * n)

    def floats() -> np.ndarray:
        return np.full(count, np.nan)

    def ints(size: int, value: int = -1, dtype: Any = np.int64) -> np.ndarray:
        return np.full(size, value, dtype=dtype)

    checked = verify != V_NONE
    causal = verify == V_CAUSAL
    return Eng(
        np.asarray([*flags, verify], dtype=np.int64),
        floats(), floats(), floats(), floats(),
        np.zeros(count, np.int8), ints(count, -1, np.int32), ints(count, -1, np.int32),
        ints(count, -1, np.int32), ints(count, -1, np.int32),
        ints(n, 0), ints(n, READY), np.full(n, lay.start),
        ints(n), ints(n), ints(n, 0), ints(n, 0), ints(n), ints(n),
        np.asarray([0] * K_HEAP_CAP + [heap, heap], dtype=np.int64),
        np.empty(heap, np.float64), np.empty(heap, np.int64), np.empty(heap, np.int64),
        np.empty(heap, np.int64),
        np.empty(heap, np.int64), np.empty(heap, np.int64), np.empty(heap, np.int64),
        np.empty(heap, np.int64), np.empty(heap, np.int64), np.empty(heap, np.int64),
        np.full(n * n if flags[F_FIFO_TRANSPORT] else 1, -np.inf),
        ints(int(copies.max()) if len(copies) else 1, 0),
        float(default_latency),
        np.zeros(n if checked else 1, np.int32),
        np.zeros(count if checked else 1, np.int32),
        np.zeros(n * n if verify == V_FIFO else 1, np.int32),
        np.zeros((n, n) if causal else (1, 1), np.int32),
        new_pool(n if causal else 1, 64 if causal else 1, np.int32),
        np.full(count if causal else 1, -1, np.int32),
    )  # fmt: skip


# ---- the Python entry point --------------------------------------------------------------


class CompiledRun:
    """The result of one protocol over one trace from the compiled loop: a `protocol_runs`
    row and, per message (layout order), the columns of `deliveries` (NaN: no time; -1: no
    receive or piggyback). Arrival and held-back are derived when asked (`columns`)."""

    def __init__(
        self,
        trace: CompiledTrace,
        status: str,
        reason: str | None,
        verified: bool | None,
        figures: dict[str, float | int | None],
        eng: Any,
    ) -> None:
        self.status = status
        self.reason = reason
        self.verified = verified
        self.figures = figures
        self._lay = trace.layout
        count = trace.messages
        if eng is None:
            nan = np.full(count, np.nan)
            self.send_time = self.post_time = self.delivery_time = self.take_time = nan
            self.taken_by = self.piggyback = np.full(count, -1, np.int32)
            self._arrived = np.zeros(count, bool)
        else:
            self.send_time, self.post_time = eng.send_t, eng.post_t
            self.delivery_time, self.take_time = eng.del_t, eng.take_t
            self.taken_by, self.piggyback = eng.taken_by, eng.pig
            self._arrived = eng.mst >= M_PENDING

    def columns(self, m: np.ndarray | slice) -> dict[str, np.ndarray]:
        """The deliveries columns of messages `m`: times, taken_by, piggyback, held_back
        (1.0 / 0.0, NaN where arrival or delivery is missing)."""
        lay = self._lay
        arrival = np.where(
            lay.send_ev[m] >= 0,
            self.post_time[m] + lay.latency[m],
            lay.etime[np.maximum(lay.recv_ev[m], 0)],
        )
        arrival = np.where(self._arrived[m], arrival, np.nan)
        delivery = self.delivery_time[m]
        both = ~np.isnan(arrival) & ~np.isnan(delivery)
        return {
            "send_time": self.send_time[m],
            "post_time": self.post_time[m],
            "arrival_time": arrival,
            "delivery_time": delivery,
            "take_time": self.take_time[m],
            "taken_by": self.taken_by[m],
            "piggyback": self.piggyback[m],
            "held_back": np.where(both, (delivery > arrival).astype(np.float64), np.nan),
        }

    @property
    def arrival_time(self) -> np.ndarray:
        return self.columns(slice(None))["arrival_time"]

    @property
    def held_back(self) -> np.ndarray:
        return self.columns(slice(None))["held_back"]


def replay_compiled(
    trace: CompiledTrace,
    name: str,
    params: Mapping[str, str] | None = None,
    selective: bool = False,
    default_latency: float = 1.0,
) -> CompiledRun:
    """Replay `trace` under protocol `name` with the compiled loop (same result as `replay`)."""
    from causal_spark.protocols import protocol
    from causal_spark.protocols.base import check_params

    cls = protocol(name)
    module = sys.modules[cls.__module__]
    given = dict(params or {})
    check_params(cls, given)
    state, reason, fifo_transport = module.make_state(trace, given)
    if reason is not None:
        figures: dict[str, float | int | None] = dict.fromkeys(_FIGURES)
        return CompiledRun(trace, STATUS_NOT_APPLICABLE, reason, None, figures, None)
    verify = V_NONE
    if cls.name != "none" and not cls.total_order and (cls.causal or cls.fifo):
        verify = V_CAUSAL if cls.causal else V_FIFO
    flags = (int(cls.causal), int(fifo_transport), int(cls.point_to_point), int(selective))
    eng = _new_engine(trace, flags, default_latency, verify)
    run_loop(state, _eng_ref(eng), _layout_ref(trace.layout))
    lay = trace.layout
    length = np.diff(lay.ev_start)
    unfinished = np.flatnonzero(eng.pc < length)
    status, reason = STATUS_OK, None
    if len(unfinished):
        lost = trace.lost
        status = STATUS_STALLED if lost else STATUS_DEADLOCK
        blocked = ", ".join(
            f"{trace.names[p]} at #{eng.pc[p] + 1}" for p in unfinished[:5].tolist()
        )
        reason = f"{len(unfinished)} process(es) wait for ever: {blocked}"
        if status == STATUS_STALLED:
            reason += f" (the log lost {lost} message(s))"
    if cls.name == "none":
        verified = None if trace.skewed else _reproduces_recording(_layout_ref(lay), eng)
    elif cls.total_order:
        verified = _one_total_order(trace, eng)
    elif verify != V_NONE:
        verified = not eng.cnt[K_VIOLATED]
    else:
        verified = None
    return _result(trace, eng, state, status, reason, verified)


_FIGURES = (
    "app_messages", "control_messages", "control_ints", "piggyback_ints_total",
    "piggyback_ints_mean", "piggyback_ints_max", "piggyback_bytes_total", "held_back",
    "holdback_delay_total", "holdback_delay_mean", "holdback_delay_p99", "holdback_delay_max",
    "sender_delay_total", "max_holdback_buffer", "makespan", "makespan_ratio", "lost",
    "undelivered", "untaken", "unsent",
)  # fmt: skip


@njit(cache=True)
def _tally(send_ev, recv_ev, latency, etime, send_t, post_t, del_t, take_t, mst, pig, held):  # type: ignore[no-untyped-def]  # fmt: skip
    """Counts and sums over the messages (docs/replay.md, "Overhead"): held-back delays go
    to `held` (its first `held_count` entries)."""
    app = ints = ints_total = ints_max = held_count = 0
    lost = undelivered = untaken = unsent = taken = 0
    held_total = held_max = sender = 0.0
    for m in range(len(send_ev)):
        posted = not np.isnan(post_t[m])
        if send_ev[m] >= 0:
            app += 1
            if pig[m] >= 0:
                ints += 1
                ints_total += pig[m]
                if pig[m] > ints_max:
                    ints_max = pig[m]
            if posted and not np.isnan(send_t[m]):
                sender += post_t[m] - send_t[m]
            if not posted:
                unsent += 1
            elif np.isnan(latency[m]):
                lost += 1
        delivered = not np.isnan(del_t[m])
        if mst[m] >= M_PENDING:
            if not delivered:
                undelivered += 1
            elif send_ev[m] >= 0:
                arrival = post_t[m] + latency[m]
                if del_t[m] > arrival:
                    wait = del_t[m] - arrival
                    held[held_count] = wait
                    held_count += 1
                    held_total += wait
                    if wait > held_max:
                        held_max = wait
        if not np.isnan(take_t[m]):
            taken += 1
        elif delivered:
            untaken += 1
    return (app, ints, ints_total, ints_max, held_count, held_total, held_max, sender, lost,
            undelivered, untaken, unsent, taken)  # fmt: skip


def _result(
    trace: CompiledTrace,
    eng: Any,
    state: Any,
    status: str,
    reason: str | None,
    verified: bool | None,
) -> CompiledRun:
    lay = trace.layout
    held = np.empty(trace.messages, np.float64)
    (app, ints, ints_total, ints_max, held_count, held_total, held_max, sender, lost,
     undelivered, untaken, unsent, taken) = _tally(
        lay.send_ev, lay.recv_ev, lay.latency, lay.etime, eng.send_t, eng.post_t, eng.del_t,
        eng.take_t, eng.mst, eng.pig, held,
    )  # fmt: skip
    held = held[:held_count]
    done = [
        lay.etime[lay.ev_start[p] : lay.ev_start[p] + k].max()
        for p, k in enumerate(eng.pc.tolist())
        if k
    ]
    makespan, ratio = makespan_figures(
        status,
        float(eng.now.max()) if trace.n else trace.start,
        float(max(done, default=trace.start)),
        trace.start,
        trace.end,
    )
    figures: dict[str, float | int | None] = {
        "app_messages": app,
        "control_messages": int(eng.cnt[K_CONTROL]),
        "control_ints": int(eng.cnt[K_CONTROL_INTS]),
        "piggyback_ints_total": ints_total,
        "piggyback_ints_mean": ints_total / ints if ints else 0.0,
        "piggyback_ints_max": ints_max,
        "piggyback_bytes_total": 8 * ints_total,
        "held_back": held_count,
        "holdback_delay_total": float(held.sum()) if held_count else 0.0,
        "holdback_delay_mean": float(held.mean()) if held_count else None,
        "holdback_delay_p99": float(np.percentile(held, 99)) if held_count else None,
        "holdback_delay_max": held_max if held_count else None,
        "sender_delay_total": _sender_delay(state, sender),
        "max_holdback_buffer": int(eng.cnt[K_MAX_BUFFER]),
        "makespan": makespan,
        "makespan_ratio": ratio,
        # where each copy ends (docs/replay.md): besides taken, exactly one of these
        "lost": lost,
        "undelivered": undelivered,
        "untaken": untaken,
        "unsent": unsent,
    }
    del held, held_total
    wrong = accounting_error(figures, taken, trace.messages)
    if wrong is not None:
        status, reason = STATUS_ERROR, wrong
    return CompiledRun(trace, status, reason, verified, figures, eng)


def _sender_delay(state: Any, post_minus_send: float) -> float:
    module = sys.modules[type(state).__module__]
    own = getattr(module, "sender_delay", None)
    return float(own(state, post_minus_send)) if own is not None else post_minus_send


# ---- verification from the columns -------------------------------------------------------


@njit(cache=True, inline="always")
def _close(a, b):  # type: ignore[no-untyped-def]
    if np.isnan(a) or np.isnan(b):
        return np.isnan(a) and np.isnan(b)
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


@njit(cache=True)
def _reproduces(lay, taken_by, take_t, send_t):  # type: ignore[no-untyped-def]
    """`none` took every recorded message with its recorded receive at its recorded time,
    and sent every message at its recorded time."""
    for m in range(lay.messages):
        r = lay.recv_ev[m]
        if r >= 0:
            if taken_by[m] != r - lay.ev_start[lay.dst[m]] + 1:
                return False
            if not _close(take_t[m], lay.etime[r]):
                return False
        s = lay.send_ev[m]
        if s >= 0 and not _close(send_t[m], lay.etime[s]):
            return False
    return True


def _reproduces_recording(lay: Any, eng: Any) -> bool:
    return bool(_reproduces(lay, eng.taken_by, eng.take_t, eng.send_t))


def _one_total_order(trace: CompiledTrace, eng: Any) -> bool:
    lay = trace.layout
    pick = np.flatnonzero((eng.taken_by >= 0) & (lay.send_ev >= 0))
    if not len(pick):
        return True
    procs = lay.dst[pick]
    order = np.lexsort((eng.taken_by[pick], procs))
    group = lay.send_ev[pick][order]  # a multicast is one send event
    procs = procs[order]
    del pick, order
    return bool(_one_order(procs, group, trace.n, int(lay.ev_start[-1])))


@njit(cache=True)
def _one_order(procs, group, n, groups):  # type: ignore[no-untyped-def]
    """Every two processes take their common groups in one order (procs sorted, stable)."""
    start = np.zeros(n + 1, np.int64)
    for p in procs:
        start[p + 1] += 1
    for p in range(n):
        start[p + 1] += start[p]
    position = np.full(groups, -1, np.int32)
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
