"""Recorded clocks against computed ones (`clocks.recorded.clock_mismatches`), on events made
by hand: the comparison is in the log's own units, a difference names its event and its
processes, and an event without a recorded clock or without clocks is not compared."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from causal_spark import tables
from causal_spark.clocks.recorded import clock_mismatches

# The ShiViz log `a {"a":1}` (a sends), `b {"b":1}` (b sends), `c {"a":1,"b":1,"c":1}` (c
# receives both, then sends), `a {"a":2,"b":1,"c":1}`, `b {"a":1,"b":2,"c":1}` (both receive
# from c), as the reader and ingest make it: c's logged event 1 is three events (two
# receives, then the send), all with seq 1, and the recorded clock is on the last.
# (process, lseq, seq, vc in lseq units, recorded in the log's units or None)
EVENTS = [
    ("a", 1, 1, [1, 0, 0], [1, 0, 0]),
    ("a", 2, 2, [2, 1, 3], [2, 1, 1]),
    ("b", 1, 1, [0, 1, 0], [0, 1, 0]),
    ("b", 2, 2, [1, 2, 3], [1, 2, 1]),
    ("c", 1, 1, [1, 0, 1], None),
    ("c", 2, 1, [1, 1, 2], None),
    ("c", 3, 1, [1, 1, 3], [1, 1, 1]),
]
PIDX = {"a": 0, "b": 1, "c": 2}


def _events(trace: str, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": trace,
            "process": p,
            "pidx": PIDX[p],
            "lseq": lseq,
            "kind": "internal",
            "n_msgs": 0,
            "seq": seq,
            "source": f"{trace}.log",
            "line": 10 * PIDX[p] + lseq,
            "lamport": 1,
            "vc": vc,
            "recorded_vc": recorded,
        }
        for p, lseq, seq, vc, recorded in rows
    ]


@pytest.fixture(scope="module")
def mismatches(spark: SparkSession) -> list[dict[str, Any]]:
    corrupt = [
        # a's second event recorded b's entry as 0 (it is 1)
        (p, lseq, seq, vc, [2, 0, 1] if (p, lseq) == ("a", 2) else recorded)
        for p, lseq, seq, vc, recorded in EVENTS
    ]
    # a trace without clocks (INVALID: null vc) is not compared, whatever it recorded
    invalid = [(p, lseq, seq, None, [9, 9, 9]) for p, lseq, seq, _, _ in EVENTS]
    rows = _events("clean", EVENTS) + _events("corrupt", corrupt) + _events("invalid", invalid)
    events = spark.createDataFrame(rows, tables.table_schema(tables.EVENTS))
    return [r.asDict() for r in clock_mismatches(events).collect()]


def test_only_the_corrupted_event_differs_and_it_is_named(
    mismatches: list[dict[str, Any]],
) -> None:
    assert mismatches == [
        {
            "trace_id": "corrupt",
            "process": "a",
            "lseq": 2,
            "seq": 2,
            "source": "corrupt.log",
            "line": 2,
            "recorded": [2, 0, 1],
            # c's entry in the log's units: c's event at lseq 3 is its logged event 1
            "computed": [2, 1, 1],
            "differing": ["b"],
        }
    ]


def test_the_comparison_is_in_the_logs_units(spark: SparkSession) -> None:
    # with each event's seq = its lseq (c's three events numbered 1, 2, 3 in the log), c's
    # entry recorded as 1 on a's and b's second events and on c's last now differs from 3
    in_lseq = [(p, lseq, lseq, vc, recorded) for p, lseq, _, vc, recorded in EVENTS]
    events = spark.createDataFrame(_events("t", in_lseq), tables.table_schema(tables.EVENTS))
    found = {(r["process"], r["lseq"]): r["differing"] for r in clock_mismatches(events).collect()}
    assert found == {("a", 2): ["c"], ("b", 2): ["c"], ("c", 3): ["c"]}


def test_recorded_maps_become_arrays_in_pidx_order() -> None:
    """Ingest's kernel turns a row's recorded clock (process name -> count) into the
    trace's pidx order: a process the map leaves out is 0, a name the trace has no
    process for is dropped, a null map stays null, and sliced input reads right."""
    import pyarrow as pa

    from causal_spark import columns as C
    from causal_spark.ingest import kernel, rows_kernel

    maps = [[("a", 9)], [("a", 1)], [("b", 2), ("a", 1), ("zz", 5)], None, [("x", 3)]]
    events = pa.table(
        {
            C.TRACE_ID: ["t", "t", "t", "t", "u"],
            C.PROCESS: ["a", "a", "b", "a", "x"],
            rows_kernel.RECORDED_VC: pa.array(maps, rows_kernel.RECORDED_MAP),
        }
    ).slice(1)  # a slice: the map's offsets do not start at 0
    procs = pa.table({C.TRACE_ID: ["t", "t", "u", "u"], C.PROCESS: ["b", "a", "x", "y"]})
    got = kernel.recorded_in_pidx_order(events, procs).to_pylist()
    assert got == [[1, 0], [1, 2], None, [3, 0]]
