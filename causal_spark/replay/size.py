"""How much memory one (trace, protocol) replay takes, estimated before it runs (docs/replay.md).

The replay of one trace runs in one Python worker (`replay._replay_group`) and
holds the whole trace: the Arrow group, the layout, the engine's per-message
arrays, the protocol's state, the verification's vector clocks and the output
batches. `estimate_run_bytes` adds these up from the group's shape, so that a
group too big for its worker gets a `not_applicable` row instead of sinking the
job (`replay.max_run_bytes`). The model, and the measurements it was fitted to
(`bench/replay_memory.py`), are in docs/replay.md, "How big a trace one worker
replays".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# the worker's own allocations around one group, whatever its size (bytes)
BASE_BYTES = 16 << 20
# bytes per row of the group (one per internal event, send copy and receive) that each
# protocol holds at its peak: the Arrow batches in, the layout builder's narrow columns and
# the layout, the engine's per-message arrays, the figures and a deliveries batch. Measured
# peak per row (bench/replay.py --kernel, n = 16, 10^6 messages, where it is highest: 94-109
# bytes a row in the run of 2026-11-28 13:04 UTC; 10^7 gives a quarter less), rounded up to
# 5 bytes; see docs/replay.md.
ROW_BYTES: Mapping[str, int] = {
    "none": 100,
    "fifo": 105,
    "bss": 95,
    "ses": 105,
    "rst": 100,
    "mf": 105,
    "sa": 100,
    "sync": 110,
    "sequencer": 105,
    "lamport_total": 105,
    "skeen": 110,
}
# protocols whose verification keeps vector clocks (per process and per send in flight)
_VECTOR_CHECKED = frozenset({"fifo", "bss", "ses", "rst", "mf", "sa", "sync"})


@dataclass(frozen=True)
class GroupShape:
    """What the estimate needs of one trace: processes, rows, and the copies in flight at
    once in the recording (the protocols' per-message state lives while a copy is)."""

    n: int
    rows: int
    in_flight: int


def group_shape(table: pa.Table) -> GroupShape:
    """The shape of one trace's group of program rows (`replay.program_rows` columns)."""
    rows = table.num_rows
    if rows == 0:
        return GroupShape(0, 0, 0)
    n = int(pc.max(table.column("pidx")).as_py()) + 1
    kind = table.column("kind")
    ts = table.column("ts").to_numpy(zero_copy_only=False).astype(np.float64)
    if np.isnan(ts).any():
        ts = table.column("lamport").fill_null(0).to_numpy(zero_copy_only=False).astype(np.float64)
    sends = pc.equal(kind, "send").to_numpy(zero_copy_only=False).astype(bool)
    receives = pc.equal(kind, "receive").to_numpy(zero_copy_only=False).astype(bool)
    return GroupShape(n, rows, recorded_in_flight(ts, sends, receives))


def recorded_in_flight(ts: np.ndarray, sends: np.ndarray, receives: np.ndarray) -> int:
    """The most copies sent and not yet received at one time of the recording (a receive
    before a send at the same ts); lost copies stay in flight to the end."""
    step = sends.astype(np.int64) - receives.astype(np.int64)
    order = np.lexsort((-step, ts))  # at one ts, receives (-1) first
    if not len(order):
        return 0
    return max(int(np.cumsum(step[order]).max()), 0)


def pool_rows(in_flight: int) -> float:
    """Rows a protocol's pool (`structs.new_pool`) holds for `in_flight` send events: it
    starts at 64 and doubles, and while it grows the old rows live beside the new (x 1.5)."""
    return 1.5 * max(64, 1 << max(in_flight - 1, 0).bit_length())


# a trace whose every count fits int32 (`CompiledTrace.counter_type`: events + 5 x copies
# + 1 below 2^31) lets rst, sa and ses keep their integers as 4 bytes; rows >= events and
# >= copies, so 6 x rows + 1 below it is enough to know
_NARROW_ROWS = ((1 << 31) - 2) // 6


def state_bytes(protocol: str, n: int, in_flight: int, group_rows: int) -> int:
    """The protocol's own state: fixed arrays of n, n^2 or n^3 integers, and the pool row
    each send event in flight holds (its snapshot, shared by its copies); rst's, sa's and
    ses's integers 4 bytes for a group of up to `_NARROW_ROWS` rows, else 8."""
    word = 4 if group_rows <= _NARROW_ROWS else 8
    rows = pool_rows(in_flight)
    if protocol == "rst":  # a matrix per process; a send's matrix
        return int(word * (n**3 + n * n * rows))
    if protocol == "sa":  # dense M per process, DELIV; a send's matrices after and before
        return int(word * (n**3 + n * n + 2 * n * n * rows))
    if protocol == "ses":  # vector times, ORD_BUFF's pairs; VT(M), destinations and buffer
        return int(word * (2 * n * n + n**3 + (3 * n + n * n) * rows))
    if protocol == "bss":
        return int(8 * (n * n + n * rows))
    if protocol == "fifo":
        return 8 * 2 * n * n
    if protocol == "lamport_total":  # every send goes to all: its key is queued everywhere
        # per send in flight: a pool row (2n + 2) and n queue entries (2 words)
        return int(8 * rows * (4 * n + 2))
    return 0


def estimate_run_bytes(shape: GroupShape, protocol: str) -> int:
    """Estimated peak bytes of replaying a trace of this shape under `protocol`."""
    rows, n = shape.rows, shape.n
    total = BASE_BYTES + ROW_BYTES.get(protocol, max(ROW_BYTES.values())) * rows
    total += state_bytes(protocol, n, shape.in_flight, rows)
    if protocol in _VECTOR_CHECKED:  # the check as the replay runs: a vector clock (4 B x n)
        # per process and per send event in flight, a pool like the protocols'
        total += int(4 * n * (n + pool_rows(shape.in_flight)))
    return int(total)


def too_big(shape: GroupShape, protocol: str, limit: int | None) -> str | None:
    """The `not_applicable` reason when the estimate exceeds `limit`, else None."""
    if limit is None:
        return None
    estimate = estimate_run_bytes(shape, protocol)
    if estimate <= limit:
        return None
    return (
        f"estimated peak memory {_mib(estimate)} exceeds replay.max_run_bytes {_mib(limit)} "
        f"({shape.rows} rows, n = {shape.n}, up to {shape.in_flight} copies in flight; "
        "docs/replay.md)"
    )


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB ({size} B)"
