"""The layout's compiled passes over one trace's rows (`layout.LayoutBuilder.finish`).

Each takes one chunk of narrow columns (`layout._Chunk`) or the laid-out columns:
events placed by (process, lseq), send copies by destination, receives matched to
their copies by the send's coordinates, latencies, and each channel's median latency.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.np.arraymath import _median_inner  # np.median's selection, without its copy

from causal_spark.replay.model import EXTERNAL, INTERNAL, RECEIVE, SEND
from causal_spark.replay.shape import BAD_ROW, OK, TWO_ROWS


@njit(cache=True)
def max_at(top, p_of, lseq_of):  # type: ignore[no-untyped-def]
    """top[p] = max(top[p], lseq) over the rows (np.maximum.at, ten times slower)."""
    for row in range(len(p_of)):
        p = p_of[row]
        if lseq_of[row] > top[p]:
            top[p] = lseq_of[row]


@njit(cache=True)
def place_events(p_of, lseq_of, code_of, ts_of, lam_of, peer_of, plseq_of, ev_start, kind,  # type: ignore[no-untyped-def]
                  lamport, etime, count, width, bucket):  # fmt: skip
    """Event columns from one chunk; count[e] = the copies of send event e; each receive
    of a sent message counted in its bucket for `place_receives`: bucket[key + 1] += 1,
    its key its channel `sender * n + receiver` when width is n, else its sender (width
    1). Returns (error, orphans' receives, True if a receive's sender is no process: a
    bad table, raised as `place_receives`' error after this pass's and `sort_copies`')."""
    orphans = 0
    n = len(ev_start) - 1
    bad_sender = False
    for row in range(len(p_of)):
        p = p_of[row]
        code = code_of[row]
        q = lseq_of[row]
        if code < 0 or p < 0 or p + 1 >= len(ev_start) or q < 1:
            return BAD_ROW, 0, bad_sender
        e = ev_start[p] + q - 1
        if kind[e] >= 0:
            if code != SEND or kind[e] != SEND:
                return TWO_ROWS, 0, bad_sender
        else:
            kind[e] = code
            lamport[e] = lam_of[row]
            etime[e] = ts_of[row]
        if code == SEND:
            count[e] += 1
        elif code == RECEIVE:
            if plseq_of[row] < 0:
                orphans += 1
            else:
                s = peer_of[row]
                if s < 0 or s >= n:
                    bad_sender = True
                else:
                    bucket[s * width + (p if width > 1 else 0) + 1] += 1
    return OK, orphans, bad_sender


@njit(cache=True)
def scan_events(ev_start, kind, lamport, etime, count, timed):  # type: ignore[no-untyped-def]
    """One pass over the events placed by `place_events`: `count` (copies per event) becomes
    `copy_start` in place, etime takes the Lamport clocks when the trace is not timed.
    Returns (True if an lseq no row has: a jump; the copies; the earliest and the latest
    recorded time, 0 without events; True if a gap is negative, clock skew)."""
    run = 0
    start = np.inf
    end = -np.inf
    skewed = False
    for p in range(len(ev_start) - 1):
        lo = ev_start[p]
        for e in range(lo, ev_start[p + 1]):
            if kind[e] < 0:
                return True, 0, 0.0, 0.0, skewed
            c = count[e]
            count[e] = run
            run += c
            if not timed:
                etime[e] = lamport[e]
            t = etime[e]
            if e > lo and t < etime[e - 1]:
                skewed = True
            start = min(start, t)
            end = max(end, t)
    count[len(count) - 1] = run
    if len(kind) == 0:
        start = end = 0.0
    return False, run, start, end, skewed


@njit(cache=True)
def place_sends(p_of, lseq_of, code_of, peer_of, plseq_of, ev_start, copy_start, src, dst,  # type: ignore[no-untyped-def]
                 send_ev, recv_ev, take, kept, at, etime, latency, width, fill, pairs,
                 process_of):  # fmt: skip
    """Copies of send events and orphans' messages (after the copies) from one chunk;
    `kept[i]` is the message named by the i-th row that names one (within a send event of
    several copies, fixed by `sort_copies`). at: kept, orphans, copies. latency[slot] holds
    the send's time until `place_receives` subtracts it from the receive's (`unmatched`
    clears the rest): the receive then reads no line of the sender's events.

    A send event of one copy fills its slot, `copy_start[e]`; one of several takes its
    slots in row order: `take[e]` (-1, as for any send event) counts them meanwhile, and
    `recv_ev[slot]` holds the row's place in `kept` for `sort_copies`.

    The receives of sent messages go to their buckets (`fill`: the next free place of
    each, from `place_events`' counts, keyed as there), each as its send event and its own
    event (`pairs[2i]`, `pairs[2i + 1]`) and, where the key does not name the receiver,
    its process (`process_of[i]`). Returns (True if a send's lseq is beyond its process's
    events; True if one is below 1: it names the previous process's last event, another
    channel than its bucket's, so the buckets are no channel medians' buckets)."""
    n = len(ev_start) - 1
    beyond = False
    before = False
    named = len(process_of) > 0
    for row in range(len(p_of)):
        code = code_of[row]
        if code == SEND:
            p = p_of[row]
            e = ev_start[p] + lseq_of[row] - 1
            slot = copy_start[e]
            if copy_start[e + 1] - slot > 1:
                slot += take[e] + 1
                take[e] += 1
                recv_ev[slot] = at[0]
            src[slot] = p
            dst[slot] = peer_of[row]
            send_ev[slot] = e
            latency[slot] = etime[e]
            kept[at[0]] = slot
            at[0] += 1
        elif code == RECEIVE and plseq_of[row] < 0:
            p = p_of[row]
            e = ev_start[p] + lseq_of[row] - 1
            m = at[2] + at[1]
            at[1] += 1
            src[m] = peer_of[row] if peer_of[row] >= 0 else EXTERNAL
            dst[m] = p
            send_ev[m] = -1
            recv_ev[m] = e
            latency[m] = np.nan
            take[e] = m
            kept[at[0]] = m
            at[0] += 1
        elif code == RECEIVE:
            p = p_of[row]
            s = peer_of[row]
            k = plseq_of[row]
            if s < 0 or s >= n:  # `place_events` found it
                continue
            if k > ev_start[s + 1] - ev_start[s]:
                beyond = True
                continue
            if k < 1:
                before = True
            key = s * width + (p if width > 1 else 0)
            i = fill[key]
            fill[key] = i + 1
            pairs[2 * i] = ev_start[s] + k - 1
            pairs[2 * i + 1] = ev_start[p] + lseq_of[row] - 1
            if named:
                process_of[i] = p
    return beyond, before


@njit(cache=True)
def sort_copies(copies, dst, send_ev, recv_ev, take, kept):  # type: ignore[no-untyped-def]
    """The copies of each send event of several by destination (as the reference, which
    sorts rows by peer), each one's message index to its row in `kept` (`recv_ev` held the
    row: -1 again after), and the event's `take` -1 again. True if an event has two copies
    to one destination."""
    lo = 0
    while lo < copies:
        e = send_ev[lo]
        hi = lo + 1
        while hi < copies and send_ev[hi] == e:
            hi += 1
        if hi - lo > 1:
            for i in range(lo + 1, hi):
                d = dst[i]
                o = recv_ev[i]
                j = i - 1
                while j >= lo and dst[j] > d:
                    dst[j + 1] = dst[j]
                    recv_ev[j + 1] = recv_ev[j]
                    j -= 1
                dst[j + 1] = d
                recv_ev[j + 1] = o
            for i in range(lo, hi):
                if i > lo and dst[i] == dst[i - 1] and dst[i] >= 0:
                    return True
                kept[recv_ev[i]] = i
                recv_ev[i] = -1
            take[e] = -1
        lo = hi
    return False


@njit(cache=True)
def place_receives(start, pairs, process_of, width, copy_start, dst, recv_ev, take, etime,  # type: ignore[no-untyped-def]
                   latency, values):  # fmt: skip
    """Each receive of a sent message (bucketed by `place_sends`: bucket k holds the
    receives start[k] .. start[k + 1]) finds its copy among its send event's, by its
    receiver (the key's, `k % width`, or `process_of`'s), and sets its latency (recv - send
    time, clamped at 0; the send's time is in latency[copy], put there by `place_sends`).
    Returns (True if one does not find it: a bad table, the send is not there or the
    message is received twice; True if a latency is negative, clock skew; True if `values`
    cannot serve as the channels' latencies for `bucket_median`).

    The receives come sender by sender (by channel where `values` has a place for each:
    then values[i] is the i-th one's latency, the channel buckets `medians` would make;
    `values` may be `pairs`' bytes, each written once its pair is read): each sender's
    events and copies are read in a few ascending runs while they are in the cache, where
    taken chunk by chunk (a receiver's rows) every sender's lines were read again by each
    of its receivers' chunks (`bench/README.md`, issue 22)."""
    skewed = False
    odd = False
    fills = len(values) > 0
    named = len(process_of) > 0
    for key in range(len(start) - 1):
        for i in range(start[key], start[key + 1]):
            es = pairs[2 * i]
            e = pairs[2 * i + 1]
            p = process_of[i] if named else key % width
            found = -1  # only send events have copies (`place_events`)
            for m in range(copy_start[es], copy_start[es + 1]):
                if dst[m] == p:
                    found = m
                    break
            if found < 0 or recv_ev[found] >= 0:
                return True, skewed, odd
            recv_ev[found] = e
            take[e] = found
            lat = etime[e] - latency[found]
            if lat < 0:
                skewed = True
                lat = 0.0
            latency[found] = lat
            if fills:
                values[i] = lat
                # NaN and -0 make a selection's answer depend on the order: `medians` then
                if lat != lat or (lat == 0 and math.copysign(1.0, lat) < 0):
                    odd = True
    return False, skewed, odd


@njit(cache=True)
def unmatched(recv_ev, latency, copies):  # type: ignore[no-untyped-def]
    """NaN the latency (the send's time till now) of every copy no receive found."""
    for m in range(copies):
        if recv_ev[m] < 0:
            latency[m] = np.nan


def medians(
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
    """`medians` for up to a few channels per message: latencies bucketed by channel, each
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
    return bucket_medians(start, values)


@njit(cache=True)
def bucket_medians(start, values):  # type: ignore[no-untyped-def]
    """Every channel's median latency from the channels' buckets (channel k's values are
    values[start[k]:start[k + 1]]), and the trace's: (keys, medians, the trace's median).

    Every channel has one (dense: the loop indexes it by channel, no search per control
    message), its median or, where none was recorded, the trace's. Each by np.median's own
    quickselect (the two middle values' mean), in place: `values` is ours, and a bucket's
    values stay in it (reordered), so the trace's median comes after from the same array."""
    channels = len(start) - 1
    total = start[-1]
    if total == 0:
        return np.empty(0, np.int64), np.empty(0, np.float64), np.nan
    medians = np.empty(channels, np.float64)
    for k in range(channels):
        if start[k + 1] > start[k]:
            bucket = values[start[k] : start[k + 1]]
            medians[k] = _median_inner(bucket, len(bucket))  # type: ignore[no-untyped-call]
    middle = _median_inner(values, total)  # type: ignore[no-untyped-call]
    for k in range(channels):
        if start[k + 1] == start[k]:
            medians[k] = middle
    return np.arange(channels).astype(np.int64), medians, middle


_WIDE = np.iinfo(np.int32).max


@njit(cache=True)
def take_batch(pidx, lseq, code_in, ts, lamport, peer, plseq, id_valid, id_offset, top,  # type: ignore[no-untyped-def]
               named_pidx):  # fmt: skip  # type: ignore[no-untyped-def]
    """One batch of program rows as the layout's narrow columns, in one pass (`add` made a
    dozen NumPy passes and five copies of each batch): pidx, lseq, lamport, peer and plseq
    as int32, kind as int8 (-1 for a code that is no kind), ts as float64; `named[r]` for
    the rows that name a message (send copies, orphans' receives, each with a msg_id);
    top[p] = max(top[p], lseq) where p < len(top). Returns those and (rows with an unknown
    kind, sends or receives without msg_id, 1 if some ts is NaN, 1 if a value is beyond
    int32 or below -1, min pidx, max pidx, the first row whose pidx >= 0 has no name yet
    in `named_pidx` or -1). `named` is the rows' positions (int32, for Arrow's `take`: no
    boolean mask to pack and filter by); `id_valid` is the msg_id column's validity bitmap
    (Arrow's, bit `id_offset + r` for row r; empty when no msg_id is null)."""
    rows = len(pidx)
    p32 = np.empty(rows, np.int32)
    l32 = np.empty(rows, np.int32)
    kind = np.empty(rows, np.int8)
    t64 = np.empty(rows, np.float64)
    lam32 = np.empty(rows, np.int32)
    peer32 = np.empty(rows, np.int32)
    pl32 = np.empty(rows, np.int32)
    named = np.empty(rows, np.int32)
    count = 0
    unknown = 0
    unnamed = 0
    nan = 0
    wide = 0
    low = np.int64(_WIDE) + 1
    high = np.int64(-_WIDE) - 1
    new_name = -1
    for r in range(rows):
        p = np.int64(pidx[r])
        q = np.int64(lseq[r])
        c = np.int64(code_in[r])
        lam = np.int64(lamport[r])
        s = np.int64(peer[r])
        k = np.int64(plseq[r])
        if c < 0 or c > INTERNAL:
            c = np.int64(-1)
            unknown += 1
        if (p > _WIDE or p < -1 or q > _WIDE or q < -1 or lam > _WIDE or lam < -1
                or s > _WIDE or s < -1 or k > _WIDE or k < -1):  # fmt: skip
            wide = 1
        t = ts[r]
        if np.isnan(t):
            nan = 1
        is_named = c == SEND or (c == RECEIVE and k < 0)
        bit = id_offset + r
        if (len(id_valid) and not (id_valid[bit >> 3] >> (bit & 7)) & 1 and c >= 0
                and c != INTERNAL):  # fmt: skip
            unnamed += 1
            is_named = False
        if p < low:
            low = p
        if p > high:
            high = p
        if p >= 0:
            if p < len(top) and q > top[p]:
                top[p] = q
            if new_name < 0 and (p >= len(named_pidx) or not named_pidx[p]):
                new_name = r
        p32[r] = p
        l32[r] = q
        kind[r] = c
        t64[r] = t
        lam32[r] = lam
        peer32[r] = s
        pl32[r] = k
        if is_named:
            named[count] = r
            count += 1
    return (p32, l32, kind, t64, lam32, peer32, pl32, named[:count],
            unknown, unnamed, nan, wide, low, high, new_name)  # fmt: skip
