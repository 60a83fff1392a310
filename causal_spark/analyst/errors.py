"""The SQL command's errors (exception classes only)."""

from __future__ import annotations


class QueryError(ValueError):
    """A statement Spark could not parse or analyse (its message says why)."""
