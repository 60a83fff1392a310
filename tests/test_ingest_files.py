"""Ingest across files, with hostile names and broken files, and the rules that hold after
matching (DESIGN §1; issues 16 and 17)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from causal_spark.config import IngestSettings
from causal_spark.io.sources import discover_inputs
from tests.helpers import ingest_paths, write_jsonl
from tests.reference_ingest import reference_ingest_files


def _collect(out: Any) -> tuple[list[Any], list[Any], list[Any]]:
    return out.events.collect(), out.messages.collect(), out.quarantine.collect()


def test_a_second_copy_to_one_destination_is_a_duplicate_after_matching(
    spark: SparkSession, tmp_path: Path
) -> None:
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
    events, messages, quarantine = _collect(ingest_paths(spark, [write_jsonl(tmp_path / "m.jsonl", rows)]))
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
    spark: SparkSession, tmp_path: Path
) -> None:
    for name, labels in (("a.jsonl", ["a1", "a2", "a3"]), ("b.jsonl", ["b1", "b2", "b3"])):
        write_jsonl(
            tmp_path / name,
            [{"trace_id": "t", "process": "p", "kind": "internal", "label": x} for x in labels],
        )
    events = ingest_paths(spark, [tmp_path]).events.collect()
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


@pytest.mark.parametrize("seed", [3, 77])
def test_ingest_agrees_with_the_reference_across_files(
    spark: SparkSession, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    files: list[tuple[list[str], str]] = []
    for i in range(12):
        lines = [
            r if isinstance(r, str) else json.dumps(r)
            for r in _random_file(rng, ["p", "q", "r"], [f"t{i % 3}", f"t{(i + 1) % 3}"])
        ]
        (tmp_path / f"f{i:02d}.jsonl").write_text("\n".join(lines) + "\n")
        files.append((lines, f"f{i:02d}"))
    out = ingest_paths(spark, [tmp_path])
    ref = reference_ingest_files(files)
    got_q = {
        (int(q["source"].rsplit("/f", 1)[-1][:2]), q["line"]): q["reason"]
        for q in out.quarantine.collect()
    }
    assert got_q == ref.quarantine, f"seed {seed}"
    got_e = {
        (e["trace_id"], e["process"], e["lseq"]): (e["kind"], e["n_msgs"], e["line"])
        for e in out.events.collect()
    }
    assert got_e == {k: (v["kind"], v["n_msgs"], v["line"]) for k, v in ref.events.items()}
    got_m = {
        (m["trace_id"], m["msg_id"]): (m["src"], m["dst"], m["send_lseq"], m["recv_lseq"], m["status"])
        for m in out.messages.collect()
    }  # fmt: skip
    assert got_m == {
        k: (v["src"], v["dst"], v["send_lseq"], v["recv_lseq"], v["status"])
        for k, v in ref.messages.items()
    }


HOSTILE_NAMES = ["a b", "c#d", "e%20f", "g?h", "i[1]", "j{x,y}", "k:l", "m+n", "*"]


def test_file_names_are_data_not_syntax(spark: SparkSession, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for i, name in enumerate(HOSTILE_NAMES):
        write_jsonl(
            folder / f"{name}.jsonl",
            [{"process": "p", "kind": "internal", "label": str(i)}],
        )
    out = ingest_paths(spark, [folder])
    events = out.events.collect()
    # each file once, its trace named by the file as it is
    assert sorted((e["trace_id"], e["label"]) for e in events) == sorted(
        (name, str(i)) for i, name in enumerate(HOSTILE_NAMES)
    )
    assert sorted(e["source"].rsplit("/", 1)[-1] for e in events) == sorted(
        f"{n}.jsonl" for n in HOSTILE_NAMES
    )
    assert out.quarantine.count() == 0


def test_default_trace_is_the_path_under_the_folder_given(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = [
        {"process": "a", "seq": 1, "kind": "send", "msg_id": "m", "peer": "b"},
        {"process": "b", "seq": 1, "kind": "receive", "msg_id": "m"},
    ]
    for day in ("2026-11-22", "2026-11-23"):
        (tmp_path / "logs" / day).mkdir(parents=True)
        write_jsonl(tmp_path / "logs" / day / "orders-service.jsonl", rows)
    out = ingest_paths(spark, [tmp_path / "logs"])
    assert out.quarantine.count() == 0
    assert sorted({e["trace_id"] for e in out.events.collect()}) == [
        "2026-11-22/orders-service",
        "2026-11-23/orders-service",
    ]
    # a file given directly keeps its stem
    direct = ingest_paths(spark, [tmp_path / "logs" / "2026-11-22" / "orders-service.jsonl"])
    assert {e["trace_id"] for e in direct.events.collect()} == {"orders-service"}


def test_a_detail_pointing_at_another_file_names_it(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    row = {"trace_id": "t", "process": "a", "seq": 1, "kind": "send", "msg_id": "m", "peer": "b"}
    write_jsonl(tmp_path / "in" / "1.jsonl", [row])
    write_jsonl(tmp_path / "in" / "2.jsonl", [dict(row, seq=2)])
    quarantine = ingest_paths(spark, [tmp_path / "in"]).quarantine.collect()
    given = str(tmp_path / "in")
    assert [(q["source"], q["line"], q["detail"]) for q in quarantine] == [
        (f"{given}/2.jsonl", 1, f"second send of msg_id 'm' (the first is line 1 of {given}/1.jsonl)")
    ]  # fmt: skip


def test_a_warehouse_inside_the_input_folder_is_not_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    from deltalake import write_deltalake

    write_jsonl(tmp_path / "t.jsonl", [{"process": "p", "kind": "internal"}])
    write_deltalake(str(tmp_path / "warehouse" / "events"), pa.table({"process": ["x"]}))
    write_deltalake(str(tmp_path / "other_table"), pa.table({"process": ["y"], "kind": ["local"]}))
    inputs = discover_inputs(
        [str(tmp_path)], IngestSettings(), exclude=[str(tmp_path / "warehouse")]
    )
    assert [f.shown.rsplit("/", 1)[-1] for f in inputs.files] == ["t.jsonl"]
    skipped = {Path(s.path).name: s.why for s in inputs.skipped}
    assert "warehouse" in skipped["warehouse"] and "Delta table" in skipped["other_table"]
    assert ingest_paths(spark, [tmp_path]).events.count() == 1


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
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    good = [{"trace_id": "t", "process": "p", "seq": 1, "kind": "internal"}]
    write_jsonl(folder / "good.jsonl", good)
    (folder / "empty.parquet").write_bytes(b"")
    (folder / "corrupt.parquet").write_bytes(b"PAR1 this is not parquet")
    pq.write_table(pa.table({"process": ["q"], "seq": [1], "kind": ["internal"]}), folder / "n.parquet")
    pq.write_table(pa.table({"process": ["r"], "seq": ["1"], "kind": ["internal"]}), folder / "s.parquet")
    (folder / "twice.csv").write_text("process,kind,kind\np,internal,local\n")
    (folder / "gone.jsonl").symlink_to(folder / "missing-target.jsonl")
    out = ingest_paths(spark, [folder])
    quarantine = sorted((q["source"].rsplit("/", 1)[-1], q["line"], q["reason"], q["detail"])
                        for q in out.quarantine.collect())  # fmt: skip
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
    assert sorted(e["process"] for e in out.events.collect()) == ["p", "q", "r"]


def test_json_lines_are_read_strictly(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
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
    out = ingest_paths(spark, [path])
    got = sorted((q["line"], q["detail"]) for q in out.quarantine.collect())
    more = "more than one JSON object on the line (a second object or trailing text)"
    assert got == [
        (2, more),
        (3, more),
        (4, "a field is given twice in one object"),
        (5, "not valid UTF-8"),
    ]
    assert out.events.count() == 1


def test_csv_doubled_quotes_and_gzip_are_read(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        'process,seq,kind,label\np,1,internal,"say ""hi"", then go"\n'
    )
    with gzip.open(tmp_path / "u.jsonl.gz", "wt") as fh:
        fh.write('{"process": "q", "seq": 1, "kind": "internal", "label": "zipped"}\n')
    out = ingest_paths(spark, [tmp_path])
    assert sorted((e["trace_id"], e["label"]) for e in out.events.collect()) == [
        ("t", 'say "hi", then go'),
        ("u", "zipped"),
    ]
