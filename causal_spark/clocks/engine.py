"""`with_clocks`: plan the clocks of every event and run each component through its engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame

from causal_spark.clocks.distributed import split_units
from causal_spark.clocks.per_trace import whole_units
from causal_spark.clocks.plan import plan_units
from causal_spark.config import ClockSettings
from causal_spark.sinks import FileWriter


@dataclass(frozen=True)
class ClockResult:
    """Events with clocks, and the units (components) they were computed in.

    events: the `events` columns with `lamport` and `vc` (null for a component
    with a causal cycle), lazy. plan: one row per (trace, process) with its
    component, N_p, the trace's n, the component's events and slabs (small,
    checkpointed). component_rounds, clock_passes: Spark rounds spent on
    components and on the clock passes. To have the tasks that compute the
    clocks write the rows themselves, call `run_and_write`.
    """

    events: DataFrame
    plan: DataFrame
    component_rounds: int
    clock_passes: int
    _clock: Callable[[FileWriter | None], DataFrame] = field(repr=False)

    def run_and_write(self, writer: FileWriter) -> DataFrame:
        """The same rows as `events`, written by the tasks that compute them with `writer`
        (sinks.FileWriter); the DataFrame returned names the files (sinks.FILES_SCHEMA) and
        the vectors never enter the JVM.

        With a writer that has a scratch folder this runs Spark jobs now: a small one on
        the placement of the units and, when some units are larger than `slab_events`, the
        staging of their links in that folder (they are clocked where their events are
        read). Collect the DataFrame it returns before that folder is removed
        (`RunTransaction.stage_through` does).
        """
        return self._clock(writer)


def with_clocks(
    events: DataFrame, messages: DataFrame, settings: ClockSettings | None = None
) -> ClockResult:
    """`events` with `lamport` and `vc` (docs/clocks.md) computed by the engine `settings` choose.

    Requires the `events` and `messages` tables (columns as in schemas/).
    Output events: the `events` columns; a component whose matched ids form
    a causal cycle gets null `lamport` and `vc` (see `trace_clock_status`).
    This runs Spark jobs now (planning, the units' placement and, for split
    components, the distributed engine's first two passes); `events` is lazy.
    """
    settings = settings or ClockSettings()
    plan = plan_units(events, messages, settings)
    info = plan.units
    # built once (its small checkpoints and key probe are Spark jobs), run per writer
    whole = whole_units(events, messages, plan, settings, plan.whole_events, plan.whole_units)
    if plan.max_slabs == 1:
        return ClockResult(whole.clock(None), info, plan.component_rounds, 1, whole.clock)
    # every process of a split unit has max_slabs - 1 slab starts at most (`plan_units`)
    slabbed = split_units(events, messages, info, plan.max_slabs - 1)

    def clocked(writer: FileWriter | None) -> DataFrame:
        return slabbed.clock(writer).unionByName(whole.clock(writer))

    return ClockResult(clocked(None), info, plan.component_rounds, 3, clocked)
