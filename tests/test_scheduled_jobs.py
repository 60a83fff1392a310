"""Issue 20 through the real command line: exit codes, gating, the summary JSON, the
writer lock between real processes, progress, and the commands of docs/scheduling.md."""

from __future__ import annotations

import ast
import fcntl
import json
import os
import pty
import re
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from causal_spark.app.cli import main
from causal_spark.app.progress import Progress
from causal_spark.io.ledger import Ledger
from causal_spark.io.sinks import Warehouse
from tests.conftest import ROOT
from tests.helpers import selected_tests
from tests.test_cli import BIN, _env

CONF = ["--conf", "conf/test.yml"]
CLI = str(BIN / "causal-spark")
DOC = ROOT / "docs" / "scheduling.md"


def _cli(args: list[str], timeout: int = 900, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *args], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout, **kw
    )


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


# --- exit codes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit", "data-samples", "--fail-on", "causa"], "cannot read condition 'causa'"),
        (["detect", "--fail-on", "quarantine>3"], "'quarantine' (needs ingest)"),
        (
            ["explain", "--trace", "t", "--msg", "m", "--as-of", "nosuchrun"],
            "no committed run 'nosuchrun'",
        ),
        (["audit", "no-such-folder"], "does not exist"),
        (["audit", "data-samples", "--prune"], "--prune only applies"),
    ],
    ids=[
        "bad-condition",
        "condition-without-its-stage",
        "unknown-run",
        "missing-input",
        "prune-alone",
    ],
)
def test_usage_errors_exit_2_before_spark_starts(
    detected_samples: Path, tmp_path: Path, argv: list[str], message: str
) -> None:
    warehouse = _copy(detected_samples, tmp_path / "wh")
    began = time.monotonic()
    done = _cli([*argv, "--warehouse", str(warehouse), *CONF], timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr and "Traceback" not in done.stderr
    assert time.monotonic() - began < 60  # no Spark session was started
    assert len(Ledger(str(warehouse)).rows()) == 1


@pytest.mark.slow
def test_fail_on_exits_1_after_committing_and_prints_every_condition_and_each_stage(
    spark: SparkSession,
    detected_samples: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`main` in this process (the console script is `sys.exit(main())`; the cron line of
    the scheduling doc's test exits 1 through the real command). The same run prints its
    stage's start and end and records its seconds; the next, `--quiet`, prints nothing."""
    warehouse = _copy(detected_samples, tmp_path / "wh")
    summary = tmp_path / "reports" / "summary.json"
    conditions = "causal,fifo,crown,invalid,async,new,causal>100"
    capsys.readouterr()
    code = main(
        [
            "detect",
            "--warehouse",
            str(warehouse),
            "--fail-on",
            conditions,
            "--summary-json",
            str(summary),
            *CONF,
        ],
        session=spark,
    )
    done = capsys.readouterr()
    assert code == 1, done.err[-3000:]
    rows = Ledger(str(warehouse)).rows()
    assert [r["command"] for r in rows] == ["audit", "detect"]  # committed
    counts = rows[-1]["counts"]
    expected = {
        "causal > 0": counts["violations_causal"],
        "fifo > 0": counts["violations_fifo"],
        "crown > 0": counts["crown_components"],
        "invalid > 0": counts["class_INVALID"],
        "async > 0": counts["class_ASYNC"],
        "new > 0": 0,  # the same findings as the run before
        "causal > 100": counts["violations_causal"],
    }
    for condition, value in expected.items():
        _name, _op, threshold = condition.split()
        held = value > int(threshold)
        state = "HELD" if held else "ok"
        assert f"fail-on {state}: {condition} ({value} " in done.out, done.out
    report = json.loads(summary.read_text())
    assert report["status"] == "committed" and report["exit_code"] == 1
    assert report["run_id"] == rows[-1]["id"] and report["previous_run"] == rows[0]["id"]
    assert set(report) >= {
        "tables",
        "counts",
        "classes",
        "findings",
        "new_findings",
        "fail_on",
        "stage_seconds",
        "repaired",
        "mode",
        "seconds",
    }
    assert report["tables"]["trace_summary"]["rows"] == 9
    assert report["tables"]["trace_summary"]["written"] == 9
    assert report["tables"]["events"]["written"] is None  # kept, not written
    assert sum(report["classes"].values()) == 9
    assert report["new_findings"]["appeared"] == 0
    assert [f["held"] for f in report["fail_on"]] == [
        v > int(c.split()[2]) for c, v in expected.items()
    ]
    # progress: each stage prints its start and end, and its seconds are recorded
    assert re.search(r"detect: started", done.err)
    assert re.search(
        r"detect: done in \d+\.\d s \(rows staged: violations \d+, crowns \d+", done.err
    )
    stage_seconds = rows[-1]["stage_seconds"]
    assert set(stage_seconds) == {"detect"} and stage_seconds["detect"] > 0
    assert main(["detect", "--warehouse", str(warehouse), "--quiet", *CONF], session=spark) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


@pytest.mark.slow
def test_an_internal_failure_exits_3_and_commits_nothing(
    spark: SparkSession,
    detected_samples: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`main` in this process, as for exit 1 above: the console script is `sys.exit(main())`,
    whose code reaches the shell through the real command in the usage errors' test (2)
    and the scheduling doc's (1)."""
    warehouse = _copy(detected_samples, tmp_path / "wh")
    victim = next((warehouse / "events" / "data").rglob("*.parquet"))
    victim.write_bytes(b"not parquet at all")
    summary = tmp_path / "summary.json"
    capsys.readouterr()
    argv = ["detect", "--warehouse", str(warehouse), "--summary-json", str(summary), *CONF]
    code = main(argv, session=spark)
    err = capsys.readouterr().err
    assert code == 3, err[-3000:]
    assert "causal-spark: internal error" in err
    assert [r["command"] for r in Ledger(str(warehouse)).rows()] == ["audit"]
    report = json.loads(summary.read_text())
    assert report["status"] == "failed" and report["exit_code"] == 3 and report["error"]


# --- one writer at a time --------------------------------------------------------------

HOLD = """
import sys, time
from causal_spark.app.lock import writer_lock
with writer_lock(sys.argv[1], "audit"):
    print("held", flush=True)
    time.sleep(600)
"""


def _holder(warehouse: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(warehouse)],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.slow
def test_a_second_writer_fails_at_once_naming_the_holder_and_a_dead_holder_blocks_nothing(
    detected_samples: Path, tmp_path: Path
) -> None:
    warehouse = _copy(detected_samples, tmp_path / "wh")
    holder = _holder(warehouse)
    try:
        began = time.monotonic()
        done = _cli(["detect", "--warehouse", str(warehouse), *CONF], timeout=120)
        assert done.returncode == 2
        assert f"is being written by audit (pid {holder.pid} on " in done.stderr
        assert time.monotonic() - began < 60
        # a waiting writer goes on once the holder is gone (killed: the kernel drops its lock)
        waiting = subprocess.Popen(
            [CLI, "vacuum", "--warehouse", str(warehouse), "--retain-days", "30", "--wait", "300"],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)
        assert waiting.poll() is None  # still waiting
        holder.send_signal(signal.SIGKILL)
        out, err = waiting.communicate(timeout=120)
        assert waiting.returncode == 0, err
        assert "vacuum" in out
    finally:
        holder.kill()
        holder.wait()
    # the dead holder's files are still there, and block nobody
    done = _cli(["vacuum", "--warehouse", str(warehouse), "--retain-days", "30"], timeout=120)
    assert done.returncode == 0, done.stderr
    assert [r["command"] for r in Ledger(str(warehouse)).rows()] == ["audit", "vacuum", "vacuum"]


@pytest.mark.slow
def test_two_concurrent_audits_one_fails_at_once_and_the_tables_are_the_winners(
    spark: SparkSession, detected_samples: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    argv = ["ingest", "data-samples", "--warehouse", str(warehouse), *CONF]
    both = [
        subprocess.Popen(
            [CLI, *argv],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=900), p.stderr.read() if p.stderr else "") for p in both]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    assert "is being written by ingest (pid" in loser
    assert [r["command"] for r in Ledger(str(warehouse)).rows()] == ["ingest"]
    ours, alone = (
        Warehouse(spark, warehouse, "deltalake"),
        Warehouse(spark, detected_samples, "deltalake"),
    )
    for table in ("messages", "quarantine"):
        assert_df_equality(ours.read(table), alone.read(table), ignore_row_order=True)
    assert_df_equality(
        ours.read("events").drop("lamport", "vc"),
        alone.read("events").drop("lamport", "vc"),
        ignore_row_order=True,
    )


# --- progress --------------------------------------------------------------------------


def test_a_terminal_gets_a_task_bar(spark: SparkSession) -> None:
    master, slave = pty.openpty()
    # a terminal of 24 rows x 100 columns (a fresh pty reports 0 x 0)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    with os.fdopen(slave, "w") as terminal:
        progress = Progress(stream=terminal)
        progress.spark = spark
        progress.started("count")
        # 8 tasks of 0.6 s each on 2 cores: the stage is active over several polls
        # (POLL_SECONDS) while its tasks sleep, not compute (no rows to speak of)
        spark.range(0, 8, numPartitions=8).selectExpr(
            "reflect('java.lang.Thread', 'sleep', cast(600 as bigint))"
        ).collect()
        time.sleep(1.5)
        progress.ended("count", {}, 1.0)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    text = shown.decode(errors="replace")
    assert "count: started" in text and "count: done in" in text
    assert "task" in text  # tqdm's bar: "count: ...| n/N [..., task/s]"


# --- docs/scheduling.md ---------------------------------------------------------------


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.S)


def _paths(text: str, root: Path) -> str:
    return text.replace("/data/", f"{root}/")


DOC_TEST = "test_the_commands_of_the_scheduling_doc_run"


@pytest.fixture(scope="module", autouse=True)
def scheduling_doc(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Future[None]]:
    """The doc's two nights, started in a thread when the module starts if its test was
    selected: its cold drivers mostly wait, the module's other tests run meanwhile; the
    test takes the outcome."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        started: Future[None] = Future()
        if selected_tests(request, DOC_TEST):
            started = pool.submit(two_nights, tmp_path_factory.mktemp("scheduling"))
        yield started


@pytest.mark.slow
def test_the_commands_of_the_scheduling_doc_run(scheduling_doc: Future[None]) -> None:
    scheduling_doc.result()  # raises what failed (`two_nights`)


def two_nights(tmp_path: Path) -> None:
    """Two nights on one warehouse: the cron line, then the Airflow task (its spark-submit
    application and arguments, as Airflow runs them) once a new file has landed; then the
    commands that look back."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (tmp_path / "reports").mkdir()
    for name in ("fifo_violation", "causal_cycle", "bad_input"):
        shutil.copy(f"data-samples/{name}.jsonl", logs)
    env = _env()
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    # night 1: the cron line
    (cron,) = _blocks("cron")
    line = next(line for line in cron.splitlines() if not line.startswith("#"))
    done = subprocess.run(
        ["bash", "-c", _paths(line.split(None, 5)[5], tmp_path)], cwd=ROOT, env=env, timeout=1800
    )
    # the condition is quoted: unquoted, `>100` would send the output to a file named 100
    assert not (ROOT / "100").exists() and not (tmp_path / "100").exists()
    first = json.loads((tmp_path / "reports" / "audit.json").read_text())
    # causal,invalid: causal_cycle is INVALID every night
    assert done.returncode == 1, (tmp_path / "reports" / "audit.log").read_text()[-3000:]
    assert first["mode"] == "incremental" and first["findings"]["invalid"] == 1
    log = (tmp_path / "reports" / "audit.log").read_text()
    assert "fail-on HELD: invalid > 0" in log and "started" not in log  # --quiet
    # night 2: the Airflow task, after causal_chat.jsonl landed
    shutil.copy("data-samples/causal_chat.jsonl", logs)
    (dag,) = _blocks("python")
    call = next(
        node
        for node in ast.walk(ast.parse(dag))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "SparkSubmitOperator"
    )
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    arguments = [
        _paths(a, tmp_path).replace("{{ ds }}", "2026-11-24")
        for a in keywords["application_args"]
    ]
    conf = [x for key, value in keywords["conf"].items() for x in ("--conf", f"{key}={value}")]
    done = subprocess.run(
        [str(BIN / "spark-submit"), *conf, keywords["application"], *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 1, done.stderr[-3000:]  # the task fails: a condition held
    second = json.loads((tmp_path / "reports" / "audit-2026-11-24.json").read_text())
    assert second["status"] == "committed" and second["mode"] == "incremental"
    # night 2 read the one new file and analysed its trace only
    (row,) = [r for r in Ledger(str(tmp_path / "audit")).rows() if r["id"] == second["run_id"]]
    files = {f["path"].rsplit("/", 1)[1]: f for given in row["inputs"] for f in given["files"]}
    assert {n for n, f in files.items() if f["read"]} == {"causal_chat.jsonl"}
    assert second["tables"]["trace_summary"]["written"] == 1
    assert second["tables"]["trace_summary"]["rows"] == 4
    assert {a["trace_id"] for a in second["new_findings"]["appeared_list"]} == {"causal_chat"}
    # looking back
    (looking_back,) = _blocks("bash")
    for text in looking_back.strip().splitlines():
        done = subprocess.run(
            ["bash", "-c", _paths(text, tmp_path)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip()
