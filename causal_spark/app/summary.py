"""What a run tells a scheduler: the `--summary-json` document (tables, counts, findings,
the gates) and the findings new since the previous committed run."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from causal_spark import tables
from causal_spark.app import gating
from causal_spark.app.runs import RunRecord
from causal_spark.app.session import build_session
from causal_spark.config import Config
from causal_spark.io.sinks import Warehouse


def new_findings(
    args: argparse.Namespace, session: SparkSession | None, record: RunRecord, config: Config
) -> dict[str, Any] | None:
    """Findings of this run that appeared, disappeared or changed since the previous
    committed run (only the traces the run analysed, for an incremental run)."""
    from causal_spark.app.history import APPEARED, CHANGED, DISAPPEARED, findings_diff
    from causal_spark.io.ledger import EMPTY

    if tables.TRACE_SUMMARY not in record.table_versions:
        return None
    spark = session or build_session(config.spark)
    warehouse = Warehouse(spark, args.warehouse, config.sink.format)
    ledger = warehouse.ledger
    after = ledger.view(record.run_id)
    before = ledger.view(record.previous_run) if record.previous_run else EMPTY
    rows = [r.asDict() for r in findings_diff(warehouse, before, after).collect()]
    by_kind: dict[str, dict[str, int]] = {}
    for row in rows:
        kind = by_kind.setdefault(str(row["finding"]), {APPEARED: 0, DISAPPEARED: 0, CHANGED: 0})
        kind[str(row["change"])] += 1
    return {
        "since_run": record.previous_run,
        APPEARED: sum(1 for r in rows if r["change"] == APPEARED),
        DISAPPEARED: sum(1 for r in rows if r["change"] == DISAPPEARED),
        CHANGED: sum(1 for r in rows if r["change"] == CHANGED),
        "by_finding": by_kind,
        "appeared_list": [
            {"trace_id": r["trace_id"], "finding": r["finding"], "key": r["key"]}
            for r in sorted(rows, key=lambda r: (r["trace_id"], r["finding"], r["key"]))
            if r["change"] == APPEARED
        ][:100],
    }


SHOWN_SKIPPED = 3  # names a summary line shows before "and N more"


def skipped_line(record: RunRecord) -> str | None:
    """The files a run's ingest took and skipped, in one line (None: it read no input):
    counts by reason, then the first few names."""
    if record.skipped is None:
        return None
    skipped = record.skipped
    text = f"ingest: {record.files_taken} file(s) taken by a reader, {len(skipped)} skipped"
    if not skipped:
        return text
    by_reason = Counter(s.why for s in skipped)
    reasons = "; ".join(f"{why}: {n}" for why, n in sorted(by_reason.items()))
    names = ", ".join(s.path for s in skipped[:SHOWN_SKIPPED])
    more = f" and {len(skipped) - SHOWN_SKIPPED} more" if len(skipped) > SHOWN_SKIPPED else ""
    return f"{text} ({reasons}): {names}{more}"


def run_summary(
    args: argparse.Namespace,
    record: RunRecord,
    outcomes: list[gating.Outcome],
    new: dict[str, Any] | None,
    code: int,
    config: Config,
) -> dict[str, Any]:
    from causal_spark.anomalies import ORDER_CLASSES
    from causal_spark.io import delta

    root = str(Path(args.warehouse).resolve())
    table_rows = {}
    for table, version in sorted(record.view.items()):
        files = delta.data_files(str(Path(root) / table), version)
        table_rows[table] = {
            "version": version,
            "rows": sum(f.rows or 0 for f in files),
            "written": record.stages.rows.get(table),
        }
    counts = record.counts
    findings = {
        name: int(counts[finding.key])
        for name, finding in gating.FINDINGS.items()
        if finding.key in counts
    }
    classes = (
        {name: int(counts.get(f"class_{name}", 0)) for name in ORDER_CLASSES}
        if record.stages.detect is not None
        else None
    )
    return {
        "status": "committed",
        "exit_code": code,
        "run_id": record.run_id,
        "command": record.command,
        "mode": record.mode,
        "previous_run": record.previous_run,
        "started": record.start.isoformat(),
        "ended": record.end.isoformat(),
        "seconds": round((record.end - record.start).total_seconds(), 3),
        "stage_seconds": {k: round(v, 3) for k, v in record.stage_seconds.items()},
        "repaired": record.repaired.lines() if record.repaired else [],
        "tables": table_rows,
        "counts": counts,
        "classes": classes,
        "findings": findings,
        "new_findings": new,
        "files": (
            None
            if record.skipped is None
            else {"taken": record.files_taken, "skipped": len(record.skipped)}
        ),
        "skipped": (None if record.skipped is None else [s.as_record() for s in record.skipped]),
        "fail_on": [o.as_json() for o in outcomes],
        "error": None,
    }


def write_summary(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    path = Path(args.summary_json)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
    temporary.replace(path)


def failed_summary(args: argparse.Namespace, began: datetime, code: int, error: Exception) -> None:
    if getattr(args, "summary_json", None):
        write_summary(
            args,
            {
                "status": "failed",
                "exit_code": code,
                "command": args.command,
                "started": began.isoformat(),
                "ended": datetime.now(UTC).isoformat(),
                "error": f"{type(error).__name__}: {error}",
            },
        )
