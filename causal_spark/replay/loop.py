"""The compiled replay engine: the model of docs/replay.md as one Numba event loop.

The reference engine (`tests/oracles/replay/engine.py`) is plain Python, one
object per message, easy to read against the sources. This module runs the same
model, event for event, over flat arrays (`structs.py`), so one (trace,
protocol) group replays at compiled speed inside the Spark task. `layout.py`
lays one trace's rows out (`CompiledTrace`); `run.replay_compiled` runs a
protocol over it and computes the figures (`figures.py`) and the verification
(`verify.py`) once, from the loop's columns.

Each protocol's module (`protocols/<name>.py`, listed by `protocols/registry.py`,
which `register`s it here) holds a `State` namedtuple of arrays, `make_state` and
the hooks `c_send`, `c_arrived`, `c_control`, `c_settle`, `c_deliverable`,
`c_next`, `c_delivered`, `c_taken` (absent hooks take the defaults below, which
are `none`'s behaviour). The loop is compiled once per protocol (its State type)
and cached on disk (`cache.py`). A cold compile is mostly LLVM's, and Numba hands
LLVM every compiled function again inside each caller: so few functions take the
State (`run_loop`, into which `_step` and `_arrival` are inlined, `notify`, with
`_try_take`, `_take` and `_deliver`, and the hooks), and the engine's helpers that
take none are `engine_njit` functions, one compiled version for every protocol and
call site (docs/replay.md, "The first run"). Protocol hooks call back `post`, `control`,
`resume` and `notify`, and read `eng.pend_head` / `eng.pnext` for the pending
copies.

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
`none`'s exactness are checked from the per-message columns afterwards
(`verify.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
from numba import njit, types
from numba.extending import overload
from numba.np.numpy_support import carray

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.model import EXTERNAL, INTERNAL, RECEIVE, SEND
from causal_spark.replay.structs import (
    ARRIVAL,
    DONE,
    F_CAUSAL,
    F_FIFO_TRANSPORT,
    F_P2P,
    F_SELECTIVE,
    F_VERIFY,
    ITEM_APP,
    ITEM_CTL,
    ITEM_EXT,
    ITEM_STEP,
    K_CONTROL,
    K_CONTROL_INTS,
    K_HEAP_CAP,
    K_MAX_BUFFER,
    K_VIOLATED,
    LAST,
    M_PENDING,
    M_POSTED,
    M_READY,
    M_TAKEN,
    READY,
    SCAN,
    STEP,
    V_CAUSAL,
    V_FIFO,
    V_NONE,
    WAIT_RECEIVE,
    WAIT_SEND,
    Eng,
    _intrinsic,
    _pop,
    engine_njit,
    new_pool,
    pool_at,
    pool_release,
    pool_take,
    prefetch_sent,
    push,
    queued,
)

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
    module = _MODULES[st.instance_class]
    return getattr(module, f"c_{name}", None) or _DEFAULTS[name]


# a protocol's State type -> its module (`protocols.registry` fills it)
_MODULES: dict[type, ModuleType] = {}


def register(module: ModuleType) -> None:
    """Let the loop call the hooks of `module` (a protocol's) for runs on its `State`."""
    _MODULES[module.State] = module


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


@engine_njit(inline=True)
def control_latency(eng, lay, sender, dst):  # type: ignore[no-untyped-def]
    width = max(lay.n, 1)
    key = sender * width + dst
    keys = carray(lay.ch_keys, lay.channels)
    if len(keys) == width * width:  # every channel (sorted, distinct): the key is the index
        return lay.ch_lat[key]
    i = np.searchsorted(keys, key)
    if i < len(keys) and keys[i] == key:
        return lay.ch_lat[i]
    if not np.isnan(lay.trace_lat):
        return lay.trace_lat
    return eng.default_latency


@engine_njit(inline=True)
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


@engine_njit(inline=True)
def post(eng, lay, m, sender, t, ints):  # type: ignore[no-untyped-def]
    """Put application copy m on the network at t from `sender`, carrying `ints` integers."""
    eng.post_t[m] = t
    eng.pig[m] = ints
    eng.mst[m] = M_POSTED
    latency = lay.latency[m]
    if np.isnan(latency):
        return  # lost: it never arrives
    _arrive_at(eng, lay, sender, lay.dst[m], t + latency, ITEM_APP, 0, m, 0, 0)


@engine_njit(inline=True)
def control(eng, lay, sender, dst, t, ckind, ints, a, b, c):  # type: ignore[no-untyped-def]
    """Send a control message of kind `ckind` with payload (a, b, c) counted as `ints`."""
    eng.cnt[K_CONTROL] += 1
    eng.cnt[K_CONTROL_INTS] += ints
    latency = control_latency(eng, lay, sender, dst)
    _arrive_at(eng, lay, sender, dst, t + latency, ITEM_CTL, ckind, a, b, c)


@engine_njit(inline=True)
def pending(eng, m):  # type: ignore[no-untyped-def]
    """Copy m arrived and is not delivered yet."""
    return eng.mst[m] == M_PENDING


@engine_njit(inline=True)
def send_event(lay, m):  # type: ignore[no-untyped-def]
    """The index of the send event of copy m (events by process, then lseq)."""
    return lay.send_ev[m]


@engine_njit(inline=True)
def _gap(lay, p, e):  # type: ignore[no-untyped-def]
    previous = lay.etime[e - 1] if e > lay.ev_start[p] else lay.start
    gap = lay.etime[e] - previous
    return gap if gap > 0.0 else 0.0


@engine_njit(inline=True)
def _schedule_step(eng, lay, p, t):  # type: ignore[no-untyped-def]
    lam = lay.lamport[lay.ev_start[p] + eng.pc[p]]
    push(eng, t, lam, STEP, p, 0, ITEM_STEP, 0, 0, 0, 0)


@engine_njit(inline=True)
def _complete(eng, lay, p, t):  # type: ignore[no-untyped-def]
    eng.now[p] = t
    eng.pc[p] += 1
    e = lay.ev_start[p] + eng.pc[p]
    if e < lay.ev_start[p + 1]:
        gap = 0.0 if lay.kind[e] == RECEIVE else _gap(lay, p, e)
        _schedule_step(eng, lay, p, t + gap)
    else:
        eng.state[p] = DONE


@engine_njit(inline=True)
def resume(eng, lay, p, t):  # type: ignore[no-untyped-def]
    """A blocked sender's send event completes at t."""
    eng.state[p] = READY
    _complete(eng, lay, p, t)


@engine_njit(inline=True)
def bypass(eng, lay, m):  # type: ignore[no-untyped-def]
    """Orphans' messages, and self-addressed ones under a causal protocol, skip the protocol."""
    return lay.send_ev[m] < 0 or (eng.flags[F_CAUSAL] != 0 and lay.src[m] == lay.dst[m])


@engine_njit(inline=True)
def queue_append(head, tail, nxt, p, m):  # type: ignore[no-untyped-def]
    """Append m to p's FIFO queue, a linked list over message indices (head/tail per process)."""
    nxt[m] = -1
    if tail[p] >= 0:
        nxt[tail[p]] = m
    else:
        head[p] = m
    tail[p] = m


@engine_njit(inline=True)
def queue_pop(head, tail, nxt, p):  # type: ignore[no-untyped-def]
    """Remove and return the first message of p's queue (which must not be empty)."""
    m = head[p]
    head[p] = nxt[m]
    if head[p] < 0:
        tail[p] = -1
    return m


@engine_njit(inline=True)
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


@engine_njit
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
    row, vc, n = pool_at(eng.vpool, slot), eng.vc, lay.n  # locals: the copy is vectorised
    for q in range(n):
        row[q] = vc[p * n + q]
    for m in range(lo, hi):
        if lay.dst[m] >= 0 and not np.isnan(lay.latency[m]):
            eng.vslot[m] = slot


@engine_njit
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
    n = lay.n
    vc = eng.vc
    mine = p * n  # p's vector clock: vc[mine : mine + n]
    if s != p and vc[mine + s] >= k:
        eng.cnt[K_VIOLATED] = 1
    row = pool_at(eng.vpool, eng.vslot[m])
    for q in range(n):  # branch-free, so vectorised (a store behind a branch was not)
        a = vc[mine + q]
        b = row[q]
        vc[mine + q] = a if a > b else b
    if k > vc[mine + s]:
        vc[mine + s] = k
    pool_release(eng.vpool, eng.vslot[m])


# ---- the loop ----------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _take(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    eng.take_t[m] = t
    eng.mst[m] = M_TAKEN
    eng.taken_by[m] = eng.pc[p] + 1
    if eng.flags[F_VERIFY] != V_NONE:
        _exec_take(eng, lay, p, m)
    if not bypass(eng, lay, m):
        _taken(st, eng, lay, p, m, t)


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _step(st, eng, lay, p, t):  # type: ignore[no-untyped-def]
    e = lay.ev_start[p] + eng.pc[p]
    kind = lay.kind[e]
    if kind == INTERNAL:
        if eng.flags[F_VERIFY] != V_NONE:
            eng.ex_count[p] += 1
        _complete(eng, lay, p, t)
    elif kind == SEND:
        lo, hi = lay.copy_start[e], lay.copy_start[e + 1]
        prefetch_sent(eng, lay, e, hi)
        causal, own = eng.flags[F_CAUSAL] != 0, 0
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
    while queued(eng) > 0:
        t, p, item, ckind, a, b, c = _pop(eng)
        if item == ITEM_STEP:
            _step(st, eng, lay, p, t)
        else:
            _arrival(st, eng, lay, p, t, item, ckind, a, b, c)


def new_engine(
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
        np.asarray([0] * K_HEAP_CAP + [heap, heap, 0], dtype=np.int64),
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
        np.zeros(n * n if causal else 1, np.int32),
        new_pool(n if causal else 1, 64 if causal else 1, np.int32),
        np.full(count if causal else 1, -1, np.int32),
    )  # fmt: skip
