"""Freed memory handed back to the system while one group replays (`give_back`)."""

from __future__ import annotations

import ctypes
import ctypes.util

import pyarrow as pa

_LIBC = ctypes.util.find_library("c")
_TRIM = getattr(ctypes.CDLL(_LIBC), "malloc_trim", None) if _LIBC else None


def give_back() -> None:
    """Return freed memory to the system: Arrow's pool (decoded batches) and the C heap
    (the layout builder's chunks, tens of kB a column, live there among small objects and
    are not trimmed by themselves). Without it the garbage of the batches and chunks stays
    in the process beside the layout's and the engine's arrays: a third of the peak at 10^6
    messages (docs/replay.md, "How big a trace one worker replays")."""
    pa.default_memory_pool().release_unused()
    if _TRIM is not None:  # glibc
        _TRIM(0)
