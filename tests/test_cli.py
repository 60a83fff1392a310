"""The command line and the spark-submit jobs, run as a user runs them (subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from causal_spark.app.cli import run as run_cli
from causal_spark.app.runs import RunRecord
from causal_spark.app.session import ensure_java
from tests.conftest import ROOT
from tests.helpers import selected_tests

BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    ensure_java()
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def _run(args: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout
    )


READ_WITH_DELTA_RS = """
import os, sys
from deltalake import DeltaTable
counts = [DeltaTable(os.path.join(sys.argv[1], t)).to_pyarrow_table().num_rows
          for t in sys.argv[2:]]
print(*counts)
sys.stdout.flush()
# delta-rs issue 2184: its IO threads may abort the interpreter at shutdown
os._exit(0)
"""


INGEST_TABLES = ["events", "messages", "quarantine", "runs"]
AUDIT_TABLES = [
    "events",
    "messages",
    "quarantine",
    "trace_clocks",
    "violations",
    "crowns",
    "crown_members",
    "trace_summary",
    "protocol_runs",
    "runs",
]
# the rows of AUDIT_TABLES after an audit of data-samples/: violations, crowns and crown
# members as in expected.json; protocol_runs: every trace x the 11 protocols
AUDIT_ROWS = ["56", "30", "4", "9", "4", "6", "23", "9", "99", "1"]

GENERATE_ARGS = ["--processes", "4", "--events", "100", "--traces", "2", "--seed", "5"]


def _submit_ingest(folder: Path) -> list[str]:
    return [
        str(BIN / "spark-submit"),
        "--master",
        "local[2]",
        "jobs/ingest.py",
        "data-samples/",
        "--warehouse",
        str(folder / "warehouse"),
        "--conf",
        "conf/test.yml",
    ]


def _generate_jsonl(folder: Path) -> list[str]:
    return [str(BIN / "causal-spark"), "generate", "--out", str(folder / "gen"), *GENERATE_ARGS,
            "--format", "jsonl", "--conf", "conf/test.yml"]  # fmt: skip


def _submit_generate(folder: Path) -> list[str]:
    return [str(BIN / "spark-submit"), "--master", "local[2]", "jobs/generate.py",
            "--out", str(folder / "gen"), *GENERATE_ARGS, "--conf", "conf/test.yml"]  # fmt: skip


# the slow tests' drivers (the command under test, in a folder of its own), by test
AHEAD: dict[str, Callable[[Path], list[str]]] = {
    "test_spark_submit_job_takes_the_same_arguments": _submit_ingest,
    "test_generate_is_a_sub_command_whose_traces_ingest_cleanly": _generate_jsonl,
    "test_spark_submit_generate_takes_the_same_arguments": _submit_generate,
}


@dataclass(frozen=True)
class Driven:
    folder: Path
    done: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module", autouse=True)
def ahead(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[Driven]]]:
    """The drivers of the selected slow tests, started side by side when the module starts
    (each is a cold Spark driver that mostly waits); each test checks its own."""

    def drive(argv: Callable[[Path], list[str]], folder: Path) -> Driven:
        return Driven(folder, _run(argv(folder)))

    with ThreadPoolExecutor(max_workers=len(AHEAD)) as pool:
        yield {
            name: pool.submit(drive, argv, tmp_path_factory.mktemp("driven"))
            for name, argv in AHEAD.items()
            if selected_tests(request, name)
        }


def _driven(ahead: dict[str, Future[Driven]], request: pytest.FixtureRequest) -> Driven:
    return ahead[request.node.originalname].result()


@pytest.mark.slow
def test_spark_submit_job_takes_the_same_arguments(
    ahead: dict[str, Future[Driven]], request: pytest.FixtureRequest
) -> None:
    driven = _driven(ahead, request)
    warehouse, done = driven.folder / "warehouse", driven.done
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run " in done.stdout
    read = _run([sys.executable, "-c", READ_WITH_DELTA_RS, str(warehouse), *INGEST_TABLES])
    assert read.returncode == 0, read.stderr[-3000:]
    assert read.stdout.split() == ["56", "30", "4", "1"]


def test_missing_input_is_a_clear_error_not_a_crash(tmp_path: Path) -> None:
    done = _run([str(BIN / "causal-spark"), "ingest", "no/such/dir", "--warehouse", str(tmp_path)])
    assert done.returncode == 2
    assert "causal-spark: error: input path no/such/dir does not exist" in done.stderr


def test_unknown_option_is_rejected(tmp_path: Path) -> None:
    done = _run([str(BIN / "causal-spark"), "ingest", "data-samples", "--warehous", str(tmp_path)])
    assert done.returncode == 2
    assert "--warehouse" in done.stderr


def test_version_is_printed() -> None:
    done = _run([str(BIN / "causal-spark"), "--version"])
    assert done.returncode == 0, done.stderr
    from causal_spark import __version__

    assert done.stdout.strip() == f"causal-spark {__version__}"


def _ingest_generated(spark: SparkSession, out: Path, warehouse: Path) -> RunRecord:
    """The generated files through ingest (in this session: the subprocess under test is
    the generator's)."""
    return run_cli(
        ["ingest", str(out), "--warehouse", str(warehouse), "--conf", "conf/test.yml"],
        session=spark,
    )


@pytest.mark.slow
def test_generate_is_a_sub_command_whose_traces_ingest_cleanly(
    spark: SparkSession, ahead: dict[str, Future[Driven]], request: pytest.FixtureRequest
) -> None:
    """JSON Lines here (`_generate_jsonl`); the default, Parquet, through spark-submit below."""
    driven = _driven(ahead, request)
    tmp_path, done = driven.folder, driven.done
    out = tmp_path / "gen"
    assert done.returncode == 0, done.stderr[-3000:]
    assert "wrote 2 trace(s) x 100 events (4 processes" in done.stdout
    # Spark's JSON Lines: .json
    assert any(p.suffix == ".json" for p in out.rglob("*")), sorted(out.rglob("*"))
    record = _ingest_generated(spark, out, tmp_path / "warehouse")
    # 2 traces x 100 events, every row analysed and none quarantined
    ingest = record.stages.ingest
    assert ingest is not None and (ingest.rows_read, ingest.quarantined) == (200, 0)
    read = _run([sys.executable, "-c", READ_WITH_DELTA_RS, str(tmp_path / "warehouse"),
                 "events", "quarantine"])  # fmt: skip
    assert read.stdout.split() == ["200", "0"]


@pytest.mark.slow
def test_spark_submit_generate_takes_the_same_arguments(
    spark: SparkSession, ahead: dict[str, Future[Driven]], request: pytest.FixtureRequest
) -> None:
    driven = _driven(ahead, request)
    tmp_path, done = driven.folder, driven.done
    out = tmp_path / "gen"
    assert done.returncode == 0, done.stderr[-3000:]
    assert "wrote 2 trace(s) x 100 events (4 processes" in done.stdout
    assert any(p.suffix == ".parquet" for p in out.rglob("*")), sorted(out.rglob("*"))
    record = _ingest_generated(spark, out, tmp_path / "warehouse")
    ingest = record.stages.ingest
    assert ingest is not None and (ingest.rows_read, ingest.quarantined) == (200, 0)


def test_bad_generator_option_is_a_usage_error(tmp_path: Path) -> None:
    done = _run(
        [str(BIN / "causal-spark"), "generate", "--out", str(tmp_path / "g"), "--processes", "1",
         "--events", "10"]
    )  # fmt: skip
    assert done.returncode == 2
    assert "causal-spark: error: --processes must be at least 2" in done.stderr
