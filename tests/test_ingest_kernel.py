"""The array helpers of ingest's kernels against brute-force oracles (NumPy, no Spark)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from causal_spark import columns as C
from causal_spark.ingest import kernel
from causal_spark.ingest.rows_kernel import PROCS, encoded, sort_order, values_at

BIG = np.iinfo(np.int64)


def _keys(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    return [
        np.zeros(n, dtype=np.int64),  # constant
        rng.integers(0, 3, n),
        rng.random(n) < 0.3,  # bool
        rng.integers(-5, 5, n),
        rng.integers(0, 1 << 40, n),  # wide: forces dense ranks of the prefix
        rng.integers(BIG.min, BIG.max, n, endpoint=True),  # too wide for any merge
        rng.integers(0, 4, n),
    ]


@pytest.mark.parametrize("seed", range(6))
def test_sort_order_is_lexsort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    keys = _keys(rng, n)
    picked = [keys[i] for i in rng.permutation(len(keys))[: int(rng.integers(1, len(keys) + 1))]]
    expected = np.lexsort(tuple(reversed(picked))) if n else np.zeros(0, dtype=np.int64)
    assert np.array_equal(sort_order(*picked), expected)


def test_sort_order_of_narrow_keys_is_lexsort() -> None:
    rng = np.random.default_rng(7)
    keys = [rng.integers(0, 64, 5000), rng.integers(0, 3000, 5000), rng.integers(0, 2, 5000)]
    assert np.array_equal(sort_order(*keys), np.lexsort(tuple(reversed(keys))))


def test_values_at_gives_back_the_values_with_nulls() -> None:
    column = pa.chunked_array([["b", None, "a"], ["b", "c", None]], pa.string())
    codes, values = encoded(column)
    picked = np.array([5, 0, 2, 1, 4, 3])
    assert values_at(values, codes[picked]).to_pylist() == [column.to_pylist()[i] for i in picked]
    assert values_at(values, codes[:0]).to_pylist() == []


@pytest.mark.parametrize("dense", [True, False])
def test_with_pidx_numbers_each_traces_processes_by_name(
    dense: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not dense:  # the join taken for many traces and names
        monkeypatch.setattr(kernel, "DENSE_PIDX", 0)
    rng = np.random.default_rng(11)
    names = ["p0", "p1", "q", "r", None]
    procs = pa.table(
        {
            C.TRACE_ID: [f"t{rng.integers(0, 3)}" for _ in range(12)],
            C.PROCESS: [names[i] for i in rng.integers(0, 4, 12)],
        },
        schema=PROCS,
    )
    rows = pa.table(
        {
            C.TRACE_ID: [f"t{rng.integers(0, 4)}" for _ in range(200)],
            "a": [names[i] for i in rng.integers(0, 5, 200)],
            "b": [names[i] for i in rng.integers(2, 5, 200)],
        }
    )
    known: dict[tuple[str, str], int] = {}
    for trace in sorted(set(procs[C.TRACE_ID].to_pylist())):
        own = sorted({p for t, p in zip(*procs.to_pydict().values(), strict=True) if t == trace})
        known.update({(trace, p): i for i, p in enumerate(own)})
    out = kernel.with_pidx(rows, procs, [("a", "a_pidx"), ("b", "b_pidx")])
    for column in ("a", "b"):
        expected = [
            known.get((t, p))
            for t, p in zip(rows[C.TRACE_ID].to_pylist(), rows[column].to_pylist(), strict=True)
        ]
        assert out[f"{column}_pidx"].to_pylist() == expected
        assert out[f"{column}_pidx"].type == pa.int32()
    assert kernel.with_pidx(rows, PROCS.empty_table(), [("a", "x")])["x"].null_count == 200
