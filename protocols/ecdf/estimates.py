"""The querier's intervals: ECDF, band, quantiles and AUC of a release, from its public noise law.

What it does
    A release's error is a public linear map of independent node noise
    (:mod:`pairwise.dp.ecdf_intervals`): the paper mechanism's path sums
    (L + 1 nodes of weight 1 per threshold), or the consistent tree of the
    hierarchical and k-ary mechanisms (:class:`pairwise.dp.kary.PrefixMap`).
    :class:`NoiseMap` holds that map for one series' release (mechanism,
    grid, radices, whether the root is public, the node law the servers
    stated) and gives

    * :meth:`NoiseMap.radii` -- two-sided per-threshold radii in counts
      (exact quantiles for the paper mechanism, Chernoff for trees);
    * :meth:`NoiseMap.adjoint` -- node weights of a weighted sum of the
      errors over the whole grid (for the AUC's conditional bounds);
    * :func:`roc_auc_interval` -- the AUC's plug-in estimate and interval
      (:func:`pairwise.dp.ecdf_intervals.auc_interval`), with the product
      term's second moment from the two releases' prefix covariances.

    Every radius is a function of public parameters only: the mechanism,
    the grid, the radices, epsilon (through the law) and alpha; it is the same
    on neighbouring datasets.  The quantile and AUC intervals are
    post-processing of the release with these radii.

Limits
    Tree radii need every threshold's weight norms, O(N x nodes): they are
    computed up to 2^14 thresholds (:data:`MAX_INTERVAL_BITS`); beyond, the
    interval is not printed, and the method says why.  The paper
    mechanism's radii are exact quantiles at any grid.  The AUC interval
    needs N x N covariances: up to 2^10 thresholds (:data:`MAX_AUC_BITS`).

Security model
    Post-processing of released values and public parameters (see
    :mod:`pairwise.protocols.ecdf.querier`).  Derivations:
    ``docs/ecdf-intervals.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pairwise.dp.ecdf_intervals import (
    AUCInterval,
    NoiseLaw,
    auc_estimate,
    auc_interval,
    band,
    check_alpha,
    chernoff_radii,
    exact_sum_radius,
    product_moment,
    quantile_interval,
)
from pairwise.dp.kary import PrefixMap, level_sizes
from pairwise.dp.tree import path_adjoint

__all__ = [
    "MAX_AUC_BITS",
    "MAX_INTERVAL_BITS",
    "NoiseMap",
    "auc_estimate",
    "auc_method",
    "ecdf_band",
    "prefix_covariance",
    "product_second_moment",
    "quantile_interval",
    "roc_auc_interval",
]

#: Largest grid (bits) whose tree-release radii are computed (O(N x nodes)).
MAX_INTERVAL_BITS = 14
#: Largest grid (bits) whose AUC interval is computed (N x N covariances of the prefix errors).
MAX_AUC_BITS = 10


@dataclass(frozen=True)
class NoiseMap:
    """The public noise structure of one series' release (see the module docstring)."""

    mechanism: str
    grid_bits: int
    law: NoiseLaw
    radices: tuple[int, ...] | None = None  # None: the paper's path sums
    root_public: bool = True

    @property
    def prefix_map(self) -> PrefixMap:
        h = len(self.radices)
        return PrefixMap(tuple(self.radices), (1.0,) * h + (0.0 if self.root_public else 1.0,))

    @property
    def nodes(self) -> int:
        """Noise values drawn for this release (the paper's whole tree is counted)."""
        if self.radices is None:
            return (2 << self.grid_bits) - 1
        sz = level_sizes(self.radices)
        return sum(sz) - (1 if self.root_public else 0)

    @property
    def threshold_values(self) -> int:
        """Noise values one threshold's estimate depends on: L + 1 path nodes, or every node of a tree."""
        return self.grid_bits + 1 if self.radices is None else self.nodes

    def ideal_alpha(self, alpha: float, values: int) -> float | None:
        """alpha less the noise's distance to its ideal law over ``values`` values (a coupling), or None
        when that distance would take more than half of alpha (then the interval is not printed)."""
        a = check_alpha(alpha) - int(values) * self.law.tv
        return a if a > alpha / 2 else None

    def tv_note(self, values: int) -> str:
        return (
            f"not computed: the in-circuit noise is within total variation {self.law.tv:.3g} of its ideal law "
            f"per value, and this interval depends on {values} values (more than half of alpha); use a "
            "coarser grid or m > 2 servers"
        )

    def method(self, alpha: float) -> str:
        pct = f"{100 * (1 - alpha):g}%"
        if self.ideal_alpha(alpha, self.threshold_values) is None:
            return self.tv_note(self.threshold_values)
        if self.radices is None:
            return (
                f"{pct} per threshold, exact: the error is the sum of L + 1 = {self.grid_bits + 1} i.i.d. node "
                "noises (Theorem 3.1), whose exact law gives the radius; width from public parameters only"
            )
        if self.grid_bits > MAX_INTERVAL_BITS:
            return f"not computed: tree radii need O(N x nodes) work, done up to 2^{MAX_INTERVAL_BITS} thresholds"
        return (
            f"{pct} per threshold, Chernoff bound of the consistent tree's error (a public linear map of "
            "i.i.d. node noise); width from public parameters only"
        )

    def available(self) -> bool:
        return self.radices is None or self.grid_bits <= MAX_INTERVAL_BITS

    def radii(self, thresholds, alpha: float, values: int | None = None) -> np.ndarray | None:
        """Two-sided radii in counts: |C^(t) - C(t)| <= r(t) with probability >= 1 - alpha, for each t
        (for the noise actually drawn: ``values`` noise values, default one threshold's, are coupled to the
        ideal law); None when not computed."""
        a = self.ideal_alpha(alpha, self.threshold_values if values is None else values)
        thr = np.asarray(thresholds, dtype=np.int64)
        if a is None or not self.available():
            return None
        return _radii(self, tuple(int(t) for t in thr), a) if thr.size else np.zeros(0)

    def band_radii(self, thresholds, alpha: float) -> np.ndarray | None:
        """Radii of a simultaneous band over ``thresholds`` (every node coupled; Bonferroni over the count)."""
        thr = np.asarray(thresholds, dtype=np.int64)
        a = self.ideal_alpha(alpha, self.nodes)
        if a is None or not self.available():
            return None
        return _radii(self, tuple(int(t) for t in thr), a / max(1, thr.size))

    def adjoint(self, weights) -> np.ndarray:
        """Node weights of sum_t weights[t] * error[t] (weights over the whole grid)."""
        if self.radices is None:
            return path_adjoint(weights)
        return self.prefix_map.adjoint(weights)

    def dense(self) -> np.ndarray:
        """The N x nodes map (threshold errors from node noise)."""
        return self.adjoint(np.eye(1 << self.grid_bits))


@lru_cache(maxsize=64)
def _radii(nm: NoiseMap, thresholds: tuple[int, ...], a: float) -> np.ndarray:
    """Radii at miss probability ``a`` under the ideal node law."""
    if nm.radices is None:
        q = exact_sum_radius(nm.law, nm.grid_bits + 1, a)
        return np.full(len(thresholds), float(q))
    sq, mx = nm.prefix_map.threshold_norms(np.asarray(thresholds, dtype=np.int64))
    return chernoff_radii(nm.law, sq, mx, a / 2.0)


def ecdf_band(cumulative, radii, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The simultaneous band of a released ECDF (fractions), monotone envelope in [0, 1]."""
    return band(np.asarray(cumulative, dtype=float) / n, np.asarray(radii, dtype=float) / n)


def prefix_covariance(nm: NoiseMap) -> np.ndarray:
    """Cov(e) / node variance of the N prefix errors: A A^T (paper: common path nodes, O(N^2 L))."""
    N = 1 << nm.grid_bits
    if nm.radices is None:
        t = np.arange(N)
        return sum((t[:, None] >> lv) == (t[None, :] >> lv) for lv in range(nm.grid_bits + 1)).astype(float)
    A = nm.dense()
    return A @ A.T


@lru_cache(maxsize=16)
def product_second_moment(above: NoiseMap, below: NoiseMap) -> float:
    """E[(e_Ha . e_Gb)^2] in counts^4 for two releases (public; cached)."""
    return product_moment(prefix_covariance(above), prefix_covariance(below)) * above.law.variance * below.law.variance


def roc_auc_interval(
    cum_above, cum_below, n: int, above: NoiseMap, below: NoiseMap, alpha: float
) -> AUCInterval | None:
    """The AUC estimate with its interval (class ``above`` expected to score higher), or None beyond
    :data:`MAX_AUC_BITS` (then :func:`pairwise.dp.ecdf_intervals.auc_estimate` is the estimate alone)."""
    if auc_method(above, below, alpha) is not None:
        return None
    a = check_alpha(alpha) - above.nodes * above.law.tv - below.nodes * below.law.tv
    return auc_interval(
        cum_above,
        cum_below,
        n,
        a,
        law_above=above.law,
        law_below=below.law,
        adj_above=above.adjoint,
        adj_below=below.adjoint,
        product_second_moment=product_second_moment(above, below),
    )


def auc_method(above: NoiseMap, below: NoiseMap, alpha: float) -> str | None:
    """Why the AUC interval is not printed, or None when it is."""
    if above.grid_bits > MAX_AUC_BITS:
        return (
            f"not computed: the product term's second moment needs N x N covariances, done up to "
            f"2^{MAX_AUC_BITS} thresholds (release the ROC on a coarser grid)"
        )
    values = above.nodes + below.nodes
    if above.nodes * above.law.tv + below.nodes * below.law.tv >= check_alpha(alpha) / 2:
        return above.tv_note(values)
    return None
