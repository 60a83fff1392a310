"""Arrow <-> NumPy helpers shared by the grouped-UDF adapters (clocks, anomalies).

Each UDF takes Arrow tables from Spark, hands NumPy arrays to a compiled kernel
and builds Arrow columns from what the kernel returns; these are the few
conversions they all need, written once. No Spark here.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def int_column(table: pa.Table, name: str, fill: int = -1) -> np.ndarray:
    """Column `name` of `table` as int64, nulls as `fill`."""
    column = table.column(name)
    if column.null_count:
        column = column.fill_null(fill)
    values: np.ndarray = column.to_numpy().astype(np.int64)
    return values


def matrix(vectors: pa.ChunkedArray | pa.Array, n: int, dtype: type = np.int32) -> np.ndarray:
    """A list<int> column whose rows all have n entries -> a rows x n matrix."""
    if isinstance(vectors, pa.ChunkedArray):
        vectors = vectors.combine_chunks()
    if len(vectors) == 0:
        return np.zeros((0, n), dtype=dtype)
    flat: np.ndarray = pc.list_flatten(vectors).to_numpy(zero_copy_only=False).astype(dtype)
    return flat.reshape(len(vectors), n)


def list_matrix(rows: np.ndarray, kind: pa.DataType | None = None) -> pa.Array:
    """A rows x n matrix -> a list<element: kind> column (int32 by default), from one buffer."""
    kind = kind or pa.int32()
    count, n = rows.shape
    offsets = pa.array(np.arange(0, count * n + 1, n, dtype=np.int32))
    return pa.ListArray.from_arrays(
        offsets, pa.array(rows.reshape(-1), kind), type=pa.list_(pa.field("element", kind))
    )


def lists(
    values: pa.Array | np.ndarray, offsets: np.ndarray, kind: pa.DataType | None = None
) -> pa.Array:
    """Rows values[offsets[i]:offsets[i + 1]] as a list<element: kind> column (int32 offsets).

    kind: the element type (default: that of `values`, which must then be an Arrow array).
    """
    if kind is None:
        if not isinstance(values, pa.Array):
            raise TypeError("lists: give the element type of NumPy values")
        kind = values.type
    elements = values if isinstance(values, pa.Array) else pa.array(values, kind)
    return pa.ListArray.from_arrays(
        pa.array(np.asarray(offsets).astype(np.int32, copy=False)),
        elements,
        type=pa.list_(pa.field("element", kind)),
    )
