"""Small, exact helpers over one Delta table folder, through delta-rs (no Spark).

Every path handed to delta-rs is a `file://` URI built by `pathlib` (percent-encoded):
a plain path string is taken as a URI by delta-rs, so a folder named `a%20b` was
written under `a%20b` but read back as `a b` (the commit succeeded, then the read
after it failed). Paths that come back (`add.path`, `file_uris()`) are
percent-encoded and are decoded here, once.

The transaction log is read directly where delta-rs has no call for it: the run id
each commit carries (`commitInfo`), and every data file any version names (so that
cleanup never removes a file a version points to).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

RUN_ID_KEY = "causal_spark.run_id"
LOG = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")
# Hadoop glob characters: Spark expands them in a path it is given to read
_GLOB = re.compile(r"([\\{}\[\]*?])")


def table_uri(path: str | os.PathLike[str]) -> str:
    """The `file://` URI of a local folder, percent-encoded (what delta-rs must be given)."""
    return Path(os.path.abspath(path)).as_uri()


def unsupported_path(path: str | os.PathLike[str]) -> str | None:
    """Why delta-rs cannot hold a table under `path` (None: it can).

    delta-rs 1.6.6 decodes a table's location twice when it reads its log back: under
    `a%20b` it writes `a%20b/_delta_log/...` and then looks for `a b/_delta_log/...`
    (the commit has happened, the read after it fails), however the path is given
    (plain, as a URI, through a symbolic link: it resolves links first).
    """
    absolute = os.path.abspath(path)
    if "%" in absolute:
        return (
            f"{absolute} holds '%': delta-rs (1.6.6) decodes a table's location twice, so "
            "it would write there and read elsewhere; choose a folder without '%'"
        )
    return None


def local_path(uri_or_path: str, root: str | None = None) -> str:
    """A path delta-rs returned (a URI, an encoded absolute path, or relative to `root`),
    as a plain local path."""
    if uri_or_path.startswith("file:"):
        return unquote(urlparse(uri_or_path).path)
    decoded = unquote(uri_or_path)
    if os.path.isabs(decoded) or root is None:
        return decoded
    return os.path.join(root, decoded)


def spark_path(path: str) -> str:
    """A local path as Spark must be given it to read exactly that file (no globbing)."""
    return _GLOB.sub(r"\\\1", path)


def is_table(path: str | os.PathLike[str]) -> bool:
    return os.path.isdir(os.path.join(path, LOG))


def commit_versions(path: str | os.PathLike[str]) -> list[int]:
    """The versions whose commit file is in the log, ascending."""
    folder = os.path.join(path, LOG)
    if not os.path.isdir(folder):
        return []
    return sorted(int(m.group(1)) for name in os.listdir(folder) if (m := _COMMIT.match(name)))


def latest_version(path: str | os.PathLike[str]) -> int | None:
    """The newest version of the table at `path` (None: no table there)."""
    versions = commit_versions(path)
    if versions:
        return versions[-1]
    if not is_table(path):
        return None
    from deltalake import DeltaTable  # a log of checkpoints only

    return int(DeltaTable(table_uri(path)).version())


def _actions(path: str | os.PathLike[str], version: int) -> list[dict[str, Any]]:
    file = os.path.join(path, LOG, f"{version:020d}.json")
    with open(file, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def commit_run_id(path: str | os.PathLike[str], version: int) -> str | None:
    """The causal-spark run id a version's commit carries (None: not written by a run)."""
    for action in _actions(path, version):
        info = action.get("commitInfo")
        if info is not None:
            run_id = info.get(RUN_ID_KEY)
            if run_id is None and isinstance(info.get("userMetadata"), str):
                try:  # delta-spark keeps it in userMetadata, as JSON
                    run_id = json.loads(info["userMetadata"]).get(RUN_ID_KEY)
                except (ValueError, AttributeError):
                    run_id = None
            return str(run_id) if run_id is not None else None
    return None


def changes_data(path: str | os.PathLike[str], version: int) -> bool:
    """Whether a version adds or removes data files (vacuum's commits do not)."""
    return any("add" in a or "remove" in a for a in _actions(path, version))


def referenced_files(path: str | os.PathLike[str]) -> set[str]:
    """Every data file (absolute, decoded) that any version in the log names.

    Reads every commit file and checkpoint: a file added by any version, committed
    or not, must stay until `vacuum` removes it by its own rules.
    """
    root = os.path.abspath(path)
    folder = os.path.join(root, LOG)
    named: set[str] = set()
    if not os.path.isdir(folder):
        return named
    for name in os.listdir(folder):
        if _COMMIT.match(name):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                for line in handle:
                    if not line.strip():
                        continue
                    action = json.loads(line)
                    for kind in ("add", "remove"):
                        if kind in action:
                            named.add(local_path(action[kind]["path"], root))
        elif _CHECKPOINT.match(name):
            checkpoint = pq.read_table(os.path.join(folder, name), columns=["add", "remove"])
            for kind in ("add", "remove"):
                for entry in checkpoint.column(kind).to_pylist():
                    if entry is not None:
                        named.add(local_path(entry["path"], root))
    return named


@dataclass(frozen=True)
class DataFile:
    """One data file of a table version: where it is, its rows and its trace_id range."""

    path: str
    relative: str
    rows: int | None
    min_trace: str | None
    max_trace: str | None


def data_files(path: str | os.PathLike[str], version: int) -> list[DataFile]:
    """The data files of `version` of the table at `path`."""
    from deltalake import DeltaTable

    root = os.path.abspath(path)
    actions = pa.table(DeltaTable(table_uri(root), version=version).get_add_actions(flatten=True))
    names = set(actions.column_names)
    rows = actions.column("num_records").to_pylist() if "num_records" in names else None
    lows = actions.column("min.trace_id").to_pylist() if "min.trace_id" in names else None
    highs = actions.column("max.trace_id").to_pylist() if "max.trace_id" in names else None
    files = []
    for i, relative in enumerate(actions.column("path").to_pylist()):
        files.append(
            DataFile(
                path=local_path(relative, root),
                relative=unquote(relative),
                rows=rows[i] if rows is not None else None,
                min_trace=lows[i] if lows is not None else None,
                max_trace=highs[i] if highs is not None else None,
            )
        )
    return files


def overlapping(files: Iterable[DataFile], traces: list[str]) -> list[DataFile]:
    """The files whose trace_id range may hold one of `traces` (sorted); a file without
    a recorded range may hold any."""
    import bisect

    found = []
    for file in files:
        if file.rows == 0:
            continue
        if file.min_trace is None or file.max_trace is None:
            found.append(file)
            continue
        at = bisect.bisect_left(traces, file.min_trace)
        if at < len(traces) and traces[at] <= file.max_trace:
            found.append(file)
    return found
