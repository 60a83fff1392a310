"""`ses`: Schiper-Eggli-Sandoz with (destination, vector time) pairs (seed 001 §4.2).

Each site S keeps a vector time and ORD_BUFF_S, at most one pair (S', VT)
per other site. Rules, by the seed's sections and DESIGN §4:
- vector time ticks on each send event and each delivery (not on internal
  events); a send event's copies carry VT(M), the time after its tick;
- emission (§4.2.1): a copy carries ORD_BUFF_S as it was before the send;
  a multicast copy to d also carries (d', VT(M)) for every other destination
  d'; after the send, (d, VT(M)) replaces the pair of each destination d;
- arrival (§4.2.2): a copy whose buffer holds a pair (S2, VT) for its
  destination S2 is delivered only once VT < VT(S2); on delivery the
  buffer's other pairs merge into ORD_BUFF_S2 by component-wise sup, and
  VT(S2) := sup(VT(S2), VT(M)), then ticks;
- obsolete pairs (§4.2.4): on delivery of M from S1, the pair (S1, VT) of
  ORD_BUFF_S2 is deleted when VT < VT(M).
A copy carries n integers of VT(M) plus n + 1 per pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from causal_spark.protocols.base import Protocol

if TYPE_CHECKING:
    from causal_spark.replay_engine import Engine

Vector = tuple[int, ...]


def _below(a: Vector, b: Vector) -> bool:
    """a < b for vector times: every component <= and the vectors differ."""
    return a != b and all(x <= y for x, y in zip(a, b, strict=True))


def _sup(a: Vector, b: Vector) -> Vector:
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


class Ses(Protocol):
    name = "ses"
    source = "seed 001 §4.2 (Schiper-Eggli-Sandoz): ORD_BUFF pairs (site, vector time)"
    causal = True

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        super().__init__(engine, params)
        n = engine.n
        self.time: list[Vector] = [(0,) * n for _ in range(n)]
        self.pairs: list[dict[int, Vector]] = [{} for _ in range(n)]
        self.carried: dict[int, tuple[Vector, dict[int, Vector]]] = {}

    def _tick(self, p: int) -> Vector:
        now = list(self.time[p])
        now[p] += 1
        self.time[p] = tuple(now)
        return self.time[p]

    def send(self, p: int, copies: list[int], t: float) -> bool:
        stamp = self._tick(p)
        dst = self.engine.trace.dst
        before = self.pairs[p]
        targets = [dst[m] for m in copies]
        n = self.engine.n
        for m, d in zip(copies, targets, strict=True):
            buffer = dict(before)
            for other in targets:
                if other != d:
                    buffer[other] = stamp
            self.carried[m] = (stamp, buffer)
            self.engine.post(m, p, t, n + len(buffer) * (n + 1))
        after = dict(before)
        for d in targets:
            after[d] = stamp
        self.pairs[p] = after
        return True

    def deliverable(self, p: int, m: int) -> bool:
        _, buffer = self.carried[m]
        condition = buffer.get(p)
        return condition is None or _below(condition, self.time[p])

    def delivered(self, p: int, m: int, t: float) -> None:
        stamp, buffer = self.carried.pop(m)
        mine = self.pairs[p]
        for site, vt in buffer.items():
            if site != p:
                mine[site] = _sup(mine[site], vt) if site in mine else vt
        self.time[p] = _sup(self.time[p], stamp)
        self._tick(p)
        sender = self.engine.trace.src[m]
        old = mine.get(sender)
        if old is not None and _below(old, stamp):
            del mine[sender]
