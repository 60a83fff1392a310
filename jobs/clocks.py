"""spark-submit entry point of `causal-spark clocks`.

    spark-submit jobs/clocks.py --warehouse DIR [--matrix] [--conf conf/cluster.yml]

Same arguments as `causal-spark clocks`: reads `events` and `messages` from the
warehouse, rewrites `events` with clocks and writes `trace_clocks`.
"""

from __future__ import annotations

import sys

from causal_spark.app.cli import main

if __name__ == "__main__":
    sys.exit(main(["clocks", *sys.argv[1:]]))
