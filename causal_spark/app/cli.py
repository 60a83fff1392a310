"""`causal-spark`: the command line. Every sub-command is also `spark-submit jobs/<name>.py`."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from causal_spark import __version__, tables
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
    TOPOLOGIES,
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

# a sub-command's handler: parsed arguments (and a session, for tests) -> exit code
Handler = Callable[[argparse.Namespace, SparkSession | None], int]


def _common(p: argparse.ArgumentParser, warehouse: bool = True) -> None:
    if warehouse:
        p.add_argument("--warehouse", required=True, help="folder of the Delta tables")
    p.add_argument(
        "--conf",
        default=None,
        help="YAML profile (default: the embedded local profile, conf/local.yml)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log progress")


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    text: str,
    handler: Handler,
    warehouse: bool = True,
) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=text, description=text, allow_abbrev=False)
    _common(p, warehouse)
    p.set_defaults(handler=handler, command=name)
    return p


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="causal-spark",
        allow_abbrev=False,
        description="Audit recorded distributed-system message logs into Delta tables.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name, text in (
        ("ingest", "read message logs into events, messages and quarantine"),
        ("audit", "the main job: ingest, then every analysis stage, under one run id"),
    ):
        p = _command(sub, name, text, _run_stages)
        p.add_argument(
            "inputs", nargs="+", help="files or folders (.jsonl, .csv, .parquet) or Delta tables"
        )
        if name == "audit":
            p.add_argument("--matrix", action="store_true", help="also write matrix_clocks")
            _replay_options(p)
    p = _command(
        sub,
        "clocks",
        "add Lamport and vector clocks to events; write trace_clocks (and matrix_clocks)",
        _run_stages,
    )
    p.add_argument(
        "--matrix",
        action="store_true",
        help="also write matrix_clocks (sparse matrix clocks; conf clocks.matrix does the same)",
    )
    _command(
        sub,
        "detect",
        "find FIFO and causal-order violations and crowns; write trace_summary",
        _run_stages,
    )
    p = _command(
        sub,
        "replay",
        "replay every trace under delivery protocols; write protocol_runs and deliveries",
        _run_stages,
    )
    _replay_options(p)
    p = _command(
        sub,
        "compare",
        "compare protocols' overhead across traces; write and print protocol_comparison",
        _run_stages,
    )
    p.add_argument(
        "--plots",
        default=None,
        help="folder for PNG plots of overhead against processes and latency variance",
    )
    p = _command(
        sub,
        "explain",
        "explain in words the violations and crowns a message takes part in",
        _explain,
    )
    p.add_argument("--trace", required=True, help="trace_id")
    p.add_argument("--msg", required=True, help="msg_id")
    p = _command(
        sub,
        "generate",
        "write synthetic message logs (Poisson sends, random latencies) to a folder",
        _generate,
        warehouse=False,
    )
    _generate_options(p)
    return parser


def _generate_options(p: argparse.ArgumentParser) -> None:
    defaults = GeneratorSpec(processes=2, events=2)
    p.add_argument("--out", required=True, help="output folder (replaced if it exists)")
    p.add_argument("--processes", type=int, required=True, help="processes per trace (>= 2)")
    p.add_argument(
        "--events", type=int, required=True, help="events per trace (a multicast send is one)"
    )
    p.add_argument("--traces", type=int, default=defaults.traces, help="number of traces")
    p.add_argument(
        "--topology",
        choices=TOPOLOGIES,
        default=defaults.topology,
        help="who sends to whom (broadcast: every send goes to all other processes)",
    )
    p.add_argument(
        "--internal-prob",
        type=float,
        default=defaults.internal_prob,
        help="probability that a spontaneous event is internal rather than a send",
    )
    p.add_argument(
        "--latency",
        default="lognormal:0,1",
        help="latency distribution: const:X, uniform:A,B or lognormal:MU,SIGMA (seconds)",
    )
    p.add_argument(
        "--loss", type=float, default=defaults.loss, help="probability that a message is lost"
    )
    p.add_argument("--seed", type=int, default=defaults.seed, help="random seed")
    p.add_argument(
        "--format", choices=("parquet", "jsonl"), default="parquet", help="output file format"
    )


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


def _stages(args: argparse.Namespace, config: Config) -> list[Stage]:
    command = args.command
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
        rows = record.stages.rows.get(table, 1 if table == tables.RUNS else 0)
        out(f"{table:<20}{rows:>12}{version:>10}")
    for line in record.stages.lines():
        out(line)


def _session(args: argparse.Namespace, session: SparkSession | None) -> SparkSession:
    return session or build_session(load_config(args.conf).spark)


def _generate(args: argparse.Namespace, session: SparkSession | None = None) -> int:
    print(generate(args, session))
    return 0


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
    spark = _session(args, session)
    began = time.monotonic()
    write_generated(generate_traces(spark, spec), args.out, args.format, spec)
    return (
        f"wrote {spec.traces} trace(s) x {spec.events} events ({spec.processes} processes, "
        f"{spec.topology}, latency {args.latency}, loss {spec.loss}) to {args.out} "
        f"as {args.format} in {time.monotonic() - began:.1f} s"
    )


def _explain(args: argparse.Namespace, session: SparkSession | None = None) -> int:
    print(explain(args, session))
    return 0


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


def _run_stages(args: argparse.Namespace, session: SparkSession | None = None) -> int:
    """A job of stages (ingest, audit, clocks, detect, replay, compare): run, commit, report."""
    record = run_job_of(args, session)
    _report(record, print)
    if args.command in ("compare", "audit"):
        print(comparison_report(args, session))
    return 0


def run_job_of(args: argparse.Namespace, session: SparkSession | None = None) -> RunRecord:
    """Run the job of a parsed stage command and return its record (raises on failure)."""
    config: Config = load_config(args.conf)
    stages = _stages(args, config)  # bad options fail before Spark starts
    for given in getattr(args, "inputs", []):
        if not Path(given).exists():  # fail before paying for a Spark session
            raise InputError(f"input path {given} does not exist")
    spark = session or build_session(config.spark)
    warehouse = Warehouse(spark, args.warehouse, config.sink.format)
    return run_job(args.command, stages, spark=spark, config=config, warehouse=warehouse)


def run(argv: Sequence[str], session: SparkSession | None = None) -> RunRecord:
    """Parse `argv` (a stage command), run the job and return its record (raises on failure)."""
    args = _parser().parse_args(list(argv))
    if args.handler is not _run_stages:
        raise ValueError(f"'{args.command}' is not a job of stages")
    return run_job_of(args, session)


# errors that are the user's to fix: a message and exit code 2, no traceback
USER_ERRORS: tuple[type[Exception], ...] = (
    ConfigError,
    InputError,
    WarehouseError,
    GeneratorError,
    UnknownMessageError,
    ReplayRequestError,
)


def main(argv: Sequence[str] | None = None, session: SparkSession | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    handler: Handler = args.handler
    try:
        return handler(args, session)
    except USER_ERRORS as e:
        print(f"causal-spark: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
