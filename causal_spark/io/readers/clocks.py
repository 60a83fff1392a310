"""Recorded vector clocks (ShiViz, DistributedClocks tracing): parsing and the checks.

A log that records vector clocks names each event by its host's own clock entry.
docs/formats.md: the own entry must start at 1 and rise by exactly 1 per event of the
host; a record that breaks this, whose clock is not JSON, or whose clock names an
unknown host or a count beyond that host's events is rejected `bad_clock`.

As ShiViz does, a host's records are taken in the order of their own entries
(real logs interleave them: ShiViz's chord.log has a host's events 26 and 25 in
that file order). A record whose clock is unreadable (not a JSON object of
host -> count, or without an entry >= 1 for its own host) is an event of the
host whose number is unknown: each such record may explain one gap. So, per
host, with U its unreadable records and the readable ones sorted by own entry
(then file order):

- a record whose own entry equals the previous one's is a second copy of one
  event (`bad_clock`, "repeats");
- the r-th distinct own entry v is accepted when v - r <= U (it starts at 1 and
  rises by 1, but for gaps that unreadable records account for); otherwise it
  jumps (`bad_clock`). A lost record (a real jump) thus leaves every later
  event of its host rejected: the log no longer says which event they are;
- the host has max(r) + U events; another host's clock that names a later event
  of it, or names a host with no record, is `bad_clock`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type

from causal_spark.io.readers.base import CLOCK_TYPE

CLOCK = "__rd_clock"
OWN = "__rd_own"
CLOCK_ERROR = "__rd_clock_error"

_COUNTS = "__rd_host_counts"
_READABLE = "__rd_readable"
_UNREADABLE = "__rd_unreadable"
_REPEAT = "__rd_repeat"
_REPEATED_LINE = "__rd_repeated_line"
_RANK = "__rd_rank"


def _as_counts(text: Column) -> Column:
    """A JSON object of host -> non-negative integer, as map<string,bigint>, else null."""
    as_strings = F.try_variant_get(F.try_parse_json(text), "$", "map<string,string>")
    counts = F.transform_values(as_strings, lambda _, v: v.try_cast("long"))
    well_formed = F.forall(
        F.map_values(as_strings), lambda v: F.coalesce(v.rlike(r"^[0-9]+$"), F.lit(False))
    ) & F.forall(F.map_values(counts), lambda v: v.isNotNull())
    return F.when(well_formed, counts).cast(CLOCK_TYPE)


_MAX_COUNT = (1 << 63) - 1


def _pairs_once(pairs: list[tuple[str, object]]) -> dict[str, object] | None:
    keys = [k for k, _ in pairs]
    return dict(pairs) if len(set(keys)) == len(keys) else None


def _fraction(text: str) -> int | None:
    """A JSON number with a fraction or exponent, as the Spark parse reads it: a decimal
    with only zeros after the point is its integer; an exponent makes it a double (no
    count)."""
    if "e" in text or "E" in text:
        return None
    number = Decimal(text)
    return int(number) if number == number.to_integral_value() else None


def _counts(text: str) -> dict[str, int] | None:
    try:
        found = json.loads(text, object_pairs_hook=_pairs_once, parse_float=_fraction)
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    counts: dict[str, int] = {}
    for host, value in found.items():
        # a count, or its digits in a string (as the Spark parse reads them); a bool is an
        # int to Python, not a count to a log
        if type(value) is str and value.isascii() and value.isdigit():
            value = int(value)
        if type(value) is not int or not 0 <= value <= _MAX_COUNT:
            return None
        counts[host] = value
    return counts


# a clock as loggers write it: a compact object of plain keys (no escapes, no `:` or
# `,`) and counts under 10^18 without leading zeros; anything else goes through json
_PLAIN_PAIR = r'"[^"\\:,\x00-\x1f]*":(?:0|[1-9][0-9]{0,17})'
_PLAIN_CLOCK = re.compile(rf"\{{(?:{_PLAIN_PAIR}(?:,{_PLAIN_PAIR})*)?\}}")


def _plain_counts(text: str) -> dict[str, int] | bool | None:
    """The counts of a plain clock (None: a key repeats), or False when the text is not
    a plain clock."""
    if not _PLAIN_CLOCK.fullmatch(text):
        return False
    body = text[1:-1]
    if not body:
        return {}
    pairs = [pair.split(":") for pair in body.split(",")]
    counts = {key[1:-1]: int(value) for key, value in pairs}
    return counts if len(counts) == len(pairs) else None


def clock_counts(text: str | None) -> dict[str, int] | None:
    """`parse_clock` in Python, for readers that parse their records in a Python worker
    (ShiViz): the same clocks parse, and the same do not."""
    if text is None:
        return None
    plain = _plain_counts(text)
    if not isinstance(plain, bool):
        return plain
    found = _counts(text)
    return found if found is not None else _counts(text.replace('\\"', '"'))


CLOCK_ARROW = to_arrow_type(CLOCK_TYPE)
_PLAIN_WHOLE = f"^{_PLAIN_CLOCK.pattern}$"
_PLAIN_PAIR_PARTS = r'^"(?P<key>[^"]*)":(?P<count>[0-9]+)$'


def clock_array(texts: pa.Array | pa.ChunkedArray) -> pa.MapArray:
    """`clock_counts` of each text as a map<string,bigint> column (null: not a clock).
    Plain clocks, nearly all of a log's, are parsed in bulk by Arrow; the others one by
    one with `clock_counts`."""
    texts = pa.chunked_array([texts]) if isinstance(texts, pa.Array) else texts
    texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    n = len(texts)
    plain = np.asarray(
        pc.fill_null(pc.match_substring_regex(texts, _PLAIN_WHOLE), False).to_numpy(
            zero_copy_only=False
        ),
        dtype=bool,
    )
    # plain clocks: their pairs, split at ',' (neither a key nor a count holds one)
    rows = np.flatnonzero(plain)
    bodies = pc.utf8_slice_codeunits(texts.take(pa.array(rows, pa.int64())), 1, -1)
    split = pc.split_pattern(bodies, ",")
    sizes = np.asarray(pc.list_value_length(split).to_numpy(zero_copy_only=False), np.int64)
    sizes = np.where(np.asarray(pc.equal(bodies, "").to_numpy(zero_copy_only=False)), 0, sizes)
    pairs = pc.list_flatten(split).filter(pc.not_equal(pc.list_flatten(split), ""))
    parts = pc.extract_regex(pairs, _PLAIN_PAIR_PARTS)
    keys = parts.field("key")
    counts = pc.cast(parts.field("count"), pa.int64())
    # a key twice in one clock makes it no clock (as the JSON parse says)
    owner = np.repeat(np.arange(len(rows), dtype=np.int64), sizes)
    key_code = np.asarray(
        pc.dictionary_encode(keys).indices.to_numpy(zero_copy_only=False), np.int64
    )
    by_key = np.lexsort((key_code, owner))
    twice = (owner[by_key][1:] == owner[by_key][:-1]) & (
        key_code[by_key][1:] == key_code[by_key][:-1]
    )
    length = np.zeros(n, dtype=np.int64)
    length[rows] = sizes
    valid = plain.copy()
    valid[rows[owner[by_key][1:][twice]]] = False
    entry_row = rows[owner]
    # the others, one by one
    others_keys: list[str] = []
    others_counts: list[int] = []
    others_row: list[int] = []
    for i, text in zip(
        np.flatnonzero(~plain).tolist(), texts.filter(pa.array(~plain)).to_pylist(), strict=True
    ):
        found = clock_counts(text)
        if found is None:
            continue
        valid[i] = True
        length[i] = len(found)
        others_keys += found
        others_counts += found.values()
        others_row += [i] * len(found)
    length[~valid] = 0
    entry_row = np.concatenate([entry_row, np.asarray(others_row, dtype=np.int64)])
    keep = valid[entry_row]
    order = np.argsort(entry_row, kind="stable")
    order = pa.array(order[keep[order]], pa.int64())
    all_keys = pa.concat_arrays([keys, pa.array(others_keys, pa.string())])
    all_counts = pa.concat_arrays([counts, pa.array(others_counts, pa.int64())])
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()),
        all_keys.take(order),
        all_counts.take(order),
        type=CLOCK_ARROW,
        mask=pa.array(~valid, pa.bool_()),
    )


def parse_clock(text: Column) -> Column:
    """The recorded clock as map<string,bigint>, or null when it is not a JSON object
    of host -> count. Escaped quotes (`{\\"a\\":1}`, as TLA+ writes) are accepted,
    as ShiViz does: tried when the text as written does not parse."""
    return F.coalesce(_as_counts(text), _as_counts(F.regexp_replace(text, r'\\"', '"')))


def check_clocks(
    records: DataFrame,
    trace_key: Sequence[str],
    host: str,
    order: Sequence[str],
    clock_text: str,
) -> DataFrame:
    """Add `CLOCK` (the parsed clock), `OWN` (its own entry) and `CLOCK_ERROR` (why the
    record is `bad_clock`, else null) to records of one host each.

    `trace_key`: the columns naming one execution (the clocks of different
    executions are unrelated); `order`: the columns of file order within it.
    Records whose `host` is null are not events of any host and are left alone. A
    `CLOCK` column already in `records` is the clock, parsed (`clock_counts`)."""
    key = [*trace_key, host]
    columns = [c for c in records.columns if c != CLOCK]
    clock = F.col(CLOCK) if CLOCK in records.columns else parse_clock(F.col(clock_text))
    # in two steps: the parsed clock is used thrice, and parsing is the costly part
    parsed = F.col(CLOCK)
    own = F.try_element_at(parsed, F.col(host))
    readable = parsed.isNotNull() & own.isNotNull() & (own >= 1)
    with_own = records.select(*columns, clock.alias(CLOCK)).select(
        "*", own.alias(OWN), F.coalesce(readable, F.lit(False)).alias(_READABLE)
    )
    host_rows = Window.partitionBy(*key)
    by_entry = Window.partitionBy(*key, _READABLE).orderBy(OWN, *order)
    previous_line = F.lag(F.col(order[0])).over(by_entry)
    repeat = F.col(_READABLE) & (F.col(OWN) == F.lag(OWN).over(by_entry))
    counted = (
        with_own.withColumn(_UNREADABLE, F.sum((~F.col(_READABLE)).cast("int")).over(host_rows))
        .withColumn(_REPEAT, F.coalesce(repeat, F.lit(False)))
        .withColumn(_REPEATED_LINE, F.when(F.col(_REPEAT), previous_line))
        .withColumn(
            _RANK,
            F.sum(F.when(F.col(_READABLE) & ~F.col(_REPEAT), 1).otherwise(0)).over(
                by_entry.rowsBetween(Window.unboundedPreceding, Window.currentRow)
            ),
        )
    )
    counts = (
        counted.where(F.col(host).isNotNull())
        .groupBy(*key)
        .agg(
            (F.max(F.when(F.col(_READABLE), F.col(_RANK)).otherwise(0)) + F.max(_UNREADABLE)).alias(
                "__rd_n"
            )
        )
        .groupBy(*trace_key)
        .agg(
            F.map_from_entries(F.collect_list(F.struct(F.col(host), F.col("__rd_n")))).alias(
                _COUNTS
            )
        )
    )
    joined = counted.join(counts, list(trace_key), "left")
    hosts = F.col(_COUNTS)
    clock_col = F.col(CLOCK)
    unknown = F.filter(
        F.map_keys(clock_col),
        lambda q: (F.try_element_at(clock_col, q) > 0) & ~F.map_contains_key(hosts, q),
    )
    beyond = F.filter(
        F.map_keys(clock_col),
        lambda q: F.try_element_at(clock_col, q) > F.try_element_at(hosts, q),
    )
    beyond_text = F.array_join(
        F.transform(
            beyond,
            lambda q: F.format_string(
                "event %d of host '%s', which has %d events",
                F.try_element_at(clock_col, q),
                q,
                F.try_element_at(hosts, q),
            ),
        ),
        "; ",
    )
    rank = F.col(_RANK)
    error = (
        F.when(
            clock_col.isNull(),
            F.format_string("clock %s is not a JSON object of host -> count", F.col(clock_text)),
        )
        .when(
            ~F.col(_READABLE),
            F.format_string("the clock has no entry >= 1 for its own host '%s'", F.col(host)),
        )
        .when(
            F.col(_REPEAT),
            F.format_string(
                "own entry %d of host '%s' repeats the record at line %d",
                F.col(OWN),
                F.col(host),
                F.col(_REPEATED_LINE),
            ),
        )
        .when(
            (F.col(OWN) - rank > F.col(_UNREADABLE)) & (rank == 1),
            F.format_string(
                "the first event of host '%s' has own entry %d; it must start at 1",
                F.col(host),
                F.col(OWN),
            ),
        )
        .when(
            F.col(OWN) - rank > F.col(_UNREADABLE),
            F.format_string(
                "the own entry of host '%s' jumps to %d at its event %d (it must rise by 1)",
                F.col(host),
                F.col(OWN),
                rank + F.col(_UNREADABLE),
            ),
        )
        .when(
            F.size(unknown) > 0,
            F.format_string(
                "the clock names host(s) with no event in this log: %s",
                F.array_join(F.array_sort(unknown), ", "),
            ),
        )
        .when(F.size(beyond) > 0, F.concat(F.lit("the clock names "), beyond_text))
    )
    return joined.select(
        *columns,
        CLOCK,
        OWN,
        F.when(F.col(host).isNotNull(), error).alias(CLOCK_ERROR),
    )
