"""`causal-spark`: the command line. Every sub-command is also `spark-submit jobs/<name>.py`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from causal_spark import __version__, tables
from causal_spark.anomalies.explain import (
    Findings,
    UnknownMessageError,
    explain_message,
    explain_trace,
)
from causal_spark.app import export, gating, sql
from causal_spark.app.gating import FailOnError
from causal_spark.app.incremental import Incremental
from causal_spark.app.lock import writer_lock
from causal_spark.app.options import (
    as_of,
    config_of,
    generate_options,
    reader_options,
    replay_options,
    writer_options,
)
from causal_spark.app.progress import Progress
from causal_spark.app.report import report_options, run_report, write_svg
from causal_spark.app.runs import RunRecord, Stage, run_job
from causal_spark.app.session import build_session
from causal_spark.app.stages import (
    clocks_stage,
    compare_stage,
    detect_stage,
    ingest_stage,
    replay_stage,
)
from causal_spark.app.summary import (
    failed_summary,
    new_findings,
    run_summary,
    skipped_line,
    write_summary,
)
from causal_spark.app.warmup import REPLAY, WarmUp, small_inputs, start_warm_up, waiting
from causal_spark.config import Config, ConfigError, load_config
from causal_spark.generate import (
    GeneratorError,
    GeneratorSpec,
    Latency,
    generate_traces,
    write_generated,
)
from causal_spark.io.ledger import Ledger, WarehouseError
from causal_spark.io.sinks import Warehouse
from causal_spark.io.sources import InputError
from causal_spark.replay import ReplayRequest, ReplayRequestError, parse_params
from causal_spark.replay.plots import format_comparison, plot_overheads

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
    if handler is _run_stages:
        writer_options(p)
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
            "inputs",
            nargs="+",
            help="files or folders of message logs, or Delta tables: our rows (.jsonl, .csv, "
            ".parquet), ShiViz/GoVector (.log), DistributedClocks tracing (.jsonl), "
            "Zipkin, Jaeger or OTLP spans (.json)",
        )
        reader_options(p)
        if name == "audit":
            p.add_argument("--matrix", action="store_true", help="also write matrix_clocks")
            replay_options(p)
            p.add_argument(
                "--incremental",
                action="store_true",
                help="read only files new or changed since the last committed run and "
                "re-analyse only the traces they touch (docs/scheduling.md)",
            )
            p.add_argument(
                "--prune",
                action="store_true",
                help="with --incremental: drop the rows of files that are gone (a trace "
                "left with no row is removed)",
            )
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
    replay_options(p)
    p = _command(
        sub,
        "compare",
        "compare protocols' overhead across traces; write and print protocol_comparison",
        _run_stages,
    )
    p.set_defaults(handler=_compare)
    as_of(p, "protocol_comparison (print it, run nothing)")
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
    p.add_argument("--msg", default=None, help="msg_id (without it: the trace's findings)")
    p.add_argument("--svg", default=None, metavar="FILE", help="also draw its diagram (SVG)")
    as_of(p)
    p = _command(sub, "report", "write a static HTML report of a run (no Spark)", run_report)
    report_options(p)
    p = _command(
        sub, "runs", "list the committed runs: id, command, inputs, counts, versions", _runs
    )
    as_of(p, "the ledger (runs up to RUN)")
    p.add_argument("--json", action="store_true", help="one JSON object per run")
    p = _command(
        sub,
        "diff",
        "findings that appeared, disappeared or changed between two runs, per trace",
        _diff,
    )
    p.add_argument(
        "--from",
        dest="from_run",
        default=None,
        metavar="RUN",
        help="default: the analysing run before --to",
    )
    p.add_argument(
        "--to", dest="to_run", default=None, metavar="RUN", help="default: the last committed run"
    )
    as_of(p, "the later side (same as --to)")
    p = _command(
        sub,
        "vacuum",
        "delete data files that no run of the last N days needs; older runs become unreadable",
        _vacuum,
    )
    p.add_argument(
        "--retain-days",
        type=float,
        required=True,
        metavar="N",
        help="keep every file a run committed in the last N days can read",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to this long for a running writer",
    )
    p = _command(
        sub,
        "generate",
        "write synthetic message logs (Poisson sends, random latencies) to a folder",
        _generate,
        warehouse=False,
    )
    generate_options(p)
    export.export_options(_command(sub, "export", export.TEXT, export.run_export))
    sql.sql_options(_command(sub, "sql", sql.TEXT, sql.run_sql))
    return parser


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
        max_run_bytes=settings.max_run_bytes,
    ).validate()


def _stages(
    args: argparse.Namespace, config: Config, warm_up: WarmUp | None = None
) -> list[tuple[str, Stage]]:
    """The named stages of a stage command, in order; with a `warm_up`, each stage it
    compiles for first waits for its part."""
    named = _plain_stages(args, config, warm_up is not None and REPLAY in warm_up.parts)
    if warm_up is None:
        return named
    return [
        (name, waiting(stage, warm_up, name) if name in warm_up.parts else stage)
        for name, stage in named
    ]


def _plain_stages(
    args: argparse.Namespace, config: Config, replay_compiled: bool
) -> list[tuple[str, Stage]]:
    command = args.command
    if command == "ingest":
        return [("ingest", ingest_stage(args.inputs, args.input_format))]
    if command == "audit":
        return [
            ("ingest", ingest_stage(args.inputs, args.input_format)),
            ("clocks", clocks_stage(args.matrix)),
            ("detect", detect_stage()),
            ("replay", replay_stage(replay_request(args, config), replay_compiled)),
            ("compare", compare_stage()),
        ]
    if command == "replay":
        return [("replay", replay_stage(replay_request(args, config), replay_compiled))]
    if command == "compare":
        return [("compare", compare_stage())]
    if command == "clocks":
        return [("clocks", clocks_stage(args.matrix))]
    if command == "detect":
        return [("detect", detect_stage())]
    raise AssertionError(f"no stages for command {command}")


def _report(record: RunRecord, out: Callable[[str], None]) -> None:
    mode = f", {record.mode}" if record.mode else ""
    out(
        f"run {record.run_id} ({record.command}{mode}) committed in "
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
    if args.svg and args.msg is None:
        raise UnknownMessageError("--svg draws one message's finding: give --msg too")
    print(explain(args, session))
    if args.svg:
        print(write_svg(args))
    return 0


def explain(args: argparse.Namespace, session: SparkSession | None = None) -> str:
    """The violations and crowns of `args.msg` in `args.trace`, in words."""
    config = load_config(args.conf)
    as_of = getattr(args, "as_of", None)
    view = Ledger(str(Path(args.warehouse).resolve())).view(as_of)  # before Spark starts
    spark = session or build_session(config.spark)
    warehouse = Warehouse(spark, args.warehouse, config.sink.format)

    def read(table: str) -> DataFrame:
        return warehouse.read(table, as_of=view.run_id)

    findings = Findings(
        events=read(tables.EVENTS),
        messages=read(tables.MESSAGES),
        violations=read(tables.VIOLATIONS),
        crowns=read(tables.CROWNS),
        crown_members=read(tables.CROWN_MEMBERS),
        trace_summary=read(tables.TRACE_SUMMARY),
        trace_clocks=read(tables.TRACE_CLOCKS) if tables.TRACE_CLOCKS in view.versions else None,
    )
    if args.msg is None:
        return explain_trace(findings, args.trace)
    return explain_message(findings, args.trace, args.msg, config.detect.crown_search_budget)


def comparison_report(args: argparse.Namespace, session: SparkSession | None = None) -> str:
    """`protocol_comparison` as a text table of medians (p99); plots if `--plots` was given."""
    config = load_config(args.conf)
    as_of = getattr(args, "as_of", None)
    spark = session or build_session(config.spark)
    warehouse = Warehouse(spark, args.warehouse, config.sink.format)
    text = format_comparison(warehouse.read(tables.PROTOCOL_COMPARISON, as_of=as_of))
    plots = getattr(args, "plots", None)
    if plots:
        written = plot_overheads(
            warehouse.read(tables.PROTOCOL_RUNS, as_of=as_of),
            warehouse.read(tables.MESSAGES, as_of=as_of),
            plots,
        )
        text += "\nplots: " + ", ".join(str(p) for p in written)
    return text


def _compare(args: argparse.Namespace, session: SparkSession | None = None) -> int:
    """`compare`: run the stage and print; with --as-of, only print (a reader)."""
    if args.as_of is None:
        return _run_stages(args, session)
    Ledger(str(Path(args.warehouse).resolve())).resolve(args.as_of)  # before Spark starts
    print(comparison_report(args, session))
    return 0


def _run_stages(args: argparse.Namespace, session: SparkSession | None = None) -> int:
    """A job of stages (ingest, audit, clocks, detect, replay, compare): run, commit, report,
    gate (exit 1 when a --fail-on condition held)."""
    conditions = gating.parse_conditions(args.fail_on)
    config = config_of(args)
    named = _stages(args, config)  # bad options fail before Spark starts
    gating.require_stages(conditions, args.command, [name for name, _ in named])
    if getattr(args, "prune", False) and not getattr(args, "incremental", False):
        raise FailOnError("--prune only applies to an incremental audit (--incremental)")
    progress = Progress(quiet=args.quiet)
    with writer_lock(str(Path(args.warehouse).resolve()), args.command, wait=args.wait):
        record = run_job_of(args, session, progress=progress, config=config)
    out = (lambda _line: None) if args.quiet else print
    if record.repaired:
        for line in record.repaired.lines():
            print(line)
    _report(record, out)
    files_line = skipped_line(record)
    if not args.quiet and files_line is not None:
        print(files_line, file=sys.stderr)  # stdout keeps the report
    if args.command in ("compare", "audit") and not args.quiet:
        print(comparison_report(args, session))
    needs_new = any(c.name == "new" for c in conditions) or args.summary_json
    new = new_findings(args, session, record, config) if needs_new else None
    counts = dict(record.counts)
    if new is not None:
        counts["new_findings"] = new["appeared"] + new["changed"]
    outcomes = gating.evaluate(conditions, counts)
    for outcome in outcomes:
        if outcome.held or not args.quiet:
            print(outcome.line())
    code = 1 if any(o.held for o in outcomes) else 0
    if args.summary_json:
        write_summary(args, run_summary(args, record, outcomes, new, code, config))
    return code


def run_job_of(
    args: argparse.Namespace,
    session: SparkSession | None = None,
    progress: Progress | None = None,
    config: Config | None = None,
) -> RunRecord:
    """Run the job of a parsed stage command and return its record (raises on failure)."""
    config = config or config_of(args)
    named = _stages(args, config)  # bad options fail before Spark starts
    for given in getattr(args, "inputs", []):
        if not Path(given).exists():  # fail before paying for a Spark session
            raise InputError(f"input path {given} does not exist")
    progress = progress or Progress(quiet=True)
    inputs: list[str] = getattr(args, "inputs", None) or []
    small = bool(inputs) and small_inputs(inputs)
    warm = _start_warm_up(args, config, [name for name, _ in named], session, small)
    try:
        named = _stages(args, config, warm)
        progress.say(f"{args.command}: starting Spark")
        spark = session or build_session(
            config.spark, short=small, stages=[name for name, _ in named]
        )
        progress.spark = spark
        warehouse = Warehouse(spark, args.warehouse, config.sink.format)
        incremental = None
        mode = None
        if args.command == "audit":
            mode = "incremental" if args.incremental else "full"
            if args.incremental:
                incremental = Incremental(
                    tuple(args.inputs), prune=args.prune, reader=args.input_format
                )
        return run_job(
            args.command,
            [stage for _, stage in named],
            stage_names=[name for name, _ in named],
            spark=spark,
            config=config,
            warehouse=warehouse,
            started=progress.started,
            ended=progress.ended,
            incremental=incremental,
            mode=mode,
        )
    finally:
        if warm is not None:
            warm.close()


def _start_warm_up(
    args: argparse.Namespace,
    config: Config,
    stage_names: Sequence[str],
    session: SparkSession | None,
    small: bool,
) -> WarmUp | None:
    """Start compiling what the stages need (`app/warmup.py`), for a job that starts its
    own local Spark: a given session's caller (the tests) warms up its own way, and under
    spark-submit the workers may be elsewhere. `small`: the inputs are `small_inputs`."""
    master = config.spark.master or ""
    if session is not None or os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    if not master.startswith("local"):
        return None
    protocols = replay_request(args, config).protocols if "replay" in stage_names else ()
    return start_warm_up(stage_names, protocols, small=small)


def run(
    argv: Sequence[str], session: SparkSession | None = None, progress: Progress | None = None
) -> RunRecord:
    """Parse `argv` (a stage command), run the job and return its record (raises on failure).
    `progress`: told when each stage starts and ends (default: silent)."""
    args = _parser().parse_args(list(argv))
    if args.handler not in (_run_stages, _compare):
        raise ValueError(f"'{args.command}' is not a job of stages")
    return run_job_of(args, session, progress=progress)


def _runs(args: argparse.Namespace, session: SparkSession | None = None) -> int:
    """`runs`: the ledger, oldest first (no Spark)."""
    ledger = Ledger(str(Path(args.warehouse).resolve()))
    rows = ledger.rows()
    if args.as_of is not None:
        last = ledger.resolve(args.as_of, rows)
        rows = rows[: rows.index(last) + 1]
    if not rows:
        print(f"no committed run in {ledger.root}")
        return 0
    for row in rows:
        if args.json:
            print(json.dumps(row, default=str, sort_keys=True))
            continue
        seconds = (row["end"] - row["start"]).total_seconds()
        mode = f" {row['mode']}" if row.get("mode") else ""
        print(
            f"{row['id']}  {row['command']}{mode}  "
            f"{row['start']:%Y-%m-%d %H:%M:%S}  {seconds:.1f} s"
        )
        for given in row["inputs"] or []:
            files = given.get("files") or []
            read = sum(1 for f in files if f["read"])
            detail = f", {read} of {len(files)} file(s) read" if files else ""
            print(
                f"  input {given['path']} ({given['format']}, {given['n_files']} file(s){detail})"
            )
        counts = row["counts"]
        shown = [
            f"{k} {counts[k]}"
            for k in (
                "rows_read",
                "events",
                "messages",
                "quarantine",
                "violations",
                "crowns",
                "trace_summary",
                "protocol_runs",
                "rolled_back",
                "removed_files",
            )
            if k in counts
        ]
        if shown:
            print("  counts " + ", ".join(shown))
        written = set(row.get("written") or [])
        versions = ", ".join(
            f"{t} {v}{'*' if t in written else ''}"
            for t, v in sorted(row["table_versions"].items())
        )
        print(f"  versions {versions or '-'} (* written by this run)")
        if row.get("skipped"):
            names = ", ".join(s["path"] for s in row["skipped"][:3])
            more = f" and {len(row['skipped']) - 3} more" if len(row["skipped"]) > 3 else ""
            print(f"  skipped {len(row['skipped'])} file(s) no reader took: {names}{more}")
        if row.get("note"):
            print(f"  note {row['note']}")
    return 0


def _diff(args: argparse.Namespace, session: SparkSession | None = None) -> int:
    """`diff`: findings that appeared, disappeared or changed between two runs."""
    from causal_spark.app.history import findings_diff, format_diff
    from causal_spark.io.ledger import EMPTY, View

    if args.as_of is not None and args.to_run is not None and args.as_of != args.to_run:
        raise UsageError("diff: --as-of and --to name the same side; give one of them")
    ledger = Ledger(str(Path(args.warehouse).resolve()))
    rows = ledger.rows()
    if not rows:
        raise WarehouseError(f"no committed run in {ledger.root}")
    to_ref = args.to_run or args.as_of
    to_row = ledger.resolve(to_ref, rows) if to_ref else rows[-1]
    analysed = [
        r for r in rows[: rows.index(to_row)] if tables.TRACE_SUMMARY in (r.get("written") or [])
    ]
    if args.from_run is not None:
        from_row: dict[str, Any] | None = ledger.resolve(args.from_run, rows)
    else:
        from_row = analysed[-1] if analysed else None
    config = load_config(args.conf)
    spark = session or build_session(config.spark)
    warehouse = Warehouse(spark, args.warehouse, config.sink.format)

    def view(row: dict[str, Any]) -> View:
        return View(row["id"], dict(row["table_versions"]), dict(row["lineage"]))

    before = view(from_row) if from_row is not None else EMPTY
    diff = findings_diff(warehouse, before, view(to_row))
    lines = [r.asDict() for r in diff.collect()]
    print(format_diff(lines, from_row["id"] if from_row else "(nothing)", to_row["id"]))
    return 0


def _vacuum(args: argparse.Namespace, session: SparkSession | None = None) -> int:
    """`vacuum`: delete the data files no run of the last N days can read."""
    from causal_spark.app.vacuum import vacuum

    if args.retain_days < 0:
        raise UsageError("--retain-days must be 0 or more")
    root = str(Path(args.warehouse).resolve())
    config = load_config(args.conf)
    with writer_lock(root, "vacuum", wait=args.wait):
        for line in vacuum(root, args.retain_days, config.to_json()):
            print(line)
    return 0


class UsageError(ValueError):
    """Options that contradict each other."""


# errors that are the user's to fix: a message and exit code 2, no traceback
USER_ERRORS: tuple[type[Exception], ...] = (
    ConfigError,
    InputError,
    WarehouseError,
    GeneratorError,
    UnknownMessageError,
    ReplayRequestError,
    FailOnError,
    UsageError,
    export.ExportError,
    sql.QueryError,
)
EXIT_OK, EXIT_FAIL_ON, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def main(argv: Sequence[str] | None = None, session: SparkSession | None = None) -> int:
    """Exit codes (docs/scheduling.md): 0 success; 1 committed, but a --fail-on condition held;
    2 bad usage, configuration or input, or the warehouse is held by another writer
    (nothing committed); 3 internal failure (nothing committed)."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    handler: Handler = args.handler
    began = datetime.now(UTC)
    try:
        return handler(args, session)
    except USER_ERRORS as e:
        print(f"causal-spark: error: {e}", file=sys.stderr)
        failed_summary(args, began, EXIT_USAGE, e)
        return EXIT_USAGE
    except Exception as e:  # the one place every other failure becomes exit code 3
        traceback.print_exc()
        print(f"causal-spark: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        failed_summary(args, began, EXIT_INTERNAL, e)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
