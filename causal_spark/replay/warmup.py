"""Compiling the replay loop ahead of the first group, protocols side by side."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from causal_spark.replay.layout import CompiledTrace, layout
from causal_spark.replay.run import replay_compiled


def _tiny_trace() -> CompiledTrace:
    """P sends m1 to Q, Q replies m2: two broadcasts, so every protocol runs its loop."""
    return layout(
        "warm-up",
        ["P", "Q"],
        np.asarray([0, 0, 0, 1, 1, 1]),
        np.asarray([1, 2, 3, 1, 2, 3]),
        ["internal", "send", "receive", "receive", "send", "internal"],
        np.asarray([0.0, 1.0, 4.0, 2.0, 3.0, 5.0]),
        np.asarray([1, 2, 5, 3, 4, 6]),
        [None, "m1", "m2", "m1", "m2", None],
        np.asarray([-1, 1, 1, 0, 0, -1]),
    )


def compile_protocol(name: str) -> str:
    """Compile (or load from the disk cache) the loop for protocol `name`; returns the name."""
    trace = _tiny_trace()
    for selective in (False, True):
        replay_compiled(trace, name, {}, selective)
    return name


def warm_up(names: Sequence[str], processes: int | None = None) -> None:
    """Compile the loop for `names` into the disk cache, protocols side by side in processes.

    A cold compile takes 10-30 s per protocol. Python workers on this machine
    (Spark local mode, the tests) then load the cached code in well under a
    second instead of each compiling every protocol it meets. Executors on
    other machines compile (once per machine) on their first group. With a
    warm cache this only loads the code here (about 0.3 s per protocol).
    """
    import concurrent.futures
    import multiprocessing
    import time

    if not names:
        return
    began = time.perf_counter()
    compile_protocol(names[0])
    rest = list(names[1:])
    workers = max(1, min(len(rest), processes or os.cpu_count() or 1))
    if time.perf_counter() - began > _CACHED_LOAD_SECONDS and workers > 1:
        context = multiprocessing.get_context("spawn")  # no fork of a process holding a JVM
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            list(pool.map(compile_protocol, rest))
    for name in rest:  # load here (and recompile what a racing cache-index write lost)
        compile_protocol(name)


# loading one protocol's loop from a warm cache takes a fraction of this; compiling, 10 s+
_CACHED_LOAD_SECONDS = 3.0
