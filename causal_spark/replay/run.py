"""One protocol over one trace with the compiled loop: `replay_compiled` and its `CompiledRun`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from numba import njit

from causal_spark.replay.figures import FIGURES, accounting_error, figures_of
from causal_spark.replay.layout import CompiledTrace
from causal_spark.replay.loop import new_engine, run_loop
from causal_spark.replay.memory import small_pages
from causal_spark.replay.model import (
    STATUS_DEADLOCK,
    STATUS_ERROR,
    STATUS_NOT_APPLICABLE,
    STATUS_OK,
    STATUS_STALLED,
    Execution,
)
from causal_spark.replay.protocols.registry import module_of
from causal_spark.replay.protocols.spec import ProtocolSpec
from causal_spark.replay.structs import (
    K_CONTROL,
    K_CONTROL_INTS,
    K_MAX_BUFFER,
    K_VIOLATED,
    M_PENDING,
    eng_ref,
    layout_ref,
)
from causal_spark.replay.verify import inline_check, verify

# --------------------------------------------------------------


class CompiledRun:
    """The result of one protocol over one trace from the compiled loop: a `protocol_runs`
    row and its `Execution`, whose per-message columns (layout order) are those of
    `deliveries` (NaN: no time; -1: no receive or piggyback). Arrival and held-back are
    derived when asked (`columns`)."""

    def __init__(
        self,
        trace: CompiledTrace,
        status: str,
        reason: str | None,
        verified: bool | None,
        figures: dict[str, float | int | None],
        execution: Execution,
    ) -> None:
        self.status = status
        self.reason = reason
        self.verified = verified
        self.figures = figures
        self.execution = execution
        self._lay = trace.layout
        self.send_time, self.post_time = execution.send_time, execution.post_time
        self.delivery_time, self.take_time = execution.delivery_time, execution.take_time
        self.taken_by, self.piggyback = execution.taken_by, execution.piggyback
        self._arrived = execution.arrived

    def columns(self, m: np.ndarray | slice) -> dict[str, np.ndarray]:
        """The deliveries columns of messages `m`: times (NaN where missing), taken_by and
        piggyback (-1), held_back (1.0 / 0.0, NaN where arrival or delivery is missing)."""
        times, ints, bits, _ = self._deliveries(m)
        count = times.shape[1]
        out = dict(zip(_TIMES, times, strict=True)) | dict(zip(_INTS, ints, strict=True))
        held = _unpacked(bits[_HELD], count).astype(np.float64)
        held[~_unpacked(bits[_HELD_VALID], count)] = np.nan
        return out | {"held_back": held}

    def arrow_columns(self, m: np.ndarray | slice) -> dict[str, pa.Array]:
        """The deliveries columns of messages `m` as Arrow arrays of the table's types
        (float64, int64, bool; null where `columns` has NaN or -1), on the compiled pass's
        buffers: no mask is made, packed or copied."""
        times, ints, bits, nulls = self._deliveries(m)
        count = times.shape[1]
        out: dict[str, pa.Array] = {}
        columns = [(name, pa.float64(), times[k]) for k, name in enumerate(_TIMES)]
        columns += [(name, pa.int64(), ints[k]) for k, name in enumerate(_INTS)]
        for k, (name, typ, values) in enumerate(columns):
            out[name] = _arrow(typ, count, bits[k], nulls[k], pa.py_buffer(values))
        out["held_back"] = _arrow(
            pa.bool_(), count, bits[_HELD_VALID], nulls[_HELD_VALID], pa.py_buffer(bits[_HELD])
        )
        return out

    def _deliveries(self, m: np.ndarray | slice) -> tuple[np.ndarray, ...]:
        lay = self._lay
        if isinstance(m, slice):
            m = np.arange(len(lay.src))[m]
        return _deliveries(  # type: ignore[no-any-return]
            np.asarray(m, np.int32), lay.send_ev, lay.recv_ev, lay.latency, lay.etime,
            self.send_time, self.post_time, self.delivery_time, self.take_time,
            np.asarray(self.taken_by, np.int32), np.asarray(self.piggyback, np.int32),
            np.asarray(self._arrived, np.bool_),
        )  # fmt: skip

    @property
    def arrival_time(self) -> np.ndarray:
        return self.columns(slice(None))["arrival_time"]

    @property
    def held_back(self) -> np.ndarray:
        return self.columns(slice(None))["held_back"]


@small_pages()
def replay_compiled(
    trace: CompiledTrace,
    name: str,
    params: Mapping[str, str] | None = None,
    selective: bool = False,
    default_latency: float = 1.0,
) -> CompiledRun:
    """Replay `trace` under protocol `name` with the compiled loop: its execution, then its
    figures and verification from that execution."""
    module = module_of(name)
    spec: ProtocolSpec = module.SPEC
    parsed = spec.parse(dict(params or {}))
    state, reason = module.make_state(trace, parsed)
    if reason is not None:
        figures: dict[str, float | int | None] = dict.fromkeys(FIGURES)
        empty = Execution.empty(trace.messages, trace.n)
        return CompiledRun(trace, STATUS_NOT_APPLICABLE, reason, None, figures, empty)
    fifo_transport = spec.uses_fifo_transport(parsed)
    flags = (int(spec.causal), int(fifo_transport), int(spec.point_to_point), int(selective))
    eng = new_engine(trace, flags, default_latency, inline_check(spec))
    run_loop(state, eng_ref(eng), layout_ref(trace.layout))
    execution = Execution(
        eng.send_t, eng.post_t, eng.del_t, eng.take_t, eng.taken_by, eng.pig,
        eng.mst >= M_PENDING, eng.pc, eng.now, int(eng.cnt[K_CONTROL]),
        int(eng.cnt[K_CONTROL_INTS]), int(eng.cnt[K_MAX_BUFFER]), bool(eng.cnt[K_VIOLATED]),
    )  # fmt: skip
    del eng  # the heap and the protocol's buffers go now
    status, reason = _ending(trace, execution)
    verified = verify(trace, spec, execution)
    own = getattr(module, "sender_delay", None)

    def sender_delay(post_minus_send: float) -> float:
        return float(own(state, post_minus_send)) if own is not None else post_minus_send

    figures, taken = figures_of(trace, execution, status, sender_delay)
    wrong = accounting_error(figures, taken, trace.messages)
    if wrong is not None:
        status, reason = STATUS_ERROR, wrong
    return CompiledRun(trace, status, reason, verified, figures, execution)


def _ending(trace: CompiledTrace, execution: Execution) -> tuple[str, str | None]:
    """ok when every process ran its program to the end; else stalled (the log lost
    messages) or deadlock, with the processes that wait for ever."""
    length = np.diff(trace.layout.ev_start)
    unfinished = np.flatnonzero(execution.completed < length)
    if not len(unfinished):
        return STATUS_OK, None
    lost = trace.lost
    status = STATUS_STALLED if lost else STATUS_DEADLOCK
    blocked = ", ".join(
        f"{trace.names[p]} at #{execution.completed[p] + 1}" for p in unfinished[:5].tolist()
    )
    reason = f"{len(unfinished)} process(es) wait for ever: {blocked}"
    if status == STATUS_STALLED:
        reason += f" (the log lost {lost} message(s))"
    return status, reason


_TIMES = ("send_time", "post_time", "arrival_time", "delivery_time", "take_time")
_INTS = ("taken_by", "piggyback")
_HELD_VALID, _HELD = 7, 8  # rows of `_deliveries`' bitmaps: 0-6 the columns' validity


def _unpacked(bits: np.ndarray, count: int) -> np.ndarray:
    return np.unpackbits(bits, count=count, bitorder="little").astype(bool)


def _arrow(typ: pa.DataType, count: int, valid: np.ndarray, nulls: int, data: pa.Buffer) -> Any:
    """An Arrow array on a validity bitmap (none when no value is null) and a data buffer."""
    validity = pa.py_buffer(valid) if nulls else None
    return pa.Array.from_buffers(typ, count, [validity, data], null_count=int(nulls))


@njit(cache=True)
def _deliveries(m, send_ev, recv_ev, latency, etime, send_t, post_t, del_t, take_t, taken_by,  # type: ignore[no-untyped-def]
                pig, arrived):  # fmt: skip
    """The deliveries columns of messages `m` in one pass, laid out as Arrow's: the times
    (float64, NaN where missing), taken_by and piggyback (int64, -1 for none), bitmaps in
    Arrow's bit order, a byte of eight rows at a time (0-6: each column's validity, not NaN
    and not -1; 7: held_back's, arrival and delivery known; 8: held_back's values,
    delivered after it arrived) and each bitmap's null count (0-7). Arrival: post +
    latency, an orphan's the recorded time of its receive, NaN if it never arrived. (The
    NumPy gathers and `where`s, then Arrow's masks and their packing, cost 3-4 passes a
    column.)"""
    count = len(m)
    times = np.empty((5, count), np.float64)
    ints = np.empty((2, count), np.int64)
    bits = np.empty((9, (count + 7) >> 3), np.uint8)
    ones = np.zeros(8, np.int64)
    for lo in range(0, count, 8):
        w0 = w1 = w2 = w3 = w4 = w5 = w6 = w7 = w8 = 0
        for i in range(lo, min(lo + 8, count)):
            j = m[i]
            bit = 1 << (i - lo)
            s = send_t[j]
            q = post_t[j]
            if not arrived[j]:
                a = np.nan
            elif send_ev[j] >= 0:
                a = q + latency[j]
            else:
                a = etime[max(recv_ev[j], 0)]
            d = del_t[j]
            t = take_t[j]
            by = taken_by[j]
            piggy = pig[j]
            times[0, i] = s
            times[1, i] = q
            times[2, i] = a
            times[3, i] = d
            times[4, i] = t
            ints[0, i] = by
            ints[1, i] = piggy
            w0 |= bit if s == s else 0
            w1 |= bit if q == q else 0
            w2 |= bit if a == a else 0
            w3 |= bit if d == d else 0
            w4 |= bit if t == t else 0
            w5 |= bit if by >= 0 else 0
            w6 |= bit if piggy >= 0 else 0
            if a == a and d == d:
                w7 |= bit
                w8 |= bit if d > a else 0
        at = lo >> 3
        bits[0, at] = w0
        bits[1, at] = w1
        bits[2, at] = w2
        bits[3, at] = w3
        bits[4, at] = w4
        bits[5, at] = w5
        bits[6, at] = w6
        bits[7, at] = w7
        bits[8, at] = w8
        ones[0] += _POPCOUNT[w0]
        ones[1] += _POPCOUNT[w1]
        ones[2] += _POPCOUNT[w2]
        ones[3] += _POPCOUNT[w3]
        ones[4] += _POPCOUNT[w4]
        ones[5] += _POPCOUNT[w5]
        ones[6] += _POPCOUNT[w6]
        ones[7] += _POPCOUNT[w7]
    return times, ints, bits, count - ones


_POPCOUNT = np.array([bin(b).count("1") for b in range(256)], np.int64)  # set bits of a byte
