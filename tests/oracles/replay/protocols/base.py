"""What a delivery protocol is to the reference replay engine (docs/replay.md).

A protocol sits between the network and a process. The engine owns time, the
network, the programs and the bookkeeping; a protocol owns its state
(counters, clocks, matrices, buffers) and answers the engine's calls:

- `send(p, copies, t)`: the program of process p executes a send event at t
  whose application copies (message indices, in destination order) the
  protocol must put on the network with `engine.post` (now or later). Returns
  True when the send event completes at t, False when the sender blocks until
  the protocol calls `engine.resume(p, t)` (synchronous send).
- `arrived(p, m, t)`: application copy m reached p's transport (before the
  engine looks for deliverable messages). `control(p, c, t)`: a control
  message the protocol sent with `engine.control` reached p.
- `deliverable(p, m)`: may the protocol deliver arrived copy m to p now?
  Asked in arrival order; `delivered(p, m, t)` advances the state.
- `settle(p, t)`: the protocol's own deliveries (extra messages, copies that
  are control messages at p) before the engine scans application copies.
- `taken(p, m, t)`: the program took m (a synchronous receiver acks here).

Piggybacked integers are counted per posted application copy, control
integers per control message; message identifiers are not counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from causal_spark.replay.protocols.spec import SPECS, ProtocolSpec

if TYPE_CHECKING:
    from tests.oracles.replay.engine import Engine


class Protocol:
    """The default: deliver on arrival, no piggyback, no control traffic (`none`).

    A subclass names its `spec` (the product's registry): its name, flags and
    parameters are read from there, so the reference and the compiled loop run the
    same protocol under the same parameters."""

    spec: ClassVar[ProtocolSpec] = SPECS["none"]
    name: ClassVar[str]
    source: ClassVar[str]
    causal: ClassVar[bool]
    fifo: ClassVar[bool]
    total_order: ClassVar[bool]
    point_to_point: ClassVar[bool]
    fifo_transport: bool
    params: ClassVar[Mapping[str, Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _adopt(cls)

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        self.engine = engine
        # the values of every parameter (defaults where absent), parsed as the loop does
        self.parsed = self.spec.parse(params)
        self.fifo_transport = self.spec.uses_fifo_transport(self.parsed)

    def not_applicable(self) -> str | None:
        """Why this protocol cannot run the trace, or None when it can."""
        return None

    def send(self, p: int, copies: list[int], t: float) -> bool:
        for m in copies:
            self.engine.post(m, p, t, 0)
        return True

    def arrived(self, p: int, m: int, t: float) -> None:
        return None

    def control(self, p: int, kind: str, payload: tuple[object, ...], t: float) -> None:
        return None

    def settle(self, p: int, t: float) -> None:
        return None

    def deliverable(self, p: int, m: int) -> bool:
        return True

    def delivered(self, p: int, m: int, t: float) -> None:
        return None

    def taken(self, p: int, m: int, t: float) -> None:
        return None

    def sender_delay(self, post_minus_send: float) -> float:
        """Total sender-side delay; by default post - send summed over the copies."""
        return post_minus_send


def _adopt(cls: type[Protocol]) -> None:
    """Take name, flags and parameters from the class's spec, except those its own body sets
    (a test's protocol that claims a promise it does not keep)."""
    spec = cls.spec
    for attr in ("name", "source", "params", "causal", "fifo", "total_order", "point_to_point"):
        if attr not in cls.__dict__:
            setattr(cls, attr, getattr(spec, attr))


_adopt(Protocol)
