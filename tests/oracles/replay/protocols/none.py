"""The reference `none`: plain Python, read against the source; the compiled hooks of
`causal_spark.replay.protocols.none` are held to it, event for event."""

from __future__ import annotations

from causal_spark.replay.protocols.spec import SPECS
from tests.oracles.replay.protocols.base import Protocol


class NoProtocol(Protocol):
    spec = SPECS["none"]
