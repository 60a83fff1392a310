"""The command line and the spark-submit jobs, run as a user runs them (subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

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

GENERATE_ARGS = ["--processes", "4", "--events", "100", "--traces", "2"]

# rows per table of a warehouse, by source: `gen<seed>` for generated traces (their ids
# are `gen<seed>-NN`), `samples` for every other row (data-samples/, bad input included)
READ_BY_SOURCE = """
import collections, os, sys
from deltalake import DeltaTable
for table in sys.argv[2:]:
    rows = DeltaTable(os.path.join(sys.argv[1], table)).to_pyarrow_table()
    ids = rows.column("trace_id").to_pylist() if "trace_id" in rows.column_names else []
    by = collections.Counter((i or "").split("-")[0] if (i or "").startswith("gen") else "samples"
                             for i in ids)
    print(table, rows.num_rows, *sorted(f"{k}={v}" for k, v in by.items()))
sys.stdout.flush()
# delta-rs issue 2184: its IO threads may abort the interpreter at shutdown
os._exit(0)
"""


def _generate_jsonl(folder: Path) -> list[str]:
    """`causal-spark generate`, JSON Lines, seed 5."""
    return [str(BIN / "causal-spark"), "generate", "--out", str(folder / "gen5"), *GENERATE_ARGS,
            "--seed", "5", "--format", "jsonl", "--conf", "conf/test.yml"]  # fmt: skip


def _submit_generate(folder: Path) -> list[str]:
    """`jobs/generate.py` through spark-submit, the default format (Parquet), seed 6."""
    return [str(BIN / "spark-submit"), "--master", "local[2]", "jobs/generate.py",
            "--out", str(folder / "gen6"), *GENERATE_ARGS, "--seed", "6",
            "--conf", "conf/test.yml"]  # fmt: skip


def _submit_ingest(folder: Path, generated: list[Path]) -> list[str]:
    """`jobs/ingest.py` through spark-submit: data-samples/ and the generators' folders."""
    return [
        str(BIN / "spark-submit"),
        "--master",
        "local[2]",
        "jobs/ingest.py",
        "data-samples/",
        *map(str, generated),
        "--warehouse",
        str(folder / "warehouse"),
        "--conf",
        "conf/test.yml",
    ]


GENERATORS: dict[str, Callable[[Path], list[str]]] = {
    "test_generate_is_a_sub_command_whose_traces_ingest_cleanly": _generate_jsonl,
    "test_spark_submit_generate_takes_the_same_arguments": _submit_generate,
}


@dataclass(frozen=True)
class Driven:
    """The slow tests' subprocesses: the generators (by test), then one spark-submit
    ingest of data-samples/ and of what they wrote, and its warehouse read by delta-rs."""

    folder: Path
    generated: dict[str, subprocess.CompletedProcess[str]]
    ingest: subprocess.CompletedProcess[str]
    rows: dict[str, dict[str, int]]  # table -> {"all": n, "samples": n, "gen5": n, ...}


def _rows(read: subprocess.CompletedProcess[str]) -> dict[str, dict[str, int]]:
    assert read.returncode == 0, read.stderr[-3000:]
    rows: dict[str, dict[str, int]] = {}
    for line in read.stdout.splitlines():
        table, total, *groups = line.split()
        rows[table] = {"all": int(total), **{g.split("=")[0]: int(g.split("=")[1]) for g in groups}}
    return rows


@pytest.fixture(scope="module")
def driven(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Driven:
    """The generators of the selected tests side by side (each a cold Spark driver that
    mostly waits), then the ingest job over data-samples/ and their output: three drivers
    prove the ingest job, both generators, and that the generated traces ingest cleanly."""
    folder = tmp_path_factory.mktemp("driven")
    selected = {n: g for n, g in GENERATORS.items() if selected_tests(request, n)}
    with ThreadPoolExecutor(max_workers=max(1, len(selected))) as pool:
        running = {n: pool.submit(_run, g(folder)) for n, g in selected.items()}
        generated = {n: f.result() for n, f in running.items()}
    outs = [out for out in (folder / "gen5", folder / "gen6") if out.is_dir()]
    ingest = _run(_submit_ingest(folder, outs))
    rows: dict[str, dict[str, int]] = {}
    if ingest.returncode == 0:
        rows = _rows(_run([sys.executable, "-c", READ_BY_SOURCE, str(folder / "warehouse"),
                           *INGEST_TABLES]))  # fmt: skip
    return Driven(folder, generated, ingest, rows)


@pytest.mark.slow
def test_spark_submit_job_takes_the_same_arguments(driven: Driven) -> None:
    done = driven.ingest
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run " in done.stdout
    samples = [driven.rows[t].get("samples", 0) for t in INGEST_TABLES[:3]]
    assert samples == [56, 30, 4]  # data-samples/'s rows, as `causal-spark ingest` makes
    assert driven.rows["runs"]["all"] == 1


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


def _generated_cleanly(driven: Driven, seed: int) -> None:
    """The generator's 2 traces x 100 events went through the ingest job (the spark-submit
    job above, with data-samples/), every row analysed and none quarantined."""
    assert driven.ingest.returncode == 0, driven.ingest.stderr[-3000:]
    assert driven.rows["events"].get(f"gen{seed}") == 200
    assert driven.rows["messages"].get(f"gen{seed}", 0) > 0
    assert driven.rows["quarantine"].get(f"gen{seed}", 0) == 0
    assert driven.rows["quarantine"]["all"] == driven.rows["quarantine"].get("samples")


@pytest.mark.slow
def test_generate_is_a_sub_command_whose_traces_ingest_cleanly(driven: Driven) -> None:
    """JSON Lines here (`_generate_jsonl`); the default, Parquet, through spark-submit below."""
    done = driven.generated["test_generate_is_a_sub_command_whose_traces_ingest_cleanly"]
    out = driven.folder / "gen5"
    assert done.returncode == 0, done.stderr[-3000:]
    assert "wrote 2 trace(s) x 100 events (4 processes" in done.stdout
    # Spark's JSON Lines: .json
    assert any(p.suffix == ".json" for p in out.rglob("*")), sorted(out.rglob("*"))
    _generated_cleanly(driven, 5)


@pytest.mark.slow
def test_spark_submit_generate_takes_the_same_arguments(driven: Driven) -> None:
    done = driven.generated["test_spark_submit_generate_takes_the_same_arguments"]
    out = driven.folder / "gen6"
    assert done.returncode == 0, done.stderr[-3000:]
    assert "wrote 2 trace(s) x 100 events (4 processes" in done.stdout
    assert any(p.suffix == ".parquet" for p in out.rglob("*")), sorted(out.rglob("*"))
    _generated_cleanly(driven, 6)


def test_bad_generator_option_is_a_usage_error(tmp_path: Path) -> None:
    done = _run(
        [str(BIN / "causal-spark"), "generate", "--out", str(tmp_path / "g"), "--processes", "1",
         "--events", "10"]
    )  # fmt: skip
    assert done.returncode == 2
    assert "causal-spark: error: --processes must be at least 2" in done.stderr
