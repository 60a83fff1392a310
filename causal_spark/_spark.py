"""Small Spark helpers the engines share: cutting lineage, the shuffle width, partition keys,
case mapping."""

from __future__ import annotations

from collections import Counter, defaultdict

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F


def checkpoint(frame: DataFrame) -> DataFrame:
    """Cut lineage: a reliable checkpoint when a checkpoint dir is set, else a local one."""
    directory = frame.sparkSession.conf.get("spark.checkpoint.dir", None)
    if directory:
        return frame.checkpoint(eager=True)
    return frame.localCheckpoint(eager=True)


def shuffle_partitions(spark: SparkSession) -> int:
    """`spark.sql.shuffle.partitions` as a number (1 when it is not a plain integer)."""
    partitions = spark.conf.get("spark.sql.shuffle.partitions") or "1"
    return int(partitions) if partitions.isdigit() else 1


def partition_keys(spark: SparkSession, wanted: list[int]) -> list[int]:
    """Distinct int grouping keys, the i-th of which Spark's hash partitioning sends to shuffle
    partition wanted[i] (each in 0..shuffle_partitions-1).

    Spark places a group in the partition its key hashes to, so two groups that must not
    share a core would share one as often as hashes collide. The keys are found by hashing
    a range of ints with Spark's `hash` (the function its hash partitioning uses), a few
    hundred rows per call (this runs small Spark jobs).
    """
    partitions = shuffle_partitions(spark)
    outside = [p for p in wanted if not 0 <= p < partitions]
    if outside:
        raise ValueError(
            f"partition_keys: partitions must be in 0..{partitions - 1}, not {outside[:3]}"
        )
    need = Counter(wanted)
    found: dict[int, list[int]] = defaultdict(list)
    low, span = 0, max(64, 4 * len(wanted))
    while any(len(found[p]) < count for p, count in need.items()):
        key = F.col("id").cast("int")
        probe = spark.range(low, low + span).select(
            key.alias("key"), F.pmod(F.hash(key), F.lit(partitions)).alias("partition")
        )
        for row in probe.collect():
            found[row["partition"]].append(row["key"])
        low, span = low + span, span * 2
    taken: Counter[int] = Counter()
    keys = []
    for p in wanted:
        keys.append(found[p][taken[p]])
        taken[p] += 1
    return keys


# Spark's `lower` and `upper` of a string go through `CollationAwareUTF8String`, whose class
# initialiser builds a title-case table over every Unicode code point with ICU: about 1.4
# CPU-s in the first task of each JVM that calls either (a short job's C1-only JVM; most of
# a small ingest's only such call). For an all-ASCII value (as many characters as bytes)
# both map A-Z and a-z only, which `translate` does without that class; any other value
# (and a null) still goes to Spark's own function, so every result is Spark's.
_ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ASCII_LOWER = _ASCII_UPPER.lower()


def _all_ascii(text: Column) -> Column:
    return F.length(text) == F.octet_length(text)


def lower(text: Column) -> Column:
    """`F.lower(text)`, the same value for every input, without ICU's tables for ASCII text."""
    return F.when(_all_ascii(text), F.translate(text, _ASCII_UPPER, _ASCII_LOWER)).otherwise(
        F.lower(text)
    )


def upper(text: Column) -> Column:
    """`F.upper(text)`, the same value for every input, without ICU's tables for ASCII text."""
    return F.when(_all_ascii(text), F.translate(text, _ASCII_LOWER, _ASCII_UPPER)).otherwise(
        F.upper(text)
    )
