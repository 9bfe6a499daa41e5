"""Privacy guarantees as data, validation, and composition with outward rounding.

What it does
    :class:`PrivacyGuarantee` is an immutable, validated (epsilon, delta) pair
    that every mechanism of :mod:`dp` carries in its ``guarantee`` attribute;
    a guarantee computed from an exact distribution (the in-circuit noise
    gadgets) also records how (``method``, ``delta_bound``, ``tv_to_ideal``).
    :func:`basic_composition` adds guarantees (sequential composition, Dwork
    and Roth 2014, Thm 3.16); :func:`advanced_composition` is the k-fold
    adaptive composition bound of Dwork, Rothblum and Vadhan (FOCS 2010;
    Dwork-Roth Thm 3.20):

        epsilon' = sqrt(2 k ln(1/delta')) * epsilon + k * epsilon * (e^epsilon - 1),
        delta''  = k * delta + delta'.

Rounding
    Privacy arithmetic rounds outward, as in OpenDP: the epsilon and delta we
    report are never smaller than the exact real-number result.  Sums of floats
    are computed exactly with :class:`fractions.Fraction` and rounded up to the
    next double; the advanced-composition formula is evaluated in
    :mod:`decimal` with 60 significant digits and ``ROUND_CEILING`` on every
    operation (each step is monotone in its inputs, so the result is an upper
    bound), then rounded up to a double.

Security model
    Pure math on public parameters; no randomness.

Validation
    epsilon must be a finite real number > 0; delta a real number in [0, 1);
    anything else raises :class:`pairwise.dp.errors.PrivacyParameterError`.
    :func:`check_epsilon` adds the limits every ``pairwise`` command applies
    to a user-supplied epsilon, [:data:`EPSILON_MIN`, :data:`EPSILON_MAX`] =
    [2^-32, 500], so an epsilon accepted by one command is accepted by all
    of them.  Below 2^-32 the noise gadgets have no exact parameters; above
    500, e^epsilon nears the end of the double range (it overflows at 709.8)
    that randomized-response mechanisms compute with.  A mechanism whose own
    largest useful epsilon is smaller (a noise gadget: 64 per release; an
    ECDF tree node: 32) uses that one, which is epsilon-DP all the more, and
    reports the epsilon it used.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal, localcontext
from fractions import Fraction

from .errors import PrivacyParameterError
from .validate import check_int

__all__ = [
    "PrivacyGuarantee",
    "GUARANTEE_METHODS",
    "validate_epsilon",
    "check_epsilon",
    "EPSILON_MIN",
    "EPSILON_MAX",
    "validate_delta",
    "basic_composition",
    "advanced_composition",
    "round_up",
]


def _as_real(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PrivacyParameterError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    try:
        return float(value)
    except (OverflowError, ValueError) as exc:  # e.g. a huge Fraction
        raise PrivacyParameterError(f"{name}={value!r} is not representable as a float") from exc


def validate_epsilon(eps: object) -> float:
    """Return ``eps`` as a float if it is a finite real number > 0, else raise.

    >>> validate_epsilon(0.5)
    0.5
    """
    value = _as_real(eps, "epsilon")
    if not math.isfinite(value) or value <= 0.0:
        raise PrivacyParameterError(f"epsilon must be finite and > 0, got {eps!r}")
    return value


#: Smallest epsilon a command accepts (2^-32, about 2.3e-10): below it the in-circuit
#: noise gadgets find no parameters within their precision, and no useful release exists.
EPSILON_MIN = 2.0**-32
#: Largest epsilon a command accepts: a typo guard that keeps e^epsilon a finite double
#: (mechanisms cap their own per-release epsilon lower where the noise is already nil).
EPSILON_MAX = 500.0


def check_epsilon(eps: object, name: str = "epsilon") -> float:
    """``eps`` as a float if it lies in [EPSILON_MIN, EPSILON_MAX], else raise.

    The one validator of user-supplied epsilons (command line and drivers):

    >>> check_epsilon(1)
    1.0
    """
    if isinstance(eps, str):
        try:
            eps = float(eps)
        except ValueError:
            raise PrivacyParameterError(f"{name} must be a number, got {eps!r}") from None
    value = _as_real(eps, name)
    if not math.isfinite(value):
        raise PrivacyParameterError(f"{name} must be a finite number, got {eps!r}")
    if not EPSILON_MIN <= value <= EPSILON_MAX:
        raise PrivacyParameterError(
            f"{name} must lie in [2^-32, {EPSILON_MAX:g}] (about [2.3e-10, {EPSILON_MAX:g}]), got {eps!r}"
        )
    return value


def validate_delta(delta: object) -> float:
    """Return ``delta`` as a float if it is a real number in [0, 1), else raise."""
    value = _as_real(delta, "delta")
    if not (0.0 <= value < 1.0):  # also rejects NaN
        raise PrivacyParameterError(f"delta must lie in [0, 1), got {delta!r}")
    return value


def round_up(value: Fraction | Decimal | int) -> float:
    """The smallest double that is >= ``value`` (an exact rational or decimal)."""
    as_float = float(value)
    exact = Fraction(value)
    if Fraction(as_float) < exact:
        as_float = math.nextafter(as_float, math.inf)
    return as_float


#: How a computed guarantee's delta was obtained (:attr:`PrivacyGuarantee.method`).
GUARANTEE_METHODS = ("exact", "certified", "bound", "pure")


@dataclass(frozen=True)
class PrivacyGuarantee:
    """An (epsilon, delta)-differential-privacy guarantee; delta = 0 is pure DP.

    The values are validated at construction (see :func:`validate_epsilon` and
    :func:`validate_delta`) and stored as floats.

    A guarantee *computed* from a mechanism's exact output distribution (the
    in-circuit noise gadgets, :mod:`pairwise.dp.dyadic.guarantee`) also says
    how, in the optional fields: ``method`` is ``"exact"`` (delta from the
    exact pmf), ``"certified"`` (exact ratio certificates; delta is an exact
    tail), ``"bound"`` (a rigorous upper bound) or ``"pure"``; ``epsilon``
    and ``delta`` are then doubles rounded *up* from exact rationals, and
    ``delta_rational`` is that rational.  ``delta_bound`` is the rigorous
    bound (``>= delta``); ``tv_to_ideal`` bounds the total variation distance
    between the mechanism's noise and the ideal mechanism's (a utility
    figure); ``target_delta`` is the delta the parameters were chosen for
    (None if chosen by hand).  A guarantee that is stated, not computed, has
    ``method=None`` and no such fields.  (This is the one guarantee type:
    ``pairwise.circuits.noise.NoiseGuarantee`` is a deprecated alias.)
    """

    epsilon: float
    delta: float = 0.0
    method: str | None = None
    delta_bound: float | None = None
    tv_to_ideal: float | None = None
    delta_rational: Fraction | None = field(default=None, repr=False)
    target_delta: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", validate_epsilon(self.epsilon))
        object.__setattr__(self, "delta", validate_delta(self.delta))
        if self.method is not None and self.method not in GUARANTEE_METHODS:
            raise PrivacyParameterError(f"method must be one of {GUARANTEE_METHODS} or None, got {self.method!r}")

    @property
    def is_pure(self) -> bool:
        """True for pure epsilon-DP (delta == 0)."""
        return self.delta == 0.0

    def privacy(self) -> PrivacyGuarantee:
        """The (epsilon, delta) alone, without how it was computed."""
        return PrivacyGuarantee(self.epsilon, self.delta)

    def as_dict(self) -> dict:
        """The guarantee as the JSON object the command line prints (None for fields not computed)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "method": self.method,
            "delta_bound": self.delta_bound,
            "tv_to_ideal": self.tv_to_ideal,
            "target_delta": self.target_delta,
        }

    def __repr__(self) -> str:
        shown = ["epsilon", "delta"]
        if self.method is not None:
            shown += ["method", "delta_bound", "tv_to_ideal", "target_delta"]
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in shown)})"

    def __str__(self) -> str:
        if self.method is None:
            return f"{self.epsilon:.6g}-DP" if self.is_pure else f"({self.epsilon:.6g}, {self.delta:.3g})-DP"
        if self.is_pure:
            return f"{self.epsilon:.6g}-DP (pure)"
        return f"({self.epsilon:.6g}, {self.delta:.3g})-DP [{self.method}]"


def basic_composition(guarantees: Iterable[PrivacyGuarantee]) -> PrivacyGuarantee:
    """Sequential composition: (sum of epsilons, sum of deltas), rounded up.

    Raises :class:`PrivacyParameterError` if the list is empty, holds something
    that is not a :class:`PrivacyGuarantee`, or if the deltas add up to 1 or
    more (a vacuous guarantee).
    """
    items = list(guarantees)
    if not items:
        raise PrivacyParameterError("basic_composition needs at least one guarantee")
    for g in items:
        if not isinstance(g, PrivacyGuarantee):
            raise PrivacyParameterError(f"basic_composition takes PrivacyGuarantee objects, got {type(g).__name__}")
    eps = round_up(sum((Fraction(g.epsilon) for g in items), Fraction(0)))
    delta = round_up(sum((Fraction(g.delta) for g in items), Fraction(0)))
    if delta >= 1.0:
        raise PrivacyParameterError(f"composed delta {delta!r} is >= 1: the composition gives no guarantee")
    return PrivacyGuarantee(eps, delta)


def advanced_composition(epsilon: float, delta: float, k: int, delta_slack: float) -> PrivacyGuarantee:
    """k-fold adaptive composition of (epsilon, delta)-DP mechanisms (DRV 2010).

    Returns (epsilon', k*delta + delta_slack) with
    epsilon' = min(k*epsilon, sqrt(2k ln(1/delta_slack))*epsilon + k*epsilon*(e^epsilon - 1)),
    every quantity rounded up.  (Taking the minimum with k*epsilon is valid:
    basic composition gives (k*epsilon, k*delta), which is stronger than
    (k*epsilon, k*delta + delta_slack).)

    Parameters: epsilon > 0, delta in [0, 1), integer k >= 1, delta_slack in (0, 1).
    """
    eps = validate_epsilon(epsilon)
    dlt = validate_delta(delta)
    k = check_int(k, "k", lo=1, error=PrivacyParameterError)
    slack = validate_delta(delta_slack)
    if slack == 0.0:
        raise PrivacyParameterError("delta_slack must be > 0 for advanced composition")
    k = int(k)
    with localcontext() as ctx:
        ctx.prec = 60
        ctx.rounding = ROUND_CEILING
        d_eps = Decimal(eps)
        d_k = Decimal(k)
        # ln(1/delta') is decreasing in delta'; 1/delta' rounded up then ln rounded up
        # gives an upper bound.
        log_term = (Decimal(1) / Decimal(slack)).ln()
        first = (2 * d_k * log_term).sqrt() * d_eps
        second = d_k * d_eps * (d_eps.exp() - 1)
        advanced = first + second
        basic = d_k * d_eps
        eps_total = min(advanced, basic)
    delta_total = round_up(Fraction(k) * Fraction(dlt) + Fraction(slack))
    if delta_total >= 1.0:
        raise PrivacyParameterError(
            f"k*delta + delta_slack = {delta_total!r} is >= 1: no guarantee; lower delta or delta_slack"
        )
    return PrivacyGuarantee(round_up(eps_total), delta_total)
