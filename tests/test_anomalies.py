"""Detection (DESIGN §3, §5): kernels against brute force, Spark tables against the worked traces.

The oracles never look at clocks: overtaking pairs come from the pairwise
definition over the transitive closure, chains from a 0-1 breadth-first
search over events, crown components from the strongly connected components
(NetworkX) of the relation m ~> m' (s(m) -> r(m')).
"""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
from chispa import assert_df_equality
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession

from causal_spark import tables
from causal_spark.anomalies import (
    ORDER_CLASSES,
    WitnessError,
    delivered_messages,
    find_crowns,
    find_violations,
    invalid_crowns,
    require_valid_crowns,
    summarize_traces,
)
from causal_spark.anomalies import crown_kernel as CK
from causal_spark.anomalies import kernel as K
from causal_spark.anomalies.explain import crown_words, vector_text
from causal_spark.app.cli import main, run
from causal_spark.clocks import trace_clock_status, with_clocks
from causal_spark.config import ClockSettings
from tests.conftest import ROOT, read_delta
from tests.random_traces import Trace, brute_clocks, frames, random_trace, traces
from tests.reference_order import (
    Message,
    crown_relation,
    fewest_messages,
    fewest_through,
    happened_before_sets,
    pairwise_violations,
)

# ---------------------------------------------------------------------------------------------
# brute force


@dataclass
class Brute:
    causal: dict[str, str]  # overtaken -> first-received overtaking message
    fifo: dict[str, str]
    components: set[frozenset[str]]  # msg_ids of each crown component
    girth: dict[frozenset[str], int]  # fewest messages of a crown, per component
    order_class: str


def brute_findings(trace: Trace) -> Brute:
    lengths = trace.lengths()
    msgs = trace.delivered()
    by_id = {m.msg_id: m for m in msgs}
    fifo_pairs, causal_pairs = pairwise_violations(lengths, msgs)

    def first(pairs: set[tuple[str, str]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for a, b in sorted(pairs):
            if a not in out or by_id[b].recv_lseq < by_id[out[a]].recv_lseq:
                out[a] = b
        return out

    relation = crown_relation(lengths, msgs)
    graph = nx.DiGraph()
    graph.add_nodes_from(relation)
    graph.add_edges_from((a, b) for a, bs in relation.items() for b in bs)
    components: set[frozenset[str]] = set()
    girth: dict[frozenset[str], int] = {}
    for nodes in nx.strongly_connected_components(graph):
        if len(nodes) < 2:
            continue
        ids = frozenset(m.msg_id for m in msgs if (m.src, m.send_lseq) in nodes)
        components.add(ids)
        girth[ids] = shortest_cycle(graph.subgraph(nodes))
    causal, fifo = first(causal_pairs), first(fifo_pairs)
    klass = "ASYNC" if fifo else "FIFO" if causal else "CO" if components else "RSC"
    return Brute(causal, fifo, components, girth, klass)


def shortest_cycle(graph: nx.DiGraph) -> int:
    """The girth of a strongly connected digraph: a breadth-first search from every node."""
    best = len(graph)
    for source in graph:
        dist = nx.single_source_shortest_path_length(graph, source)
        for u in graph.predecessors(source):
            best = min(best, dist[u] + 1)
    return best


def is_crown(crown: list[Message], future: dict[Any, set[Any]]) -> bool:
    nodes = {(m.src, m.send_lseq) for m in crown}
    k = len(crown)
    return (
        k >= 2
        and len(nodes) == k
        and all(
            (crown[(i + 1) % k].dst, crown[(i + 1) % k].recv_lseq) in future[(m.src, m.send_lseq)]
            for i, m in enumerate(crown)
        )
    )


def is_chain(chain: list[Message], m: Message, m2: Message) -> bool:
    at = (m.src, m.send_lseq)
    for hop in chain:
        if hop.src != at[0] or hop.send_lseq < at[1]:
            return False
        at = (hop.dst, hop.recv_lseq)
    return at[0] == m2.src and at[1] <= m2.send_lseq


# ---------------------------------------------------------------------------------------------
# kernels without Spark


def kernel_findings(trace: Trace, budget: int) -> tuple[dict[str, str], dict[str, str], CK.Crowns]:
    clocks = brute_clocks(trace)
    index = {p: i for i, p in enumerate(trace.processes)}
    msgs = trace.delivered()
    causal: dict[str, str] = {}
    fifo: dict[str, str] = {}
    for d in trace.processes:
        rows = sorted((m for m in msgs if m.dst == d), key=lambda m: m.recv_lseq)
        if not rows:
            continue
        c, f = K.overtaking(
            index[d],
            np.array([index[m.src] for m in rows]),
            np.array([m.send_lseq for m in rows]),
            np.array([clocks[(d, m.recv_lseq)][1] for m in rows]),
            np.array([clocks[(m.src, m.send_lseq)][1][index[d]] for m in rows]),
        )
        causal.update({m.msg_id: rows[c[i]].msg_id for i, m in enumerate(rows) if c[i] >= 0})
        fifo.update({m.msg_id: rows[f[i]].msg_id for i, m in enumerate(rows) if f[i] >= 0})
    crowns = CK.crown_components(
        len(trace.processes),
        [index[m.src] for m in msgs],
        [m.send_lseq for m in msgs],
        [index[m.dst] for m in msgs],
        [m.recv_lseq for m in msgs],
        budget,
    )
    return causal, fifo, crowns


@settings(max_examples=150, deadline=None)
@given(trace=traces(6, 140), seed=st.integers(0, 2**32 - 1))
def test_kernels_match_the_definitions(trace: Trace, seed: int) -> None:
    msgs = trace.delivered()
    by_id = {m.msg_id: m for m in msgs}
    brute = brute_findings(trace)
    causal, fifo, crowns = kernel_findings(trace, budget=10**9)
    assert causal == brute.causal
    assert fifo == brute.fifo
    # chains: a causal path of the fewest messages
    index = {p: i for i, p in enumerate(trace.processes)}
    queries = [(a, b) for a, b in sorted(causal.items()) if by_id[a].src != by_id[b].src]
    src = [index[m.src] for m in msgs]
    channels = K.channels(
        len(index),
        src,
        [index[m.dst] for m in msgs],
        [m.send_lseq for m in msgs],
        [m.recv_lseq for m in msgs],
    )
    path, offsets = K.shortest_chains(
        channels,
        src,
        [index[by_id[a].src] for a, _ in queries],
        [by_id[a].send_lseq for a, _ in queries],
        [index[by_id[b].src] for _, b in queries],
        [by_id[b].send_lseq for _, b in queries],
    )
    lengths = trace.lengths()
    for i, (a, b) in enumerate(queries):
        chain = [msgs[r] for r in path[offsets[i] : offsets[i + 1]]]
        m, m2 = by_id[a], by_id[b]
        assert is_chain(chain, m, m2), (a, b, chain)
        fewest = fewest_messages(lengths, msgs, (m.src, m.send_lseq), (m2.src, m2.send_lseq))
        assert len(chain) == fewest, (a, b)
    # crowns: the components, valid witnesses, shortest when the search says so
    future = happened_before_sets(lengths, msgs)
    got: dict[int, set[str]] = {}
    for row, c in enumerate(crowns.component):
        if c >= 0:
            got.setdefault(int(c), set()).add(msgs[row].msg_id)
    assert {frozenset(v) for v in got.values()} == brute.components
    for c in range(crowns.n_components):
        crown = [msgs[r] for r in crowns.crown[crowns.crown_start[c] : crowns.crown_start[c + 1]]]
        assert is_crown(crown, future), crown
        assert {m.msg_id for m in crown} <= got[c]
        assert crowns.shortest[c]  # the budget is never reached here
        assert len(crown) == brute.girth[frozenset(got[c])]
    # the check the pipeline runs on every witness before writing it, against brute force
    rng = random.Random(seed)
    dst = [index[m.dst] for m in msgs]
    send = [m.send_lseq for m in msgs]
    recv = [m.recv_lseq for m in msgs]
    for _ in range(40 if len(msgs) >= 2 else 0):
        rows = rng.sample(range(len(msgs)), rng.randint(2, min(4, len(msgs))))
        want = is_crown([msgs[r] for r in rows], future)
        assert CK.is_crown(channels, src, send, dst, recv, np.array(rows)) == want, rows


@pytest.mark.slow
def test_a_spent_budget_keeps_valid_witnesses_and_says_they_may_not_be_shortest() -> None:
    flagged = 0
    for seed in range(200):
        rng = random.Random(seed)
        trace = random_trace(rng, "t", rng.randint(3, 6), rng.randint(40, 160))
        msgs = trace.delivered()
        future = happened_before_sets(trace.lengths(), msgs)
        brute = brute_findings(trace)
        _, _, crowns = kernel_findings(trace, budget=0)
        for c in range(crowns.n_components):
            rows = crowns.crown[crowns.crown_start[c] : crowns.crown_start[c + 1]]
            crown = [msgs[r] for r in rows]
            assert is_crown(crown, future), (seed, crown)
            members = frozenset(
                m.msg_id for m, k in zip(msgs, crowns.component, strict=True) if k == c
            )
            if crowns.shortest[c]:
                assert len(crown) == brute.girth[members], seed
            else:
                flagged += 1
    assert flagged > 0, "budget 0 never cut a witness search short: the flag is untested"


# ---------------------------------------------------------------------------------------------
# Spark: the worked traces, through the audit job into Delta tables


@pytest.fixture
def audited(detected_samples: Path) -> Path:
    return detected_samples


@pytest.mark.slow
def test_worked_traces_get_the_expected_verdicts(
    spark: SparkSession, audited: Path, expected: dict[str, Any]
) -> None:
    violations = spark.createDataFrame(read_delta(audited / "violations").to_pandas())
    want = spark.createDataFrame(
        [
            (trace, v["kind"], v["dst"], v["overtaken_msg"], v["overtaking_msg"], v["chain"])
            for trace, answer in expected.items()
            for v in answer.get("violations", [])
        ],
        "trace_id string, kind string, dst string, overtaken_msg string, "
        "overtaking_msg string, chain array<string>",
    )
    assert_df_equality(
        violations.select(*want.columns), want, ignore_row_order=True, ignore_nullable=True
    )
    members = read_delta(audited / "crown_members").to_pylist()
    got: dict[str, set[frozenset[str]]] = {}
    grouped: dict[tuple[str, int], set[str]] = {}
    for row in members:
        grouped.setdefault((row["trace_id"], row["scc_id"]), set()).add(row["msg_id"])
    for (trace, _), ids in grouped.items():
        got.setdefault(trace, set()).add(frozenset(ids))
    for trace, answer in expected.items():
        if "crown_sccs" in answer:
            assert got.get(trace, set()) == {frozenset(c) for c in answer["crown_sccs"]}, trace
    crowns = read_delta(audited / "crowns").to_pylist()
    assert {(c["trace_id"], c["scc_id"]) for c in crowns} == set(grouped)
    for c in crowns:
        assert c["k"] == len(c["crown"]) >= 2
        assert c["scc_size"] == len(grouped[(c["trace_id"], c["scc_id"])])
        assert set(c["crown"]) <= grouped[(c["trace_id"], c["scc_id"])]
    summary = {r["trace_id"]: r for r in read_delta(audited / "trace_summary").to_pylist()}
    assert {t: r["order_class"] for t, r in summary.items()} == {
        t: a["order_class"] for t, a in expected.items()
    }
    bad = summary["bad_input"]
    assert bad["n_quarantined"] == sum(expected["bad_input"]["quarantine_reasons"].values())
    assert bad["n_in_flight"] == expected["bad_input"]["n_in_flight"]
    assert bad["n_orphans"] == expected["bad_input"]["n_orphans"]
    assert bad["n_processes"] == expected["bad_input"]["n_processes"]
    cycle = summary["causal_cycle"]
    assert (cycle["n_fifo_violations"], cycle["n_causal_violations"], cycle["n_crown_sccs"]) == (
        None,
        None,
        None,
    )
    for t, r in summary.items():
        if r["order_class"] != "INVALID":
            assert r["n_fifo_violations"] == sum(
                1 for v in expected[t].get("violations", []) if v["kind"] == "fifo"
            )


@pytest.mark.slow
def test_witness_crowns_are_checked_and_a_false_one_is_caught(
    spark: SparkSession, audited: Path
) -> None:
    warehouse_tables = {
        name: spark.createDataFrame(read_delta(audited / name).to_pandas())
        for name in ("events", "messages", "crowns")
    }
    events, messages, crowns = (warehouse_tables[n] for n in ("events", "messages", "crowns"))
    assert invalid_crowns(crowns, events, messages).count() == 0
    require_valid_crowns(crowns, events, messages)
    # selective_xy is RSC: x and y form no crown, and the check must say so
    false = spark.createDataFrame(
        [("selective_xy", 0, 2, ["x", "y"], 2, True)],
        "trace_id string, scc_id int, scc_size long, crown array<string>, k int, shortest boolean",
    )
    with pytest.raises(WitnessError, match="selective_xy"):
        require_valid_crowns(false, events, messages)


def test_explain_says_what_was_overtaken_by_what_and_through_which_chain(
    audited: Path, expected: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    violation = expected["overtaken_by_chain"]["violations"][0]

    def explain(msg: str) -> int:
        return main(
            ["explain", "--warehouse", str(audited), "--conf", "conf/test.yml",
             "--trace", "overtaken_by_chain", "--msg", msg]
        )  # fmt: skip

    code = explain(violation["overtaken_msg"])
    text = capsys.readouterr().out
    assert code == 0
    assert f"{violation['overtaken_msg']} was overtaken by {violation['overtaking_msg']}" in text
    assert f"[chain: {', '.join(violation['chain'])}]" in text
    assert "order class FIFO" in text and "witness crown" in text
    code = explain("no_such_msg")
    assert code == 2
    assert "has no message 'no_such_msg'" in capsys.readouterr().err


def _explain_trace(audited: Path, trace: str, *more: str) -> int:
    return main(
        ["explain", "--warehouse", str(audited), "--conf", "conf/test.yml", "--trace", trace,
         *more]
    )  # fmt: skip


@pytest.mark.slow
def test_explain_without_msg_lists_each_finding_of_the_trace(
    audited: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    violations = read_delta(audited / "violations").to_pylist()
    crowns = read_delta(audited / "crowns").to_pylist()
    clocks = {r["trace_id"]: r for r in read_delta(audited / "trace_clocks").to_pylist()}
    traces = sorted({r["trace_id"] for r in violations} | {r["trace_id"] for r in crowns})
    assert traces  # the worked traces have findings to list
    for trace in [*traces, "causal_cycle"]:
        assert _explain_trace(audited, trace) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith(f"trace {trace}: order class")
        if clocks[trace]["status"] == "INVALID":
            cycle = clocks[trace]["cycle"]
            assert cycle and any(
                " -> ".join(f"receive({m})" for m in cycle) in line for line in lines
            ), lines
            continue
        mine = [v for v in violations if v["trace_id"] == trace]
        listed = [line for line in lines if " overtaken by " in line]
        assert sorted(listed) == sorted(
            f"  {v['kind']} at {v['dst']}: {v['overtaken_msg']} overtaken by "
            f"{v['overtaking_msg']}" + (f" through {', '.join(v['chain'])}" if v["chain"] else "")
            for v in mine
        )
        components = [c for c in crowns if c["trace_id"] == trace]
        shown = [line for line in lines if line.startswith("  component ")]
        assert sorted(shown) == sorted(
            f"  component {c['scc_id']}: {c['scc_size']} messages; witness crown of {c['k']} "
            f"({', '.join(c['crown'])})"
            for c in components
        )
    assert "causal_cycle" not in traces  # INVALID: its findings are not computed


def test_explain_of_a_message_of_an_invalid_trace_names_the_cycle(
    audited: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (row,) = [
        r
        for r in read_delta(audited / "trace_clocks").to_pylist()
        if r["trace_id"] == "causal_cycle"
    ]
    assert _explain_trace(audited, "causal_cycle", "--msg", row["cycle"][0]) == 0
    text = capsys.readouterr().out
    assert "INVALID" in text and f"witness cycle of {len(row['cycle'])} receive(s)" in text


def test_explain_names_a_crown_through_a_message_outside_the_stored_witness(
    audited: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = "nested_crowns"
    (stored,) = [c for c in read_delta(audited / "crowns").to_pylist() if c["trace_id"] == trace]
    members = {
        r["msg_id"]
        for r in read_delta(audited / "crown_members").to_pylist()
        if r["trace_id"] == trace
    }
    rows = [r for r in read_delta(audited / "messages").to_pylist() if r["trace_id"] == trace]
    msgs = [Message(r["msg_id"], r["src"], r["send_lseq"], r["dst"], r["recv_lseq"]) for r in rows]
    by_id = {m.msg_id: m for m in msgs}
    lengths: dict[str, int] = {}
    for e in read_delta(audited / "events").to_pylist():
        if e["trace_id"] == trace:
            lengths[e["process"]] = max(lengths.get(e["process"], 0), e["lseq"])
    future = happened_before_sets(lengths, msgs)
    msg = sorted(members - set(stored["crown"]))[0]  # a member the stored witness leaves out
    out = tmp_path / "crown.svg"
    assert _explain_trace(audited, trace, "--msg", msg, "--svg", str(out)) == 0
    text = capsys.readouterr().out
    assert f"witness crown of {stored['k']} messages ({', '.join(stored['crown'])})" in text
    (line,) = [x for x in text.splitlines() if x.startswith(f"  a crown through {msg}, ")]
    cycle = line.split(": ", 1)[1].split(" -> ")
    crown = cycle[:-1]
    assert cycle[0] == cycle[-1] == msg and f", {len(crown)} messages, a shortest one" in line
    assert is_crown([by_id[m] for m in crown], future), crown
    assert len(crown) == fewest_through(msgs, future, msg)
    # the diagram highlights that crown, and the component's other members as members
    svg = ET.fromstring(out.read_text("utf-8"))
    roles = {
        e.get("data-msg"): e.get("data-role")
        for e in svg.iter("{http://www.w3.org/2000/svg}line")
        if e.get("data-msg")
    }
    assert {m for m, r in roles.items() if r == "crown"} == set(crown)
    assert {m for m, r in roles.items() if r == "member"} == members - set(crown)
    # a budget too small for the search: said so, and the stored witness stands
    conf = tmp_path / "tight.yml"
    text = (ROOT / "conf" / "test.yml").read_text("utf-8")
    conf.write_text(text.replace("crown_search_budget: 20000000", "crown_search_budget: 1"))
    assert "crown_search_budget: 1\n" in conf.read_text("utf-8")
    code = main(["explain", "--warehouse", str(audited), "--conf", str(conf), "--trace", trace,
                 "--msg", msg])  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert f"the search for a crown through {msg} stopped at its budget (1 steps" in text
    assert f"  a crown through {msg}" not in text


def test_explain_svg_needs_a_message(audited: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _explain_trace(audited, "overtaken_by_chain", "--svg", "x.svg") == 2
    assert "give --msg" in capsys.readouterr().err


def test_wide_vectors_are_shown_by_their_non_zero_entries() -> None:
    assert vector_text([1, 0, 2]) == "[1, 0, 2]"
    wide = [0] * 64
    wide[3], wide[40] = 5, 1
    names = {i: f"p{i:02d}" for i in range(64)}
    assert vector_text(wide, names) == "{p03: 5, p40: 1} (non-zero of 64)"
    assert vector_text(wide, {3: "a"}) == "{a: 5, #40: 1} (non-zero of 64)"


def test_a_huge_crown_component_is_summarised_not_listed() -> None:
    crown = {"scc_id": 7, "scc_size": 470_000, "crown": ["a", "b"], "k": 2, "shortest": True}
    messages = {
        "a": {"msg_id": "a", "src": "P", "dst": "Q", "send_lseq": 1, "recv_lseq": 2},
        "b": {"msg_id": "b", "src": "Q", "dst": "P", "send_lseq": 1, "recv_lseq": 2},
    }
    members = [f"m{i:06d}" for i in range(20)]
    first, *_ = crown_words(crown, members, messages, [])
    assert "470000 messages: m000000, " in first and "m000019, ... and 469980 more" in first
    assert first.count(", m") == 19


# ---------------------------------------------------------------------------------------------
# Spark: random traces against brute force, and independence from partitioning


def detect(events: DataFrame, messages: DataFrame) -> dict[str, DataFrame]:
    result = with_clocks(events, messages, ClockSettings(engine="per_trace"))
    clocked = result.events.localCheckpoint()
    status = trace_clock_status(clocked, events, messages, result.plan).localCheckpoint()
    delivered = delivered_messages(messages, status)
    violations = find_violations(clocked, delivered).localCheckpoint()
    found = find_crowns(delivered, 10**9)
    crowns = found.crowns.localCheckpoint()
    quarantine = events.sparkSession.createDataFrame([], tables.table_schema(tables.QUARANTINE))
    summary = summarize_traces(status, messages, quarantine, violations, crowns)
    return {
        "events": clocked,
        "violations": violations,
        "crowns": crowns,
        "members": found.members,
        "summary": summary,
    }


@pytest.fixture(scope="module")
def random_set(spark: SparkSession) -> tuple[list[Trace], DataFrame, DataFrame]:
    rng = random.Random(5)
    traces = [
        random_trace(
            rng,
            f"d{i:02d}",
            n_procs=rng.randint(2, 6),
            n_steps=rng.randint(20, 140),
            groups=rng.choice([1, 1, 2]),
            self_send=rng.choice([0.0, 0.1]),
        )
        for i in range(12)
    ]
    events, messages = frames(spark, traces)
    return traces, events.localCheckpoint(), messages.localCheckpoint()


@pytest.fixture(scope="module")
def random_detected(random_set: tuple[list[Trace], DataFrame, DataFrame]) -> dict[str, DataFrame]:
    """The random traces through `detect` once, at the session's partitioning: the tables
    both tests below read (against brute force; against a run partitioned otherwise), all
    checkpointed, so that they are computed at this partitioning once."""
    _, events, messages = random_set
    found = detect(events, messages)
    return {name: frame.localCheckpoint() for name, frame in found.items()}


@pytest.mark.slow
def test_random_traces_match_brute_force_through_spark(
    random_set: tuple[list[Trace], DataFrame, DataFrame],
    random_detected: dict[str, DataFrame],
) -> None:
    traces = random_set[0]
    found = random_detected
    violations = found["violations"].collect()
    members = found["members"].collect()
    summary = {r["trace_id"]: r for r in found["summary"].collect()}
    crowns = found["crowns"].collect()
    classes = set()
    for trace in traces:
        t = trace.trace_id
        brute = brute_findings(trace)
        msgs = {m.msg_id: m for m in trace.delivered()}
        mine = [v for v in violations if v["trace_id"] == t]
        assert {
            v["overtaken_msg"]: v["overtaking_msg"] for v in mine if v["kind"] == "causal"
        } == brute.causal, t
        assert {
            v["overtaken_msg"]: v["overtaking_msg"] for v in mine if v["kind"] == "fifo"
        } == brute.fifo, t
        for v in mine:
            m, m2 = msgs[v["overtaken_msg"]], msgs[v["overtaking_msg"]]
            chain = [msgs[c] for c in v["chain"]]
            assert is_chain(chain, m, m2), (t, v)
            if v["kind"] == "fifo" or m.src == m2.src:
                assert chain == []
            else:
                fewest = fewest_messages(
                    trace.lengths(),
                    trace.delivered(),
                    (m.src, m.send_lseq),
                    (m2.src, m2.send_lseq),
                )
                assert len(chain) == fewest, (t, v)
        components: dict[int, set[str]] = {}
        for row in members:
            if row["trace_id"] == t:
                components.setdefault(row["scc_id"], set()).add(row["msg_id"])
        assert {frozenset(c) for c in components.values()} == brute.components, t
        future = happened_before_sets(trace.lengths(), trace.delivered())
        for c in crowns:
            if c["trace_id"] == t:
                assert is_crown([msgs[i] for i in c["crown"]], future), (t, c)
        row = summary[t]
        assert row["order_class"] == brute.order_class, t
        # the hierarchy: a causal-order violation is a crown of two, so non-CO is never RSC
        if row["n_causal_violations"]:
            assert row["n_crown_sccs"] > 0
        classes.add(row["order_class"])
    assert classes <= set(ORDER_CLASSES)
    assert len(classes) >= 2, f"the random set should mix classes, got {classes}"


@pytest.mark.slow
def test_tables_do_not_depend_on_partitioning(
    spark: SparkSession,
    random_set: tuple[list[Trace], DataFrame, DataFrame],
    random_detected: dict[str, DataFrame],
) -> None:
    _, events, messages = random_set
    first = random_detected
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        second = detect(events.repartition(5, "pidx"), messages.repartition(3))
        for name in ("violations", "crowns", "members", "summary"):
            assert_df_equality(
                first[name], second[name], ignore_row_order=True, ignore_nullable=True
            )
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def test_detect_command_rewrites_the_anomaly_tables(
    spark: SparkSession, detected_samples: Path, writable_copy: Callable[[Path], Path]
) -> None:
    audited = writable_copy(detected_samples)
    before = read_delta(audited / "violations").to_pylist()
    record = run(["detect", "--warehouse", str(audited), "--conf", "conf/test.yml"], session=spark)
    assert record.counts["violations"] == len(before)
    assert sorted(map(str, read_delta(audited / "violations").to_pylist())) == sorted(
        map(str, before)
    )
    assert sum(record.counts[f"class_{c}"] for c in ORDER_CLASSES) == record.counts["trace_summary"]
