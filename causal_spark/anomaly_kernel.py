"""Sequential kernels of the detector (DESIGN §3): overtaken messages, witness chains, crowns.

Pure NumPy in, NumPy out, compiled with Numba; no Spark here. Each kernel
works on one group that a grouped Arrow UDF hands it, and takes its rows in
a deterministic order (callers sort), so its answer does not depend on how
Spark partitioned the data.

Overtaking (seed 001 §4.1, Proposition 2). Take the delivered messages received
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

Crowns (seed 000 §4.2): contract each send event with the receives of its
messages into one node; process-local order between consecutive message
events gives the edges. The strongly connected components with more than one
node are the crown components (iterative Tarjan, O(V + E)). A witness is a
shortest cycle found by breadth-first searches from the component's nodes,
after a direct check for 2-cycles; the searches stop at an edge budget, and
the witness is then flagged as possibly not the shortest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

_NONE = -1


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
        np.ascontiguousarray(recv_vc, dtype=np.int64),
        np.ascontiguousarray(send_knows_dst, dtype=np.int64),
    )


# ---------------------------------------------------------------------------------------------
# the channels of a trace: earliest arrivals forward, latest departures backward


@dataclass(frozen=True)
class Channels:
    """Delivered messages of a trace indexed by channel (CSR over p * n + q).

    Forward: each channel's messages by send lseq, with the suffix minimum of
    their receive lseq (the earliest receive of a message sent at or after a
    point). Backward: by receive lseq, with the prefix maximum of their send
    lseq (the latest send of a message received at or before a point).
    """

    n: int
    start: np.ndarray  # (n * n + 1,) offsets, shared by both orders
    send_lseq: np.ndarray  # forward order
    suffix_recv: np.ndarray
    suffix_msg: np.ndarray  # the message (input row) holding that minimum
    recv_lseq: np.ndarray  # backward order
    prefix_send: np.ndarray
    targets: np.ndarray  # CSR: destinations of the non-empty channels of each source
    targets_start: np.ndarray
    sources: np.ndarray  # CSR: sources of the non-empty channels into each destination
    sources_start: np.ndarray


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
    counts = np.bincount(key, minlength=n * n)
    start = np.zeros(n * n + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    suffix_recv, suffix_msg, prefix_send = _channel_extrema(
        start, recv_lseq[forward], forward, send_lseq[backward]
    )
    present = np.flatnonzero(counts)
    targets_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(present // n, minlength=n), out=targets_start[1:])
    by_dst = present[np.lexsort((present // n, present % n))]
    sources_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(by_dst % n, minlength=n), out=sources_start[1:])
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
        sources=(by_dst // n).astype(np.int64),
        sources_start=sources_start,
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
            for t in range(targets_start[p], targets_start[p + 1]):
                q = targets[t]
                c = p * n + q
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
                c = p * n + q
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
    arrival = np.empty((n, n), dtype=np.int64)  # [level, process] earliest reachable lseq
    via = np.empty((n, n), dtype=np.int64)  # [level, process] message that improved it
    improved = np.empty(n, dtype=np.bool_)
    frontier = np.empty(n, dtype=np.bool_)
    for qi in range(queries):
        origin = q_src[qi]
        goal = q_dst[qi]
        arrival[0, :] = _FAR
        via[0, :] = _NONE
        arrival[0, origin] = q_send[qi]
        frontier[:] = False
        frontier[origin] = True
        found = _NONE
        for level in range(1, n):
            arrival[level, :] = arrival[level - 1, :]
            via[level, :] = _NONE
            # the goal first: one probe per frontier process often ends the search here,
            # sparing the frontier x n probes of a full level
            c_goal = _NONE
            for p in range(n):
                if frontier[p]:
                    c = p * n + goal
                    lo = _first_send_at_or_after(
                        send_lseq, start[c], start[c + 1], arrival[level - 1, p]
                    )
                    if lo < start[c + 1] and suffix_recv[lo] < arrival[level, goal]:
                        arrival[level, goal] = suffix_recv[lo]
                        via[level, goal] = suffix_msg[lo]
                        c_goal = c
            if c_goal != _NONE and arrival[level, goal] <= q_until[qi]:
                found = level
                break
            improved[:] = False
            for p in range(n):
                if not frontier[p]:
                    continue
                after = arrival[level - 1, p]
                for t in range(targets_start[p], targets_start[p + 1]):
                    q = targets[t]
                    c = p * n + q
                    lo = _first_send_at_or_after(send_lseq, start[c], start[c + 1], after)
                    if lo < start[c + 1] and suffix_recv[lo] < arrival[level, q]:
                        arrival[level, q] = suffix_recv[lo]
                        via[level, q] = suffix_msg[lo]
                        improved[q] = True
            if arrival[level, goal] <= q_until[qi]:
                found = level
                break
            any_improved = False
            for p in range(n):
                frontier[p] = improved[p]
                any_improved = any_improved or improved[p]
            if not any_improved:
                break
        if found == _NONE:
            offsets[qi + 1] = used
            continue
        if used + found > path.shape[0]:
            grown = np.empty(max(2 * path.shape[0], used + found), dtype=np.int64)
            grown[:used] = path[:used]
            path = grown
        # walk back: at each process take the message of the latest level that improved it;
        # `found` is the fewest messages, so the walk takes exactly `found` steps
        at = goal
        level = found
        hops = 0
        while at != origin:
            while via[level, at] == _NONE:
                level -= 1
            msg = via[level, at]
            path[used + found - 1 - hops] = msg
            hops += 1
            at = msg_src[msg]
            level -= 1
        used += hops
        offsets[qi + 1] = used
    return path[:used], offsets


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


# ---------------------------------------------------------------------------------------------
# crowns: strongly connected components of the contracted message graph


@dataclass(frozen=True)
class Crowns:
    """Crown components of one trace; rows are input message rows."""

    component: np.ndarray  # per message row: crown component id (0, 1, ...) or -1
    n_components: int
    crown: np.ndarray  # witness crowns, message rows, concatenated
    crown_start: np.ndarray  # (n_components + 1,) offsets into `crown`
    shortest: np.ndarray  # per component: the search proved the witness shortest


@njit(cache=True, nogil=True)
def _tarjan(n_nodes: int, adj_start: np.ndarray, adj: np.ndarray) -> np.ndarray:
    index = np.full(n_nodes, _NONE, dtype=np.int64)
    low = np.zeros(n_nodes, dtype=np.int64)
    on_stack = np.zeros(n_nodes, dtype=np.bool_)
    comp = np.full(n_nodes, _NONE, dtype=np.int64)
    stack = np.empty(n_nodes, dtype=np.int64)
    top = 0
    call_node = np.empty(n_nodes, dtype=np.int64)
    call_edge = np.empty(n_nodes, dtype=np.int64)
    counter = 0
    n_comp = 0
    for root in range(n_nodes):
        if index[root] != _NONE:
            continue
        call_node[0] = root
        call_edge[0] = adj_start[root]
        depth = 1
        index[root] = counter
        low[root] = counter
        counter += 1
        stack[top] = root
        top += 1
        on_stack[root] = True
        while depth > 0:
            v = call_node[depth - 1]
            k = call_edge[depth - 1]
            if k < adj_start[v + 1]:
                call_edge[depth - 1] = k + 1
                w = adj[k]
                if index[w] == _NONE:
                    index[w] = counter
                    low[w] = counter
                    counter += 1
                    stack[top] = w
                    top += 1
                    on_stack[w] = True
                    call_node[depth] = w
                    call_edge[depth] = adj_start[w]
                    depth += 1
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            if low[v] == index[v]:
                while True:
                    top -= 1
                    w = stack[top]
                    on_stack[w] = False
                    comp[w] = n_comp
                    if w == v:
                        break
                n_comp += 1
            depth -= 1
            if depth > 0:
                u = call_node[depth - 1]
                if low[v] < low[u]:
                    low[u] = low[v]
    return comp


@njit(cache=True, nogil=True)
def _two_crown(
    members: np.ndarray,
    comp: np.ndarray,
    target: int,
    adj_start: np.ndarray,
    adj: np.ndarray,
    adj_msg: np.ndarray,
) -> np.ndarray:
    """A crown of two messages from a 2-cycle of the contracted graph, if there is one."""
    for u in members:
        for k in range(adj_start[u], adj_start[u + 1]):
            v = adj[k]
            if v == u or comp[v] != target:
                continue
            for j in range(adj_start[v], adj_start[v + 1]):
                if adj[j] == u:
                    out = np.empty(2, dtype=np.int64)
                    out[0] = adj_msg[k]  # enters v: s(u) -> r(it)
                    out[1] = adj_msg[j]  # enters u: s(v) -> r(it)
                    return out
    return np.empty(0, dtype=np.int64)


@njit(cache=True, nogil=True)
def _shortest_crown(
    members: np.ndarray,
    comp: np.ndarray,
    target: int,
    budget: int,
    node_proc: np.ndarray,
    node_send: np.ndarray,
    node_msgs_start: np.ndarray,
    node_msgs: np.ndarray,
    msg_node: np.ndarray,
    recv_proc: np.ndarray,
    recv_lseq: np.ndarray,
    at_start: np.ndarray,
    at_lseq: np.ndarray,
    at_msg: np.ndarray,
    n: int,
    start: np.ndarray,
    send_lseq: np.ndarray,
    suffix_recv: np.ndarray,
    targets: np.ndarray,
    targets_start: np.ndarray,
    chan_recv: np.ndarray,
    prefix_send: np.ndarray,
    sources: np.ndarray,
    sources_start: np.ndarray,
    dist: np.ndarray,
    parent: np.ndarray,
    entered_by: np.ndarray,
) -> tuple[np.ndarray, bool]:
    """A crown of the fewest messages within component `target`, by breadth-first searches
    in the relation m ~> m' (s(m) -> r(m')) from each member in turn, until `budget`."""
    best = np.empty(0, dtype=np.int64)
    best_k = _FAR
    spent = 0
    arrival = np.empty(n, dtype=np.int64)
    origin = np.empty(n, dtype=np.int64)
    active = np.empty(n, dtype=np.bool_)
    scanned = np.empty(n, dtype=np.int64)
    frontier = np.empty(members.shape[0], dtype=np.int64)
    following = np.empty(members.shape[0], dtype=np.int64)
    departure = np.empty(n, dtype=np.int64)
    for source in members:
        if best_k == 2:
            return best, True
        if spent >= budget and best_k != _FAR:
            return best, False
        spent += members.shape[0]
        for v in members:
            dist[v] = _NONE
        dist[source] = 0
        # the causal past of each receive of the source: m ~> source iff s(m) is in one
        n_src_msgs = node_msgs_start[source + 1] - node_msgs_start[source]
        past = np.full((n_src_msgs, n), -1, dtype=np.int64)
        for j in range(n_src_msgs):
            msg = node_msgs[node_msgs_start[source] + j]
            departure[:] = -1
            departure[recv_proc[msg]] = recv_lseq[msg]
            spent += _latest_departures(
                n, start, chan_recv, prefix_send, sources, sources_start, departure
            )
            past[j, :] = departure
        for p in range(n):
            scanned[p] = at_start[p + 1]
        frontier[0] = source
        size = 1
        level = 0
        closing = _NONE
        closing_msg = _NONE
        while size > 0 and closing == _NONE and level + 2 < best_k:
            level += 1
            arrival[:] = _FAR
            origin[:] = _NONE
            active[:] = False
            for i in range(size):
                v = frontier[i]
                p = node_proc[v]
                if node_send[v] < arrival[p]:
                    arrival[p] = node_send[v]
                    origin[p] = v
                    active[p] = True
            spent += _earliest_arrivals(
                n, start, send_lseq, suffix_recv, targets, targets_start, arrival, origin, active
            )
            grown = 0
            for q in range(n):
                if arrival[q] == _FAR:
                    continue
                lo = at_start[q]
                hi = scanned[q]
                first = hi
                while lo < hi:  # first receive on q at or after the arrival
                    mid = (lo + hi) // 2
                    if at_lseq[mid] >= arrival[q]:
                        hi = mid
                    else:
                        lo = mid + 1
                first = lo
                for r in range(first, scanned[q]):
                    spent += 1
                    msg = at_msg[r]
                    b = msg_node[msg]
                    if comp[b] != target or dist[b] != _NONE:
                        continue
                    dist[b] = level
                    parent[b] = origin[q]
                    entered_by[b] = msg
                    following[grown] = b
                    grown += 1
                if first < scanned[q]:
                    scanned[q] = first
            for i in range(grown):
                b = following[i]
                for j in range(n_src_msgs):
                    if node_send[b] <= past[j, node_proc[b]]:
                        closing = b
                        closing_msg = node_msgs[node_msgs_start[source] + j]
                        break
                if closing != _NONE:
                    break
            for i in range(grown):
                frontier[i] = following[i]
            size = grown
        if closing != _NONE and level + 1 < best_k:
            best_k = level + 1
            best = np.empty(best_k, dtype=np.int64)
            # crown m1..mk: m1 = the source's message closing the cycle, then the nodes
            # on the search path in order, each by the message whose receive was reached
            best[0] = closing_msg
            at = closing
            i = best_k - 1
            while at != source:
                best[i] = entered_by[at]
                i -= 1
                at = parent[at]
    return best, True


def crown_components(
    n: int,
    src: np.ndarray,
    send_lseq: np.ndarray,
    dst: np.ndarray,
    recv_lseq: np.ndarray,
    budget: int,
) -> Crowns:
    """Crown components and a witness crown of each, for the delivered messages of a trace.

    Rows are messages (src pidx, send lseq, dst pidx, receive lseq) of a trace
    with `n` processes; messages of one multicast share (src, send_lseq).
    Components are numbered by their first node in (src, send_lseq) order.
    `budget` bounds the work of one component's witness search after its first
    breadth-first search; past it the witness may not be the shortest.
    """
    src = np.asarray(src, dtype=np.int64)
    send_lseq = np.asarray(send_lseq, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    recv_lseq = np.asarray(recv_lseq, dtype=np.int64)
    m = src.shape[0]
    empty = np.empty(0, dtype=np.int64)
    if m == 0:
        return Crowns(empty, 0, empty, np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.bool_))
    # nodes: distinct send events, numbered in (src, send_lseq) order
    stride = int(send_lseq.max()) + 1
    keys, node_of = np.unique(src * stride + send_lseq, return_inverse=True)
    node_of = node_of.reshape(-1).astype(np.int64)
    uniq = np.stack([keys // stride, keys % stride], axis=1)
    n_nodes = uniq.shape[0]
    node_msgs = np.argsort(node_of, kind="stable").astype(np.int64)
    node_msgs_start = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(node_of, minlength=n_nodes), out=node_msgs_start[1:])
    first_msg = node_msgs[node_msgs_start[:-1]]
    # message events: one per send event (node), one per receive; recv_msg -1 marks a send
    proc = np.concatenate([uniq[:, 0], dst])
    lseq = np.concatenate([uniq[:, 1], recv_lseq])
    node = np.concatenate([np.arange(n_nodes, dtype=np.int64), node_of])
    recv_msg = np.concatenate([np.full(n_nodes, _NONE, dtype=np.int64), np.arange(m)])
    order = np.lexsort((lseq, proc))
    proc, node, recv_msg = proc[order], node[order], recv_msg[order]
    keep = (proc[1:] == proc[:-1]) & (node[1:] != node[:-1])
    edge_from = node[:-1][keep]
    edge_to = node[1:][keep]
    # the message an edge enters its head node by: the receive it lands on, else the head's
    # first message (an edge onto a send reaches every receive of that send)
    edge_msg = recv_msg[1:][keep]
    edge_msg = np.where(edge_msg == _NONE, first_msg[edge_to], edge_msg)
    by_source = np.lexsort((edge_to, edge_from))
    adj = edge_to[by_source]
    adj_msg = edge_msg[by_source]
    adj_start = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(edge_from, minlength=n_nodes), out=adj_start[1:])
    comp = _tarjan(n_nodes, adj_start, adj)
    big = np.bincount(comp)[comp] > 1
    # first node of each component: nodes are numbered in order, so its first occurrence
    _, first_node = np.unique(comp, return_index=True)
    crown_comps = np.unique(comp[big])
    crown_comps = crown_comps[np.argsort(first_node[crown_comps], kind="stable")]
    number = np.full(int(comp.max()) + 1, _NONE, dtype=np.int64)
    number[crown_comps] = np.arange(crown_comps.shape[0])
    node_component = np.where(big, number[comp], _NONE)
    n_crowns = int(crown_comps.shape[0])
    if n_crowns == 0:
        return Crowns(
            node_component[node_of],
            0,
            empty,
            np.zeros(1, dtype=np.int64),
            np.empty(0, dtype=np.bool_),
        )
    index = channels(n, src, dst, send_lseq, recv_lseq)
    at_order = np.lexsort((recv_lseq, dst))
    at_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=at_start[1:])
    dist = np.empty(n_nodes, dtype=np.int64)
    parent = np.empty(n_nodes, dtype=np.int64)
    entered_by = np.empty(n_nodes, dtype=np.int64)
    members_of = np.argsort(node_component, kind="stable")
    bounds = np.searchsorted(node_component[members_of], np.arange(n_crowns + 1))
    crowns: list[np.ndarray] = []
    shortest = np.zeros(n_crowns, dtype=np.bool_)
    for c in range(n_crowns):
        members = members_of[bounds[c] : bounds[c + 1]].astype(np.int64)
        crown = _two_crown(members, node_component, c, adj_start, adj, adj_msg)
        exact = True
        if crown.shape[0] == 0:
            crown, exact = _shortest_crown(
                members,
                node_component,
                c,
                budget,
                uniq[:, 0].astype(np.int64),
                uniq[:, 1].astype(np.int64),
                node_msgs_start,
                node_msgs,
                node_of,
                dst,
                recv_lseq,
                at_start,
                recv_lseq[at_order],
                at_order.astype(np.int64),
                index.n,
                index.start,
                index.send_lseq,
                index.suffix_recv,
                index.targets,
                index.targets_start,
                index.recv_lseq,
                index.prefix_send,
                index.sources,
                index.sources_start,
                dist,
                parent,
                entered_by,
            )
        crowns.append(crown)
        shortest[c] = exact
    crown_start = np.zeros(n_crowns + 1, dtype=np.int64)
    np.cumsum([len(c) for c in crowns], out=crown_start[1:])
    return Crowns(
        component=node_component[node_of],
        n_components=n_crowns,
        crown=np.concatenate(crowns),
        crown_start=crown_start,
        shortest=shortest,
    )


def is_crown(
    index: Channels,
    src: np.ndarray,
    send_lseq: np.ndarray,
    dst: np.ndarray,
    recv_lseq: np.ndarray,
    crown: np.ndarray,
) -> bool:
    """Whether message rows `crown` (m1..mk) satisfy s1 -> r2, ..., sk -> r1 from distinct
    send events: each step re-derived from scratch as an earliest arrival over the channels."""
    k = len(crown)
    if k < 2 or len({(int(src[m]), int(send_lseq[m])) for m in crown}) != k:
        return False
    for i in range(k):
        a, b = int(crown[i]), int(crown[(i + 1) % k])
        arrival = np.full(index.n, _FAR, dtype=np.int64)
        origin = np.zeros(index.n, dtype=np.int64)
        active = np.zeros(index.n, dtype=np.bool_)
        arrival[src[a]] = send_lseq[a]
        active[src[a]] = True
        _earliest_arrivals(
            index.n, index.start, index.send_lseq, index.suffix_recv, index.targets,
            index.targets_start, arrival, origin, active,
        )  # fmt: skip
        # r_b is reached iff the earliest event of dst(b) after s_a is at or before it
        # (on the sender's own process the send itself is the arrival: strictly before)
        reached = arrival[dst[b]] <= recv_lseq[b]
        if dst[b] == src[a] and send_lseq[a] >= recv_lseq[b]:
            reached = False
        if not reached:
            return False
    return True
