"""Goodness of fit of every sampler in dp.samplers against its exact probability mass function.

Exact (CSPRNG) samplers cannot be seeded, so their tests use ALPHA = 1e-5: a
correct sampler fails with probability 1e-5 per test, while a wrong parameter
(see test_chi2_has_power) gives p-values far below it with 10^5 samples.
Simulation samplers are seeded and use SIM_ALPHA = 1e-3.  Every test uses
at least 10^5 samples; cells with expected count < 5 are pooled into tails.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats as st

from pairwise.dp.errors import PrivacyParameterError
from pairwise.dp.samplers import (
    _ln_correctly_rounded,
    _ln_correctly_rounded_array,
    _u_star,
    _u_star_array,
    bernoulli_exp_array,
    bernoulli_rational_array,
    conservative_scale,
    discrete_laplace_array,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    exact_epsilon,
    geometric_array,
    sample_bernoulli_exp,
    sample_bernoulli_rational,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    sample_geometric,
    simulate_bernoulli,
    simulate_discrete_laplace,
    simulate_geometric,
    simulate_laplace,
    snapping_epsilon,
    snapping_laplace,
    snapping_laplace_array,
    uniform_int_array,
)

ALPHA = 1e-5  # exact CSPRNG samplers (unseeded)
SIM_ALPHA = 1e-3  # seeded simulation samplers
N = 100_000


def chi2_pvalue(samples: np.ndarray, support: np.ndarray, probs: np.ndarray) -> float:
    """Pearson chi-square p-value of integer samples against probs on a contiguous support.

    ``probs`` must carry all but a negligible mass; cells with expected count
    < 5 at either end are pooled with everything beyond them.
    """
    samples = np.asarray(samples, dtype=np.int64)
    probs = np.asarray(probs, dtype=float)
    assert abs(probs.sum() - 1.0) < 1e-9, "support window too narrow for the test"
    n = samples.size
    expected = n * probs
    core = np.flatnonzero(expected >= 5)
    lo, hi = int(support[core[0]]), int(support[core[-1]])
    inside = (support >= lo) & (support <= hi)
    obs_core = np.bincount(samples[(samples >= lo) & (samples <= hi)] - lo, minlength=hi - lo + 1)
    obs = [np.sum(samples < lo), *obs_core, np.sum(samples > hi)]
    exp = [n * probs[support < lo].sum(), *expected[inside], n * probs[support > hi].sum()]
    obs, exp = np.array(obs, float), np.array(exp, float)
    keep = exp > 0
    assert obs[~keep].sum() == 0, "samples outside the support"
    exp = exp[keep] * obs[keep].sum() / exp[keep].sum()
    return float(st.chisquare(obs[keep], exp).pvalue)


def dlap_probs(scale: float, width: int | None = None):
    width = width or int(60 * float(scale)) + 60
    support = np.arange(-width, width + 1)
    return support, discrete_laplace_pmf(support, float(scale))


def geometric_probs(rate: float):
    width = int(60 / rate) + 60
    support = np.arange(0, width)
    a = math.exp(-rate)
    return support, (1 - a) * a**support


def test_chi2_has_power():
    """Negative control: a 10% scale error is detected at ALPHA with 10^5 samples."""
    x = discrete_laplace_array(Fraction(3, 2), N)
    support, probs = dlap_probs(1.65)
    assert chi2_pvalue(x, support, probs) < ALPHA


# ---------------------------------------------------------------- scalar, exact


def test_bernoulli_rational_scalar():
    hits = sum(sample_bernoulli_rational(3, 7) for _ in range(N))
    assert st.binomtest(hits, N, 3 / 7).pvalue > ALPHA


@pytest.mark.parametrize("x", [Fraction(1, 3), Fraction(5, 2)])
def test_bernoulli_exp_scalar(x):
    hits = sum(sample_bernoulli_exp(x) for _ in range(N))
    assert st.binomtest(hits, N, math.exp(-float(x))).pvalue > ALPHA


def test_bernoulli_exp_edge_cases():
    assert all(sample_bernoulli_exp(0) == 1 for _ in range(100))
    # P[1] = exp(-10^6) (and exp(-50) < 2e-22): any 1 here is a sampler bug, never bad luck
    assert all(sample_bernoulli_exp(Fraction(10**6)) == 0 for _ in range(20))
    assert all(sample_bernoulli_exp(50) == 0 for _ in range(200))


def test_geometric_scalar():
    rate = Fraction(1, 2)
    x = np.array([sample_geometric(rate) for _ in range(N)])
    assert chi2_pvalue(x, *geometric_probs(0.5)) > ALPHA


def test_discrete_laplace_scalar():
    x = np.array([sample_discrete_laplace(Fraction(3, 2)) for _ in range(N)])
    assert chi2_pvalue(x, *dlap_probs(1.5)) > ALPHA


def test_discrete_gaussian_scalar():
    sigma2 = Fraction(5, 2)
    x = np.array([sample_discrete_gaussian(sigma2) for _ in range(N)])
    support = np.arange(-60, 61)
    w = np.exp(-(support.astype(float) ** 2) / (2 * 2.5))
    assert chi2_pvalue(x, support, w / w.sum()) > ALPHA


# ---------------------------------------------------------------- arrays, exact


def test_uniform_int_array():
    x = uniform_int_array(7, N)
    assert x.min() >= 0 and x.max() <= 6
    assert chi2_pvalue(x, np.arange(7), np.full(7, 1 / 7)) > ALPHA
    big = (1 << 61) + 12345
    y = uniform_int_array(big, 50_000)
    assert y.min() >= 0 and y.max() < big
    octile = (y // (big // 8 + 1)).astype(np.int64)
    assert chi2_pvalue(octile, np.arange(8), np.full(8, 1 / 8)) > ALPHA


def test_bernoulli_rational_array():
    x = bernoulli_rational_array(5, 11, N)
    assert set(np.unique(x)) <= {0, 1}
    assert st.binomtest(int(x.sum()), N, 5 / 11).pvalue > ALPHA


@pytest.mark.parametrize("x", [Fraction(7, 3), Fraction(1, 10), 0.75])
def test_bernoulli_exp_array(x):
    b = bernoulli_exp_array(x, N)
    assert st.binomtest(int(b.sum()), N, math.exp(-float(x))).pvalue > ALPHA


def test_geometric_array():
    x = geometric_array(Fraction(2, 5), N)
    assert x.min() >= 0
    assert chi2_pvalue(x, *geometric_probs(0.4)) > ALPHA


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(3, 2), 55, conservative_scale(11, 0.3)], ids=str)
def test_discrete_laplace_array(scale):
    x = discrete_laplace_array(scale, N)
    assert x.dtype == np.int64 and x.shape == (N,)
    assert chi2_pvalue(x, *dlap_probs(float(scale))) > ALPHA


def test_discrete_laplace_array_huge_parameters_fall_back_exactly():
    scale = Fraction(3, 2) + Fraction(1, 1 << 70)  # numerator beyond uint64 arithmetic
    x = discrete_laplace_array(scale, 2_000)
    assert x.shape == (2_000,) and abs(x.mean()) < 1.0


def test_variance_formula_matches_pmf():
    for scale in (0.5, 3.0, 40.0):
        support, probs = dlap_probs(scale)
        assert discrete_laplace_variance(scale) == pytest.approx(float(np.sum(probs * support**2)), rel=1e-9)


# ---------------------------------------------------------------- simulation (seeded)


def test_simulate_discrete_laplace_seeded():
    rng = np.random.default_rng(20240101)
    x = simulate_discrete_laplace(2.5, N, rng)
    assert chi2_pvalue(x, *dlap_probs(2.5)) > SIM_ALPHA
    again = simulate_discrete_laplace(2.5, 10, np.random.default_rng(7))
    assert np.array_equal(again, simulate_discrete_laplace(2.5, 10, np.random.default_rng(7)))


def test_simulate_geometric_and_bernoulli_seeded():
    rng = np.random.default_rng(11)
    assert chi2_pvalue(simulate_geometric(0.7, N, rng), *geometric_probs(0.7)) > SIM_ALPHA
    b = simulate_bernoulli(0.3, N, rng)
    assert st.binomtest(int(b.sum()), N, 0.3).pvalue > SIM_ALPHA


def test_simulate_laplace_seeded():
    x = simulate_laplace(2.0, N, np.random.default_rng(3))
    assert st.kstest(x, st.laplace(scale=2.0).cdf).pvalue > SIM_ALPHA


def test_simulation_requires_generator():
    with pytest.raises(TypeError, match="Generator"):
        simulate_discrete_laplace(1.0, 10, 42)  # type: ignore[arg-type]


# ---------------------------------------------------------------- snapping (Mironov 2012)


@pytest.mark.parametrize("vectorized", [False, True])
def test_u_star_distribution(vectorized):
    draws = _u_star_array(N) if vectorized else np.array([_u_star() for _ in range(N)])
    assert draws.min() > 0.0 and draws.max() < 1.0
    for k in (1, 2, 3, 6):
        assert st.binomtest(int(np.sum(draws < 2.0**-k)), N, 2.0**-k).pvalue > ALPHA
    mant = np.array([int(math.frexp(u)[0] * 2**53) & 0xFF for u in draws])
    assert chi2_pvalue(mant, np.arange(256), np.full(256, 1 / 256)) > ALPHA


def test_ln_is_correctly_rounded():
    """The snapping logarithm is the double nearest to ln(u) (checked at 80 digits)."""
    from decimal import Decimal, localcontext

    rng = np.random.default_rng(5)
    cases = list(rng.random(300)) + [_u_star() for _ in range(100)] + [1e-300, 0.5, 1 - 2**-53]
    for u in cases:
        got = _ln_correctly_rounded(float(u))
        with localcontext() as ctx:
            ctx.prec = 80
            exact = Decimal(float(u)).ln()
            err = abs(Decimal(got) - exact)
            for nb in (math.nextafter(got, -math.inf), math.nextafter(got, math.inf)):
                assert err <= abs(Decimal(nb) - exact)


def test_vectorized_ln_agrees_with_decimal():
    """The long-double fast path with its certainty test equals the decimal logarithm."""
    u = _u_star_array(20_000)
    fast = _ln_correctly_rounded_array(u)
    slow = np.array([_ln_correctly_rounded(float(v)) for v in u])
    assert np.array_equal(fast, slow)


def test_snapping_distribution_matches_rounded_laplace():
    scale, value = 3.0, 0.3
    big_lambda = 4.0
    out = snapping_laplace_array(np.full(N, value), scale, -200, 200)
    k = np.rint(out / big_lambda).astype(np.int64)
    assert np.all(k * big_lambda == out), "outputs must be multiples of Lambda"
    support = np.arange(-60, 61)
    lap = st.laplace(loc=value, scale=scale)
    probs = lap.cdf((support + 0.5) * big_lambda) - lap.cdf((support - 0.5) * big_lambda)
    assert chi2_pvalue(k, support, probs) > ALPHA


def test_snapping_clamps_and_accounts():
    vals = [snapping_laplace(1e9, 2.0, 0, 100) for _ in range(200)]
    assert all(0 <= v <= 100 for v in vals)
    eps = snapping_epsilon(2.0, 0, 100)
    eta = 2.0**-53
    assert eps >= (1 + 12 * 50 * eta) / 2.0 + 2 * eta and eps == pytest.approx(0.5, rel=1e-12)
    with pytest.raises(PrivacyParameterError, match="snapping"):
        snapping_laplace(0.0, 10.0, 0, 10)  # B = 5 < lambda = 10


# ---------------------------------------------------------------- parameters


def test_conservative_scale_and_exact_epsilon():
    s = conservative_scale(11, 0.3)
    assert s >= Fraction(11) / Fraction(0.3) and s - Fraction(11) / Fraction(0.3) < Fraction(1, 1 << 20)
    e = exact_epsilon(0.2)
    assert e <= Fraction(0.2) and Fraction(0.2) - e < Fraction(1, 1 << 40)
    assert exact_epsilon(0.5) == Fraction(1, 2)


@pytest.mark.parametrize(
    "call",
    [
        lambda: sample_bernoulli_rational(3, 2),
        lambda: sample_bernoulli_rational(-1, 2),
        lambda: sample_bernoulli_rational(1, 0),
        lambda: sample_bernoulli_exp(-1),
        lambda: sample_geometric(0),
        lambda: sample_discrete_laplace(-2),
        lambda: sample_discrete_laplace(float("nan")),
        lambda: sample_discrete_gaussian(0),
        lambda: discrete_laplace_array(0, 10),
        lambda: discrete_laplace_array(1, -1),
        lambda: bernoulli_rational_array(2, 1, 10),
        lambda: uniform_int_array(0, 10),
        lambda: conservative_scale(1, 0.0),
        lambda: sample_discrete_laplace("3"),
        lambda: sample_discrete_laplace(True),
    ],
)
def test_invalid_parameters_raise(call):
    with pytest.raises(PrivacyParameterError):
        call()
