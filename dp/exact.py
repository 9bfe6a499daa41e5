"""Exact rational arithmetic for privacy analysis: directed rounding, exp and ln bounds, validators.

What it does
    * :func:`exp_bounds` -- rational bounds lo <= exp(t) <= hi, dyadic with
      denominators 2^640; :func:`ln_upper` / :func:`ln_lower` -- rational
      bounds of ln(x).  Both evaluate in :mod:`decimal` at 110 significant
      digits (correctly rounded ``exp`` / ``ln``), widen the value by a proven
      relative margin and round outward.
    * :func:`grid_up` / :func:`grid_down` -- outward rounding of a rational to
      the grid 2^-640, so that long products of bounds keep small
      denominators; :func:`ceil_div`, :func:`trailing_zeros`.
    * :func:`as_fraction` and the validators of the noise gadgets' parameters
      (:func:`check_fraction`, :func:`check_noise_epsilon`,
      :func:`check_positive_int`, :func:`check_batch`): a float is converted
      exactly, never rounded, and a bad value raises a
      :class:`~pairwise.dp.errors.PrivacyParameterError` (or its subclass
      :class:`~pairwise.dp.errors.NoiseParameterError`) naming the parameter.

    The privacy arithmetic of :mod:`pairwise.dp.dyadic` is built on these: an
    irrational constant (e^eps, alpha^(2^i)) only ever enters through a
    rational bound rounded in the safe direction, so every reported epsilon
    and delta is an upper bound of the true one.  The proofs of the margins
    are in ``docs/noise.md`` ("Exactness of the reported guarantee").

Security model
    Pure math on public parameters; no randomness, no private data.

Follows
    OpenDP's rule that privacy arithmetic rounds outward; Mironov, "On
    Significance of the Least Significant Bits for Differential Privacy"
    (CCS 2012) for why floating point never decides a guarantee here.
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

from .errors import NoiseParameterError, PrivacyParameterError
from .validate import check_int

__all__ = [
    "as_fraction",
    "check_fraction",
    "check_noise_epsilon",
    "check_positive_int",
    "check_batch",
    "ceil_div",
    "grid_up",
    "grid_down",
    "trailing_zeros",
    "exp_bounds",
    "ln_upper",
    "ln_lower",
]

_DEC_PREC = 110  # significant digits of the decimal exp/ln evaluations
_GRID = 640  # outward rounding of irrational bounds to multiples of 2^-_GRID
_EXP_CAP = 2000  # exp(-t) for t > _EXP_CAP is bounded by [0, exp(-_EXP_CAP)]


# ---------------------------------------------------------------------- validators
def as_fraction(value: object, name: str) -> Fraction:
    """Convert an int, Fraction, numpy integer or finite float exactly to a Fraction."""
    if isinstance(value, bool):
        raise PrivacyParameterError(f"{name} must be a number, got bool {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, numbers.Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    if isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise PrivacyParameterError(f"{name} must be finite, got {value!r}")
        return Fraction(f)
    raise PrivacyParameterError(f"{name} must be an int, Fraction or float, got {type(value).__name__} {value!r}")


def check_fraction(value: object, name: str) -> Fraction:
    """An int, Fraction or finite float, converted exactly (:func:`as_fraction`); raises NoiseParameterError."""
    try:
        return as_fraction(value, name)
    except PrivacyParameterError as exc:
        raise NoiseParameterError(str(exc)) from None


def check_noise_epsilon(value: object) -> Fraction:
    """A per-release epsilon of a noise gadget: exact, in [2^-40, 64]."""
    eps = check_fraction(value, "epsilon")
    if not 0 < eps <= 64:
        raise NoiseParameterError(f"epsilon must lie in (0, 64], got {value!r}")
    if eps < Fraction(1, 1 << 40):
        raise NoiseParameterError(f"epsilon={value!r} is below 2^-40; such a small epsilon is not supported")
    return eps


def check_positive_int(value: object, name: str, upper: int | None = None) -> int:
    return check_int(value, name, lo=1, hi=upper, error=NoiseParameterError)


def check_batch(batch: object) -> int:
    return check_int(batch, "batch", lo=0, error=NoiseParameterError)


# ---------------------------------------------------------------------- directed rounding
def ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def trailing_zeros(m: int) -> int:
    """The number of trailing zero bits of m > 0."""
    return (m & -m).bit_length() - 1


def grid_up(x: Fraction) -> Fraction:
    """Smallest multiple of 2^-640 that is >= x."""
    return Fraction(ceil_div(x.numerator << _GRID, x.denominator), 1 << _GRID)


def grid_down(x: Fraction) -> Fraction:
    """Largest multiple of 2^-640 that is <= x."""
    return Fraction((x.numerator << _GRID) // x.denominator, 1 << _GRID)


# ---------------------------------------------------------------------- exp and ln bounds
@lru_cache(maxsize=4096)
def exp_bounds(t: Fraction) -> tuple[Fraction, Fraction]:
    """Rational bounds lo <= exp(t) <= hi, dyadic with denominators 2^640.

    Evaluated with :mod:`decimal` at 110 significant digits.  ``Decimal.exp``
    is correctly rounded (half an ulp, relative error <= 10^-109); the decimal
    conversion of t has relative error <= 10^-109, hence absolute error
    <= |t| 10^-109, which changes exp by a relative factor <= 2 |t| 10^-109 for
    |t| <= 10^6.  The bounds widen the decimal value by the relative margin
    (2 |t| + 2) 10^-109, then round outward to multiples of 2^-640.  For
    t < -2000 the bounds are [0, exp(-2000)] (monotonicity).
    """
    t = Fraction(t)
    if t < -_EXP_CAP:
        return Fraction(0), exp_bounds(Fraction(-_EXP_CAP))[1]
    if t > _EXP_CAP:
        raise NoiseParameterError(f"exp({float(t):.4g}) is outside the supported range")
    with localcontext() as ctx:
        ctx.prec = _DEC_PREC
        ctx.Emin = -(10**8)
        ctx.Emax = 10**8
        v = (Decimal(t.numerator) / Decimal(t.denominator)).exp()
    vf = Fraction(v)
    margin = Fraction(2 * math.ceil(abs(t)) + 2, 10 ** (_DEC_PREC - 1))
    lo, hi = grid_down(vf * (1 - margin)), grid_up(vf * (1 + margin))
    return max(lo, Fraction(0)), hi


def ln_upper(x: Fraction) -> Fraction:
    """A rational upper bound of ln(x) for x >= 1 (decimal ln, correctly rounded, widened)."""
    with localcontext() as ctx:
        ctx.prec = _DEC_PREC
        v = (Decimal(x.numerator) / Decimal(x.denominator)).ln()
    # the argument's relative error 10^-109 moves ln by <= 2 * 10^-109; ln rounds by half an ulp.
    vf = Fraction(v)
    return vf + (abs(vf) + 4) * Fraction(1, 10 ** (_DEC_PREC - 1))


def ln_lower(x: Fraction) -> Fraction:
    """A rational lower bound of ln(x) for x >= 1 (the mirror of :func:`ln_upper`)."""
    with localcontext() as ctx:
        ctx.prec = _DEC_PREC
        v = (Decimal(x.numerator) / Decimal(x.denominator)).ln()
    vf = Fraction(v)
    return vf - (abs(vf) + 4) * Fraction(1, 10 ** (_DEC_PREC - 1))
