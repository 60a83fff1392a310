"""A single-process ingest in pyarrow + NumPy: the tables `causal-spark ingest` writes.

    .venv/bin/python bench/ingest_baseline.py INPUT... --out DIR

Reads the same inputs as the job (files found by the job's own discovery, so file
order, `source` and default trace ids are the job's; JSON Lines, CSV, Parquet and
Delta data files) and writes `events`, `messages` and `quarantine` as Parquet in
DIR, with the job's schemas (schemas/*.json) and the same rows: the rules of
docs/ingest.md in the job's order, the same reasons, details, line
numbers, lseq, pidx and message status. No Spark runs; pyarrow uses its threads.

How, in one process:

1. **Read.** JSON Lines in chunks of about 64 MB. A chunk's lines that start with
   `{` and end with `}` (and are valid UTF-8) go to pyarrow's JSON reader at once;
   the chunk is accepted from it only if every such line gave exactly one row, no
   column is nested or a NaN, and only `ts` holds a non-integral number (a number
   column mixing `1` and `1.5` hides which was which). Every other line, and every
   line of a chunk that fails these checks (a type that changes between rows, a
   duplicate key, a single-quoted string), is read alone by the strict per-line
   reader of `ingest_baseline_text` (Python's json, then a Jackson-like parser for
   the lines it refuses), which tells the job's three reader errors apart. CSV is
   read line by line; Parquet by pyarrow.
2. **Type** (vectorised pyarrow compute): the job's row-local rules and their words.
3. **Judge** (NumPy sorts and group passes): duplicate events and multicast copies
   (one stable sort by (trace, process, seq)), missing seq, duplicate messages and
   peer mismatches (one stable sort by (trace, msg_id)), second copies of a
   multicast to one destination after matching, then lseq over the events that
   keep a row and pidx by process name.
4. **Tables**: columns built by `take` from dictionaries; `raw` of a row rejected
   after step 2 is read again from its file (as the job does).

Where the job breaks its own contract, the baseline keeps the contract: Spark's
`from_json` ignores what follows a `]` after the line's object, so the job accepts
`{...}] x`; here it is `malformed` (docs/ingest.md: trailing text on the line).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

import ingest_baseline_text as tx

from causal_spark.config import IngestSettings
from causal_spark.io.sources import InputFile, discover_inputs
from causal_spark.tables import arrow_schema

FIELDS = tx.INPUT_FIELDS
CHUNK_BYTES = 64 << 20
INTERNAL, SEND, RECEIVE = 0, 1, 2
KIND_NAMES = np.array(["internal", "send", "receive"], dtype=object)
ALIASES = {
    "send": SEND,
    "snd": SEND,
    "receive": RECEIVE,
    "recv": RECEIVE,
    "rcv": RECEIVE,
    "deliver": RECEIVE,
    "internal": INTERNAL,
    "local": INTERNAL,
}
MISSING_SEQ = "missing seq (other rows of this file have one)"
REF = "\u0001ref\u0001"
WHOLE_FILE_LINE = 0
OURS = ("jsonl", "csv", "parquet", "delta")
# rows read by pyarrow's JSON reader and line by line (reset by `ingest_tables`)
_PATHS = {"json_rows_arrow": 0, "json_rows_line_by_line": 0}

# the typed rows every reader's rows become (one table per block, concatenated)
TYPED = pa.schema(
    [
        ("file_id", pa.int32()),
        ("line", pa.int64()),
        ("trace", pa.string()),
        ("process", pa.string()),
        ("kind", pa.int8()),  # -1: none or unknown
        ("seq", pa.int64()),
        ("msg", pa.string()),
        ("peer", pa.string()),
        ("ts", pa.float64()),
        ("size", pa.int64()),
        ("label", pa.string()),
        ("seq_given", pa.bool_()),  # the row has a seq field at all (even blank)
        ("parsed", pa.bool_()),  # the reader could read the record
        ("rejected", pa.bool_()),  # by the row-local rules (`malformed`)
        ("pre", pa.string()),  # details before / after the file's missing-seq rule
        ("post", pa.string()),
        ("raw", pa.binary()),  # the text of rejected rows only
    ]
)


class BaselineError(ValueError):
    """The inputs hold a format this baseline does not read (the native log formats)."""


# --------------------------------------------------------------------------- typing


def _nulls(n: int, type_: pa.DataType | None = None) -> pa.Array:
    return pa.nulls(n, type=type_ or pa.string())


def _text(values: pa.Array) -> pa.Array:
    """The Spark text of a field's values (as the job's readers hand it to typing)."""
    t = values.type
    if pa.types.is_string(t):
        return values
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return values.cast(pa.string())
    if pa.types.is_null(t):
        return _nulls(len(values))
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return values.cast(pa.string())
    if pa.types.is_dictionary(t):
        return _text(values.cast(t.value_type))
    name = str(t)
    return pa.array([tx.spark_string(v, name) for v in values.to_pylist()], pa.string())


def _edged(text: pa.Array) -> bool:
    """Whether any value is empty or starts or ends with a space (Spark's trim has work)."""
    if text.null_count == len(text):
        return False
    spaced = pc.or_(pc.starts_with(text, " "), pc.ends_with(text, " "))
    return bool(pc.any(spaced).as_py() or pc.any(pc.equal(pc.utf8_length(text), 0)).as_py())


def _blank_to_null(text: pa.Array) -> pa.Array:
    """Spark's `trim` (spaces only), and null for what is left empty."""
    if not _edged(text):
        return text
    trimmed = pc.utf8_trim(text, " ")
    return pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, pa.string()), trimmed)


def _valid(values: pa.Array) -> np.ndarray:
    return np.asarray(pc.is_valid(values), dtype=bool)


def _structured(text: pa.Array) -> np.ndarray:
    """The trimmed text looks like a JSON object or array."""
    t = pc.utf8_trim(text, " ") if _edged(text) else text
    braces = pc.and_(pc.starts_with(t, "{"), pc.ends_with(t, "}"))
    brackets = pc.and_(pc.starts_with(t, "["), pc.ends_with(t, "]"))
    return np.asarray(pc.fill_null(pc.or_(braces, brackets), False), dtype=bool)


def _longs(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """`try_cast(value as bigint)`: (values, ok)."""
    n = len(values)
    t = values.type
    if pa.types.is_integer(t):
        ok = _valid(values)
        return np.asarray(pc.fill_null(values.cast(pa.int64()), 0)), ok
    out = np.zeros(n, np.int64)
    ok = np.zeros(n, bool)
    if pa.types.is_null(t):
        return out, ok
    text = _text(values)
    if pa.types.is_string(text.type) and pa.types.is_string(t):
        trimmed = pc.utf8_trim(text, tx.TRIM_ALL)
        plain = np.asarray(
            pc.fill_null(pc.match_substring_regex(trimmed, r"^-?[0-9]{1,18}$"), False), bool
        )
        idx = np.flatnonzero(plain)
        if len(idx):
            out[idx] = np.asarray(pc.cast(trimmed.take(pa.array(idx)), pa.int64()))
            ok[idx] = True
        rest = np.flatnonzero(~plain & _valid(text))
    else:
        rest = np.flatnonzero(_valid(text))
    if len(rest):
        for i, s in zip(rest, text.take(pa.array(rest)).to_pylist(), strict=True):
            v = tx.spark_long(s)
            if v is not None:
                out[i], ok[i] = v, True
    return out, ok


def _seconds(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The job's `ts`: a double, or an ISO-8601 time as seconds: (values, ok)."""
    n = len(values)
    t = values.type
    if pa.types.is_floating(t) and t != pa.float32():
        ok = _valid(values)
        return np.asarray(pc.fill_null(values.cast(pa.float64()), 0.0)), ok
    if pa.types.is_integer(t):
        ok = _valid(values)
        return np.asarray(pc.fill_null(values.cast(pa.float64()), 0.0)), ok
    if pa.types.is_timestamp(t):
        ok = _valid(values)
        micros = pc.fill_null(values.cast(pa.timestamp("us", t.tz)).cast(pa.int64()), 0)
        return np.asarray(micros) / 1_000_000.0, ok
    out = np.zeros(n, np.float64)
    ok = np.zeros(n, bool)
    if pa.types.is_null(t):
        return out, ok
    text = _blank_to_null(_text(values))
    if pa.types.is_string(t):
        plain = np.asarray(
            pc.fill_null(
                pc.match_substring_regex(text, r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$"), False
            ),
            bool,
        )
        idx = np.flatnonzero(plain)
        if len(idx):
            out[idx] = np.asarray(pc.cast(text.take(pa.array(idx)), pa.float64()))
            ok[idx] = True
        rest = np.flatnonzero(~plain & _valid(text))
    else:
        rest = np.flatnonzero(_valid(text))
    for i, s in zip(rest, text.take(pa.array(rest)).to_pylist(), strict=True):
        v = tx.spark_seconds(s)
        if v is not None:
            out[i], ok[i] = v, True
    return out, ok


def _kinds(kind_text: pa.Array) -> np.ndarray:
    """`map[lower(trim(kind))]` of the aliases: a kind code, -1 when none."""
    trimmed = pc.utf8_trim(kind_text, " ")
    ascii_ = np.asarray(pc.fill_null(pc.string_is_ascii(trimmed), True), bool)
    lowered = pc.ascii_lower(trimmed)
    if not ascii_.all():
        values = lowered.to_pylist()
        for i in np.flatnonzero(~ascii_):
            values[i] = trimmed[int(i)].as_py().lower()
        lowered = pa.array(values, pa.string())
    names = pa.array(list(ALIASES))
    codes = np.array(list(ALIASES.values()), np.int8)
    index = np.asarray(pc.fill_null(pc.index_in(lowered, value_set=names), -1))
    return np.where(index >= 0, codes[np.maximum(index, 0)], -1).astype(np.int8)


@dataclass
class Block:
    """Raw rows of one file (or part of one): line numbers, the fields as read, errors, and
    how to get the text of some rows (only rejected rows keep it, as in the job)."""

    file: InputFile
    line: np.ndarray
    fields: dict[str, pa.Array]
    parse_error: pa.Array | None = None  # string, null when the record was read
    raw_of: Callable[[np.ndarray], list[bytes]] | None = None


def _typed(block: Block) -> pa.Table:
    """Step 1 of the job: type the fields and apply the row-local rules (ingest/typed.py)."""
    n = len(block.line)
    f = {name: block.fields.get(name, _nulls(n)) for name in FIELDS}
    text = {name: _text(f[name]) for name in ("trace_id", "process", "kind", "msg_id", "peer")}
    trace = pc.fill_null(_blank_to_null(text["trace_id"]), block.file.default_trace)
    process = _blank_to_null(text["process"])
    kind_text = _blank_to_null(text["kind"])
    kind = _kinds(text["kind"])
    msg = _blank_to_null(text["msg_id"])
    peer = _blank_to_null(text["peer"])
    seq, seq_ok = _longs(f["seq"])
    ts, ts_ok = _seconds(f["ts"])
    size, size_ok = _longs(f["size_bytes"])
    seq_given = _valid(f["seq"])
    error = block.parse_error if block.parse_error is not None else _nulls(n)
    parsed = ~_valid(error)

    def given(name: str) -> np.ndarray:
        values = f[name]
        if pa.types.is_string(values.type) or not (
            pa.types.is_integer(values.type) or pa.types.is_floating(values.type)
        ):
            return _valid(_blank_to_null(_text(values)))
        return _valid(values)

    seq_nonblank, ts_nonblank, size_nonblank = given("seq"), given("ts"), given("size_bytes")
    needs_msg = (kind == SEND) | (kind == RECEIVE)
    rules = {
        "parse": ~parsed,
        "process": parsed & ~_valid(process),
        "kind": parsed & ~_valid(kind_text),
        "unknown": _valid(kind_text) & (kind < 0),
        "seq": seq_nonblank & ~seq_ok,
        "msg": needs_msg & ~_valid(msg),
        "ts": ts_nonblank & (~ts_ok | ~np.isfinite(ts)),
        "size": size_nonblank & (~size_ok | (size < 0)),
        **{f"scalar {name}": _structured(text[name]) for name in text},
    }
    rejected = np.zeros(n, bool)
    for hit in rules.values():
        rejected |= hit
    pre: list[str | None] | None = None
    post: list[str | None] | None = None
    bad = np.flatnonzero(rejected)
    if len(bad):
        pre, post = [None] * n, [None] * n
        take = pa.array(bad)
        cells = {
            "parse": error.take(take).to_pylist(),
            "kind_text": kind_text.take(take).to_pylist(),
            "seq": _text(f["seq"]).take(take).to_pylist(),
            "ts": _text(f["ts"]).take(take).to_pylist(),
            "size": _text(f["size_bytes"]).take(take).to_pylist(),
        }
        hits = {name: hit[bad] for name, hit in rules.items()}
        for j, i in enumerate(bad):
            before, after = [], []
            if hits["parse"][j]:
                before.append(cells["parse"][j])
            if hits["process"][j]:
                before.append("missing required field 'process'")
            if hits["kind"][j]:
                before.append("missing required field 'kind'")
            if hits["unknown"][j]:
                before.append(f"unknown kind '{cells['kind_text'][j]}'")
            if hits["seq"][j]:
                after.append(f"seq '{cells['seq'][j]}' is not an integer")
            if hits["msg"][j]:
                after.append(f"{KIND_NAMES[kind[i]]} without msg_id")
            if hits["ts"][j]:
                after.append(f"ts '{cells['ts'][j]}' is neither seconds nor an ISO-8601 time")
            if hits["size"][j]:
                after.append(f"size_bytes '{cells['size'][j]}' is not a non-negative integer")
            for name in ("trace_id", "process", "kind", "msg_id", "peer"):
                if hits[f"scalar {name}"][j]:
                    after.append(f"field '{name}' must be a scalar, found an object or array")
            pre[i] = "; ".join(before) or None
            post[i] = "; ".join(after) or None
    if len(bad) and block.raw_of is not None:
        texts: list[bytes | None] = [None] * n
        for i, t in zip(bad, block.raw_of(bad), strict=True):
            texts[i] = t
        raw = pa.array(texts, pa.binary())
    else:
        raw = _nulls(n, pa.binary())
    msg = pc.if_else(pa.array(kind == INTERNAL), pa.scalar(None, pa.string()), msg)
    return pa.table(
        [
            pa.array(np.full(n, block.file.file_id, np.int32)),
            pa.array(block.line.astype(np.int64)),
            trace,
            process,
            pa.array(kind),
            pa.array(seq, mask=~seq_ok),
            msg,
            peer,
            pa.array(ts, mask=~ts_ok),
            pa.array(np.where(size_ok, size, 0)),
            _text(f["label"]),
            pa.array(seq_given),
            pa.array(parsed),
            pa.array(rejected),
            _nulls(n) if pre is None else pa.array(pre, pa.string()),
            _nulls(n) if post is None else pa.array(post, pa.string()),
            raw,
        ],
        schema=TYPED,
    )


def _whole_file(file: InputFile, why: str) -> pa.Table:
    """A file that cannot be read at all: one rejected row at line 0 (raw empty)."""
    return _typed(Block(file, np.array([WHOLE_FILE_LINE]), {}, pa.array([why]), lambda rows: [b""]))


# --------------------------------------------------------------------------- reading


def _read_bytes(file: InputFile) -> bytes:
    with open(file.path, "rb") as fh:
        data = fh.read()
    if file.path.lower().endswith(".gz"):
        data = gzip.decompress(data)
    return data


def _lines(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) of each line as Hadoop's LineReader splits text:
    at `\\n`, `\\r\\n` or `\\r`; no line after a final terminator."""
    n = len(buf)
    nl = np.flatnonzero(buf == 10)
    if n and (buf == 13).any():
        cr = np.flatnonzero(buf == 13)
        crlf = cr[(cr + 1 < n) & (buf[np.minimum(cr + 1, n - 1)] == 10)]
        lone_nl = np.setdiff1d(nl, crlf + 1, assume_unique=True)
        ends = np.union1d(cr, lone_nl)
        width = np.where(np.isin(ends, crlf), 2, 1)
    else:
        ends = nl
        width = np.ones(len(nl), np.int64)
    starts = np.concatenate(([0], ends + width)).astype(np.int64)
    ends = np.concatenate((ends, [n])).astype(np.int64)
    if starts[-1] == n:
        starts, ends = starts[:-1], ends[:-1]
    return starts, ends


_OK_TYPES = (pa.types.is_string, pa.types.is_integer, pa.types.is_boolean, pa.types.is_null)


def _arrow_chunk(text: bytes, n_rows: int, longest: int) -> pa.Table | None:
    """pyarrow's reading of well-formed lines, or None where it may differ from the job's."""
    options = pj.ReadOptions(block_size=max(1 << 22, 2 * longest + 2))
    string = {}
    for _ in range(2):
        parse = pj.ParseOptions(explicit_schema=pa.schema(string) if string else None)
        try:
            table = pj.read_json(pa.BufferReader(text), read_options=options, parse_options=parse)
        except (pa.ArrowInvalid, UnicodeDecodeError):
            return None
        retimed = {
            name: pa.string()
            for name in FIELDS
            if name in table.column_names and pa.types.is_timestamp(table.schema.field(name).type)
        }
        if not retimed:
            break
        string.update(retimed)  # a time given as text stays text
    else:
        return None
    if table.num_rows != n_rows:
        return None  # a line held two objects
    for name in table.column_names:
        type_ = table.schema.field(name).type
        column = table.column(name)
        if pa.types.is_floating(type_):
            finite = pc.all(pc.is_finite(column)).as_py()
            if finite is False:
                return None  # NaN or Infinity: not JSON to the job
            # an integral value in a number column other than ts may have been `1` or `1.0`
            if name in FIELDS and name != "ts":
                return None
        elif pa.types.is_timestamp(type_) and name not in FIELDS:
            continue
        elif not any(test(type_) for test in _OK_TYPES):
            return None  # nested: its text, or a NaN inside it, needs the line reader
    return table.combine_chunks()


def _line_block(file: InputFile, lines: list[int], texts: list[bytes]) -> Block:
    """Lines read one by one by the strict reader (`ingest_baseline_text`)."""
    errors: list[str | None] = []
    cells: dict[str, list[str | None]] = {name: [] for name in FIELDS}
    for text in texts:
        error, found = tx.json_line_fields(text)
        errors.append(error)
        for name in FIELDS:
            cells[name].append(tx.utf8_text(found.get(name)))
    return Block(
        file,
        np.asarray(lines, np.int64),
        {name: pa.array(values, pa.string()) for name, values in cells.items()},
        pa.array(errors, pa.string()),
        lambda rows: [texts[i] for i in rows],
    )


def _read_jsonl(file: InputFile) -> list[pa.Table]:
    data = _read_bytes(file)
    parts: list[pa.Table] = []
    first_line = 1
    at = 0
    while at < len(data):
        cut = data.find(b"\n", min(at + CHUNK_BYTES, len(data)) - 1)
        stop = len(data) if cut < 0 else cut + 1
        tables, n_lines = _jsonl_chunk(file, data, at, stop, first_line)
        parts.extend(tables)
        first_line += n_lines
        at = stop
    return parts


def _jsonl_chunk(
    file: InputFile, data: bytes, lo: int, hi: int, first_line: int
) -> tuple[list[pa.Table], int]:
    """The typed rows of the lines in data[lo:hi] (whole lines), and how many lines."""
    buf = np.frombuffer(data, np.uint8, hi - lo, lo)
    starts, ends = _lines(buf)
    if len(starts) == 0:
        return [], 0
    numbers = np.arange(first_line, first_line + len(starts), dtype=np.int64)
    lengths = ends - starts
    nonempty = lengths > 0
    first = np.where(nonempty, buf[np.minimum(starts, len(buf) - 1)], 0)
    last = np.where(nonempty, buf[np.maximum(ends - 1, 0)], 0)
    regular = nonempty & (first == ord("{")) & (last == ord("}"))
    if not data[lo:hi].isascii():
        high = np.flatnonzero(buf >= 0x80)
        for k in np.unique(np.searchsorted(starts, high, side="right") - 1):
            if regular[k]:
                try:
                    data[lo + starts[k] : lo + ends[k]].decode("utf-8")
                except UnicodeDecodeError:
                    regular[k] = False
    tables: list[pa.Table] = []
    fast = np.flatnonzero(regular)
    table = None
    if len(fast):
        if len(fast) == int(nonempty.sum()):
            text = data[lo:hi]  # every non-empty line is one: give pyarrow the chunk as it is
        else:
            text = b"\n".join(data[lo + starts[k] : lo + ends[k]] for k in fast)
        table = _arrow_chunk(text, len(fast), int(lengths[fast].max()))
    slow = np.flatnonzero(nonempty & ~regular) if table is not None else np.flatnonzero(nonempty)
    if table is not None and len(fast):
        fields = {n: table.column(n).combine_chunks() for n in FIELDS if n in table.column_names}

        def raw_of(rows: np.ndarray) -> list[bytes]:
            return [data[lo + starts[k] : lo + ends[k]] for k in fast[rows]]

        tables.append(_typed(Block(file, numbers[fast], fields, None, raw_of)))
        _PATHS["json_rows_arrow"] += len(fast)
    if len(slow):
        texts = [data[lo + starts[k] : lo + ends[k]] for k in slow]
        keep = [j for j, t in enumerate(texts) if t.strip(b" ")]  # Spark's trim: spaces only
        _PATHS["json_rows_line_by_line"] += len(keep)
        if keep:
            block = _line_block(
                file, [int(numbers[slow[j]]) for j in keep], [texts[j] for j in keep]
            )
            tables.append(_typed(block))
    if len(tables) > 1:
        merged = pa.concat_tables(tables)
        tables = [merged.take(pa.array(np.argsort(merged.column("line"), kind="stable")))]
    return tables, len(starts)


def _read_csv(file: InputFile) -> list[pa.Table]:
    import csv
    import io

    with (gzip.open if file.path.lower().endswith(".gz") else open)(file.path, "rb") as fh:
        first = fh.readline()
    head = first.decode("utf-8", errors="replace").rstrip("\r\n")
    header = (
        [h.strip().lower() for h in next(csv.reader(io.StringIO(head)))] if head.strip() else []
    )
    if not header:
        return [_whole_file(file, "a CSV file without a header row")]
    if len(set(header)) != len(header):
        twice = sorted({h for h in header if header.count(h) > 1})
        return [_whole_file(file, f"the CSV header names column(s) {twice} twice")]
    data = _read_bytes(file)
    starts, ends = _lines(np.frombuffer(data, np.uint8))
    lines, texts, errors = [], [], []
    cells: dict[str, list[str | None]] = {name: [] for name in FIELDS}
    for number in range(2, len(starts) + 1):
        line = data[starts[number - 1] : ends[number - 1]]
        if not line.strip(b" "):
            continue
        try:
            value = line.decode("utf-8")
            error = None
        except UnicodeDecodeError:
            value = line.decode("utf-8", errors="replace")
            error = tx.NOT_UTF8
        tokens = next(csv.reader([value], quotechar='"', doublequote=True))
        if error is None and '"' not in value and value.count(",") + 1 != len(header):
            error = f"CSV row does not have the header's {len(header)} fields"
        elif error is None and len(tokens) != len(header):
            error = "unparseable CSV row"
        row = dict(zip(header, tokens, strict=False))
        for name in FIELDS:
            cell = row.get(name)
            cells[name].append(cell if cell else None)
        lines.append(number - 1)
        texts.append(line)
        errors.append(error)
    if not lines:
        return []
    block = Block(
        file,
        np.asarray(lines, np.int64),
        {name: pa.array(values, pa.string()) for name, values in cells.items()},
        pa.array(errors, pa.string()),
        lambda rows: [texts[i] for i in rows],
    )
    return [_typed(block)]


def _parquet_rows(table: pa.Table, rows: np.ndarray) -> list[bytes]:
    """`to_json(struct(*columns))` of some rows, as the job's raw."""
    part = table.take(pa.array(rows))
    names = part.column_names
    types = [str(t) for t in part.schema.types]
    columns = [part.column(n).to_pylist() for n in names]
    return [
        tx.spark_json_row(names, [c[i] for c in columns], types).encode("utf-8")
        for i in range(part.num_rows)
    ]


def _read_parquet(file: InputFile) -> list[pa.Table]:
    try:
        pq.read_schema(file.path)
    except (OSError, ValueError) as e:
        return [_whole_file(file, f"not a readable Parquet file ({str(e).splitlines()[0][:200]})")]
    table = pq.read_table(file.path)
    present = {name.lower(): name for name in table.column_names}
    fields = {n: table.column(present[n]).combine_chunks() for n in FIELDS if n in present}
    n = table.num_rows
    rows = np.arange(1, n + 1, dtype=np.int64)
    return [_typed(Block(file, rows, fields, None, lambda bad: _parquet_rows(table, bad)))]


def _read(file: InputFile) -> list[pa.Table]:
    if file.reader not in OURS:
        raise BaselineError(
            f"{file.shown}: the baseline reads JSON Lines, CSV and Parquet, not {file.reader}"
        )
    if not os.access(file.path, os.R_OK):
        return [_whole_file(file, "the file cannot be read (permission denied)")]
    if file.reader == "jsonl":
        return _read_jsonl(file)
    if file.reader == "csv":
        return _read_csv(file)
    return _read_parquet(file)


def _reread(file: InputFile, lines: np.ndarray) -> list[bytes]:
    """The raw text of some rows of a file, read again (rows a later rule rejected)."""
    if file.reader in ("parquet", "delta"):
        return _parquet_rows(pq.read_table(file.path), lines - 1)
    data = _read_bytes(file)
    starts, ends = _lines(np.frombuffer(data, np.uint8))
    offset = 1 if file.reader == "csv" else 0  # a CSV header is not counted
    return [data[starts[k + offset - 1] : ends[k + offset - 1]] for k in lines]


# --------------------------------------------------------------------------- the rules


def _codes(values: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Dictionary codes (-1 for null) and the dictionary."""
    encoded = pc.dictionary_encode(values)
    if isinstance(encoded, pa.ChunkedArray):
        if encoded.num_chunks == 0:
            return np.zeros(0, np.int64), pa.array([], values.type)
        # one memo table encodes every chunk, and each chunk carries its final dictionary
        dictionary = encoded.chunk(0).dictionary
        if any(len(c.dictionary) != len(dictionary) for c in encoded.chunks):
            encoded = encoded.unify_dictionaries()
            dictionary = encoded.chunk(0).dictionary
        indices = pa.chunked_array([c.indices for c in encoded.chunks], pa.int32())
    else:
        dictionary, indices = encoded.dictionary, encoded.indices
    return np.asarray(pc.fill_null(indices, -1)), dictionary


def _group_starts(*keys: np.ndarray) -> np.ndarray:
    """Where a new group starts in arrays sorted by `keys`."""
    n = len(keys[0])
    new = np.zeros(n, bool)
    if n:
        new[0] = True
        for k in keys:
            new[1:] |= k[1:] != k[:-1]
    return new


def _first_of_group(new: np.ndarray) -> np.ndarray:
    """For each position, the position where its group starts."""
    return np.maximum.accumulate(np.where(new, np.arange(len(new)), 0))


def _stable_order(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """The stable order by (major, minor): one sort of a packed key when both fit, else two."""
    if len(major) == 0:
        return np.zeros(0, np.int64)
    lo, hi = int(minor.min()), int(minor.max())
    span = max(hi - lo, 0).bit_length()
    if int(major.max()).bit_length() + span <= 62 and int(major.min()) >= 0:
        return np.argsort((major << span) | (minor - lo), kind="stable")
    return np.lexsort((minor, major))


@dataclass
class _Rejects:
    """Rows rejected after typing: their reason, detail (REF: where another row is) and
    the row REF points at (-1: none)."""

    rows: list[np.ndarray] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    details: list[list[str]] = field(default_factory=list)
    refs: list[np.ndarray] = field(default_factory=list)

    def add(self, rows: np.ndarray, reason: str, details: list[str], refs: np.ndarray) -> None:
        if len(rows):
            self.rows.append(np.asarray(rows, np.int64))
            self.reasons.append(reason)
            self.details.append(details)
            self.refs.append(np.asarray(refs, np.int64))

    def all_rows(self) -> np.ndarray:
        return np.concatenate(self.rows) if self.rows else np.zeros(0, np.int64)


@dataclass
class _Rows:
    """The typed rows as NumPy columns, strings as dictionary codes (-1: null)."""

    fid: np.ndarray
    line: np.ndarray
    kind: np.ndarray
    seq: np.ndarray
    seq_ok: np.ndarray
    accepted: np.ndarray
    trace: np.ndarray
    process: np.ndarray
    peer: np.ndarray
    msg: np.ndarray
    traces: pa.Array
    names: pa.Array  # process and peer names share one dictionary
    msgs: pa.Array

    @classmethod
    def of(cls, rows: pa.Table) -> _Rows:
        n = rows.num_rows
        trace, traces = _codes(rows.column("trace"))
        names_col = pa.chunked_array(
            rows.column("process").chunks + rows.column("peer").chunks, pa.string()
        )
        both, names = _codes(names_col)
        msg, msgs = _codes(rows.column("msg"))
        return cls(
            fid=np.asarray(rows.column("file_id")).astype(np.int64),
            line=np.asarray(rows.column("line")),
            kind=np.asarray(rows.column("kind")),
            seq=np.asarray(pc.fill_null(rows.column("seq"), 0)),
            seq_ok=_valid(rows.column("seq")),
            accepted=~np.asarray(rows.column("rejected"), bool),
            trace=trace,
            process=both[:n],
            peer=both[n:],
            msg=msg,
            traces=traces,
            names=names,
            msgs=msgs,
        )


@dataclass
class _Events:
    """Step 2: the accepted rows in (trace, process, local order, file order), grouped."""

    rows: np.ndarray  # accepted rows, sorted
    event_of: np.ndarray  # per sorted position: its event
    event_start: np.ndarray  # per event: its first sorted position
    process_key: np.ndarray  # per event: (trace, process) as one number
    event_row: np.ndarray  # per row: its event, -1 if none
    duplicate: np.ndarray  # per row: a duplicate_event of the event rules
    leader: np.ndarray  # per row: its event's first row
    risky: np.ndarray  # per event: a multicast with a copy that names no destination


def _event_rules(r: _Rows, rejects: _Rejects) -> tuple[_Events, np.ndarray]:
    """Duplicate events, multicast copies to a destination named twice; the repeated rows."""
    n = len(r.fid)
    n_names = max(len(r.names), 1)
    acc = np.flatnonzero(r.accepted)
    noseq = ~r.seq_ok[acc]
    major = (r.trace[acc].astype(np.int64) * n_names + r.process[acc]) * 2 + noseq
    minor = np.where(noseq, acc, r.seq[acc])  # without seq: a row is its own event
    order = _stable_order(major, minor)
    rows = acc[order]
    new_event = _group_starts(major[order], minor[order])
    event_of = np.cumsum(new_event) - 1
    event_start = np.flatnonzero(new_event)
    n_events = len(event_start)
    kind = r.kind[rows]
    is_copy = (kind[event_start][event_of] == SEND) & (kind == SEND)
    duplicate = np.zeros(n, bool)
    duplicate[rows[(np.arange(len(rows)) > event_start[event_of]) & ~is_copy]] = True
    event_row = np.full(n, -1, np.int64)
    event_row[rows] = event_of
    leader = np.full(n, -1, np.int64)
    leader[rows] = rows[event_start[event_of]]
    peer = r.peer[rows]
    copies = np.bincount(event_of[is_copy], minlength=n_events)
    peerless = np.bincount(event_of[is_copy & (peer < 0)], minlength=n_events)
    # further copies of a multicast to a destination an earlier copy named
    named = np.flatnonzero(is_copy & (peer >= 0) & (copies[event_of] > 1))
    repeated = np.zeros(n, bool)
    if len(named):
        o = np.lexsort((named, peer[named], event_of[named]))
        at = named[o]
        new = _group_starts(event_of[at], peer[at])
        again = rows[at[~new]]
        repeated[again] = True
        rejects.add(
            again,
            "duplicate_event",
            [
                f"second copy of a multicast to '{r.names[int(r.peer[x])]}' "
                f"(same process and seq as {REF})"
                for x in again
            ],
            rows[at[_first_of_group(new)][~new]],
        )
    events = _Events(
        rows=rows,
        event_of=event_of,
        event_start=event_start,
        process_key=major[order][event_start] // 2,
        event_row=event_row,
        duplicate=duplicate,
        leader=leader,
        risky=(copies > 1) & (peerless > 0),
    )
    return events, repeated


@dataclass
class _Messages:
    """Each (trace, msg_id) with its kept send and receive rows (-1: none)."""

    key_row: np.ndarray  # a row of the message (its trace and msg_id)
    send: np.ndarray
    recv: np.ndarray
    dropped: np.ndarray  # a multicast's second copy to one destination


def _message_rules(r: _Rows, ends: np.ndarray, rejects: _Rejects) -> _Messages:
    """Duplicate messages and peer mismatches: one stable sort by (trace, msg_id, kind)."""
    key = r.trace[ends].astype(np.int64) * max(len(r.msgs), 1) + r.msg[ends]
    o = _stable_order(key, r.kind[ends].astype(np.int64))  # sends (1) before receives (2)
    rows, key, kind = ends[o], key[o], r.kind[ends][o]
    new_end = _group_starts(key, kind)
    first_end = rows[_first_of_group(new_end)]
    new_msg = _group_starts(key)
    lead = rows[_first_of_group(new_msg)]  # the first send, if the message has one
    has_send = r.kind[lead] == SEND
    sender = np.where(has_send, r.process[lead], -1)
    send_peer = np.where(has_send, r.peer[lead], -1)
    duplicate = ~new_end
    wrong_dst = (send_peer >= 0) & (send_peer != r.process[rows])
    wrong_src = (sender >= 0) & (r.peer[rows] >= 0) & (r.peer[rows] != sender)
    mismatch = (kind == RECEIVE) & ~duplicate & (wrong_dst | wrong_src)
    dup = np.flatnonzero(duplicate)
    rejects.add(
        rows[dup],
        "duplicate_msg",
        [
            f"second {KIND_NAMES[r.kind[x]]} of msg_id '{r.msgs[int(r.msg[x])]}' "
            f"(the first is {REF})"
            for x in rows[dup]
        ],
        first_end[dup],
    )
    details = []
    for j in np.flatnonzero(mismatch):
        x = rows[j]
        m = r.msgs[int(r.msg[x])]
        if wrong_dst[j]:
            details.append(
                f"msg_id '{m}' was sent to '{r.names[int(send_peer[j])]}' but received by "
                f"'{r.names[int(r.process[x])]}'"
            )
        else:
            details.append(
                f"msg_id '{m}' was sent by '{r.names[int(sender[j])]}' but the receive names "
                f"peer '{r.names[int(r.peer[x])]}'"
            )
    rejects.add(rows[mismatch], "peer_mismatch", details, np.full(int(mismatch.sum()), -1))
    msg_of = np.cumsum(new_msg) - 1
    n_msgs = int(new_msg.sum())
    send = np.full(n_msgs, -1, np.int64)
    recv = np.full(n_msgs, -1, np.int64)
    kept = ~duplicate & ~mismatch
    send[msg_of[kept & (kind == SEND)]] = rows[kept & (kind == SEND)]
    recv[msg_of[kept & (kind == RECEIVE)]] = rows[kept & (kind == RECEIVE)]
    return _Messages(rows[new_msg], send, recv, np.zeros(n_msgs, bool))


def _second_copies(r: _Rows, ev: _Events, m: _Messages, rejects: _Rejects) -> None:
    """After matching: a multicast's second copy to one destination (a copy that names no
    peer goes where its receive is): its send and receive rows, and its message, go."""
    s0, r0 = np.maximum(m.send, 0), np.maximum(m.recv, 0)
    dst = np.where(m.recv >= 0, r.process[r0], np.where(m.send >= 0, r.peer[s0], -1))
    event = np.where(m.send >= 0, ev.event_row[s0], -1)
    cand = np.flatnonzero((m.send >= 0) & (dst >= 0) & ev.risky[np.maximum(event, 0)])
    if not len(cand):
        return
    c = cand[np.lexsort((m.send[cand], dst[cand], event[cand]))]
    new = _group_starts(event[c], dst[c])
    first = m.send[c[_first_of_group(new)]]
    for j in np.flatnonzero(~new):
        k = c[j]
        m.dropped[k] = True
        to = r.names[int(dst[k])]
        detail = f"second copy of a multicast to '{to}' (same process and seq as {REF})"
        rejects.add(np.array([m.send[k]]), "duplicate_event", [detail], np.array([first[j]]))
        if m.recv[k] >= 0:
            mid = r.msgs[int(r.msg[m.recv[k]])]
            detail = (
                f"receive of msg_id '{mid}', a second copy of a multicast to '{to}' "
                f"(the first copy is {REF})"
            )
            rejects.add(np.array([m.recv[k]]), "duplicate_event", [detail], np.array([first[j]]))


def ingest_tables(paths: Sequence[str]) -> tuple[dict[str, pa.Table], dict[str, Any]]:
    """The three tables for `paths`, and counts and phase times."""
    times: dict[str, float] = {}
    began = time.perf_counter()
    _PATHS.update(dict.fromkeys(_PATHS, 0))
    inputs = discover_inputs([str(p) for p in paths], IngestSettings())
    files = sorted(inputs.files, key=lambda f: f.file_id)
    parts: list[pa.Table] = []
    for file in files:
        parts.extend(_read(file))
    rows = pa.concat_tables(parts) if parts else TYPED.empty_table()
    del parts
    n_rows = rows.num_rows
    times["read_s"] = time.perf_counter() - began
    began = time.perf_counter()
    owned = [rows]  # handed over, so that _judge can let go of columns it has encoded
    del rows
    tables = _judge(owned, files)
    times["rules_s"] = time.perf_counter() - began
    counts = {
        "rows_read": n_rows,
        "events": tables["events"].num_rows,
        "messages": tables["messages"].num_rows,
        "quarantine": tables["quarantine"].num_rows,
        **_PATHS,
        **times,
    }
    return tables, counts


def _judge(owned: list[pa.Table], files: Sequence[InputFile]) -> dict[str, pa.Table]:
    """Steps 2-5 of the job on the typed rows (in file order), taken from `owned`."""
    rows = owned.pop()
    r = _Rows.of(rows)
    rows = rows.drop_columns(["trace", "process", "peer", "msg", "kind", "file_id"])
    shown = np.array([""] * (max((f.file_id for f in files), default=0) + 1), dtype=object)
    for f in files:
        shown[f.file_id] = f.shown
    # which files give seq at all (every row read counts, as in the job)
    has_seq = np.zeros(len(shown), bool)
    has_seq[np.unique(r.fid[np.asarray(rows.column("seq_given"), bool)])] = True
    missing_seq = ~r.seq_ok & has_seq[r.fid]

    rejects = _Rejects()
    ev, repeated = _event_rules(r, rejects)
    good = r.accepted & ~ev.duplicate
    no_seq = np.flatnonzero(good & missing_seq)
    rejects.add(no_seq, "malformed", [MISSING_SEQ] * len(no_seq), np.full(len(no_seq), -1))
    is_end = (r.kind == SEND) | (r.kind == RECEIVE)
    msgs = _message_rules(r, np.flatnonzero(good & is_end & ~missing_seq & ~repeated), rejects)
    _second_copies(r, ev, msgs, rejects)
    kept = good.copy()
    kept[rejects.all_rows()] = False

    # events: those that keep a row; lseq numbers them in each process's order
    keep = kept[ev.rows]
    k_rows, k_event = ev.rows[keep], ev.event_of[keep]
    new = _group_starts(k_event)
    event_ids, first_rows = k_event[new], k_rows[new]
    lseq = np.zeros(len(ev.event_start), np.int64)
    survivors_key = ev.process_key[event_ids]
    lseq[event_ids] = np.arange(len(event_ids)) - _first_of_group(_group_starts(survivors_key)) + 1
    sends = np.bincount(k_event[r.kind[k_rows] == SEND], minlength=len(ev.event_start))
    pidx = _ProcessIndex(r, first_rows)
    return {
        "events": _events_table(rows, r, first_rows, event_ids, lseq, sends, pidx, shown),
        "messages": _messages_table(rows, r, ev, msgs, lseq, pidx),
        "quarantine": _quarantine_table(rows, r, ev, rejects, has_seq, shown, files),
    }


class _ProcessIndex:
    """pidx: each trace's processes that keep an event, numbered by name (byte order)."""

    def __init__(self, r: _Rows, event_rows: np.ndarray) -> None:
        self.width = max(len(r.names), 1)
        self.rank = np.empty(len(r.names), np.int64)
        self.rank[np.asarray(pc.sort_indices(r.names))] = np.arange(len(r.names))
        trace = r.trace[event_rows].astype(np.int64)
        self.keys = np.unique(trace * self.width + self.rank[r.process[event_rows]])
        self.pidx = np.arange(len(self.keys)) - _first_of_group(
            _group_starts(self.keys // self.width)
        )

    def of(self, trace: np.ndarray, name: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """pidx of each (trace, name code), and whether the trace has that process."""
        if len(self.keys) == 0:
            return np.zeros(len(trace), np.int64), np.zeros(len(trace), bool)
        key = trace.astype(np.int64) * self.width + self.rank[np.maximum(name, 0)]
        at = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
        return self.pidx[at], (name >= 0) & (self.keys[at] == key)


def _schema(table: str) -> pa.Schema:
    return arrow_schema(table).remove_metadata()


def comparable(table: pa.Table, name: str) -> pa.Table:
    """`table` (this baseline's, or the job's as read from Delta or Spark) cast to the schema
    of table `name` and sorted by every column but `vc`: two ingests wrote the same rows
    iff their comparable tables are equal."""
    schema = _schema(name)
    columns = [table.column(f.name).cast(f.type) for f in schema]
    cast = pa.table(columns, schema=schema)
    keys = [(f.name, "ascending") for f in schema if not pa.types.is_list(f.type)]
    return cast.take(pc.sort_indices(cast, keys))


def _strings(values: np.ndarray, names: Sequence[str]) -> pa.Array:
    """Small-integer codes as the strings they stand for."""
    return pa.DictionaryArray.from_arrays(
        pa.array(values.astype(np.int32)), pa.array(list(names), pa.string())
    ).cast(pa.string())


def _events_table(
    rows: pa.Table,
    r: _Rows,
    first_rows: np.ndarray,
    event_ids: np.ndarray,
    lseq: np.ndarray,
    sends: np.ndarray,
    pidx: _ProcessIndex,
    shown: np.ndarray,
) -> pa.Table:
    """One row per event that keeps a row, from its first kept row."""
    take = pa.array(first_rows)
    schema = _schema("events")
    m = len(first_rows)
    trace, process = r.trace[first_rows], r.process[first_rows]
    return pa.table(
        [
            r.traces.take(pa.array(trace)),
            r.names.take(pa.array(process)),
            pa.array(pidx.of(trace, process)[0].astype(np.int32)),
            pa.array(lseq[event_ids]),
            _strings(r.kind[first_rows], KIND_NAMES),
            rows.column("ts").take(take),
            rows.column("label").take(take),
            pa.array(sends[event_ids].astype(np.int32)),
            rows.column("seq").take(take),
            _strings(r.fid[first_rows], shown),
            rows.column("line").take(take),
            pa.nulls(m, pa.int64()),
            pa.nulls(m, schema.field("vc").type),
        ],
        schema=schema,
    )


def _messages_table(
    rows: pa.Table, r: _Rows, ev: _Events, msgs: _Messages, lseq: np.ndarray, pidx: _ProcessIndex
) -> pa.Table:
    live = ~msgs.dropped
    s, v, key = msgs.send[live], msgs.recv[live], msgs.key_row[live]
    has_s, has_r = s >= 0, v >= 0
    s0, r0 = np.maximum(s, 0), np.maximum(v, 0)
    src = np.where(has_s, r.process[s0], r.peer[r0])
    dst = np.where(has_r, r.process[r0], r.peer[s0])
    src_pidx, src_found = pidx.of(r.trace[key], src)
    dst_pidx, dst_found = pidx.of(r.trace[key], dst)
    ts_col = rows.column("ts")
    ts, ts_ok = np.asarray(pc.fill_null(ts_col, 0.0)), _valid(ts_col)
    size = np.asarray(rows.column("size"))
    status = np.where(has_s & has_r, 0, np.where(has_s, 1, 2))
    return pa.table(
        [
            r.traces.take(pa.array(r.trace[key])),
            r.msgs.take(pa.array(r.msg[key])),
            r.names.take(pa.array(src, mask=src < 0)),
            r.names.take(pa.array(dst, mask=dst < 0)),
            pa.array(src_pidx.astype(np.int32), mask=~src_found),
            pa.array(dst_pidx.astype(np.int32), mask=~dst_found),
            pa.array(lseq[ev.event_row[s0]], mask=~has_s),
            pa.array(lseq[ev.event_row[r0]], mask=~has_r),
            pa.array(ts[s0], mask=~(has_s & ts_ok[s0])),
            pa.array(ts[r0], mask=~(has_r & ts_ok[r0])),
            pa.array(np.where(has_s, size[s0], size[r0])),
            _strings(status, ("delivered", "in_flight", "orphan")),
        ],
        schema=_schema("messages"),
    )


def _quarantine_table(
    rows: pa.Table,
    r: _Rows,
    ev: _Events,
    rejects: _Rejects,
    has_seq: np.ndarray,
    shown: np.ndarray,
    files: Sequence[InputFile],
) -> pa.Table:
    """Every rejected row with its text, reason and a detail that says where the other row is."""
    out: list[int] = []
    reasons: list[str] = []
    details: list[str] = []
    raws: dict[int, bytes] = {}

    def where(own: int, ref: int) -> str:
        if r.fid[ref] == r.fid[own]:
            return f"line {r.line[ref]}"
        return f"line {r.line[ref]} of {shown[r.fid[ref]]}"

    early = np.flatnonzero(~r.accepted)  # rejected by the row-local rules: text kept
    if len(early):
        take = pa.array(early)
        pre = rows.column("pre").take(take).to_pylist()
        post = rows.column("post").take(take).to_pylist()
        parsed = np.asarray(rows.column("parsed"), bool)[early]
        given = np.asarray(rows.column("seq_given"), bool)[early]
        raw = rows.column("raw").take(take).to_pylist()
        for j, i in enumerate(early):
            middle = MISSING_SEQ if parsed[j] and not given[j] and has_seq[r.fid[i]] else None
            details.append("; ".join(x for x in (pre[j], middle, post[j]) if x is not None))
            reasons.append("malformed")
            out.append(int(i))
            raws[int(i)] = raw[j] or b""
    for i in np.flatnonzero(ev.duplicate):
        where_ = where(i, ev.leader[i])
        details.append(f"same process and seq as {where_}, and not part of a multicast send")
        reasons.append("duplicate_event")
        out.append(int(i))
    for group in zip(rejects.rows, rejects.reasons, rejects.details, rejects.refs, strict=True):
        for i, text, ref in zip(group[0], group[2], group[3], strict=True):
            details.append(text.replace(REF, where(i, ref)) if ref >= 0 else text)
            reasons.append(group[1])
            out.append(int(i))
    # the text of rows rejected after typing, read again from their files
    by_file: dict[int, list[int]] = {}
    for i in out:
        if i not in raws:
            by_file.setdefault(int(r.fid[i]), []).append(i)
    file_of = {f.file_id: f for f in files}
    for f, members in by_file.items():
        raws.update(zip(members, _reread(file_of[f], r.line[members]), strict=True))
    idx = np.asarray(out, np.int64)
    return pa.table(
        [
            _strings(r.fid[idx], shown),
            pa.array(r.line[idx]),
            pa.array([raws[i] for i in out], pa.binary()).view(pa.string()),
            pa.array(reasons, pa.string()),
            pa.array(details, pa.string()),
            r.traces.take(pa.array(r.trace[idx])),
        ],
        schema=_schema("quarantine"),
    )


# --------------------------------------------------------------------------- entry points


def ingest_single(paths: Sequence[str], out_dir: Path) -> dict[str, Any]:
    """Ingest `paths` in this process; write events/messages/quarantine Parquet in `out_dir`;
    return counts and phase times (seconds)."""
    tables, counts = ingest_tables(paths)
    began = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        pq.write_table(table, out_dir / f"{name}.parquet")
    counts["write_s"] = time.perf_counter() - began
    kinds = pc.value_counts(tables["events"].column("kind")).to_pylist()
    for entry in kinds:
        counts[f"{entry['values']}_events"] = entry["counts"]
    status = pc.value_counts(tables["messages"].column("status")).to_pylist()
    for entry in status:
        counts[entry["values"]] = entry["counts"]
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("inputs", nargs="+", help="files or folders, as `causal-spark ingest`")
    parser.add_argument("--out", required=True, type=Path, help="folder for the three tables")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    counts = ingest_single(args.inputs, args.out)
    counts["total_s"] = time.perf_counter() - began
    print(json.dumps(counts, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
