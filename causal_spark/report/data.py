"""What the report shows, read from a committed view of the warehouse without Spark.

Each table is read at the version the run names, through delta-rs' file list and
pyarrow (a filter on `trace_id` reads only the rows of the traces drawn), so a
report costs a few Arrow scans however many traces the run holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from causal_spark import tables
from causal_spark.io import delta
from causal_spark.io.ledger import Ledger, View, WarehouseError

QUARANTINE_SAMPLES = 3  # sample lines shown per quarantine reason


class Tables:
    """The tables of one committed view, read with pyarrow."""

    def __init__(self, root: str, as_of: str | None = None):
        self.root = os.path.abspath(root)
        self.ledger = Ledger(self.root)
        rows = self.ledger.rows()
        if not rows:
            raise WarehouseError(f"no committed run in {self.root}: run `causal-spark audit` first")
        self.run = self.ledger.resolve(as_of, rows) if as_of is not None else rows[-1]
        self.view = View(self.run["id"], dict(self.run["table_versions"]))

    def has(self, table: str) -> bool:
        return table in self.view.versions

    def read(
        self,
        table: str,
        traces: Iterable[str] | None = None,
        columns: list[str] | None = None,
    ) -> pa.Table:
        """`table` at the view's version (empty if the run has none), only `traces` if given."""
        schema = tables.arrow_schema(table)
        version = self.view.versions.get(table)
        if version is None:
            return schema.empty_table().select(columns) if columns else schema.empty_table()
        path = os.path.join(self.root, table)
        files = [f.path for f in delta.data_files(path, version)]
        missing = [f for f in files if not os.path.exists(f)]
        if missing:
            raise WarehouseError(
                f"table '{table}' version {version} names {len(missing)} file(s) that are "
                f"gone (vacuumed?), e.g. {missing[0]}"
            )
        data = ds.dataset(files, schema=schema, format="parquet")
        where = None
        if traces is not None:
            where = pc.field("trace_id").isin(sorted(set(traces)))
        return data.to_table(columns=columns, filter=where)


@dataclass
class TraceData:
    """The rows of one trace a diagram needs, as dicts."""

    trace: str
    summary: dict[str, Any]
    events: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    violations: list[dict[str, Any]] = field(default_factory=list)
    crowns: list[dict[str, Any]] = field(default_factory=list)
    members: dict[int, list[str]] = field(default_factory=dict)
    cycle: list[str] = field(default_factory=list)


def trace_data(source: Tables, traces: list[str]) -> dict[str, TraceData]:
    """Every row the diagrams of `traces` need, in one filtered scan per table."""
    if not traces:
        return {}
    events = source.read(
        tables.EVENTS,
        traces,
        ["trace_id", "process", "pidx", "lseq", "kind", "lamport", "vc"],
    ).to_pylist()
    messages = source.read(tables.MESSAGES, traces).to_pylist()
    summaries = source.read(tables.TRACE_SUMMARY, traces).to_pylist()
    out = {s["trace_id"]: TraceData(s["trace_id"], s, [], []) for s in summaries}
    for t in traces:
        out.setdefault(t, TraceData(t, {"trace_id": t}, [], []))
    for e in events:
        out[e["trace_id"]].events.append(e)
    for m in messages:
        out[m["trace_id"]].messages.append(m)
    for v in source.read(tables.VIOLATIONS, traces).to_pylist():
        out[v["trace_id"]].violations.append(v)
    for c in source.read(tables.CROWNS, traces).to_pylist():
        out[c["trace_id"]].crowns.append(c)
    for m in source.read(tables.CROWN_MEMBERS, traces).to_pylist():
        out[m["trace_id"]].members.setdefault(m["scc_id"], []).append(m["msg_id"])
    if source.has(tables.TRACE_CLOCKS):
        for row in source.read(tables.TRACE_CLOCKS, traces, ["trace_id", "cycle"]).to_pylist():
            out[row["trace_id"]].cycle = list(row["cycle"] or [])
    for data in out.values():
        data.violations.sort(key=lambda v: (v["kind"], v["overtaken_msg"], v["overtaking_msg"]))
        data.crowns.sort(key=lambda c: c["scc_id"])
        for ids in data.members.values():
            ids.sort()
    return out


def quarantine_by_reason(source: Tables) -> list[dict[str, Any]]:
    """Per reason: its rows and a few sample lines (source:line and the raw text)."""
    rows = source.read(tables.QUARANTINE, columns=["source", "line", "raw", "reason", "detail"])
    grouped = rows.group_by("reason").aggregate([("reason", "count")]).to_pylist()
    counts = {g["reason"]: g["reason_count"] for g in grouped}
    out = []
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        picked = rows.filter(pc.equal(rows.column("reason"), reason)).slice(0, QUARANTINE_SAMPLES)
        out.append({"reason": reason, "rows": n, "samples": picked.to_pylist()})
    return out


def findings_count(summary: dict[str, Any]) -> int:
    """Violations and crown components of a trace (an INVALID trace counts as one)."""
    if summary.get("order_class") == "INVALID":
        return 1
    return int(
        (summary.get("n_fifo_violations") or 0)
        + (summary.get("n_causal_violations") or 0)
        + (summary.get("n_crown_sccs") or 0)
    )
