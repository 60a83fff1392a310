"""The report of one committed run: gather, lay out, render (Jinja2) into one HTML file.

Bounded whatever the run's size: the traces table lists at most `MAX_TRACES` traces
(most findings first) and the findings section draws at most `MAX_FINDINGS`
diagrams, each a bounded window (`layout.MAX_EVENTS`); the page says how many it left out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from causal_spark import tables
from causal_spark.anomalies.explain import (
    crown_through_ids,
    crown_words,
    event_clocks,
    trace_words,
    violation_words,
)
from causal_spark.report import charts, layout
from causal_spark.report.data import (
    Tables,
    TraceData,
    findings_count,
    quarantine_by_reason,
    trace_data,
)
from causal_spark.report.protocols import protocol_section

MAX_TRACES = 500
MAX_FINDINGS = 40


@dataclass(frozen=True)
class Finding:
    trace: str
    kind: str  # FIFO, CAUSAL, CROWN or CYCLE
    title: str
    words: list[str]
    diagram: layout.Diagram
    anchor: str
    keys: dict[str, str]  # what names the finding's row (data-* attributes of its section)


def environment() -> Environment:
    return Environment(
        loader=PackageLoader("causal_spark.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def trace_findings(data: TraceData, limit: int | None = None) -> list[Finding]:
    """The findings of one trace (the first `limit` of them) with their diagrams and words.

    Only the findings drawn are laid out and put in words: a trace with thousands of
    violations costs its first `limit`, and its events' clocks are looked up once.
    """
    by_id = {m["msg_id"]: m for m in data.messages}
    clocks = event_clocks(data.events)
    out: list[Finding] = []
    room = len(data.violations) + len(data.crowns) + 1 if limit is None else limit
    for i, v in enumerate(data.violations[:room]):
        kind = str(v["kind"])
        out.append(
            Finding(
                data.trace,
                kind,
                f"{kind} violation at {v['dst']}: {v['overtaken_msg']} overtaken by "
                f"{v['overtaking_msg']}",
                violation_words(v, by_id, clocks),
                layout.layout(data.events, data.messages, layout.violation_roles(v)),
                f"{data.trace}-v{i}",
                {"overtaken": v["overtaken_msg"], "overtaking": v["overtaking_msg"]},
            )
        )
    for c in data.crowns[: max(room - len(out), 0)]:
        members = data.members.get(c["scc_id"], [])
        out.append(
            Finding(
                data.trace,
                "CROWN",
                f"crown component {c['scc_id']} ({c['scc_size']} messages, witness crown of "
                f"{c['k']})",
                crown_words(c, members, by_id, clocks),
                layout.layout(data.events, data.messages, layout.crown_roles(c["crown"], members)),
                f"{data.trace}-c{c['scc_id']}",
                {"scc": str(c["scc_id"])},
            )
        )
    if data.cycle and len(out) < room:
        out.append(
            Finding(
                data.trace,
                "CYCLE",
                f"INVALID: a causal cycle through {len(data.cycle)} receive(s)",
                [
                    "the trace is INVALID (a causal cycle): each receive on the cycle happens "
                    "before the send the previous one waits for; no clock and no anomaly is "
                    "computed for it",
                    f"  cycle of receives: {', '.join(data.cycle)}",
                ],
                layout.layout(data.events, data.messages, layout.cycle_roles(data.cycle)),
                f"{data.trace}-cycle",
                {},
            )
        )
    return out


def gather(source: Tables, trace: str | None = None) -> dict[str, Any]:
    """Everything the page shows, bounded."""
    columns = [
        "trace_id",
        "order_class",
        "n_processes",
        "n_events",
        "n_messages",
        "n_quarantined",
        "n_fifo_violations",
        "n_causal_violations",
        "n_crown_sccs",
    ]
    summaries = source.read(
        tables.TRACE_SUMMARY, [trace] if trace else None, columns=columns
    ).to_pylist()
    if trace is not None and not summaries:
        from causal_spark.io.ledger import WarehouseError

        raise WarehouseError(
            f"trace '{trace}' is not in trace_summary as of run {source.run['id']}"
        )
    for s in summaries:
        s["findings"] = findings_count(s)
    summaries.sort(key=lambda s: (-s["findings"], s["trace_id"]))
    classes = Counter(str(s["order_class"] or "none") for s in summaries)
    with_findings = [s for s in summaries if s["findings"]]
    picked: list[str] = []
    budget = MAX_FINDINGS
    for s in with_findings:
        if budget <= 0:
            break
        picked.append(s["trace_id"])
        budget -= s["findings"]
    data = trace_data(source, picked)
    findings: list[Finding] = []
    for t in picked:
        findings.extend(trace_findings(data[t], MAX_FINDINGS - len(findings)))
    total_findings = sum(s["findings"] for s in with_findings)
    return {
        "run": source.run,
        "counts": sorted(source.run["counts"].items()),
        "quarantine": quarantine_by_reason(source) if trace is None else [],
        "classes": charts.bar_chart(classes),
        "n_traces": len(summaries),
        "traces": summaries[:MAX_TRACES],
        "findings": findings,
        "trace_words": {t: trace_words(data[t].summary) for t in picked},
        "findings_left_out": total_findings - len(findings),
        "protocols": protocol_section(source, picked, trace),
        "roles": ROLE_COLOURS,
        "only_trace": trace,
    }


ROLE_COLOURS = {
    layout.OVERTAKEN: "#D55E00",
    layout.OVERTAKING: "#0072B2",
    layout.WITNESS: "#009E73",
    layout.CROWN: "#CC79A7",
    layout.MEMBER: "#E69F00",
    layout.CYCLE: "#D55E00",
    layout.SUBJECT: "#0072B2",
    layout.OTHER: "#9a9a9a",
}


def write_report(
    root: str, out: str | Path, trace: str | None = None, as_of: str | None = None
) -> Path:
    """Write `out`/index.html, the report of the last committed run (or `as_of`)."""
    source = Tables(root, as_of)
    context = gather(source, trace)
    html = environment().get_template("report.html").render(**context)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    page = folder / "index.html"
    page.write_text(html, encoding="utf-8")
    return page


def message_svg(
    root: str, trace: str, msg: str, as_of: str | None = None, budget: int | None = None
) -> str:
    """The diagram of one message as a standalone SVG document: its first violation, else
    its crown component (with a crown through the message highlighted when there is one,
    searched within `budget`), else the message alone."""
    source = Tables(root, as_of)
    data = trace_data(source, [trace])[trace]
    roles: dict[str, str] = {msg: layout.SUBJECT}
    for v in data.violations:
        if msg in (v["overtaken_msg"], v["overtaking_msg"]):
            roles = layout.violation_roles(v)
            break
    else:
        for c in data.crowns:
            members = data.members.get(c["scc_id"], [])
            if msg in members:
                roles = layout.crown_roles(_crown_through(data, c, members, msg, budget), members)
                break
        else:
            if msg in data.cycle:
                roles = layout.cycle_roles(data.cycle)
    diagram = layout.layout(data.events, data.messages, roles)
    return (
        environment()
        .get_template("diagram.svg")
        .render(diagram=diagram, roles=ROLE_COLOURS, title=f"{trace}: {msg}")
    )


def _crown_through(
    data: TraceData, c: dict[str, Any], members: list[str], msg: str, budget: int | None
) -> list[str]:
    """A crown of component `c` through `msg`: its witness if that has `msg`, else the
    shortest one through `msg`, else (none, or the budget spent) the witness."""
    if msg in c["crown"]:
        return list(c["crown"])
    mine = set(members)
    rows = [m for m in data.messages if m["msg_id"] in mine]
    src, send, dst, recv = (
        [m[k] for m in rows] for k in ("src_pidx", "send_lseq", "dst_pidx", "recv_lseq")
    )
    through = crown_through_ids([m["msg_id"] for m in rows], src, send, dst, recv, msg, budget)
    return through.crown or list(c["crown"])
