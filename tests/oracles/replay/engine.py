"""The reference replay engine: one discrete-event model of programs, network and protocol.

The readable definition of docs/replay.md that the product's compiled loop
(`causal_spark.replay.loop`) is held to, event for event, by the tests. It keeps
its own trace builder, figures and verification on purpose: they are the
independent, obvious versions of the product's (`layout.py`, `figures.py`,
`verify.py` and the loop's inline checks), so a test that compares the two
compares two implementations. The product imports nothing from here.

No Spark here: `build_trace` turns one trace's rows into programs and
messages, `replay` runs one protocol over it and returns the run's figures,
its deliveries and the result of its verification.

The model, as docs/replay.md fixes it:
- Each process runs its recorded events in order. A send or internal event
  completes its recorded gap after the previous event of its process
  completed; a receive completes at max(previous completion, delivery of the
  message it takes). Gaps and latencies come from `ts` (or the Lamport clock
  of every event when the trace lacks `ts`); negative ones are clamped to 0
  and the trace is `skewed`.
- A message is on the network for its recorded latency; a lost (in-flight)
  message never arrives; an orphan receive's message comes from outside the
  trace at its recorded time and is delivered on arrival. Control messages
  take the median recorded latency of their directed channel, else of the
  trace, else `default_latency`.
- Non-selective receives take the earliest delivered message not yet taken.
  Selective receives take a message from their recorded source: the first
  one, in arrival order, that the protocol may deliver against the state
  built from taken messages; delivery is the receive.
- Simultaneous events run in a fixed order: by the recorded Lamport clock of
  the event they stand for (a step's own event, an arrival's recorded
  receive; control messages last), then arrivals before program steps, then
  by process; so a run is deterministic and `none` exact even with ties.

Verification (docs/replay.md, "Invariant") runs on the execution the replay
produced: `none` must reproduce the recorded one exactly; causal protocols
must leave no causal-order violation, `fifo` no FIFO violation, found by the
detector's kernel (Schiper, Eggli & Sandoz, "A New Algorithm to Implement Causal Ordering",
Proposition 2) on the replayed execution's vector
clocks; total-order protocols must have every two processes take their
common multicasts in one order. Self-addressed messages bypass causal
protocols (docs/replay.md: delivered on arrival), so they are not held to the causal
check as the overtaken message.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from causal_spark.anomalies.kernel import overtaking
from causal_spark.clocks.kernel import vector_clocks
from causal_spark.replay.figures import ACCOUNTS, accounting_error, makespan_figures
from causal_spark.replay.model import (
    EXTERNAL,
    INTERNAL,
    KIND_CODES,
    RECEIVE,
    SEND,
    STATUS_DEADLOCK,
    STATUS_ERROR,
    STATUS_NOT_APPLICABLE,
    STATUS_OK,
    STATUS_STALLED,
    Run,
    TraceShapeError,
)

if TYPE_CHECKING:
    from tests.oracles.replay.protocols.base import Protocol

# program states
_READY, _WAIT_RECEIVE, _WAIT_SEND, _DONE = 0, 1, 2, 3
# heap priorities at one instant: arrivals first, then program steps
_ARRIVAL, _STEP = 0, 1
_LAST = 1 << 62


@dataclass
class ReplayTrace:
    """One trace as programs and messages, in the engine's terms.

    Per process p (pidx order): `kind[p][k]`, `lseq[p][k]`, `gap[p][k]` and
    recorded `lamport[p][k]` of its k-th event; `copies[p][k]` the messages of
    a send event in destination order; `takes[p][k]` the message a receive
    recorded taking. Per message: `msg_id`, `src` (pidx, or EXTERNAL), `dst` (pidx, or -1 when the
    destination has no events), `send_lseq`/`recv_lseq` (-1 if missing),
    `latency` (None when lost), `arrival` (an orphan's recorded receive time).
    """

    trace_id: str
    names: list[str]
    kind: list[list[int]]
    lseq: list[list[int]]
    lamport: list[list[int]]
    gap: list[list[float]]
    copies: list[list[list[int]]]
    takes: list[list[int]]
    msg_id: list[str]
    src: list[int]
    dst: list[int]
    send_lseq: list[int]
    recv_lseq: list[int]
    latency: list[float | None]
    arrival: list[float | None]
    recorded_send: list[float | None]
    recorded_recv: list[float | None]
    start: float
    end: float
    skewed: bool
    timebase: str
    channel_latency: dict[tuple[int, int], float] = field(default_factory=dict)
    trace_latency: float | None = None
    # per process, the recorded time (ts, or the Lamport clock) of each event
    recorded: list[list[float]] = field(default_factory=list)
    # the arguments it was built from after trace_id (names, pidx, ..., peer): the
    # compiled engine (`replay_loop.layout`) lays out the same rows
    source_rows: tuple[object, ...] = ()

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def lost(self) -> int:
        return sum(1 for i in range(len(self.msg_id)) if self._is_lost(i))

    def _is_lost(self, m: int) -> bool:
        return self.send_lseq[m] >= 0 and self.latency[m] is None

    def control_latency(self, src: int, dst: int, default: float) -> float:
        found = self.channel_latency.get((src, dst))
        if found is not None:
            return found
        return self.trace_latency if self.trace_latency is not None else default


def build_trace(
    trace_id: str,
    names: Sequence[str],
    pidx: np.ndarray,
    lseq: np.ndarray,
    kind: Sequence[str],
    ts: np.ndarray,
    lamport: np.ndarray,
    msg_id: Sequence[str | None],
    peer: np.ndarray,
) -> ReplayTrace:
    """Programs and messages of one trace from its rows.

    One row per internal event, per message copy of a send event and per
    receive event: pidx, lseq, kind, ts (NaN when missing), lamport, msg_id
    (None for internal events) and peer (for a send the destination's pidx,
    for a receive the source's; -1 when that process has no events or is
    unknown). Times are `ts` when every row has one, else the Lamport clocks.
    """
    n = len(names)
    use_ts = len(ts) > 0 and not np.isnan(ts).any()
    time = ts.astype(np.float64) if use_ts else lamport.astype(np.float64)
    order = np.lexsort((np.asarray(peer), lseq, pidx))
    kinds = [[] for _ in range(n)]  # type: list[list[int]]
    lseqs = [[] for _ in range(n)]  # type: list[list[int]]
    lamports = [[] for _ in range(n)]  # type: list[list[int]]
    times = [[] for _ in range(n)]  # type: list[list[float]]
    copies = [[] for _ in range(n)]  # type: list[list[list[int]]]
    takes = [[] for _ in range(n)]  # type: list[list[int]]
    index: dict[str, int] = {}
    ids: list[str] = []
    src: list[int] = []
    dst: list[int] = []
    send_lseq: list[int] = []
    recv_lseq: list[int] = []
    send_time: list[float | None] = []
    recv_time: list[float | None] = []

    def message(mid: str) -> int:
        found = index.get(mid)
        if found is None:
            found = index[mid] = len(ids)
            ids.append(mid)
            src.append(EXTERNAL)
            dst.append(-1)
            send_lseq.append(-1)
            recv_lseq.append(-1)
            send_time.append(None)
            recv_time.append(None)
        return found

    # plain lists: indexing NumPy scalars row by row costs several times more
    pidx_of, lseq_of, lamport_of, peer_of = (
        np.asarray(column).tolist() for column in (pidx, lseq, lamport, peer)
    )
    time_of = time.tolist()
    for row in order.tolist():
        p = pidx_of[row]
        q = lseq_of[row]
        code = KIND_CODES.get(kind[row])
        if code is None or not 0 <= p < n:
            raise TraceShapeError(
                f"trace {trace_id}: bad event row (process {p}, kind {kind[row]})"
            )
        fresh = not lseqs[p] or lseqs[p][-1] != q
        if fresh:
            if (lseqs[p] and q != lseqs[p][-1] + 1) or (not lseqs[p] and q != 1):
                raise TraceShapeError(
                    f"trace {trace_id}: process {names[p]} jumps to lseq {q} "
                    f"after {lseqs[p][-1] if lseqs[p] else 0}"
                )
            kinds[p].append(code)
            lseqs[p].append(q)
            lamports[p].append(lamport_of[row])
            times[p].append(time_of[row])
            copies[p].append([])
            takes[p].append(-1)
        elif code != SEND or kinds[p][-1] != SEND:
            raise TraceShapeError(f"trace {trace_id}: two rows for event {names[p]}#{q}")
        if code == INTERNAL:
            continue
        mid = msg_id[row]
        if mid is None:
            raise TraceShapeError(f"trace {trace_id}: {kind[row]} {names[p]}#{q} has no msg_id")
        m = message(mid)
        if code == SEND:
            src[m] = p
            dst[m] = peer_of[row]
            send_lseq[m] = q
            send_time[m] = time_of[row]
            copies[p][-1].append(m)
        else:
            if send_lseq[m] < 0:
                src[m] = peer_of[row] if peer_of[row] >= 0 else EXTERNAL
            dst[m] = p
            recv_lseq[m] = q
            recv_time[m] = time_of[row]
            takes[p][-1] = m
    all_times = [t for per in times for t in per]
    start = min(all_times) if all_times else 0.0
    end = max(all_times) if all_times else 0.0
    skewed = False
    gaps: list[list[float]] = []
    for p in range(n):
        previous = start
        per: list[float] = []
        for t in times[p]:
            gap = t - previous
            if gap < 0:
                skewed = True
                gap = 0.0
            per.append(gap)
            previous = t
        gaps.append(per)
    latency: list[float | None] = []
    arrival: list[float | None] = []
    samples: dict[tuple[int, int], list[float]] = {}
    for m in range(len(ids)):
        sent, got = send_time[m], recv_time[m]
        if sent is not None and got is not None:
            lat = got - sent
            if lat < 0:
                skewed = True
                lat = 0.0
            latency.append(lat)
            arrival.append(None)
            samples.setdefault((src[m], dst[m]), []).append(lat)
        else:
            latency.append(None)
            arrival.append(got if sent is None else None)
    channel = {key: float(np.median(values)) for key, values in samples.items()}
    every = [v for values in samples.values() for v in values]
    return ReplayTrace(
        trace_id=trace_id,
        names=list(names),
        kind=kinds,
        lseq=lseqs,
        lamport=lamports,
        gap=gaps,
        copies=copies,
        takes=takes,
        msg_id=ids,
        src=src,
        dst=dst,
        send_lseq=send_lseq,
        recv_lseq=recv_lseq,
        latency=latency,
        arrival=arrival,
        recorded_send=send_time,
        recorded_recv=recv_time,
        start=start,
        end=end,
        skewed=skewed,
        timebase="ts" if use_ts else "lamport",
        channel_latency=channel,
        trace_latency=float(np.median(every)) if every else None,
        recorded=times,
        source_rows=(list(names), pidx, lseq, kind, ts, lamport, msg_id, peer),
    )


class Engine:
    """One run: a trace, a protocol, a receive mode. Call `run()` once."""

    def __init__(
        self,
        trace: ReplayTrace,
        protocol: type[Protocol],
        params: Mapping[str, str],
        selective: bool = False,
        default_latency: float = 1.0,
    ) -> None:
        self.trace = trace
        self.n = trace.n
        self.selective = selective
        self.default_latency = default_latency
        count = len(trace.msg_id)
        self.send_time: list[float | None] = [None] * count
        self.post_time: list[float | None] = [None] * count
        self.arrival_time: list[float | None] = [None] * count
        self.delivery_time: list[float | None] = [None] * count
        self.take_time: list[float | None] = [None] * count
        self.taken_by = [-1] * count
        self.piggyback: list[int | None] = [None] * count
        self.control_messages = 0
        self.control_ints = 0
        self._heap: list[tuple[float, int, int, int, int, int, int, object]] = []
        self._seq = 0
        self._pc = [0] * self.n
        self._now = [trace.start] * self.n
        self._state = [_READY] * self.n
        self._pending: list[list[int]] = [[] for _ in range(self.n)]
        self._ready: list[deque[int]] = [deque() for _ in range(self.n)]
        self._max_buffer = 0
        self._channel_last: dict[tuple[int, int], float] = {}
        # the execution as it ran: per process, ("s", copies) / ("r", message) / ("i",)
        self._executed: list[list[tuple[str, object]]] = [[] for _ in range(self.n)]
        self.protocol = protocol(self, params)

    # ---- what protocols call -----------------------------------------------------------

    def post(self, m: int, sender: int, t: float, ints: int) -> None:
        """Put application copy m on the network at t from `sender`, carrying `ints` integers."""
        self.post_time[m] = t
        self.piggyback[m] = ints
        latency = self.trace.latency[m]
        if latency is None:
            return  # lost: it never arrives
        self._arrive_at(sender, self.trace.dst[m], t + latency, ("app", m))

    def control(
        self, sender: int, dst: int, t: float, kind: str, ints: int, *payload: object
    ) -> None:
        """Send a control message; it takes the control latency of its channel."""
        self.control_messages += 1
        self.control_ints += ints
        latency = self.trace.control_latency(sender, dst, self.default_latency)
        self._arrive_at(sender, dst, t + latency, ("ctl", kind, payload))

    def resume(self, p: int, t: float) -> None:
        """A blocked sender's send event completes at t."""
        if self._state[p] != _WAIT_SEND:
            raise AssertionError(f"resume of process {p}, which is not blocked in a send")
        self._state[p] = _READY
        self._complete(p, t)

    def pending(self, p: int) -> list[int]:
        """Arrived application copies at p that are not delivered yet, in arrival order."""
        return self._pending[p]

    def notify(self, p: int, t: float) -> None:
        """Protocol state at p changed: deliver what can be delivered, wake a blocked receive."""
        self.protocol.settle(p, t)
        if not self.selective:
            # the earliest-arrived deliverable copy, then the scan starts again from the
            # beginning (docs/replay.md, "Which message a receive takes"): a delivery may
            # enable an earlier copy, which goes before the later ones
            pending = self._pending[p]
            i = 0
            while i < len(pending):
                m = pending[i]
                bypass = self._bypass(m)
                if not bypass and not self.protocol.deliverable(p, m):
                    i += 1
                    continue
                del pending[i]
                self._deliver(p, m, t)
                self._ready[p].append(m)
                if not bypass:  # the state changed: held-back control messages, then copies
                    self.protocol.delivered(p, m, t)
                    self.protocol.settle(p, t)
                    i = 0
        if self._state[p] == _WAIT_RECEIVE and self._try_take(p, t):
            self._state[p] = _READY
            self._complete(p, t)

    # ---- the loop ----------------------------------------------------------------------

    def run(self) -> Run:
        trace = self.trace
        reason = self.protocol.not_applicable()
        if reason is not None:
            return self._result(STATUS_NOT_APPLICABLE, reason, None)
        for p in range(self.n):
            if trace.kind[p]:
                first = trace.gap[p][0] if trace.kind[p][0] != RECEIVE else 0.0
                self._schedule_step(p, trace.start + first)
        for m, at in enumerate(trace.arrival):
            if at is not None and trace.dst[m] >= 0:
                lam = trace.lamport[trace.dst[m]][trace.recv_lseq[m] - 1]
                self._push(at, lam, _ARRIVAL, trace.dst[m], trace.recv_lseq[m], ("ext", m))
        while self._heap:
            t, _, _, _, _, _, p, item = heapq.heappop(self._heap)
            if item is None:
                self._step(p, t)
            else:
                self._arrival(p, t, item)
        unfinished = [p for p in range(self.n) if self._pc[p] < len(trace.kind[p])]
        if unfinished:
            status = STATUS_STALLED if trace.lost else STATUS_DEADLOCK
            blocked = ", ".join(
                f"{trace.names[p]} at #{trace.lseq[p][self._pc[p]]}" for p in unfinished[:5]
            )
            reason = f"{len(unfinished)} process(es) wait for ever: {blocked}"
            if status == STATUS_STALLED:
                reason += f" (the log lost {trace.lost} message(s))"
            return self._result(status, reason, self._verify())
        return self._result(STATUS_OK, None, self._verify())

    def _push(self, t: float, lam: int, prio: int, key: int, order: int, item: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, lam, prio, key, order, self._seq, key, item))

    def _schedule_step(self, p: int, t: float) -> None:
        self._push(t, self.trace.lamport[p][self._pc[p]], _STEP, p, 0, None)

    def _arrive_at(self, sender: int, dst: int, t: float, item: tuple[object, ...]) -> None:
        if self.protocol.fifo_transport:
            last = self._channel_last.get((sender, dst), -math.inf)
            t = max(t, last)
            self._channel_last[(sender, dst)] = t
        order = lam = _LAST
        if item[0] == "app" and not self.protocol.fifo_transport:
            # ties at one instant follow the recorded Lamport clocks of the events the
            # items stand for (they extend happened-before, so `none` is exact even with
            # zero latencies); on FIFO channels the posting order (the insertion order)
            m = item[1]
            assert isinstance(m, int)
            received = self.trace.recv_lseq[m]
            if received >= 0:
                order = received
                lam = self.trace.lamport[dst][received - 1]
        self._push(t, lam, _ARRIVAL, dst, order, item)

    def _arrival(self, p: int, t: float, item: object) -> None:
        assert isinstance(item, tuple)
        if item[0] == "ctl":
            self.protocol.control(p, item[1], item[2], t)
        else:
            m = item[1]
            self.arrival_time[m] = t
            post, latency = self.post_time[m], self.trace.latency[m]
            if item[0] == "app" and post is not None and latency is not None:
                # post + latency, also when a FIFO channel hands m over later: the wait
                # behind an earlier message of the channel is hold-back (docs/replay.md)
                self.arrival_time[m] = post + latency
            if item[0] == "app" and not self._bypass(m):
                self.protocol.arrived(p, m, t)
            self._pending[p].append(m)
        self.notify(p, t)
        self._max_buffer = max(self._max_buffer, len(self._pending[p]))

    def _bypass(self, m: int) -> bool:
        """Orphans' messages, and self-addressed ones under a causal protocol, skip the protocol."""
        trace = self.trace
        return trace.send_lseq[m] < 0 or (self.protocol.causal and trace.src[m] == trace.dst[m])

    def _step(self, p: int, t: float) -> None:
        trace = self.trace
        k = self._pc[p]
        kind = trace.kind[p][k]
        if kind == INTERNAL:
            self._executed[p].append(("i", None))
            self._complete(p, t)
        elif kind == SEND:
            copies = trace.copies[p][k]
            for m in copies:
                self.send_time[m] = t
            own: list[int] = []
            for m in copies:
                if trace.dst[m] < 0:
                    self.post_time[m] = t  # to a process without events: lost
                    self.piggyback[m] = 0
                elif self.protocol.causal and trace.dst[m] == p:
                    self.post(m, p, t, 0)
                else:
                    own.append(m)
            if self.protocol.point_to_point:
                for m in copies:
                    self._executed[p].append(("s", [m]))
            else:
                self._executed[p].append(("s", list(copies)))
            if not own or self.protocol.send(p, own, t):
                self._complete(p, t)
            else:
                self._state[p] = _WAIT_SEND
        else:
            self._state[p] = _WAIT_RECEIVE
            self.notify(p, t)

    def _complete(self, p: int, t: float) -> None:
        trace = self.trace
        self._now[p] = t
        self._pc[p] += 1
        k = self._pc[p]
        if k < len(trace.kind[p]):
            gap = 0.0 if trace.kind[p][k] == RECEIVE else trace.gap[p][k]
            self._schedule_step(p, t + gap)
        else:
            self._state[p] = _DONE

    def _try_take(self, p: int, t: float) -> bool:
        if not self.selective:
            if not self._ready[p]:
                return False
            self._take(p, self._ready[p].popleft(), t)
            return True
        source = self._source(p)
        for m in self._pending[p]:
            if self.trace.src[m] != source:
                continue
            bypass = self._bypass(m)
            if bypass or self.protocol.deliverable(p, m):
                self._pending[p].remove(m)
                self._deliver(p, m, t)
                if not bypass:
                    self.protocol.delivered(p, m, t)
                self._take(p, m, t)
                self.protocol.settle(p, t)
                return True
        return False

    def _source(self, p: int) -> int:
        recorded = self.trace.takes[p][self._pc[p]]
        return self.trace.src[recorded] if recorded >= 0 else EXTERNAL

    def _deliver(self, p: int, m: int, t: float) -> None:
        self.delivery_time[m] = t

    def _take(self, p: int, m: int, t: float) -> None:
        self.take_time[m] = t
        self.taken_by[m] = self.trace.lseq[p][self._pc[p]]
        self._executed[p].append(("r", m))
        if not self._bypass(m):
            self.protocol.taken(p, m, t)

    # ---- results -----------------------------------------------------------------------

    def _result(self, status: str, reason: str | None, verified: bool | None) -> Run:
        trace = self.trace
        app = [m for m in range(len(trace.msg_id)) if trace.send_lseq[m] >= 0]
        ints = [v for v in (self.piggyback[m] for m in app) if v is not None]
        held = [
            (self.delivery_time[m] or 0.0) - (self.arrival_time[m] or 0.0)
            for m in app
            if self.delivery_time[m] is not None
            and self.arrival_time[m] is not None
            and self.delivery_time[m] > self.arrival_time[m]  # type: ignore[operator]
        ]
        held_back: list[bool | None] = [
            None
            if self.delivery_time[m] is None or self.arrival_time[m] is None
            else bool(self.delivery_time[m] > self.arrival_time[m])  # type: ignore[operator]
            for m in range(len(trace.msg_id))
        ]
        delays = [
            (self.post_time[m] or 0.0) - (self.send_time[m] or 0.0)
            for m in app
            if self.post_time[m] is not None and self.send_time[m] is not None
        ]
        sender_delay = self.protocol.sender_delay(sum(delays))
        ran = status in (STATUS_OK, STATUS_DEADLOCK, STATUS_STALLED)
        done = [max(trace.recorded[p][: self._pc[p]]) for p in range(self.n) if self._pc[p]]
        makespan, ratio = makespan_figures(
            status,
            max(self._now, default=trace.start),
            max(done, default=trace.start),
            trace.start,
            trace.end,
        )
        figures: dict[str, float | int | None] = {
            "app_messages": len(app) if ran else None,
            "control_messages": self.control_messages if ran else None,
            "control_ints": self.control_ints if ran else None,
            "piggyback_ints_total": sum(ints) if ran else None,
            "piggyback_ints_mean": (sum(ints) / len(ints) if ints else 0.0) if ran else None,
            "piggyback_ints_max": (max(ints) if ints else 0) if ran else None,
            "piggyback_bytes_total": 8 * sum(ints) if ran else None,
            "held_back": len(held) if ran else None,
            "holdback_delay_total": sum(held) if ran else None,
            "holdback_delay_mean": (sum(held) / len(held) if held else None) if ran else None,
            "holdback_delay_p99": float(np.percentile(held, 99)) if ran and held else None,
            "holdback_delay_max": max(held) if ran and held else None,
            "sender_delay_total": sender_delay if ran else None,
            "max_holdback_buffer": self._max_buffer if ran else None,
            "makespan": makespan,
            "makespan_ratio": ratio,
        }
        if ran:
            every = range(len(trace.msg_id))
            delivered, taken = self.delivery_time, self.take_time
            figures["lost"] = sum(
                1 for m in app if self.post_time[m] is not None and trace.latency[m] is None
            )
            figures["undelivered"] = sum(
                1 for m in every if self.arrival_time[m] is not None and delivered[m] is None
            )
            figures["untaken"] = sum(
                1 for m in every if delivered[m] is not None and taken[m] is None
            )
            figures["unsent"] = sum(1 for m in app if self.post_time[m] is None)
            wrong = accounting_error(
                figures, sum(1 for m in every if taken[m] is not None), len(trace.msg_id)
            )
            if wrong is not None:
                status, reason = STATUS_ERROR, wrong
        else:
            figures.update(dict.fromkeys(ACCOUNTS))
        return Run(
            status=status,
            reason=reason,
            verified=verified,
            figures=figures,
            send_time=self.send_time,
            post_time=self.post_time,
            arrival_time=self.arrival_time,
            delivery_time=self.delivery_time,
            take_time=self.take_time,
            taken_by=self.taken_by,
            piggyback=self.piggyback,
            held_back=held_back,
        )

    # ---- verification ------------------------------------------------------------------

    def _verify(self) -> bool | None:
        protocol = self.protocol
        if protocol.name == "none":
            return None if self.trace.skewed else self._reproduces_recording()
        if protocol.total_order:
            return self._one_total_order()
        if protocol.causal or protocol.fifo:
            return self._no_violation(causal=protocol.causal)
        return None

    def _reproduces_recording(self) -> bool:
        trace = self.trace
        for m in range(len(trace.msg_id)):
            if trace.recv_lseq[m] >= 0:
                if self.taken_by[m] != trace.recv_lseq[m]:
                    return False
                if not _close(self.take_time[m], trace.recorded_recv[m]):
                    return False
            if trace.send_lseq[m] >= 0 and not _close(self.send_time[m], trace.recorded_send[m]):
                return False
        return True

    def _one_total_order(self) -> bool:
        trace = self.trace
        # a multicast is one send event: (sender, lseq)
        position: list[dict[tuple[int, int], int]] = []
        for p in range(self.n):
            seen: dict[tuple[int, int], int] = {}
            for what, m in self._executed[p]:
                if what == "r" and isinstance(m, int) and trace.send_lseq[m] >= 0:
                    seen[(trace.src[m], trace.send_lseq[m])] = len(seen)
            position.append(seen)
        for p in range(self.n):
            for q in range(p + 1, self.n):
                common = [key for key in position[p] if key in position[q]]
                ranks = [position[q][key] for key in common]  # p's order
                if any(a > b for a, b in itertools.pairwise(ranks)):
                    return False
        return True

    def _no_violation(self, causal: bool) -> bool:
        """The detector's Prop. 2 kernel over the vector clocks of the replayed execution."""
        pidx: list[int] = []
        lseq: list[int] = []
        send_at: dict[int, tuple[int, int]] = {}
        for p in range(self.n):
            for k, (what, item) in enumerate(self._executed[p]):
                pidx.append(p)
                lseq.append(k + 1)
                if what == "s" and isinstance(item, list):
                    for m in item:
                        send_at[m] = (p, k + 1)
        send_pidx = np.full(len(pidx), -1, dtype=np.int64)
        send_lseq = np.full(len(pidx), -1, dtype=np.int64)
        receives: list[tuple[int, int, int]] = []  # (row, dst, message)
        row = 0
        for p in range(self.n):
            for what, item in self._executed[p]:
                if what == "r" and isinstance(item, int) and item in send_at:
                    send_pidx[row], send_lseq[row] = send_at[item]
                    receives.append((row, p, item))
                row += 1
        if not receives:
            return True
        vc, _ = vector_clocks(
            np.asarray(pidx, dtype=np.int64),
            np.asarray(lseq, dtype=np.int64),
            send_pidx,
            send_lseq,
            self.n,
        )
        start = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(np.bincount(np.asarray(pidx), minlength=self.n), out=start[1:])
        by_dst: dict[int, list[tuple[int, int]]] = {}
        for r, p, m in receives:
            by_dst.setdefault(p, []).append((r, m))
        for d, rows in by_dst.items():
            rs = np.asarray([r for r, _ in rows])
            src = np.asarray([send_at[m][0] for _, m in rows], dtype=np.int64)
            s_lseq = np.asarray([send_at[m][1] for _, m in rows], dtype=np.int64)
            send_rows = start[src] + s_lseq - 1
            knows = vc[send_rows, d].astype(np.int64)
            causal_hit, fifo_hit = overtaking(d, src, s_lseq, vc[rs], knows)
            hit = (causal_hit >= 0) & (src != d) if causal else fifo_hit >= 0
            if hit.any():
                return False
        return True


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def replay(
    trace: ReplayTrace,
    protocol: type[Protocol],
    params: Mapping[str, str] | None = None,
    selective: bool = False,
    default_latency: float = 1.0,
) -> Run:
    """Replay `trace` under `protocol`: status, figures, deliveries and the verification."""
    return Engine(trace, protocol, params or {}, selective, default_latency).run()
