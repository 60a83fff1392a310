"""The interactive prompt of `causal-spark sql`: `;`-terminated statements and dot
commands (`.tables`, `.schema TABLE`, `.help`, `.quit`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TextIO

from causal_spark.analyst.errors import QueryError
from causal_spark.analyst.statements import split_statements

HELP = """Statements end with ';' and may span lines. Commands:
  .tables          the tables (views) you can query
  .schema TABLE    a table's columns and types
  .help            this text
  .quit            leave (so does end of input)"""


@dataclass
class Prompt:
    """run: a statement -> its printed result (raises `QueryError`); tables: the view
    names; schema: a view name -> its columns as text (raises `QueryError`)."""

    run: Callable[[str], str]
    tables: Callable[[], list[str]]
    schema: Callable[[str], str]
    out: TextIO
    interactive: bool = False

    def _say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _command(self, line: str) -> bool:
        """Run a dot command; False when it asks to leave."""
        word, _, rest = line.partition(" ")
        if word in (".quit", ".exit"):
            return False
        if word == ".tables":
            self._say("\n".join(self.tables()))
        elif word == ".schema" and rest.strip():
            try:
                self._say(self.schema(rest.strip()))
            except QueryError as e:
                self._say(f"error: {e}")
        elif word == ".help":
            self._say(HELP)
        else:
            self._say(f"error: unknown command {line!r} (.help lists them)")
        return True

    def _execute(self, statement: str) -> None:
        try:
            self._say(self.run(statement))
        except QueryError as e:
            self._say(f"error: {e}")

    def loop(self, lines: Iterable[str]) -> None:
        """Read statements and commands from `lines` until `.quit` or their end; a
        statement left without `;` at the end runs too."""
        pending = ""
        if self.interactive:
            self._say("causal-spark sql: statements end with ';'; .help, .tables, .quit")
        for line in lines:
            if not pending.strip() and line.strip().startswith("."):
                if not self._command(line.strip()):
                    return
                continue
            pending += line if line.endswith("\n") else line + "\n"
            statements, pending = split_statements(pending)
            for statement in statements:
                self._execute(statement)
            if pending.strip().startswith("."):  # a command after the last `;` of a line
                command, pending = pending.strip(), ""
                if not self._command(command):
                    return
        if pending.strip():
            self._execute(pending.strip())


def typed_lines(first: str = "sql> ", more: str = "...> ") -> Iterable[str]:
    """Lines typed at a terminal, with a prompt and line editing (readline)."""
    import readline  # noqa: F401  (line editing and history for input())

    prompt = first
    while True:
        try:
            line = input(prompt)
        except EOFError:
            return
        yield line + "\n"
        prompt = more if line.strip() and not line.rstrip().endswith(";") else first
