"""Jaeger JSON reader: a hand-made export and a real one.

`tests/data/spans/jaeger_orders.json` is written by hand from Jaeger's UI model, the
JSON its query API returns (jaegertracing/jaeger `internal/uimodel/model.go`: Trace
{traceID, spans, processes}, Span {traceID, spanID, operationName, references
[{refType CHILD_OF|FOLLOWS_FROM, traceID, spanID}], startTime, duration (µs), tags,
processID}, Process {serviceName, tags}) wrapped as `{"data": [...]}` like the UI's
download. It has one service on two hosts, FOLLOWS_FROM links, and parents that are
not in the file. Its spans (trace 00000000000000a1, ids 1..b in hex, start in µs
after 1700000000 s):

  1 GET /order         server   frontend@web-1     root
  2 call orders        client   frontend@web-1     CHILD_OF 1
  3 handle order       server   orders@orders-a    CHILD_OF 2
  4 call orders again  client   frontend@web-1     CHILD_OF 1
  5 handle order       server   orders@orders-b    CHILD_OF 4
  6 publish            producer orders@orders-b    CHILD_OF 5
  7 consume            consumer worker@10.0.0.9    FOLLOWS_FROM 6
  8 batch consume      consumer worker@10.0.0.9    FOLLOWS_FROM 6, FOLLOWS_FROM ff (absent)
  9 handle retry       server   orders@orders-a    CHILD_OF ee (absent)
  a audit              -        worker@10.0.0.9    CHILD_OF 7
  b notify             -        frontend@web-1     CHILD_OF 3
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from causal_spark.io.readers import jaeger
from causal_spark.io.readers.base import ReaderOptions
from tests.reference_readers import collect, events_of, message_ends, records_of, repo_file

ORDERS = repo_file("tests", "data", "spans", "jaeger_orders.json")
SAMPLE = repo_file("data-samples", "_native", "jaeger", "ui-trace.json")


def _id(n: int) -> str:
    return f"{n:016x}"


@pytest.fixture(scope="module")
def orders_rows(spark: SparkSession) -> dict[str, list[dict[str, Any]]]:
    """Rows of ORDERS by `span_process` mode, and of SAMPLE (`sample`): SAMPLE is read in
    the same read as ORDERS by instance (another file, another trace: nothing to pair)."""
    both = collect(jaeger.read(spark, [str(ORDERS), str(SAMPLE)], ReaderOptions()))
    assert {r["source"] for r in both} == {str(ORDERS), str(SAMPLE)}
    return {
        "instance": [r for r in both if r["source"] == str(ORDERS)],
        "sample": [r for r in both if r["source"] == str(SAMPLE)],
        "span": collect(jaeger.read(spark, [str(ORDERS)], ReaderOptions(span_process="span"))),
    }


@pytest.mark.slow
def test_hand_made_export_by_instance(orders_rows: dict[str, list[dict[str, Any]]]) -> None:
    rows = orders_rows["instance"]
    assert all(r["parse_error"] is None for r in rows)
    assert {r["trace_id"] for r in rows} == {"00000000000000a1"}
    # orders runs on two hosts: two processes (hostname tag)
    assert {r["process"] for r in rows} == {
        "frontend@web-1",
        "orders@orders-a",
        "orders@orders-b",
        "worker@10.0.0.9",
    }
    ends = message_ends(rows)
    assert set(ends) == {
        # RPCs: 2 -> 3, 4 -> 5 (the SERVER's parent is its CLIENT)
        f"{_id(3)}:req",
        f"{_id(3)}:resp",
        f"{_id(5)}:req",
        f"{_id(5)}:resp",
        # 7 follows from the PRODUCER 6 (its only reference: the parent)
        f"{_id(7)}:msg",
        # 8 names two producers: 6, and ff, absent (an orphan)
        f"{_id(8)}:msg:{_id(6)}",
        f"{_id(8)}:msg:00000000000000ff",
        # 9's CLIENT parent ee is absent: an orphan request
        f"{_id(9)}:req",
        # b runs on frontend, its parent 3 on orders@orders-a: a call
        f"{_id(11)}:call",
    }
    orphans = {m for m, (send, _) in ends.items() if send is None}
    assert orphans == {f"{_id(8)}:msg:00000000000000ff", f"{_id(9)}:req"}
    send, receive = ends[f"{_id(7)}:msg"]
    assert send is not None and receive is not None
    assert (send["process"], receive["process"]) == ("orders@orders-b", "worker@10.0.0.9")
    # 22 span ends; 3's start receives then calls b (+1); 6's start sends to 7 and 8, both
    # on worker@10.0.0.9: two send events (+1); 8's start receives twice (+1)
    assert len(events_of(rows)) == 25
    assert len({(line, rec) for _, line, rec in records_of(rows)}) == 11


def test_hand_made_export_by_span(orders_rows: dict[str, list[dict[str, Any]]]) -> None:
    rows = orders_rows["span"]
    assert len({r["process"] for r in rows}) == 11
    assert f"orders@orders-b/{_id(6)}" in {r["process"] for r in rows}
    ends = message_ends(rows)
    # besides the 9 messages above, every parent on another process now calls its child:
    # 1 -> 2, 1 -> 4, 5 -> 6, 7 -> a (3 -> b was a call already)
    calls = {m for m in ends if m.endswith(":call")}
    assert calls == {f"{_id(n)}:call" for n in (2, 4, 6, 10, 11)}
    assert len(ends) == 13
    # 22 span ends; starts that receive then send: 2, 3, 4, 5, 6, 7 (+6); 8 receives
    # twice (+1); 6's two messages go to two processes now: one multicast event
    assert len(events_of(rows)) == 29


def test_real_export_of_jaeger_query(orders_rows: dict[str, list[dict[str, Any]]]) -> None:
    rows = orders_rows["sample"]
    assert all(r["parse_error"] is None for r in rows)
    # one process (hostname tag), two spans, the child on its parent's process: no message
    assert {r["process"] for r in rows} == {"jaeger-query@simple-streaming-query-66f49db66-8x9hd"}
    assert message_ends(rows) == {}
    assert len(events_of(rows)) == 4
    assert sorted((r["seq"], r["label"]) for r in rows) == [
        ("1", "/api/services/{service}/operations (start)"),
        ("2", "GetOperations (start)"),
        ("3", "GetOperations (end)"),
        ("4", "/api/services/{service}/operations (end)"),
    ]


@pytest.mark.slow
def test_bad_input(spark: SparkSession, tmp_path: Path) -> None:
    document = json.loads(ORDERS.read_text())
    spans = document["data"][0]["spans"]
    spans.append(dict(spans[9]))  # span a again: a duplicate
    spans.append(
        {k: v for k, v in spans[0].items() if k != "startTime"} | {"spanID": "00000000000000cc"}
    )
    spans.append("not a span")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    truncated = tmp_path / "truncated.json"
    truncated.write_text(ORDERS.read_text()[:-200])
    rows = collect(jaeger.read(spark, [str(path), str(truncated)], ReaderOptions()))
    good_file = [r for r in rows if r["source"] == str(path)]
    rejects = {
        r["line"]: (r["parse_reason"], r["parse_error"]) for r in good_file if r["parse_error"]
    }
    assert {line: reason for line, (reason, _) in rejects.items()} == {
        12: "duplicate_span",
        13: "unparseable",
        14: "unparseable",
    }
    assert rejects[13][1] == "span without startTime"
    assert rejects[14][1] == "not a span object"
    assert len({(line, rec) for _, line, rec in records_of(good_file)}) == 14
    bad_file = [r for r in rows if r["source"] == str(truncated)]
    assert [(r["line"], r["parse_reason"]) for r in bad_file] == [(1, "unparseable")]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (ORDERS, True),
        (SAMPLE, True),
        (repo_file("tests", "data", "real-logs", "zipkin", "skew.json"), False),
        (repo_file("tests", "data", "spans", "otlp_checkout.json"), False),
    ],
    ids=lambda p: p.name if isinstance(p, Path) else str(p),
)
def test_sniff(path: Path, expected: bool) -> None:
    assert jaeger.sniff(path.read_bytes()[:1024]) is expected
