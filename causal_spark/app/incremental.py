"""Input files over time: fingerprints, and what an incremental audit reads (docs/scheduling.md).

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

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from causal_spark.config import IngestSettings
from causal_spark.ingest import TRACE_OF, file_table, trace_ids
from causal_spark.io.ledger import WarehouseError
from causal_spark.io.raw import RawRead
from causal_spark.io.sources import (
    FILE_ID,
    InputFile,
    Inputs,
    discover_inputs,
    only_files,
    read_raw,
    read_raw_rows,
)

NEW, CHANGED, UNCHANGED, DELETED = "new", "changed", "unchanged", "deleted"


class IncrementalInputError(WarehouseError):
    """An incremental audit cannot re-analyse a trace as docs/scheduling.md asks."""


@dataclass(frozen=True)
class Incremental:
    """An incremental audit of `paths` (`--incremental`), pruning gone files' rows or not."""

    paths: tuple[str, ...]
    prune: bool = False
    reader: str = "auto"  # --input-format


@dataclass
class FileRecord:
    path: str  # as the tables' `source` column names it
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


def file_records(inputs: Inputs) -> dict[str, list[FileRecord]]:
    """Per input path, a record of each of its files (fingerprints; traces unknown)."""
    records: dict[str, list[FileRecord]] = {}
    for given in inputs.sets:
        for file in given.files:
            records.setdefault(given.path, []).append(
                FileRecord(
                    path=file.shown,
                    size=file.size,
                    mtime_ns=file.mtime_ns,
                    hash=file.fingerprint,
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

    inputs: Inputs
    traces: list[str] | None  # None: every trace (a full audit)
    records: dict[str, list[FileRecord]] = field(default_factory=dict)
    deleted: list[FileRecord] = field(default_factory=list)


def _traces_per_file(spark: SparkSession, inputs: Inputs, raw: DataFrame) -> dict[str, set[str]]:
    """The traces each file of `inputs` holds rows of (by the name `source` gives it)."""
    shown = {f.file_id: f.shown for f in inputs.files}
    pairs = trace_ids(raw, file_table(spark, inputs)).select(FILE_ID, TRACE_OF).distinct()
    found: dict[str, set[str]] = {}
    for row in pairs.collect():
        found.setdefault(shown[row[FILE_ID]], set()).add(row[TRACE_OF])
    return found


def fill_traces(
    records: dict[str, list[FileRecord]], by_file: Mapping[str, Collection[str]]
) -> None:
    """Fill the traces of the records of the files read (`by_file`: by source name)."""
    for recorded in records.values():
        for record in recorded:
            if record.read:
                record.traces = sorted(by_file.get(record.path, set()))


def select_full(inputs: Inputs) -> Selection:
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


def traces_by_file(
    spark: SparkSession, inputs: Inputs, options: object = None
) -> dict[str, set[str]]:
    """The traces each of the files of `inputs` holds rows of (by source name)."""
    return _traces_per_file(spark, inputs, read_raw_rows(spark, inputs, options))


def select_incremental(
    inputs: Inputs,
    previous: dict[str, FileRecord],
    traces_of: Callable[[Inputs], dict[str, set[str]]],
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
    by_path: dict[str, InputFile] = {f.shown: f for f in inputs.files}
    fresh_inputs = only_files(inputs, [by_path[r.path].file_id for r in fresh])
    found = traces_of(fresh_inputs) if fresh_inputs.files else {}
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
                context.append(by_path[record.path].file_id)
    readable = [by_path[r.path].file_id for r in fresh if r.traces]  # an empty file adds no row
    selected = only_files(inputs, readable + context)
    return Selection(inputs=selected, traces=sorted(touched), records=records, deleted=deleted)


def read_selection(
    spark: SparkSession, selection: Selection, options: object = None, text: bool = True
) -> RawRead:
    """The raw rows of the selection: the chosen files, only the chosen traces' rows
    (`options`: the readers' options, the `ingest` settings; `text`: as `read_raw_rows`),
    and the readers' plan of them (none when only some traces' rows are kept)."""
    read = read_raw(spark, selection.inputs, options, text)
    if selection.traces is None:
        return read
    raw = read.rows
    wanted = spark.createDataFrame([(t,) for t in selection.traces], "__cs_trace string")
    named = trace_ids(raw, file_table(spark, selection.inputs))
    kept = named.join(F.broadcast(wanted), F.col(TRACE_OF) == F.col("__cs_trace"), "left_semi")
    return RawRead(kept.select(*raw.columns))


def discover(
    paths: Sequence[str],
    settings: IngestSettings,
    exclude: Sequence[str] = (),
    reader: str = "auto",
) -> Inputs:
    """The input files under `paths` (`io.sources.discover_inputs`)."""
    return discover_inputs(paths, settings, exclude=exclude, reader=reader)
