"""Parquet files read in Python tasks by row ranges, as raw rows without text (no Spark).

A task reads one range of rows of one row group (at most RANGE_ROWS: a file of one large
row group is several tasks; each decodes the group's pages up to its range's end and
keeps its own rows: pyarrow 26 reads no row range and no page index, so the pages before
a range cannot be skipped; string columns whose pages are all dictionary-coded are
decoded as their codes, `dictionary_columns`, about half the cost of the strings, and
only the kept rows become strings), only the input fields' columns (matched by name in
any case, as the Spark read does), and gives them as `events.ParquetReader` gives them
without text:
`line` the row's position in the file plus one (Spark's `_metadata.row_index` + 1), the
typed numbers typed (`io.raw.TYPED_FIELDS`: `seq`, `size_bytes` as longs, `ts` as a
double), every other field its string. Only files whose input fields are all strings or
such numbers are read so (`readable`); the others stay with Spark's read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from causal_spark import columns as C

INPUT_FIELDS = C.INPUT_FIELDS
FILE_ID = "file_id"
# rows one task reads at most (of one row group; a task decodes the group's pages up to
# its range's end, so smaller ranges of a large group decode more)
RANGE_ROWS = 1_000_000
# rows below which an input is not cut further to give every core a task
SPLIT_ROWS = 100_000
BATCH_ROWS = 65_536
_NUMBERS = {C.SEQ: pa.int64(), C.SIZE_BYTES: pa.int64(), C.TS: pa.float64()}
_DICTIONARY_CODED = frozenset({"PLAIN_DICTIONARY", "RLE_DICTIONARY"})


def dictionary_columns(group: pq.RowGroupMetaData, names: Sequence[str]) -> list[str]:
    """Of the string columns `names`, those whose pages in `group` are all dictionary-coded,
    as far as the chunk's encodings tell: a dictionary encoding and no PLAIN. parquet-mr
    (Spark) lists PLAIN only for a chunk that fell back to plain pages; parquet-cpp lists
    it for its dictionary page too, so its files are read as before. Reading a plain page
    as a dictionary would hash every value (correct, but slower than the strings)."""
    wanted = set(names)
    found = []
    for i in range(group.num_columns):
        column = group.column(i)
        if column.path_in_schema not in wanted or column.physical_type != "BYTE_ARRAY":
            continue
        encodings = set(column.encodings)
        if encodings & _DICTIONARY_CODED and "PLAIN" not in encodings:
            found.append(column.path_in_schema)
    return found


def _kept(name: str, given: pa.DataType) -> pa.DataType | None:
    """The type a field of this Parquet type is given as (None: not one read here)."""
    if name in _NUMBERS:
        # Spark reads a uint64 as a decimal (a string to ingest): not here
        integer = pa.types.is_integer(given) and given != pa.uint64()
        if integer or (name == C.TS and given == pa.float64()):
            return _NUMBERS[name]
        return None
    return pa.string() if given in (pa.string(), pa.large_string()) else None


def columns_of(schema: pa.Schema) -> dict[str, tuple[str, pa.DataType]] | None:
    """Of a file's schema: each input field present, its column and the type it is given
    as; None when a field's type is not read here or two columns name one field."""
    found: dict[str, tuple[str, pa.DataType]] = {}
    for f in schema:
        name = f.name.lower()
        if name not in INPUT_FIELDS:
            continue
        kept = _kept(name, f.type)
        if kept is None or name in found:
            return None
        found[name] = (f.name, kept)
    return found


def raw_schema(fields: dict[str, tuple[str, pa.DataType]]) -> pa.Schema:
    """The raw-row columns these tasks give (the field's type where given typed)."""
    return pa.schema(
        [(FILE_ID, pa.int32()), (C.LINE, pa.int64()), (C.RAW, pa.string())]
        + [(n, fields[n][1] if n in fields else pa.string()) for n in INPUT_FIELDS]
    )


@dataclass(frozen=True)
class Ranges:
    """Row ranges of Parquet files of one schema (`io.raw.TaskSource`): (file_id, path,
    row group, first row of the file's group, start, stop) each, in the group."""

    ranges: tuple[tuple[int, str, int, int, int, int], ...]
    fields: tuple[tuple[str, str, pa.DataType], ...]  # field, column, type given as

    @property
    def tasks(self) -> int:
        return len(self.ranges)

    @property
    def schema(self) -> pa.Schema:
        return raw_schema({n: (c, t) for n, c, t in self.fields})

    def file_of(self, index: int) -> int:
        return self.ranges[index][0]

    def rows(self, index: int) -> Iterator[pa.RecordBatch]:
        file_id, path, group, offset, start, stop = self.ranges[index]
        schema = self.schema
        names = [c for _, c, _ in self.fields]
        opened = pq.ParquetFile(path)
        strings = [c for _, c, t in self.fields if t == pa.string()]
        coded = dictionary_columns(opened.metadata.row_group(group), strings)
        if coded:  # the rows before `start` are decoded too: as codes, they cost less
            opened = pq.ParquetFile(path, metadata=opened.metadata, read_dictionary=coded)
        at = 0
        for batch in opened.iter_batches(
            batch_size=BATCH_ROWS, row_groups=[group], columns=names, use_threads=False
        ):
            lo, hi = max(start - at, 0), min(stop - at, batch.num_rows)
            at += batch.num_rows
            if hi <= lo:
                if at >= stop:
                    return
                continue
            part = batch.slice(lo, hi - lo)
            n = part.num_rows
            first = offset + at - batch.num_rows + lo + 1
            given = {
                FILE_ID: pa.array(np.full(n, file_id, dtype=np.int32)),
                C.LINE: pa.array(np.arange(first, first + n, dtype=np.int64)),
            }
            for name, column, kept in self.fields:
                given[name] = part.column(column).cast(kept, safe=False)
            yield pa.RecordBatch.from_arrays(
                [given[f.name] if f.name in given else pa.nulls(n, f.type) for f in schema],
                schema=schema,
            )
            if at >= stop:
                return


def plan_ranges(
    files: Sequence[tuple[int, str]],
    fields: dict[str, tuple[str, pa.DataType]],
    cores: int = 1,
) -> Ranges:
    """The row ranges of `files` ((file_id, path), of one schema read here): at most
    RANGE_ROWS rows each, and at most an even share of the rows over `cores` (the cores
    the job gets), but no smaller than SPLIT_ROWS for that: 10^6 rows in one row group
    were one task, on one core of two."""
    groups: list[tuple[int, str, int, int, int]] = []  # file_id, path, group, offset, rows
    for file_id, path in files:
        meta = pq.ParquetFile(path).metadata
        offset = 0
        for group in range(meta.num_row_groups):
            rows = meta.row_group(group).num_rows
            groups.append((file_id, path, group, offset, rows))
            offset += rows
    total = sum(g[4] for g in groups)
    most = min(RANGE_ROWS, max(SPLIT_ROWS, -(-total // max(1, cores))))
    ranges: list[tuple[int, str, int, int, int, int]] = []
    for file_id, path, group, offset, rows in groups:
        count = max(1, -(-rows // most))
        bounds = [rows * i // count for i in range(count + 1)]
        for i in range(count):
            if bounds[i + 1] > bounds[i]:
                ranges.append((file_id, path, group, offset, bounds[i], bounds[i + 1]))
    order = tuple((n, c, t) for n, (c, t) in fields.items())
    return Ranges(tuple(ranges), order)
