"""Step 1 on Arrow for plain rows (`ingest.plain`) against the rules' one implementation
(`typed.type_rows`), and the ingest that uses it against the one that does not (issue 16:
the rows a reader's Python task makes are typed there, never crossing into the JVM)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark.config import IngestSettings
from causal_spark.ingest import ingest, type_rows
from causal_spark.ingest import plain as P
from causal_spark.ingest import rows_kernel as R
from causal_spark.io.raw import RAW_SCHEMA, TaskRows
from causal_spark.io.readers import jsonl_kernel as JK
from causal_spark.io.sources import discover_inputs, only_files, read_raw, read_raw_rows
from tests.helpers import ingest_targets, spark_jobs

TEXTS = ["p1", " p1", "p1 ", "", " ", "{x}", "[1]", "{x", "a b", "\tp", "é", "p\n1", None]
KINDS = ["send", "SEND", " send", "snd", "recv", "rcv", "deliver", "receive", "internal",
         "local", "Local", "sendx", "", None]  # fmt: skip
LONGS = ["1", "-1", "0", "-0", "007", "+1", " 1", "1 ", "1.0", "1.5", "1e3", "x", "",
         "9223372036854775807", "9223372036854775808", "123456789012345678", None]  # fmt: skip
DOUBLES = ["1", "1.5", "-2.25", "1.7E9", "1.0E-5", "1e400", "-1e400", "NaN", "Infinity",
           "2026-01-01T00:00:00Z", "2026-01-01", " 1.5", "1.", ".5", "0.1", "", "x",
           "123456789.123456789", "1e-400", None]  # fmt: skip


def _value(rng: random.Random, pool: list[Any]) -> Any:
    # mostly the first, plain, values: rows with every field plain must be many
    return pool[0] if rng.random() < 0.85 else rng.choice(pool)


def _raw_rows(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        rows.append(
            {
                "file_id": i % 2,
                "line": i + 1,
                "raw": f"line {i}",
                "trace_id": _value(rng, [None, "t", " t", "", "{t}"]),
                "process": _value(rng, TEXTS),
                "seq": _value(rng, LONGS),
                "kind": _value(rng, [rng.choice(KINDS[:10]), *KINDS]),
                "msg_id": _value(rng, [f"m{i}", *TEXTS]),
                "peer": _value(rng, [None, *TEXTS]),
                "ts": _value(rng, DOUBLES),
                "size_bytes": _value(rng, ["5", *LONGS]),
                "label": rng.choice([None, "x", " y ", ""]),
                "parse_error": None if rng.random() < 0.95 else "not a JSON object",
            }
        )
    return rows


@pytest.mark.parametrize("pattern", [P._LONG, P._SIZE, P._DOUBLE])
def test_number_forms_are_judged_as_their_regex_judges_them(pattern: str) -> None:
    """`plain._matches` (digits by Arrow's string kernels, the rest by the regex) gives
    the regex's verdict on every value: signs, dots, exponents, lengths at the limits."""
    rng = random.Random(7)
    edges = ["", "-", ".", "-.", "1.", ".5", "-1.5", "--1", "1-", "1..2", "1.2.3", "1e3",
             "1E-3", "-1e+30", "1e1234", "0" * 18, "0" * 19, "0" * 20, "0" * 21,
             "-" + "1" * 18, "-" + "1" * 19, "1" * 20 + "." + "2" * 20,
             "1" * 20 + "." + "2" * 21, "1" * 21 + ".2", "٣", "1\n", " 1"]  # fmt: skip
    alphabet = "0123456789-+.eE x\u00e9"
    made = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(5000)]
    values = pa.array([*LONGS, *DOUBLES, *edges, *made], pa.string())
    for part in (values, values.slice(3, 2000)):
        expected = pc.match_substring_regex(part, pattern).fill_null(False)
        assert P._matches(part, pattern).tolist() == expected.to_pylist()


# numbers as JSON gives them: at and across ingest's 18 digits and Arrow's 64 bits
_INTEGERS = [0, 1, -1, 7, 10**18 - 1, 10**18, -(10**18) + 1, -(10**18), 2**63 - 1, -(2**63),
             2**63, 2**64, 123456789012345678]  # fmt: skip
_number = st.one_of(
    st.sampled_from(_INTEGERS),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.5, -2.25, 1e-300, 1.7e9 + 0.5, 1e22, 123456789.125, -0.0]),
)


def _piece(numbers: list[tuple[Any, Any, Any]]) -> bytes:
    lines = []
    for i, (seq, ts, size) in enumerate(numbers):
        row = {"process": "p", "seq": seq, "kind": "send", "msg_id": f"m{i}", "ts": ts}
        lines.append(json.dumps({**row, "size_bytes": size}).encode() + b"\n")
    return b"".join(lines)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_number, _number, _number), min_size=1, max_size=6), st.booleans())
def test_numbers_arrow_typed_are_judged_as_their_text(
    numbers: list[tuple[Any, Any, Any]], same: bool
) -> None:
    """The JSON Lines reader's numbers kept as Arrow read them (`rows_of_piece(...,
    typed=True)`): the same rows plain as from their text, typed to the same values, and
    the text given back by `untyped`."""
    if same:  # every line's numbers of one kind, as Arrow reads a column of one type
        numbers = [numbers[0]] * len(numbers)
    piece = _piece(numbers)
    text, _ = JK.rows_of_piece(piece, 1, 0)
    typed, _ = JK.rows_of_piece(piece, 1, 0, typed=True)
    assert text is not None and typed is not None
    assert JK.untyped(typed).equals(text)
    ok = P.plain_rows(text)
    assert P.plain_rows(typed).tolist() == ok.tolist()
    mask = pa.array(ok)
    assert P.typed_rows(typed.filter(mask), ["t"]).equals(P.typed_rows(text.filter(mask), ["t"]))


def test_plain_numbers_are_kept_typed() -> None:
    """Where Arrow reads a plain number the reader keeps it typed (the test above would
    pass if it never did); outside the 18 digits ingest's pattern takes, as text."""
    typed, _ = JK.rows_of_piece(_piece([(1, 0.5, 3), (-(10**18) + 1, 2.25, 10**18 - 1)]), 1, 0,
                                typed=True)  # fmt: skip
    assert typed is not None
    assert [typed.schema.field(n).type for n in (C.SEQ, C.TS, C.SIZE_BYTES)] == [
        pa.int64(), pa.float64(), pa.int64()]  # fmt: skip
    for seq, size in [(10**18, 1), (-(10**18), 1), (1, -1), (1, 10**18)]:
        typed, _ = JK.rows_of_piece(_piece([(seq, 0.5, size)]), 1, 0, typed=True)
        assert typed is not None
        kept = pa.int64() if abs(seq) < 10**18 else pa.string()
        assert typed.schema.field(C.SEQ).type == kept
        kept = pa.int64() if 0 <= size < 10**18 else pa.string()
        assert typed.schema.field(C.SIZE_BYTES).type == kept


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=50))
def test_a_double_that_is_no_integer_has_plain_text(values: list[float]) -> None:
    """A finite double that is no integer (one Arrow reads, the reader keeps typed):
    ingest's pattern takes its Jackson text, which parses back to the same double."""
    values = [v for v in values if not float(v).is_integer()] or [0.5]
    doubles = pa.array(values, pa.float64())
    text = JK._doubles(doubles)
    assert P._matches(text, P._DOUBLE).all(), text
    assert pc.cast(text, pa.float64()).equals(doubles)
    edges = [5e-324, -5e-324, 1.7976931348623157e308 / 3, 0.001 + 1e-18, 0.0009999999999999998,
             9999999.999999998, 10000000.000000002, 123456.78901234567]  # fmt: skip
    assert P._matches(JK._doubles(pa.array(edges)), P._DOUBLE).all()
    assert np.array_equal(pc.cast(JK._doubles(pa.array(edges)), pa.float64()).to_numpy(), edges)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain")
    (root / "a.jsonl").write_text("{}\n")
    (root / "b.jsonl").write_text("{}\n")
    return root


def test_plain_rows_are_typed_as_type_rows_types_them(spark: SparkSession, folder: Path) -> None:
    inputs = discover_inputs([str(folder)], IngestSettings())
    rows = _raw_rows(4000, seed=16)
    raw = spark.createDataFrame(rows, RAW_SCHEMA)
    expected = type_rows(raw, inputs).toArrow()
    given = pa.Table.from_pylist(rows)
    plain = P.plain_rows(given)
    # both kinds are many: the test would see a rule the recogniser takes for plain
    assert 0.05 * len(rows) < plain.sum() < 0.95 * len(rows)
    accepted = expected.filter(pa.compute.is_null(expected[C.REASON]))
    assert plain.sum() < accepted.num_rows
    by_line = {line: i for i, line in enumerate(expected[C.LINE].to_pylist())}
    at = [by_line[line] for line in given.filter(pa.array(plain))[C.LINE].to_pylist()]
    # every row taken as plain breaks no rule, and is typed as type_rows types it
    assert expected.take(at)[C.REASON].null_count == len(at)
    defaults = [f.default_trace for f in sorted(inputs.files, key=lambda f: f.file_id)]
    ours = P.typed_rows(given.filter(pa.array(plain)), defaults)
    theirs = expected.take(at).cast(R.TYPED)
    assert_df_equality(
        _sorted(spark.createDataFrame(ours.to_pylist(), _ddl())),
        _sorted(spark.createDataFrame(theirs.to_pylist(), _ddl())),
    )


def _sorted(frame: DataFrame) -> DataFrame:
    """Rows in one order (by every column but maps, which Spark cannot sort)."""
    keys = [f.name for f in frame.schema if not isinstance(f.dataType, T.MapType)]
    return frame.orderBy(*keys)


def _ddl() -> str:
    from causal_spark.ingest.tasks import spark_ddl

    return spark_ddl(R.TYPED)


def _events_file(path: Path, seed: int, n: int) -> Path:
    """A JSON Lines log of mostly plain rows, with every kind of rejection among them."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        process = f"p{rng.randrange(4)}"
        kind = rng.choice(["send", "receive", "internal", "SEND", " recv"])
        row: dict[str, Any] = {"process": process, "seq": rng.randrange(n // 3), "kind": kind,
                               "msg_id": f"m{rng.randrange(n // 2)}", "ts": rng.random() * 1e9}  # fmt: skip
        if rng.random() < 0.3:
            row["peer"] = f"p{rng.randrange(4)}"
        if rng.random() < 0.05:
            row["seq"] = rng.choice(["x", " 3", "+4", None, "1e2"])
        if rng.random() < 0.05:
            row["ts"] = rng.choice(["2026-01-01T00:00:00Z", "NaN", "1e400", " 2"])
        if rng.random() < 0.03:
            row["size_bytes"] = rng.choice([-1, "7", " 8", 2**70])
        if rng.random() < 0.02:
            lines.append("{not json")
            continue
        if rng.random() < 0.05:
            row["trace_id"] = rng.choice(["other", " other", ""])
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return path


def _ingested(
    spark: SparkSession,
    raw: DataFrame,
    inputs: Any,
    plan: TaskRows | None = None,
    hopeful: bool = False,
) -> dict[str, DataFrame]:
    """The three tables `ingest` makes of `raw`, the rows read from `inputs` (`plan`: how
    the readers' Python tasks make them; None: every row typed in Spark; `hopeful`: step
    1 typing the rows that are not plain in a job of their own, whatever the size)."""
    out = ingest(
        raw,
        inputs,
        ingest_targets(),
        reread=lambda ids: read_raw_rows(spark, only_files(inputs, ids)),
        plan=plan,
        hopeful_rows=0 if hopeful else 1 << 62,
    )
    return {"events": out.events, "messages": out.messages, "quarantine": out.quarantine}


def test_ingest_types_a_readers_rows_in_its_tasks_as_through_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    for i in range(3):
        _events_file(tmp_path / f"log{i}.jsonl", seed=i, n=1000)
    inputs = discover_inputs([str(tmp_path)], IngestSettings())
    before = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "20000")  # many splits a file
    try:
        read = read_raw(spark, inputs, text=False)
        raw, made = read.rows, read.plan
        assert made is not None and sum(s.tasks for s in made.sources) > 10

        new = _ingested(spark, raw, inputs, made)
        hopeful = _ingested(spark, raw, inputs, made, hopeful=True)
        # the same rows, no task source: all through type_rows
        old = _ingested(spark, raw, inputs)
        for name in ("events", "messages", "quarantine"):
            assert_df_equality(_sorted(new[name]), _sorted(old[name]), ignore_nullable=True)
            assert_df_equality(_sorted(hopeful[name]), _sorted(old[name]), ignore_nullable=True)
        assert new["quarantine"].count() > 100
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", before or "134217728")


def test_a_readers_rows_take_no_more_spark_jobs(spark: SparkSession, tmp_path: Path) -> None:
    _events_file(tmp_path / "log.jsonl", seed=5, n=200)
    inputs = discover_inputs([str(tmp_path)], IngestSettings())
    read = read_raw(spark, inputs, text=False)
    assert read.plan is not None

    def jobs(plan: TaskRows | None) -> int:
        return spark_jobs(
            spark,
            lambda: ingest(read.rows, inputs, ingest_targets(), plan=plan).quarantine.count(),
        )

    assert jobs(read.plan) <= jobs(None)


def test_hopeful_step_1_takes_the_same_jobs_on_plain_rows_and_one_more_on_others(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Step 1 planning no `type_rows` (`hopeful`) saves that plan, not a job, where every
    row is plain, and types the other rows in one more job where some are not."""
    clean, dirty = tmp_path / "clean", tmp_path / "dirty"
    clean.mkdir()
    dirty.mkdir()
    lines = [json.dumps({"process": f"p{i % 3}", "seq": i, "kind": "internal", "ts": i * 0.5})
             for i in range(300)]  # fmt: skip
    (clean / "log.jsonl").write_text("\n".join(lines) + "\n")
    _events_file(dirty / "log.jsonl", seed=6, n=300)

    def jobs(folder: Path, hopeful: bool) -> tuple[int, dict[str, DataFrame]]:
        inputs = discover_inputs([str(folder)], IngestSettings())
        read = read_raw(spark, inputs, text=False)
        found: dict[str, DataFrame] = {}

        def run() -> None:
            found.update(_ingested(spark, read.rows, inputs, read.plan, hopeful))
            found["quarantine"].count()

        return spark_jobs(spark, run), found

    for folder, more in ((clean, 0), (dirty, 1)):
        (hopeful_jobs, hopeful), (plain_jobs, plain) = jobs(folder, True), jobs(folder, False)
        assert hopeful_jobs == plain_jobs + more, folder.name
        for name in ("events", "messages", "quarantine"):
            assert_df_equality(_sorted(hopeful[name]), _sorted(plain[name]), ignore_nullable=True)
        assert plain["events"].count() > 100
        assert (plain["quarantine"].count() > 0) == bool(more)


def test_parquet_read_by_row_ranges_ingests_as_spark_reads_it(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import math

    import pyarrow.parquet as pq

    from causal_spark.io.readers import parquet_ranges

    rng = random.Random(7)
    n = 2100
    seqs = [rng.randrange(n // 3) for _ in range(n)]
    table = pa.table(
        {
            "Process": [rng.choice(["p0", "p1", " p2", "", None]) for _ in range(n)],
            "seq": pa.array([s if rng.random() < 0.97 else None for s in seqs], pa.int32()),
            "kind": [rng.choice(["send", "receive", "internal", "Send", "x"]) for _ in range(n)],
            "msg_id": [rng.choice([f"m{rng.randrange(n // 2)}", None, "{m}"]) for _ in range(n)],
            "ts": pa.array(
                [rng.choice([rng.random(), math.nan, math.inf, None, 1e300]) for _ in range(n)],
                pa.float64(),
            ),
            "size_bytes": pa.array(
                [rng.choice([1, -1, None, 2**40]) for _ in range(n)], pa.int64()
            ),
            "extra": list(range(n)),
        }
    )
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=700)
    pq.write_table(table.slice(0, 50), tmp_path / "b.parquet")
    monkeypatch.setattr(parquet_ranges, "RANGE_ROWS", 300)  # the driver plans the ranges
    inputs = discover_inputs([str(tmp_path)], IngestSettings())
    read = read_raw(spark, inputs, text=False)
    raw, made = read.rows, read.plan
    assert made is not None and sum(s.tasks for s in made.sources) == 3 * 3 + 1
    # the tasks' raw rows are the Spark read's
    ours = pa.Table.from_batches(
        [b for s in made.sources for i in range(s.tasks) for b in s.rows(i)]
    )
    theirs = raw.toArrow()
    assert sorted(zip(ours["file_id"].to_pylist(), ours["line"].to_pylist(),
                      ours["seq"].to_pylist(), ours["process"].to_pylist(), strict=True)) == sorted(
        zip(theirs["file_id"].to_pylist(), theirs["line"].to_pylist(), theirs["seq"].to_pylist(),
            theirs["process"].to_pylist(), strict=True))  # fmt: skip

    new, old = _ingested(spark, raw, inputs, made), _ingested(spark, raw, inputs)
    hopeful = _ingested(spark, raw, inputs, made, hopeful=True)
    for name in ("events", "messages", "quarantine"):
        assert_df_equality(_sorted(new[name]), _sorted(old[name]), ignore_nullable=True)
        assert_df_equality(_sorted(hopeful[name]), _sorted(old[name]), ignore_nullable=True)
    assert new["quarantine"].count() > 100


def test_parquet_ranges_read_dictionary_coded_strings_as_the_strings(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A range of a Spark-written file decodes its dictionary-coded string columns as codes
    (`parquet_ranges.dictionary_columns`) and gives the same strings, nulls and lines; a
    column whose pages fell back to plain is read as strings."""
    import pyarrow.parquet as pq

    from causal_spark.io.readers import parquet_ranges

    rng = random.Random(11)
    n = 3000
    rows = [
        (rng.choice(["p0", "p1", "é", None]), rng.choice(["send", "receive"]),
         f"m{i:06d}-{rng.random()}", rng.choice(["p0", "", None]), float(i))
        for i in range(n)
    ]  # fmt: skip
    ddl = "process string, kind string, msg_id string, peer string, ts double"
    (
        spark.createDataFrame(rows, ddl)
        .coalesce(1)
        # a small dictionary page: the mostly distinct msg_id falls back to plain pages
        .write.option("parquet.dictionary.page.size", "1024")
        .parquet(str(tmp_path / "logs"))
    )
    path = str(next((tmp_path / "logs").glob("*.parquet")))
    opened = pq.ParquetFile(path)
    strings = ["process", "kind", "msg_id", "peer"]
    assert parquet_ranges.dictionary_columns(opened.metadata.row_group(0), strings) == [
        "process", "kind", "peer"
    ]  # fmt: skip
    fields = parquet_ranges.columns_of(opened.schema_arrow)
    assert fields is not None
    monkeypatch.setattr(parquet_ranges, "RANGE_ROWS", 700)
    ranges = parquet_ranges.plan_ranges([(0, path)], fields)
    assert ranges.tasks == 5
    made = pa.Table.from_batches([b for i in range(ranges.tasks) for b in ranges.rows(i)])
    truth = opened.read()
    assert made["line"].to_pylist() == list(range(1, n + 1))
    for name in [*strings, "ts"]:
        assert made[name].type == (pa.float64() if name == "ts" else pa.string())
        assert made[name].to_pylist() == truth[name].to_pylist(), name


def test_parquet_ranges_give_every_core_a_task_but_not_tiny_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One row group of a few hundred thousand rows was one task, on one core of two: it is
    cut in a share per core, down to SPLIT_ROWS rows; the ranges cover its rows once."""
    import pyarrow.parquet as pq

    from causal_spark.io.readers import parquet_ranges

    n = 1000
    table = pa.table({"process": ["p"] * n, "seq": list(range(n))})
    pq.write_table(table, tmp_path / "a.parquet")
    fields = parquet_ranges.columns_of(table.schema)
    assert fields is not None
    monkeypatch.setattr(parquet_ranges, "SPLIT_ROWS", 100)
    files = [(0, str(tmp_path / "a.parquet"))]
    for cores, tasks in [(1, 1), (2, 2), (3, 3), (16, 10)]:
        ranges = parquet_ranges.plan_ranges(files, fields, cores)
        assert ranges.tasks == tasks, cores
        made = pa.Table.from_batches([b for i in range(ranges.tasks) for b in ranges.rows(i)])
        assert made["seq"].to_pylist() == list(range(n))
        assert made["line"].to_pylist() == list(range(1, n + 1))
    monkeypatch.setattr(parquet_ranges, "RANGE_ROWS", 300)  # the cap holds with one core
    assert parquet_ranges.plan_ranges(files, fields, 1).tasks == 4
