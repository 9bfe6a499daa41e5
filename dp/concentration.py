"""Confidence intervals from public quantities: exact tail bounds of the noise laws the releases use.

What it does
    Pure math for the ``(1 - alpha)`` intervals published next to DP releases.
    Every width here is a function of public parameters only (n, the pair
    design, epsilon, the public domain and the exact law of the noise), never
    of the data, so it is the same on neighbouring datasets.

    * :class:`IntervalWidth`: how far below and above a release the target
      can lie, the method and alpha.
    * :func:`chernoff_radius`: the smallest t with inf_s exp(Lambda(s) - s t)
      <= beta for a log-MGF bound Lambda (Chernoff 1952).  Any s gives a
      valid bound, so a numerical search that misses the optimum only widens
      the interval; the result is padded by a relative 1e-9 against rounding.
    * :func:`finite_log_mgf`: log E exp(u (V - c)) of a finite law, by
      log-sum-exp (no overflow).
    * :func:`dyadic_noise_log_mgf`: the centred log-MGF of the in-circuit
      discrete-Laplace noise, exactly, from its independent binary digits
      (difference of two geometrics, or the signed geometric), see
      :class:`pairwise.dp.dyadic.DiscreteLaplaceParams`.
    * :func:`krr_estimate_log_mgf`: the centred log-MGF of a debiased k-ary
      randomized response report, the largest over the true values.
    * :func:`bernstein_radius`, :func:`hoeffding_radius`: sums of independent
      bounded terms (Bernstein 1924 in its usual form; Hoeffding 1963, Thm 2).
    * :func:`binomial_band`: exact two-sided quantiles of Bin(n, p).

Security model
    None of its own: the inputs are public parameters.  The bounds are
    derived in ``docs/intervals.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = [
    "IntervalWidth",
    "chernoff_radius",
    "finite_log_mgf",
    "dyadic_noise_log_mgf",
    "krr_estimate_log_mgf",
    "bernstein_radius",
    "hoeffding_radius",
    "binomial_band",
    "check_alpha",
    "PAD",
]

#: Relative padding of every computed radius (floating-point rounding in the bound's evaluation).
PAD = 1e-9

LogMGF = Callable[[np.ndarray], np.ndarray]


def check_alpha(alpha: object) -> float:
    """``alpha`` in (0, 1/2]: the interval's miss probability."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, Fraction)) or not 0 < float(alpha) <= 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5], got {alpha!r}")
    return float(alpha)


@dataclass(frozen=True)
class IntervalWidth:
    """The target lies in [estimate - below, estimate + above] with probability >= 1 - alpha.

    ``below`` / ``above`` are in the release's units and depend on public
    parameters only; ``method`` names the bound (published as
    ``interval_method``).
    """

    below: float
    above: float
    alpha: float
    method: str

    def around(self, estimate: float) -> list[float]:
        """The interval [estimate - below, estimate + above]."""
        return [float(estimate) - self.below, float(estimate) + self.above]

    @property
    def width(self) -> float:
        return self.below + self.above

    def scaled(self, factor: float) -> IntervalWidth:
        """The same interval in units ``factor`` times larger (factor > 0)."""
        return IntervalWidth(self.below * factor, self.above * factor, self.alpha, self.method)


def chernoff_radius(log_mgf: LogMGF, beta: float, scale: float, s_max: float = math.inf) -> float:
    """min over s in (0, s_max) of (Lambda(s) + ln(1/beta)) / s: P(E >= t) <= beta for that t.

    ``log_mgf(s)`` (vectorized over an array of s > 0) must bound
    log E exp(s E) from above.  ``scale``: a rough size of E (its standard
    deviation), which centres the search grid; the minimum is found on a
    log grid then refined by golden section (the objective is quasi-convex
    when Lambda is convex with Lambda(0) = 0).
    """
    if not 0 < beta < 1:
        raise ValueError(f"beta must lie in (0, 1), got {beta!r}")
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"scale must be positive, got {scale!r}")
    L = math.log(1.0 / beta)

    def objective(s: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            v = (np.asarray(log_mgf(s), dtype=np.float64) + L) / s
        return np.where(np.isfinite(v), v, np.inf)

    centre = math.log(1.0 / scale)
    grid = np.exp(centre + np.linspace(-12.0, 12.0, 241))
    if math.isfinite(s_max):
        grid = grid[grid < s_max]
        if grid.size == 0:
            grid = np.array([s_max / 2])
    vals = objective(grid)
    i = int(np.argmin(vals))
    lo = grid[max(i - 1, 0)]
    hi = grid[min(i + 1, grid.size - 1)]
    best = float(vals[i])
    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        c, d = b - g * (b - a), a + g * (b - a)
        fc, fd = objective(np.array([math.exp(c), math.exp(d)]))
        best = min(best, float(fc), float(fd))
        if fc < fd:
            b = d
        else:
            a = c
    if not math.isfinite(best):
        raise ValueError("no finite Chernoff bound: the log-MGF is infinite on the search range")
    return best * (1 + PAD)


def finite_log_mgf(values: Sequence[float], probs: Sequence[float], centre: float, u: np.ndarray) -> np.ndarray:
    """log E exp(u (V - centre)) for V with P(V = values[i]) = probs[i], for every u (log-sum-exp)."""
    v = np.asarray(values, dtype=np.float64) - centre
    lp = np.log(np.asarray(probs, dtype=np.float64))
    x = np.multiply.outer(np.asarray(u, dtype=np.float64), v) + lp
    m = x.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[..., 0]


def _log1p_expm1(p: float, x: np.ndarray) -> np.ndarray:
    """log(1 - p + p e^x) without overflow: log1p(p expm1(x)) for x <= 0, x + log(p + (1 - p) e^-x) above."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    neg = x <= 0
    out[neg] = np.log1p(p * np.expm1(x[neg]))
    xp = x[~neg]
    out[~neg] = xp + np.log(p + (1 - p) * np.exp(-xp))
    return out


def _geometric_log_mgf(params, u: np.ndarray) -> np.ndarray:
    """log E exp(u X) for the K-digit geometric X = sum_i B_i 2^i, B_i ~ Bernoulli(m_i / 2^a_i) independent."""
    total = np.zeros_like(np.asarray(u, dtype=np.float64))
    for i, (m, a) in enumerate(zip(params.numerators, params.accs)):
        p = m / float(1 << a)
        if p > 0:
            total = total + _log1p_expm1(p, np.asarray(u, dtype=np.float64) * float(1 << i))
    return total


def dyadic_noise_log_mgf(params, u: np.ndarray) -> np.ndarray:
    """log E exp(u (Z - E Z)) of the in-circuit discrete-Laplace noise Z, exactly (any real u).

    ``difference``: Z = X1 - X2, so log E e^{uZ} = g(u) + g(-u) with g the
    geometric's log-MGF; ``signed``: Z = X or -(X + 1) with probability 1/2
    each (E Z = -1/2).
    """
    u = np.asarray(u, dtype=np.float64)
    mean = float(params.noise_mean)
    if params.construction == "difference":
        return _geometric_log_mgf(params, u) + _geometric_log_mgf(params, -u) - u * mean
    a = _geometric_log_mgf(params, u)
    b = -u + _geometric_log_mgf(params, -u)
    m = np.maximum(a, b)
    return m + np.log(0.5 * np.exp(a - m) + 0.5 * np.exp(b - m)) - u * mean


def krr_estimate_log_mgf(params, values: Sequence[int], slope: float, intercept: float, u: np.ndarray) -> np.ndarray:
    """max over the true value h of log E exp(u (slope * V + intercept - h)), V the k-RR report of h.

    The report is h with probability 1 - phi and each other value with
    probability phi / (k - 1) (:class:`pairwise.dp.dyadic.KaryRRParams`).
    """
    u = np.asarray(u, dtype=np.float64)
    keep, other = float(params.keep_probability), float(params.other_probability)
    est = [slope * v + intercept for v in values]
    worst = np.full(u.shape, -np.inf)
    for i, h in enumerate(values):
        probs = [keep if j == i else other for j in range(len(values))]
        worst = np.maximum(worst, finite_log_mgf(est, probs, float(h), u))
    return worst


def bernstein_radius(variance_sum: float, bound: float, beta: float) -> float:
    """t with P(S >= t) <= beta for S a sum of independent mean-zero terms X_i <= bound, sum Var X_i <= variance_sum.

    Bernstein: P(S >= t) <= exp(-t^2 / (2 (v + b t / 3))); solved for t.
    """
    L = math.log(1.0 / beta)
    return (bound * L / 3 + math.sqrt((bound * L / 3) ** 2 + 2 * variance_sum * L)) * (1 + PAD)


def hoeffding_radius(range_sq_sum: float, beta: float) -> float:
    """t with P(S >= t) <= beta for S a sum of independent mean-zero terms of ranges c_i, sum c_i^2 <= range_sq_sum
    (Hoeffding 1963, Thm 2; also Azuma-Hoeffding for martingale differences in intervals of length c_i)."""
    return math.sqrt(range_sq_sum * math.log(1.0 / beta) / 2) * (1 + PAD)


def binomial_band(n: int, p: float, beta: float) -> tuple[int, int]:
    """(lo, hi) with P(N < lo) <= beta and P(N > hi) <= beta for N ~ Bin(n, p), exactly (scipy's cdf)."""
    from scipy.stats import binom

    lo = int(binom.ppf(beta, n, p))
    while lo > 0 and binom.cdf(lo - 1, n, p) > beta:  # guard the float ppf: P(N <= lo - 1) <= beta
        lo -= 1
    hi = int(binom.isf(beta, n, p))
    while hi < n and binom.sf(hi, n, p) > beta:  # P(N > hi) <= beta
        hi += 1
    return lo, hi
