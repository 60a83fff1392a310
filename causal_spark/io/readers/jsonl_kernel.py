"""JSON Lines parsed in Python tasks: byte-range splits, lines, raw-row columns (no Spark).

The rows equal those Spark's own read gave (the text source, `from_json` of `[line]`
into strings and `json_object_keys`; docs/ingest.md): a line ends at `\\n`, `\\r` or
`\\r\\n`; a UTF-8 byte-order mark opens a file's first line and is dropped; a line of
spaces only is skipped but counted; a field's value is its string, or the JSON text of
any other value as Jackson writes it (`-0` is `0`, `1e3` is `1000.0`, objects compact,
a lone surrogate `?`), null when absent or null; the reasons of `parse_reason`:

- not valid UTF-8;
- not a JSON object (not `{`, or the first object is not JSON; single quotes and raw
  control characters in strings are accepted there, as Jackson's leniency gives);
- more than one JSON object on the line (text after the object other than `]`, or a raw
  control character in a string);
- a field is given twice in one object (among the input fields, names decoded).

A split [start, end) of a file holds the lines that start in it; its first line's number
is one more than the line ends before it (counted by `line_ends`, one small job). A task
reads its split in pieces of whole lines. A piece is read by Arrow's JSON reader where
its result is sure to be Spark's (`_arrow_rows`), else line by line by orjson; a line
orjson rejects, or whose result cannot be trusted to equal Jackson's (a backslash, a
nested value in a field, a field's name twice in its text, a long line), is parsed again
by `jsonl_line_kernel.parse_line`, which follows the rules above exactly.
"""

from __future__ import annotations

import gzip
import math
import re
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from causal_spark import columns as C
from causal_spark.io.readers.jsonl_line_kernel import (
    INPUT_FIELDS,
    LONG_LINE,
    NOT_OBJECT,
    NOT_UTF8,
    TWICE,
    TWO_OBJECTS,
    java_double,
    parse_line,
)

# `io.raw`'s names (an engine module: kernels know no Spark)
FILE_ID = "file_id"
PARSE_ERROR = "parse_error"

__all__ = ["LONG_LINE", "NOT_OBJECT", "NOT_UTF8", "TWICE", "TWO_OBJECTS", "java_double",
           "parse_line"]  # fmt: skip

# bytes a task reads at once (a piece ends at a line's end)
PIECE_BYTES = 8 << 20
BOM = b"\xef\xbb\xbf"

SCHEMA = pa.schema(
    [
        pa.field(FILE_ID, pa.int32(), False),
        pa.field(C.LINE, pa.int64(), False),
        pa.field(C.RAW, pa.string()),
        *[pa.field(n, pa.string()) for n in INPUT_FIELDS],
        pa.field(PARSE_ERROR, pa.string()),
    ]
)

_ENDS = re.compile(rb"\r\n|\r|\n")


# --- the fast path over many lines ------------------------------------------------


def _column(values: list[Any], slow: set[int]) -> pa.Array:
    """A field's values from orjson as strings; a value whose text orjson cannot give
    as Jackson would (an object, an array) marks its line for `parse_line`."""
    types = set(map(type, values))
    if types <= {str, type(None)}:
        return pa.array(values, pa.string())
    if types <= {int, type(None)}:
        try:
            return pa.array(values, pa.int64()).cast(pa.string())
        except (pa.ArrowInvalid, OverflowError):
            pass
    if types <= {float, type(None)}:
        doubles = pa.array(values, pa.float64())
        # orjson reads an integer beyond 64 bits as a double: its digits are lost
        huge = pc.fill_null(pc.greater_equal(pc.abs(doubles), 2.0**63), False)
        if not pc.any(huge).as_py():
            return _doubles(doubles)
    out: list[str | None] = []
    for i, v in enumerate(values):
        if v is None or type(v) is str:
            out.append(v)
        elif type(v) is bool:
            out.append("true" if v else "false")
        elif type(v) is int:
            out.append(str(v))
        elif type(v) is float and abs(v) < 2.0**63:
            out.append(java_double(v))
        else:
            slow.add(i)
            out.append(None)
    return pa.array(out, pa.string())


def _doubles(values: pa.Array) -> pa.Array:
    """Doubles as `java_double` writes them: Arrow's shortest digits in the fixed range,
    with '.0' when it writes none; the others one by one."""
    text = values.cast(pa.string())
    bare = pc.invert(pc.fill_null(pc.match_substring(text, "."), True))
    if pc.any(bare).as_py():
        # (a join over all rows costs 30x the cast: only those without a point)
        joined = [f"{t}.0" for t in pc.filter(text, bare).to_pylist()]
        text = pc.replace_with_mask(text, bare, pa.array(joined, pa.string()))
    magnitude = pc.abs(values)
    fixed = pc.and_(pc.greater_equal(magnitude, 1e-3), pc.less(magnitude, 1e7))
    other = pc.invert(pc.fill_null(fixed, True))
    if pc.any(other).as_py():
        chosen = pc.filter(values, other).to_pylist()
        text = pc.replace_with_mask(
            text, other, pa.array([java_double(v) for v in chosen], pa.string())
        )
    return text


def _needle(name: str) -> bytes:
    return f'"{name}"'.encode()


_NEEDLES = {n: _needle(n) for n in INPUT_FIELDS}


def _struct_of(objs: list[Any]) -> pa.StructArray | None:
    """The objects as one Arrow struct array (None: a field's values of kinds Arrow does
    not put in one array, such as a string and a number)."""
    try:
        struct = pa.array(objs)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return None
    return struct if pa.types.is_struct(struct.type) else None


def _child(struct: pa.StructArray | None, name: str, n: int) -> pa.Array | None:
    """A field's strings from the struct array, where its type keeps the text Jackson
    writes (None: build them from the values one by one)."""
    if struct is None:
        return None
    index = struct.type.get_field_index(name)
    if index < 0:
        return pa.nulls(n, pa.string())
    child = struct.field(index)
    if child.type == pa.string():
        return child
    if child.type == pa.null():
        return pa.nulls(n, pa.string())
    if child.type == pa.int64():
        return child.cast(pa.string())
    if child.type == pa.float64():
        # an integral double may have been an integer (`1` beside `0.5`: Arrow makes both
        # doubles; beyond 64 bits: orjson does), whose text is not the double's
        if pc.any(pc.equal(pc.floor(child), child)).as_py():
            return None
        return _doubles(child)
    return None


def _names_once(text: bytes, objs: list[Any]) -> bool:
    """Whether no object names a field twice, from one count: in text without escapes or
    a space after a closing quote, every `":` ends a name; as many as the objects' names
    means no name twice (and no nested object, and no line orjson did not read)."""
    return (
        b"\\" not in text
        and b'" ' not in text
        and b'"\t' not in text
        and text.count(b'":') == sum(map(len, objs))
    )


def parse_lines(
    lines: Sequence[bytes],
    numbers: np.ndarray,
    file_id: int,
    text: bytes | None = None,
    raw: pa.Array | None = None,
    keep_text: bool = True,
) -> pa.RecordBatch:
    """Non-blank lines (with their line numbers) as raw rows (`SCHEMA`). `text`: the bytes
    the lines were cut from (names are counted there, not line by line); `raw`: the
    lines as a string array, when built already; keep_text=False: `raw` only on the rows
    rejected here (ingest reads the text of the rows it rejects later again)."""
    n = len(lines)
    if text is None:
        text = b"\n".join(lines)
    slow: set[int] = set()
    if b"\\" in text:
        slow.update(i for i, line in enumerate(lines) if b"\\" in line)
    if n and max(map(len, lines)) > LONG_LINE:
        slow.update(i for i, line in enumerate(lines) if len(line) > LONG_LINE)
    loads = orjson.loads
    objs: list[Any]
    try:
        objs = list(map(loads, lines))
    except orjson.JSONDecodeError:
        objs = []
        for i, line in enumerate(lines):
            try:
                objs.append(loads(line))
            except orjson.JSONDecodeError:
                objs.append({})
                slow.add(i)
    if set(map(type, objs)) - {dict}:
        for i, o in enumerate(objs):
            if type(o) is not dict:
                objs[i] = {}
                slow.add(i)
    for i in slow:
        objs[i] = {}
    struct = _struct_of(objs)
    once = _names_once(text, objs)
    columns: list[pa.Array] = []
    for name in INPUT_FIELDS:
        column = _child(struct, name, n)
        if column is None:
            column = _column([o.get(name) for o in objs], slow)
        needle = _NEEDLES[name]
        if not once and text.count(needle) != n - column.null_count:
            # a name counted more often than it is given: a line may give it twice
            slow.update(
                i for i, line in enumerate(lines) if i not in slow and line.count(needle) > 1
            )
        columns.append(column)
    errors = pa.nulls(n, pa.string())
    if slow:
        order = sorted(slow)
        mask = np.zeros(n, dtype=bool)
        mask[order] = True
        parsed = [parse_line(lines[i]) for i in order]
        for j in range(len(INPUT_FIELDS)):
            columns[j] = pc.replace_with_mask(
                columns[j], pa.array(mask), pa.array([p[0][j] for p in parsed], pa.string())
            )
        errors = pc.replace_with_mask(
            errors, pa.array(mask), pa.array([p[1] for p in parsed], pa.string())
        )
    if not keep_text:
        rejected = [i for i in sorted(slow) if errors[i].is_valid]
        raw = pc.replace_with_mask(
            pa.nulls(n, pa.string()),
            pa.array(np.isin(np.arange(n), rejected)),
            pa.array([lines[i] for i in rejected], pa.binary()).view(pa.string()),
        )
    elif raw is None:
        raw = pa.array(lines, pa.binary()).view(pa.string())
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(n, file_id, dtype=np.int32)),
            pa.array(numbers.astype(np.int64, copy=False)),
            raw,
            *columns,
            errors,
        ],
        schema=SCHEMA,
    )


# --- lines of a split -------------------------------------------------------------


def split_lines(piece: bytes) -> list[bytes]:
    """The lines of bytes that end at a line's end (or the file's): the final empty part
    after the last line end is no line."""
    parts = _ENDS.split(piece) if b"\r" in piece else piece.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return parts


def _blank_free(piece: bytes, lines: list[bytes]) -> bool:
    if b" " in piece[:1] or b"\n " in piece:
        return False
    if b"\r" in piece:
        return b"" not in lines and b"\r " not in piece
    return b"\n\n" not in piece and not piece.startswith(b"\n")


def _raw_of(piece: bytes, count: int) -> pa.Array | None:
    """The `count` lines of a piece cut at `\\n` only (no blank line) as a string array,
    built from the piece without its line ends (None: the piece has a `\\r`)."""
    if b"\r" in piece:
        return None
    body = piece if piece.endswith(b"\n") else piece + b"\n"
    ends = np.flatnonzero(np.frombuffer(body, dtype=np.uint8) == 10)
    if len(ends) != count or len(body) >= 1 << 31:
        return None
    offsets = np.empty(count + 1, dtype=np.int32)
    offsets[0] = 0
    offsets[1:] = ends - np.arange(count)
    data = body.replace(b"\n", b"")
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _arrow_rows(
    piece: bytes,
    count: int,
    numbers: np.ndarray,
    file_id: int,
    keep_text: bool,
    newlines: np.ndarray | None = None,
    typed: bool = False,
) -> pa.RecordBatch | None:
    """The rows of a piece of `count` non-blank lines cut at `\\n`, by Arrow's JSON reader
    (one pass in C++), where its result is sure to be Spark's; else None (`parse_lines`).

    Sure: every line starts with `{`; no `\\r`, escape or control character; valid
    UTF-8; no line over LONG_LINE;
    Arrow reads one object a line (a name twice, a line that is no object, a field of two
    kinds fail it); each input field a string, an integer or a double that is no integer
    (an integral double may have been `1e3` or `2.0`, whose text is not the double's).

    typed: `seq`, `size_bytes` and `ts` as Arrow read them where that is sure to keep
    ingest's verdict (`_typed`); `untyped` gives the batch its strings back."""
    if b"\r" in piece or b"\\" in piece:
        return None
    if not piece.isascii():
        try:
            piece.decode("utf-8")
        except UnicodeDecodeError:
            return None
    body = piece if piece.endswith(b"\n") else piece + b"\n"
    array = np.frombuffer(body, dtype=np.uint8)
    if newlines is None:
        ends = np.flatnonzero(array == 10)
    else:  # the piece's `\n`s, found by the caller already
        ends = newlines if body is piece else np.append(newlines, len(piece))
    if not count or len(ends) != count or len(body) >= 1 << 31:
        return None
    # a control character (a tab, in a string an error to Spark's from_json; a line of
    # tabs no line to Arrow): the only bytes below 32 are the line ends
    if np.count_nonzero(array < 32) != count:
        return None
    if int(np.max(np.diff(ends, prepend=-1))) - 1 > LONG_LINE:
        return None
    # every line opens an object (Arrow's reader crashes on a document that is `null`)
    if not np.all(array[np.concatenate(([0], ends[:-1] + 1))] == ord("{")):
        return None
    try:
        table = pj.read_json(
            pa.BufferReader(body),
            read_options=pj.ReadOptions(use_threads=False, block_size=len(body) + 1),
        )
    except pa.ArrowException:
        return None
    if table.num_rows != count:
        return None
    kept = (pa.string(), pa.null(), pa.int64(), pa.float64())
    if any(table.schema.field(n).type not in kept for n in INPUT_FIELDS if n in table.schema.names):
        return None  # a nested value, a boolean: parse_lines gives their text
    columns: list[pa.Array] = []
    for name in INPUT_FIELDS:
        if name not in table.column_names:
            columns.append(pa.nulls(count, pa.string()))
            continue
        column = table.column(name).combine_chunks()
        if column.type == pa.string():
            columns.append(column)
        elif column.type == pa.null():
            columns.append(pa.nulls(count, pa.string()))
        elif column.type == pa.int64():
            columns.append(column if typed and _typed(name, column) else column.cast(pa.string()))
        elif column.type == pa.float64():
            if pc.any(pc.equal(pc.floor(column), column)).as_py():
                return None
            if pc.any(pc.invert(pc.is_finite(column))).as_py():
                return None  # NaN or Infinity: Arrow reads them, Spark's JSON does not
            columns.append(column if typed and name == C.TS else _doubles(column))
        else:
            return None
    if keep_text:
        offsets = np.empty(count + 1, dtype=np.int32)
        offsets[0] = 0
        offsets[1:] = ends - np.arange(count)
        data = body.replace(b"\n", b"")
        raw = pa.Array.from_buffers(
            pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )
    else:
        raw = pa.nulls(count, pa.string())
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(count, file_id, dtype=np.int32)),
            pa.array(numbers.astype(np.int64, copy=False)),
            raw,
            *columns,
            pa.nulls(count, pa.string()),
        ],
        schema=_schema_of(columns) if typed else SCHEMA,
    )


# --- numbers kept as Arrow read them ------------------------------------------------

# the fields ingest types (`io.raw.TYPED_FIELDS`), and for an integer the bounds within
# which ingest's pattern takes its text as plain (`ingest.plain`: at most 18 digits;
# a size has no sign): outside them the text goes on as a string
_TYPED_INTEGERS = {C.SEQ: (-(10**18) + 1, 10**18 - 1), C.SIZE_BYTES: (0, 10**18 - 1), C.TS: None}


def _typed(name: str, column: pa.Array) -> bool:
    """Whether an integer column of field `name` may stay an integer: a field ingest
    types, whose every value's text ingest's pattern would judge plain. (A double of
    `ts`, finite and no integer here, is plain as Jackson's text of it always is: `-?`
    digits `.` digits, or with `E` and an exponent; tests hold the two to each other.)"""
    if name not in _TYPED_INTEGERS:
        return False
    bounds = _TYPED_INTEGERS[name]
    if bounds is None or column.null_count == len(column):
        return True
    least, most = pc.min_max(column).values()
    return bool(bounds[0] <= least.as_py() and most.as_py() <= bounds[1])


def _schema_of(columns: Sequence[pa.Array]) -> pa.Schema:
    typed = {n: c.type for n, c in zip(INPUT_FIELDS, columns, strict=True)}
    return pa.schema([pa.field(f.name, typed.get(f.name, f.type), f.nullable) for f in SCHEMA])


def untyped(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch `rows_of_piece(..., typed=True)` made, in `SCHEMA`: each number as the
    string it reads without `typed` (an integer's digits; a double's Jackson text)."""
    if batch.schema == SCHEMA:
        return batch
    columns = []
    for field in SCHEMA:
        column = batch.column(field.name)
        if column.type == pa.float64():
            column = _doubles(column)
        elif column.type != field.type:
            column = column.cast(field.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)


def rows_of_piece(
    piece: bytes, first_line: int, file_id: int, keep_text: bool = True, typed: bool = False
) -> tuple[pa.RecordBatch | None, int]:
    """The raw rows of the whole lines `piece` holds, the first numbered `first_line`
    (None: only blank lines), and how many lines it holds. typed: numbers may be given
    as Arrow read them (`_arrow_rows`)."""
    tried = False
    if piece and b"\r" not in piece:
        # lines cut at `\n` only: Arrow's reader first, without a Python list of the
        # lines; where it takes the piece, every line starts with `{`, so the piece is
        # blank-free and split_lines would count these lines (`_arrow_rows`' checks)
        # (the positions of the `\n`s, for `_arrow_rows`, cost as much as a count of them)
        newlines = np.flatnonzero(np.frombuffer(piece, dtype=np.uint8) == 10)
        count = len(newlines) + (0 if piece.endswith(b"\n") else 1)
        numbers = np.arange(first_line, first_line + count, dtype=np.int64)
        fast = _arrow_rows(piece, count, numbers, file_id, keep_text, newlines, typed)
        if fast is not None:
            return fast, count
        tried = True
    lines = split_lines(piece)
    count = len(lines)
    numbers = np.arange(first_line, first_line + count, dtype=np.int64)
    piece_text: bytes | None = piece
    raw: pa.Array | None = None
    if not _blank_free(piece, lines):
        keep = [i for i, line in enumerate(lines) if line.strip(b" ")]
        lines = [lines[i] for i in keep]
        numbers = numbers[keep]
        piece_text = None
    else:
        fast = (
            None if tried else _arrow_rows(piece, count, numbers, file_id, keep_text, typed=typed)
        )
        if fast is not None:
            return fast, count
        if keep_text:
            raw = _raw_of(piece, count)
    if not lines:
        return None, count
    return parse_lines(lines, numbers, file_id, piece_text, raw, keep_text), count


def line_ends(data: bytes, size: int) -> int:
    """Line ends whose last byte lies in data[:size] (`data` may hold one byte more, to
    see a `\\r\\n` across the split's end)."""
    # counted in place: a copy of data[:size] (64 MB a split) cost as much as the counts
    ends = data.count(b"\n", 0, size)
    if data.find(b"\r", 0, size) >= 0:
        ends += data.count(b"\r", 0, size) - data.count(b"\r\n")
    return ends


def count_line_ends(path: str, start: int, end: int) -> int:
    """`line_ends` of the split [start, end) of a plain file."""
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start + 1)
    return line_ends(data, end - start)


def _first_line_start(fh: IO[bytes], start: int) -> tuple[int, bool]:
    """Where the first line that starts at or after `start` (> 0) starts, and whether the
    line end before it has its last byte at or after `start`."""
    fh.seek(start - 1)
    pos = start - 1
    while True:
        block = fh.read(1 << 16)
        if not block:
            return pos, False
        n_at, r_at = block.find(b"\n"), block.find(b"\r")
        hits = [i for i in (n_at, r_at) if i >= 0]
        if hits:
            i = min(hits)
            at = pos + i
            if block[i : i + 1] == b"\r":
                following = block[i + 1 : i + 2]
                if not following:
                    following = fh.read(1)
                if following == b"\n":
                    return at + 2, at + 1 >= start
            return at + 1, at >= start
        pos += len(block)


def _cut(data: bytes, final: bool) -> int:
    """Bytes of `data` up to its last whole line's end (0: none). Unless `final`, a `\\r`
    last may be the start of `\\r\\n`: it is left for the next read."""
    last_n = data.rfind(b"\n")
    last_r = data.rfind(b"\r", 0, len(data) if final else len(data) - 1)
    return max(last_n, last_r) + 1


def _rest_of_line(fh: IO[bytes]) -> bytes:
    """The bytes from `fh`'s position to the first line end, included (or the end)."""
    out: list[bytes] = []
    while True:
        block = fh.read(1 << 16)
        if not block:
            return b"".join(out)
        hits = [i for i in (block.find(b"\n"), block.find(b"\r")) if i >= 0]
        if hits:
            out.append(block[: min(hits) + 1])
            return b"".join(out)
        out.append(block)


def _pieces(fh: IO[bytes], budget: int | None, piece_bytes: int) -> Iterator[bytes]:
    """Pieces of whole lines from `fh`'s position: the lines that start within `budget`
    bytes (None: to the end of the file), the last one read to its end."""
    held = b""
    left = budget
    while left is None or left > 0:
        block = fh.read(piece_bytes if left is None else min(piece_bytes, left))
        if not block:
            if held:
                yield held
            return
        if left is not None:
            left -= len(block)
        data = held + block
        cut = _cut(data, final=left == 0)
        if cut:
            yield data[:cut]
        held = data[cut:]
    if held:
        # a line that starts within the budget and ends after it
        yield held + _rest_of_line(fh)


def plan_splits(size: int, split_bytes: int, count: int | None = None) -> list[tuple[int, int]]:
    """A plain file of `size` bytes cut in [start, end) splits of about `split_bytes`
    (`count` of them, of even sizes, where given)."""
    if count is None:
        count = split_count(size, split_bytes)
    bounds = [size * i // count for i in range(count + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(count)]


def split_count(size: int, split_bytes: int) -> int:
    """How many splits `plan_splits` cuts a file of `size` bytes in: each at most `split_bytes`."""
    return max(1, math.ceil(size / max(1, split_bytes)))


def split_counts(sizes: Sequence[int | None], split_bytes: int, cores: int) -> list[int]:
    """The splits of each file (None: one that cannot be cut, one split), each at most
    `split_bytes`, and as many in all as a multiple of `cores`: the files' splits are the
    tasks of one Spark job, and 3 tasks on 2 cores left one core idle for a third of it.
    The splits added go one at a time to the file whose splits are the largest. Where no
    file needs more than one split, none is cut: a cut costs a Spark job counting line ends."""
    counts = [1 if s is None else split_count(s, split_bytes) for s in sizes]
    if max(counts, default=1) == 1:
        return counts  # no file is cut: small files are not cut to fill the cores
    cuttable = [i for i, s in enumerate(sizes) if s]
    short = -sum(counts) % max(1, cores)
    for _ in range(short if cuttable else 0):
        widest = max(cuttable, key=lambda i: (sizes[i] or 0) / counts[i])
        if (sizes[widest] or 0) <= counts[widest]:
            break  # no split can be cut smaller than a byte
        counts[widest] += 1
    return counts


def first_lines(ends: Sequence[int]) -> list[int]:
    """Of a file's splits' `line_ends` in order: 1 + the line ends before each split."""
    return [1 + int(x) for x in np.concatenate([[0], np.cumsum(ends[:-1])]).tolist()]


def read_file(path: str, split_bytes: int, piece_bytes: int = PIECE_BYTES) -> pa.Table:
    """A whole file read as the Spark job reads it, split by split (tests; no Spark)."""
    import os

    if path.lower().endswith(".gz"):
        batches = list(read_split(path, 0, 0, None, 1, piece_bytes))
    else:
        splits = plan_splits(os.path.getsize(path), split_bytes)
        starts = first_lines([count_line_ends(path, s, e) for s, e in splits])
        batches = [
            b
            for (s, e), first in zip(splits, starts, strict=True)
            for b in read_split(path, 0, s, e, first, piece_bytes)
        ]
    return pa.Table.from_batches(batches, schema=SCHEMA)


def read_split(
    path: str,
    file_id: int,
    start: int,
    end: int | None,
    first_line: int,
    piece_bytes: int = PIECE_BYTES,
    keep_text: bool = True,
    typed: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Raw rows of the lines that start in [start, end) of a file (end None: a `.gz` file,
    read whole); `first_line`: 1 + the line ends before `start`. typed: numbers may be
    given as Arrow read them (`rows_of_piece`; `untyped` gives `SCHEMA` back)."""
    opener: Callable[..., IO[bytes]] = gzip.open if end is None else open  # type: ignore[assignment]
    with opener(path, "rb") as fh:
        if end is None or start == 0:
            head = fh.read(len(BOM))
            if head != BOM:
                fh.seek(0)
            at = fh.tell()
            line = first_line
        else:
            at, counted = _first_line_start(fh, start)
            line = first_line + (1 if counted else 0)
            fh.seek(at)
        budget = None if end is None else end - at
        if budget is not None and start == 0:
            budget = max(budget, 1)  # the first line starts at 0, before a mark
        if budget is not None and budget <= 0:
            return
        for piece in _pieces(fh, budget, piece_bytes):
            batch, count = rows_of_piece(piece, line, file_id, keep_text, typed)
            line += count
            if batch is not None:
                yield batch
