"""`none`: deliver on arrival, the recorded system (DESIGN §4).

Replaying it must reproduce the recorded execution exactly (same delivery
order, same times); the engine verifies that on every run of an unskewed trace.
"""

from __future__ import annotations

from causal_spark.protocols.base import Protocol


class NoProtocol(Protocol):
    name = "none"
    source = "DESIGN §4: deliver on arrival (the recorded system)"
