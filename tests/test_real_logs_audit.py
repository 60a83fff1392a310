"""Every real log audits with `--format auto` (issue 18's acceptance), through the command
line's own entry point (`cli.main`, in this process, on the session's Spark: no new JVM).

Two runs, each once for the module:
- `audit tests/data/real-logs --format auto --protocols none`: the whole folder as a user
  would give it (voldemort.log needs its own regex, so here every line of it is
  quarantined: the accounting still holds and its trace gets no order class);
- `ingest`, `clocks`, `detect` as separate commands (so detect learns from the ledger how
  each trace was read) on voldemort.log with its regex (real-logs/shiviz/PARSERS.txt),
  a copy of the tracing log with one recorded clock changed, and skew.json read with
  `--span-process span`.

The counts are those tests/data/real-logs/README.md states; "events" there are the
logged events (records), which for ShiViz are our events' distinct (process, seq).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from causal_spark.app import cli
from causal_spark.io.ledger import Ledger
from tests.conftest import ROOT, read_delta

REAL = Path("tests") / "data" / "real-logs"
ECHO = REAL / "dctracing" / "echo_trace_log.jsonl"
VOLDEMORT = REAL / "shiviz" / "voldemort.log"
SKEW = REAL / "zipkin" / "skew.json"
# data-log="voldemort.log" data-parser=... in real-logs/shiviz/PARSERS.txt
VOLDEMORT_REGEX = (
    r"\[(?<date>\d{4}-\d{2}-\d{2} (\d{2}:){2}\d{2},\d{3}) (?<path>\S*)\] "
    r"(?<priority>(INFO|WARN)) (?<event>.*)\n(?<host>\S*) (?<clock>{.*})"
)
# (trace, processes, logged events, messages or None) as the README states them
README = [
    ("shiviz/RpcClientServer", 2, 10, 4),
    ("shiviz/chord", 8, 1235, None),
    ("shiviz/echo_trace_log_shiviz", 3, 169, 40),
    ("dctracing/echo_trace_log", 3, 169, 40),
]
# the folder's files no reader takes: licences and notes
NOT_LOGS = {
    "README.md",
    "dctracing/LICENSE",
    "shiviz/LICENSE.txt",
    "shiviz/PARSERS.txt",
    "zipkin/LICENSE",
    "zipkin/README.md",
}
# skew.json's request: the SERVER span starts 65.441 ms before its CLIENT span
SKEWED = ("1e223ff1f80f1c69", "74280ae0c10d8062:req", -0.065441)


def _corrupted_echo(folder: Path) -> Path:
    """ECHO with one recorded clock changed: line 8, where echo_server receives client1's
    token ({"client1":5,"echo_server":3}), now records client1 at 4."""
    lines = (ROOT / ECHO).read_text().splitlines()
    record = json.loads(lines[7])
    assert record["Tag"] == "ReceiveTokenTrace"
    assert record["VectorClock"] == {"client1": 5, "echo_server": 3}
    record["VectorClock"]["client1"] = 4
    lines[7] = json.dumps(record)
    path = folder / "corrupt.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _tables(warehouse: Path, *names: str) -> dict[str, list[dict[str, Any]]]:
    return {name: read_delta(warehouse / name).to_pylist() for name in names}


TABLES = ("events", "messages", "quarantine", "trace_summary", "clock_mismatches")


@pytest.fixture(scope="module")
def whole_folder(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    warehouse = tmp_path_factory.mktemp("real-logs") / "warehouse"
    argv = ["audit", str(REAL), "--warehouse", str(warehouse), "--format", "auto"]
    conf = ["--conf", str(ROOT / "conf" / "test.yml"), "--protocols", "none", "-q"]
    assert cli.main([*argv, *conf], spark) == 0
    (run,) = Ledger(str(warehouse)).rows()
    return {"run": run, "warehouse": warehouse, **_tables(warehouse, *TABLES)}


@pytest.fixture(scope="module")
def by_stage(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("stages")
    corrupt = _corrupted_echo(folder)
    warehouse = folder / "warehouse"
    common = ["--warehouse", str(warehouse), "--conf", str(ROOT / "conf" / "test.yml"), "-q"]
    reading = ["--shiviz-regex", VOLDEMORT_REGEX, "--span-process", "span"]
    inputs = [str(VOLDEMORT), str(corrupt), str(SKEW)]
    assert cli.main(["ingest", *inputs, *common, *reading], spark) == 0
    assert cli.main(["clocks", *common], spark) == 0
    assert cli.main(["detect", *common], spark) == 0
    return {
        "runs": Ledger(str(warehouse)).rows(),
        "corrupt": corrupt,
        **_tables(warehouse, *TABLES),
    }


def _summary(tables: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["trace_id"]: r for r in tables["trace_summary"]}


@pytest.mark.slow
def test_every_row_read_is_an_event_row_or_quarantined(whole_folder: dict[str, Any]) -> None:
    counts = whole_folder["run"]["counts"]
    events, quarantine = whole_folder["events"], whole_folder["quarantine"]
    # an event is one row, except a multicast send: one row per message
    rows = sum(e["n_msgs"] if e["kind"] == "send" else 1 for e in events)
    assert rows + len(quarantine) == counts["rows_read"]
    assert len(quarantine) == counts["quarantine"]
    # every log was read by its own reader; every other file is listed as skipped
    formats = {
        Path(f["path"]).relative_to(REAL).as_posix(): given["format"]
        for given in whole_folder["run"]["inputs"]
        for f in given["files"]
    }
    assert formats == {
        "dctracing/echo_trace_log.jsonl": "dctracing",
        "shiviz/RpcClientServer.log": "shiviz",
        "shiviz/chord.log": "shiviz",
        "shiviz/echo_trace_log_shiviz.log": "shiviz",
        "shiviz/voldemort.log": "shiviz",
        "zipkin/messaging-kafka.json": "zipkin",
        "zipkin/skew.json": "zipkin",
        "zipkin/yelp.json": "zipkin",
    }
    skipped = {Path(s["path"]).relative_to(REAL).as_posix() for s in whole_folder["run"]["skipped"]}
    assert skipped == NOT_LOGS
    # voldemort.log does not match ShiViz's default regex: all its 1728 lines are
    # quarantined, and its trace says so instead of a class
    assert Counter(q["source"] for q in quarantine) == {str(VOLDEMORT): 1728}
    voldemort = _summary(whole_folder)["shiviz/voldemort"]
    assert voldemort["order_class"] is None
    assert (
        voldemort["order_class_reason"] == "no analysable event: all 1728 input row(s) quarantined"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("trace", "n_processes", "n_logged", "n_messages"), README, ids=[r[0] for r in README]
)
def test_counts_are_the_readmes(
    whole_folder: dict[str, Any],
    trace: str,
    n_processes: int,
    n_logged: int,
    n_messages: int | None,
) -> None:
    events = [e for e in whole_folder["events"] if e["trace_id"] == trace]
    assert len({e["process"] for e in events}) == n_processes
    assert len({(e["process"], e["seq"]) for e in events}) == n_logged
    summary = _summary(whole_folder)[trace]
    assert summary["n_processes"] == n_processes
    assert summary["n_quarantined"] == 0
    if n_messages is not None:
        messages = [m for m in whole_folder["messages"] if m["trace_id"] == trace]
        assert len(messages) == summary["n_messages"] == n_messages
        assert {m["status"] for m in messages} == {"delivered"}


@pytest.mark.slow
def test_voldemort_with_its_regex_has_the_readmes_counts(by_stage: dict[str, Any]) -> None:
    # README: 20 processes (JVM threads), 864 events, no crowns; five lines holding a lone
    # "." match no regex and are quarantined
    events = [e for e in by_stage["events"] if e["trace_id"] == "voldemort"]
    assert len({e["process"] for e in events}) == 20
    assert len({(e["process"], e["seq"]) for e in events}) == 864
    voldemort = _summary(by_stage)["voldemort"]
    assert voldemort["n_crown_sccs"] == 0
    assert voldemort["n_quarantined"] == len(by_stage["quarantine"]) == 5


@pytest.mark.slow
def test_every_recorded_clock_of_the_real_logs_equals_the_computed_one(
    whole_folder: dict[str, Any], by_stage: dict[str, Any]
) -> None:
    assert whole_folder["clock_mismatches"] == []
    recorded = {trace for trace, *_ in README} | {"shiviz/voldemort"}
    summaries = _summary(whole_folder)
    for trace, summary in summaries.items():
        if trace in recorded and summary["n_events"]:
            assert summary["n_clock_mismatches"] == 0, trace
        else:  # spans record no clock; voldemort's rows were all quarantined here
            assert summary["n_clock_mismatches"] is None, trace
    # every event of these logs carries its recorded clock, in pidx order
    logged = [e for e in whole_folder["events"] if e["trace_id"] in recorded]
    with_clock = [e for e in logged if e["recorded_vc"] is not None]
    assert len({(e["trace_id"], e["process"], e["seq"]) for e in with_clock}) == sum(
        n for _, _, n, _ in README
    )
    assert all(len(e["recorded_vc"]) == len(e["vc"]) for e in with_clock)
    assert _summary(by_stage)["voldemort"]["n_clock_mismatches"] == 0


@pytest.mark.slow
def test_a_corrupted_recorded_clock_is_exactly_one_mismatch(by_stage: dict[str, Any]) -> None:
    (mismatch,) = by_stage["clock_mismatches"]
    # pidx order: client1, client2, echo_server; line 8 is echo_server's third event
    assert mismatch == {
        "trace_id": "corrupt",
        "process": "echo_server",
        "lseq": 3,
        "seq": 3,
        "source": str(by_stage["corrupt"]),
        "line": 8,
        "recorded": [4, 0, 3],
        "computed": [5, 0, 3],
        "differing": ["client1"],
    }
    assert _summary(by_stage)["corrupt"]["n_clock_mismatches"] == 1
    clocks_run = by_stage["runs"][1]
    assert clocks_run["command"] == "clocks"
    assert clocks_run["counts"]["clock_mismatches"] == 1


@pytest.mark.slow
def test_traces_whose_messages_were_inferred_say_so(
    spark: SparkSession,
    whole_folder: dict[str, Any],
    by_stage: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    summaries = _summary(whole_folder)
    for trace, summary in summaries.items():
        inferred = trace.startswith("shiviz/")
        assert summary["messages_inferred"] is inferred, trace
        if inferred:  # not observable: null, not 0
            assert summary["n_fifo_violations"] is None
            assert summary["n_causal_violations"] is None
            assert summary["order_class"] in ("RSC", "CO", None)
        else:
            assert summary["n_fifo_violations"] is not None
    # chord.log's crossing messages between kv-node-40 and kv-node-10 are still crowns
    assert summaries["shiviz/chord"]["n_crown_sccs"] > 0
    assert summaries["shiviz/chord"]["order_class"] == "CO"
    # explain says so instead of "None FIFO"
    warehouse = ["--warehouse", str(whole_folder["warehouse"])]
    assert cli.main(["explain", "--trace", "shiviz/chord", *warehouse], spark) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "trace shiviz/chord: order class CO (8 processes, 1236 events, 541 messages, 0 rows "
        "quarantined; FIFO and causal order not observable (messages inferred from clocks), "
        "13 crown component(s))"
    )
    # detect, run on its own, learns it from the ingest's runs row
    assert _summary(by_stage)["voldemort"]["messages_inferred"] is True
    assert _summary(by_stage)["corrupt"]["messages_inferred"] is False


@pytest.mark.slow
def test_skew_is_counted_per_trace_and_seen_per_message(
    whole_folder: dict[str, Any], by_stage: dict[str, Any]
) -> None:
    trace, msg_id, latency = SKEWED
    for tables in (whole_folder, by_stage):
        (message,) = [
            m for m in tables["messages"] if m["trace_id"] == trace and m["msg_id"] == msg_id
        ]
        assert message["recv_ts"] - message["send_ts"] == pytest.approx(latency, abs=1e-6)
        summary = _summary(tables)[trace]
        assert summary["n_skewed_messages"] == 1
        assert summary["order_class"] is not None  # still analysed
    # a log with no times says nothing about skew
    assert _summary(whole_folder)["shiviz/chord"]["n_skewed_messages"] is None


@pytest.mark.slow
def test_the_summary_says_which_span_process_mode_read_a_span_trace(
    whole_folder: dict[str, Any], by_stage: dict[str, Any]
) -> None:
    modes = {t: s["span_process"] for t, s in _summary(whole_folder).items()}
    spans = {t for t in modes if "/" not in t}  # span traces carry their own trace id
    assert len(spans) == 3
    assert {modes[t] for t in spans} == {"instance"}
    assert {modes[t] for t in set(modes) - spans} == {None}
    assert _summary(by_stage)[SKEWED[0]]["span_process"] == "span"
    assert _summary(by_stage)["corrupt"]["span_process"] is None
