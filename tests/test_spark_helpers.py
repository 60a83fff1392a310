"""`causal_spark._spark`'s case mapping: Spark's `lower` and `upper`, value for value."""

from __future__ import annotations

from chispa import assert_df_equality
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from causal_spark import _spark

# ASCII (the translate path) and not (Spark's own function): one-to-many mappings (ß, İ),
# the context-dependent final sigma, the Kelvin sign that lowers to ASCII, blanks and nulls
TEXTS = [
    "SEND",
    "  Receive ",
    "rcv",
    "",
    " ",
    "mixed-Case_123 !@#[]^`{}~",
    "\x00\x1f\x7f",
    "İNTERNAL",
    "ΟΔΟΣ ΟΔΟΣ",
    "\u212aelvin",
    "straße",
    "ǅemal",
    "ﬁle",
    "日本語",
    "😀 Emoji",
    None,
]


def test_lower_and_upper_are_sparks_own(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(t,) for t in TEXTS], "t string")
    text = F.col("t")
    ours = frame.select("t", _spark.lower(text).alias("lo"), _spark.upper(text).alias("up"))
    sparks = frame.select("t", F.lower(text).alias("lo"), F.upper(text).alias("up"))
    assert_df_equality(ours, sparks, ignore_row_order=True)
    got = {r["t"]: (r["lo"], r["up"]) for r in ours.collect()}
    assert got["  Receive "] == ("  receive ", "  RECEIVE ")
    assert got["straße"][1] == "STRASSE"  # a non-ASCII value went to Spark's ICU mapping
    assert got[None] == (None, None)
