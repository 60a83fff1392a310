"""Spark's text semantics in plain Python, for the single-process ingest baseline.

The job reads every field as a string (`causal_spark.io.raw`), so what a row means
depends on how Spark turns JSON, CSV and Parquet values into text and text into
numbers and times. This module reproduces, per value, what the job's readers and
`ingest.typed` do on Spark 4 (ANSI mode, UTC session):

- JSON lines: Jackson as Spark configures it. `json_object_keys` (a line must
  start with one object; single quotes and raw control characters allowed; no
  NaN), then `from_json("[" + line + "]")` (single quotes; no raw control
  characters): a value's text is the string itself, or Jackson's rewrite of a
  number (`1.50` -> `1.5`, `1e3` -> `1000.0`, `-0` -> `0`, `1e400` ->
  `"Infinity"`) or of an object or array (compact, re-escaped).
- `try_cast(string as long)` (`spark_long`), `try_cast(string as double)`
  (`spark_double`: Java's `Double.parseDouble`, then Spark's `inf`/`nan`
  words) and `try_to_timestamp` (`spark_timestamp_seconds`: Spark's
  `parseTimestampString`, zones as `ZoneId.of` reads them).
- Java's `Double.toString` layout (`java_double`), with the shortest digits.
  Java 17 does not always print the shortest digits (`1e23` prints as
  `9.999999999999999E22`): such a value's *text* can differ (only in details and
  `raw` of rejected rows; the number read back is the same).
- `to_json` of a Parquet row (`spark_json_row`) for the `raw` of rejected rows.

Run by hand rarely, with no Spark: see bench/ingest_baseline.py.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

INPUT_FIELDS: tuple[str, ...] = (
    "trace_id",
    "process",
    "seq",
    "kind",
    "msg_id",
    "peer",
    "ts",
    "size_bytes",
    "label",
)

NOT_UTF8 = "not valid UTF-8"
NOT_OBJECT = "not a JSON object"
MORE_THAN_ONE = "more than one JSON object on the line (a second object or trailing text)"
TWICE = "a field is given twice in one object"

# UTF8String.trimAll / isWhitespaceOrISOControl, as bytes of one character
TRIM_ALL = "".join(chr(c) for c in range(0x21)) + "\x7f"
# java.lang.String.trim
JAVA_TRIM = "".join(chr(c) for c in range(0x21))


# --------------------------------------------------------------------------- numbers as text


def _digits(x: float) -> tuple[str, int]:
    """The shortest digits of a positive finite double and its decimal exponent (d.ddd x 10^e)."""
    _, digits, exponent = Decimal(repr(x)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    return text, len(digits) + int(exponent) - 1


def java_double(x: float) -> str:
    """`Double.toString(x)`: plain between 10^-3 and 10^7, else `d.dddE±n`."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    digits, exp = _digits(abs(x))
    if 1e-3 <= abs(x) < 1e7:
        if exp >= 0:
            whole = digits[: exp + 1].ljust(exp + 1, "0")
            frac = digits[exp + 1 :] or "0"
        else:
            whole = "0"
            frac = "0" * (-exp - 1) + digits
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp}"


def java_float(x: float) -> str:
    """`Float.toString(x)` of a 32-bit float (the shortest digits of the float)."""
    import numpy as np

    f = np.float32(x)
    if np.isnan(f) or np.isinf(f) or f == 0:
        return java_double(float(f))
    sign = "-" if f < 0 else ""
    text = np.format_float_scientific(abs(f), unique=True, trim="-")
    mantissa, _, exp_text = text.partition("e")
    digits = mantissa.replace(".", "").rstrip("0") or "0"
    exp = int(exp_text)
    if 1e-3 <= abs(f) < 1e7:
        if exp >= 0:
            whole = digits[: exp + 1].ljust(exp + 1, "0")
            frac = digits[exp + 1 :] or "0"
        else:
            whole, frac = "0", "0" * (-exp - 1) + digits
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp}"


# --------------------------------------------------------------------------- Jackson


class _Obj(list):  # type: ignore[type-arg]
    """A JSON object as its (key, value) pairs, in order, duplicates kept."""


class _Bad(Exception):
    pass


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


_DECODER = json.JSONDecoder(object_pairs_hook=_Obj, parse_constant=_reject_constant)
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_IDENT = re.compile(r"[A-Za-z0-9_$]")


class _Jackson:
    """Jackson's reader with Spark's features: single quotes always; raw control characters
    in strings only when `control_ok` (json_object_keys); no NaN, no leading zeros."""

    def __init__(self, text: str, control_ok: bool) -> None:
        self.s = text
        self.i = 0
        self.control_ok = control_ok

    def ws(self) -> None:
        s, i, n = self.s, self.i, len(self.s)
        while i < n:
            c = s[i]
            if c in " \t\n\r":
                i += 1
            elif c < " ":
                raise _Bad("invalid white space")
            else:
                break
        self.i = i

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def value(self, depth: int = 0) -> Any:
        if depth > 1000:
            raise _Bad("too deep")
        c = self.peek()
        if c == "{":
            return self.obj(depth)
        if c == "[":
            return self.array(depth)
        if c in "\"'":
            return self.string()
        if c == "-" or "0" <= c <= "9":
            return self.number()
        for word, result in (("true", True), ("false", False), ("null", None)):
            if self.s.startswith(word, self.i):
                end = self.i + len(word)
                if end < len(self.s) and _IDENT.match(self.s[end]):
                    raise _Bad("unrecognized token")
                self.i = end
                return result
        raise _Bad("unexpected character")

    def obj(self, depth: int) -> _Obj:
        self.i += 1
        pairs = _Obj()
        self.ws()
        if self.peek() == "}":
            self.i += 1
            return pairs
        while True:
            if self.peek() not in ('"', "'") or self.peek() == "":
                raise _Bad("expected a field name")
            key = self.string()
            self.ws()
            if self.peek() != ":":
                raise _Bad("expected ':'")
            self.i += 1
            self.ws()
            pairs.append((key, self.value(depth + 1)))
            self.ws()
            c = self.peek()
            self.i += 1
            if c == "}":
                return pairs
            if c != ",":
                raise _Bad("expected ',' or '}'")
            self.ws()

    def array(self, depth: int) -> list[Any]:
        self.i += 1
        items: list[Any] = []
        self.ws()
        if self.peek() == "]":
            self.i += 1
            return items
        while True:
            items.append(self.value(depth + 1))
            self.ws()
            c = self.peek()
            self.i += 1
            if c == "]":
                return items
            if c != ",":
                raise _Bad("expected ',' or ']'")
            self.ws()

    def string(self) -> str:
        quote = self.s[self.i]
        self.i += 1
        s, n = self.s, len(self.s)
        out: list[str] = []
        while True:
            if self.i >= n:
                raise _Bad("unterminated string")
            c = s[self.i]
            self.i += 1
            if c == quote:
                break
            if c == "\\":
                if self.i >= n:
                    raise _Bad("unterminated escape")
                e = s[self.i]
                self.i += 1
                if e in _ESCAPES:
                    out.append(_ESCAPES[e])
                elif e == "'":
                    out.append("'")
                elif e == "u":
                    hexits = s[self.i : self.i + 4]
                    if len(hexits) < 4 or not all(h in "0123456789abcdefABCDEF" for h in hexits):
                        raise _Bad("bad unicode escape")
                    out.append(chr(int(hexits, 16)))
                    self.i += 4
                else:
                    raise _Bad("unrecognized escape")
            elif c < " " and not self.control_ok:
                raise _Bad("unescaped control character")
            else:
                out.append(c)
        return _join_surrogates("".join(out))

    def number(self) -> int | float:
        m = _NUMBER.match(self.s, self.i)
        if not m or m.end() == self.i or self.s[self.i : m.end()] == "-":
            raise _Bad("bad number")
        end = m.end()
        if end < len(self.s) and "0" <= self.s[end] <= "9":
            raise _Bad("leading zero")  # `01`: the number ends at `0`, then a digit
        token = self.s[self.i : end]
        self.i = end
        if m.group(1) is None and m.group(2) is None:
            return int(token)
        return float(token)


def _join_surrogates(text: str) -> str:
    if any("\ud800" <= c <= "\udfff" for c in text):
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def _escape(text: str) -> str:
    """Jackson's output escaping: quote, backslash and control characters."""
    out = []
    for c in text:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c < " ":
            short = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}.get(c)
            out.append(short or f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def _number_text(value: int | float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):  # Jackson quotes a non-finite number it writes
        return '"Infinity"' if value > 0 else '"-Infinity"'
    return java_double(value)


def _nested(value: Any) -> str:
    if isinstance(value, _Obj):
        return "{" + ",".join(f'"{_escape(k)}":{_nested(v)}' for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_nested(v) for v in value) + "]"
    if isinstance(value, str):
        return f'"{_escape(value)}"'
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    return _number_text(value)


def jackson_text(value: Any) -> str | None:
    """A JSON value as Spark's `from_json` gives it to a string field."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (_Obj, list)):
        return _nested(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    return _number_text(value)


def _object_or_error(text: str) -> tuple[_Obj | None, str | None]:
    """The line's object, or the reader's error (strict: nothing may follow the object)."""
    try:
        value = _DECODER.decode(text)
    except (ValueError, RecursionError):
        value = None
    else:
        if not isinstance(value, _Obj):
            return None, NOT_OBJECT
        return value, None
    # not strict JSON: tell, as Spark does, a line that is no object from one with more
    try:
        keys = _Jackson(text, control_ok=True)
        keys.ws()
        if keys.peek() != "{":
            return None, NOT_OBJECT
        keys.obj(0)
    except (_Bad, RecursionError):
        return None, NOT_OBJECT
    try:
        parsed = _Jackson(text, control_ok=False)
        parsed.ws()
        found = parsed.obj(0)
        parsed.ws()
    except (_Bad, RecursionError):
        return None, MORE_THAN_ONE
    if parsed.i != len(text):
        # trailing text (Spark 4's from_json ignores what follows a `]`; docs/ingest.md does not)
        return None, MORE_THAN_ONE
    return found, None


def json_line_fields(line: bytes) -> tuple[str | None, dict[str, str | None]]:
    """One JSON line -> (the reader's error or None, the input fields' texts)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_UTF8, {}
    found, error = _object_or_error(text)
    if error is not None or found is None:
        return error, {}
    ours = [k for k, _ in found if k in INPUT_FIELDS]
    if len(ours) != len(set(ours)):
        return TWICE, {}
    return None, {k: jackson_text(v) for k, v in found if k in INPUT_FIELDS}


def utf8_text(text: str | None) -> str | None:
    """As Java writes a string to UTF-8: an unpaired surrogate becomes `?`."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


# --------------------------------------------------------------------------- casts


_LONG = re.compile(r"[+-]?[0-9]+")
_JAVA_DECIMAL = re.compile(r"([+-]?)((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?")
_JAVA_HEX = re.compile(
    r"([+-]?)(0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)
_SPECIAL = {
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
    "nan": math.nan,
    "+nan": math.nan,
    "-nan": math.nan,
}
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def spark_long(text: str | None) -> int | None:
    """`try_cast(text as bigint)` (ANSI): whole numbers only, trimmed of control characters."""
    if text is None:
        return None
    t = text.strip(TRIM_ALL)
    if not _LONG.fullmatch(t):
        return None
    value = int(t)
    return value if LONG_MIN <= value <= LONG_MAX else None


def spark_double(text: str | None) -> float | None:
    """`try_cast(text as double)`: `Double.parseDouble`, then Spark's `inf`/`nan` words."""
    if text is None:
        return None
    t = text.strip(JAVA_TRIM)
    if t in ("NaN", "+NaN", "-NaN"):
        return math.nan
    if t in ("Infinity", "+Infinity"):
        return math.inf
    if t == "-Infinity":
        return -math.inf
    m = _JAVA_DECIMAL.fullmatch(t)
    if m:
        return float(m.group(1) + m.group(2))
    m = _JAVA_HEX.fullmatch(t)
    if m:
        value = float.fromhex(m.group(2))
        return -value if m.group(1) == "-" else value
    return _SPECIAL.get(t.lower())


# ZoneId.SHORT_IDS
_SHORT_IDS = {
    "EST": "-05:00",
    "HST": "-10:00",
    "MST": "-07:00",
    "ACT": "Australia/Darwin",
    "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo",
    "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo",
    "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare",
    "CNT": "America/St_Johns",
    "CST": "America/Chicago",
    "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa",
    "ECT": "Europe/Paris",
    "IET": "America/Indiana/Indianapolis",
    "IST": "Asia/Kolkata",
    "JST": "Asia/Tokyo",
    "MIT": "Pacific/Apia",
    "NET": "Asia/Yerevan",
    "NST": "Pacific/Auckland",
    "PLT": "Asia/Karachi",
    "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico",
    "PST": "America/Los_Angeles",
    "SST": "Pacific/Guadalcanal",
    "VST": "Asia/Ho_Chi_Minh",
}
_REGION = re.compile(r"[A-Za-z][A-Za-z0-9~/._+-]+")


class _BadZone(Exception):
    pass


def _offset_seconds(offset_id: str) -> int:
    """`ZoneOffset.of`: Z, ±h, ±hh, ±hh:mm, ±hhmm, ±hh:mm:ss, ±hhmmss (at most 18 hours)."""
    if offset_id == "Z":
        return 0
    text = offset_id
    if len(text) == 2:
        text = text[0] + "0" + text[1]

    def number(pos: int, colon: bool) -> int:
        if colon and text[pos - 1] != ":":
            raise _BadZone(offset_id)
        pair = text[pos : pos + 2]
        if len(pair) != 2 or not all("0" <= c <= "9" for c in pair):
            raise _BadZone(offset_id)
        return int(pair)

    n = len(text)
    if n == 3:
        h, m, s = number(1, False), 0, 0
    elif n == 5:
        h, m, s = number(1, False), number(3, False), 0
    elif n == 6:
        h, m, s = number(1, False), number(4, True), 0
    elif n == 7:
        h, m, s = number(1, False), number(3, False), number(5, False)
    elif n == 9:
        h, m, s = number(1, False), number(4, True), number(7, True)
    else:
        raise _BadZone(offset_id)
    if text[0] not in "+-" or h > 18 or m > 59 or s > 59:
        raise _BadZone(offset_id)
    total = h * 3600 + m * 60 + s
    if total > 18 * 3600:
        raise _BadZone(offset_id)
    return -total if text[0] == "-" else total


def _zone(zone_id: str) -> int | str:
    """Spark's `getZoneId`: a fixed offset in seconds, or a region id."""
    formatted = re.sub(r"(\+|\-)([0-9]):", r"\g<1>0\g<2>:", zone_id, count=1)
    formatted = re.sub(r"(\+|\-)([0-9][0-9]):([0-9])$", r"\g<1>\g<2>:0\g<3>", formatted, count=1)
    formatted = _SHORT_IDS.get(formatted, formatted)
    if len(formatted) <= 1 or formatted[0] in "+-":
        return _offset_seconds(formatted)
    for prefix in ("UTC", "GMT", "UT"):
        if formatted.startswith(prefix):
            if len(formatted) == len(prefix):
                return 0
            if formatted[len(prefix)] in "+-":
                return _offset_seconds(formatted[len(prefix) :])
            break
    if not _REGION.fullmatch(formatted):
        raise _BadZone(zone_id)
    return formatted


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = y // 400  # floor division: no correction for negative years
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _month_days(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def _region_offset(zone: str, y: int, mo: int, d: int, h: int, mi: int, s: int) -> int:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        tz = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise _BadZone(zone) from e
    year = min(max(y, 1), 9999)
    local = dt.datetime(year, mo, min(d, _month_days(year, mo)), h, mi, s, tzinfo=tz)
    offset = local.utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def _valid_digits(segment: int, digits: int) -> bool:
    return (
        segment == 6
        or (segment == 0 and 4 <= digits <= 6)
        or (segment == 7 and digits <= 2)
        or (segment not in (0, 6, 7) and 0 < digits <= 2)
    )


def spark_timestamp_seconds(text: str | None) -> float | None:
    """`unix_micros(try_to_timestamp(text)) / 1e6` in a UTC session (Spark's
    `parseTimestampString`), or None."""
    if text is None:
        return None
    b = text.encode("utf-8", "replace")
    j, end = 0, len(b)
    while j < end and (b[j] <= 0x20 or b[j] == 0x7F):
        j += 1
    while end > j and (b[end - 1] <= 0x20 or b[end - 1] == 0x7F):
        end -= 1
    if j == end:
        return None
    segments = [1, 1, 1, 0, 0, 0, 0, 0, 0]
    i = value = digits = millis_digits = 0
    just_time = False
    sign: int | None = None
    tz: str | None = None
    if b[j] in b"+-":
        sign = -1 if b[j] == 0x2D else 1
        j += 1
    while j < end:
        c = b[j]
        if not 0x30 <= c <= 0x39:
            if j == 0 and c == 0x54:  # 'T'
                just_time = True
                i += 3
            elif i < 2:
                if c == 0x2D:  # '-'
                    if not _valid_digits(i, digits):
                        return None
                    segments[i], value, digits, i = value, 0, 0, i + 1
                elif i == 0 and c == 0x3A and sign is None:  # ':'
                    just_time = True
                    if not _valid_digits(3, digits):
                        return None
                    segments[3], value, digits, i = value, 0, 0, 4
                else:
                    return None
            elif i == 2:
                if c in (0x20, 0x54):
                    if not _valid_digits(i, digits):
                        return None
                    segments[i], value, digits, i = value, 0, 0, i + 1
                else:
                    return None
            elif i in (3, 4):
                if c == 0x3A:
                    if not _valid_digits(i, digits):
                        return None
                    segments[i], value, digits, i = value, 0, 0, i + 1
                else:
                    return None
            elif i in (5, 6):
                if c == 0x2E and i == 5:  # '.'
                    if not _valid_digits(i, digits):
                        return None
                    segments[i], value, digits, i = value, 0, 0, i + 1
                else:
                    if not _valid_digits(i, digits):
                        return None
                    segments[i], value, digits, i = value, 0, 0, i + 1
                    tz = b[j:end].decode("utf-8", "replace")
                    j = end - 1
                if i == 6 and c != 0x2E:
                    i += 1
            else:
                if i < len(segments) and c in (0x3A, 0x20):
                    if not _valid_digits(i, digits):
                        return None
                    segments[i], value, digits, i = value, 0, 0, i + 1
                else:
                    return None
        else:
            if i == 6:
                millis_digits += 1
            if i != 6 or digits < 6:
                value = value * 10 + (c - 0x30)
            digits += 1
        j += 1
    if i >= len(segments) or not _valid_digits(i, digits):
        return None
    segments[i] = value
    while millis_digits < 6:
        segments[6] *= 10
        millis_digits += 1
    try:
        zone: int | str = 0 if tz is None else _zone(tz.strip(JAVA_TRIM))
    except _BadZone:
        return None
    y = segments[0] * (sign or 1)
    mo, d, h, mi, s, us = segments[1:7]
    if just_time:
        today = dt.datetime.now(dt.UTC)
        if isinstance(zone, int):
            today = today + dt.timedelta(seconds=zone)
        else:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                today = today.astimezone(ZoneInfo(zone))
            except (ZoneInfoNotFoundError, ValueError):
                return None
        y, mo, d = today.year, today.month, today.day
    if not (1 <= mo <= 12 and 1 <= d <= _month_days(y, mo) and h <= 23 and mi <= 59 and s <= 59):
        return None
    if abs(y) > 999_999_999:
        return None
    try:
        offset = zone if isinstance(zone, int) else _region_offset(zone, y, mo, d, h, mi, s)
    except _BadZone:
        return None
    seconds = _days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset
    micros = seconds * 1_000_000 + us
    if not LONG_MIN <= micros <= LONG_MAX:
        return None
    return micros / 1_000_000.0


def spark_seconds(text: str | None) -> float | None:
    """The job's `ts`: `coalesce(try_cast(text as double), try_to_timestamp seconds)`."""
    value = spark_double(text)
    return value if value is not None else spark_timestamp_seconds(text)


# --------------------------------------------------------------------------- Spark values as text


def spark_string(value: Any, type_name: str) -> str | None:
    """`cast(value as string)` of a Parquet value (`type_name`: its Arrow type)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_float(value) if type_name in ("float", "halffloat") else java_double(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        return text
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def _json_value(value: Any, type_name: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return '"' + ("NaN" if math.isnan(value) else java_double(value)) + '"'
        return java_float(value) if type_name in ("float", "halffloat") else java_double(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return f'"{_escape(value)}"'
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return f'"{value.strftime("%Y-%m-%dT%H:%M:%S")}.{value.microsecond // 1000:03d}Z"'
    if isinstance(value, dt.date):
        return f'"{value.isoformat()}"'
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dict):
        members = [
            f'"{_escape(k)}":{_json_value(v, "")}' for k, v in value.items() if v is not None
        ]
        return "{" + ",".join(members) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join("null" if v is None else _json_value(v, "") for v in value) + "]"
    return f'"{_escape(str(value))}"'


def spark_json_row(names: Iterable[str], values: Iterable[Any], types: Iterable[str]) -> str:
    """`to_json(struct(*columns))` of one row: null fields left out."""
    parts = [
        f'"{_escape(n)}":{_json_value(v, t)}'
        for n, v, t in zip(names, values, types, strict=True)
        if v is not None
    ]
    return "{" + ",".join(parts) + "}"
