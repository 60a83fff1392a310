"""Brute-force happened-before and pairwise violations (slow, obvious oracles).

Events are (process, lseq) pairs; a message is (src, send_lseq, dst, recv_lseq).
Happened-before is the transitive closure of local order and send -> receive,
computed by a plain reachability search per event: no clocks involved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

Event = tuple[str, int]


@dataclass(frozen=True)
class Message:
    msg_id: str
    src: str
    send_lseq: int
    dst: str
    recv_lseq: int


def happened_before_sets(
    lengths: dict[str, int], messages: Iterable[Message]
) -> dict[Event, set[Event]]:
    """For every event e, the set of events f with e -> f (strict)."""
    succ: dict[Event, list[Event]] = {}
    for p, n in lengths.items():
        for i in range(1, n):
            succ.setdefault((p, i), []).append((p, i + 1))
    for m in messages:
        succ.setdefault((m.src, m.send_lseq), []).append((m.dst, m.recv_lseq))
    future: dict[Event, set[Event]] = {}
    for p, n in lengths.items():
        for i in range(1, n + 1):
            seen: set[Event] = set()
            stack = list(succ.get((p, i), []))
            while stack:
                e = stack.pop()
                if e in seen:
                    continue
                seen.add(e)
                stack.extend(succ.get(e, []))
            future[(p, i)] = seen
    return future


def pairwise_violations(
    lengths: dict[str, int], messages: list[Message]
) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(fifo, causal) sets of (overtaken, overtaking) pairs, by the pairwise definition."""
    future = happened_before_sets(lengths, messages)
    fifo: set[tuple[str, str]] = set()
    causal: set[tuple[str, str]] = set()
    for m in messages:
        for m2 in messages:
            if m is m2 or m.dst != m2.dst or not m2.recv_lseq < m.recv_lseq:
                continue
            sent_before = (m2.src, m2.send_lseq) in future[(m.src, m.send_lseq)]
            if sent_before:
                causal.add((m.msg_id, m2.msg_id))
                if m.src == m2.src:
                    fifo.add((m.msg_id, m2.msg_id))
    return fifo, causal


def fewest_messages(
    lengths: dict[str, int], messages: list[Message], start: Event, goal: Event
) -> int | None:
    """The fewest messages on a causal path from `start` to `goal` (0-1 BFS), None if none."""
    from collections import deque

    sends: dict[Event, list[Message]] = {}
    for m in messages:
        sends.setdefault((m.src, m.send_lseq), []).append(m)
    dist = {start: 0}
    queue = deque([start])
    while queue:
        e = queue.popleft()
        steps = [((e[0], e[1] + 1), 0)] if e[1] < lengths[e[0]] else []
        steps += [((m.dst, m.recv_lseq), 1) for m in sends.get(e, [])]
        for f, w in steps:
            if f not in dist or dist[e] + w < dist[f]:
                dist[f] = dist[e] + w
                (queue.appendleft if w == 0 else queue.append)(f)
    return dist.get(goal)


def crown_relation(
    lengths: dict[str, int], messages: list[Message]
) -> dict[tuple[str, int], set[tuple[str, int]]]:
    """Send event -> the send events b with s(a) -> r(m') for a message m' of b (m ~> m'),
    between distinct send events (the messages of one multicast share a node)."""
    future = happened_before_sets(lengths, messages)
    out: dict[tuple[str, int], set[tuple[str, int]]] = {}
    for a in messages:
        node_a = (a.src, a.send_lseq)
        out.setdefault(node_a, set())
        for b in messages:
            node_b = (b.src, b.send_lseq)
            if node_a != node_b and (b.dst, b.recv_lseq) in future[node_a]:
                out[node_a].add(node_b)
    return out


def fewest_through(msgs: list[Message], future: dict[Event, set[Event]], msg: str) -> int | None:
    """The fewest messages of a crown containing `msg`, None if there is none: NetworkX
    enumerates the simple cycles through `msg` of the relation m ~> m' (s(m) -> r(m')),
    shortest first, and keeps the first whose send events are distinct."""
    import networkx as nx

    by_id = {m.msg_id: m for m in msgs}
    graph = nx.DiGraph()
    graph.add_nodes_from(by_id)
    graph.add_edges_from(
        (a.msg_id, b.msg_id)
        for a in msgs
        for b in msgs
        if (a.src, a.send_lseq) != (b.src, b.send_lseq)
        and (b.dst, b.recv_lseq) in future[(a.src, a.send_lseq)]
    )
    scc = next(c for c in nx.strongly_connected_components(graph) if msg in c)
    around = graph.subgraph(scc)
    for bound in range(2, len(scc) + 1):
        for cycle in nx.simple_cycles(around, length_bound=bound):
            sends = {(by_id[m].src, by_id[m].send_lseq) for m in cycle}
            if msg in cycle and len(sends) == len(cycle):
                return len(cycle)
    return None
