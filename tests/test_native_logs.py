"""Logs other tools recorded get in with one command (DESIGN §1b): the CLI picks each
file's reader by extension and content, every row is analysed or quarantined, and
`runs` names the reader of every input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

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
