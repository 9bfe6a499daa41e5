"""Algorithm 1 of Bell, Bellet, Gascon and Kulkarni: locally private U-statistics ([BBGK20, Sec. 3]).

What it does
    Each user quantizes their input into one of ``K`` cells (``k``
    equal-width bins per coordinate, or the exact value on a known discrete
    domain) and sends one k-ary randomized response (Eq. 9) with
    ``beta = K / (K + e^eps - 1)``.  The aggregator evaluates the unbiased
    kernel f_A(R1, R2) = (1 - beta)^-2 (e_R1 - b)^T A (e_R2 - b),
    b = (beta/K) 1, on all pairs of reports: a U-statistic unbiased for the
    U-statistic of the quantized data (App. A.1, Lemma 1), computed from the
    histogram of reports in O(K^2) time (O(K) for AUC), never from n^2 pairs.

    The quantized kernel matrix ``A`` follows App. A.2 (``"midpoint"``,
    Eq. 14, or ``"average"``, Eq. 15).  Named kernels have closed forms:
    ``gini`` (Eq. 4), ``kendall`` (tau-a, Eq. 6) and ``auc`` (a two-sample
    statistic with public labels, as in Sec. 4); a Python callable
    ``f(x, y)`` over arrays of points is accepted too, and symmetrized.  The
    kernels, the two quantizations and the AUC's estimate: ``docs/ldp.md``,
    "Locally private U-statistics, Algorithm 1".

Security model
    Local differential privacy: each user's single report is an
    epsilon-LDP function of their input (k-RR, Theorem 2). The aggregator
    is untrusted. Quantization bounds, ``k`` and the domain are public
    parameters that every entry point requires explicitly (no default from
    the data: :func:`data_bounds` would leak through them). In
    :func:`ldp_ustatistic` the randomization uses the OS CSPRNG through
    :class:`pairwise.dp.mechanisms.KaryRandomizedResponse`.
    :func:`simulate_ldp_ustatistic` takes a seeded generator and is for
    experiments only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pairwise.dp.mechanisms import KaryRandomizedResponse

from .errors import LDPDataError, LDPParameterError, ReportError, UnknownKernel

__all__ = [
    "KERNELS",
    "Quantizer",
    "QuantizedUStatistic",
    "DISCRETE_MAX_CELLS",
    "from_domains",
    "data_bounds",
    "ldp_ustatistic",
    "simulate_ldp_ustatistic",
    "exact_ustatistic",
    "exact_auc",
    "theorem1_variance_bound",
]

#: Names of the kernels with closed-form quantized matrices.
KERNELS = ("gini", "kendall", "auc")

#: Largest number of cells for which a dense K x K kernel matrix is built.
MAX_DENSE_CELLS = 8192

Kernel = str | Callable[[np.ndarray, np.ndarray], np.ndarray]


# --------------------------------------------------------------------------- quantization


@dataclass(frozen=True)
class _Axis:
    """Quantization of one coordinate: uniform bins on [lower, upper] or a discrete domain."""

    lower: float
    upper: float
    bins: int
    levels: np.ndarray | None  # sorted distinct values, for a discrete domain

    @property
    def width(self) -> float:
        return 0.0 if self.levels is not None else (self.upper - self.lower) / self.bins

    def representatives(self) -> np.ndarray:
        if self.levels is not None:
            return self.levels.astype(np.float64)
        return self.lower + (np.arange(self.bins) + 0.5) * self.width

    def encode(self, x: np.ndarray, name: str) -> np.ndarray:
        if self.levels is not None:
            # Each owner maps its value to the nearest declared level (ties to the lower one), so a value
            # outside the domain is clamped to an end level: no data-dependent error, nothing leaks.
            hi = np.clip(np.searchsorted(self.levels, x), 0, self.levels.size - 1)
            lo = np.clip(hi - 1, 0, self.levels.size - 1)
            take_lo = np.abs(x - self.levels[lo]) <= np.abs(self.levels[hi] - x)
            return np.where(take_lo, lo, hi).astype(np.int64)
        # Simple rounding to the nearest bin centre = floor on the bin grid;
        # values outside [lower, upper] are clipped to the end bins.
        t = np.floor((x - self.lower) / (self.upper - self.lower) * self.bins)
        return np.clip(t, 0, self.bins - 1).astype(np.int64)

    def subgrid(self, g: int, closed: bool) -> np.ndarray:
        """``(bins, g)`` points per bin: endpoints included if ``closed``, else sub-centres."""
        if self.levels is not None:
            return np.repeat(self.levels.astype(np.float64)[:, None], 1, axis=1)
        w = self.width
        if closed:
            frac = np.linspace(0.0, 1.0, g)
        else:
            frac = (np.arange(g) + 0.5) / g
        return self.lower + (np.arange(self.bins)[:, None] + frac[None, :]) * w


class Quantizer:
    """The quantization scheme pi of Algorithm 1: point -> cell in [0, K).

    Build with :meth:`uniform` (``k`` equal-width bins per coordinate on
    public bounds, simple rounding, values outside clamped to the end bins)
    or :meth:`discrete` (a known finite domain per coordinate, e.g. ratings
    1..5: no quantization; a value not in the domain goes to the nearest
    level, so values outside are clamped). Multi-dimensional cells are
    numbered in row-major order.
    """

    def __init__(self, axes: Sequence[_Axis]):
        if not axes:
            raise LDPParameterError("a quantizer needs at least one coordinate")
        self._axes = tuple(axes)
        self.shape = tuple(a.bins for a in self._axes)
        self.cells = int(np.prod(self.shape))

    @property
    def dim(self) -> int:
        return len(self._axes)

    @property
    def axes(self) -> tuple[_Axis, ...]:
        return self._axes

    @property
    def is_discrete(self) -> bool:
        return all(a.levels is not None for a in self._axes)

    @classmethod
    def uniform(cls, lower: Sequence[float] | float, upper: Sequence[float] | float, k: int) -> Quantizer:
        """``k`` equal bins per coordinate on [lower, upper] (scalars or one per coordinate)."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise LDPParameterError(f"number of bins k must be an integer >= 1, got {k!r}")
        lo = np.atleast_1d(np.asarray(lower, dtype=np.float64))
        hi = np.atleast_1d(np.asarray(upper, dtype=np.float64))
        if lo.shape != hi.shape:
            raise LDPParameterError("lower and upper bounds must have the same number of coordinates")
        axes = []
        for j, (a, b) in enumerate(zip(lo, hi)):
            if not (math.isfinite(a) and math.isfinite(b)) or not a < b:
                raise LDPParameterError(
                    f"quantization bounds of coordinate {j} must be finite with lower < upper, got [{a}, {b}]"
                )
            axes.append(_Axis(float(a), float(b), int(k), None))
        return cls(axes)

    @classmethod
    def discrete(cls, levels: Sequence[Sequence[float]] | Sequence[float]) -> Quantizer:
        """A known finite domain: ``levels`` per coordinate (one list for 1-d data)."""
        if len(levels) and np.ndim(levels[0]) == 0:
            levels = [levels]  # type: ignore[list-item]
        axes = []
        for j, lev in enumerate(levels):
            arr = np.unique(np.asarray(lev, dtype=np.float64))
            if arr.size == 0 or not np.isfinite(arr).all():
                raise LDPParameterError(f"domain of coordinate {j} must be a non-empty list of finite values")
            axes.append(_Axis(float(arr[0]), float(arr[-1]), int(arr.size), arr))
        return cls(axes)

    def encode(self, data: np.ndarray) -> np.ndarray:
        """Cells of the points of ``data`` (shape ``(n,)`` for 1-d, ``(n, dim)`` otherwise)."""
        x = _as_points(data, self.dim)
        idx = np.zeros(x.shape[0], dtype=np.int64)
        for j, ax in enumerate(self._axes):
            idx = idx * ax.bins + ax.encode(x[:, j], f"coordinate {j}")
        return idx


def _as_points(data: np.ndarray, dim: int) -> np.ndarray:
    x = np.asarray(data, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] != dim:
        raise LDPDataError(f"expected data of shape (n,) or (n, {dim}), got {np.shape(data)}")
    if x.shape[0] == 0:
        raise LDPDataError("no data points: give at least one row")
    if not np.isfinite(x).all():
        i = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        raise LDPDataError(f"data point at row {i + 1} is not finite")
    return x


def data_bounds(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-coordinate [min, max] of the data, widened if degenerate.

    NOT a privacy parameter: bounds computed from the data leak through the
    quantization, so no entry point uses this as a default. It remains for
    experiments on public synthetic data, which must call it explicitly.
    """
    x = np.asarray(data, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    lo = x.min(axis=0)
    hi = x.max(axis=0)
    same = hi <= lo
    hi = np.where(same, lo + 1.0, hi)
    # Make the maximum fall inside the last bin (floor on a half-open grid).
    hi = np.nextafter(hi, np.inf)
    return lo, hi


# --------------------------------------------------------------------------- kernel matrices


def _sign_matrix(ax: _Axis, mode: str) -> np.ndarray:
    r = ax.representatives()
    return np.sign(r[:, None] - r[None, :])  # 0 on the diagonal in both modes


def _gini_matrix(ax: _Axis, mode: str) -> np.ndarray:
    r = ax.representatives()
    a = np.abs(r[:, None] - r[None, :])
    if ax.levels is None:
        # Same bin: |x - y| ranges over [0, w] (midpoint w/2); mean of |X - Y|
        # for X, Y uniform on one bin is w/3. Other pairs: both give |c_a - c_b|.
        np.fill_diagonal(a, ax.width / 2.0 if mode == "midpoint" else ax.width / 3.0)
    return a


def _auc_matrix(ax: _Axis) -> np.ndarray:
    r = ax.representatives()
    return (r[:, None] > r[None, :]) + 0.5 * (r[:, None] == r[None, :])


def _callable_matrix(f: Callable, q: Quantizer, mode: str, grid: int) -> np.ndarray:
    if q.cells > 1024:
        raise LDPParameterError(f"a callable kernel on {q.cells} cells is too large to tabulate; use <= 1024 cells")
    # Points inside each cell: the product of the per-axis sub-grids of its bins.
    per_axis = [ax.subgrid(grid, closed=(mode == "midpoint")) for ax in q.axes]
    g = [p.shape[1] for p in per_axis]
    cell_idx = np.array(np.unravel_index(np.arange(q.cells), q.shape)).T  # (K, dim)
    mesh = np.meshgrid(*[np.arange(s) for s in g], indexing="ij")
    pts = np.stack([per_axis[j][cell_idx[:, j]][:, mesh[j].ravel()] for j in range(q.dim)], axis=-1)  # (K, m, dim)
    m = pts.shape[1]
    K = q.cells
    a = np.empty((K, K))
    xi = np.repeat(np.arange(m), m)
    yi = np.tile(np.arange(m), m)
    for u in range(K):
        x = np.broadcast_to(pts[u][xi], (K, m * m, q.dim)).reshape(-1, q.dim)
        y = pts[:, yi, :].reshape(-1, q.dim)
        if q.dim == 1:
            x, y = x[:, 0], y[:, 0]
        vals = _call_kernel(f, x, y).reshape(K, m * m)
        if mode == "midpoint":
            a[u] = (vals.max(axis=1) + vals.min(axis=1)) / 2.0
        else:
            a[u] = vals.mean(axis=1)
    return (a + a.T) / 2.0


def _call_kernel(f: Callable, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    try:
        out = np.asarray(f(x, y), dtype=np.float64)
    except Exception:  # noqa: BLE001 - fall back to a scalar kernel
        out = None
    if out is None or out.shape != (x.shape[0],):
        out = np.array([float(f(a, b)) for a, b in zip(x, y)], dtype=np.float64)
    if not np.isfinite(out).all():
        raise LDPParameterError(
            "the kernel returned a non-finite value (NaN or inf) on the quantization grid; "
            "it must be finite on the whole quantization domain"
        )
    return out


# --------------------------------------------------------------------------- the protocol


class QuantizedUStatistic:
    """Algorithm 1 for one kernel, quantizer and privacy budget.

    Users call :meth:`encode` then :meth:`randomize` (CSPRNG). The
    aggregator calls :meth:`estimate` (one sample) or
    :meth:`estimate_two_sample` (AUC with public labels).
    :meth:`simulate_randomize` is the seeded variant for experiments.
    """

    def __init__(
        self,
        kernel: Kernel,
        quantizer: Quantizer,
        epsilon: float,
        quantized_kernel: str = "midpoint",
        grid: int = 9,
    ):
        if quantized_kernel not in ("midpoint", "average"):
            raise LDPParameterError(
                f"quantized_kernel must be 'midpoint' (Eq. 14) or 'average' (Eq. 15), got {quantized_kernel!r}"
            )
        self.quantizer = quantizer
        self.kernel = kernel
        self.mode = quantized_kernel
        self.cells = quantizer.cells
        self.mechanism = KaryRandomizedResponse(self.cells, epsilon)
        self.epsilon = float(epsilon)
        self.beta = float(self.mechanism.beta)
        expected = self.cells / (self.cells + math.expm1(self.epsilon))
        if not math.isclose(self.beta, expected, rel_tol=1e-9):
            raise RuntimeError(  # pragma: no cover - guards the dp interface
                f"k-RR beta {self.beta} differs from Eq. (9)'s K/(K+e^eps-1) = {expected}"
            )
        self.two_sample = kernel == "auc"
        if isinstance(kernel, str):
            if kernel not in KERNELS:
                raise UnknownKernel(f"unknown kernel {kernel!r}; named kernels are {', '.join(KERNELS)}")
            want_dim = 2 if kernel == "kendall" else 1
            if quantizer.dim != want_dim:
                raise LDPParameterError(f"kernel {kernel!r} needs {want_dim}-d data, quantizer has {quantizer.dim}")
            self._matrix = None  # built lazily; AUC never needs it
        elif callable(kernel):
            self._matrix = None
        else:
            raise LDPParameterError("kernel must be a name among gini/kendall/auc or a callable f(x, y)")
        self._grid = int(grid)
        if self.cells > MAX_DENSE_CELLS and not self.two_sample:
            raise LDPParameterError(
                f"{self.cells} cells is too many for a dense {self.cells}x{self.cells} kernel "
                f"matrix; use at most {MAX_DENSE_CELLS} cells"
            )

    # ----- kernel matrix A (App. A.2)
    @property
    def matrix(self) -> np.ndarray:
        """The quantized kernel matrix A (K x K), Eq. (14) or (15)."""
        if self._matrix is None:
            q, k = self.quantizer, self.kernel
            if self.cells > MAX_DENSE_CELLS:
                raise LDPParameterError(f"{self.cells} cells: the dense kernel matrix is too large")
            if k == "gini":
                self._matrix = _gini_matrix(q.axes[0], self.mode)
            elif k == "auc":
                self._matrix = _auc_matrix(q.axes[0])
            elif k == "kendall":
                s1 = _sign_matrix(q.axes[0], self.mode)
                s2 = _sign_matrix(q.axes[1], self.mode)
                self._matrix = np.kron(s1, s2)
            else:
                self._matrix = _callable_matrix(k, q, self.mode, self._grid)
        return self._matrix

    # ----- user side
    def encode(self, data: np.ndarray) -> np.ndarray:
        """Quantized cells pi(x_i) (Algorithm 1, line 2)."""
        return self.quantizer.encode(data)

    def randomize(self, cells: np.ndarray) -> np.ndarray:
        """k-RR reports (Algorithm 1, line 3, Eq. 9) from the OS CSPRNG."""
        return np.asarray(self.mechanism.randomize_array(np.asarray(cells, dtype=np.int64)), dtype=np.int64)

    def simulate_randomize(self, cells: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Simulation only: k-RR reports from a seeded generator."""
        return np.asarray(self.mechanism.simulate(np.asarray(cells, dtype=np.int64), rng), dtype=np.int64)

    # ----- aggregator side
    def _counts(self, reports: np.ndarray) -> np.ndarray:
        r = np.asarray(reports)
        if r.ndim != 1 or r.size == 0:
            raise ReportError("reports must be a non-empty 1-d array of cells")
        if r.min() < 0 or r.max() >= self.cells:
            raise ReportError(f"reports must be cells in [0, {self.cells})")
        return np.bincount(r.astype(np.int64), minlength=self.cells).astype(np.float64)

    def estimate(self, reports: np.ndarray) -> float:
        """Unbiased estimate of the U-statistic from one-sample reports (Algorithm 1, line 6).

        Sum over i < j of (1-beta)^-2 z_i^T A z_j with z_i = e_{R_i} - b,
        computed as (s^T A s - sum_i z_i^T A z_i) / 2 with s = c - n b.
        """
        if self.two_sample:
            raise LDPParameterError("the AUC kernel is two-sample: use estimate_two_sample(pos, neg)")
        c = self._counts(reports)
        n = c.sum()
        if n < 2:
            raise ReportError(f"need at least two reports to estimate a U-statistic over pairs, got {int(n)}")
        a = self.matrix
        a = (a + a.T) / 2.0
        b = self.beta / self.cells
        s = c - n * b
        ab = a.sum(axis=1) * b  # (A b)_r
        bab = b * ab.sum()
        # (e_r - b)^T A (e_r - b) = A_rr - 2 (A b)_r + b^T A b  (A symmetric)
        diag_terms = np.diag(a) - 2.0 * ab + bab
        pair_sum = (s @ a @ s - c @ diag_terms) / 2.0
        return float(pair_sum / (1.0 - self.beta) ** 2 / (n * (n - 1) / 2.0))

    def estimate_two_sample(self, reports_pos: np.ndarray, reports_neg: np.ndarray) -> float:
        """Unbiased two-sample estimate (AUC): (1-beta)^-2 (c+ - n+ b)^T A (c- - n- b) / (n+ n-)."""
        cp = self._counts(reports_pos)
        cn = self._counts(reports_neg)
        npos, nneg = cp.sum(), cn.sum()
        b = self.beta / self.cells
        u = cp - npos * b
        w = cn - nneg * b
        if self.kernel == "auc":
            value = _greater_form(u, w)
        else:
            value = float(u @ self.matrix @ w)
        return float(value / (1.0 - self.beta) ** 2 / (npos * nneg))

    # ----- non-private references on the quantized data
    def exact_quantized(self, cells: np.ndarray) -> float:
        """The U-statistic of the quantized data with kernel A (what :meth:`estimate` is unbiased for)."""
        c = np.bincount(np.asarray(cells, dtype=np.int64), minlength=self.cells).astype(np.float64)
        n = c.sum()
        a = (self.matrix + self.matrix.T) / 2.0
        return float((c @ a @ c - c @ np.diag(a)) / (n * (n - 1)))

    def exact_quantized_two_sample(self, cells_pos: np.ndarray, cells_neg: np.ndarray) -> float:
        cp = np.bincount(np.asarray(cells_pos, dtype=np.int64), minlength=self.cells).astype(np.float64)
        cn = np.bincount(np.asarray(cells_neg, dtype=np.int64), minlength=self.cells).astype(np.float64)
        if self.kernel == "auc":
            v = _greater_form(cp, cn)
        else:
            v = float(cp @ self.matrix @ cn)
        return float(v / (cp.sum() * cn.sum()))


def _greater_form(u: np.ndarray, w: np.ndarray) -> float:
    """u^T A w for A_ab = [a > b] + [a = b]/2, in O(K) with a prefix sum."""
    below = np.concatenate(([0.0], np.cumsum(w)[:-1]))  # sum_{b < a} w_b
    return float(u @ below + 0.5 * (u @ w))


def theorem1_variance_bound(n: int, beta: float) -> float:
    """Theorem 1: Var <= 1/(n (1-beta)^2) + (1+beta)^2 / (2 n (n-1) (1-beta)^4), kernels in [0, 1]."""
    return 1.0 / (n * (1 - beta) ** 2) + (1 + beta) ** 2 / (2 * n * (n - 1) * (1 - beta) ** 4)


# --------------------------------------------------------------------------- entry points

#: Largest discrete grid (product of the columns' grid sizes) Algorithm 1 uses as its cells without quantizing.
DISCRETE_MAX_CELLS = 8192


def from_domains(
    kernel: str, domains, epsilon: float, *, k: int = 8, discrete: bool = False, quantized_kernel: str = "midpoint"
) -> tuple[QuantizedUStatistic, bool]:
    """Algorithm 1 on public domains (:class:`pairwise.dp.bounds.PublicDomain`, one per coordinate).

    The cells are the domain's grid lower + k 10^-D itself when ``discrete``
    (the default for kendall when that grid has at most
    :data:`DISCRETE_MAX_CELLS` cells, e.g. ratings), else ``k`` equal bins per
    coordinate on [lower, upper].  Returns the protocol (validated: epsilon,
    kernel, cells) and whether it is discrete.  Public parameters only.
    """
    sizes = [d.span + 1 for d in domains]
    small = bool(np.prod(sizes, dtype=float) <= DISCRETE_MAX_CELLS)
    discrete = bool(discrete) or (kernel == "kendall" and small)
    if discrete:
        if not small:
            raise LDPParameterError(
                f"the discrete grid has {' x '.join(map(str, sizes))} cells (more than "
                f"{DISCRETE_MAX_CELLS}): lower --decimals, or quantize with --k instead of --discrete"
            )
        quant = Quantizer.discrete([(d.lower + np.arange(d.span + 1) * d.step).tolist() for d in domains])
    else:
        quant = Quantizer.uniform([d.lower for d in domains], [d.upper for d in domains], k)
    return QuantizedUStatistic(kernel, quant, epsilon, quantized_kernel), discrete


def _build(
    data: np.ndarray,
    kernel: Kernel,
    k: int | None,
    epsilon: float,
    bounds: tuple | None,
    levels: Sequence | None,
    quantized_kernel: str,
) -> QuantizedUStatistic:
    if levels is not None:
        q = Quantizer.discrete(levels)
    else:
        if k is None:
            raise LDPParameterError("give the number of bins k, or the discrete domain levels")
        if bounds is None:
            raise LDPParameterError(
                "give the public quantization bounds=(lower, upper) (fixed in advance, never the "
                "data's min/max), or the discrete domain levels"
            )
        q = Quantizer.uniform(bounds[0], bounds[1], k)
    return QuantizedUStatistic(kernel, q, epsilon, quantized_kernel)


def _run(proto: QuantizedUStatistic, data, labels, randomize) -> float:
    if proto.two_sample:
        if labels is None:
            raise LDPDataError("the AUC kernel needs public labels (0/1 per point)")
        lab = np.asarray(labels)
        x = np.asarray(data, dtype=np.float64)
        if lab.shape != (x.shape[0],):
            raise LDPDataError(f"labels must have one entry per data point ({x.shape[0]}), got {lab.shape}")
        if not np.isin(lab, (0, 1)).all():
            raise LDPDataError("labels must be 0 or 1")
        pos, neg = x[lab == 1], x[lab == 0]
        if pos.size == 0 or neg.size == 0:
            raise LDPDataError("AUC needs at least one positive and one negative point")
        return proto.estimate_two_sample(randomize(proto.encode(pos)), randomize(proto.encode(neg)))
    if labels is not None:
        raise LDPParameterError(f"labels are only used by the AUC kernel, not {proto.kernel!r}")
    return proto.estimate(randomize(proto.encode(data)))


def ldp_ustatistic(
    data: np.ndarray,
    kernel: Kernel,
    k: int | None,
    epsilon: float,
    *,
    bounds: tuple | None = None,
    levels: Sequence | None = None,
    labels: np.ndarray | None = None,
    quantized_kernel: str = "midpoint",
) -> float:
    """Run Algorithm 1 end to end with the OS CSPRNG and return the estimate.

    ``data``: shape ``(n,)`` (gini, auc, 1-d callables) or ``(n, 2)``
    (kendall). ``kernel``: a name in :data:`KERNELS` or a callable
    ``f(x, y)``. ``k``: bins per coordinate on the public
    ``bounds = (lower, upper)`` (required; scalars or one per coordinate);
    values outside are clamped to the end bins. Or give ``levels``, the
    known discrete domain (e.g. ``[[1,2,3,4,5], [1,2,3,4]]`` for two
    ratings), and ``k`` is ignored. ``labels``: 0/1 per point, public, for
    ``kernel="auc"``. The estimate is raw (unbiased): it can leave the
    kernel's range.
    """
    proto = _build(data, kernel, k, epsilon, bounds, levels, quantized_kernel)
    return _run(proto, data, labels, proto.randomize)


def simulate_ldp_ustatistic(
    data: np.ndarray,
    kernel: Kernel,
    k: int | None,
    epsilon: float,
    rng: np.random.Generator,
    *,
    bounds: tuple | None = None,
    levels: Sequence | None = None,
    labels: np.ndarray | None = None,
    quantized_kernel: str = "midpoint",
) -> float:
    """Simulation of :func:`ldp_ustatistic` with a seeded generator (experiments only)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator")
    proto = _build(data, kernel, k, epsilon, bounds, levels, quantized_kernel)
    return _run(proto, data, labels, lambda cells: proto.simulate_randomize(cells, rng))


# --------------------------------------------------------------------------- exact references


def exact_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Non-private AUC, P(s+ > s-) + P(s+ = s-)/2, in O(n log n)."""
    pos = np.asarray(pos, dtype=np.float64)
    neg = np.asarray(neg, dtype=np.float64)
    if pos.size == 0 or neg.size == 0:
        raise LDPDataError("AUC needs at least one positive and one negative point")
    s = np.sort(neg)
    lt = np.searchsorted(s, pos, side="left")
    le = np.searchsorted(s, pos, side="right")
    return float((lt.sum() + 0.5 * (le - lt).sum()) / (pos.size * neg.size))


def exact_ustatistic(data: np.ndarray, kernel: Kernel, labels: np.ndarray | None = None) -> float:
    """The non-private U-statistic (Eq. 2) of the raw data.

    gini: O(n log n) by sorting. kendall: tau-a over all pairs (chunked
    O(n^2)). auc: O(n log n) ranks (needs ``labels``). A callable: chunked
    O(n^2).
    """
    if kernel == "auc":
        if labels is None:
            raise LDPDataError("the AUC needs labels")
        x = np.asarray(data, dtype=np.float64)
        lab = np.asarray(labels)
        return exact_auc(x[lab == 1], x[lab == 0])
    if kernel == "gini":
        x = np.sort(np.asarray(data, dtype=np.float64).reshape(-1))
        n = x.size
        if n < 2:
            raise LDPDataError(f"need at least two points (a U-statistic averages over pairs), got {n}")
        coef = 2.0 * np.arange(n) - n + 1.0
        return float(2.0 * (coef @ x) / (n * (n - 1)))
    if kernel == "kendall":
        return _kendall_tau_a(_as_points(data, 2))
    if callable(kernel):
        x = np.asarray(data, dtype=np.float64)
        one_d = x.ndim == 1
        x = x.reshape(x.shape[0], -1)
        dim = x.shape[1]

        def f(p: np.ndarray, q: np.ndarray) -> np.ndarray:
            pp, qq = p.reshape(-1, dim), q.reshape(-1, dim)
            if one_d:
                pp, qq = pp[:, 0], qq[:, 0]
            return _call_kernel(kernel, pp, qq).reshape(p.shape[:-1])

        return _pairwise_mean(x, f)
    raise UnknownKernel(f"unknown kernel {kernel!r}")


def _kendall_tau_a(x: np.ndarray) -> float:
    """Kendall's tau-a, (C - D) / (n choose 2), in O(n log n).

    scipy's tau-b is (C - D) / sqrt((n0 - n1)(n0 - n2)), where n1 and n2
    count the pairs tied in each coordinate. We multiply that factor back.
    """
    import scipy.stats

    n = x.shape[0]
    if n < 2:
        raise LDPDataError(f"need at least two points (a U-statistic averages over pairs), got {n}")
    n0 = n * (n - 1) / 2.0
    ties = [float(sum(c * (c - 1) / 2.0 for c in np.unique(x[:, j], return_counts=True)[1])) for j in (0, 1)]
    denom = math.sqrt((n0 - ties[0]) * (n0 - ties[1]))
    if denom == 0.0:
        return 0.0  # one coordinate is constant: every pair is tied, C = D = 0
    tau_b = scipy.stats.kendalltau(x[:, 0], x[:, 1]).statistic
    return float(tau_b * denom / n0)


def _pairwise_mean(x: np.ndarray, f: Callable, chunk: int = 512) -> float:
    n = x.shape[0]
    if n < 2:
        raise LDPDataError(f"need at least two points (a U-statistic averages over pairs), got {n}")
    total = 0.0
    for start in range(0, n, chunk):
        blk = x[start : start + chunk]
        vals = f(
            np.broadcast_to(blk[:, None, :], (blk.shape[0], n, x.shape[1])),
            np.broadcast_to(x[None, :, :], (blk.shape[0], n, x.shape[1])),
        )
        rows = np.arange(start, start + blk.shape[0])
        mask = np.arange(n)[None, :] > rows[:, None]  # i < j only
        total += float((vals * mask).sum())
    return total / (n * (n - 1) / 2.0)
