"""Ingest across files, with hostile names and broken files, and the rules that hold after
matching (DESIGN §1; issues 16 and 17).

Every case writes its own folder (its traces named apart from the other cases'), and all
the folders and files are given to one ingest per module: a test reads its case's rows,
picked by where they were read from, and the module checks that no row lands outside a
case."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from causal_spark.config import IngestSettings
from causal_spark.io.sources import discover_inputs
from tests.helpers import Rows, ingest_cases, write_jsonl
from tests.reference_ingest import reference_ingest_files

pytestmark = pytest.mark.slow  # every test here reads one ingest or audit of the module

HOSTILE_NAMES = ["a b", "c#d", "e%20f", "g?h", "i[1]", "j{x,y}", "k:l", "m+n", "*"]
SEEDS = [3, 77]


def _multicast(case: Path) -> list[Path]:
    # one multicast event, two copies; the second names no peer but is received at B too
    rows = [
        {"process": "A", "seq": 1, "kind": "send", "msg_id": "c0", "peer": "B"},
        {"process": "A", "seq": 1, "kind": "send", "msg_id": "c1"},
        {"process": "A", "seq": 1, "kind": "send", "msg_id": "c2"},
        {"process": "B", "seq": 1, "kind": "receive", "msg_id": "c0", "peer": "A"},
        {"process": "B", "seq": 2, "kind": "receive", "msg_id": "c1", "peer": "A"},
        {"process": "C", "seq": 1, "kind": "receive", "msg_id": "c2", "peer": "A"},
        {"process": "B", "seq": 3, "kind": "internal"},
    ]
    return [write_jsonl(case / "multicast.jsonl", rows)]


def _file_order(case: Path) -> list[Path]:
    for name, labels in (("a.jsonl", ["a1", "a2", "a3"]), ("b.jsonl", ["b1", "b2", "b3"])):
        write_jsonl(
            case / name,
            [{"trace_id": "order", "process": "p", "kind": "internal", "label": x} for x in labels],
        )
    return [case]


def _seed_files(seed: int) -> list[tuple[list[str], str]]:
    """12 files of three traces (named by the seed) spread over them, with corruptions."""
    rng = random.Random(seed)
    files: list[tuple[list[str], str]] = []
    for i in range(12):
        names = [f"s{seed}-t{i % 3}", f"s{seed}-t{(i + 1) % 3}"]
        lines = [
            r if isinstance(r, str) else json.dumps(r)
            for r in _random_file(rng, ["p", "q", "r"], names)
        ]
        files.append((lines, f"f{i:02d}"))
    return files


def _seeded(seed: int) -> Callable[[Path], list[Path]]:
    def write(case: Path) -> list[Path]:
        for lines, stem in _seed_files(seed):
            (case / f"{stem}.jsonl").write_text("\n".join(lines) + "\n")
        return [case]

    return write


def _hostile(case: Path) -> list[Path]:
    for i, name in enumerate(HOSTILE_NAMES):
        write_jsonl(case / f"{name}.jsonl", [{"process": "p", "kind": "internal", "label": str(i)}])
    return [case]


def _default_trace(case: Path) -> list[Path]:
    rows = [
        {"process": "a", "seq": 1, "kind": "send", "msg_id": "m", "peer": "b"},
        {"process": "b", "seq": 1, "kind": "receive", "msg_id": "m"},
    ]
    for day in ("2026-11-22", "2026-11-23"):
        (case / "logs" / day).mkdir(parents=True)
        write_jsonl(case / "logs" / day / "orders-service.jsonl", rows)
    # a file given directly keeps its stem (the same file, in a folder not given)
    (case / "direct").mkdir()
    direct = write_jsonl(case / "direct" / "orders-service.jsonl", rows)
    return [case / "logs", direct]


def _other_file(case: Path) -> list[Path]:
    row = {
        "trace_id": "cross",
        "process": "a",
        "seq": 1,
        "kind": "send",
        "msg_id": "m",
        "peer": "b",
    }
    write_jsonl(case / "1.jsonl", [row])
    write_jsonl(case / "2.jsonl", [dict(row, seq=2)])
    return [case]


def _warehouse_inside(case: Path) -> list[Path]:
    from deltalake import write_deltalake

    write_jsonl(case / "t.jsonl", [{"process": "p", "kind": "internal"}])
    write_deltalake(str(case / "warehouse" / "events"), pa.table({"process": ["x"]}))
    write_deltalake(str(case / "other_table"), pa.table({"process": ["y"], "kind": ["local"]}))
    return [case]


def _bad_files(case: Path) -> list[Path]:
    good = [{"trace_id": "good", "process": "p", "seq": 1, "kind": "internal"}]
    write_jsonl(case / "good.jsonl", good)
    (case / "empty.parquet").write_bytes(b"")
    (case / "corrupt.parquet").write_bytes(b"PAR1 this is not parquet")
    pq.write_table(
        pa.table({"process": ["q"], "seq": [1], "kind": ["internal"]}), case / "n.parquet"
    )
    pq.write_table(
        pa.table({"process": ["r"], "seq": ["1"], "kind": ["internal"]}), case / "s.parquet"
    )
    (case / "twice.csv").write_text("process,kind,kind\np,internal,local\n")
    (case / "gone.jsonl").symlink_to(case / "missing-target.jsonl")
    return [case]


def _strict_json(case: Path) -> list[Path]:
    path = case / "strict.jsonl"
    ok = '{"process":"p","seq":1,"kind":"internal"}'
    path.write_bytes(
        "\n".join(
            [
                ok,
                '{"process":"p","seq":2,"kind":"internal"} {"process":"p","seq":3,"kind":"internal"}',
                '{"process":"p","seq":4,"kind":"internal"} trailing',
                '{"process":"p","process":"q","seq":5,"kind":"internal"}',
            ]
        ).encode()
        + b'\n{"process":"p\xff","seq":6,"kind":"internal"}\n'
    )
    return [path]


def _csv_and_gzip(case: Path) -> list[Path]:
    (case / "quoted.csv").write_text('process,seq,kind,label\np,1,internal,"say ""hi"", then go"\n')
    with gzip.open(case / "zipped.jsonl.gz", "wt") as fh:
        fh.write('{"process": "q", "seq": 1, "kind": "internal", "label": "zipped"}\n')
    return [case]


# case -> what it writes under its folder, returning the paths it gives ingest
CASES: dict[str, Callable[[Path], list[Path]]] = {
    "multicast": _multicast,
    "file-order": _file_order,
    **{f"seed-{seed}": _seeded(seed) for seed in SEEDS},
    "hostile": _hostile,
    "default-trace": _default_trace,
    "other-file": _other_file,
    "warehouse-inside": _warehouse_inside,
    "bad-files": _bad_files,
    "strict-json": _strict_json,
    "csv-gzip": _csv_and_gzip,
}


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[Path]]]:
    """Each case's folder and the paths it gives ingest."""
    root = tmp_path_factory.mktemp("files")
    written = {}
    for case, write in CASES.items():
        (root / case).mkdir()
        written[case] = (root / case, write(root / case))
    return written


@pytest.fixture(scope="module")
def ingested(spark: SparkSession, cases: dict[str, tuple[Path, list[Path]]]) -> dict[str, Rows]:
    """Every case in one ingest, split by the case folder each row was read from."""
    given = [path for _, paths in cases.values() for path in paths]
    return ingest_cases(spark, given, {case: folder for case, (folder, _) in cases.items()})


def test_a_second_copy_to_one_destination_is_a_duplicate_after_matching(
    ingested: dict[str, Rows],
) -> None:
    events, messages, quarantine = ingested["multicast"]
    assert sorted((q["line"], q["reason"], q["detail"]) for q in quarantine) == [
        (2, "duplicate_event", "second copy of a multicast to 'B' (same process and seq as line 1)"),
        (5, "duplicate_event",
         "receive of msg_id 'c1', a second copy of a multicast to 'B' (the first copy is line 1)"),
    ]  # fmt: skip
    assert sorted((e["process"], e["lseq"], e["kind"], e["n_msgs"]) for e in events) == [
        ("A", 1, "send", 2),
        ("B", 1, "receive", 0),
        ("B", 2, "internal", 0),  # the removed receive no longer takes a place
        ("C", 1, "receive", 0),
    ]
    assert sorted((m["msg_id"], m["dst"], m["recv_lseq"]) for m in messages) == [
        ("c0", "B", 1),
        ("c2", "C", 1),
    ]


def test_events_of_one_process_across_files_without_seq_follow_file_order(
    ingested: dict[str, Rows],
) -> None:
    events = ingested["file-order"].events
    assert [e["label"] for e in sorted(events, key=lambda e: e["lseq"])] == [
        "a1", "a2", "a3", "b1", "b2", "b3",
    ]  # fmt: skip


def _random_file(rng: random.Random, processes: list[str], names: list[str]) -> list[Any]:
    """Rows of one or two traces, some without seq, peerless multicast copies, corruptions."""
    rows: list[Any] = []
    with_seq = rng.random() < 0.6
    seq = dict.fromkeys(processes, 0)
    pending: list[tuple[str, str]] = []
    for _ in range(rng.randint(2, 16)):
        trace = rng.choice(names)
        p = rng.choice(processes)
        seq[p] += 1
        base: dict[str, Any] = {"trace_id": trace, "process": p}
        if with_seq:
            base["seq"] = seq[p]
        roll = rng.random()
        if roll < 0.45:
            for copy in range(rng.choice([1, 1, 2, 3])):
                msg = f"m{rng.randrange(10**6)}"
                dst = rng.choice(processes)
                row = dict(base, kind="send", msg_id=msg)
                if rng.random() < 0.6:
                    row["peer"] = dst
                rows.append(row)
                pending.append((msg, dst))
                if not with_seq and copy == 0:
                    break  # without seq a row is its own event: no multicast
        elif roll < 0.8 and pending:
            msg, dst = pending.pop(rng.randrange(len(pending)))
            rows.append(dict(base, process=dst, kind="receive", msg_id=msg))
        else:
            rows.append(dict(base, kind="internal"))
        if rng.random() < 0.08:
            rows.append(dict(rows[-1]) if rng.random() < 0.5 else "{not json")
    return rows


@pytest.mark.parametrize("seed", SEEDS)
def test_ingest_agrees_with_the_reference_across_files(
    ingested: dict[str, Rows], seed: int
) -> None:
    events, messages, quarantine = ingested[f"seed-{seed}"]
    ref = reference_ingest_files(_seed_files(seed))
    got_q = {(int(q["source"].rsplit("/f", 1)[-1][:2]), q["line"]): q["reason"] for q in quarantine}
    assert got_q == ref.quarantine, f"seed {seed}"
    got_e = {
        (e["trace_id"], e["process"], e["lseq"]): (e["kind"], e["n_msgs"], e["line"])
        for e in events
    }
    assert got_e == {k: (v["kind"], v["n_msgs"], v["line"]) for k, v in ref.events.items()}
    got_m = {
        (m["trace_id"], m["msg_id"]): (m["src"], m["dst"], m["send_lseq"], m["recv_lseq"], m["status"])
        for m in messages
    }  # fmt: skip
    assert got_m == {
        k: (v["src"], v["dst"], v["send_lseq"], v["recv_lseq"], v["status"])
        for k, v in ref.messages.items()
    }
    assert ref.events and ref.messages and ref.quarantine  # rows of every kind were compared


def test_file_names_are_data_not_syntax(ingested: dict[str, Rows]) -> None:
    events, _, quarantine = ingested["hostile"]
    # each file once, its trace named by the file as it is
    assert sorted((e["trace_id"], e["label"]) for e in events) == sorted(
        (name, str(i)) for i, name in enumerate(HOSTILE_NAMES)
    )
    assert sorted(e["source"].rsplit("/", 1)[-1] for e in events) == sorted(
        f"{n}.jsonl" for n in HOSTILE_NAMES
    )
    assert quarantine == []


def test_default_trace_is_the_path_under_the_folder_given(ingested: dict[str, Rows]) -> None:
    events, _, quarantine = ingested["default-trace"]
    assert quarantine == []
    assert sorted({e["trace_id"] for e in events if "/logs/" in e["source"]}) == [
        "2026-11-22/orders-service",
        "2026-11-23/orders-service",
    ]
    # a file given directly keeps its stem
    assert {e["trace_id"] for e in events if "/direct/" in e["source"]} == {"orders-service"}
    assert len(events) == 6


def test_a_detail_pointing_at_another_file_names_it(
    ingested: dict[str, Rows], cases: dict[str, tuple[Path, list[Path]]]
) -> None:
    quarantine = ingested["other-file"].quarantine
    given = str(cases["other-file"][0])
    assert [(q["source"], q["line"], q["detail"]) for q in quarantine] == [
        (f"{given}/2.jsonl", 1, f"second send of msg_id 'm' (the first is line 1 of {given}/1.jsonl)")
    ]  # fmt: skip


def test_a_warehouse_inside_the_input_folder_is_not_read(
    ingested: dict[str, Rows], cases: dict[str, tuple[Path, list[Path]]]
) -> None:
    folder = cases["warehouse-inside"][0]
    inputs = discover_inputs([str(folder)], IngestSettings(), exclude=[str(folder / "warehouse")])
    assert [f.shown.rsplit("/", 1)[-1] for f in inputs.files] == ["t.jsonl"]
    skipped = {Path(s.path).name: s.why for s in inputs.skipped}
    assert "warehouse" in skipped["warehouse"] and "Delta table" in skipped["other_table"]
    # ingest given the folder (no exclusion): the Delta tables in it are not read either
    assert [(e["trace_id"], e["process"]) for e in ingested["warehouse-inside"].events] == [
        ("t", "p")
    ]
    assert ingested["warehouse-inside"].quarantine == []


def test_files_no_reader_takes_are_listed(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "t.jsonl", [{"process": "p", "kind": "internal"}])
    (tmp_path / "notes.md").write_text("# not a log\n")
    # extensions native readers claim, holding no log their sniffers recognise
    (tmp_path / "LICENSE.txt").write_text("Apache License\nVersion 2.0\n")
    (tmp_path / "build.log").write_text("compiling...\ndone\n")
    inputs = discover_inputs([str(tmp_path)], IngestSettings())
    assert sorted((Path(s.path).name, s.why) for s in inputs.skipped) == [
        ("LICENSE.txt", "its content is no format that reads .txt"),
        ("build.log", "its content is no format that reads .log"),
        ("notes.md", "no reader for extension .md"),
    ]
    assert [f.reader for f in inputs.files] == ["jsonl"]


def test_each_bad_file_is_one_quarantine_row_and_the_rest_is_read(
    ingested: dict[str, Rows],
) -> None:
    events, _, rows = ingested["bad-files"]
    quarantine = sorted((q["source"].rsplit("/", 1)[-1], q["line"], q["reason"], q["detail"])
                        for q in rows)  # fmt: skip
    assert [(name, line, reason) for name, line, reason, _ in quarantine] == [
        ("corrupt.parquet", 0, "malformed"),
        ("empty.parquet", 0, "malformed"),
        ("gone.jsonl", 0, "malformed"),
        ("twice.csv", 0, "malformed"),
    ]
    details = {name: detail for name, _, _, detail in quarantine}
    assert details["twice.csv"] == "the CSV header names column(s) ['kind'] twice"
    assert details["empty.parquet"].startswith("not a readable Parquet file")
    assert "cannot be read" in details["gone.jsonl"]
    # the two Parquet files disagree on seq's type: both are read
    assert sorted(e["process"] for e in events) == ["p", "q", "r"]


def test_json_lines_are_read_strictly(ingested: dict[str, Rows]) -> None:
    events, _, quarantine = ingested["strict-json"]
    got = sorted((q["line"], q["detail"]) for q in quarantine)
    more = "more than one JSON object on the line (a second object or trailing text)"
    assert got == [
        (2, more),
        (3, more),
        (4, "a field is given twice in one object"),
        (5, "not valid UTF-8"),
    ]
    assert len(events) == 1


def test_csv_doubled_quotes_and_gzip_are_read(ingested: dict[str, Rows]) -> None:
    events = ingested["csv-gzip"].events
    assert sorted((e["trace_id"], e["label"]) for e in events) == [
        ("quoted", 'say "hi", then go'),
        ("zipped", "zipped"),
    ]


def test_the_input_is_read_once_whatever_the_passes(spark: SparkSession, tmp_path: Path) -> None:
    """A duplicate msg_id is found after matching, and rows without `seq` in a file where
    others have one once every row was seen: each takes ingest another pass, and every
    pass reads step 1's files, not the input again (counted as the raw rows go by)."""
    from collections.abc import Iterator

    from causal_spark.ingest import ingest
    from causal_spark.io.sources import only_files, read_raw_rows
    from tests.helpers import ingest_targets

    write_jsonl(
        tmp_path / "late.jsonl",
        [
            {"trace_id": "t", "process": "A", "seq": 1, "kind": "send", "msg_id": "m", "peer": "B"},
            {"trace_id": "t", "process": "A", "seq": 2, "kind": "send", "msg_id": "m", "peer": "B"},
            {"trace_id": "t", "process": "B", "seq": 1, "kind": "receive", "msg_id": "m"},
            {"trace_id": "t", "process": "B", "kind": "internal"},
        ],
    )
    inputs = discover_inputs([str(tmp_path)], IngestSettings())
    seen = spark.sparkContext.accumulator(0)

    def counted(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            seen.add(batch.num_rows)
            yield batch

    raw = read_raw_rows(spark, inputs, text=False)
    result = ingest(
        raw.mapInArrow(counted, raw.schema),
        inputs,
        ingest_targets(),
        reread=lambda ids: read_raw_rows(spark, only_files(inputs, ids)),
    )
    assert result.passes == 3
    assert result.rows_read == 4
    assert seen.value == 4
    assert sorted((q["line"], q["reason"]) for q in result.quarantine.collect()) == [
        (2, "duplicate_msg"),
        (4, "malformed"),
    ]
