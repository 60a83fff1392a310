"""The console script (`app/console.py`): the warm-up started before the command line's
imports, and the exit without the interpreter's teardown."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from causal_spark.app import warmup
from causal_spark.app.console import _command

ROOT = Path(__file__).resolve().parent.parent


# `causal-spark` through the console script's `main`, and the same command through
# `python -m causal_spark.app.cli` (the interpreter's own exit)
CONSOLE = ("-c", "from causal_spark.app.console import main; main()")
MODULE = ("-m", "causal_spark.app.cli")


def _run(
    entry: tuple[str, ...], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`args` through `entry` (CONSOLE or MODULE), stdout a pipe."""
    return subprocess.run(
        [sys.executable, *entry, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def _console(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return _run(CONSOLE, *args, timeout=timeout)


def _module(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return _run(MODULE, *args, timeout=timeout)


def test_the_sub_command_is_the_first_word_that_is_not_an_option() -> None:
    assert _command(["audit", "data-samples/", "--warehouse", "w"]) == "audit"
    assert _command(["--version"]) is None
    assert _command(["-v", "replay", "--warehouse", "w"]) == "replay"


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),  # argparse's SystemExit(0)
        ("bogus",),  # argparse's usage error: exit 2, the message on stderr
        ("runs", "--warehouse", "{tmp}/none"),  # a command's output to a pipe, exit 0
    ],
)
def test_the_console_script_says_and_exits_as_the_module_does(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    """The same stdout, stderr and exit status as `python -m causal_spark.app.cli`: the
    early exit loses no buffered output (stdout is a pipe here, block-buffered)."""
    given = [a.format(tmp=tmp_path) for a in args]
    fast, plain = _console(*given), _module(*given)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        plain.returncode,
        plain.stdout,
        plain.stderr,
    )
    assert fast.stdout or fast.stderr


def test_a_prestarted_warm_up_compiles_what_start_warm_up_asks() -> None:
    """`start_warm_up` takes the process `prestart` started and tells it its parts: it says
    them done and ends, and a later `start_warm_up` starts a process of its own."""
    warmup.prestart()
    prestarted = warmup._prestarted
    assert prestarted is not None
    warm = warmup.start_warm_up(["clocks"], (), small=True)
    assert warm is not None and warm._process is prestarted
    assert warmup._prestarted is None
    waited = warm.wait("clocks")
    assert prestarted.wait(timeout=300) == 0
    warm.close()
    assert waited < 300
    assert warm._done["clocks"].is_set()


def test_a_prestarted_warm_up_no_command_takes_is_ended() -> None:
    """`discard_prestarted` ends the process (it may still be importing) at once."""
    warmup.prestart()
    process = warmup._prestarted
    assert process is not None
    began = time.monotonic()
    warmup.discard_prestarted()
    assert process.poll() is not None
    assert time.monotonic() - began < 10
    assert warmup._prestarted is None
    warmup.discard_prestarted()  # nothing left: a no-op


def test_a_warm_up_told_nothing_exits_without_compiling() -> None:
    """The prestarted process whose stdin closes with no arguments exits 0, saying nothing."""
    out = subprocess.run(
        [sys.executable, "-m", "causal_spark.app.warmup", warmup.FROM_STDIN],
        cwd=ROOT,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout == ""


@pytest.mark.slow
def test_an_audit_through_the_console_script_commits_and_reports(tmp_path: Path) -> None:
    """The newcomer's command end to end through the console script: the prestarted
    warm-up compiles (its parts said done under -v) and the run commits and reports."""
    done = _console("audit", "data-samples/", "--warehouse", str(tmp_path / "w"), "-v", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert " committed in " in done.stdout
    assert "protocol comparison" in done.stdout
    for part in ("clocks", "detect", "replay"):
        assert f"warm-up: done {part}" in done.stderr


_JAVA_TWICE = """
import os, sys
from causal_spark.app.session import ensure_java
ensure_java()
ensure_java()  # the same JAVA_HOME and PATH: not checked again
os.environ["PATH"] = os.environ["PATH"] + os.pathsep + "/nonexistent"
ensure_java()  # another PATH: checked again
"""


def test_java_is_checked_once_per_java_home_and_path(tmp_path: Path) -> None:
    """A command's second session (the audit's report) starts no `java -version` again:
    a `java` on PATH that records each call is called once per (JAVA_HOME, PATH)."""
    calls = tmp_path / "calls"
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho \'openjdk version "17.0.9"\' >&2\n')
    java.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYSPARK_GATEWAY_PORT")}
    env["PATH"] = f"{java.parent}{os.pathsep}{env.get('PATH', '')}"
    subprocess.run([sys.executable, "-c", _JAVA_TWICE], cwd=ROOT, env=env, check=True, timeout=120)
    assert calls.read_text().splitlines() == ["-version", "-version"]
