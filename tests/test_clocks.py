"""Clocks: worked traces exactly, both engines against brute force and each other."""

from __future__ import annotations

import copy
import random
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from chispa import assert_df_equality
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark import tables
from causal_spark.anomalies import delivered_messages, find_violations
from causal_spark.app.cli import main
from causal_spark.clocks import trace_clock_status, with_clocks
from causal_spark.clocks.components import Components, connected_components
from causal_spark.clocks.kernel import (
    CausalCycleError,
    GroupShapeError,
    Seeds,
    cycle_witness,
    export_clocks,
    group_clocks,
    vector_clocks,
)
from causal_spark.clocks.per_trace import _batch_clocks, _dictionary, _group_keys
from causal_spark.clocks.plan import _plain, _slab_of
from causal_spark.clocks.units_kernel import (
    DENSE_MAX_CELLS,
    ROLLING_MIN_CELLS,
    _rolling,
    units_clocks,
    units_clocks_at,
)
from causal_spark.config import ClockSettings
from causal_spark.sinks import FileWriter
from tests.conftest import ROOT, SAMPLES, read_delta
from tests.helpers import ingest_paths, spark_jobs, write_jsonl
from tests.random_traces import Trace, brute_clocks, frames, random_trace
from tests.reference_order import happened_before_sets

ENGINES = {
    "per_trace": ClockSettings(engine="per_trace"),
    # tiny slabs: every trace is cut into many slabs, so every cross-slab path is exercised
    "distributed": ClockSettings(engine="distributed", slab_events=5),
}


def trace_from_rows(trace_id: str, events: list[Any], messages: list[Any]) -> Trace:
    trace = Trace(trace_id, sorted({e.process for e in events}))
    trace.events = [e.asDict() for e in events]
    trace.messages = [m.asDict() for m in messages]
    return trace


def assert_matches_brute_force(clocked: list[Any], trace: Trace) -> None:
    expected = brute_clocks(trace)
    got = {(e.process, e.lseq): (e.lamport, list(e.vc)) for e in clocked}
    assert got == expected, f"trace {trace.trace_id}"


@pytest.fixture(scope="module")
def samples(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    out = ingest_paths(spark, [SAMPLES.relative_to(SAMPLES.parent)])
    return out.events.localCheckpoint(), out.messages.localCheckpoint()


@pytest.fixture(scope="module")
def random_set(spark: SparkSession) -> tuple[list[Trace], DataFrame, DataFrame]:
    rng = random.Random(20261122)
    traces = [
        random_trace(
            rng,
            f"r{i:02d}",
            n_procs=rng.randint(2, 7),
            n_steps=rng.randint(20, 160),
            groups=rng.choice([1, 1, 2, 3]),
        )
        for i in range(14)
    ]
    events, messages = frames(spark, traces)
    return traces, events.localCheckpoint(), messages.localCheckpoint()


Clocked = Callable[[str, DataFrame, DataFrame, ClockSettings], tuple[DataFrame, DataFrame]]


@pytest.fixture(scope="module")
def clocked_once() -> Clocked:
    """Clock a module input once per (input name, settings) and share the result: the
    events with clocks and their `trace_clocks` rows, both checkpointed. Tests that only
    read the same engine's output of the same rows take it from here."""
    memo: dict[tuple[str, ClockSettings], tuple[DataFrame, DataFrame]] = {}

    def clock(
        name: str, events: DataFrame, messages: DataFrame, settings: ClockSettings
    ) -> tuple[DataFrame, DataFrame]:
        if (name, settings) not in memo:
            result = with_clocks(events, messages, settings)
            clocked = result.events.localCheckpoint()
            status = trace_clock_status(clocked, events, messages, result.plan).localCheckpoint()
            memo[name, settings] = (clocked, status)
        return memo[name, settings]

    return clock


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_worked_traces_get_exact_clocks(
    samples: tuple[DataFrame, DataFrame],
    expected: dict[str, Any],
    clocked_once: Clocked,
    engine: str,
) -> None:
    events, messages = samples
    clocked = clocked_once("samples", events, messages, ENGINES[engine])[0].collect()
    delivered = messages.where("status = 'delivered'").collect()
    by_trace: dict[str, list[Any]] = defaultdict(list)
    for e in clocked:
        by_trace[e.trace_id].append(e)
    for trace_id, rows in by_trace.items():
        if expected[trace_id]["order_class"] == "INVALID":
            continue
        mine = [m for m in delivered if m.trace_id == trace_id]
        assert_matches_brute_force(rows, trace_from_rows(trace_id, rows, mine))
        if "vc" in expected[trace_id]:
            ordered = sorted(rows, key=lambda e: (e.process, e.lseq))
            vc: dict[str, list[list[int]]] = defaultdict(list)
            lamport: dict[str, list[int]] = defaultdict(list)
            for e in ordered:
                vc[e.process].append(list(e.vc))
                lamport[e.process].append(e.lamport)
            assert dict(vc) == expected[trace_id]["vc"]
            assert dict(lamport) == expected[trace_id]["lamport"]


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_causal_cycle_is_invalid_with_a_witness_and_others_are_ok(
    samples: tuple[DataFrame, DataFrame], clocked_once: Clocked, engine: str
) -> None:
    events, messages = samples
    clocked, status_rows = clocked_once("samples", events, messages, ENGINES[engine])
    status = {r.trace_id: r for r in status_rows.collect()}
    assert status["causal_cycle"].status == "INVALID"
    assert sorted(status["causal_cycle"].cycle) == ["a", "b"]
    assert {t for t, r in status.items() if r.status == "ok"} == set(status) - {"causal_cycle"}
    assert all(r.cycle is None for t, r in status.items() if t != "causal_cycle")
    rows = clocked.collect()
    assert all(e.vc is None for e in rows if e.trace_id == "causal_cycle")
    assert all(e.vc is not None for e in rows if e.trace_id != "causal_cycle")
    assert status["overtaken_by_chain"].engine == (
        "distributed" if engine == "distributed" else "per_trace"
    )


# the random traces' rows are checked in the runs test_both_engines_give_identical_tables
# compares (random and cyclic traces, timed, one source): each engine's run of them is shared
# with that test; the distributed one in slabs of 3 events, so every cross-slab path is taken
RANDOM_RUNS = {
    "per_trace": ENGINES["per_trace"],
    "distributed": ClockSettings(engine="distributed", slab_events=3),
}
# the traces the slabs of 3 events cut (the `few` input): each kind the two sets hold
# (several components, components without messages, six processes, cyclic and intact),
# ~550 of their ~2 300 events. The distributed engine's cost grows with its slabs more than
# with their size (bench/README.md, 2026-12-02, suite19d): ~180 slabs of 3 still take every
# cross-slab path, while the slabs of 17 of the other runs cut every trace
FEW = ("r01", "r02", "r05", "r07", "r11", "r13", "c03", "c06", "c08", "c10")


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(RANDOM_RUNS))
def test_random_traces_match_the_transitive_closure(
    random_set: tuple[list[Trace], DataFrame, DataFrame],
    compared_input: Compared,
    clocked_once: Clocked,
    engine: str,
) -> None:
    few = engine == "distributed"
    traces = [t for t in random_set[0] if t.trace_id in FEW or not few]
    assert len(traces) == (6 if few else 14)
    variant, events, messages = compared_input("timed", 1, few)
    clocked = clocked_once(variant, events, messages, RANDOM_RUNS[engine])[0].collect()
    for trace in traces:
        assert_matches_brute_force([e for e in clocked if e.trace_id == trace.trace_id], trace)


def with_injected_cycle(trace: Trace, rng: random.Random) -> Trace | None:
    """`trace` with the receive ends of two delivered messages to one process swapped, so
    that the earlier receive now takes a message sent after it: a causal cycle. None when
    no two messages to one process allow it."""
    future = happened_before_sets(trace.lengths(), trace.delivered())
    into: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in trace.messages:
        if m["status"] == "delivered":
            into[m["dst"]].append(m)
    pairs = [
        (i, j)
        for ms in into.values()
        for i in ms
        for j in ms
        if (j["src"], j["send_lseq"]) in future[(i["dst"], i["recv_lseq"])]
    ]
    if not pairs:
        return None
    first, second = rng.choice(pairs)
    broken = copy.deepcopy(trace)
    ids = {first["msg_id"]: second["recv_lseq"], second["msg_id"]: first["recv_lseq"]}
    for m in broken.messages:
        if m["msg_id"] in ids:
            m["recv_lseq"] = ids[m["msg_id"]]
    return broken


@pytest.fixture(scope="module")
def cyclic_set(spark: SparkSession) -> tuple[set[str], DataFrame, DataFrame]:
    """Random traces, most with an injected causal cycle (the ids of those), some intact."""
    rng = random.Random(20261124)
    traces, broken = [], set()
    for i in range(12):
        trace = random_trace(
            rng,
            f"c{i:02d}",
            n_procs=rng.randint(2, 6),
            n_steps=rng.randint(30, 140),
            groups=rng.choice([1, 1, 2]),
        )
        cyclic = with_injected_cycle(trace, rng) if i % 4 else None
        if cyclic is not None:
            broken.add(trace.trace_id)
        traces.append(cyclic or trace)
    assert len(broken) >= 6, broken
    events, messages = frames(spark, traces)
    return broken, events.localCheckpoint(), messages.localCheckpoint()


Compared = Callable[[str, int, bool], tuple[str, DataFrame, DataFrame]]

# how the compared input's events carry `ts`: every event, or every event of every other
# trace (those whose id ends in an even digit have none)
TIMINGS = ("timed", "mixed")


@pytest.fixture(scope="module")
def compared_input(
    random_set: tuple[list[Trace], DataFrame, DataFrame],
    cyclic_set: tuple[set[str], DataFrame, DataFrame],
) -> Compared:
    """The random and the cyclic traces as one input (with `few`, only the traces of FEW),
    with `ts` as `timing` says (TIMINGS), with `sources` sources per process (and some null
    labels when several): its name for `clocked_once`, events and messages. The same frames
    for every test that clocks one variant."""
    memo: dict[tuple[str, int, bool], tuple[str, DataFrame, DataFrame]] = {}

    def build(timing: str, sources: int, few: bool = False) -> tuple[str, DataFrame, DataFrame]:
        assert timing in TIMINGS, timing
        if (timing, sources, few) not in memo:
            _, events, messages = random_set
            _, cyclic_events, cyclic_messages = cyclic_set
            events = events.unionByName(cyclic_events)
            messages = messages.unionByName(cyclic_messages)
            if few:
                events = events.where(F.col("trace_id").isin(*FEW))
                messages = messages.where(F.col("trace_id").isin(*FEW))
            if timing == "mixed":
                untimed = F.substring("trace_id", -1, 1).cast("int") % 2 == 0
                events = events.withColumn(
                    "ts", F.when(untimed, F.lit(None).cast("double")).otherwise(F.col("ts"))
                )
            if sources > 1:
                shard = (F.col("lseq") * 7 % sources).cast("string")
                events = events.withColumn("source", F.concat(F.col("source"), F.lit("#"), shard))
                events = events.withColumn(
                    "label",
                    F.when(F.col("lseq") % 2 == 0, F.lit("even")).otherwise(F.col("label")),
                )
            variant = f"random+cyclic ts={timing} sources={sources}{' few' if few else ''}"
            memo[timing, sources, few] = (variant, events, messages)
        return memo[timing, sources, few]

    return build


# trace_clocks without the columns that name the engine
STATUS_COLUMNS = ["trace_id", "n_processes", "n_events", "n_components", "status", "cycle"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("slab_events", "timing", "sources"),
    [(3, "timed", 1), (17, "timed", 1), (17, "mixed", 3)],
    ids=["slab3-few", "slab17", "slab17-mixed-ts-3-sources"],
)
def test_both_engines_give_identical_tables(
    cyclic_set: tuple[set[str], DataFrame, DataFrame],
    compared_input: Compared,
    clocked_once: Clocked,
    slab_events: int,
    timing: str,
    sources: int,
) -> None:
    """Slabs are time bands when every event of a component has `ts`, equal lseq shares
    otherwise (the inputs: timed; and, in one run, with several sources, half the traces
    timed and half without `ts`, random and cyclic ones in each half). With several
    sources per process (the per-trace engine ships them as codes, the distributed one as
    strings) and some null labels, every column still agrees. Traces with an injected
    causal cycle (issue 17) are INVALID under both, with null clocks and the same witness,
    and the other traces' rows are unaffected. Slabs of 3 cut only the traces of FEW: they
    are compared with those traces' rows of the per-trace run of all."""
    broken = cyclic_set[0]
    # the per-trace tables of one input are computed once, for every slab size compared
    variant, events, messages = compared_input(timing, sources, False)
    if timing == "mixed":  # both kinds of slab in the one run, cyclic traces in both
        untimed = {r.trace_id for r in events.where(F.col("ts").isNull()).collect()}
        intact = {r.trace_id for r in events.select("trace_id").distinct().collect()} - broken
        assert broken & untimed and broken - untimed and intact & untimed and intact - untimed
    one, one_status = clocked_once(variant, events, messages, ENGINES["per_trace"])
    if slab_events == 3:
        variant, events, messages = compared_input(timing, sources, True)
        one = one.where(F.col("trace_id").isin(*FEW))
        one_status = one_status.where(F.col("trace_id").isin(*FEW))
        broken = broken & set(FEW)
        assert broken and set(FEW) - broken
    many, many_status = clocked_once(
        variant, events, messages, ClockSettings(engine="distributed", slab_events=slab_events)
    )
    assert_df_equality(one, many, ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(
        one_status.select(*STATUS_COLUMNS),
        many_status.select(*STATUS_COLUMNS),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    invalid = {r.trace_id: r.cycle for r in many_status.where("status = 'INVALID'").collect()}
    assert set(invalid) == broken
    assert all(len(cycle) >= 1 for cycle in invalid.values())
    assert many_status.where("status = 'ok'").count() == many_status.count() - len(broken)
    nulls = many.where(F.col("vc").isNull()).select("trace_id").distinct().collect()
    assert {r.trace_id for r in nulls} == broken


def ping_pong(trace_id: str, messages: int) -> Trace:
    """Two processes bouncing one message: a causal chain as long as the trace."""
    trace = Trace(trace_id, ["a", "b"])
    lseq = {"a": 0, "b": 0}
    for i in range(messages):
        src, dst = ("a", "b") if i % 2 == 0 else ("b", "a")
        for p, kind in ((src, "send"), (dst, "receive")):
            lseq[p] += 1
            trace.events.append(
                {
                    "trace_id": trace_id,
                    "process": p,
                    "pidx": 0 if p == "a" else 1,
                    "lseq": lseq[p],
                    "kind": kind,
                    "ts": float(i),
                    "label": None,
                    "n_msgs": 1 if kind == "send" else 0,
                    "seq": lseq[p],
                    "source": "pp",
                    "line": len(trace.events) + 1,
                    "lamport": None,
                    "vc": None,
                }
            )
        trace.messages.append(
            {
                "trace_id": trace_id,
                "msg_id": f"m{i}",
                "src": src,
                "dst": dst,
                "src_pidx": 0 if src == "a" else 1,
                "dst_pidx": 0 if dst == "a" else 1,
                "send_lseq": lseq[src],
                "recv_lseq": lseq[dst],
                "send_ts": None,
                "recv_ts": None,
                "size_bytes": 0,
                "status": "delivered",
            }
        )
    return trace


def cyclic_ping_pong_rows(exchanges: int) -> list[dict[str, Any]]:
    """Input rows of a two-process ping-pong of `exchanges` messages, 2 * exchanges + 4 events,
    with a causal cycle from its first event to its last (issue 17's trace had 1 202 events,
    599 exchanges; what matters is that it spans many slabs): a receives X, sends a0, then
    the ping-pong runs; b ends by receiving a0 and sending X.
    With time slabs the cycle crosses every slab border. Its witness: a's receive of X
    waits on b's last event, b's first receive (m0) on a's send of m0."""
    rows: list[dict[str, Any]] = [
        {"process": "a", "kind": "receive", "msg_id": "X", "peer": "b", "ts": 0.0},
        {"process": "a", "kind": "send", "msg_id": "a0", "peer": "b", "ts": 0.1},
    ]
    for i in range(exchanges):
        src, dst = ("a", "b") if i % 2 == 0 else ("b", "a")
        rows.append({"process": src, "kind": "send", "msg_id": f"m{i}", "peer": dst, "ts": 1.0 + i})
        rows.append(
            {"process": dst, "kind": "receive", "msg_id": f"m{i}", "peer": src, "ts": 1.5 + i}
        )
    rows += [
        {"process": "b", "kind": "receive", "msg_id": "a0", "peer": "a", "ts": exchanges + 1.0},
        {"process": "b", "kind": "send", "msg_id": "X", "peer": "a", "ts": exchanges + 1.1},
    ]
    return rows


def trace_of_rows(trace_id: str, rows: list[dict[str, Any]]) -> Trace:
    """The events and messages ingest makes of well-formed rows without seq (file order,
    one message per send), built directly: no ingest job for the engines' tests."""
    trace = Trace(trace_id, sorted({r["process"] for r in rows}))
    pidx = {p: i for i, p in enumerate(trace.processes)}
    lseq = dict.fromkeys(trace.processes, 0)
    ends: dict[str, dict[str, tuple[str, int, float]]] = defaultdict(dict)
    for line, row in enumerate(rows, start=1):
        p = row["process"]
        lseq[p] += 1
        trace.events.append(
            {"trace_id": trace_id, "process": p, "pidx": pidx[p], "lseq": lseq[p],
             "kind": row["kind"], "ts": row["ts"], "label": None,
             "n_msgs": int(row["kind"] == "send"), "seq": None, "source": f"{trace_id}.jsonl",
             "line": line, "lamport": None, "vc": None}
        )  # fmt: skip
        ends[row["msg_id"]][row["kind"]] = (p, lseq[p], row["ts"])
    for msg_id, end in ends.items():
        (src, send, send_ts), (dst, recv, recv_ts) = end["send"], end["receive"]
        trace.messages.append(
            {"trace_id": trace_id, "msg_id": msg_id, "src": src, "dst": dst,
             "src_pidx": pidx[src], "dst_pidx": pidx[dst], "send_lseq": send, "recv_lseq": recv,
             "send_ts": send_ts, "recv_ts": recv_ts, "size_bytes": 0, "status": "delivered"}
        )  # fmt: skip
    return trace


@pytest.fixture(scope="module")
def cyclic_ping_pong(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    """The cyclic ping-pong of 99 exchanges (202 events), once for both engines (the slow
    test below takes the same rows through `ingest`)."""
    events, messages = frames(spark, [trace_of_rows("cyclic_ping_pong", cyclic_ping_pong_rows(99))])
    return events.localCheckpoint(), messages.localCheckpoint()


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["per_trace", "distributed"])
def test_a_long_cyclic_ping_pong_is_invalid_under_both_engines(
    cyclic_ping_pong: tuple[DataFrame, DataFrame], engine: str
) -> None:
    """Issue 17: with slabs, the distributed engine nulled the clocks of this cycle but its
    trace was reported ok (the witness search ran the component slab by slab, where a cycle
    across slab borders does not show), and the anomaly search then failed on the nulls.
    The cycle crosses every one of the ~20 time slabs of 10 events."""
    events, messages = cyclic_ping_pong
    assert events.count() == 202
    settings = ClockSettings(engine=engine, slab_events=10)  # type: ignore[arg-type]
    result = with_clocks(events, messages, settings)
    clocked = result.events.localCheckpoint()
    status = trace_clock_status(clocked, events, messages, result.plan).localCheckpoint()
    (row,) = status.collect()
    assert (row.engine, row.status, sorted(row.cycle)) == (engine, "INVALID", ["X", "m0"])
    if engine == "distributed":
        assert result.plan.agg(F.max("n_slabs")).first()[0] == 21  # ceil(202 / 10)
    assert clocked.where("vc is not null or lamport is not null").count() == 0
    # detect's anomaly search skips it (it failed with an IndexError on the null clocks)
    assert find_violations(clocked, delivered_messages(messages, status)).count() == 0


@pytest.mark.slow
def test_detect_marks_a_cyclic_trace_of_the_distributed_engine_invalid(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Issue 17 through the stage commands (in this process's Spark): `clocks.engine:
    distributed` with small slabs gave the trace status ok with null clocks, and `detect`
    then failed with an IndexError."""
    path = write_jsonl(tmp_path / "cyclic_ping_pong.jsonl", cyclic_ping_pong_rows(99))
    profile = yaml.safe_load((ROOT / "conf" / "test.yml").read_text())
    profile["clocks"] = {**profile["clocks"], "engine": "distributed", "slab_events": 20}
    conf = tmp_path / "distributed.yml"
    conf.write_text(yaml.safe_dump(profile))
    warehouse = tmp_path / "warehouse"
    for command in (["ingest", str(path)], ["clocks"], ["detect"]):
        argv = [*command, "--warehouse", str(warehouse), "--conf", str(conf), "--quiet"]
        assert main(argv, session=spark) == 0, command
    (status,) = read_delta(warehouse / "trace_clocks").to_pylist()
    assert (status["engine"], status["status"]) == ("distributed", "INVALID")
    assert sorted(status["cycle"]) == ["X", "m0"]
    (summary,) = read_delta(warehouse / "trace_summary").to_pylist()
    assert (summary["order_class"], summary["n_events"]) == ("INVALID", 202)
    assert summary["n_causal_violations"] is None


@pytest.mark.slow
def test_distributed_rounds_do_not_grow_with_the_causal_chain(spark: SparkSession) -> None:
    """A ping-pong 10x longer (so 10x more slabs, each chain crossing every slab) costs the
    same number of Spark jobs, and its clocks are the closed form: the i-th event on a
    process knows every earlier event of the chain."""
    jobs = {}
    # warm up (Numba compilation, Python workers): timing decides whether an asynchronous
    # broadcast job lands in the counted group, so the counts may differ by one or two
    warm_events, warm_messages = frames(spark, [ping_pong("warm", 20)])
    with_clocks(
        warm_events, warm_messages, ClockSettings(engine="distributed", slab_events=10)
    ).events.collect()
    # 100 and 1 000 messages in slabs of 25 events: 8 and 80 slabs (the rounds count slabs,
    # not events, so the small slabs keep the 10x while the traces stay small)
    for length in (100, 1000):
        trace = ping_pong(f"pp{length}", length)
        events, messages = frames(spark, [trace])
        settings = ClockSettings(engine="distributed", slab_events=25)
        holder: dict[str, Any] = {}

        def run(
            events: DataFrame = events,
            messages: DataFrame = messages,
            settings: ClockSettings = settings,
            holder: dict[str, Any] = holder,
        ) -> None:
            holder["result"] = with_clocks(events, messages, settings)
            holder["rows"] = holder["result"].events.collect()

        jobs[length] = spark_jobs(spark, run)
        assert holder["result"].clock_passes == 3
        slabs = holder["result"].plan.agg(F.max("n_slabs")).first()[0]
        assert slabs == 2 * length // 25
        for e in holder["rows"]:
            # chain position k (1-based over the whole trace) = lamport; both ends know it all
            k = e.lamport
            assert sum(e.vc) == k
    # 8 slabs -> 80 slabs and a 10x longer chain: a round per slab or per hop would add at
    # least 72 jobs; the engine's count stays the same up to that scheduling noise
    assert abs(jobs[1000] - jobs[100]) <= 2, jobs


def test_components_are_computed_and_independent(
    random_set: tuple[list[Trace], DataFrame, DataFrame],
    compared_input: Compared,
    clocked_once: Clocked,
) -> None:
    traces = random_set[0]
    variant, events, messages = compared_input("timed", 1, False)
    _, status_rows = clocked_once(variant, events, messages, RANDOM_RUNS["per_trace"])
    status = {r.trace_id: r for r in status_rows.collect()}
    for trace in traces:
        graph = nx.Graph()
        graph.add_nodes_from(trace.lengths())
        graph.add_edges_from((m.src, m.dst) for m in trace.delivered())
        assert status[trace.trace_id].n_components == nx.number_connected_components(graph)
    assert max(status[t.trace_id].n_components for t in traces) > 1


RING = 128
COMPONENT_SEEDS = (3, 11)


@pytest.fixture(scope="module")
def components_both_ways(spark: SparkSession) -> tuple[Components, Components]:
    """One input for the component tests, solved once by each backend (joins, auto): a ring
    of RING processes, a 3-process trace with one edge, and for each of COMPONENT_SEEDS 60
    random process graphs (traces "s<seed>-t<i>"). Each test reads its own traces' labels."""
    vertices = [("ring", i) for i in range(RING)] + [("two", 0), ("two", 1), ("two", 2)]
    edges = [("ring", i, (i + 1) % RING) for i in range(RING)] + [("two", 0, 1)]
    for seed in COMPONENT_SEEDS:
        rng = random.Random(seed)
        for t in range(60):
            present = [p for p in range(rng.randint(1, 30)) if rng.random() < 0.9] or [0]
            vertices += [(f"s{seed}-t{t}", p) for p in present]
            edges += [
                (f"s{seed}-t{t}", rng.choice(present), rng.choice(present))
                for _ in range(rng.randint(0, len(present)))
            ]
    v = spark.createDataFrame(vertices, "trace_id string, pidx int")
    e = spark.createDataFrame(edges, "trace_id string, src_pidx int, dst_pidx int")
    return (
        connected_components(v, e, backend="joins"),
        connected_components(v, e, backend="auto"),
    )


@pytest.mark.slow
def test_components_by_joins_take_few_rounds_on_a_long_ring(
    components_both_ways: tuple[Components, Components],
) -> None:
    found = components_both_ways[0]
    rows = found.labels.where(F.col("trace_id").isin("ring", "two")).collect()
    labels = {(r.trace_id, r.pidx): r.component for r in rows}
    assert all(labels[("ring", i)] == 0 for i in range(RING))
    assert labels[("two", 0)] == labels[("two", 1)] == 0 and labels[("two", 2)] == 2
    # min-label propagation alone needs n/2 = 64 rounds on this ring; pointer jumping far fewer
    # (the rounds of the whole input, whose other graphs have at most 30 vertices)
    assert found.rounds <= 12, found.rounds


@pytest.mark.slow
@pytest.mark.parametrize("seed", COMPONENT_SEEDS)
def test_components_in_memory_per_trace_equal_the_joins(
    components_both_ways: tuple[Components, Components], seed: int
) -> None:
    joins, grouped = components_both_ways
    if grouped.backend == "graphframes":
        pytest.skip("auto picks GraphFrames here")
    assert grouped.backend == "grouped" and grouped.rounds == 1
    mine = F.col("trace_id").startswith(f"s{seed}-")
    assert joins.labels.where(mine).count() >= 60  # the seed's traces are there
    assert_df_equality(joins.labels.where(mine), grouped.labels.where(mine), ignore_row_order=True)


# ---------------------------------------------------------------------------------------------
# the kernel alone (no Spark): hypothesis against the closure


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_procs=st.integers(1, 6),
    n_steps=st.integers(1, 80),
    groups=st.integers(1, 3),
)
def test_kernel_matches_the_closure(seed: int, n_procs: int, n_steps: int, groups: int) -> None:
    trace = random_trace(random.Random(seed), "h", n_procs, n_steps, groups=groups)
    if not trace.events:
        return
    events = sorted(trace.events, key=lambda e: (e["pidx"], e["lseq"]))
    send = {
        (m["dst_pidx"], m["recv_lseq"]): (m["src_pidx"], m["send_lseq"])
        for m in trace.messages
        if m["status"] == "delivered"
    }
    pidx = np.array([e["pidx"] for e in events])
    lseq = np.array([e["lseq"] for e in events])
    sp = np.array([send.get((e["pidx"], e["lseq"]), (-1, -1))[0] for e in events])
    sl = np.array([send.get((e["pidx"], e["lseq"]), (-1, -1))[1] for e in events])
    vc, lamport = vector_clocks(pidx, lseq, sp, sl, len(trace.processes))
    expected = brute_clocks(trace)
    for row, e in enumerate(events):
        assert (int(lamport[row]), vc[row].tolist()) == expected[(e["process"], e["lseq"])]


def test_kernel_reports_a_cycle_of_receives() -> None:
    # p0: recv a, send b; p1: recv b, send a  -> each receive precedes its own send
    pidx = np.array([0, 0, 1, 1])
    lseq = np.array([1, 2, 1, 2])
    send_pidx = np.array([1, -1, 0, -1])
    send_lseq = np.array([2, -1, 2, -1])
    with pytest.raises(CausalCycleError) as raised:
        vector_clocks(pidx, lseq, send_pidx, send_lseq, 2)
    assert sorted(raised.value.receive_rows.tolist()) == [0, 2]


@pytest.mark.parametrize("seed", [3, 11])
def test_cycle_witness_without_clocks_is_the_dense_kernels(seed: int) -> None:
    """The witness search that computes no clocks (O(events) memory, what `trace_clocks`
    runs) finds the same receive rows as the dense kernel, and nothing on valid traces."""
    rng = random.Random(seed)
    found = valid = 0
    for i in range(40):
        trace = random_trace(rng, f"w{i}", rng.randint(2, 6), rng.randint(10, 80))
        broken = with_injected_cycle(trace, rng) if i % 3 else None
        pidx, lseq, sp, sl = _kernel_arrays(broken or trace)
        n = int(pidx.max()) + 1
        try:
            group_clocks(pidx, lseq, sp, sl, np.full(len(pidx), -1), n)
            expected = None
        except CausalCycleError as cycle:
            expected = cycle.receive_rows.tolist()
        got = cycle_witness(pidx, lseq, sp, sl, n)
        assert (None if got is None else got.tolist()) == expected, i
        found += expected is not None
        valid += expected is None
    assert found > 10 and valid > 5


def _kernel_arrays(trace: Trace) -> tuple[np.ndarray, ...]:
    events = sorted(trace.events, key=lambda e: (e["pidx"], e["lseq"]))
    send = {
        (m["dst_pidx"], m["recv_lseq"]): (m["src_pidx"], m["send_lseq"])
        for m in trace.messages
        if m["status"] == "delivered"
    }
    pidx = np.array([e["pidx"] for e in events], dtype=np.int64)
    lseq = np.array([e["lseq"] for e in events], dtype=np.int64)
    sp = np.array([send.get((e["pidx"], e["lseq"]), (-1, -1))[0] for e in events])
    sl = np.array([send.get((e["pidx"], e["lseq"]), (-1, -1))[1] for e in events])
    return pidx, lseq, sp, sl


@pytest.mark.parametrize("seed", [1, 7, 21])
def test_units_in_one_call_equal_one_call_per_unit(seed: int) -> None:
    rng = random.Random(seed)
    traces = [random_trace(rng, f"u{i}", rng.randint(1, 6), rng.randint(1, 60)) for i in range(12)]
    traces = [t for t in traces if t.events]
    # a unit whose matched ids form a cycle: its clocks are flagged, the others are unaffected
    cyclic = (np.array([0, 0, 1, 1]), np.array([1, 2, 1, 2]), np.array([1, -1, 0, -1]),
              np.array([2, -1, 2, -1]))  # fmt: skip
    units = [(_kernel_arrays(t), len(t.processes)) for t in traces]
    units.insert(len(units) // 2, (cyclic, 2))
    unit_row, unit_proc, proc, lseq, send_event = [0], [0], [], [], []
    for (pidx, lq, sp, sl), n in units:
        start = np.searchsorted(pidx, np.arange(n))
        rows = np.where(sp >= 0, unit_row[-1] + start[np.maximum(sp, 0)] + sl - 1, -1)
        proc.append(unit_proc[-1] + pidx)
        lseq.append(lq)
        send_event.append(rows)
        unit_row.append(unit_row[-1] + len(pidx))
        unit_proc.append(unit_proc[-1] + n)
    found = units_clocks(np.array(unit_row), np.array(unit_proc), np.concatenate(proc),
                         np.concatenate(lseq), np.concatenate(send_event))  # fmt: skip
    for u, ((pidx, lq, sp, sl), n) in enumerate(units):
        if n == 2 and pidx.tolist() == [0, 0, 1, 1] and sp.tolist() == [1, -1, 0, -1]:
            assert not found.ok[u]
            continue
        assert found.ok[u]
        vc, lamport = vector_clocks(pidx, lq, sp, sl, n)
        rows = range(unit_row[u], unit_row[u + 1])
        assert [found.lamport[r] for r in rows] == lamport.tolist()
        got = [found.vc[found.offsets[r] : found.offsets[r + 1]].tolist() for r in rows]
        assert got == vc.tolist()


def _random_slab(rng: np.random.Generator, trace: Trace, rewire: bool) -> tuple[Any, ...] | None:
    """One slab of `trace` (a random band of every process's events), as group_clocks inputs.

    Receives whose send lies in the band link to it; the others import their send
    (random clocks), some of them the same send (a multicast). Entries as in the
    distributed engine's pass 1: each process's last event before the band, and each
    distinct imported send. rewire: the in-band receives take random in-band sends,
    which can make causal cycles.
    """
    pidx, lseq, sp, sl = _kernel_arrays(trace)
    n = len(trace.processes)
    lo, hi = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for p in range(n):
        total = int(np.sum(pidx == p))
        lo[p], hi[p] = np.sort(rng.integers(0, total + 1, 2))
    keep = (lseq > lo[pidx]) & (lseq <= hi[pidx])
    if not np.any(keep):
        return None
    proc, lq, send_p, send_l = pidx[keep], lseq[keep], sp[keep], sl[keep]
    inside = (
        (send_p >= 0) & (send_l > lo[np.maximum(send_p, 0)]) & (send_l <= hi[np.maximum(send_p, 0)])
    )
    crossing = (send_p >= 0) & ~inside
    if rewire and np.any(inside):
        at = np.flatnonzero(inside)
        pick = rng.integers(0, len(proc), len(at))  # any in-band event, even the receive itself
        send_p[at], send_l[at] = proc[pick], lq[pick]
    send_p = np.where(inside, send_p, -1)
    send_l = np.where(inside, send_l, -1)
    import_of = np.full(len(proc), -1, np.int64)
    import_of[crossing] = np.arange(int(crossing.sum()))
    imports = int(crossing.sum())
    # imports naming the same send share an entry, as in _symbolic_slab
    keys = np.stack([sp[keep][crossing], sl[keep][crossing]], axis=1).reshape(-1, 2)
    _, import_key = np.unique(keys, axis=0, return_inverse=True)
    present = np.bincount(proc, minlength=n) > 0
    frontier = np.flatnonzero(present & (lo > 0))
    entry_first = np.full(n, -1, np.int64)
    entry_first[frontier] = np.arange(len(frontier))
    import_entry = (len(frontier) + import_key.reshape(-1)).astype(np.int64)
    if imports and rng.random() < 0.3:
        import_entry[rng.random(imports) < 0.3] = -1  # some imports not tracked
    seeds = Seeds(
        init_vc=rng.integers(0, 50, (n, n)).astype(np.int32),
        init_lamport=rng.integers(0, 50, n).astype(np.int64),
        import_vc=rng.integers(0, 50, (imports, n)).astype(np.int32),
        import_lamport=rng.integers(0, 50, imports).astype(np.int64),
        entry_first=entry_first,
        import_entry=import_entry,
        n_entries=len(frontier) + int(import_key.max(initial=-1)) + 1,
    )
    return proc, lq, send_p, send_l, import_of, n, seeds


@pytest.mark.parametrize("seed", [2, 5, 13, 40])
def test_export_kernel_rows_equal_the_dense_kernel(seed: int) -> None:
    """Pass 1's kernel (rolling rows, a pool of in-flight sends) against the dense kernel: the
    same vc, lamport and dist at random wanted rows of random slabs, the same cycle witness."""
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    compared = cycles = 0
    for i in range(120):
        trace = random_trace(rng, f"k{i}", rng.randint(1, 7), rng.randint(1, 120),
                             groups=rng.choice([1, 1, 2]), self_send=rng.choice([0.0, 0.1]))  # fmt: skip
        if not trace.events:
            continue
        slab = _random_slab(gen, trace, rewire=i % 3 == 2)
        if slab is None:
            continue
        proc = slab[0]
        rows = np.flatnonzero(gen.random(len(proc)) < gen.choice([0.1, 0.5, 1.0]))
        rows = gen.permutation(rows)
        try:
            dense = group_clocks(*slab)
        except CausalCycleError as dense_error:
            with pytest.raises(CausalCycleError) as raised:
                export_clocks(*slab, rows)
            assert raised.value.receive_rows.tolist() == dense_error.receive_rows.tolist(), (
                f"seed {seed}, trace {i}"
            )
            cycles += 1
            continue
        found = export_clocks(*slab, rows)
        assert np.array_equal(found.vc, dense.vc[rows]), f"seed {seed}, trace {i}: vc"
        assert np.array_equal(found.lamport, dense.lamport[rows]), f"seed {seed}, trace {i}"
        assert np.array_equal(found.dist, dense.dist[rows]), f"seed {seed}, trace {i}: dist"
        compared += int(len(rows) > 0 and dense.dist.size > 0)
    assert compared > 40 and cycles > 4  # both paths were exercised


def _batch_tables(traces: list[Trace]) -> tuple[pa.Table, pa.Table]:
    """The per-trace engine's UDF inputs (`_narrow_events`' rows and the links) for whole
    single-component traces, unit i = traces[i]: events with codes, links with the receive
    links and one name row per (trace, process, source)."""
    events_schema = pa.schema(
        [("unit", pa.int32()), ("pidx", pa.int32()), ("lseq", pa.int64()),
         ("kind_code", pa.int8()), ("ts", pa.float64()), ("label", pa.string()),
         ("n_msgs", pa.int32()), ("seq", pa.int64()), ("line", pa.int64()),
         ("source_code", pa.int32())]
    )  # fmt: skip
    links_schema = pa.schema(
        [("unit", pa.int32()), ("pidx", pa.int32()), ("lseq", pa.int64()),
         ("peer_pidx", pa.int32()), ("peer_lseq", pa.int64()), ("trace_id", pa.string()),
         ("n_processes", pa.int32()), ("proc_events", pa.int64()), ("process", pa.string()),
         ("source", pa.string()), ("source_code", pa.int32())]
    )  # fmt: skip
    kinds = {"send": 0, "receive": 1, "internal": 2}
    rows, links = [], []
    for unit, t in enumerate(traces):
        n = max(e["pidx"] for e in t.events) + 1
        counts = Counter(e["pidx"] for e in t.events)
        sources = {(e["pidx"], e["process"], e["source"]) for e in t.events}
        code = {
            (pidx, source): rank
            for pidx in range(n)
            for rank, source in enumerate(sorted({s for q, _, s in sources if q == pidx}))
        }
        for e in t.events:
            rows.append({**e, "unit": unit, "kind_code": kinds[e["kind"]],
                         "source_code": code[e["pidx"], e["source"]]})  # fmt: skip
        links += [
            {"unit": unit, "pidx": m["dst_pidx"], "lseq": m["recv_lseq"],
             "peer_pidx": m["src_pidx"], "peer_lseq": m["send_lseq"]}
            for m in t.messages
            if m["status"] == "delivered"
        ]  # fmt: skip
        links += [
            {"unit": unit, "pidx": pidx, "trace_id": t.trace_id, "n_processes": n,
             "proc_events": counts[pidx], "process": process, "source": source,
             "source_code": code[pidx, source]}
            for pidx, process, source in sorted(sources, key=lambda r: (r[0], str(r[1]), r[2]))
        ]  # fmt: skip
    return (
        pa.Table.from_pylist(rows, schema=events_schema),
        pa.Table.from_pylist(links, schema=links_schema),
    )


def _cyclic_trace() -> Trace:
    """a receives m1 before sending m2; b receives m2 before sending m1."""
    trace = Trace("cyclic", ["a", "b"])
    for p, pidx in (("a", 0), ("b", 1)):
        for lseq, kind in ((1, "receive"), (2, "send")):
            trace.events.append(
                {"trace_id": "cyclic", "process": p, "pidx": pidx, "lseq": lseq, "kind": kind,
                 "ts": None, "label": None, "n_msgs": int(kind == "send"), "seq": lseq,
                 "source": "t", "line": 1, "lamport": None, "vc": None}
            )  # fmt: skip
    for msg, src, dst in (("m1", 1, 0), ("m2", 0, 1)):
        trace.messages.append(
            {"msg_id": msg, "src_pidx": src, "dst_pidx": dst, "send_lseq": 2, "recv_lseq": 1,
             "status": "delivered"}
        )  # fmt: skip
    return trace


@pytest.mark.parametrize("parts", [2, 3, 5], ids=["2-parts", "3-parts", "5-parts"])
def test_output_parts_return_the_whole_units_rows(parts: int) -> None:
    """Each output part gets an lseq share of every process and all the links (some parts
    miss a process's events entirely); together they return exactly the rows of one call
    over the whole units, a cyclic unit's nulls included."""
    rng = random.Random(parts)
    traces = [random_trace(rng, f"s{i}", rng.randint(2, 6), rng.randint(5, 80)) for i in range(8)]
    traces = [t for t in traces if t.events] + [_cyclic_trace()]
    events, links = _batch_tables(traces)
    counts = Counter((e["trace_id"], e["pidx"]) for t in traces for e in t.events)
    proc_events = np.array([counts[e["trace_id"], e["pidx"]] for t in traces for e in t.events])
    share = (events.column("lseq").to_numpy() - 1) * parts // proc_events
    split = pa.concat_tables(
        _plain(_batch_clocks(events.filter(pa.array(share == k)), links)) for k in range(parts)
    )
    whole = _plain(_batch_clocks(events, links))
    key = [("trace_id", "ascending"), ("pidx", "ascending"), ("lseq", "ascending")]
    assert split.sort_by(key).to_pylist() == whole.sort_by(key).to_pylist()
    assert len(whole) == len(events)
    cyclic = whole.filter(pc.equal(whole.column("trace_id"), "cyclic"))
    assert cyclic.column("vc").null_count == len(cyclic) == 4
    # some part lacks every event of some process, so its layout comes from the name rows
    present = {
        (traces[r["unit"]].trace_id, r["pidx"], k)
        for k in range(parts)
        for r in events.filter(pa.array(share == k)).select(["unit", "pidx"]).to_pylist()
    }
    assert any(
        (t.trace_id, e["pidx"], k) not in present
        for t in traces
        for e in t.events
        for k in range(parts)
    )


def test_batch_rebuilds_the_event_columns_from_codes() -> None:
    """Events travel as codes (unit, kind, source among its process's sources) and come
    back with exactly the columns they were recorded with: several sources per process,
    units of one trace name apart, a null label and ts kept; the strings are dictionary
    columns, decoded by `_plain`."""
    rng = random.Random(11)
    traces = [random_trace(rng, f"r{i}", rng.randint(1, 5), rng.randint(1, 60)) for i in range(6)]
    traces = [t for t in traces if t.events]
    for t in traces:
        for e in t.events:
            e["source"] = rng.choice([f"{t.trace_id}.jsonl", "rotated.jsonl", "z/older.jsonl"])
            e["label"] = rng.choice([None, "x", "commit"])
    events, links = _batch_tables(traces)
    got = _batch_clocks(events, links)
    for name in ("trace_id", "process", "kind", "source"):
        assert pa.types.is_dictionary(got.schema.field(name).type), name
    plain = _plain(got)
    body = [f.name for f in plain.schema if f.name not in ("lamport", "vc")]
    assert plain.select(body).to_pylist() == [
        # these events record no clock: recorded_vc comes back null
        {name: e.get(name) for name in body}
        for t in traces
        for e in t.events
    ]
    assert plain.schema == tables.to_arrow(tables.udf_schema(tables.EVENTS))
    assert len({e["source"] for t in traces for e in t.events if e["pidx"] == 0}) > 1


@pytest.mark.parametrize("other", ["someone-else", None], ids=["renamed", "null"])
def test_batch_rejects_two_process_names_for_one_pidx(other: str | None) -> None:
    rng = random.Random(3)
    trace = random_trace(rng, "twice", 3, 30)
    renamed = next(e for e in trace.events if e["pidx"] == 1)
    renamed["process"] = other
    events, links = _batch_tables([trace])
    with pytest.raises(ValueError, match="process index 1 has two process names"):
        _batch_clocks(events, links)


def test_dictionary_columns_keep_nulls_out_of_the_dictionary() -> None:
    """A null value is a null row, never a dictionary entry (Parquet cannot write one)."""
    built = _dictionary(np.array([0, 1, 2, 1, 0]), pa.array(["a", None, "b"]))
    assert built.to_pylist() == ["a", None, "b", None, "a"]
    assert built.null_count == 2 and built.dictionary.null_count == 0


@pytest.mark.slow
@pytest.mark.parametrize("written", [False, True], ids=["cogroup", "in-place"])
def test_an_lseq_beyond_its_process_fails_the_run(
    random_set: tuple[list[Trace], DataFrame, DataFrame], tmp_path: Path, written: bool
) -> None:
    """An event whose lseq is past its process's event count fails the run. Cogrouped, it
    reaches its own unit's task (its output part is clamped), which rejects it, rather
    than another unit's; clocked in place (with a writer), the task holding it checks it
    against the staged name rows the same way."""
    _, events, messages = random_set
    broken = events.withColumn(
        "lseq",
        F.when((F.col("trace_id") == "r03") & (F.col("pidx") == 0) & (F.col("lseq") == 1),
               F.lit(10_000)).otherwise(F.col("lseq")),
    )  # fmt: skip
    result = with_clocks(
        broken, messages, ClockSettings(engine="per_trace", slab_events=10, output_parts=3)
    )
    writer = FileWriter("events", str(tmp_path / "out"), scratch=str(tmp_path / "scratch"))
    with pytest.raises(Exception, match=r"lseq is outside 1\.\.its process.s event count"):
        (result.run_and_write(writer) if written else result.events).collect()


def _padded_cycle(trace_id: str, pad: int) -> Trace:
    """`_cyclic_trace`'s cycle (a receives m1 before sending m2, b receives m2 before
    sending m1) followed by `pad` internal events on each process: an INVALID component
    of 4 + 2 * pad events."""
    trace = Trace(trace_id, ["a", "b"])
    for p, pidx in (("a", 0), ("b", 1)):
        kinds = ["receive", "send"] + ["internal"] * pad
        for lseq, kind in enumerate(kinds, start=1):
            trace.events.append(
                {"trace_id": trace_id, "process": p, "pidx": pidx, "lseq": lseq, "kind": kind,
                 "ts": None, "label": None, "n_msgs": int(kind == "send"), "seq": lseq,
                 "source": "t", "line": len(trace.events) + 1, "lamport": None, "vc": None}
            )  # fmt: skip
    for msg, src, dst in (("m1", "b", "a"), ("m2", "a", "b")):
        trace.messages.append(
            {"trace_id": trace_id, "msg_id": msg, "src": src, "dst": dst,
             "src_pidx": int(src == "b"), "dst_pidx": int(dst == "b"), "send_lseq": 2,
             "recv_lseq": 1, "send_ts": None, "recv_ts": None, "size_bytes": 0,
             "status": "delivered"}
        )  # fmt: skip
    return trace


@pytest.fixture(scope="module")
def in_place_input(
    spark: SparkSession,
    samples: tuple[DataFrame, DataFrame],
    random_set: tuple[list[Trace], DataFrame, DataFrame],
) -> Callable[[bool], tuple[DataFrame, DataFrame, DataFrame]]:
    """The random traces and a padded cycle (mixed: and the samples), in 7 partitions, with
    the events of each unit; built once per `mixed` for the cases that share it."""
    memo: dict[bool, tuple[DataFrame, DataFrame, DataFrame]] = {}

    def build(mixed: bool) -> tuple[DataFrame, DataFrame, DataFrame]:
        if mixed not in memo:
            _, events, messages = random_set
            cycle_events, cycle_messages = frames(spark, [_padded_cycle("cycle", 10)])
            events = events.unionByName(cycle_events)
            messages = messages.unionByName(cycle_messages)
            if mixed:  # the samples' 4-event units stay below slab_events
                events = events.unionByName(samples[0])
                messages = messages.unionByName(samples[1])
            events = events.repartition(7).localCheckpoint()
            plan = with_clocks(events, messages, ENGINES["per_trace"]).plan
            sizes = plan.groupBy("trace_id", "component").agg(F.sum("proc_events").alias("n"))
            memo[mixed] = (events, messages, sizes.localCheckpoint())
        return memo[mixed]

    return build


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mixed", "parts"),
    [(False, 2), (False, 3), (True, 2)],
    ids=["all-in-place-2", "all-in-place-3", "mixed-2"],
)
def test_units_clocked_in_place_give_the_cogrouped_rows(
    spark: SparkSession,
    in_place_input: Callable[[bool], tuple[DataFrame, DataFrame, DataFrame]],
    tmp_path: Path,
    mixed: bool,
    parts: int,
) -> None:
    """With a writer, whole units above slab_events are clocked where their events are
    read (`_in_place_pass`: links staged under the scratch folder, no shuffle of the
    events, the units' output parts or the default parallelism in tasks); the smaller
    ones still go through the cogroup. The files hold exactly the rows of the cogrouped
    events, those of an INVALID (cyclic) unit clocked in place too."""
    events, messages, sizes = in_place_input(mixed)
    smallest = sizes.agg(F.min("n")).first()[0]
    slab_events = 7 if mixed else smallest - 1  # all units in place unless mixed
    settings = ClockSettings(engine="per_trace", slab_events=slab_events, output_parts=parts)
    result = with_clocks(events, messages, settings)
    writer = FileWriter("events", str(tmp_path / "out"), scratch=str(tmp_path / "scratch"))
    written = result.run_and_write(writer)
    assert list((tmp_path / "scratch").glob("clock-links-*/batch=*/part-*.parquet"))
    big = sizes.where(F.col("n") > slab_events)
    assert big.where(F.col("trace_id") == "cycle").count() == 1  # the cycle is in place
    if mixed:
        assert 0 < big.count() < sizes.count()
    else:
        assert big.count() == sizes.count()  # only in-place units: one coalesced mapInArrow
        wanted = big.agg(F.sum(F.least(F.ceil(F.col("n") / slab_events), F.lit(parts)))).first()
        tasks = max(wanted[0], spark.sparkContext.defaultParallelism)
        assert written.rdd.getNumPartitions() == min(7, tasks)
    files = [row["path"] for row in written.collect()]
    assert sum(pq.read_metadata(f).num_rows for f in files) == events.count()
    got = spark.read.schema(tables.table_schema("events")).parquet(*files)
    assert got.where((F.col("trace_id") == "cycle") & F.col("vc").isNull()).count() == 24
    assert_df_equality(got, result.events, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.parametrize("seed", [0, 1], ids=["seed-0", "seed-1"])
def test_batch_returns_rows_in_the_order_given(seed: int) -> None:
    """The kernel writes each row's clocks at the row's own position: events given in any
    order (several units interleaved, a cyclic one among them) come back in that order,
    each with the clocks it gets when the batch is given sorted."""
    rng = random.Random(seed)
    traces = [random_trace(rng, f"o{i}", rng.randint(2, 6), rng.randint(5, 60)) for i in range(6)]
    traces = [t for t in traces if t.events] + [_cyclic_trace()]
    events, links = _batch_tables(traces)
    order = list(range(len(events)))
    rng.shuffle(order)
    shuffled = events.take(pa.array(order))
    got = _plain(_batch_clocks(shuffled, links))
    key = ["trace_id", "pidx", "lseq"]
    assert got.select(key).to_pylist() == [
        {"trace_id": traces[r["unit"]].trace_id, "pidx": r["pidx"], "lseq": r["lseq"]}
        for r in shuffled.to_pylist()
    ]
    expected = {
        (r["trace_id"], r["pidx"], r["lseq"]): (r["lamport"], r["vc"])
        for r in _plain(_batch_clocks(events, links)).to_pylist()
    }
    assert [(r["lamport"], r["vc"]) for r in got.to_pylist()] == [
        expected[(r["trace_id"], r["pidx"], r["lseq"])] for r in got.to_pylist()
    ]


@pytest.mark.slow
@pytest.mark.parametrize("parts", [2, 3], ids=["2-parts", "3-parts"])
def test_split_output_gives_identical_tables(
    samples: tuple[DataFrame, DataFrame],
    random_set: tuple[list[Trace], DataFrame, DataFrame],
    clocked_once: Clocked,
    parts: int,
) -> None:
    """Components above slab_events (here nearly all) are written by up to `parts` groups;
    the events table equals the one-group-per-component table, INVALID components too."""
    _, events, messages = random_set
    events = events.unionByName(samples[0])
    messages = messages.unionByName(samples[1])
    # the one-group table once for both part counts
    whole, _ = clocked_once(
        "random+samples", events, messages, ClockSettings(engine="per_trace", output_parts=1)
    )
    split = with_clocks(
        events, messages, ClockSettings(engine="per_trace", slab_events=7, output_parts=parts)
    )
    assert_df_equality(whole, split.events, ignore_row_order=True, ignore_nullable=True)


def test_group_keys_put_the_parts_of_a_unit_in_distinct_partitions(spark: SparkSession) -> None:
    """Group (batch b, part k) lands in shuffle partition (b + k) mod partitions, by Spark's
    own hash partitioning of the key (what a cogroup's exchange does)."""
    batches, parts = 6, 3
    keys = _group_keys(spark, batches, parts)
    assert len(set(keys)) == len(keys) == batches * parts
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or "1")
    placed = (
        spark.createDataFrame([(k,) for k in keys], "key int")
        .repartition(partitions, "key")
        .select("key", F.spark_partition_id().alias("partition"))
        .collect()
    )
    where = {r["key"]: r["partition"] for r in placed}
    for b in range(batches):
        for k in range(parts):
            assert where[keys[b * parts + k]] == (b + k) % partitions, (b, k)


def test_slab_of_compiled_sum_counts_the_starts_like_the_array_filter(
    spark: SparkSession,
) -> None:
    rng = random.Random(7)
    rows = []
    for _ in range(400):
        starts = sorted(rng.sample(range(2, 60), rng.randint(0, 9)))
        rows.append((rng.randint(1, 61), starts))
    frame = spark.createDataFrame(rows, "lseq long, bounds array<long>")
    lseq, bounds = F.col("lseq"), F.col("bounds")
    counted = frame.select(
        "lseq",
        "bounds",
        _slab_of(lseq, bounds, 9).alias("slab"),
    )
    filtered = frame.select("lseq", "bounds", _slab_of(lseq, bounds).alias("slab"))
    assert_df_equality(counted, filtered, ignore_row_order=True, ignore_nullable=True)
    by_hand = [(lseq_, starts, sum(b <= lseq_ for b in starts)) for lseq_, starts in rows]
    assert sorted(tuple(r) for r in counted.collect()) == sorted(by_hand)


def _units_layout(units: list[tuple[tuple[np.ndarray, ...], int]]) -> tuple[np.ndarray, ...]:
    """units_clocks_at inputs (unit_row, unit_proc, length, send_event) of consecutive units."""
    unit_row, unit_proc, length, send_event = [0], [0], [], []
    for (pidx, _lq, sp, sl), n in units:
        start = np.searchsorted(pidx, np.arange(n))
        send_event.append(np.where(sp >= 0, unit_row[-1] + start[np.maximum(sp, 0)] + sl - 1, -1))
        length.append(np.bincount(pidx, minlength=n))
        unit_row.append(unit_row[-1] + len(pidx))
        unit_proc.append(unit_proc[-1] + n)
    return (np.array(unit_row), np.array(unit_proc), np.concatenate(length),
            np.concatenate(send_event))  # fmt: skip


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_rolling_kernel_gives_the_dense_kernels_rows(seed: int) -> None:
    """A unit above dense_max_cells keeps only the rows it still needs; the wanted rows, in
    any output order, are those of the dense kernel: one unit alone (its output buffer is
    returned as is), and several units with a cyclic one among them."""
    rng = random.Random(seed)
    cyclic = (np.array([0, 0, 1, 1]), np.array([1, 2, 1, 2]), np.array([1, -1, 0, -1]),
              np.array([2, -1, 2, -1]))  # fmt: skip
    traces = [random_trace(rng, f"r{i}", rng.randint(1, 7), rng.randint(1, 90)) for i in range(10)]
    units = [(_kernel_arrays(t), len(t.processes)) for t in traces if t.events]
    units.insert(3, (cyclic, 2))
    for batch in ([units[0]], [units[4]], units):
        unit_row, unit_proc, length, send_event = _units_layout(batch)
        rows = int(unit_row[-1])
        for _ in range(4):
            wanted = np.array(sorted(rng.sample(range(rows), rng.randint(1, rows))))
            out_pos = np.array(rng.sample(range(len(wanted)), len(wanted)))
            dense = units_clocks_at(unit_row, unit_proc, length, send_event, wanted, out_pos)
            rolling = units_clocks_at(
                unit_row, unit_proc, length, send_event, wanted, out_pos, dense_max_cells=0
            )
            # by share: units with at most 3/4 of their rows wanted roll, the others not
            shared = units_clocks_at(
                unit_row, unit_proc, length, send_event, wanted, out_pos, rolling_min_cells=0
            )
            valid = dense.ok[np.searchsorted(unit_row, wanted[np.argsort(out_pos)], "right") - 1]
            cells = np.repeat(valid, np.diff(dense.offsets))
            for found in (rolling, shared):
                assert np.array_equal(found.ok, dense.ok)
                assert np.array_equal(found.offsets, dense.offsets)
                assert np.array_equal(found.lamport[valid], dense.lamport[valid])
                assert np.array_equal(found.vc[cells], dense.vc[cells])
        if len(batch) > 1:
            assert not dense.ok.all()  # the cyclic unit is flagged, the others are not


def test_rolling_kernel_is_chosen_by_size_and_wanted_share() -> None:
    # (rows, n, wanted rows, dense_max_cells, rolling_min_cells)
    assert _rolling(100, 10, 100, 999, 0)  # too large for a dense matrix
    assert _rolling(100, 10, 75, 10_000, 1000)  # large, 3/4 of its rows wanted
    assert not _rolling(100, 10, 76, 10_000, 1000)  # more than 3/4 wanted
    assert not _rolling(100, 10, 10, 10_000, 1001)  # small: dense whatever is wanted
    assert _rolling(10**7, 64, 5 * 10**6, DENSE_MAX_CELLS, ROLLING_MIN_CELLS)  # one of 2 parts
    assert not _rolling(1000, 8, 500, DENSE_MAX_CELLS, ROLLING_MIN_CELLS)  # a small trace


@pytest.mark.parametrize(
    ("proc", "lseq", "send_proc", "send_lseq", "message"),
    [
        (
            [0, 0, 1],
            [1, 3, 1],
            [-1, -1, -1],
            [-1, -1, -1],
            "process index 0: expected lseq 2, found 3",
        ),
        (
            [0, 1, 0],
            [1, 1, 2],
            [-1, -1, -1],
            [-1, -1, -1],
            "process index 0: expected lseq 3, found 2",
        ),
        ([0, 0, 2], [1, 2, 1], [-1, -1, -1], [-1, -1, -1], r"process index 2 is outside 0\.\.1"),
        ([0, 0, 1], [1, 2, 1], [-1, -1, 0], [-1, -1, 3], "names a send that is not among"),
        ([0, 0, 1], [1, 2, 1], [-1, -1, 5], [-1, -1, 1], "names a send that is not among"),
    ],
    ids=["gap", "unsorted", "process-out-of-range", "send-beyond", "sender-out-of-range"],
)
def test_group_clocks_rejects_rows_that_are_not_a_group(
    proc: list[int], lseq: list[int], send_proc: list[int], send_lseq: list[int], message: str
) -> None:
    with pytest.raises(GroupShapeError, match=message):
        group_clocks(np.array(proc), np.array(lseq), np.array(send_proc), np.array(send_lseq),
                     np.full(3, -1), 2)  # fmt: skip


def test_the_clocks_benchmark_builds_tables_the_clocks_job_takes(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/clocks.py writes its events and messages with Arrow, not through a run: they
    must have the product's schema (a column added to `events` broke it once) and commit as
    a run, or the clocks job's repair check refuses them (it broke so once too). The job
    then clocks the bench's ping-pong chain: Lamport 1..2m along it."""
    import importlib.util
    import sys

    from causal_spark.app.runs import run_job
    from causal_spark.app.stages import clocks_stage
    from causal_spark.config import load_config
    from causal_spark.sinks import Warehouse

    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # bench/ is not a package
    spec = importlib.util.spec_from_file_location("bench_clocks", ROOT / "bench" / "clocks.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)
    spec.loader.exec_module(bench)

    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    assert bench.build_tables(bench.ping_pong_raw(20), warehouse) == 40
    events = read_delta(warehouse / "events")
    assert events.schema.names == tables.arrow_schema(tables.EVENTS).names
    config = load_config(ROOT / "conf" / "test.yml")
    run_job(
        "clocks",
        [clocks_stage()],
        spark=spark,
        config=config,
        warehouse=Warehouse(spark, warehouse, "deltalake"),
    )
    clocked = read_delta(warehouse / "events")
    assert sorted(clocked.column("lamport").to_pylist()) == list(range(1, 41))
