"""What each stage of a run counted, as typed records (printed by the CLI, kept in `runs`).

Each stage fills its own record; `RunCounts.flat()` is the `runs.counts` map
(string keys, one place), and `lines()` the summary the command line prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from causal_spark.anomalies import ORDER_CLASSES

VIOLATION_KINDS: tuple[str, ...] = ("fifo", "causal")


class AccountingError(RuntimeError):
    """Input rows were neither analysed nor quarantined (a bug: the run is not committed)."""


@dataclass(frozen=True)
class IngestCounts:
    """Every row read is an internal event, a send row, a receive row or quarantined."""

    rows_read: int
    internal_events: int
    send_events: int
    receive_events: int
    send_rows: int
    receive_rows: int
    quarantined: int
    in_flight: int
    orphan: int

    def require_accounted(self) -> None:
        accounted = self.internal_events + self.send_rows + self.receive_rows + self.quarantined
        if accounted != self.rows_read or self.receive_rows != self.receive_events:
            raise AccountingError(
                f"read {self.rows_read} rows but accounted for {accounted} "
                f"(internal {self.internal_events}, send rows {self.send_rows}, "
                f"receive rows {self.receive_rows}, quarantined {self.quarantined}; "
                f"receive events {self.receive_events})"
            )

    def flat(self) -> dict[str, int]:
        return {
            "rows_read": self.rows_read,
            "internal_events": self.internal_events,
            "send_events": self.send_events,
            "receive_events": self.receive_events,
            "send_rows": self.send_rows,
            "receive_rows": self.receive_rows,
            "in_flight": self.in_flight,
            "orphan": self.orphan,
        }

    def line(self) -> str:
        return (
            f"rows read {self.rows_read}: {self.internal_events} internal, "
            f"{self.send_rows} send, {self.receive_rows} receive, "
            f"{self.quarantined} quarantined; messages in flight "
            f"{self.in_flight}, orphan receives {self.orphan}"
        )


@dataclass(frozen=True)
class ClockCounts:
    traces: int
    invalid_traces: int
    clock_passes: int
    component_rounds: int
    # traces too wide for clocks.max_component_bytes: no vector clocks (trace_clocks.reason)
    not_applicable_traces: int = 0
    # events whose recorded clock differs from the computed one (`clock_mismatches`)
    clock_mismatches: int = 0

    def flat(self) -> dict[str, int]:
        return {
            "traces": self.traces,
            "invalid_traces": self.invalid_traces,
            "not_applicable_traces": self.not_applicable_traces,
            "clock_passes": self.clock_passes,
            "component_rounds": self.component_rounds,
            "clock_mismatches": self.clock_mismatches,
        }

    def line(self) -> str:
        mismatches = (
            f"; recorded clocks that differ from the computed ones: {self.clock_mismatches}"
            if self.clock_mismatches
            else ""
        )
        wide = (
            f", {self.not_applicable_traces} not_applicable (too wide: no vector clocks, "
            "trace_clocks.reason)"
            if self.not_applicable_traces
            else ""
        )
        return (
            f"clocks: {self.traces} trace(s), {self.invalid_traces} INVALID "
            f"(causal cycle){wide}; {self.clock_passes} clock pass(es), "
            f"{self.component_rounds} component round(s){mismatches}"
        )


@dataclass(frozen=True)
class DetectCounts:
    violations: int
    crowns: int
    by_class: Mapping[str, int]
    # violation rows by kind (`fifo`, `causal`)
    by_kind: Mapping[str, int] = field(default_factory=dict)
    # traces with no analysable event: no order class (trace_summary.order_class_reason)
    unanalysable: int = 0
    # traces too large for a task (clocks.max_component_bytes, detect.max_trace_bytes): not
    # analysed, no order class (order_class_reason says why, with the estimate)
    too_large: int = 0

    def flat(self) -> dict[str, int]:
        flat = {f"class_{name}": int(self.by_class.get(name, 0)) for name in ORDER_CLASSES}
        for kind in VIOLATION_KINDS:
            flat[f"violations_{kind}"] = int(self.by_kind.get(kind, 0))
        flat["crown_components"] = self.crowns
        flat["traces_unanalysable"] = self.unanalysable
        flat["traces_too_large"] = self.too_large
        return flat

    def line(self) -> str:
        classes = ", ".join(f"{name} {self.by_class.get(name, 0)}" for name in ORDER_CLASSES)
        none = (
            f"; traces with no analysable event (no order class): {self.unanalysable}"
            if self.unanalysable
            else ""
        )
        if self.too_large:
            none += f"; traces too large to analyse (no order class): {self.too_large}"
        return (
            f"detect: {self.violations} violation row(s), "
            f"{self.crowns} crown component(s); traces by order class: {classes}{none}"
        )


@dataclass(frozen=True)
class ReplayCounts:
    by_status: Mapping[str, int]
    unverified: int

    def flat(self) -> dict[str, int]:
        flat = {f"replay_{status}": int(n) for status, n in self.by_status.items()}
        flat["replay_unverified"] = self.unverified
        return flat

    def line(self) -> str:
        statuses = ", ".join(f"{status} {n}" for status, n in sorted(self.by_status.items()))
        return f"replay: runs by status: {statuses}; verification failed: {self.unverified}"


@dataclass
class RunCounts:
    """The rows staged per table and each stage's own record (None: the stage did not run)."""

    rows: dict[str, int] = field(default_factory=dict)
    ingest: IngestCounts | None = None
    clocks: ClockCounts | None = None
    detect: DetectCounts | None = None
    replay: ReplayCounts | None = None

    def flat(self) -> dict[str, int]:
        """The `runs.counts` map: rows per table, then every stage's counts."""
        flat = dict(self.rows)
        for record in (self.ingest, self.clocks, self.detect, self.replay):
            if record is not None:
                flat.update(record.flat())
        return flat

    def lines(self) -> list[str]:
        return [
            record.line()
            for record in (self.ingest, self.clocks, self.detect, self.replay)
            if record is not None
        ]
