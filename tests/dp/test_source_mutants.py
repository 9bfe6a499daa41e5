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
