"""What a delivery protocol is to the replay engine (docs/replay.md).

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
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from causal_spark.replay_engine import Engine


class ProtocolParamError(ValueError):
    """A protocol parameter (`--param name.key=value`) is unknown or has a bad value."""


class Protocol:
    """The default: deliver on arrival, no piggyback, no control traffic (`none`)."""

    name: ClassVar[str] = "none"
    source: ClassVar[str] = "docs/replay.md: the recorded system, each message delivered on arrival"
    # which check the replayed execution must pass (docs/replay.md, "Invariant")
    causal: ClassVar[bool] = False
    fifo: ClassVar[bool] = False
    total_order: ClassVar[bool] = False
    # multicast copies leave one after another, each its own send event (mf, sync)
    point_to_point: ClassVar[bool] = False
    # the transport keeps every directed channel FIFO (arrivals never overtake)
    fifo_transport: ClassVar[bool] = False
    params: ClassVar[Mapping[str, str]] = {}

    def __init__(self, engine: Engine, params: Mapping[str, str]) -> None:
        self.engine = engine
        check_params(type(self), params)

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


def check_params(cls: type[Protocol], params: Mapping[str, str]) -> None:
    """Reject parameters the protocol does not take, by name."""
    unknown = sorted(set(params) - set(cls.params))
    if unknown:
        raise ProtocolParamError(
            f"protocol '{cls.name}' has no parameter(s) {unknown}; "
            f"it takes {sorted(cls.params) or 'none'}"
        )


def int_param(
    protocol: str, params: Mapping[str, str], key: str, default: int | None
) -> int | None:
    """An integer parameter, or the default when absent."""
    text = params.get(key)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError as e:
        raise ProtocolParamError(f"{protocol}.{key} must be an integer, found '{text}'") from e


def bool_param(protocol: str, params: Mapping[str, str], key: str, default: bool) -> bool:
    """A boolean parameter (true/false), or the default when absent."""
    text = params.get(key)
    if text is None:
        return default
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ProtocolParamError(f"{protocol}.{key} must be true or false, found '{text}'")
