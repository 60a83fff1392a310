"""Plot bench/results.json: time against events and against processes, per stage.

.venv/bin/python bench/plot.py     # writes bench/<stage>.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
LABELS = {
    "spark": "Spark (2 cores)",
    "reference": "single-core reference",
    "pure_python": "pure Python",
}


def main() -> int:
    payload = json.loads((HERE / "results.json").read_text())
    results = payload["results"]
    for stage in sorted({r["stage"] for r in results}):
        fig, (by_events, by_processes) = plt.subplots(1, 2, figsize=(11, 4.2))
        for impl, label in LABELS.items():
            sweep = sorted(
                (r["events"], r["seconds"])
                for r in results
                if r["stage"] == stage and r["impl"] == impl and r["processes"] == 64
            )
            if sweep:
                by_events.plot(*zip(*sweep, strict=True), marker="o", label=label)
            events = max((r["events"] for r in results if r["processes"] != 64), default=None)
            procs = sorted(
                (r["processes"], r["seconds"])
                for r in results
                if r["stage"] == stage and r["impl"] == impl and r["events"] == events
            )
            if len(procs) > 1:
                by_processes.plot(*zip(*procs, strict=True), marker="o", label=label)
        by_events.set(
            xscale="log",
            yscale="log",
            xlabel="events (64 processes)",
            ylabel="seconds",
            title=f"{stage}: time against events",
        )
        by_processes.set(
            xscale="log",
            yscale="log",
            xlabel="processes (10^6 events)",
            ylabel="seconds",
            title=f"{stage}: time against processes",
        )
        for axis in (by_events, by_processes):
            axis.grid(True, which="both", alpha=0.3)
            axis.legend()
        fig.suptitle(f"{payload['machine']}, {payload['when']}", fontsize=8)
        fig.tight_layout()
        fig.savefig(HERE / f"{stage}.png", dpi=110)
        print(f"wrote {HERE / f'{stage}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
