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
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from causal_spark.protocols.base import Protocol
from causal_spark.replay_loop import (
    CompiledTrace,
    new_pool,
    pool_release,
    pool_row,
    pool_take,
    post,
)

if TYPE_CHECKING:
    from causal_spark.replay_engine import Engine


class Bss(Protocol):
    name = "bss"
    source = "Birman, Schiper & Stephenson: ISIS CBCAST vector timestamps"
    causal = True

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        self.vt = [[0] * n for _ in range(n)]
        self.stamp: dict[int, list[int]] = {}

    def not_applicable(self) -> str | None:
        trace = self.engine.trace
        n = trace.n
        for p in range(n):
            for k, copies in enumerate(trace.copies[p]):
                if not copies:
                    continue
                targets = sorted(trace.dst[m] for m in copies)
                others = [q for q in range(n) if q != p]
                if targets != others:
                    names = [
                        trace.names[d] if d >= 0 else "a process without events" for d in targets
                    ]
                    return (
                        f"send {trace.names[p]}#{trace.lseq[p][k]} goes to {', '.join(names)}, "
                        f"not to exactly the {n - 1} other process(es); BSS needs every send "
                        "to be a broadcast to all others"
                    )
        return None

    def send(self, p: int, copies: list[int], t: float) -> bool:
        vt = self.vt[p]
        vt[p] += 1
        stamp = list(vt)
        for m in copies:
            self.stamp[m] = stamp
            self.engine.post(m, p, t, len(stamp))
        return True

    def deliverable(self, p: int, m: int) -> bool:
        i = self.engine.trace.src[m]
        vt, mine = self.stamp[m], self.vt[p]
        if vt[i] != mine[i] + 1:
            return False
        return all(mine[k] >= vt[k] for k in range(len(vt)) if k != i)

    def delivered(self, p: int, m: int, t: float) -> None:
        mine, vt = self.vt[p], self.stamp[m]
        for k in range(len(mine)):
            if vt[k] > mine[k]:
                mine[k] = vt[k]


# ---- compiled form (causal_spark.replay_loop) ---------------------------------------------

State = namedtuple("State", "vt pool slot")


def make_state(trace: CompiledTrace, params: Mapping[str, str]) -> tuple[Any, str | None, bool]:
    n = trace.n
    state = State(np.zeros((n, n), np.int64), new_pool(n), np.full(trace.messages, -1, np.int32))
    return state, _not_a_broadcast(trace), False


def _not_a_broadcast(trace: CompiledTrace) -> str | None:
    """Why some send event is not a broadcast to exactly the n - 1 others (None if none)."""
    lay = trace.layout
    n = trace.n
    per = np.diff(lay.copy_start)
    sending = np.flatnonzero(per > 0)
    if not len(sending):
        return None
    event = np.repeat(np.arange(len(per)), per)
    sender = np.repeat(np.arange(n), np.diff(lay.ev_start))[event]
    dst = lay.dst[: int(lay.copy_start[-1])]  # copies are the first messages, in event order
    bad_copy = (dst < 0) | (dst == sender)
    order = np.lexsort((dst, event))
    twice = np.zeros(len(dst), dtype=bool)
    twice[order[1:]] = (event[order][1:] == event[order][:-1]) & (dst[order][1:] == dst[order][:-1])
    bad = np.zeros(len(per), dtype=bool)
    bad[event[bad_copy | twice]] = True
    bad |= (per > 0) & (per != n - 1)
    found = np.flatnonzero(bad)
    if not len(found):
        return None
    e = int(found[0])
    p = int(np.searchsorted(lay.ev_start, e, side="right") - 1)
    targets = sorted(int(d) for d in lay.dst[lay.copy_start[e] : lay.copy_start[e + 1]])
    names = [trace.names[d] if d >= 0 else "a process without events" for d in targets]
    return (
        f"send {trace.names[p]}#{e - lay.ev_start[p] + 1} goes to {', '.join(names)}, "
        f"not to exactly the {n - 1} other process(es); BSS needs every send "
        "to be a broadcast to all others"
    )


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
