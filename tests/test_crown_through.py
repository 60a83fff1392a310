"""`crown_through`: a crown of the fewest messages through a given message, against brute
force (NetworkX's simple cycles of the relation m ~> m'); pure kernels, no Spark. The
`explain` text and diagram that use it are tested in test_anomalies.py."""

from __future__ import annotations

from hypothesis import given, settings

from causal_spark.anomalies import crown_kernel as CK
from causal_spark.anomalies.explain import crown_through_ids
from tests.random_traces import Trace, traces
from tests.reference_order import fewest_through, happened_before_sets
from tests.test_anomalies import is_crown


@settings(max_examples=80, deadline=None)
@given(trace=traces(5, 60))
def test_a_crown_through_each_member_is_one_of_the_fewest(trace: Trace) -> None:
    msgs = trace.delivered()
    future = happened_before_sets(trace.lengths(), msgs)
    index = {p: i for i, p in enumerate(trace.processes)}
    by_id = {m.msg_id: m for m in msgs}
    columns = (
        [index[m.src] for m in msgs],
        [m.send_lseq for m in msgs],
        [index[m.dst] for m in msgs],
        [m.recv_lseq for m in msgs],
    )
    crowns = CK.crown_components(len(index), *columns, 10**9)
    for row, c in enumerate(crowns.component):
        whole = CK.crown_through(len(index), *columns, row, 10**9)
        assert whole.in_component == (c >= 0) and not whole.cut
        if c < 0:
            assert len(whole.crown) == 0
            continue
        # the component's rows alone, as `explain` hands them (processes renumbered)
        mine = [r for r, k in enumerate(crowns.component) if k == c]
        src, send, dst, recv = ([column[r] for r in mine] for column in columns)
        alone = crown_through_ids(
            [msgs[r].msg_id for r in mine], src, send, dst, recv, msgs[row].msg_id, 10**9
        )
        crown = [msgs[r] for r in whole.crown]
        want = fewest_through(msgs, future, msgs[row].msg_id)
        if want is None:
            assert crown == [] and alone.crown == [] and not alone.cut
            continue
        assert is_crown(crown, future), crown
        assert crown[0] == msgs[row] and len(crown) == want
        assert is_crown([by_id[i] for i in alone.crown], future), alone
        assert alone.crown[0] == msgs[row].msg_id and len(alone.crown) == want


def test_a_spent_budget_stops_the_crown_through_a_message_and_says_so() -> None:
    # nested_crowns' shape: three processes each send twice, then receive twice
    ids = ["e", "d", "b", "a", "c", "f"]
    src, send = [0, 0, 1, 2, 1, 2], [1, 2, 2, 1, 1, 2]
    dst, recv = [1, 2, 0, 0, 2, 1], [4, 3, 3, 4, 4, 3]
    found = crown_through_ids(ids, src, send, dst, recv, "e", budget=10**9)
    assert found.crown and found.crown[0] == "e" and not found.cut
    spent = crown_through_ids(ids, src, send, dst, recv, "e", budget=0)
    assert spent.crown == [] and spent.cut


def test_a_member_sent_with_a_crown_can_be_in_no_crown_itself() -> None:
    # P0 multicasts m1 (to P1) and m2 (to P2) at P0#1, then receives y; P1 sends y, then
    # receives m1: crown (m1, y). m2 shares m1's send event, so it is in the component, but
    # nothing happens before its receive except that send: no crown passes through it.
    ids = ["m1", "m2", "y"]
    src, send, dst, recv = [0, 0, 1], [1, 1, 1], [1, 2, 0], [2, 1, 2]
    assert crown_through_ids(ids, src, send, dst, recv, "m1", 10**9).crown == ["m1", "y"]
    none = crown_through_ids(ids, src, send, dst, recv, "m2", 10**9)
    assert none.crown == [] and not none.cut
    found = CK.crown_components(3, src, send, dst, recv, 10**9)
    assert list(found.component) == [0, 0, 0]
