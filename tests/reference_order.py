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
