"""One JSON line parsed exactly as Spark's read of JSON Lines parsed it, slowly.

Spark's read (`from_json` of `[line]` into strings, `json_object_keys`, Jackson under
both) gave a line's input fields and one of four reasons (`jsonl_kernel` says which); a
field's value is its string, or the JSON text of any other value as Jackson's generator
writes it: `-0` is `0`, `1e3` is `1000.0`, `1e400` is `"Infinity"`, objects and arrays
compact with their names as given, a lone surrogate `?`. `jsonl_kernel` parses most lines
faster and sends here those it cannot vouch for.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

from causal_spark import columns as C

INPUT_FIELDS = C.INPUT_FIELDS

NOT_UTF8 = "not valid UTF-8"
NOT_OBJECT = "not a JSON object"
TWO_OBJECTS = "more than one JSON object on the line (a second object or trailing text)"
TWICE = "a field is given twice in one object"

# a line longer than this is parsed here (Jackson's limits: nesting 1000, a number of
# 1000 characters)
LONG_LINE = 1000

_FIELDS = frozenset(INPUT_FIELDS)
_JSON_SPACE = " \t\n\r"


# --- numbers and values as Jackson writes them ------------------------------------


def java_double(x: float) -> str:
    """A double as Jackson's generator writes it (Java's `Double.toString`, shortest
    digits): `1.5`, `1000.0`, `1.0E-8`, `-0.0`; infinities are quoted strings."""
    if math.isnan(x):
        return '"NaN"'
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    a = abs(x)
    if 1e-3 <= a < 1e7:
        return repr(x)  # fixed notation with a '.' in this range
    _, digits, exponent = Decimal(repr(a)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + int(exponent) - 1
    body = text[0] + "." + (text[1:] or "0")
    return ("-" if x < 0 else "") + f"{body}E{power}"


class _Number(str):
    """A number's text as Jackson writes it (a `json` hook's result)."""


class _Object(list):  # type: ignore[type-arg]
    """An object's (name, value) pairs in order, names repeated as given."""


def _int(text: str) -> _Number:
    if len(text) > LONG_LINE:
        raise ValueError("number too long")
    return _Number(str(int(text)))


def _float(text: str) -> _Number:
    if len(text) > LONG_LINE:
        raise ValueError("number too long")
    return _Number(java_double(float(text)))


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


_LENIENT = json.JSONDecoder(
    object_pairs_hook=_Object,
    parse_float=_float,
    parse_int=_int,
    parse_constant=_constant,
    strict=False,
)
_STRICT = json.JSONDecoder(
    object_pairs_hook=_Object, parse_float=_float, parse_int=_int, parse_constant=_constant
)
_CONTROL = re.compile("[\x00-\x1f]")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
            "\r": "\\r"}  # fmt: skip
_TO_ESCAPE = re.compile('["\\\\\x00-\x1f]')


def _utf8(text: str) -> str:
    """As Java's UTF-8 encoder leaves a string: an unpaired surrogate becomes '?'."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _quoted(text: str) -> str:
    escaped = _TO_ESCAPE.sub(lambda m: _ESCAPES.get(m[0], f"\\u{ord(m[0]):04X}"), text)
    return f'"{escaped}"'


def _compact(value: Any) -> str:
    """A nested value as Jackson's generator copies it: compact, names kept as given."""
    if isinstance(value, _Object):
        return "{" + ",".join(f"{_quoted(k)}:{_compact(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_compact(v) for v in value) + "]"
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, str):
        return _quoted(value)
    if value is None:
        return "null"
    return "true" if value else "false"


def _field_text(value: Any) -> str | None:
    """A field's value as a string, as `from_json` into a string gives it."""
    if value is None:
        return None
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return _utf8(_compact(value))


def _double_quoted(text: str) -> str:
    """Single-quoted strings (which Jackson's leniency accepts) as double-quoted ones."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"' or ch == "'":
            quote, j = ch, i + 1
            part = ['"']
            while j < n and text[j] != quote:
                if text[j] == "\\" and j + 1 < n:
                    part.append("'" if text[j + 1] == "'" else text[j : j + 2])
                    j += 2
                    continue
                part.append('\\"' if text[j] == '"' else text[j])
                j += 1
            part.append('"')
            out.append("".join(part))
            i = j + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_line(line: bytes) -> tuple[list[str | None], str | None]:
    """One non-blank line: the input fields (in `INPUT_FIELDS` order) and the reason it
    is rejected (then every field is None). The exact rules; slower than `parse_lines`."""
    nothing: list[str | None] = [None] * len(INPUT_FIELDS)
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return nothing, NOT_UTF8
    if "'" in text:
        text = _double_quoted(text)
    start = len(text) - len(text.lstrip(_JSON_SPACE))
    if not text.startswith("{", start):
        return nothing, NOT_OBJECT
    try:
        obj, end = _LENIENT.raw_decode(text, start)
    except (ValueError, RecursionError):
        return nothing, NOT_OBJECT
    rest = text[end:].lstrip(_JSON_SPACE)
    if rest and not rest.startswith("]"):
        return nothing, TWO_OBJECTS
    if _CONTROL.search(text):
        try:
            _STRICT.raw_decode(text, start)
        except (ValueError, RecursionError):
            return nothing, TWO_OBJECTS
    ours = [k for k, _ in obj if k in _FIELDS]
    if len(ours) != len(set(ours)):
        return nothing, TWICE
    values = {k: v for k, v in obj if k in _FIELDS}
    return [_field_text(values.get(n)) for n in INPUT_FIELDS], None
