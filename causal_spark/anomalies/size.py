"""How much memory detect holds for one trace, estimated before it runs.

Detect runs two kinds of grouped tasks over a trace (docs/anomalies.md):

- per (trace, destination): the vector clocks of the destination's receives
  (`violations.overtaken_at_destination`), n entries each: the Arrow list the task
  gets, the int32 matrix and its copy in message order, 12 bytes per entry;
- per trace: the delivered messages (`violations.chains_of_trace`,
  `crowns.crowns_of_trace`): the Arrow rows, the channel index (over the non-empty
  channels only), the contracted graph, the searches' records (one per message at
  most) and per-process arrays; and, when a crown search closes through a multicast,
  the causal past of each of its messages (n integers each).

`detect_bytes` is the larger of the two; `detect.max_trace_bytes` bounds it
(`inputs.analysable_messages`): a trace above it is not analysed, and its summary
says so with the estimate. Every function takes ints or Spark Columns alike (the
helpers of `causal_spark.clocks.size`). The coefficients were fitted to measured
peaks (`bench/wide_memory.py`); the model and the measurements are in
docs/anomalies.md, "How large a trace one task takes".
"""

from __future__ import annotations

from causal_spark.clocks.size import BASE_BYTES as CLOCKS_BASE_BYTES
from causal_spark.clocks.size import Num, as_long, greatest, least, when

# an idle Python worker's own memory and a group's fixed cost, as for the clocks
# (`clocks.size.BASE_BYTES`)
BASE_BYTES = CLOCKS_BASE_BYTES
# one destination's receives: per receive (its Arrow row and message row, the kernel's
# per-message arrays) and per vector entry (the Arrow list, its combined and int32 copies,
# the copy in message order: measured 16-17 bytes)
RECEIVE_BYTES = 400
ENTRY_BYTES = 17
# per delivered message of the trace: its Arrow row (ids and names), sorts, the channel
# index, the contracted graph, the searches' records (measured 370-800 with the fixed cost)
MESSAGE_BYTES = 650
# per process: the searches' arrays (arrival, origin, scanned, frontier, ...)
PROCESS_BYTES = 200
# a crown search that closes through a multicast keeps n integers per message of it
PAST_ENTRY_BYTES = 8


def destination_bytes(receives: Num, n: Num) -> Num:
    """Estimated peak of the violations task of one destination with `receives` receives."""
    receives, n = as_long(receives), as_long(n)
    return BASE_BYTES + receives * (RECEIVE_BYTES + ENTRY_BYTES * n)


def trace_bytes(messages: Num, n: Num, fanout: Num) -> Num:
    """Estimated peak of the chains or crowns task of a trace of `messages` delivered
    messages among n processes whose largest multicast has `fanout` messages."""
    messages, n, fanout = as_long(messages), as_long(n), as_long(fanout)
    return BASE_BYTES + MESSAGE_BYTES * messages + n * (PROCESS_BYTES + PAST_ENTRY_BYTES * fanout)


def detect_bytes(
    messages: Num,
    n: Num,
    max_receives: Num,
    fanout: Num,
    per_trace_max_messages: int,
    slab_events: int,
) -> Num:
    """Estimated peak of the detect task that holds the most of one trace.

    A trace of more than `per_trace_max_messages` delivered messages gets its crowns by
    the slab method, whose tasks hold about a slab of `slab_events` message events (the
    witness search of a component that has no crown of two messages holds that component:
    not estimated here, docs/anomalies.md); its chains task still holds every message.
    """
    messages = as_long(messages)
    crowns = when(messages > per_trace_max_messages, least(messages, slab_events), messages)
    per_trace = greatest(trace_bytes(messages, n, 0), trace_bytes(crowns, n, fanout))
    return greatest(destination_bytes(max_receives, n), per_trace)
