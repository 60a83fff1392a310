"""One Spark session per test process (local[2], UI off, UTC, few shuffle partitions): the
suite runs in two pytest-xdist workers, so two sessions side by side."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from causal_spark.app.session import build_session
from causal_spark.config import Config, load_config
from tests import jvm

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data-samples"

ARCHIVE = "CAUSAL_SPARK_TESTS_CDS"  # the controller tells the xdist workers where it is


def pytest_configure(config: pytest.Config) -> None:
    """The JVM settings of the run (tests/jvm.py), inherited by every subprocess; and the
    Numba cache warmed once, before the workers start (`jvm.warm_numba`)."""
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        warming = None if config.option.collectonly else jvm.warm_numba(ROOT)
        found = None if config.option.collectonly else jvm.class_archive(ROOT)
        os.environ[ARCHIVE] = str(found or "")
        if warming is not None:
            jvm.finish_warming(warming)
    os.environ["SPARK_SUBMIT_OPTS"] = jvm.subprocess_options(_archive())


def _archive() -> Path | None:
    return Path(os.environ[ARCHIVE]) if os.environ.get(ARCHIVE) else None


@pytest.fixture(scope="session", autouse=True)
def _run_from_repo_root() -> Iterator[None]:
    # inputs are named as given ("data-samples/x.jsonl"): run from the checkout root
    before = Path.cwd()
    os.chdir(ROOT)
    yield
    os.chdir(before)


@pytest.fixture(scope="session")
def config() -> Config:
    return load_config(ROOT / "conf" / "test.yml")


@pytest.fixture(scope="session")
def spark(config: Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    scratch = tmp_path_factory.mktemp("spark")
    settings = config.spark
    conf = dict(settings.conf)
    conf["spark.sql.warehouse.dir"] = str(scratch / "spark-warehouse")
    conf["spark.checkpoint.dir"] = str(scratch / "checkpoints")
    conf["spark.local.dir"] = str(scratch / "local")
    # the JVM options every driver of the run gets (tests/jvm.py) are in SPARK_SUBMIT_OPTS
    session = build_session(
        type(settings)(master=settings.master, app_name=settings.app_name, conf=conf)
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def expected() -> dict[str, Any]:
    return json.loads((ROOT / "tests" / "data" / "expected.json").read_text())


def read_delta(path: str | os.PathLike[str]) -> pa.Table:
    """A Delta table as Arrow via delta-rs.

    A local filesystem is passed explicitly: delta-rs' own object-store handler
    races with interpreter shutdown (delta-rs issue 2184: "terminate called
    without an active exception"), which would abort pytest after the run.
    """
    local = pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem())
    return DeltaTable(str(path)).to_pyarrow_table(filesystem=local)


def _copy_warehouse(source: Path, target: Path) -> Path:
    import shutil

    shutil.copytree(source, target)
    return target


@pytest.fixture(scope="session")
def detected_samples(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`data-samples/` ingested, clocked and detected under one run (no replay: nothing to compile).

    Shared by the whole session: tests read it; a test that writes copies it first
    (`writable_copy`)."""
    from causal_spark.app.runs import run_job
    from causal_spark.app.stages import clocks_stage, detect_stage, ingest_stage
    from causal_spark.sinks import Warehouse

    config = load_config(ROOT / "conf" / "test.yml")
    warehouse = tmp_path_factory.mktemp("detected") / "warehouse"
    run_job(
        "audit",
        [ingest_stage(["data-samples"]), clocks_stage(), detect_stage()],
        spark=spark,
        config=config,
        warehouse=Warehouse(spark, warehouse, config.sink.format),
    )
    return warehouse


@pytest.fixture(scope="session")
def audited_samples(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`data-samples/` through the whole `audit` (every stage, every protocol), once per session.

    Compiles the replay loop of every protocol the first time on a machine (Numba's cache
    keeps it): only tests of replay, compare and the whole job should ask for it."""
    from causal_spark.app.cli import run

    warehouse = tmp_path_factory.mktemp("audited") / "warehouse"
    run(
        ["audit", "data-samples", "--warehouse", str(warehouse), "--conf", "conf/test.yml"],
        session=spark,
    )
    return warehouse


@pytest.fixture
def writable_copy(tmp_path: Path) -> Callable[[Path], Path]:
    """A private copy of a shared warehouse, for tests that run a job on it."""
    return lambda warehouse: _copy_warehouse(warehouse, tmp_path / "copy")


# Modules by how long they take (seconds of test time, `--durations=0` and `--junitxml`):
# the modules are handed to the two xdist workers longest first, so the short ones fill
# the gaps at the end (`_Scheduling` below). Unlisted modules keep their order after these.
MODULE_SECONDS = {  # modules over 5 s; only the order matters. The twelve longest: the
    # lead's profile of 5b2787a (2026-12-02, `-n 2`, contended about 2x: its seconds halved);
    # six that were unlisted (so sent last: test_warmup's 17 s could end a worker's queue):
    # 2026-12-03, `-n 0`, contended, halved; the others from the runs of a551dd7 and e75ac5a
    "test_clocks.py": 368,
    "test_scheduled_jobs.py": 190,
    "test_docs.py": 156,
    "test_warehouse_incremental.py": 154,
    "test_sink_and_runs.py": 120,
    "test_warehouse_faults.py": 106,
    "test_ingest_baseline.py": 95,
    "test_wide_traces.py": 71,
    "test_cli.py": 71,
    "test_ingest_plain.py": 56,
    "test_real_logs_audit.py": 55,
    "test_crowns_distributed.py": 54,
    "test_anomalies.py": 52,
    "test_accounting_at_scale.py": 47,
    "test_replay_loop.py": 44,
    "test_replay.py": 43,
    "test_sql.py": 42,
    "test_export_shiviz.py": 40,
    "test_warehouse_commits.py": 35,
    "test_native_logs.py": 26,
    "test_warehouse_history.py": 26,
    "test_readers_shiviz.py": 25,
    "test_formats.py": 21,
    "test_generate.py": 20,
    "test_report_browser.py": 19,
    "test_warmup.py": 17,
    "test_small_audit.py": 16,
    "test_delta_stats.py": 16,
    "test_shiviz_kernel.py": 15,
    "test_verdicts.py": 15,
    "test_order.py": 10,
    "test_otlp_parse.py": 10,
    "test_ingest_files.py": 9,
    "test_ingest_rules.py": 8,
    "test_readers_dctracing.py": 8,
    "test_jsonl_kernel.py": 7,
    "test_spans_kernel.py": 6,
    "test_ingest_typed.py": 6,
    "test_ingest_examples.py": 5,
    "test_replay_engine.py": 5,
    "test_readers_jsonl.py": 5,
    "test_clock_mismatches.py": 5,
}

# modules that share an expensive session fixture run in one worker (one scope), so the
# fixture is built once: the session's audit of data-samples/ (`audited_samples`, every
# protocol replayed)
SHARED_SCOPES = {"test_sql.py": "audited-samples", "test_replay.py": "audited-samples"}


def _scope(module: str) -> str:
    return SHARED_SCOPES.get(module, module)


def _scope_seconds(module: str) -> int:
    scope = _scope(module)
    return sum(s for m, s in MODULE_SECONDS.items() if _scope(m) == scope)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # longest scope first; a scope's modules next to each other (stable otherwise)
    items.sort(key=lambda item: (-_scope_seconds(item.path.name), _scope(item.path.name)))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `--dist loadscope` (pyproject.toml): a module's tests stay in one worker (its
    module fixtures built once), the modules of a SHARED_SCOPES group too, and the scopes go
    out in the order collected. xdist would otherwise reorder them by their number of
    tests, which puts a 2-test module of 118 s last (measured: one worker idle for the
    last 150 s of the full run)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class _Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return _scope(Path(module).name)

    config.option.loadscopereorder = False
    return _Scheduling(config, log)
