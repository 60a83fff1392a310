"""`bss`: Birman-Schiper-Stephenson vector-timestamp causal broadcast (ISIS CBCAST).

"When pi multicasts a new message, it first increments VT[i] by 1. Then it
piggybacks the value vt = VTi on the message." A message from pi is held
back at pj until vt[i] = VTj[i] + 1 and VTj[k] >= vt[k] for k != i; on
delivery VTj = merge(VTj, vt). Liveness needs "all members of the group are
destinations for every message", so the protocol applies only to traces
whose every send event goes to all other processes (docs/replay.md); elsewhere
the run is `not_applicable` and says which send breaks the rule.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.loop import post
from causal_spark.replay.protocols.spec import SPECS
from causal_spark.replay.structs import new_pool, pool_release, pool_row, pool_take

SPEC = SPECS["bss"]

State = namedtuple("State", "vt pool slot")


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    n = trace.n
    state = State(np.zeros((n, n), np.int64), new_pool(n), np.full(trace.messages, -1, np.int32))
    return state, _not_a_broadcast(trace)


def _not_a_broadcast(trace: CompiledTrace) -> str | None:
    """Why some send event is not a broadcast to exactly the n - 1 others (None if none)."""
    lay = trace.layout
    n = trace.n
    e = _first_not_broadcast(lay.ev_start, lay.copy_start, lay.dst)
    if e < 0:
        return None
    p = int(np.searchsorted(lay.ev_start, e, side="right") - 1)
    targets = sorted(int(d) for d in lay.dst[lay.copy_start[e] : lay.copy_start[e + 1]])
    names = [trace.names[d] if d >= 0 else "a process without events" for d in targets]
    return (
        f"send {trace.names[p]}#{e - lay.ev_start[p] + 1} goes to {', '.join(names)}, "
        f"not to exactly the {n - 1} other process(es); BSS needs every send "
        "to be a broadcast to all others"
    )


@njit(cache=True)
def _first_not_broadcast(ev_start, copy_start, dst):  # type: ignore[no-untyped-def]
    """The first send event whose copies are not one to each other process (-1: none).
    A send event's copies are sorted by destination (`placing.sort_copies`), so a
    destination twice is two neighbours (a sort of every copy took 3 s at 10^7)."""
    n = len(ev_start) - 1
    for p in range(n):
        for e in range(ev_start[p], ev_start[p + 1]):
            lo = copy_start[e]
            hi = copy_start[e + 1]
            if hi == lo:
                continue
            if hi - lo != n - 1:
                return e
            before = -1
            for m in range(lo, hi):
                d = dst[m]
                if d < 0 or d == p or d == before:  # noqa: SIM109 (compiled: no tuple)
                    return e
                before = d
    return -1


@njit(cache=True)
def c_send(st, eng, lay, p, own, t):  # type: ignore[no-untyped-def]
    st.vt[p, p] += 1
    slot = pool_take(st.pool, len(own))
    pool_row(st.pool, slot)[:] = st.vt[p]
    for m in own:
        st.slot[m] = slot
        post(eng, lay, m, p, t, lay.n)
    return True


@njit(cache=True)
def c_deliverable(st, eng, lay, p, m):  # type: ignore[no-untyped-def]
    i = lay.src[m]
    vt = pool_row(st.pool, st.slot[m])
    mine = st.vt[p]
    if vt[i] != mine[i] + 1:
        return False
    for k in range(lay.n):  # noqa: SIM110 (a loop compiles; a generator does not)
        if k != i and mine[k] < vt[k]:
            return False
    return True


@njit(cache=True)
def c_delivered(st, eng, lay, p, m, t):  # type: ignore[no-untyped-def]
    vt = pool_row(st.pool, st.slot[m])
    mine = st.vt[p]
    for k in range(lay.n):
        if vt[k] > mine[k]:
            mine[k] = vt[k]
    pool_release(st.pool, st.slot[m])
