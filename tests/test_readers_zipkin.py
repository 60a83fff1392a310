"""Zipkin v2 reader on the real zipkin-lens test data: RPCs, producer/consumer
messages, clock skew, `span_process`, bad input. Counts derived by hand from the files
(the comments say how)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from causal_spark.io.readers import zipkin
from causal_spark.io.readers.base import ReaderOptions
from tests.reference_readers import (
    accepted,
    collect,
    events_of,
    ingest_files,
    message_ends,
    records_of,
    repo_file,
)

REAL = repo_file("tests", "data", "real-logs", "zipkin")


@pytest.fixture(scope="module")
def real_rows(spark: SparkSession) -> dict[str, list[dict[str, Any]]]:
    """The three real files read at once: file name -> rows."""
    names = ["skew.json", "yelp.json", "messaging-kafka.json"]
    rows = collect(zipkin.read(spark, [str(REAL / n) for n in names], ReaderOptions()))
    return {n: [r for r in rows if Path(r["source"]).name == n] for n in names}


@pytest.mark.slow
def test_skew_reports_the_request_received_65_ms_before_it_was_sent(
    spark: SparkSession, real_rows: dict[str, list[dict[str, Any]]]
) -> None:
    rows = real_rows["skew.json"]
    assert all(r["parse_error"] is None for r in rows)
    # servicea's CLIENT span 74280ae0c10d8062 calls serviceb's SERVER span of the same
    # id (shared): a request and a response; the SERVER starts 65.441 ms before the
    # CLIENT does (1470150004008761 vs 1470150004074202 microseconds)
    ends = message_ends(rows)
    assert set(ends) == {"74280ae0c10d8062:req", "74280ae0c10d8062:resp"}
    request_send, request_receive = ends["74280ae0c10d8062:req"]
    assert request_send is not None and request_receive is not None
    assert (request_send["process"], request_receive["process"]) == (
        "servicea@127.0.0.0",
        "serviceb@192.0.0.0",
    )
    skew = float(request_receive["ts"]) - float(request_send["ts"])
    assert skew == pytest.approx(-0.065441, abs=1e-6)
    response_send, response_receive = ends["74280ae0c10d8062:resp"]
    assert response_send is not None and response_receive is not None
    assert float(response_receive["ts"]) > float(response_send["ts"])
    # 4 spans, 2 events each; the trace is still analysed: today's ingest takes every row
    assert len(events_of(rows)) == 8
    tables = ingest_files(spark, [str(REAL / "skew.json")])
    assert tables.quarantine.count() == 0
    assert Counter(r["status"] for r in tables.messages.collect()) == {"delivered": 2}


def test_yelp_rpcs_calls_and_the_orphan_root(real_rows: dict[str, list[dict[str, Any]]]) -> None:
    rows = real_rows["yelp.json"]
    assert all(r["parse_error"] is None for r in rows)
    # service plus localEndpoint ipv4/port: mobile_api with port 31049 and without are two
    # processes, as are yelp-main with port 31523 and without
    assert {r["process"] for r in rows} == {
        "routing",
        "unknown",
        "yelp-main",
        "yelp-main@:31523",
        "yelp_main/api_proxy@:31523",
        "mobile_api",
        "mobile_api@:31049",
        "spectre",
    }
    ends = message_ends(rows)
    # three CLIENT/SERVER pairs sharing an id: 668ed78ad94b35a1, f5f268651b2a2b34,
    # 7a778764a0d0b594: a request and a response each
    rpcs = {"668ed78ad94b35a1", "f5f268651b2a2b34", "7a778764a0d0b594"}
    # a child on another process than its parent, without such kinds: 15fc03927f0f68df and
    # the CLIENT 7a778764a0d0b594 (mobile_api) under f5f268651b2a2b34 (mobile_api@:31049),
    # 241cea1aa4cb2884 and e7d1a2d5a788ac81 (yelp-main@:31523) under 668ed78ad94b35a1
    # (yelp_main/api_proxy@:31523), the CLIENTs f5f268651b2a2b34 (yelp-main) and
    # 668ed78ad94b35a1 (unknown) under routing's 2e8cfb154b59a41f
    calls = {
        "15fc03927f0f68df",
        "7a778764a0d0b594",
        "241cea1aa4cb2884",
        "e7d1a2d5a788ac81",
        "f5f268651b2a2b34",
        "668ed78ad94b35a1",
    }
    # routing's root SERVER span is `shared` but its CLIENT is not in the file: an orphan
    expected = (
        {f"{s}:req" for s in rpcs}
        | {f"{s}:resp" for s in rpcs}
        | {f"{s}:call" for s in calls}
        | {"2e8cfb154b59a41f:req"}
    )
    assert set(ends) == expected
    orphans = {m for m, (send, _) in ends.items() if send is None}
    assert orphans == {"2e8cfb154b59a41f:req"}
    assert all(receive is not None for _, receive in ends.values())
    # 32 span ends; an end that receives and then sends is two events (the starts of
    # routing's and of the three CLIENTs 668e, f5f2, 7a77: +4), and a start that calls two
    # children on one process sends twice, in two events (the SERVERs f5f2 and 668e: each
    # receive + 2 sends, +2 each): 32 + 4 + 4 = 40
    assert len(events_of(rows)) == 40


def test_kafka_producer_consumer_messages(real_rows: dict[str, list[dict[str, Any]]]) -> None:
    rows = real_rows["messaging-kafka.json"]
    assert all(r["parse_error"] is None for r in rows)
    assert {r["process"] for r in rows} == {"servicea", "serviceb"}
    # every CONSUMER span whose parent is a PRODUCER span: one message each (the root
    # CONSUMER 0562809467078eab has no parent); every other child runs on its parent's
    # process
    consumers = {
        "b4a2a87ee7f003bc": ("2e22a0564764943a", "serviceb"),
        "e0473dc3d8732e8b": ("2e22a0564764943a", "servicea"),
        "a5524eec8147b1da": ("5133caca649f802b", "serviceb"),
        "08e980b0e786309b": ("5133caca649f802b", "servicea"),
        "bad2ddec9d33837b": ("085a9df516127e50", "servicea"),
        "519d27c657334615": ("085a9df516127e50", "serviceb"),
    }
    ends = message_ends(rows)
    assert set(ends) == {f"{c}:msg" for c in consumers}
    for consumer, (producer, process) in consumers.items():
        send, receive = ends[f"{consumer}:msg"]
        assert send is not None and receive is not None
        assert receive["process"] == process
        assert send["label"] == "send (start)"
        assert receive["label"] == "poll (start)"
        del producer
    # each producer sends to two consumers on two processes: one multicast event each
    sends = [r for r in accepted(rows) if r["kind"] == "send"]
    assert len({(r["process"], r["seq"], r["sub"]) for r in sends}) == 3
    # 28 spans, 2 events each, no event both receives and sends
    assert len(events_of(rows)) == 56


@pytest.mark.slow
def test_span_process_span_makes_each_span_a_process(spark: SparkSession) -> None:
    rows = collect(
        zipkin.read(spark, [str(REAL / "skew.json")], ReaderOptions(span_process="span"))
    )
    assert {r["process"] for r in rows} == {
        "serviceb@192.0.0.0/43210ae0c10d1234",
        "serviceb@192.0.0.0/74280ae0c10d8062",
        "servicea@127.0.0.0/bf396325699c84bf",
        "servicea@127.0.0.0/74280ae0c10d8062",
    }
    # nested spans are on different processes now: the parent's start calls the child
    # (43210ae0c10d1234 under the SERVER 74280ae0c10d8062; the CLIENT 74280ae0c10d8062
    # under bf396325699c84bf), besides the request and response
    assert set(message_ends(rows)) == {
        "74280ae0c10d8062:req",
        "74280ae0c10d8062:resp",
        "43210ae0c10d1234:call",
        "74280ae0c10d8062:call",
    }
    # 8 span ends; the SERVER's start receives then calls, the CLIENT's start is called
    # then sends: 8 + 2
    assert len(events_of(rows)) == 10


@pytest.mark.slow
def test_bad_spans_are_rejected_with_reasons_and_counted(
    spark: SparkSession, tmp_path: Path
) -> None:
    def span(**fields: Any) -> dict[str, Any]:
        base = {
            "traceId": "00000000000000aa",
            "id": "0000000000000001",
            "name": "x",
            "timestamp": 1000,
            "duration": 10,
            "localEndpoint": {"serviceName": "a"},
        }
        base.update(fields)
        return {k: v for k, v in base.items() if v is not None}

    spans = [
        span(),
        span(id="0000000000000002", timestamp=None),
        3,
        span(id=None),
        span(id="0000000000000004", duration="abc"),
        # a SERVER whose CLIENT (shared id) is not in the file: kept, its request an orphan
        span(id="0000000000000005", kind="SERVER", shared=True, localEndpoint={"serviceName": "b"}),
        span(name="again"),
        span(id="0000000000000006", duration=None),
    ]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(spans))
    truncated = tmp_path / "truncated.json"
    truncated.write_text(json.dumps(spans)[:-40])
    rows = collect(zipkin.read(spark, [str(path), str(truncated)], ReaderOptions()))
    good_file = [r for r in rows if r["source"] == str(path)]
    rejects = {
        r["line"]: (r["parse_reason"], r["parse_error"]) for r in good_file if r["parse_error"]
    }
    assert rejects == {
        2: ("unparseable", "span without timestamp"),
        3: ("unparseable", "not a span object"),
        4: ("unparseable", "not a span: no traceId or id"),
        5: (None, "duration 'abc' is not a count of microseconds"),
        7: (
            "duplicate_span",
            f"span '0000000000000001' (no kind) of trace '00000000000000aa' repeats the one at line 1 of {path}",
        ),
    }
    ends = message_ends(good_file)
    assert set(ends) == {"0000000000000005:req"}
    assert ends["0000000000000005:req"][0] is None
    assert {(r["line"], r["label"]) for r in accepted(good_file) if r["sub"] == 0} >= {
        (8, "x (start) [duration unknown]")
    }
    # accounting: 8 records in the good file, each once; the truncated document is one
    # record, rejected whole
    assert len({(line, rec) for _, line, rec in records_of(good_file)}) == 8
    bad_file = [r for r in rows if r["source"] == str(truncated)]
    assert [(r["line"], r["parse_reason"]) for r in bad_file] == [(1, "unparseable")]
    assert "invalid or truncated JSON" in bad_file[0]["parse_error"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (REAL / "skew.json", True),
        (REAL / "yelp.json", True),
        (REAL.parent / "dctracing" / "echo_trace_log.jsonl", False),
        (repo_file("tests", "data", "spans", "jaeger_orders.json"), False),
        (repo_file("tests", "data", "spans", "otlp_checkout.json"), False),
    ],
    ids=lambda p: p.name if isinstance(p, Path) else str(p),
)
def test_sniff(path: Path, expected: bool) -> None:
    assert zipkin.sniff(path.read_bytes()[:1024]) is expected
