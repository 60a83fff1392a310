"""Adversarial JSON Lines files, shared by the kernel tests and the golden generator.

Each case is (name, bytes of one file). `tests/data/jsonl_cases/golden.json` holds the
rows Spark's own JSON Lines read (the reader before the jsonl kernel: `from_json`,
`json_object_keys`, the text source) gave for them; `python -m tests.jsonl_cases` writes
it again (it needs Spark and the old reader, `events.JsonLinesReader._read_spark`).
"""

from __future__ import annotations

import base64
import gzip
import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "data" / "jsonl_cases" / "golden.json"

_GOOD = b'{"trace_id":"t","process":"p","seq":1,"kind":"send","msg_id":"m","peer":"q","ts":0.25,"size_bytes":3,"label":"x"}'

LINES: list[bytes] = [
    _GOOD,
    b'{"process":"a","seq":1,"kind":"internal"}',
    b'  {"process" : "a" , "seq" : 2 , "kind" : "internal" }  ',
    b'\t{"process":"a","seq":2}\t',
    b'{"process":"a","seq":-0,"ts":1.50,"size_bytes":1e3}',
    b'{"process":"a","seq":1E+3,"ts":-0.0,"size_bytes":12345678901234567890123}',
    b'{"process":"a","seq":0.1e-7,"ts":1.0E10,"size_bytes":2.5}',
    b'{"process":"a","seq":01}',
    b'{"process":"a","ts":NaN}',
    b'{"process":"a","ts":Infinity}',
    b'{"process":"a","ts":-Infinity}',
    b'{"process":"a","seq":true,"kind":false,"peer":null}',
    b'{"process":"a","label":{"x": [1, 2 ,{"y":"z"}], "w" : null }}',
    b'{"process":"a","label":[ 1,"two" , 3.0 ]}',
    b'{"process":"a","label":{}}',
    b'{"process":"a","label":[]}',
    b'{"process":"\\u00e9\\u0041\\/\\n\\t\\"\\\\","label":"\\ud83d\\ude00"}',
    b'{"process":"a","label":"\\ud800"}',
    b'{"process":"a","label":"\\udc00x"}',
    '{"process":"\u00e9\u4e2d\U0001f600","label":"caf\u00e9"}'.encode(),
    b'{"process":"a","process":"b"}',
    b'{"process":"a","proc\\u0065ss":"b"}',
    b'{"process":"a","other":1,"other":2}',
    b'{"Process":"A","SEQ":1}',
    b'{"process":"a"}{"process":"b"}',
    b'{"process":"a"},{"process":"b"}',
    b'{"process":"a"} x',
    b'{"process":"a"} // c',
    b'{"process":"a",}',
    b'{"process":"a"',
    b'{"process":"a"}}',
    b'{"process":"a"}]',
    b'[{"process":"a"}]',
    b'[]',
    b'"x"',
    b'3',
    b'null',
    b'{}',
    b"{'process':'a'}",
    b'{process:"a"}',
    b'{"process":"a\tb"}',
    b'{"process":"a\x01b"}',
    b'{"label":"a\x7fb","process":"a"}',
    b'{"process":"a\xffb"}',
    b'{"process":"a","label":"\xc3"}',
    b'\xef\xbb\xbf{"process":"bom"}',
    b'{"process":"a","seq":"12","ts":"2024-01-01T00:00:00Z","size_bytes":" 7 "}',
    b'{"process":"","seq":"","kind":" "}',
    b'{"process":"a","label":"' + b"y" * 5000 + b'"}',
    b'{"process":"a","trace_id":"t\\u0000x"}',
    b'{"process":"a","seq":1} ',
    b'{"process":"a","seq":1}\x00',
    b'{"process":"a","seq":1e400,"ts":1e-400}',
    b'{"process":"a","seq":-12,"ts":-7,"size_bytes":0}',
    b'{"process":"a","label":"seq","seq":4}',
    b'{"process":"a","label":{"seq":1,"seq":2},"seq":5}',
    b'{"process":"a","x":{"process":"b"}}',
    b'{"process":"a","\\"":1}',
    b'{"":1,"process":"a"}',
    b'{"process":"a","seq":1}garbage',
    b'{"process":"a", "seq":1 }  {"x":2}',
    b'{"process":"a","seq":[1,2],"peer":{"a":"b"}}',
]


def _lines_file(lines: list[bytes], end: bytes = b"\n", last: bool = True) -> bytes:
    return end.join(lines) + (end if last else b"")


CASES: list[tuple[str, bytes]] = [
    *[(f"line-{i:02d}", line + b"\n") for i, line in enumerate(LINES)],
    ("lines", _lines_file(LINES)),
    ("no-final-newline", _lines_file(LINES[:3], last=False)),
    ("blank-lines", b'\n\n{"process":"a","seq":1}\n   \n\n{"process":"a","seq":2}\n \n'),
    ("crlf", _lines_file(LINES[:6], b"\r\n")),
    ("cr", _lines_file(LINES[:4], b"\r")),
    ("mixed-ends", b'{"process":"a"}\r\n{"process":"b"}\r{"process":"c"}\n\r\n\r{"process":"d"}\r'),
    ("bom-first", b'\xef\xbb\xbf{"process":"a","seq":1}\n{"process":"a","seq":2}\n'),
    ("empty", b""),
    ("only-newlines", b"\n\n\n"),
    ("one-line", b'{"process":"a","seq":1}'),
]

GZ_CASES: list[tuple[str, bytes]] = [
    ("gzip", gzip.compress(_lines_file(LINES[:10]), mtime=0)),
]


def write_golden() -> None:  # pragma: no cover - regenerates the data file
    """Read every case with the Spark reader and write the rows to GOLDEN."""
    import tempfile

    from pyspark.sql import functions as F

    from causal_spark.app.session import build_session
    from causal_spark.config import IngestSettings, load_config
    from causal_spark.io.raw import RAW_COLUMNS
    from causal_spark.io.readers.events import JsonLinesReader
    from causal_spark.io.sources import discover_inputs

    spark = build_session(load_config(None).spark)
    out: dict[str, list[dict[str, object]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in [*CASES, *GZ_CASES]:
            ext = ".jsonl.gz" if name in dict(GZ_CASES) else ".jsonl"
            path = Path(tmp) / name / f"case{ext}"
            path.parent.mkdir()
            path.write_bytes(data)
            files = discover_inputs([str(path)], IngestSettings()).files
            frame = JsonLinesReader()._read_spark(spark, list(files))
            # strings as base64 of their bytes: a line that is not UTF-8 keeps them
            exact = frame.select(
                *[
                    F.base64(F.col(f.name).cast("binary")).alias(f.name)
                    if f.dataType.simpleString() == "string"
                    else F.col(f.name)
                    for f in frame.schema.fields
                ]
            )
            try:
                got = exact.orderBy("line").collect()
            except Exception as e:  # the old reader fails on some lines: say which
                out[name] = [{"error": str(e).splitlines()[0]}]
                continue
            # Spark's base64 breaks lines: written again in one line
            out[name] = [
                {
                    k: base64.b64encode(base64.b64decode(row[k])).decode()
                    if isinstance(row[k], str)
                    else row[k]
                    for k in RAW_COLUMNS
                    if row[k] is not None
                }
                for row in got
            ]
    GOLDEN.write_text(json.dumps(out, indent=1, ensure_ascii=True) + "\n")
    spark.stop()


if __name__ == "__main__":  # pragma: no cover
    write_golden()
    sys.exit(0)
