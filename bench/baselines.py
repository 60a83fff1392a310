"""Same-work baselines for the benchmarked stages, run in the benchmark's own process.

- `*_pure_python`: a straightforward implementation with Python loops.
- `*_reference`: a single-core compiled reference (NumPy / Arrow C++ kernels,
  Arrow limited to one thread): the practical limit of one core.

Each writes its output as Parquet, as the Spark stage does.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from causal_spark.generate import GeneratorSpec, allot, process_events
from causal_spark.ingest import KIND_ALIASES

OUTPUT = pa.schema(
    [
        ("trace_id", pa.string()),
        ("process", pa.string()),
        ("seq", pa.int64()),
        ("kind", pa.string()),
        ("msg_id", pa.string()),
        ("peer", pa.string()),
        ("ts", pa.float64()),
        ("size_bytes", pa.int64()),
    ]
)


# --------------------------------------------------------------------------- generate


def generate_pure_python(spec: GeneratorSpec, out: Path) -> int:
    """The generator's model with `random` and lists (one trace at a time)."""
    shares = allot(spec)
    width = len(str(spec.processes - 1))
    rows: list[tuple] = []
    for trace in range(spec.traces):
        rng = random.Random(hash((spec.seed, trace)))
        per_process: dict[int, list[tuple]] = defaultdict(list)
        for p, share in enumerate(shares):
            total = share.sends + share.internals
            sends = set(rng.sample(range(total), share.sends))
            lost = set(rng.sample(range(share.sends * spec.fan_out), share.lost))
            t, copy = 0.0, 0
            for ev in range(total):
                t += rng.expovariate(1.0)
                if ev not in sends:
                    per_process[p].append((t, 0, ev, 0, "internal", None, None, None))
                    continue
                if spec.topology == "broadcast":
                    dsts = [q for q in range(spec.processes) if q != p]
                elif spec.topology == "ring":
                    dsts = [(p + 1) % spec.processes]
                elif spec.topology == "client_server":
                    dsts = [rng.randrange(1, spec.processes)] if p == 0 else [0]
                else:
                    q = rng.randrange(spec.processes - 1)
                    dsts = [q + (q >= p)]
                for dst in dsts:
                    lat = spec.latency
                    if lat.kind == "const":
                        latency = lat.a
                    elif lat.kind == "uniform":
                        latency = rng.uniform(lat.a, lat.b)
                    else:
                        latency = rng.lognormvariate(lat.a, lat.b)
                    msg = f"p{p:0{width}d}-{copy}"
                    size = rng.randrange(1024)
                    per_process[p].append((t, 0, ev, 0, "send", msg, dst, size))
                    if copy not in lost:
                        arrival = t + max(latency, 1e-9)
                        per_process[dst].append((arrival, 1, p, copy, "receive", msg, p, size))
                    copy += 1
        for p, events in per_process.items():
            events.sort(key=lambda e: e[:4])
            seq, last = 0, None
            for e in events:
                if e[:3] != last:
                    seq += 1
                    last = e[:3]
                rows.append(
                    (
                        f"gen{spec.seed}-{trace:05d}",
                        f"p{p:0{width}d}",
                        seq,
                        e[4],
                        e[5],
                        None if e[6] is None else f"p{e[6]:0{width}d}",
                        e[0],
                        e[7],
                    )
                )
    table = pa.Table.from_pylist([dict(zip(OUTPUT.names, r, strict=True)) for r in rows], OUTPUT)
    pq.write_table(table, out)
    return table.num_rows


def generate_reference(spec: GeneratorSpec, out: Path) -> int:
    """The generator's own NumPy kernel for every process in turn, merged with one lexsort."""
    shares = allot(spec)
    width = len(str(spec.processes - 1))
    writer = None
    total = 0
    for trace in range(spec.traces):
        parts = [
            batch
            for p, share in enumerate(shares)
            for batch in process_events(spec, trace, p, share)
        ]
        spont = pa.Table.from_batches(parts)
        cols = {n: spont.column(n).to_numpy() for n in spont.column_names}
        send = cols["is_send"]
        keep = send & ~cols["lost"]
        process = np.concatenate([cols["process"], cols["dst"][keep]])
        t = np.concatenate([cols["t"], cols["arrival"][keep]])
        cls = np.concatenate([np.zeros(len(send), np.int8), np.ones(int(keep.sum()), np.int8)])
        k1 = np.concatenate([cols["ev"], cols["process"][keep].astype(np.int64)])
        k2 = np.concatenate([np.zeros(len(send), np.int64), cols["copy"][keep]])
        order = np.lexsort((k2, k1, cls, t, process))
        process, t, cls, k1, k2 = process[order], t[order], cls[order], k1[order], k2[order]
        new_event = np.ones(len(order), bool)
        new_event[1:] = (
            (process[1:] != process[:-1])
            | (t[1:] != t[:-1])
            | (cls[1:] != cls[:-1])
            | (k1[1:] != k1[:-1])
        )
        new_process = np.ones(len(order), bool)
        new_process[1:] = process[1:] != process[:-1]
        run = np.cumsum(new_event)
        seq = run - np.maximum.accumulate(np.where(new_process, run - 1, 0))
        src_proc = np.concatenate([cols["process"], cols["process"][keep]])[order]
        copy = np.concatenate([cols["copy"], cols["copy"][keep]])[order]
        is_send = np.concatenate([send, np.zeros(int(keep.sum()), bool)])[order]
        dst = np.concatenate([cols["dst"], cols["process"][keep]])[order]
        kind = np.where(cls == 1, "receive", np.where(is_send, "send", "internal"))
        names = np.array([f"p{i:0{width}d}" for i in range(spec.processes)], dtype=object)
        msg = pc.binary_join_element_wise(
            pa.array(names[src_proc]), pa.array(copy.astype(str)), "-"
        )
        msg = pc.if_else(pa.array(kind == "internal"), pa.nulls(len(kind), pa.string()), msg)
        peer = pa.array(np.where(dst >= 0, names[np.maximum(dst, 0)], None))
        sizes = np.concatenate([cols["size"], cols["size"][keep]])[order]
        table = pa.table(
            {
                "trace_id": pa.array(
                    np.full(len(kind), f"gen{spec.seed}-{trace:05d}", dtype=object)
                ),
                "process": pa.array(names[process]),
                "seq": pa.array(seq.astype(np.int64)),
                "kind": pa.array(kind.astype(object)),
                "msg_id": msg,
                "peer": peer,
                "ts": pa.array(t),
                "size_bytes": pa.array(sizes),
            }
        ).cast(OUTPUT)
        if writer is None:
            writer = pq.ParquetWriter(out, OUTPUT)
        writer.write_table(table)
        total += table.num_rows
    if writer is not None:
        writer.close()
    return total


# --------------------------------------------------------------------------- ingest

KINDS = KIND_ALIASES


def ingest_pure_python(source: Path, out: Path) -> int:
    """Typing, duplicate checks, local order and matching with dicts and loops."""
    rows = pq.read_table(source).to_pylist()
    quarantined = 0
    seen_events: dict[tuple, str] = {}
    seen_msgs: set[tuple] = set()
    accepted = []
    for line, row in enumerate(rows, start=1):
        kind = KINDS.get(str(row.get("kind") or "").lower())
        if (
            not row.get("process")
            or kind is None
            or row.get("seq") is None
            or (kind != "internal" and not row.get("msg_id"))
        ):
            quarantined += 1
            continue
        key = (row["trace_id"], row["process"], row["seq"])
        leader = seen_events.get(key)
        if leader is not None and not (leader == "send" and kind == "send"):
            quarantined += 1
            continue
        seen_events.setdefault(key, kind)
        if kind != "internal":
            mkey = (row["trace_id"], row["msg_id"], kind)
            if mkey in seen_msgs:
                quarantined += 1
                continue
            seen_msgs.add(mkey)
        accepted.append((row, kind, line))
    by_process: dict[tuple, set[int]] = defaultdict(set)
    for row, _, _ in accepted:
        by_process[(row["trace_id"], row["process"])].add(row["seq"])
    lseq = {k: {s: i for i, s in enumerate(sorted(v), start=1)} for k, v in by_process.items()}
    events: dict[tuple, dict] = {}
    sends, receives = {}, {}
    for row, kind, line in accepted:
        key = (row["trace_id"], row["process"])
        position = lseq[key][row["seq"]]
        events.setdefault(
            (*key, position),
            {
                "trace_id": key[0],
                "process": key[1],
                "lseq": position,
                "kind": kind,
                "ts": row.get("ts"),
                "line": line,
            },
        )
        if kind == "send":
            sends[(row["trace_id"], row["msg_id"])] = (row["process"], position, row.get("ts"))
        elif kind == "receive":
            receives[(row["trace_id"], row["msg_id"])] = (row["process"], position, row.get("ts"))
    messages = []
    for key in sends.keys() | receives.keys():
        s, r = sends.get(key), receives.get(key)
        messages.append(
            {
                "trace_id": key[0],
                "msg_id": key[1],
                "src": s[0] if s else None,
                "dst": r[0] if r else None,
                "send_lseq": s[1] if s else None,
                "recv_lseq": r[1] if r else None,
                "status": "delivered" if s and r else ("in_flight" if s else "orphan"),
            }
        )
    pq.write_table(pa.Table.from_pylist(list(events.values())), out / "events.parquet")
    pq.write_table(pa.Table.from_pylist(messages), out / "messages.parquet")
    return len(rows) - quarantined


def ingest_reference(source: Path, out: Path) -> int:
    """The same work with Arrow kernels on one thread: sort, run-length lseq, hash join."""
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    table = pq.read_table(source, use_threads=False)
    valid = pc.and_(pc.is_valid(table.column("process")), pc.is_valid(table.column("seq")))
    table = table.filter(valid)
    kind_index = table.schema.get_field_index("kind")
    table = table.set_column(kind_index, "kind", pc.utf8_lower(table.column("kind")))
    keys = [("trace_id", "ascending"), ("process", "ascending"), ("seq", "ascending")]
    order = pc.sort_indices(table, keys)
    table = table.take(order)
    trace = table.column("trace_id").to_numpy(zero_copy_only=False)
    process = table.column("process").to_numpy(zero_copy_only=False)
    seq = table.column("seq").to_numpy()
    new_group = np.ones(len(seq), bool)
    new_group[1:] = (trace[1:] != trace[:-1]) | (process[1:] != process[:-1])
    new_event = new_group.copy()
    new_event[1:] |= seq[1:] != seq[:-1]
    run = np.cumsum(new_event)
    lseq = run - np.maximum.accumulate(np.where(new_group, run - 1, 0))
    table = table.append_column("lseq", pa.array(lseq.astype(np.int64)))
    first = pa.array(new_event)
    events = table.filter(first).select(["trace_id", "process", "lseq", "kind", "ts"])
    sends = (
        table.filter(pc.equal(table.column("kind"), "send"))
        .select(["trace_id", "msg_id", "process", "lseq", "ts"])
        .rename_columns(["trace_id", "msg_id", "src", "send_lseq", "send_ts"])
    )
    receives = (
        table.filter(pc.equal(table.column("kind"), "receive"))
        .select(["trace_id", "msg_id", "process", "lseq", "ts"])
        .rename_columns(["trace_id", "msg_id", "dst", "recv_lseq", "recv_ts"])
    )
    messages = sends.join(
        receives, ["trace_id", "msg_id"], join_type="full outer", use_threads=False
    )
    pq.write_table(events, out / "events.parquet")
    pq.write_table(messages, out / "messages.parquet")
    pa.set_cpu_count(2)
    return table.num_rows
