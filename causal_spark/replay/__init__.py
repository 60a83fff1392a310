"""Protocol replay on Spark (docs/replay.md): every (trace, protocol) replayed in parallel.

`program_rows` flattens `events` and `messages` into the rows a replay needs
(one per internal event, per message copy of a send, per receive);
`replay_protocols` crosses them with the protocols and replays each (trace,
protocol) group with the compiled loop inside a grouped Arrow UDF (`adapter`).
A group holds one trace's rows, so one trace x protocol runs in one Python
worker; thousands of them run side by side. `compare_protocols` summarises
`protocol_runs` across traces (`compare`).

The modules, lowest first: `model` (kinds, statuses, the run record),
`protocols.spec` (what each protocol is: the registry the configuration reads),
`layout` (the one trace builder and its checks, with `shape`, `size` and its
compiled passes `placing`),
`cache` (the Numba disk-cache stamp), `structs` and `loop` (the compiled event
loop), `figures` and `verify` (computed once per run, from the loop's columns),
the protocols' modules (`protocols.registry`), `run` (`replay_compiled`),
`warmup`, `request`, `adapter`, `compare`, `plots`. The reference engine the
tests hold the loop to lives in `tests/oracles/replay/`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from causal_spark._lazy import lazy_exports

if TYPE_CHECKING:
    from causal_spark.replay.adapter import ReplayTables, program_rows, replay_protocols
    from causal_spark.replay.compare import NOT_COMPUTED, STALLED, compare_protocols
    from causal_spark.replay.request import (
        NONSELECTIVE,
        RECEIVE_MODES,
        SELECTIVE,
        ReplayRequest,
        ReplayRequestError,
        parse_params,
    )

__all__ = [
    "NONSELECTIVE",
    "NOT_COMPUTED",
    "RECEIVE_MODES",
    "SELECTIVE",
    "STALLED",
    "ReplayRequest",
    "ReplayRequestError",
    "ReplayTables",
    "compare_protocols",
    "parse_params",
    "program_rows",
    "replay_protocols",
]

# The public names are loaded on first use (PEP 562): the configuration reads the protocol
# registry (`causal_spark.replay.protocols.spec`), which must not load Spark, Numba or an
# engine on the way.
_WHERE = {
    "NONSELECTIVE": "request",
    "NOT_COMPUTED": "compare",
    "RECEIVE_MODES": "request",
    "ReplayRequest": "request",
    "ReplayRequestError": "request",
    "ReplayTables": "adapter",
    "SELECTIVE": "request",
    "STALLED": "compare",
    "compare_protocols": "compare",
    "parse_params": "request",
    "program_rows": "adapter",
    "replay_protocols": "adapter",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
