"""The reference `fifo`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.fifo` are held to it, event for event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine


class Fifo(Protocol):
    spec = SPECS["fifo"]

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        self.sent: dict[tuple[int, int], int] = {}
        self.got: dict[tuple[int, int], int] = {}
        self.number: dict[int, int] = {}

    def send(self, p: int, copies: list[int], t: float) -> bool:
        for m in copies:
            channel = (p, self.engine.trace.dst[m])
            self.sent[channel] = self.number[m] = self.sent.get(channel, 0) + 1
            self.engine.post(m, p, t, 1)
        return True

    def deliverable(self, p: int, m: int) -> bool:
        channel = (self.engine.trace.src[m], p)
        return self.number[m] == self.got.get(channel, 0) + 1

    def delivered(self, p: int, m: int, t: float) -> None:
        channel = (self.engine.trace.src[m], p)
        self.got[channel] = self.got.get(channel, 0) + 1
