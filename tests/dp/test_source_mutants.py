"""Tests written for the survivors of the source-level mutation run (tests/mutation/source_mutants.py).

Each test names the mutant it kills (module, line, change).  The survivors explained as equivalent instead
are listed with their reasons in benchmarks/RESULTS.md ("Source-level mutation run").
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from pairwise.dp.accounting import EPSILON_MIN, advanced_composition, check_epsilon
from pairwise.dp.errors import PrivacyParameterError

# ----------------------------------------------------------------------------- dp/accounting.py


def test_the_smallest_epsilon_is_exactly_two_to_the_minus_32():
    """Kills EPSILON_MIN = 3.0**-32 / 1.0**-32 and ``EPSILON_MIN < value`` in check_epsilon."""
    assert EPSILON_MIN == 2.0**-32
    assert check_epsilon(2.0**-32) == 2.0**-32  # the bound itself is accepted
    with pytest.raises(PrivacyParameterError, match=r"\[2\^-32"):
        check_epsilon(2.0**-32 * (1 - 2**-20))  # just below is refused


def test_a_composition_whose_deltas_reach_one_is_refused():
    """Kills ``delta_total >= 2.0`` in advanced_composition: a total delta of 1 or more guarantees nothing."""
    with pytest.raises(PrivacyParameterError, match="is >= 1: no guarantee"):
        advanced_composition(0.1, 0.5, 2, 1e-9)  # 2 * 0.5 + 1e-9 > 1
    with pytest.raises(PrivacyParameterError, match="is >= 1"):
        advanced_composition(0.1, 0.3, 3, 0.2)  # 1.1
    assert advanced_composition(0.1, 0.3, 3, 0.05).delta == pytest.approx(0.95)


# ----------------------------------------------------------------------------- circuits/noise.py


def test_bare_gadgets_state_their_sensitivity_and_noise_law():
    """Kills krr_gadget's ``sensitivity=params.k - 0``, noisy_binary_kernel's ``sensitivity=2`` and the
    randomized-response pmf keyed ``-1`` instead of ``0`` (the shift d = reported - true is 0 or 1)."""
    from pairwise.circuits.noise import krr_gadget, noisy_binary_kernel
    from pairwise.dp.dyadic import choose_krr

    for k in (2, 3):
        nc = krr_gadget(choose_krr(Fraction(1), k))
        assert nc.sensitivity == k - 1 and nc.value_range == (0, k - 1) and nc.codes == tuple(range(k))
    rr = noisy_binary_kernel("collision", 8, epsilon=Fraction(1))
    assert rr.sensitivity == 1 and rr.value_range == (0, 1)
    phi = rr.params.flip_probability
    assert rr.noise_pmf() == {0: 1 - phi, 1: phi}


def test_the_signed_shape_counts_one_geometric_in_its_distance_to_the_ideal():
    """Kills ``(2 if difference else 2) * tv`` in dp/dyadic/guarantee._tv_to_ideal: the difference construction
    draws two geometrics, the signed one a single one, so its total-variation bound is half."""
    from pairwise.dp.dyadic import choose_discrete_laplace, discrete_laplace_guarantee

    p = choose_discrete_laplace(Fraction(1), 400, construction="signed")
    twin = type(p)(p.epsilon, p.sensitivity, p.bits, p.acc, p.numerators, p.target_delta, p.accs, "difference")
    signed, diff = discrete_laplace_guarantee(p).tv_to_ideal, discrete_laplace_guarantee(twin).tv_to_ideal
    assert 0 < signed < 0.5 and diff == pytest.approx(2 * signed, rel=1e-12)


def test_max_estimate_variance_of_a_krr_reading_with_zero_linear_term():
    """Kills ``if c1 == 0 and c2 == 1: return c0`` in NoisyCircuit.max_estimate_variance (circuits/noise.py).

    k = 2, codes (-1, 1), phi = 1/4 (certified for eps = 1.1 >= ln 3): lam = 1 - 2 phi = 1/2, so c1 = -2 mu / lam = 0 and c2 = (1 - lam) / lam = 1,
    and the variance is not constant.  Direct: y = h w.p. 3/4, -h w.p. 1/4, E y = h / 2, so the unbiased
    estimate is 2 y and Var(2 y) = 4 (1 - 1/4) = 3 at h = +-1 (c0 = 2 alone misses the h^2 term).
    """
    from dataclasses import replace

    from pairwise.circuits.noise import krr_gadget
    from pairwise.dp.dyadic.params import KaryRRParams

    nc = replace(krr_gadget(KaryRRParams(Fraction(11, 10), 2, 2, 1)), codes=(-1, 1), value_range=(-1, 1))
    assert nc.variance_coefficients[1:] == (0, 1)
    assert nc.max_estimate_variance == 3


# ----------------------------------------------------------------------------- dp/concentration.py


def test_finite_log_mgf_keeps_the_shape_of_u():
    """Kills ``sum(axis=1)`` for ``axis=-1`` in finite_log_mgf: u may be any array (one log-MGF per entry)."""
    import numpy as np

    from pairwise.dp.concentration import finite_log_mgf

    u = np.array([[0.1, -0.4, 2.0], [0.0, 1.5, -3.0]])
    got = finite_log_mgf([0.0, 1.0, 5.0], [0.5, 0.3, 0.2], 1.0, u)
    assert got.shape == u.shape
    flat = finite_log_mgf([0.0, 1.0, 5.0], [0.5, 0.3, 0.2], 1.0, u.ravel()).reshape(u.shape)
    assert np.allclose(got, flat, rtol=1e-14)


# ----------------------------------------------------------------------------- dp/dyadic/params.py


def test_krr_params_refuse_a_flip_probability_below_the_dp_threshold():
    """Kills ``+ self.k + 1`` in KaryRRParams' certificate: phi >= (k - 1) / (e^eps + k - 1) is what makes k-RR
    eps-DP, so the largest numerator below the threshold must be refused and the smallest above accepted."""
    import math

    from pairwise.dp.dyadic import KaryRRParams
    from pairwise.dp.errors import NoiseParameterError

    for k, eps in ((3, 1), (2, 2), (3, 4)):
        acc = 12
        threshold = (k - 1) / (math.exp(eps) + k - 1)
        below = math.floor(threshold * (1 << acc))
        with pytest.raises(NoiseParameterError, match="not eps-DP"):
            KaryRRParams(Fraction(eps), k, acc, below)
        KaryRRParams(Fraction(eps), k, acc, below + 1)


def test_a_coin_that_never_fires_is_refused():
    """Kills ``0 <= m`` in _check_numerator: a numerator of 0 is a constant coin, not noise."""
    from pairwise.dp.dyadic import KaryRRParams
    from pairwise.dp.errors import NoiseParameterError

    with pytest.raises(NoiseParameterError, match=r"numerator 0 must lie in \(0, 2\^8\)"):
        KaryRRParams(Fraction(1), 3, 8, 0)


@pytest.mark.parametrize("eps,s,i", [(Fraction(1), 3, 0), (Fraction(1, 2), 400, 5), (Fraction(2), 1, 3)])
def test_digit_ratio_bounds_bracket_the_ideal_ratio(eps, s, i):
    """Kills ``exp_bounds(+...)`` in _digit_ratio_bounds: r*_i = exp(-2^i eps / S) < 1."""
    import math

    from pairwise.dp.dyadic.params import _digit_ratio_bounds

    lo, hi = _digit_ratio_bounds(eps, s, i)
    exact = math.exp(-(2**i) * float(eps) / s)
    assert lo <= hi <= 1 and hi - lo < 1e-9
    assert abs(float(lo) - exact) < 1e-12 and abs(float(hi) - exact) < 1e-12


# ----------------------------------------------------------------------------- dp/dyadic/search.py


def test_a_loose_tolerance_never_picks_a_flip_probability_of_one_half():
    """Kills ``if 1 * m >= (1 << a)`` in choose_randomized_response: with rel_tol >= 1 every acc meets the
    tolerance, and acc = 2 rounds phi* = 1/(1 + e^0.01) up to 2/4 = 1/2, a coin that carries no information
    (the estimator divides by 1 - 2 phi = 0).  The search must skip it."""
    from pairwise.dp.dyadic.search import choose_randomized_response

    p = choose_randomized_response(Fraction(1, 100), rel_tol=2)
    assert 2 * p.numerator < (1 << p.acc)
    assert p.acc == 9 and p.numerator == 255  # the first acc whose rounded-up phi is below 1/2


# ----------------------------------------------------------------------------- dp/exact.py


def _decimal(fn, x: Fraction, prec: int = 250):
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = prec
        return Fraction(getattr(Decimal(x.numerator) / Decimal(x.denominator), fn)())


@pytest.mark.parametrize("t", [Fraction(1, 2), Fraction(-3, 7), Fraction(5), Fraction(-40), Fraction(1, 3)])
def test_exp_bounds_bracket_exp_at_250_digits(t):
    """Kills ``vf / (1 + margin)`` for the upper bound: exp(t) at 250 digits must lie in [lo, hi]."""
    from pairwise.dp.exact import exp_bounds

    lo, hi = exp_bounds(t)
    e = _decimal("exp", t)
    assert lo <= e <= hi and (hi - lo) / e < Fraction(1, 10**100)


def test_ln_lower_is_below_ln_at_250_digits():
    """Kills the zeroed margin of ln_lower: the 110-digit ln rounds up about half the time, so without the
    margin some of these would lie above the true value."""
    from pairwise.dp.exact import ln_lower, ln_upper

    for k in range(1, 60):
        x = Fraction(10**k + 7 * k, 3 + k)
        ln = _decimal("ln", x)
        assert ln_lower(x) <= ln <= ln_upper(x)
        assert ln - ln_lower(x) < Fraction(1, 10**100)


# ----------------------------------------------------------------------------- dp/mechanisms.py


def test_one_bit_flip_vector_refuses_mismatched_or_empty_parameters():
    """Kills ``... and len(epsilons) == 0``: mismatched lengths were silently truncated by zip."""
    from pairwise.dp.mechanisms import OneBitFlipVector

    for eps, lo, hi in (([1.0, 1.0], [0.0], [1.0, 1.0]), ([1.0], [0.0, 0.0], [1.0]), ([], [], [])):
        with pytest.raises(PrivacyParameterError, match="non-empty and of equal length"):
            OneBitFlipVector(eps, lo, hi)
    assert len(OneBitFlipVector([1.0, 0.5], [0.0, 0.0], [1.0, 2.0]).components) == 2


# ----------------------------------------------------------------------------- dp/samplers.py


@pytest.mark.parametrize("acc", [63, 64, 126, 127])
def test_exact_coins_at_word_boundaries(acc):
    """Kills ``nw = (w + 63) // 63`` in _coins: a 63-bit (or 126-bit) coin needs one (two) 64-bit words; the
    mutant asks for one too many and shifts by a negative count.  The frequency of an odd numerator just above
    half is checked too (5 sigma at 20,000 coins)."""
    import os

    import numpy as np

    from pairwise.dp.samplers import _coins

    m = (1 << (acc - 1)) + 1  # odd: all acc bits are used; probability 1/2 + 2^-acc
    c = _coins([m], [acc], 20000, os.urandom)
    assert c.shape == (20000, 1) and abs(c.mean() - 0.5) < 5 * 0.5 / np.sqrt(20000)


# ----------------------------------------------------------------------------- protocols/ldp/interval.py


def _alg1_reference(beta, R, alpha, n=None, n_pos=None, n_neg=None):
    """alg1_interval's half-width from docs/intervals.md, written out independently."""
    import math

    q = 1 - beta
    if n is None:
        wsq, wmax, d2, mcd = (
            1 / n_pos + 1 / n_neg,
            max(1 / n_pos, 1 / n_neg),
            4 * beta * R * R / (n_pos * n_neg * q**4),
            1 / n_pos + 1 / n_neg,
        )
    else:
        wsq, wmax, d2, mcd = 4 / n, 2 / n, 8 * beta * R * R / (n * (n - 1) * q**4), 4 / n
    best = math.inf
    for frac in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99):
        a_l, a_d = alpha * frac, alpha * (1 - frac)
        L = math.log(2 / a_l)
        v, b = beta * R * R / q**2 * wsq, R / q * wmax
        bern = b * L / 3 + math.sqrt((b * L / 3) ** 2 + 2 * v * L)
        hoef = math.sqrt((R / q) ** 2 * wsq * L / 2)
        best = min(best, min(bern, hoef) + math.sqrt(d2 / a_d))
    rf = R * (1 + beta) ** 2 / q**2
    return min(best, math.sqrt(rf * rf * mcd * math.log(2 / alpha) / 2))


@pytest.mark.parametrize(
    "beta,R,alpha,sizes",
    [
        (0.3, 1.0, 0.05, {"n": 12}),
        (0.8, 2.0, 0.1, {"n": 500}),
        (0.05, 400.0, 0.05, {"n": 40}),
        (0.5, 1.0, 0.01, {"n_pos": 7, "n_neg": 30}),
        (0.95, 1.0, 0.05, {"n_pos": 300, "n_neg": 200}),
    ],
)
def test_alg1_interval_is_the_documented_bound(beta, R, alpha, sizes):
    """Kills ``b = a_l * 2``, ``if not d2 > 0`` and ``n * (n - 2)`` in alg1_interval: the half-width equals the
    bound of docs/intervals.md recomputed here (small n makes n - 1 against n - 2 visible)."""
    from pairwise.protocols.ldp.interval import alg1_interval

    iw = alg1_interval(beta, R, alpha=alpha, **sizes)
    assert iw.below == iw.above == pytest.approx(_alg1_reference(beta, R, alpha, **sizes), rel=1e-7)


def test_histogram_band_defaults_to_a_95_percent_band():
    """Kills the default ``alpha=1.05`` of histogram_band."""
    from pairwise.protocols.ldp.interval import histogram_band

    assert histogram_band(5000, 6, 0.6) == histogram_band(5000, 6, 0.6, 0.05)


# ----------------------------------------------------------------------------- protocols/ldp/ustat.py


def test_data_bounds_of_one_column_are_per_coordinate_arrays():
    """Kills ``if not x.ndim == 1`` in data_bounds: 1-d data is one coordinate, so the bounds have shape (1,)."""
    import numpy as np

    from pairwise.protocols.ldp.ustat import data_bounds

    lo, hi = data_bounds(np.array([3.0, 1.0, 2.0]))
    assert lo.shape == hi.shape == (1,) and lo[0] == 1.0 and 3.0 < hi[0] < 3.0 + 1e-12
    lo2, hi2 = data_bounds(np.array([[1.0, 5.0], [2.0, 5.0]]))
    assert list(lo2) == [1.0, 5.0] and hi2[1] > 5.0  # a constant coordinate is widened


# ----------------------------------------------------------------------------- protocols/ustat/stats.py


def test_large_one_sample_inputs_take_the_n_log_n_path(monkeypatch):
    """Kills ``np.asarray(y).size if not name == "auc"`` in u_statistic: for Gini (y = None) the size is n^2,
    so over 4000 points the exact O(n log n) identity is used, never the n x n kernel matrix (4001^2 floats)."""
    import numpy as np

    from pairwise.protocols.ustat import stats

    x = np.arange(4001, dtype=np.float64) % 97
    c = np.bincount(x.astype(np.int64))  # independent: the pair mean of |x_i - x_j| from the 97 value counts
    v = np.arange(c.size)
    want = float((c[:, None] * c[None, :] * np.abs(v[:, None] - v[None, :])).sum() / (4001 * 4000))

    def no_matrix(*args, **kwargs):
        raise AssertionError("kernel_matrix called for 4001 points")

    monkeypatch.setattr(stats, "kernel_matrix", no_matrix)
    assert stats.u_statistic("gini", x) == pytest.approx(want, rel=1e-12)


def test_fixed_sample_mse_of_four_users_is_the_exact_matching_variance():
    """Kills ``max(1.0, ...)`` for ``max(0.0, ...)`` in fixed_sample_mse: four users have three perfect
    matchings, each drawn with probability 1/3; U^ = S / 2 for the round sum S, so the MSE (no noise, P = 1)
    is Var(S) / 4, far below 1 here."""
    from itertools import combinations

    import numpy as np

    from pairwise.protocols.ustat.stats import fixed_sample_mse, kernel_sums

    x = np.array([0.0, 0.1, 0.25, 0.4])
    h = {(i, j): abs(x[i] - x[j]) for i, j in combinations(range(4), 2)}
    sums = [h[0, 1] + h[2, 3], h[0, 2] + h[1, 3], h[0, 3] + h[1, 2]]
    var_s = sum(s * s for s in sums) / 3 - (sum(sums) / 3) ** 2
    assert var_s > 0
    for P in (1, 3):
        assert fixed_sample_mse(kernel_sums("gini", x), "subsample", P, (0, 0, 0)) == pytest.approx(
            var_s / 4 / P, rel=1e-9
        )
