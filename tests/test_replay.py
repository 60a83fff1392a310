"""Protocol replay through Spark and Delta (DESIGN §4, §5; issue 6).

The audit of data-samples writes `protocol_runs`, `deliveries` and
`protocol_comparison`; their rows must be what the engine computes for the
same traces, the worked traces' replay statements must hold in the tables,
and the tables must not depend on partitioning.
"""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark import tables
from causal_spark.app.cli import main, run
from causal_spark.config import ReplaySettings
from causal_spark.replay import ReplayRequest, compare_protocols, program_rows, replay_protocols
from causal_spark.replay.plots import format_comparison
from tests.conftest import read_delta
from tests.oracles.replay.engine import replay
from tests.oracles.replay.protocols import PROTOCOLS
from tests.random_traces import frames, random_trace
from tests.replay_traces import (
    WORKED,
    engine_trace,
    recorded_lamport,
    with_random_times,
    worked,
)

FIGURES = [
    "app_messages",
    "control_messages",
    "piggyback_ints_total",
    "held_back",
    "makespan",
    "unsent",
]


@pytest.fixture
def audited(audited_samples: Path) -> Path:
    """The session's audit of data-samples (read only: a test that writes takes a copy)."""
    return audited_samples


def _table(spark: SparkSession, warehouse: Path, name: str) -> DataFrame:
    return spark.createDataFrame(
        read_delta(warehouse / name).to_pylist(), tables.table_schema(name)
    )


@pytest.mark.slow
def test_protocol_runs_hold_one_row_per_trace_and_protocol_as_the_engine_computes_it(
    spark: SparkSession, audited: Path
) -> None:
    runs = _table(spark, audited, tables.PROTOCOL_RUNS)
    assert runs.count() == 9 * len(PROTOCOLS)
    expected = []
    for name in WORKED:
        trace = worked(name)
        for proto, cls in PROTOCOLS.items():
            result = replay(trace, cls)
            expected.append(
                (name, proto, result.status, result.verified, *[result.figures[f] for f in FIGURES])
            )
    columns = ["trace_id", "protocol", "status", "verified", *FIGURES]
    got = runs.where(F.col("trace_id").isin(list(WORKED))).select(
        *[F.col(c).cast("double") if c in FIGURES else F.col(c) for c in columns]
    )
    want = spark.createDataFrame(
        [
            tuple(float(v) if i >= 4 and v is not None else v for i, v in enumerate(row))
            for row in expected
        ],
        got.schema,
    )
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.slow
def test_the_worked_replay_statements_hold_in_the_tables(
    spark: SparkSession, audited: Path
) -> None:
    deliveries = read_delta(audited / tables.DELIVERIES).to_pylist()
    runs = read_delta(audited / tables.PROTOCOL_RUNS).to_pylist()

    def rows(trace: str, protocol: str) -> dict[str, dict[str, Any]]:
        return {
            d["msg_id"]: d
            for d in deliveries
            if d["trace_id"] == trace and d["protocol"] == protocol
        }

    def status(trace: str, protocol: str) -> str:
        return next(
            r["status"] for r in runs if (r["trace_id"], r["protocol"]) == (trace, protocol)
        )

    # overtaken_by_chain: rst holds z back at P3; mf delays y in P1's output buffer
    rst = rows("overtaken_by_chain", "rst")
    assert rst["z"]["held_back"] and rst["z"]["delivery_time"] == rst["x"]["delivery_time"]
    assert rst["x"]["take_time"] <= rst["z"]["take_time"]
    mf = rows("overtaken_by_chain", "mf")
    assert not mf["x"]["held_back"] and not mf["z"]["held_back"]
    assert mf["y"]["post_time"] > mf["y"]["send_time"]
    assert mf["x"]["taken_by_lseq"] == 1 and mf["z"]["taken_by_lseq"] == 2
    # sync deadlocks on sync_deadlock, mf does not; none reproduces it
    assert status("sync_deadlock", "sync") == "deadlock"
    assert status("sync_deadlock", "mf") == "ok"
    # causal protocols deliver q2 before r2 at P2
    for protocol in ("bss", "rst", "ses"):
        chat = rows("causal_chat", protocol)
        assert chat["q2"]["take_time"] <= chat["r2"]["take_time"], protocol
        assert chat["q2"]["taken_by_lseq"] == 1 and chat["r2"]["taken_by_lseq"] == 2, protocol
    # every run that could be checked passed; none reproduces every valid trace
    assert not [r for r in runs if r["verified"] is False]
    nones = [r for r in runs if r["protocol"] == "none" and r["trace_id"] != "causal_cycle"]
    assert nones and all(r["status"] == "ok" and r["verified"] for r in nones)


def test_an_invalid_trace_is_not_replayed_and_says_why(spark: SparkSession, audited: Path) -> None:
    runs = read_delta(audited / tables.PROTOCOL_RUNS).to_pylist()
    cycle = [r for r in runs if r["trace_id"] == "causal_cycle"]
    assert len(cycle) == len(PROTOCOLS)
    assert all(r["status"] == "not_applicable" and "INVALID" in r["reason"] for r in cycle)
    deliveries = read_delta(audited / tables.DELIVERIES).to_pylist()
    assert not [d for d in deliveries if d["trace_id"] == "causal_cycle"]


def test_comparison_summarises_every_protocol(spark: SparkSession, audited: Path) -> None:
    comparison = read_delta(audited / tables.PROTOCOL_COMPARISON).to_pylist()
    protocols = {r["protocol"] for r in comparison}
    assert protocols == set(PROTOCOLS)
    by = {(r["protocol"], r["metric"]): r for r in comparison}
    # mf acknowledges every message; rst piggybacks n^2 integers (3 processes: 9, 2: 4)
    assert by[("mf", "control_per_app")]["median"] == pytest.approx(1.0)
    assert by[("none", "control_per_app")]["median"] == 0.0
    assert by[("none", "makespan_ratio")]["p99"] == pytest.approx(1.0)
    runs = read_delta(audited / tables.PROTOCOL_RUNS).to_pylist()
    rst_ints = [
        r["piggyback_ints_mean"] for r in runs if r["protocol"] == "rst" and r["app_messages"]
    ]
    assert by[("rst", "piggyback_ints_mean")]["median"] == pytest.approx(
        statistics.median(rst_ints)
    )
    assert by[("sync", "status_deadlock")]["traces"] == 3


@pytest.mark.slow
def test_compare_prints_the_table_and_draws_plots(
    audited: Path,
    writable_copy: Callable[[Path], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        [
            "compare",
            "--warehouse",
            str(writable_copy(audited)),
            "--conf",
            "conf/test.yml",
            "--plots",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "protocol comparison" in out and "lamport_total" in out
    for name in ("overhead_vs_processes.png", "overhead_vs_latency_variance.png"):
        assert (tmp_path / name).stat().st_size > 10_000


def test_selective_receives_through_the_cli(
    audited: Path, writable_copy: Callable[[Path], Path], spark: SparkSession
) -> None:
    audited = writable_copy(audited)
    run(
        [
            "replay",
            "--warehouse",
            str(audited),
            "--conf",
            "conf/test.yml",
            "--protocols",
            "mf,rst,none",
            "--receive-mode",
            "selective",
        ],
        session=spark,
    )
    runs = read_delta(audited / tables.PROTOCOL_RUNS).to_pylist()
    assert {r["receive_mode"] for r in runs} == {"selective"}
    status = {(r["trace_id"], r["protocol"]): r["status"] for r in runs}
    assert status[("nested_crowns", "mf")] == "deadlock"
    assert status[("nested_crowns", "rst")] == "ok"
    assert status[("overlapping_crowns", "mf")] == "ok"
    assert status[("selective_xy", "mf")] == "ok"
    assert status[("selective_xy", "none")] == "ok"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protocols", "rst,carrier_pigeon"], "unknown protocol 'carrier_pigeon'"),
        (["--param", "sa.k"], "must look like protocol.key=value"),
        (["--param", "rst.k=3"], "protocol 'rst' has no parameter"),
    ],
    ids=["unknown-protocol", "malformed-param", "unknown-param"],
)
def test_bad_replay_options_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code = main(["replay", "--warehouse", str(tmp_path), "--conf", "conf/test.yml", *args])
    assert code == 2
    assert message in capsys.readouterr().err


def _random_set(spark: SparkSession) -> tuple[list[Any], DataFrame]:
    rng = random.Random(61)
    traces = [
        with_random_times(
            random_trace(
                rng,
                f"r{i:02d}",
                rng.randint(2, 5),
                rng.randint(10, 70),
                multicast=0.3,
                self_send=rng.choice([0.0, 0.1]),
            ),
            rng,
        )
        for i in range(10)
    ]
    for trace in traces:  # what the clocks stage would have written
        index = {p: i for i, p in enumerate(sorted({e["process"] for e in trace.events}))}
        lamport = recorded_lamport(trace.events, trace.messages, index)
        for e in trace.events:
            e["lamport"] = lamport[(e["process"], e["lseq"])]
    events, messages = frames(spark, traces)
    clocks = events.select("trace_id").distinct().withColumn("status", F.lit("ok"))
    return traces, program_rows(events, messages, clocks)


@pytest.mark.slow
def test_random_traces_through_spark_match_the_engine_and_ignore_partitioning(
    spark: SparkSession,
) -> None:
    traces, programs = _random_set(spark)
    request = ReplayRequest(protocols=tuple(PROTOCOLS))
    first = replay_protocols(programs, request)
    runs = first.runs.select("trace_id", "protocol", "status", "verified", "held_back")
    expected = []
    for trace in traces:
        engine = engine_trace(trace)
        for proto, cls in PROTOCOLS.items():
            result = replay(engine, cls)
            expected.append(
                (trace.trace_id, proto, result.status, result.verified, result.figures["held_back"])
            )
    assert_df_equality(
        runs,
        spark.createDataFrame(expected, runs.schema),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        spark.conf.set("spark.sql.shuffle.partitions", "7")
        second = replay_protocols(programs.repartition(5, "pidx"), request)
        assert_df_equality(first.runs, second.runs, ignore_row_order=True)
        assert_df_equality(first.deliveries, second.deliveries, ignore_row_order=True)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)


def test_a_trace_whose_rows_cannot_form_programs_gets_an_error_row_not_a_crash() -> None:
    """The grouped UDF's kernel on one (trace, protocol) group whose process jumps an lseq."""
    import pyarrow as pa

    from causal_spark.replay.adapter import _replay_group

    rows = {
        "trace_id": ["t", "t", "t"],
        "protocol": ["rst", "rst", "rst"],
        "pidx": [0, 0, 1],
        "process": ["P", "P", "Q"],
        "lseq": [1, 3, 1],  # P#2 is missing
        "kind": ["internal", "send", "receive"],
        "ts": [0.0, 1.0, 2.0],
        "lamport": [1, 2, 3],
        "msg_id": [None, "m", "m"],
        "peer": [-1, 1, 0],
        "peer_lseq": [None, None, 3],
        "valid": [True, True, True],
    }
    out = list(_replay_group(pa.table(rows), "nonselective", {}, 1.0))
    assert len(out) == 1  # one run row, no deliveries
    run_row = out[0].column("run")[0].as_py()
    assert run_row["status"] == "error"
    assert run_row["reason"] == "trace t: process P jumps to lseq 3 after 1"
    assert run_row["verified"] is None


def test_deliveries_come_out_in_bounded_batches_whatever_the_input_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group's rows in and its deliveries out, batch by batch: no batch of output holds
    more than `DELIVERY_BATCH_ROWS` rows, and the rows are those of one batch per group."""
    import pyarrow as pa

    from causal_spark.replay import adapter as replay_module
    from causal_spark.replay.adapter import _replay_group

    columns = [
        "trace_id",
        "process",
        "pidx",
        "lseq",
        "kind",
        "ts",
        "lamport",
        "msg_id",
        "peer",
        "peer_lseq",
        "valid",
    ]
    table = pa.Table.from_pylist(
        [dict(zip(columns, row, strict=True)) for row in _program_rows("t", 11)]
    ).append_column("protocol", pa.array(["rst"] * 20))
    whole = list(_replay_group(table, "nonselective", {}, 1.0))
    monkeypatch.setattr(replay_module, "DELIVERY_BATCH_ROWS", 4)
    parts = list(_replay_group(iter(table.to_batches(max_chunksize=3)), "nonselective", {}, 1.0))
    assert [b.num_rows for b in whole] == [1, 10]  # the run row, then one batch
    assert [b.num_rows for b in parts] == [1, 4, 4, 2]
    assert (
        pa.Table.from_batches(parts)
        .sort_by("msg_id")
        .equals(pa.Table.from_batches(whole).sort_by("msg_id"))
    )


def _program_rows(trace_id: str, n: int) -> list[tuple[Any, ...]]:
    """`program_rows` of a hand-made trace: P0 sends one message to each other process
    (P0's send #k at ts k), which receives it 1 s later."""
    rows: list[tuple[Any, ...]] = []
    for k in range(1, n):
        mid = f"{trace_id}-{k}"
        rows.append((trace_id, "P0", 0, k, "send", float(k), 2 * k - 1, mid, k, None, True))
        rows.append((trace_id, f"P{k}", k, 1, "receive", float(k + 1), 2 * k, mid, 0, k, True))
    return rows


def test_a_trace_too_big_for_a_worker_is_not_applicable_and_the_others_replay(
    spark: SparkSession,
) -> None:
    # issue 17 for replay: 1 000 processes put rst's, sa's and ses's n^3 integers of state
    # (4 GB as int32) and their snapshots past the default replay.max_run_bytes (4 GiB):
    # those runs are not_applicable,
    # with the estimate, and the job goes on; none replays the wide trace, and a 2-process
    # trace of the same run replays under every protocol.
    programs = spark.createDataFrame(
        _program_rows("wide", 1000) + _program_rows("narrow", 2),
        "trace_id string, process string, pidx int, lseq long, kind string, ts double, "
        "lamport long, msg_id string, peer int, peer_lseq long, valid boolean",
    )
    limit = ReplaySettings().max_run_bytes
    request = ReplayRequest(protocols=("none", "rst", "sa", "ses"), max_run_bytes=limit)
    runs = {
        (r["trace_id"], r["protocol"]): r
        for r in replay_protocols(programs, request).runs.collect()
    }
    too_big = {key for key, r in runs.items() if r["status"] == "not_applicable"}
    assert too_big == {("wide", "rst"), ("wide", "sa"), ("wide", "ses")}
    for key in too_big:
        reason = runs[key]["reason"]
        assert re.fullmatch(
            r"estimated peak memory (\S+) MiB \((\d+) B\) exceeds replay.max_run_bytes "
            rf"4096.0 MiB \({limit} B\) \(1998 rows, n = 1000, .*",
            reason,
        ), reason
        estimate = int(re.findall(r"\((\d+) B\)", reason)[0])
        assert estimate > 4 * 1000**3  # the n x n x n int32 matrices alone
        assert runs[key]["app_messages"] is None
    for key, r in runs.items():
        if key not in too_big:
            assert (r["status"], r["verified"], r["unsent"]) == ("ok", True, 0), key
            assert r["app_messages"] == (999 if key[0] == "wide" else 1), key


def test_a_trace_without_ts_or_lamport_clocks_is_not_applicable_not_replayed_at_zero(
    spark: SparkSession,
) -> None:
    # clocks leave a trace too wide for them not_applicable with null Lamport clocks; one
    # whose events lack ts as well has no times to replay on (before: every time was 0 and
    # the run 'ok', makespan 0). One that has its ts still replays on them.
    events = spark.createDataFrame(
        [(t, p, i, 1, k, ts, None) for t, base in (("bare", None), ("timed", 0.0))
         for p, i, k, ts in (("P", 0, "send", base), ("Q", 1, "receive",
                                                     None if base is None else 2.0))],
        "trace_id string, process string, pidx int, lseq long, kind string, ts double, "
        "lamport long",
    )  # fmt: skip
    messages = spark.createDataFrame(
        [(t, "m", 0, 1, 1, 1) for t in ("bare", "timed")],
        "trace_id string, msg_id string, src_pidx int, dst_pidx int, send_lseq long, "
        "recv_lseq long",
    )
    trace_clocks = spark.createDataFrame(
        [("bare", "not_applicable"), ("timed", "not_applicable")], "trace_id string, status string"
    )
    programs = program_rows(events, messages, trace_clocks)
    runs = {
        r["trace_id"]: r
        for r in replay_protocols(programs, ReplayRequest(protocols=("none",))).runs.collect()
    }
    assert runs["bare"]["status"] == "not_applicable"
    assert runs["bare"]["reason"].startswith("no times to replay on: some events have no ts")
    assert runs["bare"]["makespan"] is None
    assert (runs["timed"]["status"], runs["timed"]["timebase"]) == ("ok", "ts")
    assert runs["timed"]["makespan"] == pytest.approx(2.0)


def _run_row(trace_id: str, protocol: str, **figures: float) -> dict[str, Any]:
    """A `protocol_runs` row of an ok run: 10 application messages and these figures."""
    row: dict[str, Any] = dict.fromkeys(tables.table_schema(tables.PROTOCOL_RUNS).names)
    row.update(
        trace_id=trace_id, protocol=protocol, receive_mode="nonselective", params="{}",
        n_processes=2, timebase="ts", skewed=False, recorded_makespan=1e308, status="ok",
        app_messages=10, control_messages=0, held_back=1, sender_delay_total=0.0,
    )  # fmt: skip
    row.update(figures)
    return row


def test_figures_that_cannot_be_computed_print_as_absent_with_the_reason(
    spark: SparkSession,
) -> None:
    # Times near the top of the double range (valid ts) overflow: a makespan ratio or a
    # hold-back delay comes out inf or NaN. Over skeen's [1.5, inf, inf] Spark's p99 is
    # inf + 0.99 * (inf - inf) = NaN, and the median inf: compare printed "inf" and "nan".
    inf, nan = float("inf"), float("nan")
    runs = spark.createDataFrame(
        [
            _run_row("t1", "skeen", makespan_ratio=1.5, holdback_delay_mean=0.5),
            _run_row("t2", "skeen", makespan_ratio=inf, holdback_delay_mean=nan),
            _run_row("t3", "skeen", makespan_ratio=inf, holdback_delay_mean=2.5),
            _run_row("t1", "none", makespan_ratio=1.0, holdback_delay_mean=None),
        ],
        tables.table_schema(tables.PROTOCOL_RUNS),
    )
    comparison = compare_protocols(runs)
    by = {(r["protocol"], r["metric"]): r for r in comparison.collect()}
    ratio = by[("skeen", "makespan_ratio")]
    assert (ratio["traces"], ratio["median"], ratio["p99"]) == (1, 1.5, 1.5)
    assert by[("skeen", "not_computed_makespan_ratio")]["traces"] == 2
    assert by[("skeen", "holdback_delay_mean")]["traces"] == 2
    assert by[("skeen", "not_computed_holdback_delay_mean")]["traces"] == 1
    assert ("none", "not_computed_makespan_ratio") not in by
    text = format_comparison(comparison)
    assert not re.search(r"\binf\b|\bnan\b", text), text
    skeen = next(line for line in text.splitlines() if line.startswith("skeen"))
    assert "1.50 (1.50)*" in skeen, skeen
    assert (
        "* makespan x of skeen (nonselective): absent for 2 run(s), not computed (NaN or"
        " infinite: a time beyond the range of a double)"
    ) in text.splitlines()
    assert "* hold s of skeen (nonselective): absent for 1 run(s)," in text
