"""Synthetic message logs, simulated in physical time, generated in parallel on Spark.

The model. Every process has its own *spontaneous* events (sends and internal
events) at the times of a rate-1 Poisson process. A send picks its
destination(s) by the topology and puts one message per destination on the
network with a latency drawn from the latency distribution; a message arrives
at send time + latency, unless it is lost. Each process receives messages in
arrival order: a receive event happens at the arrival time, interleaved with
the process's spontaneous events by time. FIFO and causal-order violations
and crowns therefore come from latency variation, not from editing the log.

Because spontaneous events do not depend on what was received, each
(trace, process) is generated independently by `process_events`, a NumPy
kernel seeded by (seed, trace, process): the output does not depend on how
the work is partitioned. Spark then routes each message to its destination
(one shuffle) and numbers every process's events by time (one window).

Counts are exact: a trace has exactly `events` events (a multicast send is one
event), of which sends, internal events and lost messages are allotted to the
processes as evenly as possible.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from causal_spark import columns as C

Topology = Literal["all_to_all", "client_server", "ring", "broadcast"]
TOPOLOGIES: tuple[str, ...] = ("all_to_all", "client_server", "ring", "broadcast")
LatencyKind = Literal["const", "uniform", "lognormal"]
CHUNK = 1 << 20  # spontaneous events generated per batch, bounding a task's memory

SPONTANEOUS_SCHEMA = pa.schema(
    [
        ("trace", pa.int64()),
        ("process", pa.int32()),
        ("ev", pa.int64()),  # index of the spontaneous event within its process
        ("t", pa.float64()),  # time of the event
        ("is_send", pa.bool_()),
        ("dst", pa.int32()),  # destination (-1 for an internal event)
        ("arrival", pa.float64()),  # arrival time of the message (NaN for internal)
        ("lost", pa.bool_()),
        ("size", pa.int64()),
        ("copy", pa.int64()),  # message number within the sending process (-1: internal)
    ]
)


class GeneratorError(ValueError):
    """A generator parameter is out of range."""


@dataclass(frozen=True)
class Latency:
    kind: LatencyKind
    a: float
    b: float = 0.0

    @staticmethod
    def parse(text: str) -> Latency:
        """`const:X`, `uniform:A,B` or `lognormal:MU,SIGMA`."""
        kind, _, args = text.partition(":")
        try:
            values = [float(v) for v in args.split(",")] if args else []
        except ValueError as e:
            raise GeneratorError(f"latency '{text}': parameters must be numbers") from e
        if kind == "const" and len(values) == 1 and values[0] > 0:
            return Latency("const", values[0])
        if kind == "uniform" and len(values) == 2 and 0 <= values[0] <= values[1] and values[1] > 0:
            return Latency("uniform", values[0], values[1])
        if kind == "lognormal" and len(values) == 2 and values[1] >= 0:
            return Latency("lognormal", values[0], values[1])
        raise GeneratorError(
            f"latency '{text}' must be const:X (X > 0), uniform:A,B (0 <= A <= B, B > 0) "
            "or lognormal:MU,SIGMA (SIGMA >= 0)"
        )

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "const":
            values = np.full(n, self.a)
        elif self.kind == "uniform":
            values = rng.uniform(self.a, self.b, n)
        else:
            values = rng.lognormal(self.a, self.b, n)
        # a message never arrives at the instant it is sent
        return np.asarray(np.maximum(values, 1e-9), dtype=np.float64)


@dataclass(frozen=True)
class GeneratorSpec:
    processes: int
    events: int
    topology: Topology = "all_to_all"
    internal_prob: float = 0.1
    latency: Latency = Latency("lognormal", 0.0, 1.0)
    loss: float = 0.0
    traces: int = 1
    seed: int = 0

    def validate(self) -> GeneratorSpec:
        if self.processes < 2:
            raise GeneratorError(f"--processes must be at least 2, found {self.processes}")
        if self.topology not in TOPOLOGIES:
            raise GeneratorError(f"--topology must be one of {TOPOLOGIES}, found {self.topology}")
        if not 0 <= self.internal_prob < 1:
            raise GeneratorError(f"--internal-prob must be in [0, 1), found {self.internal_prob}")
        if not 0 <= self.loss < 1:
            raise GeneratorError(f"--loss must be in [0, 1), found {self.loss}")
        if self.traces < 1:
            raise GeneratorError(f"--traces must be at least 1, found {self.traces}")
        if self.events < 2:
            raise GeneratorError(f"--events must be at least 2, found {self.events}")
        return self

    @property
    def fan_out(self) -> int:
        return self.processes - 1 if self.topology == "broadcast" else 1


@dataclass(frozen=True)
class Allotment:
    """Spontaneous sends, internal events and lost messages of one process."""

    sends: int
    internals: int
    lost: int


def _spread(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def allot(spec: GeneratorSpec) -> list[Allotment]:
    """Split a trace's `events` exactly into per-process sends, internals and losses.

    events = sends + internals + messages - lost, messages = sends * fan_out.
    """
    fan = spec.fan_out
    per_spontaneous = 1 + fan * (1 - spec.internal_prob) * (1 - spec.loss)
    spontaneous = spec.events / per_spontaneous
    sends = max(1, round((1 - spec.internal_prob) * spontaneous))
    while True:
        lost = round(spec.loss * sends * fan)
        internals = spec.events - sends - sends * fan + lost
        if internals >= 0:
            break
        sends -= 1
    send_parts = _spread(sends, spec.processes)
    internal_parts = _spread(internals, spec.processes)
    # losses go where the messages are, never more than a process sends
    lost_parts = [0] * spec.processes
    remaining = lost
    for p in sorted(range(spec.processes), key=lambda p: -send_parts[p]):
        share = min(remaining, math.ceil(lost * send_parts[p] / max(1, sends)), send_parts[p] * fan)
        lost_parts[p] = share
        remaining -= share
    for p in range(spec.processes):
        extra = min(remaining, send_parts[p] * fan - lost_parts[p])
        lost_parts[p] += extra
        remaining -= extra
    return [
        Allotment(s, i, lo) for s, i, lo in zip(send_parts, internal_parts, lost_parts, strict=True)
    ]


def _destinations(
    spec: GeneratorSpec, process: int, rng: np.random.Generator, n: int
) -> np.ndarray:
    """Destinations of `n` unicast sends of `process` (broadcast is handled by the caller)."""
    others = spec.processes - 1
    if spec.topology == "ring":
        return np.full(n, (process + 1) % spec.processes, dtype=np.int32)
    if spec.topology == "client_server":
        if process == 0:  # the server answers a random client
            return rng.integers(1, spec.processes, n, dtype=np.int32)
        return np.zeros(n, dtype=np.int32)
    pick = rng.integers(0, others, n, dtype=np.int32)
    return pick + (pick >= process).astype(np.int32)  # skip self


def process_events(
    spec: GeneratorSpec, trace: int, process: int, share: Allotment
) -> Iterator[pa.RecordBatch]:
    """The spontaneous events of one process, one row per message copy or internal event.

    Deterministic in (spec.seed, trace, process), generated in chunks of `CHUNK`.
    """
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([spec.seed, trace, process])))
    total = share.sends + share.internals
    # which spontaneous events are sends, and which message copies are lost:
    # exact counts, positions drawn at random
    is_send_all = np.zeros(total, dtype=bool)
    is_send_all[rng.choice(total, share.sends, replace=False)] = True
    fan = spec.fan_out
    lost_all = np.zeros(share.sends * fan, dtype=bool)
    if share.lost:
        lost_all[rng.choice(share.sends * fan, share.lost, replace=False)] = True
    clock = 0.0
    copies_done = 0
    for start in range(0, total, CHUNK):
        stop = min(total, start + CHUNK)
        n = stop - start
        times = clock + np.cumsum(rng.exponential(1.0, n))
        clock = float(times[-1])
        is_send = is_send_all[start:stop]
        ev = np.arange(start, stop, dtype=np.int64)
        send_idx = np.flatnonzero(is_send)
        k = len(send_idx)
        if spec.topology == "broadcast":
            others = np.array([q for q in range(spec.processes) if q != process], dtype=np.int32)
            dst = np.tile(others, k)
            rows_of_sends = np.repeat(send_idx, fan)
        else:
            dst = _destinations(spec, process, rng, k)
            rows_of_sends = send_idx
        m = len(rows_of_sends)
        latency = spec.latency.draw(rng, m)
        size = rng.integers(0, 1024, m, dtype=np.int64)
        lost = lost_all[copies_done : copies_done + m]
        copy_numbers = np.arange(copies_done, copies_done + m, dtype=np.int64)
        copies_done += m
        internal_idx = np.flatnonzero(~is_send)
        order = np.argsort(np.concatenate([rows_of_sends, internal_idx]), kind="stable")
        cat_ev = np.concatenate([ev[rows_of_sends], ev[internal_idx]])[order]
        cat_t = np.concatenate([times[rows_of_sends], times[internal_idx]])[order]
        cat_send = np.concatenate([np.ones(m, bool), np.zeros(len(internal_idx), bool)])[order]
        cat_dst = np.concatenate([dst, np.full(len(internal_idx), -1, np.int32)])[order]
        cat_arr = np.concatenate(
            [times[rows_of_sends] + latency, np.full(len(internal_idx), np.nan)]
        )[order]
        cat_lost = np.concatenate([lost, np.zeros(len(internal_idx), bool)])[order]
        cat_size = np.concatenate([size, np.zeros(len(internal_idx), np.int64)])[order]
        cat_copy = np.concatenate([copy_numbers, np.full(len(internal_idx), -1, np.int64)])[order]
        rows = len(cat_ev)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(np.full(rows, trace, np.int64)),
                pa.array(np.full(rows, process, np.int32)),
                pa.array(cat_ev),
                pa.array(cat_t),
                pa.array(cat_send),
                pa.array(cat_dst),
                pa.array(cat_arr),
                pa.array(cat_lost),
                pa.array(cat_size),
                pa.array(cat_copy),
            ],
            schema=SPONTANEOUS_SCHEMA,
        )


def _spontaneous(spark: SparkSession, spec: GeneratorSpec, tasks: int) -> DataFrame:
    shares = allot(spec)
    ids = spark.range(spec.traces * spec.processes, numPartitions=max(1, tasks))

    def kernel(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for unit in batch.column(0).to_pylist():
                trace, process = divmod(unit, spec.processes)
                yield from process_events(spec, trace, process, shares[process])

    return ids.mapInArrow(kernel, from_arrow_schema(SPONTANEOUS_SCHEMA))


def _names(width: int, prefix: str, column: str) -> Column:
    return F.concat(F.lit(prefix), F.lpad(F.col(column).cast("string"), width, "0"))


def generate_traces(
    spark: SparkSession, spec: GeneratorSpec, tasks: int | None = None
) -> DataFrame:
    """Simulated logs in the input format.

    Output columns: trace_id, process, seq, kind, msg_id, peer, ts, size_bytes.

    `tasks` sets how many tasks generate the spontaneous events (default: the
    session's default parallelism); it does not change the output.
    """
    spec.validate()
    parallel = tasks or int(spark.conf.get("spark.sql.shuffle.partitions") or 2)
    width = len(str(spec.processes - 1))
    spontaneous = _spontaneous(spark, spec, parallel)
    # a message is named by its sender and its copy number there
    named_sends = spontaneous.where("is_send")  # copies of sends, one row per message
    msg_id = F.concat(_names(width, "p", "process"), F.lit("-"), F.col("copy").cast("string"))
    is_send = F.col("is_send")
    spontaneous_rows = spontaneous.select(
        "trace",
        "process",
        "t",
        F.lit(0).alias("cls"),
        F.col("ev").alias("k1"),
        F.lit(0).cast("long").alias("k2"),
        F.when(is_send, F.lit(C.SEND)).otherwise(F.lit(C.INTERNAL)).alias(C.KIND),
        F.when(is_send, msg_id).alias(C.MSG_ID),
        F.when(is_send, F.col("dst")).alias("other"),
        F.when(is_send, F.col("size")).alias(C.SIZE_BYTES),
    )
    receive_rows = named_sends.where(~F.col("lost")).select(
        "trace",
        F.col("dst").alias("process"),
        F.col("arrival").alias("t"),
        F.lit(1).alias("cls"),
        F.col("process").cast("long").alias("k1"),
        F.col("copy").alias("k2"),
        F.lit(C.RECEIVE).alias(C.KIND),
        msg_id.alias(C.MSG_ID),
        F.col("process").alias("other"),
        F.col("size").alias(C.SIZE_BYTES),
    )
    rows = spontaneous_rows.unionByName(receive_rows)
    # receive order is arrival order: number each process's events by time;
    # the copies of one multicast share (t, cls, k1) and so one seq
    local = Window.partitionBy("trace", "process").orderBy("t", "cls", "k1", "k2")
    seq = F.dense_rank().over(local).cast("long")
    trace_width = max(5, len(str(spec.traces - 1)))
    return rows.select(
        F.concat(
            F.lit(f"gen{spec.seed}-"), F.lpad(F.col("trace").cast("string"), trace_width, "0")
        ).alias(C.TRACE_ID),
        _names(width, "p", "process").alias(C.PROCESS),
        seq.alias(C.SEQ),
        C.KIND,
        C.MSG_ID,
        F.when(F.col("other").isNotNull(), _names(width, "p", "other")).alias(C.PEER),
        F.col("t").alias(C.TS),
        C.SIZE_BYTES,
    )


def write_generated(traces: DataFrame, out: str, fmt: str, spec: GeneratorSpec) -> None:
    """Write generated rows sorted by (trace, process, seq), about 2M rows per file."""
    total_rows = spec.traces * spec.events * max(1, spec.fan_out)
    files = max(1, total_rows // 2_000_000 + (1 if total_rows % 2_000_000 else 0))
    ordered = traces.repartitionByRange(files, C.TRACE_ID, C.PROCESS, C.SEQ).sortWithinPartitions(
        C.TRACE_ID, C.PROCESS, C.SEQ, C.MSG_ID
    )
    writer = ordered.write.mode("overwrite")
    if fmt == "parquet":
        writer.parquet(out)
    elif fmt == "jsonl":
        writer.option("ignoreNullFields", "true").json(out)
    else:
        raise GeneratorError(f"--format must be parquet or jsonl, found {fmt}")
