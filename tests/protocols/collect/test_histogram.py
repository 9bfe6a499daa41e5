"""The shuffled histogram split between users and aggregator (protocols.collect.histogram).

References: :class:`pairwise.protocols.ldp.shuffle.HistogramProtocol`'s own
analyzer on the same label counts (m = n), exact binomial pmfs from
``scipy.stats`` for the number of boxes a user sends (alpha stated per
test), and plain arithmetic for m > n.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pairwise.dp.errors import PrivacyParameterError
from pairwise.protocols.collect import histogram as H
from pairwise.protocols.collect import sealed

# n >= 400 ln(4/delta)/eps^2 = 596 for eps = 1, delta = 0.9: the smallest valid task that keeps tests quick
TASK = H.HistogramTask(epsilon=1.0, delta=0.9, lower=1, upper=5, min_users=600)
TID = "task-hist"


@pytest.fixture(scope="module")
def keys():
    return sealed.generate_keypair()


def labels_of(boxes, sk, tid=TID):
    ctx = sealed.box_context(tid, H.PURPOSE)
    return [sealed.unpack_label(sealed.open_box(b, sk, ctx)) for b in boxes]


def test_task_validation_before_any_randomness():
    with pytest.raises(PrivacyParameterError, match="Theorem 3.2"):
        H.HistogramTask(epsilon=1.0, delta=1e-5, lower=1, upper=5, min_users=600)
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        H.HistogramTask(epsilon=2.0, delta=0.9, lower=1, upper=5, min_users=10**6)
    with pytest.raises(PrivacyParameterError, match="lower <= upper"):
        H.HistogramTask(epsilon=1.0, delta=0.9, lower=5, upper=1, min_users=600)
    with pytest.raises(PrivacyParameterError, match="integer"):
        H.HistogramTask(epsilon=1.0, delta=0.9, lower=1.5, upper=5, min_users=600)
    with pytest.raises(PrivacyParameterError, match="too large"):
        H.HistogramTask(epsilon=1.0, delta=0.9, lower=0, upper=H.MAX_BINS, min_users=600)
    with pytest.raises(PrivacyParameterError, match="beta"):
        H.HistogramTask(epsilon=1.0, delta=0.9, lower=1, upper=5, min_users=600, beta=1.0)
    assert TASK.bins == 5 and H.max_boxes(TASK) == 6 and H.box_bytes() == 54


def test_analyzer_equals_the_papers_on_the_same_counts(keys):
    sk, pk = keys
    rng = np.random.default_rng(3)  # the data, not the noise
    values = rng.integers(0, 8, TASK.min_users)  # 0, 6, 7 fall outside 1..5: users clamp them
    boxes, clamped = [], 0
    for v in values:
        b, c = H.user_messages(float(v), TASK, pk, TID)
        boxes += b
        clamped += c
    assert clamped == int(np.sum((values < 1) | (values > 5)))
    out = H.analyze([(TASK.min_users, boxes)], TASK, sk, TID)
    proto = TASK.protocol()
    counts = proto.label_counts(np.array(labels_of(boxes, sk)))
    assert np.allclose(out["estimate"], proto.raw_frequencies(counts))
    assert np.allclose(out["estimate_thresholded"], proto.analyze_counts(counts))
    assert out["messages"] == len(boxes) and out["messages_rejected"] == 0 and out["n"] == TASK.min_users
    assert out["zero_threshold"] == proto.inner.q
    assert out["error_bound"] == pytest.approx(proto.simultaneous_error_bound(TASK.beta))
    # the true bins are in the messages: count_j - #users in j is the Bin(n, p) noise, so |error| <= bound w.p. 1-beta
    exact = np.bincount(np.clip(values, 1, 5) - 1, minlength=5) / TASK.min_users
    assert np.max(np.abs(np.array(out["estimate"]) - exact)) <= 3 * out["error_bound"]


def test_more_users_than_n_divide_by_m_with_the_same_p(keys):
    sk, pk = keys
    m1, m2 = TASK.min_users, TASK.min_users + 50
    b1 = [b for _ in range(m1) for b in H.user_messages(2, TASK, pk, TID)[0]]
    b2 = [b for _ in range(m2) for b in H.user_messages(4, TASK, pk, TID)[0]]
    out = H.analyze([(m1, b1), (m2, b2)], TASK, sk, TID)
    counts = np.bincount(labels_of(b1 + b2, sk), minlength=5)
    p = TASK.protocol().inner.p
    assert out["n"] == m1 + m2 and out["batches"] == 2
    assert np.allclose(out["estimate"], counts / (m1 + m2) - p)


def test_batches_below_n_and_empty_input_are_refused(keys):
    sk, pk = keys
    with pytest.raises(PrivacyParameterError, match="below the task's minimum"):
        H.analyze([(TASK.min_users - 1, [])], TASK, sk, TID)
    with pytest.raises(PrivacyParameterError, match="nothing to analyze"):
        H.analyze([], TASK, sk, TID)


def test_foreign_altered_and_out_of_range_boxes_are_dropped_and_counted(keys):
    sk, pk = keys
    good = [b for _ in range(TASK.min_users) for b in H.user_messages(3, TASK, pk, TID)[0]]
    other_task = sealed.seal(sealed.pack_label(0), pk, sealed.box_context("another-task", H.PURPOSE))
    altered = bytearray(good[0])
    altered[-1] ^= 1
    out_of_range = sealed.seal(sealed.pack_label(5), pk, sealed.box_context(TID, H.PURPOSE))  # bins are 0..4
    out = H.analyze([(TASK.min_users, good + [other_task, bytes(altered), out_of_range, good[5]])], TASK, sk, TID)
    assert out["messages_rejected"] == 4 and out["messages"] == len(good)  # good[5] a second time: a replay


def test_box_count_is_one_plus_binomial_whatever_the_value(keys):
    """A user sends 1 + Bin(d, p) boxes for any value: chi-square goodness of fit per value, alpha = 1e-3 each."""
    _, pk = keys
    d, p = TASK.bins, TASK.protocol().inner.p
    pmf = stats.binom.pmf(np.arange(d + 1), d, p)
    draws = 400
    for value in (1, 5, 100):  # the two ends of the domain, and one that is clamped
        sizes = [len(H.user_messages(value, TASK, pk, TID)[0]) - 1 for _ in range(draws)]
        assert min(sizes) >= 0 and max(sizes) <= d
        observed = np.bincount(sizes, minlength=d + 1)
        expected = pmf * draws
        keep = expected >= 5  # pool the sparse low tail into the first kept cell
        obs = np.concatenate([[observed[~keep].sum() + observed[keep][0]], observed[keep][1:]])
        exp = np.concatenate([[expected[~keep].sum() + expected[keep][0]], expected[keep][1:]])
        assert stats.chisquare(obs, exp).pvalue > 1e-3, (value, observed, expected)


def test_every_box_has_the_same_size_and_opens_only_for_its_task(keys):
    sk, pk = keys
    boxes, _ = H.user_messages(1, TASK, pk, TID)
    assert {len(b) for b in boxes} == {H.box_bytes()}
    assert sorted(labels_of(boxes, sk)) == labels_of(boxes, sk)  # in label order before the shuffle
    with pytest.raises(sealed.SealedBoxError):
        labels_of(boxes, sk, tid="other")
    with pytest.raises(ValueError, match="finite"):
        H.user_messages(float("nan"), TASK, pk, TID)
