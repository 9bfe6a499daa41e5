"""Public bounds: validation, owner-side clamping, the public fixed-point grid.

What it does
    Every mechanism of the project is parameterised by a public domain
    [lower, upper] (and, for fixed-point circuits and discrete domains, a
    public number of decimals D). This module holds the pure functions that
    turn those public parameters and one owner's value into what enters a
    mechanism:

    * :func:`validate_bounds`, :func:`validate_decimals`,
      :func:`validate_quantile_levels`: check public parameters before any
      budget is charged or any noise is drawn;
    * :func:`default_decimals`: the documented default scale, a function of
      the public bounds only (at least 10^4 grid steps across [lower, upper]);
    * :func:`clamp` and :func:`to_fixed_point`: each owner clamps its value
      into [lower, upper] (and rounds it to the grid lower + k 10^-D) before
      anything else happens, as in the papers' protocols where every user
      does this locally;
    * :func:`grid_span`: the public number of grid steps round((U - L) 10^D),
      from which sensitivities and circuit widths are derived;
    * :func:`clamp_estimate`: post-processing of a raw (unbiased) estimate
      into its natural range.

Security model
    Pure functions; no randomness. Parameters that shape a mechanism come
    from :class:`PublicDomain` values, never from the data: nothing here
    looks at a whole dataset to choose a bound, a scale or a width. The
    count of clamped values that :func:`clamp` and :func:`to_fixed_point`
    return depends on the private data. It is a diagnostic for whoever runs
    the whole dataset locally (the command line reports it labelled "not
    private") and must never be part of a private output.

Follows
    [BBGK20, Sec. 3 and 5] (public quantization bounds; the kernel range R of
    Theorem 5), [BMR25] (public domain of the values), [OMH22, Eq. (6)]
    (truncation into public bounds).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .errors import PrivacyParameterError
from .validate import check_int

__all__ = [
    "PublicDomain",
    "MAX_DECIMALS",
    "validate_bounds",
    "validate_decimals",
    "default_decimals",
    "grid_span",
    "clamp",
    "to_fixed_point",
    "validate_quantile_levels",
    "clamp_estimate",
]

#: Largest number of decimals of a fixed-point grid (10^12 steps per unit).
MAX_DECIMALS = 12
#: Largest grid span (steps) a fixed-point column may have: values fit an int64 with room to spare.
MAX_SPAN = 1 << 62
#: Steps across [lower, upper] that :func:`default_decimals` aims for.
DEFAULT_STEPS = 10**4


def validate_bounds(lower: object, upper: object, what: str = "the column") -> tuple[float, float]:
    """Return (lower, upper) as floats if both are finite reals with lower < upper, else raise."""
    vals = []
    for name, v in (("lower", lower), ("upper", upper)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise PrivacyParameterError(f"the {name} bound of {what} must be a real number, got {v!r}")
        f = float(v)
        if not math.isfinite(f):
            raise PrivacyParameterError(f"the {name} bound of {what} must be finite, got {v!r}")
        vals.append(f)
    lo, hi = vals
    if not lo < hi:
        raise PrivacyParameterError(f"the bounds of {what} must satisfy lower < upper, got [{lo:g}, {hi:g}]")
    return lo, hi


def validate_decimals(decimals: object, what: str = "the column") -> int:
    """Return ``decimals`` if it is an integer in [0, MAX_DECIMALS], else raise."""
    return check_int(decimals, f"the decimals of {what}", lo=0, hi=MAX_DECIMALS, error=PrivacyParameterError)


def default_decimals(lower: float, upper: float) -> int:
    """The default scale: the fewest decimals D >= 0 with (upper - lower) 10^D >= 10^4 steps.

    A function of the public bounds only, e.g. 4 for [1, 5], 0 for [0, 10^6].
    """
    lo, hi = validate_bounds(lower, upper)
    d = max(0, math.ceil(math.log10(DEFAULT_STEPS / (hi - lo))))
    return min(d, MAX_DECIMALS)


@dataclass(frozen=True)
class PublicDomain:
    """The public domain of one column: [lower, upper] on the grid lower + k 10^-decimals.

    ``decimals=None`` means :func:`default_decimals`. ``source`` says where
    the domain comes from (a flag, a shipped dataset's declared domain).
    """

    lower: float
    upper: float
    decimals: int | None = None
    source: str = ""

    def __post_init__(self) -> None:
        lo, hi = validate_bounds(self.lower, self.upper, self.source or "the column")
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)
        if self.decimals is not None:
            object.__setattr__(self, "decimals", validate_decimals(self.decimals, self.source or "the column"))

    @property
    def scale_decimals(self) -> int:
        """The decimals in force: the declared ones or :func:`default_decimals`."""
        return default_decimals(self.lower, self.upper) if self.decimals is None else int(self.decimals)

    @property
    def step(self) -> float:
        """Natural units per grid step, 10^-decimals."""
        return 10.0**-self.scale_decimals

    @property
    def span(self) -> int:
        """Grid steps from lower to upper (see :func:`grid_span`)."""
        return grid_span(self.lower, self.upper, self.scale_decimals)

    def as_dict(self) -> dict:
        return {"lower": self.lower, "upper": self.upper, "decimals": self.scale_decimals}


def grid_span(lower: float, upper: float, decimals: int) -> int:
    """round((upper - lower) 10^decimals): the public number of grid steps; at least 1, below 2^62."""
    lo, hi = validate_bounds(lower, upper)
    d = validate_decimals(decimals)
    span = round((hi - lo) * 10**d)
    if span < 1:
        raise PrivacyParameterError(f"the domain [{lo:g}, {hi:g}] has no grid step at {d} decimals: raise the decimals")
    if span >= MAX_SPAN:
        raise PrivacyParameterError(
            f"the domain [{lo:g}, {hi:g}] at {d} decimals has {span:.3g} grid steps, more than 2^62 (a 64-bit "
            f"word): " + ("lower the decimals or narrow the domain" if d > 0 else "narrow the domain")
        )
    return int(span)


def clamp(values: object, lower: float, upper: float) -> tuple[np.ndarray, int]:
    """Each value clamped into [lower, upper], and how many were moved (private: a diagnostic only)."""
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise PrivacyParameterError("values must be finite numbers")
    moved = int(np.count_nonzero((v < lower) | (v > upper)))
    return np.clip(v, lower, upper), moved


def to_fixed_point(values: object, domain: PublicDomain) -> tuple[np.ndarray, int]:
    """Owner-side mapping to the public grid: k = round((clamp(v) - lower) 10^D), 0 <= k <= span.

    Returns int64 grid indices and the number of values clamped (private:
    a diagnostic only).
    """
    v, moved = clamp(values, domain.lower, domain.upper)
    d = domain.scale_decimals
    k = np.rint((v - domain.lower) * 10.0**d)
    return np.clip(k, 0, domain.span).astype(np.int64), moved


def validate_quantile_levels(levels: Iterable[object]) -> list[float]:
    """Quantile levels as floats, each finite and in (0, 1]; at least one."""
    out = []
    for q in levels:
        if (
            isinstance(q, bool)
            or not isinstance(q, numbers.Real)
            or not math.isfinite(float(q))
            or not 0.0 < float(q) <= 1.0
        ):
            raise PrivacyParameterError(f"quantile levels must lie in (0, 1], got {q!r}")
        out.append(float(q))
    if not out:
        raise PrivacyParameterError("give at least one quantile level")
    return out


def clamp_estimate(value: float, lower: float, upper: float) -> float:
    """A raw estimate post-processed into its natural range [lower, upper] (no privacy cost)."""
    return float(min(max(float(value), lower), upper))
