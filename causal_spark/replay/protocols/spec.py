"""What each delivery protocol is, without its code: the one registry of names and parameters.

A `ProtocolSpec` holds what the rest of the system needs to know of a protocol
before it runs: its name, the source it implements (cited by author, title and
section; docs/replay.md writes the definitions out), which check its replayed
execution must pass (docs/replay.md, "Invariant"), how its copies leave a
sender, and its parameters with their parsing. No Numba and no Spark here:
the configuration validates protocol names against `SPECS`, and `ReplayRequest`
validates parameter names against it, without loading an engine.

Each protocol's module (`causal_spark.replay.protocols.<name>`) takes its
`SPEC` from here and adds its compiled state and hooks; `registry.py` lists the
modules the loop runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from causal_spark.replay.protocols.params import (
    BoolParam,
    IntParam,
    Param,
    ProtocolParamError,
    TextParam,
)


class UnknownProtocolError(ValueError):
    """A protocol name that no module implements."""


@dataclass(frozen=True)
class ProtocolSpec:
    """A protocol as the configuration, the request and the loop see it."""

    name: str
    # the source it implements: author, title (or chapter) and section
    source: str
    # which check the replayed execution must pass (docs/replay.md, "Invariant")
    causal: bool = False
    fifo: bool = False
    total_order: bool = False
    # multicast copies leave one after another, each its own send event (mf, sync)
    point_to_point: bool = False
    # the transport keeps every directed channel FIFO (arrivals never overtake), unless
    # a parameter says otherwise (`fifo_transport_param`)
    fifo_transport: bool = False
    # the boolean parameter that turns on FIFO channels, when one does (mf)
    fifo_transport_param: str | None = None
    # parameter name -> its description and parsing
    params: Mapping[str, Param] = field(default_factory=dict)

    def check_params(self, given: Mapping[str, str]) -> None:
        """Reject parameters the protocol does not take, by name."""
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            raise ProtocolParamError(
                f"protocol '{self.name}' has no parameter(s) {unknown}; "
                f"it takes {sorted(self.params) or 'none'}"
            )

    def parse(self, given: Mapping[str, str]) -> dict[str, object]:
        """Every parameter's value (its default when absent), after `check_params`."""
        self.check_params(given)
        return {
            key: param.parse(f"{self.name}.{key}", given.get(key))
            for key, param in self.params.items()
        }

    def uses_fifo_transport(self, parsed: Mapping[str, object]) -> bool:
        """Does the transport keep channels FIFO with these (parsed) parameters?"""
        if self.fifo_transport_param is not None:
            return bool(parsed[self.fifo_transport_param])
        return self.fifo_transport


_SPECS = (
    ProtocolSpec("none", "docs/replay.md: the recorded system, each message delivered on arrival"),
    ProtocolSpec(
        "fifo", "Mattern & Fünfroeken §2, Garg §12.1: per-channel sequence numbers", fifo=True
    ),
    ProtocolSpec("bss", "Birman, Schiper & Stephenson: ISIS CBCAST vector timestamps", causal=True),
    ProtocolSpec(
        "ses", "Schiper, Eggli & Sandoz §4.2: ORD_BUFF pairs (site, vector time)", causal=True
    ),
    ProtocolSpec(
        "rst",
        "Garg §12.2 Fig. 12.2/12.4 (Raynal-Schiper-Toueg); Sánchez & Álvarez §3",
        causal=True,
    ),
    ProtocolSpec(
        "mf",
        "Mattern & Fünfroeken §3: FIFO output/input buffers with acknowledgements",
        causal=True,
        point_to_point=True,
        fifo_transport_param="no_wait_same_receiver",
        params={
            "no_wait_same_receiver": BoolParam(
                "post the next copy to the same receiver without waiting for the previous "
                "acknowledgement (Mattern & Fünfroeken footnote 4; FIFO channels)",
                default=False,
            )
        },
    ),
    ProtocolSpec(
        "sa",
        "Sánchez & Álvarez §3: sparse matrix, threshold k, extra messages",
        causal=True,
        params={
            "k": IntParam("threshold of non-zero entries (default n + 1; n < k <= n^2)", least=2)
        },
    ),
    ProtocolSpec(
        "sync",
        "Mattern & Fünfroeken §2, Fig. 1 and 3: blocking send with acknowledgement",
        causal=True,
        point_to_point=True,
    ),
    ProtocolSpec(
        "sequencer",
        "Garg §12.3.1: centralized sequencer",
        total_order=True,
        params={"process": TextParam("the sequencer's process name (default: the first by name)")},
    ),
    ProtocolSpec(
        "lamport_total",
        "Garg §12.3.2: Lamport's algorithm for total order",
        total_order=True,
        fifo_transport=True,
    ),
    ProtocolSpec("skeen", "Garg §12.3.3: Skeen's algorithm", total_order=True),
)

# the registry: every protocol by name, in the order `replay` runs them by default
SPECS: Mapping[str, ProtocolSpec] = {s.name: s for s in _SPECS}


def spec(name: str) -> ProtocolSpec:
    """The protocol called `name`."""
    found = SPECS.get(name)
    if found is None:
        raise UnknownProtocolError(f"unknown protocol '{name}'; known: {', '.join(SPECS)}")
    return found


__all__ = ["SPECS", "ProtocolParamError", "ProtocolSpec", "UnknownProtocolError", "spec"]
