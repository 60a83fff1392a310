"""Slow, obvious references for the native-format readers (no Spark, no product code).

- `shiviz_reference`: ShiViz's own algorithm, ported line by line from
  DistributedClocks/shiviz `js/model/parser.js` (ExecutionParser) and
  `js/model/modelGraph.js` (initPrevNext, initParentChild), for valid logs;
  `shiviz_rows`, the raw rows DESIGN §1b lays those messages out as.
- `vector_clocks`: Fidge-Mattern vector clocks of raw rows by brute force
  (iterate until nothing changes), and `log_units`, the clock in a log's own
  units (DESIGN §1b: the entry for q is the seq of q's event at lseq vc[q]).
- `ingest_files`: files through the real pipeline (discovery, the registry's
  reader, ingest's rules), for the tests that check a log passes ingest.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

SHIVIZ_DEFAULT = r"(?<host>\S*) (?<clock>{.*})\n(?<event>.*)"


@dataclass(frozen=True)
class LoggedEvent:
    host: str
    own: int
    clock: dict[str, int]
    line: int


def _py_regex(js: str) -> str:
    return re.sub(r"\(\?<(\w+)>", r"(?P<\1>", js)


def shiviz_reference(
    text: str, regex: str | None = None
) -> tuple[list[LoggedEvent], set[tuple[str, int, str, int]]]:
    """The logged events and the messages ShiViz infers: (q, v, p, s) = q's event v
    is the parent of p's event s. Raises on a log ShiViz would reject."""
    lines = text.split("\n")
    body_start = 0
    if regex is None and len(lines) > 1 and "(?<host>" in lines[0] and not lines[1].strip():
        regex, body_start = lines[0].strip(), len(lines[0]) + 1 + len(lines[1]) + 1
    pattern = re.compile(_py_regex(regex or SHIVIZ_DEFAULT), re.MULTILINE)
    events: list[LoggedEvent] = []
    for m in pattern.finditer(text, body_start):
        raw = m.group("clock")
        try:
            clock = json.loads(raw)
        except json.JSONDecodeError:
            clock = json.loads(raw.replace('\\"', '"'))
        host = m.group("host")
        assert host in clock, f"local host {host} missing from its clock"
        clock = {k: v for k, v in clock.items() if v != 0}
        events.append(LoggedEvent(host, clock[host], clock, text.count("\n", 0, m.start()) + 1))
    host_nodes: dict[str, list[LoggedEvent]] = defaultdict(list)
    for e in events:
        host_nodes[e.host].append(e)
    for nodes in host_nodes.values():
        nodes.sort(key=lambda e: e.own)
        for i, node in enumerate(nodes):
            assert node.own == i + 1, f"clock of {node.host} is not 1, 2, ...: {node}"
    messages: set[tuple[str, int, str, int]] = set()
    for host, nodes in host_nodes.items():
        latest: dict[str, int] = {}
        for node in nodes:
            latest[host] = node.own
            candidates = []
            for other, time in node.clock.items():
                if other not in latest or latest[other] < time:
                    latest[other] = time
                    assert other in host_nodes and 1 <= time <= len(host_nodes[other])
                    candidates.append(host_nodes[other][time - 1])
            connections = {(c.host, c.own): c for c in candidates}
            for c in candidates:
                for other, time in c.clock.items():
                    if other != c.host:
                        connections.pop((other, time), None)
            for c in connections.values():
                messages.add((c.host, c.own, node.host, node.own))
    return events, messages


def shiviz_rows(
    text: str, regex: str | None = None
) -> list[tuple[int, str, int, int, str, str | None, str | None, bool, bool]]:
    """The raw rows a valid log becomes (DESIGN §1b), from ShiViz's own messages: per
    logged event, in file order, its receives (by sending host), then its sends (by
    destination, then msg_id; the i-th message to a destination in the i-th send event
    after the receives), else one internal event. A row: (line, process, seq, sub, kind,
    msg_id, peer, whether it is the event's first sub, whether its last)."""
    events, messages = shiviz_reference(text, regex)
    received: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    sent: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    for q, v, p, s in messages:
        msg_id = f"{q}#{v}>{p}#{s}"
        received[(p, s)].append((q, msg_id))
        sent[(q, v)].append((p, msg_id))
    rows = []
    for e in events:
        got = sorted(received[(e.host, e.own)])
        subs: list[tuple[int, str, str | None, str | None]] = [
            (k, "receive", m, q) for k, (q, m) in enumerate(got)
        ]
        to: dict[str, int] = defaultdict(int)
        for p, m in sorted(sent[(e.host, e.own)]):
            subs.append((len(got) + to[p], "send", m, p))
            to[p] += 1
        subs = subs or [(0, "internal", None, None)]
        last = max(k for k, *_ in subs)
        rows += [(e.line, e.host, e.own, k, kind, m, peer, k == 0, k == last)
                 for k, kind, m, peer in subs]  # fmt: skip
    return rows


@dataclass(frozen=True)
class Clocked:
    """One event of `vector_clocks`: its process, (seq, sub) and clock (process -> count)."""

    process: str
    seq: int
    sub: int
    vc: dict[str, int]


def vector_clocks(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int, int], Clocked]:
    """Accepted raw rows -> the vector clock of each event (process, seq, sub), by brute
    force: events of a process in (seq, sub) order, a receive also after its send."""
    events: dict[tuple[str, int, int], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        events[(row["process"], int(row["seq"]), int(row["sub"] or 0))].append(row)
    order: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for key in sorted(events):
        order[key[0]].append(key)
    send_of = {r["msg_id"]: key for key, rs in events.items() for r in rs if r["kind"] == "send"}
    vc: dict[tuple[str, int, int], dict[str, int]] = {k: {} for k in events}
    changed = True
    while changed:
        changed = False
        for process, keys in order.items():
            for i, key in enumerate(keys):
                new: dict[str, int] = dict(vc[keys[i - 1]]) if i else {}
                for r in events[key]:
                    if r["kind"] == "receive" and r["msg_id"] in send_of:
                        for q, n in vc[send_of[r["msg_id"]]].items():
                            new[q] = max(new.get(q, 0), n)
                new[process] = i + 1
                if new != vc[key]:
                    vc[key] = new
                    changed = True
    return {k: Clocked(k[0], k[1], k[2], v) for k, v in vc.items()}


def log_units(
    clocked: dict[tuple[str, int, int], Clocked],
) -> dict[tuple[str, int, int], dict[str, int]]:
    """Each event's clock in the log's own units: entry q = the seq of q's lseq-th event."""
    by_process: dict[str, list[int]] = defaultdict(list)
    for key in sorted(clocked):
        by_process[key[0]].append(key[1])
    return {
        key: {q: by_process[q][n - 1] for q, n in c.vc.items() if n > 0}
        for key, c in clocked.items()
    }


def collect(rows: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in rows.collect()]


def accepted(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["parse_error"] is None]


def repo_file(*parts: str) -> Path:
    return Path(__file__).resolve().parents[1].joinpath(*parts)


def message_ends(
    rows: Iterable[dict[str, Any]],
) -> dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    """msg_id -> (its send row or None, its receive row or None), over accepted rows."""
    sends = {r["msg_id"]: r for r in accepted(rows) if r["kind"] == "send"}
    receives = {r["msg_id"]: r for r in accepted(rows) if r["kind"] == "receive"}
    return {m: (sends.get(m), receives.get(m)) for m in sorted(set(sends) | set(receives))}


def events_of(rows: Iterable[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """The events of accepted rows: (trace_id, trace_suffix, process, seq, sub)."""
    return {
        (r["trace_id"], r["trace_suffix"], r["process"], r["seq"], r["sub"] or 0)
        for r in accepted(rows)
    }


def records_of(rows: Iterable[dict[str, Any]]) -> set[tuple[str, int, int]]:
    """The input records the rows account for: (source, line, record)."""
    return {(r["source"], r["line"], r["record"]) for r in rows}


def ingest_files(spark: SparkSession, paths: list[str]) -> Any:
    """`paths` through the real pipeline: discovery, the registry's reader, ingest's rules."""
    from causal_spark.config import IngestSettings
    from causal_spark.ingest import ingest
    from causal_spark.io.sources import discover_inputs, read_raw
    from tests.helpers import ingest_targets

    settings = IngestSettings()
    inputs = discover_inputs(paths, settings)
    read = read_raw(spark, inputs, settings)
    return ingest(read.rows, inputs, ingest_targets(), plan=read.plan)
