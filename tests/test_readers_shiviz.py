"""ShiViz / GoVector reader: the real logs' counts, inference against ShiViz's own
algorithm, recorded clocks against brute-force vector clocks, and bad input."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark.io.readers import shiviz
from causal_spark.io.readers.base import ReaderError, ReaderOptions
from tests.reference_readers import (
    accepted,
    collect,
    ingest_files,
    log_units,
    repo_file,
    shiviz_reference,
    vector_clocks,
)

REAL = repo_file("tests", "data", "real-logs", "shiviz")
# data-log="voldemort.log" data-parser=... in real-logs/shiviz/PARSERS.txt
VOLDEMORT_REGEX = (
    r"\[(?<date>\d{4}-\d{2}-\d{2} (\d{2}:){2}\d{2},\d{3}) (?<path>\S*)\] "
    r"(?<priority>(INFO|WARN)) (?<event>.*)\n(?<host>\S*) (?<clock>{.*})"
)

# (file, regex, processes, logged events, messages or None) as real-logs/README.md states
# them; messages of chord and voldemort are not stated there: they are checked against
# ShiViz's own algorithm below
README_COUNTS = [
    ("RpcClientServer.log", None, 2, 10, 4),
    ("chord.log", None, 8, 1235, None),
    ("voldemort.log", VOLDEMORT_REGEX, 20, 864, None),
    ("echo_trace_log_shiviz.log", None, 3, 169, 40),
]
# voldemort.log has five lines holding a lone "." between its records (lines 293,
# 585, 877, 1161 and 1445: `grep -n '^\.$'`); ShiViz skips them, the reader quarantines them
UNMATCHED_LINES = {"voldemort.log": [293, 585, 877, 1161, 1445]}


BAD_NAME, MULTI_NAME, CUT_NAME = "bad.log", "multi.log", "cut.log"
GZ_NAME, BROKEN_NAME = "multi.log.gz", "broken.log.gz"
HAND_MADE = (BAD_NAME, MULTI_NAME, CUT_NAME, GZ_NAME, BROKEN_NAME)


@pytest.fixture(scope="module")
def shiviz_reads(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[DataFrame, dict[str, list[dict[str, Any]]]]:
    """Every real ShiViz log read once (the logs with ShiViz's default regex in one read,
    voldemort.log with its own), the hand-made BAD_LOG and MULTI_LOG in the default
    regex's read beside them (each file is its own trace): (that read's rows, checkpointed,
    and file name -> rows)."""
    folder = tmp_path_factory.mktemp("shiviz")
    (folder / BAD_NAME).write_text(BAD_LOG)
    (folder / MULTI_NAME).write_text(MULTI_LOG)
    (folder / CUT_NAME).write_text(CUT_LOG)
    (folder / GZ_NAME).write_bytes(gzip.compress(MULTI_LOG.encode()))
    (folder / BROKEN_NAME).write_bytes(b"not gzip at all\n")
    by_file: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in README_COUNTS}
    by_file |= {name: [] for name in HAND_MADE}
    default: DataFrame | None = None
    for regex in {regex for _, regex, *_ in README_COUNTS}:
        files = [str(REAL / name) for name, r, *_ in README_COUNTS if r == regex]
        if regex is None:
            files += [str(folder / n) for n in HAND_MADE]
        frame = shiviz.read(spark, files, ReaderOptions(shiviz_regex=regex)).localCheckpoint()
        if regex is None:
            default = frame
        for row in collect(frame):
            by_file[Path(row["source"]).name].append(row)
    assert default is not None
    return default, by_file


@pytest.fixture(scope="module")
def real_rows(
    shiviz_reads: tuple[DataFrame, dict[str, list[dict[str, Any]]]],
) -> dict[str, list[dict[str, Any]]]:
    return shiviz_reads[1]


def _messages(rows: list[dict[str, Any]]) -> set[tuple[str, int, str, int]]:
    sends = {r["msg_id"]: r for r in accepted(rows) if r["kind"] == "send"}
    receives = {r["msg_id"]: r for r in accepted(rows) if r["kind"] == "receive"}
    assert set(sends) == set(receives), "every inferred message has both ends"
    return {
        (s["process"], int(s["seq"]), receives[m]["process"], int(receives[m]["seq"]))
        for m, s in sends.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "regex", "n_processes", "n_events", "n_messages"),
    README_COUNTS,
    ids=[c[0] for c in README_COUNTS],
)
def test_real_log_counts_are_the_readmes(
    real_rows: dict[str, list[dict[str, Any]]],
    name: str,
    regex: str | None,
    n_processes: int,
    n_events: int,
    n_messages: int | None,
) -> None:
    rows = real_rows[name]
    good = accepted(rows)
    assert len({r["process"] for r in good}) == n_processes
    assert len({(r["process"], r["seq"]) for r in good}) == n_events
    if n_messages is not None:
        assert len(_messages(rows)) == n_messages
    rejects = [r for r in rows if r["parse_error"] is not None]
    assert sorted(r["line"] for r in rejects) == UNMATCHED_LINES.get(name, [])
    assert {r["parse_reason"] for r in rejects} <= {"unparseable"}
    # accounting: every record (a match or an unmatched line) is in the rows, once
    records = {(r["line"], r["record"]) for r in rows}
    assert len(records) == n_events + len(UNMATCHED_LINES.get(name, []))
    assert all(r["source"] == str(REAL / name) for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "regex"), [c[:2] for c in README_COUNTS], ids=[c[0] for c in README_COUNTS]
)
def test_inferred_messages_are_shivizs(
    real_rows: dict[str, list[dict[str, Any]]], name: str, regex: str | None
) -> None:
    events, expected = shiviz_reference((REAL / name).read_text(), regex)
    rows = real_rows[name]
    assert {(r["process"], int(r["seq"])) for r in accepted(rows)} == {
        (e.host, e.own) for e in events
    }
    assert _messages(rows) == expected


@pytest.mark.parametrize("name", [c[0] for c in README_COUNTS])
def test_every_recorded_clock_equals_the_computed_one(
    real_rows: dict[str, list[dict[str, Any]]], name: str
) -> None:
    good = accepted(real_rows[name])
    computed = log_units(vector_clocks(good))
    recorded = {
        (r["process"], int(r["seq"]), r["sub"]): {q: n for q, n in r["recorded_vc"].items() if n}
        for r in good
        if r["recorded_vc"] is not None
    }
    # one recorded clock per logged event, on its last sub-event
    assert len({(p, s) for p, s, _ in recorded}) == len({(r["process"], r["seq"]) for r in good})
    mismatches = [key for key, clock in recorded.items() if computed[key] != clock]
    assert mismatches == []


def test_chord_has_the_two_crossing_messages(real_rows: dict[str, list[dict[str, Any]]]) -> None:
    # README: "it contains crowns (two crossing messages between kv-node-40 and kv-node-10)"
    messages = _messages(real_rows["chord.log"])
    forth = [(s, r) for q, s, p, r in messages if (q, p) == ("kv-node-40", "kv-node-10")]
    back = [(s, r) for q, s, p, r in messages if (q, p) == ("kv-node-10", "kv-node-40")]
    crossing = [
        (m1, m2)
        for m1 in forth
        for m2 in back
        # kv-node-40 sends m1 before it receives m2; kv-node-10 sends m2 before it receives m1
        if m1[0] < m2[1] and m2[0] < m1[1]
    ]
    assert crossing


@pytest.mark.slow
def test_rows_pass_todays_ingest_without_quarantine(
    spark: SparkSession, real_rows: dict[str, list[dict[str, Any]]]
) -> None:
    # both logs in one ingest (each file is its own trace, named by its stem)
    names = ["RpcClientServer.log", "echo_trace_log_shiviz.log"]
    tables = ingest_files(spark, [str(REAL / name) for name in names])
    assert tables.quarantine.count() == 0
    events = Counter(r["trace_id"] for r in tables.events.select("trace_id").collect())
    statuses = Counter((r["trace_id"], r["status"]) for r in tables.messages.collect())
    assert set(events) == {Path(name).stem for name in names}
    for name in names:
        rows, trace = real_rows[name], Path(name).stem
        assert events[trace] == len({(r["process"], r["seq"], r["sub"]) for r in rows})
        assert {s for t, s in statuses if t == trace} == {"delivered"}
        assert statuses[(trace, "delivered")] == len(_messages(rows))


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BAD_LOG = """a {"a":1}
start
a {"a":2}
send to b
b {"b":1, "a":2}
receive from a
b {"b":2, "a":not-json}
clock is not JSON
b {"b":3, "a":2}
after the unreadable one
a {"a":5}
own entry jumps
c {"c":1, "z":1}
names a host with no event
c {"c":2, "a":4}
names a's event 4, a has 3
b {"b":3, "a":2}
repeats b's 3
this line matches nothing
"""


def test_bad_clocks_and_unmatched_text_are_rejected_with_reasons(
    real_rows: dict[str, list[dict[str, Any]]],
) -> None:
    rows = real_rows[BAD_NAME]  # read with the real logs (shiviz_reads)
    rejects = {r["line"]: (r["parse_reason"], r["parse_error"]) for r in rows if r["parse_error"]}
    assert {line: reason for line, (reason, _) in rejects.items()} == {
        7: "bad_clock",
        11: "bad_clock",
        13: "bad_clock",
        15: "bad_clock",
        17: "bad_clock",
        19: "unparseable",
    }
    assert "not a JSON object" in rejects[7][1]
    assert "jumps to 5" in rejects[11][1]
    assert "no event in this log: z" in rejects[13][1]
    assert "event 4 of host 'a', which has 3 events" in rejects[15][1]
    assert "repeats the record at line 9" in rejects[17][1]
    good = accepted(rows)
    # b's 3 follows its unreadable record (the unreadable one may be b's event 2)
    assert {(r["process"], r["seq"]) for r in good} == {
        ("a", "1"),
        ("a", "2"),
        ("b", "1"),
        ("b", "3"),
    }
    assert _messages(rows) == {("a", 2, "b", 1)}
    # accounting: ten records (nine matches, one unmatched line), each in the rows
    assert len({(r["line"], r["record"]) for r in rows}) == 10
    assert len(rows) == 10


# a log cut while its last record was written: the clock line stops mid-clock
CUT_LOG = 'a {"a":1}\na sends\nb {"b":1, "a":1}\nb receives\nb {"b":2, "a'


def test_a_log_cut_in_its_last_record_quarantines_that_record_only(
    real_rows: dict[str, list[dict[str, Any]]],
) -> None:
    rows = real_rows[CUT_NAME]  # read with the real logs (shiviz_reads)
    rejects = [(r["line"], r["parse_reason"], r["raw"]) for r in rows if r["parse_error"]]
    assert rejects == [(5, "unparseable", 'b {"b":2, "a')]
    assert {(r["process"], r["seq"]) for r in accepted(rows)} == {("a", "1"), ("b", "1")}
    assert _messages(rows) == {("a", 1, "b", 1)}
    # accounting: three records (two matches, the cut line), each once
    assert len({(r["line"], r["record"]) for r in rows}) == 3


def test_gzip_logs_read_as_their_text_and_an_unreadable_file_is_one_record(
    real_rows: dict[str, list[dict[str, Any]]],
) -> None:
    def comparable(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted(tuple(str(v) for k, v in r.items() if k != "source") for r in rows)

    assert comparable(real_rows[GZ_NAME]) == comparable(real_rows[MULTI_NAME])
    (broken,) = real_rows[BROKEN_NAME]
    assert (broken["line"], broken["record"], broken["parse_reason"]) == (0, 1, "unparseable")
    assert broken["parse_error"].startswith("cannot read the file: ")


MULTI_LOG = (
    'a {"a":1}\na sends\n'
    'b {"b":1}\nb sends\n'
    'c {"c":1, "a":1, "b":1}\nc receives both, then sends\n'
    'a {"a":2, "c":1, "b":1}\na receives from c\n'
    'b {"b":2, "c":1, "a":1}\nb receives from c\n'
)


def test_an_event_that_receives_twice_and_sends_becomes_three_events(
    spark: SparkSession, shiviz_reads: tuple[DataFrame, dict[str, list[dict[str, Any]]]]
) -> None:
    # MULTI_LOG was read with the real logs (shiviz_reads): its rows are the file's
    frame, by_file = shiviz_reads
    multi = F.element_at(F.split(F.col("source"), "/"), -1) == MULTI_NAME
    rows = frame.where(multi & (F.col("process") == "c"))
    expected = spark.createDataFrame(
        [
            ("c", "1", 0, "receive", "a#1>c#1", "a", "c receives both, then sends", None),
            ("c", "1", 1, "receive", "b#1>c#1", "b", None, None),
            ("c", "1", 2, "send", "c#1>a#2", "a", None, [("a", 1), ("b", 1), ("c", 1)]),
            ("c", "1", 2, "send", "c#1>b#2", "b", None, [("a", 1), ("b", 1), ("c", 1)]),
        ],
        "process string, seq string, sub long, kind string, msg_id string, peer string, "
        "label string, recorded_vc array<struct<key:string,value:bigint>>",
    )
    # maps cannot be sorted: compare the recorded clock as its sorted entries
    assert_df_equality(
        rows.withColumn("recorded_vc", F.array_sort(F.map_entries("recorded_vc"))).select(
            *expected.columns
        ),
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
    )
    good = accepted(by_file[MULTI_NAME])
    computed = log_units(vector_clocks(good))
    assert all(
        computed[(r["process"], int(r["seq"]), r["sub"])] == r["recorded_vc"]
        for r in good
        if r["recorded_vc"] is not None
    )


@pytest.mark.slow
def test_govector_header_delimiter_and_escaped_clocks(spark: SparkSession, tmp_path: Path) -> None:
    text = (
        "(?<host>\\S*) (?<clock>{.*})\\n(?<event>.*)\n"
        "\n"
        "=== run one ===\n"
        'a {"a":1}\nfirst of one\n'
        "=== run two ===\n"
        'a {\\"a\\":1}\nfirst of two, clock escaped as TLA+ writes it\n'
        'b {"b":1, "a":1}\nb hears from a\n'
        "=== run ===\n"
        'a {"a":1}\nthe delimiter names no trace\n'
    )
    path = _write(tmp_path, "runs.log", text)
    options = ReaderOptions(shiviz_delimiter=r"^=== run ?(?P<trace>\w*) ===$")
    rows = collect(shiviz.read(spark, [path], options))
    assert all(r["parse_error"] is None for r in rows)
    assert sorted((r["trace_suffix"], r["process"], r["line"]) for r in rows) == [
        ("3", "a", 12),
        ("one", "a", 4),
        ("two", "a", 7),
        ("two", "b", 9),
    ]
    assert _messages(rows) == {("a", 1, "b", 1)}


@pytest.mark.slow
def test_other_named_groups_go_to_the_label_and_python_groups_are_accepted(
    spark: SparkSession, tmp_path: Path
) -> None:
    text = '12 a {"a":1}\nhello\n'
    path = _write(tmp_path, "tsviz.log", text)
    options = ReaderOptions(
        shiviz_regex=r"(?P<timestamp>\d+) (?<host>\S*) (?<clock>{.*})\n(?<event>.*)"
    )
    (row,) = collect(shiviz.read(spark, [path], options))
    assert row["label"] == 'hello {"timestamp": "12"}'


def test_a_regex_without_the_groups_is_a_clear_error(spark: SparkSession, tmp_path: Path) -> None:
    path = _write(tmp_path, "x.log", "a 1\n")
    with pytest.raises(ReaderError, match=r"lacks the named group\(s\) \['clock'\]"):
        shiviz.read(spark, [path], ReaderOptions(shiviz_regex=r"(?<host>\S+) (?<event>.*)"))


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (REAL / "chord.log", True),
        (REAL / "voldemort.log", True),
        (REAL / "RpcClientServer.log", True),
        (REAL / "echo_trace_log_shiviz.log", True),
        (REAL.parent / "dctracing" / "echo_trace_log.jsonl", False),
        (REAL.parent / "zipkin" / "yelp.json", False),
    ],
    ids=lambda p: p.name if isinstance(p, Path) else str(p),
)
def test_sniff(path: Path, expected: bool) -> None:
    assert shiviz.sniff(path.read_bytes()[:1024]) is expected


# clocks as logs write them, and the ways they go wrong
CLOCK_TEXTS = [
    '{"a":1, "b":22}',
    ' {"a": 2} ',
    '{\\"a\\":1}',  # quotes escaped, as TLA+ writes them
    '{"a":"3"}',
    "{}",
    '{"a":1,"a":2}',
    '{"a":true}',
    '{"a":1.0}',
    '{"a":1.50}',
    '{"a":1e2}',
    '{"a":-1}',
    '{"a":null}',
    '{"a":{"b":1}}',
    '{"a":9223372036854775807}',
    '{"a":9223372036854775808}',
    "[1]",
    "not json",
    '{"a":1',
]


def test_the_python_clock_parse_is_the_spark_one(spark: SparkSession) -> None:
    # ShiViz records are parsed in a Python worker (clock_counts), tracing lines in Spark
    # (parse_clock): the same text must be the same clock, or no clock, in both
    from causal_spark.io.readers.clocks import clock_counts, parse_clock

    texts = spark.createDataFrame([(t,) for t in CLOCK_TEXTS], "text string")
    in_spark = {
        r["text"]: r["clock"]
        for r in texts.select("text", parse_clock(F.col("text")).alias("clock")).collect()
    }
    in_python = {t: clock_counts(t) for t in CLOCK_TEXTS}
    assert in_python == in_spark
    assert in_python['{"a":1, "b":22}'] == {"a": 1, "b": 22}
    assert sum(c is None for c in in_python.values()) == 11  # of 18
