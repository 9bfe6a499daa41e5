"""The interval maths of :mod:`pairwise.dp.ecdf_intervals` against exact pmfs, dense matrices and brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pairwise.dp.ecdf_intervals import (
    NoiseLaw,
    auc_estimate,
    check_alpha,
    chernoff_radii,
    chernoff_radius_weights,
    effective_alpha,
    envelope,
    exact_sum_radius,
    product_moment,
    quantile_interval,
)
from pairwise.dp.errors import PrivacyParameterError


def _dl_pmf(a: float, K: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    K = int(80 / -math.log(a)) + 10 if K is None else K  # tail mass below e^-80
    z = np.arange(-K, K + 1)
    p = a ** np.abs(z)
    return z, p / p.sum()


@pytest.mark.parametrize("a", [0.3, math.exp(-1 / 11)])
def test_noise_law_moments_and_log_mgf_against_the_exact_pmf(a):
    z, p = _dl_pmf(a)
    law = NoiseLaw(a)
    var = float(np.dot(p, z.astype(float) ** 2))
    assert law.variance == pytest.approx(var, rel=1e-9)
    assert law.kappa4 == pytest.approx(float(np.dot(p, z.astype(float) ** 4)) - 3 * var * var, rel=1e-8)
    u = 0.5 * law.u_max
    assert float(law.log_mgf(u)) == pytest.approx(math.log(float(np.dot(p, np.exp(u * z)))), rel=1e-9)


@pytest.mark.parametrize("m", [1, 3, 7])
def test_exact_sum_radius_is_the_smallest_valid_radius(m):
    a = 0.6
    z, p = _dl_pmf(a, 200)
    pmf = p
    for _ in range(m - 1):
        pmf = np.convolve(pmf, p)
    s = np.arange(-(pmf.size // 2), pmf.size // 2 + 1)
    for beta in (0.05, 0.01):
        q = exact_sum_radius(NoiseLaw(a), m, beta)
        assert pmf[np.abs(s) > q].sum() <= beta
        assert pmf[np.abs(s) > q - 1].sum() > beta * (1 - 1e-6)  # smallest up to the one-sided split
        r = chernoff_radii(NoiseLaw(a), [float(m)], [1.0], beta / 2)[0]  # Chernoff: valid, so at least as wide
        assert r >= q - 1 and pmf[np.abs(s) > r].sum() <= beta


def test_chernoff_of_equal_weights_equals_the_norm_form_and_scales():
    law = NoiseLaw(0.8)
    w = np.full(9, 0.5)
    assert chernoff_radius_weights(law, w, 0.01) == pytest.approx(
        chernoff_radii(law, [float((w**2).sum())], [0.5], 0.01)[0], rel=1e-6
    )
    assert chernoff_radius_weights(law, 2 * w, 0.01) == pytest.approx(
        2 * chernoff_radius_weights(law, w, 0.01), rel=1e-6
    )
    assert chernoff_radius_weights(law, np.zeros(3), 0.01) == 0.0


def test_alpha_checks_and_the_tv_budget():
    for bad in (0, 0.6, -1, True, "0.05"):
        with pytest.raises(PrivacyParameterError):
            check_alpha(bad)
    assert effective_alpha(0.05, NoiseLaw(0.5, tv=1e-6), 1000) == pytest.approx(0.049)
    with pytest.raises(PrivacyParameterError):
        effective_alpha(0.05, NoiseLaw(0.5, tv=1e-3), 100)


def test_quantile_interval_and_envelope_on_exact_counts():
    cum = np.array([1, 3, 3, 6, 10], dtype=float)
    assert quantile_interval(cum, np.zeros(5), 5.0) == (3, 3)  # first t with C(t) >= 5
    lo, hi = quantile_interval(cum, np.full(5, 2.0), 5.0)
    assert (lo, hi) == (1, 4)  # C(3) in [4, 8] may still be below 5
    lo, hi = envelope([0.2, 0.1, 0.5], [0.4, 0.9, 0.3])
    assert lo.tolist() == [0.2, 0.2, 0.5] and hi.tolist() == [0.3, 0.3, 0.3]


def test_auc_estimate_is_the_pair_count_on_exact_counts():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 16, 30), rng.integers(0, 16, 45)
    brute = sum((x > y) + 0.5 * (x == y) for x in a for y in b) / (30 * 45)
    ca, cb = np.cumsum(np.bincount(a, minlength=16)), np.cumsum(np.bincount(b, minlength=16))
    assert auc_estimate(ca, cb, 75) == pytest.approx(brute, abs=1e-12)
    assert stats.mannwhitneyu(a, b).statistic / (30 * 45) == pytest.approx(brute, abs=1e-12)  # scipy agrees


def test_product_moment_against_dense_matrices_and_simulation():
    rng = np.random.default_rng(4)
    N = 8
    A, B = rng.normal(size=(N, 12)), rng.normal(size=(N, 10))
    Ca, Cb = A @ A.T, B @ B.T
    D = np.eye(N) - np.eye(N, k=-1)
    Mid = (np.eye(N) + np.eye(N, k=-1)) / 2
    dense = float(np.sum((D @ Ca @ D.T) * (Mid @ Cb @ Mid.T)))
    assert product_moment(Ca, Cb) == pytest.approx(dense, rel=1e-12)
    za, zb = rng.normal(size=(80_000, 12)), rng.normal(size=(80_000, 10))
    t = np.sum((za @ A.T @ D.T) * (zb @ B.T @ Mid.T), axis=1)
    assert np.mean(t * t) == pytest.approx(dense, rel=0.05)


def test_effective_alpha_refuses_exactly_nothing_left():
    """Kills ``out >= 0``: a distance that uses up alpha exactly leaves no interval."""
    with pytest.raises(PrivacyParameterError):
        effective_alpha(0.25, NoiseLaw(0.5, tv=2.0**-6), 16)  # 16 * 2^-6 = 0.25 exactly


def test_two_law_radius_is_chernoff_over_both_weight_vectors():
    """Kills dropped weights in the class-size radius: with one law it is Chernoff over the concatenation."""
    from pairwise.dp.ecdf_intervals import _two_law_radius

    law = NoiseLaw(0.7)
    wa, wb = np.array([0.5, 0.5, 0.0]), np.array([0.5, 0.25, 0.5])
    assert _two_law_radius(law, wa, law, wb, 0.01) == pytest.approx(
        chernoff_radius_weights(law, np.concatenate([wa, wb]), 0.01), rel=1e-6
    )
    assert _two_law_radius(law, wa, NoiseLaw(0.0), wb, 0.01) == pytest.approx(
        chernoff_radius_weights(law, wa, 0.01), rel=1e-6
    )  # a noiseless second law adds nothing


def test_auc_interval_is_the_documented_union_bound():
    """The AUC interval recomputed from its documented pieces (kills a changed alpha share of any term)."""
    import math as m

    from pairwise.dp.ecdf_intervals import _diff, _mid, _two_law_radius, auc_interval
    from pairwise.dp.tree import path_adjoint

    rng = np.random.default_rng(6)
    law = NoiseLaw(0.6)
    ca = np.cumsum(rng.integers(0, 9, 8)).astype(float) + rng.integers(-2, 3, 8)
    cb = np.cumsum(rng.integers(0, 9, 8)).astype(float) + rng.integers(-2, 3, 8)
    n, alpha, T = 70, 0.1, 123.0
    r = auc_interval(
        ca,
        cb,
        n,
        alpha,
        law_above=law,
        law_below=law,
        adj_above=path_adjoint,
        adj_below=path_adjoint,
        product_second_moment=T,
    )
    b1, b2, b3, b4 = (alpha * s for s in (0.35, 0.35, 0.15, 0.15))
    Ha, Gb = _diff(ca), _mid(cb)
    w1 = path_adjoint(np.concatenate([Ha[:-1] / 2 + Ha[1:] / 2, [Ha[-1] / 2]]))
    w2 = path_adjoint(np.concatenate([Gb[:-1] - Gb[1:], [Gb[-1]]]))
    rU = chernoff_radius_weights(law, w1, b1 / 2) + chernoff_radius_weights(law, w2, b2 / 2) + m.sqrt(T / b3)
    e = np.eye(1, 8, 7).ravel()
    rP = _two_law_radius(law, path_adjoint(e) / 2, law, path_adjoint(e) / 2, b4 / 2)
    assert r.radius_pairs == pytest.approx(rU, rel=1e-6) and r.radius_total == pytest.approx(rP, rel=1e-6)
    na = (ca[-1] + n - cb[-1]) / 2
    lo_p, hi_p = max(na - rP, 1.0), min(na + rP, n - 1.0)
    d = [lo_p * (n - lo_p), hi_p * (n - hi_p)] + ([n * n / 4] if lo_p <= n / 2 <= hi_p else [])
    U = float(np.dot(Ha, Gb))
    assert r.interval[0] == pytest.approx(max(0.0, (U - rU) / max(d)), rel=1e-6)
    assert r.interval[1] == pytest.approx(min(1.0, (U + rU) / min(d)), rel=1e-6)
