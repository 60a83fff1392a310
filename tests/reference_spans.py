"""The span pairing as it was written in Spark SQL before `spans_kernel` (joins, windows and
aggregates over span records): the reference the kernel is held to on random spans.

Kept as it was, with two known differences from the kernel, which the tests avoid: a
reference to a span of another trace read in the same input is found here (the
kernel, as docs/formats.md says, treats it as absent), and `nanos_as_seconds` divides
in floating point (times within 10^-7 s of a whole second round up).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark.io.readers.base import (
    CLOCK_TYPE,
    DUPLICATE_SPAN,
    PARSE_ERROR,
    PARSE_REASON,
    RECORD,
    RECORDED_VC,
    SUB,
    SpanProcess,
    conform,
    rejected,
)
from causal_spark.io.readers.spans import (
    CLIENT,
    CONSUMER,
    END_NS,
    INSTANCE,
    KIND,
    LINKS,
    NAME,
    NOTE,
    PARENT,
    PRODUCER,
    SERVER,
    SERVICE,
    SHARED,
    SPAN_ID,
    START_NS,
)

# the events' message ends, then their expansion into rows (was io/readers/_events.py)
RECEIVES = "__rd_receives"
SENDS = "__rd_sends"

# element type of RECEIVES and SENDS
MESSAGE_END = T.StructType(
    [T.StructField(C.MSG_ID, T.StringType()), T.StructField(C.PEER, T.StringType())]
)
MESSAGE_ENDS = T.ArrayType(MESSAGE_END)

_ROW = "__rd_row"


def _send_rounds(sends: Column) -> Column:
    """For each send, how many earlier sends of the event go to the same peer."""
    return F.transform(
        sends,
        lambda s, i: F.size(
            F.filter(F.slice(sends, 1, i), lambda t: t[C.PEER].eqNullSafe(s[C.PEER]))
        ),
    )


def expand_events(events: DataFrame) -> DataFrame:
    """Events -> raw rows.

    Input columns: the raw-row fields of the logged event (source, line, record,
    raw, trace_id, trace_suffix, process, seq, ts, size_bytes, label, recorded_vc; the
    optional ones may be absent)
    and `RECEIVES`, `SENDS`: arrays of (msg_id, peer) in the order wanted (null
    or empty: none). Output: the raw-row contract; the label stays on the first
    row's event, the recorded clock on the last event (the logged one's state).
    """
    if RECORDED_VC not in events.columns:
        events = events.withColumn(RECORDED_VC, F.lit(None).cast(CLOCK_TYPE))
    receives = F.coalesce(F.col(RECEIVES), F.array().cast(MESSAGE_ENDS))
    sends = F.coalesce(F.col(SENDS), F.array().cast(MESSAGE_ENDS))
    n_recv = F.size(receives)
    rounds = _send_rounds(sends)
    last_sub = F.when(F.size(sends) > 0, n_recv + F.array_max(rounds)).otherwise(
        F.greatest(n_recv - 1, F.lit(0))
    )

    def row(kind: str | None, end: Column | None, sub: Column) -> Column:
        return F.struct(
            F.lit(kind).cast("string").alias(C.KIND),
            (end[C.MSG_ID] if end is not None else F.lit(None).cast("string")).alias(C.MSG_ID),
            (end[C.PEER] if end is not None else F.lit(None).cast("string")).alias(C.PEER),
            sub.cast("long").alias(SUB),
        )

    receive_rows = F.transform(receives, lambda r, i: row(C.RECEIVE, r, i))
    send_rows = F.transform(
        F.arrays_zip(sends.alias("end"), rounds.alias("round")),
        lambda x: row(C.SEND, x["end"], n_recv + x["round"]),
    )
    internal = F.array(row(C.INTERNAL, None, F.lit(0)))
    expanded = F.when((F.size(receives) + F.size(sends)) == 0, internal).otherwise(
        F.concat(receive_rows, send_rows)
    )
    rows = events.select(
        "*", last_sub.alias("__rd_last_sub"), F.explode(expanded).alias(_ROW)
    ).select(
        "*",
        F.col(f"{_ROW}.{C.KIND}").alias(C.KIND),
        F.col(f"{_ROW}.{C.MSG_ID}").alias(C.MSG_ID),
        F.col(f"{_ROW}.{C.PEER}").alias(C.PEER),
        F.col(f"{_ROW}.{SUB}").alias(SUB),
    )
    first_event = F.col(SUB) == 0
    last_event = F.col(SUB) == F.col("__rd_last_sub")
    return conform(
        rows.withColumn(C.LABEL, F.when(first_event, F.col(C.LABEL))).withColumn(
            RECORDED_VC, F.when(last_event, F.col(RECORDED_VC))
        )
    )


def nanos_as_seconds(nanos: Column) -> Column:
    """Epoch nanoseconds (long) as exact seconds text, e.g. `1470150004.008762000`."""
    whole = F.floor(nanos / F.lit(1_000_000_000)).cast("long")
    frac = nanos - whole * F.lit(1_000_000_000)
    return F.concat(whole.cast("string"), F.lit("."), F.lpad(frac.cast("string"), 9, "0"))


_KEY = "__sp_key"
_SIDE = "__sp_side"
START, END = 0, 1

# per-span columns of the pairing
_REF_TYPE, _REF_TRACE, _REF_ID = "__sp_ref_type", "__sp_ref_trace", "__sp_ref_id"
_T_KEY, _T_KIND, _T_PROCESS, _T_FOUND = "__sp_t_key", "__sp_t_kind", "__sp_t_process", "__sp_found"
_T_END = "__sp_t_end"
_PARENT_REF, _SHARED_REF, _LINK_REF = "parent", "shared", "link"


def _process(span_process: SpanProcess) -> Column:
    base = F.concat(
        F.coalesce(F.col(SERVICE), F.lit("unknown")),
        F.coalesce(F.concat(F.lit("@"), F.col(INSTANCE)), F.lit("")),
    )
    if span_process == "span":
        return F.concat(base, F.lit("/"), F.col(SPAN_ID))
    return base


def _without_duplicates(spans: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(unique spans, rejected repeats): a span repeats one of the same (trace, id, kind)
    read earlier (file, then record order)."""
    same = Window.partitionBy(C.TRACE_ID, SPAN_ID, F.coalesce(F.col(KIND), F.lit(""))).orderBy(
        C.SOURCE, C.LINE, RECORD
    )
    numbered = spans.select(
        "*",
        F.row_number().over(same).alias("__sp_n"),
        F.first(C.SOURCE).over(same).alias("__sp_first_source"),
        F.first(C.LINE).over(same).alias("__sp_first_line"),
    )
    repeats = numbered.where(F.col("__sp_n") > 1).transform(
        rejected,
        F.format_string(
            "span '%s' (%s) of trace '%s' repeats the one at line %d of %s",
            F.col(SPAN_ID),
            F.coalesce(F.col(KIND), F.lit("no kind")),
            F.col(C.TRACE_ID),
            F.col("__sp_first_line"),
            F.col("__sp_first_source"),
        ),
        DUPLICATE_SPAN,
        trace_id=F.col(C.TRACE_ID),
    )
    unique = numbered.where(F.col("__sp_n") == 1).drop(
        "__sp_n", "__sp_first_source", "__sp_first_line"
    )
    return unique, repeats


def _references(spans: DataFrame) -> DataFrame:
    """One row per (span, reference) with the span it names, if read: the parent (the
    best of the spans with that id: on the same process, else not a CLIENT), the
    CLIENT sharing a SERVER's id, and each link."""

    def ref(kind: str, trace: Column, span_id: Column) -> Column:
        return F.struct(
            F.lit(kind).alias(_REF_TYPE),
            F.coalesce(trace, F.col(C.TRACE_ID)).alias(_REF_TRACE),
            span_id.alias(_REF_ID),
        )

    parent_id = F.col(f"{PARENT}.{SPAN_ID}")
    has_parent = parent_id.isNotNull() & ~(
        parent_id.eqNullSafe(F.col(SPAN_ID))
        & F.coalesce(F.col(f"{PARENT}.{C.TRACE_ID}"), F.col(C.TRACE_ID)).eqNullSafe(
            F.col(C.TRACE_ID)
        )
    )
    refs = F.concat(
        F.when(
            has_parent, F.array(ref(_PARENT_REF, F.col(f"{PARENT}.{C.TRACE_ID}"), parent_id))
        ).otherwise(F.array()),
        F.when(
            F.col(KIND) == SERVER, F.array(ref(_SHARED_REF, F.lit(None), F.col(SPAN_ID)))
        ).otherwise(F.array()),
        F.transform(
            F.coalesce(F.col(LINKS), F.array()),
            lambda link: ref(_LINK_REF, link[C.TRACE_ID], link[SPAN_ID]),
        ),
    )
    exploded = spans.select(
        C.TRACE_ID, _KEY, C.PROCESS, KIND, SPAN_ID, F.explode(refs).alias("__sp_ref")
    ).select(
        C.TRACE_ID,
        _KEY,
        C.PROCESS,
        KIND,
        SPAN_ID,
        F.col(f"__sp_ref.{_REF_TYPE}").alias(_REF_TYPE),
        F.col(f"__sp_ref.{_REF_TRACE}").alias(_REF_TRACE),
        F.col(f"__sp_ref.{_REF_ID}").alias(_REF_ID),
    )
    targets = spans.select(
        F.col(C.TRACE_ID).alias(_REF_TRACE),
        F.col(SPAN_ID).alias(_REF_ID),
        F.col(_KEY).alias(_T_KEY),
        F.col(KIND).alias(_T_KIND),
        F.col(C.PROCESS).alias(_T_PROCESS),
        F.col(END_NS).alias(_T_END),
    )
    joined = exploded.join(targets, [_REF_TRACE, _REF_ID], "left")
    # a shared reference only names a CLIENT; never the span itself
    joined = joined.where((F.col(_REF_TYPE) != _SHARED_REF) | (F.col(_T_KIND) == CLIENT)).where(
        F.col(_T_KEY).isNull() | (F.col(_T_KEY) != F.col(_KEY))
    )
    preference = (
        F.when(F.col(_T_KEY).isNull(), 9)
        .when(F.col(_T_PROCESS) == F.col(C.PROCESS), 0)
        .when(F.col(_T_KIND).isNull() | (F.col(_T_KIND) != CLIENT), 1)
        .otherwise(2)
    )
    best = Window.partitionBy(C.TRACE_ID, _KEY, _REF_TYPE, _REF_TRACE, _REF_ID).orderBy(
        preference, _T_KEY
    )
    return (
        joined.withColumn("__sp_rank", F.row_number().over(best))
        .where(F.col("__sp_rank") == 1)
        .drop("__sp_rank")
        .withColumn(_T_FOUND, F.col(_T_KEY).isNotNull())
    )


_MESSAGE = T.StructType(
    [
        T.StructField(C.MSG_ID, T.StringType()),
        # the sending span (null: an orphan) and side, the receiving span and side
        T.StructField("src_key", T.StringType()),
        T.StructField("src_side", T.IntegerType()),
        T.StructField("src_process", T.StringType()),
        T.StructField("dst_key", T.StringType()),
        T.StructField("dst_side", T.IntegerType()),
        T.StructField("dst_process", T.StringType()),
        # when the receive happens (ns): sends are ordered by it
        T.StructField("dst_ns", T.LongType()),
    ]
)


def _messages(spans: DataFrame, refs: DataFrame) -> DataFrame:
    """One row per message end pair (trace_id + `_MESSAGE` fields)."""
    is_type = F.col(_REF_TYPE)
    found = F.col(_T_FOUND)
    target = F.struct(
        F.col(_REF_ID).alias("id"),
        F.col(_T_KEY).alias("key"),
        F.col(_T_KIND).alias("kind"),
        F.col(_T_PROCESS).alias("process"),
        found.alias("found"),
        F.col(_T_END).alias("end"),
    )
    per_span = refs.groupBy(C.TRACE_ID, _KEY).agg(
        F.max_by(target, F.when(is_type == _SHARED_REF, 1)).alias("__sp_shared_client"),
        F.max_by(target, F.when(is_type == _PARENT_REF, 1)).alias("__sp_parent"),
        F.collect_list(F.when(is_type == _LINK_REF, target)).alias("__sp_links"),
    )
    own = spans.select(C.TRACE_ID, _KEY, SPAN_ID, KIND, SHARED, C.PROCESS, START_NS)
    s = own.join(per_span, [C.TRACE_ID, _KEY], "left")
    shared_client = F.col("__sp_shared_client")
    parent = F.col("__sp_parent")
    links = F.coalesce(F.col("__sp_links"), F.array())
    span_id, process, kind = F.col(SPAN_ID), F.col(C.PROCESS), F.col(KIND)

    def message(
        suffix: Column,
        src: Column | None,
        src_side: int,
        src_process: Column | None,
        dst: Column,
        dst_side: int,
        dst_process: Column,
        dst_ns: Column,
    ) -> Column:
        null = F.lit(None).cast("string")
        return F.struct(
            F.concat(span_id, suffix).alias(C.MSG_ID),
            (src if src is not None else null).alias("src_key"),
            F.lit(src_side).alias("src_side"),
            (src_process if src_process is not None else null).alias("src_process"),
            dst.alias("dst_key"),
            F.lit(dst_side).alias("dst_side"),
            dst_process.alias("dst_process"),
            dst_ns.alias("dst_ns"),
        )

    me = F.col(_KEY)
    my_start = F.col(START_NS)
    # SERVER: its client, shared id first
    client = F.coalesce(shared_client, F.when(parent["found"] & (parent["kind"] == CLIENT), parent))
    rpc = F.array(
        message(
            F.lit(":req"), client["key"], START, client["process"], me, START, process, my_start
        ),
        message(
            F.lit(":resp"), me, END, process, client["key"], END, client["process"], client["end"]
        ),
    )
    server_orphan = (kind == SERVER) & (
        F.coalesce(F.col(SHARED), F.lit(False)) | (parent.isNotNull() & ~parent["found"])
    )
    # CONSUMER: each producer named (parent or link), and each absent one
    named = F.filter(
        F.concat(F.when(parent.isNotNull(), F.array(parent)).otherwise(F.array()), links),
        lambda t: ~t["found"] | (t["kind"] == PRODUCER),
    )
    one = F.size(named) == 1
    consumed = F.transform(
        named,
        lambda t: message(
            F.when(one, F.lit(":msg")).otherwise(F.concat(F.lit(":msg:"), t["id"])),
            F.when(t["found"], t["key"]),
            START,
            F.when(t["found"], t["process"]),
            me,
            START,
            process,
            my_start,
        ),
    )
    call = F.array(
        message(
            F.lit(":call"), parent["key"], START, parent["process"], me, START, process, my_start
        )
    )
    call_applies = parent.isNotNull() & parent["found"] & (parent["process"] != process)
    none = F.array().cast(T.ArrayType(_MESSAGE))
    causes = (
        F.when((kind == SERVER) & client.isNotNull(), rpc)
        .when(
            server_orphan,
            F.array(message(F.lit(":req"), None, START, None, me, START, process, my_start)),
        )
        .when((kind == CONSUMER) & (F.size(named) > 0), consumed)
        .when(call_applies, call)
        .otherwise(none)
    )
    return s.select(C.TRACE_ID, F.explode(causes).alias("__sp_m")).select(C.TRACE_ID, "__sp_m.*")


def pair_spans(spans: DataFrame, span_process: SpanProcess) -> DataFrame:
    """Span records (`SPAN_SCHEMA`) -> raw rows (the contract of `base`)."""
    bad = spans.where(F.col(PARSE_ERROR).isNotNull()).transform(
        rejected, F.col(PARSE_ERROR), F.col(PARSE_REASON), trace_id=F.col(C.TRACE_ID)
    )
    unique, repeats = _without_duplicates(spans.where(F.col(PARSE_ERROR).isNull()))
    keyed = unique.select(
        "*",
        F.concat(F.col(SPAN_ID), F.lit(":"), F.coalesce(F.col(KIND), F.lit(""))).alias(_KEY),
        _process(span_process).alias(C.PROCESS),
    )
    refs = _references(keyed)
    messages = _messages(keyed, refs)
    receives = messages.groupBy(
        C.TRACE_ID, F.col("dst_key").alias(_KEY), F.col("dst_side").alias(_SIDE)
    ).agg(
        F.array_sort(
            F.collect_list(F.struct(F.col("src_process").alias(C.PEER), F.col(C.MSG_ID)))
        ).alias("__sp_receives")
    )
    sends = (
        messages.where(F.col("src_key").isNotNull())
        .groupBy(C.TRACE_ID, F.col("src_key").alias(_KEY), F.col("src_side").alias(_SIDE))
        .agg(
            F.array_sort(
                F.collect_list(
                    F.struct(
                        F.col("dst_ns").alias("__sp_dst_ns"),
                        F.col(C.MSG_ID),
                        F.col("dst_process").alias(C.PEER),
                    )
                )
            ).alias("__sp_sends")
        )
    )

    def ends(column: str) -> Column:
        return F.transform(
            F.col(column),
            lambda m: F.struct(m[C.MSG_ID].alias(C.MSG_ID), m[C.PEER].alias(C.PEER)),
        )

    events = keyed.select(
        "*",
        F.explode(
            F.array(
                F.struct(F.lit(START).alias("side"), F.col(START_NS).alias("ns")),
                F.struct(F.lit(END).alias("side"), F.col(END_NS).alias("ns")),
            )
        ).alias("__sp_e"),
    ).select("*", F.col("__sp_e.side").alias(_SIDE), F.col("__sp_e.ns").alias("__sp_ns"))
    local = Window.partitionBy(C.TRACE_ID, C.PROCESS).orderBy(
        "__sp_ns", _SIDE, SPAN_ID, F.coalesce(F.col(KIND), F.lit(""))
    )
    label = F.concat(
        F.coalesce(F.col(NAME), F.lit("span")),
        F.when(F.col(_SIDE) == START, F.lit(" (start)")).otherwise(F.lit(" (end)")),
        F.coalesce(F.concat(F.lit(" ["), F.col(NOTE), F.lit("]")), F.lit("")),
    )
    with_messages = (
        events.join(receives, [C.TRACE_ID, _KEY, _SIDE], "left")
        .join(sends, [C.TRACE_ID, _KEY, _SIDE], "left")
        .select(
            C.SOURCE,
            C.LINE,
            RECORD,
            C.RAW,
            C.TRACE_ID,
            C.PROCESS,
            F.rank().over(local).cast("string").alias(C.SEQ),
            nanos_as_seconds(F.col("__sp_ns")).alias(C.TS),
            label.alias(C.LABEL),
            ends("__sp_receives").alias(RECEIVES),
            ends("__sp_sends").alias(SENDS),
        )
    )
    rows = expand_events(with_messages)
    return conform(rows).unionByName(bad).unionByName(repeats)
