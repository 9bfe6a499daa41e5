"""Tests of the shuffled-model protocols (protocols.shuffle): Figures 1 and 2, the shuffler, k-RR."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
import scipy.stats

from pairwise.dp.errors import PrivacyParameterError
from pairwise.protocols.ldp.shuffle import (
    BinarySumProtocol,
    HistogramProtocol,
    krr_histogram,
    run_experiment_histogram_domain,
    secure_permutation,
    shuffle,
    shuffled_histogram,
    simulate_krr_histogram,
    simulate_label_counts,
    simulate_shuffled_histogram,
)

EPS, DELTA = 1.0, 1e-4
N_MIN_SUM = math.ceil(100 * math.log(2 / DELTA) / EPS**2)  # 991
N_MIN_HIST = math.ceil(400 * math.log(4 / DELTA) / EPS**2)  # 4239


# --------------------------------------------------------------------------- parameters


def test_parameter_constraints_are_checked_with_clear_errors():
    with pytest.raises(PrivacyParameterError, match="epsilon <= 1"):
        BinarySumProtocol(1.5, DELTA, 10**6)
    with pytest.raises(PrivacyParameterError, match="epsilon <= 1"):
        BinarySumProtocol(0.0, DELTA, 10**6)
    with pytest.raises(PrivacyParameterError, match="0 < delta < 1"):
        BinarySumProtocol(EPS, 0.0, 10**6)
    with pytest.raises(PrivacyParameterError, match="0 < delta < 1"):
        BinarySumProtocol(EPS, 1.0, 10**6)
    with pytest.raises(PrivacyParameterError, match=f"needs n >= 100 ln\\(2/delta\\)/epsilon\\^2 = {N_MIN_SUM} users"):
        BinarySumProtocol(EPS, DELTA, N_MIN_SUM - 1)
    BinarySumProtocol(EPS, DELTA, N_MIN_SUM)
    with pytest.raises(PrivacyParameterError, match=f"n >= 400 ln\\(4/delta\\)/epsilon\\^2 = {N_MIN_HIST} users"):
        HistogramProtocol(EPS, DELTA, N_MIN_HIST - 1, 5)
    HistogramProtocol(EPS, DELTA, N_MIN_HIST, 5)
    with pytest.raises(ValueError, match="domain size d"):
        HistogramProtocol(EPS, DELTA, N_MIN_HIST, 0)
    with pytest.raises(PrivacyParameterError, match="finite"):
        BinarySumProtocol(float("nan"), DELTA, 10**6)
    with pytest.raises(PrivacyParameterError, match="integer >= 1"):
        BinarySumProtocol(EPS, DELTA, 0)
    p = HistogramProtocol(EPS, DELTA, N_MIN_HIST, 3)
    with pytest.raises(ValueError, match="outside the domain"):
        p.randomize_all(np.r_[np.zeros(N_MIN_HIST - 1, dtype=int), 3])
    with pytest.raises(ValueError, match="expected 4239 values"):
        p.randomize_all(np.zeros(10, dtype=int))
    with pytest.raises(ValueError, match="beta"):
        p.simultaneous_error_bound(0.0)


def test_noise_probability_follows_figure1():
    n = 8000
    b = BinarySumProtocol(0.5, 1e-6, n)
    q = 50 * math.log(2 / 1e-6) / (0.25 * n)
    assert q <= b.q < q + 2**-32  # rounded up to a multiple of 2^-32
    assert b.p == 1 - b.q and b.p >= 0.5
    h = HistogramProtocol(1.0, 1e-6, 20000, 7)
    assert (h.inner.epsilon, h.inner.delta) == (0.5, 5e-7)  # (eps/2, delta/2) per bin


# --------------------------------------------------------------------------- binary sums


def test_binary_sum_message_count_is_sum_plus_binomial_csprng():
    """#messages = sum(x) + Bin(n, p'): z-test on the mean and chi-square on the variance, alpha 1e-6."""
    n = 2000
    b = BinarySumProtocol(EPS, DELTA, n)
    x = np.zeros(n, dtype=int)
    x[:300] = 1
    counts = np.array([b.randomize_all(x).size for _ in range(300)]) - 300
    mean, var = n * b.p, n * b.p * b.q
    assert abs(counts.mean() - mean) < 4.9 * math.sqrt(var / counts.size)
    stat = (counts.size - 1) * counts.var(ddof=1) / var
    assert scipy.stats.chi2.ppf(5e-7, counts.size - 1) < stat < scipy.stats.chi2.ppf(1 - 5e-7, counts.size - 1)
    one = b.randomize(1)
    assert one.size in (1, 2) and np.all(one == 1)  # at most two one-bit messages (Thm 3.1 iv)


def test_all_zero_input_always_yields_zero():
    """Theorem 3.1 iii: Bin(n, p) <= n, so c* <= 1 - p and the output is exactly 0."""
    b = BinarySumProtocol(EPS, DELTA, N_MIN_SUM)
    for _ in range(20):
        assert b.analyze(shuffle(b.randomize_all(np.zeros(N_MIN_SUM, dtype=int)))) == 0.0
    assert b.analyze_count(N_MIN_SUM) == 0.0  # even the maximal noise count
    assert b.analyze_count(N_MIN_SUM + 1) > 0.0


def test_binary_sum_error_bound_holds_seeded():
    """Failures of the Theorem 3.1 ii bound at beta = 0.1 are at most Binomial(500, 0.1) (alpha 1e-6)."""
    rng = np.random.default_rng(1)
    n = 3000
    b = BinarySumProtocol(EPS, DELTA, n)
    x = (rng.random(n) < 0.35).astype(int)
    bound = b.error_bound(0.1)
    fails = 0
    for _ in range(500):
        m = int(x.sum() + b.simulate_noise_bits(n, rng).sum())
        fails += abs(b.analyze_count(m) - x.mean()) > bound
    assert fails <= scipy.stats.binom.ppf(1 - 1e-6, 500, 0.1)


# --------------------------------------------------------------------------- shuffler


def test_secure_permutation_is_uniform():
    """All 24 permutations of 4 items equally likely: chi-square, alpha = 1e-6."""
    counts = Counter(tuple(secure_permutation(4)) for _ in range(12000))
    assert set(counts) == set(itertools.permutations(range(4)))
    obs = np.array([counts[p] for p in itertools.permutations(range(4))])
    assert scipy.stats.chisquare(obs).pvalue > 1e-6
    p = secure_permutation(100000)
    assert np.array_equal(np.sort(p), np.arange(100000))
    m = np.arange(50) % 7
    assert sorted(shuffle(m).tolist()) == sorted(m.tolist())
    assert secure_permutation(0).size == 0


# --------------------------------------------------------------------------- histograms


def test_histogram_randomizer_messages():
    h = HistogramProtocol(EPS, DELTA, N_MIN_HIST, 6)
    msgs = h.randomize(4)
    c = np.bincount(msgs, minlength=6)
    assert c[4] >= 1 and np.all(c <= 2) and np.all(c[[0, 1, 2, 3, 5]] <= 1)
    with pytest.raises(ValueError):
        h.randomize(6)


def test_histogram_end_to_end_csprng_and_zero_bins():
    rng = np.random.default_rng(0)  # only to make the input
    n, d = 6000, 50
    v = rng.choice([3, 7, 9], size=n, p=[0.5, 0.3, 0.2])
    res = shuffled_histogram(v, d, EPS, DELTA)
    assert res.n == n and res.estimate.shape == (d,)
    empty = np.setdiff1d(np.arange(d), [3, 7, 9])
    assert np.all(res.estimate[empty] == 0.0)  # bins with zero count are exactly 0
    proto = HistogramProtocol(EPS, DELTA, n, d)
    assert res.max_error <= proto.simultaneous_error_bound(1e-6)  # fails w.p. <= 1e-6
    np.testing.assert_allclose(res.exact, np.bincount(v, minlength=d) / n)
    assert res.messages > n * d * 0.5


def test_count_level_simulation_matches_materialized_messages():
    """Both simulations give label counts count_j + Bin(n, p') for every label j.

    n = 10 N_MIN_HIST so that every label's c* clears the threshold 1 - p' and
    the analyzer's output reveals the label count: messages_j = n (c*_j + p').
    Per simulation and label, over 60 runs: a z-test of the mean (known
    n p') and a chi-square test of the variance (known n p' (1 - p')), each at
    alpha 1e-6 (the binomial is normal to 1e-3 here); and the total number of
    messages equals the sum of the label counts.
    """
    rng = np.random.default_rng(2)
    n, d = 10 * N_MIN_HIST, 3
    v = np.repeat([0, 1, 2], [n - 2 * (n // 3), n // 3, n // 3])
    count = np.bincount(v, minlength=d)
    h = HistogramProtocol(EPS, DELTA, n, d)
    p = h.inner.p
    assert 2 * n * h.inner.q < count.min()  # every label clears the threshold with room to spare
    reps = 60
    lo, hi = scipy.stats.chi2.ppf(0.5e-6, reps), scipy.stats.chi2.isf(0.5e-6, reps)
    for sim in (simulate_shuffled_histogram, simulate_label_counts):
        noise, totals = [], []
        for _ in range(reps):
            r = sim(v, d, EPS, DELTA, rng)
            msgs = n * (np.asarray(r.estimate) + p)
            assert np.allclose(msgs, np.rint(msgs), atol=1e-3)
            noise.append(np.rint(msgs) - count)
            totals.append(r.messages)
        noise = np.array(noise)  # (reps, d): Bin(n, p') per entry
        assert np.array_equal(np.array(totals), (noise + count).sum(axis=1))
        z = (noise - n * p) / math.sqrt(n * p * (1 - p))
        assert np.all(np.abs(z.mean(axis=0)) * math.sqrt(reps) < scipy.stats.norm.isf(0.5e-6)), sim.__name__
        chi = (z**2).sum(axis=0)
        assert np.all((chi > lo) & (chi < hi)), (sim.__name__, chi)


def test_krr_histogram_unbiased():
    rng = np.random.default_rng(3)
    v = rng.integers(0, 5, 2000)
    est = np.array([simulate_krr_histogram(v, 5, 1.0, rng).estimate for _ in range(200)])
    truth = np.bincount(v, minlength=5) / v.size
    assert np.all(np.abs(est.mean(0) - truth) < 4.9 * est.std(0, ddof=1) / math.sqrt(200))
    r = krr_histogram(v, 5, 1.0)  # CSPRNG path
    assert r.estimate.shape == (5,) and abs(r.estimate.sum() - 1.0) < 1e-9


def test_error_does_not_grow_with_domain_but_krr_does_seeded():
    rng = np.random.default_rng(4)
    v = rng.integers(0, 4, 50000)
    rows = run_experiment_histogram_domain(v, [4, 64, 4096], 1.0, 1e-6, 4, rng)
    sh = [r["shuffle_mean"] for r in rows]
    kr = [r["krr_mean"] for r in rows]
    assert max(sh) <= rows[0]["shuffle_bound"]
    assert sh[-1] < 3 * sh[0] + 0.002  # flat in d
    assert kr[-1] > 10 * kr[0]  # k-RR grows with d
    assert kr[-1] > 10 * sh[-1]
