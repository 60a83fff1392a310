"""Compiling the replay loop ahead of the first group, protocols side by side."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pyarrow as pa
from numba import types

from causal_spark.replay.layout import (
    KIND,
    LAMPORT,
    LSEQ,
    MSG_ID,
    PEER,
    PEER_LSEQ,
    PIDX,
    PROCESS,
    TS,
    CompiledTrace,
    LayoutBuilder,
    _in_flight,
)
from causal_spark.replay.model import KIND_CODES
from causal_spark.replay.run import replay_compiled


def _tiny_trace() -> CompiledTrace:
    """P sends m1 to Q, Q replies m2: two broadcasts, so every protocol runs its loop. Laid
    out as the grouped UDF lays a trace out (`adapter._replay_group`): one Arrow batch with
    the types Spark gives `program_rows`' columns (pidx and peer int32, lseq and lamport
    int64, kind its int8 code), so the layout's kernels compile for the job's own argument
    types (an int64 pidx would compile a `placing.max_at` the job never calls, and leave
    the job's to a Spark worker)."""
    kinds = ["internal", "send", "receive", "receive", "send", "internal"]
    batch = pa.RecordBatch.from_pydict(
        {
            PROCESS: pa.array(["P", "P", "P", "Q", "Q", "Q"], pa.string()),
            PIDX: pa.array([0, 0, 0, 1, 1, 1], pa.int32()),
            LSEQ: pa.array([1, 2, 3, 1, 2, 3], pa.int64()),
            KIND: pa.array([KIND_CODES[k] for k in kinds], pa.int8()),
            TS: pa.array([0.0, 1.0, 4.0, 2.0, 3.0, 5.0], pa.float64()),
            LAMPORT: pa.array([1, 2, 5, 3, 4, 6], pa.int64()),
            MSG_ID: pa.array([None, "m1", "m2", "m1", "m2", None], pa.string()),
            PEER: pa.array([-1, 1, 1, 0, 0, -1], pa.int32()),
            PEER_LSEQ: pa.array([-1, -1, 2, 2, -1, -1], pa.int64()),
        }
    )
    builder = LayoutBuilder("warm-up")
    builder.add(batch)
    return builder.finish()


def compile_layout() -> None:
    """Compile what the adapter calls besides `layout` and the loop: the size guard's count
    of copies in flight (`LayoutBuilder.in_flight`, over sorted float64 times)."""
    _in_flight.compile((types.float64[::1], types.float64[::1]))


def compile_protocol(name: str) -> str:
    """Compile (or load from the disk cache) the loop for protocol `name`; returns the name."""
    trace = _tiny_trace()
    for selective in (False, True):
        run = replay_compiled(trace, name, {}, selective)
    run.columns(trace.ids.message)  # the deliveries columns' gather (`run._gather`)
    return name


def warm_up(names: Sequence[str], processes: int | None = None) -> None:
    """Compile the loop for `names` into the disk cache, protocols side by side in processes.

    A cold compile takes about 15 CPU-s for the first protocol in a process (most
    of it the code every protocol shares) and 2-10 CPU-s for each further one. So the
    first protocol compiles here, and the rest in `processes` (default: one per
    core) children that start with the shared code compiled: forked from this
    process when it runs no other thread, else (a driver holding a JVM, whose
    threads a fork would not carry) spawned, each compiling the shared code
    again. `cache.py` serialises the cache's index writes, so side-by-side
    compiles lose no entry. Python workers on this machine (Spark local mode,
    the tests) then load the code in well under a second per protocol; executors
    on other machines compile (once per machine) on their first group. With a
    warm cache this only loads them, here (about 0.3 s each).
    """
    import concurrent.futures
    import multiprocessing
    import threading
    import time

    if not names:
        return
    began = time.perf_counter()
    compile_layout()
    compile_protocol(names[0])
    rest = list(names[1:])
    if time.perf_counter() - began < _CACHED_LOAD_SECONDS:
        for name in rest:  # a warm cache: load them here (or compile one not cached yet)
            compile_protocol(name)
        return
    workers = max(1, min(len(rest), processes or os.cpu_count() or 1))
    alone = threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if alone else "spawn")
    # the costliest first, so that no core is left alone with a long compile at the end
    order = sorted(rest, key=lambda name: -_COMPILE_CPU_S.get(name, 5.0))
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        list(pool.map(compile_protocol, order))


# loading one protocol's loop from a warm cache takes a fraction of this; compiling, 10 s+
_CACHED_LOAD_SECONDS = 3.0
# a protocol's cold compile after `none`'s, CPU-s (bench/README.md, "the replay loops' cold
# compile", 2026-11-28): only the order of the side-by-side compiles depends on it
_COMPILE_CPU_S = {
    "lamport_total": 10.5, "sa": 8.2, "ses": 5.1, "bss": 4.8, "skeen": 4.3, "mf": 4.2,
    "sequencer": 3.8, "rst": 3.5, "sync": 3.3, "fifo": 2.4,
}  # fmt: skip
