"""Clocks: worked traces exactly, random traces against brute-force happened-before."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from pyspark.sql import SparkSession

from causal_spark.clocks import clock_cycles, with_clocks
from causal_spark.generate import GeneratorSpec, Latency, generate_traces, write_generated
from tests.conftest import SAMPLES
from tests.helpers import ingest_paths
from tests.reference_order import Message, happened_before_sets


@pytest.fixture(scope="module")
def sample_clocks(spark: SparkSession) -> dict[str, Any]:
    out = ingest_paths(spark, [SAMPLES.relative_to(SAMPLES.parent)])
    clocked = with_clocks(out.events, out.messages).localCheckpoint()
    return {"events": clocked.collect(), "cycles": clock_cycles(clocked).collect()}


@pytest.mark.parametrize("trace", ["overtaken_by_chain"], ids=str)
def test_worked_trace_clocks_are_exact(
    sample_clocks: dict[str, Any], expected: dict[str, Any], trace: str
) -> None:
    got_vc: dict[str, list[list[int]]] = defaultdict(list)
    got_lamport: dict[str, list[int]] = defaultdict(list)
    for e in sorted(sample_clocks["events"], key=lambda e: (e.process, e.lseq)):
        if e.trace_id == trace:
            got_vc[e.process].append(list(e.vc))
            got_lamport[e.process].append(e.lamport)
    assert dict(got_vc) == expected[trace]["vc"]
    assert dict(got_lamport) == expected[trace]["lamport"]


def test_causal_cycle_trace_is_invalid_with_a_witness(sample_clocks: dict[str, Any]) -> None:
    cycles = {r.trace_id: sorted(r.cycle) for r in sample_clocks["cycles"]}
    assert cycles == {"causal_cycle": ["a", "b"]}
    broken = [e for e in sample_clocks["events"] if e.trace_id == "causal_cycle"]
    assert broken and all(e.vc is None and e.lamport is None for e in broken)
    others = [e for e in sample_clocks["events"] if e.trace_id != "causal_cycle"]
    assert all(e.vc is not None for e in others)


def test_vector_clock_is_the_transitive_closure_on_random_traces(
    spark: SparkSession, tmp_path
) -> None:
    spec = GeneratorSpec(
        processes=5,
        events=150,
        latency=Latency.parse("lognormal:0,1.5"),
        topology="broadcast",
        loss=0.05,
        traces=6,
        seed=99,
    )
    write_generated(generate_traces(spark, spec), str(tmp_path / "g"), "parquet", spec)
    out = ingest_paths(spark, [tmp_path / "g"])
    events = with_clocks(out.events, out.messages).collect()
    messages = out.messages.where("status = 'delivered'").collect()
    for trace in {e.trace_id for e in events}:
        mine = [e for e in events if e.trace_id == trace]
        lengths: dict[str, int] = defaultdict(int)
        for e in mine:
            lengths[e.process] = max(lengths[e.process], e.lseq)
        msgs = [
            Message(m.msg_id, m.src, m.send_lseq, m.dst, m.recv_lseq)
            for m in messages
            if m.trace_id == trace
        ]
        future = happened_before_sets(dict(lengths), msgs)
        names = sorted(lengths)
        by_event = {(e.process, e.lseq): e for e in mine}
        for f in mine:
            for p in names:
                # vc(f)[p] = number of events of p that happen before f or are f
                past = sum(
                    1
                    for i in range(1, lengths[p] + 1)
                    if (p, i) == (f.process, f.lseq) or (f.process, f.lseq) in future[(p, i)]
                )
                assert f.vc[names.index(p)] == past, (trace, f.process, f.lseq, p)
            assert f.lamport == 1 + max(
                [by_event[(f.process, f.lseq - 1)].lamport if f.lseq > 1 else 0]
                + [
                    by_event[(m.src, m.send_lseq)].lamport
                    for m in msgs
                    if (m.dst, m.recv_lseq) == (f.process, f.lseq)
                ]
            )
