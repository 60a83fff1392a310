"""Configuration: YAML profile -> frozen dataclasses -> explicit parameters.

Unknown keys are errors (a typo must not be silently ignored).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

SinkFormat = Literal["auto", "deltalake", "delta-spark"]
_SINK_FORMATS: tuple[str, ...] = ("auto", "deltalake", "delta-spark")
DEFAULT_PROFILE = "local"


class ConfigError(ValueError):
    """The configuration file is missing, unreadable or has unknown or bad keys."""


@dataclass(frozen=True)
class SparkSettings:
    master: str | None = None
    app_name: str = "causal-spark"
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkSettings:
    format: SinkFormat = "auto"


@dataclass(frozen=True)
class IngestSettings:
    jsonl_extensions: tuple[str, ...] = (".jsonl", ".ndjson", ".json")
    csv_extensions: tuple[str, ...] = (".csv",)
    parquet_extensions: tuple[str, ...] = (".parquet",)


@dataclass(frozen=True)
class Config:
    spark: SparkSettings = field(default_factory=SparkSettings)
    sink: SinkSettings = field(default_factory=SinkSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    profile: str = DEFAULT_PROFILE

    def to_json(self) -> str:
        """The effective configuration as canonical JSON (recorded in `runs`)."""
        return json.dumps(asdict(self), sort_keys=True, default=list)


def _require_keys(section: str, given: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {unknown} in section '{section}'; allowed: {sorted(allowed)}"
        )


def _section(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = raw.get(name) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"section '{name}' must be a mapping, found {type(value).__name__}")
    return value


def config_from_mapping(raw: Mapping[str, Any], profile: str) -> Config:
    """Build a `Config` from a parsed YAML mapping, rejecting unknown keys."""
    _require_keys("<top>", raw, {"spark", "sink", "ingest"})
    spark_raw = _section(raw, "spark")
    _require_keys("spark", spark_raw, {"master", "app_name", "conf"})
    spark_conf = spark_raw.get("conf") or {}
    if not isinstance(spark_conf, Mapping):
        raise ConfigError("spark.conf must be a mapping of Spark keys to values")
    spark = SparkSettings(
        master=spark_raw.get("master"),
        app_name=str(spark_raw.get("app_name", "causal-spark")),
        conf={str(k): str(v) for k, v in spark_conf.items()},
    )
    sink_raw = _section(raw, "sink")
    _require_keys("sink", sink_raw, {"format"})
    sink_format = str(sink_raw.get("format", "auto"))
    if sink_format not in _SINK_FORMATS:
        raise ConfigError(f"sink.format must be one of {_SINK_FORMATS}, found '{sink_format}'")
    ingest_raw = _section(raw, "ingest")
    allowed_ingest = {"jsonl_extensions", "csv_extensions", "parquet_extensions"}
    _require_keys("ingest", ingest_raw, allowed_ingest)
    defaults = IngestSettings()
    ingest = IngestSettings(
        **{
            key: tuple(str(e).lower() for e in ingest_raw.get(key, getattr(defaults, key)))
            for key in sorted(allowed_ingest)
        }
    )
    return Config(
        spark=spark,
        sink=SinkSettings(format=sink_format),  # type: ignore[arg-type]
        ingest=ingest,
        profile=profile,
    )


def load_config(path: str | Path | None = None) -> Config:
    """Load a YAML profile; without a path, the embedded `local` profile."""
    if path is None:
        text = resources.files("causal_spark.conf").joinpath("local.yml").read_text("utf-8")
        profile = DEFAULT_PROFILE
    else:
        file = Path(path)
        if not file.is_file():
            raise ConfigError(f"configuration file {file} does not exist")
        text = file.read_text("utf-8")
        profile = file.stem
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"configuration {path or 'local.yml'} is not valid YAML: {e}") from e
    if not isinstance(raw, Mapping):
        raise ConfigError(f"configuration {path or 'local.yml'} must be a mapping at the top")
    return config_from_mapping(raw, profile)
