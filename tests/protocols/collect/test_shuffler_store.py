"""The shuffler's state (protocols.collect.shuffler.ShufflerStore): batches, permutation, replays, restarts.

The permutation test: over T trials, 600 users each submit one box in a
known arrival order; the table (arrival decile x output decile), summed over
the trials, must be consistent with independence (Pearson chi-square, 81
degrees of freedom, alpha = 1e-3).  The same statistic on an unshuffled
order is checked to reject (the test can fail).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pairwise.protocols.collect import histogram as H
from pairwise.protocols.collect import sealed
from pairwise.protocols.collect.shuffler import ShuffleError, ShufflerStore, TaskInfo

N = 600  # the smallest valid n for eps = 1, delta = 0.9 (Theorem 3.2)
SPEC = {"epsilon": 1.0, "delta": 0.9, "lower": [1], "upper": [5], "min_users": N, "beta": 0.05}
INFO = {"protocol": "shuffle-histogram", "state": "open", "spec": SPEC}  # as the aggregator's task_info
BOX = H.box_bytes()


@pytest.fixture(scope="module")
def boxes():
    _, pk = sealed.generate_keypair()
    ctx = sealed.box_context("t", H.PURPOSE)
    return [sealed.seal(sealed.pack_label(i % 5), pk, ctx) for i in range(N + 60)]


def fresh(task_id="t") -> tuple[ShufflerStore, TaskInfo]:
    st = ShufflerStore(None)
    info = TaskInfo.from_info(task_id, INFO)
    st.remember_task(info)
    return st, info


def decile_table(order_in: list[bytes], order_out: list[bytes]) -> np.ndarray:
    pos = {b: i for i, b in enumerate(order_out)}
    n = len(order_in)
    t = np.zeros((10, 10), dtype=np.int64)
    for arrival, b in enumerate(order_in):
        t[arrival * 10 // n, pos[b] * 10 // n] += 1
    return t


def test_output_order_is_independent_of_arrival_order(boxes):
    trials = 40
    table = np.zeros((10, 10), dtype=np.int64)
    control = np.zeros((10, 10), dtype=np.int64)
    rng = np.random.default_rng(7)  # arrival orders: test data, not the shuffler's randomness
    for _ in range(trials):
        st, info = fresh()
        arrival = [boxes[i] for i in rng.permutation(N)]
        for u, b in enumerate(arrival):
            st.submit(info, f"user-{u}", b)
        batch = st.cut_batch("t", final=True)
        out = [batch.boxes[i * BOX : (i + 1) * BOX] for i in range(batch.count)]
        assert sorted(out) == sorted(arrival) and batch.users == N
        table += decile_table(arrival, out)
        control += decile_table(arrival, arrival)  # no shuffle at all
    assert stats.chi2_contingency(table, correction=False).pvalue > 1e-3
    assert stats.chi2_contingency(control, correction=False).pvalue < 1e-6


def test_one_submission_per_user_and_no_replayed_box(boxes):
    st, info = fresh()
    assert st.submit(info, "alice", boxes[0] + boxes[1]) == 2
    with pytest.raises(ShuffleError, match="already submitted") as e:
        st.submit(info, "alice", boxes[2])
    assert e.value.code == "duplicate"
    with pytest.raises(ShuffleError, match="replay") as e:
        st.submit(info, "bob", boxes[1])  # alice's box, resent by someone else
    assert e.value.code == "replayed"
    with pytest.raises(ShuffleError, match="repeats a box") as e:
        st.submit(info, "carol", boxes[3] + boxes[3])
    assert e.value.code == "replayed"
    assert st.submit(info, "carol", boxes[3]) == 1  # a refused submission stored nothing
    assert st.pending_users("t") == 2


def test_malformed_submissions_are_refused_and_store_nothing(boxes):
    st, info = fresh()
    for data, match in [
        (b"", "whole number"),
        (boxes[0][:-1], "whole number"),
        (b"".join(boxes[:7]), "at most 6"),
        (b"\x02" + boxes[0][1:], "format"),
    ]:
        with pytest.raises(ShuffleError, match=match):
            st.submit(info, "mallory", data)
    assert st.pending_users("t") == 0
    with pytest.raises(ShuffleError, match="not a shuffle task"):
        TaskInfo.from_info("x", {**INFO, "protocol": "ldp-auc"})
    with pytest.raises(ShuffleError, match="unusable"):
        TaskInfo.from_info("x", {**INFO, "spec": {**SPEC, "min_users": 10}})


def test_batches_need_n_users_and_the_link_to_users_is_deleted(boxes):
    st, info = fresh()
    for u in range(N - 1):
        st.submit(info, f"u{u}", boxes[u])
    assert st.cut_batch("t", final=False) is None  # n - 1 pending: never a batch
    st.submit(info, "last", boxes[N - 1])
    b = st.cut_batch("t", final=False)
    assert b is not None and b.users == N and b.count == N and not b.final
    # the shuffler no longer holds which boxes came from whom
    assert st._read("SELECT COUNT(*) FROM submission WHERE boxes IS NOT NULL")[0][0] == 0
    # a later final cut with fewer than n pending users drops them (reported), forwards no box
    for u in range(10):
        st.submit(info, f"late{u}", boxes[N + u])
    last = st.cut_batch("t", final=True)
    assert last.final and last.users == 0 and last.boxes == b"" and last.dropped_users == 10
    with pytest.raises(ShuffleError, match="closed"):
        st.submit(info, "later", boxes[N + 20])
    assert [x.batch for x in st.outbox()] == [0, 1]


def test_outbox_survives_a_restart_until_acknowledged(boxes, tmp_path):
    path = str(tmp_path / "shuffler.db")
    st = ShufflerStore(path)
    info = TaskInfo.from_info("t", INFO)
    st.remember_task(info)
    for u in range(N):
        st.submit(info, f"u{u}", boxes[u])
    b = st.cut_batch("t", final=True)
    st.close()  # a crash after the cut, before delivery
    st = ShufflerStore(path)
    [again] = st.outbox()
    assert again == b  # same batch id, same order: the aggregator can tell a redelivery
    st.acknowledge(again)
    assert st.outbox() == [] and st.tasks_with_work() == []
    with pytest.raises(ShuffleError, match="closed"):
        st.submit(info, "u1", boxes[N + 1])
