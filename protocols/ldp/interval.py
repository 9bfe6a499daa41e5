"""(1 - alpha) intervals of the local-model and shuffle-model releases, from public quantities only.

What it does
    * :func:`alg1_interval`: [BBGK20, Algorithm 1] (quantization +
      k-ary randomized response, :mod:`pairwise.protocols.ldp.ustat`).  Its
      estimate is a U-statistic of the independent reports, unbiased for
      U_A, the U-statistic of the quantized data with the quantized kernel A.
      Hoeffding's decomposition (the paper's App. A.1) splits the error into
      a linear part (Bernstein's or Hoeffding's bound, whichever is
      narrower) and a degenerate part (Chebyshev's); alpha is split between
      them, McDiarmid's inequality over all reports is a third candidate,
      and the narrowest candidate is published.
    * :func:`histogram_band`: the shuffled histogram ([BC20] P^hist): exact
      binomial quantiles of its Bin(n, p) noise counts, Sidak over the d
      bins, give a band covering all d frequencies at once with
      probability >= 1 - alpha.

    Every choice is made from public parameters, so the published width is
    one fixed function of them.  The derivations, and why the
    hierarchical-histogram AUC and the QMLE have no interval:
    ``docs/intervals.md``, "Algorithm 1", "Shuffled histogram" and
    "Releases without an interval".

Security model
    None of its own: every input is public (n, beta or epsilon, the public
    domain through the quantized kernel matrix, d, p).
"""

from __future__ import annotations

import math

import numpy as np

from pairwise.dp.concentration import IntervalWidth, bernstein_radius, binomial_band, check_alpha, hoeffding_radius

from .errors import LDPParameterError

__all__ = ["alg1_interval", "alg1_kernel_range", "histogram_band", "NO_INTERVAL", "ALG1_METHOD", "HISTOGRAM_METHOD"]

ALG1_METHOD = (
    "Hoeffding decomposition of the k-RR U-statistic: linear part by Bernstein/Hoeffding, degenerate "
    "part by Chebyshev (or McDiarmid over all reports), worst case over the data"
)
HISTOGRAM_METHOD = "exact binomial quantiles of the Bin(n, p) noise, Sidak over the d bins (simultaneous)"
#: Why a release has no interval (published as ``interval_method`` with ``interval`` null).
NO_INTERVAL = {
    "auc": (
        "none: the hierarchical recursion's threshold makes the estimate biased by a data-dependent amount, "
        "and its public MSE bound (Theorem 3) is wider than [0, 1] at these sizes; use ldp ustat --kernel auc "
        "for an interval"
    ),
    "qmle": (
        "none: the QMLE's error law depends on the unknown conditional density; std_errors are asymptotic "
        "and computed from the noisy reports, not a public-width interval"
    ),
}


def alg1_kernel_range(matrix: np.ndarray) -> float:
    """R_A = max A - min A of the (symmetrized) quantized kernel matrix: public (the bins and the domain)."""
    a = np.asarray(matrix, dtype=np.float64)
    return float(a.max() - a.min())


def _splits(alpha: float):
    for frac in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99):
        yield alpha * frac, alpha * (1 - frac)


def alg1_interval(
    beta: float,
    kernel_range: float,
    *,
    n: int | None = None,
    n_pos: int | None = None,
    n_neg: int | None = None,
    alpha: float = 0.05,
) -> IntervalWidth:
    """The (1 - alpha) interval of an Algorithm 1 estimate around U_A (see the module docstring).

    One sample: ``n`` users; two samples (AUC): ``n_pos`` and ``n_neg``.
    ``beta``: k-RR's beta = K / (K + e^eps - 1); ``kernel_range``: R_A
    (:func:`alg1_kernel_range`).  Symmetric: below = above.
    """
    alpha = check_alpha(alpha)
    if not 0 <= beta < 1:
        raise LDPParameterError(f"beta must lie in [0, 1), got {beta!r}")
    R = float(kernel_range)
    if R == 0:
        return IntervalWidth(0.0, 0.0, alpha, ALG1_METHOD)
    q = 1.0 - beta
    if n_pos is not None:
        weights_sq = 1.0 / n_pos + 1.0 / n_neg  # sum_i w_i^2: n_c users of weight 1/n_c per class
        wmax = max(1.0 / n_pos, 1.0 / n_neg)
        d2 = 4.0 * beta * R * R / (n_pos * n_neg * q**4)
        mcd = weights_sq  # McDiarmid: one report moves the estimate by <= range_f / n_c
    else:
        weights_sq = 4.0 / n  # n (2/n)^2
        wmax = 2.0 / n
        d2 = 8.0 * beta * R * R / (n * (n - 1) * q**4)
        mcd = 4.0 / n  # n (2 range_f / n)^2 / range_f^2
    range_l = R / q
    var_l = beta * R * R / (q * q)
    best = math.inf
    for a_l, a_d in _splits(alpha):
        b = a_l / 2
        t_l = min(bernstein_radius(var_l * weights_sq, range_l * wmax, b), hoeffding_radius(range_l**2 * weights_sq, b))
        t_d = math.sqrt(d2 / a_d) if d2 > 0 else 0.0
        best = min(best, t_l + t_d)
    range_f = R * (1 + beta) ** 2 / q**2  # |z_r^T A z_s - z_r'^T A z_s'| over all reports
    best = min(best, hoeffding_radius(range_f**2 * mcd, alpha / 2))
    return IntervalWidth(best, best, alpha, ALG1_METHOD)


def histogram_band(n: int, d: int, p: float, alpha: float = 0.05) -> tuple[float, float, str]:
    """(below, above, method): every raw frequency c*_j has its true value in [c*_j - below, c*_j + above],
    all d at once, with probability >= 1 - alpha (exact binomial quantiles, Sidak over the bins)."""
    alpha = check_alpha(alpha)
    per_bin = -math.expm1(math.log1p(-alpha) / d)  # 1 - (1 - alpha)^(1/d)
    lo, hi = binomial_band(n, p, per_bin / 2)
    mean = n * p
    # c* - f = (N - n p) / n, N in [lo, hi]: f in [c* - (hi - np)/n, c* + (np - lo)/n]
    return (hi - mean) / n, (mean - lo) / n, HISTOGRAM_METHOD
