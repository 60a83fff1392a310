"""Memory while one group replays: freed memory handed back to the system (`give_back`),
small pages for the big arrays (`small_pages`)."""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
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


_HUGE = getattr(getattr(np, "_core", None), "multiarray", None)
_SET_HUGE = getattr(_HUGE, "_set_madvise_hugepage", None)


@contextmanager
def small_pages() -> Iterator[None]:
    """NumPy's arrays of 4 MB and more get ordinary pages here, not transparent huge ones.

    NumPy asks the kernel for huge pages on large arrays (`madvise`); where free huge
    pages are short, as on a machine whose memory is fragmented by other processes, each
    first touch waits for the kernel to compact memory. The engine's and the layout's
    arrays are touched once each when made: at 10^7 messages making the engine took
    1.4-1.7 CPU-s with huge pages and 0.25 with small ones, and the loop ran no slower
    (`bench/README.md`, issue 22)."""
    if _SET_HUGE is None:
        yield
        return
    before = _SET_HUGE(False)
    try:
        yield
    finally:
        _SET_HUGE(before)
