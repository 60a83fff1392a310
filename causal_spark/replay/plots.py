"""What `compare` prints and draws: protocols x overhead, and overhead against scale.

The figures come from `protocol_comparison` and `protocol_runs`; only the
small aggregated results are collected to the driver.
"""

from __future__ import annotations

import math
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark.replay.compare import NOT_COMPUTED, STALLED

SHOWN_METRICS: tuple[str, ...] = (
    "control_per_app",
    "piggyback_ints_mean",
    "held_back_fraction",
    "holdback_delay_mean",
    "sender_delay_per_app",
    "makespan_ratio",
)
_SHORT = {
    "control_per_app": "ctl/msg",
    "piggyback_ints_mean": "ints/msg",
    "held_back_fraction": "held",
    "holdback_delay_mean": "hold s",
    "sender_delay_per_app": "send s",
    "makespan_ratio": "makespan x",
}


def format_comparison(comparison: DataFrame) -> str:
    """A text table: one line per (protocol, mode), median (p99) of each metric, run statuses.

    A figure that could not be computed in some runs (`not_computed_<metric>` rows) is
    marked `*` (or `-*` when no run had it) and explained below the table. A figure over
    stalled runs (`stalled_<metric>` rows: the part of the program that ran) is marked
    `~`, and a line below the table says over how many runs, and how many stalled."""
    rows = comparison.collect()
    by_key: dict[tuple[str, str], dict[str, tuple[int, float | None, float | None]]] = {}
    for row in rows:
        key = (row["protocol"], row["receive_mode"])
        by_key.setdefault(key, {})[row["metric"]] = (row["traces"], row["median"], row["p99"])
    header = (
        f"{'protocol':<14}{'mode':<13}"
        + "".join(f"{_SHORT[m]:>20}" for m in SHOWN_METRICS)
        + "  runs"
    )
    lines = ["protocol comparison: median (p99) across traces", header]
    notes = []
    for key in sorted(by_key):
        found = by_key[key]
        cells = []
        partial = []
        for metric in SHOWN_METRICS:
            missing = found.get(NOT_COMPUTED + metric)
            stalled = found.get(STALLED + metric)
            mark = ("*" if missing else "") + ("~" if stalled else "")
            if stalled:
                partial.append(f"{_SHORT[metric]} {found[metric][0]} ({stalled[0]} stalled)")
            if missing:
                notes.append(
                    f"* {_SHORT[metric]} of {key[0]} ({key[1]}): absent for {missing[0]} run(s),"
                    " not computed (NaN or infinite: a time beyond the range of a double)"
                )
            if metric in found:
                _, median, p99 = found[metric]
                cells.append(f"{_num(median)} ({_num(p99)}){mark}".rjust(20))
            else:
                cells.append(f"-{mark}".rjust(20))
        statuses = ", ".join(
            f"{name[len('status_') :]} {found[name][0]}"
            for name in sorted(found)
            if name.startswith("status_")
        )
        failed = found.get("verification_failed")
        if failed:
            statuses += f", VERIFICATION FAILED {failed[0]}"
        lines.append(f"{key[0]:<14}{key[1]:<13}" + "".join(cells) + f"  {statuses}")
        if partial:
            notes.append(
                f"~ {key[0]} ({key[1]}), runs behind each figure, stalled ones over the part of"
                f" the program that ran: {', '.join(partial)}"
            )
    return "\n".join(lines + notes)


def _num(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if value == 0 or 0.01 <= abs(value) < 10_000:
        return f"{value:.2f}"
    return f"{value:.1e}"


def trace_latency_variance(messages: DataFrame) -> DataFrame:
    """Per trace: the variance of recorded latencies (recv_ts - send_ts) of delivered messages."""
    latency = F.col(C.RECV_TS) - F.col(C.SEND_TS)
    return (
        messages.where(F.col(C.STATUS) == C.DELIVERED)
        .groupBy(C.TRACE_ID)
        .agg(F.var_pop(latency).alias("latency_variance"))
    )


def plot_overheads(runs: DataFrame, messages: DataFrame, out_dir: str | Path) -> list[Path]:
    """PNG plots of the median overhead per protocol against the number of processes and
    against the latency variance of the traces; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    replayed = runs.where(F.col("app_messages") > 0).select(
        "trace_id",
        "protocol",
        "n_processes",
        (F.col("piggyback_ints_total") / F.col("app_messages")).alias("ints_per_msg"),
        (F.col("control_messages") / F.col("app_messages")).alias("control_per_msg"),
        "makespan_ratio",
    )
    with_variance = replayed.join(trace_latency_variance(messages), "trace_id", "left")
    written: list[Path] = []
    for x, label, name in (
        ("n_processes", "processes", "overhead_vs_processes.png"),
        ("latency_variance", "latency variance (s^2)", "overhead_vs_latency_variance.png"),
    ):
        points = (
            with_variance.where(F.col(x).isNotNull())
            .groupBy("protocol", x)
            .agg(
                F.percentile("ints_per_msg", 0.5).alias("ints"),
                F.percentile("control_per_msg", 0.5).alias("control"),
                F.percentile("makespan_ratio", 0.5).alias("makespan"),
            )
            .orderBy("protocol", x)
            .collect()
        )
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
        for ax, metric, title in zip(
            axes,
            ("ints", "control", "makespan"),
            ("piggybacked integers per message", "control messages per message", "makespan ratio"),
            strict=True,
        ):
            for proto in sorted({row["protocol"] for row in points}):
                series = [(row[x], row[metric]) for row in points if row["protocol"] == proto]
                series = [(a, b) for a, b in series if b is not None]
                if series:
                    ax.plot(*zip(*series, strict=True), marker="o", label=proto)
            ax.set_xlabel(label)
            ax.set_title(f"median {title}")
            if x == "latency_variance":
                ax.set_xscale("symlog")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written
