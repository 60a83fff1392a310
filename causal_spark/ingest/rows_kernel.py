"""The rows of ingest's steps 2 and 3 as Arrow: their schemas, the markers and the
small array helpers the rules of `kernel` are written with. No Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from causal_spark import columns as C

# a detail that points at another row says where it is with this placeholder
REF = "\u0001ref\u0001"
MISSING_SEQ = "missing seq (other rows of this file have one)"

FILE_ID = "file_id"
# the clock a log recorded for a row (ShiViz, dctracing): process name -> count
RECORDED_VC = "recorded_vc"
RECORDED_MAP = pa.map_(pa.string(), pa.int64())
SUB = "sub"
PPROC = "pproc"  # the process, or a spread key for rows rejected in step 1
SEQ_GIVEN = "seq_given"
PARSED = "parsed"
PRE = "pre"
POST = "post"
RISKY = "risky"
REF_FILE = "ref_file"
REF_LINE = "ref_line"
STEP1 = "step1"  # a row rejected by the row-local rules: its detail is `pre` + `post`
EXCLUDED = "excluded"  # a typed-rows marker: the row with these ids is rejected later

# what step 1 hands to step 2 (one row per input row, and markers of later rejections)
TYPED = pa.schema(
    [
        (FILE_ID, pa.int32()),
        (C.LINE, pa.int64()),
        (SUB, pa.int64()),
        (C.RAW, pa.string()),
        (C.TRACE_ID, pa.string()),
        (PPROC, pa.string()),
        (C.SEQ, pa.int64()),
        (C.KIND, pa.string()),
        (C.MSG_ID, pa.string()),
        (C.PEER, pa.string()),
        (C.TS, pa.float64()),
        (C.SIZE_BYTES, pa.int64()),
        (C.LABEL, pa.string()),
        (RECORDED_VC, RECORDED_MAP),
        (SEQ_GIVEN, pa.bool_()),
        (PARSED, pa.bool_()),
        (C.REASON, pa.string()),
        (PRE, pa.string()),
        (POST, pa.string()),
        (EXCLUDED, pa.bool_()),
    ]
)

# the send and receive rows step 2 keeps, for step 3 (lseq: the event's, in its process)
ENDS = pa.schema(
    [
        (C.TRACE_ID, pa.string()),
        (C.MSG_ID, pa.string()),
        (C.PROCESS, pa.string()),
        (C.KIND, pa.string()),
        (C.PEER, pa.string()),
        (C.TS, pa.float64()),
        (C.SIZE_BYTES, pa.int64()),
        (C.LSEQ, pa.int64()),
        (RISKY, pa.bool_()),
        (FILE_ID, pa.int32()),
        (C.LINE, pa.int64()),
        (SUB, pa.int64()),
    ]
)

# events as step 2 finds them (pidx and the file's name are added when they are written)
EVENTS = pa.schema(
    [
        (C.TRACE_ID, pa.string()),
        (C.PROCESS, pa.string()),
        (C.LSEQ, pa.int64()),
        (C.KIND, pa.string()),
        (C.TS, pa.float64()),
        (C.LABEL, pa.string()),
        (C.N_MSGS, pa.int32()),
        (C.SEQ, pa.int64()),
        (FILE_ID, pa.int32()),
        (C.LINE, pa.int64()),
        (RECORDED_VC, RECORDED_MAP),
    ]
)

# messages as step 3 finds them (src_pidx and dst_pidx are added when they are written)
MESSAGES = pa.schema(
    [
        (C.TRACE_ID, pa.string()),
        (C.MSG_ID, pa.string()),
        (C.SRC, pa.string()),
        (C.DST, pa.string()),
        (C.SEND_LSEQ, pa.int64()),
        (C.RECV_LSEQ, pa.int64()),
        (C.SEND_TS, pa.float64()),
        (C.RECV_TS, pa.float64()),
        (C.SIZE_BYTES, pa.int64()),
        (C.STATUS, pa.string()),
    ]
)

# a rejected row: where it is, why, and (for rows rejected after step 1) the row a
# detail points at; `process` is the row's process (the key it was grouped by)
REJECTS = pa.schema(
    [
        (FILE_ID, pa.int32()),
        (C.LINE, pa.int64()),
        (SUB, pa.int64()),
        (C.TRACE_ID, pa.string()),
        (C.PROCESS, pa.string()),
        (C.REASON, pa.string()),
        (C.DETAIL, pa.string()),
        (REF_FILE, pa.int32()),
        (REF_LINE, pa.int64()),
        (STEP1, pa.bool_()),
        (C.RAW, pa.string()),
        (PRE, pa.string()),
        (POST, pa.string()),
        (PARSED, pa.bool_()),
        (SEQ_GIVEN, pa.bool_()),
    ]
)

# per (file, trace): the rows read, whether any gives `seq`, whether an accepted one lacks it
FACTS = pa.schema(
    [
        (FILE_ID, pa.int32()),
        (C.TRACE_ID, pa.string()),
        ("rows", pa.int64()),
        ("has_seq", pa.bool_()),
        ("has_noseq", pa.bool_()),
    ]
)

# the processes with an event (pidx numbers them per trace, by name)
PROCS = pa.schema([(C.TRACE_ID, pa.string()), (C.PROCESS, pa.string())])

# a message of a multicast event with a copy that names no destination: after matching,
# its destination is known, and a second copy to one destination is a duplicate_event
RISKY_MESSAGES = pa.schema(
    [
        (C.TRACE_ID, pa.string()),
        (C.MSG_ID, pa.string()),
        ("sender", pa.string()),
        ("send_lseq", pa.int64()),
        (C.DST, pa.string()),
        ("send_file", pa.int32()),
        ("send_line", pa.int64()),
        ("send_sub", pa.int64()),
        ("receiver", pa.string()),
        ("recv_file", pa.int32()),
        ("recv_line", pa.int64()),
        ("recv_sub", pa.int64()),
    ]
)

KINDS = (C.SEND, C.RECEIVE, C.INTERNAL)
SEND_CODE, RECEIVE_CODE, INTERNAL_CODE = range(3)


@dataclass(frozen=True)
class JudgedEvents:
    """What step 2 makes of one task's rows."""

    events: pa.Table  # EVENTS
    ends: pa.Table  # ENDS
    rejects: pa.Table  # REJECTS
    facts: pa.Table  # FACTS
    procs: pa.Table  # PROCS


@dataclass(frozen=True)
class JudgedMessages:
    """What step 3 makes of one task's message ends."""

    messages: pa.Table  # MESSAGES
    rejects: pa.Table  # REJECTS
    risky: pa.Table  # RISKY_MESSAGES


def codes_of(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer codes of a column's values (equal values, equal codes); null: -1."""
    return encoded(column)[0]


def encoded(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """`codes_of` and the values they stand for (`values_at` turns codes back to values)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = pc.dictionary_encode(column)
    indices = encoded.indices
    if indices.null_count:
        indices = indices.fill_null(-1)
    codes: np.ndarray = indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return codes, encoded.dictionary


def values_at(values: pa.Array, codes: np.ndarray) -> pa.Array:
    """The values that `codes` stand for (code -1: null): a gather from the few distinct
    values, cheaper than gathering strings from the whole column."""
    missing = codes < 0
    if missing.any():
        return values.take(pa.array(np.where(missing, 0, codes), pa.int64(), mask=missing))
    return values.take(pa.array(codes, pa.int64()))


def shared_codes(*columns: pa.ChunkedArray) -> list[np.ndarray]:
    """Codes over several string columns at once: equal strings, equal codes, across them."""
    joined = pa.chunked_array([chunk for col in columns for chunk in col.chunks], pa.string())
    codes = codes_of(joined)
    out, start = [], 0
    for col in columns:
        out.append(codes[start : start + len(col)])
        start += len(col)
    return out


def int_values(column: pa.ChunkedArray, fill: int = 0) -> np.ndarray:
    if column.null_count:
        column = column.fill_null(fill)
    values: np.ndarray = np.asarray(column.to_numpy(), dtype=np.int64)
    return values


def run_starts(*keys: np.ndarray) -> np.ndarray:
    """Where a run of equal keys begins, in sorted arrays: a boolean mask."""
    n = len(keys[0]) if keys else 0
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for key in keys:
            new[1:] |= key[1:] != key[:-1]
    return new


def sort_order(*keys: np.ndarray) -> np.ndarray:
    """The stable order of rows by `keys`, most significant first: `np.lexsort` of the
    reversed keys, as one stable argsort of a single integer key where the keys' ranges
    fit in one (a constant key costs nothing): about four times faster on 10^6 rows."""
    n = len(keys[0]) if keys else 0
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    combined = np.zeros(n, dtype=np.int64)
    span = 1
    for key in keys:
        values = np.asarray(key).astype(np.int64, copy=False)
        low, high = int(values.min()), int(values.max())
        width = high - low + 1
        if width == 1:
            continue
        if span * width >= 1 << 62:
            # number the distinct prefixes densely, and try again
            _, ranks = np.unique(combined, return_inverse=True)
            combined, span = ranks.astype(np.int64).reshape(-1), int(ranks.max()) + 1
            if span * width >= 1 << 62:
                return np.lexsort(tuple(reversed(keys)))
        combined = combined * width + (values - low)
        span *= width
    order: np.ndarray = np.argsort(combined, kind="stable")
    return order


def is_member(rows: Sequence[np.ndarray], wanted: Sequence[np.ndarray]) -> np.ndarray:
    """Which rows' key tuples are among `wanted`'s (a merge of the two sorted lists)."""
    n, m = len(rows[0]), len(wanted[0])
    if n == 0 or m == 0:
        return np.zeros(n, dtype=bool)
    keys = [np.concatenate([r, w]) for r, w in zip(rows, wanted, strict=True)]
    side = np.concatenate([np.zeros(n, dtype=np.int8), np.ones(m, dtype=np.int8)])
    # wanted first among equal keys, so a row follows the marker of its own key
    order = np.lexsort((-side, *reversed(keys)))
    run = np.cumsum(run_starts(*[k[order] for k in keys])) - 1
    marked = np.zeros(run[-1] + 1, dtype=bool)
    marked[run[side[order] == 1]] = True
    found = np.zeros(n + m, dtype=bool)
    found[order] = marked[run]
    return found[:n]


_PRIME = np.uint64(1099511628211)  # FNV-1's 64-bit prime
_HEAD = 4096  # values `string_hashes` looks at to tell a key that repeats


def string_hashes(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A 64-bit hash of each string's UTF-8 bytes (a polynomial in the FNV prime, wrapping),
    the same in every process; null hashes as "". Each distinct value is hashed once
    (keys repeat: a trace id on every row), vectorised over its bytes: no loop; a column
    of mostly distinct values (message ids) is hashed value by value instead (encoding
    it first cost 5x more, and gives the same hashes)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], pa.string())
    head = values.slice(0, _HEAD)
    if len(values) > _HEAD and pc.count_distinct(head, mode="all").as_py() > _HEAD // 2:
        return _hash_bytes(values)
    codes, distinct = encoded(values)
    hashes = np.append(_hash_bytes(distinct), np.uint64(0))  # code -1 (null): the last
    out: np.ndarray = hashes[codes]
    return out


def _hash_bytes(values: pa.Array) -> np.ndarray:
    values = pc.fill_null(values.cast(pa.large_string()), "")
    n = len(values)
    out = np.zeros(n, dtype=np.uint64)
    offsets = np.frombuffer(values.buffers()[1], np.int64)[values.offset : values.offset + n + 1]
    if n == 0 or offsets[-1] == offsets[0]:
        return out
    low = int(offsets[0])
    data = np.frombuffer(values.buffers()[2], np.uint8)[low : int(offsets[-1])]
    lengths = np.diff(offsets)
    starts = offsets[:-1] - low
    position = np.arange(len(data), dtype=np.int64) - np.repeat(starts, lengths)
    powers = np.cumprod(np.full(int(lengths.max()), _PRIME, dtype=np.uint64))
    terms = (data.astype(np.uint64) + np.uint64(1)) * powers[position]
    given = lengths > 0
    out[given] = np.add.reduceat(terms, starts[given])
    return out


def buckets_of(keys: Sequence[pa.ChunkedArray | pa.Array], n: int) -> np.ndarray:
    """Bucket 0..n-1 of each row's tuple of string keys: equal tuples, equal buckets, in
    every task and process (rows of one key meet in one bucket without a shuffle)."""
    mixed = np.zeros(len(keys[0]), dtype=np.uint64)
    for key in keys:
        mixed = mixed * np.uint64(0x9E3779B97F4A7C15) + string_hashes(key)
    # splitmix64's finaliser: every input bit moves the low bits the modulus reads
    mixed ^= mixed >> np.uint64(30)
    mixed *= np.uint64(0xBF58476D1CE4E5B9)
    mixed ^= mixed >> np.uint64(27)
    mixed *= np.uint64(0x94D049BB133111EB)
    mixed ^= mixed >> np.uint64(31)
    buckets: np.ndarray = (mixed % np.uint64(max(1, n))).astype(np.int64)
    return buckets


def markers_of(rejects: pa.Table) -> pa.Table:
    """Rejected rows (`REJECTS`) as `TYPED` markers of the rows to leave out: their ids
    (file, line, sub), trace and process (the key their rows were grouped by)."""
    n = rejects.num_rows
    given = {
        FILE_ID: rejects[FILE_ID],
        C.LINE: rejects[C.LINE],
        SUB: rejects[SUB],
        C.TRACE_ID: rejects[C.TRACE_ID],
        PPROC: rejects[C.PROCESS],
        EXCLUDED: pa.array(np.ones(n, dtype=bool), pa.bool_()),
    }
    return pa.table(
        [given[f.name].cast(f.type) if f.name in given else pa.nulls(n, f.type) for f in TYPED],
        schema=TYPED,
    )


def take_rows(table: pa.Table, positions: np.ndarray) -> pa.Table:
    """The rows at `positions`; a column of nulls only is made, not gathered (a typed row
    that step 1 accepted has no text, reason or detail: 6 such columns of 20 were 16%
    of a gather of step 1's rows)."""
    at = pa.array(positions, pa.int64())
    n = len(at)
    columns = [
        pa.nulls(n, column.type) if column.null_count == len(column) else column.take(at)
        for column in table.columns
    ]
    return pa.table(columns, schema=table.schema)


def string_array(values: Sequence[str | None]) -> pa.Array:
    return pa.array(values, pa.string())


def reject_rows(
    rows: pa.Table,
    reason: str,
    detail: pa.Array,
    ref_file: np.ndarray | None,
    ref_line: np.ndarray | None,
    process: str = C.PROCESS,
) -> pa.Table:
    """Rejection rows for `rows` (which have file_id, line, sub, trace_id and `process`)."""
    n = rows.num_rows
    none = pa.nulls(n, pa.string())
    refs = (
        (pa.nulls(n, pa.int32()), pa.nulls(n, pa.int64()))
        if ref_file is None or ref_line is None
        else (pa.array(ref_file, pa.int32()), pa.array(ref_line, pa.int64()))
    )
    return pa.table(
        {
            FILE_ID: rows[FILE_ID],
            C.LINE: rows[C.LINE],
            SUB: rows[SUB],
            C.TRACE_ID: rows[C.TRACE_ID],
            C.PROCESS: rows[process],
            C.REASON: pa.array([reason] * n, pa.string()),
            C.DETAIL: detail,
            REF_FILE: refs[0],
            REF_LINE: refs[1],
            STEP1: pa.array(np.zeros(n, dtype=bool)),
            C.RAW: none,
            PRE: none,
            POST: none,
            PARSED: pa.array(np.ones(n, dtype=bool)),
            SEQ_GIVEN: pa.nulls(n, pa.bool_()),
        },
        schema=REJECTS,
    )


def formatted(template: str, *columns: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`template % (values...)` per row, for the (few) rejected rows."""
    values = [c.to_pylist() for c in columns]
    return string_array([template % args for args in zip(*values, strict=True)])


def file_facts(rows: pa.Table, accepted: pa.Array) -> pa.Table:
    noseq = pc.and_(accepted, pc.is_null(rows[C.SEQ]))
    grouped = (
        pa.table(
            {
                FILE_ID: rows[FILE_ID],
                C.TRACE_ID: rows[C.TRACE_ID],
                "seq_given": rows[SEQ_GIVEN],
                "noseq": noseq,
            }
        )
        .group_by([FILE_ID, C.TRACE_ID], use_threads=False)
        .aggregate([(FILE_ID, "count"), ("seq_given", "any"), ("noseq", "any")])
    )
    return pa.table(
        {
            FILE_ID: grouped[FILE_ID],
            C.TRACE_ID: grouped[C.TRACE_ID],
            "rows": grouped[f"{FILE_ID}_count"],
            "has_seq": grouped["seq_given_any"],
            "has_noseq": grouped["noseq_any"],
        },
        schema=FACTS,
    )
