"""The readers' registry and content sniffing (no Spark): every real log and sample is
recognised as its format, and the row format as none of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from causal_spark.config import IngestSettings
from causal_spark.io.readers import NATIVE as NATIVE_READERS
from causal_spark.io.readers import OURS, READERS, SNIFF_BYTES, sniff_format
from causal_spark.io.readers.base import ReaderError, ReaderOptions
from tests.reference_readers import repo_file

REAL = repo_file("tests", "data", "real-logs")
NATIVE = repo_file("data-samples", "_native")
SPANS = repo_file("tests", "data", "spans")

FILES = [
    (REAL / "shiviz" / "chord.log", "shiviz"),
    (REAL / "shiviz" / "voldemort.log", "shiviz"),
    (REAL / "shiviz" / "RpcClientServer.log", "shiviz"),
    (REAL / "shiviz" / "echo_trace_log_shiviz.log", "shiviz"),
    (REAL / "dctracing" / "echo_trace_log.jsonl", "dctracing"),
    (REAL / "zipkin" / "skew.json", "zipkin"),
    (REAL / "zipkin" / "yelp.json", "zipkin"),
    (REAL / "zipkin" / "messaging-kafka.json", "zipkin"),
    (NATIVE / "jaeger" / "ui-trace.json", "jaeger"),
    (NATIVE / "otlp" / "trace.json", "otlp"),
    (SPANS / "jaeger_orders.json", "jaeger"),
    (SPANS / "otlp_checkout.json", "otlp"),
    (SPANS / "otlp_checkout.jsonl", "otlp"),
    # the row format (DESIGN §1) and files that are no log at all
    (repo_file("data-samples", "causal_chat.jsonl"), None),
    (REAL / "shiviz" / "PARSERS.txt", None),
    (REAL / "zipkin" / "README.md", None),
]


@pytest.mark.parametrize(("path", "expected"), FILES, ids=[p.name for p, _ in FILES])
def test_sniff_format(path: Path, expected: str | None) -> None:
    assert sniff_format(path.read_bytes()[:SNIFF_BYTES]) == expected


def test_every_reader_is_registered_with_its_extensions() -> None:
    assert {r.name for r in NATIVE_READERS} == {"shiviz", "dctracing", "zipkin", "jaeger", "otlp"}
    assert {r.name for r in OURS} == {"jsonl", "csv", "parquet", "delta"}
    assert set(READERS) == {r.name for r in (*NATIVE_READERS, *OURS)}
    settings = IngestSettings()
    assert all(all(e.startswith(".") for e in r.extensions(settings)) for r in READERS.values())
    assert all(r.extensions(settings) for r in NATIVE_READERS)
    assert all(name == r.name for name, r in READERS.items())


def test_span_process_must_be_instance_or_span() -> None:
    with pytest.raises(ReaderError, match="span_process must be one of"):
        ReaderOptions(span_process="host")  # type: ignore[arg-type]
