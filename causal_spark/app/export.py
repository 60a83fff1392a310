"""`causal-spark export`: one trace of the warehouse in another tool's format."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark import tables
from causal_spark.app.options import as_of
from causal_spark.app.session import build_session
from causal_spark.clocks.status import CLOCK_STATUS_INVALID
from causal_spark.config import load_config
from causal_spark.export import HEADER, ExportError, require_hosts, shiviz_records
from causal_spark.export.shiviz import EVENT_LINE, HOST_LINE
from causal_spark.io.ledger import Ledger, WarehouseError
from causal_spark.io.sinks import Warehouse

__all__ = ["TEXT", "ExportError", "export_options", "export_trace", "run_export"]

TEXT = "write one trace as a ShiViz log (GoVector format) that ShiViz and our reader read"
FORMATS = ("shiviz",)


def export_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", required=True, help="trace_id")
    p.add_argument("--format", choices=FORMATS, default="shiviz", help="output format")
    p.add_argument("--out", required=True, help="the file to write (replaced if it exists)")
    as_of(p)


def run_export(args: argparse.Namespace, session: SparkSession | None = None) -> int:
    print(export_trace(args, session))
    return 0


def export_trace(args: argparse.Namespace, session: SparkSession | None = None) -> str:
    """Write trace `args.trace` to `args.out`; return a one-line summary."""
    config = load_config(args.conf)
    root = str(Path(args.warehouse).resolve())
    view = Ledger(root).view(args.as_of)  # before Spark starts
    if view.run_id is None:
        raise WarehouseError(f"no committed run in {root}: run `causal-spark audit` first")
    spark = session or build_session(config.spark)
    warehouse = Warehouse(spark, root, config.sink.format)
    trace = args.trace
    found = (
        warehouse.read(tables.TRACE_CLOCKS, as_of=view.run_id)
        .where(F.col(C.TRACE_ID) == trace)
        .select(C.STATUS)
        .collect()
    )
    if not found:
        raise ExportError(
            f"trace {trace!r} is not in the warehouse {root} as of run {view.run_id} "
            "(`causal-spark sql` lists them: SELECT trace_id FROM trace_summary)"
        )
    if found[0][C.STATUS] == CLOCK_STATUS_INVALID:
        raise ExportError(
            f"trace {trace!r} is INVALID (its message ids form a causal cycle): its events "
            "have no clocks to export; `causal-spark explain` shows the cycle"
        )
    events = warehouse.read(tables.EVENTS, as_of=view.run_id).where(F.col(C.TRACE_ID) == trace)
    messages = warehouse.read(tables.MESSAGES, as_of=view.run_id).where(F.col(C.TRACE_ID) == trace)
    processes = sorted(r[C.PROCESS] for r in events.select(C.PROCESS).distinct().collect())
    require_hosts(trace, processes)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    n_events = 0
    with partial.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write(f"{HEADER}\n\n")
        for row in shiviz_records(events, messages).toLocalIterator():
            handle.write(f"{row[HOST_LINE]}\n{row[EVENT_LINE]}\n")
            n_events += 1
    os.replace(partial, out)
    shown = f"{n_events} events, {len(processes)} processes"
    return f"wrote trace {trace} ({shown}) to {out} as a ShiViz log"
