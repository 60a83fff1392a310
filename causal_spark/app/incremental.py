"""Input files over time: fingerprints, and what an incremental audit reads (DESIGN §6).

Every ingesting run records each input file in `runs.inputs[].files`: its path (as
the tables' `source` column names it), size, modification time, a hash of its first
and last blocks, and the traces it holds rows of. An incremental audit compares the
files it finds with those of the last committed run that recorded files:

- a file is *new* or *changed* when its fingerprint is not among them; *deleted*
  when it is gone;
- the traces it re-analyses are those with a row in a new or changed file, plus
  those the old version of a changed file held, plus (with `--prune`) those a
  deleted file held;
- each such trace is analysed from all its rows: the new and changed files are read
  whole, and the unchanged files that hold rows of those traces are read for those
  traces' rows only (`read` in the record says which were read).

The run then replaces those traces' rows in every table (`RunTransaction`'s
`replace` mode); a trace whose rows are all gone has its rows removed. A full audit
records the same fingerprints, so the next incremental run can start from it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from causal_spark import columns as C
from causal_spark.io.ledger import WarehouseError
from causal_spark.sources import DEFAULT_TRACE, InputSet, discover_inputs, read_raw_rows

BLOCK = 64 * 1024
NEW, CHANGED, UNCHANGED, DELETED = "new", "changed", "unchanged", "deleted"


class IncrementalInputError(WarehouseError):
    """An incremental audit cannot re-analyse a trace as DESIGN §6 asks."""


def fingerprint_hash(path: str) -> str:
    """sha256 of the file's first and last `BLOCK` bytes (and its size)."""
    digest = hashlib.sha256()
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        digest.update(handle.read(BLOCK))
        if size > BLOCK:
            handle.seek(max(size - BLOCK, BLOCK))
            digest.update(handle.read(BLOCK))
    digest.update(str(size).encode())
    return digest.hexdigest()


def source_name(given: InputSet, file: str) -> str:
    """The name the tables' `source` column gives `file` of input `given` (as given by
    the user, relative to the input folder: `sources._as_given`)."""
    root = Path(given.path).resolve()
    base = root if root.is_dir() else root.parent
    shown = given.path.rstrip("/") if root.is_dir() else str(Path(given.path).parent)
    relative = os.path.relpath(file, base)
    return relative if shown in ("", ".") else f"{shown}/{relative}"


def trace_of_raw() -> Column:
    """The trace a raw row belongs to (as `ingest.type_rows` names it)."""
    given = F.trim(F.col(C.TRACE_ID))
    return F.coalesce(F.when(given != "", given), F.col(DEFAULT_TRACE))


@dataclass(frozen=True)
class Incremental:
    """An incremental audit of `paths` (`--incremental`), pruning gone files' rows or not."""

    paths: tuple[str, ...]
    prune: bool = False


@dataclass
class FileRecord:
    path: str
    size: int
    mtime_ns: int
    hash: str
    status: str = NEW
    read: bool = True
    traces: list[str] | None = None
    origin: str = ""  # the input path (as given) the file was found under

    def key(self) -> tuple[str, int, int, str]:
        return (self.path, self.size, self.mtime_ns, self.hash)

    def as_row(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "hash": self.hash,
            "status": self.status,
            "read": self.read,
            "traces": sorted(self.traces) if self.traces is not None else None,
        }


def file_records(inputs: Sequence[InputSet]) -> dict[str, list[FileRecord]]:
    """Per input path, a record of each of its files (fingerprints; traces unknown)."""
    records: dict[str, list[FileRecord]] = {}
    for given in inputs:
        for file in given.files:
            stat = os.stat(file)
            records.setdefault(given.path, []).append(
                FileRecord(
                    path=source_name(given, file),
                    size=stat.st_size,
                    mtime_ns=stat.st_mtime_ns,
                    hash=fingerprint_hash(file),
                    origin=given.path,
                )
            )
    return records


def previous_files(rows: Sequence[dict[str, Any]]) -> dict[str, FileRecord]:
    """The files the last committed run that recorded files knew, by path."""
    for row in reversed(rows):
        recorded = [
            (given["path"], f)
            for given in row.get("inputs") or []
            for f in given.get("files") or []
        ]
        if recorded:
            return {
                f["path"]: FileRecord(
                    path=f["path"],
                    size=f["size"],
                    mtime_ns=f["mtime_ns"],
                    hash=f["hash"],
                    status=f["status"],
                    read=f["read"],
                    traces=list(f["traces"]) if f["traces"] is not None else None,
                    origin=origin,
                )
                for origin, f in recorded
                if f["status"] != DELETED
            }
    return {}


@dataclass
class Selection:
    """What one ingest reads: inputs (a subset of files), the traces kept, the records."""

    inputs: list[InputSet]
    traces: list[str] | None  # None: every trace (a full audit)
    records: dict[str, list[FileRecord]] = field(default_factory=dict)
    deleted: list[FileRecord] = field(default_factory=list)


def _subset(given: InputSet, files: Sequence[str]) -> InputSet:
    return replace(given, files=tuple(files), n_bytes=sum(os.path.getsize(f) for f in files))


def record_traces(
    raw: DataFrame, records: dict[str, list[FileRecord]], only: set[str] | None = None
) -> None:
    """Fill the traces of the records of the files `raw` read (one aggregate)."""
    pairs = raw.select(F.col(C.SOURCE), trace_of_raw().alias("trace")).distinct().collect()
    by_file: dict[str, set[str]] = {}
    for row in pairs:
        by_file.setdefault(row[C.SOURCE], set()).add(row["trace"])
    for recorded in records.values():
        for record in recorded:
            if (only is None or record.path in only) and record.read:
                record.traces = sorted(by_file.get(record.path, set()))


def select_full(inputs: list[InputSet]) -> Selection:
    return Selection(inputs=inputs, traces=None, records=file_records(inputs))


def records_of(selection: Selection) -> dict[str, list[dict[str, Any]]]:
    """`runs.inputs[].files` per input path: every file found, and the deleted ones."""
    rows: dict[str, list[dict[str, Any]]] = {
        origin: [r.as_row() for r in recorded] for origin, recorded in selection.records.items()
    }
    for record in selection.deleted:
        origin = record.origin if record.origin in rows else next(iter(rows), record.origin)
        rows.setdefault(origin, []).append(record.as_row())
    return rows


def traces_by_file(spark: Any, inputs: list[InputSet]) -> dict[str, set[str]]:
    """The traces each of the files of `inputs` holds rows of (by source name)."""
    raw = read_raw_rows(spark, inputs)
    pairs = raw.select(F.col(C.SOURCE), trace_of_raw().alias("trace")).distinct().collect()
    found: dict[str, set[str]] = {}
    for row in pairs:
        found.setdefault(row[C.SOURCE], set()).add(row["trace"])
    return found


def select_incremental(
    inputs: list[InputSet],
    previous: dict[str, FileRecord],
    traces_of: Callable[[list[InputSet]], dict[str, set[str]]],
    prune: bool,
) -> Selection:
    """The files and traces an incremental audit reads (see the module doc).

    `traces_of(inputs)` reads the given files and returns the traces of each (by
    source name): it is called once, on the new and changed files only.
    """
    records = file_records(inputs)
    current = {r.path: r for recorded in records.values() for r in recorded}
    fresh: list[FileRecord] = []
    for record in current.values():
        before = previous.get(record.path)
        if before is None:
            record.status = NEW
        elif before.key() == record.key():
            record.status, record.traces = UNCHANGED, before.traces
        else:
            record.status = CHANGED
        if record.status != UNCHANGED:
            fresh.append(record)
    deleted = [
        replace(r, status=DELETED, read=False) for p, r in previous.items() if p not in current
    ]
    by_path = {source_name(given, file): (given, file) for given in inputs for file in given.files}
    fresh_inputs = _group(inputs, [by_path[r.path] for r in fresh])
    found = traces_of(fresh_inputs) if fresh_inputs else {}
    touched: set[str] = set()
    for record in fresh:
        record.traces = sorted(found.get(record.path, set()))
        touched.update(record.traces)
        before = previous.get(record.path)
        if before is not None and before.traces:
            touched.update(before.traces)  # rows the old version held
    gone_traces = {t for r in deleted for t in r.traces or []}
    if prune:
        touched.update(gone_traces)
    else:
        lost = sorted(touched & gone_traces)
        if lost:
            raise IncrementalInputError(
                f"trace(s) {lost[:5]} have new rows but some of their earlier rows were in "
                f"file(s) that are gone ({', '.join(r.path for r in deleted[:3])}): restore "
                "them, or pass --prune to re-analyse those traces without them"
            )
    context = []
    for record in current.values():
        if record.status == UNCHANGED:
            holds = record.traces is None or bool(touched & set(record.traces))
            record.read = holds
            if holds:
                context.append(by_path[record.path])
    readable = [by_path[r.path] for r in fresh if r.traces]  # an empty file adds no row
    selected = _group(inputs, readable + context)
    return Selection(inputs=selected, traces=sorted(touched), records=records, deleted=deleted)


def _group(inputs: Sequence[InputSet], chosen: Sequence[tuple[InputSet, str]]) -> list[InputSet]:
    """The inputs restricted to the chosen files (inputs without any are left out)."""
    keep: dict[tuple[str, str], list[str]] = {}
    for given, file in chosen:
        keep.setdefault((given.path, given.format), []).append(file)
    subsets = []
    for given in inputs:
        files = keep.get((given.path, given.format))
        if files:
            subsets.append(_subset(given, [f for f in given.files if f in set(files)]))
    return subsets


def read_selection(spark: Any, selection: Selection) -> DataFrame:
    """The raw rows of the selection: the chosen files, only the chosen traces' rows."""
    raw = read_raw_rows(spark, selection.inputs)
    if selection.traces is None:
        return raw
    wanted = spark.createDataFrame([(t,) for t in selection.traces], "__cs_trace string")
    return raw.join(F.broadcast(wanted), trace_of_raw() == F.col("__cs_trace"), "left_semi")


def discover(paths: Sequence[str], settings: Any) -> list[InputSet]:
    """The input files under `paths` (`sources.discover_inputs`)."""
    return discover_inputs(paths, settings)
