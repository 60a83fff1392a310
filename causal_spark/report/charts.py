"""Charts as geometry (pure functions); the templates draw them as inline SVG.

Every protocol has its own colour AND marker (twelve of each, so eleven protocols
stay apart in print and for colour-blind readers); counts get integer ticks; an axis
whose positive values span two decades or more is logarithmic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Okabe-Ito's eight colour-blind-safe colours, then four more of Tableau's
COLOURS = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9",
    "#F0E442", "#000000", "#8C564B", "#7F7F7F", "#17BECF", "#BCBD22",
)  # fmt: skip
# marker outlines around (0, 0), about 10 px across
MARKERS = (
    "M-5,0a5,5 0 1,0 10,0a5,5 0 1,0 -10,0Z",  # circle
    "M-4.5,-4.5h9v9h-9Z",  # square
    "M0,-5.5L5,4.5H-5Z",  # triangle up
    "M0,-6L6,0L0,6L-6,0Z",  # diamond
    "M0,5.5L5,-4.5H-5Z",  # triangle down
    "M-5,-3l2,-2l3,3l3,-3l2,2l-3,3l3,3l-2,2l-3,-3l-3,3l-2,-2l3,-3Z",  # x
    "M-1.5,-5.5h3v4h4v3h-4v4h-3v-4h-4v-3h4Z",  # plus
    "M0,-6L1.8,-1.8L6,-1.8L2.6,1L3.8,5.5L0,2.8L-3.8,5.5L-2.6,1L-6,-1.8L-1.8,-1.8Z",  # star
    "M0,-5.5L5.2,-1.7L3.2,4.5H-3.2L-5.2,-1.7Z",  # pentagon
    "M-5,0L-2.5,-4.5H2.5L5,0L2.5,4.5H-2.5Z",  # hexagon
    "M-5.5,0L4.5,-5V5Z",  # triangle left
    "M5.5,0L-4.5,-5V5Z",  # triangle right
)

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 460, 260, 60, 30, 26, 44
DODGE = 4.0  # px between protocols at one x


@dataclass(frozen=True)
class Style:
    colour: str
    marker: str


def styles(protocols: Sequence[str]) -> dict[str, Style]:
    """One colour and one marker per protocol, by sorted name (stable across charts)."""
    return {
        p: Style(COLOURS[i % len(COLOURS)], MARKERS[i % len(MARKERS)])
        for i, p in enumerate(sorted(set(protocols)))
    }


@dataclass(frozen=True)
class Axis:
    low: float
    high: float
    log: bool
    ticks: tuple[tuple[float, str], ...]  # (value, label)

    def fraction(self, value: float) -> float:
        """Where `value` falls between the ends of the axis, 0..1."""
        if self.log:
            a, b, v = math.log10(self.low), math.log10(self.high), math.log10(max(value, self.low))
        else:
            a, b, v = self.low, self.high, value
        return 0.5 if b == a else (v - a) / (b - a)


def _label(value: float) -> str:
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    if 0.01 <= abs(value) < 1e4:
        return f"{value:.3g}"
    return f"{value:.0e}"


def axis(
    values: Sequence[float],
    integer: bool = False,
    max_ticks: int = 6,
    zero: bool = True,
    allow_log: bool = True,
) -> Axis:
    """An axis over `values`: logarithmic when the positive values span two decades or more
    (zeros sit at its floor) unless not `allow_log`, integer ticks when they are counts;
    from 0 when `zero`."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return Axis(0.0, 1.0, False, ((0.0, "0"), (1.0, "1")))
    low, high = float(min(finite)), float(max(finite))
    positive = [v for v in finite if v > 0]
    if allow_log and positive and low >= 0 and max(positive) / min(positive) >= 100:
        a = math.floor(math.log10(min(positive)))
        b = math.ceil(math.log10(max(positive)))
        every = max(1, math.ceil((b - a) / max_ticks))
        ticks = tuple((10.0**e, _label(10.0**e)) for e in range(a, b + 1, every))
        return Axis(10.0**a, 10.0**b, True, ticks)
    low = min(low, 0.0) if zero else low
    if high == low:
        high = low + 1
    raw = (high - low) / max_ticks
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    if integer:
        step = max(1.0, float(math.ceil(step)))
    low = math.floor(low / step) * step
    top = math.ceil(high / step) * step
    count = round((top - low) / step)
    ticks = tuple((low + i * step, _label(low + i * step)) for i in range(count + 1))
    return Axis(low, top, False, ticks)


@dataclass(frozen=True)
class Series:
    name: str
    style: Style
    points: tuple[tuple[float, float, float, float], ...]  # (x, y, px, py)


@dataclass(frozen=True)
class Chart:
    title: str
    xlabel: str
    ylabel: str
    x_ticks: tuple[tuple[float, str], ...]  # (px, label)
    y_ticks: tuple[tuple[float, str], ...]
    series: tuple[Series, ...]
    width: int = WIDTH
    height: int = HEIGHT
    log_x: bool = False
    log_y: bool = False


def _px(a: Axis, value: float, pad: float = 16) -> float:
    return LEFT + pad + a.fraction(value) * (WIDTH - LEFT - RIGHT - 2 * pad)


def _py(a: Axis, value: float) -> float:
    return HEIGHT - BOTTOM - a.fraction(value) * (HEIGHT - TOP - BOTTOM)


def line_chart(
    title: str,
    xlabel: str,
    ylabel: str,
    data: Mapping[str, Sequence[tuple[float, float]]],
    palette: Mapping[str, Style],
    integer_x: bool = True,
) -> Chart:
    """One line and marker per protocol (x ascending). Protocols are dodged sideways by a
    few pixels each, so that equal values stay visible side by side instead of hiding."""
    xs = [x for points in data.values() for x, _ in points]
    ys = [y for points in data.values() for _, y in points]
    ax, ay = axis(xs, integer=integer_x, zero=False), axis(ys)
    names = sorted(data)
    dodge = min(DODGE, 40 / max(len(names), 1))
    series = tuple(
        Series(
            name,
            palette[name],
            tuple(
                (x, y, _px(ax, x) + (i - (len(names) - 1) / 2) * dodge, _py(ay, y))
                for x, y in sorted(data[name])
            ),
        )
        for i, name in enumerate(names)
    )
    return Chart(
        title,
        xlabel,
        ylabel,
        tuple((_px(ax, v), s) for v, s in ax.ticks),
        tuple((_py(ay, v), s) for v, s in ay.ticks),
        series,
        log_x=ax.log,
        log_y=ay.log,
    )


@dataclass(frozen=True)
class DotRow:
    name: str
    style: Style
    y: float
    median: float
    p99: float
    x_median: float
    x_p99: float


@dataclass(frozen=True)
class DotChart:
    title: str
    xlabel: str
    ticks: tuple[tuple[float, str], ...]
    rows: tuple[DotRow, ...]
    width: int
    height: int
    log: bool


ROW = 22


def dot_chart(
    title: str,
    xlabel: str,
    values: Mapping[str, tuple[float, float]],
    palette: Mapping[str, Style],
) -> DotChart:
    """One row per protocol: its median (marker) and a line out to its p99."""
    names = sorted(values)
    a = axis([v for name in names for v in values[name]])
    height = TOP + ROW * len(names) + BOTTOM
    left, right = 110, WIDTH - RIGHT

    def px(v: float) -> float:
        return left + a.fraction(v) * (right - left)

    rows = tuple(
        DotRow(
            n,
            palette[n],
            TOP + ROW * i + ROW / 2,
            values[n][0],
            values[n][1],
            px(values[n][0]),
            px(values[n][1]),
        )
        for i, n in enumerate(names)
    )
    return DotChart(
        title, xlabel, tuple((px(v), s) for v, s in a.ticks), rows, WIDTH, height, a.log
    )


@dataclass(frozen=True)
class Bar:
    label: str
    count: int
    y: float
    width: float


def bar_chart(counts: Mapping[str, int], width: float = 300) -> tuple[Bar, ...]:
    """Horizontal bars, longest first."""
    most = max(counts.values(), default=0) or 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(
        Bar(label, n, 8 + i * ROW, max(1.0, n / most * width))
        for i, (label, n) in enumerate(ordered)
    )
