"""Sequential kernels of the detector (docs/anomalies.md): overtaken messages and witness chains.

Pure NumPy in, NumPy out, compiled with Numba; no Spark here. Each kernel
works on one group that a grouped Arrow UDF hands it, and takes its rows in
a deterministic order (callers sort), so its answer does not depend on how
Spark partitioned the data.

Overtaking (Schiper, Eggli & Sandoz, "A New Algorithm to Implement Causal Ordering",
§4.1, Proposition 2). Take the delivered messages received
at one process d, in receive order. For m from src != d sent at lseq s, the
events of d before recv(m) learn of send(m) only through receives, so
m is overtaken iff vc(prev(recv(m)))[src] >= s, i.e. iff the latest earlier
receive at d has vc[src] >= s: O(1) per message. The first-received
overtaking message is the first receive at d with vc[src] >= s, found by a
binary search on that monotone column. A self-message (src = d) is overtaken
iff an earlier receive at d took a message whose send knew (d, s): the same
search on the prefix maximum of vc(send(m'))[d]. FIFO violations use the
prefix maximum of send_lseq along each channel.

Chains: a shortest causal path, in messages, from send(m) to send(m'). Local
steps are free, so the search is a breadth-first search over hop counts that
keeps, for each process, the earliest event reachable with k messages. A
shortest path never visits a process twice (arriving later at a process
reaches nothing new), so at most n - 1 levels. Each level asks every channel
p -> q for the earliest receive of a message sent at or after the frontier
on p: a binary search in the channel's sends plus a suffix minimum of its
receives.

Crowns: `causal_spark.anomalies.crown_kernel`, which uses the channel index here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

_NONE = -1
# the rows of the chain search's records (`_recorded`)
_LEVEL, _MSG, _PREV = 0, 1, 2


# ---------------------------------------------------------------------------------------------
# overtaken messages at one destination


@njit(cache=True, nogil=True)
def _first_at_least(column: np.ndarray, hi: int, value: int) -> int:
    """The first index i < hi with column[i] >= value (column non-decreasing), else -1."""
    lo = 0
    top = hi
    while lo < top:
        mid = (lo + top) // 2
        if column[mid] >= value:
            top = mid
        else:
            lo = mid + 1
    return lo if lo < hi else _NONE


@njit(cache=True, nogil=True)
def _overtaking(
    dst: int,
    src: np.ndarray,
    send_lseq: np.ndarray,
    recv_vc: np.ndarray,
    send_knows_dst: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    m = src.shape[0]
    causal = np.full(m, _NONE, dtype=np.int64)
    fifo = np.full(m, _NONE, dtype=np.int64)
    n = recv_vc.shape[1]
    # prefix maximum of what each receive's message knew of d (for self-messages)
    knows = np.empty(m, dtype=np.int64)
    running = 0
    for i in range(m):
        running = max(running, send_knows_dst[i])
        knows[i] = running
    column = np.empty(m, dtype=np.int64)
    for p in range(n):
        # vc[p] at the receives: non-decreasing along d's local order
        has = False
        for i in range(m):
            if src[i] == p:
                has = True
                break
        if not has:
            continue
        track = knows if p == dst else column
        if p != dst:
            for i in range(m):
                column[i] = recv_vc[i, p]
        for i in range(m):
            if src[i] != p or i == 0:
                continue
            if track[i - 1] >= send_lseq[i]:
                causal[i] = _first_at_least(track, i, send_lseq[i])
    # FIFO: along each channel src -> d, receives in order, prefix maximum of send_lseq
    order = np.argsort(src, kind="mergesort")  # stable: receive order within a channel
    channel_max = np.empty(m, dtype=np.int64)
    begin = 0
    while begin < m:
        p = src[order[begin]]
        end = begin
        running = -1
        while end < m and src[order[end]] == p:
            i = order[end]
            if end > begin and running > send_lseq[i]:
                k = _first_at_least(channel_max[begin:end], end - begin, send_lseq[i] + 1)
                fifo[i] = order[begin + k]
            running = max(running, send_lseq[i])
            channel_max[end] = running
            end += 1
        begin = end
    return causal, fifo


def overtaking(
    dst: int,
    src: np.ndarray,
    send_lseq: np.ndarray,
    recv_vc: np.ndarray,
    send_knows_dst: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """First-received overtaking message of each message received at process `dst`.

    Rows are the delivered messages received at `dst`, sorted by receive lseq:
    `src` (pidx), `send_lseq`, `recv_vc` (n-column vc of the receive) and
    `send_knows_dst` (vc(send)[dst]). Returns (causal, fifo): for each row the
    row index of the first-received message that overtakes it causally / on its
    own channel, or -1.
    """
    return _overtaking(
        int(dst),
        np.ascontiguousarray(src, dtype=np.int64),
        np.ascontiguousarray(send_lseq, dtype=np.int64),
        # int32 as the vectors are stored (an int64 copy was 8 more bytes per entry)
        np.ascontiguousarray(recv_vc, dtype=np.int32),
        np.ascontiguousarray(send_knows_dst, dtype=np.int64),
    )


# ---------------------------------------------------------------------------------------------
# the channels of a trace: earliest arrivals forward, latest departures backward


@dataclass(frozen=True)
class Channels:
    """Delivered messages of a trace indexed by channel: CSR over the non-empty channels only,
    numbered c = 0, 1, ... in (source, destination) order, so the index is O(messages + n)
    whatever n (a dense p * n + q index held 16 n^2 bytes: 6.4 GB at n = 20 000).

    Forward: each channel's messages by send lseq, with the suffix minimum of
    their receive lseq (the earliest receive of a message sent at or after a
    point). Backward: by receive lseq, with the prefix maximum of their send
    lseq (the latest send of a message received at or before a point). Channel
    t of source p's targets (targets_start[p] <= t < targets_start[p + 1]) is
    channel number t; the channel of sources[t] is sources_channel[t].
    """

    n: int
    start: np.ndarray  # (channels + 1,) offsets, shared by both orders
    send_lseq: np.ndarray  # forward order
    suffix_recv: np.ndarray
    suffix_msg: np.ndarray  # the message (input row) holding that minimum
    recv_lseq: np.ndarray  # backward order
    prefix_send: np.ndarray
    targets: np.ndarray  # CSR: destinations of the non-empty channels of each source, ascending
    targets_start: np.ndarray
    sources: np.ndarray  # CSR: sources of the non-empty channels into each destination
    sources_start: np.ndarray
    sources_channel: np.ndarray  # the channel number of each entry of `sources`


def channels(
    n: int, src: np.ndarray, dst: np.ndarray, send_lseq: np.ndarray, recv_lseq: np.ndarray
) -> Channels:
    """Index the delivered messages (rows) of a trace by channel."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    send_lseq = np.asarray(send_lseq, dtype=np.int64)
    recv_lseq = np.asarray(recv_lseq, dtype=np.int64)
    key = src * n + dst
    forward = np.lexsort((recv_lseq, send_lseq, key))
    backward = np.lexsort((send_lseq, recv_lseq, key))
    present, counts = np.unique(key, return_counts=True)  # the non-empty channels, in order
    start = np.zeros(len(present) + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    suffix_recv, suffix_msg, prefix_send = _channel_extrema(
        start, recv_lseq[forward], forward, send_lseq[backward]
    )
    targets_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(present // n, minlength=n), out=targets_start[1:])
    by_dst = np.lexsort((present // n, present % n)).astype(np.int64)
    sources_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(present % n, minlength=n), out=sources_start[1:])
    return Channels(
        n=n,
        start=start,
        send_lseq=send_lseq[forward],
        suffix_recv=suffix_recv,
        suffix_msg=suffix_msg,
        recv_lseq=recv_lseq[backward],
        prefix_send=prefix_send,
        targets=(present % n).astype(np.int64),
        targets_start=targets_start,
        sources=(present[by_dst] // n).astype(np.int64),
        sources_start=sources_start,
        sources_channel=by_dst,
    )


@njit(cache=True, nogil=True)
def _channel_extrema(
    start: np.ndarray, recv: np.ndarray, rows: np.ndarray, send: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    best = np.empty(recv.shape[0], dtype=np.int64)
    which = np.empty(recv.shape[0], dtype=np.int64)
    latest = np.empty(send.shape[0], dtype=np.int64)
    for c in range(start.shape[0] - 1):
        lo = start[c]
        hi = start[c + 1]
        for k in range(hi - 1, lo - 1, -1):
            if k == hi - 1 or recv[k] < best[k + 1]:
                best[k] = recv[k]
                which[k] = rows[k]
            else:
                best[k] = best[k + 1]
                which[k] = which[k + 1]
        for k in range(lo, hi):
            latest[k] = send[k] if k == lo else max(send[k], latest[k - 1])
    return best, which, latest


_FAR = np.iinfo(np.int64).max


@njit(cache=True, nogil=True)
def _first_send_at_or_after(send_lseq: np.ndarray, lo: int, hi: int, after: int) -> int:
    while lo < hi:
        mid = (lo + hi) // 2
        if send_lseq[mid] >= after:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, nogil=True)
def _channel(targets: np.ndarray, first: int, end: int, q: int) -> int:
    """The channel number of (p, q) among p's channels first..end-1 (targets ascending), or
    -1 when p sends nothing to q."""
    lo, hi = first, end
    while lo < hi:
        mid = (lo + hi) // 2
        if targets[mid] < q:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < end and targets[lo] == q else -1


@njit(cache=True, nogil=True)
def _earliest_arrivals(
    n: int,
    start: np.ndarray,
    send_lseq: np.ndarray,
    suffix_recv: np.ndarray,
    targets: np.ndarray,
    targets_start: np.ndarray,
    arrival: np.ndarray,
    origin: np.ndarray,
    active: np.ndarray,
) -> int:
    """Relax `arrival` (earliest reachable lseq per process) to its fixpoint, in place.

    `origin` travels with each improvement (which start reached it). Returns the
    work done (channel probes), for budgets.
    """
    work = 0
    changed = True
    while changed:
        changed = False
        for p in range(n):
            if not active[p]:
                continue
            active[p] = False
            after = arrival[p]
            for c in range(targets_start[p], targets_start[p + 1]):
                q = targets[c]
                work += 1
                lo = _first_send_at_or_after(send_lseq, start[c], start[c + 1], after)
                if lo < start[c + 1] and suffix_recv[lo] < arrival[q]:
                    arrival[q] = suffix_recv[lo]
                    origin[q] = origin[p]
                    active[q] = True
                    changed = True
    return work


@njit(cache=True, nogil=True)
def _latest_departures(
    n: int,
    start: np.ndarray,
    recv_lseq: np.ndarray,
    prefix_send: np.ndarray,
    sources: np.ndarray,
    sources_start: np.ndarray,
    sources_channel: np.ndarray,
    departure: np.ndarray,
) -> int:
    """Relax `departure` (latest lseq per process that happens before or is the target)."""
    work = 0
    active = departure >= 0
    changed = True
    while changed:
        changed = False
        for q in range(n):
            if not active[q]:
                continue
            active[q] = False
            until = departure[q]
            for t in range(sources_start[q], sources_start[q + 1]):
                p = sources[t]
                c = sources_channel[t]
                work += 1
                lo = start[c]
                hi = start[c + 1]
                while lo < hi:  # first receive after `until`
                    mid = (lo + hi) // 2
                    if recv_lseq[mid] > until:
                        hi = mid
                    else:
                        lo = mid + 1
                if lo > start[c] and prefix_send[lo - 1] > departure[p]:
                    departure[p] = prefix_send[lo - 1]
                    active[p] = True
                    changed = True
    return work


# ---------------------------------------------------------------------------------------------
# witness chains: shortest causal paths in messages


@njit(cache=True, nogil=True)
def _chains(
    n: int,
    start: np.ndarray,
    send_lseq: np.ndarray,
    suffix_recv: np.ndarray,
    suffix_msg: np.ndarray,
    targets: np.ndarray,
    targets_start: np.ndarray,
    msg_src: np.ndarray,
    q_src: np.ndarray,
    q_send: np.ndarray,
    q_dst: np.ndarray,
    q_until: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    queries = q_src.shape[0]
    offsets = np.zeros(queries + 1, dtype=np.int64)
    path = np.empty(0, dtype=np.int64)
    used = 0
    # earliest reachable lseq per process with at most level - 1 messages, and with level
    before = np.empty(n, dtype=np.int64)
    arrival = np.empty(n, dtype=np.int64)
    # every improvement of a process's arrival as a record (its level, the message, the
    # process's previous record): each one lowers that arrival to the lseq of one of its
    # receives, so a search holds at most messages + n records, not a level x n table
    # (16 n^2 bytes when a chain runs through every process)
    rec = np.empty((3, max(16, n)), dtype=np.int64)
    latest = np.empty(n, dtype=np.int64)  # per process: its latest record, or -1
    improved = np.empty(n, dtype=np.bool_)
    frontier = np.empty(n, dtype=np.bool_)
    for qi in range(queries):
        origin = q_src[qi]
        goal = q_dst[qi]
        before[:] = _FAR
        before[origin] = q_send[qi]
        latest[:] = _NONE
        records = 0
        frontier[:] = False
        frontier[origin] = True
        found = _NONE
        for level in range(1, n):
            for p in range(n):  # element loops: see `_recorded`
                arrival[p] = before[p]
            # the goal first: one probe per frontier process often ends the search here,
            # sparing the frontier x n probes of a full level
            c_goal = _NONE
            for p in range(n):
                if frontier[p]:
                    c = _channel(targets, targets_start[p], targets_start[p + 1], goal)
                    if c == _NONE:
                        continue
                    lo = _first_send_at_or_after(send_lseq, start[c], start[c + 1], before[p])
                    if lo < start[c + 1] and suffix_recv[lo] < arrival[goal]:
                        arrival[goal] = suffix_recv[lo]
                        rec = _recorded(rec, records, level, suffix_msg[lo], latest[goal])
                        latest[goal] = records
                        records += 1
                        c_goal = c
            if c_goal != _NONE and arrival[goal] <= q_until[qi]:
                found = level
                break
            improved[:] = False
            for p in range(n):
                if not frontier[p]:
                    continue
                after = before[p]
                for c in range(targets_start[p], targets_start[p + 1]):
                    q = targets[c]
                    lo = _first_send_at_or_after(send_lseq, start[c], start[c + 1], after)
                    if lo < start[c + 1] and suffix_recv[lo] < arrival[q]:
                        arrival[q] = suffix_recv[lo]
                        rec = _recorded(rec, records, level, suffix_msg[lo], latest[q])
                        latest[q] = records
                        records += 1
                        improved[q] = True
            if arrival[goal] <= q_until[qi]:
                found = level
                break
            any_improved = False
            for p in range(n):
                frontier[p] = improved[p]
                any_improved = any_improved or improved[p]
            if not any_improved:
                break
            for p in range(n):
                before[p] = arrival[p]
        if found == _NONE:
            offsets[qi + 1] = used
            continue
        if used + found > path.shape[0]:
            grown = np.empty(max(2 * path.shape[0], used + found), dtype=np.int64)
            for i in range(used):
                grown[i] = path[i]
            path = grown
        # walk back: at each process take the message of the latest level (at most the
        # current one) that improved it; `found` is the fewest messages, so the walk takes
        # exactly `found` steps
        at = goal
        level = found
        hops = 0
        while at != origin:
            r = latest[at]
            while rec[_LEVEL, r] > level:
                r = rec[_PREV, r]
            msg = rec[_MSG, r]
            path[used + found - 1 - hops] = msg
            hops += 1
            at = msg_src[msg]
            level = rec[_LEVEL, r] - 1
        used += hops
        offsets[qi + 1] = used
    return path[:used], offsets


@njit(cache=True, nogil=True)
def _recorded(rec: np.ndarray, records: int, level: int, msg: int, prev: int) -> np.ndarray:
    """The chain search's records (`_LEVEL`, `_MSG`, `_PREV` rows) with record `records`
    set to (level, msg, prev); doubled first when full."""
    if records == rec.shape[1]:
        bigger = np.empty((rec.shape[0], 2 * records), dtype=rec.dtype)
        # element loops, not a slice assignment: Numba's shape check of an array assigned
        # to a slice compiles its error message (about 3 CPU-s of `_chains`, cold)
        for r in range(rec.shape[0]):
            for i in range(records):
                bigger[r, i] = rec[r, i]
        rec = bigger
    rec[_LEVEL, records] = level
    rec[_MSG, records] = msg
    rec[_PREV, records] = prev
    return rec


def shortest_chains(
    index: Channels,
    msg_src: np.ndarray,
    q_src: np.ndarray,
    q_send: np.ndarray,
    q_dst: np.ndarray,
    q_until: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Shortest causal paths (fewest messages) from (q_src, q_send) to (q_dst, <= q_until).

    `msg_src` is the source pidx of every message row `index` was built from.
    Returns (rows, offsets): query i's path is rows[offsets[i]:offsets[i+1]],
    message rows in path order; empty when no path exists (or q_src == q_dst).
    """
    return _chains(
        index.n,
        index.start,
        index.send_lseq,
        index.suffix_recv,
        index.suffix_msg,
        index.targets,
        index.targets_start,
        np.asarray(msg_src, dtype=np.int64),
        np.asarray(q_src, dtype=np.int64),
        np.asarray(q_send, dtype=np.int64),
        np.asarray(q_dst, dtype=np.int64),
        np.asarray(q_until, dtype=np.int64),
    )
