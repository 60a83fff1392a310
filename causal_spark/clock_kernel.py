"""The sequential clock kernel (DESIGN §2): Lamport and vector clocks of one trace.

Pure NumPy in, NumPy out, compiled with Numba; no Spark here. Events arrive
sorted by (pidx, lseq), so process p's events are rows start[p] ..
start[p] + length[p] - 1 and the event (p, l) is row start[p] + l - 1.

The traversal is a causal order built on the fly: every process advances
until it meets a receive whose send has not been processed; it then waits on
that send (a linked list per send event) and is woken when the send is done.
Each event is visited once: O(E) steps plus O(E * n) to copy vector clocks.
If processes are still waiting when nothing can advance, the matched ids form
a causal cycle: every waiting process waits on a waiting process, and
following those waits from any of them reaches a cycle, returned as witness.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _clocks(
    start: np.ndarray, length: np.ndarray, send_event: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    events = send_event.shape[0]
    vc = np.zeros((events, n), dtype=np.int32)
    lamport = np.zeros(events, dtype=np.int64)
    done = np.zeros(events, dtype=np.bool_)
    ptr = start.copy()
    end = start + length
    wait_head = np.full(events, -1, dtype=np.int64)
    wait_next = np.full(n, -1, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    top = 0
    for p in range(n - 1, -1, -1):
        stack[top] = p
        top += 1
    while top > 0:
        top -= 1
        p = stack[top]
        while ptr[p] < end[p]:
            e = ptr[p]
            s = send_event[e]
            if s >= 0 and not done[s]:
                wait_next[p] = wait_head[s]
                wait_head[s] = p
                break
            previous = 0
            if e > start[p]:
                for j in range(n):
                    vc[e, j] = vc[e - 1, j]
                previous = lamport[e - 1]
            if s >= 0:
                for j in range(n):
                    if vc[s, j] > vc[e, j]:
                        vc[e, j] = vc[s, j]
                if lamport[s] > previous:
                    previous = lamport[s]
            lamport[e] = previous + 1
            vc[e, p] = e - start[p] + 1
            done[e] = True
            q = wait_head[e]
            while q >= 0:
                following = wait_next[q]
                stack[top] = q
                top += 1
                q = following
            wait_head[e] = -1
            ptr[p] += 1
    return vc, lamport, ptr


@njit(cache=True)
def _owner(event: int, start: np.ndarray) -> int:
    # start is sorted: the owner is the last process whose block starts at or before event
    lo, hi = 0, start.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if start[mid] <= event:
            lo = mid
        else:
            hi = mid - 1
    # skip empty processes that share the same start
    while lo + 1 < start.shape[0] and start[lo + 1] <= event:
        lo += 1
    return lo


@njit(cache=True)
def _cycle(
    start: np.ndarray, end: np.ndarray, ptr: np.ndarray, send_event: np.ndarray
) -> np.ndarray:
    """Receive rows on a cycle of waits, in order: each waits on a send after the next one."""
    n = start.shape[0]
    blocked = -1
    for p in range(n):
        if ptr[p] < end[p]:
            blocked = p
            break
    seen = np.full(n, -1, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    steps = 0
    p = blocked
    while seen[p] < 0:
        seen[p] = steps
        order[steps] = p
        steps += 1
        p = _owner(send_event[ptr[p]], start)
    first = seen[p]
    rows = np.empty(steps - first, dtype=np.int64)
    for i in range(first, steps):
        rows[i - first] = ptr[order[i]]
    return rows


class CausalCycleError(ValueError):
    """Matched message ids make a receive happen before its own send."""

    def __init__(self, receive_rows: np.ndarray) -> None:
        self.receive_rows = receive_rows
        super().__init__(f"causal cycle through {len(receive_rows)} receive(s)")


def vector_clocks(
    pidx: np.ndarray, lseq: np.ndarray, send_pidx: np.ndarray, send_lseq: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """(vc, lamport) of events sorted by (pidx, lseq).

    pidx, lseq: int arrays of every event, sorted, lseq = 1..N_p per process.
    send_pidx, send_lseq: for a receive of a delivered message, its send's
    event; -1 elsewhere. Raises `CausalCycleError` with the receive rows of a
    witness cycle when the matched ids are not a valid execution.
    """
    length = np.bincount(pidx, minlength=n).astype(np.int64)
    start = np.zeros(n, dtype=np.int64)
    np.cumsum(length[:-1], out=start[1:])
    matched = send_pidx >= 0
    send_event = np.full(len(pidx), -1, dtype=np.int64)
    send_event[matched] = start[send_pidx[matched]] + send_lseq[matched] - 1
    vc, lamport, ptr = _clocks(start, length, send_event, n)
    if np.any(ptr < start + length):
        raise CausalCycleError(_cycle(start, start + length, ptr, send_event))
    return vc, lamport
