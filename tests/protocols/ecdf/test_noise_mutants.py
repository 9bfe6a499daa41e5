"""The ECDF servers' noise at its documented edges: the cases a source-level mutation run found untested (issue 25 item 6).

``tests/mutation/source_mutants.py`` over ``protocols/ecdf/noise.py`` left
mutants alive at the edges of the Polya sampler and of the per-value
epsilon: the support limit off by one, a negative draw size accepted, the cap
on eps_v or the circuit's default delta target moved.  These tests pin each edge to what the module documents; exact
integers throughout (the laws themselves are checked in ``test_ecdf_noise.py``
and ``tests/statistical/test_noise_power_ecdf.py``).  Survivors and their
fates: ``benchmarks/RESULTS.md``, "Source-level mutation run over the ECDF ledger and noise".
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from pairwise.protocols.ecdf import noise
from pairwise.protocols.ecdf.noise import NoiseSetupError, noise_share, polya_table, sample_polya, value_epsilon

#: polya_table without its cache, so a changed MAX_POLYA_SUPPORT takes effect
_build = polya_table.__wrapped__


def test_the_polya_support_limit_admits_exactly_max_polya_support_points(monkeypatch):
    """MAX_POLYA_SUPPORT is the largest table ("support points"): a law that needs N points builds under a
    limit of N, with all N, and is refused under N - 1, by the same error as a scale far too large."""
    shape, eps = Fraction(1, 2), Fraction(5, 7)
    n = _build(shape, eps, 1).support
    assert 100 < n < 200  # the tail 2^-122 at a = e^(-5/7): about 122 ln 2 / (5/7) = 118 points
    monkeypatch.setattr(noise, "MAX_POLYA_SUPPORT", n)
    assert _build(shape, eps, 1).support == n
    monkeypatch.setattr(noise, "MAX_POLYA_SUPPORT", n - 1)
    with pytest.raises(NoiseSetupError, match=f"needs more than {n - 1} support points"):
        _build(shape, eps, 1)


def test_an_empty_draw_is_empty_and_a_negative_size_is_refused():
    t = polya_table(Fraction(1, 3), Fraction(1, 2), 1)
    for arr in (sample_polya(t, 0), noise_share(t, 0)):
        assert arr.shape == (0,) and arr.dtype == np.int64
    assert sample_polya(t, 1).shape == (1,)
    with pytest.raises(NoiseSetupError, match="size must be >= 0"):
        sample_polya(t, -1)


def test_a_huge_budget_is_spent_at_the_documented_per_value_cap_of_32():
    """Module comment: larger budgets use eps_v = 32 (P[noise != 0] ~ 2 e^-32 per value); the cap is published
    with every release (``value_epsilon`` in the reply), and a table is built at it and refused above it."""
    assert noise.MAX_VALUE_EPSILON == 32
    assert value_epsilon(Fraction(10**6), 3) == 32 and value_epsilon(Fraction(96), 3) == 32
    assert value_epsilon(Fraction(95), 3) == Fraction(95, 3)
    polya_table(Fraction(1, 2), Fraction(32), 1)
    with pytest.raises(NoiseSetupError, match=r"\(0, 32\]"):
        polya_table(Fraction(1, 2), Fraction(32) + Fraction(1, 10**9), 1)


def test_a_scale_far_beyond_the_limit_is_refused_before_any_table_arithmetic(monkeypatch):
    """The fail-fast check: eps_v / S = 10^-7 needs about 8.5e8 points (> 2 MAX_POLYA_SUPPORT), so the request
    is refused at once, without the 2^21 steps of exact arithmetic that would end in the same refusal."""

    def started(*_):
        raise AssertionError("the table's arithmetic was started for a scale that cannot fit")

    monkeypatch.setattr(noise, "exp_bounds", started)
    with pytest.raises(NoiseSetupError, match="support points"):
        _build(Fraction(1, 3), Fraction(1, 10**7), 1)
    with pytest.raises(NoiseSetupError, match="support points"):
        _build(Fraction(1, 3), Fraction(1, 2), 2**21)  # the same scale through the sensitivity


def test_the_noisy_sum_circuit_defaults_to_the_services_delta_target():
    """Without ``lam``, the circuit is chosen for delta <= 2^-LAMBDA / changed, LAMBDA = 40 as in every release
    (release.py passes it explicitly; the default serves direct callers such as these tests)."""
    from pairwise.protocols.ecdf.release import LAMBDA

    for changed in (1, 11):
        nsc = noise.noisy_sum_circuit(16, Fraction(1, 2), 1, changed)
        assert nsc.params.target_delta == Fraction(1, 2**LAMBDA * changed) == Fraction(1, 2**40 * changed)
        assert nsc.params == noise.noisy_sum_circuit(16, Fraction(1, 2), 1, changed, LAMBDA).params
        assert changed * nsc.guarantee.delta <= 2.0**-40
