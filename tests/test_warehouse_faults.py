"""The kill/fault suite (issue 17, issue 20): a run stopped at each commit point.

A real `causal-spark ingest` process is stopped at each commit point in turn: frozen
with its whole process group (SIGSTOP: the driver, its JVM and Python workers) while its
warehouse is copied, then let go on, and at its last point SIGKILLed with its process
group (`GROUPS`: two victims, two real kills, six points); a disk fills up
during a commit (a small tmpfs); two processes commit the first version of one table
at once. After each, every table reads as the last committed run left it, and the
next run succeeds and says what it repaired.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from causal_spark.app.runs import run_job
from causal_spark.app.stages import ingest_stage
from causal_spark.config import Config
from causal_spark.io import delta
from causal_spark.io.ledger import Ledger
from causal_spark.io.sinks import Warehouse
from tests.conftest import ROOT
from tests.helpers import selected_tests
from tests.test_cli import _env

pytestmark = pytest.mark.slow
DATA = ["events", "messages", "quarantine"]
CONF = ["--conf", "conf/test.yml"]

# runs `causal-spark` with a hook that, at each commit point named, says so (a file
# `at-<point>`) and waits until the file is gone: the test freezes it there, or kills it
DRIVER = """
import sys, time
from pathlib import Path
import causal_spark.app.cli as cli
folder, points, argv = Path(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:]
job = cli.run_job

def stop(name):
    if name in points:
        marker = folder / f"at-{name}"
        marker.write_text(name)
        while marker.exists():
            time.sleep(0.05)

def hooked(*args, **kwargs):
    kwargs["on_staged"] = lambda table: stop("staged" if table == "quarantine" else "")
    kwargs["on_committed"] = stop
    return job(*args, **kwargs)

cli.run_job = hooked
sys.exit(cli.main(argv))
"""


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "in-a", tmp_path / "in-b"
    first.mkdir()
    second.mkdir()
    for name in ("fifo_violation", "causal_chat", "bad_input"):
        shutil.copy(f"data-samples/{name}.jsonl", first)
    for name in ("nested_crowns", "sync_deadlock"):
        shutil.copy(f"data-samples/{name}.jsonl", second)
    return first, second


def _ingest(spark: SparkSession, config: Config, warehouse: Path, given: Path, **kw: object):
    return run_job(
        "ingest",
        [ingest_stage([str(given)])],
        spark=spark,
        config=config,
        warehouse=Warehouse(spark, warehouse, "deltalake"),
        **kw,  # type: ignore[arg-type]
    )


def _same_tables(spark: SparkSession, warehouse: Path, reference: Path) -> None:
    ours, theirs = (
        Warehouse(spark, warehouse, "deltalake"),
        Warehouse(spark, reference, "deltalake"),
    )
    for table in DATA:
        assert_df_equality(ours.read(table), theirs.read(table), ignore_row_order=True)


@pytest.fixture(scope="module")
def references(
    spark: SparkSession, config: Config, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, Path, Path]:
    """Input folders A and B, and a warehouse of each ingested alone."""
    root = tmp_path_factory.mktemp("faults")
    first, second = _inputs(root)
    _ingest(spark, config, root / "ref-a", first)
    _ingest(spark, config, root / "ref-b", second)
    return first, second, root / "ref-a", root / "ref-b"


# what the next run finds after a kill at each point: rolled back, forward, or committed
POINTS = {
    "staged": "back",  # staging done, nothing committed
    "intent": "back",  # intent written, no table committed
    "events": "back",  # one table of three committed
    "messages": "back",  # two of three
    "quarantine": "forward",  # every table, not the runs row
    "runs": "committed",  # the runs row, not yet the intent's removal
}


# the points one victim goes through, in its commit order: it is frozen (SIGSTOP to its
# process group) at each but the last, its warehouse copied as it stands and the victim
# let go on (SIGCONT); at the last it is SIGKILLed with its process group. A frozen
# process writes nothing more, so the copy is what a kill there leaves on disk; each group
# ends in a real kill (`events`: rolled back after a table commit; `runs`: committed)
GROUPS = (("staged", "intent", "events"), ("messages", "quarantine", "runs"))


@dataclass
class Victim:
    """One `causal-spark ingest` of input B into a copy of warehouse A, stopped at each
    of `points` in turn: frozen and copied at each but the last, killed at the last."""

    points: list[str]
    folder: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def warehouse(self) -> Path:
        return self.folder / "wh"

    def start(self, second: Path, ref_a: Path) -> None:
        self.folder.mkdir()
        shutil.copytree(ref_a, self.warehouse)
        argv = ["ingest", str(second), "--warehouse", str(self.warehouse), *CONF]
        with open(self.folder / "victim.err", "w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-c", DRIVER, str(self.folder), ",".join(self.points), *argv],
                cwd=ROOT,
                env=_env(),
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def stopped_at(self, point: str) -> Path:
        """Wait until the victim says it reached `point`; the warehouse as a kill there
        leaves it: a copy taken while the victim is frozen, or the victim's own once it
        is SIGKILLed (`point` its last)."""
        assert self.process is not None
        marker = self.folder / f"at-{point}"
        deadline = time.monotonic() + 900
        while not marker.exists():
            assert self.process.poll() is None, (self.folder / "victim.err").read_text()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.1)
        if point == self.points[-1]:
            self.kill()
            return self.warehouse
        os.killpg(self.process.pid, signal.SIGSTOP)
        try:
            copy = shutil.copytree(self.warehouse, self.folder / f"wh-{point}")
        finally:
            os.killpg(self.process.pid, signal.SIGCONT)
        marker.unlink()
        return copy

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait()


class Victims:
    """The module's victims (one per group of `GROUPS` with a selected point), all
    started at once: each is a cold driver that mostly waits (on its JVM, on Spark's
    scheduler)."""

    def __init__(self, points: list[str], root: Path, second: Path, ref_a: Path) -> None:
        self.of: dict[str, Victim] = {}
        for group in GROUPS:
            selected = [p for p in group if p in points]
            if selected:
                victim = Victim(selected, root / selected[-1])
                victim.start(second, ref_a)
                self.of.update((p, victim) for p in selected)

    def killed_at(self, point: str) -> Path:
        """The warehouse a kill at `point` leaves."""
        return self.of[point].stopped_at(point)

    def kill_all(self) -> None:
        for victim in self.of.values():
            victim.kill()


@pytest.fixture(scope="module")
def victims(
    request: pytest.FixtureRequest,
    references: tuple[Path, Path, Path, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Victims]:
    """The victims of the points this run selected."""
    _first, second, ref_a, _ref_b = references
    points = [
        item.callspec.params["point"]
        for item in selected_tests(request, "test_a_run_stopped_at_each_commit_point")
    ]
    started = Victims(points, tmp_path_factory.mktemp("victims"), second, ref_a)
    yield started
    started.kill_all()


@pytest.mark.parametrize("point", list(POINTS))
def test_a_run_stopped_at_each_commit_point(
    spark: SparkSession,
    config: Config,
    references: tuple[Path, Path, Path, Path],
    victims: Victims,
    point: str,
) -> None:
    """What a SIGKILL there leaves (a real one at each victim's last point, a frozen
    victim's copy at the others) reads as the last committed run and is repaired."""
    first, _second, ref_a, ref_b = references
    warehouse = victims.killed_at(point)
    expected = POINTS[point]
    # readers see the last committed run at once, before any repair: the victim's only
    # once its runs row is written
    _same_tables(spark, warehouse, ref_b if expected == "committed" else ref_a)
    # the next run repairs first, then succeeds
    record = _ingest(spark, config, warehouse, first)
    repaired = record.repaired
    if expected == "back":
        assert repaired is not None and repaired.rolled_forward is None
        committed_by_victim = [t for t in DATA if t in repaired.rolled_back]
        if point in DATA:  # the tables committed before the kill, in commit order
            assert committed_by_victim == DATA[: DATA.index(point) + 1]
        else:
            assert committed_by_victim == []
            assert repaired.removed_files > 0  # its staged files
    elif expected == "forward":
        assert repaired is not None and repaired.rolled_forward is not None
        assert not repaired.rolled_back
    else:
        assert repaired is None  # its runs row was written: nothing to repair
    assert not (warehouse / "_causal" / "pending").exists() or not os.listdir(
        warehouse / "_causal" / "pending"
    )
    _same_tables(spark, warehouse, ref_a)
    commands = [r["command"] for r in Ledger(str(warehouse)).rows()]
    assert commands[-1] == "ingest" and commands.count("repair") == (1 if expected == "back" else 0)
    # nothing is left that no log names
    for table in DATA:
        named = delta.referenced_files(warehouse / table)
        on_disk = {str(p) for p in (warehouse / table / "data").rglob("*") if p.is_file()}
        assert on_disk <= named, on_disk - named


def _mount_tmpfs(folder: Path, megabytes: int) -> bool:
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(folder)],
        capture_output=True,
    )
    return done.returncode == 0


def _fill(filler: Path) -> None:
    """Fill the filesystem of `filler` to the last byte (unbuffered: nothing is left to
    write when the file closes)."""
    with open(filler, "wb", buffering=0) as handle:
        for size in (1 << 16, 1):
            try:
                while True:
                    handle.write(b"\0" * size)
            except OSError as e:
                assert e.errno == errno.ENOSPC


def test_disk_full_during_a_commit(
    spark: SparkSession, config: Config, references: tuple[Path, Path, Path, Path], tmp_path: Path
) -> None:
    first, second, ref_a, _ = references
    disk = tmp_path / "disk"
    mounted = _mount_tmpfs(disk, 16)
    warehouse = disk / "wh"
    try:
        _ingest(spark, config, warehouse, first)
        filler: list[Path] = []

        def full(point: str) -> None:
            if point == "intent":  # staged, intent written: delta-rs finds the disk full
                if mounted:
                    filler.append(disk / "filler")
                    _fill(filler[-1])
                else:  # no tmpfs here: the write error a full disk gives
                    raise OSError(errno.ENOSPC, "No space left on device (injected)")

        with pytest.raises(Exception, match=r"(?i)space|ENOSPC|os error 28"):
            _ingest(spark, config, warehouse, second, on_committed=full)
        for file in filler:
            file.unlink()
        _same_tables(spark, warehouse, ref_a)
        record = _ingest(spark, config, warehouse, first)
        _same_tables(spark, warehouse, ref_a)
        assert record.repaired is None or record.repaired.lines()
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)], check=True)


# one process per writer for every trial (the imports paid once): per trial, a table of
# its own whose first version both try to commit at one instant
FIRST_COMMIT = """
import sys, time, os
import pyarrow as pa, pyarrow.parquet as pq
from causal_spark.io.ledger import commit_files
from causal_spark import tables
root, run_id, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
for trial in range(trials):
    path = os.path.join(root, f"t{trial}", "protocol_comparison")
    rows = pa.table({"protocol": [run_id], "receive_mode": ["x"], "metric": ["m"], "traces": [1], "median": [1.0], "p99": [1.0]})
    folder = os.path.join(path, "data", run_id)
    os.makedirs(folder, exist_ok=True)
    file = os.path.join(folder, "part-0.parquet")
    pq.write_table(rows.cast(tables.arrow_schema(tables.PROTOCOL_COMPARISON)), file)
    print("ready", flush=True)
    start = float(sys.stdin.readline())  # the same instant for both, once both are ready
    while time.time() < start:
        pass
    try:
        # both runs began when the table did not exist (NEW_TABLE)
        print("committed", commit_files(path, tables.PROTOCOL_COMPARISON, [file], run_id, "overwrite", base=-1))
    except Exception as e:
        print("refused", type(e).__name__, str(e).replace(chr(10), " "))
    sys.stdout.flush()
os._exit(0)
"""

TRIALS = 6


def test_two_first_commits_of_one_table_never_both_succeed(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", FIRST_COMMIT, str(tmp_path), f"run-{who}", str(TRIALS)],
            cwd=ROOT,
            env=_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for who in "ab"
    ]
    try:
        for trial in range(TRIALS):
            for p in procs:  # imports done and the data file written: only the commit is left
                assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            start = time.time() + 0.2
            for p in procs:  # both told before either can start
                assert p.stdin is not None
                p.stdin.write(f"{start}\n")
                p.stdin.flush()
            outs = [p.stdout.readline() for p in procs if p.stdout is not None]
            winners = [o for o in outs if o.startswith("committed 0")]
            assert len(winners) == 1, outs
            winner = "run-a" if outs[0].startswith("committed") else "run-b"
            table = tmp_path / f"t{trial}" / "protocol_comparison"
            rows = DeltaTable(delta.table_uri(table)).to_pyarrow_table().column("protocol")
            assert rows.to_pylist() == [winner]
        assert [p.wait(timeout=120) for p in procs] == [0, 0]
    finally:
        for p in procs:
            p.kill()
            p.wait()
