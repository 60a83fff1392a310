"""Names shared by the steps of ingest: kind aliases, reference markers, working columns."""

from __future__ import annotations

from causal_spark import columns as C
from causal_spark.io.sources import FILE_ID, SUB

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


# removed events are looked up in buckets of this many ranks
BUCKET = 1024


# columns of the typed rows
PPROC = "__cs_pproc"  # the process, or a spread key for malformed rows


SEQ_GIVEN = "__cs_seq_given"


PARSED = "__cs_parsed"  # the reader could split the record into fields


PRE = "__cs_detail_pre"  # malformed details before / after the (later) missing-seq rule


POST = "__cs_detail_post"


REF_FILE = "__cs_ref_file"


REF_LINE = "__cs_ref_line"


RANK = "__cs_rank"


DUP = "__cs_dup"  # duplicate_event found by the event rules


REPEATED = "__cs_repeated"  # the event sends two copies to one named destination


RISKY = "__cs_risky"  # a multicast event with a copy that names no destination


NOSEQ = "__cs_noseq"


EV_SEQ = "__cs_ev_seq"


EV_FILE = "__cs_ev_file"


EV_LINE = "__cs_ev_line"


EV_SUB = "__cs_ev_sub"


EVENT = (C.TRACE_ID, PPROC, NOSEQ, EV_SEQ, EV_FILE, EV_LINE, EV_SUB)


ROW = (FILE_ID, C.LINE, SUB)


class IngestError(ValueError):
    """The raw rows do not have the columns ingest needs."""
