"""`causal-spark sql`: the tables of a committed run as SQL views, results as text
tables, the prompt on stdin, and every query of docs/queries.md with its output."""

from __future__ import annotations

import io
import re
import shlex
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from causal_spark import tables
from causal_spark.analyst import Prompt, QueryError, format_table, split_statements
from causal_spark.app.cli import main, run
from causal_spark.io.ledger import Ledger
from tests.conftest import ROOT, read_delta
from tests.test_cli import BIN
from tests.test_docs import _environment, _normalised, all_commands

CONF = str(ROOT / "conf" / "test.yml")
QUERIES_PAGE = ROOT / "docs" / "queries.md"
FOOTER = re.compile(r"^\(\d+ rows?\)$")


def test_statements_end_at_semicolons_outside_quotes_and_comments() -> None:
    text = "SELECT ';' AS a; -- a comment; still one\nSELECT \"x;y\" /* ; */ ;\nSELECT 3"
    assert split_statements(text) == (
        ["SELECT ';' AS a", '-- a comment; still one\nSELECT "x;y" /* ; */'],
        "\nSELECT 3",
    )
    assert split_statements("SELECT 'it\\'s;' ;;") == (["SELECT 'it\\'s;'"], "")


def test_a_table_shows_every_row_with_widths_from_the_values() -> None:
    rows = [("a", 1, 0.5, None, [1, 2], {"k": True}), ("longer name", 123, 10.25, "x", [], {})]
    assert format_table(["name", "n", "f", "s", "arr", "map"], rows).splitlines() == [
        "name           n      f  s     arr     map",
        "-----------  ---  -----  ----  ------  -----------",
        "a              1    0.5  NULL  [1, 2]  {k -> true}",
        "longer name  123  10.25  x     []      {}",
        "(2 rows)",
    ]
    assert format_table(["x"], []).splitlines() == ["x", "-", "(0 rows)"]


def test_the_prompt_loop_runs_statements_and_commands_in_order() -> None:
    out = io.StringIO()
    ran: list[str] = []

    def run_one(statement: str) -> str:
        ran.append(statement)
        if "bad" in statement:
            raise QueryError("no such column bad")
        return f"ran {len(ran)}"

    prompt = Prompt(run=run_one, tables=lambda: ["a", "b"], schema=lambda n: f"{n}: x", out=out)
    prompt.loop(
        io.StringIO(
            ".tables\nSELECT 1\n  FROM a;\nSELECT bad; SELECT 2; .schema b\n.nope\n"
            ".quit\nSELECT 3;\n"
        )
    )
    assert ran == ["SELECT 1\n  FROM a", "SELECT bad", "SELECT 2"]
    assert out.getvalue().splitlines() == [
        "a",
        "b",
        "ran 1",
        "error: no such column bad",
        "ran 3",
        "b: x",
        "error: unknown command '.nope' (.help lists them)",
    ]


def _sql(spark: SparkSession, warehouse: Path, *args: str) -> int:
    return main(["sql", "--warehouse", str(warehouse), "--conf", CONF, *args], session=spark)


def _results(printed: str) -> list[list[str]]:
    """The printed result tables, each up to and with its `(N rows)` line."""
    out: list[list[str]] = [[]]
    for line in printed.strip("\n").splitlines():
        if not out[-1] and not line.strip():
            continue
        out[-1].append(line)
        if FOOTER.match(line):
            out.append([])
    return [r for r in out if r]


def test_several_queries_in_one_call_see_every_table_and_the_order_functions(
    spark: SparkSession, detected_samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = read_delta(detected_samples / tables.TRACE_SUMMARY).to_pylist()
    events = read_delta(detected_samples / tables.EVENTS).to_pylist()
    code = _sql(
        spark,
        detected_samples,
        "SELECT trace_id, order_class FROM trace_summary ORDER BY trace_id;",
        "SELECT count(*) AS events FROM events",
        # the receive of q2 in causal_chat and the events that happen before it
        "SELECT e.process, e.lseq FROM events e JOIN events f ON e.trace_id = f.trace_id "
        "JOIN messages m ON m.trace_id = f.trace_id AND m.dst = f.process "
        "AND m.recv_lseq = f.lseq WHERE m.trace_id = 'causal_chat' AND m.msg_id = 'q2' "
        "AND happened_before(e.pidx, e.lseq, f.pidx, f.lseq, f.vc) ORDER BY 1, 2",
        "SELECT count(*) AS runs FROM runs",
    )
    assert code == 0
    first, second, third, fourth = _results(capsys.readouterr().out)
    classes = sorted((r["trace_id"], r["order_class"]) for r in summary)
    assert [line.split() for line in first[2:-1]] == [list(c) for c in classes]
    assert first[-1] == f"({len(classes)} rows)"
    assert second[2].strip() == str(len(events))
    # P2's clock just before it receives q2 is [1, 2, 1] (README): P0#1, P1#1, P1#2, P2#1
    assert [line.split() for line in third[2:-1]] == [
        ["P0", "1"],
        ["P1", "1"],
        ["P1", "2"],
        ["P2", "1"],
    ]
    assert fourth[2].strip() == "1"


def test_a_query_spark_rejects_exits_2_naming_it(
    spark: SparkSession, detected_samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sql(spark, detected_samples, "SELECT 1 AS one", "SELECT nope FROM events") == 2
    captured = capsys.readouterr()
    assert "(1 row)" in captured.out
    # Spark's own logger may print the analysis error first
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("causal-spark: error: query 2 of 2: ") and "nope" in last
    assert "Traceback" not in captured.err


def test_an_unknown_run_exits_2_before_spark(
    detected_samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sql", "--warehouse", str(detected_samples), "--as-of", "nope", "SELECT 1"]
    assert main(argv) == 2
    assert "no committed run 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_as_of_reads_the_tables_a_run_left_and_previous_ones(
    spark: SparkSession,
    detected_samples: Path,
    writable_copy: Callable[[Path], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    warehouse = writable_copy(detected_samples)
    first = Ledger(str(warehouse)).rows()[-1]["id"]
    n_before = len(read_delta(warehouse / tables.EVENTS))
    small = tmp_path / "in" / "two.jsonl"
    small.parent.mkdir()
    small.write_text(
        '{"process":"A","kind":"send","msg_id":"m","peer":"B"}\n'
        '{"process":"B","kind":"receive","msg_id":"m","peer":"A"}\n'
    )
    run(["ingest", str(small.parent), "--warehouse", str(warehouse), "--conf", CONF], spark)
    capsys.readouterr()
    query = "SELECT (SELECT count(*) FROM events) AS now, (SELECT count(*) FROM runs) AS runs"
    before = f"{query}, (SELECT count(*) FROM previous_events) AS previous"
    assert _sql(spark, warehouse, before) == 0
    assert _sql(spark, warehouse, "--as-of", first, before) == 0
    latest, as_of_first = _results(capsys.readouterr().out)
    assert latest[2].split() == ["2", "2", str(n_before)]
    assert as_of_first[2].split() == [str(n_before), "1", "0"]


def _subprocess(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "causal-spark"), *argv],
        cwd=ROOT,
        env=_environment(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def test_the_prompt_reads_statements_and_commands_from_stdin(
    spark: SparkSession,
    detected_samples: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command without a query reads its standard input (in this process: the
    subprocess of the queries page below already starts the command's own Spark)."""
    stdin = (
        ".tables\n"
        "SELECT order_class, count(*) AS traces\n"
        "  FROM trace_summary GROUP BY order_class ORDER BY order_class;\n"
        "SELECT nope FROM events;\n"
        ".schema crowns\n"
        "SELECT 'still here' AS state; .quit\n"
        ".quit\n"
        "SELECT 'not run' AS state;\n"
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    assert _sql(spark, detected_samples) == 0
    printed = capsys.readouterr().out
    out = printed.splitlines()
    names = out[: out.index("order_class  traces")]
    written = set(Ledger(str(detected_samples)).view().versions)
    assert set(names) == written | {f"previous_{t}" for t in written} | {tables.RUNS}
    summary = read_delta(detected_samples / tables.TRACE_SUMMARY).to_pylist()
    counts = Counter(r["order_class"] for r in summary)
    shown = out[out.index("order_class  traces") + 2 : out.index(f"({len(counts)} rows)")]
    assert [line.split() for line in shown] == [[c, str(n)] for c, n in sorted(counts.items())]
    errors = [line for line in out if line.startswith("error: ")]
    assert len(errors) == 1 and "nope" in errors[0]
    assert "scc_size  bigint" in out
    assert "still here" in printed and "not run" not in printed


# --- docs/queries.md: every query of the page in one `causal-spark sql` ---------------


def _page_queries() -> list[tuple[str, str]]:
    """(query, the output the page shows) of each command of docs/queries.md."""
    found = []
    for command in all_commands([QUERIES_PAGE]):
        words = shlex.split(command.text)
        assert words[:4] == [".venv/bin/causal-spark", "sql", "--warehouse", "warehouse"], (
            command.where
        )
        assert len(words) == 5 and command.block.output is not None, command.where
        found.append((words[4], command.block.output))
    return found


def test_the_queries_page_shows_ten_questions() -> None:
    assert len(_page_queries()) == 10


@pytest.mark.slow
def test_every_query_of_the_page_prints_what_the_page_shows(audited_samples: Path) -> None:
    queries = _page_queries()
    done = _subprocess(
        ["sql", "--warehouse", str(audited_samples), "--conf", CONF, *[q for q, _ in queries]]
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = _results(done.stdout)
    assert len(printed) == len(queries)
    differ = [
        f"{query!r} prints:\n" + "\n".join(lines)
        for (query, shown), lines in zip(queries, printed, strict=True)
        if _normalised("\n".join(lines)) != _normalised(shown)
    ]
    assert not differ, "docs/queries.md: the output shown differs:\n" + "\n\n".join(differ)
