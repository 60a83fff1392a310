"""Repair at the start of a writing run: what a dead run left, undone or finished.

docs/scheduling.md: a table version that no `runs` row names is not committed. Before a run
does anything else (under the writer lock), `repair`:

- rolls forward a run that committed every table it intended (its intent file in
  `_causal/pending/` lists them) but died before its `runs` row: the row is written
  from the intent, with the versions its commits carry;
- otherwise rolls every table back to the version the last committed run names
  (a Delta restore, a new version with that content), or removes a table that no
  committed run names at all;
- removes staged files that no version of a table's log names (a killed run's), and
  scratch folders;

and appends one `runs` row (command `repair`) saying what it did. Versions written
by anything but a causal-spark run are left alone and reported as an error.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from causal_spark import tables
from causal_spark.io import delta
from causal_spark.io.ledger import Ledger, View, WarehouseError

log = logging.getLogger(__name__)
PENDING = os.path.join("_causal", "pending")


@dataclass
class RepairReport:
    """What a repair did (empty: nothing to do)."""

    rolled_back: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    rolled_forward: str | None = None
    removed_files: int = 0
    run_id: str | None = None

    def __bool__(self) -> bool:
        return bool(self.rolled_back or self.rolled_forward or self.removed_files)

    def lines(self) -> list[str]:
        out: list[str] = []
        if self.rolled_forward:
            out.append(
                f"repaired: run {self.rolled_forward} had committed every table but not its "
                "runs row; rolled forward (its row written)"
            )
        for table, (found, kept) in sorted(self.rolled_back.items()):
            target = f"version {kept}" if kept is not None else "no table (never committed)"
            out.append(
                f"repaired: {table} rolled back from uncommitted version {found} to {target}"
            )
        if self.removed_files:
            out.append(f"repaired: removed {self.removed_files} staged file(s) of dead runs")
        return out

    def note(self) -> str:
        return "; ".join(line.removeprefix("repaired: ") for line in self.lines())


def _intents(root: str) -> list[dict[str, Any]]:
    folder = os.path.join(root, PENDING)
    if not os.path.isdir(folder):
        return []
    found = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not name.endswith(".json"):
            os.remove(path)  # a half-written intent: its run never committed a table
            continue
        with open(path, encoding="utf-8") as handle:
            intent = json.load(handle)
        intent["_file"] = path
        found.append(intent)
    return found


def _table_folders(root: str) -> list[str]:
    return [t for t in tables.TABLES if t != tables.RUNS and delta.is_table(os.path.join(root, t))]


def _uncommitted(root: str, view: View) -> dict[str, list[int]]:
    """Per table, the versions after the one the view names that change data."""
    found: dict[str, list[int]] = {}
    for table in _table_folders(root):
        path = os.path.join(root, table)
        named = view.versions.get(table)
        later = [v for v in delta.commit_versions(path) if named is None or v > named]
        later = [v for v in later if delta.changes_data(path, v) or named is None]
        if later:
            for version in later:
                if delta.commit_run_id(path, version) is None and delta.changes_data(path, version):
                    raise WarehouseError(
                        f"table '{table}' has version {version} that no causal-spark run "
                        f"wrote (another tool wrote {path}?); refusing to repair it"
                    )
            found[table] = later
    return found


def _roll_forward(
    root: str, ledger: Ledger, intent: dict[str, Any], pending: dict[str, list[int]]
) -> dict[str, Any] | None:
    """The runs row of `intent`'s run if it committed every table it intended (a version
    of each, after the committed one, carries its run id) and every uncommitted version
    is its own; else None."""
    run_id = intent["run_id"]
    view = ledger.view()
    versions: dict[str, int] = {}
    for table in intent["tables"]:
        path = os.path.join(root, table)
        named = view.versions.get(table)
        later = [v for v in delta.commit_versions(path) if named is None or v > named]
        mine = [v for v in later if delta.commit_run_id(path, v) == run_id]
        if len(mine) != 1:
            return None
        versions[table] = mine[0]
    for table, found in pending.items():
        path = os.path.join(root, table)
        if table not in versions or any(delta.commit_run_id(path, v) != run_id for v in found):
            return None
    row = dict(intent["row"])
    full = dict(view.versions)
    full.update(versions)
    row["table_versions"] = full
    for key in ("start", "end"):
        row[key] = datetime.fromisoformat(str(row[key]))
    row["written"] = sorted(versions)
    row["note"] = "rolled forward by the next run's repair: its tables were all committed"
    return row


def repair(root: str, repair_id: str, config_json: str) -> RepairReport:
    """Bring warehouse `root` back to its last committed run (see the module doc).

    Must run under the writer lock. Appends a `runs` row when it changed anything.
    """
    from deltalake import DeltaTable
    from deltalake.transaction import CommitProperties

    ledger = Ledger(root)
    report = RepairReport(run_id=repair_id)
    committed_ids = {r["id"] for r in ledger.rows()}
    intents = _intents(root)
    for intent in intents:
        if intent["run_id"] in committed_ids:
            os.remove(intent["_file"])  # its runs row was written: nothing to finish
    intents = [i for i in intents if i["run_id"] not in committed_ids]
    view = ledger.view()
    pending = _uncommitted(root, view)
    if len(intents) == 1:
        row = _roll_forward(root, ledger, intents[0], pending)
        if row is not None:
            ledger.append(row)
            report.rolled_forward = str(row["id"])
            pending = {}
            view = ledger.view()
    restored: dict[str, int] = {}
    for table, versions in sorted(pending.items()):
        path = os.path.join(root, table)
        named = view.versions.get(table)
        report.rolled_back[table] = (versions[-1], named)
        if named is None:
            shutil.rmtree(path)  # no committed run names this table: nothing to keep
            continue
        DeltaTable(delta.table_uri(path)).restore(
            named,
            commit_properties=CommitProperties(custom_metadata={delta.RUN_ID_KEY: repair_id}),
        )
        restored[table] = delta.latest_version(path) or 0
    for intent in intents:
        os.remove(intent["_file"])
    report.removed_files = _remove_dead_staging(root)
    if report.rolled_back or report.removed_files:
        view_versions = dict(view.versions)
        view_versions.update(restored)
        now = datetime.now(UTC)
        ledger.append(
            {
                "id": repair_id,
                "command": "repair",
                "start": now,
                "end": now,
                "inputs": [],
                "config": config_json,
                "table_versions": view_versions,
                "counts": {
                    "rolled_back": len(report.rolled_back),
                    "removed_files": report.removed_files,
                },
                "written": sorted(restored),
                "lineage": dict(view.lineage),
                "stage_seconds": {},
                "mode": None,
                "note": report.note(),
            }
        )
    for line in report.lines():
        log.warning(line)
    return report


def _remove_dead_staging(root: str) -> int:
    """Remove staged files no log names, and scratch folders (no run is live: we hold
    the lock). Returns how many files went."""
    removed = 0
    staging = os.path.join(root, "_staging")
    if os.path.isdir(staging):
        removed += sum(len(files) for _, _, files in os.walk(staging))
        shutil.rmtree(staging)
    for table in tables.TABLES:
        data = os.path.join(root, table, "data")
        if not os.path.isdir(data):
            continue
        named = delta.referenced_files(os.path.join(root, table))
        for parent, _, names in os.walk(data, topdown=False):
            for name in names:
                file = os.path.join(parent, name)
                if file not in named:
                    os.remove(file)
                    removed += 1
            if parent != data and not os.listdir(parent):
                os.rmdir(parent)
        if not os.listdir(data):
            os.rmdir(data)
        table_folder = os.path.join(root, table)
        if not os.listdir(table_folder):
            os.rmdir(table_folder)
    return removed
