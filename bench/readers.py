"""What reading a native log costs: the real ingest job on a ShiViz log and an OTLP file
against the same events in our row format (issue 18: within 2x).

    flock /tmp/causal-heavy.lock .venv/bin/python bench/readers.py \
        --events 1000000 --repeats 3 --out bench/readers.md

Four inputs, made once (not timed; with `--reuse`, those an earlier run of the same sizes
left in `--work`) from `causal-spark generate` output (one trace, `--processes`
processes, `--events` events):

- `rows-shiviz`: the generated rows, JSON lines (our row format);
- `shiviz`: the same trace as a ShiViz log, as `causal-spark export --format shiviz`
  writes it after an audit of the rows (one event per record, its vector clock; the
  reader infers the messages back from the clocks);
- `otlp`: one OTLP span per generated event, JSON lines of `ExportTraceServiceRequest`s
  (`--spans-per-line` spans of one service each): a send is a PRODUCER span, a receive a
  CONSUMER span whose parent is its message's PRODUCER, an internal event an INTERNAL
  span; start = end = the event's time;
- `rows-otlp`: the events the OTLP reader makes of that file (a span's start, then its
  end), in our row format.

Each input is ingested `--repeats` times, in turn, by `causal-spark ingest` into a fresh
warehouse, all in one Spark session (the test profile: local[2]) after an untimed
ingest of data-samples/; the table has each one's median and the ratio of each native
format to its row-format twin.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
from pyspark.sql import SparkSession

from causal_spark.app.cli import main as cli_main
from causal_spark.app.cli import run as run_cli
from causal_spark.app.session import build_session
from causal_spark.config import load_config
from causal_spark.generate import GeneratorSpec, generate_traces, write_generated

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "conf" / "test.yml"
# OTLP span kinds (trace.proto, SpanKind)
INTERNAL, PRODUCER, CONSUMER = 1, 4, 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--spans-per-line", type=int, default=1000)
    parser.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="take the inputs an earlier run made in --work with the same sizes (not remade)",
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "readers.md"))
    args = parser.parse_args()

    config = load_config(PROFILE)
    spark = build_session(config.spark)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-readers-"))
    spec = GeneratorSpec(processes=args.processes, events=args.events, seed=7).validate()
    began = time.perf_counter()
    stamp = work / "inputs.json"
    made_for = json.dumps(
        {"events": spec.events, "processes": spec.processes, "spans_per_line": args.spans_per_line}
    )
    if args.reuse and stamp.exists() and stamp.read_text() == made_for:
        inputs = _input_paths(work)
        print(f"inputs of an earlier run reused: {made_for}", flush=True)
    else:
        inputs = _make_inputs(spark, spec, work, args.spans_per_line)
        stamp.write_text(made_for)
        print(f"inputs made in {time.perf_counter() - began:.0f} s", flush=True)

    def ingest(name: str, path: Path, fmt: str) -> tuple[float, dict[str, int]]:
        warehouse = work / f"wh-{name}"
        shutil.rmtree(warehouse, ignore_errors=True)
        argv = ["ingest", str(path), "--warehouse", str(warehouse), "--conf", str(PROFILE)]
        began = time.perf_counter()
        record = run_cli([*argv, "--format", fmt], session=spark)
        seconds = time.perf_counter() - began
        shutil.rmtree(warehouse)
        return seconds, record.counts

    ingest("warm-up", ROOT / "data-samples", "events")  # JVM, Python workers: not timed
    times: dict[str, list[float]] = {name: [] for name in inputs}
    counts: dict[str, dict[str, int]] = {}
    for repeat in range(args.repeats):
        for name, (path, fmt) in inputs.items():
            seconds, counts[name] = ingest(name, path, fmt)
            times[name].append(seconds)
            print(json.dumps({"repeat": repeat + 1, "input": name, "s": round(seconds, 2)}))
    spark.stop()
    _write(args, spec, inputs, times, counts)


def _make_inputs(
    spark: SparkSession, spec: GeneratorSpec, work: Path, spans_per_line: int
) -> dict[str, tuple[Path, str]]:
    rows_dir = work / "rows-shiviz"
    write_generated(generate_traces(spark, spec), str(rows_dir), "jsonl", spec)
    rows = ds.dataset(str(rows_dir), format="json").to_table().to_pylist()
    # the ShiViz log: export of the rows' trace after an audit that computes its clocks
    audited = work / "wh-export"
    run_cli(
        ["audit", str(rows_dir), "--warehouse", str(audited), "--conf", str(PROFILE),
         "--protocols", "none"],
        session=spark,
    )  # fmt: skip
    shiviz = work / "shiviz.log"
    trace = rows[0]["trace_id"]
    exported = cli_main(
        ["export", "--warehouse", str(audited), "--trace", trace, "--format", "shiviz",
         "--out", str(shiviz), "--conf", str(PROFILE)],
        spark,
    )  # fmt: skip
    if exported != 0:
        raise SystemExit(f"export of trace {trace} failed")
    shutil.rmtree(audited)
    otlp = work / "otlp.jsonl"
    twin = work / "rows-otlp.jsonl"
    with otlp.open("w") as spans_out, twin.open("w") as rows_out:
        for line in _otlp_lines(rows, spans_per_line):
            spans_out.write(line + "\n")
        for row in _otlp_twin(rows):
            rows_out.write(json.dumps(row) + "\n")
    return _input_paths(work)


def _input_paths(work: Path) -> dict[str, tuple[Path, str]]:
    return {
        "rows-shiviz": (work / "rows-shiviz", "events"),
        "shiviz": (work / "shiviz.log", "shiviz"),
        "rows-otlp": (work / "rows-otlp.jsonl", "events"),
        "otlp": (work / "otlp.jsonl", "otlp"),
    }


def _events(rows: list[dict[str, Any]]) -> list[tuple[str, int, list[dict[str, Any]]]]:
    """(process, seq, its rows) per event, by process then seq (a multicast is one)."""
    by_event: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        by_event.setdefault((row["process"], int(row["seq"])), []).append(row)
    return [(p, s, by_event[(p, s)]) for p, s in sorted(by_event)]


def _span_ids(rows: list[dict[str, Any]]) -> dict[tuple[str, int], str]:
    return {(p, s): f"{i + 1:016x}" for i, (p, s, _) in enumerate(_events(rows))}


def _trace_id(rows: list[dict[str, Any]]) -> str:
    return hashlib.md5(str(rows[0]["trace_id"]).encode()).hexdigest()


def _otlp_lines(rows: list[dict[str, Any]], per_line: int) -> Iterator[str]:
    ids = _span_ids(rows)
    sender = {r["msg_id"]: (r["process"], int(r["seq"])) for r in rows if r["kind"] == "send"}
    trace = _trace_id(rows)
    batch: list[dict[str, Any]] = []
    service = None
    for process, seq, event_rows in _events(rows):
        if batch and (process != service or len(batch) == per_line):
            yield _request(service, batch)
            batch = []
        service = process
        kind = event_rows[0]["kind"]
        nanos = str(round(float(event_rows[0]["ts"]) * 1e9))
        span: dict[str, Any] = {
            "traceId": trace,
            "spanId": ids[(process, seq)],
            "name": kind,
            "kind": {"send": PRODUCER, "receive": CONSUMER}.get(kind, INTERNAL),
            "startTimeUnixNano": nanos,
            "endTimeUnixNano": nanos,
        }
        if kind == "receive" and event_rows[0]["msg_id"] in sender:
            span["parentSpanId"] = ids[sender[event_rows[0]["msg_id"]]]
        batch.append(span)
    if batch:
        yield _request(service, batch)


def _request(service: str | None, spans: list[dict[str, Any]]) -> str:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    scope = {"scope": {"name": "bench"}, "spans": spans}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]})


def _otlp_twin(rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The events the OTLP reader makes of `_otlp_lines`' spans, as our rows: per span its
    start (the event's send or receive, message `<consumer span id>:msg`) then its end."""
    ids = _span_ids(rows)
    receiver = {r["msg_id"]: (r["process"], int(r["seq"])) for r in rows if r["kind"] == "receive"}
    trace = _trace_id(rows)
    for process, seq, event_rows in _events(rows):
        kind, ts = event_rows[0]["kind"], event_rows[0]["ts"]
        base = {"trace_id": trace, "process": process, "ts": ts}
        if kind == "send":
            for r in event_rows:
                if r["msg_id"] in receiver:  # a lost message has no consumer span
                    msg = f"{ids[receiver[r['msg_id']]]}:msg"
                    yield base | {"seq": 2 * seq - 1, "kind": "send", "msg_id": msg,
                                  "peer": r["peer"]}  # fmt: skip
            if not any(r["msg_id"] in receiver for r in event_rows):
                yield base | {"seq": 2 * seq - 1, "kind": "internal"}
        elif kind == "receive":
            msg = f"{ids[(process, seq)]}:msg"
            yield base | {"seq": 2 * seq - 1, "kind": "receive", "msg_id": msg,
                          "peer": event_rows[0]["peer"]}  # fmt: skip
        else:
            yield base | {"seq": 2 * seq - 1, "kind": "internal"}
        yield base | {"seq": 2 * seq, "kind": "internal"}


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def _write(
    args: argparse.Namespace,
    spec: GeneratorSpec,
    inputs: dict[str, tuple[Path, str]],
    times: dict[str, list[float]],
    counts: dict[str, dict[str, int]],
) -> None:
    median = {name: statistics.median(t) for name, t in times.items()}
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Reading native formats: ingest of a ShiViz log and an OTLP file",
        "",
        f"Run of {now} at commit {_commit()}, `bench/readers.py --events {spec.events} "
        f"--processes {spec.processes} --repeats {args.repeats} --spans-per-line "
        f"{args.spans_per_line}` (one local[2] session, the test profile; shared machine).",
        "",
        "| input | format | MB | rows read | events | quarantined | ingest s (each) | median s |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for name, (path, fmt) in inputs.items():
        size = sum(f.stat().st_size for f in ([path] if path.is_file() else path.rglob("*")))
        c = counts[name]
        events = c.get("internal_events", 0) + c.get("send_events", 0) + c.get("receive_events", 0)
        each = ", ".join(f"{t:.1f}" for t in times[name])
        lines.append(
            f"| {name} | {fmt} | {size / 1e6:.0f} | {c.get('rows_read', 0)} | {events} | "
            f"{c.get('quarantine', 0)} | {each} | {median[name]:.1f} |"
        )
    lines += [
        "",
        f"ShiViz / its rows: **{median['shiviz'] / median['rows-shiviz']:.2f}x**; "
        f"OTLP / its rows: **{median['otlp'] / median['rows-otlp']:.2f}x** (medians).",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
