"""spark-submit entry point of `causal-spark compare`.

    spark-submit jobs/compare.py --warehouse DIR [--plots DIR] [--conf conf/cluster.yml]

Same arguments as `causal-spark compare`: reads `protocol_runs` (and
`messages` for the plots), writes `protocol_comparison` and prints it.
"""

from __future__ import annotations

import sys

from causal_spark.app.cli import main

if __name__ == "__main__":
    sys.exit(main(["compare", *sys.argv[1:]]))
