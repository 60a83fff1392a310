"""The clock kernel for many whole units in one call (the per-trace engine's groups).

Pure NumPy in, NumPy out, compiled with Numba; no Spark here. A group of the
per-trace engine holds many independent units (whole components of traces),
laid out unit after unit; `units_clocks_at` runs `causal_spark.clocks.kernel`'s
traversal over each unit that has wanted rows, in one compiled call, and writes
each wanted row's clocks where it belongs. A unit too large for a dense
(events x n) matrix, or large and mostly not wanted here, runs the rolling
traversal (`export_clocks`'), which keeps rows only while they are needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from causal_spark.clocks.kernel import (
    GroupShapeError,
    _advance,
    _clocks,
    _export_clocks,
    group_layout,
)


@njit(cache=True)
def _rolling(rows: int, n: int, wanted: int, dense_max_cells: int, rolling_min_cells: int) -> bool:
    """Whether a unit of `rows` x `n` entries, `wanted` of its rows wanted, runs the rolling
    kernel: when a dense matrix would not fit, or when it is large and at least a quarter
    of it would be computed only to be thrown away."""
    cells = rows * n
    return cells > dense_max_cells or (cells >= rolling_min_cells and 4 * wanted <= 3 * rows)


def _units_kernel(with_rolling: bool):  # type: ignore[no-untyped-def]
    """The units kernel; `with_rolling` False: one that cannot run the rolling traversal.

    Numba drops the branch on the closure's constant before typing, so the dense-only
    kernel never compiles `_export_clocks` (about 8 of its 12.5 CPU-s cold): a run
    whose units all fit the dense matrix (every small input) compiles the smaller one.
    `units_clocks_at` picks it only where no unit can roll; the two are otherwise one
    function, so their rows are the same. Each has a name of its own, so each has its own
    disk-cache index (one index for both would let two processes saving one variant each
    at once give both entries one data file)."""

    def kernel(
        unit_row: np.ndarray,
        unit_proc: np.ndarray,
        start: np.ndarray,
        length: np.ndarray,
        send_event: np.ndarray,
        out_rows: np.ndarray,
        out_pos: np.ndarray,
        vectors: np.ndarray,
        dense_max_cells: int,
        rolling_min_cells: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        units = unit_row.shape[0] - 1
        wanted = out_rows.shape[0]
        # each wanted row's unit (out_rows ascend: a walk, not np.searchsorted, which is
        # slow to compile)
        out_unit = np.empty(wanted, dtype=np.int64)
        u = 0
        for i in range(wanted):
            while out_rows[i] >= unit_row[u + 1]:
                u += 1
            out_unit[i] = u
        offsets = np.zeros(wanted + 1, dtype=np.int64)
        in_order = True
        for i in range(wanted):
            u = out_unit[i]
            offsets[out_pos[i] + 1] = unit_proc[u + 1] - unit_proc[u] if vectors[u] else 0
            in_order = in_order and out_pos[i] == i
        for i in range(wanted):
            offsets[i + 1] += offsets[i]
        lamport = np.empty(wanted, dtype=np.int64)
        ok = np.ones(units, dtype=np.bool_)
        # one unit whose every row is wanted in order (a large trace) keeps the kernel's buffer
        whole = units == 1 and vectors[0] and in_order and wanted == unit_row[units] - unit_row[0]
        # a unit too large for a dense matrix, alone here: the rolling kernel's output rows are
        # the output (it writes each wanted row at its output position)
        alone_rolling = units == 1 and vectors[0] and _rolling(
            unit_row[1] - unit_row[0], unit_proc[1] - unit_proc[0], wanted, dense_max_cells,
            rolling_min_cells,
        )  # fmt: skip
        flat = np.empty(0 if whole or alone_rolling else offsets[wanted], dtype=np.int32)
        lo = 0
        for u in range(units):
            hi = lo
            while hi < wanted and out_rows[hi] < unit_row[u + 1]:
                hi += 1
            if hi == lo:
                continue  # nothing of this unit is wanted here
            r0, r1 = unit_row[u], unit_row[u + 1]
            p0, p1 = unit_proc[u], unit_proc[u + 1]
            n = p1 - p0
            local_start = start[p0:p1] - r0
            if r0 == 0:
                local_send = send_event[r0:r1]  # read only: no copy of an events-sized array
            else:
                local_send = send_event[r0:r1].copy()
                for i in range(r1 - r0):
                    if local_send[i] >= 0:
                        local_send[i] -= r0
            if not vectors[u]:
                # too wide for vectors (`clocks.size`): Lamport clocks only, O(events) memory
                lam = np.empty(r1 - r0, dtype=np.int64)
                ptr = _advance(local_start, length[p0:p1], local_send, lam)
                for p in range(n):
                    if ptr[p] < local_start[p] + length[p0 + p]:
                        ok[u] = False
                for i in range(lo, hi):
                    lamport[out_pos[i]] = lam[out_rows[i] - r0]
                lo = hi
                continue
            rolling = _rolling(r1 - r0, n, hi - lo, dense_max_cells, rolling_min_cells)
            if rolling and not with_rolling:
                raise ValueError("a unit needs the rolling kernel: call _units_clocks")
            if rolling and with_rolling:
                # rows kept: the wanted ones, one per process, the sends in flight
                export_of = np.full(r1 - r0, -1, dtype=np.int64)
                for i in range(lo, hi):
                    export_of[out_rows[i] - r0] = out_pos[i] if alone_rolling else i - lo
                vc, lam, _, ptr, _ = _export_clocks(
                    local_start,
                    length[p0:p1],
                    np.ones(n, dtype=np.int64),
                    local_send,
                    np.full(r1 - r0, -1, dtype=np.int64),
                    np.zeros((0, n), dtype=np.int32),  # no seeds (it keeps its own n x n rows)
                    np.zeros(n, dtype=np.int64),
                    np.zeros((0, n), dtype=np.int32),
                    np.zeros(0, dtype=np.int64),
                    np.full(n, -1, dtype=np.int64),
                    np.zeros(0, dtype=np.int64),
                    0,
                    export_of,
                    hi - lo,
                )
            else:
                vc, lam, _, ptr = _clocks(
                    local_start,
                    length[p0:p1],
                    np.ones(n, dtype=np.int64),
                    local_send,
                    np.full(r1 - r0, -1, dtype=np.int64),
                    np.zeros((0, n), dtype=np.int32),  # no seeds: no n x n matrix
                    np.zeros(n, dtype=np.int64),
                    np.zeros((0, n), dtype=np.int32),
                    np.zeros(0, dtype=np.int64),
                    np.full(n, -1, dtype=np.int64),
                    np.zeros(0, dtype=np.int64),
                    0,
                )
            for p in range(n):
                if ptr[p] < local_start[p] + length[p0 + p]:
                    ok[u] = False
            # element loops, not slice assignments: Numba's shape check of a slice
            # assignment compiles its error message (about 2.5 of the kernel's CPU-s cold)
            if alone_rolling or whole:
                flat = vc.reshape(-1)
                for i in range(wanted):
                    lamport[i] = lam[i]
            else:
                for i in range(lo, hi):
                    e = i - lo if rolling else out_rows[i] - r0
                    at = out_pos[i]
                    lamport[at] = lam[e]
                    for j in range(n):
                        flat[offsets[at] + j] = vc[e, j]
            lo = hi
        return flat, offsets, lamport, ok

    name = "_units_clocks" if with_rolling else "_dense_units_clocks"
    kernel.__qualname__ = kernel.__name__ = name
    return njit(cache=True, nogil=True)(kernel)


_units_clocks = _units_kernel(True)
_dense_units_clocks = _units_kernel(False)


# Above this many vector entries (int32) a unit's clocks are computed keeping only the rows
# still needed: 2^30 entries are 4 GB, and the per-trace engine runs one kernel per output
# part at once (10^7 events x 256 processes, dense, did not fit two parts in 24 GiB).
DENSE_MAX_CELLS = 1 << 30
# From this many entries (256 MB) a unit of which at most 3/4 of the rows are wanted (an
# output part of a large trace) also runs the rolling kernel. Its compute is about twice
# the dense kernel's, but the dense matrix is fresh memory the part only partly needs, and
# first touching memory is what the dense kernel spent most of its time on in a Spark task
# (10^7 x 64, one of two parts: 1.06 * 10^6 page faults, 6.5 of 7.3 s in the kernel).
ROLLING_MIN_CELLS = 1 << 26


def _kernel_for(
    unit_row: np.ndarray,
    unit_proc: np.ndarray,
    vectors: np.ndarray,
    dense_max_cells: int,
    rolling_min_cells: int,
) -> Any:
    """The units kernel for these units: a unit with vectors rolls only from
    min(rolling_min_cells, dense_max_cells + 1) cells (`_rolling`); where none is that
    large, the kernel compiled without the rolling traversal."""
    cells = np.diff(unit_row) * np.diff(unit_proc) * vectors
    bound = min(rolling_min_cells, dense_max_cells + 1)
    return _units_clocks if len(cells) and int(cells.max()) >= bound else _dense_units_clocks


@dataclass(frozen=True)
class UnitsClocks:
    vc: np.ndarray  # the vectors of the wanted rows, row after row (each has its unit's n entries)
    offsets: np.ndarray  # wanted rows + 1: wanted row i is vc[offsets[i]:offsets[i + 1]]
    lamport: np.ndarray  # per wanted row, int64
    ok: np.ndarray  # units: False where the unit's matched ids form a causal cycle


def units_clocks_at(
    unit_row: np.ndarray,
    unit_proc: np.ndarray,
    length: np.ndarray,
    send_event: np.ndarray,
    out_rows: np.ndarray,
    out_pos: np.ndarray | None = None,
    dense_max_cells: int | None = None,
    rolling_min_cells: int | None = None,
    vectors: np.ndarray | None = None,
) -> UnitsClocks:
    """Clocks of some rows of many independent units (whole components), in one call.

    Rows are laid out unit after unit, process after process: global process q
    (unit u owns processes unit_proc[u] .. unit_proc[u+1]-1, its n = their count)
    has `length[q]` rows, its lseq 1, 2, ... in order, and unit u owns rows
    unit_row[u] .. unit_row[u+1]-1 (unit_row[u] = the first row of its first
    process). send_event: for a receive, the row of its send (in the same unit),
    -1 elsewhere. out_rows: the rows wanted, ascending; only the units they fall
    in are computed, each over all its rows (a row's clocks need its causal past).
    out_pos: where each wanted row goes in the output (a permutation of
    0..len(out_rows)-1; in order when not given), so a caller need not reorder
    its rows to match. A unit with a causal cycle gets ok False (its clocks are
    meaningless); run `group_clocks` on it for a witness.

    A unit of more than `dense_max_cells` vector entries (default `DENSE_MAX_CELLS`)
    runs the rolling kernel (`export_clocks`' traversal): it holds the wanted rows,
    one row per process and the sends in flight, not a row per event; slower per
    event (3-5x when every row is wanted, 2x for half of them), so only where the dense
    matrix would not fit, or where it is large (`rolling_min_cells`, default
    `ROLLING_MIN_CELLS`) and at most 3/4 of its rows are wanted (fresh memory, which the
    dense matrix is, costs more than the extra compute).

    vectors: per unit, whether to compute its vector clocks (default: every unit). A unit
    without gets its Lamport clocks only, from the traversal alone (O(events) memory,
    whatever n): its wanted rows have no entries in `vc` (offsets[i + 1] = offsets[i]).
    """
    # copy=False: the events-sized arrays are usually int64 already (no fresh pages)
    unit_row = unit_row.astype(np.int64, copy=False)
    unit_proc = unit_proc.astype(np.int64, copy=False)
    length = length.astype(np.int64, copy=False)
    start = np.zeros(len(length), dtype=np.int64)
    np.cumsum(length[:-1], out=start[1:])
    if len(unit_row) > 1 and not np.array_equal(start[unit_proc[:-1]], unit_row[:-1]):
        raise GroupShapeError("unit_row does not match the processes' rows (unit_proc, length)")
    out_rows = out_rows.astype(np.int64, copy=False)
    if len(out_rows) and (
        np.any(np.diff(out_rows) <= 0) or out_rows[0] < 0 or out_rows[-1] >= unit_row[-1]
    ):
        raise GroupShapeError("out_rows must be distinct rows of the units, ascending")
    if out_pos is None:
        out_pos = np.arange(len(out_rows), dtype=np.int64)
    out_pos = out_pos.astype(np.int64, copy=False)
    if len(out_pos) != len(out_rows) or not np.array_equal(
        np.bincount(out_pos, minlength=len(out_rows)), np.ones(len(out_rows), dtype=np.int64)
    ):
        raise GroupShapeError("out_pos must be a permutation of the wanted rows' indices")
    units = len(unit_row) - 1
    vectors = np.ones(units, dtype=np.bool_) if vectors is None else vectors.astype(np.bool_)
    if len(vectors) != units:
        raise GroupShapeError(f"vectors must have one entry per unit ({units}), not {len(vectors)}")
    dense_max = DENSE_MAX_CELLS if dense_max_cells is None else dense_max_cells
    rolling_min = ROLLING_MIN_CELLS if rolling_min_cells is None else rolling_min_cells
    kernel = _kernel_for(unit_row, unit_proc, vectors, dense_max, rolling_min)
    vc, offsets, lamport, ok = kernel(
        unit_row,
        unit_proc,
        start,
        length,
        send_event.astype(np.int64, copy=False),
        out_rows,
        out_pos,
        vectors,
        dense_max,
        rolling_min,
    )
    return UnitsClocks(vc, offsets, lamport, ok)


def units_clocks(
    unit_row: np.ndarray,
    unit_proc: np.ndarray,
    proc: np.ndarray,
    lseq: np.ndarray,
    send_event: np.ndarray,
    vectors: np.ndarray | None = None,
) -> UnitsClocks:
    """Clocks of every row of many independent units (whole components), without seeds.

    Units are consecutive: unit u is rows unit_row[u] .. unit_row[u+1]-1 and
    processes unit_proc[u] .. unit_proc[u+1]-1 (its n = their count). proc: the
    global process (unit_proc[u] + pidx) of each row, rows sorted by (proc,
    lseq); lseq 1..N_p per process. send_event: for a receive, the row of its
    send (in the same unit), -1 elsewhere. vectors: per unit, whether to compute its
    vector clocks (default: all; without, Lamport clocks only). See `units_clocks_at`.
    """
    processes = int(unit_proc[-1])
    _, first_lseq = group_layout(proc, lseq, processes)
    if np.any(first_lseq != 1):
        raise GroupShapeError("a whole unit's processes start at lseq 1")
    length = np.bincount(proc, minlength=processes).astype(np.int64)
    return units_clocks_at(
        unit_row, unit_proc, length, send_event, np.arange(len(proc)), vectors=vectors
    )
