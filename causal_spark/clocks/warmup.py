"""Compiling the clocks stage's Numba kernels ahead of the stage (`app/warmup.py`).

The kernels compile on their first call, for the types of its arguments, and are
cached on disk. The stage calls them inside Spark's Python workers, where a cold
compile costs each worker seconds at the start of the stage; compiling here, in
a process started with the job, lets the workers load them instead. `KERNELS`
lists the kernels the per-trace engine calls from Python, with the argument
types it calls them with (every integer column goes through `int_column`, so
int64; a vector matrix is int32); the kernels they call compile with them.
`tests/test_warmup.py` holds the list to what the stage's functions call.
"""

from __future__ import annotations

from typing import Any

from numba import types

from causal_spark.clocks.components import _union_find_labels
from causal_spark.clocks.kernel import _advance, _cycle, _layout_rows
from causal_spark.clocks.units_kernel import _dense_units_clocks, _units_clocks

_I64 = types.int64
_V = types.int64[::1]  # a C-contiguous int64 vector
_B = types.boolean[::1]

_UNITS = (_V, _V, _V, _V, _V, _V, _V, _B, _I64, _I64)
KERNELS: tuple[tuple[Any, tuple[Any, ...]], ...] = (
    (_dense_units_clocks, _UNITS),
    (_layout_rows, (_V, _V, _V, _V, _I64)),
    (_advance, (_V, _V, _V, _V)),
    (_cycle, (_V, _V, _V, _V)),
    (_union_find_labels, (_I64, _V, _V, _V)),
)


# only a unit of at least 2^26 vector entries (`units_kernel.ROLLING_MIN_CELLS`) calls it:
# compiled ahead unless the inputs are small (`app.warmup.small_inputs`), else where first met
LARGE_KERNELS: tuple[tuple[Any, tuple[Any, ...]], ...] = ((_units_clocks, _UNITS),)


def compile_kernels(large: bool = True) -> None:
    """Compile (or load from the disk cache) every kernel of `KERNELS` for its types, and
    with `large` those of `LARGE_KERNELS` too."""
    for kernel, signature in (*KERNELS, *(LARGE_KERNELS if large else ())):
        kernel.compile(signature)
