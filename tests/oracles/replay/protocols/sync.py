"""The reference `sync`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.sync` are held to it, event for event."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine


class Sync(Protocol):
    spec = SPECS["sync"]

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        self.queue: list[deque[int]] = [deque() for _ in range(engine.n)]
        self.posted_at: dict[int, float] = {}
        self.blocked_total = 0.0

    def send(self, p: int, copies: list[int], t: float) -> bool:
        self.queue[p].extend(copies)
        self._next(p, t)
        return False

    def _next(self, p: int, t: float) -> None:
        if not self.queue[p]:
            self.engine.resume(p, t)
            return
        m = self.queue[p].popleft()
        self.posted_at[m] = t
        self.engine.post(m, p, t, 0)
        if self.engine.trace.latency[m] is None:
            return  # lost: the sender waits for ever (the log was cut)

    def taken(self, p: int, m: int, t: float) -> None:
        self.engine.control(p, self.engine.trace.src[m], t, "ack", 0, m)

    def control(self, p: int, kind: str, payload: tuple[object, ...], t: float) -> None:
        (m,) = payload
        assert isinstance(m, int)
        self.blocked_total += t - self.posted_at.pop(m)
        self._next(p, t)

    def sender_delay(self, post_minus_send: float) -> float:
        return self.blocked_total
