"""The ShiViz kernel (`io.readers.shiviz_kernel`) on random logs, against two references:
ShiViz's own inference (`tests.reference_readers.shiviz_reference`, no Spark) on valid
logs, its messages and every row they become (`shiviz_rows`), and the Spark clock checks the tracing reader uses (`io.readers.clocks.check_clocks`)
on logs broken at random. The seed of a failing log is in the assertion message."""

from __future__ import annotations

import json
import random
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from causal_spark.io.readers.clocks import CLOCK_ERROR, check_clocks, clock_counts
from causal_spark.io.readers.shiviz_kernel import CLOCK_ARROW, RECORD_FIELDS, infer_rows
from tests.reference_readers import shiviz_reference, shiviz_rows


def _execution(
    rng: random.Random, multicast: bool = False
) -> list[tuple[str, dict[str, int], str]]:
    """A random run of message passing as ShiViz records: (host, clock, event) in an
    order that respects happened-before. `multicast`: a send may go to several hosts and
    an event may take several messages at once (ShiViz then drops the candidates that
    another one knows of)."""
    hosts = [f"h{i}" for i in range(rng.randint(2, 6 if multicast else 5))]
    clocks = {h: {h: 0} for h in hosts}
    in_flight: list[tuple[str, dict[str, int]]] = []
    records = []
    for _ in range(rng.randint(1, 40 if multicast else 30)):
        host = rng.choice(hosts)
        clock = dict(clocks[host])
        arriving = [m for m in in_flight if m[0] == host]
        if arriving and rng.random() < 0.6:
            k = rng.randint(1, min(3, len(arriving))) if multicast else 0
            taken = rng.sample(arriving, k) if multicast else [rng.choice(arriving)]
            for message in taken:
                in_flight.remove(message)
                for q, n in message[1].items():
                    clock[q] = max(clock.get(q, 0), n)
            what = "receive"
        else:
            what = "send" if rng.random() < 0.7 else "internal"
        clock[host] += 1
        clocks[host] = clock
        if what == "send" or (multicast and rng.random() < 0.4):
            others = [h for h in hosts if h != host]
            k = rng.randint(1, len(others)) if multicast else 0
            for to in rng.sample(others, k) if multicast else [rng.choice(others)]:
                in_flight.append((to, dict(clock)))
        records.append((host, {q: n for q, n in clock.items() if n}, what))
    return records


def _text(records: list[tuple[str, dict[str, int], str]]) -> str:
    return "".join(f"{h} {json.dumps(c)}\n{what}\n" for h, c, what in records)


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    types = {"line": pa.int64(), "record": pa.int64(), "execution": pa.int64()}
    columns = {
        name: pa.array(
            [r.get(name) for r in rows],
            CLOCK_ARROW if name == "clock" else types.get(name, pa.string()),
        )
        for name in RECORD_FIELDS
    }
    return pa.table(columns)


def _records(source: str, text: str) -> list[dict[str, Any]]:
    """The reader's records of a log in the default format (two lines each)."""
    lines = text.splitlines()
    rows = []
    for k in range(0, len(lines) - 1, 2):
        host, clock_text = lines[k].split(" ", 1)
        counts = clock_counts(clock_text)
        rows.append(
            {
                "source": source,
                "line": k + 1,
                "record": 1,
                "raw": lines[k],
                "host": host,
                "clock_text": clock_text,
                "clock": None if counts is None else list(counts.items()),
                "label": lines[k + 1],
                "execution": 0,
            }
        )
    return rows


def _messages(rows: list[dict[str, Any]]) -> set[tuple[str, int, str, int]]:
    sends = {r["msg_id"]: r for r in rows if r["kind"] == "send"}
    return {
        (sends[r["msg_id"]]["process"], int(sends[r["msg_id"]]["seq"]), r["process"], int(r["seq"]))
        for r in rows
        if r["kind"] == "receive" and r["msg_id"] in sends
    }


def test_inference_is_shivizs_on_random_logs() -> None:
    for seed in range(300):
        text = _text(_execution(random.Random(seed)))
        rows = infer_rows(_table(_records("x.log", text))).to_pylist()
        assert all(r["parse_error"] is None for r in rows), seed
        _, expected = shiviz_reference(text)
        assert _messages(rows) == expected, seed


@pytest.mark.parametrize("multicast", [False, True], ids=["unicast", "multicast"])
def test_rows_are_shivizs_messages_laid_out_on_random_logs(multicast: bool) -> None:
    """Every row, in order: the kernel against ShiViz's messages laid out as DESIGN §1b
    says (`shiviz_rows`), on random logs where events receive several messages at once
    and send to several hosts."""
    kinds: set[str] = set()
    for seed in range(300):
        text = _text(_execution(random.Random(seed), multicast))
        records = _records("x.log", text)
        rows = infer_rows(_table(records)).to_pylist()
        label = {r["line"]: r["label"] for r in records}
        clock = {r["line"]: r["clock"] for r in records}
        got = [
            (r["line"], r["process"], int(r["seq"]), r["sub"], r["kind"], r["msg_id"], r["peer"],
             r["label"] is not None, r["recorded_vc"] is not None)
            for r in rows
        ]  # fmt: skip
        assert got == shiviz_rows(text), seed
        assert all(r["label"] in (None, label[r["line"]]) for r in rows), seed
        assert all(r["recorded_vc"] in (None, clock[r["line"]]) for r in rows), seed
        kinds |= {f"{r['kind']}@{r['sub']}" for r in rows}
    # the logs reach several receives and sends in one logged event
    assert {"receive@1", "send@1", "send@2"} <= kinds if multicast else "receive@0" in kinds


def _broken(rng: random.Random, records: list[tuple[str, dict[str, int], str]]) -> str:
    """A log of `records` with some records lost, repeated, renumbered or garbled."""
    out = []
    for host, clock, what in records:
        roll = rng.random()
        if roll < 0.08:
            continue  # lost
        clock = dict(clock)
        if roll < 0.16:
            clock[host] += rng.choice([-1, 1, 2])  # renumbered (0 is no own entry)
        elif roll < 0.22:
            clock[rng.choice(["zz", host])] = rng.randint(0, 40)  # an unknown host, or beyond
        elif roll < 0.26:
            out.append(f"{host} {{not json\n{what}\n")
            continue
        line = f"{host} {json.dumps(clock)}\n{what}\n"
        out.append(line)
        if rng.random() < 0.05:
            out.append(line)  # repeated
    rng.shuffle(out)  # ShiViz takes a host's records by their own entries, not file order
    return "".join(out)


def test_the_clock_checks_are_the_spark_ones_on_random_broken_logs(spark: SparkSession) -> None:
    logs = {
        f"log{seed}": _broken(random.Random(seed), _execution(random.Random(seed)))
        for seed in range(120)
    }
    rows = [r for source, text in logs.items() for r in _records(source, text)]
    # the kernel, one log at a time (a file is one task)
    ours = {}
    for source in logs:
        table = _table([r for r in rows if r["source"] == source])
        for r in infer_rows(table).to_pylist():
            if r["parse_reason"] == "bad_clock":
                ours[(source, r["line"])] = r["parse_error"]
    # the tracing reader's Spark checks on the same records
    frame = spark.createDataFrame(
        [(r["source"], 0, r["host"], r["line"], r["record"], r["clock_text"]) for r in rows],
        "source string, execution long, host string, line long, record long, clock_text string",
    )
    checked = check_clocks(frame, ("source", "execution"), "host", ("line", "record"), "clock_text")
    theirs = {
        (r["source"], r["line"]): r[CLOCK_ERROR]
        for r in checked.where(F.col(CLOCK_ERROR).isNotNull()).collect()
    }
    assert len(theirs) > 100  # the logs are broken in every way the checks know
    wrong = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
    assert not wrong, [(k, ours.get(k), theirs.get(k)) for k in wrong[:5]]


def test_plain_clocks_parse_as_json_does() -> None:
    """`clock_counts` reads a plain clock (plain keys, integer counts) with a regex; on
    random texts near that form it gives what the JSON parse gives, and `clock_array`
    (the reader's bulk parse, in Arrow) gives what `clock_counts` gives."""
    from causal_spark.io.readers import clocks

    def by_json(text: str) -> dict[str, int] | None:
        found = clocks._counts(text)
        return found if found is not None else clocks._counts(text.replace('\\"', '"'))

    rng = random.Random(11)
    pieces = ['"a"', '"b"', '"é"', '"a\\"b"', '\\"a\\"', '"\x01"', ":", ",", " ", "\n", "0",
              "7", "01", "1.0", "1e2", '"3"', "-1", str(1 << 63), str((1 << 63) - 1), "true"]  # fmt: skip
    fast = 0
    texts: list[str | None] = [None]
    for _ in range(3000):
        body = [rng.choice(pieces) for _ in range(rng.randint(0, 7))]
        if rng.random() < 0.7:  # mostly key:value pairs
            pairs = [f"{rng.choice(pieces[:6])}:{rng.choice(pieces[10:])}" for _ in range(3)]
            body = [",".join(pairs[: rng.randint(0, 3)])]
        text = "{" + "".join(body) + "}"
        fast += clocks._plain_counts(text) is not False
        assert clocks.clock_counts(text) == by_json(text), text
        texts.append(text)
    assert fast > 500
    one_by_one = [clocks.clock_counts(t) for t in texts]
    bulk = clocks.clock_array(pa.array(texts, pa.string())).to_pylist()
    wrong = [
        (t, got, want)
        for t, got, want in zip(texts, bulk, one_by_one, strict=True)
        if got != (None if want is None else list(want.items()))
    ]
    assert not wrong, wrong[:5]
