"""The export's errors (exception classes only)."""

from __future__ import annotations


class ExportError(ValueError):
    """A trace that cannot be exported: unknown, without clocks, or with names the format
    cannot hold."""
