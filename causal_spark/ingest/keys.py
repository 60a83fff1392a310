"""Names shared by the steps of ingest: kind aliases, the reference marker, one detail."""

from __future__ import annotations

from causal_spark import columns as C
from causal_spark.ingest.rows_kernel import MISSING_SEQ, REF

__all__ = ["KIND_ALIASES", "MISSING_SEQ", "REF", "IngestError"]

KIND_ALIASES: dict[str, str] = {
    "send": C.SEND,
    "snd": C.SEND,
    "receive": C.RECEIVE,
    "recv": C.RECEIVE,
    "rcv": C.RECEIVE,
    "deliver": C.RECEIVE,
    "internal": C.INTERNAL,
    "local": C.INTERNAL,
}


class IngestError(ValueError):
    """The raw rows do not have the columns ingest needs, or the rules did not settle."""
