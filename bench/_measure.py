"""Memory and CPU of a process tree, sampled from a thread (shared by the benchmarks).

- `PeakMemory`: the peak RSS of this process (and, if asked, of all its descendants).
- `TreeSampler`: RSS and CPU seconds of another process's whole tree (a `causal-spark`
  subprocess: the driver, the JVM, Spark's Python workers) every `interval` seconds,
  with marks: `mark(label)` samples at once and records the moment, so that samples and
  CPU seconds can be attributed to the intervals between marks.

CPU seconds are the user + system times of each process of the tree, summed over every
process seen; a process that has exited keeps the last value sampled (at most
`interval` of its CPU time is missed). RSS sums the resident sets of the live processes
(pages shared by forked workers count once per process).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psutil


class PeakMemory:
    """Samples the RSS of this process (and, if asked, all its descendants)."""

    def __init__(self, tree: bool) -> None:
        self.tree = tree
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> int:
        me = psutil.Process()
        procs = [me, *me.children(recursive=True)] if self.tree else [me]
        total = 0
        for proc in procs:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(0.02)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    rss: int  # bytes, the live processes of the tree
    cpu: float  # seconds, user + system, every process of the tree seen so far
    processes: int


@dataclass(frozen=True)
class Mark:
    at: float
    label: str
    sample: Sample


class TreeSampler:
    """RSS and CPU of the tree rooted at `pid`, sampled every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.root = psutil.Process(pid)
        self.interval = interval
        self.samples: list[Sample] = []
        self.marks: list[Mark] = []
        self._cpu: dict[tuple[int, float], float] = {}  # (pid, create_time) -> last cpu
        self._procs: dict[int, psutil.Process] = {pid: self.root}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)

    def _tree(self) -> list[psutil.Process]:
        try:
            children = self.root.children(recursive=True)
        except psutil.Error:
            children = []
        procs = [self.root]
        for child in children:
            # reuse the Process objects: psutil then notices a recycled pid
            known = self._procs.get(child.pid)
            if known is None or not known.is_running():
                self._procs[child.pid] = known = child
            procs.append(known)
        return procs

    def sample(self) -> Sample:
        with self._lock:
            rss = 0
            alive = 0
            for proc in self._tree():
                try:
                    with proc.oneshot():
                        times = proc.cpu_times()
                        key = (proc.pid, proc.create_time())
                        rss += proc.memory_info().rss
                except psutil.Error:
                    continue
                self._cpu[key] = times.user + times.system
                alive += 1
            taken = Sample(time.monotonic(), rss, sum(self._cpu.values()), alive)
            self.samples.append(taken)
            return taken

    def mark(self, label: str, at: float | None = None) -> Mark:
        """Sample now and record `label` at `at` (default: now)."""
        taken = self.sample()
        mark = Mark(taken.at if at is None else at, label, taken)
        with self._lock:
            self.marks.append(mark)
        return mark

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> TreeSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peak_between(self, start: float, end: float) -> int:
        """Peak RSS of the samples taken in [start, end] (bytes)."""
        with self._lock:
            inside = [s.rss for s in self.samples if start <= s.at <= end]
        return max(inside, default=0)
