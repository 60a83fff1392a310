"""Names shared by the steps of ingest: kind aliases, the reference marker, one detail."""

from __future__ import annotations

from causal_spark import columns as C

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


# a detail that points at another row says where it is with this placeholder
REF = "\u0001ref\u0001"


MISSING_SEQ = "missing seq (other rows of this file have one)"


class IngestError(ValueError):
    """The raw rows do not have the columns ingest needs, or the rules did not settle."""
