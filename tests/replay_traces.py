"""Traces for the replay engine without Spark: from the worked JSONL files or random traces."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from causal_spark.clocks.kernel import vector_clocks
from tests.oracles.replay.engine import ReplayTrace, build_trace
from tests.random_traces import Trace

DATA = Path(__file__).resolve().parent.parent / "data-samples"
# the worked traces the engine can read without ingest's quarantine rules
WORKED = (
    "overtaken_by_chain",
    "overlapping_crowns",
    "fifo_violation",
    "sync_deadlock",
    "causal_chat",
    "nested_crowns",
    "selective_xy",
)


def from_rows(
    trace_id: str, events: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> ReplayTrace:
    """The engine's trace from `events` / `messages` rows (the tables' columns)."""
    names = sorted({e["process"] for e in events})
    index = {p: i for i, p in enumerate(names)}
    by_event = {(e["process"], e["lseq"]): e for e in events}
    lamport = recorded_lamport(events, messages, index)
    rows: list[tuple[int, int, str, float, int, str | None, int]] = []
    sent: set[tuple[str, int]] = set()
    received: set[tuple[str, int]] = set()
    for m in messages:
        if m["send_lseq"] is not None:
            e = by_event[(m["src"], m["send_lseq"])]
            sent.add((m["src"], m["send_lseq"]))
            peer = index.get(m["dst"], -1) if m["dst"] is not None else -1
            rows.append(_row(e, index, "send", m["msg_id"], peer, lamport))
        if m["recv_lseq"] is not None:
            e = by_event[(m["dst"], m["recv_lseq"])]
            received.add((m["dst"], m["recv_lseq"]))
            peer = index.get(m["src"], -1) if m["src"] is not None else -1
            rows.append(_row(e, index, "receive", m["msg_id"], peer, lamport))
    for e in events:
        if e["kind"] == "internal":
            rows.append(_row(e, index, "internal", None, -1, lamport))
    columns = list(zip(*rows, strict=True)) if rows else [[]] * 7
    return build_trace(
        trace_id,
        names,
        np.asarray(columns[0], dtype=np.int64),
        np.asarray(columns[1], dtype=np.int64),
        list(columns[2]),
        np.asarray(columns[3], dtype=np.float64),
        np.asarray(columns[4], dtype=np.int64),
        list(columns[5]),
        np.asarray(columns[6], dtype=np.int64),
    )


def _row(
    e: dict[str, Any],
    index: dict[str, int],
    kind: str,
    msg_id: str | None,
    peer: int,
    lamport: dict[tuple[str, int], int],
) -> tuple[int, int, str, float, int, str | None, int]:
    ts = e.get("ts")
    return (
        index[e["process"]],
        e["lseq"],
        kind,
        float("nan") if ts is None else float(ts),
        lamport[(e["process"], e["lseq"])],
        msg_id,
        peer,
    )


def recorded_lamport(
    events: list[dict[str, Any]], messages: list[dict[str, Any]], index: dict[str, int]
) -> dict[tuple[str, int], int]:
    """The recorded Lamport clock of every event (what the clocks stage writes)."""
    keys = sorted({(index[e["process"]], e["lseq"]) for e in events})
    row = {key: i for i, key in enumerate(keys)}
    send_pidx = np.full(len(keys), -1, dtype=np.int64)
    send_lseq = np.full(len(keys), -1, dtype=np.int64)
    for m in messages:
        if m["send_lseq"] is not None and m["recv_lseq"] is not None:
            at = row[(index[m["dst"]], m["recv_lseq"])]
            send_pidx[at], send_lseq[at] = index[m["src"]], m["send_lseq"]
    _, clocks = vector_clocks(
        np.asarray([k[0] for k in keys], dtype=np.int64),
        np.asarray([k[1] for k in keys], dtype=np.int64),
        send_pidx,
        send_lseq,
        len(index),
    )
    names = {i: p for p, i in index.items()}
    return {(names[k[0]], k[1]): int(clocks[row[k]]) for k in keys}


def worked(name: str, **ts_override: float) -> ReplayTrace:
    """A worked trace from data-samples/<name>.jsonl (valid rows only, no quarantine rules).

    `ts_override` maps msg_id -> a new receive ts (to make a message arrive earlier).
    """
    raw = [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines() if line]
    events: dict[tuple[str, int], dict[str, Any]] = {}
    messages: dict[str, dict[str, Any]] = {}
    for row in raw:
        key = (row["process"], int(row["seq"]))
        kind = row["kind"].lower()
        ts = row.get("ts")
        if kind == "receive" and row.get("msg_id") in ts_override:
            ts = ts_override[row["msg_id"]]
        events.setdefault(key, {"process": key[0], "seq": key[1], "kind": kind, "ts": ts})
        if kind == "internal":
            continue
        m = messages.setdefault(
            row["msg_id"],
            {
                "msg_id": row["msg_id"],
                "src": None,
                "dst": None,
                "send_lseq": None,
                "recv_lseq": None,
            },
        )
        if kind == "send":
            m["src"], m["dst"], m["send_seq"] = key[0], row.get("peer"), key[1]
        else:
            m["dst"], m["recv_seq"] = key[0], key[1]
            m["src"] = m["src"] or row.get("peer")
    lseq: dict[tuple[str, int], int] = {}
    for p in sorted({k[0] for k in events}):
        for i, seq in enumerate(sorted(s for q, s in events if q == p)):
            lseq[(p, seq)] = i + 1
    event_rows = [dict(e, lseq=lseq[k]) for k, e in events.items()]
    for m in messages.values():
        if "send_seq" in m:
            m["send_lseq"] = lseq[(m["src"], m["send_seq"])]
        if "recv_seq" in m:
            m["recv_lseq"] = lseq[(m["dst"], m["recv_seq"])]
    return from_rows(name, event_rows, list(messages.values()))


def random_broadcasts(rng: random.Random, trace_id: str, n_procs: int, n_steps: int) -> Trace:
    """A random execution that loses nothing where every send goes to all other processes
    (for `bss`)."""
    return random_complete(rng, trace_id, n_procs, n_steps, broadcast=True)


def with_random_times(trace: Trace, rng: random.Random) -> Trace:
    """The same execution with random positive gaps between consecutive events (in the
    trace's recorded order), so latencies and gaps vary but stay consistent."""
    now = 0.0
    for e in sorted(trace.events, key=lambda e: e["ts"]):
        now += rng.expovariate(1.0)
        e["ts"] = now
    return trace


def engine_trace(trace: Trace) -> ReplayTrace:
    """The engine's view of a `tests.random_traces.Trace`."""
    return from_rows(trace.trace_id, trace.events, trace.messages)


def random_complete(
    rng: random.Random,
    trace_id: str,
    n_procs: int,
    n_steps: int,
    multicast: float = 0.3,
    broadcast: bool = False,
) -> Trace:
    """A random execution that loses nothing: unicasts, multicasts (sometimes including the
    sender), internal events and orphan receives; every message sent is received. With
    `broadcast`, every send goes to all other processes."""
    names = [f"{'b' if broadcast else 'c'}{i:02d}" for i in range(n_procs)]
    trace = Trace(trace_id, names)
    lseq = dict.fromkeys(names, 0)
    waiting: dict[str, list[dict[str, Any]]] = {p: [] for p in names}
    counter = 0

    def event(p: str, kind: str) -> int:
        lseq[p] += 1
        trace.events.append(
            {"process": p, "lseq": lseq[p], "kind": kind, "ts": float(len(trace.events))}
        )
        return lseq[p]

    for _ in range(n_steps):
        p = rng.choice(names)
        roll = rng.random()
        others = [q for q in names if q != p]
        if waiting[p] and roll < 0.45:
            m = waiting[p].pop(rng.randrange(len(waiting[p])))
            m["recv_lseq"] = event(p, "receive")
        elif roll < 0.55 or (broadcast and not others):
            event(p, "internal")
        elif roll < 0.58:
            counter += 1
            trace.messages.append(
                {
                    "msg_id": f"o{counter}",
                    "src": None,
                    "dst": p,
                    "send_lseq": None,
                    "recv_lseq": event(p, "receive"),
                }
            )
        else:
            at = event(p, "send")
            if broadcast:
                targets = others
            elif others and rng.random() < multicast:
                targets = rng.sample(others, rng.randint(1, len(others)))
                if rng.random() < 0.2:
                    targets.append(p)
            else:
                targets = [rng.choice(others)] if others else [p]
            for q in targets:
                counter += 1
                m = {
                    "msg_id": f"m{counter}",
                    "src": p,
                    "dst": q,
                    "send_lseq": at,
                    "recv_lseq": None,
                }
                trace.messages.append(m)
                waiting[q].append(m)
    for p in names:
        while waiting[p]:
            m = waiting[p].pop(rng.randrange(len(waiting[p])))
            m["recv_lseq"] = event(p, "receive")
    return trace


def with_tied_times(trace: Trace, rng: random.Random) -> Trace:
    """Whole-second times, so many events share one (zero gaps and zero latencies)."""
    now = 0
    for e in sorted(trace.events, key=lambda e: e["ts"]):
        now += rng.choice([0, 0, 1])
        e["ts"] = float(now)
    return trace


def without_times(trace: Trace) -> Trace:
    """No `ts` at all: the replay runs on the recorded Lamport clocks."""
    for e in trace.events:
        e["ts"] = None
    return trace
