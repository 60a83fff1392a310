"""The JVMs of the test run: settings for short-lived drivers, and a shared class archive.

The suite starts about fifty Spark drivers in subprocesses (`causal-spark`, `spark-submit`)
on a few rows each, where start-up dominates; on the 2-core machine a cold `causal-spark
ingest data-samples` spent 95 CPU-seconds with the defaults. Every driver of the run
(subprocesses inherit `SPARK_SUBMIT_OPTS`) therefore gets:

- no code generation (`spark.*` system properties are read as Spark settings): Spark
  evaluates expressions instead of generating and compiling Java for every new plan;
- C1 only, the pytest workers' own drivers included: the JIT's optimising tier (C2)
  compiles for a peak speed the suite's small jobs never reach. A worker's driver lives for
  the whole run, but its C2 threads spent more CPU than they saved: test_clocks.py alone,
  `-n 0`, the same tree side by side (2026-12-02), 304 CPU-s and 540 s with C2 against 262
  CPU-s and 511 s with C1 only; the suite is CPU-bound on 2 cores (1.8-1.9 busy), so the CPU
  is the time;
- a code cache of 240 MB (the JDK's size with C2 on): with C1 only the JVM reserves 48 MB,
  which a pytest worker's driver fills in its first minutes (the lead's profile of
  2026-12-02: 44 of 48 MB used, 47 MB at most), after which the JIT's sweeper flushes
  compiled methods aggressively, to be compiled again (its thread had spent 20-26 CPU-s
  per worker driver 14 minutes into that run); and the serial collector (no concurrent
  G1 threads; a 2-core machine runs the two workers' drivers side by side anyway).
  test_clocks.py's engine comparisons, `-n 0`, three runs side by side in cgroups
  (bench/README.md, suite19f): 137 -> 129 CPU-s (median) with the code cache, 129 -> 123
  and 103 -> 100 with the serial collector on top; a cold ingest unchanged (20-21 CPU-s);
- one Python worker daemon per driver: PySpark starts one for `createDataFrame` from a
  Python list (an RDD job) and one for SQL's Python tasks (`mapInArrow`), whose workers
  get `SPARK_SIMPLIFIED_TRACEBACK`, a different environment; without simplified tracebacks
  (a Python error's traceback then keeps PySpark's own frames) one daemon serves both. A
  short job's daemon (`app/daemon.py`) imports NumPy, pandas, pyarrow, Numba and the
  task-side modules before it forks: 2.3-2.6 CPU-s each, of a cold `causal-spark ingest
  data-samples` of ~20 CPU-s (one process tree counted per process, 2026-12-03);
- a class-data-sharing archive (JDK's AppCDS) of the classes a small audit loads, written
  once per machine and install by `class_archive` and mapped by every JVM after: 45 -> 36
  CPU-s and 34 -> 27 s per cold ingest. A JVM that cannot use it (another classpath, a
  changed jar) runs without it; its logging is off so no warning reaches a compared output.

These are the test suite's settings only (a short job of the product gets the first two
and the one daemon too: app/session.py); the product's profiles are in conf/.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NO_CODEGEN = "-Dspark.sql.codegen.wholeStage=false -Dspark.sql.codegen.factoryMode=NO_CODEGEN"
# one Python daemon per driver, not two: Spark keys its daemons by the workers' environment,
# and SQL's Python tasks add SPARK_SIMPLIFIED_TRACEBACK to it (RDD ones do not)
ONE_DAEMON = "-Dspark.sql.execution.pyspark.udf.simplifiedTraceback.enabled=false"
# the code cache's size is only reserved address space; what is used is committed as it grows
CODE_CACHE = "-XX:ReservedCodeCacheSize=240m"
SHORT_LIVED = f"-XX:TieredStopAtLevel=1 {CODE_CACHE} -XX:+UseSerialGC {NO_CODEGEN} {ONE_DAEMON}"

# the training run: a small audit in a fresh driver, whose JVM then exits normally (end of
# its standard input, as when a PySpark driver ends) so that it writes the archive
TRAIN = """
import sys, tempfile
from pyspark import SparkContext
from causal_spark.app.cli import run
from causal_spark.app.session import build_session
from causal_spark.config import load_config

conf = load_config("conf/test.yml")
session = build_session(conf.spark)
with tempfile.TemporaryDirectory() as warehouse:
    run(["audit", "data-samples", "--warehouse", warehouse, "--conf", "conf/test.yml",
         "--protocols", "none,fifo"], session=session)
jvm = SparkContext._gateway.proc
jvm.stdin.close()
sys.exit(jvm.wait(timeout=300))
"""


def _key() -> str:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    java = shutil.which("java") or ""
    parts = [sys.prefix, pyspark.__version__, str(jars.stat().st_mtime_ns), os.path.realpath(java)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def class_archive(root: Path) -> Path | None:
    """The run's class archive: an existing one for this install, else written now (about
    40 s, once per machine). None if this JVM cannot write one."""
    folder = Path(tempfile.gettempdir()) / "causal-spark-tests-cds"
    archive = folder / f"{_key()}.jsa"
    if archive.exists():
        return archive
    folder.mkdir(exist_ok=True)
    partial = folder / f"{archive.stem}.{os.getpid()}.partial"
    env = dict(os.environ)
    env["SPARK_SUBMIT_OPTS"] = f"{SHORT_LIVED} -XX:ArchiveClassesAtExit={partial} -Xlog:disable"
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", TRAIN], cwd=root, env=env, capture_output=True, timeout=900
    )
    if done.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        print(f"tests/jvm.py: no class archive (exit {done.returncode}); JVMs start without")
        return None
    os.replace(partial, archive)
    print(f"tests/jvm.py: class archive written in {time.monotonic() - began:.0f} s: {archive}")
    return archive


def _sharing(archive: Path | None) -> str:
    return f" -XX:SharedArchiveFile={archive} -Xlog:disable" if archive else ""


def subprocess_options(archive: Path | None) -> str:
    """`SPARK_SUBMIT_OPTS` for every driver of the run: the pytest workers' own and the
    subprocesses' (`causal-spark`, `spark-submit`) they start."""
    return SHORT_LIVED + _sharing(archive)


# the job's own warm-up (`causal_spark.app.warmup`) of every part: the clocks and detect
# kernels (a forked child) beside every protocol's replay loop, into the Numba disk cache.
# Without it, on a clean clone, both xdist workers compile the same eleven loops at once in
# their first replay tests (minutes each), and each Spark Python worker of the first clocks
# and detect stages compiles those kernels for itself
WARM = """
import sys
from causal_spark.app.warmup import PARTS, main
from causal_spark.replay.protocols.spec import SPECS
sys.exit(main(["--parts", ",".join(PARTS), "--protocols", ",".join(sorted(SPECS))]))
"""


def warm_numba(root: Path) -> subprocess.Popen[bytes]:
    """Start compiling every kernel and protocol loop into the disk cache (a subprocess: it runs
    while the class archive is written); the caller waits for it before tests start. With
    a warm cache it only loads the code (a few seconds)."""
    return subprocess.Popen(
        [sys.executable, "-c", WARM],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def finish_warming(warming: subprocess.Popen[bytes], timeout: float = 1200) -> None:
    """Wait for `warm_numba`'s subprocess; one that fails or hangs only costs the tests
    their own compiles (said, not fatal)."""
    began = time.monotonic()
    try:
        code = warming.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        warming.kill()
        code = warming.wait()
    took = time.monotonic() - began
    print(f"tests/jvm.py: Numba cache warmed (exit {code}) {took:.0f} s after the class archive")
