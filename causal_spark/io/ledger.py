"""The `runs` table as the warehouse's commit record (docs/scheduling.md).

A run commits its tables one Delta transaction each, then appends its `runs` row:
that row is the commit. A table version that no `runs` row names is not committed;
readers that need a consistent view read the versions a row names (`View`), and the
next writing run repairs what a dead run left (`causal_spark.app.repair`).

The ledger is read and written with delta-rs and pyarrow only (one small table),
so `runs`, repair and the lock's checks need no Spark session.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from causal_spark import tables
from causal_spark.io import delta
from causal_spark.io.stats import file_stats

NEW_TABLE = -1  # the base version of a table that did not exist when the run began


class WarehouseError(ValueError):
    """A table is missing, unreadable by this backend, or a commit was refused."""


class UnknownRunError(WarehouseError):
    """A run id given to --as-of, --from or --to names no committed run."""


class ConcurrentWriterError(WarehouseError):
    """Another writer committed to a table this run was committing (no lock held?)."""


@dataclass(frozen=True)
class View:
    """A committed state of the warehouse: the versions one `runs` row names."""

    run_id: str | None
    versions: Mapping[str, int] = field(default_factory=dict)
    lineage: Mapping[str, str] = field(default_factory=dict)


EMPTY = View(None)


def _pairs(value: object) -> dict[str, Any]:
    """A map column as pyarrow returns it (list of pairs) or a dict, as a dict."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    pairs: list[tuple[str, Any]] = list(value)  # type: ignore[call-overload]
    return dict(pairs)


class Ledger:
    """The `runs` table of one warehouse."""

    def __init__(self, root: str):
        problem = delta.unsupported_path(root)
        if problem is not None:
            raise WarehouseError(f"warehouse {problem}")
        self.root = root
        self.path = os.path.join(root, tables.RUNS)

    def exists(self) -> bool:
        return delta.is_table(self.path)

    def rows(self) -> list[dict[str, Any]]:
        """Every committed run, oldest first (by end, then start)."""
        version = delta.latest_version(self.path)
        if version is None:
            return []
        parts = [pq.read_table(f.path) for f in delta.data_files(self.path, version)]
        if not parts:
            return []
        table = pa.concat_tables(parts, promote_options="permissive")
        rows: list[dict[str, Any]] = table.to_pylist()
        for row in rows:
            for key in ("table_versions", "lineage", "counts", "stage_seconds"):
                row[key] = _pairs(row.get(key))
            row.setdefault("written", [])
            row.setdefault("skipped", None)  # recorded since issue 18: older rows lack it
        rows.sort(key=lambda r: (r["end"], r["start"], r["id"]))
        return rows

    def last(self) -> dict[str, Any] | None:
        rows = self.rows()
        return rows[-1] if rows else None

    def resolve(self, ref: str, rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The run `ref` names: its id or a unique prefix of it."""
        rows = self.rows() if rows is None else rows
        exact = [r for r in rows if r["id"] == ref]
        matches = exact or [r for r in rows if str(r["id"]).startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            known = ", ".join(r["id"] for r in rows[-5:]) or "none"
            raise UnknownRunError(
                f"no committed run '{ref}' in {self.root} (latest runs: {known}; "
                "`causal-spark runs` lists them)"
            )
        raise UnknownRunError(
            f"run '{ref}' is ambiguous in {self.root}: " + ", ".join(r["id"] for r in matches[:5])
        )

    def view(self, as_of: str | None = None) -> View:
        """The versions the last committed run names (or run `as_of`)."""
        rows = self.rows()
        if as_of is None:
            if not rows:
                return EMPTY
            row = rows[-1]
        else:
            row = self.resolve(as_of, rows)
        return View(row["id"], dict(row["table_versions"]), dict(row["lineage"]))

    def append(self, row: Mapping[str, Any]) -> int:
        """Commit one `runs` row (the commit point of its run); return the runs version."""
        run_id = str(row["id"])
        schema = tables.arrow_schema(tables.RUNS)
        record = {name: _arrow_value(row.get(name)) for name in schema.names}
        table = pa.Table.from_pylist([record], schema=schema)
        folder = os.path.join(self.path, "data", run_id)
        os.makedirs(folder, exist_ok=True)
        file = os.path.join(folder, f"part-driver-{uuid.uuid4().hex}.parquet")
        pq.write_table(table, file, store_schema=False)
        return commit_files(self.path, tables.RUNS, [file], run_id, mode="append")


def _arrow_value(value: object) -> object:
    """Python values as pyarrow's `from_pylist` takes them (maps as lists of pairs)."""
    if isinstance(value, Mapping):
        return list(value.items())
    return value


def _add_action(table_path: str, file: str, schema: pa.Schema) -> Any:
    from deltalake.transaction import AddAction

    stat = os.stat(file)
    return AddAction(
        path=os.path.relpath(file, table_path),
        size=stat.st_size,
        partition_values={},
        modification_time=int(stat.st_mtime * 1000),
        data_change=True,
        stats=json.dumps(file_stats(file, schema), allow_nan=False),
    )


def commit_files(
    table_path: str,
    table: str,
    files: list[str],
    run_id: str,
    mode: str,
    remove: list[delta.DataFile] | None = None,
    base: int | None = None,
) -> int:
    """Commit `files` to the table at `table_path` as one Delta transaction; return its
    version.

    mode: `overwrite` (the files replace every row), `append`, or `replace` (append the
    files and remove the `remove` files, in the same transaction). The commit carries
    `run_id`. `base` is the version the run started from (`NEW_TABLE`: the table did
    not exist): if the table is elsewhere now, or the version the commit produced does
    not carry `run_id`, another writer committed in between and `ConcurrentWriterError`
    is raised (two first commits of one table never both succeed).
    """
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema
    from deltalake.transaction import (
        CommitProperties,
        RemoveAction,
        create_table_with_add_actions,
    )

    schema = tables.arrow_schema(table)
    adds = [_add_action(table_path, f, schema) for f in files]
    # no retries: delta-rs would otherwise commit a lost race at the next version,
    # putting this run's rows on top of the other writer's (two first commits)
    properties = CommitProperties(custom_metadata={delta.RUN_ID_KEY: run_id}, max_commit_retries=0)
    uri = delta.table_uri(table_path)
    before = delta.latest_version(table_path)
    if base is not None and before != (None if base == NEW_TABLE else base):
        began = "did not exist" if base == NEW_TABLE else f"was at version {base}"
        raise ConcurrentWriterError(
            f"table '{table}' is at version {before} but {began} when run {run_id} began: "
            "another writer committed; this run is not committed (the next run repairs)"
        )
    if before is None:
        create_table_with_add_actions(
            uri,
            DeltaSchema.from_arrow(schema),
            adds,
            mode="error",
            name=table,
            commit_properties=properties,
        )
    else:
        now = int(datetime.now().timestamp() * 1000)
        removes = [
            RemoveAction(path=f.relative, data_change=True, deletion_timestamp=now)
            for f in remove or []
        ]
        DeltaTable(uri).create_write_transaction(
            [*adds, *removes],
            mode="overwrite" if mode == "overwrite" else "append",
            schema=schema,
            commit_properties=properties,
        )
    expected = 0 if before is None else before + 1
    if delta.commit_run_id(table_path, expected) != run_id:
        raise ConcurrentWriterError(
            f"table '{table}': version {expected} was committed by another writer while "
            f"run {run_id} committed; this run is not committed (the next run repairs)"
        )
    return expected
