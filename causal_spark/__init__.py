"""causal-spark: audit recorded distributed-system message logs with PySpark.

The package is a library of pure DataFrame transforms (one module per concept)
plus an application layer (`causal_spark.app`) that owns the Spark session, the
command line and the IO of the jobs.
"""

from __future__ import annotations

__version__ = "0.1.0"
