"""Intervals for private ECDF, quantile, ROC and AUC releases, from the public noise law only.

What it does
    Every tree release (paper, hierarchical, k-ary) is "exact counts + a
    public linear map of independent node noise": the error of threshold t
    is sum_j w_tj Z_j with weights fixed by the mechanism and the grid, and
    Z_j i.i.d. with a public law (:class:`NoiseLaw`: discrete Laplace, or the
    Polya difference NB(r, a) - NB(r, a)).  So (1 - alpha) intervals follow
    without looking at the data:

    * :func:`exact_sum_radius`: the exact quantile of the paper's path sums;
    * :func:`chernoff_radii`: Chernoff with the exact log-MGF for consistent
      (GLS) trees, from two norms of a threshold's weights;
    * :func:`band`: a simultaneous band (Bonferroni, monotone envelope);
    * :func:`quantile_interval`: test inversion with the pointwise intervals;
    * :func:`auc_interval`: the plug-in AUC numerator of two independent
      class releases, with conditional Chernoff, Chebyshev and a union bound.

    Noise from the in-circuit gadget or the rounded Polya table is within
    total variation ``tv`` of the ideal law per value; :func:`effective_alpha`
    spends alpha - (values) * tv on the ideal law, so coverage holds for the
    noise actually drawn.

Security model
    Pure math on public parameters (and, for quantiles and the AUC, on
    released values: post-processing).  Follows [BMR25, Theorem 3.1] for the
    mechanisms.  Each radius's derivation: ``docs/ecdf-intervals.md``, "Why
    the radii are valid" and "The functions of dp/ecdf_intervals.py".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .errors import PrivacyParameterError

__all__ = [
    "NoiseLaw",
    "check_alpha",
    "effective_alpha",
    "exact_sum_radius",
    "chernoff_radii",
    "chernoff_radius_weights",
    "envelope",
    "band",
    "quantile_interval",
    "auc_pairs",
    "auc_estimate",
    "product_moment",
    "AUCInterval",
    "auc_interval",
]

#: Relative padding of every computed radius (floating-point rounding of the bounds).
PAD = 1e-9


def check_alpha(alpha: object) -> float:
    """``alpha`` in (0, 0.5]: the interval's miss probability."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < float(alpha) <= 0.5:
        raise PrivacyParameterError(f"alpha must lie in (0, 0.5] (0.05 gives a 95% interval), got {alpha!r}")
    return float(alpha)


@dataclass(frozen=True)
class NoiseLaw:
    """Law of one node's noise: NB(shape, a) - NB(shape, a); shape 1 is the discrete Laplace, P ~ a^|z|.

    ``tv``: a bound on the total variation distance between the noise
    actually drawn for one value and this law (0 for exact samplers).
    """

    a: float
    shape: float = 1.0
    tv: float = 0.0

    def __post_init__(self) -> None:
        if not (0.0 <= self.a < 1.0) or not self.shape > 0 or not 0.0 <= self.tv < 1.0:
            raise PrivacyParameterError(f"bad noise law a={self.a!r}, shape={self.shape!r}, tv={self.tv!r}")

    @property
    def variance(self) -> float:
        return 2.0 * self.shape * self.a / (1.0 - self.a) ** 2

    @property
    def kappa4(self) -> float:
        """Fourth cumulant: 2 shape a (1 + 4a + a^2) / (1 - a)^4 (twice a geometric's, times the shape)."""
        a = self.a
        return 2.0 * self.shape * a * (1.0 + 4.0 * a + a * a) / (1.0 - a) ** 4

    @property
    def u_max(self) -> float:
        """The log-MGF is finite for |u| < -ln a."""
        return math.inf if self.a == 0 else -math.log(self.a)

    def log_mgf(self, u) -> np.ndarray:
        """shape * (2 ln(1 - a) - ln(1 - a e^u) - ln(1 - a e^-u)), |u| < -ln a."""
        u = np.asarray(u, dtype=float)
        a = self.a
        if a == 0:
            return np.zeros_like(u)
        return self.shape * (2.0 * math.log1p(-a) - np.log1p(-a * np.exp(u)) - np.log1p(-a * np.exp(-u)))


def effective_alpha(alpha: float, law: NoiseLaw, values: int) -> float:
    """The miss probability left for the ideal law when ``values`` noise values are each within ``tv`` of it."""
    out = check_alpha(alpha) - int(values) * law.tv
    if not out > 0:
        raise PrivacyParameterError(
            f"the noise's distance to its ideal law ({law.tv:.3g} per value, {values} values) "
            f"leaves nothing of alpha = {alpha}"
        )
    return out


# ----------------------------------------------------------------------------- one threshold
@lru_cache(maxsize=256)
def _sum_pmf(a: float, shape: float) -> tuple[np.ndarray, float]:
    """pmf of NB(shape, a) on 0..K and its tail mass beyond K (< 1e-16)."""
    from scipy import stats  # on use: every pairwise process would pay for it at start

    dist = stats.nbinom(shape, 1.0 - a)
    K = int(dist.isf(1e-17)) + 1
    k = np.arange(K + 1)
    return dist.pmf(k), float(dist.sf(K))


def exact_sum_radius(law: NoiseLaw, m: int, beta: float) -> int:
    """Smallest integer q with P(|S| > q) <= beta for S the sum of ``m`` i.i.d. noise values (exact law).

    S = NB(m shape, a) - NB(m shape, a); P(S > q) = sum_k P(Y = k) P(X > k + q),
    plus the truncated tail mass, by binary search over q.
    """
    if not 0 < beta < 1:
        raise PrivacyParameterError(f"beta must lie in (0, 1), got {beta!r}")
    if law.a == 0:
        return 0
    pmf, tail = _sum_pmf(law.a, law.shape * int(m))
    sf = np.concatenate([np.cumsum(pmf[::-1])[::-1][1:], [0.0]])  # P(X > k)
    K = pmf.size - 1

    def upper(q: int) -> float:  # P(S > q), an upper bound (truncation counted twice)
        idx = np.arange(K + 1) + q
        inside = np.where(idx <= K, sf[np.minimum(idx, K)], 0.0)
        return float(np.dot(pmf, inside)) + 2.0 * tail

    lo, hi = -1, K  # upper(hi) <= tail-ish
    target = beta / 2.0 * (1.0 - PAD)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if upper(mid) <= target:
            hi = mid
        else:
            lo = mid
    return int(hi)


def _golden_min(f, lo: np.ndarray, hi: np.ndarray, iters: int = 50) -> np.ndarray:
    """Vectorized golden-section search of a quasi-convex f over [lo, hi] per entry; returns the smallest value
    seen (any point gives a valid bound, so a search that misses the optimum only widens the radius)."""
    g = (math.sqrt(5.0) - 1.0) / 2.0
    best = np.full(np.shape(lo), np.inf)
    for _ in range(iters):
        c, d = hi - g * (hi - lo), lo + g * (hi - lo)
        fc, fd = f(c), f(d)
        best = np.minimum(best, np.minimum(fc, fd))
        left = fc < fd
        hi = np.where(left, d, hi)
        lo = np.where(left, lo, c)
    return best


def chernoff_radii(law: NoiseLaw, sq, mx, beta: float) -> np.ndarray:
    """One-sided radii: P(sum_j w_j Z_j >= r) <= beta for weights with sum w^2 = ``sq``, max |w| = ``mx``.

    r = mx * inf_{0 < u < -ln a} (m Lambda(u) + ln(1 / beta)) / u with
    m = sq / mx^2 (the module docstring's bound); vectorized over thresholds.
    """
    sq = np.atleast_1d(np.asarray(sq, dtype=float))
    mx = np.atleast_1d(np.asarray(mx, dtype=float))
    if not 0 < beta < 1:
        raise PrivacyParameterError(f"beta must lie in (0, 1), got {beta!r}")
    out = np.zeros(sq.shape)
    live = mx > 0
    if not live.any() or law.a == 0:
        return out
    m = sq[live] / mx[live] ** 2
    lb = math.log(1.0 / beta)
    umax = law.u_max

    def f(logu):
        u = np.exp(logu)
        return (m * law.log_mgf(u) + lb) / u

    lo = np.full(m.shape, math.log(umax * 1e-9))
    hi = np.full(m.shape, math.log(umax * (1.0 - 1e-12)))
    out[live] = mx[live] * _golden_min(f, lo, hi) * (1.0 + PAD)
    return out


def chernoff_radius_weights(law: NoiseLaw, weights, beta: float) -> float:
    """One-sided radius of sum_j w_j Z_j at level beta with the exact sum_j Lambda(s w_j) (one weight vector)."""
    w = np.abs(np.asarray(weights, dtype=float).ravel())
    w = w[w > 0]
    if w.size == 0 or law.a == 0:
        return 0.0
    wmax = float(w.max())
    lb = math.log(1.0 / beta)
    smax = law.u_max / wmax

    def f(logs):
        s = np.exp(np.asarray(logs, dtype=float))
        return (law.log_mgf(np.multiply.outer(s, w)).sum(axis=-1) + lb) / s

    lo = np.array([math.log(smax * 1e-9)])
    hi = np.array([math.log(smax * (1.0 - 1e-12))])
    return float(_golden_min(f, lo, hi)[0]) * (1.0 + PAD)


# ----------------------------------------------------------------------------- bands and quantiles
def envelope(lower, upper, low: float = 0.0, high: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Monotone envelope of a simultaneous band: lo'_i = max_{j<=i} lo_j, hi'_i = min_{j>=i} hi_j, clipped."""
    lo = np.maximum.accumulate(np.clip(np.asarray(lower, dtype=float), low, high))
    hi = np.minimum.accumulate(np.clip(np.asarray(upper, dtype=float), low, high)[::-1])[::-1]
    return lo, hi


def band(values, radii, low: float = 0.0, high: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A simultaneous band for a non-decreasing function from values +- radii (radii at alpha / N each)."""
    v = np.asarray(values, dtype=float)
    r = np.asarray(radii, dtype=float)
    return envelope(v - r, v + r, low, high)


def quantile_interval(cumulative, radii, level_count: float) -> tuple[int, int]:
    """Index interval [lo, hi] for the first threshold t with C(t) >= ``level_count`` (= q n).

    ``cumulative``: released counts at consecutive thresholds 0..N-1;
    ``radii``: their two-sided pointwise radii at alpha (alpha / 2 per side).
    lo: first t with C^(t) + r(t) >= qn; hi: last t with t = 0 or
    C^(t-1) - r(t-1) < qn (module docstring).
    """
    c = np.asarray(cumulative, dtype=float)
    r = np.asarray(radii, dtype=float)
    up = np.flatnonzero(c + r >= level_count)
    lo = int(up[0]) if up.size else c.size - 1
    prev_ok = np.concatenate([[True], (c - r)[:-1] < level_count])
    cand = np.flatnonzero(prev_ok)
    hi = int(cand[-1])
    return (lo, hi) if lo <= hi else (hi, lo)


# ----------------------------------------------------------------------------- AUC
def auc_pairs(hist_above, cum_below) -> float:
    """U = sum_t H_a(t) (C_b(t - 1) + H_b(t) / 2): pairs with the class-a score above the class-b score, ties half."""
    h = np.asarray(hist_above, dtype=float)
    c = np.asarray(cum_below, dtype=float)
    prev = np.concatenate([[0.0], c[:-1]])
    return float(np.dot(h, (prev + c) / 2.0))


def _diff(cum: np.ndarray) -> np.ndarray:
    return np.diff(np.concatenate([[0.0], cum]))


def _mid(cum: np.ndarray) -> np.ndarray:
    return (np.concatenate([[0.0], cum[:-1]]) + cum) / 2.0


@dataclass(frozen=True)
class AUCInterval:
    """The AUC estimate, its (1 - alpha) interval and the pieces of the bound (counts of pairs)."""

    estimate: float
    interval: tuple[float, float]
    alpha: float
    radius_pairs: float  # |U^ - U| <= radius_pairs
    radius_total: float  # |n_a^ - n_a| <= radius_total
    n_above: float  # the estimated size of class a
    method: str


def auc_estimate(cum_above, cum_below, n: int) -> float:
    """U^ / (n^_a (n - n^_a)): the plug-in pairs count of two releases over the estimated class sizes.

    U^ = sum_t H^_a(t) G^_b(t) is unbiased for U (independent zero-mean noise
    of the two classes); n^_a = (C^_a(N-1) + n - C^_b(N-1)) / 2.  NaN if
    n^_a is not inside (0, n).
    """
    ca, cb = np.asarray(cum_above, dtype=float), np.asarray(cum_below, dtype=float)
    na = (ca[-1] + n - cb[-1]) / 2.0
    return float(np.dot(_diff(ca), _mid(cb)) / (na * (n - na))) if 0 < na < n else float("nan")


def product_moment(cov_above, cov_below) -> float:
    """E[(e_Ha . e_Gb)^2] for independent centred prefix errors with covariances ``cov_above``, ``cov_below``.

    e_Ha(t) = e_a(t) - e_a(t - 1) (bin errors), e_Gb(t) = (e_b(t - 1) + e_b(t)) / 2;
    E (sum_t x_t y_t)^2 = sum_{s,t} Cov(x)_{st} Cov(y)_{st} for independent x, y.
    """
    Ca = np.asarray(cov_above, dtype=float)
    Cb = np.asarray(cov_below, dtype=float)

    def shift(m, axis):  # m[t - 1] along axis, 0 at t = 0
        out = np.zeros_like(m)
        if axis == 0:
            out[1:] = m[:-1]
        else:
            out[:, 1:] = m[:, :-1]
        return out

    Da = Ca - shift(Ca, 0)
    Da = Da - shift(Da, 1)
    Mb = (Cb + shift(Cb, 0)) / 2.0
    Mb = (Mb + shift(Mb, 1)) / 2.0
    return float(np.sum(Da * Mb))


def auc_interval(
    cum_above,
    cum_below,
    n: int,
    alpha: float,
    *,
    law_above: NoiseLaw,
    law_below: NoiseLaw,
    adj_above,
    adj_below,
    product_second_moment: float,
    split=(0.35, 0.35, 0.15, 0.15),
) -> AUCInterval:
    """AUC = P(score_a > score_b) + P(tie) / 2 from two released cumulative-count vectors, with its interval.

    ``cum_above`` / ``cum_below``: the releases of class a (expected above)
    and class b at the same N thresholds, the last entry the class total;
    ``n``: the public number of records (n_a + n_b).  ``adj_*``: the
    adjoint of each release's noise map (prefix weights -> node weights);
    ``product_second_moment``: E[(e_Ha . e_Gb)^2] (:func:`product_moment`
    times both node variances), public.  ``split``: the shares of alpha of
    the four events.  The error of U^ is exactly
    H^_a . e_Gb + e_Ha . G^_b - e_Ha . e_Gb: each of the first two is linear
    in one class's noise with weights fixed by the other class's release
    (conditional Chernoff), the third is centred with a public second moment
    (Chebyshev); the class size n^_a has its own Chernoff radius; a union
    bound joins the four events.
    """
    alpha = check_alpha(alpha)
    if len(split) != 4 or any(s <= 0 for s in split) or abs(sum(split) - 1) > 1e-9:
        raise PrivacyParameterError(f"split must be four positive shares summing to 1, got {split!r}")
    ca = np.asarray(cum_above, dtype=float)
    cb = np.asarray(cum_below, dtype=float)
    b1, b2, b3, b4 = (alpha * s for s in split)
    Ha, Gb = _diff(ca), _mid(cb)
    U = float(np.dot(Ha, Gb))
    # H^_a . e_Gb with e_Gb = Mid e_b: class-b node weights adj_below(Mid^T H^_a)
    w1 = adj_below(np.concatenate([Ha[:-1] / 2.0 + Ha[1:] / 2.0, [Ha[-1] / 2.0]]))
    # e_Ha . G^_b with e_Ha = D e_a: class-a node weights adj_above(D^T G^_b)
    w2 = adj_above(np.concatenate([Gb[:-1] - Gb[1:], [Gb[-1]]]))
    r1 = chernoff_radius_weights(law_below, w1, b1 / 2.0)
    r2 = chernoff_radius_weights(law_above, w2, b2 / 2.0)
    r3 = math.sqrt(max(float(product_second_moment), 0.0) / b3) * (1.0 + PAD)
    rU = r1 + r2 + r3
    # class size: (e_a(N-1) - e_b(N-1)) / 2
    wa = adj_above(np.eye(1, ca.size, ca.size - 1).ravel()) / 2.0
    wb = adj_below(np.eye(1, cb.size, cb.size - 1).ravel()) / 2.0
    na = (ca[-1] + n - cb[-1]) / 2.0
    rP = _two_law_radius(law_above, wa, law_below, wb, b4 / 2.0)
    lo_p, hi_p = max(na - rP, 1.0), min(na + rP, n - 1.0)
    if lo_p > hi_p:  # no class size consistent with the release: nothing can be said
        lo_p, hi_p = 1.0, n - 1.0
    cands = [lo_p * (n - lo_p), hi_p * (n - hi_p)] + ([n * n / 4.0] if lo_p <= n / 2.0 <= hi_p else [])
    dmin, dmax = min(cands), max(cands)
    lo = max(0.0, (U - rU) / dmax)
    hi = min(1.0, (U + rU) / dmin)
    est = auc_estimate(ca, cb, n)
    method = (
        f"union of four bounds (alpha split {split[0]:g}/{split[1]:g}/{split[2]:g}/{split[3]:g}): "
        "conditional Chernoff for each class's noise term, Chebyshev for their product, Chernoff for the "
        "class size; holds for every dataset"
    )
    return AUCInterval(est, (lo, hi), alpha, rU, rP, na, method)


def _two_law_radius(law_a: NoiseLaw, wa, law_b: NoiseLaw, wb, beta: float) -> float:
    """One-sided Chernoff radius of sum wa Z^a + sum wb Z^b (independent laws), at level beta."""
    wa = np.abs(np.asarray(wa, dtype=float).ravel())
    wb = np.abs(np.asarray(wb, dtype=float).ravel())
    wa, wb = wa[wa > 0], wb[wb > 0]
    if wa.size + wb.size == 0:
        return 0.0
    smax = min(law_a.u_max / wa.max() if wa.size else math.inf, law_b.u_max / wb.max() if wb.size else math.inf)
    lb = math.log(1.0 / beta)

    def f(logs):
        s = np.exp(np.asarray(logs, dtype=float))
        k = law_a.log_mgf(np.multiply.outer(s, wa)).sum(-1) + law_b.log_mgf(np.multiply.outer(s, wb)).sum(-1)
        return (k + lb) / s

    return float(_golden_min(f, np.array([math.log(smax * 1e-9)]), np.array([math.log(smax * (1 - 1e-12))]))[0]) * (
        1.0 + PAD
    )
