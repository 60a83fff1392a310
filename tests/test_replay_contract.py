"""The contract points of DESIGN §4 that issue 22 lists, on hand-made traces.

Each expected figure is worked out by hand from DESIGN §4 (the arithmetic is in
the comments) and checked under both implementations: the reference engine
(`replay_engine`) and the compiled loop (`replay_loop`). Each trace is chosen
so that the rule the project followed before gives other figures.
"""

from __future__ import annotations

from typing import Any

import pytest

from causal_spark.protocols import PROTOCOLS
from causal_spark.replay_engine import STATUS_OK, ReplayTrace, Run, replay
from causal_spark.replay_loop import layout, replay_compiled
from tests.replay_traces import from_rows


def _trace(
    trace_id: str,
    events: list[tuple[str, int, str, float]],
    messages: list[tuple[str, str, str, int, int]],
) -> ReplayTrace:
    """events: (process, lseq, kind, ts); messages: (msg_id, src, dst, send_lseq, recv_lseq)."""
    return from_rows(
        trace_id,
        [{"process": p, "lseq": k, "kind": kind, "ts": ts} for p, k, kind, ts in events],
        [
            {"msg_id": m, "src": s, "dst": d, "send_lseq": sk, "recv_lseq": rk}
            for m, s, d, sk, rk in messages
        ],
    )


def _runs(trace: ReplayTrace, name: str) -> list[tuple[str, Run]]:
    compiled = layout(trace.trace_id, *trace.source_rows)  # type: ignore[arg-type]
    return [
        ("reference", replay(trace, PROTOCOLS[name])),
        ("compiled", replay_compiled(compiled, name)),
    ]


def _figures(run: Run, keys: list[str]) -> dict[str, Any]:
    return {key: run.figures[key] for key in keys}


# ---- control integers per control message kind ------------------------------------------

# A sends x to B at 0; B takes it at 2 (latency 2). The trace's median latency, 2, is
# every control message's latency.
ONE_MESSAGE = (
    [("A", 1, "send", 0.0), ("B", 1, "receive", 2.0)],
    [("x", "A", "B", 1, 1)],
)


@pytest.mark.parametrize("name", ["lamport_total", "skeen"])
def test_acks_releases_proposals_and_finals_carry_one_integer(name: str) -> None:
    # lamport_total (n = 2): x reaches B at 2, B's ack reaches A at 4, A's release reaches
    # B at 6: 2 control messages, ack 1 + release 1 = 2 integers (with the release's old
    # 2 integers: 3). skeen: B's proposal reaches A at 4, A's final reaches B at 6: 2
    # control messages, proposal 1 + final 1 = 2 integers. Both deliver x at 6: held 6 - 2.
    trace = _trace("one_message", *ONE_MESSAGE)
    keys = ["control_messages", "control_ints", "held_back", "holdback_delay_total", "makespan"]
    for engine, run in _runs(trace, name):
        assert run.status == STATUS_OK, engine
        assert _figures(run, keys) == {
            "control_messages": 2,
            "control_ints": 2,
            "held_back": 1,
            "holdback_delay_total": 4.0,
            "makespan": 6.0,
        }, engine
