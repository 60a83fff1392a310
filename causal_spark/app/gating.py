"""`--fail-on`: conditions on a run's findings that make the job exit 1 (docs/scheduling.md).

A condition is `NAME`, meaning `NAME > 0`, or `NAME OP N` with OP one of
`> >= < <= = !=`; several are separated by commas (`causal,fifo,quarantine>100`).
Each NAME is a count of the run's own findings: for an incremental audit, those of
the traces it (re)analysed. The conditions are checked after the run committed;
those that held are printed and the exit code is 1.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


class FailOnError(ValueError):
    """A --fail-on condition that cannot be parsed, or names a count the job lacks."""


@dataclass(frozen=True)
class Finding:
    """A count `--fail-on` can name: its key in `runs.counts` and the stage that makes it."""

    key: str
    stage: str
    text: str


FINDINGS: dict[str, Finding] = {
    "causal": Finding("violations_causal", "detect", "causal-order violation rows"),
    "fifo": Finding("violations_fifo", "detect", "FIFO violation rows"),
    "crown": Finding("crown_components", "detect", "crown components"),
    "invalid": Finding("class_INVALID", "detect", "INVALID traces (causal cycles)"),
    "async": Finding("class_ASYNC", "detect", "traces of order class ASYNC"),
    "unanalysable": Finding(
        "traces_unanalysable", "detect", "traces with no analysable event (no order class)"
    ),
    "quarantine": Finding("quarantine", "ingest", "quarantined rows"),
    "in_flight": Finding("in_flight", "ingest", "messages in flight"),
    "orphan": Finding("orphan", "ingest", "orphan receives"),
    "deadlock": Finding("replay_deadlock", "replay", "replay runs that deadlocked"),
    "unverified": Finding("replay_unverified", "replay", "replay runs that failed their check"),
    "new": Finding("new_findings", "detect", "findings that appeared since the previous run"),
}

_OPERATORS: dict[str, Callable[[int, int], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
}
_CONDITION = re.compile(r"^\s*([a-z_]+)\s*(?:(>=|<=|==|!=|>|<|=)\s*(\d+))?\s*$")


@dataclass(frozen=True)
class Condition:
    name: str
    op: str
    threshold: int

    def __str__(self) -> str:
        return f"{self.name} {self.op} {self.threshold}"

    @property
    def finding(self) -> Finding:
        return FINDINGS[self.name]

    def holds(self, value: int) -> bool:
        return _OPERATORS[self.op](value, self.threshold)


@dataclass(frozen=True)
class Outcome:
    condition: Condition
    value: int
    held: bool

    def line(self) -> str:
        state = "HELD" if self.held else "ok"
        return f"fail-on {state}: {self.condition} ({self.value} {self.condition.finding.text})"

    def as_json(self) -> dict[str, object]:
        return {"condition": str(self.condition), "value": self.value, "held": self.held}


def parse_conditions(text: str | None) -> list[Condition]:
    """The conditions of a `--fail-on` value (none for None)."""
    if text is None:
        return []
    conditions = []
    for part in text.split(","):
        match = _CONDITION.match(part)
        if not match or match.group(1) not in FINDINGS:
            raise FailOnError(
                f"--fail-on: cannot read condition {part.strip()!r}; write NAME or NAME OP N "
                f"(OP: > >= < <= = !=) with NAME one of {', '.join(FINDINGS)}"
            )
        name, op, threshold = match.group(1), match.group(2) or ">", int(match.group(3) or 0)
        conditions.append(Condition(name, op, threshold))
    return conditions


def require_stages(conditions: Sequence[Condition], command: str, stages: Sequence[str]) -> None:
    """Refuse a condition whose count the command's stages do not make."""
    missing = [c for c in conditions if c.finding.stage not in stages]
    if missing:
        names = ", ".join(f"'{c.name}' (needs {c.finding.stage})" for c in missing)
        raise FailOnError(
            f"--fail-on: '{command}' runs {', '.join(stages)} only; it cannot check {names}"
        )


def evaluate(conditions: Sequence[Condition], counts: Mapping[str, int]) -> list[Outcome]:
    outcomes = []
    for condition in conditions:
        value = int(counts.get(condition.finding.key, 0))
        outcomes.append(Outcome(condition, value, condition.holds(value)))
    return outcomes
