"""How each trace's input was read, for the columns of `trace_summary` that depend on it.

docs/formats.md: messages inferred from recorded clocks (ShiViz) cannot show FIFO or
causal-order violations; spans were read with one `span_process` mode; ShiViz and
DistributedClocks tracing logs record clocks that the clocks stage compares. Which
reader read each file and the traces each file holds rows of are in `runs.inputs`
(`format`, `files[].traces`), the mode in `runs.config`. The ingest whose rows a
stage analyses is its lineage: this run, or an earlier run the ledger holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame

from causal_spark.anomalies.summary import READINGS_SCHEMA
from causal_spark.app.runs import StageContext, input_files
from causal_spark.io.readers import RECORDING_CLOCKS, jaeger, otlp, shiviz, zipkin

# readers whose messages come from clock deltas, and the span readers
INFERRING: frozenset[str] = frozenset({shiviz.NAME})
SPANS: frozenset[str] = frozenset({zipkin.NAME, jaeger.NAME, otlp.NAME})


def trace_readings(
    inputs: Iterable[Mapping[str, Any]], span_process: str
) -> list[tuple[str, bool, bool, str | None]]:
    """Per trace (sorted): messages inferred, clocks recorded, the span-process mode (None
    when no span reader read it). `inputs`: `runs.inputs` rows (`format`, `files`); a file
    whose traces are not recorded counts for none."""
    formats: dict[str, set[str]] = {}
    for given in inputs:
        for file in given.get("files") or []:
            for trace in file.get("traces") or []:
                formats.setdefault(trace, set()).add(str(given["format"]))
    return [
        (
            trace,
            bool(found & INFERRING),
            bool(found & RECORDING_CLOCKS),
            span_process if found & SPANS else None,
        )
        for trace, found in sorted(formats.items())
    ]


def _recorded_inputs(context: StageContext, lineage: str) -> tuple[Sequence[Any], str] | None:
    """`runs.inputs` and the span-process mode of the ingest `lineage` names."""
    if lineage == context.txn.run_id:  # ingested by this run: not in the ledger yet
        inputs = [
            {"format": i.format, "files": files}
            for i, files in zip(context.inputs, input_files(context), strict=True)
        ]
        return inputs, context.config.ingest.span_process
    row = next((r for r in context.warehouse.ledger.rows() if r["id"] == lineage), None)
    if row is None:
        return None
    config = json.loads(row.get("config") or "{}")
    span_process = str((config.get("ingest") or {}).get("span_process") or "instance")
    return row.get("inputs") or [], span_process


def readings_of(context: StageContext) -> DataFrame | None:
    """trace_id, messages_inferred, clocks_recorded, span_process of the traces the
    stage's lineage ingested (`summarize_traces`' `readings`); None when not known."""
    lineage = context.current_lineage
    found = _recorded_inputs(context, lineage) if lineage is not None else None
    if found is None:
        return None
    inputs, span_process = found
    return context.spark.createDataFrame(trace_readings(inputs, span_process), READINGS_SCHEMA)
