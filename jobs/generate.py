"""spark-submit entry point of `causal-spark generate`.

    spark-submit jobs/generate.py --out PATH --processes N --events E [...]

Same arguments as `causal-spark generate`.
"""

from __future__ import annotations

import sys

from causal_spark.app.cli import main

if __name__ == "__main__":
    sys.exit(main(["generate", *sys.argv[1:]]))
