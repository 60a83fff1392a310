"""spark-submit entry point of `causal-spark ingest`.

    spark-submit jobs/ingest.py INPUT... --warehouse DIR [--conf conf/cluster.yml]

Same arguments as `causal-spark ingest`; the package must be importable on the driver
(installed, or shipped with --py-files dist/causal_spark-*.whl).
"""

from __future__ import annotations

import sys

from causal_spark.app.cli import main

if __name__ == "__main__":
    sys.exit(main(["ingest", *sys.argv[1:]]))
