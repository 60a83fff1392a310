"""Benchmark the detect stage against same-run baselines; write bench/detect.{json,md}.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/detect.py            # 10^5, 10^6, 10^7 events (about 20 minutes)
    .venv/bin/python bench/detect.py --quick    # 10^5 events only

Every case is a generated all-to-all trace of 64 processes with lognormal(0, 1)
latencies (the generator's default: violations and crowns abound). Its
`events` and `messages` tables are built once with Arrow and the clocks job
runs once (set-up). Then, in the same process:

- `spark clocks`: the clocks job again, timed: detection is held to costing
  less than the clocks of the same trace;
- `spark detect`: the detect job (Delta in: clocked events, messages,
  trace_clocks, quarantine; Delta out: violations, crowns, crown_members,
  trace_summary, with the witness crowns checked);
- `pairwise`: the brute-force check of every pair of messages to one
  destination with the vector clocks (m is overtaken iff an earlier-received
  m' has vc(send(m'))[src(m)] >= lseq(send(m))), NumPy, one core (it is
  quadratic); its overtaken messages must equal ours;
- `networkx`: strongly connected components of the contracted message graph
  with NetworkX; `crown kernel`: our kernel on the same messages (components
  and witness crowns), one core. Components must agree;
- `crowns per-trace` and `crowns distributed`: `find_crowns` alone through
  Spark (delivered messages in memory, crowns and members materialised) with
  one task per trace and with the slab method (the profile's
  `detect.slab_events`, witnesses checked against the vector clocks).
  Components must agree.

Pairwise and NetworkX run once at 10^7 events (pairwise about 6 minutes).

Times are medians of the repeats (1 at 10^7 events); memory is the peak RSS of
the process tree for Spark and of this process for the baselines.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import networkx as nx
import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from clocks import _generated, _read, build_tables
from run import measure

from causal_spark.anomalies import crown_kernel as K
from causal_spark.anomalies import delivered_messages, find_crowns
from causal_spark.app.runs import RunRecord, run_job
from causal_spark.app.session import build_session
from causal_spark.app.stages import clocks_stage, detect_stage
from causal_spark.config import DetectSettings, load_config
from causal_spark.generate import GeneratorSpec
from causal_spark.sinks import Warehouse

HERE = Path(__file__).resolve().parent
SCRATCH = HERE / "out" / "detect"


@dataclasses.dataclass
class Result:
    case: str
    impl: str
    events: int
    processes: int
    seconds: float
    peak_mb: float
    repeats: int
    run: str
    findings: int = 0  # overtaken messages (pairwise) or crown components (graphs)


def delivered(messages: pa.Table) -> pa.Table:
    return messages.filter(pc.equal(messages.column("status"), "delivered"))


def pairwise_overtaken(events: pa.Table, messages: pa.Table) -> int:
    """Messages overtaken by a causal chain, by checking every earlier-received message."""
    msgs = delivered(messages)
    n = int(pc.max(events.column("pidx")).as_py()) + 1
    # vc of every send event, looked up by (pidx, lseq)
    pidx = events.column("pidx").to_numpy().astype(np.int64)
    lseq = events.column("lseq").to_numpy().astype(np.int64)
    key = pidx * (int(lseq.max()) + 1) + lseq
    order = np.argsort(key)
    flat = pc.list_flatten(events.column("vc").combine_chunks()).to_numpy()
    vc = flat.reshape(len(events), n)
    src = msgs.column("src_pidx").to_numpy().astype(np.int64)
    dst = msgs.column("dst_pidx").to_numpy().astype(np.int64)
    send = msgs.column("send_lseq").to_numpy().astype(np.int64)
    recv = msgs.column("recv_lseq").to_numpy().astype(np.int64)
    send_rows = order[np.searchsorted(key[order], src * (int(lseq.max()) + 1) + send)]
    overtaken = 0
    for d in range(n):
        mine = np.flatnonzero(dst == d)
        mine = mine[np.argsort(recv[mine])]
        knows = vc[send_rows[mine]]  # what each message's send knew
        for j in range(1, len(mine)):
            m = mine[j]
            if np.any(knows[:j, src[m]] >= send[m]):
                overtaken += 1
    return overtaken


def networkx_crowns(messages: pa.Table) -> int:
    """Crown components: SCCs with two or more send events of the contracted graph."""
    msgs = delivered(messages)
    src = msgs.column("src_pidx").to_numpy().astype(np.int64)
    send = msgs.column("send_lseq").to_numpy().astype(np.int64)
    dst = msgs.column("dst_pidx").to_numpy().astype(np.int64)
    recv = msgs.column("recv_lseq").to_numpy().astype(np.int64)
    node = src * (int(max(send.max(), recv.max())) + 1) + send
    proc = np.concatenate([src, dst])
    at = np.concatenate([send, recv])
    nodes = np.concatenate([node, node])
    order = np.lexsort((at, proc))
    proc, nodes = proc[order], nodes[order]
    keep = (proc[1:] == proc[:-1]) & (nodes[1:] != nodes[:-1])
    graph = nx.DiGraph()
    graph.add_nodes_from(np.unique(node).tolist())
    graph.add_edges_from(zip(nodes[:-1][keep].tolist(), nodes[1:][keep].tolist(), strict=True))
    return sum(1 for c in nx.strongly_connected_components(graph) if len(c) > 1)


def kernel_crowns(messages: pa.Table, budget: int) -> int:
    msgs = delivered(messages)
    src = msgs.column("src_pidx").to_numpy()
    dst = msgs.column("dst_pidx").to_numpy()
    n = int(max(src.max(), dst.max())) + 1
    found = K.crown_components(
        n, src, msgs.column("send_lseq").to_numpy(), dst, msgs.column("recv_lseq").to_numpy(),
        budget,
    )  # fmt: skip
    return found.n_components


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10^5 events only")
    parser.add_argument("--only", default=None, help="comma-separated case names to run")
    args = parser.parse_args()
    sizes = [100_000] if args.quick else [100_000, 1_000_000, 10_000_000]
    cases = [(f"all_to_all-{e}-64", GeneratorSpec(processes=64, events=e, seed=7)) for e in sizes]
    if args.only:
        cases = [c for c in cases if c[0] in set(args.only.split(","))]

    config = load_config()  # the embedded local profile, as users run it
    spark = build_session(config.spark)
    started = datetime.now(UTC).isoformat(timespec="minutes")
    results: list[Result] = []

    def record(case: str, impl: str, events: int, fn: Callable[[], object], repeats: int,
               tree: bool, findings: int = 0) -> None:  # fmt: skip
        seconds, peak = measure(fn, repeats, tree)
        results.append(Result(case, impl, events, 64, seconds, peak, repeats, started, findings))
        save(results)
        print(f"{case:24} {impl:14} {seconds:9.2f} s  peak {peak:8.0f} MB", flush=True)

    for case, spec in cases:
        folder = SCRATCH / case
        shutil.rmtree(folder, ignore_errors=True)
        warehouse_dir = folder / "warehouse"
        warehouse_dir.mkdir(parents=True)
        events = build_tables(_generated(spec)(), warehouse_dir)
        warehouse = Warehouse(spark, warehouse_dir, "deltalake")
        repeats = 3 if events <= 1_000_000 else 1

        def job(command: str) -> RunRecord:
            stage = clocks_stage() if command == "clocks" else detect_stage()
            return run_job(command, [stage], spark=spark, config=config, warehouse=warehouse)

        job("clocks")  # set-up: the quarantine table is empty for generated traces
        _empty_quarantine(warehouse_dir)
        record(case, "spark clocks", events, lambda: job("clocks"), repeats, tree=True)
        record(case, "spark detect", events, lambda: job("detect"), repeats, tree=True)
        summary = _read(warehouse_dir / "violations")
        ours = int(pc.sum(pc.equal(summary.column("kind"), "causal")).as_py() or 0)
        crowns = _read(warehouse_dir / "crowns").num_rows
        print(f"{case}: {ours} causal violation rows, {crowns} crown components", flush=True)
        budget = config.detect.crown_search_budget
        clocked = warehouse.read("events")
        delivered = delivered_messages(warehouse.read("messages"), warehouse.read("trace_clocks"))
        shapes: dict[str, list[tuple[int, int]]] = {}
        for impl, engine in (("crowns per-trace", "per_trace"), ("crowns distributed", "distributed")):
            settings = replace(config.detect, crown_engine=engine)

            def solve(settings: DetectSettings = settings, impl: str = impl) -> None:
                found = find_crowns(delivered, budget, events=clocked, settings=settings)
                found.crowns.write.format("noop").mode("overwrite").save()
                found.members.write.format("noop").mode("overwrite").save()
                shapes[impl] = sorted((r.scc_id, r.scc_size) for r in found.crowns.collect())

            record(case, impl, events, solve, repeats, tree=True, findings=crowns)
        assert shapes["crowns per-trace"] == shapes["crowns distributed"], shapes
        assert len(shapes["crowns distributed"]) == crowns
        messages = _read(warehouse_dir / "messages")

        held = {"events": _read(warehouse_dir / "events")}  # read outside the timing
        found_pairwise: dict[str, int] = {}
        record(case, "pairwise", events,
               lambda: found_pairwise.update(n=pairwise_overtaken(held["events"], messages)),
               1, tree=False, findings=ours)  # fmt: skip
        held.clear()  # the events' vectors: gigabytes at 10^7
        theirs = found_pairwise["n"]
        assert theirs == ours, f"pairwise {theirs} overtaken messages, detect {ours}"
        found_networkx: dict[str, int] = {}
        record(case, "networkx", events,
               lambda: found_networkx.update(n=networkx_crowns(messages)), 1, tree=False,
               findings=crowns)  # fmt: skip
        assert found_networkx["n"] == kernel_crowns(messages, budget) == crowns
        record(case, "crown kernel", events, lambda: kernel_crowns(messages, budget), repeats,
               tree=False, findings=crowns)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
    spark.stop()
    save(results)
    print(f"wrote {HERE / 'detect.md'}")
    return 0


def _empty_quarantine(warehouse: Path) -> None:
    from deltalake import write_deltalake

    from causal_spark import tables

    schema = tables.arrow_schema(tables.QUARANTINE)
    write_deltalake(str(warehouse / "quarantine"), schema.empty_table(), mode="overwrite")


def save(results: list[Result]) -> None:
    """Write this run's results, keeping earlier runs' results for cases not re-run here."""
    path = HERE / "detect.json"
    earlier = json.loads(path.read_text())["results"] if path.exists() else []
    mine = {(r.case, r.impl) for r in results}
    merged = [r for r in earlier if (r["case"], r["impl"]) not in mine]
    merged += [dataclasses.asdict(r) for r in results]
    payload = {
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}",
        "results": merged,
    }
    path.write_text(json.dumps(payload, indent=1) + "\n")
    (HERE / "detect.md").write_text(render(payload))


def render(payload: dict) -> str:
    by_case: dict[str, dict[str, dict]] = {}
    for r in payload["results"]:
        by_case.setdefault(r["case"], {})[r["impl"]] = r

    def sec(case: dict, impl: str) -> str:
        return f"{case[impl]['seconds']:.2f}" if impl in case else "-"

    def peak(case: dict, impl: str) -> str:
        return f"{case[impl]['peak_mb']:.0f}" if impl in case else "-"

    def ratio(case: dict, a: str, b: str) -> str:
        if a in case and b in case:
            return f"{case[a]['seconds'] / case[b]['seconds']:.2f}"
        return "-"

    lines = [
        "# Detect benchmark",
        "",
        f"On {payload['machine']}, by `bench/detect.py`. Medians (3 repeats up to 10^6",
        "events, 1 above). Ratios are same-run. `detect / clocks` below 1: detection",
        "costs less than the clocks of the same trace. `pairwise / detect` and",
        "`networkx / kernel` above 1: ours is faster. `distributed / per-trace`: the",
        "slab method's time for the crowns over one task per trace's (both through",
        "Spark, crowns and members materialised, same delivered messages).",
        "",
        "| run | case | events | spark clocks s | spark detect s | detect / clocks | "
        "pairwise s | pairwise / detect | networkx s | crown kernel s | networkx / kernel | "
        "crowns per-trace s | crowns distributed s | distributed / per-trace | "
        "overtaken | crown sccs | detect peak MB | distributed peak MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        "---:|",
    ]
    for name, case in sorted(by_case.items(), key=lambda kv: next(iter(kv[1].values()))["events"]):
        first = next(iter(case.values()))
        lines.append(
            f"| {first['run'][:16]} | {name} | {first['events']:,} | {sec(case, 'spark clocks')} | "
            f"{sec(case, 'spark detect')} | {ratio(case, 'spark detect', 'spark clocks')} | "
            f"{sec(case, 'pairwise')} | {ratio(case, 'pairwise', 'spark detect')} | "
            f"{sec(case, 'networkx')} | {sec(case, 'crown kernel')} | "
            f"{ratio(case, 'networkx', 'crown kernel')} | "
            f"{sec(case, 'crowns per-trace')} | {sec(case, 'crowns distributed')} | "
            f"{ratio(case, 'crowns distributed', 'crowns per-trace')} | "
            f"{case.get('pairwise', {}).get('findings', '-')} | "
            f"{case.get('networkx', {}).get('findings', '-')} | "
            f"{case['spark detect']['peak_mb']:.0f} | "
            f"{peak(case, 'crowns distributed')} |"
            if "spark detect" in case
            else f"| {first['run'][:16]} | {name} | {first['events']:,} | incomplete |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
