"""Tests of the locally private AUC protocol (protocols.ldp_auc): oracle, histograms, Eq. (10)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats

from pairwise.dp.errors import PrivacyParameterError
from pairwise.protocols.datasets import load_dataset
from pairwise.protocols.ldp.auc import (
    HadamardFrequencyOracle,
    PrivateHierarchicalHistogram,
    default_a,
    exact_uauc,
    ldp_auc,
    private_uauc,
    quantize_scores,
    simulate_ldp_auc,
    synthetic_auc_dataset,
    theorem3_mse_bound,
)

# --------------------------------------------------------------------------- frequency oracle


def test_oracle_exact_expectation_and_variance_per_user():
    """Lemma 5 per user: over uniform j and the RR coin, E = [u = v], Var = c^2 - [u = v] (exact sums)."""
    eps = 0.8
    o = HadamardFrequencyOracle(3, eps)
    keep = math.exp(eps) / (1 + math.exp(eps))
    c = (math.exp(eps) + 1) / math.expm1(eps)
    for v, u in itertools.product(range(8), repeat=2):
        js = np.arange(8, dtype=np.uint64)
        h = o.hadamard_bits(np.full(8, v), js).astype(float)
        # contribution c (-1)^(b xor <u,j>), b = h kept w.p. keep
        par_u = o.hadamard_bits(np.full(8, u), js).astype(float)
        sign_keep = (1 - 2 * h) * (1 - 2 * par_u)
        mean = o.c * np.mean(keep * sign_keep - (1 - keep) * sign_keep)
        second = np.mean(keep * (o.c * sign_keep) ** 2 + (1 - keep) * (o.c * sign_keep) ** 2)
        assert mean == pytest.approx(1.0 if u == v else 0.0, abs=1e-12)
        assert second - mean**2 == pytest.approx(c**2 - (1.0 if u == v else 0.0), rel=1e-12)
    assert o.c == pytest.approx(c, rel=1e-15)
    assert o.mse_bound(10) == pytest.approx(10 * c**2)


def test_hadamard_bits_are_inner_products_mod_2():
    o = HadamardFrequencyOracle(4, 1.0)
    v = np.arange(16).repeat(16)
    j = np.tile(np.arange(16), 16)
    expect = [bin(a & b).count("1") % 2 for a, b in zip(v, j)]
    np.testing.assert_array_equal(o.hadamard_bits(v, j), expect)


def _oracle_run(o, values, rng):
    idx = o.simulate_assign_indices(values.size, rng)
    return o.aggregate(idx, o.simulate_randomize(values, idx, rng))


def test_oracle_unbiased_with_lemma5_variance_seeded():
    """z-scores over all nodes and repetitions are N(0, 1) (KS test, alpha = 1e-4)."""
    rng = np.random.default_rng(21)
    o = HadamardFrequencyOracle(4, 1.0)
    values = rng.integers(0, 16, 3000)
    f = np.bincount(values, minlength=16)
    zs = []
    for _ in range(60):
        est = o.estimate(_oracle_run(o, values, rng), np.arange(16))
        zs.append((est - f) / np.sqrt(values.size * o.c**2 - f))
    assert scipy.stats.kstest(np.ravel(zs), "norm").pvalue > 1e-4


def test_oracle_pairwise_independence_lemma6():
    """Correlations between f_hat(u) and f_hat(u') vanish (alpha = 1e-5 per pair, Fisher z)."""
    rng = np.random.default_rng(8)
    o = HadamardFrequencyOracle(3, 0.5)
    values = rng.integers(0, 8, 400)
    reps = 600
    est = np.array([o.estimate(_oracle_run(o, values, rng), np.arange(8)) for _ in range(reps)])
    r = np.corrcoef(est, rowvar=False)
    zcrit = scipy.stats.norm.ppf(1 - 1e-5 / 2) / math.sqrt(reps - 3)
    off = r[~np.eye(8, dtype=bool)]
    assert np.all(np.abs(np.arctanh(off)) < zcrit)


def test_oracle_csprng_path_unbiased():
    """OS CSPRNG randomizer and indices: KS test of z-scores, alpha = 1e-5."""
    o = HadamardFrequencyOracle(3, 1.5)
    values = np.repeat(np.arange(8), [500, 0, 100, 200, 0, 50, 300, 10])
    f = np.bincount(values, minlength=8)
    zs = []
    for _ in range(25):
        idx = o.assign_indices(values.size)
        assert idx.min() >= 0 and idx.max() < 8
        est = o.estimate(o.aggregate(idx, o.randomize(values, idx)), np.arange(8))
        zs.append((est - f) / np.sqrt(values.size * o.c**2 - f))
    assert scipy.stats.kstest(np.ravel(zs), "norm").pvalue > 1e-5


def test_oracle_validation():
    o = HadamardFrequencyOracle(2, 1.0)
    with pytest.raises(ValueError, match=r"values must lie in \[0, 4\)"):
        o.hadamard_bits(np.array([4]), np.array([0]))
    with pytest.raises(ValueError, match="bits"):
        o.aggregate(np.array([0, 1]), np.array([0, 2]))
    with pytest.raises(ValueError, match="same length"):
        o.aggregate(np.array([0, 1]), np.array([0]))
    with pytest.raises(ValueError, match="2\\^bits"):
        HadamardFrequencyOracle(-1, 1.0)
    with pytest.raises(PrivacyParameterError):
        HadamardFrequencyOracle(2, 0.0)


# --------------------------------------------------------------------------- hierarchical histogram


def _prefix_counts(values, alpha, level):
    return np.bincount(values >> (alpha - level), minlength=1 << level)


@pytest.mark.parametrize("splitting", ["users", "budget"])
def test_hierarchical_histogram_unbiased_seeded(splitting):
    """Each level's h_hat is unbiased; mean within z = 4.9 (alpha about 1e-6) at every node."""
    rng = np.random.default_rng(31)
    alpha, n = 3, 900
    values = rng.integers(0, 8, n)
    reps = 200
    sums = {l: np.zeros(1 << l) for l in range(1, alpha + 1)}
    sq = {l: np.zeros(1 << l) for l in range(1, alpha + 1)}
    h = PrivateHierarchicalHistogram(alpha, 1.0, n, splitting)
    for _ in range(reps):
        h.simulate_collect(values, rng)
        for l in range(1, alpha + 1):
            e = h.estimate(l, np.arange(1 << l))
            sums[l] += e
            sq[l] += e * e
    for l in range(1, alpha + 1):
        mean = sums[l] / reps
        var = sq[l] / reps - mean**2
        truth = _prefix_counts(values, alpha, l)
        assert np.all(np.abs(mean - truth) < 4.9 * np.sqrt(var / reps)), (l, mean, truth)
        assert np.all(var < h.variance_bound * 1.5)  # v bounds the variance
    assert h.estimate(0, np.zeros(1)) == pytest.approx([n])


def test_budget_splitting_levels_and_advanced_composition():
    h = PrivateHierarchicalHistogram(8, 2.0, 100, "budget")
    assert h.level_epsilon == pytest.approx(0.25)
    assert h.guarantee.epsilon == 2.0 and h.guarantee.delta == 0.0
    h2 = PrivateHierarchicalHistogram(48, 2.0, 100, "budget", "advanced", 1e-6)
    assert h2.level_epsilon > 2.0 / 48  # advanced composition beats basic for many levels
    assert h2.guarantee.epsilon <= 2.0 and h2.guarantee.delta == pytest.approx(1e-6)
    with pytest.raises(PrivacyParameterError, match="delta > 0"):
        PrivateHierarchicalHistogram(8, 2.0, 100, "budget", "advanced", 0.0)
    with pytest.raises(ValueError, match="budget splitting only"):
        PrivateHierarchicalHistogram(8, 2.0, 100, "users", "advanced", 1e-6)
    with pytest.raises(ValueError, match="at least 8 users per class"):
        PrivateHierarchicalHistogram(8, 2.0, 5, "users")
    with pytest.raises(ValueError, match="splitting"):
        PrivateHierarchicalHistogram(8, 2.0, 100, "levels")
    h3 = PrivateHierarchicalHistogram(2, 1.0, 10)
    with pytest.raises(ValueError, match=r"outside \[0, 2\^2\)"):
        h3.simulate_collect(np.array([0, 1, 2, 3, 4, 0, 0, 0, 0, 0]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="expected 10 scores"):
        h3.simulate_collect(np.zeros(3, dtype=int), np.random.default_rng(0))


# --------------------------------------------------------------------------- Eq. (10)


def _exact_estimators(values, alpha):
    def est(level, nodes):
        return _prefix_counts(values, alpha, level)[np.asarray(nodes, dtype=np.int64)].astype(float)

    return est


def test_recursion_with_exact_histograms_and_everything_recursed_is_exact():
    rng = np.random.default_rng(1)
    alpha = 5
    pos = rng.integers(0, 32, 300)
    neg = rng.integers(0, 32, 200)
    ep, en = _exact_estimators(pos, alpha), _exact_estimators(neg, alpha)
    for ties in ("zero", "half"):
        val, stats = private_uauc(ep, en, alpha, 1e-12, 1e-12, 1.5, "half", ties)
        assert val == pytest.approx(exact_uauc(pos, neg, ties))
    assert stats.discarded == [0] * alpha
    # Huge v: the root is discarded and contributes n+ n- / 2 (AUC 1/2).
    val, stats = private_uauc(ep, en, alpha, 1e12, 1e12, 1.5)
    assert val == pytest.approx(pos.size * neg.size / 2)
    assert stats.recursed[0] == 0 and stats.discarded[0] == 1
    val, _ = private_uauc(ep, en, alpha, 1e12, 1e12, 1.5, discarded="zero")
    assert val == 0.0


def _reference_eq10(
    hp,
    hn,
    alpha,
    vp,
    vn,
    a,
    discarded,
    ties,
    p=(),
):
    """Direct recursive transcription of Eq. (10) on estimate tables hp[level][node]."""
    level = len(p)
    node = int("".join(map(str, p)) or "0", 2)
    if level == alpha:
        return 0.5 * hp[level][node] * hn[level][node] if ties == "half" else 0.0
    tp = max(hp[level][node], math.sqrt(a * vp) / 2)
    tn = max(hn[level][node], math.sqrt(a * vn) / 2)
    c0, c1 = 2 * node, 2 * node + 1
    if tp * tn < a * math.sqrt(vp * vn):
        if discarded == "zero":
            return 0.0
        return 0.5 * (hp[level + 1][c0] + hp[level + 1][c1]) * (hn[level + 1][c0] + hn[level + 1][c1])
    return hp[level + 1][c1] * hn[level + 1][c0] + sum(
        _reference_eq10(hp, hn, alpha, vp, vn, a, discarded, ties, p + (i,)) for i in (0, 1)
    )


@pytest.mark.parametrize("discarded,ties", [("half", "zero"), ("zero", "zero"), ("half", "half")])
def test_breadth_first_recursion_matches_recursive_transcription(discarded, ties):
    rng = np.random.default_rng(4)
    alpha = 6
    pos = rng.integers(0, 64, 500)
    neg = rng.integers(0, 64, 500)
    # Noisy tables: exact counts plus noise, fixed per node (any estimates work).
    hp = [np.array([500.0])] + [_prefix_counts(pos, alpha, l) + rng.normal(0, 12, 1 << l) for l in range(1, alpha + 1)]
    hn = [np.array([500.0])] + [_prefix_counts(neg, alpha, l) + rng.normal(0, 12, 1 << l) for l in range(1, alpha + 1)]
    est_p = lambda l, nodes: hp[l][np.asarray(nodes, dtype=np.int64)]  # noqa: E731
    est_n = lambda l, nodes: hn[l][np.asarray(nodes, dtype=np.int64)]  # noqa: E731
    vp = vn = 150.0
    a = 1.7
    got, stats = private_uauc(est_p, est_n, alpha, vp, vn, a, discarded, ties)
    ref = _reference_eq10(hp, hn, alpha, vp, vn, a, discarded, ties)
    assert got == pytest.approx(ref, rel=1e-12)
    assert sum(stats.recursed) > 0 and sum(stats.discarded) > 0


def test_default_a_minimizes_the_bound():
    n_pos, n_neg, alpha, C = 5000, 3000, 10, 4.9
    for disc in ("half", "zero"):
        a_star = default_a(n_pos, n_neg, alpha, C, disc)
        assert a_star > 1
        grid = np.linspace(1.001, 10, 20000)
        vals = [theorem3_mse_bound(n_pos, n_neg, alpha, C, a, disc) for a in grid]
        assert a_star == pytest.approx(grid[int(np.argmin(vals))], abs=1e-3)


# --------------------------------------------------------------------------- end to end


def test_protocol_error_within_theorem3_bound_seeded():
    """Empirical MSE over 20 seeded runs on 'ur' data stays below the Theorem 3 bound."""
    rng = np.random.default_rng(12)
    alpha, eps = 4, 4.0
    pos, neg = synthetic_auc_dataset("ur", 20000, rng)
    qp, qn = quantize_scores(pos, alpha, 0, 1), quantize_scores(neg, alpha, 0, 1)
    errs = []
    for _ in range(20):
        r = simulate_ldp_auc(qp, qn, alpha, eps, rng, ties="zero")
        errs.append((r.estimate - r.exact) * r.n_pos * r.n_neg)  # UAUC error
    h = PrivateHierarchicalHistogram(alpha, eps, 20000)
    bound = theorem3_mse_bound(20000, 20000, alpha, h.C, r.a)
    assert np.mean(np.square(errs)) < bound


def test_csprng_protocol_is_accurate_with_large_budget():
    """OS CSPRNG end to end on auc_one (AUC 1): |error| < 0.1, about 10 standard deviations."""
    rng = np.random.default_rng(0)  # only to build the public synthetic data
    pos, neg = synthetic_auc_dataset("auc_one", 20000, rng)
    qp, qn = quantize_scores(pos, 3, 0, 1), quantize_scores(neg, 3, 0, 1)
    r = ldp_auc(qp, qn, 3, 6.0)
    assert r.exact == 1.0
    assert abs(r.estimate - 1.0) < 0.1
    r2 = ldp_auc(qp, qn, 3, 6.0, splitting="budget")
    assert abs(r2.estimate - 1.0) < 0.3


def test_breast_cancer_run_reports_consistent_fields():
    bc = load_dataset("breast_cancer")
    s, y = bc["mean_radius"], bc["malignant"]
    q = quantize_scores(s, 4, float(s.min()), float(s.max()))
    r = simulate_ldp_auc(q[y == 1], q[y == 0], 4, 2.0, np.random.default_rng(2))
    assert (r.n_pos, r.n_neg) == (212, 357)
    assert r.exact == pytest.approx(exact_uauc(q[y == 1], q[y == 0], "half") / (212 * 357))
    assert len(r.recursed) == 4 and r.recursed[0] + r.discarded[0] == 1
    assert math.isfinite(r.estimate)


def test_synthetic_datasets_and_quantization():
    rng = np.random.default_rng(0)
    pos, neg = synthetic_auc_dataset("ithdigit", 10, rng, digit=5)
    assert np.all(quantize_scores(pos, 4, 0, 1) == 0)  # 4 bits cannot see the 5th digit
    assert np.all(quantize_scores(pos, 5, 0, 1) == 1)
    pos, neg = synthetic_auc_dataset("auc_one", 10, rng)
    assert np.all(quantize_scores(pos, 16, 0, 1) == 2**16 - 1) and np.all(quantize_scores(neg, 16, 0, 1) == 0)
    with pytest.raises(ValueError, match="unknown synthetic"):
        synthetic_auc_dataset("nope", 10, rng)
    with pytest.raises(ValueError, match="lower < upper"):
        quantize_scores(np.zeros(3), 4, 1.0, 1.0)


def test_protocol_validation():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="a must be > 1"):
        simulate_ldp_auc(np.arange(8), np.arange(8), 3, 1.0, rng, a=1.0)
    with pytest.raises(ValueError, match="non-empty"):
        ldp_auc(np.array([], dtype=int), np.arange(8), 3, 1.0)
    with pytest.raises(ValueError, match="discarded"):
        simulate_ldp_auc(np.arange(8), np.arange(8), 3, 1.0, rng, discarded="all")
    with pytest.raises(ValueError, match="integers"):
        ldp_auc(np.arange(8) + 0.5, np.arange(8), 3, 1.0)
    with pytest.raises(PrivacyParameterError):
        ldp_auc(np.arange(8), np.arange(8), 3, float("inf"))
    with pytest.raises(TypeError, match="Generator"):
        simulate_ldp_auc(np.arange(8), np.arange(8), 3, 1.0, 7)
