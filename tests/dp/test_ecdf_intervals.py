"""The interval maths of :mod:`pairwise.dp.ecdf_intervals` against exact pmfs, dense matrices and brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pairwise.dp.ecdf_intervals import (
    NoiseLaw,
    auc_estimate,
    chernoff_radii,
    chernoff_radius_weights,
    check_alpha,
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
        chernoff_radii(law, [float((w ** 2).sum())], [0.5], 0.01)[0], rel=1e-6)
    assert chernoff_radius_weights(law, 2 * w, 0.01) == pytest.approx(2 * chernoff_radius_weights(law, w, 0.01),
                                                                      rel=1e-6)
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
