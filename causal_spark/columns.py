"""Column names shared across modules (one constant per name)."""

from __future__ import annotations

TRACE_ID = "trace_id"
PROCESS = "process"
PIDX = "pidx"
SEQ = "seq"
LSEQ = "lseq"
KIND = "kind"
MSG_ID = "msg_id"
PEER = "peer"
TS = "ts"
SIZE_BYTES = "size_bytes"
LABEL = "label"
SOURCE = "source"
LINE = "line"
RAW = "raw"
REASON = "reason"
DETAIL = "detail"
N_MSGS = "n_msgs"
LAMPORT = "lamport"
VC = "vc"

SRC = "src"
DST = "dst"
SRC_PIDX = "src_pidx"
DST_PIDX = "dst_pidx"
SEND_LSEQ = "send_lseq"
RECV_LSEQ = "recv_lseq"
SEND_TS = "send_ts"
RECV_TS = "recv_ts"
STATUS = "status"

# the fields of one input event, in the order readers give them
INPUT_FIELDS: tuple[str, ...] = (
    TRACE_ID,
    PROCESS,
    SEQ,
    KIND,
    MSG_ID,
    PEER,
    TS,
    SIZE_BYTES,
    LABEL,
)

# event kinds
SEND = "send"
RECEIVE = "receive"
INTERNAL = "internal"

# message statuses
DELIVERED = "delivered"
IN_FLIGHT = "in_flight"
ORPHAN = "orphan"

# quarantine reasons
MALFORMED = "malformed"
DUPLICATE_EVENT = "duplicate_event"
DUPLICATE_MSG = "duplicate_msg"
PEER_MISMATCH = "peer_mismatch"
