"""The sequential clock kernel (docs/clocks.md): Lamport and vector clocks of a group of events.

Pure NumPy in, NumPy out, compiled with Numba; no Spark here. A group is a
whole trace (component) for the per-trace engine, or one slab of it for the
distributed engine. Events arrive sorted by (process, lseq) and each
process's events in the group are consecutive: process p's events are rows
start[p] .. start[p] + length[p] - 1, with lseq first_lseq[p], first_lseq[p]+1, ...

The traversal is a causal order built on the fly: every process advances
until it meets a receive whose send (in the group) has not been processed; it
then waits on that send (a linked list per send event) and is woken when the
send is done. Each event is visited once: O(E) steps plus O(E * n) for the
vector clocks (one fused copy-and-max per event). If processes are still
waiting when nothing can advance, the matched ids form a causal cycle: every
waiting process waits on a waiting process, and following those waits from
any of them reaches a cycle, returned as the witness.

Seeds make the same kernel serve a slab of a larger trace: the first event of
process p starts from `init_vc[p]`/`init_lamport[p]` (the clocks of p's last
event before the group), and a receive whose send lies outside the group
takes the send's clocks from `import_vc`/`import_lamport`. Optionally the
kernel also tracks, for a set of *entry* events outside the group, the length
of the longest path from each entry to every event (0 = unreachable): that is
what the distributed engine needs to resolve Lamport clocks across slabs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _clocks(
    start: np.ndarray,
    length: np.ndarray,
    first_lseq: np.ndarray,
    send_event: np.ndarray,
    import_of: np.ndarray,
    init_vc: np.ndarray,
    init_lamport: np.ndarray,
    import_vc: np.ndarray,
    import_lamport: np.ndarray,
    entry_first: np.ndarray,
    import_entry: np.ndarray,
    n_entries: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = start.shape[0]
    events = send_event.shape[0]
    # no rows: every process starts from zeros (a whole component: no n x n seed to touch)
    seeded = init_vc.shape[0] > 0
    vc = np.empty((events, n), dtype=np.int32)
    lamport = np.empty(events, dtype=np.int64)
    dist = np.zeros((events, n_entries), dtype=np.int32)
    done = np.zeros(events, dtype=np.bool_)
    ptr = start.copy()
    end = start + length
    wait_head = np.full(events, -1, dtype=np.int32)  # process indices
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
            first = e == start[p]
            previous = init_lamport[p] if first else lamport[e - 1]
            # four explicit loops rather than row views: with views Numba cannot prove the
            # rows do not alias and the kernel measured 9% slower (2*10^6 x 64, median of 5)
            if s >= 0:
                if first:
                    for j in range(n):
                        a = init_vc[p, j] if seeded else 0
                        b = vc[s, j]
                        vc[e, j] = a if a > b else b
                else:
                    for j in range(n):
                        a = vc[e - 1, j]
                        b = vc[s, j]
                        vc[e, j] = a if a > b else b
                if lamport[s] > previous:
                    previous = lamport[s]
            elif import_of[e] >= 0:
                i = import_of[e]
                if first:
                    for j in range(n):
                        a = init_vc[p, j] if seeded else 0
                        b = import_vc[i, j]
                        vc[e, j] = a if a > b else b
                else:
                    for j in range(n):
                        a = vc[e - 1, j]
                        b = import_vc[i, j]
                        vc[e, j] = a if a > b else b
                if import_lamport[i] > previous:
                    previous = import_lamport[i]
            elif first:
                for j in range(n):
                    vc[e, j] = init_vc[p, j] if seeded else 0
            else:
                for j in range(n):
                    vc[e, j] = vc[e - 1, j]
            lamport[e] = previous + 1
            vc[e, p] = first_lseq[p] + (e - start[p])
            if n_entries > 0:
                if first:
                    if entry_first[p] >= 0:
                        dist[e, entry_first[p]] = 1
                else:
                    for k in range(n_entries):
                        if dist[e - 1, k] > 0:
                            dist[e, k] = dist[e - 1, k] + 1
                if s >= 0:
                    for k in range(n_entries):
                        if dist[s, k] > 0 and dist[s, k] + 1 > dist[e, k]:
                            dist[e, k] = dist[s, k] + 1
                elif import_of[e] >= 0 and import_entry[import_of[e]] >= 0:
                    k = import_entry[import_of[e]]
                    if dist[e, k] < 1:
                        dist[e, k] = 1
            done[e] = True
            q = wait_head[e]
            while q >= 0:
                following = wait_next[q]
                stack[top] = q
                top += 1
                q = following
            wait_head[e] = -1
            ptr[p] += 1
    return vc, lamport, dist, ptr


@njit(cache=True)
def _grow(rows: np.ndarray, capacity: int) -> np.ndarray:
    bigger = np.empty((capacity, rows.shape[1]), dtype=rows.dtype)
    bigger[: rows.shape[0]] = rows
    return bigger


@njit(cache=True, nogil=True)
def _export_clocks(
    start: np.ndarray,
    length: np.ndarray,
    first_lseq: np.ndarray,
    send_event: np.ndarray,
    import_of: np.ndarray,
    init_vc: np.ndarray,
    init_lamport: np.ndarray,
    import_vc: np.ndarray,
    import_lamport: np.ndarray,
    entry_first: np.ndarray,
    import_entry: np.ndarray,
    n_entries: int,
    export_of: np.ndarray,
    n_exports: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """`_clocks`' traversal and values, keeping only the rows still needed (see `export_clocks`).

    Rows live in three places: one rolling row per process (its last processed
    event), a pool of rows of sends whose in-group receives are not all
    processed yet (a slot is freed by the last of them), and the output rows of
    export events. Returns the export rows' vc, lamport, dist, the traversal's
    ptr (for `_cycle`) and the most pool rows held at once.
    """
    n = start.shape[0]
    events = send_event.shape[0]
    # receives in the group of each send event (a multicast has several)
    # int32: counts, slots and process indices (events-sized arrays are fresh memory, and
    # first touching a page is a large part of this kernel's time in a Spark task)
    pending = np.zeros(events, dtype=np.int32)
    for e in range(events):
        if send_event[e] >= 0:
            pending[send_event[e]] += 1
    cur_vc = init_vc.copy() if init_vc.shape[0] > 0 else np.zeros((n, n), dtype=np.int32)
    cur_lamport = init_lamport.copy()
    cur_dist = np.zeros((n, n_entries), dtype=np.int32)
    capacity = max(4, n)  # grown by doubling
    pool_vc = np.empty((capacity, n), dtype=np.int32)
    pool_dist = np.empty((capacity, n_entries), dtype=np.int32)
    pool_lamport = np.empty(capacity, dtype=np.int64)
    free = np.empty(capacity, dtype=np.int64)
    for i in range(capacity):
        free[i] = capacity - 1 - i
    n_free = capacity
    held = 0
    most_held = 0
    slot_of = np.full(events, -1, dtype=np.int32)
    out_vc = np.zeros((n_exports, n), dtype=np.int32)
    out_lamport = np.zeros(n_exports, dtype=np.int64)
    out_dist = np.zeros((n_exports, n_entries), dtype=np.int32)
    done = np.zeros(events, dtype=np.bool_)
    ptr = start.copy()
    end = start + length
    wait_head = np.full(events, -1, dtype=np.int32)
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
            first = e == start[p]
            previous = cur_lamport[p]
            if s >= 0:
                slot = slot_of[s]
                for j in range(n):
                    b = pool_vc[slot, j]
                    if b > cur_vc[p, j]:
                        cur_vc[p, j] = b
                if pool_lamport[slot] > previous:
                    previous = pool_lamport[slot]
            elif import_of[e] >= 0:
                i = import_of[e]
                for j in range(n):
                    b = import_vc[i, j]
                    if b > cur_vc[p, j]:
                        cur_vc[p, j] = b
                if import_lamport[i] > previous:
                    previous = import_lamport[i]
            cur_lamport[p] = previous + 1
            cur_vc[p, p] = first_lseq[p] + (e - start[p])
            if n_entries > 0:
                if first:
                    if entry_first[p] >= 0:
                        cur_dist[p, entry_first[p]] = 1
                else:
                    for k in range(n_entries):
                        if cur_dist[p, k] > 0:
                            cur_dist[p, k] += 1
                if s >= 0:
                    slot = slot_of[s]
                    for k in range(n_entries):
                        d = pool_dist[slot, k]
                        if d > 0 and d + 1 > cur_dist[p, k]:
                            cur_dist[p, k] = d + 1
                elif import_of[e] >= 0 and import_entry[import_of[e]] >= 0:
                    k = import_entry[import_of[e]]
                    if cur_dist[p, k] < 1:
                        cur_dist[p, k] = 1
            if s >= 0:
                pending[s] -= 1
                if pending[s] == 0:
                    free[n_free] = slot_of[s]
                    n_free += 1
                    held -= 1
                    slot_of[s] = -1
            if pending[e] > 0:
                if n_free == 0:
                    free = np.empty(2 * capacity, dtype=np.int64)
                    for i in range(capacity):
                        free[i] = 2 * capacity - 1 - i
                    n_free = capacity
                    capacity *= 2
                    pool_vc = _grow(pool_vc, capacity)
                    pool_dist = _grow(pool_dist, capacity)
                    bigger = np.empty(capacity, dtype=np.int64)
                    bigger[: pool_lamport.shape[0]] = pool_lamport
                    pool_lamport = bigger
                n_free -= 1
                slot = free[n_free]
                slot_of[e] = slot
                held += 1
                if held > most_held:
                    most_held = held
                pool_lamport[slot] = cur_lamport[p]
                for j in range(n):
                    pool_vc[slot, j] = cur_vc[p, j]
                for k in range(n_entries):
                    pool_dist[slot, k] = cur_dist[p, k]
            x = export_of[e]
            if x >= 0:
                out_lamport[x] = cur_lamport[p]
                for j in range(n):
                    out_vc[x, j] = cur_vc[p, j]
                for k in range(n_entries):
                    out_dist[x, k] = cur_dist[p, k]
            done[e] = True
            q = wait_head[e]
            while q >= 0:
                following = wait_next[q]
                stack[top] = q
                top += 1
                q = following
            wait_head[e] = -1
            ptr[p] += 1
    return out_vc, out_lamport, out_dist, ptr, most_held


@njit(cache=True, nogil=True)
def _advance(
    start: np.ndarray, length: np.ndarray, send_event: np.ndarray, lamport: np.ndarray
) -> np.ndarray:
    """`_clocks`' traversal without the vector clocks: how far each process gets (its `ptr`),
    and, when `lamport` has a row per event (else it is empty), the Lamport clocks of a
    group without seeds (the per-trace engine's path for a component too wide for vectors).

    The events every process gets past are those with no causal cycle in their past,
    whatever the order the traversal takes, so `ptr` (and the witness `_cycle` finds from
    it) is the one `_clocks` ends with; the memory is O(events), not O(events x n).
    """
    with_lamport = lamport.shape[0] > 0
    n = start.shape[0]
    events = send_event.shape[0]
    done = np.zeros(events, dtype=np.bool_)
    ptr = start.copy()
    end = start + length
    wait_head = np.full(events, -1, dtype=np.int32)
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
            if with_lamport:
                previous = 0 if e == start[p] else lamport[e - 1]
                if s >= 0 and lamport[s] > previous:
                    previous = lamport[s]
                lamport[e] = previous + 1
            done[e] = True
            q = wait_head[e]
            while q >= 0:
                following = wait_next[q]
                stack[top] = q
                top += 1
                q = following
            wait_head[e] = -1
            ptr[p] += 1
    return ptr


@njit(cache=True)
def _owner(event: int, start: np.ndarray, end: np.ndarray) -> int:
    for p in range(start.shape[0]):
        if start[p] <= event < end[p]:
            return p
    return -1


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
        p = _owner(send_event[ptr[p]], start, end)
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


class GroupShapeError(ValueError):
    """A group's events are not consecutive per process (a bug upstream, or a bad table)."""


@dataclass(frozen=True)
class Seeds:
    """What a slab needs from outside: clocks entering each process, and imported sends.

    init_vc (n x n int32, or 0 x n: all zeros), init_lamport (n): the clocks of
    each process's last event before the group (zeros if none). import_vc (m x n), import_lamport
    (m): the clocks of the m sends outside the group that receives in it take.
    entry_first (n), import_entry (m), n_entries: entry ids to track path
    lengths from (-1 = not tracked); n_entries = 0 tracks nothing.
    """

    init_vc: np.ndarray
    init_lamport: np.ndarray
    import_vc: np.ndarray
    import_lamport: np.ndarray
    entry_first: np.ndarray
    import_entry: np.ndarray
    n_entries: int = 0

    @staticmethod
    def whole(n: int) -> Seeds:
        """No seeds at all (a whole component): init_vc has no rows, so no n x n matrix."""
        seeds = Seeds.none(0)
        return Seeds(
            init_vc=np.zeros((0, n), dtype=np.int32),
            init_lamport=np.zeros(n, dtype=np.int64),
            import_vc=np.zeros((0, n), dtype=np.int32),
            import_lamport=seeds.import_lamport,
            entry_first=np.full(n, -1, dtype=np.int64),
            import_entry=seeds.import_entry,
        )

    @staticmethod
    def none(n: int, imports: int = 0) -> Seeds:
        return Seeds(
            init_vc=np.zeros((n, n), dtype=np.int32),
            init_lamport=np.zeros(n, dtype=np.int64),
            import_vc=np.zeros((imports, n), dtype=np.int32),
            import_lamport=np.zeros(imports, dtype=np.int64),
            entry_first=np.full(n, -1, dtype=np.int64),
            import_entry=np.full(imports, -1, dtype=np.int64),
        )


@dataclass(frozen=True)
class GroupClocks:
    vc: np.ndarray  # events (export_clocks: wanted rows) x n, int32
    lamport: np.ndarray  # events (wanted rows), int64
    dist: np.ndarray  # events (wanted rows) x n_entries, int32 (empty unless entries tracked)


def group_layout(proc: np.ndarray, lseq: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, first_lseq) per process of events sorted by (proc, lseq); checks consecutiveness."""
    no_sends = np.full(len(proc), -1, dtype=np.int64)
    start, first_lseq, _, _ = _group_rows(proc, lseq, no_sends, no_sends, n)
    return start, first_lseq


@njit(cache=True, nogil=True)
def _layout_rows(
    proc: np.ndarray, lseq: np.ndarray, send_proc: np.ndarray, send_lseq: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:
    """`_group_rows`' layout and checks in one compiled pass (NumPy's dozen passes cost twice
    the kernel on a 2-process ping-pong). Returns start, first_lseq, length, send_event, the
    first row out of place (-1: none) and the first receive naming a send outside (-1)."""
    events = proc.shape[0]
    length = np.zeros(n, dtype=np.int64)
    for i in range(events):
        p = proc[i]
        if p < 0 or p >= n:
            return length, length, length, np.empty(0, dtype=np.int64), i, -1
        length[p] += 1
    start = np.zeros(n, dtype=np.int64)
    for p in range(1, n):
        start[p] = start[p - 1] + length[p - 1]
    first_lseq = np.ones(n, dtype=np.int64)
    for p in range(n):
        if length[p] > 0:
            first_lseq[p] = lseq[start[p]]
    send_event = np.full(events, -1, dtype=np.int64)
    for i in range(events):
        p = proc[i]
        if lseq[i] != first_lseq[p] + i - start[p]:
            return start, first_lseq, length, send_event, i, -1
    for i in range(events):
        q = send_proc[i]
        if q >= 0:
            if q >= n:
                return start, first_lseq, length, send_event, -1, i
            row = start[q] + send_lseq[i] - first_lseq[q]
            if row < start[q] or row >= start[q] + length[q]:
                return start, first_lseq, length, send_event, -1, i
            send_event[i] = row
    return start, first_lseq, length, send_event, -1, -1


def _group_rows(
    proc: np.ndarray, lseq: np.ndarray, send_proc: np.ndarray, send_lseq: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, first_lseq, length, send_event) of a group; checks every send is in it."""
    proc = np.asarray(proc, dtype=np.int64)
    lseq = np.asarray(lseq, dtype=np.int64)
    start, first_lseq, length, send_event, bad_row, bad_send = _layout_rows(
        proc, lseq, np.asarray(send_proc, dtype=np.int64), np.asarray(send_lseq, dtype=np.int64), n
    )
    if bad_row >= 0:
        p = int(proc[bad_row])
        if not 0 <= p < n:
            raise GroupShapeError(f"process index {p} is outside 0..{n - 1}")
        expected = int(first_lseq[p] + bad_row - start[p])
        raise GroupShapeError(
            f"process index {p}: expected lseq {expected}, "
            f"found {int(lseq[bad_row])} (lseq must be consecutive within a group)"
        )
    if bad_send >= 0:
        raise GroupShapeError("a receive names a send that is not among the group's events")
    return start, first_lseq, length, send_event


def group_clocks(
    proc: np.ndarray,
    lseq: np.ndarray,
    send_proc: np.ndarray,
    send_lseq: np.ndarray,
    import_of: np.ndarray,
    n: int,
    seeds: Seeds | None = None,
) -> GroupClocks:
    """Clocks of one group of events sorted by (proc, lseq).

    proc, lseq: the events (proc in 0..n-1, lseq consecutive per process).
    send_proc, send_lseq: for a receive whose send is in the group, the send
    event; -1 elsewhere. import_of: for a receive whose send is outside the
    group, its index into the seeds' import arrays; -1 elsewhere. Raises
    `CausalCycleError` with the receive rows of a witness cycle when the
    matched ids are not a valid execution.
    """
    seeds = seeds or Seeds.whole(n)
    start, first_lseq, length, send_event = _group_rows(proc, lseq, send_proc, send_lseq, n)
    vc, lamport, dist, ptr = _clocks(
        start,
        length,
        first_lseq,
        send_event,
        import_of.astype(np.int64),
        seeds.init_vc,
        seeds.init_lamport,
        seeds.import_vc,
        seeds.import_lamport,
        seeds.entry_first,
        seeds.import_entry,
        seeds.n_entries,
    )
    if np.any(ptr < start + length):
        raise CausalCycleError(_cycle(start, start + length, ptr, send_event))
    return GroupClocks(vc, lamport, dist)


def export_clocks(
    proc: np.ndarray,
    lseq: np.ndarray,
    send_proc: np.ndarray,
    send_lseq: np.ndarray,
    import_of: np.ndarray,
    n: int,
    seeds: Seeds,
    rows: np.ndarray,
) -> GroupClocks:
    """`group_clocks` at `rows` only (vc, lamport, dist in the order of `rows`), bit for bit.

    rows: distinct event rows (in `proc`/`lseq` order) wanted, e.g. a slab's
    export events. It holds rows of n + entries values only for: each process
    (its last processed event), each send whose receives in the group are not
    all processed yet (the traversal's sends in flight: a few hundred in a
    1.3 * 10^5-event time band of 256 processes, but up to every in-group send
    if one process's sends all precede their receives), and each wanted row;
    `group_clocks` holds one per event. Raises `CausalCycleError` with the same
    witness as `group_clocks`.
    """
    start, first_lseq, length, send_event = _group_rows(proc, lseq, send_proc, send_lseq, n)
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) and (rows.min() < 0 or rows.max() >= len(proc)):
        raise GroupShapeError("rows must be distinct events of the group")
    export_of = np.full(len(proc), -1, dtype=np.int64)
    export_of[rows] = np.arange(len(rows))
    if not np.array_equal(export_of[rows], np.arange(len(rows))):
        raise GroupShapeError("rows must be distinct events of the group")
    vc, lamport, dist, ptr, _ = _export_clocks(
        start,
        length,
        first_lseq,
        send_event,
        import_of.astype(np.int64),
        seeds.init_vc,
        seeds.init_lamport,
        seeds.import_vc,
        seeds.import_lamport,
        seeds.entry_first,
        seeds.import_entry,
        seeds.n_entries,
        export_of,
        len(rows),
    )
    if np.any(ptr < start + length):
        raise CausalCycleError(_cycle(start, start + length, ptr, send_event))
    return GroupClocks(vc, lamport, dist)


def cycle_witness(
    proc: np.ndarray, lseq: np.ndarray, send_proc: np.ndarray, send_lseq: np.ndarray, n: int
) -> np.ndarray | None:
    """The receive rows of the witness cycle `group_clocks` would raise for this group (its
    arguments without seeds), or None when the matched ids form no causal cycle. Computes
    no clocks: O(events) memory, whatever n."""
    start, _, length, send_event = _group_rows(proc, lseq, send_proc, send_lseq, n)
    ptr = _advance(start, length, send_event, np.empty(0, dtype=np.int64))
    if np.any(ptr < start + length):
        rows: np.ndarray = _cycle(start, start + length, ptr, send_event)
        return rows
    return None


def vector_clocks(
    pidx: np.ndarray, lseq: np.ndarray, send_pidx: np.ndarray, send_lseq: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """(vc, lamport) of a whole trace's events sorted by (pidx, lseq), lseq = 1..N_p.

    send_pidx, send_lseq: for a receive of a delivered message, its send's
    event; -1 elsewhere.
    """
    out = group_clocks(pidx, lseq, send_pidx, send_lseq, np.full(len(pidx), -1), n)
    return out.vc, out.lamport
