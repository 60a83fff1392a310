"""Each rule of DESIGN §1 on a tiny inline input, and ingest against a brute-force reference.

Every case is its own file (its own trace, named by a distinct stem or trace_id), and
all of them are ingested together once per module: a test reads its case's rows, picked
by the file or folder it wrote, and the module checks that no row lands outside a case."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.helpers import Rows, ingest_cases, write_jsonl
from tests.reference_ingest import reference_ingest

pytestmark = pytest.mark.slow  # every test here reads one ingest or audit of the module

# case -> (file name, rows); the rows of each case are those of the test that reads it
CASES: dict[str, tuple[str, list[Any]]] = {
    "aliases": (
        "aliases.jsonl",
        [
            {"process": "a", "seq": 1, "kind": "SND", "msg_id": "m", "peer": "b"},
            {"process": "a", "seq": 2, "kind": "Local"},
            {"process": "b", "seq": 1, "kind": "Deliver", "msg_id": "m", "peer": "a"},
            {"process": "b", "seq": 2, "kind": "rcv", "msg_id": "n"},
            {"process": "b", "seq": 3, "kind": "RECV", "msg_id": "o"},
        ],
    ),
    "defaults": (
        "run-42.jsonl",
        [
            {"process": "b", "kind": "internal"},
            {"process": "a", "kind": "send", "msg_id": "m", "peer": "b"},
            "",
            {"process": "b", "kind": "receive", "msg_id": "m"},
        ],
    ),
    "timestamps": (
        "timestamps.jsonl",
        [
            {"process": "a", "seq": 1, "kind": "internal", "ts": "1970-01-01T00:00:10Z"},
            {"process": "a", "seq": 2, "kind": "internal", "ts": "1970-01-01T01:00:10.5+01:00"},
            {"process": "a", "seq": 3, "kind": "internal", "ts": "1970-01-01 00:00:12"},
            {"process": "a", "seq": 4, "kind": "internal", "ts": 13.25},
            {"process": "a", "seq": 5, "kind": "internal", "ts": "14"},
            {"process": "a", "seq": 6, "kind": "internal", "ts": "yesterday"},
        ],
    ),
    "malformed": (
        "malformed.jsonl",
        [
            {"process": "a", "seq": 1, "kind": "internal"},
            {"process": "a", "kind": "internal"},
            {"process": "a", "seq": "two", "kind": "internal"},
            {"process": "a", "seq": 3, "kind": "send", "peer": "b"},
            {"process": {"x": 1}, "seq": 4, "kind": "internal"},
            {"process": "a", "seq": 5, "kind": "internal", "size_bytes": -1},
            {"process": "a", "seq": 6},
            "[1, 2]",
        ],
    ),
    "duplicates": (
        "duplicates.jsonl",
        [
            {"process": "a", "seq": 1, "kind": "send", "msg_id": "m1", "peer": "b"},
            {"process": "a", "seq": 1, "kind": "send", "msg_id": "m2", "peer": "c"},
            {"process": "a", "seq": 1, "kind": "send", "msg_id": "m3", "peer": "b"},  # same dst
            {"process": "a", "seq": 2, "kind": "internal"},
            {"process": "a", "seq": 2, "kind": "internal"},  # not a multicast
            {"process": "a", "seq": 3, "kind": "receive", "msg_id": "x"},
            {"process": "a", "seq": 3, "kind": "send", "msg_id": "m4", "peer": "b"},  # recv leads
        ],
    ),
    "peers": (
        "peers.jsonl",
        [
            {"process": "a", "seq": 1, "kind": "send", "msg_id": "m1", "peer": "b"},
            {"process": "c", "seq": 1, "kind": "receive", "msg_id": "m1", "peer": "a"},
            {"process": "a", "seq": 2, "kind": "send", "msg_id": "m2"},
            {"process": "b", "seq": 1, "kind": "receive", "msg_id": "m2", "peer": "z"},
            {"process": "a", "seq": 3, "kind": "send", "msg_id": "m3", "peer": "b"},
            {"process": "b", "seq": 2, "kind": "receive", "msg_id": "m3"},
        ],
    ),
}
SEEDS = [11, 2024]


@pytest.fixture(scope="module")
def ingested(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Rows]:
    """Every case (and each seed's folder of random traces) in one ingest, split by case."""
    root = tmp_path_factory.mktemp("rules")
    given: list[Path] = []
    for case, (name, rows) in CASES.items():
        (root / case).mkdir()
        given.append(write_jsonl(root / case / name, rows))
    for seed in SEEDS:
        folder = root / f"seed-{seed}"
        folder.mkdir()
        for name, lines in _random_files(seed).items():
            (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
        given.append(folder)
    cases = [*CASES, *(f"seed-{seed}" for seed in SEEDS)]
    return ingest_cases(spark, given, {case: root / case for case in cases})


def test_kind_aliases_are_case_insensitive(ingested: dict[str, Rows]) -> None:
    events, _, quarantine = ingested["aliases"]
    assert quarantine == []
    assert sorted((e["process"], e["lseq"], e["kind"]) for e in events) == [
        ("a", 1, "send"),
        ("a", 2, "internal"),
        ("b", 1, "receive"),
        ("b", 2, "receive"),
        ("b", 3, "receive"),
    ]


def test_trace_defaults_to_file_stem_and_seq_to_file_order(ingested: dict[str, Rows]) -> None:
    events, messages, quarantine = ingested["defaults"]
    assert quarantine == []
    assert {e["trace_id"] for e in events} == {"run-42"}
    assert sorted((e["process"], e["lseq"], e["kind"], e["line"], e["seq"]) for e in events) == [
        ("a", 1, "send", 2, None),
        ("b", 1, "internal", 1, None),
        ("b", 2, "receive", 4, None),
    ]
    assert [(m["send_lseq"], m["recv_lseq"], m["status"]) for m in messages] == [
        (1, 2, "delivered")
    ]


def test_iso_and_numeric_timestamps(ingested: dict[str, Rows]) -> None:
    events, _, quarantine = ingested["timestamps"]
    assert sorted((e["lseq"], e["ts"]) for e in events) == [
        (1, 10.0),
        (2, 10.5),
        (3, 12.0),
        (4, 13.25),
        (5, 14.0),
    ]
    assert [(q["line"], q["detail"]) for q in quarantine] == [
        (6, "ts 'yesterday' is neither seconds nor an ISO-8601 time")
    ]


def test_malformed_rows_say_what_is_wrong(ingested: dict[str, Rows]) -> None:
    quarantine = ingested["malformed"].quarantine
    got = {q["line"]: (q["reason"], q["detail"]) for q in quarantine}
    assert got == {
        2: ("malformed", "missing seq (other rows of this file have one)"),
        3: ("malformed", "seq 'two' is not an integer"),
        4: ("malformed", "send without msg_id"),
        5: ("malformed", "field 'process' must be a scalar, found an object or array"),
        6: ("malformed", "size_bytes '-1' is not a non-negative integer"),
        7: ("malformed", "missing required field 'kind'"),
        8: ("malformed", "not a JSON object"),
    }


def test_duplicate_events_and_multicast_copies(ingested: dict[str, Rows]) -> None:
    events, messages, quarantine = ingested["duplicates"]
    assert sorted((q["line"], q["reason"]) for q in quarantine) == [
        (3, "duplicate_event"),
        (5, "duplicate_event"),
        (7, "duplicate_event"),
    ]
    assert sorted((e["lseq"], e["kind"], e["n_msgs"]) for e in events) == [
        (1, "send", 2),
        (2, "internal", 0),
        (3, "receive", 0),
    ]
    assert sorted(m["msg_id"] for m in messages) == ["m1", "m2", "x"]


def test_peer_mismatch_quarantines_the_receive_and_leaves_the_message_in_flight(
    ingested: dict[str, Rows],
) -> None:
    events, messages, quarantine = ingested["peers"]
    assert sorted((q["line"], q["reason"], q["detail"]) for q in quarantine) == [
        (2, "peer_mismatch", "msg_id 'm1' was sent to 'b' but received by 'c'"),
        (4, "peer_mismatch", "msg_id 'm2' was sent by 'a' but the receive names peer 'z'"),
    ]
    status = {m["msg_id"]: (m["status"], m["src"], m["dst"], m["dst_pidx"]) for m in messages}
    assert status == {
        "m1": ("in_flight", "a", "b", 1),
        "m2": ("in_flight", "a", None, None),
        "m3": ("delivered", "a", "b", 1),
    }
    # c's only row was quarantined: c is not a process of the trace
    assert {e["process"] for e in events} == {"a", "b"}
    assert [e["lseq"] for e in events if e["process"] == "b"] == [1]


def _random_trace(rng: random.Random, trace: str) -> list[Any]:
    """A small trace with corruptions of every kind sprinkled in."""
    processes = [f"p{i}" for i in range(rng.randint(1, 4))]
    seq = {p: 0 for p in processes}
    rows: list[Any] = []
    in_transit: list[tuple[str, str, str]] = []
    next_msg = 0
    for _ in range(rng.randint(1, 14)):
        p = rng.choice(processes)
        choice = rng.random()
        seq[p] += 1
        if choice < 0.4:
            fan_out = rng.choice([1, 1, 1, 2])
            for _ in range(fan_out):
                next_msg += 1
                dst = rng.choice(processes)
                msg = f"m{next_msg}"
                rows.append(
                    {
                        "trace_id": trace,
                        "process": p,
                        "seq": seq[p],
                        "kind": "send",
                        "msg_id": msg,
                        "peer": dst,
                        "ts": float(seq[p]),
                    }
                )
                in_transit.append((msg, p, dst))
        elif choice < 0.75 and in_transit:
            msg, src, dst = in_transit.pop(rng.randrange(len(in_transit)))
            seq[p] -= 1
            seq[dst] += 1
            rows.append(
                {
                    "trace_id": trace,
                    "process": dst,
                    "seq": seq[dst],
                    "kind": rng.choice(["receive", "recv", "Deliver"]),
                    "msg_id": msg,
                    "peer": src if rng.random() < 0.8 else None,
                    "ts": float(seq[dst]),
                }
            )
        else:
            rows.append({"trace_id": trace, "process": p, "seq": seq[p], "kind": "internal"})
    corrupted: list[Any] = []
    for row in rows:
        roll = rng.random()
        corrupted.append(row)
        if roll < 0.05:
            corrupted[-1] = "{broken json"
        elif roll < 0.10:
            corrupted.append(dict(row))  # an exact duplicate row
        elif roll < 0.13:
            bad = dict(row)
            bad["kind"] = "teleport"
            corrupted[-1] = bad
        elif roll < 0.16 and row.get("peer"):
            bad = dict(row)
            bad["peer"] = "nobody"
            corrupted[-1] = bad
        elif roll < 0.19:
            bad = dict(row)
            del bad["process"]
            corrupted[-1] = bad
        elif roll < 0.21:
            bad = dict(row)
            bad["seq"] = "x"
            corrupted[-1] = bad
        elif roll < 0.23:
            bad = dict(row)
            bad["ts"] = "later"
            corrupted[-1] = bad
    rng.shuffle(corrupted) if rng.random() < 0.3 else None
    return corrupted


def _random_files(seed: int) -> dict[str, list[str]]:
    """40 files of random traces with corruptions; trace ids name the seed (one ingest)."""
    rng = random.Random(seed)
    files: dict[str, list[str]] = {}
    for t in range(40):
        rows = _random_trace(rng, f"s{seed}-t{t}")
        files[f"f{t}"] = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    return files


@pytest.mark.parametrize("seed", SEEDS)
def test_ingest_agrees_with_reference_on_random_traces(
    ingested: dict[str, Rows], seed: int
) -> None:
    events, messages, quarantine = ingested[f"seed-{seed}"]
    got_q = {(q["source"].rsplit("/", 1)[-1], q["line"]): q["reason"] for q in quarantine}
    got_e = {
        (e["trace_id"], e["process"], e["lseq"]): (e["kind"], e["n_msgs"], e["line"])
        for e in events
    }
    got_m = {
        (m["trace_id"], m["msg_id"]): (
            m["src"],
            m["dst"],
            m["send_lseq"],
            m["recv_lseq"],
            m["status"],
        )
        for m in messages
    }
    want_q: dict[tuple[str, int], str] = {}
    want_e: dict[tuple[str, str, int], tuple[str, int, int]] = {}
    want_m: dict[tuple[str, str], tuple[Any, ...]] = {}
    for name, lines in _random_files(seed).items():
        ref = reference_ingest(lines, name)
        want_q.update({(f"{name}.jsonl", line): r for line, r in ref.quarantine.items()})
        want_e.update({k: (v["kind"], v["n_msgs"], v["line"]) for k, v in ref.events.items()})
        want_m.update(
            {
                k: (v["src"], v["dst"], v["send_lseq"], v["recv_lseq"], v["status"])
                for k, v in ref.messages.items()
            }
        )
    assert got_q == want_q, f"seed {seed}"
    assert got_e == want_e, f"seed {seed}"
    assert got_m == want_m, f"seed {seed}"
    assert want_e and want_m and want_q  # the reference found rows of every kind
