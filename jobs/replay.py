"""spark-submit entry point of `causal-spark replay`.

    spark-submit jobs/replay.py --warehouse DIR [--protocols rst,mf] \
        [--receive-mode selective] [--param sa.k=8] [--conf conf/cluster.yml]

Same arguments as `causal-spark replay`: reads the clocked `events`,
`messages` and `trace_clocks` and writes `protocol_runs` and `deliveries`.
"""

from __future__ import annotations

import sys

from causal_spark.app.cli import main

if __name__ == "__main__":
    sys.exit(main(["replay", *sys.argv[1:]]))
