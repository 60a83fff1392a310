"""Spark's Python worker daemon with the job's imports done once, before it forks workers.

PySpark's daemon (`pyspark.daemon`) forks a worker per concurrent Python task and each
worker imports, on its first task, what the task's functions need: NumPy, pandas,
pyarrow, Numba and the engines' task-side modules, about 1-1.5 CPU-s a worker; a small
audit forks six (two daemons: Spark keeps one per set of worker environment variables).
`app/session.py` names this module `spark.python.daemon.module` for a short job (a
local master over small inputs): it imports `PRELOAD` in the daemon, collects and
freezes the heap (as `ingest.tasks.settle_worker` does in a worker), then runs
PySpark's daemon, so the forked workers share the imported modules instead of each
importing them. No compiled Numba code is loaded here: the job's warm-up
(`app/warmup.py`) may not have written it yet, and each worker loads what it calls.

PySpark imports its worker module after the fork because a module might start threads
on import. Of `PRELOAD`, two native libraries do: NumPy's OpenBLAS (its thread pool,
which it re-creates after a fork, as in the warm-up's forked compiles) and pyarrow's
jemalloc (its background thread; jemalloc's own fork handlers take its locks before the
fork and reset them in the child). `tests/test_warmup.py` checks that the modules start
no Python thread. A module that fails to import is left
to the workers, which import it (and report its error) as without this daemon.

A job that names its stages (`STAGES_ENV`, set by `session.build_session` before the JVM
starts, whose environment the daemon inherits on a local master) preloads only what those
stages' tasks import (`BY_STAGE`): an ingest's workers import neither Numba nor the
clocks, detect and replay modules (about 0.5 CPU-s of the daemon's ~2).
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

# the modules a small audit's workers import (the union over its tasks), by their roots
PRELOAD = (
    "numpy",
    "pandas",
    "pyarrow",
    "numba",
    "pyspark.worker",
    "causal_spark.io.sources",
    "causal_spark.io.readers",
    "causal_spark.ingest.tasks",
    "causal_spark.clocks.per_trace",
    "causal_spark.clocks.distributed",
    "causal_spark.clocks.scratch",
    "causal_spark.anomalies.violations",
    "causal_spark.anomalies.crowns",
    "causal_spark.anomalies.crowns_slabs",
    "causal_spark.replay.adapter",
)
# the modules each stage's tasks import beyond `COMMON`; a stage not named here gets PRELOAD
COMMON = ("numpy", "pandas", "pyarrow", "pyspark.worker")
BY_STAGE: dict[str, tuple[str, ...]] = {
    "ingest": ("causal_spark.io.sources", "causal_spark.io.readers", "causal_spark.ingest.tasks"),
    "clocks": (
        "numba",
        "causal_spark.clocks.per_trace",
        "causal_spark.clocks.distributed",
        "causal_spark.clocks.scratch",
    ),
    "detect": (
        "numba",
        "causal_spark.anomalies.violations",
        "causal_spark.anomalies.crowns",
        "causal_spark.anomalies.crowns_slabs",
    ),
    "replay": ("numba", "causal_spark.replay.adapter"),
    "compare": (),
}
# the job's stage names, comma-separated (unset: every module of PRELOAD)
STAGES_ENV = "CAUSAL_SPARK_STAGES"


def modules_for(stages: Sequence[str] | None) -> tuple[str, ...]:
    """What to preload for a job of `stages` (None: PRELOAD), in PRELOAD's order."""
    if stages is None or any(s not in BY_STAGE for s in stages):
        return PRELOAD
    wanted = set(COMMON).union(*(BY_STAGE[s] for s in stages))
    return tuple(m for m in PRELOAD if m in wanted)


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import `modules`; the names of those that failed (their tracebacks on stderr)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # the workers import it again and report the error there
            traceback.print_exc(file=sys.stderr)
            failed.append(name)
    gc.collect()
    gc.freeze()
    return failed


def main() -> None:
    """Preload, then run PySpark's daemon (it reads its worker module from argv)."""
    named = os.environ.get(STAGES_ENV)
    preload(modules_for(named.split(",") if named else None))
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
