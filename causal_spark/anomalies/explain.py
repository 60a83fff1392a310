"""Findings in words: what a message's violations and crowns mean, with the events' clocks.

`explain_message` reads only the rows of one trace and the messages it names,
so it costs a few small filtered scans however large the tables are;
`explain_trace` lists a trace's findings, a bounded number of each kind.
Vectors of more than `WIDE` processes are shown by their non-zero entries,
named by process; a crown component names its first members only, and for the
message asked about a crown through it (`crown_through` on the component's rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark.anomalies import CAUSAL, FIFO
from causal_spark.anomalies.crown_kernel import crown_through
from causal_spark.config import DetectSettings


class UnknownMessageError(ValueError):
    """The trace or the message is not in the warehouse."""


# a vector of more processes than this is shown by its non-zero entries
WIDE = 8
# members of a crown component named in words (the rest are counted)
MEMBERS_SHOWN = 20


@dataclass(frozen=True)
class Findings:
    """The tables `explain_message` and `explain_trace` read (as DataFrames)."""

    events: DataFrame
    messages: DataFrame
    violations: DataFrame
    crowns: DataFrame
    crown_members: DataFrame
    trace_summary: DataFrame
    # the witness cycle of an INVALID trace (optional: without it, the cycle is not named)
    trace_clocks: DataFrame | None = None


def _at(process: str | None, lseq: int | None) -> str:
    return f"{process}#{lseq}" if process is not None and lseq is not None else "?"


def vector_text(vc: Sequence[int], names: Mapping[int, str] | None = None) -> str:
    """A vector clock as a list, or past `WIDE` processes its non-zero entries by process."""
    if len(vc) <= WIDE:
        return str(list(vc))
    names = names or {}
    entries = [f"{names.get(i, f'#{i}')}: {v}" for i, v in enumerate(vc) if v]
    return "{" + ", ".join(entries) + f"}} (non-zero of {len(vc)})"


class _Clocks:
    def __init__(
        self,
        rows: Sequence[Row] | Sequence[Mapping[str, Any]],
        names: Mapping[int, str] | None = None,
    ):
        self.by_event = {(r[C.PROCESS], r[C.LSEQ]): r for r in rows}
        # process names by index: those given, else those of the rows that carry a pidx
        self.names = dict(names or {})
        if rows and C.PIDX in _keys(rows[0]):
            for r in rows:
                if r[C.PIDX] is not None:
                    self.names.setdefault(int(r[C.PIDX]), r[C.PROCESS])

    def describe(self, process: str | None, lseq: int | None) -> str:
        row = self.by_event.get((process, lseq))
        if row is None or row[C.VC] is None:
            return _at(process, lseq)
        return f"{_at(process, lseq)} (lamport {row[C.LAMPORT]}, vc {self.vector(row[C.VC])})"

    def vector(self, vc: Sequence[int]) -> str:
        return vector_text(list(vc), self.names)

    def vc(self, process: str, lseq: int) -> list[int] | None:
        row = self.by_event.get((process, lseq))
        return None if row is None or row[C.VC] is None else list(row[C.VC])


def _keys(row: Row | Mapping[str, Any]) -> Sequence[str]:
    return row.asDict().keys() if isinstance(row, Row) else row.keys()  # type: ignore[return-value]


def _process_names(events: DataFrame, trace: str, n: int) -> dict[int, str]:
    """pidx -> process of a wide trace (one narrow scan of its events); {} for a narrow one."""
    if n <= WIDE:
        return {}
    rows = events.where(F.col(C.TRACE_ID) == trace).select(C.PIDX, C.PROCESS).distinct().collect()
    return {int(r[C.PIDX]): r[C.PROCESS] for r in rows}


def _event_rows(events: DataFrame, trace: str, wanted: set[tuple[str, int]]) -> list[Row]:
    if not wanted:
        return []
    condition = reduce(
        lambda a, b: a | b,
        [(F.col(C.PROCESS) == p) & (F.col(C.LSEQ) == lseq) for p, lseq in sorted(wanted)],
    )
    return events.where((F.col(C.TRACE_ID) == trace) & condition).collect()


def _path(msg: Row, other: Row, chain: list[str], by_id: dict[str, Row], clocks: _Clocks) -> str:
    steps = [f"send({msg[C.MSG_ID]}) at {clocks.describe(msg[C.SRC], msg[C.SEND_LSEQ])}"]
    at = (msg[C.SRC], msg[C.SEND_LSEQ])
    for hop in chain:
        h = by_id[hop]
        if (h[C.SRC], h[C.SEND_LSEQ]) != at:  # not the same (multicast) send event
            steps.append(f"send({hop}) at {_at(h[C.SRC], h[C.SEND_LSEQ])}")
        steps.append(f"receive({hop}) at {_at(h[C.DST], h[C.RECV_LSEQ])}")
        at = (h[C.DST], h[C.RECV_LSEQ])
    steps.append(f"send({other[C.MSG_ID]}) at {clocks.describe(other[C.SRC], other[C.SEND_LSEQ])}")
    return " -> ".join(steps)


def explain_message(tables: Findings, trace: str, msg: str, budget: int | None = None) -> str:
    """The violations and crowns message `msg` of `trace` takes part in, in words.

    In a crown component whose witness does not contain `msg`, a crown through `msg` is
    searched for within `budget` (default: `detect.crown_search_budget`'s).
    """
    summary = tables.trace_summary.where(F.col(C.TRACE_ID) == trace).collect()
    if not summary:
        raise UnknownMessageError(f"trace '{trace}' is not in trace_summary")
    s = summary[0]
    mine = tables.messages.where((F.col(C.TRACE_ID) == trace) & (F.col(C.MSG_ID) == msg)).collect()
    if not mine:
        raise UnknownMessageError(f"trace '{trace}' has no message '{msg}'")
    m = mine[0]
    violations = (
        tables.violations.where(
            (F.col(C.TRACE_ID) == trace)
            & ((F.col("overtaken_msg") == msg) | (F.col("overtaking_msg") == msg))
        )
        .orderBy("overtaken_msg", C.KIND)
        .collect()
    )
    membership = tables.crown_members.where(
        (F.col(C.TRACE_ID) == trace) & (F.col(C.MSG_ID) == msg)
    ).collect()
    crowns = []
    members: dict[int, list[str]] = {}
    if membership:
        scc = membership[0]["scc_id"]
        crowns = tables.crowns.where(
            (F.col(C.TRACE_ID) == trace) & (F.col("scc_id") == scc)
        ).collect()
        members[scc] = _first_members(tables, trace, scc)
    through = None
    if crowns and msg not in crowns[0]["crown"]:
        through = _through(tables, trace, crowns[0]["scc_id"], msg, budget)
    named = {msg, *(through.crown if through else [])}
    for v in violations:
        named.update([v["overtaken_msg"], v["overtaking_msg"], *v["chain"]])
    for c in crowns:
        named.update(c["crown"])
    rows = tables.messages.where(
        (F.col(C.TRACE_ID) == trace) & F.col(C.MSG_ID).isin(sorted(named))
    ).collect()
    by_id = {r[C.MSG_ID]: r for r in rows}
    wanted = {(r[C.SRC], r[C.SEND_LSEQ]) for r in rows if r[C.SEND_LSEQ] is not None} | {
        (r[C.DST], r[C.RECV_LSEQ]) for r in rows if r[C.RECV_LSEQ] is not None
    }
    for v in violations:
        overtaken = by_id[v["overtaken_msg"]]
        if overtaken[C.RECV_LSEQ] > 1:
            wanted.add((overtaken[C.DST], overtaken[C.RECV_LSEQ] - 1))
    names = _process_names(tables.events, trace, int(s["n_processes"]))
    clocks = _Clocks(_event_rows(tables.events, trace, wanted), names)

    lines = [_trace_line(s)]
    lines.append(
        f"message {msg}: {m[C.SRC] or '?'} -> {m[C.DST] or '?'}, {m[C.STATUS]}; "
        f"sent at {clocks.describe(m[C.SRC], m[C.SEND_LSEQ])}, "
        f"received at {clocks.describe(m[C.DST], m[C.RECV_LSEQ])}"
    )
    if s["order_class"] == "INVALID":
        lines.extend(_invalid_lines(tables, trace))
        return "\n".join(lines)
    if _not_analysed(s):
        lines.append(NOT_SEARCHED)
        return "\n".join(lines)
    if m[C.STATUS] != C.DELIVERED:
        lines.append(
            "only messages with both a send and a receive take part in violations and crowns"
        )
    for v in violations:
        lines.extend(_violation_lines(v, by_id, clocks))
    for c in crowns:
        lines.extend(_crown_lines(c, members[c["scc_id"]], by_id, clocks))
        lines.extend(_through_lines(msg, c["crown"], through, by_id, clocks))
    if not violations and not crowns and m[C.STATUS] == C.DELIVERED:
        lines.append(f"{msg} is in no violation and in no crown component")
    return "\n".join(lines)


# a trace left out of detect for its size (or without vector clocks): its counts are null
NOT_SEARCHED = "no violation or crown was searched for in this trace (see its order class)"


def _not_analysed(s: Row) -> bool:
    # crowns are counted on every analysed trace (FIFO and causal counts are null also
    # where messages were inferred from clocks: not observable, but analysed)
    return s["order_class"] != "INVALID" and s["n_crown_sccs"] is None


def _trace_line(s: Row) -> str:
    counts = (
        f"{s['n_fifo_violations']} FIFO and {s['n_causal_violations']} causal violation row(s), "
        f"{s['n_crown_sccs']} crown component(s)"
        if s["order_class"] != "INVALID" and not _not_analysed(s)
        else "anomalies not computed"
    )
    if s["order_class"] is not None and "messages_inferred" in _keys(s) and s["messages_inferred"]:
        # messages inferred from recorded clocks: no FIFO or causal-order violation can show
        counts = (
            "FIFO and causal order not observable (messages inferred from clocks), "
            f"{s['n_crown_sccs']} crown component(s)"
        )
    shown = s["order_class"] or f"none: {s['order_class_reason'] or 'not known'}"
    return (
        f"trace {s[C.TRACE_ID]}: order class {shown} ({s['n_processes']} processes, "
        f"{s['n_events']} events, {s['n_messages']} messages, {s['n_quarantined']} rows "
        f"quarantined; {counts})"
    )


def _violation_lines(v: Row, by_id: dict[str, Any], clocks: _Clocks) -> list[str]:
    m, other = by_id[v["overtaken_msg"]], by_id[v["overtaking_msg"]]
    d = v[C.DST]
    if v[C.KIND] == FIFO:
        return [
            f"FIFO violation at {d}: {m[C.MSG_ID]} and {other[C.MSG_ID]} share the channel "
            f"{m[C.SRC]} -> {d}; {m[C.MSG_ID]} was sent first "
            f"({_at(m[C.SRC], m[C.SEND_LSEQ])} before {_at(other[C.SRC], other[C.SEND_LSEQ])}) "
            f"but {d} received {other[C.MSG_ID]} first "
            f"({_at(d, other[C.RECV_LSEQ])} before {_at(d, m[C.RECV_LSEQ])})"
        ]
    assert v[C.KIND] == CAUSAL
    lines = [
        f"causal-order violation at {d}: {m[C.MSG_ID]} was overtaken by {other[C.MSG_ID]} "
        f"(the first-received message that overtook it)",
        "  send(m) happened before send(m'): "
        + _path(m, other, list(v["chain"]), by_id, clocks)
        + (f"  [chain: {', '.join(v['chain'])}]" if v["chain"] else "  [same sender]"),
        f"  yet {d} received {other[C.MSG_ID]} at {_at(d, other[C.RECV_LSEQ])} "
        f"before {m[C.MSG_ID]} at {_at(d, m[C.RECV_LSEQ])}",
    ]
    before = clocks.vc(d, m[C.RECV_LSEQ] - 1) if m[C.RECV_LSEQ] > 1 else None
    if before is not None and m[C.SRC] != d:
        known = before[m[C.SRC_PIDX]]
        lines.append(
            f"  check with the clocks (Schiper, Eggli & Sandoz, Prop. 2): just before receiving "
            f"{m[C.MSG_ID]}, {d}'s clock {_at(d, m[C.RECV_LSEQ] - 1)} is "
            f"{clocks.vector(before)}: it counts "
            f"{known} event(s) of {m[C.SRC]}, >= {m[C.SEND_LSEQ]} = lseq of send("
            f"{m[C.MSG_ID]}), so {d} already knew of that send"
        )
    return lines


def _steps(crown: Sequence[str], by_id: Mapping[str, Any], clocks: _Clocks) -> list[str]:
    steps = []
    for i, a in enumerate(crown):
        b = crown[(i + 1) % len(crown)]
        ma, mb = by_id[a], by_id[b]
        steps.append(
            f"s({a}) at {clocks.describe(ma[C.SRC], ma[C.SEND_LSEQ])} -> "
            f"r({b}) at {clocks.describe(mb[C.DST], mb[C.RECV_LSEQ])}"
        )
    return steps


def _crown_lines(c: Row, members: list[str], by_id: dict[str, Any], clocks: _Clocks) -> list[str]:
    crown = list(c["crown"])
    steps = _steps(crown, by_id, clocks)
    size = int(c["scc_size"])
    named = members[:MEMBERS_SHOWN]
    shown = ", ".join(named) + (f", ... and {size - len(named)} more" if size > len(named) else "")
    return [
        f"crown component {c['scc_id']} ({c['scc_size']} messages: {shown}): no run with "
        "synchronous communication orders these messages (the trace is not RSC)",
        f"  witness crown of {c['k']} messages ({', '.join(crown)}), "
        + (
            "a shortest one"
            if c["shortest"]
            else "the search stopped at its budget: maybe not the shortest"
        )
        + ":",
        *(f"    {step}" for step in steps),
    ]


@dataclass(frozen=True)
class Through:
    """A crown through the message asked about: msg_ids, that message first ([]: none)."""

    crown: list[str]
    cut: bool  # the search stopped at its budget before it found one
    budget: int


def crown_through_ids(
    ids: Sequence[str],
    src: Sequence[int] | np.ndarray,
    send_lseq: Sequence[int] | np.ndarray,
    dst: Sequence[int] | np.ndarray,
    recv_lseq: Sequence[int] | np.ndarray,
    msg: str,
    budget: int | None = None,
) -> Through:
    """A crown of the fewest messages through `msg`, given the rows (msg_id, src pidx, send
    lseq, dst pidx, receive lseq) of its crown component (or of its whole trace)."""
    budget = DetectSettings().crown_search_budget if budget is None else budget
    order = np.argsort(np.asarray(ids, dtype=object), kind="stable")
    names = [ids[i] for i in order]
    ends = np.concatenate([np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)])
    # processes renumbered 0.. among those the rows name: memory O(rows), not O(trace)
    procs, pidx = np.unique(ends, return_inverse=True)
    found = crown_through(
        int(procs.shape[0]),
        pidx[: len(names)][order],
        np.asarray(send_lseq, dtype=np.int64)[order],
        pidx[len(names) :][order],
        np.asarray(recv_lseq, dtype=np.int64)[order],
        names.index(msg),
        budget,
    )
    return Through([names[r] for r in found.crown], found.cut, budget)


def _through(tables: Findings, trace: str, scc: int, msg: str, budget: int | None) -> Through:
    """`crown_through_ids` on the rows of component `scc` (one join, O(component) rows)."""
    ids = tables.crown_members.where(
        (F.col(C.TRACE_ID) == trace) & (F.col("scc_id") == scc)
    ).select(C.MSG_ID)
    rows = (
        tables.messages.where(F.col(C.TRACE_ID) == trace)
        .join(ids, C.MSG_ID)
        .select(C.MSG_ID, C.SRC_PIDX, C.SEND_LSEQ, C.DST_PIDX, C.RECV_LSEQ)
        .toArrow()
    )
    src, send, dst, recv = (
        rows.column(c).to_numpy() for c in (C.SRC_PIDX, C.SEND_LSEQ, C.DST_PIDX, C.RECV_LSEQ)
    )
    return crown_through_ids(rows.column(C.MSG_ID).to_pylist(), src, send, dst, recv, msg, budget)


def _through_lines(
    msg: str, witness: Sequence[str], through: Through | None, by_id: Mapping[str, Any],
    clocks: _Clocks,
) -> list[str]:  # fmt: skip
    """The crown through `msg` after its component's lines (none when the witness has it)."""
    if msg in witness or through is None:
        return []
    if through.crown:
        crown = through.crown
        return [
            f"  a crown through {msg}, {len(crown)} messages, a shortest one: "
            + " -> ".join([*crown, crown[0]]),
            *(f"    {step}" for step in _steps(crown, by_id, clocks)),
        ]
    if through.cut:
        return [
            f"  the search for a crown through {msg} stopped at its budget "
            f"({through.budget} steps, detect.crown_search_budget) before finding one; "
            "the witness crown above does not pass through it"
        ]
    return [
        f"  no crown passes through {msg}: none of the members its send reaches step by step "
        f"(s(m) -> r(m')) is sent before r({msg}); the witness crown above is the component's"
    ]


def _first_members(tables: Findings, trace: str, scc: int) -> list[str]:
    """The first `MEMBERS_SHOWN` msg_ids of a crown component (by id), not all of them."""
    rows = (
        tables.crown_members.where((F.col(C.TRACE_ID) == trace) & (F.col("scc_id") == scc))
        .select(C.MSG_ID)
        .orderBy(C.MSG_ID)
        .limit(MEMBERS_SHOWN)
        .collect()
    )
    return [r[C.MSG_ID] for r in rows]


def _invalid_lines(tables: Findings, trace: str) -> list[str]:
    lines = ["the trace is INVALID (a causal cycle): no anomaly is computed for it"]
    if tables.trace_clocks is not None:
        rows = tables.trace_clocks.where(F.col(C.TRACE_ID) == trace).select("cycle").collect()
        cycle = rows[0]["cycle"] if rows else None
        if cycle:
            lines.append(
                f"  witness cycle of {len(cycle)} receive(s): "
                + " -> ".join(f"receive({m})" for m in cycle)
                + " -> back to the first: each receive happens before the send that the "
                "next one waits for"
            )
    return lines


def explain_trace(tables: Findings, trace: str, limit: int = 50) -> str:
    """The findings of one trace, a line each: at most `limit` of each kind, the rest counted.

    Violations are listed by overtaken message, crown components by size (largest first);
    `explain --msg` then tells one message's story.
    """
    summary = tables.trace_summary.where(F.col(C.TRACE_ID) == trace).collect()
    if not summary:
        raise UnknownMessageError(f"trace '{trace}' is not in trace_summary")
    s = summary[0]
    lines = [_trace_line(s)]
    if s["order_class"] == "INVALID":
        lines.extend(_invalid_lines(tables, trace))
        return "\n".join(lines)
    if _not_analysed(s):
        lines.append(NOT_SEARCHED)
        return "\n".join(lines)
    violations = tables.violations.where(F.col(C.TRACE_ID) == trace)
    shown = violations.orderBy("overtaken_msg", C.KIND).limit(limit).collect()
    total = int(s["n_fifo_violations"] or 0) + int(s["n_causal_violations"] or 0)
    lines.append(f"violations ({total}):" if total else "no violation")
    for v in shown:
        chain = f" through {', '.join(v['chain'])}" if v["chain"] else ""
        lines.append(
            f"  {v[C.KIND]} at {v[C.DST]}: {v['overtaken_msg']} overtaken by "
            f"{v['overtaking_msg']}{chain}"
        )
    if total > len(shown):
        lines.append(f"  ... and {total - len(shown)} more")
    crowns = (
        tables.crowns.where(F.col(C.TRACE_ID) == trace)
        .orderBy(F.col("scc_size").desc(), "scc_id")
        .limit(limit)
        .collect()
    )
    n_crowns = int(s["n_crown_sccs"] or 0)
    lines.append(f"crown components ({n_crowns}):" if n_crowns else "no crown component")
    for c in crowns:
        lines.append(
            f"  component {c['scc_id']}: {c['scc_size']} messages; witness crown of "
            f"{c['k']} ({', '.join(c['crown'])})"
        )
    if n_crowns > len(crowns):
        lines.append(f"  ... and {n_crowns - len(crowns)} more")
    return "\n".join(lines)


# The same words for rows read without Spark (dicts: the HTML report, `explain --svg`).


def trace_words(summary: Mapping[str, Any]) -> str:
    """The one-line account of a trace (its `trace_summary` row)."""
    return _trace_line(summary)  # type: ignore[arg-type]


def violation_words(
    violation: Mapping[str, Any],
    messages: Mapping[str, Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]] | _Clocks,
) -> list[str]:
    """A violation in words; `messages` by msg_id, `events` with their clocks (or the
    `event_clocks` of them, made once for the findings of one trace)."""
    return _violation_lines(violation, messages, _clocks(events))  # type: ignore[arg-type]


def crown_words(
    crown: Mapping[str, Any],
    members: list[str],
    messages: Mapping[str, Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]] | _Clocks,
) -> list[str]:
    """A crown component in words: its members and its witness crown's steps."""
    return _crown_lines(crown, members, messages, _clocks(events))  # type: ignore[arg-type]


def event_clocks(events: Sequence[Mapping[str, Any]]) -> _Clocks:
    """The events' clocks, looked up by (process, lseq): build once, explain many findings."""
    return _Clocks(events)


def _clocks(events: Sequence[Mapping[str, Any]] | _Clocks) -> _Clocks:
    return events if isinstance(events, _Clocks) else _Clocks(events)
