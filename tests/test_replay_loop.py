"""The compiled replay loop against the reference engine (DESIGN §4, issue 6).

`causal_spark.replay.loop` must give, run for run, what `replay_engine`
gives: status, reason, verification, every figure and every message's times,
receive and piggyback, on the worked traces and on the same hundreds of
random traces (point-to-point, broadcast, lossy, tied and ts-less) the
invariant tests use, for every protocol and both receive modes.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np
import pytest
from numba import njit
from numba.core.dispatcher import Dispatcher

from causal_spark.replay.layout import CompiledTrace, layout
from causal_spark.replay.model import Run, TraceShapeError
from causal_spark.replay.protocols.params import ProtocolParamError
from causal_spark.replay.run import replay_compiled
from causal_spark.replay.structs import ITEM_APP, _EngineDispatcher, engine_njit, push
from causal_spark.replay.warmup import warm_up
from tests.oracles.replay.engine import ReplayTrace, build_trace, replay
from tests.oracles.replay.protocols import PROTOCOLS
from tests.replay_traces import WORKED, worked
from tests.test_replay_engine import RANDOM, assert_accounted


@pytest.fixture(scope="module", autouse=True)
def _compiled_loop() -> None:
    # a cold compile is 15-45 s per protocol: compile them side by side, once
    warm_up(list(PROTOCOLS))


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
    assert_accounted(trace, ref)
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


COMPILED = list(PROTOCOLS)


def test_every_protocol_has_its_compiled_form() -> None:
    from causal_spark.replay.protocols.registry import MODULES

    for name in PROTOCOLS:
        module = MODULES[name]
        assert callable(getattr(module, "make_state", None)), name
        assert module.State.__module__ == module.__name__, name


@pytest.mark.parametrize("selective", [False, True], ids=["nonselective", "selective"])
@pytest.mark.parametrize("name", COMPILED)
def test_the_loop_replays_every_worked_trace_as_the_reference_does(
    name: str, selective: bool
) -> None:
    for trace_name in WORKED:
        _both(worked(trace_name), name, selective)
    _both(worked("selective_xy", x=6.0), name, selective)


@pytest.mark.slow
@pytest.mark.parametrize("selective", [False, True], ids=["nonselective", "selective"])
@pytest.mark.parametrize("name", COMPILED)
def test_the_loop_replays_random_traces_as_the_reference_does(name: str, selective: bool) -> None:
    for trace in RANDOM:
        _both(trace, name, selective)


BAD_ROWS = {
    # (pidx, lseq, kind, msg_id, peer) per row; names P, Q
    "an unknown kind": [(0, 1, "gossip", None, -1)],
    "an lseq jump": [(0, 1, "internal", None, -1), (0, 3, "internal", None, -1)],
    "two rows for one event": [(0, 1, "internal", None, -1), (0, 1, "receive", "m", 1)],
    "a message without id": [(0, 1, "send", None, 1)],
}


@pytest.mark.parametrize("case", list(BAD_ROWS))
def test_rows_that_cannot_form_programs_raise_the_references_error(case: str) -> None:
    pidx, lseq, kind, msg_id, peer = (list(c) for c in zip(*BAD_ROWS[case], strict=True))
    args = (
        ["P", "Q"],
        np.asarray(pidx),
        np.asarray(lseq),
        kind,
        np.zeros(len(pidx)),
        np.asarray(lseq),
        msg_id,
        np.asarray(peer),
    )
    with pytest.raises(TraceShapeError) as reference:
        build_trace("t", *args)  # type: ignore[arg-type]
    with pytest.raises(TraceShapeError) as compiled:
        layout("t", *args)  # type: ignore[arg-type]
    assert str(compiled.value) == str(reference.value)


def _laid_out(ctrace: CompiledTrace) -> dict[str, Any]:
    """Every column of a layout and its message ids in message order (NaN as a value)."""
    lay = ctrace.layout
    out: dict[str, Any] = {f: np.asarray(getattr(lay, f)).tobytes() for f in lay._fields}
    return out | {"ids": ctrace.msg_id, "skewed": ctrace.skewed, "span": (ctrace.start, ctrace.end)}


def test_the_layout_does_not_depend_on_the_order_of_its_rows() -> None:
    """Receives before or after their sends, a multicast's copies in any order: the rows of
    random traces without orphans (an orphan's message index is its row's order), shuffled,
    give the same layout column by column, and the same message ids in message order."""
    rng = np.random.default_rng(22)
    early = multicast = 0
    for trace in RANDOM[::3]:
        names, pidx, lseq, kind, ts, lamport, msg_id, peer = trace.source_rows
        want = compiled_of(trace)
        if np.any(want.layout.send_ev < 0):
            continue
        copies = np.diff(want.layout.copy_start)
        multicast += int(np.count_nonzero(copies > 1))
        for _ in range(3):
            order = rng.permutation(len(pidx))  # type: ignore[arg-type]
            rows = [np.asarray(pidx)[order], np.asarray(lseq)[order],
                    [kind[i] for i in order], np.asarray(ts)[order],  # type: ignore[index]
                    np.asarray(lamport)[order], [msg_id[i] for i in order],  # type: ignore[index]
                    np.asarray(peer)[order]]  # fmt: skip
            first: dict[str, str] = {}  # each message's first row's kind
            for mid, k in zip(rows[5], rows[2], strict=True):
                if mid is not None:
                    first.setdefault(mid, k)
            early += sum(1 for k in first.values() if k == "receive")
            got = layout(trace.trace_id, names, *rows)  # type: ignore[arg-type]
            assert _laid_out(got) == _laid_out(want), trace.trace_id
    assert early > 100 and multicast > 50, (early, multicast)


# (pidx, lseq, kind, msg_id, peer) per row of processes P, Q, R: a bad table, then the same
# with its receives right; P#1 sends m to Q (and n to R: a multicast)
_SEND_M, _SEND_N = (0, 1, "send", "m", 1), (0, 1, "send", "n", 2)
_Q_TAKES_M = (1, 1, "receive", "m", 0)
WRONG_RECEIVES = {
    "a receive of a copy sent to another process": (
        [_SEND_M, (2, 1, "receive", "m", 0)],
        [_SEND_M, _Q_TAKES_M],
    ),
    "a second receive of one message": (
        [_SEND_M, _Q_TAKES_M, (1, 2, "receive", "m", 0)],
        [_SEND_M, _Q_TAKES_M],
    ),
    "a receive of a multicast by a process it does not go to": (
        [_SEND_M, _SEND_N, (0, 2, "receive", "m", 0)],
        [_SEND_M, _SEND_N, _Q_TAKES_M],
    ),
    "a second receive of a multicast's copy": (
        [_SEND_M, _SEND_N, _Q_TAKES_M, (1, 2, "receive", "m", 0)],
        [_SEND_M, _SEND_N, _Q_TAKES_M],
    ),
}


def _three(rows: list[tuple[Any, ...]]) -> CompiledTrace:
    pidx, lseq, kind, msg_id, peer = (list(c) for c in zip(*rows, strict=True))
    return layout("t", ["P", "Q", "R"], np.asarray(pidx), np.asarray(lseq), kind,
                  np.asarray(lseq, float), np.asarray(lseq), msg_id, np.asarray(peer))  # fmt: skip


@pytest.mark.parametrize("case", list(WRONG_RECEIVES))
@pytest.mark.parametrize("first", ["send", "receive"])
def test_a_receive_that_names_no_copy_of_its_send_is_an_error_in_any_row_order(
    case: str, first: str
) -> None:
    """The layout matches a receive to its copy whether the send's row comes before or
    after it: a receive by a process the copy does not go to, or a second receive of one
    copy, is a bad table either way; the rows with the right receives lay out."""
    bad, good = WRONG_RECEIVES[case]
    step = 1 if first == "send" else -1
    with pytest.raises(TraceShapeError, match="a receive names a send copy that is not in"):
        _three(bad[::step])
    lay = _three(good[::step]).layout
    q_takes_m = int(lay.ev_start[1])  # P#1 is event 0
    assert lay.recv_ev.tolist() == [q_takes_m, -1][: 1 + (_SEND_N in good)]
    assert lay.take[q_takes_m] == 0


def test_unknown_parameters_are_rejected_as_the_reference_does() -> None:
    trace = worked("causal_chat")
    with pytest.raises(ProtocolParamError, match="has no parameter"):
        replay_compiled(compiled_of(trace), "rst", {"k": "3"})
    with pytest.raises(ProtocolParamError, match=r"sa\.k must be at least 2"):
        replay_compiled(compiled_of(trace), "sa", {"k": "1"})


def test_the_spec_the_compiled_and_the_reference_registries_name_the_same_protocols() -> None:
    from causal_spark.replay.protocols.registry import MODULES
    from causal_spark.replay.protocols.spec import SPECS

    assert list(MODULES) == list(SPECS) == list(PROTOCOLS)
    for name, module in MODULES.items():
        assert module.SPEC is SPECS[name] is PROTOCOLS[name].spec


# ---- what a cold compile costs: the engine's helpers compile once --------------------------


@engine_njit
def _doubled(x: Any) -> Any:
    return 2 * x


@njit
def _call_doubled(n):  # type: ignore[no-untyped-def]
    # a literal, a module constant (typed as a literal too), an int32 and an int64
    return _doubled(3) + _doubled(ITEM_APP) + _doubled(np.int32(n)) + _doubled(n)


def test_an_engine_function_compiles_one_version_whatever_its_callers_pass() -> None:
    assert _call_doubled(5) == 2 * (3 + ITEM_APP + 5 + 5)
    assert [str(sig) for sig in _doubled.signatures] == ["(int64,)"]


def test_the_loops_functions_that_take_no_state_are_engine_functions() -> None:
    # Numba links every callee into each caller and compiles it again there: a helper typed
    # per protocol, or per literal a call site passes, multiplies the cold compile
    from causal_spark.replay import loop

    helpers = [
        (name, obj)
        for name, obj in vars(loop).items()
        if isinstance(obj, Dispatcher)
        and obj.py_func.__module__ == loop.__name__
        and next(iter(inspect.signature(obj.py_func).parameters)) not in ("st", "state")
    ]
    assert len(helpers) >= 15, [name for name, _ in helpers]
    for name, obj in [*helpers, ("push", push)]:
        assert isinstance(obj, _EngineDispatcher), name
