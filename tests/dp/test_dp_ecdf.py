"""Tests of dp.smoothing and dp.ecdf: Eq. (3) smoothing against independent solvers,
the paper's Pois(3) smoothing result, Algorithm 1, ROC/AUC and Hosmer-Lemeshow."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest
import scipy.stats as st
from scipy.optimize import minimize

from pairwise.dp.accounting import PrivacyGuarantee
from pairwise.dp.ecdf import (
    _group_sums,
    _groups,
    auc,
    histogram,
    hosmer_lemeshow,
    hosmer_lemeshow_dp,
    hosmer_lemeshow_statistic,
    inverse_ecdf,
    inverse_ecdf_bisect,
    private_roc,
    probability_bins,
    roc_curve,
    simulate_poisson_counts,
)
from pairwise.dp.errors import EmptyDataError, InvalidDataError, PrivacyParameterError
from pairwise.dp.smoothing import _tree_l1, _tree_l2, path_matrix, smooth_ecdf
from pairwise.dp.tree import tree_mechanism


def noisy_ecdf(n_bins: int, eps: float, seed: int):
    rng = np.random.default_rng(seed)
    counts = simulate_poisson_counts(n_bins, 3.0, rng)
    rel = tree_mechanism(counts, eps, noise="laplace", rng=rng)
    return np.cumsum(counts) / counts.sum(), rel.ecdf


def is_monotone_in(v, lo=0.0, hi=1.0, tol=1e-12):
    return np.all(np.diff(v) >= -tol) and v.min() >= lo - tol and v.max() <= hi + tol


# ---------------------------------------------------------------- smoothing vs references


def test_p2_leaf_equals_constrained_least_squares():
    rng = np.random.default_rng(0)
    y = np.sort(rng.random(12)) + rng.normal(0, 0.3, 12)
    got = smooth_ecdf(y, 2)
    cons = [{"type": "ineq", "fun": lambda f, i=i: f[i + 1] - f[i]} for i in range(11)]
    ref = minimize(
        lambda f: np.sum((f - y) ** 2),
        np.clip(np.sort(y), 0, 1),
        method="SLSQP",
        bounds=[(0, 1)] * 12,
        constraints=cons,
        options={"ftol": 1e-14, "maxiter": 500},
    )
    assert np.allclose(got, ref.x, atol=1e-6)


def _l1_isotonic_dp(y, lo, hi):
    """Independent exact L1 bounded isotonic regression: dynamic programming over the
    candidate values {clip(y_i)} U {lo, hi} (an optimum always exists on them)."""
    cand = np.unique(np.concatenate([np.clip(y, lo, hi), [lo, hi]]))
    best = np.abs(y[0] - cand)
    for v in y[1:]:
        best = np.minimum.accumulate(best) + np.abs(v - cand)
    return best.min()


@pytest.mark.parametrize("seed", range(4))
def test_p1_leaf_objective_equals_dynamic_programming(seed):
    rng = np.random.default_rng(seed)
    y = np.linspace(-0.1, 1.1, 15) + rng.normal(0, 0.4, 15)
    got = smooth_ecdf(y, 1)
    assert is_monotone_in(got)
    assert np.sum(np.abs(got - y)) == pytest.approx(_l1_isotonic_dp(y, 0.0, 1.0), abs=1e-7)


def _tree_constraints_ok(f_hat, f_new, lo, hi):
    return is_monotone_in(f_new, lo, hi, tol=1e-7)


def test_p2_tree_equals_slsqp_in_node_space():
    """Eq. (3), p = 2: min ||nu||^2 with F' = F^ + Z nu monotone in [0, 1] (N = 8, 15 nodes)."""
    rng = np.random.default_rng(1)
    f_hat = np.linspace(0.05, 0.95, 8) + rng.normal(0, 0.2, 8)
    z = path_matrix(8).toarray()
    cons = [{"type": "ineq", "fun": lambda nu, i=i: (f_hat + z @ nu)[i + 1] - (f_hat + z @ nu)[i]} for i in range(7)]
    cons += [
        {"type": "ineq", "fun": lambda nu: (f_hat + z @ nu)[0]},
        {"type": "ineq", "fun": lambda nu: 1 - (f_hat + z @ nu)[-1]},
    ]
    ref = minimize(
        lambda nu: nu @ nu, np.zeros(15), method="SLSQP", constraints=cons, options={"ftol": 1e-15, "maxiter": 1000}
    )
    got = smooth_ecdf(f_hat, 2, space="tree")
    assert np.allclose(got, f_hat + z @ ref.x, atol=1e-6)


def test_tree_p1_and_p2_are_each_optimal_in_their_norm():
    """Cross-check of the two node-space solvers: each one's corrections are feasible and
    no larger than the other's in its own norm (L1 for the LP, L2 for the QP)."""
    rng = np.random.default_rng(2)
    f_hat = np.linspace(0, 1, 16) + rng.normal(0, 0.25, 16)
    rows = np.arange(16)
    f1, nu1 = _tree_l1(f_hat, rows, 16, 0.0, 1.0)
    f2, nu2 = _tree_l2(f_hat, rows, 16, 0.0, 1.0, 1e-10)
    z = path_matrix(16).toarray()
    for f, nu in ((f1, nu1), (f2, nu2)):
        assert np.allclose(f, f_hat + z @ nu) and is_monotone_in(f, tol=1e-8)
    assert np.abs(nu1).sum() <= np.abs(nu2).sum() + 1e-8
    assert nu2 @ nu2 <= nu1 @ nu1 + 1e-8
    # already feasible input: no correction at all
    assert np.allclose(smooth_ecdf(np.linspace(0.1, 0.9, 16), 1, space="tree"), np.linspace(0.1, 0.9, 16))


@pytest.mark.parametrize("p,space", list(product([1, 2], ["leaf", "tree"])))
def test_all_smoothings_are_monotone_bounded_and_support_subsets(p, space):
    _, f_hat = noisy_ecdf(64, 0.3, seed=p)
    out = smooth_ecdf(f_hat, p, space=space)
    assert out.shape == f_hat.shape and is_monotone_in(out)
    sub = np.array([3, 10, 11, 40, 63])
    out_sub = smooth_ecdf(f_hat, p, space=space, subset=sub)
    assert out_sub.shape == (5,) and is_monotone_in(out_sub)
    counts_scale = smooth_ecdf(f_hat * 1000, p, space=space, lower=0, upper=1000)
    assert np.allclose(counts_scale / 1000, out, atol=1e-5)


@pytest.mark.parametrize("eps", [0.2, 0.5, 1.0, 2.0])
def test_p2_smoothing_lowers_error_on_pois3(eps):
    """Sec. 6.3 / Figure 2: on X_pois(3) with N = 2^15, p = 2 smoothing lowers the
    squared error of the DP ECDF for eps >= 0.2 (3 seeded runs each)."""
    for seed in range(3):
        f, f_hat = noisy_ecdf(2**15, eps, seed=100 * seed + int(10 * eps))
        before = np.sum((f_hat - f) ** 2)
        after = np.sum((smooth_ecdf(f_hat, 2) - f) ** 2)
        assert after < before


def test_tree_space_p2_smoothing_lowers_error():
    f, f_hat = noisy_ecdf(2**12, 0.5, seed=7)
    after = np.sum((smooth_ecdf(f_hat, 2, space="tree") - f) ** 2)
    assert after < np.sum((f_hat - f) ** 2)


def test_smoothing_errors():
    with pytest.raises(PrivacyParameterError, match="p must"):
        smooth_ecdf([0.1, 0.2], 3)
    with pytest.raises(PrivacyParameterError, match="space"):
        smooth_ecdf([0.1, 0.2], 2, space="nodes")
    with pytest.raises(EmptyDataError):
        smooth_ecdf([], 2)
    with pytest.raises(InvalidDataError):
        smooth_ecdf([0.1, np.nan], 2)
    with pytest.raises(InvalidDataError):
        smooth_ecdf([0.1, 0.2, 0.3], 2, subset=[2, 1])


# ---------------------------------------------------------------- inverse ECDF (Alg. 1)


def test_inverse_ecdf_matches_quantile_definition():
    rng = np.random.default_rng(3)
    counts = rng.poisson(2, 100)
    f = np.cumsum(counts) / counts.sum()
    qs = rng.random(500)
    got = inverse_ecdf(f, qs)
    assert np.array_equal(got, np.searchsorted(f, qs, side="left"))
    tau = np.linspace(-3, 3, 100)
    assert inverse_ecdf(f, 0.5, thresholds=tau) == tau[np.searchsorted(f, 0.5)]
    assert inverse_ecdf(f, 2.0) == 99  # never reached: last threshold


def test_inverse_ecdf_on_noisy_function_returns_a_crossing():
    _, f_hat = noisy_ecdf(256, 0.5, seed=4)
    for q in np.linspace(0.05, 0.95, 19):
        i = inverse_ecdf(f_hat, q)
        assert f_hat[i] >= q or i == 255
        assert i == 0 or f_hat[i - 1] < q or i == 255


def test_inverse_ecdf_bisect_is_algorithm_1():
    got = inverse_ecdf_bisect(lambda m: m**2, 0.25, 0.0, 1.0, precision=1e-9)
    assert got == pytest.approx(0.5, abs=1e-9)
    with pytest.raises(PrivacyParameterError):
        inverse_ecdf_bisect(lambda m: m, 0.5, precision=0)


# ---------------------------------------------------------------- ROC and AUC (Sec. 5.1)


def test_auc_from_exact_ecdfs_equals_mann_whitney():
    rng = np.random.default_rng(5)
    pos = rng.integers(0, 40, 300)  # positives score low
    neg = rng.integers(10, 64, 500)
    fpr, tpr = roc_curve(np.cumsum(histogram(pos, 64)), np.cumsum(histogram(neg, 64)))
    u = st.mannwhitneyu(neg, pos).statistic  # pairs neg > pos, ties 1/2
    assert auc(fpr, tpr) == pytest.approx(u / (pos.size * neg.size), abs=1e-12)
    brute = np.mean((pos[:, None] < neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))
    assert auc(fpr, tpr) == pytest.approx(brute, abs=1e-12)
    assert fpr[0] == tpr[0] == 0.0 and fpr[-1] == tpr[-1] == 1.0


def _roc_auc_error_sd(pos_cum, neg_cum, scale: float, L: int) -> float:
    """Closed-form sd of the unsmoothed ROC's AUC error when both trees carry DL(scale) node noise.

    AUC = n^T B p is bilinear in the cumulative counts p, n (with the (0, 0)
    point prepended); with independent errors e_p, e_n of covariance
    s2 M M^T (M the Theorem 3.1 path matrix, s2 = 2a/(1-a)^2),
    Var = u_p^T S u_p + u_n^T S u_n + tr(B S B^T S), u_p = B^T n, u_n = B p.
    """
    N = pos_cum.size
    a = math.exp(-1.0 / scale)
    s2 = 2 * a / (1 - a) ** 2
    M = np.zeros((N, 2 * N - 1))
    offs = np.concatenate([[0], np.cumsum([N >> l for l in range(L + 1)])])
    for l in range(L + 1):
        M[np.arange(N), offs[l] + (np.arange(N) >> l)] = 1
    S = np.zeros((N + 1, N + 1))
    S[1:, 1:] = s2 * M @ M.T
    B = np.zeros((N + 1, N + 1))  # AUC = sum_j (n_j - n_{j-1}) (p_{j-1} + p_j) / 2, over (0, 0) and the N points
    for j in range(1, N + 1):
        B[j, j - 1] += 0.5
        B[j, j] += 0.5
        B[j - 1, j - 1] -= 0.5
        B[j - 1, j] -= 0.5
    B /= pos_cum[-1] * neg_cum[-1]
    p = np.concatenate([[0.0], pos_cum])
    n = np.concatenate([[0.0], neg_cum])
    up, un = B.T @ n, B @ p
    return math.sqrt(up @ S @ up + un @ S @ un + np.trace(B @ S @ B.T @ S))


def test_private_roc_guarantee_and_accuracy():
    """private_roc at eps = 1 on 1024 bins, OS CSPRNG noise (no seed to be lucky with).

    Accuracy of the unsmoothed curve: |AUC error| <= 4.89 sd, sd the closed form
    of :func:`_roc_auc_error_sd` (normal: a linear combination of ~4000 node
    noises plus a small bilinear term), i.e. alpha = 1e-6.  Smoothing (leaf
    space, p = 2) is the Euclidean projection onto the monotone curves in
    [0, n], a convex set that holds the exact counts, so it never moves the
    cumulative counts further from them: checked as an inequality.
    """
    rng = np.random.default_rng(6)  # only the data
    pos = histogram(rng.integers(0, 600, 3000), 1024)
    neg = histogram(rng.integers(300, 1024, 5000), 1024)
    cp, cn = np.cumsum(pos).astype(float), np.cumsum(neg).astype(float)
    exact_fpr, exact_tpr = roc_curve(cp, cn)
    exact_auc = auc(exact_fpr, exact_tpr)
    rel = private_roc(pos, neg, 1.0)
    assert rel.guarantee == PrivacyGuarantee(1.0)
    assert rel.positives.epsilon == 0.5 and rel.negatives.epsilon == 0.5
    assert is_monotone_in(rel.tpr) and is_monotone_in(rel.fpr)
    raw = private_roc(pos, neg, 1.0, smoothing=None)
    sd = _roc_auc_error_sd(cp, cn, scale=11 / 0.5, L=10)
    assert 1e-3 < sd < 0.05
    assert abs(raw.auc - exact_auc) <= st.norm.isf(0.5e-6) * sd
    for r in (rel.positives, rel.negatives):
        exact = cp if r is rel.positives else cn
        sm = smooth_ecdf(r.cumulative.astype(float), 2, lower=0.0, upper=float(r.n))
        assert np.linalg.norm(sm - exact) <= np.linalg.norm(r.cumulative - exact) * (1 + 1e-9)
    loose = private_roc(pos, neg, 1e6, smoothing=None, mechanism="hierarchical")
    assert abs(loose.auc - exact_auc) < 1e-4


def test_roc_errors():
    with pytest.raises(InvalidDataError):
        roc_curve([1, 2], [1, 2, 3])
    with pytest.raises(EmptyDataError):
        roc_curve([0, 0], [1, 2])
    with pytest.raises(InvalidDataError):
        private_roc([1, 2], [1, 2, 3], 1.0)
    with pytest.raises(PrivacyParameterError):
        private_roc([1, 2], [1, 2], 1.0, mechanism="other")


# ---------------------------------------------------------------- Hosmer-Lemeshow (Alg. 2)


def _hl_reference(p, y, Q, L):
    """Loop implementation: grid bins, first bin where the ECDF reaches q/Q, Eq. (5)."""
    size = 2**L
    bins = [min(int(math.floor(v * size)), size - 1) for v in p]
    n = len(p)
    cuts = []
    for q in range(1, Q):
        running = 0
        for b in range(size):
            running += sum(1 for x in bins if x == b)
            if running / n >= q / Q:
                cuts.append(b)
                break
    edges = [-1] + cuts + [size - 1]
    total = 0.0
    for g in range(Q):
        members = [i for i, b in enumerate(bins) if edges[g] < b <= edges[g + 1]]
        o1 = sum(y[i] for i in members)
        e1 = sum(p[i] for i in members)
        o0 = len(members) - o1
        e0 = len(members) - e1
        total += (o1 - e1) ** 2 / max(e1, 0.5) + (o0 - e0) ** 2 / max(e0, 0.5)
    return total


def make_calibration_data(n, seed, miscalibrated=False):
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 5, n)
    truth = np.clip(p * (1.4 if miscalibrated else 1.0), 0, 1)
    y = (rng.random(n) < truth).astype(np.int64)
    return p, y


def test_hosmer_lemeshow_matches_loop_reference():
    p, y = make_calibration_data(2000, 0)
    assert hosmer_lemeshow(p, y, Q=10, L=8) == pytest.approx(_hl_reference(p, y, 10, 8), rel=1e-10)


def test_hosmer_lemeshow_statistic_formula():
    assert hosmer_lemeshow_statistic([3, 5], [2.5, 5.5], [7, 5], [7.5, 4.5]) == pytest.approx(
        0.25 / 2.5 + 0.25 / 5.5 + 0.25 / 7.5 + 0.25 / 4.5
    )


def test_hl_replace_one_changes_at_most_two_groups_by_one():
    """The sensitivity behind Theorem 5.1's 8 eps': for fixed cuts, replacing one record
    changes O1, E1, O0, E0 in at most two groups, each by at most 1."""
    p, y = make_calibration_data(500, 1)
    cuts = np.array([50, 120, 200, 300, 400, 500, 600, 700, 900])
    rng = np.random.default_rng(2)
    base = np.array(_group_sums(_groups(probability_bins(p, 10), cuts), p, y, 10))
    for _ in range(200):
        i = rng.integers(500)
        p2, y2 = p.copy(), y.copy()
        p2[i], y2[i] = rng.random(), rng.integers(2)
        new = np.array(_group_sums(_groups(probability_bins(p2, 10), cuts), p2, y2, 10))
        diff = np.abs(new - base)
        assert diff.max() <= 1 + 1e-12
        assert np.count_nonzero(diff.sum(axis=0) > 1e-12) <= 2


def test_hosmer_lemeshow_dp_guarantee_and_accuracy():
    p, y = make_calibration_data(20_000, 3, miscalibrated=True)
    exact = hosmer_lemeshow(p, y, Q=10, L=10)
    rel = hosmer_lemeshow_dp(p, y, 1.0, rng=np.random.default_rng(4))
    assert rel.guarantee == PrivacyGuarantee(1.0)
    assert rel.epsilon_prime == pytest.approx(1.0 / 19)
    assert rel.ecdf.scale >= 19.0 and rel.ecdf.guarantee.epsilon == pytest.approx(11 / 19)
    assert rel.cut_bins.shape == (9,) and np.all(np.diff(rel.cut_bins) >= 0)
    assert abs(rel.statistic - exact) / exact < 0.5  # noisy but informative at n = 20000
    near_exact = hosmer_lemeshow_dp(p, y, 1e7, smoothing=None)  # exact CSPRNG noise, negligible
    assert near_exact.statistic == pytest.approx(exact, rel=1e-3)


def test_hosmer_lemeshow_errors():
    with pytest.raises(InvalidDataError, match="probabilities"):
        hosmer_lemeshow([0.2, 1.2], [0, 1])
    with pytest.raises(InvalidDataError, match="labels"):
        hosmer_lemeshow([0.2, 0.3], [0, 2])
    with pytest.raises(EmptyDataError):
        hosmer_lemeshow_dp([], [], 1.0)
    with pytest.raises(PrivacyParameterError):
        hosmer_lemeshow_dp([0.2], [1], 0.0)
    with pytest.raises(PrivacyParameterError, match="Q"):
        hosmer_lemeshow([0.2], [1], Q=1)


@pytest.mark.parametrize("smoothing", [None, 2])
def test_hosmer_lemeshow_dp_neighbours_publish_post_processing_of_noisy_counts_only(smoothing):
    """Neighbouring datasets (one patient's probability and label replaced), the same seed (same noise).

    Everything Algorithm 2 publishes is a function of the noisy tree and the noisy group statistics:
    the tree's noise does not depend on the data (the releases differ by the exact difference), the cuts
    are Algorithm 1 on the released ECDF (not on the exact one), each group statistic's noise is the
    same on both, and with equal cuts the exact statistics differ in at most 2 groups by at most 1 (in
    2^-16 units for E): the 8 eps' of Theorem 5.1.
    """
    from pairwise.dp.ecdf import EXPECTED_GRID_BITS

    rng = np.random.default_rng(12)
    n, L, Q, eps = 400, 6, 5, 2.0
    p = rng.beta(2, 3, n)
    y = (rng.random(n) < p).astype(int)
    p2, y2 = p.copy(), y.copy()
    p2[0], y2[0] = 0.999, 1 - y[0]
    grid = 1 << EXPECTED_GRID_BITS

    def exact_stats(pp, yy, cuts):
        g = np.searchsorted(np.sort(cuts), probability_bins(pp, L), side="left")
        pg = np.rint(pp * grid)
        return np.array(
            [
                np.bincount(g, weights=yy, minlength=Q),
                np.bincount(g, weights=1 - yy, minlength=Q),
                np.bincount(g, weights=pg, minlength=Q),
                np.bincount(g, weights=grid - pg, minlength=Q),
            ]
        )

    out = []
    for pp, yy in ((p, y), (p2, y2)):
        rel = hosmer_lemeshow_dp(pp, yy, eps, Q=Q, L=L, smoothing=smoothing, rng=np.random.default_rng(99))
        assert rel.guarantee == PrivacyGuarantee(eps) and rel.epsilon_prime == pytest.approx(eps / (L + 9))
        assert rel.ecdf.guarantee.epsilon + 8 * rel.epsilon_prime == pytest.approx(eps)
        f = rel.ecdf.cumulative / n
        f = f if smoothing is None else smooth_ecdf(f, smoothing)
        assert np.array_equal(rel.cut_bins, np.asarray(inverse_ecdf(f, np.arange(1, Q) / Q)))  # from the release
        exact_cum = np.cumsum(np.bincount(probability_bins(pp, L), minlength=1 << L))
        published = np.array([rel.o1, rel.o0, np.rint(rel.e1 * grid), np.rint(rel.e0 * grid)])
        out.append((rel.ecdf.cumulative - exact_cum, published - exact_stats(pp, yy, rel.cut_bins), rel.cut_bins))
    (tree_a, noise_a, cuts_a), (tree_b, noise_b, cuts_b) = out
    assert np.array_equal(tree_a, tree_b) and np.abs(tree_a).max() > 0  # data-independent, non-zero noise
    assert np.array_equal(noise_a, noise_b) and np.abs(noise_a).max() > 0
    exact_cut = np.asarray(
        inverse_ecdf(np.cumsum(np.bincount(probability_bins(p, L), minlength=1 << L)) / n, np.arange(1, Q) / Q)
    )
    assert not np.array_equal(cuts_a, exact_cut)  # the noise moved the cuts: a test that can fail
    diff = np.abs(exact_stats(p2, y2, cuts_a) - exact_stats(p, y, cuts_a))
    assert np.count_nonzero(diff.sum(axis=0)) <= 2 and diff[:2].max() <= 1 and diff[2:].max() <= grid


def test_hosmer_lemeshow_expected_counts_are_published_on_the_documented_grid():
    """E1, E0 are noisy sums on the 2^-16 grid (module docstring): every published value is a multiple of 2^-16
    and, at a huge epsilon, within n 2^-17 of the exact sums of probabilities."""
    rng = np.random.default_rng(5)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(int)
    rel = hosmer_lemeshow_dp(p, y, 1e9, Q=4, L=6, smoothing=None, rng=np.random.default_rng(1))
    for e in (rel.e1, rel.e0):
        assert np.array_equal(np.rint(e * 2**16), e * 2**16)
    g = np.searchsorted(np.sort(rel.cut_bins), probability_bins(p, 6), side="left")
    assert np.allclose(rel.e1, np.bincount(g, weights=p, minlength=4), atol=300 * 2.0**-17)
