"""What a replay is made of: event kinds, run statuses, the run record (docs/replay.md).

Shared by the Spark adapter, the layout, the compiled loop and the reference
engine the tests hold the loop to (`tests/oracles/replay/`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

SEND, RECEIVE, INTERNAL = 0, 1, 2
KIND_CODES: Mapping[str, int] = {"send": SEND, "receive": RECEIVE, "internal": INTERNAL}
EXTERNAL = -1  # source of an orphan's message when its sender is not a process of the trace

# the column of `protocol_runs` and `deliveries` that names the protocol
PROTOCOL = "protocol"

STATUS_OK = "ok"
STATUS_DEADLOCK = "deadlock"
STATUS_STALLED = "stalled"
STATUS_NOT_APPLICABLE = "not_applicable"
STATUS_ERROR = "error"


class TraceShapeError(ValueError):
    """A trace's rows cannot form programs (a bug upstream, or a bad table)."""


# a per-message column of a Run: a list from this engine, an array from the compiled one
FloatColumn = Sequence[float | None] | np.ndarray
IntColumn = Sequence[int | None] | np.ndarray
BoolColumn = Sequence[bool | None] | np.ndarray


@dataclass
class Run:
    """The result of one protocol over one trace (one `protocol_runs` row and its deliveries).

    The per-message columns are lists with None from this engine, and arrays from
    the compiled one (`run.CompiledRun`): NaN for a missing time, -1 for a missing
    receive or piggyback, 1.0 / 0.0 / NaN for held_back.
    """

    status: str
    reason: str | None
    verified: bool | None
    figures: dict[str, float | int | None]
    send_time: FloatColumn
    post_time: FloatColumn
    arrival_time: FloatColumn
    delivery_time: FloatColumn
    take_time: FloatColumn
    taken_by: IntColumn
    piggyback: IntColumn
    held_back: BoolColumn


@dataclass
class Execution:
    """What one replay did: the record its figures (`figures.py`) and its verification
    (`verify.py`) are computed from, once.

    Per message, in layout order: its send, post, delivery and take times (NaN where it
    has none), the receive that took it (its lseq, -1 for none), its piggybacked integers
    (-1 for none) and whether it reached its receiver's transport. Per process: how many
    of its events completed and when the last one did. And the run's counters.
    """

    send_time: np.ndarray
    post_time: np.ndarray
    delivery_time: np.ndarray
    take_time: np.ndarray
    taken_by: np.ndarray
    piggyback: np.ndarray
    arrived: np.ndarray
    completed: np.ndarray
    now: np.ndarray
    control_messages: int
    control_ints: int
    max_holdback_buffer: int
    # the inline check (FIFO or causal order) met a violation as the loop ran
    violated: bool

    @classmethod
    def empty(cls, messages: int, processes: int) -> Execution:
        """The record of a run that did not start (`not_applicable`)."""
        nan = np.full(messages, np.nan)
        none = np.full(messages, -1, np.int32)
        zeros = np.zeros(processes, np.int64)
        return cls(
            nan, nan, nan, nan, none, none, np.zeros(messages, bool), zeros,
            np.zeros(processes), 0, 0, 0, False,
        )  # fmt: skip
