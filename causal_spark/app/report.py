"""`report` and `explain --svg`: the HTML report of a run and one message's diagram (no Spark)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from causal_spark.app.options import as_of
from causal_spark.config import load_config
from causal_spark.report.build import message_svg, write_report


def report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="folder for index.html (created if missing)")
    p.add_argument("--trace", default=None, help="only this trace (its findings all drawn)")
    as_of(p)


def run_report(args: argparse.Namespace, session: object = None) -> int:
    """`report`: write the folder, print where it is."""
    began = time.monotonic()
    page = write_report(
        str(Path(args.warehouse).resolve()), args.out, trace=args.trace, as_of=args.as_of
    )
    size = page.stat().st_size
    print(f"wrote {page} ({size // 1024} KiB) in {time.monotonic() - began:.1f} s")
    return 0


def write_svg(args: argparse.Namespace) -> str:
    """`explain --svg FILE`: the message's diagram; returns the line saying where it went."""
    svg = message_svg(
        str(Path(args.warehouse).resolve()),
        args.trace,
        args.msg,
        getattr(args, "as_of", None),
        load_config(args.conf).detect.crown_search_budget,
    )
    Path(args.svg).parent.mkdir(parents=True, exist_ok=True)
    Path(args.svg).write_text(svg, encoding="utf-8")
    return f"diagram: {args.svg}"
