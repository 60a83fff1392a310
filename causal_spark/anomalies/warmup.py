"""Compiling the detect stage's Numba kernels ahead of the stage (`app/warmup.py`).

As `clocks/warmup.py`: `KERNELS` lists the kernels the violation and crown
functions call from Python, with the argument types they call them with (int64
columns from `int_column`, the receive clocks as an int32 matrix); the kernels
they call compile with them. `tests/test_warmup.py` holds the list to what the
stage's functions call.
"""

from __future__ import annotations

from typing import Any

from numba import types

from causal_spark.anomalies.crown_kernel import _shortest_crown, _tarjan, _two_crown
from causal_spark.anomalies.kernel import (
    _chains,
    _channel_extrema,
    _earliest_arrivals,
    _overtaking,
)

_I64 = types.int64
_V = types.int64[::1]  # a C-contiguous int64 vector
_B = types.boolean[::1]
_M32 = types.int32[:, ::1]  # a C-contiguous int32 matrix

KERNELS: tuple[tuple[Any, tuple[Any, ...]], ...] = (
    (_overtaking, (_I64, _V, _V, _M32, _V)),
    (_channel_extrema, (_V, _V, _V, _V)),
    (_chains, (_I64, *([_V] * 11))),
    (_tarjan, (_I64, _V, _V)),
    (_two_crown, (_V, _V, _I64, _V, _V, _V)),
    (_shortest_crown, (_V, _V, _I64, _I64, *([_V] * 10), _I64, *([_V] * 13))),
    (_earliest_arrivals, (_I64, *([_V] * 7), _B)),
)


def compile_kernels() -> None:
    """Compile (or load from the disk cache) every kernel of `KERNELS` for its types."""
    for kernel, signature in KERNELS:
        kernel.compile(signature)
