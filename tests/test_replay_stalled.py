"""Stalled runs still compare (DESIGN §4, issue 22): a log cut while messages were in flight.

A run that does not finish has no makespan (DESIGN §4), but a `stalled` one (the
trace lost messages: the log was cut) has a makespan ratio over the part of the
program that ran: the latest completion among the events it completed, set
against the latest recorded time of the same events. A `deadlock` (no message
lost: the protocol itself stopped) has none. `compare` counts the stalled runs
behind each figure and prints them.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from causal_spark.generate import GeneratorSpec, allot, process_events
from causal_spark.replay import ReplayRequest, compare_protocols, program_rows, replay_protocols
from causal_spark.replay.layout import layout
from causal_spark.replay.model import STATUS_DEADLOCK, STATUS_OK, STATUS_STALLED, Run
from causal_spark.replay.plots import format_comparison
from causal_spark.replay.run import replay_compiled
from tests.oracles.replay.engine import ReplayTrace, replay
from tests.oracles.replay.protocols import PROTOCOLS
from tests.random_traces import Trace, frames
from tests.replay_traces import engine_trace, from_rows, recorded_lamport, worked


def _both(trace: ReplayTrace, name: str) -> list[tuple[str, Run]]:
    compiled = layout(trace.trace_id, *trace.source_rows)  # type: ignore[arg-type]
    return [
        ("reference", replay(trace, PROTOCOLS[name], {})),
        ("compiled", replay_compiled(compiled, name, {})),
    ]


# A sends x to B at 0 (lost: in flight when the log ends) and y to B at 1; C sends z to B
# at 0.5 and has an internal event at 6; B takes z at 2, has an internal event at 3, takes
# y at 4 and ends with an internal event at 20. Recorded: 0 .. 20. Latencies z 1.5, y 3:
# a control message takes their median, 2.25.
CUT = (
    [
        ("A", 1, "send", 0.0), ("A", 2, "send", 1.0),
        ("C", 1, "send", 0.5), ("C", 2, "internal", 6.0),
        ("B", 1, "receive", 2.0), ("B", 2, "internal", 3.0), ("B", 3, "receive", 4.0),
        ("B", 4, "internal", 20.0),
    ],
    [("x", "A", "B", 1, None), ("y", "A", "B", 2, 3), ("z", "C", "B", 1, 1)],
)  # fmt: skip


def _cut_trace() -> ReplayTrace:
    events, messages = CUT
    return from_rows(
        "cut",
        [{"process": p, "lseq": k, "kind": kind, "ts": ts} for p, k, kind, ts in events],
        [
            {"msg_id": m, "src": s, "dst": d, "send_lseq": sk, "recv_lseq": rk}
            for m, s, d, sk, rk in messages
        ],
    )


@pytest.mark.parametrize(
    ("name", "status", "ratio"),
    [
        # sync: A blocks for ever on x (lost); C's send of z blocks until B takes z at 2 and
        # the ack returns at 2 + 2.25 = 4.25, so C's internal event ends at 4.25 + 5.5 =
        # 9.75; B takes z at 2, runs its internal event at 3 and waits for y, never sent.
        # Completed: C's two events (recorded up to 6) and B's first two (up to 3): the
        # replay ends them at 9.75, the recording at 6: 9.75 / 6 = 1.625. Over the whole
        # recorded trace it would be 9.75 / 20; as a finished run, null.
        ("sync", STATUS_STALLED, 9.75 / 6),
        # fifo: y is B's second message from A and x, the first, never arrives: B waits at
        # its receive #3. Completed: A's sends (at 0 and 1), C's events (0.5, 6), B's first
        # two (2, 3), replayed at their recorded times: 6 / 6.
        ("fifo", STATUS_STALLED, 1.0),
        ("none", STATUS_OK, 1.0),
    ],
)
def test_a_stalled_run_sets_the_events_it_completed_against_their_recorded_time(
    name: str, status: str, ratio: float
) -> None:
    for engine, run in _both(_cut_trace(), name):
        assert run.status == status, (engine, run.reason)
        assert run.figures["makespan_ratio"] == pytest.approx(ratio, rel=1e-12), engine
        # DESIGN §4: the makespan of a run that did not finish is null
        expected = None if status != STATUS_OK else 20.0
        assert run.figures["makespan"] == expected, engine


def test_a_deadlocked_run_has_no_makespan_ratio() -> None:
    # sync_deadlock loses nothing: sync stops there by itself, no ratio would be finite
    for engine, run in _both(worked("sync_deadlock"), "sync"):
        assert run.status == STATUS_DEADLOCK, engine
        assert (run.figures["makespan"], run.figures["makespan_ratio"]) == (None, None), engine


# ---- a generated trace, its log cut while messages are in flight -------------------------


def generated_cut(processes: int, events: int, seed: int, keep: float) -> Trace:
    """A trace of `causal_spark.generate`'s model (its NumPy kernel, no Spark), the log cut
    at the time by which a `keep` share of its events had happened: every message sent
    before the cut and received after it is in flight."""
    spec = GeneratorSpec(processes=processes, events=events, seed=seed)
    rows: list[list[tuple[float, int, int, int, str, str | None, int]]] = [
        [] for _ in range(processes)
    ]
    for p, share in enumerate(allot(spec)):
        for batch in process_events(spec, 0, p, share):
            cols = batch.to_pydict()
            for t, send, dst, arrival, lost, copy, ev in zip(
                cols["t"], cols["is_send"], cols["dst"], cols["arrival"], cols["lost"],
                cols["copy"], cols["ev"], strict=True,
            ):  # fmt: skip
                mid = f"p{p}-{copy}" if send else None
                rows[p].append((t, 0, ev, 0, "send" if send else "internal", mid, dst))
                if send and not lost:
                    rows[dst].append((arrival, 1, p, copy, "receive", mid, p))
    cut = float(np.quantile([r[0] for per in rows for r in per], keep))
    names = [f"p{p}" for p in range(processes)]
    trace = Trace("gen-cut", names)
    ends: dict[str, dict[str, Any]] = {}
    for p, per in enumerate(rows):
        kept = sorted(r for r in per if r[0] <= cut)
        for lseq, (t, _, _, _, kind, mid, peer) in enumerate(kept, start=1):
            trace.events.append(
                {
                    "trace_id": trace.trace_id, "process": names[p], "pidx": p, "lseq": lseq,
                    "kind": kind, "ts": t, "label": None, "n_msgs": int(mid is not None),
                    "seq": lseq, "source": "gen.parquet", "line": lseq, "lamport": None,
                    "vc": None,
                }
            )  # fmt: skip
            if mid is None:
                continue
            m = ends.setdefault(
                mid,
                {"trace_id": trace.trace_id, "msg_id": mid, "send_ts": None, "recv_ts": None,
                 "size_bytes": 0, "recv_lseq": None},
            )  # fmt: skip
            src, dst = (p, peer) if kind == "send" else (peer, p)
            m.update(src=names[src], dst=names[dst], src_pidx=src, dst_pidx=dst)
            m["send_lseq" if kind == "send" else "recv_lseq"] = lseq
    for m in ends.values():
        m["status"] = "delivered" if m["recv_lseq"] is not None else "in_flight"
        trace.messages.append(m)
    index = {p: i for i, p in enumerate(names)}
    lamport = recorded_lamport(trace.events, trace.messages, index)
    for e in trace.events:
        e["lamport"] = lamport[(e["process"], e["lseq"])]
    return trace


@pytest.fixture(scope="module")
def cut_log() -> Trace:
    trace = generated_cut(processes=6, events=600, seed=22, keep=0.8)
    in_flight = sum(m["status"] == "in_flight" for m in trace.messages)
    assert in_flight >= 5, in_flight  # the log was cut with messages in flight
    return trace


def test_every_protocol_that_runs_a_cut_log_has_a_makespan_ratio(cut_log: Trace) -> None:
    trace = engine_trace(cut_log)
    statuses = set()
    for name in PROTOCOLS:
        for engine, run in _both(trace, name):
            statuses.add(run.status)
            if run.status not in (STATUS_OK, STATUS_STALLED):
                continue
            ratio = run.figures["makespan_ratio"]
            if name == "sync":
                # every process's first event is a send; sync blocks it until the receiver
                # takes the message, and every receiver is blocked in its own send: no event
                # completes, there is no part of the program to compare (0 / 0)
                assert run.status == STATUS_STALLED
                assert not [k for k in run.taken_by if k is not None and k >= 0], engine
                assert ratio is None, engine
                continue
            assert ratio is not None and ratio > 0, (name, engine, run.status)
    assert STATUS_STALLED in statuses  # not vacuous: some runs stop at the cut


@pytest.mark.slow
def test_compare_prints_the_ratio_of_stalled_runs_and_counts_them(
    spark: SparkSession, cut_log: Trace
) -> None:
    events, messages = frames(spark, [cut_log])
    clocks = events.select("trace_id").distinct().withColumn("status", F.lit("ok"))
    programs = program_rows(events, messages, clocks)
    runs = replay_protocols(programs, ReplayRequest(protocols=tuple(PROTOCOLS))).runs
    by_protocol = {r["protocol"]: r for r in runs.collect()}
    stalled = sorted(p for p, r in by_protocol.items() if r["status"] == STATUS_STALLED)
    assert stalled
    comparison = compare_protocols(runs)
    by = {(r["protocol"], r["metric"]): r["traces"] for r in comparison.collect()}
    for name, run in by_protocol.items():
        if run["status"] in (STATUS_OK, STATUS_STALLED) and name != "sync":  # sync: above
            assert run["makespan_ratio"] is not None, name
            assert by[(name, "makespan_ratio")] == 1, name
            assert by.get((name, "stalled_makespan_ratio")) == (
                1 if run["status"] == STATUS_STALLED else None
            ), name
    text = format_comparison(comparison)
    lines = text.splitlines()
    for name in stalled:
        if name == "sync":
            continue
        row = next(line for line in lines if line.startswith(f"{name} "))
        assert re.search(r"\d\.\d\d \(\d\.\d\d\)~\s+stalled 1$", row), row
        note = next(line for line in lines if line.startswith(f"~ {name} (nonselective)"))
        assert "makespan x 1 (1 stalled)" in note, note
