"""Why rows cannot form programs: the reference engine's error for a trace the layout refuses.

`layout.LayoutBuilder` places rows by their coordinates without sorting
them; when a row does not fit (a bad kind, a jump in lseq, two rows for one
event, two copies to one destination, a send or receive without msg_id) it
calls `first_error`, which sorts the rows as the reference engine's trace builder
(tests/oracles/replay) reads them, (pidx, lseq, peer), and names the first bad one in
the reference's words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numba import njit

from causal_spark.replay.model import INTERNAL, KIND_CODES, SEND, TraceShapeError

# what `_scan` (and the layout's placing kernels) find
OK, BAD_ROW, JUMP, TWO_ROWS, NO_MSG_ID, TWO_COPIES = range(6)
_KIND_NAMES = {code: name for name, code in KIND_CODES.items()}


def first_error(
    trace_id: str,
    names: list[str],
    chunks: Sequence[Any],
    odd: Mapping[tuple[int, int], str | None],
) -> TraceShapeError:
    """The reference's error for these rows (`chunks`: the layout's narrow columns, `p`,
    `lseq`, `kind`, `peer` per chunk; `odd`: (chunk, row) -> the kind text of a row whose
    kind is unknown, or None for a send or receive without msg_id): the first bad row in
    (pidx, lseq, peer) order, as the reference engine's trace builder meets it."""
    pidx = np.concatenate([np.empty(0, np.int64), *[x.p for x in chunks]]).astype(np.int64)
    lseq = np.concatenate([np.empty(0, np.int64), *[x.lseq for x in chunks]]).astype(np.int64)
    code = np.concatenate([np.empty(0, np.int64), *[x.kind for x in chunks]]).astype(np.int64)
    peer = np.concatenate([np.empty(0, np.int64), *[x.peer for x in chunks]]).astype(np.int64)
    offsets = np.cumsum([0, *[len(x.p) for x in chunks]])
    text: dict[int, str | None] = {int(offsets[k]) + r: t for (k, r), t in odd.items()}
    unnamed = np.zeros(len(pidx), bool)
    for row, t in text.items():
        if t is None:
            unnamed[row] = True
    order = np.lexsort((peer, lseq, pidx))
    error, at, before = _scan(
        pidx[order], lseq[order], code[order], peer[order], unnamed[order], len(names)
    )
    if not error:
        return TraceShapeError(f"trace {trace_id}: rows that cannot form programs")
    row = int(order[at])
    p = int(pidx[row])
    what = text.get(row) or _KIND_NAMES.get(int(code[row]), "?")
    if error == BAD_ROW:
        return TraceShapeError(f"trace {trace_id}: bad event row (process {p}, kind {what})")
    name = names[p]
    if error == JUMP:
        return TraceShapeError(
            f"trace {trace_id}: process {name} jumps to lseq {lseq[row]} after {before}"
        )
    if error == TWO_ROWS:
        return TraceShapeError(f"trace {trace_id}: two rows for event {name}#{lseq[row]}")
    if error == TWO_COPIES:
        return TraceShapeError(
            f"trace {trace_id}: send {name}#{lseq[row]} has two copies to one destination"
        )
    return TraceShapeError(f"trace {trace_id}: {what} {name}#{lseq[row]} has no msg_id")


@njit(cache=True)
def _scan(p_of, q_of, code_of, peer_of, unnamed, n):  # type: ignore[no-untyped-def]
    """The reference's checks over rows sorted by (pidx, lseq, peer): (error, row, the lseq
    before a jump) of the first bad row, error 0 when none."""
    last = np.zeros(n, np.int64)
    last_code = np.full(n, -1, np.int64)
    last_peer = np.full(n, -2, np.int64)
    for row in range(len(p_of)):
        p = p_of[row]
        q = q_of[row]
        code = code_of[row]
        if code < 0 or p < 0 or p >= n:
            return BAD_ROW, row, 0
        if last[p] != q:
            if q != last[p] + 1:
                return JUMP, row, last[p]
            last[p] = q
            last_code[p] = code
        elif code != SEND or last_code[p] != SEND:
            return TWO_ROWS, row, 0
        elif peer_of[row] == last_peer[p] and peer_of[row] >= 0:
            return TWO_COPIES, row, 0
        last_peer[p] = peer_of[row]
        if code != INTERNAL and unnamed[row]:
            return NO_MSG_ID, row, 0
    return OK, 0, 0
