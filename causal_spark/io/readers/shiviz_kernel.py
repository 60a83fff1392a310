"""ShiViz logs after parsing: the clock checks and the message inference of one file's
records, in NumPy (docs/formats.md), where the file is parsed (one task per file).

Input: the file's records as an Arrow table (`RECORD_FIELDS`: one per regex match or
unmatched line, in file order; `host` null where the reader rejected the record;
`clock` the parsed clock, null when it is not one). Output: the raw rows
(`OUTPUT_FIELDS`, the readers' raw-row contract less `trace_id`, `ts` and
`size_bytes`, which ShiViz does not give).

The checks, per execution and host (docs/formats.md, *Clock checks*): a host's
records taken in the order of their own entries (then file order); with U its
records whose clock is unreadable (not a clock, or no entry >= 1 for the host), the
r-th distinct own entry v is accepted when v - r <= U; a record repeating an own entry
repeats an event; the host has max(r) + U events; a clock naming a host with no record
(value > 0), or an event beyond a host's count, is `bad_clock`. The first rule that
applies gives the reason, in that order.

The inference, as ShiViz's modelGraph.js: for an accepted event e on p whose previous
accepted event on p (by own entry) is e' (zero clock if none), each host q != p with
clock(e)[q] > clock(e')[q] gives a candidate (q, clock(e)[q]); a candidate known to
another candidate of e (that event's clock has a q entry >= the number) is dropped;
each remaining candidate is a message `q#v>p#s` sent by q's event v. An event becomes
its receive events (host-name order), then its send events (a send event holds one
message per destination, so the i-th message to a destination is in the i-th send
event); an event that does neither is internal. The label stays on `sub` 0, the
recorded clock on the last `sub`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

RECORD_FIELDS: tuple[str, ...] = (
    "source",
    "line",
    "record",
    "raw",
    "host",
    "clock_text",
    "clock",
    "label",
    "execution",
    "trace_suffix",
    "parse_error",
    "parse_reason",
)
OUTPUT_FIELDS: tuple[str, ...] = (
    "source",
    "line",
    "record",
    "raw",
    "process",
    "seq",
    "kind",
    "msg_id",
    "peer",
    "label",
    "trace_suffix",
    "sub",
    "parse_error",
    "parse_reason",
    "recorded_vc",
)
BAD_CLOCK = "bad_clock"
CLOCK_ARROW = pa.map_(pa.string(), pa.int64())


def _ints(column: pa.ChunkedArray | pa.Array, fill: int = -1) -> np.ndarray:
    return np.asarray(pc.fill_null(column, fill).to_numpy(zero_copy_only=False), dtype=np.int64)


def _strings(column: pa.ChunkedArray | pa.Array) -> list[str | None]:
    return list(column.to_pylist())


def _lookup(
    sorted_keys: np.ndarray, values: np.ndarray, wanted: np.ndarray, missing: int
) -> np.ndarray:
    """values[i] where sorted_keys[i] == wanted, else `missing` (keys unique)."""
    if len(sorted_keys) == 0:
        return np.full(len(wanted), missing, dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_keys, wanted), len(sorted_keys) - 1)
    return np.where(sorted_keys[at] == wanted, values[at], missing)


class _Records:
    """The columns of one file's records, as NumPy arrays and lists."""

    def __init__(self, records: pa.Table) -> None:
        self.table = records
        self.n = records.num_rows
        host = records.column("host")
        self.names: list[str] = sorted({h for h in host.to_pylist() if h is not None})
        value_set = pa.array(self.names, pa.string())
        self.host = _ints(pc.index_in(host, value_set=value_set))
        self.execution = _ints(records.column("execution"), 0)
        self.line = _ints(records.column("line"), 0)
        self.record = _ints(records.column("record"), 0)
        clock = records.column("clock").combine_chunks()
        self.has_clock = np.asarray(clock.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        offsets = np.asarray(clock.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        counts = np.diff(offsets)
        # a null map's slot may still own entries in the buffers: none of them count
        counts = np.where(self.has_clock, counts, 0)
        starts = offsets[:-1]
        take = np.repeat(starts, counts) + (
            np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        keys = pc.take(clock.keys, pa.array(take, pa.int64()))
        self.key_names: list[str] = keys.to_pylist()
        self.key = _ints(pc.index_in(keys, value_set=value_set))
        self.value = _ints(pc.take(clock.items, pa.array(take, pa.int64())), 0)
        self.parent = np.repeat(np.arange(self.n, dtype=np.int64), counts)


def _checks(r: _Records) -> tuple[np.ndarray, list[str | None]]:
    """(own entry per record, -1 if none; the `bad_clock` reason per record or None)."""
    n, hosts = r.n, max(len(r.names), 1)
    is_host = r.host >= 0
    own = np.full(n, -1, dtype=np.int64)
    mine = (r.key >= 0) & (r.key == r.host[r.parent])
    own[r.parent[mine]] = r.value[mine]
    readable = is_host & r.has_clock & (own >= 1)
    # (execution, host) of a host's record (0 for the reader's rejects: never used)
    group = np.where(is_host, r.execution * hosts + r.host, 0)
    size = int(group.max()) + 1 if n else 1
    unreadable = np.bincount(group[is_host & ~readable], minlength=size)
    # readable records by (execution, host, own, line, record)
    idx = np.flatnonzero(readable)
    idx = idx[np.lexsort((r.record[idx], r.line[idx], own[idx], r.host[idx], r.execution[idx]))]
    same_group = np.r_[False, group[idx][1:] == group[idx][:-1]]
    repeat_sorted = same_group & np.r_[False, own[idx][1:] == own[idx][:-1]]
    previous_line = np.r_[-1, r.line[idx][:-1]]
    fresh = (~repeat_sorted).astype(np.int64)
    running = np.cumsum(fresh)
    first_of_group = np.flatnonzero(~same_group)
    base = np.repeat(
        running[first_of_group] - fresh[first_of_group], np.diff(np.r_[first_of_group, len(idx)])
    )
    rank = np.zeros(n, dtype=np.int64)
    rank[idx] = running - base
    repeat = np.zeros(n, dtype=bool)
    repeat[idx] = repeat_sorted
    repeated_line = np.full(n, -1, dtype=np.int64)
    repeated_line[idx] = previous_line
    # each (execution, host)'s events: its distinct own entries and its unreadable records
    events = np.zeros(size, dtype=np.int64)
    np.maximum.at(events, group[readable], rank[readable])
    events += unreadable
    present = np.zeros(size, dtype=bool)
    present[group[is_host]] = True
    u = np.where(is_host, unreadable[group], 0)
    jumps = readable & ~repeat & (own - rank > u)
    # the entries that name an unknown host, or an event beyond a known host's count
    entry_group = r.execution[r.parent] * hosts + np.maximum(r.key, 0)
    known = (r.key >= 0) & (entry_group < size) & present[np.minimum(entry_group, size - 1)]
    unknown_entry = (r.value > 0) & ~known
    beyond_entry = known & (r.value > events[np.minimum(entry_group, size - 1)])
    unknown = np.bincount(r.parent[unknown_entry], minlength=n) > 0
    beyond = np.bincount(r.parent[beyond_entry], minlength=n) > 0
    failing = is_host & (~readable | repeat | jumps | unknown | beyond)
    reasons: list[str | None] = [None] * n
    if not failing.any():
        return own, reasons
    texts = _strings(r.table.column("clock_text"))
    by_row: dict[int, list[int]] = defaultdict(list)
    for e in np.flatnonzero(unknown_entry | beyond_entry):
        by_row[int(r.parent[e])].append(int(e))
    for i in np.flatnonzero(failing).tolist():
        host = r.names[r.host[i]]
        if not r.has_clock[i]:
            reasons[i] = f"clock {texts[i]} is not a JSON object of host -> count"
        elif not readable[i]:
            reasons[i] = f"the clock has no entry >= 1 for its own host '{host}'"
        elif repeat[i]:
            reasons[i] = (
                f"own entry {own[i]} of host '{host}' repeats the record at line {repeated_line[i]}"
            )
        elif jumps[i] and rank[i] == 1:
            reasons[i] = (
                f"the first event of host '{host}' has own entry {own[i]}; it must start at 1"
            )
        elif jumps[i]:
            reasons[i] = (
                f"the own entry of host '{host}' jumps to {own[i]} at its event "
                f"{rank[i] + u[i]} (it must rise by 1)"
            )
        elif unknown[i]:
            names = sorted(r.key_names[e] for e in by_row[i] if unknown_entry[e])
            reasons[i] = f"the clock names host(s) with no event in this log: {', '.join(names)}"
        else:
            named = sorted((r.key_names[e], e) for e in by_row[i] if beyond_entry[e])
            reasons[i] = "the clock names " + "; ".join(
                f"event {r.value[e]} of host '{q}', which has "
                f"{events[r.execution[i] * hosts + r.key[e]]} events"
                for q, e in named
            )
    return own, reasons


def _messages(
    r: _Records, own: np.ndarray, accepted: np.ndarray
) -> tuple[dict[int, list[tuple[str, str]]], dict[int, list[tuple[str, str]]]]:
    """Per accepted record: its received messages and its sent ones, (msg_id, peer) each,
    in the order its events take them."""
    hosts = max(len(r.names), 1)
    receives: dict[int, list[tuple[str, str]]] = {}
    sends: dict[int, list[tuple[str, str]]] = defaultdict(list)
    events = np.flatnonzero(accepted)
    if len(events) == 0:
        return receives, sends
    # each accepted event's previous one on its host, by own entry
    ordered = events[np.lexsort((own[events], r.host[events], r.execution[events]))]
    same = np.r_[
        False,
        (r.host[ordered][1:] == r.host[ordered][:-1])
        & (r.execution[ordered][1:] == r.execution[ordered][:-1]),
    ]
    previous = np.full(r.n, -1, dtype=np.int64)
    previous[ordered[1:]] = np.where(same[1:], ordered[:-1], -1)
    # the clock entries, by (record, host) for lookups
    known = r.key >= 0
    entry_key = r.parent[known] * hosts + r.key[known]
    order = np.argsort(entry_key, kind="stable")
    entry_keys, entry_values = entry_key[order], r.value[known][order]
    # candidates: entries of accepted events, of another host, that rose since the previous
    rows, q, v = r.parent, r.key, r.value
    mask = known & accepted[rows] & (q != r.host[rows]) & (v > 0)
    rows, q, v = rows[mask], q[mask], v[mask]
    before = previous[rows]
    was = np.where(before >= 0, _lookup(entry_keys, entry_values, before * hosts + q, 0), 0)
    rose = v > was
    rows, q, v = rows[rose], q[rose], v[rose]
    # the event each candidate names: q's accepted event of own entry v, if any
    span = int(own.max()) + 2 if len(own) else 2
    event_key = (r.execution[events] * hosts + r.host[events]) * span + own[events]
    by_event = np.argsort(event_key, kind="stable")
    sender = _lookup(
        event_key[by_event],
        events[by_event],
        (r.execution[rows] * hosts + q) * span + np.minimum(v, span - 1),
        -1,
    )
    sender = np.where(v < span, sender, -1)
    # drop a candidate another candidate of the same event knows of
    order = np.lexsort((q, rows))
    rows, q, v, sender = rows[order], q[order], v[order], sender[order]
    starts = (
        np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]]) if len(rows) else np.zeros(0, np.int64)
    )
    sizes = np.diff(np.r_[starts, len(rows)])
    dropped = np.zeros(len(rows), dtype=bool)
    multi = sizes >= 2
    if multi.any():
        group_start, group_size = starts[multi], sizes[multi]
        members = np.concatenate(
            [np.arange(s, s + k) for s, k in zip(group_start, group_size, strict=True)]
        )
        k_of = np.repeat(group_size, group_size)
        s_of = np.repeat(group_start, group_size)
        c = np.repeat(members, k_of)
        offset = np.arange(len(c)) - np.repeat(np.cumsum(k_of) - k_of, k_of)
        d = np.repeat(s_of, k_of) + offset
        other = c != d
        c, d = c[other], d[other]
        knows = np.where(
            sender[d] >= 0, _lookup(entry_keys, entry_values, sender[d] * hosts + q[c], 0), 0
        )
        dropped[c[knows >= v[c]]] = True
    names = r.names
    for i in np.flatnonzero(~dropped):
        receiver = int(rows[i])
        p, s, src = names[r.host[receiver]], int(own[receiver]), names[q[i]]
        msg_id = f"{src}#{v[i]}>{p}#{s}"
        receives.setdefault(receiver, []).append((msg_id, src))
        if sender[i] >= 0:
            sends[int(sender[i])].append((p, msg_id))
    for key, sent in sends.items():
        sends[key] = [(m, peer) for peer, m in sorted(sent)]
    return receives, sends


def infer_rows(records: pa.Table) -> pa.Table:
    """One file's records (`RECORD_FIELDS`) -> its raw rows (`OUTPUT_FIELDS`)."""
    r = _Records(records)
    own, reasons = _checks(r)
    rejected_by_reader = r.host < 0
    bad = np.array([x is not None for x in reasons], dtype=bool) if r.n else np.zeros(0, bool)
    accepted = ~rejected_by_reader & ~bad
    receives, sends = _messages(r, own, accepted)
    take: list[int] = []
    kind: list[str | None] = []
    msg_id: list[str | None] = []
    peer: list[str | None] = []
    sub: list[int | None] = []
    first: list[bool] = []
    last: list[bool] = []
    for i in np.flatnonzero(accepted):
        got, sent = receives.get(int(i), []), sends.get(int(i), [])
        rows: list[tuple[str, str | None, str | None, int]] = [
            ("receive", m, p, k) for k, (m, p) in enumerate(got)
        ]
        seen: dict[str, int] = defaultdict(int)
        for m, p in sent:
            rows.append(("send", m, p, len(got) + seen[p]))
            seen[p] += 1
        if not rows:
            rows = [("internal", None, None, 0)]
        final = max(k for *_, k in rows)
        for kd, message, other, k in rows:
            take.append(int(i))
            kind.append(kd)
            msg_id.append(message)
            peer.append(other)
            sub.append(k)
            first.append(k == 0)
            last.append(k == final)
    own_text = [str(x) if x >= 0 else None for x in own.tolist()]
    events = _event_table(records, take, own_text, kind, msg_id, peer, sub, first, last)
    rejects = _reject_table(records, np.flatnonzero(~accepted), reasons)
    return pa.concat_tables([events, rejects])


def _event_table(
    records: pa.Table,
    take: Sequence[int],
    own_text: Sequence[str | None],
    kind: list[str | None],
    msg_id: list[str | None],
    peer: list[str | None],
    sub: list[int | None],
    first: list[bool],
    last: list[bool],
) -> pa.Table:
    at = pa.array(take, pa.int64())
    picked = records.take(at)
    no_string = pa.nulls(len(take), pa.string())
    return pa.table(
        {
            "source": picked.column("source"),
            "line": picked.column("line"),
            "record": picked.column("record"),
            "raw": picked.column("raw"),
            "process": picked.column("host"),
            "seq": pa.array([own_text[i] for i in take], pa.string()),
            "kind": pa.array(kind, pa.string()),
            "msg_id": pa.array(msg_id, pa.string()),
            "peer": pa.array(peer, pa.string()),
            "label": pc.if_else(pa.array(first, pa.bool_()), picked.column("label"), no_string),
            "trace_suffix": picked.column("trace_suffix"),
            "sub": pa.array(sub, pa.int64()),
            "parse_error": no_string,
            "parse_reason": no_string,
            "recorded_vc": pc.if_else(
                pa.array(last, pa.bool_()), picked.column("clock"), pa.nulls(len(take), CLOCK_ARROW)
            ),
        }
    )


def _reject_table(records: pa.Table, rows: np.ndarray, reasons: list[str | None]) -> pa.Table:
    picked = records.take(pa.array(rows, pa.int64()))
    by_reader = [reasons[i] is None for i in rows.tolist()]
    is_reader = pa.array(by_reader, pa.bool_())
    no_string = pa.nulls(len(rows), pa.string())
    return pa.table(
        {
            "source": picked.column("source"),
            "line": picked.column("line"),
            "record": picked.column("record"),
            "raw": picked.column("raw"),
            "process": picked.column("host"),
            "seq": no_string,
            "kind": no_string,
            "msg_id": no_string,
            "peer": no_string,
            # a bad clock keeps the record's label; the reader's rejects have none
            "label": pc.if_else(is_reader, no_string, picked.column("label")),
            "trace_suffix": picked.column("trace_suffix"),
            "sub": pa.nulls(len(rows), pa.int64()),
            "parse_error": pc.if_else(
                is_reader,
                picked.column("parse_error"),
                pa.array([reasons[i] for i in rows.tolist()], pa.string()),
            ),
            "parse_reason": pc.if_else(
                is_reader,
                picked.column("parse_reason"),
                pa.array([BAD_CLOCK] * len(rows), pa.string()),
            ),
            "recorded_vc": pa.nulls(len(rows), CLOCK_ARROW),
        }
    )
