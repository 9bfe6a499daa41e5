"""Smoothing of noisy ECDFs into non-decreasing, bounded functions ([BMR25, Eq. 3]).

What it does
    The noisy ECDF F^ of the tree mechanism need not be non-decreasing.  The
    paper (Sec. 3.2, Eq. 3) replaces it by the non-decreasing F' with
    F'(min B) >= 0 and F'(max B) <= 1 that is closest in a p-norm, for
    p = 1 or p = 2.  Two readings are implemented (``space``):

    * ``space="leaf"`` (default): minimise sum_i |F'_i - F^_i|^p over the
      thresholds.  p = 2 is bounded isotonic regression: pool-adjacent-
      violators (:func:`scipy.optimize.isotonic_regression`) then clipping to
      [lower, upper], which is the exact solution for constant bounds.  As a
      Euclidean projection onto a convex set that contains the true ECDF it
      never increases the squared error.  p = 1 is a linear program solved by
      HiGHS (:func:`scipy.optimize.linprog`).
    * ``space="tree"``: Eq. (3) literally.  The corrections are node variables
      nu_{j,l} of the noise tree, F' = F^ + Z nu (Z sums the nodes on a leaf's
      path, :func:`pairwise.dp.tree.path_sums`), and the objective is sum |nu|^p.  p = 1
      is an LP (HiGHS).  For p = 2, min ||nu||^2 subject to A nu >= c (A rows:
      differences of consecutive rows of Z and the two bound rows) is solved
      through its dual, min_{lambda >= 0} ||A^T lambda||^2 / 2 - c^T lambda,
      by accelerated projected gradient (FISTA with adaptive restart), with
      nu = A^T lambda; a final non-decreasing clean-up removes the solver's
      residual infeasibility (below ``tol`` times the range).  This is the
      Mahalanobis projection for the tree noise covariance, not a Euclidean
      one, so it is not guaranteed to lower the Euclidean error (the paper's
      Figure 2 reports increases for epsilon < 0.2; our benchmark,
      benchmarks/results/dp.md, measured decreases at every epsilon).

    ``subset`` restricts the constraints and the output to thresholds B, as in
    Eq. (3) (leaf space: the isotonic problem on those points).

Security model
    Post-processing of an already private release: no privacy cost, no
    randomness.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .errors import EmptyDataError, InvalidDataError, PrivacyParameterError
from .tree import tree_depth

# scipy.sparse and scipy.optimize are imported inside the functions that use
# them: importing them costs about 0.7 s of CPU, which every `pairwise` process
# (servers, workers, the command line) would otherwise pay at start.
if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["smooth_ecdf", "isotonic_bounded", "path_matrix"]


def _values(values: object) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise InvalidDataError(f"values must be a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise EmptyDataError("values is empty")
    if not np.all(np.isfinite(arr)):
        raise InvalidDataError("values must be finite")
    return arr


def isotonic_bounded(values: object, lower: float = 0.0, upper: float = 1.0) -> np.ndarray:
    """Euclidean projection onto {non-decreasing, lower <= F <= upper} (p = 2, leaf space)."""
    from scipy.optimize import isotonic_regression

    arr = _values(values)
    fitted = isotonic_regression(arr, increasing=True).x
    return np.clip(fitted, lower, upper)


def _l1_isotonic(arr: np.ndarray, lower: float, upper: float) -> np.ndarray:
    import scipy.sparse as sp
    from scipy.optimize import linprog

    n = arr.size
    # variables [F (n), t (n)]; minimise sum t, t >= |F - y|, F_{i+1} >= F_i, lower <= F <= upper
    eye = sp.identity(n, format="csr")
    rows = [sp.hstack([eye, -eye]), sp.hstack([-eye, -eye])]
    rhs = [arr, -arr]
    if n > 1:
        diff = sp.diags([np.ones(n - 1), -np.ones(n - 1)], [0, 1], shape=(n - 1, n))
        rows.append(sp.hstack([diff, sp.csr_matrix((n - 1, n))]))
        rhs.append(np.zeros(n - 1))
    a_ub = sp.vstack(rows, format="csr")
    b_ub = np.concatenate(rhs)
    cost = np.concatenate([np.zeros(n), np.ones(n)])
    bounds = [(lower, upper)] * n + [(0, None)] * n
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed on the p=1 smoothing LP: {res.message}")
    return np.maximum.accumulate(np.clip(res.x[:n], lower, upper))


def path_matrix(n_thresholds: int, rows: np.ndarray | None = None) -> sp.csr_matrix:
    """Sparse Z_{L,0} restricted to ``rows``: Z[i, node] = 1 if threshold i lies in node.

    Nodes are numbered level by level (leaves first, root last).
    """
    import scipy.sparse as sp

    L = tree_depth(n_thresholds)
    idx = np.arange(n_thresholds) if rows is None else np.asarray(rows)
    offsets = np.concatenate([[0], np.cumsum([1 << (L - l) for l in range(L + 1)])])
    cols = np.stack([offsets[l] + (idx >> l) for l in range(L + 1)], axis=1).ravel()
    r = np.repeat(np.arange(idx.size), L + 1)
    return sp.csr_matrix((np.ones(r.size), (r, cols)), shape=(idx.size, int(offsets[-1])))


def _tree_constraints(arr: np.ndarray, rows: np.ndarray, n_total: int, lower: float, upper: float):
    import scipy.sparse as sp

    z = path_matrix(n_total, rows)
    m = rows.size
    blocks = []
    rhs = []
    if m > 1:
        blocks.append(z[1:] - z[:-1])
        rhs.append(arr[:-1] - arr[1:])
    blocks.append(z[:1])
    rhs.append(np.array([lower - arr[0]]))
    blocks.append(-z[-1:])
    rhs.append(np.array([arr[-1] - upper]))
    return sp.vstack(blocks, format="csr"), np.concatenate(rhs), z


def _tree_l1(arr, rows, n_total, lower, upper):
    import scipy.sparse as sp
    from scipy.optimize import linprog

    a, c, z = _tree_constraints(arr, rows, n_total, lower, upper)
    m = a.shape[1]
    res = linprog(
        np.ones(2 * m),
        A_ub=sp.hstack([-a, a], format="csr"),
        b_ub=-c,
        bounds=[(0, None)] * (2 * m),
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed on the p=1 tree smoothing LP: {res.message}")
    nu = res.x[:m] - res.x[m:]
    return arr + z @ nu, nu


def _tree_l2(arr, rows, n_total, lower, upper, tol, max_iter=100_000):
    """min ||nu||^2 s.t. A nu >= c, by accelerated projected gradient on the dual.

    Dual: min_{lam >= 0} ||A^T lam||^2 / 2 - c^T lam (FISTA with adaptive
    restart, step 1/||A||^2 from power iteration); primal nu = A^T lam.  Stops
    when the largest constraint violation is below tol * (upper - lower).
    """
    a, c, z = _tree_constraints(arr, rows, n_total, lower, upper)
    at = a.T.tocsr()
    k = a.shape[0]
    v = np.cos(np.arange(k) * 0.618) + 1.5  # deterministic start for the power iteration
    lip = 1.0
    for _ in range(60):
        v = a @ (at @ v)
        lip = float(np.linalg.norm(v))
        v /= lip
    step = 1.0 / (1.02 * lip)
    lam = np.zeros(k)
    y = lam.copy()
    t = 1.0
    target = tol * (upper - lower)
    for it in range(max_iter):
        lam_new = np.maximum(0.0, y - step * (a @ (at @ y) - c))
        if (lam_new - lam) @ (y - lam_new) > 0.0:  # gradient-based restart (O'Donoghue-Candes)
            t = 1.0
            y = lam_new.copy()
        else:
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            y = lam_new + ((t - 1.0) / t_new) * (lam_new - lam)
            t = t_new
        lam = lam_new
        if it % 25 == 0 and np.max(c - a @ (at @ lam)) <= target:
            break
    else:
        raise RuntimeError(f"p=2 tree smoothing did not converge in {max_iter} iterations")
    nu = at @ lam
    return arr + z @ nu, nu


def smooth_ecdf(
    values: object,
    p: int = 2,
    *,
    space: str = "leaf",
    lower: float = 0.0,
    upper: float = 1.0,
    subset: np.ndarray | None = None,
    tol: float = 1e-9,
) -> np.ndarray:
    """Non-decreasing, [lower, upper]-bounded smoothing of a noisy ECDF (Eq. 3).

    ``values``: the noisy ECDF at thresholds 0..N-1 (use lower=0, upper=n for
    counts).  ``p``: 1 or 2.  ``space``: "leaf" or "tree" (see the module
    docstring).  ``subset``: sorted threshold indices B (default: all); the
    result has one value per index of B.  ``tol``: dual gradient tolerance of
    the p=2 tree solver (largest allowed constraint violation, relative to
    upper - lower).
    """
    arr_all = _values(values)
    if p not in (1, 2):
        raise PrivacyParameterError(f"p must be 1 or 2, got {p!r}")
    if space not in ("leaf", "tree"):
        raise PrivacyParameterError(f"space must be 'leaf' or 'tree', got {space!r}")
    lower, upper = float(lower), float(upper)
    if not lower < upper:
        raise PrivacyParameterError(f"need lower < upper, got [{lower}, {upper}]")
    if subset is None:
        rows = np.arange(arr_all.size)
    else:
        rows = np.asarray(subset, dtype=np.int64)
        if rows.ndim != 1 or rows.size == 0:
            raise EmptyDataError("subset must be a non-empty 1-D array of indices")
        if rows.min() < 0 or rows.max() >= arr_all.size or np.any(np.diff(rows) <= 0):
            raise InvalidDataError("subset must hold strictly increasing indices into values")
    arr = arr_all[rows]
    if space == "leaf":
        if p == 2:
            return isotonic_bounded(arr, lower, upper)
        return _l1_isotonic(arr, lower, upper)
    if p == 1:
        out, _ = _tree_l1(arr, rows, arr_all.size, lower, upper)
    else:
        out, _ = _tree_l2(arr, rows, arr_all.size, lower, upper, tol)
    return np.maximum.accumulate(np.clip(out, lower, upper))
