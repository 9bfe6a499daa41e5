"""Tests of dp.accounting: validation, composition, outward rounding."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest

from pairwise.dp.accounting import (
    PrivacyGuarantee,
    advanced_composition,
    basic_composition,
    round_up,
    validate_delta,
    validate_epsilon,
)
from pairwise.dp.errors import PrivacyParameterError


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, math.inf, math.nan, True, "1", None, [1.0]])
def test_validate_epsilon_rejects(bad):
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        validate_epsilon(bad)


@pytest.mark.parametrize("bad", [-1e-9, 1.0, 1.5, math.nan, math.inf, False, "0"])
def test_validate_delta_rejects(bad):
    with pytest.raises(PrivacyParameterError, match="delta"):
        validate_delta(bad)


def test_validate_accepts_and_converts():
    assert validate_epsilon(Fraction(1, 2)) == 0.5
    assert validate_epsilon(3) == 3.0
    assert validate_delta(0) == 0.0
    assert validate_delta(1e-9) == 1e-9


def test_guarantee_is_validated_and_frozen():
    g = PrivacyGuarantee(1.0)
    assert g.delta == 0.0 and g.is_pure and str(g) == "1-DP"
    with pytest.raises(PrivacyParameterError):
        PrivacyGuarantee(0.0)
    with pytest.raises(PrivacyParameterError):
        PrivacyGuarantee(1.0, 1.0)
    with pytest.raises(AttributeError):
        g.epsilon = 2.0  # type: ignore[misc]


def test_a_computed_guarantee_is_a_privacy_guarantee_that_prints_as_before():
    """The noise gadgets' guarantees (method, delta_bound, tv_to_ideal) are PrivacyGuarantees; the text and JSON
    forms are those of the former NoiseGuarantee, and a stated guarantee prints as it always did."""
    g = PrivacyGuarantee(1.0, 2.5e-13, "certified", 3e-13, 1e-12, Fraction(1, 2**42), 2.0**-40)
    assert str(g) == "(1, 2.5e-13)-DP [certified]" and not g.is_pure
    assert repr(g) == (
        "PrivacyGuarantee(epsilon=1.0, delta=2.5e-13, method='certified', delta_bound=3e-13, "
        "tv_to_ideal=1e-12, target_delta=9.094947017729282e-13)"
    )
    assert g.as_dict() == {
        "epsilon": 1.0,
        "delta": 2.5e-13,
        "method": "certified",
        "delta_bound": 3e-13,
        "tv_to_ideal": 1e-12,
        "target_delta": 2.0**-40,
    }
    assert g.delta_rational == Fraction(1, 2**42) and g.privacy() == PrivacyGuarantee(1.0, 2.5e-13)
    pure = PrivacyGuarantee(0.5, 0.0, "pure", 0.0, 0.01)
    assert str(pure) == "0.5-DP (pure)" and pure.is_pure
    stated = PrivacyGuarantee(1.0)
    assert str(stated) == "1-DP" and repr(stated) == "PrivacyGuarantee(epsilon=1.0, delta=0.0)"
    assert str(PrivacyGuarantee(1.0, 1e-6)) == "(1, 1e-06)-DP" and stated.method is None
    assert basic_composition([g, stated]) == PrivacyGuarantee(2.0, 2.5e-13)
    with pytest.raises(PrivacyParameterError, match="method"):
        PrivacyGuarantee(1.0, 0.0, "approximate")


def test_round_up_is_the_smallest_double_above():
    exact = Fraction(1, 3)
    r = round_up(exact)
    assert Fraction(r) >= exact
    assert Fraction(math.nextafter(r, -math.inf)) < exact
    assert round_up(Fraction(1, 2)) == 0.5  # exact values are kept


def test_basic_composition_rounds_outward():
    gs = [PrivacyGuarantee(0.1, 1e-7), PrivacyGuarantee(0.2, 2e-7), PrivacyGuarantee(0.7)]
    total = basic_composition(gs)
    exact_eps = Fraction(0.1) + Fraction(0.2) + Fraction(0.7)
    exact_delta = Fraction(1e-7) + Fraction(2e-7)
    assert Fraction(total.epsilon) >= exact_eps
    assert Fraction(math.nextafter(total.epsilon, 0)) < exact_eps
    assert Fraction(total.delta) >= exact_delta
    assert total.epsilon == pytest.approx(1.0)


def test_basic_composition_errors():
    with pytest.raises(PrivacyParameterError, match="at least one"):
        basic_composition([])
    with pytest.raises(PrivacyParameterError, match="PrivacyGuarantee"):
        basic_composition([1.0])  # type: ignore[list-item]
    with pytest.raises(PrivacyParameterError, match="delta"):
        basic_composition([PrivacyGuarantee(1.0, 0.6), PrivacyGuarantee(1.0, 0.5)])


def _drv_reference(eps: float, k: int, slack: float) -> float:
    with localcontext() as ctx:
        ctx.prec = 100
        e, kk = Decimal(eps), Decimal(k)
        val = (2 * kk * (1 / Decimal(slack)).ln()).sqrt() * e + kk * e * (e.exp() - 1)
        return min(val, kk * e)


@pytest.mark.parametrize("eps,k,slack", [(0.1, 100, 1e-6), (0.01, 10_000, 1e-9), (1.0, 5, 1e-5), (0.5, 1, 0.1)])
def test_advanced_composition_matches_drv_and_rounds_up(eps, k, slack):
    g = advanced_composition(eps, 1e-8, k, slack)
    ref = _drv_reference(eps, k, slack)
    assert Fraction(g.epsilon) >= Fraction(ref)
    assert g.epsilon == pytest.approx(float(ref), rel=1e-14)
    assert Fraction(g.delta) >= Fraction(k) * Fraction(1e-8) + Fraction(slack)


def test_advanced_composition_beats_basic_for_many_small_steps():
    g = advanced_composition(0.01, 0.0, 10_000, 1e-6)
    assert g.epsilon < 0.01 * 10_000 / 10  # about 6.3 + 1.0 versus 100


def test_advanced_composition_never_worse_than_basic():
    g = advanced_composition(2.0, 0.0, 2, 1e-6)
    assert g.epsilon == 4.0  # the DRV bound is larger here; basic k*eps is returned


@pytest.mark.parametrize(
    "args,match",
    [
        ((0.0, 0.0, 10, 1e-6), "epsilon"),
        ((1.0, 1.0, 10, 1e-6), "delta"),
        ((1.0, 0.0, 0, 1e-6), "k must"),
        ((1.0, 0.0, 2.5, 1e-6), "k must"),
        ((1.0, 0.0, 10, 0.0), "delta_slack"),
        ((1.0, 0.2, 10, 1e-6), ">= 1"),
    ],
)
def test_advanced_composition_errors(args, match):
    with pytest.raises(PrivacyParameterError, match=match):
        advanced_composition(*args)
