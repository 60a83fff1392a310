"""Small Spark helpers the engines share: cutting lineage, the shuffle width, partition keys."""

from __future__ import annotations

from collections import Counter, defaultdict

from pyspark.sql import DataFrame, SparkSession
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
