"""Tests of dp.mechanisms: output distributions, unbiasedness, guarantees, errors.

Exact (CSPRNG) draws use ALPHA = 1e-5; seeded simulations use SIM_ALPHA = 1e-3
or a 4.5-standard-error band for Monte Carlo means (two-sided ~7e-6).
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
import scipy.stats as st

from pairwise.dp.accounting import PrivacyGuarantee
from pairwise.dp.errors import EmptyDataError, InvalidDataError, PrivacyParameterError
from pairwise.dp.mechanisms import (
    GeometricMechanism,
    KaryRandomizedResponse,
    KRREstimator,
    OneBitFlip,
    OneBitFlipVector,
    RandomizedResponse,
    SnappingLaplaceMechanism,
)

ALPHA = 1e-5
SIM_ALPHA = 1e-3
N = 100_000


def chi2_counts(observed: np.ndarray, probs: np.ndarray) -> float:
    observed = np.asarray(observed, float)
    return float(st.chisquare(observed, observed.sum() * np.asarray(probs) / np.sum(probs)).pvalue)


# ---------------------------------------------------------------- binary RR


def test_rr_exact_report_probability():
    rr = RandomizedResponse(1.0)
    eps = float(rr.epsilon_exact)
    keep = math.exp(eps) / (1 + math.exp(eps))
    reports = rr.randomize_array(np.ones(N, dtype=np.int64))
    assert st.binomtest(int(reports.sum()), N, keep).pvalue > ALPHA
    zeros = rr.randomize_array(np.zeros(N // 2, dtype=np.int64))
    assert st.binomtest(int(zeros.sum()), N // 2, 1 - keep).pvalue > ALPHA


def test_rr_scalar_randomize():
    rr = RandomizedResponse(0.5)
    hits = sum(rr.randomize(1) for _ in range(N))
    keep = math.exp(float(rr.epsilon_exact)) / (1 + math.exp(float(rr.epsilon_exact)))
    assert st.binomtest(hits, N, keep).pvalue > ALPHA


def test_rr_estimator_unbiased_exactly_and_by_simulation():
    rr = RandomizedResponse(0.7)
    rng = np.random.default_rng(1)
    bits = (rng.random(500) < 0.3).astype(np.int64)
    q = rr.flip_probability
    # the estimator is affine in the reports: at the expected reports it returns the truth
    expected_reports = q + (1 - 2 * q) * bits
    assert (expected_reports.mean() - q) / (1 - 2 * q) == pytest.approx(bits.mean(), abs=1e-12)
    ests = np.array([rr.estimate_mean(rr.simulate(bits, rng)) for _ in range(2000)])
    se = ests.std(ddof=1) / math.sqrt(ests.size)
    assert abs(ests.mean() - bits.mean()) < 4.5 * se
    assert rr.estimate_count(rr.simulate(bits, rng)) == pytest.approx(bits.sum(), abs=200)


def test_rr_guarantee_and_errors():
    rr = RandomizedResponse(2.0)
    assert rr.guarantee == PrivacyGuarantee(2.0)
    assert rr.epsilon_exact <= Fraction(2.0)
    assert (1 - rr.flip_probability) / rr.flip_probability <= math.exp(2.0) * (1 + 1e-12)
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(PrivacyParameterError):
            RandomizedResponse(bad)
    with pytest.raises(InvalidDataError):
        rr.randomize(2)
    with pytest.raises(InvalidDataError):
        rr.randomize_array(np.array([0, 1, 3]))
    with pytest.raises(EmptyDataError):
        rr.estimate_mean(np.array([], dtype=np.int64))


# ---------------------------------------------------------------- k-ary RR


def test_krr_beta_is_eq9():
    k, eps = 8, 1.5
    m = KaryRandomizedResponse(k, eps)
    e = math.exp(float(m.epsilon_exact))
    assert m.beta == pytest.approx(k / (k + e - 1))
    p = m.transition_matrix
    assert np.allclose(p.sum(axis=1), 1.0)
    assert p.max() / p.min() == pytest.approx(e)  # exactly e^eps: epsilon-LDP and tight
    assert np.allclose(p @ m.inverse_transition_matrix, np.eye(k))


@pytest.mark.parametrize("vectorized", [True, False])
def test_krr_report_distribution(vectorized):
    k, v = 5, 2
    m = KaryRandomizedResponse(k, 1.0)
    n = N if vectorized else 30_000
    if vectorized:
        reports = m.randomize_array(np.full(n, v))
    else:
        reports = np.array([m.randomize(v) for _ in range(n)])
    probs = m.transition_matrix[v]
    assert chi2_counts(np.bincount(reports, minlength=k), probs) > ALPHA


def test_krr_simulation_distribution():
    m = KaryRandomizedResponse(4, 0.8)
    reports = m.simulate(np.full(N, 3), np.random.default_rng(9))
    assert chi2_counts(np.bincount(reports, minlength=4), m.transition_matrix[3]) > SIM_ALPHA


def test_krr_frequencies_unbiased():
    m = KaryRandomizedResponse(6, 1.0)
    rng = np.random.default_rng(2)
    values = rng.integers(0, 6, 400)
    truth = np.bincount(values, minlength=6) / values.size
    est = np.array([m.estimate_frequencies(m.simulate(values, rng)) for _ in range(2000)])
    se = est.std(axis=0, ddof=1) / math.sqrt(est.shape[0])
    assert np.all(np.abs(est.mean(axis=0) - truth) < 4.5 * se)
    assert np.allclose(est.sum(axis=1), 1.0)
    counts = m.estimate_counts(m.simulate(values, rng))
    assert counts.sum() == pytest.approx(values.size)


def test_krr_ustatistic_unbiased_against_exact_pairs():
    k = 5
    m = KaryRandomizedResponse(k, 2.0)
    rng = np.random.default_rng(3)
    values = rng.integers(0, k, 60)
    kernel = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(float)  # Gini |x - y|
    truth = np.mean([kernel[a, b] for a, b in combinations(values, 2)])
    est = np.array([m.estimate_ustatistic(m.simulate(values, rng), kernel) for _ in range(3000)])
    se = est.std(ddof=1) / math.sqrt(est.size)
    assert abs(est.mean() - truth) < 4.5 * se
    # the O(k^2) formula equals the explicit sum over pairs of debiased one-hot vectors
    reports = m.simulate(values, rng)
    h = m.debiased_onehot(reports)
    explicit = np.mean([h[i] @ kernel @ h[j] for i, j in combinations(range(len(values)), 2)])
    assert m.estimate_ustatistic(reports, kernel) == pytest.approx(explicit, rel=1e-10)


def test_krr_errors():
    with pytest.raises(PrivacyParameterError, match="k must"):
        KaryRandomizedResponse(1, 1.0)
    m = KaryRandomizedResponse(3, 1.0)
    with pytest.raises(InvalidDataError):
        m.randomize(3)
    with pytest.raises(InvalidDataError):
        m.randomize_array(np.array([0, 1, 5]))
    with pytest.raises(EmptyDataError):
        m.estimate_frequencies(np.array([], dtype=np.int64))
    with pytest.raises(InvalidDataError, match="3x3"):
        m.estimate_ustatistic(np.array([0, 1]), np.eye(4))


def _krr_law(k: int, phi: Fraction, i: int) -> list[Fraction]:
    """P[report index j | true index i] of k-RR with flip probability phi, in Fractions."""
    return [1 - phi if j == i else phi / (k - 1) for j in range(k)]


@pytest.mark.parametrize("k", [2, 3, 4, 7])
@pytest.mark.parametrize("phi", [Fraction(0), Fraction(1, 7), Fraction(29, 64), "near_max"])
def test_krr_estimator_slope_and_intercept_are_the_closed_form(k, phi):
    """KRREstimator.for_krr against slope = (k-1)/(k-1-k phi), intercept = -phi sum(v)/(k-1-k phi).

    The closed form comes from E[y | v_i] = sum_j P[j | i] v_j = lam v_i + mu (computed here by
    summing the law in Fractions), which the unbiased affine map slope y + intercept must invert;
    the variance is checked against the same enumeration.
    """
    phi = Fraction(k - 1, k) - Fraction(1, 1000) if phi == "near_max" else phi
    values = tuple(3 * i * i - 2 * i - 1 for i in range(k))  # distinct, unequally spaced, sum != 0
    est = KRREstimator.for_krr(k, phi, values)
    assert est.slope == Fraction(k - 1) / (k - 1 - k * phi)
    assert est.intercept == -phi * sum(values) / (k - 1 - k * phi)
    assert all(isinstance(c, Fraction) for c in (est.slope, est.intercept, *est.variance_coefficients))
    for i, v in enumerate(values):
        law = _krr_law(k, phi, i)
        mean_y = sum(p * y for p, y in zip(law, values))
        var_y = sum(p * y * y for p, y in zip(law, values)) - mean_y * mean_y
        assert est.slope * mean_y + est.intercept == v  # unbiased, exactly
        assert est.variance(v) == est.slope**2 * var_y
    assert est.max_variance == max(
        est.slope**2
        * (
            sum(p * y * y for p, y in zip(_krr_law(k, phi, i), values))
            - sum(p * y for p, y in zip(_krr_law(k, phi, i), values)) ** 2
        )
        for i in range(k)
    )


@pytest.mark.parametrize("k,eps", [(2, 1.0), (3, 0.5), (6, 2.0), (16, 0.25)])
def test_kary_rr_estimator_is_the_papers_unbiasing(k, eps):
    """KaryRandomizedResponse.estimator() is KRREstimator at phi = beta (k-1)/k: (1 - beta)^-1 (y - beta/k sum v)."""
    m = KaryRandomizedResponse(k, eps)
    beta = Fraction(m.beta)  # the double, exactly
    est = m.estimator()
    assert est.values == tuple(range(k))
    assert est.slope == 1 / (1 - beta)
    assert est.intercept == -(beta / k) * sum(range(k)) / (1 - beta)
    for v in range(k):  # unbiased under the law P = (1 - beta) I + (beta / k) J of Eq. 9
        law = [(1 - beta) * (j == v) + beta / k for j in range(k)]
        assert sum(law) == 1 and sum(p * (est.slope * j + est.intercept) for j, p in enumerate(law)) == v
    # the float64 one-hot path applies the same estimator: debiased_onehot(r) . values = slope r + intercept
    reports = np.arange(k)
    vals = np.arange(k, dtype=float)
    assert np.allclose(
        m.debiased_onehot(reports) @ vals, float(est.slope) * reports + float(est.intercept), rtol=1e-12, atol=1e-12
    )
    labelled = m.estimator(tuple(10 * v - 3 for v in range(k)))
    assert labelled.slope == est.slope and labelled.intercept == -(beta / k) * sum(10 * v - 3 for v in range(k)) / (
        1 - beta
    )


def test_krr_estimator_rejects_bad_parameters():
    with pytest.raises(PrivacyParameterError, match="k must"):
        KRREstimator.for_krr(1, Fraction(0), (0,))
    with pytest.raises(PrivacyParameterError, match="flip_probability"):
        KRREstimator.for_krr(3, Fraction(2, 3), (0, 1, 2))  # lam = 0: the report carries no information
    with pytest.raises(PrivacyParameterError, match="flip_probability"):
        KRREstimator.for_krr(3, Fraction(-1, 3), (0, 1, 2))
    with pytest.raises(InvalidDataError, match="distinct"):
        KRREstimator.for_krr(3, Fraction(1, 3), (0, 1, 1))
    with pytest.raises(InvalidDataError, match="integers"):
        KRREstimator.for_krr(2, Fraction(1, 3), (0, 0.5))
    add = KRREstimator.additive(Fraction(-1, 2), Fraction(7, 3))
    assert (add.slope, add.intercept, add.variance(5), add.max_variance) == (
        1,
        Fraction(1, 2),
        Fraction(7, 3),
        Fraction(7, 3),
    )


# ---------------------------------------------------------------- one-bit flip


def test_onebit_eq6_eq7():
    m = OneBitFlip(1.0, -2.0, 3.0)
    assert np.array_equal(m.truncate([-5.0, 0.5, 9.0]), [-2.0, 0.5, 3.0])
    e = math.exp(float(m.epsilon_exact))
    assert m.prob_one(-2.0) == pytest.approx(1 / (e + 1))
    assert m.prob_one(3.0) == pytest.approx(e / (e + 1))
    ys = np.linspace(-2, 3, 51)
    p = m.prob_one(ys)
    # epsilon-LDP: any two inputs give report probabilities within a factor e^eps
    assert max(p.max() / p.min(), (1 - p).max() / (1 - p).min()) <= e * (1 + 1e-12)


@pytest.mark.parametrize("vectorized", [True, False])
def test_onebit_exact_report_probability(vectorized):
    m = OneBitFlip(0.8, 0.0, 10.0)
    y = 7.3  # truncation of 7.3 is itself
    n = N if vectorized else 30_000
    if vectorized:
        z = m.randomize_array(np.full(n, y))
    else:
        z = np.array([m.randomize(y) for _ in range(n)])
    assert st.binomtest(int(z.sum()), n, float(m.prob_one(y))).pvalue > ALPHA
    z_high = m.randomize_array(np.full(20_000, 50.0))  # truncated to 10
    assert st.binomtest(int(z_high.sum()), 20_000, float(m.prob_one(10.0))).pvalue > ALPHA


def test_onebit_mean_unbiased_for_truncated_data():
    m = OneBitFlip(1.0, 0.0, 1.0)
    rng = np.random.default_rng(4)
    y = rng.normal(0.4, 0.5, 300)
    truth = m.truncate(y).mean()
    est = np.array([m.estimate_mean(m.simulate(y, rng)) for _ in range(3000)])
    se = est.std(ddof=1) / math.sqrt(est.size)
    assert abs(est.mean() - truth) < 4.5 * se


def test_onebit_log_likelihood_matches_manual():
    m = OneBitFlip(1.0, 0.0, 2.0)
    z = np.array([1, 0, 1, 1])
    mu = np.array([0.5, 1.0, 1.5, 3.0])
    p = m.prob_one(np.clip(mu, 0, 2))
    manual = float(np.sum(np.where(z == 1, np.log(p), np.log(1 - p))))
    assert m.log_likelihood(z, mu) == pytest.approx(manual)


def test_onebit_vector_eq8_composition():
    v = OneBitFlipVector([0.5, 0.25, 0.25], [0, 0, -1], [1, 5, 1])
    assert v.guarantee.epsilon == pytest.approx(1.0) and v.guarantee.epsilon >= 1.0
    split = OneBitFlipVector.even_split(1.0, [0, 0, 0], [1, 1, 1])
    assert split.guarantee.epsilon <= 1.0 + 1e-15
    x = np.random.default_rng(5).random((1000, 3))
    bits = v.simulate(x, np.random.default_rng(6))
    assert bits.shape == (1000, 3) and set(np.unique(bits)) <= {0, 1}
    exact_bits = v.randomize_array(x[:50])
    assert exact_bits.shape == (50, 3)
    with pytest.raises(InvalidDataError):
        v.simulate(np.zeros((4, 2)), np.random.default_rng(0))


def test_onebit_errors():
    with pytest.raises(PrivacyParameterError):
        OneBitFlip(1.0, 1.0, 1.0)
    with pytest.raises(PrivacyParameterError):
        OneBitFlip(0.0, 0.0, 1.0)
    m = OneBitFlip(1.0, 0.0, 1.0)
    with pytest.raises(EmptyDataError):
        m.randomize_array([])
    with pytest.raises(InvalidDataError):
        m.randomize_array([0.1, float("nan")])


# ---------------------------------------------------------------- geometric mechanism


# The noise itself (full law, release / release_array / simulate, two-sided, power >= 0.99 against
# scale x2 and x1/2) is tested in tests/statistical/test_noise_power_dp.py::test_geometric_mechanism_noise_is_discrete_laplace
# and ::test_snapping_laplace_mechanism_law; the tests below check what the objects report and validate.


@pytest.mark.parametrize("eps,sens", [(0.5, 2), (0.3, 1), (1.7, 5)])
def test_geometric_mechanism_reports_the_closed_form_scale_and_variance(eps, sens):
    """scale = S / eps rounded up to a multiple of 2^-20 (never below: eps-DP), and variance =
    2a/(1-a)^2 with a = exp(-eps / S), both computed here from (eps, S) (relative 1e-5: the rounding)."""
    g = GeometricMechanism(eps, sensitivity=sens)
    ideal = Fraction(sens) / Fraction(eps)
    assert ideal <= g.scale <= ideal + Fraction(1, 1 << 20)
    a = math.exp(-eps / sens)
    assert g.variance == pytest.approx(2 * a / (1 - a) ** 2, rel=1e-5)
    assert g.guarantee == PrivacyGuarantee(eps)


def test_geometric_mechanism_output_types_and_validation():
    g = GeometricMechanism(1.0)
    assert type(g.release(10)) is int
    out = g.release_array(np.arange(6, dtype=np.int64).reshape(2, 3))
    assert out.dtype == np.int64 and out.shape == (2, 3)
    sim = g.simulate(np.full(1000, 5), np.random.default_rng(0))
    assert sim.dtype == np.int64 and sim.shape == (1000,)
    with pytest.raises(PrivacyParameterError):
        GeometricMechanism(1.0, sensitivity=0)
    with pytest.raises(InvalidDataError):
        g.release(1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidDataError):
        g.release_array(np.array([0.5]))
    with pytest.raises(EmptyDataError):
        g.release_array(np.array([], dtype=np.int64))


def test_snapping_mechanism_guarantee_and_clamped_range():
    """The guarantee is within 1e-4 of the requested eps (never above), and releases stay in [lower, upper]
    also for inputs outside it."""
    m = SnappingLaplaceMechanism(0.5, 1.0, 0.0, 1000.0)
    assert 0.4999 < m.guarantee.epsilon <= 0.5
    out = m.release_array(np.array([400.0, -50.0, 0.0, 1000.0, 5000.0] * 200))
    assert np.all((out >= 0) & (out <= 1000))
    assert 0 <= m.release(3.0) <= 1000
    assert 0 <= m.release(-1e9) <= 1000
