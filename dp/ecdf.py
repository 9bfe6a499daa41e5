"""Differentially private ECDFs and their applications, computed in the clear from counts.

What it does
    The entry points of [BMR25] for callers that hold exact counts (the
    multi-server protocols call these after their secure aggregation):

    * the tree mechanism of Theorem 3.1 and its least-squares consistent
      variant (re-exported from :mod:`pairwise.dp.tree`);
    * smoothing of Eq. (3), p = 1 and p = 2 (re-exported from
      :mod:`pairwise.dp.smoothing`);
    * :func:`inverse_ecdf` -- Algorithm 1, binary search for a quantile, in a
      discrete form over threshold indices, and :func:`inverse_ecdf_bisect`,
      Algorithm 1 verbatim on a real interval with precision psi;
    * :func:`roc_curve` and :func:`auc` -- Sec. 5.1: TPR = F_TP / F_TP(c_max),
      FPR = F_FP / F_FP(c_max) from two cumulative-count vectors, and the
      trapezoidal area; :func:`private_roc` releases both ECDFs with epsilon/2
      each (basic composition gives epsilon);
    * :func:`hosmer_lemeshow_dp` -- Algorithm 2 with eps' = eps / (L + 9):
      a tree-mechanism ECDF of the predicted probabilities on a 2^L grid
      ((L+1) eps'), Q-1 quantile thresholds from it by Algorithm 1, then the
      observed and expected positive and negative counts of every group with
      independent noise of scale 1/eps' (8 eps' in total, Thm 5.1), and the
      statistic of Eq. (5); :func:`hosmer_lemeshow` is the exact statistic on
      the same grid groups.

Deviations from the paper (half-open groups in Alg. 2, expected counts on a
2^-16 grid, clipping before Eq. (5)) are documented at the functions and in
``docs/dp.md``, "DP ECDF applications".

Security model
    Pure math on counts in the clear; noise as described in :mod:`pairwise.dp.tree`
    (exact discrete Laplace from the OS CSPRNG by default, seeded numpy
    generator only for simulation).  Neighbouring data sets differ in one
    record (replace-one); n is public.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .accounting import PrivacyGuarantee, basic_composition, validate_epsilon
from .errors import EmptyDataError, InvalidDataError, PrivacyParameterError
from .samplers import (
    _check_rng,
    conservative_scale,
    discrete_laplace_array,
    discrete_laplace_variance,
    simulate_discrete_laplace,
)
from .smoothing import isotonic_bounded, path_matrix, smooth_ecdf
from .tree import (
    NOISE_KINDS,
    TreeRelease,
    consistent_prefix_sums,
    consistent_tree,
    dyadic_node_counts,
    dyadic_prefix_sums,
    hierarchical_mechanism,
    pad_counts,
    path_node_values,
    path_sums,
    theorem31_mse,
    tree_depth,
    tree_mechanism,
    tree_node_noise,
    tree_noise_scale,
    validate_counts,
)
from .validate import check_int

__all__ = [
    # tree (dp.tree)
    "NOISE_KINDS",
    "TreeRelease",
    "tree_mechanism",
    "hierarchical_mechanism",
    "tree_node_noise",
    "tree_noise_scale",
    "theorem31_mse",
    "path_sums",
    "path_node_values",
    "dyadic_node_counts",
    "dyadic_prefix_sums",
    "consistent_tree",
    "consistent_prefix_sums",
    "pad_counts",
    "tree_depth",
    # smoothing (dp.smoothing)
    "smooth_ecdf",
    "isotonic_bounded",
    "path_matrix",
    # this module
    "histogram",
    "simulate_poisson_counts",
    "inverse_ecdf",
    "inverse_ecdf_bisect",
    "roc_curve",
    "auc",
    "RocRelease",
    "private_roc",
    "hosmer_lemeshow_statistic",
    "hosmer_lemeshow",
    "HosmerLemeshowRelease",
    "hosmer_lemeshow_dp",
    "probability_bins",
]


# --------------------------------------------------------------------------
# Data helpers
# --------------------------------------------------------------------------


def histogram(values: object, n_bins: int) -> np.ndarray:
    """Counts of the integer ``values`` over bins 0..n_bins-1 (the input of the tree mechanism)."""
    arr = np.asarray(values)
    if arr.size == 0:
        raise EmptyDataError("values is empty")
    if not np.issubdtype(arr.dtype, np.integer):
        raise InvalidDataError(f"values must be integer bin indices, got dtype {arr.dtype}")
    n_bins = check_int(n_bins, "n_bins", lo=1, error=InvalidDataError)
    if arr.min() < 0 or arr.max() >= n_bins:
        raise InvalidDataError(f"values must lie in [0, {n_bins})")
    return np.bincount(arr.ravel(), minlength=n_bins).astype(np.int64)


def simulate_poisson_counts(n_bins: int, lam: float, rng: np.random.Generator) -> np.ndarray:
    """SIMULATION: the paper's X_pois(lambda) (Sec. 6.2.1): Pois(lambda) records per value."""
    return _check_rng(rng).poisson(float(lam), int(n_bins)).astype(np.int64)


# --------------------------------------------------------------------------
# Inverse ECDF (Algorithm 1)
# --------------------------------------------------------------------------


def inverse_ecdf(ecdf: object, q: object, thresholds: object | None = None) -> np.ndarray | float:
    """Algorithm 1 on a threshold grid: the first threshold where the ECDF reaches q.

    Binary search over threshold indices with the invariant F(a) < q <= F(b)
    (F(-1) = 0), halving until b = a + 1 (precision psi = one threshold
    step), and returning tau_b, i.e. inf{t : F(t) >= q} when F is
    non-decreasing.  The paper returns the midpoint (a + b)/2 of the last
    interval; the right end is the usual quantile convention.  For a noisy,
    non-monotone F the search still returns a crossing point, as in the
    paper.  If F never reaches q the last threshold is returned.
    ``q`` may be a scalar or an array (vectorized search).
    """
    f = np.asarray(ecdf, dtype=float)
    if f.ndim != 1:
        raise InvalidDataError(f"ecdf must be 1-D, got shape {f.shape}")
    if f.size == 0:
        raise EmptyDataError("ecdf is empty")
    qs = np.asarray(q, dtype=float)
    if np.isnan(qs).any():
        raise InvalidDataError("q contains NaN")
    tau = np.arange(f.size) if thresholds is None else np.asarray(thresholds)
    if tau.shape != f.shape:
        raise InvalidDataError(f"thresholds has shape {tau.shape}, ecdf {f.shape}")
    lo = np.full(qs.shape, -1, dtype=np.int64)
    hi = np.full(qs.shape, f.size - 1, dtype=np.int64)
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        active = hi - lo > 1
        below = f[np.clip(mid, 0, None)] < qs
        lo = np.where(active & below, mid, lo)
        hi = np.where(active & ~below, mid, hi)
    out = tau[hi]
    return out.item() if out.ndim == 0 else out


def inverse_ecdf_bisect(
    ecdf_function, q: float, lower: float = 0.0, upper: float = 1.0, precision: float = 1e-6
) -> float:
    """Algorithm 1 verbatim: bisection on [lower, upper] until b - a <= psi; returns (a+b)/2.

    ``ecdf_function`` maps a real m to the (smoothed) ECDF value F'(m).
    """
    if not lower < upper:
        raise PrivacyParameterError(f"need lower < upper, got [{lower}, {upper}]")
    if not precision > 0:
        raise PrivacyParameterError(f"precision must be > 0, got {precision!r}")
    a, b = float(lower), float(upper)
    while b - a > precision:
        m = (a + b) / 2.0
        if ecdf_function(m) < q:
            a = m
        else:
            b = m
    return (a + b) / 2.0


# --------------------------------------------------------------------------
# ROC curve and AUC (Sec. 5.1)
# --------------------------------------------------------------------------


def roc_curve(
    cumulative_pos: object,
    cumulative_neg: object,
    n_pos: float | None = None,
    n_neg: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """ROC points (FPR, TPR) from cumulative counts of positives and negatives.

    ``cumulative_pos[i]`` = number of positives with score <= tau_i (the paper
    scores positives low: c^(t, x) = [c0(x) <= t]).  TPR_i = cumulative_pos[i]
    / F_TP(c_max), where F_TP(c_max) is the last entry unless ``n_pos`` gives a
    public total; likewise for FPR.  The point (0, 0) is prepended.
    """
    pos = np.asarray(cumulative_pos, dtype=float)
    neg = np.asarray(cumulative_neg, dtype=float)
    if pos.ndim != 1 or pos.shape != neg.shape:
        raise InvalidDataError(f"cumulative counts must be 1-D of equal length, got {pos.shape}, {neg.shape}")
    if pos.size == 0:
        raise EmptyDataError("no thresholds")
    tp_total = float(pos[-1]) if n_pos is None else float(n_pos)
    fp_total = float(neg[-1]) if n_neg is None else float(n_neg)
    if tp_total <= 0 or fp_total <= 0:
        raise EmptyDataError("the ROC curve needs at least one positive and one negative")
    tpr = np.concatenate([[0.0], pos / tp_total])
    fpr = np.concatenate([[0.0], neg / fp_total])
    return fpr, tpr


def auc(fpr: object, tpr: object) -> float:
    """Trapezoidal area under the curve through the points in the given order.

    For exact ECDFs this is P[score_pos < score_neg] + P[tie]/2 (Mann-Whitney).
    """
    x = np.asarray(fpr, dtype=float)
    y = np.asarray(tpr, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise InvalidDataError("fpr and tpr must be 1-D arrays of equal length >= 2")
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2.0))


@dataclass(frozen=True)
class RocRelease:
    """A private ROC curve: points, area, the two releases and the total guarantee."""

    fpr: np.ndarray
    tpr: np.ndarray
    auc: float
    positives: TreeRelease
    negatives: TreeRelease
    guarantee: PrivacyGuarantee


def private_roc(
    pos_counts: object,
    neg_counts: object,
    epsilon: float,
    *,
    noise: str = "discrete_laplace",
    rng: np.random.Generator | None = None,
    smoothing: int | None = 2,
    mechanism: str = "paper",
) -> RocRelease:
    """Sec. 5.1: ROC curve from two epsilon/2 tree-mechanism ECDFs (epsilon in total).

    ``pos_counts`` / ``neg_counts``: score histograms of the positives and the
    negatives over the same bins.  ``smoothing``: None, 1 or 2 (leaf-space
    smoothing of each ECDF with bounds [0, n]; post-processing).
    ``mechanism``: "paper" (Theorem 3.1) or "hierarchical" (consistent tree).
    The class totals are public (as the paper's normalisation assumes).
    """
    eps = validate_epsilon(epsilon)
    half = eps / 2.0
    if mechanism == "paper":
        run = tree_mechanism
    elif mechanism == "hierarchical":
        run = hierarchical_mechanism
    else:
        raise PrivacyParameterError(f"mechanism must be 'paper' or 'hierarchical', got {mechanism!r}")
    _check_smoothing(smoothing)
    pos = validate_counts(pos_counts)
    neg = validate_counts(neg_counts)
    if pos.size != neg.size:
        raise InvalidDataError(f"pos_counts has {pos.size} bins, neg_counts {neg.size}")
    rel_p = run(pos, half, noise=noise, rng=rng)
    rel_n = run(neg, half, noise=noise, rng=rng)
    cp, cn = rel_p.cumulative.astype(float), rel_n.cumulative.astype(float)
    if smoothing is not None:
        cp = smooth_ecdf(cp, smoothing, lower=0.0, upper=float(rel_p.n))
        cn = smooth_ecdf(cn, smoothing, lower=0.0, upper=float(rel_n.n))
    fpr, tpr = roc_curve(cp, cn, n_pos=rel_p.n, n_neg=rel_n.n)
    guarantee = basic_composition([rel_p.guarantee, rel_n.guarantee])
    return RocRelease(fpr, tpr, auc(fpr, tpr), rel_p, rel_n, guarantee)


def _check_smoothing(smoothing: object) -> None:
    """Smoothing is post-processing, but a bad value must be refused before any noise is drawn."""
    if smoothing not in (None, 1, 2) or isinstance(smoothing, bool):
        raise PrivacyParameterError(f"smoothing must be None, 1 or 2 (Eq. 3's p), got {smoothing!r}")


# --------------------------------------------------------------------------
# Hosmer-Lemeshow (Sec. 5.2, Algorithm 2)
# --------------------------------------------------------------------------

#: grid of the expected counts: probabilities are rounded to multiples of 2^-16
EXPECTED_GRID_BITS = 16


def _probabilities_labels(probabilities: object, labels: object) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(probabilities, dtype=float).ravel()
    y = np.asarray(labels).ravel()
    if p.size == 0:
        raise EmptyDataError("no records")
    if p.shape != y.shape:
        raise InvalidDataError(f"{p.size} probabilities but {y.size} labels")
    if np.isnan(p).any() or p.min() < 0.0 or p.max() > 1.0:
        raise InvalidDataError("predicted probabilities must lie in [0, 1]")
    if not np.all((y == 0) | (y == 1)):
        raise InvalidDataError("labels must be 0 or 1")
    return p, y.astype(np.int64)


def probability_bins(probabilities: object, L: int) -> np.ndarray:
    """Grid bin of each probability: min(floor(p 2^L), 2^L - 1); threshold i is (i+1)/2^L."""
    p = np.asarray(probabilities, dtype=float)
    size = 1 << L
    return np.minimum(np.floor(p * size).astype(np.int64), size - 1)


def hosmer_lemeshow_statistic(o1: object, e1: object, o0: object, e0: object, min_expected: float = 0.5) -> float:
    """Eq. (5): sum_q (O1 - E1)^2 / E1 + (O0 - E0)^2 / E0.

    Observed and expected values are clipped at 0 and the denominators at
    ``min_expected`` (needed for noisy inputs; a no-op for exact groups whose
    expected counts are >= min_expected).
    """
    arrs = [np.clip(np.asarray(v, dtype=float), 0.0, None) for v in (o1, e1, o0, e0)]
    if len({a.shape for a in arrs}) != 1:
        raise InvalidDataError("O1, E1, O0 and E0 must have the same shape")
    O1, E1, O0, E0 = arrs
    d1 = np.maximum(E1, min_expected)
    d0 = np.maximum(E0, min_expected)
    return float(np.sum((O1 - E1) ** 2 / d1 + (O0 - E0) ** 2 / d0))


def _groups(bins: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Group index of each bin for cut indices b_1..b_{Q-1}: group q holds bins in (b_{q-1}, b_q].

    Cuts from a noisy, unsmoothed ECDF may be out of order; they are sorted first.
    """
    return np.searchsorted(np.sort(np.asarray(cuts)), bins, side="left")


def _group_sums(group: np.ndarray, p: np.ndarray, y: np.ndarray, Q: int):
    o1 = np.bincount(group, weights=y, minlength=Q)
    o0 = np.bincount(group, weights=1 - y, minlength=Q)
    e1 = np.bincount(group, weights=p, minlength=Q)
    e0 = np.bincount(group, weights=1.0 - p, minlength=Q)
    return o1, e1, o0, e0


def hosmer_lemeshow(
    probabilities: object, labels: object, Q: int = 10, L: int = 10, min_expected: float = 0.5
) -> float:
    """The exact Hosmer-Lemeshow statistic with the grid groups Algorithm 2 uses.

    Group q holds the records whose grid bin lies in (b_{q-1}, b_q], where b_q is
    the first bin at which the exact ECDF of the binned probabilities reaches q/Q.
    """
    p, y = _probabilities_labels(probabilities, labels)
    _check_q_l(Q, L)
    bins = probability_bins(p, L)
    f = np.cumsum(histogram(bins, 1 << L)) / p.size
    cuts = np.asarray(inverse_ecdf(f, np.arange(1, Q) / Q))
    o1, e1, o0, e0 = _group_sums(_groups(bins, cuts), p, y, Q)
    return hosmer_lemeshow_statistic(o1, e1, o0, e0, min_expected)


def _check_q_l(Q: int, L: int) -> None:
    check_int(Q, "Q", lo=2, error=PrivacyParameterError)
    check_int(L, "L", lo=1, hi=24, error=PrivacyParameterError)


@dataclass(frozen=True)
class HosmerLemeshowRelease:
    """Output of Algorithm 2: the statistic, everything it publishes, and the guarantee."""

    statistic: float
    cut_bins: np.ndarray  # b_1..b_{Q-1}: last grid bin of groups 1..Q-1
    thresholds: np.ndarray  # t_q = (b_q + 1) / 2^L
    o1: np.ndarray
    e1: np.ndarray
    o0: np.ndarray
    e0: np.ndarray
    ecdf: TreeRelease
    epsilon_prime: float
    guarantee: PrivacyGuarantee


def _noise(scale: Fraction, size: int, rng: np.random.Generator | None) -> np.ndarray:
    if rng is None:
        return discrete_laplace_array(scale, size)
    return simulate_discrete_laplace(scale, size, rng)


def hosmer_lemeshow_dp(
    probabilities: object,
    labels: object,
    epsilon: float,
    *,
    Q: int = 10,
    L: int = 10,
    rng: np.random.Generator | None = None,
    smoothing: int | None = 2,
    min_expected: float = 0.5,
) -> HosmerLemeshowRelease:
    """Algorithm 2 (HL-Stat-DP): an epsilon-DP Hosmer-Lemeshow statistic (Theorem 5.1).

    eps' = epsilon / (L + 9).  Line 5: a tree-mechanism ECDF of the grid-binned
    probabilities with node scale 1/eps' (so (L+1) eps'-DP), optionally smoothed
    (``smoothing`` = 1, 2 or None; post-processing), and its inverse at q/Q by
    Algorithm 1.  Lines 7-9: O1, O0 (integer counts) and E1, E0 (on a 2^-16
    grid) of each group with independent discrete Laplace noise of scale
    1/eps' (in grid units 2^16/eps'); a replaced record changes at most 2
    groups, i.e. 8 statistics by at most 1 each: 8 eps'.  Total epsilon.
    ``rng``: None for the exact OS-CSPRNG noise, a numpy Generator to simulate.
    """
    eps = validate_epsilon(epsilon)
    _check_q_l(Q, L)
    _check_smoothing(smoothing)
    if not (isinstance(min_expected, (int, float)) and math.isfinite(min_expected) and min_expected > 0):
        raise PrivacyParameterError(f"min_expected must be a positive number, got {min_expected!r}")
    p, y = _probabilities_labels(probabilities, labels)
    n = p.size
    size = 1 << L
    bins = probability_bins(p, L)
    counts = histogram(bins, size)
    # line 5: ECDF with node scale (L+9)/eps = 1/eps', i.e. tree epsilon (L+1) eps'
    eps_tree = float(Fraction(eps) * (L + 1) / (L + 9))
    scale = conservative_scale(L + 9, eps)  # >= 1/eps'
    eta = tree_node_noise(L, scale, noise="discrete_laplace", rng=rng)
    cum = np.cumsum(counts) + path_sums(eta)
    tree_rel = TreeRelease(
        cum,
        n,
        L,
        eps_tree,
        float(scale),
        "discrete_laplace",
        "paper",
        rng is not None,
        PrivacyGuarantee(eps_tree),
        discrete_laplace_variance(scale),
    )
    f = cum / n
    if smoothing is not None:
        f = smooth_ecdf(f, smoothing)
    cuts = np.asarray(inverse_ecdf(f, np.arange(1, Q) / Q), dtype=np.int64)
    group = _groups(bins, cuts)
    # lines 7-9: four noisy statistics per group
    grid = 1 << EXPECTED_GRID_BITS
    p_grid = np.rint(p * grid).astype(np.int64)
    o1 = np.bincount(group, weights=y, minlength=Q).astype(np.int64)
    o0 = np.bincount(group, weights=1 - y, minlength=Q).astype(np.int64)
    e1g = np.bincount(group, weights=p_grid, minlength=Q).astype(np.int64)
    e0g = np.bincount(group, weights=grid - p_grid, minlength=Q).astype(np.int64)
    grid_scale = conservative_scale(grid * (L + 9), eps)
    o1n = o1 + _noise(scale, Q, rng)
    o0n = o0 + _noise(scale, Q, rng)
    e1n = (e1g + _noise(grid_scale, Q, rng)) / grid
    e0n = (e0g + _noise(grid_scale, Q, rng)) / grid
    stat = hosmer_lemeshow_statistic(o1n, e1n, o0n, e0n, min_expected)
    return HosmerLemeshowRelease(
        stat,
        cuts,
        (cuts + 1) / size,
        o1n,
        e1n,
        o0n,
        e0n,
        tree_rel,
        eps / (L + 9),
        PrivacyGuarantee(eps),
    )
