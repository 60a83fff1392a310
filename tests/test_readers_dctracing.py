"""DistributedClocks tracing reader: the real log, its equivalence with the ShiViz log
of the same run (explicit tokens vs inferred messages), bad input, recorded clocks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from causal_spark.io.readers import dctracing, shiviz
from causal_spark.io.readers.base import ReaderOptions
from tests.reference_readers import accepted, collect, log_units, repo_file, vector_clocks

REAL = repo_file("tests", "data", "real-logs")
ECHO = REAL / "dctracing" / "echo_trace_log.jsonl"
ECHO_SHIVIZ = REAL / "shiviz" / "echo_trace_log_shiviz.log"


def _corrupted_echo(folder: Path) -> Path:
    """ECHO with one recorded clock changed: line 8, where echo_server receives client1's
    token ({"client1":5,"echo_server":3}), now records client1 at 4."""
    lines = ECHO.read_text().splitlines()
    record = json.loads(lines[7])
    assert record["Tag"] == "ReceiveTokenTrace"
    record["VectorClock"]["client1"] = 4
    lines[7] = json.dumps(record)
    path = folder / "corrupt.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def echo_reads(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[dict[str, Any]]]:
    """ECHO and its corrupted copy in one read (each file is its own trace): name -> rows."""
    corrupt = _corrupted_echo(tmp_path_factory.mktemp("dctracing"))
    rows = collect(dctracing.read(spark, [str(ECHO), str(corrupt)], ReaderOptions()))
    by_file: dict[str, list[dict[str, Any]]] = {ECHO.name: [], corrupt.name: []}
    for row in rows:
        by_file[Path(row["source"]).name].append(row)
    return by_file


@pytest.fixture(scope="module")
def echo_rows(echo_reads: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return echo_reads[ECHO.name]


def _endpoints(rows: list[dict[str, Any]]) -> set[tuple[str, int, str, int]]:
    """Messages as (sender, its seq, receiver, its seq)."""
    sends = {r["msg_id"]: r for r in accepted(rows) if r["kind"] == "send"}
    receives = {r["msg_id"]: r for r in accepted(rows) if r["kind"] == "receive"}
    return {
        (s["process"], int(s["seq"]), receives[m]["process"], int(receives[m]["seq"]))
        for m, s in sends.items()
        if m in receives
    }


@pytest.mark.slow
def test_echo_log_counts_and_no_rejects(echo_rows: list[dict[str, Any]]) -> None:
    # real-logs/README.md: the same run as shiviz/echo_trace_log_shiviz.log, which has
    # 3 processes, 169 events and 40 messages; the file has 169 lines, one record each
    assert len(echo_rows) == 169
    assert all(r["parse_error"] is None for r in echo_rows)
    assert {r["process"] for r in echo_rows} == {"client1", "client2", "echo_server"}
    assert len({(r["process"], r["seq"]) for r in echo_rows}) == 169
    assert len(_endpoints(echo_rows)) == 40
    assert [r["line"] for r in sorted(echo_rows, key=lambda r: r["line"])] == list(range(1, 170))


def test_every_recorded_clock_equals_the_computed_one(echo_rows: list[dict[str, Any]]) -> None:
    computed = log_units(vector_clocks(echo_rows))
    mismatches = [
        r["line"]
        for r in echo_rows
        if computed[(r["process"], int(r["seq"]), 0)]
        != {q: n for q, n in r["recorded_vc"].items() if n}
    ]
    assert mismatches == []


@pytest.mark.slow
def test_shiviz_inference_equals_explicit_pairing(
    spark: SparkSession, echo_rows: list[dict[str, Any]]
) -> None:
    inferred = collect(shiviz.read(spark, [str(ECHO_SHIVIZ)], ReaderOptions()))
    assert all(r["parse_error"] is None for r in inferred)
    # the same events, with the same labels (TraceChecker writes "<TraceID> <Tag> <Body>")
    assert {(r["process"], r["seq"], r["label"]) for r in echo_rows} == {
        (r["process"], r["seq"], r["label"]) for r in inferred if r["sub"] == 0
    }
    explicit_messages = _endpoints(echo_rows)
    assert len(explicit_messages) == 40
    assert _endpoints(inferred) == explicit_messages
    # the same vector clocks, event by event (ShiViz events here never split: sub is 0)
    assert {r["sub"] for r in inferred} == {0}
    assert vector_clocks(accepted(inferred)) == vector_clocks(echo_rows)


def _line(host: str, clock: object, tag: str = "Note", body: object = None) -> str:
    return json.dumps(
        {"TracerIdentity": host, "TraceID": 7, "Tag": tag, "Body": body or {}, "VectorClock": clock}
    )


@pytest.mark.slow
def test_bad_records_are_rejected_with_reasons_and_counted(
    spark: SparkSession, tmp_path: Path
) -> None:
    lines = [
        _line("a", {"a": 1}),
        _line("a", {"a": 2}, "GenerateTokenTrace", {"Token": "t1"}),
        "",
        _line("b", {"b": 1, "a": 2}, "ReceiveTokenTrace", {"Token": "t1"}),
        _line("b", "not a clock"),
        _line("b", {"b": 3, "a": 2}),
        _line("a", {"a": 7}),
        _line("a", {"a": 3}, "GenerateTokenTrace", {"Other": 1}),
        json.dumps({"Tag": "Note", "VectorClock": {"c": 1}}),
        '{"TracerIdentity": "b", "VectorClock": {"b": 4',
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    rows = collect(dctracing.read(spark, [str(path)], ReaderOptions()))
    rejects = {r["line"]: (r["parse_reason"], r["parse_error"]) for r in rows if r["parse_error"]}
    assert {line: reason for line, (reason, _) in rejects.items()} == {
        5: "bad_clock",
        7: "bad_clock",
        8: None,
        9: None,
        10: "unparseable",
    }
    assert "not a JSON object of host -> count" in rejects[5][1]
    assert "jumps to 7" in rejects[7][1]
    assert rejects[8][1] == "GenerateTokenTrace without Body.Token"
    assert rejects[9][1] == "missing TracerIdentity"
    good = {(r["process"], r["seq"], r["kind"], r["msg_id"]) for r in accepted(rows)}
    assert good == {
        ("a", "1", "internal", None),
        ("a", "2", "send", "t1"),
        ("b", "1", "receive", "t1"),
        ("b", "3", "internal", None),
    }
    # accounting: nine non-blank lines, nine records, each once
    assert sorted(r["line"] for r in rows) == [1, 2, 4, 5, 6, 7, 8, 9, 10]


def test_a_corrupted_recorded_clock_is_kept_as_written_and_differs_only_there(
    echo_reads: dict[str, list[dict[str, Any]]],
) -> None:
    # read beside ECHO (echo_reads); line 8's clock names client1's event 4, not 5
    rows = echo_reads["corrupt.jsonl"]
    assert [r["recorded_vc"] for r in rows if r["line"] == 8] == [{"client1": 4, "echo_server": 3}]
    assert all(r["parse_error"] is None for r in rows)
    computed = log_units(vector_clocks(rows))
    mismatches = [
        r["line"]
        for r in rows
        if computed[(r["process"], int(r["seq"]), 0)]
        != {q: n for q, n in r["recorded_vc"].items() if n}
    ]
    assert mismatches == [8]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (ECHO, True),
        (ECHO_SHIVIZ, False),
        (REAL / "zipkin" / "skew.json", False),
    ],
    ids=lambda p: p.name if isinstance(p, Path) else str(p),
)
def test_sniff(path: Path, expected: bool) -> None:
    assert dctracing.sniff(path.read_bytes()[:1024]) is expected
