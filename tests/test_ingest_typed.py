"""Parquet's typed numbers go to ingest typed (`io.raw.TYPED_FIELDS`): step 1 must type
them to the same values and judge them by the same rules, with the same details, as
their string forms (issue 16: the string round trip cost a parse of every number)."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark.config import IngestSettings
from causal_spark.ingest import type_rows
from causal_spark.io.raw import RAW_SCHEMA
from causal_spark.io.sources import Inputs, InputSet, discover_inputs, read_raw_rows
from tests.helpers import write_jsonl

TS = [0.1, 1e300, 5e-324, -0.0, math.nan, math.inf, -math.inf, None, 1.7976931348623157e308]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("typed")
    n = len(TS)
    kinds = (["send", "receive", "internal"] * n)[:n]
    base = {
        "process": [f"p{i % 3}" for i in range(n)],
        "kind": kinds,
        "msg_id": [f"m{i // 2}" for i in range(n)],
        "peer": [None] * n,
    }
    doubles = pa.table(
        {
            **base,
            "seq": pa.array(list(range(1, n + 1)), pa.int32()),
            "ts": pa.array(TS, pa.float64()),
            "size_bytes": pa.array([5, -1, None, 0, 2**62, -(2**63), 7, 8, 9], pa.int64()),
        }
    )
    pq.write_table(doubles, root / "doubles.parquet")
    integers = pa.table(
        {
            **base,
            "trace_id": ["t2"] * n,
            "seq": pa.array([1, 2, 3, None, 5, 6, 7, -8, 127], pa.int8()),
            "ts": pa.array([0, 2**53 + 1, -(2**63), None, 1, 2, 3, 4, 2**63 - 1], pa.int64()),
            "size_bytes": pa.array([1, 2, 3, 4, 5, 6, -7, 8, None], pa.int16()),
        }
    )
    pq.write_table(integers, root / "integers.parquet")
    # types kept as strings: a float (its string form is not the double's), a timestamp
    others = pa.table(
        {
            **base,
            "trace_id": ["t3"] * n,
            "seq": pa.array([1.0, 2.5, 3.0, None, 5.0, 6.0, 7.0, 8.0, 9.0], pa.float64()),
            "ts": pa.array([0.1, 0.2, 0.3, None, 0.5, 0.6, 0.7, 0.8, 0.9], pa.float32()),
        }
    )
    pq.write_table(others, root / "others.parquet")
    return root


def _typed(raw: DataFrame, inputs: Inputs) -> DataFrame:
    return type_rows(raw, inputs).orderBy("file_id", "line")


def _as_before(spark: SparkSession, inputs: Inputs) -> DataFrame:
    """The raw rows as every field's string, as the reader gave them before (the read with
    text casts each Parquet column to a string), `raw` left out as without text."""
    return read_raw_rows(spark, inputs, text=True).withColumn("raw", F.lit(None).cast("string"))


def test_typed_numbers_are_typed_and_judged_as_their_strings(
    spark: SparkSession, folder: Path
) -> None:
    inputs = discover_inputs([str(folder)], IngestSettings())
    raw = read_raw_rows(spark, inputs, text=False)
    # the path under test: the numbers of the first two files arrive typed
    assert raw.schema["seq"].dataType == T.StringType()  # the third file's floats: strings
    for f in inputs.files:
        one = Inputs(sets=(InputSet(path=str(folder), format="parquet", files=(f,)),))
        alone = read_raw_rows(spark, one, text=False)
        if f.shown.endswith(("doubles.parquet", "integers.parquet")):
            assert alone.schema["seq"].dataType == T.LongType()
            assert alone.schema["ts"].dataType == T.DoubleType()
            assert alone.schema["size_bytes"].dataType == T.LongType()
        typed = _typed(alone, one)
        as_text = _typed(_as_before(spark, one), one)
        assert_df_equality(typed, as_text, allow_nan_equality=True)
    # and the whole folder (files that disagree meet as strings) types as the files did
    assert type_rows(raw, inputs).count() == 3 * len(TS)


def test_typed_and_text_readers_meet_as_strings(spark: SparkSession, tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"process": ["a"], "seq": pa.array([1], pa.int64()), "kind": ["internal"]}),
        tmp_path / "a.parquet",
    )
    write_jsonl(tmp_path / "b.jsonl", [{"process": "b", "seq": "x", "kind": "internal"}])
    inputs = discover_inputs([str(tmp_path)], IngestSettings())
    raw = read_raw_rows(spark, inputs, text=False)
    assert [(f.name, f.dataType) for f in raw.schema] == [(f.name, f.dataType) for f in RAW_SCHEMA]
    rows = {r["pproc"] or r["reason"]: r for r in type_rows(raw, inputs).collect()}
    assert rows["a"]["seq"] == 1
    assert [r["post"] for r in rows.values() if r["reason"]] == ["seq 'x' is not an integer"]
