"""The `causal-spark` console script: `cli.main`, started early and ended without teardown.

Two costs of the first run that are not the user's result (bench/README.md, "The
worked example end to end"):

- Before the command runs, importing the command line (PySpark, pandas, pyarrow, Numba
  and every engine) takes about 1.5 CPU-s on one core. A command that compiles
  (`COMPILING`) starts its warm-up process first (`warmup.prestart`), which imports what
  it compiles with on the other core meanwhile and starts compiling as soon as the
  command says what (`warmup.start_warm_up`).
- After the command, the interpreter's teardown of those modules takes about a second
  more. The tables are committed and the report printed by then: the script runs the
  `atexit` handlers, joins any non-daemon thread, flushes its streams and exits at once
  (the JVM, as before, ends when its stdin closes).

`python -m causal_spark.app.cli` and `jobs/*.py` run `cli.main` without either.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

# the commands whose stages compile (app/warmup.py's parts: clocks, detect, replay)
COMPILING = ("audit", "clocks", "detect", "replay")


def _command(argv: list[str]) -> str | None:
    """The sub-command named in `argv` (its first word not an option), if any."""
    return next((word for word in argv if not word.startswith("-")), None)


def _exit_code(code: object) -> int:
    """The exit status Python gives `sys.exit(code)` (printing a message it is given)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main() -> None:
    from causal_spark.app import warmup

    if _command(sys.argv[1:]) in COMPILING:
        warmup.prestart()
    try:
        from causal_spark.app.cli import main as cli_main

        code = _exit_code(cli_main())
    except SystemExit as e:  # argparse's errors, --help, --version
        code = _exit_code(e.code)
    finally:
        warmup.discard_prestarted()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: as Python's own exit
            code = code or 120
    os._exit(code)


if __name__ == "__main__":
    main()
