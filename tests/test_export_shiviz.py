"""`causal-spark export --format shiviz`: the log ShiViz's parser reads, and the round
trip through our reader (the clocks of the messages it infers equal the exported ones).

Three readers check each log: ShiViz's own algorithm (`shiviz_reference`, which
raises on a log ShiViz rejects, and whose messages must be the recorded ones that
the clocks show), our Spark reader with the reference clocks of what it infers, and,
for the worked traces, the whole ingest and clocks stages."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from causal_spark import tables
from causal_spark.app.cli import main
from causal_spark.clocks import with_clocks
from causal_spark.export import HEADER, shiviz_records
from causal_spark.export.shiviz import EVENT_LINE, HOST_LINE
from causal_spark.io.readers import shiviz
from causal_spark.io.readers.base import ReaderOptions
from tests.conftest import ROOT, read_delta
from tests.random_traces import Trace, brute_clocks, frames, random_trace
from tests.reference_readers import (
    accepted,
    collect,
    ingest_files,
    log_units,
    shiviz_reference,
    vector_clocks,
)

CONF = str(ROOT / "conf" / "test.yml")
Clocks = dict[tuple[str, str, int], dict[str, int]]  # (trace, process, lseq) -> non-zero vc


def _named(vc: list[int], processes: list[str]) -> dict[str, int]:
    return {p: n for p, n in zip(processes, vc, strict=True) if n}


def _visible(
    messages: list[dict[str, Any]], clocks: dict[tuple[str, int], dict[str, int]]
) -> set[tuple[str, int, str, int]]:
    """The delivered messages a clock shows: the receiver did not know of the send yet."""
    out = set()
    for m in messages:
        if m["status"] != "delivered" or m["src"] == m["dst"]:
            continue
        before = clocks.get((m["dst"], m["recv_lseq"] - 1), {})
        if before.get(m["src"], 0) < m["send_lseq"]:
            out.add((m["src"], m["send_lseq"], m["dst"], m["recv_lseq"]))
    return out


def _read_back(spark: SparkSession, logs: dict[str, Path]) -> tuple[Clocks, Clocks]:
    """Our reader's rows of every log (one Spark read): the clocks recomputed from the
    messages it inferred, and the clocks it read, per (trace, process, lseq)."""
    rows = accepted(collect(shiviz.read(spark, [str(p) for p in logs.values()], ReaderOptions())))
    trace_of = {str(path): trace for trace, path in logs.items()}
    computed: Clocks = {}
    recorded: Clocks = {}
    for trace, path in logs.items():
        mine = [r for r in rows if r["source"] == str(path)]
        assert all((r["sub"] or 0) == 0 for r in mine), "one event per logged event"
        for (process, seq, _), vc in log_units(vector_clocks(mine)).items():
            computed[(trace, process, seq)] = vc
    for r in rows:
        if r["recorded_vc"] is not None:
            key = (trace_of[r["source"]], r["process"], int(r["seq"]))
            recorded[key] = {q: n for q, n in r["recorded_vc"].items() if n}
    return computed, recorded


# --- random traces -------------------------------------------------------------------

# names that sort as p00, p01, ... do (pidx unchanged) and that JSON must escape
ODD = ['"quoted"', "λ", "{x}", "back\\slash", "[0]", ":"]


def _renamed(trace: Trace) -> Trace:
    names = {p: f"{p}{ODD[i % len(ODD)]}" for i, p in enumerate(trace.processes)}
    for e in trace.events:
        e["process"] = names[e["process"]]
    for m in trace.messages:
        m["src"] = names.get(m["src"]) if m["src"] else None
        m["dst"] = names[m["dst"]]
    trace.processes = [names[p] for p in trace.processes]
    return trace


def _random_traces() -> list[Trace]:
    shapes = [
        dict(n_procs=2, n_steps=12),
        dict(n_procs=3, n_steps=40, multicast=0.5),
        dict(n_procs=5, n_steps=80, lose=0.3, orphan=0.1),
        dict(n_procs=6, n_steps=120, groups=2),
        dict(n_procs=4, n_steps=60, self_send=0.2),
        dict(n_procs=8, n_steps=200, multicast=0.4, internal=0.05),
    ]
    traces = []
    for seed in range(24):
        rng = random.Random(seed)
        shape: dict[str, Any] = shapes[seed % len(shapes)]
        trace = random_trace(rng, f"r{seed:02d}", **shape)
        if seed % 3 == 0:
            trace = _renamed(trace)
        for e in trace.events:
            e["lamport"], e["vc"] = brute_clocks(trace)[(e["process"], e["lseq"])]
        traces.append(trace)
    return traces


@pytest.mark.slow
def test_random_traces_read_back_to_the_same_clocks(spark: SparkSession, tmp_path: Path) -> None:
    traces = _random_traces()
    events, messages = frames(spark, traces)
    lines: dict[str, list[str]] = {t.trace_id: [] for t in traces}
    for r in shiviz_records(events, messages).collect():  # one Spark job for all traces
        lines[r["trace_id"]].append(f"{r[HOST_LINE]}\n{r[EVENT_LINE]}\n")
    logs: dict[str, Path] = {}
    for trace in traces:
        text = HEADER + "\n\n" + "".join(lines[trace.trace_id])
        logs[trace.trace_id] = tmp_path / f"{trace.trace_id}.log"
        logs[trace.trace_id].write_text(text, encoding="utf-8")
        # ShiViz's algorithm reads it, and infers exactly the messages the clocks show
        expected = {
            (e["process"], e["lseq"]): _named(e["vc"], trace.processes) for e in trace.events
        }
        logged, inferred = shiviz_reference(text)
        assert {(e.host, e.own): e.clock for e in logged} == expected, trace.trace_id
        assert inferred == _visible(trace.messages, expected), trace.trace_id
    computed, recorded = _read_back(spark, logs)
    original = {
        (t.trace_id, e["process"], e["lseq"]): _named(e["vc"], t.processes)
        for t in traces
        for e in t.events
    }
    assert recorded == original
    assert computed == original


# --- the worked traces, through the command line ---------------------------------------


def _export(spark: SparkSession, warehouse: Path, trace: str, out: Path) -> int:
    argv = ["export", "--warehouse", str(warehouse), "--trace", trace, "--format", "shiviz"]
    return main([*argv, "--out", str(out), "--conf", CONF], session=spark)


@pytest.fixture(scope="module")
def worked_logs(
    spark: SparkSession, detected_samples: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Every clocked worked trace of data-samples/ exported by `causal-spark export`."""
    folder = tmp_path_factory.mktemp("shiviz")
    status = read_delta(detected_samples / tables.TRACE_CLOCKS).to_pylist()
    logs = {}
    for row in sorted(status, key=lambda r: r["trace_id"]):
        if row["status"] == "ok":
            logs[row["trace_id"]] = folder / f"{row['trace_id']}.log"
            assert _export(spark, detected_samples, row["trace_id"], logs[row["trace_id"]]) == 0
    return logs


def _worked_clocks(detected_samples: Path) -> tuple[Clocks, dict[str, list[dict[str, Any]]]]:
    events = read_delta(detected_samples / tables.EVENTS).to_pylist()
    processes: dict[str, dict[int, str]] = {}
    for e in events:
        processes.setdefault(e["trace_id"], {})[e["pidx"]] = e["process"]
    clocks = {
        (e["trace_id"], e["process"], e["lseq"]): _named(
            e["vc"], [processes[e["trace_id"]][i] for i in range(len(e["vc"]))]
        )
        for e in events
        if e["vc"] is not None
    }
    messages: dict[str, list[dict[str, Any]]] = {}
    for m in read_delta(detected_samples / tables.MESSAGES).to_pylist():
        messages.setdefault(m["trace_id"], []).append(m)
    return clocks, messages


@pytest.mark.slow
def test_worked_traces_read_back_to_the_same_clocks(
    spark: SparkSession, detected_samples: Path, worked_logs: dict[str, Path]
) -> None:
    original, messages = _worked_clocks(detected_samples)
    assert len(worked_logs) == 8  # every trace but causal_cycle (INVALID)
    for trace, path in worked_logs.items():
        text = path.read_text(encoding="utf-8")
        assert text.startswith(HEADER + "\n\n")
        mine = {(p, s): vc for (t, p, s), vc in original.items() if t == trace}
        logged, inferred = shiviz_reference(text)
        assert {(e.host, e.own): e.clock for e in logged} == mine, trace
        assert inferred == _visible(messages[trace], mine), trace
    computed, recorded = _read_back(spark, worked_logs)
    wanted = {k: v for k, v in original.items() if k[0] in worked_logs}
    assert recorded == wanted
    assert computed == wanted


@pytest.mark.slow
def test_worked_traces_through_ingest_and_clocks(
    spark: SparkSession, detected_samples: Path, worked_logs: dict[str, Path]
) -> None:
    """The exported logs as audit inputs: ingest and the clocks stage give every event
    its exported clock again (the trace id is the file name, as in data-samples/)."""
    original, _ = _worked_clocks(detected_samples)
    ingested = ingest_files(spark, [str(p) for p in worked_logs.values()])
    assert ingested.quarantine.count() == 0
    clocked = with_clocks(ingested.events, ingested.messages).events
    rows = clocked.select("trace_id", "process", "pidx", "lseq", "vc").collect()
    names: dict[str, dict[int, str]] = {}
    for r in rows:
        names.setdefault(r["trace_id"], {})[r["pidx"]] = r["process"]
    got = {
        (Path(r["trace_id"]).name, r["process"], r["lseq"]): _named(
            r["vc"], [names[r["trace_id"]][i] for i in range(len(r["vc"]))]
        )
        for r in rows
    }
    assert got == {k: v for k, v in original.items() if k[0] in worked_logs}


def test_a_log_describes_messages_by_their_recorded_ids(worked_logs: dict[str, Path]) -> None:
    lines = worked_logs["causal_chat"].read_text(encoding="utf-8").splitlines()
    assert lines[:2] == [HEADER, ""]
    body = lines[2:]
    assert body[:2] == ['P0 {"P0":1}', "send q1 to P1, q2 to P2 -- query"]
    assert "receive q2 from P0 (already known: not in the clocks)" in body


@pytest.mark.parametrize(
    ("trace", "message"),
    [
        ("causal_cycle", "trace 'causal_cycle' is INVALID"),
        ("no_such_trace", "trace 'no_such_trace' is not in the warehouse"),
    ],
)
def test_a_trace_that_cannot_be_exported_exits_2(
    spark: SparkSession,
    detected_samples: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    trace: str,
    message: str,
) -> None:
    out = tmp_path / "x.log"
    assert _export(spark, detected_samples, trace, out) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"causal-spark: error: {message}") and "Traceback" not in err
    assert not out.exists()


def test_an_empty_warehouse_exits_2_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["export", "--warehouse", str(tmp_path / "none"), "--trace", "t", "--out", "x.log"]
    assert main(argv) == 2
    assert "no committed run" in capsys.readouterr().err
