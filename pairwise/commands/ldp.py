"""``pairwise ldp``: local-model and shuffle-model protocols on shipped or CSV data.

Commands
    ``auc`` (locally private AUC from hierarchical histograms, [BBGK20,
    Sec. 4 and App. B]), ``qmle`` (one-bit LDP quasi-MLE of tau-quantile
    regression, [OMH22]), ``shuffle-histogram`` (the shuffled-model histogram
    of [BC20, Figure 2]) and ``ustat`` ([BBGK20, Algorithm 1]: quantization
    and k-ary randomized response), each on a shipped dataset
    (``--builtin NAME``) or a CSV (``--data FILE.csv``).

Bounds: ``--lower L --upper U`` give the public domain of every private
column (one value per column, comma-separated).  Shipped datasets default to
the domains declared in ``protocols/data/domains.json``; ``--data`` needs the
flags.  Every user clamps its value into the public domain before
randomizing; nothing about the mechanism comes from the data.  Options follow
the shared vocabulary (:mod:`pairwise.commands.options`); the old spellings
still work for one release, with a warning on stderr.

By default each command prints one DP release, its interval (or why it has
none) and public parameters; ``--compare`` adds the evaluation aids computed
from the raw data (``exact``, ``exact_quantized``, ``max_error``: not
private), as ``pairwise ustat --compare`` does.  JSON keys (a public
interface): DP outputs (``estimate``, ``estimate_clamped`` and details
derived from the noisy reports only), public parameters, and what is not
private (``clamped``; with ``--compare`` the aids above).  Every command's
options, its default data and the meaning of every key: ``docs/cli.md``,
"pairwise ldp".

Security model: each command runs the whole protocol in one process, users
and server alike. Randomness comes from the OS CSPRNG. Every parameter is
checked before any user randomizes anything.
"""

from __future__ import annotations

import json

import numpy as np

from pairwise.protocols.datasets import DataError, dataset_path, load_csv

from .bounds import NOT_PRIVATE, add_bound_args, clamped_note, resolve_domains
from .intervals import add_alpha, interval_line
from .options import add_builtin, add_columns, add_compare, add_data, add_json, warn
from .options import epsilon as epsilon_type

DEFAULT_EPSILON = 2.0

#: JSON keys that hold DP outputs or post-processing of the noisy reports alone, per command.
DP_KEYS = {
    "auc": ("estimate", "estimate_clamped", "recursed_per_level", "discarded_per_level", "interval"),
    "qmle": ("estimate", "std_errors", "covariance", "loglik", "converged", "interval"),
    "shuffle-histogram": (
        "estimate",
        "estimate_clamped",
        "estimate_thresholded",
        "messages",
        "interval",
        "interval_clamped",
    ),
    "ustat": ("estimate", "estimate_clamped", "interval", "interval_clamped"),
}
#: JSON keys computed without noise: not private, for evaluation only. Every other key is a function of public
#: inputs and is identical on neighbouring datasets (tests/protocols/test_privacy_audit.py).
NOT_PRIVATE_KEYS = ("exact", "exact_quantized", "max_error", "clamped")
#: Not-private keys published only with ``--compare`` (evaluation aids computed from the raw data).
COMPARE_ONLY_KEYS = ("exact", "exact_quantized", "max_error")


def _add_compare(p) -> None:
    add_compare(p)


def _add_data_args(p, dataset: str | None) -> None:
    add_builtin(p, default=dataset, old=("--dataset",))
    add_data(
        p, what="read this CSV file (header row; needs --lower/--upper) instead of the shipped data", old=("--csv",)
    )
    add_alpha(p)
    _add_compare(p)
    add_json(p)


def _add_epsilon(p, old_default: float, what: str = "privacy budget per user") -> None:
    p.add_argument(
        "--epsilon",
        type=epsilon_type,
        default=None,
        metavar="E",
        help=f"{what}, in [2^-32, 500] (required; without it the old default {old_default:g} is "
        f"used, with a deprecation warning)",
    )
    p.set_defaults(epsilon_old_default=old_default)


def _epsilon(args) -> float:
    """``--epsilon``, or (deprecated, one release) the command's old default with a warning."""
    if args.epsilon is None:
        warn(
            f"ldp {args.ldp_command} without --epsilon is deprecated: using the old default "
            f"{args.epsilon_old_default:g}; --epsilon will be required in the next release"
        )
        args.epsilon = args.epsilon_old_default
    return args.epsilon


def _source(args):
    return args.data if args.data else dataset_path(args.builtin)


def _where(args) -> str:
    return args.data or args.builtin


def _one_column(args) -> str:
    if len(args.columns) != 1:
        raise ValueError(f"ldp {args.ldp_command} reads one column, got --columns {','.join(args.columns)}")
    return args.columns[0]


def _domains(args, columns: list[str], *, integer: bool = False):
    """Public domains of ``columns``: the flags, else the shipped dataset's declaration (not with --data)."""
    return resolve_domains(args, columns, None if args.data else args.builtin, integer=integer, data_flag="--data")


def register(root, groups) -> None:
    p = root.add_parser("ldp", help="local-model and shuffle-model protocols (AUC, QMLE, histograms, Alg. 1)")
    sub = p.add_subparsers(dest="ldp_command", metavar="WHAT")
    p.set_defaults(func=lambda a, _p=p: (_p.print_help(), 2)[1])

    a = sub.add_parser("auc", help="locally private AUC via hierarchical histograms (one bit per user)")
    _add_data_args(a, "breast_cancer")
    add_columns(a, what="score column (default mean_radius)", default=["mean_radius"], old=("--score",))
    a.add_argument("--label", default="malignant", help="0/1 label column, public (default malignant)")
    a.add_argument("--bits", type=int, default=4, help="alpha: scores are discretized to 2^alpha bins (default 4)")
    add_bound_args(a, "the score column")
    _add_epsilon(a, DEFAULT_EPSILON)
    a.add_argument(
        "--splitting",
        choices=["users", "budget"],
        default="users",
        help="split users across levels (default) or each user's budget",
    )
    a.add_argument(
        "--composition",
        choices=["basic", "advanced"],
        default="basic",
        help="budget splitting: basic (pure eps) or advanced composition (needs --delta)",
    )
    a.add_argument("--delta", type=float, default=0.0, help="delta for advanced composition (default 0)")
    a.add_argument("--a", type=float, default=None, help="threshold parameter a > 1 (default: Corollary 4/5)")
    a.add_argument(
        "--discarded",
        choices=["half", "zero"],
        default="half",
        help="discarded nodes: Eq. (10) 'half' or Corollary 5 'zero'",
    )
    a.add_argument(
        "--ties",
        choices=["half", "zero"],
        default="half",
        help="ties count one half (default) or zero (Eq. 10 verbatim)",
    )
    a.set_defaults(func=cmd_auc)

    q = sub.add_parser("qmle", help="one-bit LDP quasi-MLE of quantile regression")
    _add_data_args(q, "engel")
    q.add_argument("--response", default="foodexp", help="private response column (default foodexp)")
    add_columns(
        q, what="covariate columns A[,B...] (default income)", default=["income"], spaces=True, flag="--covariates"
    )
    q.add_argument("--tau", type=float, default=0.5, help="quantile level (default 0.5)")
    q.add_argument("--sigma", type=float, default=None, help="ALD scale (default (upper-lower)/10)")
    add_bound_args(q, "--response, then each of --covariates with --private-x; Eq. (6) truncation")
    _add_epsilon(q, DEFAULT_EPSILON)
    q.add_argument(
        "--private-x",
        action="store_true",
        help="covariates are private too (Sec. 3.2): one bit each, budget split equally",
    )
    q.set_defaults(func=cmd_qmle)

    h = sub.add_parser("shuffle-histogram", help="shuffled-model histogram (Balcer-Cheu, Figure 2)")
    _add_data_args(h, "fair")
    add_columns(h, what="integer-valued column (default rate_marriage)", default=["rate_marriage"], old=("--column",))
    add_bound_args(h, "the column: the integer domain lower..upper", integer=True)
    _add_epsilon(h, 1.0, "privacy budget, at most 1 for this protocol")
    h.add_argument("--delta", type=float, default=1e-5, help="delta (default 1e-5)")
    h.add_argument("--beta", type=float, default=0.05, help="failure probability of the reported error bound")
    h.set_defaults(func=cmd_shuffle_histogram)

    u = sub.add_parser("ustat", help="Algorithm 1: quantization + k-ary randomized response")
    u.add_argument(
        "--kernel",
        choices=["gini", "kendall", "auc"],
        default="gini",
        help="U-statistic kernel: gini (default), kendall or auc",
    )
    add_builtin(
        u, default=None, what="shipped dataset (default: breast_cancer, or fair for kendall)", old=("--dataset",)
    )
    add_data(
        u, what="read this CSV file (header row; needs --lower/--upper) instead of the shipped data", old=("--csv",)
    )
    add_columns(u, what="data column(s): A for gini/auc, A,B for kendall", spaces=True)
    u.add_argument("--label", default="malignant", help="0/1 label column for auc (default malignant)")
    u.add_argument("--k", type=int, default=8, help="bins per coordinate (default 8)")
    u.add_argument(
        "--discrete",
        action="store_true",
        help="no quantization: the domain is the public grid lower + k 10^-decimals (default for "
        "kendall when that grid has at most 8192 cells)",
    )
    add_bound_args(u, "one for gini/auc, two for kendall", decimals=True)
    u.add_argument(
        "--quantized-kernel",
        choices=["midpoint", "average"],
        default="midpoint",
        help="kernel on a pair of bins: midpoint of its range (Eq. 14, default) or its mean (Eq. 15)",
    )
    _add_epsilon(u, DEFAULT_EPSILON)
    add_alpha(u)
    _add_compare(u)
    add_json(u)
    u.set_defaults(func=cmd_ustat)


def _emit(args, payload: dict, lines: list, clamped_line: str | None = None) -> int:
    """Print the payload (JSON) or the text lines.  Without ``--compare`` the compare-only keys are dropped
    and so are the text lines given as ``(True, line)``; the clamped count goes to stderr when it is not zero."""
    if not args.compare:
        for k in COMPARE_ONLY_KEYS:
            payload.pop(k, None)
        if payload.get("clamped") and not args.json and clamped_line:
            warn(clamped_line)
    lines = [x[1] if isinstance(x, tuple) else x for x in lines if not isinstance(x, tuple) or args.compare]
    if clamped_line and args.compare:
        lines.append(f"clamped   {clamped_line}")
    if args.json:
        print(json.dumps(payload))
    else:
        print("\n".join(lines))
    return 0


# --------------------------------------------------------------------------- auc


def cmd_auc(args) -> int:
    from pairwise.dp.bounds import clamp, clamp_estimate
    from pairwise.protocols.ldp.auc import PrivateHierarchicalHistogram, ldp_auc, quantize_scores
    from pairwise.protocols.ldp.interval import NO_INTERVAL
    from pairwise.protocols.ldp.ustat import exact_auc

    if not 1 <= args.bits <= 24:
        raise ValueError(f"--bits must lie in 1..24, got {args.bits}")
    _epsilon(args)
    args.score = _one_column(args)
    dom = _domains(args, [args.score])[0]
    lo, hi = dom.lower, dom.upper
    cols = load_csv(_source(args), [args.score], label=args.label)
    s, y = cols[args.score], cols[args.label]
    if not ((y == 1).any() and (y == 0).any()):
        raise DataError(f"label column {args.label!r} must contain both 0 and 1")
    for cls in (y == 1, y == 0):  # validates epsilon, delta, splitting, composition before any randomness
        PrivateHierarchicalHistogram(
            args.bits, args.epsilon, int(cls.sum()), args.splitting, args.composition, args.delta
        )
    sc, clamped = clamp(s, lo, hi)  # each user clamps its score into the public domain
    q = quantize_scores(sc, args.bits, lo, hi)  # floor on 2^bits bins of [lo, hi]
    pos, neg = q[y == 1], q[y == 0]
    res = ldp_auc(
        pos,
        neg,
        args.bits,
        args.epsilon,
        splitting=args.splitting,
        a=args.a,
        discarded=args.discarded,
        ties=args.ties,
        composition=args.composition,
        delta=args.delta,
    )
    exact = exact_auc(s[y == 1], s[y == 0])
    payload = {
        "estimate": res.estimate,
        "estimate_clamped": clamp_estimate(res.estimate, 0.0, 1.0),
        "exact": exact,
        "exact_quantized": res.exact,
        "epsilon": args.epsilon,
        "delta": args.delta,
        "n": int(s.size),
        "n_pos": res.n_pos,
        "n_neg": res.n_neg,
        "bits": args.bits,
        "domain": 1 << args.bits,
        "splitting": args.splitting,
        "level_epsilon": res.level_epsilon,
        "a": res.a,
        "tau": res.tau,
        "recursed_per_level": res.recursed,
        "discarded_per_level": res.discarded,
        "bounds": [lo, hi],
        "bounds_from_data": False,
        "clamped": clamped,
        "score": args.score,
        "label": args.label,
        "interval": None,
        "interval_method": NO_INTERVAL["auc"],
        "alpha": args.alpha,
    }
    lines = [
        f"locally private AUC (hierarchical histograms, {args.splitting} split), eps={args.epsilon}"
        + (f", delta={args.delta}" if args.delta else ""),
        f"data      {_where(args)}: score {args.score}, label {args.label} (public) "
        f"(n={s.size}: {res.n_pos} positive, {res.n_neg} negative)",
        f"domain    2^{args.bits} bins on the public domain [{lo:g}, {hi:g}]",
        f"estimate  {res.estimate:.4f} (raw, unbiased); clamped to [0, 1]: {payload['estimate_clamped']:.4f}",
        (True, f"exact     {exact:.4f}  (quantized scores: {res.exact:.4f}) {NOT_PRIVATE}"),
        f"recursed nodes per level {res.recursed}, a={res.a:.3f}",
        f"interval  {NO_INTERVAL['auc']}",
    ]
    return _emit(args, payload, lines, clamped_note(clamped, [dom]))


# --------------------------------------------------------------------------- qmle


def cmd_qmle(args) -> int:
    from pairwise.dp.bounds import clamp
    from pairwise.protocols.ldp.interval import NO_INTERVAL
    from pairwise.protocols.ldp.qmle import (
        BitModel,
        fit_qmle_private,
        fit_qmle_public,
        quantile_regression,
        submit_private_x,
        submit_public_x,
    )

    _epsilon(args)
    if args.response in args.covariates:
        raise DataError(f"the response {args.response!r} cannot also be a covariate")
    private_cols = [args.response] + (list(args.covariates) if args.private_x else [])
    doms = _domains(args, private_cols)
    lo, hi = doms[0].lower, doms[0].upper
    sigma = args.sigma if args.sigma is not None else (hi - lo) / 10.0
    BitModel(lo, hi, args.epsilon, args.tau, sigma)  # validates epsilon, tau, sigma before any bit is flipped
    cols = load_csv(_source(args), [args.response] + list(args.covariates))
    y = cols[args.response]
    x = np.column_stack([cols[c] for c in args.covariates])
    exact = quantile_regression(y, x, args.tau)
    clamped = clamp(y, lo, hi)[1]  # each user truncates (Eq. 6) inside submit_*; counted here for the note
    if args.private_x:
        xb = [(d.lower, d.upper) for d in doms[1:]]
        clamped += sum(clamp(x[:, j], *xb[j])[1] for j in range(x.shape[1]))
        z, w = submit_private_x(y, x, (lo, hi), xb, args.epsilon)
        res = fit_qmle_private(z, w, (lo, hi), xb, args.epsilon, args.tau, sigma)
    else:
        xb = None
        z = submit_public_x(y, lo, hi, args.epsilon)
        res = fit_qmle_public(z, x, lo, hi, args.epsilon, args.tau, sigma)
    names = ["intercept"] + list(args.covariates)
    payload = {
        "estimate": res.theta.tolist(),
        "exact": exact.tolist(),
        "epsilon": args.epsilon,
        "delta": 0.0,
        "n": int(y.size),
        "coefficients": names,
        "std_errors": res.std_errors.tolist(),
        "covariance": res.covariance.tolist(),
        "tau": args.tau,
        "sigma": res.sigma,
        "bounds": [lo, hi],
        "covariate_bounds": xb,
        "private_x": bool(args.private_x),
        "bounds_from_data": False,
        "clamped": clamped,
        "converged": res.converged,
        "loglik": res.loglik,
        "interval": None,
        "interval_method": NO_INTERVAL["qmle"],
        "alpha": args.alpha,
    }
    lines = [
        f"one-bit LDP QMLE, {args.tau}-quantile regression of {args.response} on "
        f"{', '.join(args.covariates)} ({'private' if args.private_x else 'public'} covariates), eps={args.epsilon}",
        f"data      {_where(args)} (n={y.size}), response truncated to the public [{lo:g}, {hi:g}]"
        + (f", covariates to {', '.join(f'[{a:g}, {b:g}]' for a, b in xb)}" if xb else "")
        + f", sigma={res.sigma:g}",
        f"{'coefficient':<14}{'estimate':>14}{'std.err':>14}"
        + (f"{'exact (QR)*':>14}   (* not private)" if args.compare else ""),
    ]
    for nm, t, se, ex in zip(names, res.theta, res.std_errors, exact):
        lines.append(f"{nm:<14}{t:>14.5g}{se:>14.5g}" + (f"{ex:>14.5g}" if args.compare else ""))
    lines.append(f"interval  {NO_INTERVAL['qmle']}")
    if not res.converged:
        lines.append("warning: the optimizer did not report convergence")
    return _emit(args, payload, lines, clamped_note(clamped, doms))


# --------------------------------------------------------------------------- shuffled histogram


def cmd_shuffle_histogram(args) -> int:
    from pairwise.dp.bounds import PublicDomain, to_fixed_point
    from pairwise.protocols.ldp.interval import histogram_band
    from pairwise.protocols.ldp.shuffle import HistogramProtocol, shuffled_histogram

    _epsilon(args)
    args.column = _one_column(args)
    dom = _domains(args, [args.column], integer=True)[0]
    if dom.lower != int(dom.lower) or dom.upper != int(dom.upper):
        raise ValueError(f"the histogram domain needs integer bounds, got [{dom.lower:g}, {dom.upper:g}]")
    lo, hi = int(dom.lower), int(dom.upper)
    d = hi - lo + 1
    if d > 1 << 20:
        raise ValueError(f"domain of {d} values is too large for this demo (at most 2^20)")
    cols = load_csv(_source(args), [args.column])
    v = cols[args.column]
    proto = HistogramProtocol(args.epsilon, args.delta, int(v.size), d)  # validated before any randomness
    bound = proto.simultaneous_error_bound(args.beta)
    below, above, method = histogram_band(proto.n, d, proto.inner.p, args.alpha)  # public: n, d, p, alpha
    # each user rounds its value to the nearest integer and clamps it into lo..hi
    ints, clamped = to_fixed_point(v, PublicDomain(lo, hi, 0))
    res = shuffled_histogram(ints, d, args.epsilon, args.delta)
    est = np.asarray(res.raw, dtype=float)  # raw c* (unbiased); A^hist's thresholded vector below
    thr = np.asarray(res.estimate, dtype=float)
    payload = {
        "estimate": est.tolist(),
        "estimate_clamped": np.clip(est, 0.0, 1.0).tolist(),
        "estimate_thresholded": thr.tolist(),
        "exact": res.exact.tolist(),
        "epsilon": args.epsilon,
        "delta": args.delta,
        "n": res.n,
        "max_error": res.max_error,
        "values": list(range(lo, hi + 1)),
        "d": d,
        "messages": res.messages,
        "zero_threshold": proto.inner.q,
        "error_bound": bound,
        "beta": args.beta,
        "bounds": [lo, hi],
        "bounds_from_data": False,
        "clamped": clamped,
        "interval": [[float(e - below), float(e + above)] for e in est],
        "interval_clamped": [[min(max(float(e - below), 0.0), 1.0), min(max(float(e + above), 0.0), 1.0)] for e in est],
        "interval_method": method,
        "interval_width": below + above,
        "alpha": args.alpha,
    }
    lines = [
        f"shuffled-model histogram (Balcer-Cheu P^hist), eps={args.epsilon}, delta={args.delta}",
        f"data      {_where(args)}: column {args.column}, n={res.n}, d={d} values of the public "
        f"domain [{lo}, {hi}], {res.messages} messages shuffled",
        f"{'value':>8}{'estimate':>12}{'clamped':>10}{'A^hist':>10}"
        + (f"{'exact*':>10}   (* not private)" if args.compare else ""),
    ]
    for val, e, h, t in zip(range(lo, hi + 1), est, thr, res.exact):
        lines.append(
            f"{val:>8}{e:>12.4f}{min(max(e, 0.0), 1.0):>10.4f}{h:>10.4f}" + (f"{t:>10.4f}" if args.compare else "")
        )
    lines.append(
        f"estimate: raw c* = messages/n - p (unbiased); A^hist: the paper's analyzer, which reports "
        f"frequencies at or below {proto.inner.q:.4f} as 0"
    )
    lines.append(
        f"{100 * (1 - args.alpha):g}% band: every raw frequency within [estimate - {below:.4f}, estimate + "
        f"{above:.4f}], all {d} values at once ({method}; width from public parameters only)"
    )
    lines.append(
        (f"max error of A^hist {res.max_error:.4f} {NOT_PRIVATE} (bound " if args.compare else "A^hist's max error <= ")
        + f"{bound:.4f} with probability {1 - args.beta:g}, Theorem 3.2"
        + (")" if args.compare else "")
    )
    return _emit(args, payload, lines, clamped_note(clamped, [dom]))


# --------------------------------------------------------------------------- Algorithm 1


def cmd_ustat(args) -> int:
    from pairwise.dp.bounds import clamp, clamp_estimate
    from pairwise.protocols.ldp.interval import alg1_interval, alg1_kernel_range
    from pairwise.protocols.ldp.ustat import exact_ustatistic, from_domains

    _epsilon(args)
    kernel = args.kernel
    dataset = args.builtin or ("fair" if kernel == "kendall" else "breast_cancer")
    columns = args.columns or (["rate_marriage", "religious"] if kernel == "kendall" else ["mean_radius"])
    need = 2 if kernel == "kendall" else 1
    if len(columns) != need:
        raise ValueError(f"kernel {kernel} needs {need} column(s), got {len(columns)}")
    args.builtin = dataset
    doms = _domains(args, columns)
    # kendall defaults to the discrete grid (ratings) when it is small enough, else to --k bins
    proto, discrete = from_domains(
        kernel, doms, args.epsilon, k=args.k, discrete=args.discrete, quantized_kernel=args.quantized_kernel
    )  # validated before any noise
    source = args.data if args.data else dataset_path(dataset)
    label = args.label if kernel == "auc" else None
    cols = load_csv(source, columns, label=label)
    clamped_cols = [clamp(cols[c], d.lower, d.upper) for c, d in zip(columns, doms)]
    clamped = sum(m for _, m in clamped_cols)
    raw = cols[columns[0]] if need == 1 else np.column_stack([cols[c] for c in columns])
    data = clamped_cols[0][0] if need == 1 else np.column_stack([c for c, _ in clamped_cols])
    if kernel == "auc":
        y = cols[label]
        if not ((y == 1).any() and (y == 0).any()):
            raise DataError(f"label column {label!r} must contain both 0 and 1")
        cp, cn = proto.encode(data[y == 1]), proto.encode(data[y == 0])
        iw = alg1_interval(proto.beta, 1.0, n_pos=int((y == 1).sum()), n_neg=int((y == 0).sum()), alpha=args.alpha)
        est = proto.estimate_two_sample(proto.randomize(cp), proto.randomize(cn))
        exact_q = proto.exact_quantized_two_sample(cp, cn)
        exact = exact_ustatistic(raw, "auc", y)
        natural = (0.0, 1.0)
    else:
        cells = proto.encode(data)
        iw = alg1_interval(
            proto.beta, alg1_kernel_range((proto.matrix + proto.matrix.T) / 2), n=int(cells.size), alpha=args.alpha
        )
        est = proto.estimate(proto.randomize(cells))
        exact_q = proto.exact_quantized(cells)
        exact = exact_ustatistic(raw, kernel)
        natural = (-1.0, 1.0) if kernel == "kendall" else (0.0, doms[0].upper - doms[0].lower)
    n = int(raw.shape[0])
    payload = {
        "estimate": est,
        "estimate_clamped": clamp_estimate(est, *natural),
        "natural_range": list(natural),
        "exact": exact,
        "exact_quantized": exact_q,
        "epsilon": args.epsilon,
        "delta": 0.0,
        "n": n,
        "kernel": kernel,
        "cells": proto.cells,
        "beta": proto.beta,
        "quantized_kernel": None if discrete else args.quantized_kernel,
        "columns": columns,
        "bounds": [[d.lower for d in doms], [d.upper for d in doms]],
        "decimals": [d.scale_decimals for d in doms] if discrete else None,
        "bounds_from_data": False,
        "clamped": clamped,
        "interval": iw.around(est),
        "interval_clamped": [clamp_estimate(v, *natural) for v in iw.around(est)],
        "interval_method": iw.method,
        "interval_width": iw.width,
        "alpha": args.alpha,
    }
    what = "Kendall's tau-a" if kernel == "kendall" else ("Gini mean difference" if kernel == "gini" else "AUC")
    grid = "; ".join(f"[{d.lower:g}, {d.upper:g}]" for d in doms)
    lines = [
        f"Algorithm 1 (quantization + k-ary RR), {what} ({kernel}), eps={args.epsilon}, "
        f"{proto.cells} cells (beta={proto.beta:.4f})",
        f"data      {args.data or dataset}: {', '.join(columns)} (n={n}), public domain {grid}"
        + (" (discrete grid)" if discrete else f", {args.k} bins per coordinate"),
        f"estimate  {est:.5g} (raw, unbiased); clamped to [{natural[0]:g}, {natural[1]:g}]: "
        f"{payload['estimate_clamped']:.5g}",
        f"interval  {interval_line(payload['interval'], args.alpha, natural, '.5g')} for the statistic of the "
        f"quantized data; width {iw.width:.4g} from public parameters only",
        f"method    {iw.method}",
        (True, f"exact     {exact:.5g}  (quantized: {exact_q:.5g}) {NOT_PRIVATE}"),
    ]
    return _emit(args, payload, lines, clamped_note(clamped, doms))
