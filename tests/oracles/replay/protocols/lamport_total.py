"""The reference `lamport_total`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.lamport_total` are held to it, event for event."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine

Key = tuple[int, int]  # (timestamp, sender)


class LamportTotal(Protocol):
    spec = SPECS["lamport_total"]

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        self.clock = [0] * n
        self.queue: list[list[Key]] = [[] for _ in range(n)]
        self.released: list[set[Key]] = [set() for _ in range(n)]
        self.acks: dict[Key, int] = {}
        # per process: the application copy addressed to it, by key (absent: not a destination)
        self.expect: list[dict[Key, int]] = [{} for _ in range(n)]
        self.key_of: dict[int, Key] = {}
        self.ready: list[set[int]] = [set() for _ in range(n)]

    def _see(self, p: int, stamp: int) -> None:
        self.clock[p] = max(self.clock[p], stamp) + 1

    def send(self, p: int, copies: list[int], t: float) -> bool:
        engine = self.engine
        self.clock[p] += 1
        key = (self.clock[p], p)
        dst = engine.trace.dst
        to = {dst[m]: m for m in copies}
        for m in copies:
            self.key_of[m] = key
        self.acks[key] = 0
        heapq.heappush(self.queue[p], key)
        if p in to:
            self.expect[p][key] = to[p]
            engine.post(to[p], p, t, 1)
        for q in range(engine.n):
            if q == p:
                continue
            if q in to:
                engine.post(to[q], p, t, 1)
            else:
                engine.control(p, q, t, "copy", 1, key)
        engine.notify(p, t)
        return True

    def arrived(self, p: int, m: int, t: float) -> None:
        key = self.key_of[m]
        if key[1] != p:
            self.expect[p][key] = m
            self._enqueue(p, key, t)

    def _enqueue(self, p: int, key: Key, t: float) -> None:
        self._see(p, key[0])
        heapq.heappush(self.queue[p], key)
        self.clock[p] += 1  # sending the ack is an event
        self.engine.control(p, key[1], t, "ack", 1, key, self.clock[p])

    def control(self, p: int, kind: str, payload: tuple[object, ...], t: float) -> None:
        key = payload[0]
        assert isinstance(key, tuple)
        if kind == "copy":
            self._enqueue(p, key, t)
        elif kind == "ack":
            stamp = payload[1]
            assert isinstance(stamp, int)
            self._see(p, stamp)
            self.acks[key] += 1
        else:  # release
            stamp = payload[1]
            assert isinstance(stamp, int)
            self._see(p, stamp)
            self.released[p].add(key)

    def settle(self, p: int, t: float) -> None:
        """Grant p's own message at the head once all acks are in; pass released heads on."""
        queue = self.queue[p]
        n = self.engine.n
        while queue:
            key = queue[0]
            if key not in self.released[p]:
                if key[1] != p or self.acks[key] < n - 1:
                    return
                self.released[p].add(key)
                self.clock[p] += 1  # sending the releases is one event
                for q in range(n):
                    if q != p:
                        self.engine.control(p, q, t, "release", 1, key, self.clock[p])
                continue
            m = self.expect[p].get(key)
            if m is None:
                heapq.heappop(queue)  # a control copy: p is not a destination
                continue
            if m in self.engine.pending(p):
                self.ready[p].add(m)
            return

    def deliverable(self, p: int, m: int) -> bool:
        return m in self.ready[p]

    def delivered(self, p: int, m: int, t: float) -> None:
        self.ready[p].discard(m)
        popped = heapq.heappop(self.queue[p])
        assert popped == self.key_of[m], "delivered a copy that is not at the head of the queue"
