"""The compiled loop's data: engine state, layout, pools and grids as StructRefs, and the heap.

Constants name the program states, heap priorities, item kinds, message states,
engine counters and flags the loop (`loop.py`) and the protocols' hooks share.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.core.datamodel import models
from numba.core.datamodel.registry import register_default
from numba.core.registry import CPUDispatcher
from numba.experimental import structref
from numba.extending import intrinsic
from numba.np.numpy_support import carray

import causal_spark.replay.cache  # noqa: F401 (stamps the functions below: import it first)

# program states, heap priorities and item kinds (as in the reference engine, tests/oracles/replay)
READY, WAIT_RECEIVE, WAIT_SEND, DONE = 0, 1, 2, 3
ARRIVAL, STEP = 0, 1
ITEM_STEP, ITEM_APP, ITEM_EXT, ITEM_CTL = 0, 1, 2, 3
LAST = 1 << 61  # the Lamport clock of items that stand for no recorded event
_LOW = 40  # bits of the insertion number or receive lseq in the third heap key
# a message's state
M_NONE, M_POSTED, M_PENDING, M_READY, M_TAKEN = 0, 1, 2, 3, 4
# engine counters
(K_CONTROL, K_CONTROL_INTS, K_MAX_BUFFER, K_SEQ, K_HEAP, K_SLOTS, K_FREE, K_VIOLATED,
 K_HEAP_CAP, K_SLOTS_CAP, K_HOLE) = range(11)  # fmt: skip
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


class _EngineDispatcher(CPUDispatcher):
    """A dispatcher that compiles one version for all its callers: integer arguments are typed
    int64, whatever the caller's integer type, and never as literals."""

    def get_call_template(self, args: Any, kws: Any) -> Any:
        return super().get_call_template(
            tuple(map(_widened, args)), {k: _widened(v) for k, v in kws.items()}
        )


def _widened(typ: Any) -> Any:
    typ = types.unliteral(typ)  # type: ignore[no-untyped-call]
    if isinstance(typ, types.Integer) and typ in types.signed_domain:
        return types.int64
    return typ


def engine_njit(fn: Any = None, *, inline: bool = False) -> Any:
    """`njit(cache=True)` for the engine's helpers that protocols and the loop call with
    constants and integers of every width: one compiled version each (call sites passing
    literals such as `ITEM_APP` or `_ACK`, or int32 indices, each compiled one of their
    own: `push` nine, `_arrive_at` seven for four protocols). `inline`: LLVM inlines it
    into every caller (`forceinline`; Numba's `inline="always"` would type it again in
    each caller instead)."""

    def wrap(py_func: Any) -> Any:
        options = {"nopython": True, "forceinline": inline}
        dispatcher = _EngineDispatcher(py_func=py_func, locals={}, targetoptions=options)
        dispatcher.enable_caching()
        return dispatcher

    return wrap if fn is None else wrap(fn)


# The loop's functions take the trace, the engine state and pools as StructRefs: one pointer
# per call. As namedtuples of dozens of arrays they were passed member by member, hundreds of
# machine words per call, which cost more than the work of an event; a StructRef's fields can
# also be replaced (a heap or a pool grows). Python keeps the namedtuples (same arrays).


class _Unliteral(types.StructRef):
    """A StructRef type whose fields keep no literal types (one compiled loop per protocol,
    whatever the values)."""

    def preprocess_fields(self, fields: Any) -> Any:
        return tuple((name, types.unliteral(typ)) for name, typ in fields)  # type: ignore[no-untyped-call]


class _BorrowedModel(models.StructRefModel):
    """A StructRef whose own reference is never counted in compiled code: its Python proxy
    keeps it alive while the loop runs (each one is made by a compiled function that
    returns it to Python, and every compiled function that gets it gets it from Python).
    A counted StructRef costs an atomic increment and decrement each time a function
    receives it or a variable takes it, which cost more than most events (45% of
    `lamport_total`'s loop, in `perf`). Its fields (arrays) are counted as before."""

    def has_nrt_meminfo(self) -> bool:
        return False

    def traverse(self, builder: Any) -> Any:
        return []


def _borrowed(struct_type: Any) -> Any:
    """`structref.register`, with the `_BorrowedModel`."""
    structref.register(struct_type)  # type: ignore[no-untyped-call]
    register_default(struct_type)(_BorrowedModel)
    return struct_type


@_borrowed
class _LayoutType(_Unliteral):
    pass


class LayoutRef(structref.StructRefProxy):
    """The `Layout` as the loop sees it."""


@_borrowed
class _EngType(_Unliteral):
    pass


class EngRef(structref.StructRefProxy):
    """The engine state (`Eng`) as the loop sees it."""


@_borrowed
class _PoolType(_Unliteral):
    pass


class PoolRef(structref.StructRefProxy):
    """Fixed-width integer rows, each shared by some holders (`new_pool`)."""


@_borrowed
class _GridType(_Unliteral):
    pass


class GridRef(structref.StructRefProxy):
    """A fixed number of integer rows whose width doubles on demand (`new_grid`)."""


_LAYOUT_FIELDS = (
    "n", "ev_start", "kind", "lamport", "etime", "copy_start", "take", "src", "dst",
    "send_ev", "recv_ev", "latency", "ch_keys", "ch_lat", "trace_lat", "start", "messages",
    "channels",
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
def layout_ref(lay):  # type: ignore[no-untyped-def]
    return LayoutRef(  # type: ignore[no-untyped-call]
        lay.n, _address(lay.ev_start), _address(lay.kind), _address(lay.lamport),
        _address(lay.etime), _address(lay.copy_start), _address(lay.take), _address(lay.src),
        _address(lay.dst), _address(lay.send_ev), _address(lay.recv_ev),
        _address(lay.latency), _address(lay.ch_keys), _address(lay.ch_lat), lay.trace_lat,
        lay.start, len(lay.src), len(lay.ch_keys),
    )  # fmt: skip


@njit(cache=True)
def eng_ref(e):  # type: ignore[no-untyped-def]
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
        _address(e.ex_count), _address(e.ex_send), _address(e.chan_max), _address(e.vc), e.vpool,
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


@_intrinsic
def prefetch(typingctx, pointer, index):  # type: ignore[no-untyped-def]
    """Ask the cache for pointer[index] (`llvm.prefetch`: no load, no fault if out of bounds)."""
    sig = types.void(pointer, types.intp)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        address = builder.bitcast(builder.gep(args[0], [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [address.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")  # type: ignore[no-untyped-call]
        builder.call(fn, [address, i32(0), i32(3), i32(1)])  # read, keep in all levels, data
        return context.get_dummy_value()

    return sig, codegen


@engine_njit(inline=True)
def prefetch_sent(eng, lay, e, hi):  # type: ignore[no-untyped-def]
    """At a send event e whose copies end at hi: ask for the next cache line of each column
    the sender's next events and copies use, and for the Lamport clock of a later copy's
    receive. A process's events and copies are contiguous, so each column is read as n
    interleaved streams, which the hardware prefetchers do not follow: each first touch of
    a line was a miss to memory (most of the loop's time, in `perf`)."""
    prefetch(lay.kind, e + 64)
    prefetch(lay.lamport, e + 16)
    prefetch(lay.etime, e + 8)
    prefetch(lay.copy_start, e + 16)
    prefetch(eng.send_t, hi + 8)
    prefetch(eng.post_t, hi + 8)
    prefetch(eng.del_t, hi + 8)
    prefetch(eng.take_t, hi + 8)
    prefetch(lay.latency, hi + 8)
    prefetch(eng.mst, hi + 64)
    prefetch(eng.taken_by, hi + 16)
    prefetch(eng.pig, hi + 16)
    prefetch(eng.pnext, hi + 16)
    prefetch(eng.pprev, hi + 16)
    prefetch(lay.src, hi + 16)
    prefetch(lay.dst, hi + 16)
    prefetch(lay.send_ev, hi + 16)
    prefetch(lay.recv_ev, hi + 16)
    if eng.flags[F_VERIFY] != V_NONE:
        prefetch(eng.ex_send, hi + 16)
        prefetch(eng.vslot, hi + 16)
    later = hi + 8
    if later < lay.messages:
        received = lay.recv_ev[later]
        if received >= 0:
            prefetch(lay.lamport, received)


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


@njit(cache=True, inline="always")
def pool_at(pool, slot):  # type: ignore[no-untyped-def]
    """Row `slot` of the pool as a raw pointer (valid until the next pool_take). Indexing it
    has no negative-index wraparound, which `pool_row`'s view has: LLVM turned loops over
    such a view into gathers and scatters, a few times slower than plain vector loads."""
    return _shifted(pool.data, slot * pool.width)


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
# A binary heap of (time, slot): ht[i] the time of entry i, hs[i] its payload slot. The order's
# other keys (lamport * 2 + priority, process << _LOW | order) are the slot's, hk1[slot] and
# hk2[slot]: they are read only when two times are equal (rare: a receive's step at the time
# of the event before it), so a level of the heap compares one float and moves two words (it
# compared up to three keys and moved four). A pop leaves the root empty (K_HOLE) for the
# next push that goes first, and pushes that do not go in below it.


@njit(cache=True, inline="always")
def _first(eng, t1, s1, t2, s2):  # type: ignore[no-untyped-def]
    """Entry (t1, s1) goes before (t2, s2): by time, then the slots' keys (the heap's order,
    compared as three keys were before: a NaN time goes before nothing)."""
    if t1 == t2:
        a1 = eng.hk1[s1]
        a2 = eng.hk1[s2]
        if a1 != a2:
            return a1 < a2
        return eng.hk2[s1] < eng.hk2[s2]
    return t1 < t2


@njit(cache=True, inline="always")
def _right_first(eng, ht, hs, child):  # type: ignore[no-untyped-def]
    """1 if entry child + 1 goes before entry child, else 0: an integer, not a branch (a
    branch on which child goes first was mispredicted half the time)."""
    t1 = ht[child + 1]
    t2 = ht[child]
    first = t1 < t2
    if t1 == t2:
        first = _first(eng, t1, hs[child + 1], t2, hs[child])
    return np.int64(first)


@njit(cache=True, inline="always")
def _climb(eng, ht, hs, i, stop, t, s):  # type: ignore[no-untyped-def]
    """Entry (t, s) into the heap at index i, climbing past its parents that it goes before,
    to no index <= stop (push's and `_fill_hole`'s sift-up)."""
    while i > stop:
        parent = (i - 1) >> 1
        if not _first(eng, t, s, ht[parent], hs[parent]):
            break
        ht[i] = ht[parent]
        hs[i] = hs[parent]
        i = parent
    ht[i] = t
    hs[i] = s


@njit(cache=True)
def _grown(values):  # type: ignore[no-untyped-def]
    out = np.empty(2 * len(values), values.dtype)
    out[: len(values)] = values
    return out


@njit(cache=True)
def _grow_heap(eng):  # type: ignore[no-untyped-def]
    eng.ht_a = _grown(eng.ht_a)
    eng.ht = _address(eng.ht_a)
    eng.hs_a = _grown(eng.hs_a)
    eng.hs = _address(eng.hs_a)
    eng.cnt[K_HEAP_CAP] = len(eng.ht_a)


@njit(cache=True)
def _grow_slots(eng):  # type: ignore[no-untyped-def]
    eng.hk1_a = _grown(eng.hk1_a)
    eng.hk1 = _address(eng.hk1_a)
    eng.hk2_a = _grown(eng.hk2_a)
    eng.hk2 = _address(eng.hk2_a)
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


@engine_njit
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
    eng.q_item[slot] = item
    eng.q_kind[slot] = ckind
    eng.q_a[slot] = a
    eng.q_b[slot] = b
    eng.q_c[slot] = c
    cnt[K_SEQ] += 1
    if low < 0:
        low = cnt[K_SEQ]
    eng.hk1[slot] = lam * 2 + prio
    eng.hk2[slot] = (key << _LOW) | low
    ht, hs = eng.ht, eng.hs
    stop = 0  # the item climbs to no index <= stop
    if cnt[K_HOLE] != 0:
        # the root was popped and not refilled yet: an item before both its children (a
        # receive's step at the time of the event before it, mostly) takes its place; any
        # other goes in below it, which stays empty (`_fill_hole` fills it at the next pop,
        # so an arrival then a step pushed after one pop refill it once, not twice)
        size = cnt[K_HEAP]
        if (size <= 1 or _first(eng, t, slot, ht[1], hs[1])) and (
            size <= 2 or _first(eng, t, slot, ht[2], hs[2])
        ):
            cnt[K_HOLE] = 0
            ht[0] = t
            hs[0] = slot
            return
        stop = 2
    size = cnt[K_HEAP]
    if size == cnt[K_HEAP_CAP]:
        _grow_heap(eng)
        ht, hs = eng.ht, eng.hs
    cnt[K_HEAP] = size + 1
    _climb(eng, ht, hs, size, stop, t, slot)


@njit(cache=True)
def _fill_hole(eng):  # type: ignore[no-untyped-def]
    """The popped root's place takes the last entry (`_pop` leaves it empty: when a push
    comes first, its item goes there). The hole goes down by the earlier child to a leaf, and
    the last entry, which mostly belongs near the leaves, climbs from there (Floyd's: one
    comparison a level instead of two)."""
    cnt = eng.cnt
    cnt[K_HOLE] = 0
    size = cnt[K_HEAP] - 1
    cnt[K_HEAP] = size
    if size == 0:
        return
    ht, hs = eng.ht, eng.hs
    t = ht[size]
    s = hs[size]
    i = 0
    child = 1
    while child < size:
        if child + 1 < size:
            child += _right_first(eng, ht, hs, child)
        ht[i] = ht[child]
        hs[i] = hs[child]
        i = child
        child = 2 * i + 1
    _climb(eng, ht, hs, i, 0, t, s)


@engine_njit(inline=True)
def queued(eng):  # type: ignore[no-untyped-def]
    """Items scheduled and not popped yet."""
    return eng.cnt[K_HEAP] - eng.cnt[K_HOLE]


@njit(cache=True)
def _pop(eng):  # type: ignore[no-untyped-def]
    """Remove the first item; returns its time, key and payload (its slot is freed). Its
    place stays empty until the next push or pop (`_fill_hole`)."""
    cnt = eng.cnt
    if cnt[K_HOLE] != 0:
        _fill_hole(eng)
    t0 = eng.ht[0]
    slot = eng.hs[0]
    key = eng.hk2[slot] >> _LOW
    payload = (eng.q_item[slot], eng.q_kind[slot], eng.q_a[slot], eng.q_b[slot], eng.q_c[slot])
    eng.q_free[cnt[K_FREE]] = slot
    cnt[K_FREE] += 1
    cnt[K_HOLE] = 1
    return t0, key, payload[0], payload[1], payload[2], payload[3], payload[4]
