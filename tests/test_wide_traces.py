"""One wide trace must not sink the run (issue 17): memory per stage is bounded.

`clocks.max_component_bytes` bounds what one clocks task holds for a component
(`clocks.size`), `detect.max_trace_bytes` what one detect task holds for a trace
(`anomalies.size`). A trace above a limit gets Lamport clocks only (or none) and
`not_applicable` in trace_clocks, or no anomaly rows, with the reason and the
estimate; every other trace is analysed as if it were alone.

The kernel tests need no Spark. The estimates are set against peaks measured in a
fresh process (`bench/wide_memory.py`). One slow test runs ingest, clocks and detect
through the command line's own entry point (`cli.main`, in this process, on the
session's Spark) with limits small enough that a 1 001-process trace is too wide,
and compares every other trace with a run without it.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark import tables
from causal_spark.anomalies import kernel as K
from causal_spark.anomalies import size as detect_size
from causal_spark.app import cli
from causal_spark.clocks import size as clock_size
from causal_spark.clocks.order import concurrent, happened_before, register_sql_functions, relation
from causal_spark.clocks.units_kernel import units_clocks
from causal_spark.config import ConfigError, load_config
from causal_spark.io.sinks import Warehouse
from tests.conftest import ROOT
from tests.random_traces import brute_clocks, random_trace
from tests.test_clocks import _kernel_arrays

MIB = 1 << 20


# ---------------------------------------------------------------------------------------------
# configuration


def test_the_limits_are_configured_per_profile(tmp_path: Path) -> None:
    """The cluster profile allows more than the local one; a limit must be a positive int."""
    local, cluster = load_config(), load_config(ROOT / "conf" / "cluster.yml")
    assert local.clocks.max_component_bytes == local.detect.max_trace_bytes == 6 << 30
    assert cluster.clocks.max_component_bytes == cluster.detect.max_trace_bytes == 12 << 30
    for text, key in (("clocks: {max_component_bytes: 0}", "clocks.max_component_bytes"),
                      ("detect: {max_trace_bytes: 1.5}", "detect.max_trace_bytes")):  # fmt: skip
        path = tmp_path / "bad.yml"
        path.write_text(text + "\n")
        with pytest.raises(ConfigError, match=key):
            load_config(path)


# ---------------------------------------------------------------------------------------------
# kernels


def test_units_without_vectors_get_the_lamport_clocks_of_the_definition() -> None:
    """Units flagged for Lamport clocks only get exactly the definition's Lamport clocks and no
    vector entries; the other units of the call keep both; a cyclic unit is still flagged."""
    rng = random.Random(17)
    traces = [random_trace(rng, f"w{i}", rng.randint(1, 7), rng.randint(1, 80)) for i in range(14)]
    traces = [t for t in traces if t.events]
    units = [(_kernel_arrays(t), len(t.processes), t) for t in traces]
    cyclic = (np.array([0, 0, 1, 1]), np.array([1, 2, 1, 2]), np.array([1, -1, 0, -1]),
              np.array([2, -1, 2, -1]))  # fmt: skip
    units.append((cyclic, 2, None))
    vectors = np.array([u % 2 == 0 for u in range(len(units))])
    vectors[-1] = False  # the cyclic unit, without vectors
    unit_row, unit_proc, proc, lseq, send_event = [0], [0], [], [], []
    for (pidx, lq, sp, sl), n, _ in units:
        start = np.searchsorted(pidx, np.arange(n))
        proc.append(unit_proc[-1] + pidx)
        lseq.append(lq)
        send_event.append(np.where(sp >= 0, unit_row[-1] + start[np.maximum(sp, 0)] + sl - 1, -1))
        unit_row.append(unit_row[-1] + len(pidx))
        unit_proc.append(unit_proc[-1] + n)
    found = units_clocks(np.array(unit_row), np.array(unit_proc), np.concatenate(proc),
                         np.concatenate(lseq), np.concatenate(send_event), vectors)  # fmt: skip
    assert not found.ok[-1]
    for u, ((pidx, lq, _, _), _, trace) in enumerate(units[:-1]):
        assert found.ok[u]
        rows = range(unit_row[u], unit_row[u + 1])
        brute = brute_clocks(trace)
        names = sorted(trace.processes)
        expected = [brute[names[p], q] for p, q in zip(pidx.tolist(), lq.tolist(), strict=True)]
        assert [int(found.lamport[r]) for r in rows] == [lam for lam, _ in expected]
        widths = [int(found.offsets[r + 1] - found.offsets[r]) for r in rows]
        if vectors[u]:
            got = [found.vc[found.offsets[r] : found.offsets[r + 1]].tolist() for r in rows]
            assert got == [vc for _, vc in expected]
        else:
            assert widths == [0] * len(rows)
    assert vectors.any() and not vectors[:-1].all()


def test_the_channel_index_grows_with_messages_not_processes() -> None:
    """A trace of 3 000 processes and 3 000 messages around a ring: the channel index holds
    a few integers per message and per process (a dense index was 16 n^2 bytes, 144 MB),
    and the shortest chain around the ring, 2 999 messages through every process, is found."""
    n = 3000
    src = np.arange(n - 1, dtype=np.int64)
    dst = src + 1
    send = np.where(src == 0, 1, 2).astype(np.int64)  # P0 sends first; others after receiving
    recv = np.ones(n - 1, dtype=np.int64)
    index = K.channels(n, src, dst, send, recv)
    held = sum(v.nbytes for v in vars(index).values() if isinstance(v, np.ndarray))
    assert held < 100 * (n + len(src)), held
    path, offsets = K.shortest_chains(
        index, src, np.array([0]), np.array([1]), np.array([n - 1]), np.array([1])
    )
    assert offsets.tolist() == [0, n - 1]
    assert path.tolist() == list(range(n - 1))


def test_the_plan_and_a_task_get_the_same_estimate(spark: SparkSession) -> None:
    """The model is written once: on Columns (the plan, detect's inputs) it gives the number it
    gives on ints (a task, the benchmark), for components of every engine path."""
    shapes = [(40_000, 20_000, 1), (4_000, 2_000, 1), (3_000_000, 64, 1), (10_000_000, 256, 1),
              (50_000_000, 64, 25), (10, 3, 1), (2_000_001, 7, 1)]  # fmt: skip
    frame = spark.createDataFrame(shapes, "events long, n int, slabs int")
    got = frame.select(
        clock_size.component_bytes(F.col("events"), F.col("n"), F.col("slabs"), 2_000_000, 2),
        clock_size.lamport_bytes(F.col("events"), F.col("n")),
        detect_size.detect_bytes(
            F.col("events"), F.col("n"), F.col("slabs"), F.col("n"), 20_000_000, 2_000_000
        ),
    ).collect()
    expected = [
        (clock_size.component_bytes(e, n, s, 2_000_000, 2), clock_size.lamport_bytes(e, n),
         detect_size.detect_bytes(e, n, s, n, 20_000_000, 2_000_000))
        for e, n, s in shapes
    ]  # fmt: skip
    assert [tuple(r) for r in got] == expected


def test_happened_before_without_vector_clocks_is_unknown_not_false(spark: SparkSession) -> None:
    """Events of a trace without vectors (too wide, or INVALID): every question the clocks
    answer is null (unknown), in the Column helpers and in SQL; an event is still the same as
    itself, and a trace with vectors still gets its answers."""
    register_sql_functions(spark)
    events = spark.createDataFrame(
        [("t", 0, 1, [1, 0]), ("t", 1, 1, [1, 1]), ("w", 0, 1, None), ("w", 1, 1, None)],
        "trace_id string, pidx int, lseq long, vc array<int>",
    )
    events.createOrReplaceTempView("some_events")
    pairs = spark.sql(
        """
        SELECT e.trace_id, e.pidx AS ep, f.pidx AS fp,
               happened_before(e.pidx, e.lseq, f.pidx, f.lseq, f.vc) AS hb_sql,
               concurrent_events(e.pidx, e.lseq, e.vc, f.pidx, f.lseq, f.vc) AS co_sql,
               struct(e.trace_id, e.pidx, e.lseq, e.vc) AS e,
               struct(f.trace_id, f.pidx, f.lseq, f.vc) AS f
        FROM some_events e JOIN some_events f ON e.trace_id = f.trace_id
        """
    ).select(
        "trace_id", "ep", "fp", "hb_sql", "co_sql",
        happened_before("e", "f").alias("hb"),
        concurrent("e", "f").alias("co"),
        relation("e", "f").alias("rel"),
    )  # fmt: skip
    got = {(r.trace_id, r.ep, r.fp): tuple(r)[3:] for r in pairs.collect()}
    assert got == {
        ("t", 0, 0): (False, False, False, False, "same"),
        ("t", 0, 1): (True, False, True, False, "before"),
        ("t", 1, 0): (False, False, False, False, "after"),
        ("t", 1, 1): (False, False, False, False, "same"),
        ("w", 0, 0): (False, False, False, False, "same"),
        ("w", 0, 1): (None, None, None, None, None),
        ("w", 1, 0): (None, None, None, None, None),
        ("w", 1, 1): (False, False, False, False, "same"),
    }


def _measured(stage: str, shape: str, part: str = "") -> dict[str, Any]:
    """bench/wide_memory.py's measurement of one group in a fresh process."""
    command = [sys.executable, str(ROOT / "bench" / "wide_memory.py"), "--one", shape,
               "--stage", stage, "--parts", part]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stage", "shape", "part"),
    [("clocks", "8000x2000", ""), ("detect", "200000x100", "crowns")],
    ids=["clocks-task", "detect-crowns"],
)
def test_the_estimate_covers_the_measured_peak(stage: str, shape: str, part: str) -> None:
    """The size guard's estimate of one group is at least the peak a fresh process measures
    over its warmed-up baseline, and not wildly above it (the guard must not refuse what
    fits: within the base allowance and twice the peak)."""
    row = _measured(stage, shape, part)
    peak, estimate = int(row["peak_bytes"]), int(row["estimate_bytes"])
    assert peak <= estimate <= clock_size.BASE_BYTES + 2 * peak, row


# ---------------------------------------------------------------------------------------------
# a run with one trace too wide


WIDE = "wide_client_server"
CLIENTS = 1000
SENDS = 3  # per client: 6 000 events among 1 001 processes, 3 000 received by one process


def _wide_rows() -> Iterator[dict[str, Any]]:
    for c in range(CLIENTS):
        for k in range(SENDS):
            msg = f"c{c}-{k}"
            yield {"process": f"C{c:04d}", "kind": "send", "msg_id": msg, "peer": "S",
                   "ts": float(c + k)}  # fmt: skip
            yield {"process": "S", "kind": "receive", "msg_id": msg, "peer": f"C{c:04d}",
                   "ts": float(c + k) + 0.5}  # fmt: skip


def _profile(tmp: Path, name: str, **limits: dict[str, int]) -> str:
    profile = yaml.safe_load((ROOT / "conf" / "test.yml").read_text())
    for section, values in limits.items():
        profile[section] = {**profile[section], **values}
    path = tmp / f"{name}.yml"
    path.write_text(yaml.safe_dump(profile))
    return str(path)


# the small traces' estimates are about the base (96 MiB) in both stages; the wide trace's
# vectors about 156 MiB and its Lamport clocks alone about 99 MiB; in detect, its server's
# 3 000 receives of 1 001 entries about 146 MiB
TIGHT_CLOCKS = {"clocks": {"max_component_bytes": 128 * MIB}}
NO_CLOCKS = {"clocks": {"max_component_bytes": 97 * MIB}}
TIGHT_DETECT = {
    "clocks": {"max_component_bytes": 1 << 40},
    "detect": {"max_trace_bytes": 120 * MIB},
}


def _run(spark: SparkSession, warehouse: Path, profile: str, *commands: list[str]) -> list[dict]:
    summaries = []
    for command in commands:
        out = warehouse.parent / f"{warehouse.name}-{command[0]}.json"
        argv = [*command, "--warehouse", str(warehouse), "--conf", profile]
        assert cli.main([*argv, "--summary-json", str(out)], spark) == 0, command
        summaries.append(json.loads(out.read_text()))
    return summaries


@pytest.fixture(scope="module")
def runs(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, detected_samples: Path
) -> dict[str, Any]:
    """Warehouses of data-samples/ alone (the session's), and of data-samples/ with the wide
    trace clocked and detected under each tight profile (one ingest, copied)."""
    tmp = tmp_path_factory.mktemp("wide")
    wide = tmp / "logs" / f"{WIDE}.jsonl"
    wide.parent.mkdir()
    wide.write_text("".join(json.dumps(r) + "\n" for r in _wide_rows()))
    samples = "data-samples"  # as the session's detected_samples names it (the `source` column)
    test_profile = str(ROOT / "conf" / "test.yml")
    ingested = tmp / "ingested"
    _run(spark, ingested, test_profile, ["ingest", samples, str(wide)])
    found: dict[str, Any] = {"alone": detected_samples}
    for name, limits in (("clocks", TIGHT_CLOCKS), ("detect", TIGHT_DETECT),
                         ("none", NO_CLOCKS)):  # fmt: skip
        warehouse = tmp / name
        shutil.copytree(ingested, warehouse)
        stages = [["clocks"], ["detect"]] if name != "none" else [["clocks"]]
        found[f"{name}_summaries"] = _run(spark, warehouse, _profile(tmp, name, **limits), *stages)
        found[name] = warehouse
    return found


def _table(spark: SparkSession, warehouse: Path, table: str) -> DataFrame:
    return Warehouse(spark, str(warehouse), "deltalake").read(table)


def _others(frame: DataFrame) -> DataFrame:
    return frame.where(F.col("trace_id") != WIDE).drop("run_id")


@pytest.mark.slow
def test_a_trace_too_wide_for_vectors_gets_lamport_clocks_and_the_reason(
    spark: SparkSession, runs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    status = _table(spark, runs["clocks"], tables.TRACE_CLOCKS)
    row = status.where(F.col("trace_id") == WIDE).first()
    assert row is not None
    assert (row["status"], row["n_processes"], row["n_events"]) == ("not_applicable", 1001, 6000)
    expected = clock_size.component_bytes(6000, 1001, 1, 2_000_000, 2)
    assert row["reason"] == (
        f"vector clocks not computed: estimated peak {expected / MIB:.1f} MiB exceeds "
        "clocks.max_component_bytes 128.0 MiB (a component of 6000 events, n = 1001 "
        "processes; docs/clocks.md); Lamport clocks computed"
    )
    events = _table(spark, runs["clocks"], tables.EVENTS).where(F.col("trace_id") == WIDE)
    counts = events.agg(F.count("*"), F.count("vc"), F.count("lamport"), F.max("lamport")).first()
    # a client's sends have Lamport 1..3; the server's i-th receive (file order) has i + 1
    assert tuple(counts) == (6000, 0, 6000, CLIENTS * SENDS + 1)
    summary = _table(spark, runs["clocks"], tables.TRACE_SUMMARY).where(F.col("trace_id") == WIDE)
    got = summary.select("n_fifo_violations", "n_causal_violations", "n_crown_sccs",
                         "order_class", "order_class_reason").first()  # fmt: skip
    assert got is not None
    assert tuple(got)[:4] == (None, None, None, None)
    assert got["order_class_reason"] == f"not analysed: {row['reason']}"
    clocks_run, detect_run = runs["clocks_summaries"]
    assert clocks_run["counts"]["not_applicable_traces"] == 1
    assert detect_run["counts"]["traces_too_large"] == 1
    # explain says so, and does not say the messages are in no violation
    common = ["--warehouse", str(runs["clocks"]), "--conf", str(ROOT / "conf" / "test.yml")]
    assert cli.main(["explain", "--trace", WIDE, "--msg", "c5-1", *common], spark) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"trace {WIDE}: order class none: not analysed: {row['reason']} (")
    assert out[0].endswith("; anomalies not computed)")
    assert out[2:] == ["no violation or crown was searched for in this trace (see its order class)"]


@pytest.mark.slow
def test_a_trace_too_large_for_detect_gets_no_order_class_and_the_reason(
    spark: SparkSession, runs: dict[str, Any]
) -> None:
    status = _table(spark, runs["detect"], tables.TRACE_CLOCKS).where(F.col("trace_id") == WIDE)
    assert [tuple(r) for r in status.select("status", "reason").collect()] == [("ok", None)]
    summary = _table(spark, runs["detect"], tables.TRACE_SUMMARY).where(F.col("trace_id") == WIDE)
    got = summary.select("n_fifo_violations", "order_class", "order_class_reason").first()
    assert got is not None
    estimate = detect_size.detect_bytes(3000, 1001, 3000, 1, 20_000_000, 2_000_000)
    assert tuple(got) == (
        None,
        None,
        f"not analysed: estimated peak {estimate / MIB:.1f} MiB exceeds detect.max_trace_bytes "
        "120.0 MiB (3000 delivered messages, n = 1001 processes, up to 3000 received by one "
        "process; docs/anomalies.md)",
    )
    for table in (tables.VIOLATIONS, tables.CROWNS):
        assert _table(spark, runs["detect"], table).where(F.col("trace_id") == WIDE).count() == 0


@pytest.mark.slow
def test_no_clocks_at_all_is_not_applicable_not_invalid(
    spark: SparkSession, runs: dict[str, Any]
) -> None:
    status = _table(spark, runs["none"], tables.TRACE_CLOCKS).where(F.col("trace_id") == WIDE)
    row = status.first()
    assert row is not None and row["status"] == "not_applicable" and row["cycle"] is None
    assert row["reason"].startswith("no clocks computed: estimated peak ")
    assert "and Lamport clocks alone" in row["reason"]
    events = _table(spark, runs["none"], tables.EVENTS).where(F.col("trace_id") == WIDE)
    assert tuple(events.agg(F.count("*"), F.count("lamport"), F.count("vc")).first()) == (
        6000,
        0,
        0,
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", ["clocks", "detect"])
def test_every_other_trace_is_as_in_a_run_without_the_wide_one(
    spark: SparkSession, runs: dict[str, Any], case: str
) -> None:
    for table in (tables.EVENTS, tables.TRACE_CLOCKS, tables.VIOLATIONS, tables.CROWNS,
                  tables.CROWN_MEMBERS, tables.TRACE_SUMMARY):  # fmt: skip
        got = _others(_table(spark, runs[case], table))
        expected = _others(_table(spark, runs["alone"], table))
        assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)
    # the counts add up: every trace has one status, and one order class or a reason
    clocks_run, detect_run = runs[f"{case}_summaries"]
    traces = _table(spark, runs[case], tables.TRACE_CLOCKS).count()
    clock_counts = clocks_run["counts"]
    assert clock_counts["traces"] == traces
    assert traces == sum(
        int(r["count"])
        for r in _table(spark, runs[case], tables.TRACE_CLOCKS).groupBy("status").count().collect()
    )
    counts = detect_run["counts"]
    classes = sum(counts[f"class_{c}"] for c in ("RSC", "CO", "FIFO", "ASYNC", "INVALID"))
    summary = _table(spark, runs[case], tables.TRACE_SUMMARY).count()
    assert classes + counts["traces_unanalysable"] + counts["traces_too_large"] == summary
    assert counts["traces_too_large"] == 1
