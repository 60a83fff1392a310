"""`causal-spark sql`: SQL over the warehouse's tables as one committed run left them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from causal_spark.analyst import Prompt, QueryError, register_views, run_query, split_statements
from causal_spark.analyst.prompt import typed_lines
from causal_spark.analyst.text import format_table
from causal_spark.app.options import as_of
from causal_spark.app.session import build_session
from causal_spark.config import load_config
from causal_spark.io.ledger import Ledger, WarehouseError
from causal_spark.io.sinks import Warehouse
from causal_spark.io.sources import InputError

__all__ = ["TEXT", "QueryError", "run_sql", "sql_options", "statements_of"]

TEXT = (
    "run SQL over every table (as of a run) with the happened-before functions and print "
    "the results; without a query, an interactive prompt"
)


def sql_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "queries",
        nargs="*",
        metavar="QUERY",
        help="statements to run in order, one result table each (one Spark start for all)",
    )
    p.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="F.sql",
        help="run the ';'-separated statements of this file (repeatable; after the QUERYs)",
    )
    as_of(p)


def statements_of(args: argparse.Namespace) -> list[str]:
    """The statements of the QUERY arguments, then of the files, in order."""
    texts = list(args.queries)
    for name in args.file:
        try:
            texts.append(Path(name).read_text(encoding="utf-8"))
        except OSError as e:
            raise InputError(f"--file {name}: {e.strerror or e}") from e
    found: list[str] = []
    for text in texts:
        statements, rest = split_statements(text)
        found.extend(statements)
        if rest.strip():
            found.append(rest.strip())
    return found


def run_sql(args: argparse.Namespace, session: SparkSession | None = None) -> int:
    statements = statements_of(args)
    config = load_config(args.conf)
    root = str(Path(args.warehouse).resolve())
    view = Ledger(root).view(args.as_of)  # before Spark starts
    if view.run_id is None:
        raise WarehouseError(f"no committed run in {root}: run `causal-spark audit` first")
    # a session of its own: its views and functions do not leak into the caller's
    spark = (session or build_session(config.spark)).newSession()
    names = register_views(Warehouse(spark, root, config.sink.format), view)
    if statements:
        for i, statement in enumerate(statements, start=1):
            try:
                result = run_query(spark, statement)
            except QueryError as e:
                raise QueryError(f"query {i} of {len(statements)}: {e}") from e
            print(("\n" if i > 1 else "") + result, flush=True)
        return 0

    def schema(name: str) -> str:
        if name not in names:
            raise QueryError(f"no table {name!r}; .tables lists them")
        fields = spark.table(name).schema.fields
        rows = [(f.name, f.dataType.simpleString()) for f in fields]
        return format_table(["column", "type"], rows)

    interactive = sys.stdin.isatty()
    prompt = Prompt(
        run=lambda s: run_query(spark, s),
        tables=lambda: names,
        schema=schema,
        out=sys.stdout,
        interactive=interactive,
    )
    prompt.loop(typed_lines() if interactive else sys.stdin)
    return 0
