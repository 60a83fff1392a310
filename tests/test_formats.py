"""One trace in JSON Lines, CSV, Parquet and as a Delta table gives the same events."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from deltalake import write_deltalake
from pyspark.sql import DataFrame, SparkSession

from tests.conftest import SAMPLES
from tests.helpers import ingest_paths

FIELDS = ["trace_id", "process", "seq", "kind", "msg_id", "peer", "ts", "size_bytes", "label"]


def _rows() -> list[dict[str, object]]:
    rows = [json.loads(line) for line in (SAMPLES / "causal_chat.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        row["size_bytes"] = 10 * i
    return rows


def _write_csv(path: Path, rows: list[dict[str, object]]) -> Path:
    # columns deliberately in another order than the JSON: the header decides
    order = list(reversed(FIELDS))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=order)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k) for k in order})
    return path


def _arrow(rows: list[dict[str, object]]) -> pa.Table:
    schema = pa.schema(
        [
            ("trace_id", pa.string()),
            ("process", pa.string()),
            ("seq", pa.int64()),
            ("kind", pa.string()),
            ("msg_id", pa.string()),
            ("peer", pa.string()),
            ("ts", pa.float64()),
            ("size_bytes", pa.int64()),
            ("label", pa.string()),
        ]
    )
    return pa.Table.from_pylist([{k: r.get(k) for k in FIELDS} for r in rows], schema=schema)


def _comparable(frame: DataFrame) -> DataFrame:
    # `source` names the file and differs by format by construction
    return frame.drop("source")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("formats")
    rows = _rows()
    jsonl = root / "jsonl" / "chat.jsonl"
    jsonl.parent.mkdir()
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    csv_path = root / "csv" / "chat.csv"
    csv_path.parent.mkdir()
    _write_csv(csv_path, rows)
    parquet = root / "parquet" / "chat.parquet"
    parquet.parent.mkdir()
    table = _arrow(rows)
    pq.write_table(table, parquet, row_group_size=3)  # several row groups: line numbers span them
    delta = root / "chat"
    write_deltalake(str(delta), table)
    return {"jsonl": jsonl, "csv": csv_path, "parquet": parquet, "delta": delta}


def _collected(spark: SparkSession, frame: DataFrame) -> DataFrame:
    """A table's rows, computed once (an ingest output is a plan: every action reruns it)."""
    return spark.createDataFrame(frame.collect(), frame.schema)


@pytest.fixture(scope="module")
def reference(spark: SparkSession, inputs: dict[str, Path]) -> tuple[DataFrame, DataFrame]:
    """The JSON Lines file's events and messages."""
    ingested = ingest_paths(spark, [inputs["jsonl"]])
    assert ingested.quarantine.count() == 0
    return _collected(spark, ingested.events), _collected(spark, ingested.messages)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "parquet", "delta"])
def test_same_events_and_messages_as_jsonl(
    spark: SparkSession,
    inputs: dict[str, Path],
    reference: tuple[DataFrame, DataFrame],
    fmt: str,
) -> None:
    events, messages = reference
    other = ingest_paths(spark, [inputs[fmt]])
    assert_df_equality(
        _comparable(other.events),
        _comparable(events),
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )
    assert_df_equality(
        other.messages,
        messages,
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )
    assert other.quarantine.count() == 0


@pytest.mark.slow
def test_csv_line_numbers_do_not_count_the_header(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("process,seq,kind,msg_id\na,1,internal,\na,2,teleport,\n")
    out = ingest_paths(spark, [path])
    assert [(q["line"], q["reason"]) for q in out.quarantine.collect()] == [(2, "malformed")]
    assert [(e["line"], e["kind"]) for e in out.events.collect()] == [(1, "internal")]


@pytest.mark.slow
def test_csv_row_with_wrong_width_is_malformed(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("process,seq,kind\na,1,internal\na,2,internal,extra\n")
    out = ingest_paths(spark, [path])
    assert [(q["line"], q["detail"]) for q in out.quarantine.collect()] == [
        (2, "CSV row does not have the header's 3 fields")
    ]


@pytest.mark.slow
def test_delta_input_defaults_trace_to_table_name(
    spark: SparkSession, inputs: dict[str, Path], tmp_path: Path
) -> None:
    table = _arrow(_rows()).drop_columns(["trace_id"])
    write_deltalake(str(tmp_path / "nightly"), table)
    out = ingest_paths(spark, [tmp_path / "nightly"])
    assert {e["trace_id"] for e in out.events.collect()} == {"nightly"}


@pytest.mark.slow
def test_line_numbers_span_file_splits(spark: SparkSession, tmp_path: Path) -> None:
    # a file larger than the split size is read by several tasks; numbering stays global
    rows = [
        json.dumps({"process": "a", "seq": i, "kind": "internal", "label": "x" * 200})
        for i in range(1, 3001)
    ]
    rows[1499] = "garbage"
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(rows) + "\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(64 * 1024))
    try:
        out = ingest_paths(spark, [path])
        assert [q["line"] for q in out.quarantine.collect()] == [1500]
        lines = out.events.select("seq", "line").collect()
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert len(lines) == 2999
    assert all(r["seq"] == r["line"] for r in lines)
