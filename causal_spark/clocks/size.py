"""How much memory one clocks task holds for one component, estimated before it runs.

A component of E events among the n processes of its trace (a vector clock has
n entries whatever the component) is clocked in one task by the per-trace
engine, or in slabs by the distributed engine (docs/clocks.md). Its vectors are
4 x n bytes per event, and a task holds them several times over: the kernel's
rows, the output vectors, the Parquet writer's pages. `task_bytes` adds these
up from the shape; `component_bytes` follows the path the engines take for a
component (whole, one in-place part of it, or one slab), and `lamport_bytes` is
the Lamport-only path of a component too wide for vectors (O(events), whatever
n). `clocks.max_component_bytes` bounds them (`clocks.plan`): a component
whose vectors would exceed the limit gets Lamport clocks only; one whose
Lamport clocks would too gets none; its trace is `not_applicable` in
`trace_clocks` with the reason (`status.py`).

Every function takes plain ints (a task, a test, the benchmark) or Spark
Columns (the plan, one row per process), and gives the same number either way:
the model is written once. The coefficients were fitted to measured peaks
(`bench/wide_memory.py`); the model and the measurements are in docs/clocks.md,
"How wide a component one task takes".
"""

from __future__ import annotations

from typing import Any, TypeAlias

from pyspark.sql import Column
from pyspark.sql import functions as F

from causal_spark.clocks.units_kernel import DENSE_MAX_CELLS, ROLLING_MIN_CELLS

# an idle Python worker's own memory (about 64 MiB: the interpreter, pyarrow, the compiled
# kernels) and a group's fixed cost (about 20-30 MiB measured) (bytes)
BASE_BYTES = 96 << 20
# per event of the component the task traverses: the links and layout of the whole
# component, the kernel's per-event arrays (measured 230 on the rolling path)
EVENT_BYTES = 230
# per row the task writes: its Arrow row in, the layout's per-row arrays, the row out
# (measured: 295 per event with the two together on the dense path)
ROW_BYTES = 65
# dense kernel, per entry of its events x n matrix: the kernel's int32 row (4), the output
# lists and the Parquet writer's pages (measured 9.2 per entry); a share of the rows
# written (a part) is also copied out of it (4 per entry written)
DENSE_ENTRY_BYTES = 10
COPY_ENTRY_BYTES = 4
# rolling kernel, per entry of the rows written (measured 3.9), and its n x n rows: one per
# process, the pool of sends in flight (n rows at first, doubling) and its zero seed:
# about 6 rows of n int32 per process (measured 5.3 on a random trace of 6 000 processes)
ROLLING_ENTRY_BYTES = 4
ROLLING_SQUARE_BYTES = 24
# Lamport clocks only (`kernel._advance` and no vectors): per event of the component
# (measured 330)
LAMPORT_EVENT_BYTES = 340
# per process of the trace: its name rows and the per-process arrays (measured about 1 KB)
PROCESS_BYTES = 1024

# a plan's choice per component (the `clocks` column of the plan, shipped to the tasks)
VECTORS = 2  # Lamport and vector clocks
LAMPORT_ONLY = 1  # too wide for vectors: Lamport clocks only, vc null
NO_CLOCKS = 0  # too large even for Lamport clocks alone: both null

# an int or a Column: the model is arithmetic on either (typed loosely on purpose: a
# TypeVar over both cannot mix them with int constants)
Num: TypeAlias = Any

# Arithmetic that works on ints and on Columns alike (the model is written once)


def when(condition: bool | Column, then: Num, otherwise: Num) -> Num:
    if isinstance(condition, Column):
        return F.when(condition, then).otherwise(otherwise)
    return then if condition else otherwise


def ceil_div(a: Num, b: Num) -> Num:
    if isinstance(a, Column) or isinstance(b, Column):
        # exact: every operand is far below 2^53
        return F.ceil(F.lit(a) / F.lit(b)).cast("long")
    return -(-a // b)


def least(a: Num, b: Num) -> Num:
    if isinstance(a, Column) or isinstance(b, Column):
        return F.least(F.lit(a), F.lit(b))
    return min(a, b)


def greatest(a: Num, b: Num) -> Num:
    if isinstance(a, Column) or isinstance(b, Column):
        return F.greatest(F.lit(a), F.lit(b))
    return max(a, b)


def as_long(value: Num) -> Num:
    return value.cast("long") if isinstance(value, Column) else int(value)


def rolling(events: Num, n: Num, rows: Num) -> Num:
    """Whether `units_kernel` runs the rolling kernel for this unit (its `_rolling`)."""
    cells = events * n
    return (cells > DENSE_MAX_CELLS) | ((cells >= ROLLING_MIN_CELLS) & (4 * rows <= 3 * events))


def task_bytes(events: Num, n: Num, rows: Num) -> Num:
    """Estimated peak of one per-trace task that clocks a component of `events` events and n
    processes and writes `rows` of them (all of them, or one output part's share).

    Dense kernel (`units_kernel` chooses): a row of n entries per event of the component;
    rolling kernel (a large part): the rows written, and n x n for the rows of the
    processes and the sends in flight, not events x n.
    """
    events, n, rows = as_long(events), as_long(n), as_long(rows)
    base = BASE_BYTES + EVENT_BYTES * events + ROW_BYTES * rows + PROCESS_BYTES * n
    copied = when(rows < events, COPY_ENTRY_BYTES * rows * n, 0)
    dense = DENSE_ENTRY_BYTES * events * n + copied
    kept = ROLLING_ENTRY_BYTES * rows * n + ROLLING_SQUARE_BYTES * n * n
    return base + when(rolling(events, n, rows), kept, dense)


def lamport_bytes(events: Num, n: Num) -> Num:
    """Estimated peak of one task that computes a component's Lamport clocks only."""
    return BASE_BYTES + LAMPORT_EVENT_BYTES * as_long(events) + PROCESS_BYTES * as_long(n)


def component_rows(
    events: Num, n_slabs: Num, slab_events: int, output_parts: int
) -> tuple[Num, Num]:
    """(events one task traverses, rows it writes) for a component on its engine's path.

    Per-trace engine (one slab): the whole component up to `slab_events` events; beyond,
    it is clocked in place and each task traverses all of it but writes about one of its
    output parts (at most `output_parts`, one per `slab_events`). Distributed engine: one
    slab of the component, traversed twice (the symbolic pass keeps a path length per
    entry, as many as a vector's), written once.
    """
    events = as_long(events)
    parts = least(greatest(ceil_div(events, slab_events), 1), max(1, output_parts))
    whole = when(events > slab_events, ceil_div(events, parts), events)
    slab = ceil_div(events, greatest(n_slabs, 1))
    split = n_slabs > 1
    return when(split, 2 * slab, events), when(split, slab, whole)


def component_bytes(events: Num, n: Num, n_slabs: Num, slab_events: int, output_parts: int) -> Num:
    """Estimated peak of the task that holds the most of one component, on its path."""
    traversed, rows = component_rows(events, n_slabs, slab_events, output_parts)
    return task_bytes(traversed, n, rows)
