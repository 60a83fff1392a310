"""Compiling the Numba code a job will need while the job starts (docs/replay.md, "The first run").

On a machine whose Numba cache is cold, the clocks and detect kernels and the
replay loop of each protocol compile on first use: inside Spark's Python
workers, each worker for itself, one stage after the other. `start_warm_up`
starts one process, before the Spark session, that compiles what the job's
stages will call (only the protocols the job replays) into the disk cache, in
the order the stages need it, while the JVM starts and ingest runs; `waiting`
wraps a stage so that it first waits for its part (the workers then load the
code instead of compiling it). With a warm cache the process only loads, about
a second per part. Only for a local master: executors on other machines have
their own cache and compile on first use.

The process reports each part on its stdout (`done clocks 4.2`, ...). If it
fails, its traceback goes to the job's stderr and the stages no longer wait:
they compile what they need themselves, as without a warm-up.

The console script (`app/console.py`) starts the process before the command line's
own imports (`prestart`, about 1.5 CPU-s on one core while the other is idle): it
imports Numba and the compile modules meanwhile, then reads on its stdin the parts
that `start_warm_up` asks for; a command that needs none closes its stdin.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the warm-up process itself loads no Spark
    from causal_spark.app.runs import Stage, StageContext

log = logging.getLogger(__name__)

CLOCKS, DETECT, REPLAY = "clocks", "detect", "replay"
# the parts in the order the stages need them
PARTS = (CLOCKS, DETECT, REPLAY)
# inputs of fewer bytes are `small`: in practice no component there is large enough for the
# kernels of `clocks.warmup.LARGE_KERNELS` (2^26 vector entries; a JSON Lines event is ~100 B)
LARGE_INPUT_BYTES = 16 << 20


class WarmUp:
    """The warm-up process of a job: which of its parts are done."""

    def __init__(self, parts: Sequence[str], process: subprocess.Popen[str]) -> None:
        self.parts = tuple(parts)
        self._process = process
        self._done = {part: threading.Event() for part in self.parts}
        self._reader = threading.Thread(target=self._read, name="warm-up", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            said = line.split()
            if len(said) >= 2 and said[0] == "done" and said[1] in self._done:
                log.info("warm-up: %s", line.strip())
                self._done[said[1]].set()
        for event in self._done.values():  # the process ended: nothing more to wait for
            event.set()

    def wait(self, part: str) -> float:
        """Wait until `part` is compiled (or the process gave up on it); the seconds waited."""
        if part not in self._done:
            return 0.0
        began = time.monotonic()
        self._done[part].wait()
        waited = time.monotonic() - began
        log.info("warm-up: waited %.1f s for %s", waited, part)
        return waited

    def close(self) -> None:
        """End the process and its children if they still run (a job that failed, or
        needed less than planned)."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended in between
                os.killpg(self._process.pid, signal.SIGTERM)  # its own group: start_warm_up
        self._process.wait()
        self._reader.join(timeout=5)


# the warm-up's argument that makes it import, then read its arguments on its stdin
FROM_STDIN = "--from-stdin"
_prestarted: subprocess.Popen[str] | None = None


def _popen(arguments: Sequence[str], stdin: int | None = None) -> subprocess.Popen[str]:
    # a group of its own, so that `close` ends the children it forks with it
    return subprocess.Popen(
        [sys.executable, "-m", "causal_spark.app.warmup", *arguments],
        stdin=stdin,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
        start_new_session=True,
    )


def prestart() -> None:
    """Start the warm-up process now, before it is known what it will compile: it imports
    what it compiles with, then waits for `start_warm_up` (`discard_prestarted`: for
    nothing)."""
    global _prestarted
    if _prestarted is None:
        _prestarted = _popen([FROM_STDIN], stdin=subprocess.PIPE)


def discard_prestarted() -> None:
    """End a `prestart`ed process that no `start_warm_up` took."""
    global _prestarted
    process, _prestarted = _prestarted, None
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError):  # it ended in between
        os.killpg(process.pid, signal.SIGTERM)
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    process.wait()


def _take_prestarted(arguments: Sequence[str]) -> subprocess.Popen[str] | None:
    """The `prestart`ed process, told its `arguments` (None: there is none)."""
    global _prestarted
    process, _prestarted = _prestarted, None
    if process is None:
        return None
    assert process.stdin is not None
    # a process that died while importing: its stdout ends and nothing is waited for
    with contextlib.suppress(OSError):
        process.stdin.write(json.dumps(list(arguments)) + "\n")
    with contextlib.suppress(OSError):
        process.stdin.close()
    return process


def start_warm_up(
    stage_names: Sequence[str], protocols: Sequence[str], small: bool = False
) -> WarmUp | None:
    """Start compiling what stages `stage_names` need (replay: `protocols`) in a process of
    its own; None when they need nothing compiled. `small`: the inputs are too small for
    the kernels only large components call (`clocks.warmup.LARGE_KERNELS`): those are left
    to whichever process first needs them."""
    parts = [part for part in PARTS if part in stage_names]  # a part is named as its stage
    if REPLAY in parts and not protocols:
        parts.remove(REPLAY)
    if not parts:
        return None
    arguments = ["--parts", ",".join(parts)]
    if REPLAY in parts:
        arguments += ["--protocols", ",".join(protocols)]
    if small:
        arguments.append("--small")
    process = _take_prestarted(arguments) or _popen(arguments)
    return WarmUp(parts, process)


def small_inputs(paths: Sequence[str], limit: int = LARGE_INPUT_BYTES) -> bool:
    """Whether the files under `paths` hold fewer than `limit` bytes (stops once past it)."""
    total = 0
    for given in paths:
        found = [Path(given)] if Path(given).is_file() else Path(given).rglob("*")
        for path in found:
            with contextlib.suppress(OSError):  # gone meanwhile: ingest will say so
                total += path.stat().st_size if path.is_file() else 0
            if total >= limit:
                return False
    return True


def waiting(stage: Stage, warm_up: WarmUp, part: str) -> Stage:
    """`stage`, first waiting for `warm_up`'s `part`."""

    def run(context: StageContext) -> None:
        warm_up.wait(part)
        stage(context)

    return run


def _compile(part: str, protocols: Sequence[str], small: bool = False) -> None:
    if part == CLOCKS:
        from causal_spark.clocks.warmup import compile_kernels

        compile_kernels(large=not small)
    elif part == DETECT:
        from causal_spark.anomalies.warmup import compile_kernels as compile_detect

        compile_detect()
    else:
        from causal_spark.replay.warmup import warm_up

        warm_up(protocols)


def main(argv: Sequence[str] | None = None) -> int:
    """The warm-up process: compile each part in order, say `done <part> <seconds>` after
    each. The replay part (the largest: about 15 CPU-s for the first protocol, 2-10 for
    each further one) starts at once, beside the others, in a forked child. `FROM_STDIN`
    alone: import first, then read the arguments (a JSON list) on stdin; none: exit."""
    given = list(sys.argv[1:] if argv is None else argv)
    if given == [FROM_STDIN]:
        _import_compilers()
        line = sys.stdin.readline()
        if not line.strip():  # closed: the command needs nothing compiled
            return 0
        given = json.loads(line)
    parser = argparse.ArgumentParser(prog="python -m causal_spark.app.warmup")
    parser.add_argument("--parts", required=True)
    parser.add_argument("--protocols", default="")
    parser.add_argument("--small", action="store_true", help="no kernel of large inputs")
    args = parser.parse_args(given)
    parts = args.parts.split(",")
    protocols = [name for name in args.protocols.split(",") if name]
    early = [part for part in parts if part != REPLAY]
    if REPLAY not in parts or not early or not hasattr(os, "fork"):
        _run(parts, protocols, args.small)
        return 0
    child = os.fork()  # this process runs no thread yet: a fork is safe
    if child == 0:
        code = 1
        try:
            _run(early, protocols, args.small)
            code = 0
        finally:
            sys.stdout.flush()
            os._exit(code)
    _run([REPLAY], protocols)
    _, status = os.waitpid(child, 0)
    return 0 if os.waitstatus_to_exitcode(status) == 0 else 1


def _import_compilers() -> None:
    """Import what `_compile` compiles with (Numba, NumPy, pyarrow and the three packages'
    kernels: about a second), before the fork, so the children share it."""
    import importlib

    for package in ("clocks", "anomalies", "replay"):
        importlib.import_module(f"causal_spark.{package}.warmup")


def _run(parts: Sequence[str], protocols: Sequence[str], small: bool = False) -> None:
    for part in parts:
        began = time.monotonic()
        _compile(part, protocols, small)
        print(f"done {part} {time.monotonic() - began:.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
