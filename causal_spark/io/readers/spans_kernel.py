"""Span records -> raw rows, in NumPy and Arrow (the rules of `spans`, docs/formats.md).

`pair(spans, span_process)` takes span records (the columns of `spans.SPAN_SCHEMA`) of
one trace or several, and returns the raw rows (`OUTPUT_FIELDS`, the readers' raw-row
contract): the rejects of records a reader could not use, one `duplicate_span` reject
per repeated (trace, span id, kind), and the events of every other span with the
messages they send and receive. A reference only ever names a span of its own trace,
so the result does not depend on how traces are grouped into calls.

Everything but the references that name several spans (one id shared by spans of
different kinds, Zipkin's shared pairs) and the duplicate messages is vectorized: the
parent, shared-id and link references are resolved by sorting the spans' (trace, id)
codes and searching them; messages are built per rule with masks; each event's
receives and sends are sorted by Arrow; the local order is one sort of the events.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CLIENT, SERVER, PRODUCER, CONSUMER = "CLIENT", "SERVER", "PRODUCER", "CONSUMER"
START, END = 0, 1
DUPLICATE_SPAN = "duplicate_span"

# the span-record columns read (spans.SPAN_SCHEMA)
SOURCE, LINE, RECORD, RAW, TRACE_ID = "source", "line", "record", "raw", "trace_id"
SPAN_ID, PARENT, KIND, SHARED = "span_id", "parent", "span_kind", "shared"
SERVICE, INSTANCE, START_NS, END_NS = "service", "instance", "start_ns", "end_ns"
NAME, LINKS, NOTE = "name", "links", "note"
PARSE_ERROR, PARSE_REASON = "parse_error", "parse_reason"

CLOCK_ARROW = pa.map_(pa.string(), pa.int64())
# the raw-row contract (base.RAW_SCHEMA), as Arrow
OUTPUT_SCHEMA = pa.schema(
    [
        pa.field(SOURCE, pa.string()),
        pa.field(LINE, pa.int64()),
        pa.field(RECORD, pa.int64()),
        pa.field(RAW, pa.string()),
        *[
            pa.field(name, pa.string())
            for name in (
                TRACE_ID,
                "process",
                "seq",
                "kind",
                "msg_id",
                "peer",
                "ts",
                "size_bytes",
                "label",
                "trace_suffix",
            )
        ],
        pa.field("sub", pa.int64()),
        pa.field(PARSE_ERROR, pa.string()),
        pa.field(PARSE_REASON, pa.string()),
        pa.field("recorded_vc", CLOCK_ARROW),
    ]
)
OUTPUT_FIELDS: tuple[str, ...] = tuple(OUTPUT_SCHEMA.names)

# span kinds as small codes
_KIND_CODES = {CLIENT: 1, SERVER: 2, PRODUCER: 3, CONSUMER: 4}
# reference types
_PARENT_REF, _SHARED_REF, _LINK_REF = 0, 1, 2
_NANOS = 1_000_000_000


def _objects(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A string column as a NumPy object array (None for null)."""
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)


def _ints(column: pa.ChunkedArray | pa.Array, fill: int = -1) -> np.ndarray:
    return np.asarray(pc.fill_null(column, fill).to_numpy(zero_copy_only=False), dtype=np.int64)


def _codes(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Dense int codes of a string column (equal values, equal codes; null: -1)."""
    encoded = pc.dictionary_encode(values)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    return _ints(encoded.indices)


def _table(columns: dict[str, pa.Array | pa.ChunkedArray], n: int) -> pa.Table:
    """A table of OUTPUT_SCHEMA from the columns given; the others are null."""
    return pa.table(
        {
            f.name: (columns[f.name] if f.name in columns else pa.nulls(n, f.type)).cast(f.type)
            for f in OUTPUT_SCHEMA
        },
        schema=OUTPUT_SCHEMA,
    )


def _rejects(records: pa.Table) -> pa.Table:
    """One reject row per record the reader could not use."""
    names = (SOURCE, LINE, RECORD, RAW, TRACE_ID, PARSE_ERROR, PARSE_REASON)
    return _table({name: records.column(name) for name in names}, records.num_rows)


def _without_duplicates(spans: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(unique spans in their input order, `duplicate_span` rejects): a span repeats the
    one of the same (trace, id, kind) read first (file, line, record order)."""
    kinds = pc.fill_null(spans.column(KIND), "")
    keys = pa.table(
        {
            "t": spans.column(TRACE_ID),
            "s": spans.column(SPAN_ID),
            "k": kinds,
            "f": spans.column(SOURCE),
            "l": spans.column(LINE),
            "r": spans.column(RECORD),
        }
    )
    order = pc.sort_indices(keys, sort_keys=[(c, "ascending") for c in keys.column_names])
    order_np = order.to_numpy()
    n = len(order_np)
    first = np.ones(n, dtype=bool)
    if n > 1:
        t, s, k = (_objects(keys.column(c).take(order)) for c in ("t", "s", "k"))
        first[1:] = (t[1:] != t[:-1]) | (s[1:] != s[:-1]) | (k[1:] != k[:-1])
    if first.all():
        return spans, _table({}, 0)
    group_start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    repeats = order_np[~first]
    originals = order_np[group_start[~first]]
    sources, lines = _objects(spans.column(SOURCE)), _ints(spans.column(LINE))
    ids, traces = _objects(spans.column(SPAN_ID)), _objects(spans.column(TRACE_ID))
    kind_text = _objects(spans.column(KIND))
    errors = [
        f"span '{ids[r]}' ({kind_text[r] or 'no kind'}) of trace '{traces[r]}' repeats "
        f"the one at line {lines[o]} of {sources[o]}"
        for r, o in zip(repeats, originals, strict=True)
    ]
    taken = spans.take(pa.array(repeats))
    rejects = _table(
        {
            **{name: taken.column(name) for name in (SOURCE, LINE, RECORD, RAW, TRACE_ID)},
            PARSE_ERROR: pa.array(errors, pa.string()),
            PARSE_REASON: pa.array([DUPLICATE_SPAN] * len(errors), pa.string()),
        },
        len(errors),
    )
    return spans.take(pa.array(np.sort(order_np[first]))), rejects


def _processes(spans: pa.Table, span_process: str) -> pa.ChunkedArray | pa.Array:
    """service (`unknown` when absent), `@instance` when known, `/<span id>` per span."""
    service = pc.fill_null(spans.column(SERVICE), "unknown")
    instance = spans.column(INSTANCE)
    process = pc.if_else(
        pc.is_null(instance), service, pc.binary_join_element_wise(service, instance, "@")
    )
    if span_process == "span":
        process = pc.binary_join_element_wise(process, spans.column(SPAN_ID), "/")
    return process


class _References:
    """The parent, shared-id and link references of every span, resolved: for each, the
    span it names (-1: absent from the input), or dropped (a shared id naming no CLIENT,
    a reference to the span itself)."""

    def __init__(self, spans: pa.Table, kind: np.ndarray, process: np.ndarray) -> None:
        n = spans.num_rows
        trace = spans.column(TRACE_ID)
        span_id = spans.column(SPAN_ID)
        parent = spans.column(PARENT)
        parent_trace = pc.struct_field(parent, TRACE_ID)
        parent_id = pc.struct_field(parent, SPAN_ID)
        own_trace = _objects(trace)
        # the parent, unless it names the span itself
        p_trace = pc.coalesce(parent_trace, trace)
        not_self = pc.invert(
            pc.fill_null(pc.and_(pc.equal(parent_id, span_id), pc.equal(p_trace, trace)), False)
        )
        has_parent = _bools(pc.and_(pc.is_valid(parent_id), not_self))
        parent_owner = np.flatnonzero(has_parent)
        shared_owner = np.flatnonzero(kind == _KIND_CODES[SERVER])
        links = spans.column(LINKS)
        if isinstance(links, pa.ChunkedArray):
            links = links.combine_chunks()
        # a null list has no elements and no parent indices: nothing to fill
        link_owner = _ints(pc.list_parent_indices(links))
        flat = pc.list_flatten(links)
        link_trace, link_id = pc.struct_field(flat, TRACE_ID), pc.struct_field(flat, SPAN_ID)
        owner = np.concatenate([parent_owner, shared_owner, link_owner])
        self.owner = owner
        self.type = np.concatenate(
            [
                np.full(len(parent_owner), _PARENT_REF),
                np.full(len(shared_owner), _SHARED_REF),
                np.full(len(link_owner), _LINK_REF),
            ]
        )
        ref_trace = pa.chunked_array(
            [
                _chunk(p_trace.take(pa.array(parent_owner))),
                _chunk(trace.take(pa.array(shared_owner))),
                _chunk(pc.coalesce(link_trace, trace.take(pa.array(link_owner)))),
            ],
            pa.string(),
        )
        ref_id = pa.chunked_array(
            [
                _chunk(parent_id.take(pa.array(parent_owner))),
                _chunk(span_id.take(pa.array(shared_owner))),
                _chunk(link_id),
            ],
            pa.string(),
        )
        self.id = _objects(ref_id)
        # codes of (trace, id) over spans and references together
        both = pa.chunked_array(
            [
                _chunk(pc.binary_join_element_wise(trace, span_id, "\x1f")),
                _chunk(pc.binary_join_element_wise(ref_trace, ref_id, "\x1f")),
            ],
            pa.string(),
        )
        codes = _codes(both)
        span_codes, ref_codes = codes[:n], codes[n:]
        # a reference to another trace names nothing read (a trace is the unit)
        other_trace = _objects(ref_trace) != own_trace[owner]
        ref_codes = np.where(other_trace, -1, ref_codes)
        by_code = np.argsort(span_codes, kind="stable")
        sorted_codes = span_codes[by_code]
        lo = np.searchsorted(sorted_codes, ref_codes, "left")
        hi = np.searchsorted(sorted_codes, ref_codes, "right")
        count = np.where(ref_codes < 0, 0, hi - lo)
        target = np.full(len(owner), -1, dtype=np.int64)
        keep = np.ones(len(owner), dtype=bool)
        is_shared = self.type == _SHARED_REF
        # no span with that id: absent (a shared id then names no CLIENT: dropped)
        keep &= ~((count == 0) & is_shared)
        # one span: it, unless it is the span itself, or a shared id's non-CLIENT
        one = np.flatnonzero(count == 1)
        candidate = by_code[lo[one]]
        usable = (candidate != owner[one]) & (
            ~is_shared[one] | (kind[candidate] == _KIND_CODES[CLIENT])
        )
        target[one[usable]] = candidate[usable]
        keep[one[~usable]] = False
        # several spans (one id, several kinds): the one on the same process, else a
        # non-CLIENT, else the CLIENT; ties by id:kind
        kinds_text = _objects(spans.column(KIND))
        ids_text = _objects(span_id)
        for r in np.flatnonzero(count > 1):
            candidates = [
                int(c)
                for c in by_code[lo[r] : hi[r]]
                if c != owner[r] and (not is_shared[r] or kind[c] == _KIND_CODES[CLIENT])
            ]
            if not candidates:
                keep[r] = False
                continue

            def preference(c: int, r: int = int(r)) -> tuple[int, str]:
                rank = (
                    0
                    if process[c] == process[owner[r]]
                    else 1
                    if kind[c] != _KIND_CODES[CLIENT]
                    else 2
                )
                return rank, f"{ids_text[c]}:{kinds_text[c] or ''}"

            target[r] = min(candidates, key=preference)
        # a link named twice counts once
        keep &= ~_repeated_links(owner, self.type, ref_trace, ref_id)
        self.target = target
        self.keep = keep


def _repeated_links(
    owner: np.ndarray, kind: np.ndarray, ref_trace: pa.ChunkedArray, ref_id: pa.ChunkedArray
) -> np.ndarray:
    """True for a link reference that repeats an earlier one of the same span."""
    repeated = np.zeros(len(owner), dtype=bool)
    links = np.flatnonzero(kind == _LINK_REF)
    if len(links) < 2:
        return repeated
    traces, ids = _objects(ref_trace), _objects(ref_id)
    seen: set[tuple[int, object, object]] = set()
    for r in links:
        key = (int(owner[r]), traces[r], ids[r])
        repeated[r] = key in seen
        seen.add(key)
    return repeated


def _chunk(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    return values


def _bools(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _messages(
    spans: pa.Table, kind: np.ndarray, process_code: np.ndarray, refs: _References
) -> dict[str, np.ndarray]:
    """Every message: its id's span and suffix, sending span and side (-1: an orphan),
    receiving span and side, and when it is received (ns)."""
    n = spans.num_rows
    start, end = _ints(spans.column(START_NS)), _ints(spans.column(END_NS))
    shared = _bools(spans.column(SHARED))
    kept = np.flatnonzero(refs.keep)
    owner, rtype, target = refs.owner[kept], refs.type[kept], refs.target[kept]
    parent = np.full(n, -2, dtype=np.int64)  # -2: no parent reference, -1: absent
    is_parent = rtype == _PARENT_REF
    parent[owner[is_parent]] = target[is_parent]
    shared_client = np.full(n, -1, dtype=np.int64)
    is_shared = rtype == _SHARED_REF
    shared_client[owner[is_shared]] = target[is_shared]
    found = parent >= 0
    p = np.where(found, parent, 0)
    client = np.where(
        shared_client >= 0,
        shared_client,
        np.where(found & (kind[p] == _KIND_CODES[CLIENT]), p, -1),
    )
    server = kind == _KIND_CODES[SERVER]
    rpc = np.flatnonzero(server & (client >= 0))
    orphan = server & (client < 0) & (shared | ((parent != -2) & ~found))
    # a CONSUMER's producers: parent and links naming a PRODUCER or nothing read
    named_refs = np.flatnonzero(
        (kind[owner] == _KIND_CODES[CONSUMER])
        & ((rtype == _PARENT_REF) | (rtype == _LINK_REF))
        & ((target < 0) | (kind[np.where(target >= 0, target, 0)] == _KIND_CODES[PRODUCER]))
    )
    named = np.bincount(owner[named_refs], minlength=n)
    consumed = (kind == _KIND_CODES[CONSUMER]) & (named > 0)
    call = (
        ~(server & (client >= 0)) & ~orphan & ~consumed & found & (process_code[p] != process_code)
    )
    call_spans, orphan_spans = np.flatnonzero(call), np.flatnonzero(orphan)
    ref_ids = refs.id[kept][named_refs]
    c_owner = owner[named_refs]
    c_target = target[named_refs]
    consumed_suffix = [
        ":msg" if named[o] == 1 else (None if i is None else f":msg:{i}")
        for o, i in zip(c_owner, ref_ids, strict=True)
    ]
    parts = [
        # owner, suffix, src, src side, dst, dst side, dst ns
        (rpc, [":req"] * len(rpc), client[rpc], START, rpc, START, start[rpc]),
        (rpc, [":resp"] * len(rpc), rpc, END, client[rpc], END, end[client[rpc]]),
        (
            orphan_spans,
            [":req"] * len(orphan_spans),
            np.full(len(orphan_spans), -1),
            START,
            orphan_spans,
            START,
            start[orphan_spans],
        ),
        (c_owner, consumed_suffix, c_target, START, c_owner, START, start[c_owner]),
        (
            call_spans,
            [":call"] * len(call_spans),
            p[call_spans],
            START,
            call_spans,
            START,
            start[call_spans],
        ),
    ]
    suffixes: list[str | None] = []
    for part in parts:
        suffixes.extend(cast("list[str | None]", part[1]))
    return {
        "owner": np.concatenate([np.asarray(x[0], dtype=np.int64) for x in parts]),
        "suffix": np.asarray(suffixes, dtype=object),
        "src": np.concatenate([np.asarray(x[2], dtype=np.int64) for x in parts]),
        "src_side": np.concatenate([np.full(len(x[0]), x[3]) for x in parts]),
        "dst": np.concatenate([np.asarray(x[4], dtype=np.int64) for x in parts]),
        "dst_side": np.concatenate([np.full(len(x[0]), x[5]) for x in parts]),
        "dst_ns": np.concatenate([np.asarray(x[6], dtype=np.int64) for x in parts]),
    }


def _local_order(
    spans: pa.Table, trace_code: np.ndarray, process_code: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(ns, seq) of each event 2 * span + side: its time, and its rank on its process by
    (ts, start before end, span id, kind)."""
    n = spans.num_rows
    start, end = _ints(spans.column(START_NS)), _ints(spans.column(END_NS))
    ns = np.empty(2 * n, dtype=np.int64)
    ns[0::2], ns[1::2] = start, end
    span = np.repeat(np.arange(n), 2)
    events = pa.table(
        {
            "t": np.repeat(trace_code, 2),
            "p": np.repeat(process_code, 2),
            "ns": ns,
            "side": np.tile(np.array([START, END], dtype=np.int8), n),
            "id": spans.column(SPAN_ID).take(pa.array(span)),
            "k": pc.fill_null(spans.column(KIND), "").take(pa.array(span)),
        }
    )
    order = pc.sort_indices(events, sort_keys=[(c, "ascending") for c in events.column_names])
    order_np = order.to_numpy()
    t, p = events.column("t").to_numpy()[order_np], events.column("p").to_numpy()[order_np]
    first = np.ones(2 * n, dtype=bool)
    first[1:] = (t[1:] != t[:-1]) | (p[1:] != p[:-1])
    position = np.arange(2 * n)
    group_start = np.maximum.accumulate(np.where(first, position, 0))
    seq = np.empty(2 * n, dtype=np.int64)
    seq[order_np] = position - group_start + 1
    return ns, seq


def _seconds(ns: np.ndarray) -> pa.Array:
    """Epoch nanoseconds as exact seconds text, e.g. `1470150004.008762000`."""
    whole = ns // _NANOS
    frac = ns - whole * _NANOS
    return pc.binary_join_element_wise(
        pc.cast(pa.array(whole), pa.string()),
        pc.utf8_lpad(pc.cast(pa.array(frac), pa.string()), 9, "0"),
        ".",
    )


def _message_rows(
    spans: pa.Table, process: pa.Array, messages: dict[str, np.ndarray], n_events: int
) -> dict[str, np.ndarray | pa.Array]:
    """The rows of the events that receive or send: receives first (orphans first, then
    by peer, msg id), then sends (by receive time, msg id, peer), a send event holding one
    message per destination. Columns: event, kind, msg_id, peer, sub."""
    ids = spans.column(SPAN_ID).take(pa.array(messages["owner"]))
    msg_id = pc.binary_join_element_wise(ids, pa.array(messages["suffix"], pa.string()), "")
    src, dst = messages["src"], messages["dst"]
    src_peer = pc.if_else(
        pa.array(src < 0),
        pa.nulls(len(src), pa.string()),
        process.take(pa.array(np.maximum(src, 0))),
    )
    dst_peer = process.take(pa.array(dst))
    # receives
    r_event = 2 * dst + messages["dst_side"]
    receives = pa.table({"e": r_event, "peer": src_peer, "msg": msg_id})
    r_order = pc.sort_indices(
        receives, sort_keys=[(c, "ascending", "at_start") for c in receives.column_names]
    ).to_numpy()
    r_event_sorted = r_event[r_order]
    r_first = np.ones(len(r_order), dtype=bool)
    r_first[1:] = r_event_sorted[1:] != r_event_sorted[:-1]
    r_pos = np.arange(len(r_order))
    r_sub = r_pos - np.maximum.accumulate(np.where(r_first, r_pos, 0))
    n_recv = np.bincount(r_event, minlength=n_events)
    # sends
    sending = np.flatnonzero(src >= 0)
    s_event = 2 * src[sending] + messages["src_side"][sending]
    sends = pa.table(
        {
            "e": s_event,
            "ns": messages["dst_ns"][sending],
            "msg": msg_id.take(pa.array(sending)),
            "peer": dst_peer.take(pa.array(sending)),
        }
    )
    s_order = pc.sort_indices(
        sends, sort_keys=[(c, "ascending", "at_start") for c in sends.column_names]
    ).to_numpy()
    # the i-th message to a destination goes in the event's i-th send event
    peer_code = _codes(sends.column("peer"))[s_order]
    by_peer = np.lexsort((np.arange(len(s_order)), peer_code, s_event[s_order]))
    e_sorted, p_sorted = s_event[s_order][by_peer], peer_code[by_peer]
    s_first = np.ones(len(by_peer), dtype=bool)
    s_first[1:] = (e_sorted[1:] != e_sorted[:-1]) | (p_sorted[1:] != p_sorted[:-1])
    s_pos = np.arange(len(by_peer))
    rounds = np.empty(len(by_peer), dtype=np.int64)
    rounds[by_peer] = s_pos - np.maximum.accumulate(np.where(s_first, s_pos, 0))
    s_rows = sending[s_order]
    return {
        "event": np.concatenate([r_event_sorted, s_event[s_order]]),
        "kind": np.concatenate(
            [
                np.full(len(r_order), "receive", dtype=object),
                np.full(len(s_rows), "send", dtype=object),
            ]
        ),
        "msg_id": pa.chunked_array(
            [_chunk(msg_id.take(pa.array(r_order))), _chunk(msg_id.take(pa.array(s_rows)))],
            pa.string(),
        ),
        "peer": pa.chunked_array(
            [_chunk(src_peer.take(pa.array(r_order))), _chunk(dst_peer.take(pa.array(s_rows)))],
            pa.string(),
        ),
        "sub": np.concatenate([r_sub, n_recv[s_event[s_order]] + rounds]),
    }


def _events(spans: pa.Table, span_process: str) -> pa.Table:
    """The raw rows of unique spans (see the module docstring)."""
    n = spans.num_rows
    if n == 0:
        return _table({}, 0)
    kind_text = _objects(spans.column(KIND))
    kind = np.array([_KIND_CODES.get(k, 0) for k in kind_text], dtype=np.int8)
    process = _chunk(_processes(spans, span_process))
    process_code = _codes(process)
    trace_code = _codes(spans.column(TRACE_ID))
    refs = _References(spans, kind, process_code)
    messages = _messages(spans, kind, process_code, refs)
    ns, seq = _local_order(spans, trace_code, process_code)
    rows = _message_rows(spans, process, messages, 2 * n)
    quiet = np.flatnonzero(np.bincount(rows["event"], minlength=2 * n) == 0)
    event = np.concatenate([quiet, rows["event"]])
    m = len(event)
    span = pa.array(event // 2)
    side = event % 2
    name = pc.fill_null(spans.column(NAME), "span").take(span)
    note = spans.column(NOTE).take(span)
    label = pc.binary_join_element_wise(
        name,
        pa.array(np.where(side == START, " (start)", " (end)").astype(object), pa.string()),
        pc.fill_null(pc.binary_join_element_wise(" [", note, "]", ""), ""),
        "",
    )
    sub = np.concatenate([np.zeros(len(quiet), dtype=np.int64), rows["sub"]])
    label = pc.if_else(pa.array(sub == 0), label, pa.nulls(m, pa.string()))
    event_arr = pa.array(event)
    return _table(
        {
            **{
                name: spans.column(name).take(span)
                for name in (SOURCE, LINE, RECORD, RAW, TRACE_ID)
            },
            "process": process.take(span),
            "seq": pc.cast(pa.array(seq).take(event_arr), pa.string()),
            "kind": pa.array(
                np.concatenate([np.full(len(quiet), "internal", dtype=object), rows["kind"]]),
                pa.string(),
            ),
            "msg_id": pa.chunked_array(
                [pa.nulls(len(quiet), pa.string()), *_chunks(rows["msg_id"])], pa.string()
            ),
            "peer": pa.chunked_array(
                [pa.nulls(len(quiet), pa.string()), *_chunks(rows["peer"])], pa.string()
            ),
            "ts": _seconds(ns).take(event_arr),
            "label": label,
            "sub": pa.array(sub),
        },
        m,
    )


def _chunks(values: pa.Array | pa.ChunkedArray | np.ndarray) -> list[pa.Array]:
    if isinstance(values, pa.ChunkedArray):
        return list(values.chunks)
    if isinstance(values, pa.Array):
        return [values]
    return [pa.array(values)]


def pair(spans: pa.Table, span_process: str = "instance") -> pa.Table:
    """Span records (`spans.SPAN_SCHEMA` columns) -> raw rows (`OUTPUT_SCHEMA`)."""
    error = pc.is_valid(spans.column(PARSE_ERROR))
    bad = spans.filter(error)
    unique, repeats = _without_duplicates(spans.filter(pc.invert(error)))
    return pa.concat_tables([_rejects(bad), repeats, _events(unique, span_process)])
