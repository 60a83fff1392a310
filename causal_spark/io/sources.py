"""Input discovery: the files under the paths a user gave, each with its reader.

`discover_inputs` turns the paths a user gave into files, each with the reader
that reads it, its default trace id (docs/ingest.md: the file's path under the
folder given, without extension; the stem of a file given directly; a Delta
table's name) and a fingerprint (size, modification time, a hash of its first
and last blocks). Files that no reader takes are listed, never dropped without
a word. Paths are plain file-system paths: spaces, `%`, `#`, `?`, glob
characters and `:` in names are data, not syntax.

The raw-row contract the readers produce is `causal_spark.io.raw` (its names are
re-exported here).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from causal_spark.config import IngestSettings
from causal_spark.io.raw import (
    FILE_ID,
    INPUT_FIELDS,
    PARSE_ERROR,
    PARSE_REASON,
    RAW_COLUMNS,
    RAW_SCHEMA,
    RECORDED_VC,
    SUB,
    TRACE_SUFFIX,
    WHOLE_FILE_LINE,
    InputError,
    InputFile,
    Inputs,
    InputSet,
    RawRead,
    Skipped,
    file_reader,
    local_path,
    local_path_of,
    spark_path,
    union_reads,
    whole_file_rows,
    with_file_ids,
)
from causal_spark.io.readers import (
    EVENTS,
    OURS,
    choose_reader,
    extension_of,
    known_extensions,
    reader_named,
)

_FINGERPRINT_BLOCK = 64 * 1024
# a warehouse's own bookkeeping (the writer lock, staged files) and a Delta table's log:
# never input, never listed as skipped
_NOT_INPUT = frozenset({"_causal", "_delta_log"})
HIDDEN = "hidden or underscore name"
HIDDEN_FOLDER = "hidden or underscore folder: not entered"

__all__ = [
    "FILE_ID",
    "INPUT_FIELDS",
    "PARSE_ERROR",
    "PARSE_REASON",
    "RAW_COLUMNS",
    "RAW_SCHEMA",
    "RECORDED_VC",
    "SUB",
    "TRACE_SUFFIX",
    "WHOLE_FILE_LINE",
    "InputError",
    "InputFile",
    "InputSet",
    "Inputs",
    "Skipped",
    "discover_inputs",
    "file_reader",
    "fingerprint_of",
    "local_path",
    "local_path_of",
    "only_files",
    "read_raw_rows",
    "spark_path",
    "whole_file_rows",
    "with_file_ids",
]


def _is_delta_table(path: Path) -> bool:
    return (path / "_delta_log").is_dir()


def fingerprint_of(path: str, size: int, mtime_ns: int) -> str:
    """size, modification time, and a hash of the file's first and last blocks.

    See docs/scheduling.md.
    """
    digest = hashlib.sha256(f"{size}\0{mtime_ns}\0".encode())
    with open(path, "rb") as fh:
        digest.update(fh.read(_FINGERPRINT_BLOCK))
        if size > _FINGERPRINT_BLOCK:
            fh.seek(max(_FINGERPRINT_BLOCK, size - _FINGERPRINT_BLOCK))
            digest.update(fh.read(_FINGERPRINT_BLOCK))
    return digest.hexdigest()


def _strip_extension(name: str, extensions: Iterable[str]) -> str:
    lowered = name.lower()
    if lowered.endswith(".gz"):
        name, lowered = name[:-3], lowered[:-3]
    for ext in sorted(extensions, key=len, reverse=True):
        if ext and lowered.endswith(ext):
            return name[: -len(ext)]
    return name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name


def _under(path: Path, folders: Sequence[Path]) -> bool:
    return any(path == f or f in path.parents for f in folders)


def _walk(root: Path, excluded: Sequence[Path]) -> tuple[list[Path], list[Skipped]]:
    """Files under `root`, sorted; hidden and `_` entries skipped as Spark does (a file
    listed, a folder listed once and not entered); Delta tables and excluded folders (the
    warehouse) listed as skipped instead of read as loose files."""
    found: list[Path] = []
    skipped: list[Skipped] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        kept_dirs = []
        for name in sorted(dirs):
            sub = here / name
            if name.startswith((".", "_")):
                if name not in _NOT_INPUT:
                    skipped.append(Skipped(str(sub), HIDDEN_FOLDER))
                continue
            if _under(sub.resolve(), excluded):
                skipped.append(Skipped(str(sub), "the warehouse of this run: not input"))
            elif _is_delta_table(sub):
                skipped.append(
                    Skipped(
                        str(sub), "a Delta table inside a folder: give it as an input to read it"
                    )
                )
            else:
                kept_dirs.append(name)
        dirs[:] = kept_dirs
        for name in sorted(files):
            if name.startswith((".", "_")):
                skipped.append(Skipped(str(here / name), HIDDEN))
            else:
                found.append(here / name)
    return sorted(found), skipped


def discover_inputs(
    paths: Sequence[str],
    settings: IngestSettings,
    *,
    exclude: Sequence[str] = (),
    reader: str = "auto",
) -> Inputs:
    """List the files under each path with the reader of each.

    A folder is searched recursively; a folder with a `_delta_log` given as a
    path is read as one Delta table. `reader` forces one reader for every file
    (else each file's reader is chosen by its extension, then by its content).
    Raises `InputError` for a path that does not exist or holds nothing readable.
    """
    excluded = [Path(e).resolve() for e in exclude]
    # `events`: our row format, each file's reader chosen among ours
    forced = None if reader in ("auto", EVENTS) else reader_named(reader)
    among = OURS if reader == EVENTS else None
    sets: list[InputSet] = []
    skipped: list[Skipped] = []
    next_id = 0
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise InputError(f"input path {given} does not exist")
        if root.is_dir() and _is_delta_table(root):
            files = _delta_files(root, given, next_id)
            next_id += len(files)
            sets.append(InputSet(path=given, format="delta", files=files))
            continue
        if root.is_file():
            candidates, found_skipped = [root], list[Skipped]()
        else:
            candidates, found_skipped = _walk(root, excluded)
        by_reader: dict[str, list[Path]] = {}
        for file in candidates:
            if not os.access(file, os.R_OK):
                # an unreadable file is still an input: its reader quarantines it whole
                name = (
                    forced.name
                    if forced
                    else choose_reader(file, settings, sniff=False, among=among)
                )
            else:
                name = forced.name if forced else choose_reader(file, settings, among=among)
            if name is None:
                if root.is_file():
                    raise InputError(
                        f"input file {given} has no reader: its extension is none of "
                        f"{known_extensions(settings)} and its content is no known format"
                    )
                found_skipped.append(Skipped(str(file), _no_reader(file, settings)))
                continue
            by_reader.setdefault(name, []).append(file)
        found_skipped.sort(key=lambda s: s.path)
        skipped.extend(found_skipped)
        if not by_reader:
            shown = ", ".join(f"{s.path} ({s.why})" for s in found_skipped[:3])
            more = f" and {len(found_skipped) - 3} more" if len(found_skipped) > 3 else ""
            raise InputError(
                f"input path {given} holds no file any reader can read"
                + (f"; skipped: {shown}{more}" if found_skipped else "")
            )
        base = root if root.is_dir() else root.parent
        shown_base = given.rstrip("/") if root.is_dir() else str(Path(given).parent)
        extensions = known_extensions(settings)
        for name, found in sorted(by_reader.items()):
            files_of_set: list[InputFile] = []
            for file in found:
                relative = file.relative_to(base).as_posix()
                shown = relative if shown_base in ("", ".") else f"{shown_base}/{relative}"
                trace = (
                    _strip_extension(file.name, extensions)
                    if root.is_file()
                    else _strip_extension(relative, extensions)
                )
                files_of_set.append(_input_file(next_id, file, shown, name, trace))
                next_id += 1
            sets.append(InputSet(path=given, format=name, files=tuple(files_of_set)))
    return Inputs(sets=tuple(sets), skipped=tuple(skipped))


def _no_reader(file: Path, settings: IngestSettings) -> str:
    """Why no reader took `file`: its extension, or (a known extension) its content."""
    extension = extension_of(file)
    if not extension:
        return "no extension, and its content is no known format"
    if extension in known_extensions(settings):
        return f"its content is no format that reads {extension}"
    return f"no reader for extension {extension}"


def _input_file(file_id: int, file: Path, shown: str, reader: str, trace: str) -> InputFile:
    path = str(file.resolve())
    try:
        stat = os.stat(path)
        fingerprint = fingerprint_of(path, stat.st_size, stat.st_mtime_ns)
        size, mtime = stat.st_size, stat.st_mtime_ns
    except OSError as e:
        size, mtime, fingerprint = 0, 0, f"unreadable:{e.strerror}"
    return InputFile(file_id, path, shown, reader, trace, size, mtime, fingerprint)


def _delta_files(root: Path, given: str, first_id: int) -> tuple[InputFile, ...]:
    from deltalake import DeltaTable

    table = DeltaTable(str(root))
    found = []
    for i, uri in enumerate(sorted(table.file_uris())):
        path = Path(local_path_of(uri))
        shown = f"{given.rstrip('/')}/{path.relative_to(root.resolve()).as_posix()}"
        found.append(_input_file(first_id + i, path, shown, "delta", root.resolve().name))
    return tuple(found)


def read_raw_rows(
    spark: SparkSession, inputs: Inputs, options: object = None, text: bool = True
) -> DataFrame:
    """Every input file read by its reader, as one DataFrame of raw rows (`RAW_SCHEMA`).

    text=False: a reader whose record text costs a conversion of every row (Parquet's
    row as JSON) may leave `raw` null; ingest reads the text of the rows it rejects
    again, with text."""
    return read_raw(spark, inputs, options, text).rows


def read_raw(
    spark: SparkSession, inputs: Inputs, options: object = None, text: bool = True
) -> RawRead:
    """`read_raw_rows`' rows, and the plan of the Python tasks that make them where a
    reader has one (`RawRead`: ingest takes both)."""
    parts: list[RawRead] = []
    for name in sorted({f.reader for f in inputs.files}):
        files = [f for f in inputs.files if f.reader == name]
        reader = reader_named(name)
        planned = getattr(reader, "planned", None)
        if planned is not None:
            parts.append(planned(spark, files, options, text))
            continue
        textless = None if text else getattr(reader, "read_without_text", None)
        read = textless if textless is not None else reader.read
        parts.append(RawRead(read(spark, files, options)))
    if not parts:
        raise InputError("the inputs hold no files")
    return union_reads(parts)


def only_files(inputs: Inputs, file_ids: Sequence[int]) -> Inputs:
    """The same inputs restricted to some files (ids kept): to read those files again."""
    wanted = set(file_ids)
    sets = [replace(s, files=tuple(f for f in s.files if f.file_id in wanted)) for s in inputs.sets]
    return replace(inputs, sets=tuple(s for s in sets if s.files))
