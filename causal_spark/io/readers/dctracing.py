"""DistributedClocks `tracing` JSON lines (TraceChecker's input; docs/formats.md).

One JSON object per line: `TracerIdentity` (the process), `VectorClock` (the
recorded clock, keyed by process), `Tag`, `TraceID`, `Body`. Files split across
tasks (JSON lines). The order within a process is its own clock entry, checked
as `clocks` describes. `Tag` `GenerateTokenTrace` is a send and
`ReceiveTokenTrace` a receive of the message `Body.Token`; every other record is
internal. The label is `<TraceID> <Tag> <Body>`, as TraceChecker's ShiViz output
writes it; the trace is the file (`TraceID` names a request scope, not an
execution).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from causal_spark import columns as C
from causal_spark.io.readers.base import (
    BAD_CLOCK,
    RECORD,
    RECORDED_VC,
    UNPARSEABLE,
    Reader,
    ReaderOptions,
    capped,
    conform,
    read_lines,
    rejected,
)
from causal_spark.io.readers.clocks import CLOCK, CLOCK_ERROR, OWN, check_clocks

NAME = "dctracing"
EXTENSIONS: tuple[str, ...] = (".jsonl", ".log", ".txt")
GENERATE = "GenerateTokenTrace"
RECEIVE = "ReceiveTokenTrace"

_CORRUPT = "__rd_corrupt"
RECORD_SCHEMA = T.StructType(
    [
        T.StructField("TracerIdentity", T.StringType()),
        T.StructField("TraceID", T.StringType()),
        T.StructField("Tag", T.StringType()),
        T.StructField("Body", T.StringType()),
        T.StructField("VectorClock", T.StringType()),
        T.StructField(_CORRUPT, T.StringType()),
    ]
)
_HOST = "__rd_host"
_JSON = "__rd_json"
_MALFORMED = "__rd_malformed"


def sniff(head: bytes) -> bool:
    """The first non-blank line is a JSON object with `TracerIdentity` and `VectorClock`."""
    text = head.decode("utf-8", errors="replace").lstrip()
    first = text.split("\n", 1)[0]
    return first.startswith("{") and '"TracerIdentity"' in first and '"VectorClock"' in first


def read(spark: SparkSession, files: Sequence[str], options: ReaderOptions) -> DataFrame:
    """DistributedClocks tracing logs as raw rows (see the module docstring)."""
    del options  # nothing to choose
    parsed = F.from_json(
        F.col("value"), RECORD_SCHEMA, {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"}
    )
    records = (
        read_lines(spark, files)
        .where(F.trim(F.col("value")) != "")
        .select(
            C.SOURCE,
            C.LINE,
            F.lit(1).cast("long").alias(RECORD),
            capped(F.col("value")).alias(C.RAW),
            parsed.alias(_JSON),
        )
    )
    json_ok = F.col(_JSON).isNotNull() & F.col(f"{_JSON}.{_CORRUPT}").isNull()
    tag = F.col(f"{_JSON}.Tag")
    token = F.get_json_object(F.col(f"{_JSON}.Body"), "$.Token")
    is_message = tag.isin(GENERATE, RECEIVE)
    malformed = (
        F.when(F.col(f"{_JSON}.TracerIdentity").isNull(), "missing TracerIdentity")
        .when(tag.isNull(), "missing Tag")
        .when(is_message & token.isNull(), F.format_string("%s without Body.Token", tag))
    )
    typed = records.select(
        "*",
        F.when(json_ok, F.col(f"{_JSON}.TracerIdentity")).alias(_HOST),
        F.when(json_ok, malformed).alias(_MALFORMED),
    )
    checked = check_clocks(
        typed.withColumn(_HOST, F.when(F.col(_MALFORMED).isNull(), F.col(_HOST))),
        (C.SOURCE,),
        _HOST,
        (C.LINE,),
        f"{_JSON}.VectorClock",
    )
    unparseable = checked.where(~json_ok).transform(
        rejected, F.lit("not a JSON object"), UNPARSEABLE
    )
    malformed_rows = checked.where(json_ok & F.col(_MALFORMED).isNotNull()).transform(
        rejected, F.col(_MALFORMED), None, process=F.col(f"{_JSON}.TracerIdentity")
    )
    bad_clocks = checked.where(F.col(CLOCK_ERROR).isNotNull()).transform(
        rejected, F.col(CLOCK_ERROR), BAD_CLOCK, process=F.col(_HOST)
    )
    kind = F.when(tag == GENERATE, C.SEND).when(tag == RECEIVE, C.RECEIVE).otherwise(C.INTERNAL)
    label = F.concat_ws(
        " ", F.col(f"{_JSON}.TraceID"), tag, F.coalesce(F.col(f"{_JSON}.Body"), F.lit(""))
    )
    events = checked.where(
        json_ok & F.col(_MALFORMED).isNull() & F.col(CLOCK_ERROR).isNull()
    ).select(
        C.SOURCE,
        C.LINE,
        RECORD,
        C.RAW,
        F.col(_HOST).alias(C.PROCESS),
        F.col(OWN).cast("string").alias(C.SEQ),
        kind.alias(C.KIND),
        F.when(is_message, token).alias(C.MSG_ID),
        label.alias(C.LABEL),
        F.col(CLOCK).alias(RECORDED_VC),
    )
    return (
        conform(events).unionByName(unparseable).unionByName(malformed_rows).unionByName(bad_clocks)
    )


READER = Reader(name=NAME, extensions=EXTENSIONS, sniff=sniff, read=read)
