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

Messages (`infer_messages`), as ShiViz does, in Spark joins on (host, event
number) so no task holds a whole execution: for an event e on p, each host q != p
whose entry rose since p's previous event gives a candidate, q's event number
clock(e)[q]; a candidate already known to another candidate (its clock has a q
entry >= that number) is dropped; each remaining candidate is a message
`q#v>p#seq` sent by q's event v and received by e.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from functools import partial

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark.io.raw import WHOLE_FILE_LINE
from causal_spark.io.readers import _events
from causal_spark.io.readers.base import (
    BAD_CLOCK,
    CLOCK_TYPE,
    PARSE_ERROR,
    PARSE_REASON,
    RAW_LIMIT,
    RECORD,
    RECORDED_VC,
    TRACE_SUFFIX,
    UNPARSEABLE,
    Reader,
    ReaderError,
    ReaderOptions,
    absolute_files,
    conform,
    rejected,
)
from causal_spark.io.readers.clocks import CLOCK, CLOCK_ERROR, OWN, check_clocks, clock_counts

NAME = "shiviz"
EXTENSIONS: tuple[str, ...] = (".log", ".txt")
DEFAULT_REGEX = r"(?<host>\S*) (?<clock>{.*})\n(?<event>.*)"
REQUIRED_GROUPS: tuple[str, ...] = ("host", "clock", "event")

HOST = "__rd_host"
CLOCK_TEXT = "__rd_clock_text"
EXECUTION = "__rd_execution"

MATCH_SCHEMA = T.StructType(
    [
        T.StructField(C.SOURCE, T.StringType()),
        T.StructField(C.LINE, T.LongType()),
        T.StructField(RECORD, T.LongType()),
        T.StructField(C.RAW, T.StringType()),
        T.StructField(HOST, T.StringType()),
        T.StructField(CLOCK_TEXT, T.StringType()),
        # the clock parsed where the text is (`clocks.clock_counts`); null: not a clock
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
    """Column lists of MATCH_SCHEMA rows, flushed as Arrow batches."""

    def __init__(self) -> None:
        self.columns: dict[str, list[object]] = {f.name: [] for f in MATCH_SCHEMA.fields}
        arrow = {T.LongType(): pa.int64(), CLOCK_TYPE: pa.map_(pa.string(), pa.int64())}
        self.schema = pa.schema(
            [pa.field(f.name, arrow.get(f.dataType, pa.string())) for f in MATCH_SCHEMA.fields]
        )

    def add(self, **row: object) -> None:
        for name, values in self.columns.items():
            values.append(row.get(name))

    def full(self) -> bool:
        return len(self.columns[C.SOURCE]) >= _BATCH

    def flush(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pydict(self.columns, schema=self.schema)
        for values in self.columns.values():
            values.clear()
        return batch


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
    newlines = [m.start() for m in re.finditer("\n", text)]

    def line_of(offset: int) -> int:
        return bisect_right(newlines, offset - 1) + 1

    header = govector_header(text)
    start = 0
    if header is not None:
        start = (newlines[1] + 1) if len(newlines) > 1 else len(text)
    parser = compile_parser(regex if regex is not None else header or DEFAULT_REGEX)
    splitter = compile_delimiter(delimiter) if delimiter is not None else None
    per_line: dict[int, int] = {}

    def numbered(offset: int) -> tuple[int, int]:
        line = line_of(offset)
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
                clock = match.group("clock")
                counts = clock_counts(clock)
                row[CLOCK_TEXT] = clock
                row[CLOCK] = None if counts is None else list(counts.items())
                row[C.LABEL] = _label(match)
            yield row
        yield from unmatched(position, end, execution, suffix)


def read_text(path: str) -> str:
    """A file's text as Spark's text source reads it: UTF-8 (a bad byte becomes U+FFFD),
    `.gz` decompressed."""
    opener = gzip.open if path.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        return fh.read().decode("utf-8", errors="replace")


def _parse_files(
    batches: Iterator[pa.RecordBatch], regex: str | None, delimiter: str | None
) -> Iterator[pa.RecordBatch]:
    out = _Batches()
    for batch in batches:
        for source in batch.column(C.SOURCE).to_pylist():
            try:
                text = read_text(source)
            except (OSError, EOFError, zlib.error) as e:  # one record: the whole file
                out.add(
                    **{
                        C.SOURCE: source,
                        C.LINE: WHOLE_FILE_LINE,
                        RECORD: 1,
                        C.RAW: "",
                        EXECUTION: 0,
                        PARSE_ERROR: f"cannot read the file: {e}",
                        PARSE_REASON: UNPARSEABLE,
                    }
                )
                continue
            for row in parse_text(source, text, regex, delimiter):
                out.add(**row)
                if out.full():
                    yield out.flush()
    yield out.flush()


def read_records(spark: SparkSession, files: Sequence[str], options: ReaderOptions) -> DataFrame:
    """The files' records (MATCH_SCHEMA): one row per match or unmatched line.

    Each file is one task, which reads the file itself (a path every executor sees, as
    for every input): its text never becomes one Spark row, which the JVM would have to
    hold whole, in several copies, and hand to Python in one Arrow batch."""
    if options.shiviz_regex is not None:
        compile_parser(options.shiviz_regex)
    if options.shiviz_delimiter is not None:
        compile_delimiter(options.shiviz_delimiter)
    parse = partial(_parse_files, regex=options.shiviz_regex, delimiter=options.shiviz_delimiter)
    paths = absolute_files(files)
    listed = F.array(*[F.lit(path) for path in paths])
    one_per_task = spark.range(0, len(paths), 1, numPartitions=len(paths))
    return one_per_task.select(
        F.element_at(listed, (F.col("id") + 1).cast("int")).alias(C.SOURCE)
    ).mapInArrow(parse, MATCH_SCHEMA)


TRACE_KEY: tuple[str, ...] = (C.SOURCE, EXECUTION)


def infer_messages(events: DataFrame) -> DataFrame:
    """Accepted events (TRACE_KEY, HOST, OWN, CLOCK) -> the same rows plus
    `_events.RECEIVES` and `_events.SENDS` (message ends, in host-name order)."""
    key = list(TRACE_KEY)
    by_host = Window.partitionBy(*key, HOST).orderBy(OWN)
    with_prev = events.withColumn("__rd_prev", F.lag(CLOCK).over(by_host))
    entry = F.explode(F.map_entries(F.col(CLOCK))).alias("__rd_entry")
    rose = (F.col("__rd_entry.key") != F.col(HOST)) & (
        F.col("__rd_entry.value")
        > F.coalesce(F.try_element_at(F.col("__rd_prev"), F.col("__rd_entry.key")), F.lit(0))
    )
    candidates = (
        with_prev.select(*key, HOST, OWN, entry)
        .where(rose)
        .select(
            *key,
            HOST,
            OWN,
            F.col("__rd_entry.key").alias("__rd_q"),
            F.col("__rd_entry.value").alias("__rd_v"),
        )
    )
    known = events.select(
        *key,
        F.col(HOST).alias("__rd_q"),
        F.col(OWN).alias("__rd_v"),
        F.col(CLOCK).alias("__rd_qclock"),
    )
    grouped = (
        candidates.join(known, [*key, "__rd_q", "__rd_v"], "left")
        .groupBy(*key, HOST, OWN)
        .agg(F.collect_list(F.struct("__rd_q", "__rd_v", "__rd_qclock")).alias("__rd_cands"))
    )
    cands = F.col("__rd_cands")
    remaining = F.filter(
        cands,
        lambda c: (
            ~F.exists(
                cands,
                lambda d: (
                    (d["__rd_q"] != c["__rd_q"])
                    & (
                        F.coalesce(F.try_element_at(d["__rd_qclock"], c["__rd_q"]), F.lit(0))
                        >= c["__rd_v"]
                    )
                ),
            )
        ),
    )
    kept = grouped.select(
        *key,
        HOST,
        OWN,
        F.array_sort(F.transform(remaining, lambda c: F.struct(c["__rd_q"], c["__rd_v"]))).alias(
            "__rd_kept"
        ),
    )

    def msg_id(q: Column, v: Column, p: Column, s: Column) -> Column:
        return F.concat(
            q, F.lit("#"), v.cast("string"), F.lit(">"), p, F.lit("#"), s.cast("string")
        )

    receives = kept.select(
        *key,
        HOST,
        OWN,
        F.transform(
            F.col("__rd_kept"),
            lambda c: F.struct(
                msg_id(c["__rd_q"], c["__rd_v"], F.col(HOST), F.col(OWN)).alias(C.MSG_ID),
                c["__rd_q"].alias(C.PEER),
            ),
        ).alias(_events.RECEIVES),
    )
    sends = (
        kept.select(*key, HOST, OWN, F.explode("__rd_kept").alias("__rd_c"))
        .select(
            *key,
            F.col("__rd_c.__rd_q").alias(HOST),
            F.col("__rd_c.__rd_v").alias(OWN),
            F.struct(
                F.col(HOST).alias(C.PEER),
                msg_id(
                    F.col("__rd_c.__rd_q"), F.col("__rd_c.__rd_v"), F.col(HOST), F.col(OWN)
                ).alias(C.MSG_ID),
            ).alias("__rd_send"),
        )
        .groupBy(*key, HOST, OWN)
        .agg(F.array_sort(F.collect_list("__rd_send")).alias("__rd_sorted"))
        .select(
            *key,
            HOST,
            OWN,
            F.transform(
                "__rd_sorted",
                lambda s: F.struct(s[C.MSG_ID].alias(C.MSG_ID), s[C.PEER].alias(C.PEER)),
            ).alias(_events.SENDS),
        )
    )
    return events.join(receives, [*key, HOST, OWN], "left").join(sends, [*key, HOST, OWN], "left")


def read(spark: SparkSession, files: Sequence[str], options: ReaderOptions) -> DataFrame:
    """ShiViz / GoVector logs as raw rows (see the module docstring)."""
    records = read_records(spark, files, options)
    checked = check_clocks(records, TRACE_KEY, HOST, (C.LINE, RECORD), CLOCK_TEXT).localCheckpoint()
    unparseable = checked.where(F.col(PARSE_ERROR).isNotNull()).transform(
        rejected,
        F.col(PARSE_ERROR),
        F.col(PARSE_REASON),
        process=F.col(HOST),
        trace_suffix=F.col(TRACE_SUFFIX),
    )
    bad_clocks = checked.where(F.col(CLOCK_ERROR).isNotNull()).transform(
        rejected,
        F.col(CLOCK_ERROR),
        BAD_CLOCK,
        process=F.col(HOST),
        trace_suffix=F.col(TRACE_SUFFIX),
        label=F.col(C.LABEL),
    )
    events = checked.where(F.col(PARSE_ERROR).isNull() & F.col(CLOCK_ERROR).isNull())
    with_messages = infer_messages(events).select(
        "*",
        F.col(HOST).alias(C.PROCESS),
        F.col(OWN).cast("string").alias(C.SEQ),
        F.col(CLOCK).alias(RECORDED_VC),
    )
    rows = _events.expand_events(with_messages)
    return conform(rows).unionByName(unparseable).unionByName(bad_clocks)


READER = Reader(name=NAME, extensions=EXTENSIONS, sniff=sniff, read=read)
