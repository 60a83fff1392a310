"""OTLP JSON reader: hand-made requests (one document, one JSON-lines file) and the
specification's own example.

The hand-made files follow open-telemetry/opentelemetry-proto
`opentelemetry/proto/trace/v1/trace.proto` (ResourceSpans {resource, scopeSpans},
ScopeSpans {scope, spans}, Span {traceId, spanId, parentSpanId, name, kind,
startTimeUnixNano, endTimeUnixNano, links [{traceId, spanId}]}) in the JSON encoding of
its `docs/specification.md` ("JSON Protobuf Encoding": hex ids, case-insensitive;
integer enums; 64-bit integers as decimal strings). One trace,
5b8efff798038103d269b633813fc60c, times in seconds after 1700000000:

  otlp_checkout.json (a pretty-printed request):
    checkout, service.instance.id checkout-1 (host.name node-1):
      a1 POST /checkout  SERVER   1.000-1.900  root (its id written in upper case)
      a2 charge          CLIENT   1.100-1.400  parent a1
  otlp_checkout.jsonl, line 1:
    checkout, host.name node-2:
      b1 resume checkout SERVER   1.450-1.600  parent eee19b7ec3c1b173 (absent)
      b2 publish receipt PRODUCER 1.500-1.510  parent b1
    payments (no instance):
      c1 charge          SERVER   1.150-1.300  parent a2 (in the other file)
      c2 fraud check     UNSPEC.  1.050-1.090  parent a1
  otlp_checkout.jsonl, line 2:
    queue-reader, host.name node-3:
      d1 read receipts   CONSUMER 1.700-1.750  links b2 and 1111111111111111 of another trace
      d2 store receipt   INTERNAL 1.710-1.720  parent d1
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from causal_spark.io.readers import otlp
from causal_spark.io.readers.base import ReaderOptions
from tests.reference_readers import collect, events_of, message_ends, records_of, repo_file

DOCUMENT = repo_file("tests", "data", "spans", "otlp_checkout.json")
LINES = repo_file("tests", "data", "spans", "otlp_checkout.jsonl")
SAMPLE = repo_file("data-samples", "_native", "otlp", "trace.json")


def _id(letter: str) -> str:
    return letter * 8


@pytest.fixture(scope="module")
def read_once(spark: SparkSession) -> list[dict[str, Any]]:
    """DOCUMENT, LINES and SAMPLE in one read (SAMPLE is another trace: nothing pairs)."""
    rows = collect(otlp.read(spark, [str(DOCUMENT), str(LINES), str(SAMPLE)], ReaderOptions()))
    assert {r["source"] for r in rows} == {str(DOCUMENT), str(LINES), str(SAMPLE)}
    return rows


@pytest.fixture(scope="module")
def checkout_rows(read_once: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in read_once if r["source"] != str(SAMPLE)]


@pytest.mark.slow
def test_hand_made_requests_pair_across_files(checkout_rows: list[dict[str, Any]]) -> None:
    rows = checkout_rows
    assert all(r["parse_error"] is None for r in rows)
    assert {r["trace_id"] for r in rows} == {"5b8efff798038103d269b633813fc60c"}
    # checkout runs on two hosts: two processes (service.instance.id, else host.name)
    assert {r["process"] for r in rows} == {
        "checkout@checkout-1",
        "checkout@node-2",
        "payments",
        "queue-reader@node-3",
    }
    ends = message_ends(rows)
    assert set(ends) == {
        # the SERVER c1's parent is the CLIENT a2, read from the other file
        f"{_id('c1')}:req",
        f"{_id('c1')}:resp",
        # c2 (no kind) runs on payments, its parent a1 on checkout@checkout-1
        f"{_id('c2')}:call",
        # b1's parent is absent: an orphan request
        f"{_id('b1')}:req",
        # d1 links the PRODUCER b2, and a span of another trace (absent here: an orphan)
        f"{_id('d1')}:msg:{_id('b2')}",
        f"{_id('d1')}:msg:1111111111111111",
    }
    orphans = {m for m, (send, _) in ends.items() if send is None}
    assert orphans == {f"{_id('b1')}:req", f"{_id('d1')}:msg:1111111111111111"}
    send, receive = ends[f"{_id('c1')}:req"]
    assert send is not None and receive is not None
    assert (send["source"], receive["source"]) == (str(DOCUMENT), str(LINES))
    assert (send["ts"], receive["ts"]) == ("1700000001.100000000", "1700000001.150000000")
    # 16 span ends; d1's start receives twice (+1)
    assert len(events_of(rows)) == 17


@pytest.mark.slow
def test_lines_and_records_say_where_each_span_is(checkout_rows: list[dict[str, Any]]) -> None:
    # a document: line = the span's index in it; JSON lines: the request's line, and the
    # span's index within it
    assert records_of(checkout_rows) == {
        (str(DOCUMENT), 1, 1),
        (str(DOCUMENT), 2, 1),
        (str(LINES), 1, 1),
        (str(LINES), 1, 2),
        (str(LINES), 1, 3),
        (str(LINES), 1, 4),
        (str(LINES), 2, 1),
        (str(LINES), 2, 2),
    }
    assert otlp.is_json_lines(str(LINES)) and not otlp.is_json_lines(str(DOCUMENT))


@pytest.mark.slow
def test_span_process_span(spark: SparkSession) -> None:
    rows = collect(
        otlp.read(spark, [str(DOCUMENT), str(LINES)], ReaderOptions(span_process="span"))
    )
    assert len({r["process"] for r in rows}) == 8
    calls = {m for m in message_ends(rows) if m.endswith(":call")}
    # every child is on another process than its parent now: a2, b2, d2 and c2 are called
    assert calls == {f"{_id(x)}:call" for x in ("a2", "b2", "c2", "d2")}


def test_the_specifications_example(read_once: list[dict[str, Any]]) -> None:
    rows = [r for r in read_once if r["source"] == str(SAMPLE)]
    assert all(r["parse_error"] is None for r in rows)
    assert {r["process"] for r in rows} == {"my.service"}
    # "I'm a server span" names a parent (EEE19B7EC3C1B173) that is not in the file
    ends = message_ends(rows)
    assert list(ends) == ["eee19b7ec3c1b174:req"]
    send, receive = ends["eee19b7ec3c1b174:req"]
    assert send is None and receive is not None
    assert len(events_of(rows)) == 2


@pytest.mark.slow
def test_bad_input(spark: SparkSession, tmp_path: Path) -> None:
    lines = LINES.read_text().splitlines()
    request = json.loads(lines[1])
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    del spans[1]["startTimeUnixNano"]
    spans.append(dict(spans[0], spanId="e1e1e1e1e1e1e1e1", endTimeUnixNano="1"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], json.dumps(request), lines[1][:-30], ""]) + "\n")
    rows = collect(otlp.read(spark, [str(bad)], ReaderOptions()))
    rejects = {
        (r["line"], r["record"]): (r["parse_reason"], r["parse_error"])
        for r in rows
        if r["parse_error"]
    }
    assert rejects == {
        (2, 2): ("unparseable", "span without startTimeUnixNano"),
        (2, 3): (None, "endTimeUnixNano '1' is not epoch nanoseconds at or after the start"),
        (3, 1): (
            "unparseable",
            "not an OTLP JSON ExportTraceServiceRequest with resourceSpans (invalid or "
            "truncated JSON)",
        ),
    }
    # accounting: line 1's four spans, line 2's three, line 3 (truncated) as one record
    assert len(records_of(rows)) == 8


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (DOCUMENT, True),
        (LINES, True),
        (SAMPLE, True),
        (repo_file("tests", "data", "spans", "jaeger_orders.json"), False),
        (repo_file("tests", "data", "real-logs", "zipkin", "skew.json"), False),
    ],
    ids=lambda p: p.name if isinstance(p, Path) else str(p),
)
def test_sniff(path: Path, expected: bool) -> None:
    assert otlp.sniff(path.read_bytes()[:1024]) is expected
