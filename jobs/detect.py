"""spark-submit entry point of `causal-spark detect`.

    spark-submit jobs/detect.py --warehouse DIR [--conf conf/cluster.yml]

Same arguments as `causal-spark detect`: reads the clocked `events`, `messages`,
`trace_clocks` and `quarantine` from the warehouse and writes `violations`,
`crowns`, `crown_members` and `trace_summary`.
"""

from __future__ import annotations

import sys

from causal_spark.app.cli import main

if __name__ == "__main__":
    sys.exit(main(["detect", *sys.argv[1:]]))
