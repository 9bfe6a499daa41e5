"""Tests of the one-bit LDP QMLE (protocols.qmle): mechanism, ALD model, fits, Sec. 5 experiment."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.integrate
import scipy.optimize
import scipy.stats

from pairwise.dp.errors import PrivacyParameterError
from pairwise.dp.mechanisms import OneBitFlip
from pairwise.protocols.datasets import load_dataset
from pairwise.protocols.ldp.qmle import (
    BitModel,
    ald_cdf,
    ald_pdf,
    check_loss,
    fit_qmle_private,
    fit_qmle_public,
    flip_probability,
    public_loglik,
    quantile_regression,
    run_experiment_qmle_covariance,
    simulate_submit_private_x,
    simulate_submit_public_x,
    submit_private_x,
    submit_public_x,
    truncate,
    truncated_mean_fraction,
)


def _scipy_ald(tau: float, mu: float = 0.0, sigma: float = 1.0):
    """Our ALD(mu, sigma, tau) is scipy's laplace_asymmetric with kappa = sqrt(tau/(1-tau))."""
    kappa = math.sqrt(tau / (1 - tau))
    return scipy.stats.laplace_asymmetric(kappa, loc=mu, scale=sigma / math.sqrt(tau * (1 - tau)))


def _sample_ald(rng, mu, sigma, tau):
    d = _scipy_ald(tau, 0.0, sigma)
    return mu + d.rvs(size=np.shape(mu), random_state=rng)


# --------------------------------------------------------------------------- model


@pytest.mark.parametrize("tau", [0.1, 0.5, 0.8])
def test_ald_cdf_pdf_against_scipy(tau):
    u = np.linspace(-8, 8, 101)
    d = _scipy_ald(tau)
    np.testing.assert_allclose(ald_cdf(u, tau), d.cdf(u), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ald_pdf(u, tau), d.pdf(u), rtol=1e-12, atol=1e-15)
    assert ald_cdf(np.array([0.0]), tau)[0] == pytest.approx(tau)  # mu is the tau-quantile


@pytest.mark.parametrize("mu", [-3.0, 0.7, 2.5, 9.0])
def test_truncated_mean_matches_numerical_integration(mu):
    """m(mu) = E[(T(Y) - a)/(b - a)]: the three cases of App. C.3 vs quad on scipy's density."""
    a, b, tau, sigma = 0.0, 4.0, 0.3, 1.3
    d = _scipy_ald(tau, mu, sigma)
    inner, _ = scipy.integrate.quad(lambda y: y * d.pdf(y), a, b, points=[mu] if a < mu < b else None)
    expect = (a * d.cdf(a) + inner + b * d.sf(b) - a) / (b - a)
    assert truncated_mean_fraction(np.array([mu]), a, b, tau, sigma)[0] == pytest.approx(expect, abs=1e-9)


def test_g_derivatives_by_finite_differences():
    m = BitModel(-1.0, 3.0, 1.2, 0.25, 0.7)
    mu = np.linspace(-4, 6, 41) + 0.013
    g, g1, g2 = m.g(mu)
    h = 1e-5
    gp, g1p, _ = m.g(mu + h)
    gm, g1m, _ = m.g(mu - h)
    np.testing.assert_allclose(g1, (gp - gm) / (2 * h), rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(g2, (g1p - g1m) / (2 * h), rtol=1e-5, atol=1e-9)
    e = math.exp(1.2)
    assert np.all((g > 1 / (e + 1)) & (g < e / (e + 1)))  # Lemma 1: bounded away from 0 and 1
    assert np.all(g1 > 0)  # Lemma 2: strictly increasing


def test_flip_probability_and_truncation_match_dp_mechanism():
    y = np.array([-5.0, 0.0, 1.0, 2.5, 9.0])
    np.testing.assert_array_equal(truncate(y, 0.0, 4.0), [0, 0, 1, 2.5, 4])
    mech = OneBitFlip(0.9, 0.0, 4.0)
    np.testing.assert_allclose(flip_probability(y, 0.0, 4.0, 0.9), mech.prob_one(mech.truncate(y)), rtol=1e-10)


def test_csprng_submission_distribution():
    """Users at the bounds send 1 w.p. e^eps/(1+e^eps) and 1/(1+e^eps): binomial tests, alpha = 1e-6."""
    eps = 1.0
    n = 4000
    z_hi = submit_public_x(np.full(n, 100.0), 0.0, 10.0, eps)  # truncated to the upper bound
    z_lo = submit_public_x(np.full(n, -3.0), 0.0, 10.0, eps)
    p = math.exp(eps) / (1 + math.exp(eps))
    assert scipy.stats.binomtest(int(z_hi.sum()), n, p).pvalue > 1e-6
    assert scipy.stats.binomtest(int(z_lo.sum()), n, 1 - p).pvalue > 1e-6
    z, w = submit_private_x(np.full(n, 10.0), np.zeros((n, 1)), (0.0, 10.0), [(0.0, 1.0)], 2.0)
    # budget split: eps/2 = 1 per bit
    assert scipy.stats.binomtest(int(z.sum()), n, p).pvalue > 1e-6
    assert scipy.stats.binomtest(int(w.sum()), n, 1 - p).pvalue > 1e-6


# --------------------------------------------------------------------------- estimation


def test_public_fit_is_the_maximizer_of_the_loglik():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 5, 3000)
    y = _sample_ald(rng, 1 + 0.5 * x, 0.5, 0.5)
    z = simulate_submit_public_x(y, -1, 6, 1.5, rng)
    res = fit_qmle_public(z, x, -1, 6, 1.5, 0.5, 0.5)
    assert res.converged
    f = lambda t: -public_loglik(t, z, x, -1, 6, 1.5, 0.5, 0.5)  # noqa: E731
    assert res.loglik == pytest.approx(-f(res.theta), rel=1e-10)
    grad = scipy.optimize.approx_fprime(res.theta, f, 1e-6)
    assert np.all(np.abs(grad) < 1e-2 * np.abs(f(res.theta)) / 3000)
    for d in ([0.05, 0], [0, 0.02], [-0.05, 0.01]):
        assert f(res.theta + np.array(d)) > f(res.theta)


def test_public_qmle_consistent_under_the_model_seeded():
    """Correct model (ALD responses): theta_hat within 4.42 sandwich SEs of theta (alpha 1e-5 each)."""
    rng = np.random.default_rng(3)
    theta, tau, sigma = np.array([3.0, 0.8]), 0.3, 1.0
    x = rng.uniform(0, 10, 40000)
    y = _sample_ald(rng, theta[0] + theta[1] * x, sigma, tau)
    z = simulate_submit_public_x(y, 0.0, 15.0, 1.0, rng)
    res = fit_qmle_public(z, x, 0.0, 15.0, 1.0, tau, sigma)
    assert np.all(np.abs(res.theta - theta) < 4.42 * res.std_errors)
    assert res.std_errors[1] < 0.05


def test_sandwich_standard_errors_are_calibrated_seeded():
    """Across 40 seeded replications the empirical SD matches the sandwich SE (ratio within chi-square limits)."""
    rng = np.random.default_rng(4)
    theta, tau, sigma = np.array([3.0, 0.8]), 0.5, 1.0
    est, ses = [], []
    for _ in range(40):
        x = rng.uniform(0, 10, 3000)
        y = _sample_ald(rng, theta[0] + theta[1] * x, sigma, tau)
        z = simulate_submit_public_x(y, 0.0, 15.0, 2.0, rng)
        r = fit_qmle_public(z, x, 0.0, 15.0, 2.0, tau, sigma)
        est.append(r.theta)
        ses.append(r.std_errors)
    ratio = np.std(est, axis=0, ddof=1) / np.mean(ses, axis=0)
    lo = math.sqrt(scipy.stats.chi2.ppf(1e-5, 39) / 39)
    hi = math.sqrt(scipy.stats.chi2.ppf(1 - 1e-5, 39) / 39)
    assert np.all((ratio > lo * 0.85) & (ratio < hi * 1.15))


def test_private_x_qmle_consistent_when_x_is_on_the_corners_seeded():
    """Sec. 4.2 with x uniform on {c, d}: the provisional distribution is right, so theta_hat -> theta."""
    rng = np.random.default_rng(5)
    theta, tau, sigma = np.array([3.0, 0.8]), 0.5, 1.0
    x = rng.choice([0.0, 10.0], 40000)
    y = _sample_ald(rng, theta[0] + theta[1] * x, sigma, tau)
    z, w = simulate_submit_private_x(y, x, (0.0, 15.0), [(0.0, 10.0)], 3.0, rng)
    res = fit_qmle_private(z, w, (0.0, 15.0), [(0.0, 10.0)], 3.0, tau, sigma)
    assert res.extra["epsilon_per_bit"] == pytest.approx(1.5)
    assert np.all(np.abs(res.theta - theta) < 4.42 * res.std_errors)


def test_quantile_regression_known_answers_on_engel():
    """statsmodels QuantReg on engel: (81.48224784, 0.56018055) at tau=0.5 (see SOURCES.md)."""
    e = load_dataset("engel")
    y, x = e["foodexp"], e["income"]
    beta = quantile_regression(y, x, 0.5)
    np.testing.assert_allclose(beta, [81.48224784, 0.56018055], rtol=1e-6)
    sm = np.array([95.48353902, 0.47410321])  # statsmodels IRLS at tau = 0.25
    ours = quantile_regression(y, x, 0.25)
    assert check_loss(y - ours[0] - ours[1] * x, 0.25) <= check_loss(y - sm[0] - sm[1] * x, 0.25) + 1e-9
    np.testing.assert_allclose(ours, sm, rtol=1e-5)
    # intercept only: the optimum equals the check loss at a sample quantile
    b0 = quantile_regression(y, np.zeros((y.size, 0)), 0.3)
    assert check_loss(y - b0[0], 0.3) == pytest.approx(check_loss(y - np.quantile(y, 0.3, method="inverted_cdf"), 0.3))


def test_section5_covariance_shrinks_like_one_over_n_seeded():
    """Fair data, yrs_married on age: Frobenius norm ratio between n and 4n is about 4."""
    fair = load_dataset("fair")
    out = run_experiment_qmle_covariance(
        fair["yrs_married"], fair["age"], [400, 1600], 40, 2.0, np.random.default_rng(6), bounds=(0.0, 25.0)
    )
    f = [r["frobenius"] for r in out["rows"]]
    assert 2.0 < f[0] / f[1] < 8.0
    assert -1.5 < out["slope"] < -0.5


def test_validation():
    x = np.arange(10.0)
    with pytest.raises(PrivacyParameterError):
        submit_public_x(x, 0, 1, 0.0)
    with pytest.raises(ValueError, match="lower < upper"):
        submit_public_x(x, 1, 1, 1.0)
    with pytest.raises(ValueError, match="non-finite"):
        submit_public_x(np.array([1.0, np.nan]), 0, 1, 1.0)
    with pytest.raises(ValueError, match="tau must lie in"):
        fit_qmle_public(np.zeros(10), x, 0, 1, 1.0, tau=1.0)
    with pytest.raises(ValueError, match="sigma"):
        fit_qmle_public(np.zeros(10), x, 0, 1, 1.0, sigma=-1.0)
    with pytest.raises(ValueError, match="must be 0 or 1"):
        fit_qmle_public(np.full(10, 2.0), x, 0, 1, 1.0)
    with pytest.raises(ValueError, match="10 rows"):
        fit_qmle_public(np.zeros(10), np.arange(9.0), 0, 1, 1.0)
    with pytest.raises(ValueError, match="one \\(lower, upper\\) pair per covariate"):
        submit_private_x(x, np.zeros((10, 2)), (0, 1), [(0, 1)], 1.0)
    with pytest.raises(ValueError, match="subsample"):
        run_experiment_qmle_covariance(x, x, [20], 2, 1.0, np.random.default_rng(0), bounds=(0.0, 10.0))
    with pytest.raises(ValueError, match="bounds=.*required.*public domain"):
        run_experiment_qmle_covariance(x, x, [5], 2, 1.0, np.random.default_rng(0))
