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
"""

from __future__ import annotations

import gc
import importlib
import sys
import traceback

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
    preload()
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
