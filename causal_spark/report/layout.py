"""Space-time diagrams as geometry: pure functions from events and messages to marks and arrows.

One horizontal line per process (lane), time to the right. An event's column is its
rank in a causal order of the window's events (Lamport clock, then process): every
arrow of a valid trace points right. An INVALID trace has no clocks; its events stand
at their local sequence number, and the cycle's arrows may point left.

A large trace is never drawn whole: the window keeps the events of the finding's
messages and up to `context` events around each (in that order), at most `max_events`
events in all, and says how many events and messages it left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# roles of a message in a finding; "other" is every message of the window not in it
OVERTAKEN, OVERTAKING, WITNESS, CROWN, MEMBER, CYCLE, SUBJECT, OTHER = (
    "overtaken",
    "overtaking",
    "witness",
    "crown",
    "member",
    "cycle",
    "subject",
    "other",
)
# the roles that place the window (a crown component's other members do not)
FOCUS_ROLES = frozenset({OVERTAKEN, OVERTAKING, WITNESS, CROWN, CYCLE, SUBJECT})

MAX_EVENTS = 120
CONTEXT = 12
DX, DY, LEFT, TOP, RIGHT, BOTTOM, STUB = 42, 48, 70, 30, 40, 20, 30


@dataclass(frozen=True)
class Mark:
    process: str
    lseq: int
    kind: str
    x: float
    y: float


@dataclass(frozen=True)
class Arrow:
    msg: str
    src: str | None
    dst: str | None
    role: str
    x1: float
    y1: float
    x2: float
    y2: float
    stub: bool  # in flight (no receive) or orphan (no send): drawn to or from the edge


@dataclass(frozen=True)
class Lane:
    process: str
    y: float


@dataclass(frozen=True)
class Diagram:
    lanes: tuple[Lane, ...]
    marks: tuple[Mark, ...]
    arrows: tuple[Arrow, ...]
    width: float
    height: float
    omitted_events: int
    omitted_messages: int


def violation_roles(violation: Mapping[str, Any]) -> dict[str, str]:
    """The overtaken message, the one that overtook it and its witness chain."""
    roles = {m: WITNESS for m in violation.get("chain") or []}
    roles[violation["overtaking_msg"]] = OVERTAKING
    roles[violation["overtaken_msg"]] = OVERTAKEN
    return roles


def crown_roles(crown: Sequence[str], members: Sequence[str]) -> dict[str, str]:
    """The witness crown's messages, and the component's other members."""
    roles = {m: MEMBER for m in members}
    roles.update({m: CROWN for m in crown})
    return roles


def cycle_roles(cycle: Sequence[str]) -> dict[str, str]:
    return {m: CYCLE for m in cycle}


Event = tuple[str, int]


def _order(events: Sequence[Mapping[str, Any]]) -> list[Event]:
    """The events in a causal order (Lamport, then process index), or by local sequence
    number when any clock is missing (an INVALID trace)."""
    clocked = all(e.get("lamport") is not None for e in events)
    if clocked:
        key = sorted(events, key=lambda e: (e["lamport"], e.get("pidx") or 0, e["process"]))
    else:
        key = sorted(events, key=lambda e: (e["lseq"], e.get("pidx") or 0, e["process"]))
    return [(e["process"], int(e["lseq"])) for e in key]


@dataclass(frozen=True)
class _Prepared:
    events: Sequence[Mapping[str, Any]]
    messages: Sequence[Mapping[str, Any]]
    order: list[Event]
    rank: dict[Event, int]
    pidx: dict[str, int]
    kinds: dict[Event, str]
    by_id: dict[str, Mapping[str, Any]]
    messages_at: dict[Event, list[int]]  # each event's messages (indexes into `messages`)


_LAST: list[_Prepared] = []  # the last trace prepared (its lists are held, so `is` is safe)


def _prepared(
    events: Sequence[Mapping[str, Any]], messages: Sequence[Mapping[str, Any]]
) -> _Prepared:
    if _LAST and _LAST[0].events is events and _LAST[0].messages is messages:
        return _LAST[0]
    order = _order(events)
    messages_at: dict[Event, list[int]] = {}
    for i, m in enumerate(messages):
        for e in _ends(m):
            messages_at.setdefault(e, []).append(i)
    prep = _Prepared(
        events,
        messages,
        order,
        {e: i for i, e in enumerate(order)},
        {e["process"]: (e.get("pidx") or 0) for e in events},
        {(e["process"], int(e["lseq"])): str(e.get("kind") or "") for e in events},
        {m["msg_id"]: m for m in messages},
        messages_at,
    )
    _LAST[:] = [prep]
    return prep


def _ends(m: Mapping[str, Any]) -> list[Event]:
    ends = []
    if m.get("src") is not None and m.get("send_lseq") is not None:
        ends.append((m["src"], int(m["send_lseq"])))
    if m.get("dst") is not None and m.get("recv_lseq") is not None:
        ends.append((m["dst"], int(m["recv_lseq"])))
    return ends


def window(
    order: Sequence[Event],
    focus: Sequence[Event],
    max_events: int = MAX_EVENTS,
    context: int = CONTEXT,
    rank: Mapping[Event, int] | None = None,
) -> list[Event]:
    """The events drawn: the focus events first, then up to `context` events either side of
    each, at most `max_events` in all; in the order of `order` (`rank`: each event's position
    in it, if already known)."""
    if len(order) <= max_events:
        return list(order)
    rank = rank if rank is not None else {e: i for i, e in enumerate(order)}
    ranks = sorted({rank[e] for e in focus if e in rank})
    chosen: set[int] = set(ranks[:max_events])
    for distance in range(1, context + 1):
        for r in ranks:
            for near in (r - distance, r + distance):
                if len(chosen) >= max_events:
                    break
                if 0 <= near < len(order):
                    chosen.add(near)
    return [order[i] for i in sorted(chosen)]


def layout(
    events: Sequence[Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    roles: Mapping[str, str],
    max_events: int = MAX_EVENTS,
    context: int = CONTEXT,
) -> Diagram:
    """The diagram of one finding: `roles` names its messages (every other one is `other`).

    What depends on the trace only (its causal order, each event's messages) is computed
    once per trace and reused for its other findings: a diagram then costs its window,
    not the trace's size.
    """
    prep = _prepared(events, messages)
    focus = [
        e
        for msg, role in sorted(roles.items())
        if role in FOCUS_ROLES and msg in prep.by_id
        for e in _ends(prep.by_id[msg])
    ]
    shown = window(prep.order, focus, max_events, context, prep.rank)
    column = {e: i for i, e in enumerate(shown)}
    processes = sorted({p for p, _ in shown}, key=lambda p: (prep.pidx.get(p, 0), p))
    kinds = prep.kinds
    lanes = {p: float(TOP + i * DY) for i, p in enumerate(processes)}
    touching = {i for e in shown for i in prep.messages_at.get(e, ())}
    drawn: list[Arrow] = []
    for i in sorted(touching, key=lambda i: str(prep.messages[i]["msg_id"])):
        m = prep.messages[i]
        ends = _ends(m)
        if ends and all(e in column for e in ends):
            drawn.append(_arrow(m, ends, roles, column, lanes))
    omitted = len(prep.messages) - len(drawn)
    marks = tuple(
        Mark(p, lseq, kinds.get((p, lseq), ""), float(LEFT + column[(p, lseq)] * DX), lanes[p])
        for p, lseq in shown
    )
    width = LEFT + max(len(shown) - 1, 0) * DX + RIGHT + STUB
    height = TOP + max(len(processes) - 1, 0) * DY + BOTTOM
    return Diagram(
        lanes=tuple(Lane(p, y) for p, y in lanes.items()),
        marks=marks,
        arrows=tuple(drawn),
        width=width,
        height=height,
        omitted_events=len(prep.order) - len(shown),
        omitted_messages=omitted,
    )


def _arrow(
    m: Mapping[str, Any],
    ends: list[Event],
    roles: Mapping[str, str],
    column: Mapping[Event, int],
    lanes: Mapping[str, float],
) -> Arrow:
    role = roles.get(m["msg_id"], OTHER)
    has_send = m.get("src") is not None and m.get("send_lseq") is not None
    has_recv = m.get("dst") is not None and m.get("recv_lseq") is not None
    if has_send and has_recv:
        (s, r) = ends
        x1, y1 = LEFT + column[s] * DX, lanes[s[0]]
        x2, y2 = LEFT + column[r] * DX, lanes[r[0]]
        return Arrow(m["msg_id"], s[0], r[0], role, x1, y1, x2, y2, False)
    (e,) = ends
    x, y = LEFT + column[e] * DX, lanes[e[0]]
    if has_send:  # in flight: from its send towards the right, half a lane down
        return Arrow(m["msg_id"], e[0], m.get("dst"), role, x, y, x + STUB, y + DY / 2, True)
    return Arrow(m["msg_id"], m.get("src"), e[0], role, x - STUB, y - DY / 2, x, y, True)
