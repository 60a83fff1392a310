"""Every command README.md and docs/*.md show runs through the real command line.

What counts as a command: each line of a fenced ```bash block (a line ending in
`\\` continues on the next; lines starting with `#` are comments), split at `&&`;
and each ```python block as a whole. A fenced ```text block that directly follows
one of those blocks (nothing but blank lines between) is the real output of the
block's last command: the test compares it line for line with what that command
prints (run ids and seconds aside). A line `...` alone stands for lines the page
leaves out: the lines around it must still be printed, in that order, and the
block's first and last lines must be the first and last printed.

How each command runs, from a sandbox folder that looks like the repository root
(`.venv`, `data-samples`, `conf`, `jobs`, `schemas` and `bench` are links to the
real ones) with the venv's bin first on PATH, so that what a command writes
(`--warehouse warehouse`, `--out gen/`) lands in a temporary folder:

- set-up (`python3 -m venv`, `.venv/bin/pip install`) is not run again: this test
  runs inside that venv. The README's test command is what CI runs (`.ci/run`):
  the test checks it is the same text, and does not run itself.
- a command in `LONG` (an audit of a million generated events, cluster commands)
  runs as its program's `--help` (the sub-command's, or spark-submit's application's);
- a command that only asks for help or the version runs in the quick test loop;
- every other command runs for real, in the order of its page, after the README's
  main job has run in the sandbox if it reads that job's warehouse
  (`@pytest.mark.slow`: each starts Spark). The pages run side by side, a few at a
  time, from the module's start (`page_runs`); each page's test takes its outcome.

The commands of docs/scheduling.md are run by tests/test_scheduled_jobs.py, not here.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import selected_tests
from tests.test_cli import AUDIT_ROWS, AUDIT_TABLES, BIN, READ_WITH_DELTA_RS, _env

README = ROOT / "README.md"
OWN_TESTS = {
    "docs/scheduling.md": ROOT / "tests" / "test_scheduled_jobs.py",
    "docs/queries.md": ROOT / "tests" / "test_sql.py",
}
PAGES = [README, *sorted(p for p in (ROOT / "docs").glob("*.md"))]
CHECKED_HERE = [p for p in PAGES if p.relative_to(ROOT).as_posix() not in OWN_TESTS]

# run as their program's --help: too long for a test, or made for a cluster
LONG = (
    ".venv/bin/causal-spark generate --out gen/ --processes 16 --events 1000000"
    " --latency lognormal:0,1 --seed 7",
    ".venv/bin/causal-spark audit gen/ --warehouse gen-warehouse",
    ".venv/bin/pip wheel --no-deps -w dist .",
    "spark-submit --master yarn --deploy-mode client --py-files"
    ' dist/causal_spark-0.1.0-py3-none-any.whl --packages "$DELTA_SPARK_PACKAGE"'
    " --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension"
    " --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog"
    " jobs/audit.py /mnt/logs/ --warehouse /mnt/audit/warehouse --conf conf/cluster.yml",
)
SET_UP = ("python3 -m venv ", ".venv/bin/pip install ")
LINKED = (".venv", "data-samples", "conf", "jobs", "schemas", "bench")
# a line of a shown output that stands for printed lines the page leaves out
ELIDED = "..."
# what varies from run to run in a run report
RUN_LINE = re.compile(r"^run \S+ \((.+?)\) committed in [0-9.]+ s$", re.M)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # where the block's fence opens, 1-based
    language: str
    text: str
    output: str | None  # the ```text block right after it, if any


@dataclass(frozen=True)
class Command:
    block: Block
    text: str  # one command: continuations joined, one part of an `&&` chain
    last: bool  # the last command of its block (the one its output block shows)

    @property
    def where(self) -> str:
        page = self.block.page
        shown = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
        return f"{shown}:{self.block.line}"

    @property
    def mode(self) -> str:
        if self.block.language == "python":
            return "real"
        if self.text.startswith(SET_UP):
            return "set-up"
        if self.text.startswith(".venv/bin/pytest"):
            return "ci"
        if self.text in LONG:
            return "help"
        words = shlex.split(self.text)
        if "--help" in words or "--version" in words:
            return "quick"
        return "real"


_FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```[ \t]*$", re.M | re.S)


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = list(_FENCE.finditer(text))
    result = []
    for i, match in enumerate(found):
        if match.group(1) not in ("bash", "python"):
            continue
        output = None
        if i + 1 < len(found):
            following = found[i + 1]
            between = text[match.end() : following.start()]
            if following.group(1) == "text" and not between.strip():
                output = following.group(2)
        line = text.count("\n", 0, match.start()) + 1
        result.append(Block(page, line, match.group(1), match.group(2), output))
    return result


def commands(block: Block) -> list[Command]:
    if block.language == "python":
        return [Command(block, block.text, True)]
    joined = re.sub(r"\s*\\\n\s*", " ", block.text)
    parts = [
        part.strip()
        for line in joined.splitlines()
        if line.strip() and not line.strip().startswith("#")
        for part in line.split(" && ")
    ]
    return [Command(block, part, i == len(parts) - 1) for i, part in enumerate(parts)]


def all_commands(pages: list[Path] = CHECKED_HERE) -> list[Command]:
    return [c for page in pages for block in blocks(page) for c in commands(block)]


def _ids(found: list[Command]) -> list[str]:
    return [f"{c.where}:{c.text[:50]}" for c in found]


def help_form(command: str) -> list[str]:
    """The program of `command` asked for its help: the sub-command's, the application's."""
    words = shlex.split(command)
    program = Path(words[0]).name
    if program == "spark-submit":
        application = next(w for w in words if w.endswith(".py"))
        return [str(BIN / "spark-submit"), application, "--help"]
    if program in ("causal-spark", "pip", "python"):
        return [words[0], words[1], "--help"]
    raise AssertionError(f"no --help form known for {command!r}: add one here")


def _environment() -> dict[str, str]:
    env = _env()
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    return env


def _run(argv: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=_environment(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=3600,
    )


def _normalised(text: str) -> list[str]:
    text = RUN_LINE.sub(r"run <run id> (\1) committed in <seconds> s", text)
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def run_command(command: Command, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run one command as the page shows it (or its help form); check exit 0 and output."""
    if command.block.language == "python":
        done = _run([str(BIN / "python"), "-"], cwd, stdin=command.text)
    elif command.mode == "help":
        done = _run(help_form(command.text), cwd)
    else:
        done = _run(["bash", "-c", command.text], cwd)
    assert done.returncode == 0, f"{command.where}: {command.text}\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{command.where}: {command.text} printed nothing"
    if command.block.output is not None and command.last and command.mode != "help":
        require_shown_output(command, command.block.output, done.stdout)
    return done


def shows(shown: list[str], printed: list[str]) -> bool:
    """Whether `shown` is `printed` with runs of its lines left out, each as one `...` line."""
    if ELIDED not in shown:
        return shown == printed
    first, *middle, last = _split_at_elided(shown)
    end = len(printed) - len(last)
    if end < len(first) or printed[: len(first)] != first or printed[end:] != last:
        return False
    at = len(first)
    for part in middle:  # each as early as it can be: a later part has the most room left
        found = next(
            (i for i in range(at, end - len(part) + 1) if printed[i : i + len(part)] == part), None
        )
        if found is None:
            return False
        at = found + len(part)
    return True


def _split_at_elided(lines: list[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for line in lines:
        if line == ELIDED:
            parts.append([])
        else:
            parts[-1].append(line)
    return parts


def require_shown_output(command: Command, shown: str, printed: str) -> None:
    assert shows(_normalised(shown), _normalised(printed)), (
        f"{command.where}: the output shown differs from what {command.text!r} prints:\n{printed}"
    )


def readme_run_report() -> str:
    """The README's output of its main job: the ```text block that starts with its run line."""
    text = README.read_text()
    (report,) = [
        m.group(2)
        for m in _FENCE.finditer(text)
        if m.group(1) == "text" and m.group(2).startswith("run <run id> (audit")
    ]
    return report


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that looks like the repository root, for commands that write."""
    root = tmp_path_factory.mktemp("sandbox")
    for name in LINKED:
        target = Path(sys.prefix) if name == ".venv" else ROOT / name
        (root / name).symlink_to(target, target_is_directory=True)
    return root


def run_worked_example(sandbox: Path) -> Path:
    """The README's main job, run for real in the sandbox (its audit part)."""
    (first, *_) = [c for c in all_commands([README]) if c.mode == "real"]
    assert first.text == ".venv/bin/causal-spark audit data-samples/ --warehouse warehouse"
    done = run_command(first, sandbox)
    require_shown_output(first, readme_run_report(), done.stdout)
    return sandbox


# a page's command that names the worked example's warehouse (`--warehouse warehouse`,
# "warehouse/quarantine"), not one of its own (`--warehouse formats`)
READS_WORKED_EXAMPLE = re.compile(r"(?<![-\w])warehouse\b")
# pages' commands run this many at a time: each starts a Spark driver that mostly waits
AT_ONCE = 3


def run_page(page: Path, sandbox: Path, worked: Future[Path]) -> None:
    """The real commands of `page` in its order, after the worked example if it reads it."""
    shown = [c for c in REAL if c.block.page == page]
    if page == README:
        shown = shown[1:]  # the main job is the worked example
    if any(READS_WORKED_EXAMPLE.search(c.text) for c in shown):
        worked.result()
    for command in shown:
        run_command(command, sandbox)


@dataclass
class PageRuns:
    worked: Future[Path]
    pages: dict[Path, Future[None]]


@pytest.fixture(scope="module", autouse=True)
def page_runs(sandbox: Path, request: pytest.FixtureRequest) -> Iterator[PageRuns]:
    """The worked example and the real commands of every page this run selected, started
    when the module starts, `AT_ONCE` at a time (each page's in its order): the tests
    take their results. Nothing starts when no test of them was selected (the quick loop)."""
    pages = [
        item.callspec.params["page"]
        for item in selected_tests(request, "test_the_real_commands_of_each_page_run_in_order")
    ]
    wanted = bool(pages) or bool(
        selected_tests(request, "test_the_worked_example_tables_read_with_delta_rs")
    )
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        worked: Future[Path] = Future()
        if wanted:
            worked = pool.submit(run_worked_example, sandbox)
        runs = PageRuns(worked, {p: pool.submit(run_page, p, sandbox, worked) for p in pages})
        yield runs
        for future in runs.pages.values():
            future.cancel()


@pytest.fixture(scope="module")
def worked_example(page_runs: PageRuns) -> Path:
    """The sandbox, once the README's main job has run in it."""
    return page_runs.worked.result()


# --- what the pages say ------------------------------------------------------------------


def test_the_readme_is_a_short_guide_without_lab_notes() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 260
    for lab_note in ("scratch script", "dev run", "DESIGN", "seed 0", "session 4"):
        assert lab_note not in text
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b|\b20\d{6}T\d{6}\b", text)  # dates, run ids
    assert not re.search(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text)  # commits


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_cite_sources_not_documents_that_do_not_ship(page: Path) -> None:
    text = page.read_text()
    assert not re.search(r"DESIGN §|seed \d\d\d", text), page


def test_the_readme_shows_the_two_commands_ci_runs() -> None:
    first, second = [b for b in blocks(README) if b.language == "bash"][:2]
    main = first.text.strip()
    assert main == (
        "python3 -m venv .venv && .venv/bin/pip install -e . && "
        ".venv/bin/causal-spark audit data-samples/ --warehouse warehouse"
    )
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert second.text.strip() in ci, "the README's test command is not what .ci/run runs"
    assert second.text.strip().endswith('.venv/bin/pytest -m "slow or not slow"')


def test_the_readme_names_the_python_versions_pyproject_allows() -> None:
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert spec == ">=3.11,<3.14"
    assert "Python 3.11, 3.12 or 3.13" in README.read_text()


def test_every_long_command_is_still_shown() -> None:
    shown = {c.text for c in all_commands()}
    assert set(LONG) <= shown, set(LONG) - shown


def test_the_pages_run_elsewhere_have_their_own_test() -> None:
    for page, test in OWN_TESTS.items():
        assert page in test.read_text(), f"{test.name} no longer runs the commands of {page}"


def test_every_page_here_shows_a_command() -> None:
    empty = [p.name for p in CHECKED_HERE if not all_commands([p])]
    assert not empty


@pytest.mark.parametrize(
    ("shown", "holds"), [("causal-spark 0.1.0", True), ("causal-spark 9.9", False)]
)
def test_an_output_block_is_compared_with_what_the_command_prints(
    tmp_path: Path, shown: str, holds: bool
) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"```bash\n.venv/bin/causal-spark --version\n```\n\n```text\n{shown}\n```\n")
    (command,) = all_commands([page])
    assert command.mode == "quick" and command.block.output == f"{shown}\n"
    if holds:
        run_command(command, ROOT)
    else:
        with pytest.raises(AssertionError, match="differs"):
            run_command(command, ROOT)


@pytest.mark.parametrize(
    ("shown", "holds"),
    [
        ("a b c d e", True),
        ("a b ... e", True),
        ("a ... c ... e", True),
        ("... d e", True),
        ("a b ...", True),
        ("a b c ... c d e", False),  # the parts overlap
        ("a b c d", False),  # nothing elided: all of it
        ("b ... e", False),  # the first line printed
        ("a ... d", False),  # the last line printed
        ("a ... d c ... e", False),  # in the printed order
        ("a ... x ... e", False),  # each shown line printed
        ("a ... b c d ... e", True),
        ("a ... c b ... e", False),
    ],
)
def test_a_shown_output_may_leave_lines_out_but_not_change_them(shown: str, holds: bool) -> None:
    printed = ["a", "b", "c", "d", "e"]
    assert shows(shown.split(), printed) is holds


# --- the commands --------------------------------------------------------------------


QUICK = [c for c in all_commands() if c.mode in ("quick", "help")]
REAL = [c for c in all_commands() if c.mode == "real"]


@pytest.mark.parametrize("command", QUICK, ids=_ids(QUICK))
def test_each_help_command_runs(command: Command) -> None:
    run_command(command, ROOT)


@pytest.mark.slow
def test_the_worked_example_tables_read_with_delta_rs(worked_example: Path) -> None:
    """The README's main job (the embedded default profile) wrote Delta tables another
    Delta reader (delta-rs, no Spark) reads, with the rows the worked traces hold."""
    warehouse = worked_example / "warehouse"
    read = _run([sys.executable, "-c", READ_WITH_DELTA_RS, str(warehouse), *AUDIT_TABLES], ROOT)
    assert read.returncode == 0, read.stderr[-3000:]
    assert read.stdout.split() == AUDIT_ROWS


@pytest.mark.slow
@pytest.mark.parametrize(
    "page", sorted({c.block.page for c in REAL}, key=PAGES.index), ids=lambda p: p.name
)
def test_the_real_commands_of_each_page_run_in_order(page: Path, page_runs: PageRuns) -> None:
    page_runs.pages[page].result()  # raises what failed, naming the page, line and command
