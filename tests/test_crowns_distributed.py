"""The distributed crown method (slabs) against the per-trace kernel, with and without Spark.

Kernels: the three slab rounds chained in plain Python over random traces
with random slab assignments (even ones that interleave a process's events
across slabs) give the per-trace kernel's components. Spark: both methods
give the same `crown_members` and component sizes on random and worked
traces, the distributed witnesses are crowns by the vector clocks and
`shortest` only when they are, and a chain 10x longer costs the same
number of Spark jobs.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chispa import assert_df_equality
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark.anomalies import (
    MissingClocksError,
    delivered_messages,
    find_crowns,
    invalid_crowns,
)
from causal_spark.anomalies import crown_kernel as CK
from causal_spark.anomalies import slab_kernel as D
from causal_spark.clocks import trace_clock_status, with_clocks
from causal_spark.clocks.components import GraphFramesUnavailable, graphframes_available
from causal_spark.config import ClockSettings, DetectSettings
from tests.conftest import read_delta
from tests.helpers import spark_jobs
from tests.random_traces import Trace, frames, random_trace
from tests.reference_order import happened_before_sets
from tests.test_anomalies import brute_findings, is_crown

# ---------------------------------------------------------------------------------------------
# kernels, no Spark: the three rounds chained by hand


def slab_method_labels(
    src: np.ndarray, send: np.ndarray, dst: np.ndarray, recv: np.ndarray, slab_of: Any
) -> np.ndarray:
    """The component label of each message by the slab rounds; `slab_of(pidx, lseq)` any."""
    node = (src << D.NODE_SHIFT) + send
    rows = [(int(src[i]), int(send[i]), int(node[i]), i, True) for i in range(len(src))]
    rows += [(int(dst[i]), int(recv[i]), int(node[i]), i, False) for i in range(len(src))]
    slab = [slab_of(p, q) for p, q, *_ in rows]
    cross_msg = {i for i in range(len(src)) if slab_of(src[i], send[i]) != slab_of(dst[i], recv[i])}
    by_process: dict[int, list[int]] = {}
    for r, row in enumerate(rows):
        by_process.setdefault(row[0], []).append(r)
    port = [rows[r][3] in cross_msg for r in range(len(rows))]
    across = []
    for rs in by_process.values():
        rs.sort(key=lambda r: (rows[r][1], rows[r][3]))
        for a, b in itertools.pairwise(rs):
            if slab[a] != slab[b]:
                port[a] = port[b] = True
                across.append((slab[a], rows[a][2], slab[b], rows[b][2]))
    links = []
    for i in cross_msg:
        s, r = slab_of(src[i], send[i]), slab_of(dst[i], recv[i])
        links += [(s, int(node[i]), r, int(node[i])), (r, int(node[i]), s, int(node[i]))]
    edges = across + links
    slabs = sorted(set(slab))
    for s in slabs:
        mine = [r for r in range(len(rows)) if slab[r] == s]
        a, b = D.slab_port_edges(
            np.array([rows[r][0] for r in mine]), np.array([rows[r][1] for r in mine]),
            np.array([rows[r][2] for r in mine]), np.array([port[r] for r in mine]),
        )  # fmt: skip
        edges += [(s, int(x), s, int(y)) for x, y in zip(a, b, strict=True)]
    cols = np.array(edges, dtype=np.int64).reshape(-1, 4)
    v_slab, v_node, topo = D.port_graph_order(cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3])
    label = np.empty(len(src), dtype=np.int64)
    for s in slabs:
        mine = [r for r in range(len(rows)) if slab[r] == s]
        here = v_slab == s
        got = D.slab_labels(
            s, np.array([rows[r][0] for r in mine]), np.array([rows[r][1] for r in mine]),
            np.array([rows[r][2] for r in mine]), v_node[here], topo[here],
        )  # fmt: skip
        for r, g in zip(mine, got, strict=True):
            if rows[r][4]:
                label[rows[r][3]] = g
    return label


def partition(labels: np.ndarray, keep: np.ndarray) -> set[frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for i, g in enumerate(labels):
        if keep[i]:
            groups.setdefault(int(g), set()).add(i)
    return {frozenset(v) for v in groups.values()}


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_procs=st.integers(2, 6),
    n_steps=st.integers(5, 160),
    slabs=st.integers(1, 7),
    scatter=st.booleans(),
)
def test_slab_rounds_give_the_per_trace_components(
    seed: int, n_procs: int, n_steps: int, slabs: int, scatter: bool
) -> None:
    rng = random.Random(seed)
    trace = random_trace(rng, "t", n_procs, n_steps, multicast=0.3)
    msgs = trace.delivered()
    if not msgs:
        return
    index = {p: i for i, p in enumerate(trace.processes)}
    src = np.array([index[m.src] for m in msgs], dtype=np.int64)
    dst = np.array([index[m.dst] for m in msgs], dtype=np.int64)
    send = np.array([m.send_lseq for m in msgs], dtype=np.int64)
    recv = np.array([m.recv_lseq for m in msgs], dtype=np.int64)
    width = max(1, max(trace.lengths().values()) // slabs + 1)
    # bands of lseq, or (scatter) any slab for any event: a process's events interleave
    assignment: dict[tuple[int, int], int] = {}

    def slab_of(p: int, q: int) -> int:
        if not scatter:
            return int(q) // width
        return assignment.setdefault((int(p), int(q)), rng.randrange(slabs))

    labels = slab_method_labels(src, send, dst, recv, slab_of)
    found = CK.crown_components(n_procs, src, send, dst, recv, 10**9)
    ours = partition(found.component, found.component >= 0)
    node = (src << D.NODE_SHIFT) + send
    n_nodes = {g: len({int(node[i]) for i in range(len(msgs)) if labels[i] == g}) for g in labels}
    theirs = partition(labels, np.array([n_nodes[g] > 1 for g in labels]))
    assert theirs == ours, (seed, slabs, scatter)
    # and the whole partition into components, crowns or not, agrees with Tarjan's
    assert partition(labels, np.ones(len(msgs), bool)) >= ours


def test_a_component_alone_keeps_its_crowns() -> None:
    """The witness search on one component's messages alone finds that component whole, and a
    crown of the girth of the whole trace's relation (paths stay inside the component)."""
    checked = 0
    for seed in range(60):
        rng = random.Random(seed)
        trace = random_trace(rng, "t", rng.randint(3, 6), rng.randint(40, 150))
        msgs = trace.delivered()
        brute = brute_findings(trace)
        future = happened_before_sets(trace.lengths(), msgs)
        index = {p: i for i, p in enumerate(trace.processes)}
        for ids in brute.components:
            part = [m for m in msgs if m.msg_id in ids]
            found = CK.crown_components(
                len(index), [index[m.src] for m in part], [m.send_lseq for m in part],
                [index[m.dst] for m in part], [m.recv_lseq for m in part], 10**9,
            )  # fmt: skip
            assert found.n_components == 1 and (found.component == 0).all(), seed
            crown = [part[r] for r in found.crown]
            assert is_crown(crown, future), seed
            assert len(crown) == brute.girth[ids], seed
            checked += 1
    assert checked > 20


# ---------------------------------------------------------------------------------------------
# Spark: both methods, same tables


def clocked(events: DataFrame, messages: DataFrame) -> tuple[DataFrame, DataFrame]:
    result = with_clocks(events, messages, ClockSettings(engine="per_trace"))
    events_out = result.events.localCheckpoint()
    status = trace_clock_status(events_out, events, messages, result.plan).localCheckpoint()
    return events_out, delivered_messages(messages, status)


def per_trace_crowns(delivered: DataFrame, budget: int = 10**9) -> Any:
    return find_crowns(delivered, budget, settings=DetectSettings(crown_engine="per_trace"))


def slab_crowns(events: DataFrame, delivered: DataFrame, slab_events: int, budget: int) -> Any:
    return find_crowns(
        delivered,
        budget,
        events=events,
        settings=DetectSettings(
            crown_engine="distributed", slab_events=slab_events, crown_graph_backend="slabs"
        ),
    )


def both(
    events: DataFrame, delivered: DataFrame, slab_events: int, budget: int = 10**9
) -> tuple[Any, Any]:
    return per_trace_crowns(delivered, budget), slab_crowns(events, delivered, slab_events, budget)


def assert_same_components(per_trace: Any, distributed: Any) -> None:
    assert_df_equality(
        per_trace.members, distributed.members,
        ignore_row_order=True, ignore_nullable=True, ignore_metadata=True,
    )  # fmt: skip
    keys = ["trace_id", "scc_id", "scc_size"]
    assert_df_equality(
        per_trace.crowns.select(*keys), distributed.crowns.select(*keys),
        ignore_row_order=True, ignore_nullable=True, ignore_metadata=True,
    )  # fmt: skip
    # a witness proved shortest has the girth: its length is the per-trace one's
    a = {(r.trace_id, r.scc_id): r for r in per_trace.crowns.collect()}
    b = {(r.trace_id, r.scc_id): r for r in distributed.crowns.collect()}
    for key, mine in b.items():
        assert mine.k == len(mine.crown) >= 2
        if mine.shortest:
            assert a[key].shortest and mine.k == a[key].k, key
        else:
            assert mine.k >= a[key].k, key


@pytest.fixture(scope="module")
def random_set(spark: SparkSession) -> tuple[list[Trace], DataFrame, DataFrame]:
    rng = random.Random(17)
    traces = [
        random_trace(rng, f"r{i:02d}", n_procs=rng.randint(2, 6), n_steps=rng.randint(30, 160),
                     groups=rng.choice([1, 1, 2]), self_send=rng.choice([0.0, 0.1]))
        for i in range(10)
    ]  # fmt: skip
    events, messages = frames(spark, traces)
    clocked_events, delivered = clocked(events, messages)
    return traces, clocked_events, delivered


@pytest.fixture(scope="module")
def random_per_trace(random_set: tuple[list[Trace], DataFrame, DataFrame]) -> Any:
    """The per-trace method's tables of the random traces (checkpointed), once for every
    comparison with another method below."""
    return per_trace_crowns(random_set[2])


@pytest.mark.slow
@pytest.mark.parametrize("slab_events", [6, 25, 10**6], ids=["tiny-slabs", "slabs", "one-slab"])
def test_random_traces_same_tables_both_methods(
    random_set: tuple[list[Trace], DataFrame, DataFrame], random_per_trace: Any, slab_events: int
) -> None:
    traces, events, delivered = random_set
    per_trace, distributed = random_per_trace, slab_crowns(events, delivered, slab_events, 10**9)
    assert distributed.engine == "slabs"
    assert_same_components(per_trace, distributed)
    assert invalid_crowns(distributed.crowns, events, delivered).count() == 0
    by_id = {t.trace_id: t for t in traces}
    for row in distributed.crowns.collect():
        trace = by_id[row.trace_id]
        msgs = {m.msg_id: m for m in trace.delivered()}
        future = happened_before_sets(trace.lengths(), trace.delivered())
        assert is_crown([msgs[i] for i in row.crown], future), row


@pytest.mark.slow
def test_worked_traces_same_tables_both_methods(
    spark: SparkSession, detected_samples: Path
) -> None:
    # the session's data-samples warehouse (ingested, clocked, detected): nothing here
    # needs the replay stages of a whole audit
    tables = {
        name: spark.createDataFrame(read_delta(detected_samples / name).to_pandas())
        for name in ("events", "messages", "trace_clocks")
    }
    delivered = delivered_messages(tables["messages"], tables["trace_clocks"])
    # the samples have ts: slabs are time bands, a handful of events each
    per_trace, distributed = both(tables["events"], delivered, slab_events=4)
    assert_same_components(per_trace, distributed)
    assert per_trace.crowns.count() == 6
    # and the crowns table the warehouse's detect wrote is the per-trace one
    written = read_delta(detected_samples / "crowns").to_pylist()
    assert sorted((r["trace_id"], r["scc_size"]) for r in written) == sorted(
        (r.trace_id, r.scc_size) for r in per_trace.crowns.collect()
    )


@pytest.mark.slow
def test_auto_sends_only_large_traces_to_the_distributed_method(
    random_set: tuple[list[Trace], DataFrame, DataFrame], random_per_trace: Any
) -> None:
    traces, events, delivered = random_set
    sizes = {t.trace_id: len(t.delivered()) for t in traces}
    cut = sorted(sizes.values())[len(sizes) // 2]
    auto = DetectSettings(per_trace_max_messages=cut, slab_events=20, crown_graph_backend="slabs")
    mixed = find_crowns(delivered, 10**9, events=events, settings=auto)
    assert mixed.engine == "per_trace+slabs"
    assert_same_components(random_per_trace, mixed)
    with pytest.raises(MissingClocksError):
        find_crowns(delivered, 10**9, settings=auto)
    everything = DetectSettings(per_trace_max_messages=10**9)
    assert find_crowns(delivered, 10**9, settings=everything).engine == "per_trace"


# ---------------------------------------------------------------------------------------------
# rounds do not grow with the chain


def crown_chain(trace_id: str, hops: int) -> Trace:
    """a sends x, then a ping-pong of `hops` messages, then b receives x: one crown component
    of hops + 1 nodes through every slab, without a 2-cycle of the contracted graph (its
    witness needs a search), girth 2 (x and any hop)."""
    trace = Trace(trace_id, ["a", "b"])
    lseq = {"a": 0, "b": 0}

    def event(p: str, kind: str) -> int:
        lseq[p] += 1
        trace.events.append({
            "trace_id": trace_id, "process": p, "pidx": 0 if p == "a" else 1, "lseq": lseq[p],
            "kind": kind, "ts": None, "label": None, "n_msgs": 1 if kind == "send" else 0,
            "seq": lseq[p], "source": "chain", "line": len(trace.events) + 1, "lamport": None,
            "vc": None,
        })  # fmt: skip
        return lseq[p]

    def message(msg_id: str, src: str, send: int, dst: str, recv: int) -> None:
        trace.messages.append({
            "trace_id": trace_id, "msg_id": msg_id, "src": src, "dst": dst,
            "src_pidx": 0 if src == "a" else 1, "dst_pidx": 0 if dst == "a" else 1,
            "send_lseq": send, "recv_lseq": recv, "send_ts": None, "recv_ts": None,
            "size_bytes": 0, "status": "delivered",
        })  # fmt: skip

    x = event("a", "send")
    for i in range(hops):
        src, dst = ("a", "b") if i % 2 == 0 else ("b", "a")
        s = event(src, "send")
        message(f"h{i}", src, s, dst, event(dst, "receive"))
    message("x", "a", x, "b", event("b", "receive"))
    return trace


@pytest.mark.slow
def test_distributed_rounds_do_not_grow_with_the_causal_chain(spark: SparkSession) -> None:
    """A chain 10x longer (10x more slabs, the one component crossing all of them) costs the
    same number of Spark jobs; the component is found whole, with a shortest witness."""
    jobs = {}
    # 100 and 1 000 hops in slabs of 50 events: the 10x longer chain crosses 10x more slabs;
    # the three chains are clocked in one run, and each is solved alone
    every = (10, 100, 1000)
    events, messages = frames(spark, [crown_chain(f"c{hops}", hops) for hops in every])
    clocked_events, delivered = clocked(events, messages)
    prepared = {
        hops: (
            clocked_events.where(F.col("trace_id") == f"c{hops}"),
            delivered.where(F.col("trace_id") == f"c{hops}"),
        )
        for hops in every
    }
    settings_ = DetectSettings(crown_engine="distributed", slab_events=50,
                               crown_graph_backend="slabs")  # fmt: skip

    def solve(hops: int) -> tuple[list[Any], list[Any]]:
        events, delivered = prepared[hops]
        found = find_crowns(delivered, 10**9, events=events, settings=settings_)
        return found.crowns.collect(), found.members.collect()

    solve(10)  # warm-up: Numba compilation, Python workers
    for hops in (100, 1000):
        holder: dict[int, Any] = {}
        jobs[hops] = spark_jobs(spark, lambda h=hops, out=holder: out.update({h: solve(h)}))
        crowns, members = holder[hops]
        assert len(crowns) == 1 and crowns[0].scc_size == hops + 1 == len(members)
        # x with any hop is a crown of two (s(x) -> r(h) and s(h) -> r(x)), and no 2-cycle
        # of the contracted graph exists: the witness came from the component's own search
        assert "x" in crowns[0].crown and crowns[0].shortest and crowns[0].k == 2
    slabs = prepared[1000][1].agg(F.max("recv_lseq")).first()[0] * 2 * 2 // 50
    assert slabs >= 40  # 8 -> 80 slabs: a round per slab would add dozens of jobs
    assert abs(jobs[1000] - jobs[100]) <= 2, jobs


# ---------------------------------------------------------------------------------------------
# GraphFrames


def test_graphframes_strong_components_match_the_slabs(
    random_set: tuple[list[Trace], DataFrame, DataFrame], random_per_trace: Any
) -> None:
    _, events, delivered = random_set
    if not graphframes_available(delivered):
        pytest.skip(
            "GraphFrames JVM package is not on the classpath (Maven is unreachable here): "
            "its stronglyConnectedComponents adapter cannot run"
        )
    graphframes = find_crowns(
        delivered, 10**9, events=events,
        settings=DetectSettings(crown_engine="distributed", crown_graph_backend="graphframes"),
    )  # fmt: skip
    assert graphframes.engine == "graphframes"
    assert_same_components(random_per_trace, graphframes)


def test_forcing_graphframes_crowns_without_its_jar_is_a_clear_error(
    random_set: tuple[list[Trace], DataFrame, DataFrame],
) -> None:
    _, events, delivered = random_set
    if graphframes_available(delivered):
        pytest.skip("GraphFrames is on the classpath here")
    forced = DetectSettings(crown_engine="distributed", crown_graph_backend="graphframes")
    with pytest.raises(GraphFramesUnavailable, match="graphframes"):
        find_crowns(delivered, 10**9, events=events, settings=forced)
