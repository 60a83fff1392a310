"""100 000 rows with 1% corrupted lines of assorted kinds: nothing is lost."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from causal_spark.app.runs import run_job
from causal_spark.app.stages import ingest_stage
from causal_spark.config import Config
from causal_spark.sinks import Warehouse
from tests.conftest import read_delta
from tests.reference_ingest import reference_ingest

N_ROWS = 100_000


def _valid_lines(rng: random.Random, n_rows: int) -> list[dict[str, object]]:
    processes = [f"p{i:02d}" for i in range(16)]
    seq = dict.fromkeys(processes, 0)
    clock = 0.0
    rows: list[dict[str, object]] = []
    pending: list[tuple[str, str, str]] = []
    msg = 0
    while len(rows) < n_rows:
        clock += rng.random()
        roll = rng.random()
        if pending and (roll < 0.45 or len(rows) > n_rows - len(pending) - 1):
            m, src, dst = pending.pop(rng.randrange(len(pending)))
            seq[dst] += 1
            rows.append(
                {
                    "trace_id": "big",
                    "process": dst,
                    "seq": seq[dst],
                    "kind": "receive",
                    "msg_id": m,
                    "peer": src,
                    "ts": clock,
                }
            )
        elif roll < 0.9:
            src, dst = rng.sample(processes, 2)
            msg += 1
            seq[src] += 1
            rows.append(
                {
                    "trace_id": "big",
                    "process": src,
                    "seq": seq[src],
                    "kind": "send",
                    "msg_id": f"m{msg}",
                    "peer": dst,
                    "ts": clock,
                    "size_bytes": rng.randint(0, 999),
                }
            )
            pending.append((f"m{msg}", src, dst))
        else:
            p = rng.choice(processes)
            seq[p] += 1
            rows.append(
                {"trace_id": "big", "process": p, "seq": seq[p], "kind": "internal", "ts": clock}
            )
    return rows[:n_rows]


def _corrupt(
    rng: random.Random, rows: list[dict[str, object]], fraction: float
) -> tuple[list[str], Counter[str]]:
    lines = [json.dumps(r) for r in rows]
    kinds: Counter[str] = Counter()
    for i in rng.sample(range(1, len(rows)), int(len(rows) * fraction)):
        row = dict(rows[i])
        kind = rng.choice(
            ["json", "kind", "process", "seq", "ts", "msg_id", "dup_event", "dup_msg", "peer"]
        )
        if kind == "json":
            lines[i] = lines[i][: len(lines[i]) // 2]
        elif kind == "kind":
            row["kind"] = "teleport"
        elif kind == "process":
            del row["process"]
        elif kind == "seq":
            row["seq"] = "third"
        elif kind == "ts":
            row["ts"] = "noon-ish"
        elif kind == "msg_id":
            row["msg_id"] = ""
            row["kind"] = "send" if row["kind"] == "internal" else row["kind"]
        elif kind == "dup_event":
            row = dict(rows[i - 1])
            row["kind"] = "internal"
        elif kind == "dup_msg":
            # a second send of the first message
            row.update(kind="send", msg_id="m1", peer=rows[0]["peer"])
        elif kind == "peer":
            # a receive naming the wrong sender, of a message sent earlier
            earlier = next(r for r in reversed(rows[:i]) if r["kind"] == "send")
            row.update(
                kind="receive", msg_id=earlier["msg_id"], peer="nobody", process=earlier["peer"]
            )
        kinds[kind] += 1
        if kind != "json":
            lines[i] = json.dumps(row)
    return lines, kinds


@pytest.mark.slow
def test_100k_rows_with_1_percent_corruption_lose_nothing(
    spark: SparkSession, config: Config, tmp_path: Path
) -> None:
    rng = random.Random(20261122)
    lines, kinds = _corrupt(rng, _valid_lines(rng, N_ROWS), 0.01)
    assert len(lines) == N_ROWS and len(kinds) == 9
    path = tmp_path / "in" / "big.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")

    record = run_job(
        "ingest",
        [ingest_stage([str(path)])],
        spark=spark,
        config=config,
        warehouse=Warehouse(spark, tmp_path / "wh", "deltalake"),
    )
    counts = record.counts
    assert counts["rows_read"] == N_ROWS
    events = read_delta(tmp_path / "wh" / "events")
    messages = read_delta(tmp_path / "wh" / "messages").to_pylist()
    quarantine = read_delta(tmp_path / "wh" / "quarantine").to_pylist()
    internal = sum(1 for k in events.column("kind").to_pylist() if k == "internal")
    sends = sum(1 for m in messages if m["send_lseq"] is not None)
    receives = sum(1 for m in messages if m["recv_lseq"] is not None)
    assert internal + sends + receives + len(quarantine) == N_ROWS

    reference = reference_ingest(lines, "big")
    assert Counter(q["reason"] for q in quarantine) == Counter(reference.quarantine.values())
    assert {q["line"] for q in quarantine} == set(reference.quarantine)
    # adjacent corruptions may shadow each other; nearly all must show
    assert len(quarantine) >= 0.0095 * N_ROWS
    assert Counter(m["status"] for m in messages) == Counter(
        m["status"] for m in reference.messages.values()
    )
