"""The span pairing kernel (`io.readers.spans_kernel`) on random span records: against the
Spark SQL pairing it replaced (`tests.reference_spans`), and on its own laws (the rows of
a trace do not depend on the other traces, nor on the order of the records). The seed of
a failing case is in the assertion message."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from causal_spark.io.readers import spans_kernel
from causal_spark.io.readers.base import RAW_SCHEMA
from causal_spark.io.readers.spans import SPAN_SCHEMA
from tests.reference_spans import pair_spans as spark_pairing

ARROW_SPANS = to_arrow_schema(SPAN_SCHEMA)
KINDS = [None, "CLIENT", "SERVER", "PRODUCER", "CONSUMER"]
T0 = 1_700_000_000 * 10**9


def _trace(rng: random.Random, trace: str, line: list[int]) -> list[dict[str, Any]]:
    """Up to 12 span records of one trace, with ids drawn from a small pool (so that ids
    repeat, with and without the same kind), parents and links that name spans read,
    spans absent, the span itself or a trace not read, and a few rejected records."""
    pool = [f"{k:04x}" for k in range(rng.randint(2, 8))]
    records = []
    for _ in range(rng.randint(1, 12)):
        line[0] += 1
        span_id = rng.choice(pool)

        def reference(span_id: str = span_id) -> dict[str, Any]:
            roll = rng.random()
            if roll < 0.1:
                return {"trace_id": "f" * 8, "span_id": rng.choice(pool)}  # not read
            if roll < 0.2:
                return {"trace_id": None, "span_id": span_id}  # itself
            if roll < 0.3:
                return {"trace_id": trace, "span_id": "ffff"}  # absent
            return {"trace_id": rng.choice([None, trace]), "span_id": rng.choice(pool)}

        start = T0 + rng.randrange(40) * 1000
        records.append(
            {
                "source": rng.choice(["/in/a.json", "/in/b.jsonl"]),
                "line": line[0],
                "record": rng.randint(1, 3),
                "raw": f"span {line[0]}",
                "trace_id": trace,
                "span_id": span_id,
                "parent": reference() if rng.random() < 0.6 else None,
                "span_kind": rng.choice(KINDS),
                "shared": rng.random() < 0.2,
                "service": rng.choice([None, "api", "db"]),
                "instance": rng.choice([None, "h1", "h2"]),
                "start_ns": start,
                "end_ns": start + rng.randrange(4) * 1000,
                "name": rng.choice([None, "op"]),
                "links": [reference() for _ in range(rng.choice([0, 0, 1, 2]))],
                "note": rng.choice([None, "duration unknown"]),
                "parse_error": None,
                "parse_reason": None,
            }
        )
        if rng.random() < 0.05:
            records[-1].update(parse_error="bad", parse_reason=rng.choice([None, "unparseable"]))
            records[-1]["trace_id"] = rng.choice([None, trace])
    return records


def _records(seed: int, traces: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    line = [0]
    return [r for t in range(traces) for r in _trace(rng, f"{seed:04x}{t:04x}", line)]


def _rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(str(v) for v in row.values()) for row in table.to_pylist())


def _pair(records: list[dict[str, Any]], span_process: str = "instance") -> pa.Table:
    return spans_kernel.pair(pa.Table.from_pylist(records, ARROW_SPANS), span_process)


def test_output_is_the_raw_row_contract() -> None:
    assert to_arrow_schema(RAW_SCHEMA) == spans_kernel.OUTPUT_SCHEMA
    assert _pair(_records(1, 3)).schema == spans_kernel.OUTPUT_SCHEMA


@pytest.mark.parametrize("seed", range(20))
def test_a_trace_rows_do_not_depend_on_other_traces_or_record_order(seed: int) -> None:
    records = _records(seed, 4)
    whole = _rows(_pair(records))
    one_by_one: Counter[tuple[Any, ...]] = Counter()
    for trace in {r["trace_id"] for r in records}:
        one_by_one += _rows(_pair([r for r in records if r["trace_id"] == trace]))
    assert whole == one_by_one, f"seed {seed}"
    shuffled = list(records)
    random.Random(seed).shuffle(shuffled)
    assert _rows(_pair(shuffled)) == whole, f"seed {seed}"


def test_a_reference_to_another_trace_is_absent_even_when_read() -> None:
    producer = {
        **dict.fromkeys(ARROW_SPANS.names),
        "source": "/in/a.json",
        "line": 1,
        "record": 1,
        "trace_id": "t1",
        "span_id": "p1",
        "span_kind": "PRODUCER",
        "start_ns": T0,
        "end_ns": T0,
    }
    consumer = {
        **producer,
        "line": 2,
        "trace_id": "t2",
        "span_id": "c1",
        "span_kind": "CONSUMER",
        "links": [{"trace_id": "t1", "span_id": "p1"}],
    }
    rows = _pair([producer, consumer]).to_pylist()
    received = [(r["msg_id"], r["peer"]) for r in rows if r["kind"] == "receive"]
    assert received == [("c1:msg", None)]
    assert not [r for r in rows if r["kind"] == "send"]


@pytest.mark.slow
@pytest.mark.parametrize("span_process", ["instance", "span"])
def test_equals_the_spark_pairing(spark: SparkSession, span_process: str) -> None:
    """80 random traces per seed, one Spark job for all (a reference to a trace read
    is never to another trace here: the generator's other trace is never read)."""
    seeds = range(5)
    records = {seed: _records(seed, 16) for seed in seeds}
    everything = [r for seed in seeds for r in records[seed]]
    expected_table = spark_pairing(
        spark.createDataFrame(everything, SPAN_SCHEMA),
        span_process,  # type: ignore[arg-type]
    ).toArrow()
    expected = _rows(expected_table)
    for seed in seeds:
        traces = {r["trace_id"] for r in records[seed]}
        theirs = Counter({row: k for row, k in expected.items() if _trace_of(row) in traces})
        # a reject with no trace id: from any seed; compared over all seeds below
        ours = _rows(_pair(records[seed], span_process))
        assert _with_trace(ours) == _with_trace(theirs), f"seed {seed}"
    assert _rows(_pair(everything, span_process)) == expected


def _trace_of(row: tuple[Any, ...]) -> str:
    return str(row[spans_kernel.OUTPUT_FIELDS.index("trace_id")])


def _with_trace(rows: Counter[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    return Counter({row: k for row, k in rows.items() if _trace_of(row) != "None"})
