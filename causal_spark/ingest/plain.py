"""Step 1 where a reader's Python task made the rows: plain rows typed on Arrow, the rest
left to `typed.type_rows` (no Spark here).

A row is *plain* when every field is in the form the row-local rules take as it is: no
reader's rejection; `process`, `trace_id`, `msg_id`, `peer` absent or text that trimming
leaves alone and that is no object or array; `kind` one of the aliases as written in
`KIND_ALIASES`; `seq` and `size_bytes` absent or plain digits (a typed integer: any,
but a negative size); `ts` absent, a plain decimal number (or a typed double) that is
finite; a send or receive with its `msg_id`. Such a row breaks no rule of
`typed.type_rows`, and its typed values are the obvious ones: the text as it is, the
alias's kind, the numbers' values (Arrow's and Java's parsers of a decimal both round
correctly). Every other row (a blank, a space to trim, an ISO time, a `+1`, a bad value)
goes to `type_rows` unchanged: the rules, their order and their words stay in one place.
`plain_rows` only recognises rows that no rule touches (tests/test_ingest_plain.py: its
typed rows equal `type_rows`' on every row it takes).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from causal_spark import columns as C
from causal_spark.ingest import rows_kernel as R
from causal_spark.ingest.keys import KIND_ALIASES

PARSE_ERROR = "parse_error"
PARSE_REASON = "parse_reason"
TRACE_SUFFIX = "trace_suffix"

_TEXTS = (C.TRACE_ID, C.PROCESS, C.MSG_ID, C.PEER)
_ALIASES = pa.array(list(KIND_ALIASES), pa.string())
_KINDS = pa.array(list(KIND_ALIASES.values()), pa.string())
# at most 18 digits: every such number fits a long
_LONG = r"^-?[0-9]{1,18}$"
_SIZE = r"^[0-9]{1,18}$"
# a decimal number as JSON (or Jackson's text of a double: `1.7E9`) writes it
_DOUBLE = r"^-?[0-9]{1,20}(\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?$"


def _column(rows: pa.Table | pa.RecordBatch, name: str) -> pa.Array:
    if name not in rows.schema.names:
        return pa.nulls(rows.num_rows, pa.string())
    column = rows.column(name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _plain_text(values: pa.Array) -> np.ndarray:
    """Absent, or text `trim` leaves as it is that is no object or array: not empty, no
    byte up to a space at either end (Spark's trim takes spaces; be stricter), not
    opening an object or an array. From the string's first and last bytes."""
    n = len(values)
    if values.null_count == n:
        return np.ones(n, dtype=bool)
    if values.type != pa.string():
        values = values.cast(pa.string())
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset :][: n + 1]
    data = values.buffers()[2]
    bytes_ = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    starts, ends = offsets[:-1], offsets[1:]
    filled = ends > starts
    first = np.zeros(n, dtype=np.uint8)
    last = np.zeros(n, dtype=np.uint8)
    first[filled] = bytes_[starts[filled]]
    last[filled] = bytes_[ends[filled] - 1]
    ok: np.ndarray = filled & (first > 32) & (last > 32) & (first != ord("{")) & (first != ord("["))
    absent: np.ndarray = values.is_null().to_numpy(zero_copy_only=False)
    result: np.ndarray = ok | absent
    return result


def _plain_number(values: pa.Array, pattern: str) -> pa.Array:
    if pa.types.is_string(values.type) or pa.types.is_null(values.type):
        if values.null_count == len(values):
            return pa.array(np.ones(len(values), dtype=bool))
        return pa.array(_matches(values, pattern) | values.is_null().to_numpy(zero_copy_only=False))
    return pa.array(np.ones(len(values), dtype=bool))


_MOST = {_LONG: 18, _SIZE: 18, _DOUBLE: 20}  # digits a run may hold


def _matches(values: pa.Array, pattern: str) -> np.ndarray:
    """`pc.match_substring_regex(values, pattern)` of a string array, for `_LONG`, `_SIZE`
    and `_DOUBLE` (null: False): a value of digits only (and, for `_DOUBLE`, one `.`
    between digits) is judged by its length, by Arrow's string kernels (a regex per value
    cost 2-4x these); only the others (a sign, an exponent, a bad value) take the regex."""
    most = _MOST[pattern]
    length = pc.binary_length(values).to_numpy(zero_copy_only=False)
    if pattern == _DOUBLE:
        bare = pc.replace_substring(values, ".", "", max_replacements=1)
        digits = pc.fill_null(pc.ascii_is_decimal(bare), False).to_numpy(zero_copy_only=False)
        point = pc.fill_null(pc.find_substring(values, "."), -1).to_numpy(zero_copy_only=False)
        after = length - point - 1
        good = np.where(
            point < 0,
            length <= most,
            (point >= 1) & (point <= most) & (after >= 1) & (after <= most),
        )
    else:
        digits = pc.fill_null(pc.ascii_is_decimal(values), False).to_numpy(zero_copy_only=False)
        good = length <= most
    matched: np.ndarray = digits & good
    other = np.flatnonzero(~digits & values.is_valid().to_numpy(zero_copy_only=False))
    if len(other):
        found = pc.match_substring_regex(values.take(pa.array(other, pa.int64())), pattern)
        matched[other] = pc.fill_null(found, False).to_numpy(zero_copy_only=False)
    return matched


def plain_rows(rows: pa.Table | pa.RecordBatch) -> np.ndarray:
    """Which rows (raw-row columns as a reader's task gives them) are plain (above)."""
    n = rows.num_rows
    ok = np.ones(n, dtype=bool)
    if n == 0:
        return ok
    for name in (PARSE_ERROR, PARSE_REASON, TRACE_SUFFIX, R.RECORDED_VC):
        if name in rows.schema.names:
            ok &= _column(rows, name).is_null().to_numpy(zero_copy_only=False)
    for name in _TEXTS:
        ok &= _plain_text(_column(rows, name))
    process = _column(rows, C.PROCESS)
    ok &= process.is_valid().to_numpy(zero_copy_only=False)
    kind = _column(rows, C.KIND)
    ok &= pc.fill_null(pc.is_in(kind, _ALIASES), False).to_numpy(zero_copy_only=False)
    needs_msg = pc.is_in(pc.index_in(kind, _ALIASES), pa.array(_message_codes(), pa.int32()))
    no_msg = pc.and_(pc.fill_null(needs_msg, False), _column(rows, C.MSG_ID).is_null())
    ok &= ~no_msg.to_numpy(zero_copy_only=False)
    ok &= _plain_number(_column(rows, C.SEQ), _LONG).to_numpy(zero_copy_only=False)
    size = _column(rows, C.SIZE_BYTES)
    ok &= _plain_number(size, _SIZE).to_numpy(zero_copy_only=False)
    if pa.types.is_integer(size.type):
        ok &= pc.fill_null(pc.greater_equal(size, 0), True).to_numpy(zero_copy_only=False)
    ts = _column(rows, C.TS)
    ok &= _plain_number(ts, _DOUBLE).to_numpy(zero_copy_only=False)
    if ok.any():
        finite = pc.is_finite(_as_double(ts))
        ok &= pc.fill_null(finite, True).to_numpy(zero_copy_only=False)
    return ok


def _message_codes() -> list[int]:
    return [i for i, kind in enumerate(KIND_ALIASES.values()) if kind in (C.SEND, C.RECEIVE)]


def _as_double(values: pa.Array) -> pa.Array:
    if pa.types.is_string(values.type):
        # only plain numbers are parsed: others are null here (their rows are not plain)
        if values.null_count == len(values):
            return pa.nulls(len(values), pa.float64())
        plain = _matches(values, _DOUBLE)
        if np.count_nonzero(plain) < len(values) - values.null_count:
            values = pc.if_else(pa.array(plain), values, pa.scalar(None, pa.string()))
        return pc.cast(values, pa.float64())
    return pc.cast(values, pa.float64(), safe=False)


def _as_long(values: pa.Array) -> pa.Array:
    return pc.cast(values, pa.int64())


def typed_rows(rows: pa.Table | pa.RecordBatch, default_traces: Sequence[str | None]) -> pa.Table:
    """Plain rows (`plain_rows`) as step 1 types them (`rows_kernel.TYPED`): what
    `typed.type_rows` gives them. `default_traces`: each file's default trace id, at
    its file id."""
    n = rows.num_rows
    file_id = pc.cast(_column(rows, R.FILE_ID), pa.int32())
    defaults = pa.array(list(default_traces), pa.string())
    trace = pc.coalesce(_column(rows, C.TRACE_ID), defaults.take(file_id))
    kind = _KINDS.take(pc.index_in(_column(rows, C.KIND), _ALIASES))
    msg_id = pc.if_else(
        pc.equal(kind, C.INTERNAL), pa.scalar(None, pa.string()), _column(rows, C.MSG_ID)
    )
    seq_raw = _column(rows, C.SEQ)
    sub = _column(rows, R.SUB) if R.SUB in rows.schema.names else pa.nulls(n, pa.int64())
    size = _as_long(_column(rows, C.SIZE_BYTES))
    null_text = pa.nulls(n, pa.string())
    columns = {
        R.FILE_ID: file_id,
        C.LINE: pc.cast(_column(rows, C.LINE), pa.int64()),
        R.SUB: pc.fill_null(pc.cast(sub, pa.int64()), 0),
        C.RAW: null_text,
        C.TRACE_ID: trace,
        R.PPROC: _column(rows, C.PROCESS),
        C.SEQ: _as_long(seq_raw),
        C.KIND: kind,
        C.MSG_ID: msg_id,
        C.PEER: _column(rows, C.PEER),
        C.TS: _as_double(_column(rows, C.TS)),
        C.SIZE_BYTES: pc.fill_null(size, 0),
        C.LABEL: _column(rows, C.LABEL),
        R.RECORDED_VC: pa.nulls(n, R.RECORDED_MAP),
        R.SEQ_GIVEN: seq_raw.is_valid(),
        R.PARSED: pa.array(np.ones(n, dtype=bool)),
        C.REASON: null_text,
        R.PRE: null_text,
        R.POST: null_text,
        R.EXCLUDED: pa.array(np.zeros(n, dtype=bool)),
    }
    return pa.Table.from_arrays([pc.cast(columns[f.name], f.type) for f in R.TYPED], schema=R.TYPED)
