"""The contract points of DESIGN §4 that issue 22 lists, on hand-made traces.

Each expected figure is worked out by hand from DESIGN §4 (the arithmetic is in
the comments) and checked under both implementations: the reference engine
(`replay_engine`) and the compiled loop (`replay_loop`). Each trace is chosen
so that the rule the project followed before gives other figures.
"""

from __future__ import annotations

from typing import Any

import pytest

from causal_spark.replay.figures import accounting_error
from causal_spark.replay.layout import layout
from causal_spark.replay.model import STATUS_OK, Run
from causal_spark.replay.run import replay_compiled
from tests.oracles.replay.engine import ReplayTrace, replay
from tests.oracles.replay.protocols import PROTOCOLS
from tests.replay_traces import from_rows


def _trace(
    trace_id: str,
    events: list[tuple[str, int, str, float]],
    messages: list[tuple[str, str, str, int, int | None]],
) -> ReplayTrace:
    """events: (process, lseq, kind, ts); messages: (msg_id, src, dst, send_lseq, recv_lseq),
    recv_lseq None for a message in flight at the end of the log."""
    return from_rows(
        trace_id,
        [{"process": p, "lseq": k, "kind": kind, "ts": ts} for p, k, kind, ts in events],
        [
            {"msg_id": m, "src": s, "dst": d, "send_lseq": sk, "recv_lseq": rk}
            for m, s, d, sk, rk in messages
        ],
    )


def _runs(trace: ReplayTrace, name: str, **params: str) -> list[tuple[str, Run, dict[str, int]]]:
    """(engine, run, index of each msg_id in the run's columns) under both engines."""
    compiled = layout(trace.trace_id, *trace.source_rows)  # type: ignore[arg-type]
    return [
        ("reference", replay(trace, PROTOCOLS[name], params), _index(trace.msg_id)),
        ("compiled", replay_compiled(compiled, name, params), _index(compiled.msg_id)),
    ]


def _index(msg_id: list[str]) -> dict[str, int]:
    return {mid: m for m, mid in enumerate(msg_id)}


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
    for engine, run, _ in _runs(trace, name):
        assert run.status == STATUS_OK, engine
        assert _figures(run, keys) == {
            "control_messages": 2,
            "control_ints": 2,
            "held_back": 1,
            "holdback_delay_total": 4.0,
            "makespan": 6.0,
        }, engine


# ---- Lamport clocks in lamport_total and skeen ----------------------------------------------

# Two processes, A (index 0) and B (index 1). B sends x to A; once A has taken x, A sends
# z to B while B sends y to A: y and z are concurrent and both protocols must order them.
# Recorded latencies: x 1, y 3, z 1, so control messages take 1 from A to B and
# median(1, 3) = 2 from B to A.
CROSSING = (
    [
        ("B", 1, "send", 0.0),
        ("A", 1, "receive", 1.0),
        ("A", 2, "send", 2.0),
        ("B", 2, "send", 2.5),
        ("B", 3, "receive", 3.0),
        ("A", 3, "receive", 5.5),
    ],
    [("x", "B", "A", 1, 1), ("z", "A", "B", 2, 3), ("y", "B", "A", 2, 3)],
)


def _times(run: Run, index: dict[str, int], column: str) -> dict[str, float]:
    return {mid: float(getattr(run, column)[m]) for mid, m in index.items()}


def _check(
    trace: Any,
    protocol: str,
    figures: dict[str, float],
    column: str,
    times: dict[str, float],
    **params: str,
) -> None:
    """Both engines replay `trace` under `protocol`: ok and verified, with these figures
    and these per-message times (`column`: delivery_time or arrival_time)."""
    for engine, run, index in _runs(trace, protocol, **params):
        assert (run.status, run.verified) == (STATUS_OK, True), engine
        assert _figures(run, list(figures)) == figures, engine
        assert _times(run, index, column) == times, engine


def test_every_lamport_total_message_is_a_lamport_clock_event() -> None:
    # Clocks (A, B); keys (timestamp, sender), A before B on a tie.
    # t=0    B sends x: B=1, x=(1,B); x reaches A at 0+1=1
    # t=1    A gets x: A=max(0,1)+1=2; ack: A=3, carries 3, reaches B at 1+1=2
    # t=2    B gets the ack: B=max(1,3)+1=4; x is B's head with every ack: release, B=5,
    #        carries 5, reaches A at 2+2=4
    # t=2.5  B sends y (gap 2.5): B=6, y=(6,B); y reaches A at 2.5+3=5.5
    # t=4    A gets the release: A=max(3,5)+1=6; delivers x (held 4-1=3), takes it
    # t=5    A sends z (gap 2-1=1): A=7, z=(7,A); z reaches B at 5+1=6
    # t=5.5  A gets y: A=max(7,6)+1=8, queue [y(6,B), z(7,A)]; ack A=9, reaches B at 6.5
    # t=6    B gets z: B=max(6,7)+1=8, queue [y, z]; ack B=9, reaches A at 6+2=8
    # t=6.5  B gets y's ack: B=max(9,9)+1=10; release y: B=11, reaches A at 6.5+2=8.5
    # t=8    A gets z's ack: A=max(9,9)+1=10; A's head is y, not released: z waits
    # t=8.5  A gets y's release: A=12; delivers y (held 8.5-5.5=3), takes it; z at the
    #        head with its ack: release z, A=13, reaches B at 8.5+1=9.5
    # t=9.5  B gets z's release: delivers z (held 9.5-6=3.5), takes it: makespan 9.5
    # Held back 3 + 3 + 3.5 = 9.5, max 3.5; 3 acks and 3 releases, 1 integer each.
    # The old clocks (an ack sent without a tick, a release without a tick that carries
    # x's timestamp 1) make z=(4,A) and y=(4,B): z goes first, y is delivered at 11
    # (held 5.5), makespan 11, held back 11.5 in all.
    trace = _trace("crossing", *CROSSING)
    _check(
        trace,
        "lamport_total",
        {
            "held_back": 3,
            "holdback_delay_total": 9.5,
            "holdback_delay_max": 3.5,
            "makespan": 9.5,
            "control_messages": 6,
            "control_ints": 6,
        },
        "delivery_time",
        {"x": 4.0, "z": 9.5, "y": 8.5},
    )


# Three processes: A sends x to B; C multicasts y to B and to itself (copies y1, y2);
# then A sends z to C. Recorded latencies: x 3, y1 3, y2 4.5, z 2; control messages
# take the channel's median (A->B 3, C->B 3, A->C 2), else the trace's median, 3.
MULTICAST = (
    [
        ("A", 1, "send", 0.0),
        ("B", 1, "receive", 3.0),
        ("C", 1, "send", 4.0),
        ("B", 2, "receive", 7.0),
        ("A", 2, "send", 7.5),
        ("C", 2, "receive", 8.5),
        ("C", 3, "receive", 9.5),
    ],
    [
        ("x", "A", "B", 1, 1),
        ("y1", "C", "B", 1, 2),
        ("y2", "C", "C", 1, 2),
        ("z", "A", "C", 2, 3),
    ],
)


def test_every_skeen_message_is_a_lamport_clock_event() -> None:
    # Clocks (A, B, C); P a proposal, F a final timestamp.
    # t=0    A sends x: A=1; x reaches B at 3
    # t=3    B gets x: B=2, P=2 to A (reaches it at 3+3=6); sending it: B=3
    # t=4    C sends y: C=1; y1 reaches B at 7, y2 reaches C at 4+4.5=8.5
    # t=6    A gets P=2: A=max(1,2)+1=4; F(x)=2, sending the final: A=5; it reaches B at 9
    # t=7    B gets y1: B=max(3,1)+1=4, P=4 to C (reaches it at 10); B=5
    # t=7.5  A sends z: A=6; z reaches C at 7.5+2=9.5
    # t=8.5  C gets y2: C=max(1,1)+1=2, its own proposal 2 (local)
    # t=9    B gets F(x)=2: B=max(5,2)+1=6; x (2, final) is B's smallest: delivered,
    #        held 9-3=6
    # t=9.5  C gets z: C=max(2,6)+1=7, P=7 to A (reaches it at 12.5); C=8
    # t=10   C gets P=4: C=max(8,4)+1=9; F(y)=max(2,4)=4, final to B (reaches it at 13),
    #        C=10; y2 (4, final) is below z (7): delivered, held 10-8.5=1.5
    # t=12.5 A gets P=7: A=max(6,7)+1=8; F(z)=7, final to C (reaches it at 14.5), A=9
    # t=13   B gets F(y)=4: y1 delivered, held 13-7=6
    # t=14.5 C gets F(z)=7: z delivered, held 14.5-9.5=5; makespan 14.5
    # Held back 6 + 1.5 + 6 + 5 = 18.5, max 6; 3 proposals and 3 finals.
    # The old clocks (an initiator ignores proposals, no tick on sending a proposal or a
    # final, a final sets max(own, F)) send z with timestamp 2: C proposes 3 for z, and
    # F(y)=max(2,3)=3 ties with z's 3, which goes first (sender A before C): y2 waits
    # until 14.5 (held 6), 23 in all.
    trace = _trace("multicast", *MULTICAST)
    _check(
        trace,
        "skeen",
        {
            "held_back": 4,
            "holdback_delay_total": 18.5,
            "holdback_delay_max": 6.0,
            "makespan": 14.5,
            "control_messages": 6,
            "control_ints": 6,
        },
        "delivery_time",
        {"x": 9.0, "y1": 13.0, "y2": 10.0, "z": 14.5},
    )


# ---- arrival on FIFO channels ---------------------------------------------------------------

# A sends m1 (latency 5), then m2 (latency 1) to B, which took m2 first (the shape of
# data-samples/fifo_violation). Control messages take median(5, 1) = 3 either way.
OVERTAKEN = (
    [
        ("A", 1, "send", 0.0),
        ("A", 2, "send", 1.0),
        ("B", 1, "receive", 2.0),
        ("B", 2, "receive", 5.0),
    ],
    [("m1", "A", "B", 1, 2), ("m2", "A", "B", 2, 1)],
)


def test_the_wait_behind_an_earlier_message_of_a_fifo_channel_is_hold_back() -> None:
    # lamport_total: m1 (post 0) arrives at 0+5=5; m2 (post 1) arrives at 1+1=2, but the
    # FIFO channel hands it over at 5, after m1. At 5 B acks both (they reach A at 8); A
    # releases m1, then m2, at 8 (they reach B at 11); B delivers m1, then m2, at 11.
    # Held back: m1 11-5=6, m2 11-2=9: total 15, max 9 (counting m2's arrival at its
    # hand-over, 5: 6 + 6 = 12, max 6). Makespan 11.
    trace = _trace("overtaken", *OVERTAKEN)
    _check(
        trace,
        "lamport_total",
        {
            "held_back": 2,
            "holdback_delay_total": 15.0,
            "holdback_delay_max": 9.0,
            "makespan": 11.0,
        },
        "arrival_time",
        {"m1": 5.0, "m2": 2.0},
    )


def test_mf_without_waits_holds_back_what_its_fifo_channel_holds() -> None:
    # mf with no_wait_same_receiver (FIFO channels): A posts m1 at 0 and, to the same
    # receiver, m2 at 1 without waiting for m1's ack. m1 arrives at 5; m2 arrives at 2 and
    # is handed over at 5, behind m1. The input buffer delivers both at 5: m2 held 5-2=3
    # (counting its arrival at the hand-over: nothing held). Makespan 5, as recorded.
    trace = _trace("overtaken", *OVERTAKEN)
    _check(
        trace,
        "mf",
        {
            "held_back": 1,
            "holdback_delay_total": 3.0,
            "makespan": 5.0,
            "sender_delay_total": 0.0,
        },
        "arrival_time",
        {"m1": 5.0, "m2": 2.0},
        no_wait_same_receiver="true",
    )


# ---- order within one instant -------------------------------------------------------------

# P sends x to C (latency 20), v to R, b to C (latency 5), then w to Q; R, once it has
# v, sends c to C (latency 5); Q, once it has w, sends a to C (latency 1). C receives
# four times. Causally x -> b -> w -> a and x -> v -> c: a needs x and b, b and c need x.
CASCADE = (
    [
        ("P", 1, "send", 0.0),
        ("P", 2, "send", 1.0),
        ("P", 3, "send", 2.0),
        ("P", 4, "send", 3.0),
        ("R", 1, "receive", 2.0),
        ("R", 2, "send", 3.0),
        ("Q", 1, "receive", 4.0),
        ("Q", 2, "send", 5.0),
        ("C", 1, "receive", 6.0),
        ("C", 2, "receive", 7.0),
        ("C", 3, "receive", 8.0),
        ("C", 4, "receive", 20.0),
    ],
    [
        ("x", "P", "C", 1, 4),
        ("v", "P", "R", 2, 1),
        ("b", "P", "C", 3, 2),
        ("w", "P", "Q", 4, 1),
        ("c", "R", "C", 2, 3),
        ("a", "Q", "C", 2, 1),
    ],
)


@pytest.mark.parametrize("name", ["rst", "ses", "sa"])
def test_after_every_delivery_the_scan_starts_again_from_the_earliest_arrival(
    name: str,
) -> None:
    # C's copies arrive at a 6, b 7, c 8 and are held back (each needs x); x arrives at
    # 20 and is delivered. The scan restarts at each delivery, in arrival order:
    # [a, b, c]: a needs b, so b; again [a, c]: a; again [c]: c. Delivery order x, b, a, c,
    # all at 20, and C's receives #1-#4 take them in that order. Held back a 14, b 13,
    # c 12 (39 in all); makespan 20.
    # Continuing the pass after a delivery (the old rule) delivers x; then [a, b, c]:
    # a no, b yes, c yes; then a: C's #3 takes c and #4 takes a.
    trace = _trace("cascade", *CASCADE)
    for engine, run, index in _runs(trace, name):
        assert (run.status, run.verified) == (STATUS_OK, True), engine
        assert _figures(run, ["held_back", "holdback_delay_total", "makespan"]) == {
            "held_back": 3,
            "holdback_delay_total": 39.0,
            "makespan": 20.0,
        }, engine
        taken = {mid: int(run.taken_by[index[mid]]) for mid in ("x", "b", "a", "c")}
        assert taken == {"x": 1, "b": 2, "a": 3, "c": 4}, engine


# ---- accounting: where every copy ends --------------------------------------------------------

# A sends a1 to B, takes b1, then sends a2 and a3 to B; B sends b1 to A, then takes a1 and
# a2. a3 is in flight at the end of the log (lost). Latencies 2 (a1, b1) and 1 (a2).
CUT_CROSSING = (
    [
        ("A", 1, "send", 0.0),
        ("B", 1, "send", 0.0),
        ("A", 2, "receive", 2.0),
        ("B", 2, "receive", 2.0),
        ("A", 3, "send", 3.0),
        ("B", 3, "receive", 4.0),
        ("A", 4, "send", 4.0),
    ],
    [
        ("a1", "A", "B", 1, 2),
        ("b1", "B", "A", 1, 2),
        ("a2", "A", "B", 3, 3),
        ("a3", "A", "B", 4, None),
    ],
)
ACCOUNTED = ["untaken", "undelivered", "lost", "unsent"]


def test_copies_a_stopped_sender_never_sent_are_unsent_not_lost_or_undelivered() -> None:
    trace = _trace("cut_crossing", *CUT_CROSSING)
    # sync: A posts a1 and B posts b1 at 0, and both block until their copy is taken; a1
    # and b1 are delivered on arrival at 2 but neither receiver reaches its receive: the
    # run stalls (the log lost a3). a1 and b1 are untaken; A never reaches the sends of
    # a2 and a3: 2 unsent, nothing lost or undelivered: 0 taken + 2 + 0 + 0 + 2 = 4
    # copies. (Counting copies that were never posted by their recorded fate, as before:
    # a2 undelivered, a3 lost, no unsent.)
    for engine, run, _ in _runs(trace, "sync"):
        assert run.status == "stalled", engine
        assert _figures(run, ACCOUNTED) == {
            "untaken": 2,
            "undelivered": 0,
            "lost": 0,
            "unsent": 2,
        }, engine
    # none replays the recording: a1, b1 and a2 taken, a3 posted at 4 and lost:
    # 3 + 0 + 0 + 1 + 0 = 4.
    for engine, run, _ in _runs(trace, "none"):
        assert run.status == STATUS_OK, engine
        assert _figures(run, ACCOUNTED) == {
            "untaken": 0,
            "undelivered": 0,
            "lost": 1,
            "unsent": 0,
        }, engine


def test_copies_that_do_not_add_up_are_named_in_the_reason() -> None:
    # the check each run passes before it is reported (else: status error, this reason)
    figures = {"untaken": 2, "undelivered": 0, "lost": 0, "unsent": 2}
    assert accounting_error(figures, 0, 4) is None
    assert accounting_error(figures, 1, 4) == (
        "the copies do not add up: taken 1 + untaken 2 + undelivered 0 + lost 0 + unsent 2"
        " = 5, but the trace has 4 copies"
    )
    assert accounting_error({**figures, "unsent": None}, 2, 4) is not None
