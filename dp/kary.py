"""Mixed-radix (k-ary) trees for private ECDFs: layout, least-squares consistency, its linear map, closed forms.

What it does
    The ECDF on a grid of N = 2^g thresholds is the prefix sum of a histogram,
    so the continual-counting tree mechanisms apply.  A *mixed-radix tree*
    with radices (k_1, ..., k_h) (product N) counts, at node j of level l,
    the records in bins [j W_l, (j + 1) W_l), W_l = k_1 ... k_l; the binary
    tree of Hay et al. (:func:`pairwise.dp.tree.hierarchical_mechanism`) is
    radices (2, ..., 2).

    * :func:`kary_mechanism`: discrete Laplace noise of per-node budget
      eps / (2h) on every node below the root (the root too for a series
      whose total is not public, such as the ROC's classes); a replaced
      record changes at most 2h nodes by 1, so the release is eps-DP.
    * :func:`consistent_levels`: the least-squares (GLS) tree, Hay et al.'s
      two passes in Honaker's form (2015) for any arity; each consistent
      prefix sum is the minimum-variance linear unbiased estimate.
    * :class:`PrefixMap`: node noise -> error of every consistent prefix sum,
      forward and as its adjoint, without forming the N x nodes matrix.
    * :func:`subtraction_costs`, :func:`dominates_paper`: the closed-form
      bound from the k-ary tree "with subtraction" (Andersson, Pagh, Steiner,
      Torkamani, FORC 2025) and when it beats [BMR25, Theorem 3.1];
      :func:`tree_radices` picks the radices from g alone (public).

    The sensitivity argument, the two passes and the closed-form comparison
    with the paper: ``docs/ecdf-intervals.md``, "The k-ary mechanism".

Security model
    Pure math on public parameters and on counts; noise as in
    :mod:`pairwise.dp.tree` (exact discrete Laplace from the OS CSPRNG, or a
    seeded numpy Generator for SIMULATION).  Replace-one neighbours, n public.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .accounting import PrivacyGuarantee, validate_epsilon
from .errors import InvalidDataError, PrivacyParameterError
from .samplers import (
    _check_rng,
    conservative_scale,
    discrete_laplace_array,
    discrete_laplace_variance,
    simulate_discrete_laplace,
)
from .tree import TreeRelease, _n_public, pad_counts, tree_depth, validate_counts
from .validate import check_int

__all__ = [
    "MAX_TREE_BITS",
    "tree_radices",
    "check_radices",
    "level_sizes",
    "node_counts",
    "consistent_levels",
    "consistent_prefix",
    "PrefixMap",
    "subtraction_costs",
    "dominates_paper",
    "kary_mechanism",
]

#: Largest grid (bits) the layout functions accept (the ECDF service's MAX_GRID_BITS).
MAX_TREE_BITS = 24


def _check_bits(g: object) -> int:
    return check_int(g, "grid bits", lo=0, hi=MAX_TREE_BITS, error=PrivacyParameterError)


def check_radices(radices: object) -> tuple[int, ...]:
    """A tuple of powers of two >= 2 (leaves first), or a clear error."""
    try:
        rad = tuple(int(k) for k in radices)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise PrivacyParameterError(f"radices must be a list of integers, got {radices!r}") from None
    if not rad or any(k < 2 or k & (k - 1) for k in rad) or sum(k.bit_length() - 1 for k in rad) > MAX_TREE_BITS:
        raise PrivacyParameterError(
            f"radices must be powers of two >= 2 whose product is at most 2^{MAX_TREE_BITS}, got {radices!r}"
        )
    return rad


def _split(g: int, h: int) -> tuple[int, ...]:
    """g bits over h levels as evenly as possible, the larger radices nearer the root."""
    base, extra = divmod(g, h)
    return tuple(1 << (base + (1 if i >= h - extra else 0)) for i in range(h))


@lru_cache(maxsize=64)
def tree_radices(grid_bits: int) -> tuple[int, ...]:
    """The radices of the k-ary mechanism on 2^g thresholds, a function of g only (public).

    Among the balanced splits of g bits into h levels with 2h <= g + 1 (the
    condition of the dominance bound in the module docstring), the one that
    minimizes h^2 * mean_t c(t), the subtraction estimator's mean squared
    error in units of 1 / (2 eps^2) (small-eps limit).  g = 10 gives (32, 32).
    """
    g = _check_bits(grid_bits)
    if g == 0:
        raise PrivacyParameterError("a k-ary tree needs at least 2 thresholds (grid bits >= 1)")
    best = None
    for h in range(1, (g + 1) // 2 + 1):
        rad = _split(g, h)
        score = h * h * float(subtraction_costs(rad).mean())
        if best is None or score < best[0] - 1e-12:
            best = (score, rad)
    assert best is not None  # the range holds h = 1
    return best[1]


def level_sizes(radices) -> list[int]:
    """Nodes per level 0 (leaves) .. h (root): N, N / k_1, ..., 1."""
    rad = check_radices(radices)
    sizes = [int(np.prod(rad, dtype=np.int64))]
    for k in rad:
        sizes.append(sizes[-1] // k)
    return sizes


def node_counts(counts: object, radices) -> list[np.ndarray]:
    """Exact counts of every node, per level (leaves first, root last); counts padded to prod(radices) bins."""
    rad = check_radices(radices)
    arr = validate_counts(counts)
    size = int(np.prod(rad, dtype=np.int64))
    if arr.size > size:
        raise InvalidDataError(f"{arr.size} bins do not fit a tree of {size} leaves")
    level = np.concatenate([arr, np.zeros(size - arr.size, dtype=np.int64)])
    out = [level]
    for k in rad:
        level = level.reshape(-1, k).sum(axis=1)
        out.append(level)
    return out


def _check_levels(node_values, radices) -> tuple[list[np.ndarray], tuple[int, ...]]:
    rad = check_radices(radices)
    sizes = level_sizes(rad)
    levels = [np.asarray(v, dtype=float) for v in node_values]
    if len(levels) != len(sizes):
        raise InvalidDataError(f"radices {rad} need {len(sizes)} levels (leaves .. root), got {len(levels)}")
    for l, (v, s) in enumerate(zip(levels, sizes)):
        if v.ndim < 1 or v.shape[-1] != s:
            raise InvalidDataError(f"level {l} must have {s} nodes on its last axis, got shape {v.shape}")
    return levels, rad


def _coefficients(level_variances, h: int, rad) -> list[tuple[str, float, float]]:
    """Upward-pass rule per level 1..h: ('own'|'sum'|'mix', c_own, c_sum) and the subtree variances."""
    var = [float(v) for v in np.asarray(level_variances, dtype=float).ravel()]
    if len(var) != h + 1 or any((not math.isfinite(v)) or v < 0 for v in var):
        raise InvalidDataError(f"level_variances must hold {h + 1} finite values >= 0")
    w = var[0]
    rules = []
    for l in range(1, h + 1):
        ws = rad[l - 1] * w
        if var[l] == 0.0:
            rules.append(("own", 1.0, 0.0))
            w = 0.0
        elif ws == 0.0:
            rules.append(("sum", 0.0, 1.0))
            w = 0.0
        else:
            rules.append(("mix", ws / (ws + var[l]), var[l] / (ws + var[l])))
            w = ws * var[l] / (ws + var[l])
    return rules


def consistent_levels(node_values, level_variances, radices) -> list[np.ndarray]:
    """Least-squares consistent node counts of a mixed-radix tree (every parent = the sum of its children).

    ``node_values[l]``: the noisy counts of level l (leading batch axes
    allowed); ``level_variances[l]``: their noise variance (0 = known, e.g.
    the public total at the root).  Honaker's two passes, see the module
    docstring; equals :func:`pairwise.dp.tree.consistent_tree` for radices
    (2, ..., 2).
    """
    levels, rad = _check_levels(node_values, radices)
    h = len(rad)
    rules = _coefficients(level_variances, h, rad)
    z = [levels[0]]
    for l in range(1, h + 1):
        k = rad[l - 1]
        s = z[-1].reshape(z[-1].shape[:-1] + (-1, k)).sum(axis=-1)
        kind, c_own, c_sum = rules[l - 1]
        z.append(levels[l] if kind == "own" else s if kind == "sum" else c_own * levels[l] + c_sum * s)
    x: list = [None] * (h + 1)
    x[h] = z[h]
    for l in range(h, 0, -1):
        k = rad[l - 1]
        ch = z[l - 1].reshape(z[l - 1].shape[:-1] + (-1, k))
        resid = x[l] - ch.sum(axis=-1)
        x[l - 1] = (ch + resid[..., None] / k).reshape(z[l - 1].shape)
    return x  # type: ignore[return-value]


def consistent_prefix(node_values, level_variances, radices) -> np.ndarray:
    """Cumulative counts (prefix sums of the leaves) of the consistent tree."""
    return np.cumsum(consistent_levels(node_values, level_variances, radices)[0], axis=-1)


@dataclass(frozen=True)
class PrefixMap:
    """The linear map from node noise (all levels, leaves first, concatenated) to the consistent prefix errors.

    ``forward(noise)``: (..., nodes) -> (..., N), what the querier's
    consistency does to the noise.  ``adjoint(weights)``: (..., N) -> (...,
    nodes), the transpose: node weights of sum_t weights[t] * error[t]
    (row t of the identity gives the node weights of threshold t).  Levels
    with variance 0 (a public root) carry no noise and are left out of the
    node vector.
    """

    radices: tuple[int, ...]
    level_variances: tuple[float, ...]

    @property
    def sizes(self) -> list[int]:
        return level_sizes(self.radices)

    @property
    def noisy_levels(self) -> list[int]:
        return [l for l, v in enumerate(self.level_variances) if v > 0]

    @property
    def nodes(self) -> int:
        sz = self.sizes
        return sum(sz[l] for l in self.noisy_levels)

    def _split(self, flat: np.ndarray) -> list[np.ndarray]:
        sz, out, start = self.sizes, [], 0
        for l in range(len(sz)):
            if self.level_variances[l] > 0:
                out.append(flat[..., start : start + sz[l]])
                start += sz[l]
            else:
                out.append(np.zeros(flat.shape[:-1] + (sz[l],)))
        return out

    def forward(self, noise) -> np.ndarray:
        flat = np.asarray(noise, dtype=float)
        if flat.shape[-1] != self.nodes:
            raise InvalidDataError(f"noise must have {self.nodes} nodes on its last axis, got {flat.shape}")
        return consistent_prefix(self._split(flat), self.level_variances, self.radices)

    def adjoint(self, weights) -> np.ndarray:
        g = np.asarray(weights, dtype=float)
        rad, h = self.radices, len(self.radices)
        if g.shape[-1] != self.sizes[0]:
            raise InvalidDataError(f"weights must have {self.sizes[0]} thresholds on the last axis, got {g.shape}")
        lead = g.shape[:-1]
        # prefix = cumsum(x_0): adjoint is the reversed cumulative sum
        gx = np.flip(np.cumsum(np.flip(g, -1), axis=-1), -1)
        gz: list[np.ndarray] = [None] * (h + 1)  # type: ignore[list-item]
        for l in range(1, h + 1):  # downward pass, reversed
            k = rad[l - 1]
            blocks = gx.reshape(lead + (-1, k))
            sums = blocks.sum(axis=-1)
            gz[l - 1] = (blocks - sums[..., None] / k).reshape(gx.shape)
            gx = sums / k
        gz[h] = gx
        rules = _coefficients(self.level_variances, h, rad)
        gy: list[np.ndarray] = [None] * (h + 1)  # type: ignore[list-item]
        for l in range(h, 0, -1):  # upward pass, reversed
            kind, c_own, c_sum = rules[l - 1]
            gy[l] = c_own * gz[l] if kind != "sum" else np.zeros_like(gz[l])
            if kind != "own":
                gz[l - 1] = gz[l - 1] + c_sum * np.repeat(gz[l], rad[l - 1], axis=-1)
        gy[0] = gz[0]
        return np.concatenate([gy[l] for l in self.noisy_levels], axis=-1)

    def threshold_norms(self, thresholds=None, batch: int = 256) -> tuple[np.ndarray, np.ndarray]:
        """Per threshold: (sum of squared node weights, largest absolute node weight) of its error."""
        N = self.sizes[0]
        thr = np.arange(N) if thresholds is None else np.asarray(thresholds, dtype=np.int64)
        sq, mx = np.empty(thr.size), np.empty(thr.size)
        for s in range(0, thr.size, batch):
            part = thr[s : s + batch]
            e = np.zeros((part.size, N))
            e[np.arange(part.size), part] = 1.0
            w = self.adjoint(e)
            sq[s : s + batch] = np.sum(w * w, axis=-1)
            mx[s : s + batch] = np.max(np.abs(w), axis=-1)
        return sq, mx


def subtraction_costs(radices, root_public: bool = True) -> np.ndarray:
    """c(t): nodes in the cheapest +-1 decomposition of prefix [0, t] (t = 0 .. N-1), the closed form.

    Balanced mixed-radix digits: at level l with digit d (and carry c from
    below) use d + c left siblings (carry 0), or the parent minus the
    k - d - c right siblings (carry 1); the root costs 0 when public.
    Dynamic programming over the levels, vectorized over all N prefixes.
    """
    rad = check_radices(radices)
    N = int(np.prod(rad, dtype=np.int64))
    x = np.arange(1, N + 1, dtype=np.int64)
    inf = np.iinfo(np.int64).max // 4
    c0 = np.zeros(N, dtype=np.int64)
    c1 = np.full(N, inf, dtype=np.int64)
    w = 1
    for k in rad:
        d = (x // w) % k
        n0 = np.minimum(c0 + d, np.where(d + 1 < k, c1 + d + 1, inf))
        n1 = np.minimum(
            np.where(d > 0, c0 + k - d, inf), np.where(d + 1 < k, c1 + k - d - 1, np.where(d + 1 == k, c1, inf))
        )
        c0, c1 = n0, n1
        w *= k
    top = x // N  # 1 only for the last prefix (all bins)
    root = 0 if root_public else 1
    return np.minimum(np.where(top == 0, c0, c0 + root), np.where(top == 0, c1 + root, inf))


def dominates_paper(radices, root_public: bool = False) -> bool:
    """True if 4 h^2 c(t) < (L + 1)^3 at every threshold and 2h <= L + 1 (module docstring): then the
    k-ary tree's per-threshold MSE is below Theorem 3.1's at every threshold and every epsilon."""
    rad = check_radices(radices)
    L = sum(k.bit_length() - 1 for k in rad)
    h = len(rad)
    c = subtraction_costs(rad, root_public=root_public)
    return 2 * h <= L + 1 and bool(np.all(4 * h * h * c < (L + 1) ** 3))


def kary_mechanism(
    counts: object,
    epsilon: float,
    *,
    radices=None,
    root_public: bool = True,
    rng: np.random.Generator | None = None,
) -> TreeRelease:
    """Noisy node counts of a mixed-radix tree (discrete Laplace, per node eps / (2h)) and their GLS prefix sums.

    ``radices``: default :func:`tree_radices` of the padded grid.
    ``root_public``: the total n is public (replace-one neighbours); False
    noises the root as well (a class series).  ``rng=None``: exact noise from
    the OS CSPRNG; a numpy Generator: SIMULATION.
    """
    eps = validate_epsilon(epsilon)
    arr = validate_counts(counts)
    n = _n_public(arr)
    N = arr.size
    g = tree_depth(N)
    if g == 0:
        raise PrivacyParameterError("the k-ary mechanism needs at least 2 bins")
    rad = tree_radices(g) if radices is None else check_radices(radices)
    if int(np.prod(rad)) != pad_counts(arr).size:
        raise InvalidDataError(f"radices {rad} do not multiply to the padded grid {pad_counts(arr).size}")
    h = len(rad)
    scale = conservative_scale(2 * h, eps)
    exact = node_counts(arr, rad)
    noisy_levels = range(h) if root_public else range(h + 1)
    noisy = []
    for l in range(h + 1):
        v = exact[l].astype(float)
        if l in noisy_levels:
            if rng is None:
                v = v + discrete_laplace_array(scale, v.size)
            else:
                v = v + simulate_discrete_laplace(scale, v.size, _check_rng(rng))
        noisy.append(v)
    var = discrete_laplace_variance(scale)
    variances = [var] * h + [0.0 if root_public else var]
    cum = consistent_prefix(noisy, variances, rad)
    return TreeRelease(
        cum[:N],
        n,
        g,
        eps,
        float(scale),
        "discrete_laplace",
        "kary",
        rng is not None,
        PrivacyGuarantee(eps),
        var,
        tuple(noisy),
    )
