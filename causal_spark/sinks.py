"""The Delta sink moved to `causal_spark.io.sinks`; this name stays importable."""

from __future__ import annotations

from causal_spark.io.ledger import WarehouseError
from causal_spark.io.sinks import (
    FILES_SCHEMA,
    FileWriter,
    RunTransaction,
    Warehouse,
    resolve_backend,
)

__all__ = [
    "FILES_SCHEMA",
    "FileWriter",
    "RunTransaction",
    "Warehouse",
    "WarehouseError",
    "resolve_backend",
]
