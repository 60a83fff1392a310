"""Random valid executions built directly as `events` / `messages` rows, and slow oracles.

A trace is simulated step by step: a random process either sends (to one
peer, or a multicast to several), does an internal event, or receives one of
the messages waiting for it (any of them, so channels are not FIFO). Some
messages are never received (in flight) and some receives have no send
(orphans). `groups` > 1 splits the processes into groups that never talk to
each other (several connected components in one trace).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession

from causal_spark import tables
from tests.reference_order import Message, happened_before_sets


@dataclass
class Trace:
    trace_id: str
    processes: list[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)

    def lengths(self) -> dict[str, int]:
        out = dict.fromkeys(self.processes, 0)
        for e in self.events:
            out[e["process"]] = max(out[e["process"]], e["lseq"])
        return {p: n for p, n in out.items() if n}

    def delivered(self) -> list[Message]:
        return [
            Message(m["msg_id"], m["src"], m["send_lseq"], m["dst"], m["recv_lseq"])
            for m in self.messages
            if m["status"] == "delivered"
        ]


def random_trace(
    rng: random.Random,
    trace_id: str,
    n_procs: int,
    n_steps: int,
    *,
    groups: int = 1,
    multicast: float = 0.2,
    internal: float = 0.15,
    lose: float = 0.1,
    orphan: float = 0.03,
    self_send: float = 0.0,
) -> Trace:
    names = [f"p{i:02d}" for i in range(n_procs)]
    group = {p: i % groups for i, p in enumerate(names)}
    lseq = dict.fromkeys(names, 0)
    waiting: dict[str, list[dict[str, Any]]] = {p: [] for p in names}
    trace = Trace(trace_id, names)
    counter = 0

    def event(p: str, kind: str, n_msgs: int) -> int:
        lseq[p] += 1
        trace.events.append(
            {
                "trace_id": trace_id,
                "process": p,
                "pidx": names.index(p),
                "lseq": lseq[p],
                "kind": kind,
                "ts": float(len(trace.events)),
                "label": None,
                "n_msgs": n_msgs,
                "seq": lseq[p],
                "source": f"{trace_id}.jsonl",
                "line": len(trace.events) + 1,
                "lamport": None,
                "vc": None,
            }
        )
        return lseq[p]

    for _ in range(n_steps):
        p = rng.choice(names)
        peers = [q for q in names if q != p and group[q] == group[p]]
        if self_send and rng.random() < self_send:
            peers = [p]
        roll = rng.random()
        if waiting[p] and roll < 0.45:
            m = waiting[p].pop(rng.randrange(len(waiting[p])))
            m["recv_lseq"] = event(p, "receive", 0)
            m["status"] = "delivered"
        elif roll < 0.45 + internal or not peers:
            if rng.random() < orphan:
                counter += 1
                trace.messages.append(
                    _message(trace_id, f"o{counter}", None, None, None, p, names.index(p),
                             event(p, "receive", 0), "orphan")
                )
            else:
                event(p, "internal", 0)
        else:
            k = rng.randint(2, len(peers)) if len(peers) > 1 and rng.random() < multicast else 1
            targets = rng.sample(peers, k)
            at = event(p, "send", k)
            for q in targets:
                counter += 1
                m = _message(trace_id, f"m{counter}", p, names.index(p), at, q, names.index(q),
                             None, "in_flight")
                trace.messages.append(m)
                if rng.random() >= lose:
                    waiting[q].append(m)
    present = set(trace.lengths())
    # keep pidx dense over the processes that have events (as ingest does)
    index = {p: i for i, p in enumerate(sorted(present))}
    for e in trace.events:
        e["pidx"] = index[e["process"]]
    for m in trace.messages:
        m["src_pidx"] = index.get(m["src"]) if m["src"] else None
        m["dst_pidx"] = index.get(m["dst"])
    trace.processes = sorted(present)
    return trace


def _message(
    trace_id: str, msg_id: str, src: str | None, src_pidx: int | None, send_lseq: int | None,
    dst: str, dst_pidx: int, recv_lseq: int | None, status: str,
) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "msg_id": msg_id,
        "src": src,
        "dst": dst,
        "src_pidx": src_pidx,
        "dst_pidx": dst_pidx,
        "send_lseq": send_lseq,
        "recv_lseq": recv_lseq,
        "send_ts": None,
        "recv_ts": None,
        "size_bytes": 0,
        "status": status,
    }


def brute_clocks(trace: Trace) -> dict[tuple[str, int], tuple[int, list[int]]]:
    """(process, lseq) -> (lamport, vc) from the transitive closure and longest paths."""
    lengths = trace.lengths()
    msgs = trace.delivered()
    future = happened_before_sets(lengths, msgs)
    order = trace.processes
    past: dict[tuple[str, int], set[tuple[str, int]]] = {e: set() for e in future}
    for e, after in future.items():
        for f in after:
            past[f].add(e)
    send_of = {(m.dst, m.recv_lseq): (m.src, m.send_lseq) for m in msgs}
    lamport: dict[tuple[str, int], int] = {}

    def lam(e: tuple[str, int]) -> int:
        if e not in lamport:
            preds = [(e[0], e[1] - 1)] if e[1] > 1 else []
            if e in send_of:
                preds.append(send_of[e])
            lamport[e] = 1 + max((lam(x) for x in preds), default=0)
        return lamport[e]

    # a topological order (by number of predecessors) keeps the recursion shallow
    for e in sorted(past, key=lambda x: len(past[x])):
        lam(e)
    out = {}
    for e in past:
        vc = [sum(1 for f in past[e] if f[0] == p) + (1 if e[0] == p else 0) for p in order]
        out[e] = (lamport[e], vc)
    return out


def brute_matrix(trace: Trace) -> dict[tuple[str, int], dict[tuple[int, int], int]]:
    """(process, lseq) -> {(i, j): messages i -> j whose send happens before or is the event}."""
    lengths = trace.lengths()
    future = happened_before_sets(lengths, trace.delivered())
    index = {p: i for i, p in enumerate(trace.processes)}
    out: dict[tuple[str, int], dict[tuple[int, int], int]] = {}
    sends = [m for m in trace.messages if m["send_lseq"] is not None and m["dst_pidx"] is not None]
    for e in future:
        counts: dict[tuple[int, int], int] = {}
        for m in sends:
            s = (m["src"], m["send_lseq"])
            if s == e or e in future[s]:
                key = (index[m["src"]], m["dst_pidx"])
                counts[key] = counts.get(key, 0) + 1
        out[e] = counts
    return out


def frames(spark: SparkSession, traces: list[Trace]) -> tuple[DataFrame, DataFrame]:
    """The `events` and `messages` tables of `traces` as DataFrames."""
    events = spark.createDataFrame(
        [e for t in traces for e in t.events], tables.table_schema(tables.EVENTS)
    )
    messages = spark.createDataFrame(
        [m for t in traces for m in t.messages], tables.table_schema(tables.MESSAGES)
    )
    return events, messages


def traces(max_procs: int, max_steps: int) -> st.SearchStrategy[Trace]:
    """Random traces for property tests: 2..max_procs processes, 5..max_steps steps, with
    and without self-sends and multicasts (one seed per example, so hypothesis shrinks it)."""
    return st.builds(
        lambda seed, n_procs, n_steps, self_send, multicast: random_trace(
            random.Random(seed), "t", n_procs, n_steps, self_send=self_send, multicast=multicast
        ),
        seed=st.integers(0, 2**32 - 1),
        n_procs=st.integers(2, max_procs),
        n_steps=st.integers(5, max_steps),
        self_send=st.sampled_from([0.0, 0.15]),
        multicast=st.sampled_from([0.0, 0.3]),
    )
