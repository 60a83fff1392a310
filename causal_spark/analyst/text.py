"""A query result as a plain text table: every row, widths from the values.

Columns are as wide as their widest value or name (so the same rows always print
the same way); numbers are right-aligned, everything else left-aligned; NULL for a
null; arrays as `[a, b]`, maps as `{k -> v}`, structs as `{a, b}` (Spark's `show`
notation), booleans as `true` / `false`, floats as Python prints them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

NULL = "NULL"


def cell(value: Any) -> str:
    """One value as text (multi-line text on one line, `\\n` shown as `\\n`)."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{cell(k)} -> {cell(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):  # a Row
        return "{" + ", ".join(cell(v) for v in value) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(cell(v) for v in value) + "]"
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    return str(value).replace("\r", "\\r").replace("\n", "\\n")


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The rows under their column names, a rule, and a `(N rows)` line."""
    texts = [[cell(v) for v in row] for row in rows]
    widths = [max([len(name), *(len(t[i]) for t in texts)]) for i, name in enumerate(columns)]
    right = [
        bool(rows)
        and all(_numeric(row[i]) or row[i] is None for row in rows)
        and any(_numeric(row[i]) for row in rows)
        for i in range(len(columns))
    ]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    out = [line(list(columns)), "  ".join("-" * w for w in widths)]
    out.extend(line(t) for t in texts)
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out)
