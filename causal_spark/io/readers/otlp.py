"""OTLP JSON (docs/formats.md): `ExportTraceServiceRequest`s, one per file or one per line.

The schema is open-telemetry/opentelemetry-proto `opentelemetry/proto/trace/v1/
trace.proto` with the OTLP JSON encoding its specification gives: lowerCamelCase
keys, trace and span ids as hex strings (case-insensitive), enums as integers
(the names, e.g. `SPAN_KIND_SERVER`, are accepted too), 64-bit integers as
decimal strings or numbers. A request holds `resourceSpans` [{resource
{attributes}, scopeSpans [{spans}]}] (the deprecated `instrumentationLibrarySpans`
is read as well); a span has traceId, spanId, parentSpanId, name, kind (2 SERVER,
3 CLIENT, 4 PRODUCER, 5 CONSUMER), startTimeUnixNano, endTimeUnixNano, links
[{traceId, spanId}].

A file whose first non-blank line is a whole JSON object is JSON lines: one
request per line, files split across tasks, `line` the request's line and
`record` the span's 1-based index in it. Any other file (a pretty-printed
request) is one document: one task, `line` the span's 1-based index. The service
is the resource's `service.name` (`unknown_service` when absent, as OpenTelemetry
says), the instance its `service.instance.id`, else `host.name`.

Reading. The requests are parsed in Python workers (`json`), where their text is
read: JSON lines by Spark's text source (a file split across tasks), a document
whole (one task). Each span becomes a span record (`spans.SPAN_SCHEMA`) there, and
each request that is not one becomes one `unparseable` record; then `spans.pair_spans`
groups the records by trace. A field has the text Spark's JSON reader would give it
(a number's digits, an object's compact JSON); `raw` is the span as compact JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from causal_spark import columns as C
from causal_spark.io.readers import spans as S
from causal_spark.io.readers.base import (
    PARSE_ERROR,
    PARSE_REASON,
    RAW_LIMIT,
    RECORD,
    UNPARSEABLE,
    Reader,
    ReaderOptions,
    absolute_files,
    read_lines,
    read_whole_files,
)

NAME = "otlp"
EXTENSIONS: tuple[str, ...] = (".json", ".jsonl")
KINDS: dict[str, str] = {
    "2": S.SERVER,
    "3": S.CLIENT,
    "4": S.PRODUCER,
    "5": S.CONSUMER,
    "SPAN_KIND_SERVER": S.SERVER,
    "SPAN_KIND_CLIENT": S.CLIENT,
    "SPAN_KIND_PRODUCER": S.PRODUCER,
    "SPAN_KIND_CONSUMER": S.CONSUMER,
}
_WHAT = "an OTLP JSON ExportTraceServiceRequest with resourceSpans"
UNREADABLE = f"not {_WHAT} (invalid or truncated JSON)"
# how much of a file's start is read to tell JSON lines from one document
HEAD_BYTES = 1 << 16
_INTEGER = re.compile(r"-?[0-9]+")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_BATCH = 8192
# JSON as Spark's reader writes a field it keeps as text: no spaces, characters as they are
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# the span records, as Arrow (spans.SPAN_SCHEMA)
_ARROW_REFERENCE = pa.struct([pa.field(C.TRACE_ID, pa.string()), pa.field(S.SPAN_ID, pa.string())])
ARROW_SCHEMA = pa.schema(
    [
        pa.field(C.SOURCE, pa.string()),
        pa.field(C.LINE, pa.int64()),
        pa.field(RECORD, pa.int64()),
        pa.field(C.RAW, pa.string()),
        pa.field(C.TRACE_ID, pa.string()),
        pa.field(S.SPAN_ID, pa.string()),
        pa.field(S.PARENT, _ARROW_REFERENCE),
        pa.field(S.KIND, pa.string()),
        pa.field(S.SHARED, pa.bool_()),
        pa.field(S.SERVICE, pa.string()),
        pa.field(S.INSTANCE, pa.string()),
        pa.field(S.START_NS, pa.int64()),
        pa.field(S.END_NS, pa.int64()),
        pa.field(S.NAME, pa.string()),
        pa.field(S.LINKS, pa.list_(pa.field("element", _ARROW_REFERENCE))),
        pa.field(S.NOTE, pa.string()),
        pa.field(PARSE_ERROR, pa.string()),
        pa.field(PARSE_REASON, pa.string()),
    ]
)


def sniff(head: bytes) -> bool:
    """A JSON object with `resourceSpans` near its start."""
    text = head.decode("utf-8", errors="replace").lstrip()
    return text.startswith("{") and '"resourceSpans"' in text


def is_json_lines(path: str) -> bool:
    """True when the file's first non-blank line is a whole JSON value (or longer than
    `HEAD_BYTES`: a one-line request is read as JSON lines all the same)."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    text = head.decode("utf-8", errors="replace").lstrip()
    first, newline, _ = text.partition("\n")
    if not newline and len(head) == HEAD_BYTES:
        return True
    try:
        json.loads(first)
    except ValueError:
        return False
    return True


def _text(value: Any) -> str | None:
    """A JSON value as Spark's JSON reader gives a string field: a string as it is, a
    number as its digits, true/false, an object or array as compact JSON."""
    if value is None or isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    return _compact(value)


def _integer(text: str | None) -> int | None:
    """A JSON integer given as a number or a decimal string (64-bit values are strings
    in protobuf JSON), else None."""
    if text is None:
        return None
    if text.isascii() and text.isdigit() and len(text) < 19:
        return int(text)
    trimmed = text.strip(" ")
    if not _INTEGER.fullmatch(trimmed):
        return None
    value = int(trimmed)
    return value if _LONG_MIN <= value <= _LONG_MAX else None


def _id(value: Any) -> str | None:
    """An id as lower-case text; blank is None."""
    text = value if isinstance(value, str) else _text(value)
    if text is None:
        return None
    trimmed = text.strip(" ").lower()
    return trimmed or None


def _capped(text: str | None) -> str | None:
    if text is None or len(text) <= RAW_LIMIT:
        return text
    return f"{text[:RAW_LIMIT]} ... [{len(text)} characters in all]"


def _attribute(attributes: list[Any], key: str) -> str | None:
    """The first attribute named `key`: its stringValue, else its intValue."""
    for attribute in attributes:
        if isinstance(attribute, dict) and attribute.get("key") == key:
            value = attribute.get("value")
            if not isinstance(value, dict):
                return None
            text = _text(value.get("stringValue"))
            return text if text is not None else _text(value.get("intValue"))
    return None


def _list(value: Any) -> list[Any] | None:
    """A JSON array field: [] when absent or null, None when it is not an array."""
    if value is None:
        return []
    return value if isinstance(value, list) else None


def request_spans(text: str) -> list[tuple[Any, tuple[str, str | None]]] | None:
    """The spans of one request with their process (service, instance), in order; None
    when the text is not a request (not JSON, no `resourceSpans` array, a part of the
    wrong shape)."""
    try:
        request = json.loads(text)
    except ValueError:
        return None
    if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
        return None
    found: list[tuple[Any, tuple[str, str | None]]] = []
    for resource_spans in request["resourceSpans"]:
        if resource_spans is None:
            continue
        if not isinstance(resource_spans, dict):
            return None
        resource = resource_spans.get("resource")
        if resource is not None and not isinstance(resource, dict):
            return None
        attributes = _list((resource or {}).get("attributes"))
        if attributes is None:
            return None
        service = _attribute(attributes, "service.name") or "unknown_service"
        instance = _attribute(attributes, "service.instance.id")
        process = (
            service,
            instance if instance is not None else _attribute(attributes, "host.name"),
        )
        for key in ("scopeSpans", "instrumentationLibrarySpans"):
            scopes = _list(resource_spans.get(key))
            if scopes is None:
                return None
            for scope in scopes:
                if scope is None:
                    continue
                if not isinstance(scope, dict):
                    return None
                spans = _list(scope.get("spans"))
                if spans is None:
                    return None
                found.extend((span, process) for span in spans)
    return found


class _Records:
    """Span records as column lists, flushed as Arrow batches of `ARROW_SCHEMA`."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name in ARROW_SCHEMA.names}

    def __len__(self) -> int:
        return len(self.columns[C.SOURCE])

    def reject(self, source: str, line: int, text: str) -> None:
        """A request that is not one: one `unparseable` record."""
        row = {C.SOURCE: source, C.LINE: line, RECORD: 1, C.RAW: _capped(text),
               PARSE_ERROR: UNREADABLE, PARSE_REASON: UNPARSEABLE}  # fmt: skip
        for name, values in self.columns.items():
            values.append(row.get(name))

    def span(
        self, source: str, line: int, record: int, span: Any, process: tuple[str, str | None]
    ) -> None:
        columns = self.columns
        columns[C.SOURCE].append(source)
        columns[C.LINE].append(line)
        columns[RECORD].append(record)
        columns[S.SHARED].append(False)
        columns[S.SERVICE].append(process[0])
        columns[S.INSTANCE].append(process[1])
        if not isinstance(span, dict):
            columns[C.RAW].append(_capped(_text(span)))
            for name in _SPAN_FIELDS:
                columns[name].append(None)
            columns[S.LINKS].append([])
            columns[S.NOTE].append("duration unknown")
            columns[PARSE_ERROR].append("not a span object")
            columns[PARSE_REASON].append(UNPARSEABLE)
            return
        columns[C.RAW].append(_capped(_compact(span)))
        trace_id, span_id = _id(span.get("traceId")), _id(span.get("spanId"))
        parent_id = _id(span.get("parentSpanId"))
        kind = _text(span.get("kind"))
        start_text = _text(span.get("startTimeUnixNano"))
        end_text = _text(span.get("endTimeUnixNano"))
        start, end = _integer(start_text), _integer(end_text)
        links = span.get("links")
        columns[C.TRACE_ID].append(trace_id)
        columns[S.SPAN_ID].append(span_id)
        columns[S.PARENT].append(None if parent_id is None else (None, parent_id))
        columns[S.KIND].append(None if kind is None else KINDS.get(kind.strip(" ").upper()))
        columns[S.START_NS].append(start)
        columns[S.END_NS].append(end if end is not None else start)
        columns[S.NAME].append(_text(span.get("name")))
        columns[S.LINKS].append(
            [
                (_id(link.get("traceId")), _id(link.get("spanId")))
                if isinstance(link, dict)
                else (None, None)
                for link in links
            ]
            if isinstance(links, list)
            else []
        )
        columns[S.NOTE].append("duration unknown" if end_text is None else None)
        error, reason = None, None
        if trace_id is None or span_id is None:
            error, reason = "not a span: no traceId or spanId", UNPARSEABLE
        elif start_text is None:
            error, reason = "span without startTimeUnixNano", UNPARSEABLE
        elif start is None:
            error = f"startTimeUnixNano '{start_text}' is not epoch nanoseconds"
            reason = UNPARSEABLE
        elif end_text is not None and (end is None or end < start):
            error = f"endTimeUnixNano '{end_text}' is not epoch nanoseconds at or after the start"
        columns[PARSE_ERROR].append(error)
        columns[PARSE_REASON].append(reason)

    def flush(self) -> pa.RecordBatch:
        columns = self.columns
        parents = columns[S.PARENT]
        arrays = {
            name: pa.array(values, ARROW_SCHEMA.field(name).type)
            for name, values in columns.items()
            if name not in (S.PARENT, S.LINKS)
        }
        arrays[S.PARENT] = pa.StructArray.from_arrays(
            [
                pa.nulls(len(parents), pa.string()),
                pa.array([None if p is None else p[1] for p in parents], pa.string()),
            ],
            fields=list(_ARROW_REFERENCE),
            mask=pa.array([p is None for p in parents], pa.bool_()),
        )
        # from offsets and flat fields: pyarrow converts lists of dicts row by row
        links = columns[S.LINKS]
        offsets = [0]
        for each in links:
            offsets.append(offsets[-1] + len(each or ()))
        flat = [link for each in links for link in each or ()]
        arrays[S.LINKS] = pa.ListArray.from_arrays(
            pa.array(offsets, pa.int32()),
            pa.StructArray.from_arrays(
                [
                    pa.array([t for t, _ in flat], pa.string()),
                    pa.array([i for _, i in flat], pa.string()),
                ],
                fields=list(_ARROW_REFERENCE),
            ),
            type=ARROW_SCHEMA.field(S.LINKS).type,
        )
        batch = pa.RecordBatch.from_arrays(
            [arrays[name] for name in ARROW_SCHEMA.names], schema=ARROW_SCHEMA
        )
        for values in columns.values():
            values.clear()
        return batch


# the span fields left null for a record that is not a span object
_SPAN_FIELDS: tuple[str, ...] = (
    C.TRACE_ID, S.SPAN_ID, S.PARENT, S.KIND, S.START_NS, S.END_NS, S.NAME,
)  # fmt: skip


def parse_requests(batches: Iterator[pa.RecordBatch], lines: bool) -> Iterator[pa.RecordBatch]:
    """Requests (`source`, `line`, `value`) -> span records (`ARROW_SCHEMA`). JSON lines:
    `line` the request's line, `record` the span's 1-based index in it; a document:
    `line` the span's index, `record` 1."""
    out = _Records()
    for batch in batches:
        columns = batch.to_pydict()
        for source, line, text in zip(
            columns[C.SOURCE], columns[C.LINE], columns["value"], strict=True
        ):
            if text is None or not text.strip():
                continue
            spans = request_spans(text)
            if spans is None:
                out.reject(source, line, text)
            for position, (span, process) in enumerate(spans or (), start=1):
                if lines:
                    out.span(source, line, position, span, process)
                else:
                    out.span(source, position, 1, span, process)
                if len(out) >= _BATCH:
                    yield out.flush()
    yield out.flush()


def span_records(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """Span records (`spans.SPAN_SCHEMA`) of the files, with one `unparseable` record
    per request that is not one."""
    paths = absolute_files(files)
    by_lines = [p for p in paths if is_json_lines(p)]
    documents = [p for p in paths if p not in by_lines]
    schema = from_arrow_schema(ARROW_SCHEMA)
    parts: list[DataFrame] = []
    if by_lines:
        requests = read_lines(spark, by_lines)
        parts.append(requests.mapInArrow(partial(parse_requests, lines=True), schema))
    if documents:
        whole = read_whole_files(spark, documents).select(
            C.SOURCE, F.lit(1).cast("long").alias(C.LINE), "value"
        )
        parts.append(whole.mapInArrow(partial(parse_requests, lines=False), schema))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def read(spark: SparkSession, files: Sequence[str], options: ReaderOptions) -> DataFrame:
    """OTLP JSON files as raw rows (see the module docstring and `spans`)."""
    return S.pair_spans(span_records(spark, files), options.span_process)


READER = Reader(name=NAME, extensions=EXTENSIONS, sniff=sniff, read=read)
