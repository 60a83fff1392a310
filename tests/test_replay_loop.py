"""The compiled replay loop against the reference engine (DESIGN §4, issue 6).

`causal_spark.replay_loop` must give, run for run, what `replay_engine`
gives: status, reason, verification, every figure and every message's times,
receive and piggyback, on the worked traces and on the same hundreds of
random traces (point-to-point, broadcast, lossy, tied and ts-less) the
invariant tests use, for every protocol and both receive modes.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import pytest

from causal_spark.protocols import PROTOCOLS
from causal_spark.replay_engine import ReplayTrace, Run, replay
from causal_spark.replay_loop import CompiledTrace, layout, replay_compiled
from tests.replay_traces import WORKED, worked
from tests.test_replay_engine import RANDOM


def compiled_of(trace: ReplayTrace) -> CompiledTrace:
    return layout(trace.trace_id, *trace.source_rows)  # type: ignore[arg-type]


def _value(x: Any) -> Any:
    """The reference's None and the loop's NaN / -1 sentinels as one value."""
    if x is None:
        return None
    if isinstance(x, float | np.floating) and math.isnan(x):
        return None
    return float(x)


def assert_same_run(trace: ReplayTrace, ref: Run, ctrace: CompiledTrace, got: Run) -> None:
    where = (trace.trace_id,)
    assert (got.status, got.reason, got.verified) == (ref.status, ref.reason, ref.verified), where
    for key, want in ref.figures.items():
        have = got.figures[key]
        if want is None:
            assert have is None, (where, key, have)
        else:
            assert have == pytest.approx(want, rel=1e-9, abs=1e-9), (where, key, have, want)
    index = {mid: i for i, mid in enumerate(ctrace.msg_id)}
    assert sorted(index) == sorted(trace.msg_id), where
    columns = ("send_time", "post_time", "arrival_time", "delivery_time", "take_time")
    for m, mid in enumerate(trace.msg_id):
        c = index[mid]
        for column in columns:
            want, have = _value(getattr(ref, column)[m]), _value(getattr(got, column)[c])
            if want is None:
                assert have is None, (where, mid, column, have)
            else:
                assert have == pytest.approx(want, rel=1e-9, abs=1e-9), (where, mid, column)
        assert int(got.taken_by[c]) == ref.taken_by[m], (where, mid)
        pig = ref.piggyback[m]
        assert int(got.piggyback[c]) == (-1 if pig is None else pig), (where, mid)
        held = ref.held_back[m]
        assert _value(got.held_back[c]) == (None if held is None else float(held)), (where, mid)


def _both(trace: ReplayTrace, name: str, selective: bool, **params: str) -> None:
    ref = replay(trace, PROTOCOLS[name], params, selective)
    ctrace = compiled_of(trace)
    assert_same_run(trace, ref, ctrace, replay_compiled(ctrace, name, params, selective))


COMPILED = [n for n, cls in PROTOCOLS.items() if hasattr(sys.modules[cls.__module__], "make_state")]


@pytest.mark.parametrize("selective", [False, True], ids=["nonselective", "selective"])
@pytest.mark.parametrize("name", COMPILED)
def test_the_loop_replays_every_worked_trace_as_the_reference_does(
    name: str, selective: bool
) -> None:
    for trace_name in WORKED:
        _both(worked(trace_name), name, selective)
    _both(worked("selective_xy", x=6.0), name, selective)


@pytest.mark.parametrize("selective", [False, True], ids=["nonselective", "selective"])
@pytest.mark.parametrize("name", COMPILED)
def test_the_loop_replays_random_traces_as_the_reference_does(name: str, selective: bool) -> None:
    for trace in RANDOM:
        _both(trace, name, selective)
