"""ShiViz logs after parsing: the clock checks and the message inference of one file's
records, in NumPy and Arrow compute (docs/formats.md), where the file is parsed (one task
per file). No Python runs per event or message; only a rejected record's reason is
written one at a time.

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


def _within(sizes: np.ndarray) -> np.ndarray:
    """0, 1, ..., k - 1 for each group size k in `sizes`, one group after the other."""
    sizes = np.asarray(sizes, dtype=np.int64)
    within: np.ndarray = np.arange(int(sizes.sum()), dtype=np.int64)
    within -= np.repeat(np.cumsum(sizes) - sizes, sizes)
    return within


def _runs(*keys: np.ndarray) -> np.ndarray:
    """The lengths of the runs of equal rows in keys sorted together (arrays of one length)."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for key in keys:
        change[1:] |= key[1:] != key[:-1]
    return np.diff(np.r_[np.flatnonzero(change), n])


def _lookup(
    sorted_keys: np.ndarray, values: np.ndarray, wanted: np.ndarray, missing: int
) -> np.ndarray:
    """values[i] where sorted_keys[i] == wanted, else `missing` (keys unique)."""
    if len(sorted_keys) == 0:
        return np.full(len(wanted), missing, dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_keys, wanted), len(sorted_keys) - 1)
    return np.where(sorted_keys[at] == wanted, values[at], missing)


def _nullable(indices: np.ndarray) -> pa.Array:
    """Indices for `take`, null where negative (`take` gives null there)."""
    return pa.array(indices, pa.int64(), mask=indices < 0)


class _Records:
    """The columns of one file's records, as NumPy arrays; the clock entries flattened
    (`parent` record, `key` host index or -1 for a host with no record, `value`)."""

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
        take = pa.array(np.repeat(offsets[:-1], counts) + _within(counts), pa.int64())
        # the entries' host names, as Arrow: only error messages read them
        self.keys = pc.take(clock.keys, take)
        self.key = _ints(pc.index_in(self.keys, value_set=value_set))
        self.value = _ints(pc.take(clock.items, take), 0)
        self.parent = np.repeat(np.arange(self.n, dtype=np.int64), counts)


def _checks(r: _Records) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
    """(own entry per record, -1 if none; whether the record fails a check; the
    `bad_clock` reason per record or None)."""
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
        return own, failing, reasons
    texts = r.table.column("clock_text").to_pylist()
    flagged = np.flatnonzero(unknown_entry | beyond_entry)
    flagged_names = r.keys.take(pa.array(flagged, pa.int64())).to_pylist()
    key_name = dict(zip(flagged.tolist(), flagged_names, strict=True))
    by_row: dict[int, list[int]] = defaultdict(list)
    for e in flagged.tolist():
        by_row[int(r.parent[e])].append(e)
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
            names = sorted(key_name[e] for e in by_row[i] if unknown_entry[e])
            reasons[i] = f"the clock names host(s) with no event in this log: {', '.join(names)}"
        else:
            named = sorted((key_name[e], e) for e in by_row[i] if beyond_entry[e])
            reasons[i] = "the clock names " + "; ".join(
                f"event {r.value[e]} of host '{q}', which has "
                f"{events[r.execution[i] * hosts + r.key[e]]} events"
                for q, e in named
            )
    return own, failing, reasons


class _Messages:
    """The inferred messages, by receiving record then sending host: the receiving
    record, the sending host (index), the send's own entry, the sending record (-1 when
    the sending host has no accepted event of that entry) and the msg_id."""

    def __init__(
        self,
        r: _Records,
        own: np.ndarray,
        receiver: np.ndarray,
        q: np.ndarray,
        v: np.ndarray,
        sender: np.ndarray,
    ) -> None:
        self.receiver, self.q, self.v, self.sender = receiver, q, v, sender
        self.names = pa.array(r.names, pa.string())
        self.to = r.host[receiver]
        # `q#v>p#s`
        self.msg_id = pc.binary_join_element_wise(
            self.names.take(pa.array(q, pa.int64())),
            "#",
            pa.array(v, pa.int64()).cast(pa.string()),
            ">",
            self.names.take(pa.array(self.to, pa.int64())),
            "#",
            pa.array(own[receiver], pa.int64()).cast(pa.string()),
            "",
        )


def _messages(r: _Records, own: np.ndarray, accepted: np.ndarray) -> _Messages:
    """The messages ShiViz infers between the accepted records (module docstring)."""
    hosts = max(len(r.names), 1)
    empty = np.zeros(0, dtype=np.int64)
    events = np.flatnonzero(accepted)
    if len(events) == 0:
        return _Messages(r, own, empty, empty, empty, empty)
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
    span = int(own[events].max()) + 2
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
    sizes = _runs(rows)
    starts = np.cumsum(sizes) - sizes
    dropped = np.zeros(len(rows), dtype=bool)
    multi = sizes >= 2
    if multi.any():
        # every ordered pair (c, d) of two candidates of one event: does d know of c?
        group_start, group_size = starts[multi], sizes[multi]
        members = np.repeat(group_start, group_size) + _within(group_size)
        k_of = np.repeat(group_size, group_size)
        c = np.repeat(members, k_of)
        d = np.repeat(np.repeat(group_start, group_size), k_of) + _within(k_of)
        other = c != d
        c, d = c[other], d[other]
        knows = np.where(
            sender[d] >= 0, _lookup(entry_keys, entry_values, sender[d] * hosts + q[c], 0), 0
        )
        dropped[c[knows >= v[c]]] = True
    kept = ~dropped
    return _Messages(r, own, rows[kept], q[kept], v[kept], sender[kept])


def infer_rows(records: pa.Table) -> pa.Table:
    """One file's records (`RECORD_FIELDS`) -> its raw rows (`OUTPUT_FIELDS`)."""
    r = _Records(records)
    own, failing, reasons = _checks(r)
    accepted = (r.host >= 0) & ~failing
    events = _event_table(r, own, accepted, _messages(r, own, accepted))
    rejects = _reject_table(records, np.flatnonzero(~accepted), reasons)
    return pa.concat_tables([events, rejects])


def _event_table(r: _Records, own: np.ndarray, accepted: np.ndarray, m: _Messages) -> pa.Table:
    """The rows of the accepted records, in record order: each its receive events (by
    sending host), then its send events (one message per destination each, by
    destination then msg_id), or one internal event; `sub` numbers them."""
    n = r.n
    received = np.bincount(m.receiver, minlength=n)
    # receives: already by (receiver, sending host)
    receive_sub = _within(received[received > 0])
    # sends: by (sender, destination, msg_id); the i-th message to a destination is
    # in the event after the receives and i - 1 sends
    has_sender = np.flatnonzero(m.sender >= 0)
    by_send = pc.sort_indices(
        pa.table(
            {
                "sender": m.sender[has_sender],
                "to": m.to[has_sender],
                "msg_id": m.msg_id.take(pa.array(has_sender, pa.int64())),
            }
        ),
        [("sender", "ascending"), ("to", "ascending"), ("msg_id", "ascending")],
    )
    sent = has_sender[np.asarray(by_send.to_numpy(), dtype=np.int64)]
    send_sub = received[m.sender[sent]] + _within(_runs(m.sender[sent], m.to[sent]))
    internal = np.flatnonzero(
        accepted & (received == 0) & (np.bincount(m.sender[sent], minlength=n) == 0)
    )
    none = np.full(len(internal), -1, dtype=np.int64)
    # receive, send and internal rows; a stable sort by record keeps that order in each
    take = np.concatenate([m.receiver, m.sender[sent], internal])
    kind = np.concatenate(
        [np.zeros(len(m.receiver), np.int64), np.ones(len(sent), np.int64), none + 3]
    )
    message = np.concatenate([np.arange(len(m.receiver), dtype=np.int64), sent, none])
    peer = np.concatenate([m.q, m.to[sent], none])
    sub = np.concatenate([receive_sub, send_sub, none + 1])
    order = np.argsort(take, kind="stable")
    take, kind, message = take[order], kind[order], message[order]
    peer, sub = peer[order], sub[order]
    # the recorded clock goes on the last sub of a record
    sizes = _runs(take)
    final = np.maximum.reduceat(sub, np.cumsum(sizes) - sizes) if len(sub) else sub
    last = pa.array(sub == np.repeat(final, sizes), pa.bool_())
    picked = r.table.take(pa.array(take, pa.int64()))
    no_string = pa.nulls(len(take), pa.string())
    return _rows(
        picked,
        seq=pa.array(own[take], pa.int64()).cast(pa.string()),
        kind=pa.array(["receive", "send", "internal"], pa.string()).take(pa.array(kind)),
        msg_id=m.msg_id.take(_nullable(message)),
        peer=m.names.take(_nullable(peer)),
        label=pc.if_else(pa.array(sub == 0, pa.bool_()), picked.column("label"), no_string),
        sub=pa.array(sub, pa.int64()),
        parse_error=no_string,
        parse_reason=no_string,
        recorded_vc=pc.if_else(last, picked.column("clock"), pa.nulls(len(take), CLOCK_ARROW)),
    )


def _reject_table(records: pa.Table, rows: np.ndarray, reasons: list[str | None]) -> pa.Table:
    picked = records.take(pa.array(rows, pa.int64()))
    # the reader's rejects have no host; the others failed a clock check
    is_reader = pc.is_null(picked.column("host"))
    no_string = pa.nulls(len(rows), pa.string())
    return _rows(
        picked,
        seq=no_string,
        kind=no_string,
        msg_id=no_string,
        peer=no_string,
        # a bad clock keeps the record's label; the reader's rejects have none
        label=pc.if_else(is_reader, no_string, picked.column("label")),
        sub=pa.nulls(len(rows), pa.int64()),
        parse_error=pc.if_else(
            is_reader,
            picked.column("parse_error"),
            pa.array([reasons[i] for i in rows.tolist()], pa.string()),
        ),
        parse_reason=pc.if_else(
            is_reader, picked.column("parse_reason"), pa.array([BAD_CLOCK] * len(rows), pa.string())
        ),
        recorded_vc=pa.nulls(len(rows), CLOCK_ARROW),
    )


def _rows(picked: pa.Table, **columns: pa.Array | pa.ChunkedArray) -> pa.Table:
    """`OUTPUT_FIELDS` rows: the picked records' own columns, and `columns`."""
    own = {
        "source": picked.column("source"),
        "line": picked.column("line"),
        "record": picked.column("record"),
        "raw": picked.column("raw"),
        "process": picked.column("host"),
        "trace_suffix": picked.column("trace_suffix"),
    }
    merged = own | columns
    return pa.table({name: merged[name] for name in OUTPUT_FIELDS})
