"""Generated traces are valid, exact in their counts, deterministic, and vary with latency."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from causal_spark.generate import (
    GeneratorError,
    GeneratorSpec,
    Latency,
    allot,
    generate_traces,
)
from tests.helpers import ingest_paths
from tests.reference_order import Message, pairwise_violations


def _rows(spark: SparkSession, spec: GeneratorSpec, tasks: int | None = None) -> list:
    return generate_traces(spark, spec, tasks=tasks).collect()


@pytest.mark.parametrize("topology", ["all_to_all", "client_server", "ring", "broadcast"])
def test_generated_traces_are_valid_with_exact_counts(spark: SparkSession, topology: str) -> None:
    spec = GeneratorSpec(
        processes=5,
        events=300,
        topology=topology,
        internal_prob=0.2,
        latency=Latency.parse("lognormal:0,1"),
        loss=0.05,
        traces=3,
        seed=3,
    )
    rows = _rows(spark, spec)
    by_trace: dict[str, list] = defaultdict(list)
    for r in rows:
        by_trace[r.trace_id].append(r)
    assert len(by_trace) == 3
    lost_expected = sum(a.lost for a in allot(spec))
    for trace_rows in by_trace.values():
        events = {(r.process, r.seq) for r in trace_rows}
        assert len(events) == spec.events
        assert {r.process for r in trace_rows} == {f"p{i}" for i in range(5)}
        sends = {r.msg_id: r for r in trace_rows if r.kind == "send"}
        receives = {r.msg_id: r for r in trace_rows if r.kind == "receive"}
        assert set(receives) <= set(sends)
        assert len(sends) - len(receives) == lost_expected
        for msg, rcv in receives.items():
            snd = sends[msg]
            assert rcv.ts > snd.ts, msg
            assert (rcv.peer, snd.peer) == (snd.process, rcv.process)
        # local order is time order; receives therefore happen in arrival order
        per_process: dict[str, list] = defaultdict(list)
        for r in trace_rows:
            per_process[r.process].append(r)
        for process_rows in per_process.values():
            ordered = sorted(process_rows, key=lambda r: (r.seq, r.msg_id or ""))
            assert [r.ts for r in ordered] == sorted(r.ts for r in ordered)
            assert sorted({r.seq for r in ordered}) == list(
                range(1, len({r.seq for r in ordered}) + 1)
            )
        if topology == "ring":
            assert all(int(r.peer[1:]) == (int(r.process[1:]) + 1) % 5 for r in sends.values())
        if topology == "client_server":
            assert all((r.process == "p0") != (r.peer == "p0") for r in sends.values())
        if topology == "broadcast":
            fan = Counter((r.process, r.seq) for r in sends.values())
            assert set(fan.values()) == {4}


@pytest.mark.slow
def test_generated_traces_ingest_cleanly(spark: SparkSession, tmp_path: Path) -> None:
    from causal_spark.generate import write_generated

    spec = GeneratorSpec(processes=4, events=500, loss=0.1, traces=2, seed=5)
    write_generated(generate_traces(spark, spec), str(tmp_path / "g"), "jsonl", spec)
    out = ingest_paths(spark, [tmp_path / "g"])
    assert out.quarantine.count() == 0
    assert out.events.count() == 2 * 500
    statuses = Counter(r.status for r in out.messages.collect())
    assert statuses["in_flight"] == 2 * sum(a.lost for a in allot(spec))
    assert statuses["orphan"] == 0


@pytest.mark.slow
def test_same_seed_same_traces_whatever_the_partitioning(spark: SparkSession) -> None:
    spec = GeneratorSpec(
        processes=6, events=2_000, topology="broadcast", loss=0.02, traces=3, seed=11
    )
    one = generate_traces(spark, spec, tasks=1)
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        many = generate_traces(spark, spec, tasks=5).localCheckpoint()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")
    assert_df_equality(one, many, ignore_row_order=True)
    other_seed = generate_traces(spark, GeneratorSpec(**{**spec.__dict__, "seed": 12}))
    assert one.exceptAll(other_seed).count() > 0


def _violations(rows: list) -> tuple[int, int]:
    lengths = Counter()
    for r in rows:
        lengths[r.process] = max(lengths[r.process], r.seq)
    sends = {r.msg_id: r for r in rows if r.kind == "send"}
    messages = [
        Message(r.msg_id, sends[r.msg_id].process, sends[r.msg_id].seq, r.process, r.seq)
        for r in rows
        if r.kind == "receive"
    ]
    fifo, causal = pairwise_violations(dict(lengths), messages)
    return len(fifo), len(causal)


@pytest.mark.slow
def test_violations_grow_with_latency_variance(spark: SparkSession) -> None:
    settings = ["uniform:0.95,1.05", "uniform:0.5,1.5", "lognormal:0,1", "lognormal:0,2"]
    counts = []
    for latency in settings:
        spec = GeneratorSpec(
            processes=4, events=400, latency=Latency.parse(latency), traces=4, seed=21
        )
        rows = _rows(spark, spec)
        per_trace = defaultdict(list)
        for r in rows:
            per_trace[r.trace_id].append(r)
        found = [_violations(t) for t in per_trace.values()]
        counts.append((statistics.mean(f for f, _ in found), statistics.mean(c for _, c in found)))
    fifo = [f for f, _ in counts]
    causal = [c for _, c in counts]
    assert all(c > 0 for c in causal), counts
    assert fifo[1] > 0, counts
    assert fifo == sorted(fifo) and fifo[-1] > fifo[1], counts
    assert causal == sorted(causal) and causal[-1] > causal[0], counts


def test_constant_latency_never_violates_fifo(spark: SparkSession) -> None:
    spec = GeneratorSpec(processes=3, events=300, latency=Latency.parse("const:2"), seed=4)
    assert _violations(_rows(spark, spec))[0] == 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"processes": 1}, "--processes", id="one-process"),
        pytest.param({"loss": 1.0}, "--loss", id="all-lost"),
        pytest.param({"internal_prob": -0.1}, "--internal-prob", id="negative-internal"),
        pytest.param({"events": 1}, "--events", id="too-few-events"),
    ],
)
def test_bad_parameters_are_rejected(changes: dict, message: str) -> None:
    spec = GeneratorSpec(**{**GeneratorSpec(processes=3, events=10).__dict__, **changes})
    with pytest.raises(GeneratorError, match=message):
        spec.validate()


@pytest.mark.parametrize("text", ["const:0", "uniform:2,1", "lognormal:0", "gauss:1", "const:x"])
def test_bad_latency_is_rejected(text: str) -> None:
    with pytest.raises(GeneratorError, match="latency"):
        Latency.parse(text)
