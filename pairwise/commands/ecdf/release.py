"""The querier's part of ``pairwise ecdf run``, ``query`` and ``demo``: one release and its report.

Every release flag is checked (:func:`_validate_release_args`) before any
upload, budget charge or noise; :func:`_release_and_report` releases the ECDF
(and the ROC) and builds the JSON object whose keys
:mod:`pairwise.commands.ecdf` documents; :func:`_print_report` is its text form.

Security model: see :mod:`pairwise.protocols.ecdf.server`; what is not private
is labelled as such (:data:`pairwise.commands.ecdf.NOT_PRIVATE_KEYS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pairwise.protocols.transport import tls_from_args

if TYPE_CHECKING:
    import numpy as np

from ..bounds import NOT_PRIVATE, clamped_note
from ..options import warn

#: Progress bars (stderr; ``--progress``): clients whose keys every server has been sent, then the stages of
#: the release requests (m + 2 per request: prepared, started, one per server's result; see ecdf/querier.py).
UPLOAD_BAR = "upload to the servers"


def _release_bar(roc: bool) -> str:
    return "release: ECDF and ROC" if roc else "release: ECDF"


def _querier(args, servers):
    from pairwise.protocols.ecdf.client import ECDFQuerier

    return ECDFQuerier(
        servers,
        timeout=args.timeout,
        connect_timeout=getattr(args, "connect_timeout", 5.0),
        tls=tls_from_args(args),
        insecure=args.insecure,
    )


def _quantile_levels(text):
    from pairwise.dp.bounds import validate_quantile_levels

    if not text:
        return []
    try:
        qs = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--quantiles must be comma-separated numbers, got {text!r}") from None
    return validate_quantile_levels(qs)


def _validate_release_args(args, m: int, n_bits: int, roc: bool) -> list[float]:
    """Check every release parameter before any upload, budget charge or noise; returns the quantile levels."""
    from pairwise.protocols.ecdf.shares import MAX_GRID_BITS
    from pairwise.protocols.ecdf.wire import parse_epsilon

    parse_epsilon(args.epsilon, "--epsilon")
    if roc:
        parse_epsilon(args.epsilon / 2, "--epsilon / 2 (each class of the ROC)")
    qs = _quantile_levels(getattr(args, "quantiles", None))
    if not isinstance(n_bits, int) or not 1 <= n_bits <= 32:
        raise ValueError(f"--domain-bits must be an integer in [1, 32], got {n_bits!r}")
    g = args.grid_bits
    if g is not None and not 1 <= g <= min(n_bits, MAX_GRID_BITS):
        raise ValueError(f"--grid-bits must be in [1, {min(n_bits, MAX_GRID_BITS)}] (at most the domain bits), got {g}")
    if g is None and n_bits > MAX_GRID_BITS:
        raise ValueError(f"a {n_bits}-bit domain needs --grid-bits G <= {MAX_GRID_BITS} (thresholds per release)")
    rg, top = getattr(args, "roc_grid_bits", None), g or min(n_bits, MAX_GRID_BITS)
    if roc and rg is not None and not 1 <= rg <= top:
        raise ValueError(f"--roc-grid-bits must be in [1, {top}] (at most the ECDF's grid), got {rg}")
    if not isinstance(args.tolerate, int) or not 0 <= args.tolerate < m or (m == 2 and args.tolerate):
        raise ValueError(f"--tolerate must be in [0, m) (0 for two servers), got {args.tolerate}")
    return qs


@dataclass
class Reference:
    """The uploaded data's exact counts per bin of a 2^``grid_bits`` grid (not private: the reference columns
    of ``ecdf run``/``demo``): all clients, and positives/negatives with labels (None without)."""

    n: int
    grid_bits: int
    all: np.ndarray
    pos: np.ndarray | None = None
    neg: np.ndarray | None = None

    @classmethod
    def of(cls, values, labels, n_bits: int, grid_bits: int) -> Reference:
        import numpy as np

        x = np.asarray(values, dtype=np.int64) >> np.int64(n_bits - grid_bits)
        N = 1 << grid_bits
        if labels is None:
            return cls(int(x.size), grid_bits, np.bincount(x, minlength=N))
        y = np.asarray(labels).astype(np.int64)
        return cls(
            int(x.size),
            grid_bits,
            np.bincount(x, minlength=N),
            np.bincount(x[y == 1], minlength=N),
            np.bincount(x[y == 0], minlength=N),
        )


@dataclass(frozen=True)
class ReleaseInputs:
    """What :func:`_release_and_report` needs besides the querier, the dataset and the arguments.

    ``lo``/``hi``/``n_bits``: the public domain; ``values``/``labels``: the
    reference data (see :func:`_release_and_report`); ``upload_bytes``: the
    upload's bytes on the wire; ``pointwise``/``scheme``: the key scheme
    reported; ``qs``: quantile levels; ``roc``: release the ROC too (None:
    when labels are given).
    """

    lo: float | None
    hi: float | None
    n_bits: int
    values: Any = None
    labels: Any = None
    upload_bytes: int = 0
    pointwise: bool = False
    qs: Sequence[float] = ()
    roc: bool | None = None
    scheme: str | None = None


def _release_and_report(querier, dataset, inputs: ReleaseInputs, args, progress=None):
    """Release the ECDF (and the ROC if ``roc``, default: labels given); returns the JSON dict.

    ``inputs``: a :class:`ReleaseInputs`.  ``qs``: quantile levels, validated by the caller before anything was
    uploaded.  ``values`` (and ``labels``): the uploaded data, or its
    :class:`Reference` counts, for the not private reference columns
    (``ecdf run``/``demo``); None for ``ecdf query``, which knows only what
    the servers release.  ``lo``/``hi``: the public domain of the
    quantization (None: thresholds are domain points).
    ``progress(done, total)``: the stages of the release requests (one, or
    two with the ROC), as one run.
    """
    import numpy as np

    from pairwise.dp.ecdf import auc, inverse_ecdf

    values, labels, lo, hi, n_bits = inputs.values, inputs.labels, inputs.lo, inputs.hi, inputs.n_bits
    upload_bytes, pointwise, qs, roc, scheme = (
        inputs.upload_bytes,
        inputs.pointwise,
        inputs.qs,
        inputs.roc,
        inputs.scheme,
    )
    from pairwise.protocols.ecdf.client import roc_points
    from pairwise.protocols.ecdf.querier import progress_part
    from pairwise.protocols.ecdf.shares import bin_upper_edges, grid_points

    g = args.grid_bits or n_bits
    ref = values if isinstance(values, Reference) or values is None else Reference.of(values, labels, n_bits, g)
    roc = (labels is not None or (ref is not None and ref.pos is not None)) if roc is None else roc
    alpha = getattr(args, "alpha", 0.05)
    if roc:
        _check_budget(querier, dataset, 2 * args.epsilon)
    parts = 2 if roc else 1
    rel = querier.ecdf(
        dataset,
        args.epsilon,
        grid_bits=g,
        mechanism=args.mechanism,
        tolerate=args.tolerate,
        progress=progress_part(progress, 0, parts),
    )
    if lo is None:
        edges = grid_points(n_bits, g).astype(float)[rel.thresholds]
    else:
        assert hi is not None  # the domain is given as a pair (ReleaseInputs)
        edges = bin_upper_edges(lo, hi, n_bits, g)[rel.thresholds]
    out = {
        "thresholds": edges.tolist(),
        "dp": rel.ecdf.tolist(),
        "smoothed": rel.smoothed.tolist(),
        "epsilon": rel.epsilon,
        "delta": rel.delta,
        "n": rel.n,
        "servers": rel.servers,
        "mechanism": rel.mechanism,
        "noise": rel.noise,
        "scheme": scheme or ("pointwise" if pointwise else ("vdpf" if rel.servers == 2 else "mshare")),
        "grid_bits": g,
        "domain_bits": n_bits,
        "range": None if lo is None else [lo, hi],
        "theorem31_rmse": None if rel.mse_per_threshold is None else float(np.sqrt(rel.mse_per_threshold) / rel.n),
        "alpha": alpha,
        "interval_method": rel.interval_method(alpha),
    }
    iv, bd = rel.interval(alpha), rel.band(alpha)
    out["interval"] = None if iv is None else {"lower": iv[0].tolist(), "upper": iv[1].tolist()}
    out["band"] = None if bd is None else {"lower": bd[0].tolist(), "upper": bd[1].tolist()}
    if ref is not None:
        exact = np.cumsum(ref.all)[rel.thresholds].astype(float) / ref.n
        out.update(
            exact=exact.tolist(),
            max_abs_error=float(np.abs(rel.ecdf - exact).max()),
            max_abs_error_smoothed=float(np.abs(rel.smoothed - exact).max()),
        )
    detail = {"upload": upload_bytes, "querier": rel.bytes.get("querier", 0), "servers": rel.bytes.get("servers", 0)}
    if qs:
        qi = np.atleast_1d(rel.quantiles(qs))
        pos = np.searchsorted(rel.thresholds, qi)
        out["quantiles"] = {str(q): float(edges[p]) for q, p in zip(qs, pos)}
        qiv = rel.quantile_intervals(qs, alpha)  # grid indices = positions: the whole grid
        out["quantile_intervals"] = (
            None if qiv is None else {str(q): [float(edges[lo]), float(edges[hi])] for q, (lo, hi) in zip(qs, qiv)}
        )
        if ref is not None:
            ex = np.atleast_1d(np.asarray(inverse_ecdf(np.asarray(out["exact"]), qs)))
            out["quantiles_exact"] = {str(q): float(edges[i]) for q, i in zip(qs, ex)}
    if roc:
        rg = min(getattr(args, "roc_grid_bits", None) or g, g)  # the ROC's grid: at most the ECDF's
        r = querier.roc(
            dataset,
            args.epsilon,
            grid_bits=rg,
            mechanism=args.mechanism,
            tolerate=args.tolerate,
            progress=progress_part(progress, 1, parts),
            alpha=alpha,
        )
        out["roc"] = {
            "fpr": r.fpr.tolist(),
            "tpr": r.tpr.tolist(),
            "epsilon": r.epsilon,
            "delta": r.delta,
            "grid_bits": rg,
        }
        out.update(
            auc=r.auc,
            auc_interval=None if r.auc_interval is None else list(r.auc_interval),
            auc_interval_method=r.auc_interval_method,
            auc_smoothed=r.auc_smoothed,
        )
        if ref is not None and ref.pos is not None and ref.neg is not None:  # labelled reference: both classes
            k = 1 << (g - rg)  # the reference's bins merged into the ROC's
            f_ex, t_ex = roc_points(
                np.cumsum(ref.pos.reshape(-1, k).sum(1)).astype(float),
                np.cumsum(ref.neg.reshape(-1, k).sum(1)).astype(float),
            )
            out["roc"].update(fpr_exact=f_ex.tolist(), tpr_exact=t_ex.tolist())
            out["auc_exact"] = auc(f_ex, t_ex)
        detail["querier"] += r.positives.bytes.get("querier", 0)  # one release for both classes
        detail["servers"] += r.positives.bytes.get("servers", 0)
        out["epsilon_total"] = rel.epsilon + r.epsilon
    out["bytes_detail"] = detail
    out["bytes"] = int(sum(detail.values()))
    return out


def _check_budget(querier, dataset: str, need: float) -> None:
    """Refuse early if a server cannot afford ``need`` (ECDF + ROC), instead of failing after the first release."""
    from fractions import Fraction

    from pairwise.protocols.ecdf.wire import BudgetExceeded

    for st in querier.status(dataset):
        i = st["info"]
        left = Fraction(i["left"])  # the least over the dataset's, its owners' and the server's budgets
        if left < Fraction(str(need)):
            raise BudgetExceeded(
                f"server {st['server_id']}: dataset {dataset!r} has {float(left):g} of its privacy "
                f"budget left (dataset, data owner and server budgets); the ECDF and the ROC "
                f"need {need:g}"
            )


def _print_report(out: dict, title: str, compare: bool = False) -> None:
    """The text form of ``out``; the clamped count is a stdout line with ``compare``, else a stderr warning
    when it is not zero (as ``ustat`` and ``ldp`` do)."""
    import numpy as np

    print(title)
    print(
        f"  servers {out['servers']} ({out['scheme']} keys, {out['noise']} noise), n = {out['n']}, "
        f"grid 2^{out['grid_bits']} thresholds, {out['mechanism']} tree, "
        f"({out['epsilon']:g}, {out['delta']:.2g})-DP"
    )
    has_exact = "exact" in out  # ecdf query never sees the data
    th, dp_, sm = (np.asarray(out[k]) for k in ("thresholds", "dp", "smoothed"))
    ex = np.asarray(out["exact"]) if has_exact else None
    rows = np.unique(np.linspace(0, th.size - 1, min(th.size, 11)).round().astype(int))
    iv = out.get("interval")
    pct = f"{100 * (1 - out.get('alpha', 0.05)):g}%"
    print(
        f"  {'threshold':>12}"
        + (f" {'exact*':>8}" if has_exact else "")
        + f" {'DP':>8} {'smoothed':>9}"
        + (f"  {pct + ' interval':>18}" if iv else "")
        + ("   (* not private)" if has_exact else "")
    )
    for i in rows:
        print(
            f"  {th[i]:12.4g}"
            + (f" {ex[i]:8.4f}" if has_exact else "")
            + f" {dp_[i]:8.4f} {sm[i]:9.4f}"
            + (f"  [{iv['lower'][i]:.4f}, {iv['upper'][i]:.4f}]" if iv else "")
        )
    print(f"  interval: {out.get('interval_method', 'not computed')}")
    rmse = f"Theorem 3.1 RMSE {out['theorem31_rmse']:.4f}" if out.get("theorem31_rmse") else ""
    if has_exact:
        print(
            f"  max |DP - exact| = {out['max_abs_error']:.4f}, smoothed {out['max_abs_error_smoothed']:.4f} "
            f"{NOT_PRIVATE}" + (f"; {rmse}" if rmse else "")
        )
    elif rmse:
        print(f"  {rmse}")
    print("  DP: raw noisy ECDF (unbiased, may leave [0, 1]); smoothed: Eq. (3), non-decreasing in [0, 1]")
    if "quantiles" in out:
        for q, v in out["quantiles"].items():
            qi = (out.get("quantile_intervals") or {}).get(q)
            print(
                f"  quantile {q}: DP {v:.4g}"
                + (f" {pct} [{qi[0]:.4g}, {qi[1]:.4g}]" if qi else "")
                + (f", exact {out['quantiles_exact'][q]:.4g} {NOT_PRIVATE}" if "quantiles_exact" in out else "")
            )
    if "auc" in out:
        ai = out.get("auc_interval")
        print(
            f"  ROC: AUC DP {out['auc']:.4f}"
            + (f" {pct} [{ai[0]:.4f}, {ai[1]:.4f}]" if ai else " (no interval)")
            + (f", exact {out['auc_exact']:.4f} {NOT_PRIVATE}" if "auc_exact" in out else "")
            + f" (epsilon {out['roc']['epsilon']:g}; total spent {out['epsilon_total']:g})"
        )
        print(
            f"  AUC: plug-in pair count of the raw releases (unbiased numerator); interval: "
            f"{out['auc_interval_method']}; the smoothed curve's area {out['auc_smoothed']:.4f} is biased "
            "towards 1/2 (docs/ecdf-intervals.md)"
        )
    if "clamped" in out and (compare or out["clamped"]):
        from pairwise.dp.bounds import PublicDomain

        note = clamped_note(out["clamped"], [PublicDomain(*out["range"])])
        if compare:
            print(f"  clamped: {note}")
        else:
            warn(note)
    d = out["bytes_detail"]
    print(f"  bytes: {out['bytes']} (uploads {d['upload']}, querier {d['querier']}, between servers {d['servers']})")
