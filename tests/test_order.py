"""Happened-before queries, causal cones and matrix clocks against brute force."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark.clocks import with_clocks
from causal_spark.clocks.components import (
    GraphFramesUnavailable,
    connected_components,
    graphframes_available,
)
from causal_spark.clocks.matrix import with_matrix_clocks
from causal_spark.clocks.order import (
    EventNotFound,
    causal_cone,
    causal_future,
    causal_past,
    concurrent,
    happened_before,
    register_sql_functions,
    relation,
)
from causal_spark.config import ClockSettings
from tests.random_traces import Trace, brute_matrix, random_trace
from tests.reference_order import happened_before_sets
from tests.test_clocks import frames


@pytest.fixture(scope="module")
def clocked(spark: SparkSession) -> tuple[list[Trace], DataFrame, DataFrame]:
    rng = random.Random(7)
    traces = [
        random_trace(rng, f"o{i}", n_procs=rng.randint(2, 5), n_steps=rng.randint(15, 45))
        for i in range(5)
    ]
    events, messages = frames(spark, traces)
    out = with_clocks(events, messages, ClockSettings(engine="per_trace")).events
    return traces, out.localCheckpoint(), messages.localCheckpoint()


def _truth(trace: Trace) -> dict[tuple[str, int], set[tuple[str, int]]]:
    return happened_before_sets(trace.lengths(), trace.delivered())


def _pairs(events: DataFrame) -> DataFrame:
    """Every ordered pair of events of a trace, as structs e and f, with hb and co columns."""
    e = events.select(F.struct("trace_id", "process", "pidx", "lseq", "vc").alias("e"))
    f = events.select(F.struct("trace_id", "process", "pidx", "lseq", "vc").alias("f"))
    return e.join(f, F.col("e.trace_id") == F.col("f.trace_id")).select(
        F.col("e.trace_id").alias("trace_id"),
        F.col("e.process").alias("ep"),
        F.col("e.lseq").alias("el"),
        F.col("f.process").alias("fp"),
        F.col("f.lseq").alias("fl"),
        happened_before("e", "f").alias("hb"),
        concurrent("e", "f").alias("co"),
        "e",
        "f",
    )


@pytest.mark.slow
def test_relation_matches_brute_force_for_every_pair(
    clocked: tuple[list[Trace], DataFrame, DataFrame],
) -> None:
    traces, events, _ = clocked
    pairs = _pairs(events).select("*", relation("e", "f").alias("rel")).collect()
    truth = {t.trace_id: _truth(t) for t in traces}
    assert len(pairs) == sum(len(t.events) ** 2 for t in traces)
    for p in pairs:
        future = truth[p.trace_id]
        before = (p.fp, p.fl) in future[(p.ep, p.el)]
        after = (p.ep, p.el) in future[(p.fp, p.fl)]
        same = (p.ep, p.el) == (p.fp, p.fl)
        assert p.hb == before
        assert p.co == (not before and not after and not same)
        want = "same" if same else "before" if before else "after" if after else "concurrent"
        assert p.rel == want


def test_sql_functions_agree_with_the_column_helpers(
    spark: SparkSession, clocked: tuple[list[Trace], DataFrame, DataFrame]
) -> None:
    _, events, _ = clocked
    assert register_sql_functions(spark) == ["concurrent_events", "happened_before"]
    events.createOrReplaceTempView("clocked_events")
    by_sql = spark.sql(
        """
        SELECT e.trace_id, e.process AS ep, e.lseq AS el, f.process AS fp, f.lseq AS fl,
               happened_before(e.pidx, e.lseq, f.pidx, f.lseq, f.vc) AS hb,
               concurrent_events(e.pidx, e.lseq, e.vc, f.pidx, f.lseq, f.vc) AS co
        FROM clocked_events e JOIN clocked_events f ON e.trace_id = f.trace_id
        """
    )
    by_columns = _pairs(events).drop("e", "f")
    assert sorted(by_sql.collect()) == sorted(by_columns.collect())
    assert by_sql.where("hb").count() > 0 and by_sql.where("co").count() > 0


def test_causal_past_future_and_cone(clocked: tuple[list[Trace], DataFrame, DataFrame]) -> None:
    traces, events, _ = clocked
    trace = traces[0]
    future = _truth(trace)
    for process, lseq in random.Random(1).sample(sorted(future), 4):
        past = {(r.process, r.lseq) for r in causal_past(events, trace.trace_id, process, lseq)
                .collect()}
        ahead = {(r.process, r.lseq) for r in causal_future(events, trace.trace_id, process, lseq)
                 .collect()}
        assert past == {e for e, after in future.items() if (process, lseq) in after}
        assert ahead == future[(process, lseq)]
        cone = causal_cone(events, trace.trace_id, process, lseq).collect()
        assert {(r.process, r.lseq, r.side) for r in cone} == (
            {(*e, "past") for e in past} | {(*e, "future") for e in ahead}
        )


def test_cone_of_an_unknown_event_is_a_clear_error(
    clocked: tuple[list[Trace], DataFrame, DataFrame],
) -> None:
    _, events, _ = clocked
    with pytest.raises(EventNotFound, match="'nope'"):
        causal_past(events, "o0", "nope", 1)


def test_matrix_clocks_match_brute_force(
    clocked: tuple[list[Trace], DataFrame, DataFrame],
) -> None:
    traces, events, messages = clocked
    rows = with_matrix_clocks(events, messages).collect()
    got: dict[tuple[str, str, int], dict[tuple[int, int], int]] = {
        (r.trace_id, r.process, r.lseq): {(m.src_pidx, m.dst_pidx): m.n for m in r.mc}
        for r in rows
    }
    for trace in traces:
        for (process, lseq), counts in brute_matrix(trace).items():
            assert got[(trace.trace_id, process, lseq)] == counts
    assert len(rows) == sum(len(t.events) for t in traces)
    # sparse: never a zero entry, and sorted by (i, j)
    for r in rows:
        keys = [(m.src_pidx, m.dst_pidx) for m in r.mc]
        assert keys == sorted(keys) and all(m.n > 0 for m in r.mc)


def test_matrix_row_agrees_with_vector_clock(
    clocked: tuple[list[Trace], DataFrame, DataFrame],
) -> None:
    """mc(e)[i][i'] summed over i' never exceeds the sends among i's first vc(e)[i] events."""
    _, events, messages = clocked
    vc = {(r.trace_id, r.process, r.lseq): r.vc for r in events.collect()}
    sends: dict[tuple[str, int], list[int]] = {}
    for m in messages.where("send_lseq IS NOT NULL AND dst_pidx IS NOT NULL").collect():
        sends.setdefault((m.trace_id, m.src_pidx), []).append(m.send_lseq)
    for r in with_matrix_clocks(events, messages).collect():
        per_src: dict[int, int] = {}
        for m in r.mc:
            per_src[m.src_pidx] = per_src.get(m.src_pidx, 0) + m.n
        for i, total in per_src.items():
            known = vc[(r.trace_id, r.process, r.lseq)][i]
            assert total == sum(1 for s in sends[(r.trace_id, i)] if s <= known)


def test_graphframes_adapter_gives_the_same_components(spark: SparkSession) -> None:
    vertices = spark.createDataFrame(
        [("t", i) for i in range(6)] + [("u", 0), ("u", 1)], "trace_id string, pidx int"
    )
    edges = spark.createDataFrame(
        [("t", 0, 1), ("t", 2, 1), ("t", 4, 5), ("u", 1, 0)],
        "trace_id string, src_pidx int, dst_pidx int",
    )
    joins = connected_components(vertices, edges, backend="joins").labels
    assert {(r.trace_id, r.pidx): r.component for r in joins.collect()} == {
        ("t", 0): 0, ("t", 1): 0, ("t", 2): 0, ("t", 3): 3, ("t", 4): 4, ("t", 5): 4,
        ("u", 0): 0, ("u", 1): 0,
    }
    if not graphframes_available(vertices):
        pytest.skip(
            "GraphFrames JVM package is not on the classpath (Maven is unreachable here): "
            "only the joins path ran"
        )
    found = connected_components(vertices, edges, backend="graphframes")
    assert found.backend == "graphframes"
    assert sorted(found.labels.collect()) == sorted(joins.collect())



def test_forcing_graphframes_without_its_jar_is_a_clear_error(spark: SparkSession) -> None:
    vertices = spark.createDataFrame([("t", 0)], "trace_id string, pidx int")
    edges = spark.createDataFrame([], "trace_id string, src_pidx int, dst_pidx int")
    if graphframes_available(vertices):
        pytest.skip("GraphFrames is on the classpath here, so forcing it is not an error")
    with pytest.raises(GraphFramesUnavailable, match=r"spark\.jars\.packages"):
        connected_components(vertices, edges, backend="graphframes")
