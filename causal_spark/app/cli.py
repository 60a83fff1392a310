"""`causal-spark`: the command line. Every sub-command is also `spark-submit jobs/<name>.py`."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from causal_spark import tables
from causal_spark.anomalies import ORDER_CLASSES
from causal_spark.anomalies.explain import Findings, UnknownMessageError, explain_message
from causal_spark.app.runs import RunRecord, Stage, run_job
from causal_spark.app.session import build_session
from causal_spark.app.stages import (
    clocks_stage,
    compare_stage,
    detect_stage,
    ingest_stage,
    replay_stage,
)
from causal_spark.config import Config, ConfigError, load_config
from causal_spark.generate import (
    GeneratorError,
    GeneratorSpec,
    Latency,
    generate_traces,
    write_generated,
)
from causal_spark.plots import format_comparison, plot_overheads
from causal_spark.replay import ReplayRequest, ReplayRequestError, parse_params
from causal_spark.sinks import Warehouse, WarehouseError
from causal_spark.sources import InputError

log = logging.getLogger("causal_spark")

# the stages `audit` runs, in order, after ingest
AUDIT_STAGES: tuple[str, ...] = ("ingest", "clocks", "detect", "replay", "compare")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="causal-spark",
        allow_abbrev=False,
        description="Audit recorded distributed-system message logs into Delta tables.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--warehouse", required=True, help="folder of the Delta tables")
        p.add_argument(
            "--conf",
            default=None,
            help="YAML profile (default: the embedded local profile, conf/local.yml)",
        )
        p.add_argument("-v", "--verbose", action="store_true", help="log progress")

    for name, text in (
        ("ingest", "read message logs into events, messages and quarantine"),
        ("audit", "the main job: ingest, then every analysis stage, under one run id"),
    ):
        p = sub.add_parser(name, help=text, description=text, allow_abbrev=False)
        p.add_argument(
            "inputs", nargs="+", help="files or folders (.jsonl, .csv, .parquet) or Delta tables"
        )
        common(p)
        if name == "audit":
            p.add_argument("--matrix", action="store_true", help="also write matrix_clocks")
            _replay_options(p)
    text = "add Lamport and vector clocks to events; write trace_clocks (and matrix_clocks)"
    p = sub.add_parser("clocks", help=text, description=text, allow_abbrev=False)
    common(p)
    p.add_argument(
        "--matrix",
        action="store_true",
        help="also write matrix_clocks (sparse matrix clocks; conf clocks.matrix does the same)",
    )
    text = "find FIFO and causal-order violations and crowns; write trace_summary"
    p = sub.add_parser("detect", help=text, description=text, allow_abbrev=False)
    common(p)
    text = "replay every trace under delivery protocols; write protocol_runs and deliveries"
    p = sub.add_parser("replay", help=text, description=text, allow_abbrev=False)
    common(p)
    _replay_options(p)
    text = "compare protocols' overhead across traces; write and print protocol_comparison"
    p = sub.add_parser("compare", help=text, description=text, allow_abbrev=False)
    common(p)
    p.add_argument(
        "--plots",
        default=None,
        help="folder for PNG plots of overhead against processes and latency variance",
    )
    text = "explain in words the violations and crowns a message takes part in"
    p = sub.add_parser("explain", help=text, description=text, allow_abbrev=False)
    common(p)
    p.add_argument("--trace", required=True, help="trace_id")
    p.add_argument("--msg", required=True, help="msg_id")
    return parser


def _replay_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--protocols",
        default=None,
        help="comma-separated protocols (default: conf replay.protocols, all of them)",
    )
    p.add_argument(
        "--receive-mode",
        choices=("nonselective", "selective"),
        default=None,
        help="how receives take messages (default: conf replay.receive_mode)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="PROTOCOL.KEY=VALUE",
        help="a protocol parameter, e.g. sa.k=8 or mf.no_wait_same_receiver=true (repeatable)",
    )


def replay_request(args: argparse.Namespace, config: Config) -> ReplayRequest:
    """The replay asked for: command-line options over the profile's `replay:` section."""
    settings = config.replay
    protocols = (
        tuple(p.strip() for p in args.protocols.split(",") if p.strip())
        if args.protocols
        else settings.protocols
    )
    params = {name: dict(values) for name, values in settings.params.items()}
    for name, values in parse_params(args.param).items():
        params.setdefault(name, {}).update(values)
    return ReplayRequest(
        protocols=protocols,
        receive_mode=args.receive_mode or settings.receive_mode,
        params=params,
        default_latency=settings.default_latency,
    ).validate()


def _stages(command: str, args: argparse.Namespace, config: Config) -> list[Stage]:
    if command == "ingest":
        return [ingest_stage(args.inputs)]
    if command == "audit":
        return [
            ingest_stage(args.inputs),
            clocks_stage(args.matrix),
            detect_stage(),
            replay_stage(replay_request(args, config)),
            compare_stage(),
        ]
    if command == "replay":
        return [replay_stage(replay_request(args, config))]
    if command == "compare":
        return [compare_stage()]
    if command == "clocks":
        return [clocks_stage(args.matrix)]
    if command == "detect":
        return [detect_stage()]
    raise AssertionError(f"no stages for command {command}")


def _report(record: RunRecord, out: Callable[[str], None]) -> None:
    out(
        f"run {record.run_id} ({record.command}) committed in "
        f"{(record.end - record.start).total_seconds():.1f} s"
    )
    out(f"{'table':<20}{'rows':>12}{'version':>10}")
    for table, version in record.table_versions.items():
        rows = record.counts.get(table, 1 if table == tables.RUNS else 0)
        out(f"{table:<20}{rows:>12}{version:>10}")
    counts = record.counts
    if "rows_read" in counts:
        out(
            f"rows read {counts['rows_read']}: {counts['internal_events']} internal, "
            f"{counts['send_rows']} send, {counts['receive_rows']} receive, "
            f"{counts[tables.QUARANTINE]} quarantined; messages in flight "
            f"{counts['in_flight']}, orphan receives {counts['orphan']}"
        )
    if "traces" in counts:
        out(
            f"clocks: {counts['traces']} trace(s), {counts['invalid_traces']} INVALID "
            f"(causal cycle); {counts['clock_passes']} clock pass(es), "
            f"{counts['component_rounds']} component round(s)"
        )
    if "class_RSC" in counts:
        classes = ", ".join(f"{name} {counts[f'class_{name}']}" for name in ORDER_CLASSES)
        out(
            f"detect: {counts[tables.VIOLATIONS]} violation row(s), "
            f"{counts[tables.CROWNS]} crown component(s); traces by order class: {classes}"
        )
    replayed = {k[len("replay_"):]: v for k, v in counts.items() if k.startswith("replay_")}
    if replayed:
        unverified = replayed.pop("unverified", 0)
        statuses = ", ".join(f"{status} {n}" for status, n in sorted(replayed.items()))
        out(f"replay: runs by status: {statuses}; verification failed: {unverified}")


def generate(args: argparse.Namespace, session: SparkSession | None = None) -> str:
    """Write the traces `args` describe; return a one-line summary."""
    spec = GeneratorSpec(
        processes=args.processes,
        events=args.events,
        topology=args.topology,
        internal_prob=args.internal_prob,
        latency=Latency.parse(args.latency),
        loss=args.loss,
        traces=args.traces,
        seed=args.seed,
    ).validate()
    config = load_config(args.conf)
    spark = session or build_session(config.spark)
    began = time.monotonic()
    write_generated(generate_traces(spark, spec), args.out, args.format, spec)
    return (
        f"wrote {spec.traces} trace(s) x {spec.events} events ({spec.processes} processes, "
        f"{spec.topology}, latency {args.latency}, loss {spec.loss}) to {args.out} "
        f"as {args.format} in {time.monotonic() - began:.1f} s"
    )


def explain(args: argparse.Namespace, session: SparkSession | None = None) -> str:
    """The violations and crowns of `args.msg` in `args.trace`, in words."""
    config = load_config(args.conf)
    spark = session or build_session(config.spark)
    warehouse = Warehouse(spark, args.warehouse, config.sink.format)
    findings = Findings(
        events=warehouse.read(tables.EVENTS),
        messages=warehouse.read(tables.MESSAGES),
        violations=warehouse.read(tables.VIOLATIONS),
        crowns=warehouse.read(tables.CROWNS),
        crown_members=warehouse.read(tables.CROWN_MEMBERS),
        trace_summary=warehouse.read(tables.TRACE_SUMMARY),
    )
    return explain_message(findings, args.trace, args.msg)


def comparison_report(args: argparse.Namespace, session: SparkSession | None = None) -> str:
    """`protocol_comparison` as a text table of medians (p99); plots if `--plots` was given."""
    config = load_config(args.conf)
    spark = session or build_session(config.spark)
    warehouse = Warehouse(spark, args.warehouse, config.sink.format)
    text = format_comparison(warehouse.read(tables.PROTOCOL_COMPARISON))
    plots = getattr(args, "plots", None)
    if plots:
        written = plot_overheads(
            warehouse.read(tables.PROTOCOL_RUNS), warehouse.read(tables.MESSAGES), plots
        )
        text += "\nplots: " + ", ".join(str(p) for p in written)
    return text


def run(argv: Sequence[str], session: SparkSession | None = None) -> RunRecord:
    """Parse `argv`, run the job and return its record (raises on failure)."""
    args = _parser().parse_args(list(argv))
    config: Config = load_config(args.conf)
    stages = _stages(args.command, args, config)  # bad options fail before Spark starts
    for given in getattr(args, "inputs", []):
        if not Path(given).exists():  # fail before paying for a Spark session
            raise InputError(f"input path {given} does not exist")
    spark = session or build_session(config.spark)
    warehouse = Warehouse(spark, args.warehouse, config.sink.format)
    return run_job(args.command, stages, spark=spark, config=config, warehouse=warehouse)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.INFO if ("-v" in arguments or "--verbose" in arguments) else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if arguments[:1] == ["generate"]:
            print(generate(_parser().parse_args(arguments)))
            return 0
        if arguments[:1] == ["explain"]:
            print(explain(_parser().parse_args(arguments)))
            return 0
        record = run(arguments)
        _report(record, print)
        if arguments[:1] in (["compare"], ["audit"]):
            print(comparison_report(_parser().parse_args(arguments)))
    except (
        ConfigError,
        InputError,
        WarehouseError,
        GeneratorError,
        UnknownMessageError,
        ReplayRequestError,
    ) as e:
        print(f"causal-spark: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
