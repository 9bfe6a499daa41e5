"""Binary-tree noise for private ECDFs ([BMR25, Theorem 3.1]) and tree consistency.

What it does
    Counts per bin over 2^L bins become noisy cumulative counts in two
    layouts.  *Paper layout* (:func:`tree_mechanism`; [BMR25, Sec. 3.1,
    Eq. (2) and Theorem 3.1]): one noise variable per dyadic node, of scale
    (L+1)/epsilon, and threshold i receives the L+1 variables on its path;
    :func:`path_sums` is that linear map (Eq. 6), so a secure-computation
    caller can apply it to additive shares and open only Eq. (2).
    *Hierarchical layout* (:func:`hierarchical_mechanism`; Hay, Rastogi,
    Miklau, Suciu, VLDB 2010): noisy counts of every dyadic node at scale
    2L/epsilon, made consistent by least squares (:func:`consistent_tree`,
    Honaker 2015) or summed per prefix (:func:`dyadic_prefix_sums`).  The
    sensitivity arguments (why the exact discrete Laplace keeps Theorem 3.1's
    guarantee, why opening node values would need 2L+1 nodes, add/remove
    neighbours): docs/dp.md, "Binary-tree noise and tree consistency".

Noise sources
    ``rng=None`` (default): exact discrete Laplace from the OS CSPRNG
    (:func:`pairwise.dp.samplers.discrete_laplace_array`), or for
    ``noise="laplace"`` Mironov's snapping mechanism ([Mir12]; its scale is
    raised so the stated epsilon holds including the snapping overhead).  A
    numpy ``Generator`` selects SIMULATION noise (seeded, float), for
    experiments.

Security model
    Pure math in the clear on counts; the noise is secret and drawn from the
    OS CSPRNG unless a simulation generator is passed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .accounting import PrivacyGuarantee, round_up, validate_epsilon
from .errors import EmptyDataError, InvalidDataError, PrivacyParameterError
from .samplers import (
    SNAPPING_ETA,
    _check_rng,
    conservative_scale,
    discrete_laplace_array,
    discrete_laplace_variance,
    simulate_discrete_laplace,
    simulate_laplace,
    snapping_epsilon,
    snapping_laplace_array,
)
from .validate import check_int

__all__ = [
    "NOISE_KINDS",
    "tree_depth",
    "validate_counts",
    "pad_counts",
    "dyadic_node_counts",
    "path_node_values",
    "path_sums",
    "path_adjoint",
    "dyadic_prefix_sums",
    "tree_noise_scale",
    "theorem31_mse",
    "tree_node_noise",
    "TreeRelease",
    "tree_mechanism",
    "hierarchical_mechanism",
    "consistent_tree",
    "consistent_prefix_sums",
    "paper_layout_replace_sensitivity",
]

NOISE_KINDS = ("discrete_laplace", "laplace")


# --------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------


def tree_depth(n_bins: int) -> int:
    """L = ceil(log2(N)) for N >= 1 bins (L = 0 for a single bin)."""
    check_int(n_bins, "the number of bins", lo=1, error=EmptyDataError)
    return int(n_bins - 1).bit_length()


def validate_counts(counts: object) -> np.ndarray:
    """A 1-D, non-empty int64 array of non-negative counts, or a clear error."""
    arr = np.asarray(counts)
    if arr.ndim != 1:
        raise InvalidDataError(f"counts must be a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise EmptyDataError("counts is empty: need at least one bin")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise InvalidDataError(f"counts must be integers, got dtype {arr.dtype}")
    if (arr < 0).any():
        raise InvalidDataError("counts must be non-negative")
    return arr.astype(np.int64)


def pad_counts(counts: object) -> np.ndarray:
    """Counts padded with zero bins to length 2^L (the paper sets tau_i = phi_max for i > N)."""
    arr = validate_counts(counts)
    size = 1 << tree_depth(arr.size)
    if size == arr.size:
        return arr
    return np.concatenate([arr, np.zeros(size - arr.size, dtype=np.int64)])


def _check_levels(node_values: object) -> tuple[list[np.ndarray], int]:
    levels = [np.asarray(v) for v in node_values]  # type: ignore[attr-defined]
    if not levels:
        raise InvalidDataError("node_values must hold one array per level 0..L")
    L = len(levels) - 1
    for l, v in enumerate(levels):
        if v.ndim < 1 or v.shape[-1] != 1 << (L - l):
            raise InvalidDataError(
                f"level {l} of a depth-{L} tree must have 2^{L - l} = {1 << (L - l)} nodes "
                f"on its last axis, got shape {v.shape}"
            )
    return levels, L


def dyadic_node_counts(counts: object) -> list[np.ndarray]:
    """Counts of every dyadic node: level l has 2^(L-l) nodes, node j covers bins
    [j 2^l, (j+1) 2^l).  Level 0 is the (padded) histogram, level L the total."""
    level = pad_counts(counts)
    out = [level]
    while level.size > 1:
        level = level[0::2] + level[1::2]
        out.append(level)
    return out


def path_node_values(counts: object) -> list[np.ndarray]:
    """Node values d with ``path_sums(d)`` equal to the cumulative counts.

    Leaf j holds its own count plus, if j is a right child, its left sibling's;
    an internal right child holds its left sibling's count; left children above
    the leaves and the root hold 0.  (Binary decomposition of the prefix [0, k].)
    """
    nodes = dyadic_node_counts(counts)
    L = len(nodes) - 1
    out = []
    for l in range(L + 1):
        v = np.zeros(1 << (L - l), dtype=np.int64)
        if l < L:
            v[1::2] = nodes[l][0::2]
        if l == 0:
            v += nodes[0]
        out.append(v)
    return out


def path_sums(node_values: object) -> np.ndarray:
    """Eq. (2)/(6): ``output[..., k] = sum over l of node_values[l][..., k >> l]``.

    Each leaf k receives the values of the L+1 nodes containing it.  Works on
    any leading batch shape and in the arrays' own dtype (so uint64 additive
    shares wrap modulo 2^64 and stay valid shares).
    """
    levels, L = _check_levels(node_values)
    out = np.array(levels[0], copy=True)
    for l in range(1, L + 1):
        out = out + np.repeat(levels[l], 1 << l, axis=-1)
    return out


def path_adjoint(weights: object) -> np.ndarray:
    """Transpose of :func:`path_sums`: node weights of sum_k weights[..., k] * path_sum[k], levels concatenated.

    Node (l, j) gets the sum of the weights of the 2^l leaves below it
    (leaves first, root last: the node order of :func:`tree_node_noise`).
    The last axis must be a power of two.
    """
    w = np.asarray(weights, dtype=float)
    size = w.shape[-1]
    if size < 1 or size & (size - 1):
        raise InvalidDataError(f"weights must have 2^L entries on the last axis, got {w.shape}")
    out = [w]
    while out[-1].shape[-1] > 1:
        v = out[-1]
        out.append(v[..., 0::2] + v[..., 1::2])
    return np.concatenate(out, axis=-1)


def dyadic_prefix_sums(node_values: object) -> np.ndarray:
    """Prefix sums from (noisy) dyadic node counts: output[..., k] = count of bins 0..k.

    [0, k] is the disjoint union of the nodes (l, ((k+1) >> l) - 1) for the set
    bits l of k+1, so each prefix uses at most L+1 nodes (popcount(k+1)).
    """
    levels, L = _check_levels(node_values)
    size = 1 << L
    idx = np.arange(1, size + 1)
    batch = levels[0].shape[:-1]
    out = np.zeros(batch + (size,), dtype=np.result_type(*levels))
    for l in range(L + 1):
        bit = ((idx >> l) & 1).astype(bool)
        node = (idx >> l) - 1
        contrib = levels[l][..., np.where(bit, node, 0)]
        out = out + np.where(bit, contrib, 0)
    return out


def paper_layout_replace_sensitivity(L: int) -> int:
    """Max number of node values d (of :func:`path_node_values`) that change when one
    record changes bin: 2L + 1 (each by at most 1)."""
    return 2 * L + 1


# --------------------------------------------------------------------------
# Noise
# --------------------------------------------------------------------------


def tree_noise_scale(L: int, epsilon: float) -> Fraction:
    """Node noise scale of Theorem 3.1, (L+1)/epsilon, rounded up to a multiple of 2^-20."""
    return conservative_scale(L + 1, epsilon)


def theorem31_mse(L: int, epsilon: float) -> float:
    """Theorem 3.1's per-threshold expected squared error in counts: 2 (L+1)^3 / epsilon^2."""
    eps = validate_epsilon(epsilon)
    return 2.0 * (L + 1) ** 3 / eps**2


def _noise_kind(noise: str) -> str:
    if noise not in NOISE_KINDS:
        raise PrivacyParameterError(f"noise must be one of {NOISE_KINDS}, got {noise!r}")
    return noise


def _node_variance(noise: str, scale: Fraction | float) -> float:
    if noise == "discrete_laplace":
        return discrete_laplace_variance(scale)
    return 2.0 * float(scale) ** 2


def tree_node_noise(
    L: int,
    scale: Fraction | float,
    *,
    noise: str = "discrete_laplace",
    rng: np.random.Generator | None = None,
    trials: int | None = None,
) -> list[np.ndarray]:
    """One independent noise variable per dyadic node, returned per level (0..L).

    ``rng=None``: exact discrete Laplace from os.urandom (``noise="laplace"``
    has no exact CSPRNG form as bare noise: use :func:`tree_mechanism`, which
    snaps the node values).  With a numpy Generator: SIMULATION noise, with an
    optional leading axis of ``trials`` independent trees.
    """
    _noise_kind(noise)
    L = check_int(L, "L", lo=0, error=PrivacyParameterError)
    total = (1 << (L + 1)) - 1
    if rng is None:
        if trials is not None:
            raise PrivacyParameterError("trials is only for simulation (pass rng)")
        if noise == "laplace":
            raise PrivacyParameterError(
                "bare continuous Laplace noise from the CSPRNG is not offered (Mironov 2012); "
                "use noise='discrete_laplace', or tree_mechanism(noise='laplace') which snaps"
            )
        flat = discrete_laplace_array(scale, total)
    else:
        _check_rng(rng)
        shape = (total,) if trials is None else (int(trials), total)
        if noise == "laplace":
            flat = simulate_laplace(float(scale), shape, rng)
        else:
            flat = simulate_discrete_laplace(scale, shape, rng)
    out = []
    start = 0
    for l in range(L + 1):
        width = 1 << (L - l)
        out.append(flat[..., start : start + width])
        start += width
    return out


# --------------------------------------------------------------------------
# Releases
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeRelease:
    """Noisy cumulative counts from a tree mechanism, with the data needed to use them.

    ``cumulative[i]`` estimates the number of records in bins 0..i (the first
    N = len(counts) thresholds).  ``node_values`` are the released noisy node
    counts of the hierarchical layout (None for the paper layout, which
    releases only the cumulative counts).  ``node_variance`` is the variance of
    one node's noise; ``guarantee`` the privacy guarantee (replace-one
    neighbours, n public).
    """

    cumulative: np.ndarray
    n: int
    L: int
    epsilon: float
    scale: float
    noise: str
    layout: str
    simulated: bool
    guarantee: PrivacyGuarantee
    node_variance: float
    node_values: tuple[np.ndarray, ...] | None = None

    @property
    def ecdf(self) -> np.ndarray:
        """The noisy ECDF, cumulative / n (not clipped; see :mod:`pairwise.dp.smoothing`)."""
        return self.cumulative / self.n

    @property
    def theoretical_mse(self) -> float | None:
        """Per-threshold expected squared error in counts (paper layout: (L+1) Var(eta))."""
        if self.layout == "paper":
            return (self.L + 1) * self.node_variance
        return None


def _n_public(counts: np.ndarray) -> int:
    n = int(counts.sum())
    if n == 0:
        raise EmptyDataError("the histogram holds no records (all counts are 0)")
    return n


def _snap_nodes(values: list[np.ndarray], n: int, epsilon: float, changed: int, L: int):
    """Snap every node value with per-node epsilon/changed; return (levels, scale, guarantee)."""
    eps_node = epsilon / changed
    eta = SNAPPING_ETA
    # node values lie in [0, n]; widen the clamp interval so that lambda < B.
    lam = 0.0
    half = n / 2.0
    for _ in range(3):
        lam = (1.0 + 12.0 * half * eta) / (eps_node - 2.0 * eta)
        half = max(n / 2.0, 2.0 * lam)
    lower, upper = n / 2.0 - half, n / 2.0 + half
    for _ in range(64):
        per_node = snapping_epsilon(lam, lower, upper)
        total = round_up(Fraction(per_node) * changed)
        if total <= epsilon:
            break
        lam = math.nextafter(lam, math.inf) * (1 + 1e-15)
    flat = np.concatenate(values).astype(float)
    snapped = snapping_laplace_array(flat, lam, lower, upper)
    out, start = [], 0
    for l in range(L + 1):
        width = 1 << (L - l)
        out.append(snapped[start : start + width])
        start += width
    return out, lam, PrivacyGuarantee(total)


def tree_mechanism(
    counts: object,
    epsilon: float,
    *,
    noise: str = "discrete_laplace",
    rng: np.random.Generator | None = None,
) -> TreeRelease:
    """Theorem 3.1: noisy cumulative counts with one noise variable per dyadic node.

    ``counts``: non-negative integer counts per bin (N bins, padded to 2^L).
    ``noise``: "discrete_laplace" (exact integers, default) or "laplace" (the
    paper's).  ``rng=None`` draws from the OS CSPRNG; a numpy Generator gives a
    SIMULATION.  Node scale (L+1)/epsilon (rounded up to a multiple of 2^-20).

    With ``noise="laplace"`` and no rng the continuous Laplace is released
    through Mironov's snapping mechanism applied to every node value d of
    :func:`path_node_values` (then summed along paths).  Snapping is a
    per-value mechanism, so the privacy argument is composition over the at
    most 2L+1 node values a replaced record changes: the node scale becomes
    about (2L+1)/epsilon (not the paper's (L+1)/epsilon), chosen so that the
    reported guarantee, snapping overhead included, is <= epsilon.
    """
    eps = validate_epsilon(epsilon)
    _noise_kind(noise)
    arr = validate_counts(counts)
    n = _n_public(arr)
    N = arr.size
    L = tree_depth(N)
    padded = pad_counts(arr)
    exact_cum = np.cumsum(padded)
    if noise == "laplace" and rng is None:
        changed = paper_layout_replace_sensitivity(L)
        snapped, lam, guarantee = _snap_nodes(path_node_values(padded), n, eps, changed, L)
        cum = path_sums(snapped)
        return TreeRelease(cum[:N], n, L, eps, lam, noise, "paper", False, guarantee, 2.0 * lam**2)
    scale = tree_noise_scale(L, eps)
    eta = tree_node_noise(L, scale, noise=noise, rng=rng)
    cum = exact_cum + path_sums(eta)
    return TreeRelease(
        cum[:N],
        n,
        L,
        eps,
        float(scale),
        noise,
        "paper",
        rng is not None,
        PrivacyGuarantee(eps),
        _node_variance(noise, scale),
    )


def hierarchical_mechanism(
    counts: object,
    epsilon: float,
    *,
    noise: str = "discrete_laplace",
    rng: np.random.Generator | None = None,
    consistent: bool = True,
) -> TreeRelease:
    """Hay et al. 2010: noisy counts of every dyadic node below the root (root = n).

    Scale 2L/epsilon (replace-one changes at most two nodes per level on L
    levels).  ``cumulative`` is computed from the least-squares consistent tree
    (``consistent=True``) or from the raw dyadic decomposition.  Noise options
    as in :func:`tree_mechanism`; snapped Laplace uses 2L changed nodes.
    """
    eps = validate_epsilon(epsilon)
    _noise_kind(noise)
    arr = validate_counts(counts)
    n = _n_public(arr)
    N = arr.size
    L = tree_depth(N)
    nodes = dyadic_node_counts(arr)
    if L == 0:
        cum = np.array([n])
        return TreeRelease(
            cum, n, 0, eps, 0.0, noise, "hierarchical", rng is not None, PrivacyGuarantee(eps), 0.0, tuple(nodes)
        )
    if noise == "laplace" and rng is None:
        snapped, lam, guarantee = _snap_nodes(nodes, n, eps, 2 * L, L)
        noisy = snapped[:-1] + [np.array([float(n)])]
        scale, var, simulated = lam, 2.0 * lam**2, False
    else:
        frac_scale = conservative_scale(2 * L, eps)
        eta = tree_node_noise(L, frac_scale, noise=noise, rng=rng)
        noisy = [nodes[l] + eta[l] for l in range(L)] + [nodes[L].copy()]
        scale, var, simulated = float(frac_scale), _node_variance(noise, frac_scale), rng is not None
        guarantee = PrivacyGuarantee(eps)
    if consistent:
        cum = consistent_prefix_sums(noisy, [var] * L + [0.0])
    else:
        cum = dyadic_prefix_sums(noisy)
    return TreeRelease(cum[:N], n, L, eps, scale, noise, "hierarchical", simulated, guarantee, var, tuple(noisy))


# --------------------------------------------------------------------------
# Least-squares consistency (Hay et al. 2010 / Honaker 2015)
# --------------------------------------------------------------------------


def consistent_tree(node_values: object, level_variances: object) -> list[np.ndarray]:
    """Least-squares (GLS) estimate of all node counts given noisy node counts.

    ``node_values[l]`` holds the noisy counts of level l (leaves l = 0, root
    l = L; leading batch axes allowed); ``level_variances[l]`` the noise
    variance of that level's nodes (0 = known exactly, e.g. the public total).
    Returns consistent node counts (each parent equals the sum of its
    children) minimising the variance-weighted squared distance to the
    observations.  Upward pass: combine a node's own observation with the sum
    of its children's subtree estimates by inverse-variance weighting; downward
    pass: split the parent's final residual between the two children in
    proportion to their subtree variances (Hay et al.'s two passes for
    uniform variances, Honaker 2015 in general).
    """
    levels, L = _check_levels(node_values)
    var = [float(v) for v in np.asarray(level_variances, dtype=float).ravel()]
    if len(var) != L + 1 or any((not math.isfinite(v)) or v < 0 for v in var):
        raise InvalidDataError(f"level_variances must hold {L + 1} finite values >= 0")
    y = [np.asarray(v, dtype=float) for v in levels]
    z: list[np.ndarray] = [y[0]]
    w: list[float] = [var[0]]
    for l in range(1, L + 1):
        s = z[l - 1][..., 0::2] + z[l - 1][..., 1::2]
        ws = 2.0 * w[l - 1]
        if var[l] == 0.0:
            z.append(y[l])
            w.append(0.0)
        elif ws == 0.0:
            z.append(s)
            w.append(0.0)
        else:
            z.append((y[l] * ws + s * var[l]) / (ws + var[l]))
            w.append(ws * var[l] / (ws + var[l]))
    x: list[np.ndarray] = [None] * (L + 1)  # type: ignore[list-item]
    x[L] = z[L]
    for l in range(L, 0, -1):
        left, right = z[l - 1][..., 0::2], z[l - 1][..., 1::2]
        resid = x[l] - left - right
        child = np.empty_like(z[l - 1])
        # equal-variance siblings: split the residual evenly (also when both are exact)
        child[..., 0::2] = left + resid / 2.0
        child[..., 1::2] = right + resid / 2.0
        x[l - 1] = child
    return x


def consistent_prefix_sums(node_values: object, level_variances: object) -> np.ndarray:
    """Cumulative counts of the least-squares consistent tree (prefix sums of its leaves)."""
    return np.cumsum(consistent_tree(node_values, level_variances)[0], axis=-1)
