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
    """DESIGN §1 on one file of JSON lines whose default trace id is `stem`."""
    ref = reference_ingest_files([(lines, stem)])
    return Reference(
        quarantine={line: reason for (_, line), reason in ref.quarantine.items()},
        events=ref.events,
        messages=ref.messages,
    )


@dataclass
class FilesReference:
    quarantine: dict[tuple[int, int], str] = field(default_factory=dict)  # (file, line) -> reason
    events: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


def reference_ingest_files(files: list[tuple[list[str], str]]) -> FilesReference:
    """DESIGN §1 on several files, in the order given: (lines, default trace id) each.

    "First" and file order are (file index, line); a process's rows without `seq` follow
    its rows with one, in file order."""
    ref = FilesReference()
    rows = []
    for index, (lines, default_trace) in enumerate(files):
        rows.extend(_typed_rows(ref, index, lines, default_trace))

    # duplicate_event: first row of a (trace, process, seq) group leads
    groups: dict[tuple[str, str, Any], list[dict[str, Any]]] = {}
    for row in rows:
        key = (
            row["trace"],
            row["process"],
            row["seq"] if row["seq"] is not None else ("at", row["at"]),
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
                ref.quarantine[row["at"]] = "duplicate_event"
    kept.sort(key=lambda r: r["at"])

    # duplicate_msg
    seen: set[tuple[str, str, str]] = set()
    unique = []
    for row in kept:
        if row["kind"] in ("send", "receive"):
            key = (row["trace"], row["msg"], row["kind"])
            if key in seen:
                ref.quarantine[row["at"]] = "duplicate_msg"
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
                ref.quarantine[row["at"]] = "peer_mismatch"
                continue
        accepted.append(row)

    # at most one copy per destination, once sends and receives are matched: a copy without
    # a peer goes where its receive is; a second copy to one destination is a duplicate_event
    # (its send row and its receive row)
    receives = {(r["trace"], r["msg"]): r for r in accepted if r["kind"] == "receive"}
    destinations: dict[tuple[str, str, Any, str], dict[str, Any]] = {}
    second: set[tuple[int, int]] = set()
    for row in accepted:
        if row["kind"] != "send":
            continue
        receive = receives.get((row["trace"], row["msg"]))
        dst = receive["process"] if receive is not None else row["peer"]
        if dst is None:
            continue
        key = (row["trace"], row["process"], row["seq"], dst)
        if row["seq"] is not None and key in destinations:
            second.add(row["at"])
            if receive is not None:
                second.add(receive["at"])
        else:
            destinations[key] = row
    for at in second:
        ref.quarantine[at] = "duplicate_event"
    accepted = [r for r in accepted if r["at"] not in second]

    # events and lseq: rows with a seq by seq, then the others in file order
    by_process: dict[tuple[str, str], dict[Any, list[dict[str, Any]]]] = {}
    for row in accepted:
        key = (0, row["seq"]) if row["seq"] is not None else (1, row["at"])
        by_process.setdefault((row["trace"], row["process"]), {}).setdefault(key, []).append(row)
    lseq_of: dict[tuple[int, int], int] = {}
    for (trace, process), evs in by_process.items():
        for lseq, key in enumerate(sorted(evs), start=1):
            members = sorted(evs[key], key=lambda r: r["at"])
            first = members[0]
            ref.events[(trace, process, lseq)] = dict(
                kind=first["kind"],
                ts=first["ts"],
                n_msgs=sum(1 for m in members if m["kind"] == "send"),
                line=first["at"][1],
                file=first["at"][0],
            )
            for m in members:
                lseq_of[m["at"]] = lseq
    receives = {(r["trace"], r["msg"]): r for r in accepted if r["kind"] == "receive"}
    sends = {(r["trace"], r["msg"]): r for r in accepted if r["kind"] == "send"}
    for key in set(sends) | set(receives):
        s, r = sends.get(key), receives.get(key)
        ref.messages[key] = dict(
            src=s["process"] if s else r["peer"],
            dst=r["process"] if r else s["peer"],
            send_lseq=lseq_of[s["at"]] if s else None,
            recv_lseq=lseq_of[r["at"]] if r else None,
            status="delivered" if s and r else ("in_flight" if s else "orphan"),
        )
    return ref


def _typed_rows(
    ref: FilesReference, index: int, lines: list[str], default_trace: str
) -> list[dict[str, Any]]:
    """The rows of one file that pass the row-local rules (the others are quarantined)."""
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
        at = (index, number)
        if obj is None:
            ref.quarantine[at] = "malformed"
            continue
        try:
            trace = _str(obj.get("trace_id")) or default_trace
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
            ref.quarantine[at] = "malformed"
            continue
        if (
            process is None
            or kind is None
            or (file_has_seq and seq is None)
            or (kind != "internal" and msg is None)
        ):
            ref.quarantine[at] = "malformed"
            continue
        rows.append(
            dict(
                at=at,
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
    return rows
