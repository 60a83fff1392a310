"""Delta per-file statistics (`add.stats`) of the Parquet files a run commits.

Readers skip a file when its statistics say no row can match a predicate, so the
statistics must never claim more than the file holds. delta-rs (1.6.6, the pyarrow
dataset behind `DeltaTable.to_pyarrow_dataset` / `to_pyarrow_table(filters=...)`)
turns every primitive column into a guarantee `min <= col <= max` that pyarrow trusts
outright, and a column that is absent from `minValues`/`maxValues` while the file has
them becomes `col >= null`, which skips the file for any predicate on that column
(delta-rs issue 3173). So a file gets either:

- `numRecords`, `nullCount` of every primitive column, and `minValues`/`maxValues` of
  every primitive column that has a non-null value; or, when one column's range
  cannot be written truthfully (a NaN or an infinity in a floating column: JSON has
  neither, and NaN compares false with every bound),
- `numRecords` and `nullCount` only (no `minValues`/`maxValues` key at all: readers
  then read the file whatever the predicate).

Nested columns (arrays, maps, structs) are left out; an all-null column has no range.
Bounds are wide where the protocol allows: strings are cut to `STRING_PREFIX`
characters (the cut maximum has its last character raised, so it stays above every
value that shares the prefix), timestamps go to milliseconds (the minimum down, the
maximum up), a zero minimum is written -0.0 and a zero maximum +0.0.

The values come from the Parquet footer's column statistics (no pass over the data);
a column chunk without them (a string over the writer's statistics size limit, an
INT96 timestamp) is read once to compute them. Parquet statistics leave NaN out of a
floating column's range (parquet-cpp) or record it as the maximum (parquet-mr, Spark's
writer); `causal_spark.io.sinks.FileWriter` writes no statistics for a floating column
that holds a NaN, so that such a column is read here and found out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# Delta Spark's default prefix length for string statistics (dataSkippingStringPrefixLength)
STRING_PREFIX = 32
_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ColumnStats:
    """One column of one file: its nulls and its smallest and largest values (None: every
    value is null), or `bounded=False` when its range cannot be written (NaN, infinity)."""

    nulls: int
    low: Any = None
    high: Any = None
    bounded: bool = True


def has_range(data_type: pa.DataType) -> bool:
    """Whether a column of this type gets min/max statistics (primitive, not nested)."""
    return not pa.types.is_nested(data_type)


def file_stats(file: str, schema: pa.Schema) -> dict[str, Any]:
    """The Delta `stats` object of Parquet file `file`, whose table has `schema`."""
    metadata = pq.read_metadata(file)
    stats: dict[str, Any] = {"numRecords": metadata.num_rows}
    if metadata.num_rows == 0:
        return stats
    leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    nulls: dict[str, int] = {}
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    bounded = True
    for field in schema:
        if not has_range(field.type):
            continue
        index = leaves.get(field.name)
        if index is None:
            return stats  # a column the file lacks: nothing is claimed about the file
        column = footer_stats(metadata, index, field.type) or data_stats(file, field)
        nulls[field.name] = column.nulls
        if not column.bounded:
            bounded = False
            continue
        if column.low is None:
            continue  # every value null: no range, and nullCount says so
        bounds = json_bounds(field.type, column.low, column.high)
        if bounds is None:
            bounded = False
            continue
        lows[field.name], highs[field.name] = bounds
    if bounded and lows:
        stats["minValues"] = lows
        stats["maxValues"] = highs
    stats["nullCount"] = nulls
    return stats


def footer_stats(
    metadata: pq.FileMetaData, index: int, data_type: pa.DataType
) -> ColumnStats | None:
    """A column's statistics from the file's footer (None: some chunk has none, or its
    range holds a NaN or an infinity, whose count only the values tell)."""
    unit = _time_unit(metadata.schema.column(index)) if pa.types.is_timestamp(data_type) else ""
    if unit is None:
        return None  # an INT96 or other legacy timestamp: computed from the values
    nulls = 0
    low: Any = None
    high: Any = None
    for group in range(metadata.num_row_groups):
        chunk = metadata.row_group(group).column(index)
        statistics = chunk.statistics
        if statistics is None or not statistics.has_null_count:
            return None
        nulls += statistics.null_count
        if statistics.null_count == chunk.num_values:
            continue  # an all-null chunk has no range
        if not statistics.has_min_max:
            return None
        if unit:
            chunk_low: Any = _micros(statistics.min_raw, unit, up=False)
            chunk_high: Any = _micros(statistics.max_raw, unit, up=True)
        else:
            chunk_low, chunk_high = _value(statistics.min), _value(statistics.max)
        if pa.types.is_floating(data_type) and not (
            math.isfinite(chunk_low) and math.isfinite(chunk_high)
        ):
            return None
        low = chunk_low if low is None else min(low, chunk_low)
        high = chunk_high if high is None else max(high, chunk_high)
    return ColumnStats(nulls, low, high)


def data_stats(file: str, field: pa.Field) -> ColumnStats:
    """A column's statistics computed from its values (one read of that column)."""
    values = pq.read_table(file, columns=[field.name]).column(0)
    nulls = values.null_count
    if nulls == len(values):
        return ColumnStats(nulls)
    if pa.types.is_floating(values.type):
        finite = pc.is_finite(values)  # false for NaN and infinities, null for null
        if not pc.all(finite).as_py():
            return ColumnStats(nulls, bounded=False)
    extremes = pc.min_max(values)
    if pa.types.is_timestamp(values.type):
        unit = values.type.unit
        low = _micros(extremes["min"].cast(pa.int64()).as_py(), unit, up=False)
        high = _micros(extremes["max"].cast(pa.int64()).as_py(), unit, up=True)
        return ColumnStats(nulls, low, high)
    return ColumnStats(nulls, extremes["min"].as_py(), extremes["max"].as_py())


def json_bounds(data_type: pa.DataType, low: Any, high: Any) -> tuple[Any, Any] | None:
    """`low` and `high` as the protocol writes them for a column of `data_type`, widened
    where the format cuts them (None: this type has no range the readers share)."""
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return min_string(_text(low)), max_string(_text(high))
    if pa.types.is_boolean(data_type):
        return bool(low), bool(high)
    if pa.types.is_integer(data_type):
        return int(low), int(high)
    if pa.types.is_floating(data_type):
        smallest, largest = float(low), float(high)
        if not (math.isfinite(smallest) and math.isfinite(largest)):
            return None
        # -0.0 and +0.0 compare equal; written this way they bound both under any order
        return (-0.0 if smallest == 0 else smallest), (0.0 if largest == 0 else largest)
    if pa.types.is_timestamp(data_type):  # low and high in microseconds since the epoch
        zone = "Z" if data_type.tz is not None else ""
        try:
            return _iso_millis(low // 1000) + zone, _iso_millis(-(-high // 1000)) + zone
        except OverflowError:
            return None  # beyond year 9999: no ISO-8601 bound to write
    if pa.types.is_date32(data_type):
        return str(low), str(high)
    return None


def min_string(value: str) -> str:
    """A lower bound of `value` at most `STRING_PREFIX` characters long: its prefix."""
    return value[:STRING_PREFIX]


def max_string(value: str) -> str:
    """An upper bound of every string up to `value`, at most `STRING_PREFIX` characters.

    A longer value is cut and the last character that can be raised is raised by one
    code point (skipping surrogates): every string that starts with the cut prefix is
    then below it, in code-point order, which is UTF-8's byte order.
    """
    if len(value) <= STRING_PREFIX:
        return value
    prefix = value[:STRING_PREFIX]
    for cut in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[cut]) + 1
        if code in _SURROGATES:
            code = _SURROGATES.stop
        if code <= _MAX_CODE_POINT:
            return prefix[:cut] + chr(code)
    return value  # every character is the last code point: no shorter bound exists


def _value(statistic: object) -> Any:
    return statistic.decode("utf-8") if isinstance(statistic, bytes) else statistic


def _text(value: object) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


_PER_MICRO = {"s": 1_000_000, "ms": 1_000, "us": 1}


def _time_unit(column: pq.ColumnSchema) -> str | None:
    """The pyarrow unit of a Parquet INT64 timestamp column (None: another encoding)."""
    if column.physical_type != "INT64":
        return None
    unit = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}
    described = str(column.logical_type)
    for name, short in unit.items():
        if f"timeUnit={name}" in described:
            return short
    return None


def _micros(value: int, unit: str, up: bool) -> int:
    """`value` in `unit` as microseconds, rounded up or down."""
    if unit == "ns":
        return -(-value // 1000) if up else value // 1000
    return value * _PER_MICRO[unit]


def _iso_millis(millis: int) -> str:
    moment = _EPOCH + timedelta(milliseconds=millis)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
