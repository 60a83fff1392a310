"""`vacuum --retain-days N`: keep the history asked for, and no more.

Every table of the last committed view is vacuumed by delta-rs with a retention of N
days: a data file goes when the version that removed it is older than that (so every
run committed in the last N days stays readable with `--as-of`), and so do files no
version names (a dead run's). Older runs stay in the ledger, but reading them fails
with an error that says their files were vacuumed. Vacuum is a writer: it holds the
lock, repairs first, and records a `runs` row naming the versions it leaves (delta-rs
logs its own commits).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from causal_spark.app.repair import repair
from causal_spark.app.runs import new_run_id
from causal_spark.io import delta
from causal_spark.io.ledger import Ledger


def vacuum(root: str, retain_days: float, config_json: str) -> list[str]:
    """Vacuum warehouse `root` (under the writer lock); return the lines to print."""
    from deltalake import DeltaTable
    from deltalake.transaction import CommitProperties

    start = datetime.now(UTC)
    run_id = new_run_id(start)
    lines = repair(root, f"{run_id}-repair", config_json).lines()
    ledger = Ledger(root)
    view = ledger.view()
    if view.run_id is None:
        return [*lines, f"vacuum: no committed run in {root}; nothing to do"]
    hours = int(retain_days * 24)
    removed: dict[str, int] = {}
    versions = dict(view.versions)
    for table in sorted(view.versions):
        path = os.path.join(root, table)
        files = DeltaTable(delta.table_uri(path)).vacuum(
            retention_hours=hours,
            dry_run=False,
            enforce_retention_duration=False,
            full=True,
            commit_properties=CommitProperties(custom_metadata={delta.RUN_ID_KEY: run_id}),
        )
        removed[table] = len(files)
        latest = delta.latest_version(path)
        if latest is not None:
            versions[table] = latest
    total = sum(removed.values())
    note = (
        f"kept every file a run of the last {retain_days:g} day(s) reads; removed {total} "
        "file(s): " + ", ".join(f"{t} {n}" for t, n in removed.items() if n)
    ).rstrip(": ")
    ledger.append(
        {
            "id": run_id,
            "command": "vacuum",
            "start": start,
            "end": datetime.now(UTC),
            "inputs": [],
            "config": config_json,
            "table_versions": versions,
            "counts": {"removed_files": total},
            "written": [],
            "lineage": dict(view.lineage),
            "stage_seconds": {},
            "mode": None,
            "note": note,
        }
    )
    return [*lines, f"vacuum {run_id}: {note}"]
