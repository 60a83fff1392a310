"""ShiViz / GoVector text logs (docs/formats.md): a regex per event, messages from clock deltas.

Reading. A file is one task (the parser regex may span lines), which reads the
file in its Python worker (the JVM never holds the text as one row): its text is
matched in order with the parser regex (ShiViz's `m` flag: `^`/`$` at line
boundaries). Named groups `host`, `clock` and `event` are required; other named
groups go to the label, after the event text, as a JSON object. A file whose
first line is a regex with those groups followed by a blank line (GoVector's
header) uses it when no regex is given; the header is not an event. An optional
delimiter regex splits the text into executions, each its own trace: the text
before the first delimiter keeps the file's default trace id, and each later one
gets `:<label>` from the delimiter's `trace` group (`:<k>` for the k-th
delimiter when it has none; a repeated label gets `#2`, `#3`...). Text that no
match covers is not silently skipped: each non-blank line of it is a record
rejected `unparseable`. Windows line ends are read as `\n`.

The clock checks and the messages (`shiviz_kernel`, as ShiViz does: for an event e
on p, each host q != p whose entry rose since p's previous event gives a candidate,
q's event number clock(e)[q]; a candidate already known to another candidate is
dropped; each remaining candidate is a message `q#v>p#seq` sent by q's event v and
received by e) run in the same task, on the file's records in NumPy.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator, Sequence
from functools import partial

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark.io.raw import WHOLE_FILE_LINE
from causal_spark.io.readers.base import (
    CLOCK_TYPE,
    PARSE_ERROR,
    PARSE_REASON,
    RAW_LIMIT,
    RAW_SCHEMA,
    RECORD,
    TRACE_SUFFIX,
    UNPARSEABLE,
    Reader,
    ReaderError,
    ReaderOptions,
    absolute_files,
    conform,
)
from causal_spark.io.readers.clocks import CLOCK_ARROW, clock_array
from causal_spark.io.readers.shiviz_kernel import OUTPUT_FIELDS, RECORD_FIELDS, infer_rows

NAME = "shiviz"
EXTENSIONS: tuple[str, ...] = (".log", ".txt")
DEFAULT_REGEX = r"(?<host>\S*) (?<clock>{.*})\n(?<event>.*)"
REQUIRED_GROUPS: tuple[str, ...] = ("host", "clock", "event")

# the record columns the parse gives the kernel (shiviz_kernel.RECORD_FIELDS)
HOST = "host"
CLOCK_TEXT = "clock_text"
CLOCK = "clock"
EXECUTION = "execution"

MATCH_SCHEMA = T.StructType(
    [
        T.StructField(C.SOURCE, T.StringType()),
        T.StructField(C.LINE, T.LongType()),
        T.StructField(RECORD, T.LongType()),
        T.StructField(C.RAW, T.StringType()),
        T.StructField(HOST, T.StringType()),
        T.StructField(CLOCK_TEXT, T.StringType()),
        # the clock parsed where the text is (`clocks.clock_array`); null: not a clock
        T.StructField(CLOCK, CLOCK_TYPE),
        T.StructField(C.LABEL, T.StringType()),
        T.StructField(EXECUTION, T.LongType()),
        T.StructField(TRACE_SUFFIX, T.StringType()),
        T.StructField(PARSE_ERROR, T.StringType()),
        T.StructField(PARSE_REASON, T.StringType()),
    ]
)

_JS_GROUP = re.compile(r"\(\?<(?![=!])")
_BATCH = 8192


def python_regex(pattern: str) -> str:
    """A ShiViz (JavaScript) regex in Python syntax: `(?<name>` -> `(?P<name>`."""
    return _JS_GROUP.sub("(?P<", pattern)


def compile_parser(pattern: str) -> re.Pattern[str]:
    """The parser regex, compiled; `ReaderError` when invalid or without host/clock/event."""
    try:
        compiled = re.compile(python_regex(pattern), re.MULTILINE)
    except re.error as e:
        raise ReaderError(f"ShiViz regex {pattern!r} is not a valid regex: {e}") from e
    missing = [g for g in REQUIRED_GROUPS if g not in compiled.groupindex]
    if missing:
        raise ReaderError(
            f"ShiViz regex {pattern!r} lacks the named group(s) {missing}; "
            f"it needs {list(REQUIRED_GROUPS)}"
        )
    return compiled


def compile_delimiter(pattern: str) -> re.Pattern[str]:
    """The delimiter regex, compiled (its optional `trace` group names executions)."""
    try:
        return re.compile(python_regex(pattern), re.MULTILINE)
    except re.error as e:
        raise ReaderError(f"ShiViz delimiter {pattern!r} is not a valid regex: {e}") from e


def govector_header(text: str) -> str | None:
    """The regex on the first line when the file starts with a GoVector header
    (a parser regex, then a blank line), else None."""
    first, _, rest = text.partition("\n")
    second = rest.partition("\n")[0]
    if not first.strip() or second.strip():
        return None
    try:
        compile_parser(first.strip())
    except ReaderError:
        return None
    return first.strip()


def sniff(head: bytes) -> bool:
    """A GoVector header, or a line `host {"h":n...}` among the first lines."""
    text = head.decode("utf-8", errors="replace")
    if govector_header(text) is not None:
        return True
    lines = text.splitlines()[:8]
    return any(re.match(r'^[^\s{\[]\S* \{\s*\\?"[^"\\]*\\?"\s*:\s*\d', line) for line in lines)


class _Batches:
    """MATCH_SCHEMA rows, flushed as Arrow batches; the clocks are parsed from their
    text at the flush, in bulk (`clocks.clock_array`)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, object]] = []
        arrow = {T.LongType(): pa.int64(), CLOCK_TYPE: CLOCK_ARROW}
        self.schema = pa.schema(
            [pa.field(f.name, arrow.get(f.dataType, pa.string())) for f in MATCH_SCHEMA.fields]
        )

    def add(self, row: dict[str, object]) -> None:
        self.rows.append(row)

    def full(self) -> bool:
        return len(self.rows) >= _BATCH

    def flush(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pylist(self.rows, schema=self.schema)
        self.rows = []
        at = self.schema.get_field_index(CLOCK)
        return batch.set_column(at, CLOCK, clock_array(batch.column(CLOCK_TEXT)))


def _cap(text: str) -> str:
    if len(text) <= RAW_LIMIT:
        return text
    return f"{text[:RAW_LIMIT]} ... [{len(text)} characters in all]"


def _label(match: re.Match[str]) -> str | None:
    event = match.group("event")
    others = {
        name: value.rstrip("\r")
        for name, value in match.groupdict().items()
        if name not in REQUIRED_GROUPS and value is not None
    }
    if not others:
        return event
    return f"{event} {json.dumps(others, ensure_ascii=False)}"


def _executions(
    text: str, start: int, delimiter: re.Pattern[str] | None
) -> Iterator[tuple[int, int, str | None]]:
    """(start, end, trace suffix) of each execution of the text from `start`."""
    if delimiter is None:
        yield start, len(text), None
        return
    begin: int = start
    suffix: str | None = None
    seen: dict[str, int] = {}
    for k, match in enumerate(delimiter.finditer(text, start), start=1):
        yield begin, match.start(), suffix
        label = match.groupdict().get("trace") if "trace" in delimiter.groupindex else None
        label = label if label else str(k)
        seen[label] = seen.get(label, 0) + 1
        suffix = label if seen[label] == 1 else f"{label}#{seen[label]}"
        begin = match.end()
    yield begin, len(text), suffix


def parse_text(
    source: str, text: str, regex: str | None, delimiter: str | None
) -> Iterator[dict[str, object]]:
    """The records of one file: one per regex match, one per unmatched non-blank line."""
    text = text.replace("\r\n", "\n")
    header = govector_header(text)
    start = 0
    if header is not None:
        second = text.find("\n", text.find("\n") + 1)
        start = second + 1 if second >= 0 else len(text)
    parser = compile_parser(regex if regex is not None else header or DEFAULT_REGEX)
    splitter = compile_delimiter(delimiter) if delimiter is not None else None
    labelled = any(name not in REQUIRED_GROUPS for name in parser.groupindex)
    per_line: dict[int, int] = {}
    # records come in text order: a line is the newlines before its offset, counted on
    seen = [0, 1]  # offset, line there

    def numbered(offset: int) -> tuple[int, int]:
        if offset < seen[0]:
            raise AssertionError("ShiViz records out of text order")
        line = seen[1] + text.count("\n", seen[0], offset)
        seen[0], seen[1] = offset, line
        per_line[line] = per_line.get(line, 0) + 1
        return line, per_line[line]

    def unmatched(
        a: int, b: int, execution: int, suffix: str | None
    ) -> Iterator[dict[str, object]]:
        offset = a
        for piece in text[a:b].split("\n"):
            if piece.strip():
                line, record = numbered(offset + len(piece) - len(piece.lstrip()))
                yield {
                    C.SOURCE: source,
                    C.LINE: line,
                    RECORD: record,
                    C.RAW: _cap(piece.strip()),
                    EXECUTION: execution,
                    TRACE_SUFFIX: suffix,
                    PARSE_ERROR: "text that the ShiViz regex does not match",
                    PARSE_REASON: UNPARSEABLE,
                }
            offset += len(piece) + 1

    for execution, (begin, end, suffix) in enumerate(_executions(text, start, splitter)):
        position = begin
        for match in parser.finditer(text, begin, end):
            if match.end() == match.start():
                continue
            if match.start() > position and not text[position : match.start()].isspace():
                yield from unmatched(position, match.start(), execution, suffix)
            position = match.end()
            line, record = numbered(match.start())
            host = match.group("host")
            row: dict[str, object] = {
                C.SOURCE: source,
                C.LINE: line,
                RECORD: record,
                C.RAW: _cap(match.group(0)),
                EXECUTION: execution,
                TRACE_SUFFIX: suffix,
            }
            if not host:
                row[PARSE_ERROR] = "the record names no host"
                row[PARSE_REASON] = UNPARSEABLE
            else:
                row[HOST] = host
                row[CLOCK_TEXT] = match.group("clock")
                row[C.LABEL] = _label(match) if labelled else match.group("event")
            yield row
        yield from unmatched(position, end, execution, suffix)


def read_text(path: str) -> str:
    """A file's text as Spark's text source reads it: UTF-8 (a bad byte becomes U+FFFD),
    `.gz` decompressed."""
    opener = gzip.open if path.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        return fh.read().decode("utf-8", errors="replace")


def _file_records(source: str, regex: str | None, delimiter: str | None) -> pa.Table:
    """One file's records (MATCH_SCHEMA): a row per match or unmatched line; a file that
    cannot be read is one record at line 0."""
    out, batches = _Batches(), []
    try:
        text = read_text(source)
    except (OSError, EOFError, zlib.error) as e:
        out.add(
            {
                C.SOURCE: source,
                C.LINE: WHOLE_FILE_LINE,
                RECORD: 1,
                C.RAW: "",
                EXECUTION: 0,
                PARSE_ERROR: f"cannot read the file: {e}",
                PARSE_REASON: UNPARSEABLE,
            }
        )
        return pa.Table.from_batches([out.flush()])
    for row in parse_text(source, text, regex, delimiter):
        out.add(row)
        if out.full():
            batches.append(out.flush())
    batches.append(out.flush())
    return pa.Table.from_batches(batches)


def _read_files(
    batches: Iterator[pa.RecordBatch], regex: str | None, delimiter: str | None
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for source in batch.column(C.SOURCE).to_pylist():
            records = _file_records(source, regex, delimiter).select(list(RECORD_FIELDS))
            yield from infer_rows(records).to_batches(max_chunksize=_BATCH)


# the kernel's rows, as Spark takes them from Python
ROWS_SCHEMA = T.StructType(
    [T.StructField(name, RAW_SCHEMA[name].dataType) for name in OUTPUT_FIELDS]
)


def read(spark: SparkSession, files: Sequence[str], options: ReaderOptions) -> DataFrame:
    """ShiViz / GoVector logs as raw rows (see the module docstring).

    Each file is one task, which reads the file itself (a path every executor sees, as
    for every input), parses it, checks its clocks and infers its messages
    (`shiviz_kernel`): its text never becomes one Spark row, which the JVM would hold
    whole, in several copies. The task holds the file's records (about 300 bytes an
    event, its text included)."""
    if options.shiviz_regex is not None:
        compile_parser(options.shiviz_regex)
    if options.shiviz_delimiter is not None:
        compile_delimiter(options.shiviz_delimiter)
    parse = partial(_read_files, regex=options.shiviz_regex, delimiter=options.shiviz_delimiter)
    paths = absolute_files(files)
    listed = F.array(*[F.lit(path) for path in paths])
    one_per_task = spark.range(0, len(paths), 1, numPartitions=len(paths))
    rows = one_per_task.select(
        F.element_at(listed, (F.col("id") + 1).cast("int")).alias(C.SOURCE)
    ).mapInArrow(parse, ROWS_SCHEMA)
    return conform(rows)


READER = Reader(name=NAME, extensions=EXTENSIONS, sniff=sniff, read=read)
