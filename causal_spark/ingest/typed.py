"""Step 1 of ingest: raw rows typed, and the rules that need only the row itself."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import _spark
from causal_spark import columns as C
from causal_spark.ingest.keys import KIND_ALIASES, IngestError
from causal_spark.ingest.rows_kernel import (
    EXCLUDED,
    PARSED,
    POST,
    PPROC,
    PRE,
    RECORDED_VC,
    SEQ_GIVEN,
)
from causal_spark.io.raw import TYPED_FIELDS
from causal_spark.io.sources import (
    FILE_ID,
    PARSE_ERROR,
    PARSE_REASON,
    RAW_COLUMNS,
    SUB,
    TRACE_SUFFIX,
    Inputs,
)


def _blank_to_null(column: Column) -> Column:
    trimmed = F.trim(column)
    return F.when(trimmed != "", trimmed)


def _normalized_kind(raw_kind: Column) -> Column:
    lowered = _spark.lower(F.trim(raw_kind))
    mapping = F.create_map(*[F.lit(x) for pair in KIND_ALIASES.items() for x in pair])
    return mapping[lowered]


def _parsed_ts(raw_ts: Column) -> Column:
    """Seconds as a double, from a number or an ISO-8601 string (UTC when no offset)."""
    as_instant = F.unix_micros(F.try_to_timestamp(raw_ts)) / F.lit(1_000_000.0)
    return F.coalesce(raw_ts.try_cast("double"), as_instant)


def _try_long(raw: Column) -> Column:
    return F.trim(raw).try_cast("long")


def _is_structured(raw: Column) -> Column:
    trimmed = F.trim(raw)
    return (trimmed.startswith("{") & trimmed.endswith("}")) | (
        trimmed.startswith("[") & trimmed.endswith("]")
    )


Rule = tuple[Column, Column]  # (the row breaks it, the words that say how)


def _rule(condition: Column, detail: Column | str) -> Rule:
    return condition, detail if isinstance(detail, Column) else F.lit(detail)


def _details(rules: list[Rule]) -> Column:
    """The details of the rules a row breaks, joined by '; ' (null when none). The words
    are built only for a row that breaks one: most rows break none."""
    broken = F.lit(False)
    for condition, _ in rules:
        broken = broken | F.coalesce(condition, F.lit(False))
    parts = [F.when(condition, detail) for condition, detail in rules]
    joined = F.array_join(F.array_compact(F.array(*parts)), "; ")
    return F.when(broken & (joined != ""), joined)


def _given(raw: Column, typed: bool) -> Column:
    """The field is given: a typed value is not null, a string not blank."""
    return raw.isNotNull() if typed else _blank_to_null(raw).isNotNull()


def _malformed_rules(kind: Column, typed: Collection[str] = ()) -> tuple[list[Rule], list[Rule]]:
    """The row-local rules, each a detail when the row breaks it: those before and those
    after the file-level missing-seq rule (kept apart so details read in one order).
    `typed`: the number fields the reader gave typed (`io.raw.TYPED_FIELDS`)."""
    parse_ok = F.col(PARSE_ERROR).isNull()
    seq_given = _given(F.col("__cs_raw_seq"), C.SEQ in typed)
    ts_given = _given(F.col("__cs_raw_ts"), C.TS in typed)
    size_given = _given(F.col("__cs_raw_size"), C.SIZE_BYTES in typed)
    parsed_ts = F.col(C.TS)
    needs_msg = F.col(C.KIND).isin(C.SEND, C.RECEIVE)
    before = [
        _rule(F.col(PARSE_ERROR).isNotNull(), F.col(PARSE_ERROR)),
        _rule(parse_ok & F.col(C.PROCESS).isNull(), "missing required field 'process'"),
        _rule(parse_ok & kind.isNull(), "missing required field 'kind'"),
        _rule(
            kind.isNotNull() & F.col(C.KIND).isNull(),
            F.format_string("unknown kind '%s'", kind),
        ),
    ]
    after = [
        _rule(
            seq_given & F.col(C.SEQ).isNull(),
            F.format_string("seq '%s' is not an integer", F.col("__cs_raw_seq").cast("string")),
        ),
        _rule(
            needs_msg & F.col(C.MSG_ID).isNull(),
            F.format_string("%s without msg_id", F.col(C.KIND)),
        ),
        _rule(
            ts_given
            & (parsed_ts.isNull() | F.isnan(parsed_ts) | (F.abs(parsed_ts) == F.lit(float("inf")))),
            F.format_string(
                "ts '%s' is neither seconds nor an ISO-8601 time",
                F.col("__cs_raw_ts").cast("string"),
            ),
        ),
        _rule(
            size_given & (F.col("__cs_size").isNull() | (F.col("__cs_size") < 0)),
            F.format_string(
                "size_bytes '%s' is not a non-negative integer",
                F.col("__cs_raw_size").cast("string"),
            ),
        ),
    ]
    for name in (C.TRACE_ID, C.PROCESS, C.KIND, C.MSG_ID, C.PEER):
        after.append(
            _rule(
                F.coalesce(_is_structured(F.col(f"__cs_raw_{name}")), F.lit(False)),
                f"field '{name}' must be a scalar, found an object or array",
            )
        )
    return before, after


def file_table(spark: SparkSession, inputs: Inputs) -> DataFrame:
    """file_id, the file as the user named it, and its default trace id (a small table)."""
    return spark.createDataFrame(
        [(f.file_id, f.shown, f.default_trace) for f in inputs.files],
        "file_id int, shown string, default_trace string",
    )


TRACE_OF = "__cs_trace_of"


def _trace_of(default_trace: Column) -> Column:
    """The trace a raw row belongs to: its own trace_id, else its file's default (with the
    reader's suffix, `:label`, when it gives one)."""
    default = F.when(
        F.col(TRACE_SUFFIX).isNotNull(),
        F.concat(default_trace, F.lit(":"), F.col(TRACE_SUFFIX)),
    ).otherwise(default_trace)
    return F.coalesce(_blank_to_null(F.col(C.TRACE_ID)), default)


def trace_ids(raw: DataFrame, files: DataFrame) -> DataFrame:
    """Raw rows with `TRACE_OF`, the trace each belongs to (as ingest will name it)."""
    return raw.join(F.broadcast(files.select(FILE_ID, "default_trace")), FILE_ID).select(
        *raw.columns, _trace_of(F.col("default_trace")).alias(TRACE_OF)
    )


def _default_traces(inputs: Inputs) -> Column:
    """Each file's default trace id, looked up by file id in a literal array.

    The ids need not be 0..n-1: an incremental run reads a selection of the files and
    keeps their ids. Positions no file of `inputs` holds are null (no row carries them).
    """
    by_id = {f.file_id: f.default_trace for f in inputs.files}
    if len(by_id) != len(inputs.files) or min(by_id) < 0:
        raise IngestError(f"file ids must be distinct and >= 0, found {sorted(by_id)[:5]}...")
    defaults = F.array(*[F.lit(by_id.get(i)).cast("string") for i in range(max(by_id) + 1)])
    return defaults[F.col(FILE_ID)]


def type_rows(raw: DataFrame, inputs: Inputs, keep: Sequence[str] = ()) -> DataFrame:
    """Step 1: type the string fields of raw rows and apply the row-local rules.

    Input: raw rows (`io.sources.RAW_SCHEMA`) of `inputs`' files. Output: the columns of
    `rows_kernel.TYPED`: file_id, line, sub, raw (only on rejected rows), trace_id, pproc (the
    process; for a rejected row a key that spreads such rows by line), seq (long), kind
    (normalised), msg_id, peer, ts (double seconds), size_bytes (long), label, recorded_vc
    (a native log's clock), seq_given, parsed, reason (`malformed`, a reader's reason, or
    null), the detail parts pre and post, and excluded (false); and the columns `keep`
    names, as they are. One projection: nothing is joined or shuffled.
    """
    missing = [c for c in RAW_COLUMNS if c not in raw.columns]
    if missing:
        raise IngestError(f"raw rows need columns {missing}; found {raw.columns}")
    if not inputs.files:
        raise IngestError("ingest needs at least one input file")
    # numbers a reader gave typed (`io.raw.TYPED_FIELDS`: Parquet's) are taken as they are:
    # their string form would parse back to the same value, and break the same rules
    typed_in = {n for n in TYPED_FIELDS if raw.schema[n].dataType != T.StringType()}
    wrong = {
        n: raw.schema[n].dataType for n in typed_in if raw.schema[n].dataType != TYPED_FIELDS[n][0]
    }
    if wrong:
        raise IngestError(f"raw rows give {wrong}: a typed field must be as `io.raw.TYPED_FIELDS`")

    def number(name: str) -> Column:
        if name in typed_in:
            return F.col(name)
        if name == C.TS:
            return _parsed_ts(_blank_to_null(F.col(C.TS)))
        return _try_long(F.col(name))

    typed = raw.select(
        FILE_ID,
        C.LINE,
        F.coalesce(F.col(SUB), F.lit(0)).alias(SUB),
        C.RAW,
        PARSE_ERROR,
        PARSE_REASON,
        *[
            F.col(n).alias(f"__cs_raw_{n}")
            for n in (C.TRACE_ID, C.PROCESS, C.KIND, C.MSG_ID, C.PEER)
        ],
        F.col(C.SEQ).alias("__cs_raw_seq"),
        F.col(C.TS).alias("__cs_raw_ts"),
        F.col(C.SIZE_BYTES).alias("__cs_raw_size"),
        _trace_of(_default_traces(inputs)).alias(C.TRACE_ID),
        _blank_to_null(F.col(C.PROCESS)).alias(C.PROCESS),
        _blank_to_null(F.col(C.KIND)).alias("__cs_kind_text"),
        _normalized_kind(F.col(C.KIND)).alias(C.KIND),
        number(C.SEQ).alias(C.SEQ),
        _blank_to_null(F.col(C.MSG_ID)).alias(C.MSG_ID),
        _blank_to_null(F.col(C.PEER)).alias(C.PEER),
        number(C.TS).alias(C.TS),
        number(C.SIZE_BYTES).alias("__cs_size"),
        F.col(C.LABEL),
        F.col(RECORDED_VC),
        *keep,
    )
    before, after = _malformed_rules(F.col("__cs_kind_text"), typed_in)
    pre, post = _details(before), _details(after)
    rejected = pre.isNotNull() | post.isNotNull()
    # rows rejected here have no process to group by: spread them by line
    spread = F.concat(F.lit("\u0000"), F.pmod(F.hash(FILE_ID, C.LINE), F.lit(4096)).cast("string"))
    return typed.select(
        F.col(FILE_ID).cast("int").alias(FILE_ID),
        F.col(C.LINE).cast("long").alias(C.LINE),
        F.col(SUB).cast("long").alias(SUB),
        F.when(rejected, F.col(C.RAW)).alias(C.RAW),
        C.TRACE_ID,
        F.when(rejected, spread).otherwise(F.col(C.PROCESS)).alias(PPROC),
        C.SEQ,
        C.KIND,
        # an internal event has no message: an id on it is ignored, not an error
        F.when(F.col(C.KIND) != C.INTERNAL, F.col(C.MSG_ID)).alias(C.MSG_ID),
        C.PEER,
        C.TS,
        F.coalesce(F.col("__cs_size"), F.lit(0)).alias(C.SIZE_BYTES),
        C.LABEL,
        RECORDED_VC,
        F.col("__cs_raw_seq").isNotNull().alias(SEQ_GIVEN),
        F.col(PARSE_ERROR).isNull().alias(PARSED),
        F.when(rejected, F.coalesce(F.col(PARSE_REASON), F.lit(C.MALFORMED))).alias(C.REASON),
        pre.alias(PRE),
        post.alias(POST),
        F.lit(False).alias(EXCLUDED),
        *keep,
    )
