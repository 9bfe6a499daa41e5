"""The (1 - alpha) interval of the 2PC U-statistic release, from public quantities only.

What it does
    :func:`ustat_interval` bounds the error E = U_hat - U_n of the release,
    where U_n is the U-statistic of the clamped fixed-point data (the
    ``exact_quantized`` value the estimate is unbiased for).  E has two parts,
    bounded together by one Chernoff bound (:func:`pairwise.dp.concentration.chernoff_radius`):

    * the sampling term (subsampled design, Sec. 5 step 1): the average of the
      noiseless kernel over the sampled pairs minus U_n.  It is a function of
      the P independent uniform permutations; exchanging the values of two
      positions of one permutation changes at most two sampled pairs, so at
      most 2R in kernel units (R: the kernel's public range).  The Doob
      martingale that reveals the permutations position by position has
      increments in intervals of length 2R / (P m) (m pairs per round), and
      Azuma-Hoeffding gives log E e^{s E_samp} <= s^2 V / 8 with
      V = 4 R^2 (n - 1) / (P m^2) (one sample: n - 1 positions per round) or
      V = 4 R^2 / (P m) (two samples: the smaller class's partners only).
      This is Hoeffding's bound (Hoeffding 1963; McDiarmid 1989 for
      permutations), chosen because it needs only the public range: a
      Bernstein bound would need the kernel's variance, which comes from the
      data (with the worst-case variance R^2 / 4 it is no tighter).  The
      ``all`` design has no sampling term.
    * the noise term: the average over the M pairs of (per-pair unbiased
      estimate - kernel value), independent given the design, each with the
      exact law of the gadget (additive discrete Laplace, or k-RR whose law
      depends on the kernel value: the largest log-MGF over the values is
      used).

    The interval covers U_n with probability >= 1 - alpha over the pair
    sampling and the noise, for every data set.  Derivation and coverage
    checks: ``docs/intervals.md``.

Security model
    None of its own: every input is public (n, P, the design, epsilon through
    the gadget's parameters, the public domain through R).
"""

from __future__ import annotations

import math

import numpy as np

from pairwise.dp.concentration import (
    IntervalWidth,
    check_alpha,
    chernoff_radius,
    dyadic_noise_log_mgf,
    krr_estimate_log_mgf,
)

__all__ = ["ustat_interval", "sampling_variance_proxy", "METHOD"]

METHOD = (
    "Chernoff: Azuma-Hoeffding over the pair permutations (kernel range R) + the exact noise law "
    "(worst case over the kernel's values)"
)


def sampling_variance_proxy(design: str, two_sample: bool, n_rows: int, n_cols: int, P: int, R: float) -> float:
    """V with log E exp(s (U_bar - U_n)) <= s^2 V / 8 for the noiseless average U_bar over the sampled pairs.

    One sample: P rounds of m = n // 2 pairs from a uniform permutation of n
    users, V = 4 R^2 (n - 1) / (P m^2).  Two samples: P rounds matching
    m = min(n_rows, n_cols) positives and negatives, V = 4 R^2 / (P m).
    ``all``: 0.
    """
    if design == "all":
        return 0.0
    if two_sample:
        m = min(n_rows, n_cols)
        return 4.0 * R * R / (P * m)
    m = n_rows // 2
    return 4.0 * R * R * (n_rows - 1) / (P * m * m)


def _noise_log_mgf(nc):
    """u -> the largest log E exp(u (estimate - h)) of one pair's debiased release (output units)."""
    slope, intercept = (float(c) for c in nc.debias)
    if nc.mechanism == "krr":
        return lambda u: krr_estimate_log_mgf(nc.params, nc.codes, slope, intercept, u)
    if nc.mechanism in ("discrete_laplace", "signed_geometric"):
        return lambda u: dyadic_noise_log_mgf(nc.params, u)
    raise ValueError(f"no interval for the {nc.mechanism} gadget")


def ustat_interval(
    nc,
    *,
    R: float,
    design: str,
    two_sample: bool,
    n_rows: int,
    n_cols: int,
    P: int,
    pairs: int,
    alpha: float,
    to_natural: float,
) -> IntervalWidth:
    """The (1 - alpha) interval of :func:`pairwise.protocols.ustat.driver.run_ustat`'s estimate, in natural units.

    ``nc``: the public noisy-kernel circuit; ``R``: the kernel's public range
    in output units (the span of the public grid for gini, 2 for kendall and
    the circuit's AUC); ``n_rows`` / ``n_cols``: users (one sample: n and n)
    or positives / negatives; ``pairs``: M, the number of releases averaged;
    ``to_natural``: natural units per output unit.  Equal tails alpha / 2.
    """
    alpha = check_alpha(alpha)
    R = float(R)
    V = sampling_variance_proxy(design, two_sample, n_rows, n_cols, P, R)
    M = int(pairs)
    per_pair = _noise_log_mgf(nc)
    sd = math.sqrt(V / 4 + float(nc.max_estimate_variance) / M) or 1.0

    def upper(s: np.ndarray) -> np.ndarray:
        return s * s * V / 8 + M * per_pair(s / M)

    def lower(s: np.ndarray) -> np.ndarray:
        return s * s * V / 8 + M * per_pair(-s / M)

    above_err = chernoff_radius(upper, alpha / 2, sd)  # P(U_hat - U_n >= t) <= alpha / 2
    below_err = chernoff_radius(lower, alpha / 2, sd)  # P(U_n - U_hat >= t) <= alpha / 2
    # target in [estimate - above_err, estimate + below_err]
    return IntervalWidth(above_err * to_natural, below_err * to_natural, alpha, METHOD)
