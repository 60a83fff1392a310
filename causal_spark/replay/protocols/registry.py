"""The compiled protocols by name: each module holds `SPEC`, `State`, `make_state` and hooks.

The loop finds a protocol's module here, never by its name in `sys.modules`.
A new protocol is added to `spec.SPECS` and to `MODULES` (docs/replay.md,
"Adding a protocol"); a test checks that the two name the same protocols.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

from causal_spark.replay.loop import register
from causal_spark.replay.protocols import (
    bss,
    fifo,
    lamport_total,
    mf,
    none,
    rst,
    sa,
    sequencer,
    ses,
    skeen,
    sync,
)
from causal_spark.replay.protocols.spec import spec

MODULES: Mapping[str, ModuleType] = {
    module.SPEC.name: module
    for module in (none, fifo, bss, ses, rst, mf, sa, sync, sequencer, lamport_total, skeen)
}

for _module in MODULES.values():
    register(_module)


def module_of(name: str) -> ModuleType:
    """The compiled module of protocol `name` (UnknownProtocolError if there is none)."""
    spec(name)
    return MODULES[name]
