"""The OTLP JSON parse in Python (`otlp.parse_requests`) against the Spark SQL parse it
replaced (`tests.reference_otlp`), on the hand-made files and on a file of requests and
spans of every wrong shape written below (as the OTLP JSON encoding of
opentelemetry-proto `trace.proto` allows or forbids them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from causal_spark.io.readers import otlp
from causal_spark.io.readers.base import PARSE_ERROR
from tests import reference_otlp
from tests.reference_readers import collect, repo_file

TRACE = "5B8EFFF798038103D269B633813FC60C"


def _span(**fields: Any) -> dict[str, Any]:
    span = {"traceId": TRACE, "spanId": "00000000000000A1", "name": "op", "kind": 2,
            "startTimeUnixNano": "1700000001000000000", "endTimeUnixNano": "1700000002000000000"}  # fmt: skip
    span.update(fields)
    return {k: v for k, v in span.items() if v is not ...}


def _request(*spans: Any, attributes: Any = ..., key: str = "scopeSpans") -> str:
    resource: dict[str, Any] = {}
    if attributes is not ...:
        resource["attributes"] = attributes
    return json.dumps({"resourceSpans": [{"resource": resource, key: [{"spans": list(spans)}]}]})


def _attr(key: str, **value: Any) -> dict[str, Any]:
    return {"key": key, "value": value}


LINES = [
    "[]",
    "3",
    "{}",
    '{"resourceSpans": null}',
    '{"resourceSpans": 3}',
    '{"resourceSpans": [{"scopeSpans": 3}]}',
    '{"resourceSpans": [null, {"scopeSpans": [null, {"spans": null}]}]}',
    '{"resourceSpans": [{"scopeSpans": [{"spans": [3, null, "x", {}, []]}]}]}',
    _request(_span())[:-7],
    _request(
        _span(),
        _span(
            spanId=" 00000000000000a2 ", parentSpanId="00000000000000A1", kind="SPAN_KIND_CLIENT"
        ),
        _span(spanId="a3", kind="5", startTimeUnixNano=1700000001000000000, endTimeUnixNano=...),
        _span(spanId="a4", kind=1, links=[{"traceId": TRACE, "spanId": "A1"}, {"spanId": "a2"}]),
        _span(spanId="a5", kind="SPAN_KIND_CONSUMER", links=[{"traceId": "", "spanId": "a4"}]),
        _span(spanId="a6", parentSpanId="", name=..., kind=...),
        _span(spanId="a7", name=7, startTimeUnixNano="abc"),
        _span(spanId="a8", startTimeUnixNano=" 17 ", endTimeUnixNano="16"),
        _span(spanId="a9", startTimeUnixNano=..., endTimeUnixNano="16"),
        _span(spanId="", traceId=TRACE),
        _span(traceId=...),
        _span(spanId="b1", endTimeUnixNano="x"),
        _span(spanId="b2", startTimeUnixNano="99999999999999999999"),
        _span(spanId="b3", kind="server", name={"a": [1, "é"]}),
        attributes=[
            _attr("service.name", stringValue="checkout"),
            _attr("service.instance.id", intValue="7"),
            _attr("host.name", stringValue="node-1"),
        ],
    ),
    _request(_span(spanId="c1"), attributes=[_attr("host.name", stringValue="node-2")]),
    _request(
        _span(spanId="c2"),
        attributes=[_attr("service.name"), _attr("service.name", stringValue="x")],
    ),
    _request(_span(spanId="c3"), key="instrumentationLibrarySpans"),
    "",
    _request(_span(spanId="c4", links=[])),
]


def _rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(str(v) for v in r.values()) for r in rows), key=str)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    ["bad.jsonl", "otlp_checkout.jsonl", "otlp_checkout.json", "trace.json"],
)
def test_equals_the_spark_parse(spark: SparkSession, tmp_path: Path, name: str) -> None:
    given = {
        "otlp_checkout.jsonl": repo_file("tests", "data", "spans", "otlp_checkout.jsonl"),
        "otlp_checkout.json": repo_file("tests", "data", "spans", "otlp_checkout.json"),
        "trace.json": repo_file("data-samples", "_native", "otlp", "trace.json"),
    }
    path = given.get(name) or tmp_path / name
    if name == "bad.jsonl":
        path.write_text("\n".join(LINES) + "\n")
    spans, unreadable = reference_otlp.span_records(spark, [str(path)])
    records = collect(otlp.span_records(spark, [str(path)]))
    unparsed = [r for r in records if r[PARSE_ERROR] == otlp.UNREADABLE]
    parsed = [r for r in records if r[PARSE_ERROR] != otlp.UNREADABLE]
    assert _rows(parsed) == _rows(collect(spans))
    theirs = collect(unreadable)
    assert [(r["source"], r["line"], r["record"], r["raw"]) for r in sorted(unparsed, key=str)] == [
        (r["source"], r["line"], r["record"], r["raw"]) for r in sorted(theirs, key=str)
    ]


@pytest.mark.slow
def test_json_lines_are_parsed_by_several_tasks(spark: SparkSession, tmp_path: Path) -> None:
    # 40 requests of 20 spans, about 3 KB a line, read in 16 KB splits; line 17 is broken
    lines = [
        _request(*[_span(spanId=f"{line:04x}{k:04x}") for k in range(20)]) for line in range(1, 41)
    ]
    lines[16] = lines[16][:-40]
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(16 * 1024))
    try:
        records = otlp.span_records(spark, [str(path)])
        tasks = records.rdd.getNumPartitions()
        rows = collect(records)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert tasks > 4
    spans = {(r["line"], r["record"], r["span_id"]) for r in rows if r[PARSE_ERROR] is None}
    expected = {(n, k + 1, f"{n:04x}{k:04x}") for n in range(1, 41) if n != 17 for k in range(20)}
    assert spans == expected
    assert [(r["line"], r["record"]) for r in rows if r[PARSE_ERROR]] == [(17, 1)]
