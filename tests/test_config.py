from __future__ import annotations

from pathlib import Path

import pytest

from causal_spark.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]


def test_embedded_default_is_the_local_profile() -> None:
    embedded = load_config()
    from_file = load_config(ROOT / "conf" / "local.yml")
    assert embedded.spark == from_file.spark
    assert embedded.spark.master == "local[*]"
    assert embedded.spark.conf["spark.sql.session.timeZone"] == "UTC"


def test_cluster_profile_leaves_master_to_spark_submit() -> None:
    cluster = load_config(ROOT / "conf" / "cluster.yml")
    assert cluster.spark.master is None
    assert "spark.driver.memory" not in cluster.spark.conf


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("spark: {mastr: x}\n", "unknown key", id="typo-in-spark"),
        pytest.param("sinks: {}\n", "unknown key", id="typo-at-top"),
        pytest.param("sink: {format: parquet}\n", "sink.format", id="bad-sink-format"),
        pytest.param("spark: [1, 2]\n", "must be a mapping", id="section-not-mapping"),
        pytest.param("a: [\n", "not valid YAML", id="broken-yaml"),
        pytest.param("clocks: {engine: gpu}\n", "clocks.engine", id="bad-engine"),
        pytest.param("clocks: {slab_events: 0}\n", "clocks.slab_events", id="zero-slab"),
        pytest.param("clocks: {slab_event: 10}\n", "unknown key", id="typo-in-clocks"),
        pytest.param("clocks: {graph_backend: nx}\n", "graph_backend", id="bad-graph"),
        pytest.param("clocks: {matrix: 'yes'}\n", "clocks.matrix", id="matrix-not-bool"),
        pytest.param("replay: {max_run_bytes: 0}\n", "replay.max_run_bytes", id="zero-run-bytes"),
        pytest.param("replay: {max_run_bytes: 4.5}\n", "replay.max_run_bytes", id="float-bytes"),
    ],
)
def test_bad_profiles_are_rejected_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_missing_profile_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yml")


def test_clock_engine_can_be_forced_in_conf(tmp_path: Path) -> None:
    path = tmp_path / "forced.yml"
    path.write_text("clocks: {engine: distributed, slab_events: 1000, matrix: true}\n")
    clocks = load_config(path).clocks
    assert (clocks.engine, clocks.slab_events, clocks.matrix) == ("distributed", 1000, True)
    assert load_config().clocks.engine == "auto"
