"""Input discovery and the raw-row contract every reader produces.

`discover_inputs` turns the paths a user gave into files, each with the reader
that reads it, its default trace id (DESIGN §1: the file's path under the
folder given, without extension; the stem of a file given directly; a Delta
table's name) and a fingerprint (size, modification time, a hash of its first
and last blocks). Files that no reader takes are listed, never dropped without
a word. Paths are plain file-system paths: spaces, `%`, `#`, `?`, glob
characters and `:` in names are data, not syntax.

A reader (`causal_spark.io.readers`) turns files into *raw rows*
(`RAW_SCHEMA`): the file's id and the 1-based line where the record starts,
the record's text, every input field as a string (typing happens in
`ingest`, so a bad value becomes a quarantine row instead of a silent null),
and a rejection (`parse_error`, `parse_reason`) when the record could not be
used at all.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark.config import IngestSettings

INPUT_FIELDS: tuple[str, ...] = (
    C.TRACE_ID,
    C.PROCESS,
    C.SEQ,
    C.KIND,
    C.MSG_ID,
    C.PEER,
    C.TS,
    C.SIZE_BYTES,
    C.LABEL,
)
FILE_ID = "file_id"
SUB = "sub"
TRACE_SUFFIX = "trace_suffix"
PARSE_ERROR = "parse_error"
PARSE_REASON = "parse_reason"
RECORDED_VC = "recorded_vc"

# what every reader returns, in this order
RAW_SCHEMA = T.StructType(
    [
        T.StructField(FILE_ID, T.IntegerType(), False),
        T.StructField(C.LINE, T.LongType(), False),
        T.StructField(C.RAW, T.StringType(), True),
        *[T.StructField(name, T.StringType(), True) for name in INPUT_FIELDS],
        # order within (process, seq) when one record makes several events (null: 0)
        T.StructField(SUB, T.LongType(), True),
        # appended to the default trace id as `:suffix` (ShiViz executions)
        T.StructField(TRACE_SUFFIX, T.StringType(), True),
        T.StructField(PARSE_ERROR, T.StringType(), True),
        # reason code of a reader's rejection (null with a parse_error: `malformed`)
        T.StructField(PARSE_REASON, T.StringType(), True),
        T.StructField(RECORDED_VC, T.MapType(T.StringType(), T.LongType()), True),
    ]
)
RAW_COLUMNS: tuple[str, ...] = tuple(f.name for f in RAW_SCHEMA.fields)

# a whole file that cannot be read is one quarantine row at this line
WHOLE_FILE_LINE = 0
_FINGERPRINT_BLOCK = 64 * 1024


class InputError(ValueError):
    """An input path does not exist, or holds nothing this pipeline can read."""


@dataclass(frozen=True)
class InputFile:
    """One file to read: where it is, how the user names it, who reads it."""

    file_id: int
    path: str  # absolute local path
    shown: str  # as the user named it: `data-samples/x.jsonl`
    reader: str
    default_trace: str
    size: int
    mtime_ns: int
    fingerprint: str


@dataclass(frozen=True)
class InputSet:
    """The files found under one given path and read by one reader (a `runs.inputs` row)."""

    path: str
    format: str
    files: tuple[InputFile, ...]

    @property
    def n_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for f in self.files:
            digest.update(f"{f.shown}\0{f.fingerprint}\n".encode())
        return digest.hexdigest()


@dataclass(frozen=True)
class Skipped:
    """A file under a given folder that no reader took, and why."""

    path: str
    why: str


@dataclass(frozen=True)
class Inputs:
    """What discovery found: the input sets (files numbered 0..n-1 in order) and the rest."""

    sets: tuple[InputSet, ...]
    skipped: tuple[Skipped, ...] = field(default_factory=tuple)

    @property
    def files(self) -> tuple[InputFile, ...]:
        return tuple(f for s in self.sets for f in s.files)


def _is_delta_table(path: Path) -> bool:
    return (path / "_delta_log").is_dir()


def fingerprint_of(path: str, size: int, mtime_ns: int) -> str:
    """size, modification time, and a hash of the file's first and last blocks (DESIGN §6)."""
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
    """Files under `root`, sorted; hidden and `_` entries skipped as Spark does; Delta tables
    and excluded folders (the warehouse) listed as skipped instead of read as loose files."""
    found: list[Path] = []
    skipped: list[Skipped] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        kept_dirs = []
        for name in sorted(dirs):
            sub = here / name
            if name.startswith((".", "_")):
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
        found.extend(here / name for name in sorted(files) if not name.startswith((".", "_")))
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
    from causal_spark.io.readers import choose_reader, known_extensions, reader_named

    excluded = [Path(e).resolve() for e in exclude]
    forced = None if reader == "auto" else reader_named(reader)
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
        skipped.extend(found_skipped)
        by_reader: dict[str, list[Path]] = {}
        for file in candidates:
            if not os.access(file, os.R_OK):
                # an unreadable file is still an input: its reader quarantines it whole
                name = forced.name if forced else choose_reader(file, settings, sniff=False)
            else:
                name = forced.name if forced else choose_reader(file, settings)
            if name is None:
                if root.is_file():
                    raise InputError(
                        f"input file {given} has no reader: its extension is none of "
                        f"{known_extensions(settings)} and its content is no known format"
                    )
                skipped.append(Skipped(str(file), "no reader knows this file's format"))
                continue
            by_reader.setdefault(name, []).append(file)
        if not by_reader:
            raise InputError(f"input path {given} holds no file any reader can read")
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


def local_path_of(uri: str) -> str:
    """A `file:` URI (as Spark and delta-rs report files) as a local path, percent-decoded."""
    from urllib.parse import unquote

    if uri.startswith("file:"):
        uri = uri[len("file:") :]
        if uri.startswith("//"):
            uri = uri[2:]
        return unquote(uri)
    return uri


def local_path(uri: Column) -> Column:
    """`local_path_of` as a Column: Spark's `_metadata.file_path` is a percent-encoded URI."""
    stripped = F.regexp_replace(uri, r"^file:(//)?", "")
    # url_decode is form decoding ('+' is a space): protect literal '+' first
    return F.url_decode(F.replace(stripped, F.lit("+"), F.lit("%2B")))


def file_reader(spark: SparkSession) -> DataFrameReader:
    """`spark.read` for input files given by `spark_path`: the plain local file system, whose
    checksum layer would otherwise parse a `:` in a file's name as a URI scheme."""
    return spark.read.option("fs.file.impl.disable.cache", "true").option(
        "fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem"
    )


def spark_path(path: str) -> str:
    """A local path as Spark must be given it: absolute, with glob characters escaped."""
    escaped = "".join("\\" + ch if ch in "\\{}[]*?" else ch for ch in str(Path(path).resolve()))
    return "file://" + escaped


def with_file_ids(frame: DataFrame, path: Column, files: Sequence[InputFile]) -> DataFrame:
    """Add `file_id` to rows read from `files`, by their local path (a broadcast join)."""
    spark = frame.sparkSession
    table = spark.createDataFrame(
        [(f.path, f.file_id) for f in files], "__cs_path string, file_id int"
    )
    return (
        frame.withColumn("__cs_path", path).join(F.broadcast(table), "__cs_path").drop("__cs_path")
    )


def whole_file_rows(spark: SparkSession, rejected: Sequence[tuple[InputFile, str]]) -> DataFrame:
    """One raw row per file that cannot be read at all (line 0), rejected with the reason."""
    rows = [
        {FILE_ID: f.file_id, C.LINE: WHOLE_FILE_LINE, C.RAW: "", PARSE_ERROR: why}
        for f, why in rejected
    ]
    return (
        spark.createDataFrame(rows, RAW_SCHEMA) if rows else spark.createDataFrame([], RAW_SCHEMA)
    )


def read_raw_rows(spark: SparkSession, inputs: Inputs, options: object = None) -> DataFrame:
    """Every input file read by its reader, as one DataFrame of raw rows (`RAW_SCHEMA`)."""
    from causal_spark.io.readers import reader_named

    parts: list[DataFrame] = []
    for name in sorted({f.reader for f in inputs.files}):
        files = [f for f in inputs.files if f.reader == name]
        parts.append(reader_named(name).read(spark, files, options))
    if not parts:
        raise InputError("the inputs hold no files")
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def only_files(inputs: Inputs, file_ids: Sequence[int]) -> Inputs:
    """The same inputs restricted to some files (ids kept): to read those files again."""
    wanted = set(file_ids)
    sets = [replace(s, files=tuple(f for f in s.files if f.file_id in wanted)) for s in inputs.sets]
    return replace(inputs, sets=tuple(s for s in sets if s.files))
