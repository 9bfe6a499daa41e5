"""Public domains and fixed-point data of the 2PC U-statistic protocol (each owner's first step).

What it does
    :func:`prepare_data` maps each private column to unsigned integers on its
    public grid: every owner clamps its value into the public domain
    [lower, upper] and rounds it to lower + k 10^-decimals
    (:mod:`pairwise.dp.bounds`), so the lower bound becomes 0.  The kernel's
    public range, the circuit width and the scale follow from the domain
    alone, never from the data.  :func:`natural_range`, the exact values (not
    private, for evaluation) and the packing of each pair's circuit inputs
    live here too.

Security model
    The domain is public; the prepared values are each owner's private input.
    ``exact`` values computed here are not private and are labelled so
    wherever they are published.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pairwise.circuits.kernels import pack_pair

from .config import STATISTICS, UStatError
from .public import circuit_width, domains_of, word_width
from .stats import u_statistic

__all__ = ["PreparedData", "prepare_data", "natural_range"]

# the public side lives in .public (shared with pairwise.protocols.collect); the old private names stay
_domains = domains_of
_width = word_width


@dataclass(frozen=True)
class PreparedData:
    """Integer (fixed-point) data ready for the circuit, with its public domain.

    Everything but ``x``, ``y`` and ``clamped`` is a function of public
    inputs (the bounds, the decimals, ``bits``).
    """

    statistic: str
    x: np.ndarray  # int64 grid indices k = round((clamp(v) - lower) 10^D), so the public lower bound is 0
    y: np.ndarray | None  # second column (kendall) or negatives (auc)
    bits: int
    scale: float  # natural units per integer step (gini)
    range_: int  # public range R of the kernel in circuit units
    domains: tuple = ()  # PublicDomain per private column (kendall: 2)
    clamped: int = 0  # values moved into the public domain: private, a diagnostic only
    kernel: object = None  # a declared kernel (KernelSpec), or None for gini/kendall/auc
    table: np.ndarray | None = None  # the declared kernel on the whole public grid (small grids): public
    kernel_check: str | None = None  # how the kernel's declared range was verified


def _fixed_point(values, domain, name: str) -> tuple[np.ndarray, int]:
    """Each owner clamps its value into the public domain and rounds it to the public grid."""
    from pairwise.dp.bounds import to_fixed_point

    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise UStatError(f"column {name}: non-finite values")
    return to_fixed_point(v, domain)


def prepare_data(
    statistic: str,
    x,
    y=None,
    labels=None,
    bits: int | None = None,
    *,
    lower=None,
    upper=None,
    decimals=None,
    kernel=None,
) -> PreparedData:
    """Map real data to unsigned fixed-point integers on the public grid.

    gini: x values; kendall: x and y columns (``lower``/``upper``/``decimals``
    one value per column); auc: scores x and 0/1 labels (public; positives
    garble, negatives evaluate). Every value is clamped into
    [lower, upper] and rounded to lower + k 10^-decimals by its owner
    (``decimals`` default: :func:`pairwise.dp.bounds.default_decimals`). The
    circuit width is the smallest of 8/16/32/64 bits holding the public span,
    or ``bits`` if given (it must hold the span). Sensitivity, width and
    scale are functions of the public bounds only.  ``kernel`` (a
    :class:`pairwise.circuits.kernel_spec.KernelSpec`, one column ``x``): its
    declared range is checked against its circuit here, before any noise
    (:func:`pairwise.circuits.kernel_spec.verify_kernel`).
    """
    if kernel is None and statistic not in STATISTICS:
        raise UStatError(f"unknown statistic {statistic!r}; choose from {STATISTICS}")
    doms = _domains(statistic, lower, upper, decimals)
    width = circuit_width(doms, bits)
    if kernel is not None:
        return _prepare_kernel(kernel, x, y, labels, doms, width)
    return _prepare(statistic, x, y, labels, doms, width)


def _prepare_kernel(spec, x, y, labels, doms, width: int) -> PreparedData:
    from pairwise.circuits.kernel_spec import KernelRangeError, verify_kernel

    if y is not None or labels is not None:
        raise UStatError(f"kernel {spec.name!r} is a one-sample kernel of one column: no y or labels")
    d = doms[0]
    try:
        (lo, hi), table, how = verify_kernel(spec, width, d.span)
    except KernelRangeError as exc:
        raise UStatError(str(exc)) from None
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise UStatError("need at least 2 data points")
    xi, moved = _fixed_point(x, d, "x")
    return PreparedData(spec.name, xi, None, width, d.step, hi - lo, doms, moved, spec, table, how)


def _prepare(statistic: str, x, y, labels, doms, width: int) -> PreparedData:
    if statistic not in STATISTICS:
        raise UStatError(f"unknown statistic {statistic!r}; choose from {STATISTICS}")
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise UStatError("need at least 2 data points")
    if statistic == "gini":
        xi, moved = _fixed_point(x, doms[0], "x")
        d = doms[0]
        return PreparedData("gini", xi, None, width, d.step, d.span, doms, moved)
    if statistic == "kendall":
        if y is None:
            raise UStatError("kendall needs two columns")
        y = np.asarray(y, dtype=np.float64)
        if y.shape != x.shape:
            raise UStatError("kendall columns must have the same length")
        xi, mx = _fixed_point(x, doms[0], "x")
        yi, my = _fixed_point(y, doms[1], "y")
        return PreparedData("kendall", xi, yi, width, 1.0, 2, doms, mx + my)
    if labels is None:
        raise UStatError("auc needs a 0/1 label column")
    lab = np.asarray(labels)
    if lab.shape != x.shape or not np.isin(lab, (0, 1)).all():
        raise UStatError("auc labels must be 0/1 and as long as the scores")
    si, moved = _fixed_point(x, doms[0], "score")
    pos, neg = si[lab == 1], si[lab == 0]
    if pos.size == 0 or neg.size == 0:
        raise UStatError("auc needs at least one positive and one negative example")
    return PreparedData("auc", pos, neg, width, 1.0, 2, doms, moved)


def _pair_inputs(pd: PreparedData, pairs: np.ndarray) -> tuple[list[int] | np.ndarray, list[int] | np.ndarray]:
    if pd.statistic == "kendall":
        if pd.bits > 31:  # packed words above 62 bits: Python ints
            gx = [pack_pair(int(pd.x[i]), int(pd.y[i]), pd.bits) for i in pairs[:, 0]]
            ey = [pack_pair(int(pd.x[j]), int(pd.y[j]), pd.bits) for j in pairs[:, 1]]
            return gx, ey
        # pack_pair over whole arrays (x low, y high), after pack_pair's own range check on the extremes.
        xs, ys = np.asarray(pd.x, dtype=np.int64), np.asarray(pd.y, dtype=np.int64)
        if xs.size:
            lo, hi = int(min(xs.min(), ys.min())), int(max(xs.max(), ys.max()))
            pack_pair(lo, lo, pd.bits), pack_pair(hi, hi, pd.bits)
        packed = xs | (ys << pd.bits)
        return packed[pairs[:, 0]], packed[pairs[:, 1]]
    if pd.statistic == "auc":
        return pd.x[pairs[:, 0]], pd.y[pairs[:, 1]]
    return pd.x[pairs[:, 0]], pd.x[pairs[:, 1]]


def _exact_raw(statistic: str, x, y, labels, pd: PreparedData | None = None) -> float | None:
    """The U-statistic of the raw (unclamped, unrounded) data: not private, for evaluation only.

    A declared kernel is a circuit on the grid: its raw value is its value on the clamped grid data."""
    if pd is not None and pd.kernel is not None:
        return _exact(pd)
    x = np.asarray(x, dtype=np.float64)
    if statistic == "gini":
        return u_statistic("gini", x)
    if statistic == "kendall":
        return u_statistic("kendall", x, np.asarray(y, dtype=np.float64))
    lab = np.asarray(labels)
    return u_statistic("auc", x[lab == 1], x[lab == 0])


def kernel_factor(pd: PreparedData) -> float:
    """Natural units per kernel unit (circuit units before any fixed-point shift)."""
    if pd.kernel is not None:
        return pd.kernel.natural_factor(pd.scale)
    return {"gini": pd.scale, "kendall": 1.0, "auc": 0.5}[pd.statistic]


def natural_range(pd: PreparedData) -> tuple[float, float]:
    """The statistic's natural range: gini [0, upper - lower], kendall's tau-a [-1, 1], AUC [0, 1]; a declared
    kernel's range in natural units."""
    if pd.kernel is not None:
        lo, hi = pd.kernel.output_range(pd.domains[0].span)
        f = kernel_factor(pd)
        return lo * f, hi * f
    if pd.statistic == "gini":
        return 0.0, pd.domains[0].upper - pd.domains[0].lower
    return (-1.0, 1.0) if pd.statistic == "kendall" else (0.0, 1.0)


def _exact(pd: PreparedData) -> float | None:
    """The U-statistic of the clamped fixed-point data (what the estimate is unbiased for): not private.

    A declared kernel: from its table on the grid (mean over ordered pairs i != j), or by evaluating its
    circuit on every pair when n (n - 1) is small; None when neither fits."""
    if pd.kernel is not None:
        return _exact_kernel(pd)
    if pd.statistic == "gini":
        return u_statistic("gini", pd.x.astype(np.float64)) * pd.scale
    if pd.statistic == "kendall":
        return u_statistic("kendall", pd.x, pd.y)
    return u_statistic("auc", pd.x, pd.y)


def _exact_kernel(pd: PreparedData) -> float | None:
    from pairwise.circuits.ir import bits_to_ints
    from pairwise.circuits.kernel_spec import EXHAUSTIVE_LIMIT, _bits_of, kernel_circuit

    n = pd.x.size
    if pd.table is not None:
        t = pd.table.astype(np.float64)
        c = np.bincount(pd.x, minlength=t.shape[0]).astype(np.float64)
        total = float(c @ t @ c - c @ np.diag(t))
    elif n * (n - 1) <= EXHAUSTIVE_LIMIT:
        circuit, _ = kernel_circuit(pd.kernel, pd.bits)
        i, j = np.nonzero(~np.eye(n, dtype=bool))
        out = circuit.evaluate_bits([_bits_of(pd.x[i], pd.bits), _bits_of(pd.x[j], pd.bits)])[0]
        total = float(np.asarray(bits_to_ints(out, circuit.outputs[0].signed), dtype=np.float64).sum())
    else:
        return None
    return total / (n * (n - 1)) * kernel_factor(pd)


def kernel_sums_from_table(pd: PreparedData):
    """:class:`pairwise.protocols.ustat.stats.KernelSums` of a symmetric declared kernel (kernel units), from its
    grid table; None when there is no table or the kernel is not symmetric."""
    from .stats import KernelSums

    if pd.table is None or not pd.kernel.symmetric:
        return None
    t = pd.table.astype(np.float64)
    c = np.bincount(pd.x, minlength=t.shape[0]).astype(np.float64)
    rows = (t @ c)[pd.x]
    total_sq = float(c @ (t * t) @ c)
    return KernelSums(pd.x.size, pd.x.size, float(rows.sum()), total_sq, rows, rows.copy(), np.diag(t)[pd.x])
