"""The reference protocol classes, one module each, by name: the readable form of each
protocol, which the compiled hooks of `causal_spark.replay.protocols` are held to."""

from __future__ import annotations

from collections.abc import Mapping

from causal_spark.replay.protocols.spec import spec
from tests.oracles.replay.protocols.base import Protocol
from tests.oracles.replay.protocols.bss import Bss
from tests.oracles.replay.protocols.fifo import Fifo
from tests.oracles.replay.protocols.lamport_total import LamportTotal
from tests.oracles.replay.protocols.mf import Mf
from tests.oracles.replay.protocols.none import NoProtocol
from tests.oracles.replay.protocols.rst import Rst
from tests.oracles.replay.protocols.sa import Sa
from tests.oracles.replay.protocols.sequencer import Sequencer
from tests.oracles.replay.protocols.ses import Ses
from tests.oracles.replay.protocols.skeen import Skeen
from tests.oracles.replay.protocols.sync import Sync

PROTOCOLS: Mapping[str, type[Protocol]] = {
    cls.name: cls
    for cls in (NoProtocol, Fifo, Bss, Ses, Rst, Mf, Sa, Sync, Sequencer, LamportTotal, Skeen)
}


def protocol(name: str) -> type[Protocol]:
    """The reference class of protocol `name` (UnknownProtocolError if there is none)."""
    spec(name)
    return PROTOCOLS[name]


__all__ = ["PROTOCOLS", "Protocol", "protocol"]
