"""Exports of the audit's tables to other tools' formats (ShiViz / GoVector logs)."""

from __future__ import annotations

from causal_spark.export.errors import ExportError
from causal_spark.export.shiviz import HEADER, require_hosts, shiviz_records

__all__ = ["HEADER", "ExportError", "require_hosts", "shiviz_records"]
