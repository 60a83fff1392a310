"""The JSON Lines kernel (io/readers/jsonl_kernel.py) without Spark: the rows Spark's own
read gave on adversarial files (tests/jsonl_cases.py), whatever the splits; its fast path
against its exact one; line numbers against a plain split of the text."""

from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from causal_spark.io.raw import INPUT_FIELDS
from causal_spark.io.readers import jsonl_kernel as K
from tests.jsonl_cases import CASES, GOLDEN, GZ_CASES

_GOLDEN = json.loads(GOLDEN.read_text())


def _rows(table: pa.Table) -> list[dict[str, object]]:
    """As the golden file holds rows: strings as base64 of their bytes, nulls left out."""
    columns = {
        name: table.column(name).combine_chunks()
        for name in table.column_names
        if name != "file_id"
    }
    out = []
    for r in range(table.num_rows):
        row: dict[str, object] = {}
        for name, column in columns.items():
            if name == "line":
                row[name] = column[r].as_py()
                continue
            value = column.view(pa.binary())[r].as_py()
            if value is not None:
                row[name] = base64.b64encode(value).decode()
        out.append(row)
    return out


@pytest.mark.parametrize("name,data", [*CASES, *GZ_CASES], ids=[n for n, _ in [*CASES, *GZ_CASES]])
def test_rows_equal_sparks_read_whatever_the_splits(name: str, data: bytes, tmp_path: Path) -> None:
    path = tmp_path / (f"{name}.jsonl.gz" if (name, data) in GZ_CASES else f"{name}.jsonl")
    path.write_bytes(data)
    want = [{k: v for k, v in row.items() if k != "file_id"} for row in _GOLDEN[name]]
    for split_bytes, piece_bytes in [(1 << 20, 1 << 20), (1, 1 << 20), (7, 5), (64, 1), (3, 33)]:
        got = _rows(K.read_file(str(path), split_bytes, piece_bytes))
        assert got == want, (split_bytes, piece_bytes)


def test_the_kernels_names_are_the_raw_rows_names() -> None:
    from causal_spark.io import raw

    # the fields themselves are one tuple (`columns.INPUT_FIELDS`); these two are kept twice
    assert (K.FILE_ID, K.PARSE_ERROR) == (raw.FILE_ID, raw.PARSE_ERROR)


def test_a_line_of_tabs_is_not_an_object() -> None:
    # Spark's read failed the whole job on it (index 0 of the empty array of `[\t]`)
    assert K.parse_line(b"\t") == ([None] * len(INPUT_FIELDS), K.NOT_OBJECT)
    batch, count = K.rows_of_piece(b'\t\n{"process":"a"}\n', 1, 0)
    assert count == 2 and batch is not None
    assert batch.column("parse_error").to_pylist() == [K.NOT_OBJECT, None]


# --- the fast path (orjson) against the exact parser --------------------------------

_names = st.sampled_from([*INPUT_FIELDS, "other", "Process", ""])
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.lists(st.tuples(_names, inner), max_size=3),
    max_leaves=6,
)


def _encode(value: object) -> str:
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        return "{" + ",".join(f"{json.dumps(k)}:{_encode(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "0"
    return json.dumps(value, ensure_ascii=False)


_objects = st.lists(st.tuples(_names, _values), max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_objects, min_size=1, max_size=8), st.sampled_from(["", " ", "\t"]))
def test_fast_path_equals_the_exact_parser(
    objects: list[list[tuple[str, object]]], pad: str
) -> None:
    lines = [
        (pad + "{" + ",".join(f"{json.dumps(k)}:{_encode(v)}" for k, v in obj) + "}").encode()
        for obj in objects
    ]
    numbers = np.arange(1, len(lines) + 1)
    batches = [K.parse_lines(lines, numbers, 0)]
    # Arrow's reader, where it vouches for a piece
    arrow = K._arrow_rows(b"\n".join(lines) + b"\n", len(lines), numbers, 0, True)
    if arrow is not None:
        batches.append(arrow)
    for batch in batches:
        for i, line in enumerate(lines):
            fields, error = K.parse_line(line)
            assert [batch.column(n)[i].as_py() for n in INPUT_FIELDS] == fields, line
            assert batch.column("parse_error")[i].as_py() == error, line
            assert batch.column("raw")[i].as_py() == line.decode(), line


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=30).filter(lambda b: b"\n" not in b and b"\r" not in b)))
def test_any_bytes_give_one_row_a_line(lines: list[bytes]) -> None:
    piece = b"".join(line + b"\n" for line in lines)
    batch, count = K.rows_of_piece(piece, 1, 0)
    assert count == len(lines)
    kept = [i + 1 for i, line in enumerate(lines) if line.strip(b" ")]
    assert (batch.column("line").to_pylist() if batch is not None else []) == kept


@settings(max_examples=500, deadline=None)
@given(st.lists(st.floats(allow_nan=False) | st.none(), min_size=1, max_size=20))
def test_doubles_as_java_writes_them(values: list[float | None]) -> None:
    got = K._doubles(pa.array(values, pa.float64())).to_pylist()
    assert got == [None if v is None else K.java_double(v) for v in values]


def test_java_double_examples() -> None:
    cases = {1.5: "1.5", 1000.0: "1000.0", 1e-8: "1.0E-8", 1e10: "1.0E10", -0.0: "-0.0",
             0.001: "0.001", 9999999.0: "9999999.0", 1e7: "1.0E7", -1.25e-5: "-1.25E-5",
             math.inf: '"Infinity"'}  # fmt: skip
    assert {x: K.java_double(x) for x in cases} == cases


# --- splits and line numbers --------------------------------------------------------

_line = st.sampled_from(
    [b'{"process":"a","seq":1}', b"", b"   ", b"x", b'{"seq":2,"seq":3}', b"\xef\xbb\xbf{}"]
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(st.tuples(_line, st.sampled_from([b"\n", b"\r", b"\r\n"])), max_size=12),
    last_end=st.booleans(),
    split_bytes=st.integers(min_value=1, max_value=40),
    piece_bytes=st.integers(min_value=1, max_value=40),
)
def test_every_line_once_with_its_number(
    lines: list[tuple[bytes, bytes]], last_end: bool, split_bytes: int, piece_bytes: int,
    tmp_path: Path,
) -> None:  # fmt: skip
    data = b"".join(text + end for text, end in lines)
    if lines and not last_end:
        data = data[: -len(lines[-1][1])]
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    body = data[3:] if data.startswith(K.BOM) else data
    parts = re.split(rb"\r\n|\r|\n", body)
    if parts and parts[-1] == b"":
        parts.pop()
    want = [(i + 1, p) for i, p in enumerate(parts) if p.strip(b" ")]
    table = K.read_file(str(path), split_bytes, piece_bytes)
    got = list(zip(table.column("line").to_pylist(), table.column("raw").to_pylist(), strict=True))
    assert got == [(n, p.decode("utf-8", "replace")) for n, p in want]


def test_without_text_raw_only_on_rows_rejected_here() -> None:
    piece = b'{"process":"a"}\nx\n{"seq":1,"seq":2}\n{"seq":"1"}\n'
    with_text, _ = K.rows_of_piece(piece, 1, 0)
    without, _ = K.rows_of_piece(piece, 1, 0, keep_text=False)
    assert with_text is not None and without is not None
    assert without.column("raw").to_pylist() == [None, "x", '{"seq":1,"seq":2}', None]
    assert without.drop_columns(["raw"]).equals(with_text.drop_columns(["raw"]))


@given(
    sizes=st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=10_000)), max_size=6),
    split_bytes=st.integers(min_value=1, max_value=3_000),
    cores=st.integers(min_value=1, max_value=8),
)
def test_split_counts_fill_the_cores_and_keep_the_split_size(
    sizes: list[int | None], split_bytes: int, cores: int
) -> None:
    counts = K.split_counts(sizes, split_bytes, cores)
    assert len(counts) == len(sizes)
    for size, count in zip(sizes, counts, strict=True):
        if size is None:
            assert count == 1
        else:
            assert count >= K.split_count(size, split_bytes)
            splits = K.plan_splits(size, split_bytes, count)
            assert len(splits) == count
            assert all(end - start <= split_bytes for start, end in splits)
            assert [s for s, _ in splits[1:]] == [e for _, e in splits[:-1]]
    # a multiple of the cores, unless no split is left to cut in two
    room = any(size is not None and size > count for size, count in zip(sizes, counts, strict=True))
    whole = all(K.split_count(s, split_bytes) == 1 for s in sizes if s is not None)
    assert sum(counts) % cores == 0 or not room or (whole and counts == [1] * len(sizes))
    if whole:
        assert counts == [1] * len(sizes)


def test_three_splits_on_two_cores_become_four_of_even_size() -> None:
    assert K.split_count(150, 64) == 3
    assert K.split_counts([150], 64, 2) == [4]
    assert K.plan_splits(150, 64, 4) == [(0, 37), (37, 75), (75, 112), (112, 150)]
    # the added split goes to the file with the largest splits; a .gz file is one
    assert K.split_counts([100, None, 60], 64, 2) == [2, 1, 1]
    assert K.split_counts([100, 60, None], 64, 4) == [2, 1, 1]
    assert K.split_counts([130, 60, None], 64, 2) == [3, 2, 1]
    # files that need no cut are not cut to fill the cores
    assert K.split_counts([60, 50, 10], 64, 2) == [1, 1, 1]
