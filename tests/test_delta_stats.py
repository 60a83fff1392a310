"""Delta file statistics that never make a reader skip or mis-filter data.

A table committed through the run transaction is read back through delta-rs with
predicates on every primitive column (delta-rs prunes files by the add actions' stats
and pyarrow trusts them as guarantees), and the rows must be those of the unfiltered
read filtered in memory. Before this test the commit wrote min/max for trace_id only,
and delta-rs 1.6.6 read a column absent from minValues as `col >= null`: a filter on
`protocol` returned no rows (the benchmark's finding; delta-rs issue 3173).

polars and duckdb are not dependencies of the project, so their scans are not run here;
both read Delta through delta-rs (polars) or delta-kernel-rs (duckdb), which treat a
missing statistic as unknown.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from causal_spark import tables
from causal_spark.io import delta, stats
from causal_spark.io.ledger import Ledger
from causal_spark.io.sinks import Warehouse
from tests.conftest import read_delta

LONG = "x" * 40  # over stats.STRING_PREFIX: its bounds are cut
NAN = float("nan")


def _delivery(trace: str, protocol: str, i: int, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "trace_id": trace,
        "protocol": protocol,
        "receive_mode": "selective" if i % 2 else "nonselective",
        "msg_id": f"{LONG}{i}" if trace == "t2" else f"m{i}",
        "send_time": float(i),
        "post_time": None,  # null in every file
        "arrival_time": i + 0.25,
        "delivery_time": i + 0.5,
        "take_time": None if trace == "t1" else i + 0.75,  # null in some files only
        "taken_by_lseq": i,
        "piggyback_ints": 3 * i,
        "held_back": i % 3 == 0,
    }
    row.update(values)
    return row


DELIVERIES = [
    *[_delivery("t1", "fifo", i) for i in range(1, 5)],
    *[
        _delivery("t2", "causal", i, send_time=z)
        for i, z in zip(range(5, 8), [-0.0, 0.0, 2.5], strict=True)
    ],
    # a NaN in a file Spark writes: its range cannot be stated
    *[
        _delivery("t3", "bss", i, send_time=s)
        for i, s in zip(range(8, 11), [1.0, NAN, 3.0], strict=True)
    ],
]


def _event(trace: str, lseq: int, ts: float | None) -> dict[str, Any]:
    return {
        "trace_id": trace,
        "process": f"p{lseq % 2}",
        "pidx": lseq % 2,
        "lseq": lseq,
        "kind": "local",
        "ts": ts,
        "label": None if lseq % 2 else f"l{lseq}",
        "n_msgs": 0,
        "seq": None,
        "source": "s.jsonl",
        "line": lseq,
        "lamport": lseq,
        "vc": [lseq, 0],
    }


EVENT_FILES = [
    [_event("a", 1, 0.5), _event("a", 2, 1.5), _event("a", 3, None)],
    [_event("b", 1, 2.0), _event("b", 2, NAN)],  # a NaN in a file a task writes
    [_event("c", 1, None), _event("c", 2, None)],
]
STARTS = [
    datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC),  # not on a millisecond
    datetime(2026, 1, 2, 0, 0, 0, 5000, tzinfo=UTC),
]


@pytest.fixture(scope="module")
def warehouse(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deliveries staged by Spark (three files), events by FileWriter (three files), and
    two `runs` rows: committed by the run transaction and the ledger, as jobs commit."""
    root = tmp_path_factory.mktemp("stats") / "wh"
    target = Warehouse(spark, root, "deltalake")
    deliveries = spark.createDataFrame(DELIVERIES, tables.table_schema("deliveries"))
    with target.transaction("r1") as txn:
        txn.stage("deliveries", deliveries.repartitionByRange(3, "trace_id"))
        writer = txn.writer("events")
        written = {}
        for rows in EVENT_FILES:
            out = writer.write(pa.Table.from_pylist(rows, tables.arrow_schema("events")))
            written[out.column("path")[0].as_py()] = out.column("rows")[0].as_py()
        txn.stage_files("events", writer, written)
        txn.commit()
    ledger = Ledger(str(root))
    for i, start in enumerate(STARTS):
        ledger.append(
            {
                "id": f"run-{i}",
                "command": "ingest" if i else "audit",
                "start": start,
                "end": start.replace(second=i + 1),
                "inputs": [],
                "config": "{}" + " " * 5000,  # past the Parquet writer's statistics limit
                "table_versions": {},
                "counts": {},
                "written": [],
                "lineage": {},
                "stage_seconds": {},
                "mode": None if i else "full",
                "note": None,
            }
        )
    return root


def _local(path: Path) -> pafs.FileSystem:
    # an explicit filesystem: see tests.conftest.read_delta (delta-rs issue 2184)
    return pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem())


def _rows(table: pa.Table) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def _predicates(
    table: pa.Table, most: int = 1000
) -> Iterator[tuple[pc.Expression, tuple[Any, ...] | None]]:
    """Predicates on every primitive column: equal to, below, from and above each of its
    values (`most` of them, evenly spread), null and not null; the DNF filter tuple for
    the equalities."""
    for field in table.schema:
        if pa.types.is_nested(field.type):
            yield pc.field(field.name).is_null(), None
            continue
        column = pc.field(field.name)
        yield column.is_null(), None
        yield column.is_valid(), None
        values = table.column(field.name).drop_null().unique().to_pylist()
        if pa.types.is_floating(field.type):
            yield pc.is_nan(column), None
            values = [v for v in values if not math.isnan(v)]
        values = sorted(values)
        for value in values[:: max(1, len(values) // most)]:
            scalar = pa.scalar(value, field.type)
            yield column == scalar, (field.name, "=", value)
            yield column < scalar, None
            yield column >= scalar, None
            yield column > scalar, None


def _differences(path: Path, most: int = 1000) -> list[str]:
    """The predicates whose delta-rs read differs from the whole table filtered in memory."""
    log = DeltaTable(delta.table_uri(path))
    everything = log.to_pyarrow_table(filesystem=_local(path))
    dataset = log.to_pyarrow_dataset(filesystem=_local(path))
    wrong = []
    for predicate, dnf in _predicates(everything, most):
        want = _rows(everything.filter(predicate))
        if _rows(dataset.to_table(filter=predicate)) != want:
            wrong.append(f"dataset {predicate}")
        if dnf is not None:
            got = log.to_pyarrow_table(filters=[dnf], filesystem=_local(path))
            if _rows(got) != want:
                wrong.append(f"filters=[{dnf}]: {got.num_rows} rows, want {len(want)}")
    return wrong


@pytest.mark.parametrize("table", ["deliveries", "events", "runs"])
def test_filtered_reads_equal_the_unfiltered_read_filtered(warehouse: Path, table: str) -> None:
    rows = read_delta(warehouse / table).num_rows
    assert rows == {"deliveries": 10, "events": 7, "runs": 2}[table]
    wrong = _differences(warehouse / table)
    assert not wrong, f"{table}: {len(wrong)} reads differ: " + "; ".join(wrong[:8])


@pytest.mark.slow
def test_filtered_reads_of_an_audited_warehouse(detected_samples: Path) -> None:
    """The stages' own writes: ingest's and the clocks' task-side files, Spark's staging."""
    wrong = {}
    for table in sorted(p.name for p in detected_samples.iterdir() if delta.is_table(p)):
        found = _differences(detected_samples / table, most=4)
        if found:
            wrong[table] = found
    assert not wrong, {t: (len(w), w[:3]) for t, w in wrong.items()}


def _stats(path: Path) -> list[dict[str, Any]]:
    """The stats of every file the log adds (these tables remove none)."""
    found = []
    for version in delta.commit_versions(path):
        with open(path / "_delta_log" / f"{version:020d}.json", encoding="utf-8") as log:
            actions = [json.loads(line) for line in log if line.strip()]
        found += [json.loads(a["add"]["stats"]) for a in actions if "add" in a]
    return found


def test_each_file_states_the_range_of_every_column_it_can(warehouse: Path) -> None:
    """Pruning still works: a range for every primitive column with a value, unless a
    column's range cannot be written (a NaN); then only numRecords and nullCount."""
    files = _stats(warehouse / "deliveries")
    assert len(files) == 3
    primitive = [f.name for f in tables.arrow_schema("deliveries")]
    by_trace = {f["minValues"]["trace_id"]: f for f in files if "minValues" in f}
    for trace in ("t1", "t2"):
        found = by_trace[trace]
        nulls = found["nullCount"]
        assert set(nulls) == set(primitive)
        ranged = {c for c in primitive if nulls[c] < found["numRecords"]}
        assert set(found["minValues"]) == set(found["maxValues"]) == ranged
    assert by_trace["t2"]["minValues"]["send_time"] == -0.0
    assert math.copysign(1, by_trace["t2"]["minValues"]["send_time"]) == -1
    assert by_trace["t2"]["maxValues"]["send_time"] == 2.5
    assert by_trace["t2"]["minValues"]["msg_id"] == LONG[: stats.STRING_PREFIX]
    assert by_trace["t2"]["maxValues"]["msg_id"] > f"{LONG}7"
    assert "take_time" not in by_trace["t1"]["minValues"]  # null in t1's file
    nan_file = next(f for f in files if "minValues" not in f)
    assert nan_file["numRecords"] == 3 and nan_file["nullCount"]["send_time"] == 0
    dataset = DeltaTable(delta.table_uri(warehouse / "deliveries")).to_pyarrow_dataset(
        filesystem=_local(warehouse / "deliveries")
    )
    kept = list(dataset.get_fragments(filter=pc.field("protocol") == "fifo"))
    assert len(kept) == 2  # t1's file, and the one without ranges


def test_task_written_nan_and_timestamps_get_safe_stats(warehouse: Path) -> None:
    events = _stats(warehouse / "events")
    assert sorted("minValues" in f for f in events) == [False, True, True]
    all_null = next(f for f in events if f["nullCount"]["ts"] == f["numRecords"])
    assert "ts" not in all_null["minValues"] and "vc" not in all_null["nullCount"]
    runs = sorted(_stats(warehouse / "runs"), key=lambda f: f["minValues"]["start"])
    assert [(f["minValues"]["start"], f["maxValues"]["start"]) for f in runs] == [
        ("2026-01-01T00:00:00.123Z", "2026-01-01T00:00:00.124Z"),
        ("2026-01-02T00:00:00.005Z", "2026-01-02T00:00:00.005Z"),
    ]
    assert runs[0]["minValues"]["config"] == "{}" + " " * (stats.STRING_PREFIX - 2)


# --- the bounds themselves, without Spark ------------------------------------------------

EDGES = ["", "a", "z", "\x7f", "\u07ff", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0010ffff"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_string_bounds_hold_every_value_in_utf8_order(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        values = ["".join(rng.choice(EDGES) for _ in range(rng.randrange(0, 45))) for _ in range(5)]
        low = stats.min_string(min(values))
        high = stats.max_string(max(values))
        for value in values:
            encoded = value.encode("utf-8")
            assert low.encode("utf-8") <= encoded <= high.encode("utf-8"), (seed, value)
        assert len(low) <= stats.STRING_PREFIX
        if any(ch != "\U0010ffff" for ch in max(values)[: stats.STRING_PREFIX]):
            assert len(high) <= stats.STRING_PREFIX, (seed, max(values))


def _written(tmp_path: Path, columns: dict[str, pa.Array], **options: Any) -> dict[str, Any]:
    file = str(tmp_path / "f.parquet")
    table = pa.table(columns)
    pq.write_table(table, file, store_schema=False, **options)
    return stats.file_stats(file, table.schema)


def test_infinity_and_unrecorded_nan_give_no_ranges(tmp_path: Path) -> None:
    ints = pa.array([1, 2, 3])
    infinite = _written(tmp_path, {"i": ints, "d": pa.array([1.0, math.inf, None])})
    assert infinite == {"numRecords": 3, "nullCount": {"i": 0, "d": 1}}
    # parquet-cpp leaves NaN out of the range: without statistics the values are read
    nan = pa.array([1.0, NAN, 2.0])
    read = _written(tmp_path, {"i": ints, "d": nan}, write_statistics=["i"])
    assert read == {"numRecords": 3, "nullCount": {"i": 0, "d": 0}}
    finite = _written(tmp_path, {"i": ints, "d": pa.array([1.0, 2.0, 3.0])}, write_statistics=["i"])
    assert finite["minValues"] == {"i": 1, "d": 1.0} and finite["maxValues"] == {"i": 3, "d": 3.0}


def test_file_writer_records_no_range_that_hides_a_nan(tmp_path: Path) -> None:
    from causal_spark.io.sinks import FileWriter

    rows = pa.Table.from_pylist(EVENT_FILES[1], tables.arrow_schema("events"))
    written = FileWriter("events", str(tmp_path / "out")).write(rows)
    file = written.column("path")[0].as_py()
    found = stats.file_stats(file, tables.arrow_schema("events"))
    assert "minValues" not in found and found["nullCount"]["ts"] == 0
    assert pads.dataset(file).to_table(filter=pc.is_nan(pc.field("ts"))).num_rows == 1
