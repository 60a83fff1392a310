"""Splitting SQL text into statements at `;` (not inside quotes or comments)."""

from __future__ import annotations

_QUOTES = "'\"`"


def split_statements(text: str) -> tuple[list[str], str]:
    """The complete statements of `text` (each ended by a `;` outside quotes and
    comments, stripped, empty ones dropped) and the unfinished rest."""
    statements: list[str] = []
    start = 0
    i = 0
    quote: str | None = None
    while i < len(text):
        c = text[i]
        if quote is not None:
            if c == "\\" and quote != "`":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in _QUOTES:
            quote = c
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
            continue
        elif c == ";":
            statement = text[start:i].strip()
            if statement:
                statements.append(statement)
            start = i + 1
        i += 1
    return statements, text[start:]
