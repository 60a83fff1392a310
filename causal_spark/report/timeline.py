"""Delivery timelines as geometry: pure functions from `deliveries` rows to bars.

One band per protocol, time to the right (one time axis for the whole trace). Each
message copy that arrived is a bar from its arrival to its delivery: a message the
protocol held back (delivered after it arrived) is a solid bar as long as its delay,
one delivered at once is a thin tick, one never delivered runs dashed past the end of
the time axis to the right edge. Bars that would overlap in a band are stacked in lanes.

A large trace is never drawn whole: the window keeps at most `max_messages` of its
messages, consecutive in send order, around the message held back longest, and
says how many it left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from causal_spark.report import charts

MAX_MESSAGES = 40
WIDTH, LEFT, RIGHT, TOP, BOTTOM = 900, 120, 24, 16, 40
LANE, BAR, GAP, MIN_BAR = 9, 6, 10, 3.0
OPEN = 30  # px right of the time axis where never-delivered bars end

HELD, ON_TIME, UNDELIVERED = "held", "on_time", "undelivered"


@dataclass(frozen=True)
class Bar:
    protocol: str
    msg: str
    status: str  # held, on_time or undelivered
    arrival: float
    delivery: float | None
    delay: float  # delivery - arrival (0 unless held back)
    x: float
    y: float
    width: float
    colour: str

    @property
    def held(self) -> bool:
        return self.status == HELD


@dataclass(frozen=True)
class Band:
    protocol: str
    style: charts.Style
    y: float  # top of the band
    height: float
    lost: int  # copies of the window's messages that never arrived (not drawn)


@dataclass(frozen=True)
class Timeline:
    trace: str
    bands: tuple[Band, ...]
    bars: tuple[Bar, ...]
    ticks: tuple[tuple[float, str], ...]  # (px, label)
    width: float
    height: float
    messages: int  # messages in the window
    omitted_messages: int  # messages of the trace left out


def _delay(row: Mapping[str, Any]) -> float:
    a, d = row.get("arrival_time"), row.get("delivery_time")
    return max(float(d) - float(a), 0.0) if a is not None and d is not None else 0.0


def window_of(
    sent: Mapping[str, float], longest: Mapping[str, float], max_messages: int = MAX_MESSAGES
) -> list[str]:
    """The messages drawn, in send order (`sent`, then id): all when they fit, else
    `max_messages` consecutive ones centred on the longest hold-back (`longest`)."""
    order = sorted(sent, key=lambda m: (sent[m], m))
    if len(order) <= max_messages:
        return order
    focus = max(range(len(order)), key=lambda i: (longest.get(order[i], 0.0), -i))
    start = min(max(focus - max_messages // 2, 0), len(order) - max_messages)
    return order[start : start + max_messages]


def window(rows: Sequence[Mapping[str, Any]], max_messages: int = MAX_MESSAGES) -> list[str]:
    """`window_of` the rows: a message's send is its earliest over the protocols (its
    arrival when it has none), its hold-back its longest."""
    sent: dict[str, float] = {}
    longest: dict[str, float] = {}
    for r in rows:
        m = str(r["msg_id"])
        t = r.get("send_time")
        t = r.get("arrival_time") if t is None else t
        sent[m] = min(sent.get(m, float("inf")), float("inf") if t is None else float(t))
        longest[m] = max(longest.get(m, 0.0), _delay(r) if r.get("held_back") else 0.0)
    return window_of(sent, longest, max_messages)


def timeline(
    trace: str,
    rows: Sequence[Mapping[str, Any]],
    palette: Mapping[str, charts.Style],
    name: Callable[[Mapping[str, Any]], str],
    max_messages: int = MAX_MESSAGES,
    total: int | None = None,
) -> Timeline:
    """The delivery timeline of one trace from its `deliveries` rows (every protocol run);
    `name` gives a row's protocol as the palette names it. `total`: the trace's messages
    when `rows` hold only a window of them already."""
    shown = window(rows, max_messages)
    inside = set(shown)
    picked = [r for r in rows if str(r["msg_id"]) in inside and name(r) in palette]
    times = [
        float(t)
        for r in picked
        for t in (r.get("arrival_time"), r.get("delivery_time"))
        if t is not None
    ]
    a = charts.axis(times, zero=False, allow_log=False)

    def px(t: float) -> float:
        return LEFT + a.fraction(t) * (WIDTH - LEFT - RIGHT - OPEN)

    bands: list[Band] = []
    bars: list[Bar] = []
    top = float(TOP)
    for protocol in sorted({name(r) for r in picked}):
        mine = [r for r in picked if name(r) == protocol]
        arrived = [r for r in mine if r.get("arrival_time") is not None]
        arrived.sort(key=lambda r: (float(r["arrival_time"]), str(r["msg_id"])))
        lanes: list[float] = []  # right edge (px) of each lane's last bar
        placed: list[tuple[Mapping[str, Any], int, float, float]] = []
        for r in arrived:
            x1 = px(float(r["arrival_time"]))
            delivered = r.get("delivery_time")
            x2 = px(float(delivered)) if delivered is not None else WIDTH - RIGHT
            x2 = max(x2, x1 + MIN_BAR)
            lane = next((i for i, end in enumerate(lanes) if end + 1 < x1), len(lanes))
            if lane == len(lanes):
                lanes.append(x2)
            else:
                lanes[lane] = x2
            placed.append((r, lane, x1, x2))
        for r, lane, x1, x2 in placed:
            delivered = r.get("delivery_time")
            status = UNDELIVERED if delivered is None else HELD if r.get("held_back") else ON_TIME
            bars.append(
                Bar(
                    protocol,
                    str(r["msg_id"]),
                    status,
                    float(r["arrival_time"]),
                    None if delivered is None else float(delivered),
                    _delay(r) if status == HELD else 0.0,
                    x1,
                    top + GAP / 2 + lane * LANE,
                    x2 - x1,
                    palette[protocol].colour,
                )
            )
        height = max(len(lanes), 1) * LANE + GAP
        bands.append(Band(protocol, palette[protocol], top, height, len(mine) - len(arrived)))
        top += height
    if total is None:
        total = len({str(r["msg_id"]) for r in rows})
    return Timeline(
        trace,
        tuple(bands),
        tuple(bars),
        tuple((px(v), s) for v, s in a.ticks),
        WIDTH,
        top + BOTTOM,
        len(shown),
        total - len(shown),
    )
