"""`none`: deliver on arrival, the recorded system (docs/replay.md).

Replaying it must reproduce the recorded execution exactly (same delivery
order, same times); the engine verifies that on every run of an unskewed trace.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import numpy as np

from causal_spark.protocols.base import Protocol
from causal_spark.replay_loop import CompiledTrace


class NoProtocol(Protocol):
    name = "none"
    source = "docs/replay.md: deliver on arrival (the recorded system)"


# ---- compiled form (causal_spark.replay_loop): every hook is the loop's default ----------

State = namedtuple("State", "unused")


def make_state(trace: CompiledTrace, params: Mapping[str, str]) -> tuple[Any, str | None, bool]:
    return State(np.zeros(1, dtype=np.int64)), None, False
