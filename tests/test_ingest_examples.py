"""The worked traces of ../shared/traces (copied to data-samples/) through ingest."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from causal_spark import tables
from tests.conftest import SAMPLES
from tests.helpers import ingest_paths

pytestmark = pytest.mark.slow  # every test here reads one ingest or audit of the module


@pytest.fixture(scope="module")
def samples(spark: SparkSession):
    out = ingest_paths(spark, [SAMPLES.relative_to(SAMPLES.parent)])
    return {
        "events": out.events.collect(),
        "messages": out.messages.collect(),
        "quarantine": out.quarantine.collect(),
        "frames": out,
    }


def test_bad_input_quarantine_matches_expected(
    samples: dict[str, Any], expected: dict[str, Any]
) -> None:
    want = expected["bad_input"]
    reasons = Counter(r["reason"] for r in samples["quarantine"] if r["trace_id"] == "bad_input")
    assert dict(reasons) == want["quarantine_reasons"]
    messages = [m for m in samples["messages"] if m["trace_id"] == "bad_input"]
    assert sum(m["status"] == "in_flight" for m in messages) == want["n_in_flight"]
    assert sum(m["status"] == "orphan" for m in messages) == want["n_orphans"]
    processes = {e["process"] for e in samples["events"] if e["trace_id"] == "bad_input"}
    assert len(processes) == want["n_processes"]


def test_bad_input_quarantine_rows_name_file_line_and_reason(samples: dict[str, Any]) -> None:
    rows = sorted((r["source"], r["line"], r["reason"]) for r in samples["quarantine"])
    assert rows == [
        ("data-samples/bad_input.jsonl", 2, "malformed"),
        ("data-samples/bad_input.jsonl", 3, "duplicate_msg"),
        ("data-samples/bad_input.jsonl", 4, "malformed"),
        ("data-samples/bad_input.jsonl", 7, "malformed"),
    ]
    details = {r["line"]: r["detail"] for r in samples["quarantine"]}
    assert details[2] == "unknown kind 'teleport'"
    assert details[4] == "not a JSON object"
    assert details[7] == "missing required field 'process'"
    assert details[3] == "second send of msg_id 'm1' (the first is line 1)"


def test_every_sample_row_is_analysed_or_quarantined(samples: dict[str, Any]) -> None:
    n_rows = sum(
        1 for f in SAMPLES.glob("*.jsonl") for line in f.read_text().splitlines() if line.strip()
    )
    internal = sum(e["kind"] == "internal" for e in samples["events"])
    sends = sum(m["send_lseq"] is not None for m in samples["messages"])
    receives = sum(m["recv_lseq"] is not None for m in samples["messages"])
    assert internal + sends + receives + len(samples["quarantine"]) == n_rows


def test_fifo_violation_trace_events(spark: SparkSession, samples: dict[str, Any]) -> None:
    events = samples["frames"].events.where("trace_id = 'fifo_violation'")
    expected = spark.createDataFrame(
        [
            (
                "fifo_violation",
                "A",
                0,
                1,
                "send",
                0.0,
                None,
                1,
                1,
                "data-samples/fifo_violation.jsonl",
                1,
                None,
                None,
                None,  # recorded_vc: the row format records no clock
            ),
            (
                "fifo_violation",
                "A",
                0,
                2,
                "send",
                1.0,
                None,
                1,
                2,
                "data-samples/fifo_violation.jsonl",
                2,
                None,
                None,
                None,  # recorded_vc: the row format records no clock
            ),
            (
                "fifo_violation",
                "B",
                1,
                1,
                "receive",
                2.0,
                None,
                0,
                1,
                "data-samples/fifo_violation.jsonl",
                3,
                None,
                None,
                None,  # recorded_vc: the row format records no clock
            ),
            (
                "fifo_violation",
                "B",
                1,
                2,
                "receive",
                5.0,
                None,
                0,
                2,
                "data-samples/fifo_violation.jsonl",
                4,
                None,
                None,
                None,  # recorded_vc: the row format records no clock
            ),
        ],
        tables.table_schema(tables.EVENTS),
    )
    assert_df_equality(
        events, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )


def test_multicast_is_one_event_with_one_message_per_destination(samples: dict[str, Any]) -> None:
    chat = [e for e in samples["events"] if e["trace_id"] == "causal_chat"]
    assert len(chat) == 6  # 8 rows, two multicast groups of two copies
    p0_send = next(e for e in chat if e["process"] == "P0" and e["lseq"] == 1)
    assert (p0_send["kind"], p0_send["n_msgs"]) == ("send", 2)
    messages = {m["msg_id"]: m for m in samples["messages"] if m["trace_id"] == "causal_chat"}
    assert {
        k: (m["src"], m["dst"], m["send_lseq"], m["recv_lseq"]) for k, m in messages.items()
    } == {
        "q1": ("P0", "P1", 1, 1),
        "q2": ("P0", "P2", 1, 2),
        "r0": ("P1", "P0", 2, 2),
        "r2": ("P1", "P2", 2, 1),
    }


def test_every_trace_is_ingested_with_processes_indexed_by_name(
    samples: dict[str, Any], expected: dict[str, Any]
) -> None:
    traces = {e["trace_id"] for e in samples["events"]}
    assert traces == set(expected)
    for trace in traces:
        names = sorted({e["process"] for e in samples["events"] if e["trace_id"] == trace})
        for e in samples["events"]:
            if e["trace_id"] == trace:
                assert e["pidx"] == names.index(e["process"])
