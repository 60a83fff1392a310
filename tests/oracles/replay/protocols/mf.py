"""The reference `mf`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.mf` are held to it, event for event."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine


class Mf(Protocol):
    spec = SPECS["mf"]

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        self.no_wait = self.fifo_transport  # no_wait_same_receiver: FIFO channels
        self.output: list[deque[int]] = [deque() for _ in range(n)]
        self.outstanding = [0] * n
        self.last_receiver = [-1] * n

    def send(self, p: int, copies: list[int], t: float) -> bool:
        self.output[p].extend(copies)
        self._post(p, t)
        return True

    def _post(self, p: int, t: float) -> None:
        buffer = self.output[p]
        dst = self.engine.trace.dst
        while buffer and (
            self.outstanding[p] == 0 or (self.no_wait and dst[buffer[0]] == self.last_receiver[p])
        ):
            m = buffer.popleft()
            self.outstanding[p] += 1
            self.last_receiver[p] = dst[m]
            self.engine.post(m, p, t, 0)

    def arrived(self, p: int, m: int, t: float) -> None:
        # the get event: the input buffer acknowledges at once
        self.engine.control(p, self.engine.trace.src[m], t, "ack", 0)

    def control(self, p: int, kind: str, payload: tuple[object, ...], t: float) -> None:
        self.outstanding[p] -= 1
        self._post(p, t)

    def deliverable(self, p: int, m: int) -> bool:
        if not self.engine.selective:
            return True  # the FIFO input buffer hands messages over in the order they got in
        for head in self.engine.pending(p):
            if self.engine.trace.send_lseq[head] >= 0 and self.engine.trace.src[head] != p:
                return head == m
        return False
