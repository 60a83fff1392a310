"""The delivery protocols of the source texts, one module each, by name (docs/replay.md)."""

from __future__ import annotations

from collections.abc import Mapping

from causal_spark.protocols.base import Protocol, ProtocolParamError
from causal_spark.protocols.bss import Bss
from causal_spark.protocols.fifo import Fifo
from causal_spark.protocols.lamport_total import LamportTotal
from causal_spark.protocols.mf import Mf
from causal_spark.protocols.none import NoProtocol
from causal_spark.protocols.rst import Rst
from causal_spark.protocols.sa import Sa
from causal_spark.protocols.sequencer import Sequencer
from causal_spark.protocols.ses import Ses
from causal_spark.protocols.skeen import Skeen
from causal_spark.protocols.sync import Sync

PROTOCOLS: Mapping[str, type[Protocol]] = {
    cls.name: cls
    for cls in (
        NoProtocol,
        Fifo,
        Bss,
        Ses,
        Rst,
        Mf,
        Sa,
        Sync,
        Sequencer,
        LamportTotal,
        Skeen,
    )
}


class UnknownProtocolError(ValueError):
    """A protocol name that no module implements."""


def protocol(name: str) -> type[Protocol]:
    """The protocol class called `name`."""
    found = PROTOCOLS.get(name)
    if found is None:
        raise UnknownProtocolError(f"unknown protocol '{name}'; known: {', '.join(PROTOCOLS)}")
    return found


__all__ = ["PROTOCOLS", "Protocol", "ProtocolParamError", "UnknownProtocolError", "protocol"]
