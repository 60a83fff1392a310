"""Logs other tools recorded get in with one command (DESIGN §1b): the CLI picks each
file's reader by extension and content, every row is analysed or quarantined, and
`runs` names the reader of every input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from causal_spark.app.cli import main
from causal_spark.config import ConfigError, config_from_mapping
from tests.conftest import ROOT

REAL = Path("tests") / "data" / "real-logs"
LOGS = {
    "shiviz": REAL / "shiviz" / "RpcClientServer.log",
    "zipkin": REAL / "zipkin" / "skew.json",
    "dctracing": REAL / "dctracing" / "echo_trace_log.jsonl",
}
COUNTS = re.compile(
    r"rows read (\d+): (\d+) internal, (\d+) send, (\d+) receive, (\d+) quarantined"
)


@pytest.mark.slow
def test_real_logs_of_three_formats_ingest_with_one_command(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # in this session: docs/formats.md's command runs the same through a subprocess
    warehouse = tmp_path / "warehouse"
    code = main(
        ["ingest", *map(str, LOGS.values()), "--warehouse", str(warehouse),
         "--conf", "conf/test.yml"],
        session=spark,
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0, printed
    found = COUNTS.search(printed)
    assert found, printed
    read, internal, send, receive, quarantined = map(int, found.groups())
    assert read == internal + send + receive + quarantined
    events = DeltaTable(str(warehouse / "events")).to_pyarrow_table()
    quarantine = DeltaTable(str(warehouse / "quarantine")).to_pyarrow_table()
    # every event row or quarantine row is one input row (a multicast send is one event
    # of several rows, and these logs have none)
    assert events.num_rows + quarantine.num_rows == read
    traces = set(events.column("trace_id").to_pylist())
    # ShiViz and tracing logs: the file is the trace; Zipkin: the span's traceId
    assert {"RpcClientServer", "echo_trace_log"} <= traces
    assert len(traces) == 3
    (run,) = DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist()
    assert {i["format"] for i in run["inputs"]} == set(LOGS)
    messages = DeltaTable(str(warehouse / "messages")).to_pyarrow_table()
    assert messages.num_rows > 0


def test_a_forced_reader_that_does_not_exist_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the command line's own parser, in this process: it stops before any Spark starts
    # (tests/test_cli.py runs the installed `causal-spark` for its usage errors)
    with pytest.raises(SystemExit) as stopped:
        main(["ingest", str(LOGS["shiviz"]), "--warehouse", "w", "--format", "syslog"])
    assert stopped.value.code == 2
    assert "invalid choice: 'syslog'" in capsys.readouterr().err
    assert not (ROOT / "w").exists()


def test_span_process_is_checked_in_the_configuration() -> None:
    with pytest.raises(ConfigError, match="span_process must be one of"):
        config_from_mapping({"ingest": {"span_process": "host"}}, "test")
    config = config_from_mapping({"ingest": {"span_process": "span"}}, "test")
    assert config.ingest.span_process == "span"


# file names with the characters Spark or Hadoop would read as a glob or a URI part (a name
# with both a glob character and a `:` is a known limit: Hadoop's globber cannot take it)
ODD_NAMES = ["run [1] {a,b} *? #%20 +", "k:l"]


@pytest.mark.parametrize(
    ("reader", "log"),
    [("shiviz", "RpcClientServer.log"), ("dctracing", "echo_trace_log.jsonl")],
)
def test_a_native_log_under_an_odd_name_reads_as_under_a_plain_one(
    spark: SparkSession, tmp_path: Path, reader: str, log: str
) -> None:
    # ShiViz logs are read as whole files, dctracing's line by line: both take the path
    # as Spark must be given it (glob characters escaped, no URI parsing)
    from chispa import assert_df_equality
    from pyspark.sql import functions as F

    from causal_spark.io.readers import dctracing, shiviz
    from causal_spark.io.readers.base import ReaderOptions

    read = {"shiviz": shiviz.read, "dctracing": dctracing.read}[reader]
    source = LOGS[reader].read_bytes()
    suffix = Path(log).suffix
    plain = tmp_path / f"plain{suffix}"
    odd = [tmp_path / f"{name}{suffix}" for name in ODD_NAMES]
    for path in (plain, *odd):
        path.write_bytes(source)
    (tmp_path / f"run 1 a{suffix}").write_bytes(b"a neighbour the glob would match\n")
    rows = {
        path: read(spark, [str(path)], ReaderOptions()).localCheckpoint() for path in (plain, *odd)
    }
    assert rows[plain].count() > 0

    def comparable(frame: DataFrame) -> DataFrame:  # chispa sorts rows: no map column
        return frame.withColumn("source", F.lit("x")).withColumn(
            "recorded_vc", F.to_json("recorded_vc")
        )

    for path in odd:
        assert {r[0] for r in rows[path].select("source").distinct().collect()} == {str(path)}
        assert_df_equality(comparable(rows[path]), comparable(rows[plain]), ignore_row_order=True)
