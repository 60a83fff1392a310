"""JSON Lines read in Python tasks (io/readers/jsonl.py) against Spark's text read (the
reader before it, `JsonLinesReader._read_spark`), in Spark: same raw rows, a file cut
in many splits."""

from __future__ import annotations

from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from causal_spark.config import IngestSettings
from causal_spark.io.readers.events import JsonLinesReader
from causal_spark.io.readers.jsonl import read_jsonl
from causal_spark.io.sources import discover_inputs
from tests.jsonl_cases import CASES, LINES


@pytest.mark.slow
def test_same_raw_rows_as_sparks_text_read_across_splits(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    # the adversarial lines many times over (a file of many splits) and the small cases
    (folder / "big.jsonl").write_bytes(b"\n".join(LINES * 40) + b"\n")
    for name, data in CASES:
        if not name.startswith("line-"):
            (folder / f"{name}.jsonl").write_bytes(data)
    files = list(discover_inputs([str(folder)], IngestSettings()).files)
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(16 * 1024))
    try:
        reader = JsonLinesReader()
        # recorded_vc (null here) is a map: rows with one cannot be sorted
        ours = reader._read(spark, files).drop("recorded_vc")
        theirs = reader._read_spark(spark, files).drop("recorded_vc")
        assert ours.rdd.getNumPartitions() > 10
        assert_df_equality(ours, theirs, ignore_row_order=True, ignore_nullable=True)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


def test_a_file_is_cut_in_splits_of_the_partition_size(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"process":"a","kind":"internal"}\n' * 3000)  # 105 000 bytes
    files = list(discover_inputs([str(path)], IngestSettings()).files)
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(10_000))
    try:
        frame = read_jsonl(spark, files)
        lines = sorted(r["line"] for r in frame.select("line").collect())
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    # 11 splits of at most 10 000 bytes, made 12 for the session's 2 cores
    assert frame.rdd.getNumPartitions() == 12
    assert lines == list(range(1, 3001))
