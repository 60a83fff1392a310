"""The single-process ingest baseline (bench/ingest_baseline.py) writes the job's tables.

One job ingest per module of every input that matters: data-samples/ (the worked
traces of /work/shared/traces), the hand-made cases of test_ingest_rules and
test_ingest_files, the fuzzed 100 000-row file of test_accounting_at_scale, an
adversarial corpus of values and lines (below), and generated traces (Parquet
and JSON Lines, and a broadcast topology for multicasts). The baseline reads the
same paths, with its normal chunks and with tiny ones (so that pyarrow's fast path
and the per-line reader meet inside one file), and each of its three tables
must equal the job's, row for row, after sorting.

Left out of the corpus: input the job gets wrong (bench/ingest_baseline.py's
docstring): a JSON line whose object is followed by `]` (the job keeps the row),
and a line of tabs and spaces or one that starts with `]` (the job fails).
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from tests import test_ingest_files as files_cases
from tests import test_ingest_rules as rules_cases
from tests.conftest import ROOT
from tests.helpers import ingest_paths, write_jsonl

TABLES = ("events", "messages", "quarantine")


def _load(name: str) -> ModuleType:
    """A bench/ script as a module (bench/ is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def baseline() -> ModuleType:
    return _load("ingest_baseline")


@pytest.fixture(scope="module")
def text() -> ModuleType:
    _load("ingest_baseline")  # puts bench/ on the path for its helper
    return _load("ingest_baseline_text")


# --------------------------------------------------------------------------- Spark's text, kept


# Values and texts as the job produced them (Spark 4.2, Jackson 2.21, Java 17), probed
# through causal_spark.ingest.typed.type_rows and the JSON Lines reader.
LONGS = {
    " 12 ": 12, "+12": 12, "-0": 0, "00012": 12, "\t12": 12, "\n12\n": 12, "\x0b12": 12,
    "9223372036854775807": 9223372036854775807, "9223372036854775808": None, "1.0": None,
    "1.5": None, "1e3": None, "0x10": None, "١٢": None, "": None, " ": None, "-": None,
    "1_000": None, "12L": None, "\u00a012": None, "true": None,
}  # fmt: skip
SECONDS = {
    " 12 ": 12.0, "1.0": 1.0, "1e3": 1000.0, "1.": 1.0, ".5": 0.5, "+.5": 0.5, "1d": 1.0,
    "1.5d": 1.5, "1.5f": 1.5, "0x1p3": 8.0, "1e400": math.inf, "inf": math.inf,
    "+inf": math.inf, "Infinity": math.inf, "-infinity": -math.inf, "-Inf": -math.inf,
    "0x10": None, "١٢": None, "-": None, "1_000": None, "12L": None, "1,5": None,
    "\u00a012": None, "true": None, "9223372036854775808": 9.223372036854776e18,
    "1970-01-01T00:00:10Z": 10.0, "1970-01-01T01:00:10.5+01:00": 10.5,
    "1970-01-01 00:00:12": 12.0, "1970": 1970.0, "1970-01": 0.0, "1970-1-1": 0.0,
    "1970-01-01T10": 36000.0, "1970-01-01T": None, "1970-01-01 10:00:00 UTC": 36000.0,
    "1970-01-01T10:00:00 Europe/Paris": 32400.0, "1970-01-01T10:00:00EST": 54000.0,
    "1970-01-01T10:00:00+1:00": 32400.0, "1970-01-01T10:00:00.123456789Z": 36000.123456,
    "+1970-01-01": 0.0, "-0001-01-01": -62198755200.0, "19700-01-01": 559504800000.0,
    "1970-01-01T10:00:00GMT+1": 32400.0, "1970-01-01T10:00:00UTC+01:30": 30600.0,
    "1970-01-01T10:00:00+0130": 30600.0, "1970-01-01T10:00:00+01": 32400.0,
    "1970-01-01T10:00:00 +01:00": 32400.0, "1970-01-01T10:00:00.Z": 36000.0,
    "1970-01-01T10:00:00.": 36000.0, "1970-13-01": None, "1970-02-30": None,
    "1970-01-01T24:00:00": None, "1970-01-01T10:60:00": None, "1970-01-01T10:00:61": None,
    " 1970-01-01": 0.0, "1970-01-01\t": 0.0, "1970-01-01T10:00:00:00": None,
    "1970-01-01T10:00:00 12": None, "2024-06-01T12:34:56.5-07:00": 1717270496.5,
    "1970-01-01T10:00Z": None, "1970-01-01T10Z": None, "{": None, "[1]": None,
}  # fmt: skip
JACKSON = {  # a JSON line's seq value -> the text the reader hands on
    "1.50": "1.5", "1e3": "1000.0", "1E7": "1.0E7", "0.0001": "1.0E-4",
    "123456789012345678901234": "123456789012345678901234", "-0": "0", "-0.0": "-0.0",
    "1e400": '"Infinity"', "true": "true", '{"a" : [1, 2.50, "x"]}': '{"a":[1,2.5,"x"]}',
    "[ ]": "[]", "2e-3": "0.002", "12345678.9": "1.23456789E7", "100000.0": "100000.0",
    "0.001": "0.001", "-1.5e-7": "-1.5E-7", '"\\u0000"': "\x00",
    "9223372036854775807": "9223372036854775807", "-9223372036854775809": "-9223372036854775809",
}  # fmt: skip
LINES = {  # a JSON line -> the reader's error (None: read)
    b'{"process":"p","kind":"internal"},{"process":"q"}': "more",
    b'{"process":"p","kind":"internal"} , ': "more",
    b'\xef\xbb\xbf{"process":"p","kind":"internal"}': "object",
    b'{"process":NaN,"kind":"internal"}': "object",
    b'{"process":"p","kind":"internal","x":NaN}': "object",
    b"{'process':'p','kind':'internal'}": None,
    b'{"process":"p","kind":"internal","label":"tab\there"}': "more",
    b'\t{"process":"p","kind":"internal"}\t': None,
    b'{"process":"p","kind":"internal","extra":1,"extra":2}': None,
    b'{"process":"p","kind":"internal","proc\\u0065ss":"q"}': "twice",
    b'{"process":"p","kind":"internal"} // c': "more",
    b'{"process":"p","kind":"internal","seq":01}': "object",
    b'{"process":"p","kind":"internal","label":"\\x"}': "object",
    b'{"process":"p","kind":"internal","seq":+1}': "object",
    b'{"process":"p","kind":"internal","seq":.5}': "object",
    b'{"process":"p","kind":"internal","seq":1.}': "object",
    b'{"process":"p","kind":"internal","seq":"a\x7fb"}': None,
    b'{"process":"p","kind":"internal","seq":"a\x01b"}': "more",
    b'{"process":"p","kind":"internal",}': "object",
    b'{"process":"p","kind":"internal","a":{"process":1,"process":2}}': None,
    b'{"process":"p","kind":"internal"}\x0c': "more",
    b'{"process":"p","kind":"internal"}\x00': "more",
    b'[{"process":"p","kind":"internal"}]': "object",
    b"{}": None,
    b'{"process":"p","kind":"internal"}{"process":"q","kind":"internal"}': "more",
    b'{"process":"p\xff","kind":"internal"}': "utf8",
}


def test_spark_casts_as_the_job_made_them(text: ModuleType) -> None:
    assert {s: text.spark_long(s) for s in LONGS} == LONGS
    got = {s: text.spark_seconds(s) for s in SECONDS}
    assert got == SECONDS
    assert math.isnan(text.spark_seconds("NaN")) and math.isnan(text.spark_seconds("nan"))


def test_json_values_read_as_the_job_read_them(text: ModuleType) -> None:
    for value, want in JACKSON.items():
        line = f'{{"process":"p","kind":"internal","seq":{value}}}'.encode()
        assert text.json_line_fields(line) == (None, {"process": "p", "kind": "internal",
                                                      "seq": want}), value  # fmt: skip
    words = {"more": text.MORE_THAN_ONE, "object": text.NOT_OBJECT, "twice": text.TWICE,
             "utf8": text.NOT_UTF8, None: None}  # fmt: skip
    assert {line: text.json_line_fields(line)[0] for line in LINES} == {
        line: words[want] for line, want in LINES.items()
    }
    # an unpaired surrogate escape reads as `?`, as Java writes it to UTF-8
    _, fields = text.json_line_fields(b'{"label":"a\\u00e9\\ud83d\\ude00\\ud800"}')
    assert text.utf8_text(fields["label"]) == "aé😀?"


def test_java_layout_of_doubles(text: ModuleType) -> None:
    shown = [(1e7, "1.0E7"), (1e-4, "1.0E-4"), (1e-3, "0.001"), (100.0, "100.0"),
             (1234567.0, "1234567.0"), (-0.0, "-0.0"), (0.0, "0.0"), (12345678.9, "1.23456789E7"),
             (1.5e-7, "1.5E-7"), (2.2250738585072014e-308, "2.2250738585072014E-308"),
             (math.inf, "Infinity")]  # fmt: skip
    assert [(x, text.java_double(x)) for x, _ in shown] == shown
    assert text.java_float(0.1) == "0.1" and text.java_float(1e10) == "1.0E10"


# --------------------------------------------------------------------------- the corpus

SEQS = ['1', '"2"', '" 3 "', '"+4"', '-0', '1.0', '1.50', '1e3', '"1e3"', 'true', 'null', '""',
        '" "', '"x"', '{"a":1}', '[1]', '9223372036854775807', '9223372036854775808', '"\\t5"',
        '"0x10"', '1E400', '-1.5e-7', '"\\u0661"', '12345678901234567890123']  # fmt: skip
TIMES = ['1.5', '"1.5"', '"1970-01-01T00:00:10Z"', '"1970-01-01 00:00:12"', '"yesterday"', '"NaN"',
         '"Infinity"', '"inf"', '"1.5d"', '"0x1p3"', '" 12 "', '12', '-0.0', '""', 'null', 'true',
         '{"x":1}', '"2024-06-01T12:34:56.5-07:00"', '"2024-03-10T02:30:00 America/New_York"',
         '"2024-11-03T01:30:00 America/New_York"', '"1970-01-01T10:00:00 PST"',
         '"1970-01-01T10:00:00GMT+1"', '"1970-01-01T10:00:00+1:00"', '"19700-01-01"',
         '"-0001-01-01"', '"1970-02-30"', '"1970-01-01T10:00Z"', '1e22', '1e23', '0.1',
         '123456789012345678901234', '"\\u00a012"', '"1970"', '"2024-02-29"', '"2023-02-29"',
         '"1970-01-01T10:00:00 Europe/Nowhere"', '"1970-01-01T10:00:00 UTC+01:30"',
         '"1970-01-01T10:00:00.Z"', '"1970-01-01T10:00:00.123456789Z"']  # fmt: skip
SIZES = ['5', '"5"', '-1', '"-1"', '1.5', '"abc"', '""', 'null', '" 7 "', '0', '"+8"', '1e2',
         'false']  # fmt: skip
KINDS = ['"send"', '"SEND"', '" Send "', '"snd"', '"recv"', '"Deliver"', '"local"', '"teleport"',
         '""', '" "', 'null', '5', 'true', '{"k":1}', '"\\u0130nternal"', '"\\tsend"', '"RCV"',
         '"[x]"']  # fmt: skip
NAMES = ['"p1"', '" p1 "', '""', 'null', '5', '{"x":1}', '"[a]"', '"{b}"', '"\\u00e9"',
         '"p\\u0000"', '"P1"', '" "', '"a b"', '"p2"']  # fmt: skip
MSGS = ['" m1 "', '""', "null", "7", "[1]", '"{m}"', '"m\\"q"', '"dup"']
TRACES = ['"t"', '" t "', '""', "null", "7", '{"a":1}', '"t2"']
LABELS = ['"x"', '5', '1.5', 'true', 'null', '{"a":[1,2.50,"x"]}', '"\\u00e9\\ud83d\\ude00"',
          '"\\ud800"', '" sp "', '1e400', '-0', '[]', '"a\\u0000b"', '"\\/\\b\\f\\n\\r\\t\\"\\\\"']  # fmt: skip
POOLS = {"seq": SEQS, "ts": TIMES, "size_bytes": SIZES, "kind": KINDS, "process": NAMES,
         "peer": NAMES, "msg_id": MSGS, "trace_id": TRACES, "label": LABELS}  # fmt: skip
ODD_LINES = [
    *LINES,
    b'{"process":"p","kind":"internal"} {"process":"q","kind":"internal"}',
    b'{"process":"p","kind":"internal"} trailing',
    b'{"process":"p","process":"q","kind":"internal"}',
    b'{"proc\\u0065ss":"p","kind":"internal"}',
    b'{"process":"p","kind":"internal","a":{"b":[1,{"c":NaN}]}}',
    b'{"process":"p","kind":"internal","a":{"b":[1,{"c":2}]}}',
    b'{"process":"p","kind":"internal","label":"\\ud800x"}',
    b'{"process":"\xc3\xa9","kind":"internal"}',
    b"   ", b"", b"null", b"3", b'"str"', b"this is not json", b'{"process":"p"',
    b'\x0c{"process":"p","kind":"internal"}',
    b'{"process":"p","kind":"internal","seq":"1","seq":2}',
    b'{"Process":"p","kind":"internal"}',
    b"{'process':\"p\",'kind':'internal','label':'it\\'s'}",
    b'{"process":"p","kind":"internal","label":\'x"y\'}',
    b'{"process":"p","kind":"internal","x":[1,2,]}',
    b'{"process":"p","kind":"internal","x":-}',
    b'{"process":"p","kind":"internal","x":truex}',
    b'{"process":"p","kind":"internal","x":"\\u12"}',
    b'{"process":"p","kind":"internal","label":"' + b"z" * 100_000 + b'"}',
]  # fmt: skip


def _row(rng: random.Random, trace: str, process: str, seq: int, kind: str, msg: str | None,
         peer: str | None) -> str:  # fmt: skip
    """A row as JSON text, with one field at most replaced by an odd value of its pool."""
    fields = {"trace_id": json.dumps(trace), "process": json.dumps(process), "seq": str(seq),
              "kind": json.dumps(kind), "ts": repr(seq + rng.random())}  # fmt: skip
    if msg is not None:
        fields["msg_id"] = json.dumps(msg)
    if peer is not None:
        fields["peer"] = json.dumps(peer)
    if rng.random() < 0.5:
        name = rng.choice(list(POOLS))
        fields[name] = rng.choice(POOLS[name])
    if rng.random() < 0.1:
        fields.pop(rng.choice(list(fields)))
    order = list(fields)
    rng.shuffle(order)
    spaced = rng.random() < 0.2
    return (
        "{"
        + (", " if spaced else ",").join(
            f'"{k}"{" : " if spaced else ":"}{fields[k]}' for k in order
        )
        + "}"
    )


def _values_file(rng: random.Random, trace: str, n: int) -> list[bytes]:
    """A trace of sends, receives and internal events (multicasts, some peerless copies),
    with odd values in its fields and odd lines among its rows."""
    processes = ["p1", "p2", "p3"]
    seq = dict.fromkeys(processes, 0)
    pending: list[tuple[str, str, str]] = []
    lines: list[bytes] = []
    for i in range(n):
        p = rng.choice(processes)
        seq[p] += 1
        roll = rng.random()
        if roll < 0.4:
            for _ in range(rng.choice([1, 1, 2, 3])):
                dst = rng.choice(processes)
                msg = rng.choice([f"m{i}-{rng.randrange(3)}", "dup"])
                lines.append(_row(rng, trace, p, seq[p], "send", msg,
                                  dst if rng.random() < 0.8 else None).encode())  # fmt: skip
                pending.append((msg, p, dst))
        elif roll < 0.8 and pending:
            msg, src, dst = pending.pop(rng.randrange(len(pending)))
            seq[dst] += 1
            lines.append(_row(rng, trace, dst, seq[dst], "receive", msg,
                              src if rng.random() < 0.8 else None).encode())  # fmt: skip
        else:
            lines.append(_row(rng, trace, p, seq[p], "internal", None, None).encode())
        if rng.random() < 0.15:
            lines.append(rng.choice(ODD_LINES))
        if rng.random() < 0.03:
            lines.append(lines[rng.randrange(len(lines))])  # a duplicate of an earlier row
    return lines


def _uniform_files(folder: Path, seed: int) -> None:
    """Files whose odd values have one JSON type per field, as pyarrow's reader takes them
    whole: every field a string (times as ISO text), or names, ids and labels as numbers."""
    trace = f"adv-{seed}-uniform"
    texts = [
        {"trace_id": f" {trace} ", "process": " p1 ", "seq": "1", "kind": "SND", "msg_id": " m1 ",
         "peer": "p2", "ts": "1970-01-01T00:00:01Z", "size_bytes": " 5 ", "label": ""},
        {"trace_id": trace, "process": "p2", "seq": "+1", "kind": "Deliver", "msg_id": "m1",
         "peer": "p1", "ts": "1970-01-01 00:00:02", "size_bytes": "x", "label": " "},
        {"trace_id": trace, "process": "p2", "seq": "x", "kind": "local", "ts": "yesterday"},
        {"trace_id": trace, "process": "p2", "seq": "2", "kind": "teleport", "ts": "3.5"},
        {"trace_id": trace, "process": "p1", "seq": "2", "kind": "internal", "ts": "2024-02-30"},
        {"trace_id": trace, "process": "p1", "seq": " 3", "kind": "local", "ts": "NaN"},
        {"trace_id": trace, "process": "{p}", "seq": "4", "kind": "[x]", "ts": "1e3"},
    ]  # fmt: skip
    write_jsonl(folder / "uniform-strings.jsonl", texts)
    numbers = [
        {"trace_id": 7, "process": 1, "seq": 1, "kind": "send", "msg_id": 10, "peer": 2,
         "ts": 1, "size_bytes": 3, "label": 4},
        {"trace_id": 7, "process": 2, "seq": 1, "kind": "receive", "msg_id": 10, "peer": 1,
         "ts": 2, "size_bytes": -3, "label": 5},
        {"trace_id": 7, "process": 2, "seq": 2, "kind": "receive", "msg_id": 11, "peer": 1,
         "ts": 3, "size_bytes": 9223372036854775807, "label": -0},
        {"trace_id": 7, "process": 1, "seq": -2, "kind": "internal", "ts": 4, "label": 6},
    ]  # fmt: skip
    write_jsonl(folder / "uniform-numbers.jsonl", numbers)
    flags = [
        {"trace_id": "b", "process": "p", "seq": 1, "kind": "internal", "label": True},
        {"trace_id": "b", "process": "p", "seq": 2, "kind": "internal", "label": False,
         "size_bytes": True},
        {"trace_id": "b", "process": "p", "seq": 3, "kind": "internal", "extra": None},
    ]  # fmt: skip
    write_jsonl(folder / "uniform-flags.jsonl", flags)
    # every ts an ISO time: pyarrow would read them as timestamps, the job as text
    times = [
        {"trace_id": "iso", "process": "p", "seq": i, "kind": "internal", "label": day,
         "ts": f"{day} 00:00:0{i}"}
        for i, day in enumerate(["2024-01-01", "2024-02-29", "1970-01-01"], start=1)
    ]  # fmt: skip
    write_jsonl(folder / "uniform-times.jsonl", times)


def _csv_files(folder: Path) -> None:
    (folder / "mixed.csv").write_bytes(
        b"Process,KIND,seq,ts,msg_id,peer,extra,label\n"
        b"a,send,1,1.5,m1,b,x,plain\n"
        b"b,receive,1,2.5,m1,a,,\n"
        b'a,internal,2,3,,,"q,uoted","say ""hi"", then go"\n'
        b"a,internal,3,4,,,only-seven\n"
        b'a,internal,4,5,,,"x",too,many\n'
        b"   \n"
        b"a,teleport,5,6,,,,\n"
        b"a,internal,x,7,,,,\n"
        b"\n"
        b"a,internal,,8,,,,\n"
        b"c\xff,internal,6,9,,,,\n"
        b"b,send, 2 , 1970-01-01T00:00:10Z ,m2,,,\n"
    )
    (folder / "noseq.csv").write_text(" process , Kind \np,internal\nq,local\n")
    (folder / "empty-rows.csv").write_text("process,kind\n")


def _parquet_files(folder: Path) -> None:
    import datetime as dt

    utc = dt.UTC
    pq.write_table(
        pa.table({
            "process": ["a", "a", "b", "a", "b"],
            "seq": pa.array([1, 2, 1, 3, 2], pa.int64()),
            "kind": ["send", "teleport", "receive", "internal", "internal"],
            "msg_id": ["m1", None, "m1", None, None],
            "peer": ["b", None, "a", None, None],
            "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=utc), None,
                            dt.datetime(2024, 1, 1, 0, 0, 1, 500, tzinfo=utc), None, None],
                           pa.timestamp("us", tz="UTC")),
            "label": [True, False, None, True, False],
            "size_bytes": pa.array([10, -1, None, 3, 4], pa.int32()),
            "extra": pa.array([[1, 2], None, [], [3], None], pa.list_(pa.int64())),
        }),
        folder / "typed.parquet",
    )  # fmt: skip
    pq.write_table(
        pa.table({
            "trace_id": ["floats", "floats", "floats"],
            "process": pa.array([1, 2, 1], pa.int32()),
            "seq": pa.array([1.0, 1.0, 2.5], pa.float64()),
            "kind": ["internal", "internal", "internal"],
            "ts": pa.array([0.1, 1e10, float("nan")], pa.float32()),
        }),
        folder / "floats.parquet",
    )  # fmt: skip
    pq.write_table(
        pa.table({"Process": ["x", "x"], "KIND": ["local", "local"], "Seq": ["1", "one"]}),
        folder / "cased.parquet",
    )


def _adversarial(folder: Path, seed: int) -> list[Path]:
    rng = random.Random(seed)
    for i in range(6):
        (folder / f"values-{i}.jsonl").write_bytes(
            b"\n".join(_values_file(rng, f"adv-{seed}-{i % 4}", 120)) + b"\n"
        )
    # line ends: CRLF, and a lone CR inside a file
    rows = _values_file(rng, f"adv-{seed}-crlf", 40)
    (folder / "crlf.jsonl").write_bytes(b"\r\n".join(rows) + b"\r\n")
    (folder / "cr.jsonl").write_bytes(b"\n".join(rows[:20]) + b"\r" + b"\n".join(rows[20:]))
    # a file without seq, and one where a few rows lack it
    noseq = [
        {"trace_id": "adv-noseq", "process": f"p{i % 3}", "kind": "internal"} for i in range(9)
    ]
    write_jsonl(folder / "noseq.jsonl", noseq)
    some = [
        {"trace_id": "adv-some", "process": "p", "seq": i, "kind": "internal"} for i in range(5)
    ]
    write_jsonl(folder / "some-seq.jsonl", [*some, {"trace_id": "adv-some", "process": "p",
                                                    "kind": "internal"}])  # fmt: skip
    _uniform_files(folder, seed)
    _csv_files(folder)
    _parquet_files(folder)
    return [folder]


def _generated(spark: SparkSession, folder: Path) -> list[Path]:
    from causal_spark.generate import GeneratorSpec, generate_traces, write_generated

    specs = {
        "gen-parquet": (GeneratorSpec(processes=64, events=1000, seed=1), "parquet"),
        "gen-jsonl": (GeneratorSpec(processes=64, events=1000, seed=1, loss=0.05), "jsonl"),
        "gen-broadcast": (
            GeneratorSpec(processes=6, events=300, seed=2, topology="broadcast"),
            "jsonl",
        ),
    }
    out = []
    for name, (spec, fmt) in specs.items():
        write_generated(generate_traces(spark, spec.validate()), str(folder / name), fmt, spec)
        out.append(folder / name)
    return out


@pytest.fixture(scope="module")
def given(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Every input of the comparison (one ingest)."""
    from tests.test_accounting_at_scale import N_ROWS, _corrupt, _valid_lines

    root = tmp_path_factory.mktemp("baseline")
    paths: list[Path] = [ROOT / "data-samples"]
    for case, (name, rows) in rules_cases.CASES.items():
        (root / f"rules-{case}").mkdir()
        paths.append(write_jsonl(root / f"rules-{case}" / name, rows))
    for seed in rules_cases.SEEDS:
        (root / f"rules-seed-{seed}").mkdir()
        for name, lines in rules_cases._random_files(seed).items():
            (root / f"rules-seed-{seed}" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
        paths.append(root / f"rules-seed-{seed}")
    for case, write in files_cases.CASES.items():
        (root / f"files-{case}").mkdir()
        paths.extend(write(root / f"files-{case}"))
    for seed in (5, 6, 7):
        (root / f"files-seed-{seed}").mkdir()
        paths.extend(files_cases._seeded(seed)(root / f"files-seed-{seed}"))
    rng = random.Random(20261122)
    lines, _ = _corrupt(rng, _valid_lines(rng, N_ROWS), 0.01)
    (root / "fuzzed").mkdir()
    (root / "fuzzed" / "big.jsonl").write_text("\n".join(lines) + "\n")
    paths.append(root / "fuzzed" / "big.jsonl")
    for seed in (1, 2):
        (root / f"adversarial-{seed}").mkdir()
        paths.extend(_adversarial(root / f"adversarial-{seed}", seed))
    paths.extend(_generated(spark, root))
    return [str(p) for p in paths]


@pytest.fixture(scope="module")
def job_tables(spark: SparkSession, given: list[str]) -> dict[str, pa.Table]:
    out = ingest_paths(spark, given)
    return {"events": out.events.toArrow(), "messages": out.messages.toArrow(),
            "quarantine": out.quarantine.toArrow()}  # fmt: skip


def _lines(table: pa.Table) -> set[str]:
    """Rows as JSON text (strings read as bytes: a raw line need not be UTF-8)."""
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_string(column.type):
            column = pa.chunked_array([c.view(pa.binary()) for c in column.chunks], pa.binary())
        columns[name] = [
            v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in column.to_pylist()
        ]
    return {
        json.dumps(dict(zip(columns, values, strict=True)), sort_keys=True, default=str)
        for values in zip(*columns.values(), strict=True)
    }


def _difference(job: pa.Table, mine: pa.Table) -> str:
    a, b = _lines(job), _lines(mine)
    return "\n".join(["job only:", *sorted(a - b)[:8], "baseline only:", *sorted(b - a)[:8]])


@pytest.fixture(scope="module", params=["chunks of 64 MB", "chunks of 64 kB"])
def baseline_tables(request: pytest.FixtureRequest, baseline: ModuleType,
                    given: list[str]) -> Iterator[dict[str, pa.Table]]:  # fmt: skip
    before = baseline.CHUNK_BYTES
    baseline.CHUNK_BYTES = 64 << 20 if request.param.endswith("MB") else 64 << 10
    try:
        tables, _ = baseline.ingest_tables(given)
    finally:
        baseline.CHUNK_BYTES = before
    yield tables


@pytest.mark.slow
@pytest.mark.parametrize("table", TABLES)
def test_baseline_tables_equal_the_jobs(
    table: str,
    baseline: ModuleType,
    job_tables: dict[str, pa.Table],
    baseline_tables: dict[str, pa.Table],
) -> None:
    mine = baseline_tables[table]
    assert mine.schema.equals(baseline._schema(table)), mine.schema
    job, ours = baseline.comparable(job_tables[table], table), baseline.comparable(mine, table)
    assert job.num_rows > 0
    assert job.equals(ours), _difference(job, ours)


@pytest.mark.slow
def test_the_corpus_holds_every_reason_and_status(job_tables: dict[str, pa.Table]) -> None:
    # the comparison is not vacuous: every rule fired somewhere in the corpus
    reasons = set(job_tables["quarantine"].column("reason").to_pylist())
    assert reasons == {"malformed", "duplicate_event", "duplicate_msg", "peer_mismatch"}
    details = job_tables["quarantine"].column("detail").to_pylist()
    for words in ("second copy of a multicast", "a second copy of a multicast", " of ",
                  "not a JSON object", "more than one JSON object", "given twice",
                  "not valid UTF-8", "CSV row", "not a readable Parquet", "missing seq",
                  "must be a scalar", "is neither seconds", "is not an integer"):  # fmt: skip
        assert any(words in d for d in details), words
    statuses = set(job_tables["messages"].column("status").to_pylist())
    assert statuses == {"delivered", "in_flight", "orphan"}


def test_the_command_line_writes_the_three_tables(
    tmp_path: Path, baseline: ModuleType, expected: dict[str, Any]
) -> None:
    out = tmp_path / "out"
    assert baseline.main(["data-samples/bad_input.jsonl", "--out", str(out)]) == 0
    events, messages, quarantine = (pq.read_table(out / f"{n}.parquet") for n in TABLES)
    for name, table in zip(TABLES, (events, messages, quarantine), strict=True):
        assert table.schema.equals(baseline._schema(name))
    want = expected["bad_input"]
    reasons = pc.value_counts(quarantine.column("reason")).to_pylist()
    assert {r["values"]: r["counts"] for r in reasons} == want["quarantine_reasons"]
    status = messages.column("status").to_pylist()
    assert (status.count("in_flight"), status.count("orphan")) == (
        want["n_in_flight"],
        want["n_orphans"],
    )
    # every non-blank line is accounted for: an internal event, a send, a receive or rejected
    lines = [t for t in Path("data-samples/bad_input.jsonl").read_text().splitlines() if t.strip()]
    kinds = events.column("kind").to_pylist()
    sends = sum(1 for m in messages.to_pylist() if m["send_lseq"] is not None)
    receives = sum(1 for m in messages.to_pylist() if m["recv_lseq"] is not None)
    assert kinds.count("internal") + sends + receives + quarantine.num_rows == len(lines)
