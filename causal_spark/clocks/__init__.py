"""Clocks (docs/clocks.md): Lamport and vector clocks of every event, at any scale.

`with_clocks` plans the work (`plan`: components of each trace's process
graph, `components`, each cut into slabs) and hands each component to one of
two engines:

- the **per-trace engine** (`per_trace`, a component of one slab): whole
  components, many per grouped Arrow UDF call, through the compiled kernel of
  `units_kernel`; large ones clocked where their events are read when the rows
  are written by the tasks;
- the **distributed engine** (`distributed`, a component of several slabs):
  three Spark rounds whatever the length of causal chains (symbolic slabs, the
  export graph resolved per component, exact slabs).

Choice: `auto` uses the per-trace engine for components up to
`per_trace_max_events` events and slabs of about `slab_events` events beyond;
`per_trace` and `distributed` force one engine (conf `clocks.engine`).

A component whose matched ids form a causal cycle gets null clocks;
`trace_clock_status` (`status`) marks its trace INVALID with a witness cycle.
A component whose vectors would take one task more than `max_component_bytes` at
the estimated peak (`size`) gets Lamport clocks only (or none, if even those would
not fit): its trace is `not_applicable`, with the estimate.
Also here: matrix clocks on request (`matrix`) and the happened-before Column
helpers (`order`). The engines' internals are described in docs/clocks.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from causal_spark._lazy import lazy_exports

if TYPE_CHECKING:
    from causal_spark.clocks.engine import ClockResult, with_clocks
    from causal_spark.clocks.plan import Plan, plan_units
    from causal_spark.clocks.status import (
        CLOCK_STATUS_INVALID,
        CLOCK_STATUS_NOT_APPLICABLE,
        CLOCK_STATUS_OK,
        trace_clock_status,
    )

__all__ = [
    "CLOCK_STATUS_INVALID",
    "CLOCK_STATUS_NOT_APPLICABLE",
    "CLOCK_STATUS_OK",
    "ClockResult",
    "Plan",
    "plan_units",
    "trace_clock_status",
    "with_clocks",
]

# The public names are loaded on first use (PEP 562): importing a kernel of this package
# (`causal_spark.clocks.kernel`, which the replay loop uses) must not load the engines,
# Spark or the configuration.
_WHERE = {
    "ClockResult": "engine",
    "with_clocks": "engine",
    "Plan": "plan",
    "plan_units": "plan",
    "CLOCK_STATUS_INVALID": "status",
    "CLOCK_STATUS_NOT_APPLICABLE": "status",
    "CLOCK_STATUS_OK": "status",
    "trace_clock_status": "status",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
