"""Sequential kernels of the detector (docs/anomalies.md): the crown components of one trace.

Pure NumPy in, NumPy out, compiled with Numba; no Spark here. Callers sort the
group's rows first, so the answer does not depend on how Spark partitioned
the data.

Crowns (Mattern & Fünfroeken, "A Non-Blocking Lightweight Implementation of Causal
Order Message Delivery", §4.2): contract each send event with the receives of its
messages into one node; process-local order between consecutive message
events gives the edges. The strongly connected components with more than one
node are the crown components (iterative Tarjan, O(V + E)). A witness is a
shortest cycle found by breadth-first searches from the component's nodes,
after a direct check for 2-cycles; the searches stop at an edge budget, and
the witness is then flagged as possibly not the shortest. `crown_through` runs one
such search from a given message's node, closing through that message: a crown of
the fewest messages that contains it (what `explain --msg` shows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from causal_spark.anomalies.kernel import (
    _FAR,
    _NONE,
    Channels,
    _earliest_arrivals,
    _latest_departures,
    channels,
)


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
def _crown_from(
    source: int,
    only_msg: int,
    members: np.ndarray,
    comp: np.ndarray,
    target: int,
    best_k: int,
    limit: int,
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
    sources_channel: np.ndarray,
    dist: np.ndarray,
    parent: np.ndarray,
    entered_by: np.ndarray,
) -> tuple[np.ndarray, int, bool]:
    """A crown of fewer than `best_k` messages through node `source` of component `target`,
    one of the fewest: a breadth-first search in the relation m ~> m' (s(m) -> r(m')).

    The crown closes through the source's message `only_msg` when it is >= 0, else through
    any of the source's messages; it starts with that message. Returns (crown, or empty if
    there is none; work spent; whether the search stopped past `limit` before its end).
    """
    spent = members.shape[0]
    for v in members:
        dist[v] = _NONE
    dist[source] = 0
    arrival = np.empty(n, dtype=np.int64)
    origin = np.empty(n, dtype=np.int64)
    active = np.empty(n, dtype=np.bool_)
    scanned = np.empty(n, dtype=np.int64)
    frontier = np.empty(members.shape[0], dtype=np.int64)
    following = np.empty(members.shape[0], dtype=np.int64)
    departure = np.empty(n, dtype=np.int64)
    # the messages the crown may close through, and the causal past of each one's receive:
    # m ~> that message iff s(m) is in it
    if only_msg >= 0:
        closers = np.full(1, only_msg, dtype=np.int64)
    else:
        closers = node_msgs[node_msgs_start[source] : node_msgs_start[source + 1]].copy()
    past = np.full((closers.shape[0], n), -1, dtype=np.int64)
    for j in range(closers.shape[0]):
        msg = closers[j]
        departure[:] = -1
        departure[recv_proc[msg]] = recv_lseq[msg]
        spent += _latest_departures(
            n, start, chan_recv, prefix_send, sources, sources_start, sources_channel, departure
        )
        for p in range(n):  # element loop: see `kernel._recorded`
            past[j, p] = departure[p]
    for p in range(n):
        scanned[p] = at_start[p + 1]
    frontier[0] = source
    size = 1
    level = 0
    closing = _NONE
    closing_msg = _NONE
    while size > 0 and closing == _NONE and level + 2 < best_k:
        if spent > limit:
            return np.empty(0, dtype=np.int64), spent, True
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
            for j in range(closers.shape[0]):
                if node_send[b] <= past[j, node_proc[b]]:
                    closing = b
                    closing_msg = closers[j]
                    break
            if closing != _NONE:
                break
        for i in range(grown):
            frontier[i] = following[i]
        size = grown
    if closing == _NONE or level + 1 >= best_k:
        return np.empty(0, dtype=np.int64), spent, False
    # crown m1..mk: m1 = the source's message closing the cycle, then the nodes on the
    # search path in order, each by the message whose receive was reached
    k = level + 1
    crown = np.empty(k, dtype=np.int64)
    crown[0] = closing_msg
    at = closing
    i = k - 1
    while at != source:
        crown[i] = entered_by[at]
        i -= 1
        at = parent[at]
    return crown, spent, False


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
    sources_channel: np.ndarray,
    dist: np.ndarray,
    parent: np.ndarray,
    entered_by: np.ndarray,
) -> tuple[np.ndarray, bool]:
    """A crown of the fewest messages within component `target`, by breadth-first searches
    (`_crown_from`) from each member in turn, until `budget`."""
    best = np.empty(0, dtype=np.int64)
    best_k = _FAR
    spent = 0
    for source in members:
        if best_k == 2:
            return best, True
        if spent >= budget and best_k != _FAR:
            return best, False
        crown, used, _ = _crown_from(
            source, _NONE, members, comp, target, best_k, _FAR,
            node_proc, node_send, node_msgs_start, node_msgs, msg_node, recv_proc, recv_lseq,
            at_start, at_lseq, at_msg, n, start, send_lseq, suffix_recv, targets,
            targets_start, chan_recv, prefix_send, sources, sources_start, sources_channel, dist,
            parent, entered_by,
        )  # fmt: skip
        spent += used
        if crown.shape[0] > 0:
            best = crown
            best_k = crown.shape[0]
    return best, True


@dataclass(frozen=True)
class _Graph:
    """The contracted graph of a trace's delivered messages: one node per send event."""

    node_of: np.ndarray  # per message row: its node
    node_proc: np.ndarray  # per node: process and lseq of its send
    node_send: np.ndarray
    node_msgs: np.ndarray  # message rows by node, and offsets of each node's
    node_msgs_start: np.ndarray
    adj_start: np.ndarray  # edges by tail node, each with its head and the message entering it
    adj: np.ndarray
    adj_msg: np.ndarray
    component: np.ndarray  # per node: crown component id (0, 1, ...) or -1
    n_components: int


def _contract(
    src: np.ndarray, send_lseq: np.ndarray, dst: np.ndarray, recv_lseq: np.ndarray
) -> _Graph:
    m = src.shape[0]
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
    return _Graph(
        node_of=node_of,
        node_proc=uniq[:, 0].astype(np.int64),
        node_send=uniq[:, 1].astype(np.int64),
        node_msgs=node_msgs,
        node_msgs_start=node_msgs_start,
        adj_start=adj_start,
        adj=adj,
        adj_msg=adj_msg,
        component=np.where(big, number[comp], _NONE),
        n_components=int(crown_comps.shape[0]),
    )


def _search(
    g: _Graph,
    index: Channels,
    dst: np.ndarray,
    recv_lseq: np.ndarray,
) -> tuple[Any, ...]:
    """The arrays `_crown_from` and `_shortest_crown` take after their first seven."""
    at_order = np.lexsort((recv_lseq, dst))
    at_start = np.zeros(index.n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=index.n), out=at_start[1:])
    n_nodes = g.node_proc.shape[0]
    return (
        g.node_proc, g.node_send, g.node_msgs_start, g.node_msgs, g.node_of, dst, recv_lseq,
        at_start, recv_lseq[at_order], at_order.astype(np.int64), index.n, index.start,
        index.send_lseq, index.suffix_recv, index.targets, index.targets_start,
        index.recv_lseq, index.prefix_send, index.sources, index.sources_start,
        index.sources_channel,
        np.empty(n_nodes, dtype=np.int64), np.empty(n_nodes, dtype=np.int64),
        np.empty(n_nodes, dtype=np.int64),
    )  # fmt: skip


def _as_rows(*columns: np.ndarray | list[int]) -> list[np.ndarray]:
    return [np.asarray(c, dtype=np.int64) for c in columns]


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
    src, send_lseq, dst, recv_lseq = _as_rows(src, send_lseq, dst, recv_lseq)
    empty = np.empty(0, dtype=np.int64)
    if src.shape[0] == 0:
        return Crowns(empty, 0, empty, np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.bool_))
    g = _contract(src, send_lseq, dst, recv_lseq)
    n_crowns = g.n_components
    if n_crowns == 0:
        return Crowns(
            g.component[g.node_of],
            0,
            empty,
            np.zeros(1, dtype=np.int64),
            np.empty(0, dtype=np.bool_),
        )
    arrays = _search(g, channels(n, src, dst, send_lseq, recv_lseq), dst, recv_lseq)
    members_of = np.argsort(g.component, kind="stable")
    bounds = np.searchsorted(g.component[members_of], np.arange(n_crowns + 1))
    crowns: list[np.ndarray] = []
    shortest = np.zeros(n_crowns, dtype=np.bool_)
    for c in range(n_crowns):
        members = members_of[bounds[c] : bounds[c + 1]].astype(np.int64)
        crown = _two_crown(members, g.component, c, g.adj_start, g.adj, g.adj_msg)
        exact = True
        if crown.shape[0] == 0:
            crown, exact = _shortest_crown(members, g.component, c, budget, *arrays)
        crowns.append(crown)
        shortest[c] = exact
    crown_start = np.zeros(n_crowns + 1, dtype=np.int64)
    np.cumsum([len(c) for c in crowns], out=crown_start[1:])
    return Crowns(
        component=g.component[g.node_of],
        n_components=n_crowns,
        crown=np.concatenate(crowns),
        crown_start=crown_start,
        shortest=shortest,
    )


@dataclass(frozen=True)
class Through:
    """A crown through one message, as `crown_through` finds it."""

    crown: np.ndarray  # message rows m1..mk, m1 the message asked about; empty: none found
    in_component: bool  # the message is in a crown component
    cut: bool  # the search stopped at its budget before it found one or ended


def crown_through(
    n: int,
    src: np.ndarray,
    send_lseq: np.ndarray,
    dst: np.ndarray,
    recv_lseq: np.ndarray,
    msg: int,
    budget: int,
) -> Through:
    """A crown of the fewest messages that contains message row `msg`, if there is one.

    Rows as for `crown_components`; the rows of `msg`'s crown component alone suffice
    (a crown lies within one component), so memory is O(component). One breadth-first
    search from `msg`'s node, the one `crown_components` runs from each member, closing
    through `msg` itself; past `budget` (channel probes and receives scanned) it stops
    and says so. A complete search that finds none proves there is none.
    """
    src, send_lseq, dst, recv_lseq = _as_rows(src, send_lseq, dst, recv_lseq)
    empty = np.empty(0, dtype=np.int64)
    if not 0 <= msg < src.shape[0]:
        raise IndexError(f"message row {msg} of {src.shape[0]}")
    g = _contract(src, send_lseq, dst, recv_lseq)
    source = int(g.node_of[msg])
    target = int(g.component[source])
    if target < 0:
        return Through(empty, in_component=False, cut=False)
    arrays = _search(g, channels(n, src, dst, send_lseq, recv_lseq), dst, recv_lseq)
    members = np.flatnonzero(g.component == target).astype(np.int64)
    crown, _, cut = _crown_from(source, msg, members, g.component, target, _FAR, budget, *arrays)
    return Through(crown, in_component=True, cut=cut)


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
