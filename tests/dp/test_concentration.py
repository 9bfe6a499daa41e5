"""Tail bounds behind the published intervals (pairwise.dp.concentration, the ustat and LDP interval modules),
against closed forms and exact laws: Python fractions, direct pmf sums and scipy.stats."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom

from pairwise.dp.concentration import (
    IntervalWidth,
    bernstein_radius,
    binomial_band,
    check_alpha,
    chernoff_radius,
    dyadic_noise_log_mgf,
    finite_log_mgf,
    hoeffding_radius,
    krr_estimate_log_mgf,
)
from pairwise.dp.dyadic import DiscreteLaplaceParams, KaryRRParams, discrete_laplace_pmf, krr_estimator


@pytest.mark.parametrize("sigma,beta", [(1.0, 0.025), (0.003, 0.01), (250.0, 0.2)])
def test_chernoff_of_a_gaussian_mgf_is_the_closed_form(sigma, beta):
    """Lambda(s) = s^2 sigma^2 / 2 gives t = sigma sqrt(2 ln(1/beta)) exactly (up to the padding)."""
    t = chernoff_radius(lambda s: s * s * sigma * sigma / 2, beta, sigma)
    assert t == pytest.approx(sigma * math.sqrt(2 * math.log(1 / beta)), rel=1e-6)
    assert t >= sigma * math.sqrt(2 * math.log(1 / beta))  # never below the exact optimum


def test_chernoff_respects_s_max_and_refuses_bad_input():
    t = chernoff_radius(lambda s: s * s / 2, 0.05, 1.0, s_max=0.5)  # the optimum s = sqrt(2 ln 20) is out of reach
    assert (0.125 + math.log(20)) / 0.5 <= t <= 1.01 * (0.125 + math.log(20)) / 0.5
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError):
            chernoff_radius(lambda s: s, bad, 1.0)
    with pytest.raises(ValueError):
        chernoff_radius(lambda s: s, 0.1, 0.0)
    with pytest.raises(ValueError, match="no finite"):
        chernoff_radius(lambda s: np.full_like(s, np.inf), 0.1, 1.0)


def test_finite_log_mgf_is_the_direct_sum():
    v, p = [-2.0, 0.5, 3.0], [0.2, 0.5, 0.3]
    u = np.array([-1.3, 0.0, 0.7, 40.0])
    direct = [math.log(sum(pi * math.exp(x * (vi - 0.1)) for vi, pi in zip(v, p))) for x in u[:3]]
    assert np.allclose(finite_log_mgf(v, p, 0.1, u)[:3], direct, rtol=1e-12)
    assert math.isfinite(finite_log_mgf(v, p, 0.1, u)[3])  # no overflow at large u


@pytest.mark.parametrize("construction", ["difference", "signed"])
def test_dyadic_noise_log_mgf_against_the_exact_pmf(construction):
    params = DiscreteLaplaceParams(Fraction(1, 2), 2, 4, 8, (100, 80, 40, 10), construction=construction)
    vals, q, den = discrete_laplace_pmf(params)
    probs = np.asarray(q, dtype=np.float64) / float(den)
    mean = float(params.noise_mean)
    assert float((np.asarray(vals) * probs).sum()) == pytest.approx(mean, abs=1e-12)
    u = np.array([-0.9, -0.2, 0.05, 0.4, 1.1])
    direct = finite_log_mgf(np.asarray(vals, dtype=np.float64), probs, mean, u)
    assert np.allclose(dyadic_noise_log_mgf(params, u), direct, rtol=1e-10, atol=1e-13)
    assert abs(dyadic_noise_log_mgf(params, np.array([0.0]))[0]) < 1e-15


def test_krr_log_mgf_is_the_worst_value():
    params = KaryRRParams(Fraction(1), 3, 8, 120)
    values = (0, 1, -1)
    est = krr_estimator(params, values)
    slope, icpt = float(est.slope), float(est.intercept)
    u = np.array([-0.5, 0.3, 1.0])
    keep, other = float(params.keep_probability), float(params.other_probability)
    per_value = [
        finite_log_mgf([slope * v + icpt for v in values], [keep if j == i else other for j in range(3)], float(h), u)
        for i, h in enumerate(values)
    ]
    assert np.allclose(krr_estimate_log_mgf(params, values, slope, icpt, u), np.max(per_value, axis=0), rtol=1e-12)
    # centred: the debiased report has mean h for every h, so Lambda'(0) = 0 and Lambda(0) = 0
    assert np.allclose(krr_estimate_log_mgf(params, values, slope, icpt, np.array([0.0, 1e-6])), 0, atol=1e-9)


def test_bernstein_and_hoeffding_are_their_formulas():
    v, b, beta = 3.0, 0.5, 0.01
    L = math.log(1 / beta)
    t = bernstein_radius(v, b, beta)
    assert t * t / (2 * (v + b * t / 3)) == pytest.approx(L, rel=1e-6)  # exp(-t^2 / (2 (v + b t / 3))) = beta
    assert hoeffding_radius(4.0, beta) == pytest.approx(math.sqrt(4.0 * L / 2), rel=1e-8)
    assert bernstein_radius(v, 0.0, beta) == pytest.approx(math.sqrt(2 * v * L), rel=1e-8)


@pytest.mark.parametrize("n,p,beta", [(100, 0.5, 0.025), (6366, 0.595, 0.001), (40, 0.97, 0.1)])
def test_binomial_band_is_exact_and_tight(n, p, beta):
    lo, hi = binomial_band(n, p, beta)
    assert binom.cdf(lo - 1, n, p) <= beta < binom.cdf(lo, n, p)  # P(N < lo) <= beta, and lo + 1 would not be
    assert binom.sf(hi, n, p) <= beta < binom.sf(hi - 1, n, p)


def test_interval_width_and_alpha():
    iw = IntervalWidth(1.0, 2.0, 0.05, "m")
    assert iw.around(10.0) == [9.0, 12.0] and iw.width == 3.0
    assert iw.scaled(0.5) == IntervalWidth(0.5, 1.0, 0.05, "m")
    assert check_alpha(0.5) == 0.5
    for bad in (0, 0.51, -1, True, "0.1"):
        with pytest.raises(ValueError):
            check_alpha(bad)


# ----------------------------------------------------------------------------- the protocol intervals


def test_ustat_interval_is_the_joint_chernoff_bound():
    """Additive noise: the bound equals chernoff_radius on s^2 V/8 + M Lambda(s/M), V the permutation proxy."""
    from pairwise.circuits.noise import noisy_kernel
    from pairwise.protocols.ustat.interval import sampling_variance_proxy, ustat_interval

    nc = noisy_kernel(
        "gini", 8, False, epsilon=Fraction(1), sensitivity=100, mechanism="discrete_laplace", delta=Fraction(1, 2**40)
    )
    n, M = 201, 100
    V = sampling_variance_proxy("subsample", False, n, n, 1, 100.0)
    assert V == pytest.approx(4 * 100.0**2 * (n - 1) / (1 * 100**2))
    iw = ustat_interval(
        nc, R=100, design="subsample", two_sample=False, n_rows=n, n_cols=n, P=1, pairs=M, alpha=0.1, to_natural=0.5
    )
    sd = math.sqrt(V / 4 + float(nc.max_estimate_variance) / M)
    ref = chernoff_radius(lambda s: s * s * V / 8 + M * dyadic_noise_log_mgf(nc.params, s / M), 0.05, sd)
    assert iw.below == pytest.approx(ref * 0.5, rel=1e-9) and iw.above == pytest.approx(iw.below, rel=1e-9)
    assert sampling_variance_proxy("all", False, n, n, 1, 100.0) == 0.0
    assert sampling_variance_proxy("subsample", True, 30, 50, 2, 2.0) == pytest.approx(4 * 4.0 / (2 * 30))
    wider = ustat_interval(
        nc, R=100, design="subsample", two_sample=False, n_rows=n, n_cols=n, P=1, pairs=M, alpha=0.01, to_natural=0.5
    )
    assert wider.width > iw.width


def test_alg1_interval_pieces():
    from pairwise.protocols.ldp.interval import alg1_interval, histogram_band

    a = alg1_interval(0.5, 1.0, n=1000)
    b = alg1_interval(0.5, 1.0, n=4000)
    assert b.width < a.width and a.below == a.above
    assert alg1_interval(0.5, 2.0, n=1000).width == pytest.approx(2 * a.width, rel=1e-9)  # scales with R
    assert alg1_interval(0.0, 0.0, n=10).width == 0.0
    assert alg1_interval(0.9, 1.0, n=1000).width > alg1_interval(0.5, 1.0, n=1000).width
    two = alg1_interval(0.5, 1.0, n_pos=500, n_neg=500)
    assert two.width > 0
    with pytest.raises(ValueError):
        alg1_interval(1.0, 1.0, n=10)
    below, above, _ = histogram_band(1000, 4, 0.7, 0.05)
    lo, hi = binomial_band(1000, 0.7, (1 - 0.95**0.25) / 2)
    assert (below, above) == pytest.approx(((hi - 700) / 1000, (700 - lo) / 1000))
