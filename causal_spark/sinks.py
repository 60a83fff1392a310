"""Delta sink: every table a job writes goes through one `RunTransaction`.

A run first *stages* each table: Spark writes its Parquet files in parallel
(conformed to the declared schema), and later stages of the same run read the
staged files back instead of recomputing them. Only when every stage has
succeeded does the run *commit*: one Delta transaction per table, then the
`runs` row that names the versions written. A run that fails before that point
leaves no new table version and removes its staged files.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from causal_spark import tables
from causal_spark.config import SinkFormat

log = logging.getLogger(__name__)
WriteMode = Literal["overwrite", "append"]
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


class WarehouseError(ValueError):
    """A table is missing, unreadable by this backend, or a commit was refused."""


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
            store_schema=False,  # as Spark writes them: readers see the Parquet types only
        )
        return pa.Table.from_pylist([{"path": path, "rows": conformed.num_rows}], schema=files)


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


class Warehouse:
    """A folder of Delta tables, one sub-folder per table."""

    def __init__(self, spark: SparkSession, root: str | Path, backend: SinkFormat = "auto"):
        self.spark = spark
        self.root = str(Path(root).resolve())
        self.backend = resolve_backend(spark, backend)

    def path(self, table: str) -> str:
        return os.path.join(self.root, table)

    def exists(self, table: str) -> bool:
        return os.path.isdir(os.path.join(self.path(table), "_delta_log"))

    def version(self, table: str) -> int | None:
        if not self.exists(table):
            return None
        if self.backend == "deltalake":
            from deltalake import DeltaTable

            return int(DeltaTable(self.path(table)).version())
        history = self.spark.sql(f"DESCRIBE HISTORY delta.`{self.path(table)}` LIMIT 1")
        return int(history.collect()[0]["version"])

    def read(self, table: str) -> DataFrame:
        """The current version of `table` as a DataFrame with its declared schema."""
        if not self.exists(table):
            raise WarehouseError(
                f"table '{table}' does not exist under {self.root}; "
                "run the job that writes it first"
            )
        schema = tables.table_schema(table)
        if self.backend == "delta-spark":
            return self.spark.read.format("delta").load(self.path(table))
        from deltalake import DeltaTable

        delta = DeltaTable(self.path(table))
        features = set(delta.protocol().reader_features or [])
        unsupported = features - {"timestampNtz"}
        if unsupported:
            raise WarehouseError(
                f"table '{table}' uses Delta reader features {sorted(unsupported)} that the "
                "embedded reader does not handle; run with delta-spark's jars"
            )
        files = [uri.removeprefix("file://") for uri in delta.file_uris()]
        if not files:
            return self.spark.createDataFrame([], schema)
        return self.spark.read.schema(schema).parquet(*files)

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
    warehouse: Warehouse
    run_id: str
    staged: dict[str, _Staged] = field(default_factory=dict)
    started: dict[str, list[str]] = field(default_factory=dict)
    superseded: list[str] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)
    committed: bool = False
    on_staged: Callable[[str], None] | None = None

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
        conformed.write.options(**WRITE_OPTIONS.get(table, {})).mode("error").parquet(folder)
        files = sorted(
            os.path.join(folder, name)
            for name in os.listdir(folder)
            if name.endswith(".parquet") and not name.startswith((".", "_"))
        )
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
        folder = self._next_folder(table)
        attempt = len(self.started[table])  # _next_folder counts this stage of the table
        scratch = os.path.join(
            self.warehouse.root, "_staging", self.run_id, f"_scratch-{table}-{attempt}"
        )
        writer = FileWriter(table, folder, _arrow_codec(self.warehouse.spark), scratch)
        try:
            written = {row["path"]: int(row["rows"]) for row in produce(writer).collect()}
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            _remove_empty_parents(scratch, stop=self.warehouse.root)
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
        return self.warehouse.spark.read.schema(schema).parquet(*files)

    def staged_rows(self, table: str) -> int:
        return self.staged[table].rows

    def commit(self) -> dict[str, int]:
        """Commit every staged table (one Delta transaction each); return their versions."""
        for staged in self.staged.values():
            if staged.table in self.versions:
                continue
            began = time.monotonic()
            if self.warehouse.backend == "deltalake":
                self.versions[staged.table] = self._commit_deltalake(staged)
            else:
                self.versions[staged.table] = self._commit_delta_spark(staged)
            log.info(
                "committed %s version %d in %.1f s",
                staged.table,
                self.versions[staged.table],
                time.monotonic() - began,
            )
        self.committed = True
        for folder in self.superseded:
            shutil.rmtree(folder, ignore_errors=True)
        self.superseded.clear()
        return dict(self.versions)

    def _commit_deltalake(self, staged: _Staged) -> int:
        from deltalake import DeltaTable
        from deltalake import Schema as DeltaSchema
        from deltalake.transaction import (
            AddAction,
            CommitProperties,
            RemoveAction,
            create_table_with_add_actions,
        )

        table_path = self.warehouse.path(staged.table)
        adds: list[AddAction | RemoveAction] = []
        for file in staged.files:
            stat = os.stat(file)
            rows = pq.read_metadata(file).num_rows
            adds.append(
                AddAction(
                    path=os.path.relpath(file, table_path),
                    size=stat.st_size,
                    partition_values={},
                    modification_time=int(stat.st_mtime * 1000),
                    data_change=True,
                    stats=json.dumps({"numRecords": rows}),
                )
            )
        schema = tables.arrow_schema(staged.table)
        properties = CommitProperties(custom_metadata={"causal_spark.run_id": self.run_id})
        if self.warehouse.exists(staged.table):
            DeltaTable(table_path).create_write_transaction(
                adds, mode=staged.mode, schema=schema, commit_properties=properties
            )
        else:
            create_table_with_add_actions(
                table_path,
                DeltaSchema.from_arrow(schema),
                [a for a in adds if isinstance(a, AddAction)],
                mode="error",
                name=staged.table,
                commit_properties=properties,
            )
        return int(DeltaTable(table_path).version())

    def _commit_delta_spark(self, staged: _Staged) -> int:
        spark = self.warehouse.spark
        schema = tables.table_schema(staged.table)
        data = (
            spark.read.schema(schema).parquet(*staged.files)
            if staged.files
            else spark.createDataFrame([], schema)
        )
        (
            data.write.format("delta")
            .mode(staged.mode)
            .option("overwriteSchema", "true" if staged.mode == "overwrite" else "false")
            .option("userMetadata", json.dumps({"causal_spark.run_id": self.run_id}))
            .save(self.warehouse.path(staged.table))
        )
        shutil.rmtree(staged.folder, ignore_errors=True)
        version = self.warehouse.version(staged.table)
        assert version is not None
        return version

    def abort(self) -> None:
        """Remove staged files that no commit references; committed tables are untouched."""
        for folder in self.superseded:
            shutil.rmtree(folder, ignore_errors=True)
        for table, folders in self.started.items():
            if table in self.versions:
                continue
            for folder in folders:
                shutil.rmtree(folder, ignore_errors=True)
                _remove_empty_parents(folder, stop=self.warehouse.root)


def _remove_empty_parents(folder: str, stop: str) -> None:
    """Remove the empty folders above `folder` (a new table's folder without a log)."""
    parent = os.path.dirname(folder)
    while parent.startswith(stop) and parent != stop and os.path.isdir(parent):
        if os.listdir(parent):
            return
        os.rmdir(parent)
        parent = os.path.dirname(parent)
