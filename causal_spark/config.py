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

from causal_spark.replay.protocols.spec import SPECS

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
    """How inputs are read (section `ingest:`): the extensions that choose our readers,
    and the native readers' options (docs/formats.md)."""

    jsonl_extensions: tuple[str, ...] = (".jsonl", ".ndjson", ".json")
    csv_extensions: tuple[str, ...] = (".csv",)
    parquet_extensions: tuple[str, ...] = (".parquet",)
    # ShiViz parser / delimiter regexes (None: the file's GoVector header, else ShiViz's default)
    shiviz_regex: str | None = None
    shiviz_delimiter: str | None = None
    # spans: `instance` (a service instance is one process) or `span` (each span is one)
    span_process: str = "instance"
    # about how many rows one ingest task sorts and judges at once (its memory: a few
    # hundred bytes a row); more rows mean more, smaller tasks
    rows_per_task: int = 2_000_000


SPAN_PROCESSES: tuple[str, ...] = ("instance", "span")


def _optional_text(section: Mapping[str, Any], key: str) -> str | None:
    value = section.get(key)
    return None if value is None else str(value)


ClockEngine = Literal["auto", "per_trace", "distributed"]
GraphBackend = Literal["auto", "joins", "graphframes"]
_ENGINES: tuple[str, ...] = ("auto", "per_trace", "distributed")
_GRAPH_BACKENDS: tuple[str, ...] = ("auto", "joins", "graphframes")
CrownEngine = Literal["auto", "per_trace", "distributed"]
CrownGraphBackend = Literal["auto", "slabs", "graphframes"]
_CROWN_BACKENDS: tuple[str, ...] = ("auto", "slabs", "graphframes")


@dataclass(frozen=True)
class ClockSettings:
    """How clocks are computed (section `clocks:`); see `causal_spark.clocks`."""

    engine: ClockEngine = "auto"
    per_trace_max_events: int = 20_000_000
    slab_events: int = 2_000_000
    graph_backend: GraphBackend = "auto"
    checkpoint_interval: int = 2
    matrix: bool = False
    # per-trace engine: a component larger than slab_events is clocked by about this many
    # tasks (at least the default parallelism when in place), each running the kernel over
    # the whole component and writing its own rows (about the cores)
    output_parts: int = 2
    # the most one clocks task may hold for one component at its estimated peak, in bytes
    # (`clocks.size`, docs/clocks.md): a wider component gets Lamport clocks only (vc null)
    # and its trace `not_applicable` in trace_clocks, with the estimate. 6 GiB: two tasks at
    # once fit the local profile's machine beside the driver
    max_component_bytes: int = 6 << 30


@dataclass(frozen=True)
class DetectSettings:
    """How anomalies are searched (section `detect:`); see `causal_spark.anomalies`."""

    # work (channel probes and receives scanned) one crown component's search for a
    # shortest witness may spend after its first breadth-first search; past it the
    # component is still reported, its witness flagged as maybe not the shortest
    crown_search_budget: int = 20_000_000
    # crowns of a trace up to per_trace_max_messages delivered messages in one task; beyond
    # (or `distributed`), by slabs of about slab_events message events (or GraphFrames)
    crown_engine: CrownEngine = "auto"
    per_trace_max_messages: int = 20_000_000
    slab_events: int = 2_000_000
    crown_graph_backend: CrownGraphBackend = "auto"
    # the most one detect task may hold for one trace at its estimated peak, in bytes
    # (`anomalies.size`, docs/anomalies.md): a bigger trace gets no anomaly rows, null
    # counts and no order class, with the reason and the estimate
    max_trace_bytes: int = 6 << 30


ALL_PROTOCOLS: tuple[str, ...] = tuple(SPECS)
_RECEIVE_MODES: tuple[str, ...] = ("nonselective", "selective")


@dataclass(frozen=True)
class ReplaySettings:
    """What `replay` runs by default (section `replay:`); see `causal_spark.replay`."""

    protocols: tuple[str, ...] = ALL_PROTOCOLS
    receive_mode: str = "nonselective"
    # protocol -> {key: value}, as --param protocol.key=value gives them
    params: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # seconds a control message takes on a channel (and trace) without recorded latencies
    default_latency: float = 1.0
    # the most a (trace, protocol) replay may take at its estimated peak; a bigger one is
    # `not_applicable` (docs/replay.md). 4 GiB: two at once fit the local profile's machine
    max_run_bytes: int = 4 << 30


@dataclass(frozen=True)
class Config:
    spark: SparkSettings = field(default_factory=SparkSettings)
    sink: SinkSettings = field(default_factory=SinkSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    clocks: ClockSettings = field(default_factory=ClockSettings)
    detect: DetectSettings = field(default_factory=DetectSettings)
    replay: ReplaySettings = field(default_factory=ReplaySettings)
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
    _require_keys("<top>", raw, {"spark", "sink", "ingest", "clocks", "detect", "replay"})
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
    extension_keys = {"jsonl_extensions", "csv_extensions", "parquet_extensions"}
    option_keys = {"shiviz_regex", "shiviz_delimiter", "span_process", "rows_per_task"}
    _require_keys("ingest", ingest_raw, extension_keys | option_keys)
    defaults = IngestSettings()
    span_process = str(ingest_raw.get("span_process", defaults.span_process))
    if span_process not in SPAN_PROCESSES:
        raise ConfigError(
            f"ingest.span_process must be one of {SPAN_PROCESSES}, found '{span_process}'"
        )
    ingest = IngestSettings(
        **{
            key: tuple(str(e).lower() for e in ingest_raw.get(key, getattr(defaults, key)))
            for key in sorted(extension_keys)
        },
        shiviz_regex=_optional_text(ingest_raw, "shiviz_regex"),
        shiviz_delimiter=_optional_text(ingest_raw, "shiviz_delimiter"),
        span_process=span_process,
        rows_per_task=_positive_int("ingest", ingest_raw, "rows_per_task", defaults.rows_per_task),
    )
    return Config(
        spark=spark,
        sink=SinkSettings(format=sink_format),  # type: ignore[arg-type]
        ingest=ingest,
        clocks=_clock_settings(_section(raw, "clocks")),
        detect=_detect_settings(_section(raw, "detect")),
        replay=_replay_settings(_section(raw, "replay")),
        profile=profile,
    )


def _positive_int(section: str, raw: Mapping[str, Any], key: str, default: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{section}.{key} must be a positive integer, found {value!r}")
    return value


def _clock_settings(raw: Mapping[str, Any]) -> ClockSettings:
    defaults = ClockSettings()
    _require_keys("clocks", raw, set(asdict(defaults)))
    engine = str(raw.get("engine", defaults.engine))
    if engine not in _ENGINES:
        raise ConfigError(f"clocks.engine must be one of {_ENGINES}, found '{engine}'")
    backend = str(raw.get("graph_backend", defaults.graph_backend))
    if backend not in _GRAPH_BACKENDS:
        raise ConfigError(
            f"clocks.graph_backend must be one of {_GRAPH_BACKENDS}, found '{backend}'"
        )
    matrix = raw.get("matrix", defaults.matrix)
    if not isinstance(matrix, bool):
        raise ConfigError(f"clocks.matrix must be true or false, found {matrix!r}")
    return ClockSettings(
        engine=engine,  # type: ignore[arg-type]
        per_trace_max_events=_positive_int(
            "clocks", raw, "per_trace_max_events", defaults.per_trace_max_events
        ),
        slab_events=_positive_int("clocks", raw, "slab_events", defaults.slab_events),
        graph_backend=backend,  # type: ignore[arg-type]
        checkpoint_interval=_positive_int(
            "clocks", raw, "checkpoint_interval", defaults.checkpoint_interval
        ),
        matrix=matrix,
        output_parts=_positive_int("clocks", raw, "output_parts", defaults.output_parts),
        max_component_bytes=_positive_int(
            "clocks", raw, "max_component_bytes", defaults.max_component_bytes
        ),
    )


def _detect_settings(raw: Mapping[str, Any]) -> DetectSettings:
    defaults = DetectSettings()
    _require_keys("detect", raw, set(asdict(defaults)))
    engine = str(raw.get("crown_engine", defaults.crown_engine))
    if engine not in _ENGINES:
        raise ConfigError(f"detect.crown_engine must be one of {_ENGINES}, found '{engine}'")
    backend = str(raw.get("crown_graph_backend", defaults.crown_graph_backend))
    if backend not in _CROWN_BACKENDS:
        raise ConfigError(
            f"detect.crown_graph_backend must be one of {_CROWN_BACKENDS}, found '{backend}'"
        )
    return DetectSettings(
        crown_search_budget=_positive_int(
            "detect", raw, "crown_search_budget", defaults.crown_search_budget
        ),
        crown_engine=engine,  # type: ignore[arg-type]
        per_trace_max_messages=_positive_int(
            "detect", raw, "per_trace_max_messages", defaults.per_trace_max_messages
        ),
        slab_events=_positive_int("detect", raw, "slab_events", defaults.slab_events),
        crown_graph_backend=backend,  # type: ignore[arg-type]
        max_trace_bytes=_positive_int("detect", raw, "max_trace_bytes", defaults.max_trace_bytes),
    )


def _replay_settings(raw: Mapping[str, Any]) -> ReplaySettings:
    defaults = ReplaySettings()
    _require_keys("replay", raw, set(asdict(defaults)))
    protocols = raw.get("protocols", list(defaults.protocols))
    if not isinstance(protocols, list) or not protocols:
        raise ConfigError(f"replay.protocols must be a non-empty list, found {protocols!r}")
    unknown = sorted(str(p) for p in protocols if str(p) not in ALL_PROTOCOLS)
    if unknown:
        raise ConfigError(f"replay.protocols: unknown {unknown}; known: {list(ALL_PROTOCOLS)}")
    mode = str(raw.get("receive_mode", defaults.receive_mode))
    if mode not in _RECEIVE_MODES:
        raise ConfigError(f"replay.receive_mode must be one of {_RECEIVE_MODES}, found '{mode}'")
    params = raw.get("params") or {}
    if not isinstance(params, Mapping) or not all(isinstance(v, Mapping) for v in params.values()):
        raise ConfigError("replay.params must map a protocol to a mapping of key: value")
    latency = raw.get("default_latency", defaults.default_latency)
    if isinstance(latency, bool) or not isinstance(latency, int | float) or latency <= 0:
        raise ConfigError(f"replay.default_latency must be a positive number, found {latency!r}")
    limit = raw.get("max_run_bytes", defaults.max_run_bytes)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise ConfigError(f"replay.max_run_bytes must be a positive integer, found {limit!r}")
    return ReplaySettings(
        protocols=tuple(str(p) for p in protocols),
        receive_mode=mode,
        params={str(k): {str(a): str(b) for a, b in v.items()} for k, v in params.items()},
        default_latency=float(latency),
        max_run_bytes=limit,
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
