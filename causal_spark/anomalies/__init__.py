"""Anomalies (docs/anomalies.md): violations with witness chains, crowns, a trace's order class.

Grouped Arrow UDFs over the clocked tables, each a thin adapter around a
compiled kernel (no Spark in the kernels):

- `violations`: per (trace, destination) the overtaken messages, from the
  vector clocks of the destination's receives (`kernel`); per trace a witness
  chain for each causal violation;
- `crowns`: per trace the crown components and a witness crown of each
  (`crown_kernel`); traces too large for one task by the slab method
  (`crowns_slabs`, `slab_kernel`), witnesses checked against the vector clocks;
- `summary`: the `trace_summary` table and the order class of a trace.

Only delivered messages (`inputs`) take part, and only traces whose clocks are
`ok`: an INVALID trace gets no rows here and null anomaly counts in
`trace_summary`. So does a trace too large for one task (`size`,
`detect.max_trace_bytes`) or without vector clocks (`not_applicable` clocks): it has
no order class, and `order_class_reason` says why, with the estimate. `explain`
turns the tables into sentences about one message. The internals are described in docs/anomalies.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from causal_spark._lazy import lazy_exports

if TYPE_CHECKING:
    from causal_spark.anomalies.crowns import (
        CROWN_ROWS_SCHEMA,
        MEMBERS,
        CrownTables,
        crowns_of_trace,
        find_crowns,
        invalid_crowns,
        require_valid_crowns,
    )
    from causal_spark.anomalies.errors import (
        ChainNotFoundError,
        ComponentMismatchError,
        MissingClocksError,
        WitnessError,
    )
    from causal_spark.anomalies.inputs import (
        analysable_messages,
        delivered_messages,
        ok_traces,
        too_large_traces,
    )
    from causal_spark.anomalies.summary import (
        ASYNC,
        CO,
        FIFO_CLASS,
        INVALID,
        NOT_ANALYSED,
        ORDER_CLASSES,
        RSC,
        order_class,
        summarize_traces,
    )
    from causal_spark.anomalies.violations import (
        CAUSAL,
        FIFO,
        KNOWS_DST,
        OVERTAKEN_SCHEMA,
        OVERTAKING_PIDX,
        OVERTAKING_SEND,
        chains_of_trace,
        find_violations,
        overtaken_at_destination,
        overtaken_messages,
    )

__all__ = [
    "ASYNC",
    "CAUSAL",
    "CO",
    "CROWN_ROWS_SCHEMA",
    "FIFO",
    "FIFO_CLASS",
    "INVALID",
    "KNOWS_DST",
    "MEMBERS",
    "NOT_ANALYSED",
    "ORDER_CLASSES",
    "OVERTAKEN_SCHEMA",
    "OVERTAKING_PIDX",
    "OVERTAKING_SEND",
    "RSC",
    "ChainNotFoundError",
    "ComponentMismatchError",
    "CrownTables",
    "MissingClocksError",
    "WitnessError",
    "analysable_messages",
    "chains_of_trace",
    "crowns_of_trace",
    "delivered_messages",
    "find_crowns",
    "find_violations",
    "invalid_crowns",
    "ok_traces",
    "order_class",
    "overtaken_at_destination",
    "overtaken_messages",
    "require_valid_crowns",
    "summarize_traces",
    "too_large_traces",
]

# The public names are loaded on first use (PEP 562): importing a kernel of this package
# (`causal_spark.anomalies.kernel`, which the replay loop uses) must not load the engines,
# Spark or the configuration.
_WHERE = {
    "ASYNC": "summary",
    "CAUSAL": "violations",
    "CO": "summary",
    "CROWN_ROWS_SCHEMA": "crowns",
    "ChainNotFoundError": "errors",
    "ComponentMismatchError": "errors",
    "CrownTables": "crowns",
    "FIFO": "violations",
    "FIFO_CLASS": "summary",
    "INVALID": "summary",
    "KNOWS_DST": "violations",
    "MEMBERS": "crowns",
    "MissingClocksError": "errors",
    "NOT_ANALYSED": "summary",
    "ORDER_CLASSES": "summary",
    "OVERTAKEN_SCHEMA": "violations",
    "OVERTAKING_PIDX": "violations",
    "OVERTAKING_SEND": "violations",
    "RSC": "summary",
    "WitnessError": "errors",
    "analysable_messages": "inputs",
    "chains_of_trace": "violations",
    "crowns_of_trace": "crowns",
    "delivered_messages": "inputs",
    "find_crowns": "crowns",
    "find_violations": "violations",
    "invalid_crowns": "crowns",
    "ok_traces": "inputs",
    "order_class": "summary",
    "overtaken_at_destination": "violations",
    "overtaken_messages": "violations",
    "require_valid_crowns": "crowns",
    "summarize_traces": "summary",
    "too_large_traces": "inputs",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
