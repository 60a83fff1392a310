"""A slow, obvious reference of DESIGN §1 over parsed JSON rows (no Spark).

Used as the oracle of the property tests: it follows the text of the design
line by line and shares no code with `causal_spark.ingest`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

ALIASES = {
    "send": "send",
    "snd": "send",
    "receive": "receive",
    "recv": "receive",
    "rcv": "receive",
    "deliver": "receive",
    "internal": "internal",
    "local": "internal",
}


@dataclass
class Reference:
    quarantine: dict[int, str] = field(default_factory=dict)  # line -> reason
    events: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


def _str(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, (dict, list)):
        raise TypeError
    s = str(v).strip()
    return s or None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        raise TypeError
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    raise TypeError


def _seconds(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, (bool, dict, list)):
        raise TypeError
    if isinstance(v, (int, float)):
        if not math.isfinite(v):
            raise TypeError
        return float(v)
    text = str(v).strip()
    try:
        value = float(text)
    except ValueError:
        try:
            instant = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as e:
            raise TypeError from e
        if instant.tzinfo is None:
            instant = instant.replace(tzinfo=UTC)
        return instant.timestamp()
    if not math.isfinite(value):
        raise TypeError
    return value


def reference_ingest(lines: list[str], stem: str) -> Reference:
    ref = Reference()
    file_has_seq = False
    parsed: list[tuple[int, dict[str, Any] | None]] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            obj = None
        if obj is not None and obj.get("seq") is not None:
            file_has_seq = True
        parsed.append((number, obj))

    rows = []
    for number, obj in parsed:
        if obj is None:
            ref.quarantine[number] = "malformed"
            continue
        try:
            trace = _str(obj.get("trace_id")) or stem
            process = _str(obj.get("process"))
            kind_text = _str(obj.get("kind"))
            kind = ALIASES.get(kind_text.lower()) if kind_text else None
            msg = _str(obj.get("msg_id"))
            peer = _str(obj.get("peer"))
            seq = _int(obj["seq"]) if obj.get("seq") is not None else None
            ts = _seconds(obj.get("ts"))
            size = _int(obj["size_bytes"]) if obj.get("size_bytes") is not None else 0
            if size < 0:
                raise TypeError
        except TypeError:
            ref.quarantine[number] = "malformed"
            continue
        if (
            process is None
            or kind is None
            or (file_has_seq and seq is None)
            or (kind != "internal" and msg is None)
        ):
            ref.quarantine[number] = "malformed"
            continue
        rows.append(
            dict(
                line=number,
                trace=trace,
                process=process,
                kind=kind,
                msg=msg if kind != "internal" else None,
                peer=peer,
                seq=seq,
                ts=ts,
                size=size,
            )
        )

    # duplicate_event: first row of a (trace, process, seq) group leads
    groups: dict[tuple[str, str, Any], list[dict[str, Any]]] = {}
    for row in rows:
        key = (
            row["trace"],
            row["process"],
            row["seq"] if row["seq"] is not None else ("line", row["line"]),
        )
        groups.setdefault(key, []).append(row)
    kept = []
    for members in groups.values():
        leader = members[0]
        peers = {leader["peer"]} if leader["peer"] is not None else set()
        kept.append(leader)
        for row in members[1:]:
            if (
                leader["kind"] == "send"
                and row["kind"] == "send"
                and (row["peer"] is None or row["peer"] not in peers)
            ):
                if row["peer"] is not None:
                    peers.add(row["peer"])
                kept.append(row)
            else:
                ref.quarantine[row["line"]] = "duplicate_event"
    kept.sort(key=lambda r: r["line"])

    # duplicate_msg
    seen: set[tuple[str, str, str]] = set()
    unique = []
    for row in kept:
        if row["kind"] in ("send", "receive"):
            key = (row["trace"], row["msg"], row["kind"])
            if key in seen:
                ref.quarantine[row["line"]] = "duplicate_msg"
                continue
            seen.add(key)
        unique.append(row)

    # peer_mismatch
    sends = {(r["trace"], r["msg"]): r for r in unique if r["kind"] == "send"}
    accepted = []
    for row in unique:
        if row["kind"] == "receive":
            send = sends.get((row["trace"], row["msg"]))
            if send is not None and (
                (send["peer"] is not None and send["peer"] != row["process"])
                or (row["peer"] is not None and row["peer"] != send["process"])
            ):
                ref.quarantine[row["line"]] = "peer_mismatch"
                continue
        accepted.append(row)

    # events and lseq
    by_process: dict[tuple[str, str], dict[Any, list[dict[str, Any]]]] = {}
    for row in accepted:
        key = row["seq"] if row["seq"] is not None else row["line"]
        by_process.setdefault((row["trace"], row["process"]), {}).setdefault(key, []).append(row)
    lseq_of: dict[int, int] = {}
    for (trace, process), evs in by_process.items():
        for lseq, key in enumerate(sorted(evs), start=1):
            members = evs[key]
            first = members[0]
            ref.events[(trace, process, lseq)] = dict(
                kind=first["kind"],
                ts=first["ts"],
                n_msgs=sum(1 for m in members if m["kind"] == "send"),
                line=first["line"],
            )
            for m in members:
                lseq_of[m["line"]] = lseq
    receives = {(r["trace"], r["msg"]): r for r in accepted if r["kind"] == "receive"}
    sends = {(r["trace"], r["msg"]): r for r in accepted if r["kind"] == "send"}
    for key in set(sends) | set(receives):
        s, r = sends.get(key), receives.get(key)
        ref.messages[key] = dict(
            src=s["process"] if s else r["peer"],
            dst=r["process"] if r else s["peer"],
            send_lseq=lseq_of[s["line"]] if s else None,
            recv_lseq=lseq_of[r["line"]] if r else None,
            status="delivered" if s and r else ("in_flight" if s else "orphan"),
        )
    return ref
