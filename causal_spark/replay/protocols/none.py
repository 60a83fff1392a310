"""`none`: deliver on arrival, the recorded system (docs/replay.md).

Replaying it must reproduce the recorded execution exactly (same delivery
order, same times); the engine verifies that on every run of an unskewed trace.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import numpy as np

from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.protocols.spec import SPECS

SPEC = SPECS["none"]

State = namedtuple("State", "unused")


def make_state(trace: CompiledTrace, params: Mapping[str, object]) -> tuple[Any, str | None]:
    """The state of a run over `trace` with parsed `params`, and why the protocol cannot
    run the trace (None when it can)."""
    return State(np.zeros(1, dtype=np.int64)), None
