"""SQL over the warehouse for analysts (`causal-spark sql`, docs/queries.md).

`views`: every table of a committed run as a Spark SQL temporary view, with the
happened-before functions; `statements`: `;`-separated statements; `text`: a result
as a plain text table; `prompt`: the interactive loop.
"""

from __future__ import annotations

from causal_spark.analyst.errors import QueryError
from causal_spark.analyst.prompt import Prompt
from causal_spark.analyst.statements import split_statements
from causal_spark.analyst.text import format_table
from causal_spark.analyst.views import register_views, run_query

__all__ = [
    "Prompt",
    "QueryError",
    "format_table",
    "register_views",
    "run_query",
    "split_statements",
]
