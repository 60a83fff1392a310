"""Delta sink: every table a job writes goes through one `RunTransaction`.

A run first *stages* each table: Spark writes its Parquet files in parallel
(conformed to the declared schema), and later stages of the same run read the
staged files back instead of recomputing them. Only when every stage has
succeeded does the run *commit*: one Delta transaction per table, then the
`runs` row (`causal_spark.io.ledger`), which is the commit record: readers read
the versions a `runs` row names, so a run that dies between two table commits
leaves versions nobody reads, and the next writing run repairs them
(`causal_spark.app.repair`). A run that fails removes its staged files, but never
a file that a version in a table's log names.

A table is replaced whole (`overwrite`), appended to, or has some traces' rows
replaced (`replace`, the incremental audit): the files of the current version that
hold rows of those traces (found by the trace_id range each file's stats record)
are rewritten without them, and the run's files are added, in one transaction;
files holding only other traces are not touched.

A stage whose rows are born in Python workers (the clocks' grouped Arrow UDFs,
whose vectors are most of the bytes) can instead have those workers write the
files themselves (`stage_through` with a `FileWriter`): the rows then never
cross into the JVM, whose row-by-row Parquet array writer cost a 10^7-event,
64-process trace about 55 s of CPU. The files, their schema and the commit are
the same either way.

Two backends write the same tables:
- `deltalake` (the embedded default): staged files live inside the table
  folder and delta-rs commits them as add actions (overwrite or append);
- `delta-spark`: where delta-spark's extension is configured, the staged
  Parquet is written with `format("delta")`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from causal_spark import tables
from causal_spark.config import SinkFormat
from causal_spark.io import delta
from causal_spark.io.ledger import (
    NEW_TABLE,
    Ledger,
    View,
    WarehouseError,
    commit_files,
)

log = logging.getLogger(__name__)
WriteMode = Literal["overwrite", "append", "replace"]
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"

# Columns written without a dictionary. events.vc: vector entries are nearly all distinct,
# so the dictionary a writer tries first is abandoned page after page; that attempt was
# about 25% of the JVM's samples when the clocks stage wrote 10^7 events x 64 processes.
NO_DICTIONARY: dict[str, tuple[str, ...]] = {tables.EVENTS: ("vc",)}

# Spark's Parquet writer options per table (parquet-mr's `key#column.path` sets one column)
WRITE_OPTIONS: dict[str, dict[str, str]] = {
    table: {f"parquet.enable.dictionary#{column}.list.element": "false" for column in columns}
    for table, columns in NO_DICTIONARY.items()
}

# what a FileWriter returns per file it wrote
FILES_SCHEMA = T.StructType(
    [T.StructField("path", T.StringType(), False), T.StructField("rows", T.LongType(), False)]
)


def resolve_backend(
    spark: SparkSession, requested: SinkFormat
) -> Literal["deltalake", "delta-spark"]:
    """`auto` picks delta-spark when its session extension is configured."""
    if requested != "auto":
        return requested
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    return "delta-spark" if DELTA_EXTENSION in extensions else "deltalake"


@dataclass(frozen=True)
class FileWriter:
    """Writes a table's rows from inside a Spark task (a Python worker) as one Parquet file.

    `write` conforms an Arrow table to the declared schema of `table` (exactly its
    columns, in order, cast to their types; a null in a non-null column fails the
    task, as `tables.conform` fails a Spark write), writes it under `folder` and
    returns one `FILES_SCHEMA` row naming the file (none for an empty table). The
    files match what Spark's writer produces for the same rows: every field optional,
    the session's compression codec, no dictionary for `NO_DICTIONARY`'s columns, no
    Arrow schema in the footer. A dictionary column whose values have the declared type
    is written as it is (the clocks tasks build their strings that way). Picklable: a
    UDF closes over it.

    scratch: a folder (not under `folder`) that the job producing the rows may use for
    its own intermediate files, read by its tasks; `RunTransaction.stage_through`
    removes it when the job ends. Empty: none (the producer must not need one).
    """

    table: str
    folder: str
    compression: str = "snappy"
    scratch: str = ""

    def write(self, rows: pa.Table) -> pa.Table:
        files = tables.to_arrow(FILES_SCHEMA)
        if rows.num_rows == 0:
            return files.empty_table()
        declared = tables.table_schema(self.table)
        missing = [f.name for f in declared.fields if f.name not in rows.column_names]
        if missing:
            raise tables.SchemaMismatchError(
                f"table '{self.table}' needs columns {missing}; the rows have {rows.column_names}"
            )
        for fld in declared.fields:
            if not fld.nullable and rows.column(fld.name).null_count:
                raise ValueError(f"{self.table}.{fld.name} must not be null")
        schema = tables.to_arrow(tables.udf_schema(self.table))
        # a dictionary column of the declared type stays one: written as Parquet
        # dictionary pages without hashing its values again
        kept = pa.schema(
            [
                fld.with_type(given)
                if pa.types.is_dictionary(given := rows.schema.field(fld.name).type)
                and given.value_type == fld.type
                else fld
                for fld in schema
            ]
        )
        conformed = rows.select(schema.names).cast(kept)
        no_dictionary = set(NO_DICTIONARY.get(self.table, ()))
        path = os.path.join(self.folder, _file_name())
        os.makedirs(self.folder, exist_ok=True)
        pq.write_table(
            conformed,
            path,
            compression=self.compression,
            use_dictionary=[name for name in schema.names if name not in no_dictionary],
            write_statistics=_statistics_columns(conformed),
            store_schema=False,  # as Spark writes them: readers see the Parquet types only
        )
        return pa.Table.from_pylist([{"path": path, "rows": conformed.num_rows}], schema=files)


def _statistics_columns(rows: pa.Table) -> bool | list[str]:
    """The Parquet columns to write statistics for: all (True), or all but the floating
    columns that hold a NaN. parquet-cpp leaves NaN out of a column's min/max, and a range
    that hides a NaN would let Delta readers skip or mis-filter the file
    (`causal_spark.io.stats`); without statistics the commit reads the column instead."""
    import pyarrow.compute as pc

    with_nan = {
        name
        for name, column in zip(rows.column_names, rows.columns, strict=True)
        if pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py()
    }
    if not with_nan:
        return True
    empty = pa.BufferOutputStream()  # the Parquet leaf paths pyarrow gives these columns
    pq.write_table(rows.slice(0, 0), empty, store_schema=False)
    leaves = pq.read_metadata(pa.BufferReader(empty.getvalue())).schema
    paths = [leaves.column(i).path for i in range(len(leaves))]
    return [path for path in paths if path.split(".")[0] not in with_nan]


def _file_name() -> str:
    """part-<partition>-<attempt>-<uuid>.parquet: unique per call, traceable to its task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    task = f"{context.partitionId():05d}-{context.attemptNumber()}" if context else "driver"
    return f"part-{task}-{uuid.uuid4().hex}.parquet"


def _arrow_codec(spark: SparkSession) -> str:
    codec = (spark.conf.get("spark.sql.parquet.compression.codec") or "snappy").lower()
    return "none" if codec in ("none", "uncompressed") else codec


@dataclass
class _Staged:
    table: str
    mode: WriteMode
    folder: str
    files: list[str]
    rows: int


PENDING = os.path.join("_causal", "pending")


class Warehouse:
    """A folder of Delta tables, one sub-folder per table, and its `runs` ledger."""

    def __init__(self, spark: SparkSession, root: str | Path, backend: SinkFormat = "auto"):
        self.spark = spark
        self.root = str(Path(root).resolve())
        self.backend = resolve_backend(spark, backend)
        self.ledger = Ledger(self.root)

    def path(self, table: str) -> str:
        return os.path.join(self.root, table)

    def exists(self, table: str) -> bool:
        """Whether the table has a Delta log (committed by a run or not)."""
        return delta.is_table(self.path(table))

    def version(self, table: str) -> int | None:
        """The newest version of `table` in its log, committed by a run or not."""
        return delta.latest_version(self.path(table))

    def view(self, as_of: str | None = None) -> View:
        """The table versions the last committed run (or run `as_of`) names."""
        return self.ledger.view(as_of)

    def read(self, table: str, as_of: str | None = None) -> DataFrame:
        """`table` as the last committed run left it (or run `as_of`), declared schema."""
        view = self.view(as_of)
        version = view.versions.get(table)
        if version is None:
            if view.run_id is None:
                raise WarehouseError(
                    f"table '{table}' does not exist under {self.root}: no run has committed "
                    "there; run the job that writes it first"
                )
            raise WarehouseError(
                f"table '{table}' does not exist under {self.root} as of run {view.run_id}; "
                "run the job that writes it first"
            )
        return self.read_version(table, version)

    def read_latest(self, table: str) -> DataFrame:
        """The newest version in the table's log, committed by a run or not (for tests of
        the transaction layer, which commit tables without a `runs` row)."""
        version = self.version(table)
        if version is None:
            raise WarehouseError(f"table '{table}' does not exist under {self.root}")
        return self.read_version(table, version)

    def read_version(self, table: str, version: int) -> DataFrame:
        """Version `version` of `table` with its declared schema."""
        schema = tables.table_schema(table)
        if self.backend == "delta-spark":
            return (
                self.spark.read.format("delta")
                .option("versionAsOf", version)
                .load(self.path(table))
            )
        from deltalake import DeltaTable

        try:
            log = DeltaTable(delta.table_uri(self.path(table)), version=version)
        except Exception as e:  # delta-rs raises its own error types for a missing version
            raise WarehouseError(
                f"table '{table}' version {version} under {self.root} cannot be read "
                f"(vacuumed, or its log was removed): {e}"
            ) from e
        features = set(log.protocol().reader_features or [])
        unsupported = features - {"timestampNtz"}
        if unsupported:
            raise WarehouseError(
                f"table '{table}' uses Delta reader features {sorted(unsupported)} that the "
                "embedded reader does not handle; run with delta-spark's jars"
            )
        files = [f.path for f in delta.data_files(self.path(table), version)]
        missing = [f for f in files if not os.path.exists(f)]
        if missing:
            raise WarehouseError(
                f"table '{table}' version {version} names {len(missing)} file(s) that are gone "
                f"(vacuumed?), e.g. {missing[0]}"
            )
        if not files:
            return self.spark.createDataFrame([], schema)
        return self.spark.read.schema(schema).parquet(*[delta.spark_path(f) for f in files])

    def rows(self, table: str, as_of: str | None = None) -> int:
        """The rows of `table` in a committed view, from the files' stats (no Spark job)."""
        version = self.view(as_of).versions.get(table)
        if version is None:
            return 0
        return sum(f.rows or 0 for f in delta.data_files(self.path(table), version))

    @contextmanager
    def transaction(self, run_id: str) -> Iterator[RunTransaction]:
        """Stage tables inside the block; commit them when the block ends without error."""
        txn = RunTransaction(self, run_id)
        try:
            yield txn
        except BaseException:
            txn.abort()
            raise
        if not txn.committed:
            txn.abort()


@dataclass
class RunTransaction:
    """The tables one run stages, and its commit.

    `replace_traces`: the traces whose rows `replace`-mode tables replace (sorted).
    `on_committed(point)` is called at each commit point: `"intent"` once the intent is
    written, each table's name after its commit, and `tables.RUNS` after the `runs` row
    (the fault tests stop a run there).
    """

    warehouse: Warehouse
    run_id: str
    staged: dict[str, _Staged] = field(default_factory=dict)
    started: dict[str, list[str]] = field(default_factory=dict)
    superseded: list[str] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)
    base: dict[str, int] = field(default_factory=dict)
    replace_traces: list[str] = field(default_factory=list)
    incremental: bool = False
    committed: bool = False
    on_staged: Callable[[str], None] | None = None
    on_committed: Callable[[str], None] | None = None

    def _folder(self, table: str) -> str:
        if self.warehouse.backend == "deltalake":
            # inside the table folder so delta-rs can add the files by relative path
            return os.path.join(self.warehouse.path(table), "data", self.run_id)
        return os.path.join(self.warehouse.root, "_staging", self.run_id, table)

    def stage(self, table: str, frame: DataFrame, mode: WriteMode = "overwrite") -> DataFrame:
        """Write `frame` as the next content of `table` (not yet visible); return it re-read."""
        began = time.monotonic()
        conformed = tables.conform(frame, table)
        folder = self._next_folder(table)
        (
            conformed.write.options(**WRITE_OPTIONS.get(table, {}))
            .mode("error")
            .parquet(folder)  # a path written to is not globbed
        )
        files = sorted(
            os.path.join(folder, name)
            for name in os.listdir(folder)
            if name.endswith(".parquet") and not name.startswith((".", "_"))
        )
        for name in os.listdir(folder):  # Spark's _SUCCESS and .crc files: no log names them
            if name.startswith((".", "_")):
                os.remove(os.path.join(folder, name))
        rows_per_file = {f: pq.read_metadata(f).num_rows for f in files}
        kept = [f for f in files if rows_per_file[f] > 0]
        for empty in set(files) - set(kept):
            os.remove(empty)
        return self._staged(table, mode, folder, kept, sum(rows_per_file.values()), began)

    def stage_through(
        self,
        table: str,
        produce: Callable[[FileWriter], DataFrame],
        mode: WriteMode = "overwrite",
    ) -> DataFrame:
        """Like `stage`, but the rows are written by the tasks that make them.

        `produce(writer)` returns a DataFrame of `FILES_SCHEMA` rows, one per file its
        tasks wrote with `writer`; collecting it runs the job. Files in the folder that
        no returned row names (a failed task attempt's) are removed, and so is the
        writer's scratch folder, whatever the job's outcome.
        """
        began = time.monotonic()
        writer = self.writer(table)
        try:
            written = {row["path"]: int(row["rows"]) for row in produce(writer).collect()}
        finally:
            self.remove_scratch(writer)
        return self.stage_files(table, writer, written, mode, began)

    def writer(self, table: str) -> FileWriter:
        """A `FileWriter` for the next content of `table` (its own folder, and a scratch
        folder for the job's intermediate files); `stage_files` stages what it wrote."""
        folder = self._next_folder(table)
        attempt = len(self.started[table])  # _next_folder counts this stage of the table
        scratch = os.path.join(
            self.warehouse.root, "_staging", self.run_id, f"_scratch-{table}-{attempt}"
        )
        return FileWriter(table, folder, _arrow_codec(self.warehouse.spark), scratch)

    def remove_scratch(self, writer: FileWriter) -> None:
        shutil.rmtree(writer.scratch, ignore_errors=True)
        _remove_empty_parents(writer.scratch, stop=self.warehouse.root)

    def stage_files(
        self,
        table: str,
        writer: FileWriter,
        written: Mapping[str, int],
        mode: WriteMode = "overwrite",
        began: float | None = None,
    ) -> DataFrame:
        """Stage the files `writer` wrote that `written` names (path -> rows) as the next
        content of `table`; the other files in its folder (a failed task attempt's, a
        superseded pass's) are removed."""
        began = time.monotonic() if began is None else began
        folder = writer.folder
        outside = [p for p in written if os.path.dirname(os.path.abspath(p)) != folder]
        if outside:
            raise WarehouseError(f"staging {table}: files written outside {folder}: {outside[:3]}")
        if os.path.isdir(folder):
            for name in os.listdir(folder):
                if os.path.join(folder, name) not in written:
                    os.remove(os.path.join(folder, name))
        return self._staged(table, mode, folder, sorted(written), sum(written.values()), began)

    def _next_folder(self, table: str) -> str:
        folder = self._folder(table)
        if table in self.staged:
            # a later stage of the same run rewrites the table (audit: clocks after ingest);
            # the earlier files may still be read while this one is written, so keep them
            # until the run ends
            self.superseded.append(self.staged.pop(table).folder)
            folder = f"{folder}-{len(self.superseded)}"
        self.started.setdefault(table, [])
        self.started[table].append(folder)
        return folder

    def _staged(
        self, table: str, mode: WriteMode, folder: str, files: list[str], rows: int, began: float
    ) -> DataFrame:
        self.staged[table] = _Staged(table, mode, folder, files, rows)
        log.info("staged %s: %d rows in %.1f s", table, rows, time.monotonic() - began)
        if self.on_staged is not None:
            self.on_staged(table)
        schema = tables.table_schema(table)
        if not files:
            return self.warehouse.spark.createDataFrame([], schema)
        return self.warehouse.spark.read.schema(schema).parquet(
            *[delta.spark_path(f) for f in files]
        )

    def staged_rows(self, table: str) -> int:
        return self.staged[table].rows

    def stage_arrow(
        self, table: str, rows: pa.Table, mode: WriteMode = "overwrite"
    ) -> DataFrame:
        """Stage `rows`, held by the driver, as the next content of `table`: written by a
        `FileWriter` here (the same files a task would write), no Spark job; no file when
        there is no row."""
        began = time.monotonic()
        writer = self.writer(table)
        written = writer.write(rows).to_pylist()
        return self.stage_files(
            table, writer, {row["path"]: int(row["rows"]) for row in written}, mode, began
        )

    def staged_values(self, table: str, column: str) -> bool:
        """Whether some row this run staged for `table` has `column` not null, from the
        files' footers (a value's statistics); a file whose footer cannot tell (no
        statistics, or nulls and empty lists only) has the column read on the driver."""
        for path in self.staged[table].files:
            footer = pq.ParquetFile(path).metadata
            leaves = [
                i
                for i in range(footer.num_columns)
                if footer.schema.column(i).path.split(".")[0] == column
            ]
            for group in range(footer.num_row_groups):
                for leaf in leaves:
                    stats = footer.row_group(group).column(leaf).statistics
                    if stats is None or stats.has_min_max:
                        return True  # a value (or no statistics: assume one)
            read = pq.read_table(path, columns=[column]).column(column)
            if read.null_count < len(read):
                return True
        return False

    def staged_nulls(self, table: str, column: str) -> int | None:
        """The nulls in flat `column` of what this run staged for `table`, from the files'
        footers (no read, no Spark job); None when a footer has no statistics for it."""
        nulls = 0
        for path in self.staged[table].files:
            footer = pq.ParquetFile(path).metadata
            leaf = [i for i in range(footer.num_columns) if footer.schema.column(i).path == column]
            if len(leaf) != 1:
                return None
            for group in range(footer.num_row_groups):
                stats = footer.row_group(group).column(leaf[0]).statistics
                if stats is None or not stats.has_null_count:
                    return None
                nulls += stats.null_count
        return nulls

    def staged_columns(self, table: str, columns: list[str]) -> pa.Table:
        """`columns` of what this run staged for `table`, read from its files on the driver
        (pyarrow, no Spark job): for the counts a stage reports on a table it just wrote."""
        staged = self.staged[table]
        schema = tables.arrow_schema(table)
        wanted = pa.schema([schema.field(name) for name in columns])
        if not staged.files:
            return wanted.empty_table()
        parts = [pq.read_table(f, columns=columns) for f in staged.files]
        return pa.concat_tables([part.cast(wanted) for part in parts])

    def staged_value_counts(self, table: str, column: str) -> Counter[Any]:
        """Rows per value (None: null) of flat `column` staged for `table`, counted file by
        file on the driver: it holds one file's column at a time, whatever the table's size."""
        counts: Counter[Any] = Counter()
        for path in self.staged[table].files:
            values = pq.read_table(path, columns=[column]).column(column)
            for item in pc.value_counts(values).to_pylist():
                counts[item["values"]] += int(item["counts"])
        return counts

    def commit(self) -> dict[str, int]:
        """Commit every staged table (one Delta transaction each); return their versions.

        Without a `runs` row these versions are not committed for readers of the
        ledger: jobs call `commit_run`.
        """
        for staged in self.staged.values():
            if staged.table in self.versions:
                continue
            began = time.monotonic()
            if self.warehouse.backend == "deltalake":
                version = self._commit_deltalake(staged)
                if version is None:
                    continue  # an incremental run that changes nothing in this table
                self.versions[staged.table] = version
            else:
                self.versions[staged.table] = self._commit_delta_spark(staged)
            log.info(
                "committed %s version %d in %.1f s",
                staged.table,
                self.versions[staged.table],
                time.monotonic() - began,
            )
            if self.on_committed is not None:
                self.on_committed(staged.table)
        self.committed = True
        for folder in self.superseded:
            shutil.rmtree(folder, ignore_errors=True)
        self.superseded.clear()
        return dict(self.versions)

    def commit_run(self, row: Callable[[dict[str, int]], dict[str, object]]) -> int:
        """The commit protocol: the intent, every table, the `runs` row, intent removed.

        `row(versions)` builds the run's `runs` row from the versions written. The
        intent (`_causal/pending/<run id>.json`: tables, base versions and the row's
        fields) lets the next run roll this one forward if it dies after its last table
        commit and before its `runs` row. Returns the runs version.
        """
        intent = self._write_intent(row({}))
        if self.on_committed is not None:
            self.on_committed("intent")
        self.commit()
        record = row(dict(self.versions))
        version = self.warehouse.ledger.append(record)
        self.versions[tables.RUNS] = version
        if self.on_committed is not None:
            self.on_committed(tables.RUNS)
        os.remove(intent)
        return version

    def _write_intent(self, row: dict[str, object]) -> str:
        folder = os.path.join(self.warehouse.root, PENDING)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{self.run_id}.json")
        intent = {
            "run_id": self.run_id,
            "tables": sorted(self.staged),
            "base": {t: self.base.get(t) for t in sorted(self.staged)},
            "row": row,
        }
        temporary = path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(intent, handle, default=str)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        return path

    def _base(self, table: str) -> int | None:
        return self.base.get(table, self.warehouse.version(table))

    def _commit_deltalake(self, staged: _Staged) -> int | None:
        table_path = self.warehouse.path(staged.table)
        base = self._base(staged.table)
        files = list(staged.files)
        removed: list[delta.DataFile] = []
        if staged.mode == "replace" and base is not None and base != NEW_TABLE:
            removed, kept = self._without_traces(staged, base)
            files.extend(kept)
            if not files and not removed:
                return None
        return commit_files(
            table_path,
            staged.table,
            files,
            self.run_id,
            staged.mode,
            remove=removed,
            base=base,
        )

    def _without_traces(self, staged: _Staged, base: int) -> tuple[list[delta.DataFile], list[str]]:
        """The files of `base` holding rows of `replace_traces`, and new files with their
        other rows (written next to the run's staged files)."""
        import pyarrow.compute as pc

        traces = self.replace_traces
        if not traces:
            return [], []
        candidates = delta.overlapping(
            delta.data_files(self.warehouse.path(staged.table), base), traces
        )
        wanted = pa.array(traces, pa.string())
        removed: list[delta.DataFile] = []
        kept: list[str] = []
        writer = FileWriter(staged.table, staged.folder, _arrow_codec(self.warehouse.spark))
        for candidate in candidates:
            ids = pq.read_table(candidate.path, columns=["trace_id"]).column("trace_id")
            hit = pc.is_in(ids, value_set=wanted)
            if not pc.any(hit).as_py():
                continue
            removed.append(candidate)
            rows = pq.read_table(candidate.path)
            rest = rows.filter(pc.invert(pc.fill_null(hit, False)))
            if rest.num_rows:
                kept.extend(writer.write(rest).column("path").to_pylist())
        return removed, kept

    def _commit_delta_spark(self, staged: _Staged) -> int:
        spark = self.warehouse.spark
        schema = tables.table_schema(staged.table)
        if staged.mode == "replace":
            raise WarehouseError("incremental audits need the deltalake sink (sink.format)")
        data = (
            spark.read.schema(schema).parquet(*[delta.spark_path(f) for f in staged.files])
            if staged.files
            else spark.createDataFrame([], schema)
        )
        (
            data.write.format("delta")
            .mode(staged.mode)
            .option("overwriteSchema", "true" if staged.mode == "overwrite" else "false")
            .option("userMetadata", json.dumps({delta.RUN_ID_KEY: self.run_id}))
            .save(self.warehouse.path(staged.table))
        )
        shutil.rmtree(staged.folder, ignore_errors=True)
        version = self.warehouse.version(staged.table)
        assert version is not None
        return version

    def abort(self) -> None:
        """Remove the run's staged files, except any file a version in the log names.

        A commit that failed part-way may still have written its version (the error came
        after the log entry): its files stay, and the next run rolls the version back.
        """
        for folder in self.superseded:
            shutil.rmtree(folder, ignore_errors=True)
        for table, folders in self.started.items():
            named = delta.referenced_files(self.warehouse.path(table))
            for folder in folders:
                _remove_unnamed(folder, named)
                _remove_empty_parents(folder, stop=self.warehouse.root)


def _remove_unnamed(folder: str, named: set[str]) -> list[str]:
    """Remove the files under `folder` that no log entry names; return them."""
    removed: list[str] = []
    if not os.path.isdir(folder):
        return removed
    for parent, _, names in os.walk(folder, topdown=False):
        for name in names:
            file = os.path.join(parent, name)
            if file not in named:
                os.remove(file)
                removed.append(file)
        if not os.listdir(parent):
            os.rmdir(parent)
    return removed


def _remove_empty_parents(folder: str, stop: str) -> None:
    """Remove the empty folders above `folder` (a new table's folder without a log)."""
    parent = os.path.dirname(folder)
    while parent.startswith(stop) and parent != stop and os.path.isdir(parent):
        if os.listdir(parent):
            return
        os.rmdir(parent)
        parent = os.path.dirname(parent)
