"""The array helpers of ingest's kernels against brute-force oracles (NumPy, no Spark)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from causal_spark import columns as C
from causal_spark.ingest import kernel
from causal_spark.ingest.rows_kernel import (
    PROCS,
    buckets_of,
    encoded,
    sort_order,
    string_hashes,
    values_at,
)

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


def _hash_oracle(value: str | None) -> int:
    """`string_hashes` of one string, byte by byte: sum of (byte + 1) * P^(i + 1), mod 2^64."""
    total, power = 0, 1
    for byte in (value or "").encode("utf-8"):
        power = power * 1099511628211 % (1 << 64)
        total = (total + (byte + 1) * power) % (1 << 64)
    return total


def _strings(rng: np.random.Generator, n: int) -> list[str | None]:
    alphabet = ["a", "b", "Z", "0", "-", "é", "中", "\u0000", " "]
    out: list[str | None] = []
    for _ in range(n):
        if rng.random() < 0.1:
            out.append(None)
        else:
            out.append("".join(rng.choice(alphabet, int(rng.integers(0, 12)))))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_string_hashes_are_the_polynomial_of_the_bytes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = _strings(rng, int(rng.integers(0, 200)))
    cut = int(rng.integers(0, len(values) + 1))
    # chunked, and a slice with an offset: the hash reads each string's own bytes
    chunked = pa.chunked_array([pa.array(values[:cut], pa.string()), pa.array(values[cut:])])
    expected = np.array([_hash_oracle(v) for v in values], dtype=np.uint64)
    assert np.array_equal(string_hashes(chunked), expected)
    assert np.array_equal(string_hashes(pa.array(values).slice(cut)), expected[cut:])


@pytest.mark.parametrize("distinct", [True, False])
def test_string_hashes_of_many_values_are_the_polynomial_of_the_bytes(distinct: bool) -> None:
    # more values than string_hashes looks at to choose: mostly distinct ones (message ids,
    # hashed value by value) or a few repeated ones (hashed once each), with nulls
    rng = np.random.default_rng(16)
    pool = _strings(rng, 50)
    values = [
        (f"m-{i}-{pool[i % 50]}" if distinct else pool[int(rng.integers(0, 50))])
        if rng.random() > 0.05
        else None
        for i in range(9000)
    ]
    expected = np.array([_hash_oracle(v) for v in values], dtype=np.uint64)
    chunked = pa.chunked_array([pa.array(values[:5000], pa.string()), pa.array(values[5000:])])
    assert np.array_equal(string_hashes(chunked), expected)
    assert np.array_equal(string_hashes(pa.array(values).slice(300)), expected[300:])


def test_buckets_of_put_equal_keys_together_and_spread_the_rest() -> None:
    rng = np.random.default_rng(11)
    traces = [f"t{i}" for i in rng.integers(0, 3, 4000)]
    msgs = [f"p{i % 64:02d}-{i}" for i in rng.integers(0, 1500, 4000)]
    buckets = buckets_of([pa.array(traces), pa.array(msgs)], 8)
    assert buckets.min() >= 0 and buckets.max() < 8
    seen: dict[tuple[str, str], int] = {}
    for key, bucket in zip(zip(traces, msgs, strict=True), buckets.tolist(), strict=True):
        assert seen.setdefault(key, bucket) == bucket
    # the same keys in another order, chunked otherwise: the same buckets
    order = rng.permutation(4000)
    again = buckets_of(
        [
            pa.chunked_array(
                [pa.array([traces[i] for i in order[:7]]), pa.array([traces[i] for i in order[7:]])]
            ),
            pa.array([msgs[i] for i in order]),
        ],
        8,
    )
    assert np.array_equal(again, buckets[order])
    distinct = {seen[k] for k in seen}
    counts = np.bincount([seen[k] for k in seen], minlength=8)
    assert distinct == set(range(8)) and counts.min() > len(seen) / 8 / 2


def test_markers_land_in_the_bucket_of_the_rows_they_name(tmp_path: object) -> None:
    """A later pass adds markers of rejected rows to step 1's buckets (`passes.with_markers`):
    each marker must carry the row's ids and land where `split_rows` put the row."""
    from pathlib import Path

    from causal_spark.ingest import rows_kernel as R
    from causal_spark.ingest import tasks

    rng = np.random.default_rng(16)
    n = 200
    traces = [f"t{i}" for i in rng.integers(0, 3, n)]
    procs = [f"p{i}" for i in rng.integers(0, 9, n)]
    given = {
        R.FILE_ID: pa.array(rng.integers(0, 4, n), pa.int32()),
        C.LINE: pa.array(np.arange(1, n + 1), pa.int64()),
        R.SUB: pa.array(np.zeros(n, np.int64)),
        C.TRACE_ID: pa.array(traces),
        C.PROCESS: pa.array(procs),
    }
    rejects = pa.table(
        [given.get(f.name, pa.nulls(n, f.type)) for f in R.REJECTS], schema=R.REJECTS
    )
    marked = R.markers_of(rejects)
    assert marked.schema == R.TYPED
    assert marked[R.EXCLUDED].to_pylist() == [True] * n
    for name in (R.FILE_ID, C.LINE, R.SUB, C.TRACE_ID):
        assert marked[name].to_pylist() == rejects[name].to_pylist()
    assert marked[R.PPROC].to_pylist() == procs
    assert all(marked[f.name].null_count == n for f in R.TYPED if f.name not in given
               and f.name not in (R.PPROC, R.EXCLUDED))  # fmt: skip
    # the rows themselves, as step 1 types them (the same keys), and their markers
    rows = marked.set_column(
        marked.schema.get_field_index(R.EXCLUDED), R.EXCLUDED, pa.array([False] * n)
    )
    where: dict[tuple[str, int], int] = {}
    for kind, table in (("row", rows), ("marker", marked)):
        folder = Path(str(tmp_path)) / kind
        for b, path in tasks.write_buckets(str(folder), table, tasks.SPLIT_KEYS, 7):
            for line in tasks.read_arrow_scratch(path, R.TYPED)[C.LINE].to_pylist():
                where[(kind, line)] = b
    assert all(where[("marker", line)] == where[("row", line)] for line in range(1, n + 1))
