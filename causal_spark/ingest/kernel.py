"""The rules of steps 2 and 3 of ingest over one task's rows: Arrow in, Arrow out, no Spark.

`judge_events` takes the typed rows of some whole processes (step 2: every row of a
(trace, process) is in the same call) and `judge_messages` the send and receive rows of
some whole messages (step 3: every row of a (trace, msg_id)). Each sorts its rows once
(one stable sort over integer codes) and finds groups by comparing neighbours, so a
task costs a few passes over its arrays whatever the number of groups. The rules and
their words are those of docs/ingest.md, in that order; `REF` in a detail stands for the
row it points at (`line N`, filled in when the quarantine is written).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from causal_spark import columns as C
from causal_spark.ingest.rows_kernel import (
    ENDS,
    EVENTS,
    EXCLUDED,
    FILE_ID,
    KINDS,
    MESSAGES,
    MISSING_SEQ,
    PARSED,
    POST,
    PPROC,
    PRE,
    PROCS,
    RECEIVE_CODE,
    RECORDED_VC,
    REF,
    REF_FILE,
    REF_LINE,
    REJECTS,
    RISKY,
    RISKY_MESSAGES,
    SEND_CODE,
    SEQ_GIVEN,
    STEP1,
    SUB,
    JudgedEvents,
    JudgedMessages,
    codes_of,
    encoded,
    file_facts,
    formatted,
    int_values,
    is_member,
    reject_rows,
    run_starts,
    shared_codes,
    sort_order,
    string_array,
    take_rows,
    values_at,
)

KIND_VALUES = pa.array(KINDS, pa.string())


# the typed columns step 2 reads from accepted rows
USED = [
    FILE_ID,
    C.LINE,
    SUB,
    C.TRACE_ID,
    PPROC,
    C.SEQ,
    C.KIND,
    C.MSG_ID,
    C.PEER,
    C.TS,
    C.SIZE_BYTES,
    C.LABEL,
    RECORDED_VC,
]


def _split(
    rows: pa.Table, chosen: pa.ChunkedArray, columns: Sequence[str] | None = None
) -> tuple[pa.Table, pa.Table]:
    """(the chosen rows, only `columns` of them where given; the others): no copy when
    every row is chosen, the common case. `chosen` has no nulls."""
    picked = rows if columns is None else rows.select(columns)
    if pc.all(chosen).as_py():
        return picked, rows.slice(0, 0)
    return picked.filter(chosen), rows.filter(pc.invert(chosen))


def judge_events(typed: pa.Table, mixed_files: Collection[int] = ()) -> JudgedEvents:
    """Step 2 over the rows of whole processes (`TYPED`, markers included).

    - A row is `duplicate_event` when an earlier row of its process has the same `seq`
      (and `sub`) and the two are not copies of one multicast send; a further copy of
      a multicast to a destination an earlier copy named is one too.
    - Rows that a later step rejects (`excluded` markers, by file, line and sub) and rows
      without `seq` in `mixed_files` (files where other rows have one: `malformed`) take
      part in these rules but in no event: `lseq` numbers the events that keep a row.
    - Events, the send and receive rows that step 3 matches, the rejected rows, per-file
      facts and the processes with an event come out.
    """
    marker = typed[EXCLUDED].fill_null(False)
    rows, markers = _split(typed, pc.invert(marker))
    accepted_mask = pc.is_null(rows[C.REASON])
    facts = file_facts(rows, accepted_mask)

    good, bad = _split(rows, accepted_mask, USED)
    malformed = pa.table(
        {
            FILE_ID: bad[FILE_ID],
            C.LINE: bad[C.LINE],
            SUB: bad[SUB],
            C.TRACE_ID: bad[C.TRACE_ID],
            C.PROCESS: bad[PPROC],
            C.REASON: bad[C.REASON],
            C.DETAIL: pa.nulls(bad.num_rows, pa.string()),
            REF_FILE: pa.nulls(bad.num_rows, pa.int32()),
            REF_LINE: pa.nulls(bad.num_rows, pa.int64()),
            STEP1: pa.array(np.ones(bad.num_rows, dtype=bool)),
            C.RAW: bad[C.RAW],
            PRE: bad[PRE],
            POST: bad[POST],
            PARSED: bad[PARSED],
            SEQ_GIVEN: bad[SEQ_GIVEN],
        },
        schema=REJECTS,
    )

    n = good.num_rows
    if n == 0:
        return JudgedEvents(
            EVENTS.empty_table(), ENDS.empty_table(), malformed, facts, PROCS.empty_table()
        )
    trace, traces = encoded(good[C.TRACE_ID])
    process, processes = encoded(good[PPROC])
    noseq = good[C.SEQ].is_null().to_numpy(zero_copy_only=False)
    seq = int_values(good[C.SEQ])
    file = int_values(good[FILE_ID])
    line = int_values(good[C.LINE])
    sub = int_values(good[SUB])
    kind = int_values(pc.index_in(good[C.KIND], value_set=pa.array(KINDS)), fill=-1)
    peer, peers = encoded(good[C.PEER])
    ev_file = np.where(noseq, file, -1)
    ev_line = np.where(noseq, line, -1)
    # one sort: by process, then local order (seq; rows without one after, in file order),
    # then file order among the rows of one event; `at` maps a sorted position to its row
    at = sort_order(trace, process, noseq, seq, ev_file, ev_line, file, line, sub)
    trace, process, noseq, seq = trace[at], process[at], noseq[at], seq[at]
    file, line, sub, kind, peer = file[at], line[at], sub[at], kind[at], peer[at]
    ev_file, ev_line = ev_file[at], ev_line[at]

    new_group = run_starts(trace, process)
    new_event = run_starts(trace, process, noseq, seq, ev_file, ev_line, sub)
    event = np.cumsum(new_event) - 1
    event_start = np.flatnonzero(new_event)
    n_events = len(event_start)
    rn = np.arange(n) - event_start[event]
    is_send = kind == SEND_CODE
    is_copy = is_send & is_send[event_start][event]
    dup = (rn > 0) & ~is_copy

    # copies to a destination an earlier copy of the event named
    copies = np.flatnonzero(is_copy & (peer >= 0))
    by_peer = copies[sort_order(event[copies], peer[copies])]  # stable: copies ascend
    first_of = run_starts(event[by_peer], peer[by_peer])
    first_pos = by_peer[np.flatnonzero(first_of)][np.cumsum(first_of) - 1]
    repeated = by_peer[~first_of]
    repeated_ref = first_pos[~first_of]
    is_repeated = np.zeros(n, dtype=bool)
    is_repeated[repeated] = True

    n_copies = np.bincount(event, weights=is_copy, minlength=n_events)
    n_unnamed = np.bincount(event, weights=is_copy & (peer < 0), minlength=n_events)
    risky_event = (n_copies > 1) & (n_unnamed > 0)

    later = is_member(
        [file, line, sub],
        [int_values(markers[FILE_ID]), int_values(markers[C.LINE]), int_values(markers[SUB])],
    )
    missing_seq = noseq & np.isin(file, np.fromiter(mixed_files, np.int64, len(mixed_files)))
    kept = ~dup & ~is_repeated & ~later & ~missing_seq

    # events that keep a row, numbered 1.. in their process
    kept_rows = np.flatnonzero(kept)
    live = np.bincount(event[kept_rows], minlength=n_events) > 0
    live_events = np.flatnonzero(live)
    group_of_event = (np.cumsum(new_group) - 1)[event_start]
    live_groups = group_of_event[live_events]
    first_live = np.flatnonzero(run_starts(live_groups))
    run_lengths = np.diff(np.append(first_live, len(live_events)))
    event_lseq = np.zeros(n_events, dtype=np.int64)
    event_lseq[live_events] = np.arange(len(live_events)) - np.repeat(first_live, run_lengths) + 1
    first_kept = kept_rows[np.unique(event[kept_rows], return_index=True)[1]]
    n_msgs = np.bincount(event[kept_rows], weights=is_send[kept_rows], minlength=n_events)
    # strings with codes are gathered from their few distinct values, the rest taken
    heads = take_rows(good.select([C.TS, C.LABEL, C.SEQ, RECORDED_VC]), at[first_kept])
    head_traces = values_at(traces, trace[first_kept])
    head_processes = values_at(processes, process[first_kept])
    events = pa.table(
        {
            C.TRACE_ID: head_traces,
            C.PROCESS: head_processes,
            C.LSEQ: pa.array(event_lseq[live_events]),
            C.KIND: values_at(KIND_VALUES, kind[first_kept]),
            C.TS: heads[C.TS],
            C.LABEL: heads[C.LABEL],
            C.N_MSGS: pa.array(n_msgs[live_events].astype(np.int32)),
            C.SEQ: heads[C.SEQ],
            FILE_ID: pa.array(file[first_kept].astype(np.int32)),
            C.LINE: pa.array(line[first_kept]),
            RECORDED_VC: heads[RECORDED_VC],
        },
        schema=EVENTS,
    )

    end_rows = kept_rows[(kind[kept_rows] == SEND_CODE) | (kind[kept_rows] == RECEIVE_CODE)]
    ends_of = take_rows(good.select([C.MSG_ID, C.TS, C.SIZE_BYTES]), at[end_rows])
    ends = pa.table(
        {
            C.TRACE_ID: values_at(traces, trace[end_rows]),
            C.MSG_ID: ends_of[C.MSG_ID],
            C.PROCESS: values_at(processes, process[end_rows]),
            C.KIND: values_at(KIND_VALUES, kind[end_rows]),
            C.PEER: values_at(peers, peer[end_rows]),
            C.TS: ends_of[C.TS],
            C.SIZE_BYTES: ends_of[C.SIZE_BYTES],
            C.LSEQ: pa.array(event_lseq[event[end_rows]]),
            RISKY: pa.array(risky_event[event[end_rows]]),
            FILE_ID: pa.array(file[end_rows].astype(np.int32)),
            C.LINE: pa.array(line[end_rows]),
            SUB: pa.array(sub[end_rows]),
        },
        schema=ENDS,
    )

    located = good.select([FILE_ID, C.LINE, SUB, C.TRACE_ID, PPROC, C.PEER])
    dups = np.flatnonzero(dup)
    leader = event_start[event[dups]]
    rejected = [
        malformed,
        reject_rows(
            take_rows(located, at[dups]),
            C.DUPLICATE_EVENT,
            string_array(
                [f"same process and seq as {REF}, and not part of a multicast send"] * len(dups)
            ),
            file[leader],
            line[leader],
            process=PPROC,
        ),
    ]
    if len(repeated):
        repeated_rows = take_rows(located, at[repeated])
        rejected.append(
            reject_rows(
                repeated_rows,
                C.DUPLICATE_EVENT,
                formatted(
                    f"second copy of a multicast to '%s' (same process and seq as {REF})",
                    repeated_rows[C.PEER],
                ),
                file[repeated_ref],
                line[repeated_ref],
                process=PPROC,
            )
        )
    no_seq = np.flatnonzero(missing_seq & ~dup)
    if len(no_seq):
        rejected.append(
            reject_rows(
                take_rows(located, at[no_seq]),
                C.MALFORMED,
                string_array([MISSING_SEQ] * len(no_seq)),
                None,
                None,
                process=PPROC,
            )
        )
    # the processes with an event: the first event of each group that has one
    procs = pa.table(
        {
            C.TRACE_ID: head_traces.take(first_live),
            C.PROCESS: head_processes.take(first_live),
        },
        schema=PROCS,
    )
    return JudgedEvents(events, ends, pa.concat_tables(rejected), facts, procs)


def judge_messages(ends: pa.Table) -> JudgedMessages:
    """Step 3 over the send and receive rows (`ENDS`) of whole messages.

    A second send or a second receive of one msg_id is `duplicate_msg`; a receive whose
    process is not the send's peer, or whose peer is not the sender, is `peer_mismatch`.
    Each msg_id with a row left is one message.
    """
    n = ends.num_rows
    if n == 0:
        return JudgedMessages(
            MESSAGES.empty_table(), REJECTS.empty_table(), RISKY_MESSAGES.empty_table()
        )
    trace = codes_of(ends[C.TRACE_ID])
    msg = codes_of(ends[C.MSG_ID])
    kind = int_values(pc.index_in(ends[C.KIND], value_set=pa.array(KINDS)), fill=-1)
    file, line, sub = int_values(ends[FILE_ID]), int_values(ends[C.LINE]), int_values(ends[SUB])
    process, peer = shared_codes(ends[C.PROCESS], ends[C.PEER])
    # `at` maps a sorted position to its row
    at = sort_order(trace, msg, kind, file, line, sub)
    trace, msg, kind = trace[at], msg[at], kind[at]
    file, line, process, peer = file[at], line[at], process[at], peer[at]

    new_message = run_starts(trace, msg)
    new_end = run_starts(trace, msg, kind)
    end_start = np.flatnonzero(new_end)
    end_group = np.cumsum(new_end) - 1
    message = np.cumsum(new_message) - 1
    message_start = np.flatnonzero(new_message)
    end_rn = np.arange(n) - end_start[end_group]
    is_send = kind == SEND_CODE
    # the first send of a message is its first row, when it has one (sends sort first)
    has_send = is_send[message_start]
    sender = np.where(has_send, process[message_start], -1)[message]
    send_peer = np.where(has_send, peer[message_start], -1)[message]
    dup = end_rn > 0
    wrong_dst = (send_peer >= 0) & (send_peer != process)
    wrong_src = (sender >= 0) & (peer >= 0) & (peer != sender)
    mismatch = (kind == RECEIVE_CODE) & ~dup & (wrong_dst | wrong_src)
    kept = ~dup & ~mismatch

    n_messages = len(message_start)
    send_at = np.full(n_messages, -1, dtype=np.int64)
    recv_at = np.full(n_messages, -1, dtype=np.int64)
    kept_sends = np.flatnonzero(kept & is_send)
    kept_receives = np.flatnonzero(kept & (kind == RECEIVE_CODE))
    send_at[message[kept_sends]] = at[kept_sends]
    recv_at[message[kept_receives]] = at[kept_receives]
    present = np.flatnonzero((send_at >= 0) | (recv_at >= 0))
    send_at, recv_at = send_at[present], recv_at[present]
    sent, received = send_at >= 0, recv_at >= 0
    first_row = np.where(sent, send_at, recv_at)
    sent_mask, received_mask = pa.array(sent), pa.array(received)

    def side(column: str, rows_at: np.ndarray, mask: pa.Array) -> pa.Array:
        values = ends[column].take(pa.array(np.maximum(rows_at, 0)))
        return pc.if_else(mask, values, pa.scalar(None, values.type))

    heads = take_rows(ends.select([C.TRACE_ID, C.MSG_ID, C.SIZE_BYTES]), first_row)
    status = np.where(sent & received, C.DELIVERED, np.where(sent, C.IN_FLIGHT, C.ORPHAN))
    sender_name = side(C.PROCESS, send_at, sent_mask)
    receiver_name = side(C.PROCESS, recv_at, received_mask)
    messages = pa.table(
        {
            C.TRACE_ID: heads[C.TRACE_ID],
            C.MSG_ID: heads[C.MSG_ID],
            C.SRC: pc.coalesce(sender_name, side(C.PEER, recv_at, received_mask)),
            C.DST: pc.coalesce(receiver_name, side(C.PEER, send_at, sent_mask)),
            C.SEND_LSEQ: side(C.LSEQ, send_at, sent_mask),
            C.RECV_LSEQ: side(C.LSEQ, recv_at, received_mask),
            C.SEND_TS: side(C.TS, send_at, sent_mask),
            C.RECV_TS: side(C.TS, recv_at, received_mask),
            C.SIZE_BYTES: heads[C.SIZE_BYTES],
            C.STATUS: pa.array(status, pa.string()),
        },
        schema=MESSAGES,
    )

    rejected = []
    located = ends.select([FILE_ID, C.LINE, SUB, C.TRACE_ID, C.PROCESS, C.KIND, C.MSG_ID, C.PEER])
    dups = np.flatnonzero(dup)
    if len(dups):
        dup_rows = take_rows(located, at[dups])
        first = end_start[end_group[dups]]
        rejected.append(
            reject_rows(
                dup_rows,
                C.DUPLICATE_MSG,
                formatted(
                    f"second %s of msg_id '%s' (the first is {REF})",
                    dup_rows[C.KIND],
                    dup_rows[C.MSG_ID],
                ),
                file[first],
                line[first],
            )
        )
    mismatches = np.flatnonzero(mismatch)
    if len(mismatches):
        rows = take_rows(located, at[mismatches])
        first_send = take_rows(located, at[message_start[message[mismatches]]])
        details = []
        for to_wrong, msg_id, send_to, receiver, sent_by, named in zip(
            wrong_dst[mismatches],
            rows[C.MSG_ID].to_pylist(),
            first_send[C.PEER].to_pylist(),
            rows[C.PROCESS].to_pylist(),
            first_send[C.PROCESS].to_pylist(),
            rows[C.PEER].to_pylist(),
            strict=True,
        ):
            details.append(
                f"msg_id '{msg_id}' was sent to '{send_to}' but received by '{receiver}'"
                if to_wrong
                else f"msg_id '{msg_id}' was sent by '{sent_by}' but the receive names peer "
                f"'{named}'"
            )
        rejected.append(reject_rows(rows, C.PEER_MISMATCH, string_array(details), None, None))

    risky_flags = ends[RISKY].combine_chunks().to_numpy(zero_copy_only=False)
    candidates = np.flatnonzero(sent)
    candidates = candidates[risky_flags[send_at[candidates]]]
    candidates = candidates[
        pc.is_valid(messages[C.DST].take(pa.array(candidates, pa.int64()))).to_numpy(
            zero_copy_only=False
        )
    ]
    pick = pa.array(candidates, pa.int64())
    risky = pa.table(
        {
            C.TRACE_ID: messages[C.TRACE_ID].take(pick),
            C.MSG_ID: messages[C.MSG_ID].take(pick),
            "sender": sender_name.take(pick),
            "send_lseq": messages[C.SEND_LSEQ].take(pick),
            C.DST: messages[C.DST].take(pick),
            "send_file": side(FILE_ID, send_at, sent_mask).take(pick),
            "send_line": side(C.LINE, send_at, sent_mask).take(pick),
            "send_sub": side(SUB, send_at, sent_mask).take(pick),
            "receiver": receiver_name.take(pick),
            "recv_file": side(FILE_ID, recv_at, received_mask).take(pick),
            "recv_line": side(C.LINE, recv_at, received_mask).take(pick),
            "recv_sub": side(SUB, recv_at, received_mask).take(pick),
        },
        schema=RISKY_MESSAGES,
    )
    return JudgedMessages(
        messages,
        pa.concat_tables(rejected) if rejected else REJECTS.empty_table(),
        risky,
    )


def second_copies(risky: pa.Table) -> pa.Table:
    """Rejections after matching (`REJECTS`): a multicast event's second copy to one
    destination, its send row and its receive row; the first copy is the first in file
    order among the event's messages to that destination."""
    if risky.num_rows == 0:
        return REJECTS.empty_table()
    trace, sender, dst = shared_codes(risky[C.TRACE_ID], risky["sender"], risky[C.DST])
    lseq = int_values(risky["send_lseq"])
    file, line, sub = (int_values(risky[c]) for c in ("send_file", "send_line", "send_sub"))
    order = np.lexsort((sub, line, file, dst, lseq, sender, trace))
    risky = take_rows(risky, order)
    new = run_starts(trace[order], sender[order], lseq[order], dst[order])
    first = np.flatnonzero(new)[np.cumsum(new) - 1]
    seconds = np.flatnonzero(~new)
    if len(seconds) == 0:
        return REJECTS.empty_table()
    rows = take_rows(risky, seconds)
    ref = first[seconds]
    ref_file, ref_line = file[order][ref], line[order][ref]
    out = [
        reject_rows(
            _message_end(rows, "send", "sender"),
            C.DUPLICATE_EVENT,
            formatted(
                f"second copy of a multicast to '%s' (same process and seq as {REF})",
                rows[C.DST],
            ),
            ref_file,
            ref_line,
        )
    ]
    received = pc.is_valid(rows["recv_file"]).to_numpy(zero_copy_only=False)
    if received.any():
        got = rows.filter(pa.array(received))
        out.append(
            reject_rows(
                _message_end(got, "recv", "receiver"),
                C.DUPLICATE_EVENT,
                formatted(
                    f"receive of msg_id '%s', a second copy of a multicast to '%s' "
                    f"(the first copy is {REF})",
                    got[C.MSG_ID],
                    got[C.DST],
                ),
                ref_file[received],
                ref_line[received],
            )
        )
    return pa.concat_tables(out)


def _message_end(risky: pa.Table, end: str, process: str) -> pa.Table:
    """One end of `RISKY_MESSAGES` rows (`end` "send" or "recv", on the `process` column)
    as the event rows `reject_rows` takes."""
    return pa.table(
        {
            FILE_ID: risky[f"{end}_file"],
            C.LINE: risky[f"{end}_line"],
            SUB: risky[f"{end}_sub"],
            C.TRACE_ID: risky[C.TRACE_ID],
            C.PROCESS: risky[process],
        }
    )


def with_pidx(rows: pa.Table, procs: pa.Table, pairs: Sequence[tuple[str, str]]) -> pa.Table:
    """`rows` with an int32 column per (process column, pidx column) in `pairs`: each
    process's index among its trace's processes (`procs`), by name; null if not there."""
    index = numbered(procs)
    traces = pc.unique(index[C.TRACE_ID])
    row_trace = int_values(pc.index_in(rows[C.TRACE_ID], value_set=traces), fill=-1)
    index_trace = int_values(pc.index_in(index[C.TRACE_ID], value_set=traces))
    index_pidx = int_values(index[C.PIDX])
    for process_col, pidx_col in pairs:
        process, names = encoded(rows[process_col])
        width = len(names)
        if len(traces) * width > DENSE_PIDX:
            rows = rows.append_column(pidx_col, _joined_pidx(rows, index, process_col))
            continue
        # a table of every (trace, process name) pair: one scatter, one gather
        at = int_values(pc.index_in(index[C.PROCESS], value_set=names), fill=-1)
        known = at >= 0
        table = np.full(len(traces) * width, -1, dtype=np.int64)
        table[index_trace[known] * width + at[known]] = index_pidx[known]
        pidx = np.full(rows.num_rows, -1, dtype=np.int64)
        ok = (row_trace >= 0) & (process >= 0)
        pidx[ok] = table[row_trace[ok] * width + process[ok]]
        missing = pidx < 0
        column = pa.array(
            pidx.astype(np.int32), pa.int32(), mask=missing if missing.any() else None
        )
        rows = rows.append_column(pidx_col, column)
    return rows


# traces x process names up to which `with_pidx` looks pidx up in a dense table
DENSE_PIDX = 1 << 22


def _joined_pidx(rows: pa.Table, index: pa.Table, process_col: str) -> pa.ChunkedArray:
    """`with_pidx`'s column by a join, for more traces and names than a dense table holds."""
    keys = pa.table({C.TRACE_ID: rows[C.TRACE_ID], "__p": rows[process_col]})
    looked = keys.append_column("__row", pa.array(np.arange(rows.num_rows))).join(
        index.rename_columns([C.TRACE_ID, "__p", "__pidx"]),
        [C.TRACE_ID, "__p"],
        join_type="left outer",
        use_threads=False,
    )
    return looked.sort_by("__row")["__pidx"].cast(pa.int32())


def numbered(procs: pa.Table) -> pa.Table:
    """trace_id, process, pidx: each trace's processes numbered 0.. by name."""
    distinct = procs.group_by([C.TRACE_ID, C.PROCESS], use_threads=False).aggregate([])
    ordered = distinct.sort_by([(C.TRACE_ID, "ascending"), (C.PROCESS, "ascending")])
    trace = codes_of(ordered[C.TRACE_ID])
    starts = np.flatnonzero(run_starts(trace))
    lengths = np.diff(np.append(starts, ordered.num_rows))
    pidx = np.arange(ordered.num_rows) - np.repeat(starts, lengths)
    return ordered.append_column(C.PIDX, pa.array(pidx.astype(np.int32)))


def recorded_in_pidx_order(events: pa.Table, procs: pa.Table) -> pa.Array:
    """`events`' recorded clocks (`RECORDED_VC`: a map process -> count) as arrays in pidx
    order: entry i is what the map gives the trace's process of pidx i (`procs` numbered
    by `numbered`), 0 where it names none (GoVector leaves zero entries out); a null map
    stays null. An entry naming a process the trace does not have (every row of it
    quarantined) has no place in the array and is left out. Vectorised: one lookup of
    every (trace, process) entry, one scatter."""
    column = events[RECORDED_VC].combine_chunks()
    n = len(column)
    out_type = pa.list_(pa.int64())
    if column.null_count == n:
        return pa.nulls(n, out_type)
    index = numbered(procs)
    traces = events[C.TRACE_ID].combine_chunks()
    widths = index.group_by(C.TRACE_ID, use_threads=False).aggregate([(C.PIDX, "count")])
    width_at = pc.index_in(traces, value_set=widths[C.TRACE_ID])
    width = widths[f"{C.PIDX}_count"].take(width_at).fill_null(0).to_numpy()
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.where(valid, width, 0), out=offsets[1:])
    values = np.zeros(int(offsets[-1]), dtype=np.int64)
    # the map's entries (offsets are absolute into the unsliced keys and items; Arrow's
    # list kernels do not take a map, and list_parent_indices aborts on one)
    bounds = column.offsets.to_numpy()
    first, size = int(bounds[0]), int(bounds[-1] - bounds[0])
    keys, items = column.keys.slice(first, size), column.items.slice(first, size)
    parent = np.repeat(np.arange(n), np.diff(bounds))
    entry_trace = traces.take(pa.array(parent, pa.int64()))
    joint = pc.binary_join_element_wise(entry_trace, keys, "\u0000")
    known = pc.binary_join_element_wise(index[C.TRACE_ID], index[C.PROCESS], "\u0000")
    found = pc.index_in(joint, value_set=known)
    placed = found.is_valid().to_numpy(zero_copy_only=False)
    if placed.any():
        rows = parent[placed]
        pidx = index[C.PIDX].take(found.filter(found.is_valid())).to_numpy()
        counts = items.fill_null(0).to_numpy()[placed]
        values[offsets[rows] + pidx] = counts
    return pa.ListArray.from_arrays(
        pa.array(offsets, pa.int64()).cast(pa.int32()),
        pa.array(values),
        type=out_type,
        mask=pa.array(~valid),
    )
