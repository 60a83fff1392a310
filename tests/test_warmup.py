"""The job's warm-up (`app/warmup.py`): what it compiles, how stages wait, the cache's lock."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from causal_spark.app.session import SESSION_CONF, SHORT_JOB_JAVA_OPTIONS, session_conf
from causal_spark.app.warmup import WarmUp, small_inputs
from causal_spark.config import SparkSettings, load_config

ROOT = Path(__file__).resolve().parent.parent

# The two cover scripts' common part: the signatures compiled so far of every Numba function
# in MODULES (which the script defines), and what a run added to them since `before`, as JSON
_ADDED = """
import json
from numba.core.dispatcher import Dispatcher

def signatures():
    return {
        f"{m.__name__}.{name}": {str(s) for s in d.signatures}
        for m in MODULES for name, d in vars(m).items() if isinstance(d, Dispatcher)
    }

def print_added(before):
    after = signatures()
    print(json.dumps({k: sorted(after[k] - before.get(k, set())) for k in after
                      if after[k] - before.get(k, set())}))
"""

# In a fresh process: the warm-up's clocks and detect parts, then the functions the stages'
# UDFs call, on random traces; prints the signatures those calls added to any kernel of
# the two packages (each one a compile a Spark worker would make after the warm-up).
_KERNELS_COVER = (
    _ADDED
    + """
import random
import numpy as np
from causal_spark.app.warmup import main
from causal_spark.anomalies import crown_kernel as CK, kernel as K, slab_kernel
from causal_spark.clocks import components, kernel, units_kernel
from causal_spark.clocks.kernel import cycle_witness
from causal_spark.clocks.per_trace import _batch_clocks
from tests.random_traces import brute_clocks, random_trace
from tests.test_clocks import _batch_tables, _cyclic_trace

MODULES = (kernel, units_kernel, components, K, CK, slab_kernel)

main(["--parts", "clocks,detect", "--small"])  # small traces: the large kernels stay out
before = signatures()
rng = random.Random(19)
traces = [random_trace(rng, f"t{i}", rng.randint(2, 5), rng.randint(10, 60)) for i in range(6)]
_batch_clocks(*_batch_tables([*traces, _cyclic_trace()]))
cyclic = _cyclic_trace()
cycle_witness(
    [e["pidx"] for e in cyclic.events], [e["lseq"] for e in cyclic.events],
    [-1, 1, -1, 0], [-1, 2, -1, 2], 2,
)
for t in traces:
    clocks = brute_clocks(t)
    index = {p: i for i, p in enumerate(t.processes)}
    msgs = t.delivered()
    n = len(index)
    for d in t.processes:
        rows = sorted((m for m in msgs if m.dst == d), key=lambda m: m.recv_lseq)
        if rows:
            K.overtaking(
                index[d], [index[m.src] for m in rows], [m.send_lseq for m in rows],
                np.array([clocks[(d, m.recv_lseq)][1] for m in rows]),
                [clocks[(m.src, m.send_lseq)][1][index[d]] for m in rows],
            )
    src, dst = [index[m.src] for m in msgs], [index[m.dst] for m in msgs]
    send, recv = [m.send_lseq for m in msgs], [m.recv_lseq for m in msgs]
    channels = K.channels(n, src, dst, send, recv)
    K.shortest_chains(channels, src, src[:3], send[:3], dst[:3], recv[:3])
    found = CK.crown_components(n, src, send, dst, recv, 10**6)
    for c in range(found.n_components):
        crown = found.crown[found.crown_start[c] : found.crown_start[c + 1]]
        CK.is_crown(channels, src, send, dst, recv, crown)
print_added(before)
"""
)


def _python(script: str, *args: str, timeout: float) -> str:
    """What `script` prints, run by this Python in a fresh process (so no other test's
    compiles or cache state count); a non-zero exit fails the test."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    ).stdout


def test_the_warm_up_compiles_every_kernel_the_clocks_and_detect_functions_call() -> None:
    """After the warm-up's clocks and detect parts (for small inputs: without the kernels
    only large components call), the functions the stages call on small traces compile
    nothing more: no kernel of either package gains a signature (in a fresh process, so
    no other test's calls count)."""
    out = _python(_KERNELS_COVER, timeout=600).splitlines()
    assert [line.split()[:2] for line in out[:2]] == [["done", "clocks"], ["done", "detect"]]
    assert json.loads(out[-1]) == {}


def _warm_up_of(script: str, parts: tuple[str, ...]) -> WarmUp:
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return WarmUp(parts, process)


def test_a_stage_waits_for_its_part_and_no_longer() -> None:
    """`wait` returns when the process says the part is done, not when the process ends;
    a part the warm-up does not hold is not waited for."""
    warm = _warm_up_of(
        """
        import time
        print("done clocks 0.0", flush=True)
        time.sleep(30)
        print("done detect 30.0", flush=True)
        """,
        ("clocks", "detect"),
    )
    began = time.monotonic()
    warm.wait("clocks")
    warm.wait("replay")
    assert time.monotonic() - began < 20
    warm.close()  # ends the process that still sleeps
    assert warm.wait("detect") < 5


def test_a_failed_warm_up_leaves_the_stages_to_compile() -> None:
    """A warm-up process that dies before a part is done releases every stage waiting."""
    warm = _warm_up_of("raise SystemExit(3)", ("clocks", "replay"))
    began = time.monotonic()
    warm.wait("replay")
    assert time.monotonic() - began < 20
    warm.close()


# Processes saving entries to one Numba cache index at once (as the warm-up's side-by-side
# protocols all add theirs to run_loop's); prints how many entries the index kept.
_CONCURRENT_SAVES = """
import multiprocessing, sys
from numba.core.caching import IndexDataCacheFile
if sys.argv[2] == "locked":
    import causal_spark.replay.cache  # noqa: F401

def save(worker):
    cache = IndexDataCacheFile(sys.argv[1], "f", "stamp")
    for i in range(40):
        cache.save(f"{worker}-{i}", b"x" * 100)

if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(save, range(4))
    index = IndexDataCacheFile(sys.argv[1], "f", "stamp")._load_index()
    print(len(index), len(set(index.values())))
"""


def test_side_by_side_compiles_keep_every_cache_entry(tmp_path: Path) -> None:
    """Four processes add 40 entries each to one index at once: with `cache.py`'s lock all
    160 stay, each with its own data file (without it, Numba's read-modify-write of the
    index loses entries)."""
    out = _python(_CONCURRENT_SAVES, str(tmp_path), "locked", timeout=120).split()
    assert out == ["160", "160"]


# In a fresh process: the replay part of the warm-up for `none`, then the grouped UDF's
# kernel (`adapter._replay_group`) on program rows typed as Spark hands them to it (pidx
# and peer int32, lseq, lamport and peer_lseq int64, kind its int8 code), in both receive
# modes and with the size guard; prints the signatures those calls added to any compiled
# function of the replay wing (each one a compile a Spark worker would make).
_REPLAY_COVER = (
    _ADDED
    + """
import pyarrow as pa
from causal_spark.replay import layout, loop, placing, run, structs, verify
from causal_spark.replay.adapter import _replay_group
from causal_spark.replay.model import KIND_CODES
from causal_spark.replay.protocols import none
from causal_spark.replay.warmup import warm_up

MODULES = (layout, loop, placing, run, structs, verify, none)

def group(n):
    # P0 sends to each other process, which receives 1 s later; Pk's internal event; one
    # receive of a message no send of the trace names (an orphan)
    rows = []
    for k in range(1, n):
        rows.append(("P0", 0, k, "send", float(k), 2 * k - 1, f"m{k}", k, -1))
        rows.append((f"P{k}", k, 1, "receive", k + 1.0, 2 * k, f"m{k}", 0, k))
        rows.append((f"P{k}", k, 2, "internal", k + 1.5, 2 * k + 1, None, -1, -1))
    rows.append(("P1", 1, 3, "receive", n + 2.0, 2 * n + 2, "lost", -1, -1))
    names = ["process", "pidx", "lseq", "kind", "ts", "lamport", "msg_id", "peer", "peer_lseq"]
    cols = dict(zip(names, map(list, zip(*rows))))
    cols["kind"] = [KIND_CODES[k] for k in cols["kind"]]
    types = [pa.string(), pa.int32(), pa.int64(), pa.int8(), pa.float64(), pa.int64(),
             pa.string(), pa.int32(), pa.int64()]
    arrays = {k: pa.array(cols[k], t) for k, t in zip(names, types)}
    size = len(rows)
    arrays["trace_id"] = pa.array(["t"] * size)
    arrays["protocol"] = pa.array(["none"] * size)
    arrays["valid"] = pa.array([True] * size)
    # as Spark's Arrow stream gives it to the UDF: read back from IPC (read-only buffers)
    batch = pa.RecordBatch.from_pydict(arrays)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return pa.ipc.open_stream(sink.getvalue()).read_next_batch()

warm_up(["none"])
before = signatures()
for n in (2, 5):
    for mode in ("nonselective", "selective"):
        out = list(_replay_group([group(n)], mode, {}, 1.0, 1 << 30))
        got = out[0].column("run")[0].as_py()
        assert (got["status"], got["verified"]) == ("ok", True), got
print_added(before)
"""
)


def test_the_warm_up_compiles_every_replay_function_the_grouped_udf_calls() -> None:
    """After the warm-up's replay part, the grouped UDF's kernel on program rows of Spark's
    types compiles nothing more (in a fresh process): the warm-up lays its trace out as
    the UDF does, so no Spark worker compiles a layout kernel for types of its own (nor
    for a read-only buffer where the warm-up's was writable: `layout._validity`)."""
    out = _python(_REPLAY_COVER, timeout=600).splitlines()
    assert json.loads(out[-1]) == {}


def test_every_session_turns_pyspark_dataframe_debugging_off(spark: SparkSession) -> None:
    """PySpark 4 records each Column function's Python call site in the JVM (about six py4j
    round trips a call) unless the session says otherwise: the suite's session, built as
    the product builds its own, says so and PySpark reads it; a profile's own setting wins."""
    from pyspark.errors.utils import is_debugging_enabled

    (key,) = SESSION_CONF
    assert spark.conf.get(key) == "false"
    assert not is_debugging_enabled()
    own = SparkSettings(master="local[2]", conf={key: "true"})
    assert session_conf(own)[key] == "true"
    assert session_conf(own, short=True)[key] == "true"


def test_a_short_job_on_a_local_master_gets_the_short_jvm_and_no_codegen(tmp_path: Path) -> None:
    """The README's first audit (data-samples/, the embedded local profile) is a short job:
    its driver JVM runs C1 only, after the profile's own Java options, and Spark evaluates
    expressions; a profile's own codegen setting wins; a large input, or a cluster
    master, keeps the profile's settings as they are."""
    local = load_config(None).spark
    assert small_inputs([str(ROOT / "data-samples")])
    short = session_conf(local, short=True)
    assert short == {
        **SESSION_CONF,
        **local.conf,
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        "spark.python.daemon.module": "causal_spark.app.daemon",
        "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
        "spark.driver.extraJavaOptions": SHORT_JOB_JAVA_OPTIONS,
    }
    own = SparkSettings(
        master="local[2]",
        conf={"spark.driver.extraJavaOptions": "-Dx=1", "spark.sql.codegen.wholeStage": "true"},
    )
    assert session_conf(own, short=True) == {
        **SESSION_CONF,
        "spark.driver.extraJavaOptions": f"-Dx=1 {SHORT_JOB_JAVA_OPTIONS}",
        "spark.sql.codegen.wholeStage": "true",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        "spark.python.daemon.module": "causal_spark.app.daemon",
        "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
    }
    assert session_conf(local, short=False) == {**SESSION_CONF, **local.conf}
    cluster = SparkSettings(master="spark://head:7077", conf={"a": "b"})
    assert session_conf(cluster, short=True) == {**SESSION_CONF, "a": "b"}
    big = tmp_path / "big.jsonl"
    with big.open("wb") as out:
        out.truncate(17 << 20)
    assert not small_inputs([str(big)])


# In a fresh process: a short job's session (the README's first audit gets one), and one
# Arrow task per partition reporting whether its worker found the engines imported before
# it imported anything itself, and whether its parent is the job's daemon
_DAEMON_PROBE = """
import json, os, sys
from causal_spark.app.session import build_session
from causal_spark.config import load_config

def probe(batches):
    import pyarrow as pa
    preloaded = "causal_spark.replay.adapter" in sys.modules
    with open(f"/proc/{os.getppid()}/cmdline") as f:
        parent = f.read()
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"preloaded": [preloaded], "parent": [parent]})

spark = build_session(load_config(None).spark, short=True)
rows = spark.range(2, numPartitions=2).mapInArrow(probe, "preloaded boolean, parent string")
print(json.dumps([[r.preloaded, "causal_spark.app.daemon" in r.parent] for r in rows.collect()]))
spark.stop()
"""


def test_the_daemon_preloads_without_starting_a_thread() -> None:
    """`app/daemon.py` imports every module of PRELOAD and starts no Python thread doing
    so (PySpark's daemon forks its workers after it)."""
    out = _python(
        "import threading; from causal_spark.app.daemon import preload; "
        "print(preload(), threading.active_count())",
        timeout=120,
    )
    assert out.split() == ["[]", "1"]


def test_the_daemon_preloads_what_the_named_stages_import() -> None:
    """A job's stages choose the daemon's preload: an ingest's leaves Numba and the engines
    to no one; every stage together, an unknown one, or none named preload all of PRELOAD."""
    from causal_spark.app.daemon import BY_STAGE, COMMON, PRELOAD, modules_for

    assert set(COMMON).union(*BY_STAGE.values()) == set(PRELOAD)
    ingest = modules_for(["ingest"])
    assert "causal_spark.ingest.tasks" in ingest and "pyspark.worker" in ingest
    assert "numba" not in ingest and not any(".clocks." in m or ".replay." in m for m in ingest)
    assert modules_for(list(BY_STAGE)) == PRELOAD
    assert modules_for(["ingest", "unknown"]) == PRELOAD
    assert modules_for(None) == PRELOAD


@pytest.mark.slow
def test_a_short_jobs_workers_are_forked_from_the_preloading_daemon() -> None:
    """A short job's Python workers are children of `app/daemon.py`'s daemon and find the
    engines already imported (without it, `pyspark.daemon` forks workers that import them
    on their first task)."""
    out = _python(_DAEMON_PROBE, timeout=600).splitlines()
    assert json.loads(out[-1]) == [[True, True], [True, True]]
