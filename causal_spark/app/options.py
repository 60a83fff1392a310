"""Option groups the sub-commands share, and the configuration they select."""

from __future__ import annotations

import argparse
from dataclasses import replace

from causal_spark.app import gating
from causal_spark.config import SPAN_PROCESSES, Config, load_config
from causal_spark.generate import TOPOLOGIES, GeneratorSpec
from causal_spark.io.readers import EVENTS, READERS


def writer_options(p: argparse.ArgumentParser) -> None:
    """Options of every job that writes the warehouse (docs/scheduling.md)."""
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="if another job is writing the warehouse, wait up to this long for it "
        "(default: fail at once, naming it)",
    )
    p.add_argument(
        "--fail-on",
        default=None,
        metavar="CONDITIONS",
        help="exit 1 (after committing) when a condition on the run's findings holds, e.g. "
        "causal,fifo,crown,invalid,quarantine>100; names: " + ", ".join(gating.FINDINGS),
    )
    p.add_argument(
        "--summary-json",
        default=None,
        metavar="PATH",
        help="write the run's summary (counts per table, classes, new findings, gating) "
        "as JSON to PATH, also when the run fails",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines or bar, no table report"
    )


def as_of(p: argparse.ArgumentParser, what: str = "the tables") -> None:
    p.add_argument(
        "--as-of",
        default=None,
        metavar="RUN",
        help=f"read {what} as committed run RUN left them (its id or a unique prefix; "
        "default: the last committed run)",
    )


def reader_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        dest="input_format",
        choices=("auto", EVENTS, *READERS),
        default="auto",
        help="read every input file with this reader; events: our row format (jsonl, csv, "
        "parquet, delta by extension); auto (default): by extension, then content",
    )
    p.add_argument("--shiviz-regex", help="ShiViz parser regex (default: the GoVector header)")
    p.add_argument("--shiviz-delimiter", help="ShiViz regex that separates executions")
    p.add_argument(
        "--span-process",
        choices=SPAN_PROCESSES,
        help="spans: a service instance is one process (instance) or every span is (span)",
    )


def config_of(args: argparse.Namespace) -> Config:
    """The configuration of `--conf`, with the reader options given on the command line."""
    config = load_config(args.conf)
    given = {
        key: getattr(args, key)
        for key in ("shiviz_regex", "shiviz_delimiter", "span_process")
        if getattr(args, key, None) is not None
    }
    return replace(config, ingest=replace(config.ingest, **given)) if given else config


def generate_options(p: argparse.ArgumentParser) -> None:
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


def replay_options(p: argparse.ArgumentParser) -> None:
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
