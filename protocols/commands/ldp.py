"""``pairwise ldp``: local-model and shuffle-model protocols on shipped or CSV data.

Commands
    ``pairwise ldp auc [--dataset NAME | --csv PATH] [--score COL] [--label COL]
    [--bits ALPHA] [--epsilon E] [--splitting users|budget] [--json]``
        Locally private AUC from hierarchical histograms (ustats paper,
        Sec. 4 and App. B). Default data: breast_cancer, score
        ``mean_radius``, label ``malignant``.
    ``pairwise ldp qmle [--dataset NAME | --csv PATH] [--response COL]
    [--covariates COL ...] [--tau T] [--epsilon E] [--private-x] [--json]``
        One-bit LDP quasi-MLE of tau-quantile regression (onebit-ldp-qmle
        paper). Default data: engel, ``foodexp`` on ``income``.
    ``pairwise ldp shuffle-histogram [--dataset NAME | --csv PATH]
    [--column COL] [--epsilon E] [--delta D] [--json]``
        The shuffled-model histogram of Balcer and Cheu (Figure 2). Default
        data: fair, ``rate_marriage``.
    ``pairwise ldp ustat [--kernel gini|kendall|auc] [--k K] [--epsilon E] [--json]``
        Algorithm 1 of the ustats paper (quantization + k-ary RR). Default
        data: breast_cancer ``mean_radius`` (gini, auc), fair
        (``rate_marriage``, ``religious``) for kendall (discrete ratings, no
        quantization).

JSON keys (a public interface): ``estimate``, ``exact`` (the non-private
value on the same data), ``epsilon``, ``delta``, ``n``, plus ``max_error``
for histograms. Other keys give details.

Security model: each command runs the whole protocol in one process, users
and server alike. Randomness comes from the OS CSPRNG. When
quantization or truncation bounds are not given, they are taken from the
data. That is only acceptable for public demo data: in a deployment the
bounds are public parameters fixed in advance. The output says so
(``bounds_from_data``).
"""

from __future__ import annotations

import json

import numpy as np

from ..datasets import DataError, dataset_path, load_csv
from .options import epsilon as epsilon_type

DEFAULT_EPSILON = 2.0


def _add_data_args(p, dataset: str) -> None:
    p.add_argument("--dataset", default=dataset, help=f"shipped dataset name (default {dataset})")
    p.add_argument("--csv", metavar="PATH", help="read a CSV file with a header row instead")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _source(args):
    return args.csv if args.csv else dataset_path(args.dataset)


def register(root, groups) -> None:
    p = root.add_parser("ldp", help="local-model and shuffle-model protocols (AUC, QMLE, histograms, Alg. 1)")
    sub = p.add_subparsers(dest="ldp_command", metavar="WHAT")
    p.set_defaults(func=lambda a, _p=p: (_p.print_help(), 2)[1])

    a = sub.add_parser("auc", help="locally private AUC via hierarchical histograms (one bit per user)")
    _add_data_args(a, "breast_cancer")
    a.add_argument("--score", default="mean_radius", help="score column (default mean_radius)")
    a.add_argument("--label", default="malignant", help="0/1 label column, public (default malignant)")
    a.add_argument("--bits", type=int, default=4, help="alpha: scores are discretized to 2^alpha bins (default 4)")
    a.add_argument("--lower", type=float, help="public lower bound of the scores (default: data minimum)")
    a.add_argument("--upper", type=float, help="public upper bound of the scores (default: data maximum)")
    a.add_argument("--epsilon", type=epsilon_type, metavar="E", default=DEFAULT_EPSILON, help=f"privacy budget (default {DEFAULT_EPSILON})")
    a.add_argument("--splitting", choices=["users", "budget"], default="users",
                   help="split users across levels (default) or each user's budget")
    a.add_argument("--composition", choices=["basic", "advanced"], default="basic",
                   help="budget splitting: basic (pure eps) or advanced composition (needs --delta)")
    a.add_argument("--delta", type=float, default=0.0, help="delta for advanced composition (default 0)")
    a.add_argument("--a", type=float, default=None, help="threshold parameter a > 1 (default: Corollary 4/5)")
    a.add_argument("--discarded", choices=["half", "zero"], default="half",
                   help="discarded nodes: Eq. (10) 'half' or Corollary 5 'zero'")
    a.add_argument("--ties", choices=["half", "zero"], default="half",
                   help="ties count one half (default) or zero (Eq. 10 verbatim)")
    a.set_defaults(func=cmd_auc)

    q = sub.add_parser("qmle", help="one-bit LDP quasi-MLE of quantile regression")
    _add_data_args(q, "engel")
    q.add_argument("--response", default="foodexp", help="private response column (default foodexp)")
    q.add_argument("--covariates", nargs="+", default=["income"], help="covariate columns (default income)")
    q.add_argument("--tau", type=float, default=0.5, help="quantile level (default 0.5)")
    q.add_argument("--sigma", type=float, default=None, help="ALD scale (default (upper-lower)/10)")
    q.add_argument("--lower", type=float, help="truncation lower bound of the response (default: data minimum)")
    q.add_argument("--upper", type=float, help="truncation upper bound of the response (default: data maximum)")
    q.add_argument("--epsilon", type=epsilon_type, metavar="E", default=DEFAULT_EPSILON, help=f"privacy budget per user (default {DEFAULT_EPSILON})")
    q.add_argument("--private-x", action="store_true",
                   help="covariates are private too (Sec. 3.2): one bit each, budget split equally")
    q.set_defaults(func=cmd_qmle)

    h = sub.add_parser("shuffle-histogram", help="shuffled-model histogram (Balcer-Cheu, Figure 2)")
    _add_data_args(h, "fair")
    h.add_argument("--column", default="rate_marriage", help="integer-valued column (default rate_marriage)")
    h.add_argument("--lower", type=int, help="smallest domain value (default: data minimum)")
    h.add_argument("--upper", type=int, help="largest domain value (default: data maximum)")
    h.add_argument("--epsilon", type=epsilon_type, metavar="E", default=1.0, help="privacy budget, <= 1 (default 1)")
    h.add_argument("--delta", type=float, default=1e-5, help="delta (default 1e-5)")
    h.add_argument("--beta", type=float, default=0.05, help="failure probability of the reported error bound")
    h.set_defaults(func=cmd_shuffle_histogram)

    u = sub.add_parser("ustat", help="Algorithm 1: quantization + k-ary randomized response")
    u.add_argument("--kernel", choices=["gini", "kendall", "auc"], default="gini",
                   help="U-statistic kernel: gini (default), kendall or auc")
    u.add_argument("--dataset", default=None, help="shipped dataset (default: breast_cancer, or fair for kendall)")
    u.add_argument("--csv", metavar="PATH", help="read a CSV file with a header row instead")
    u.add_argument("--columns", nargs="+", default=None,
                   help="data column(s): one for gini/auc, two for kendall")
    u.add_argument("--label", default="malignant", help="0/1 label column for auc (default malignant)")
    u.add_argument("--k", type=int, default=8, help="bins per coordinate (default 8)")
    u.add_argument("--discrete", action="store_true",
                   help="no quantization: the domain is the set of observed values (default for kendall)")
    u.add_argument("--quantized-kernel", choices=["midpoint", "average"], default="midpoint",
                   help="kernel on a pair of bins: midpoint of its range (Eq. 14, default) or its mean (Eq. 15)")
    u.add_argument("--epsilon", type=epsilon_type, metavar="E", default=DEFAULT_EPSILON, help=f"privacy budget (default {DEFAULT_EPSILON})")
    u.add_argument("--json", action="store_true", help="print one JSON object")
    u.set_defaults(func=cmd_ustat)


def _emit(args, payload: dict, lines: list[str]) -> int:
    if args.json:
        print(json.dumps(payload))
    else:
        print("\n".join(lines))
    return 0


def _bounds(values: np.ndarray, lower, upper) -> tuple[float, float, bool]:
    from_data = lower is None or upper is None
    lo = float(values.min()) if lower is None else float(lower)
    hi = float(values.max()) if upper is None else float(upper)
    if hi <= lo:
        if from_data and lower is None and upper is None:
            hi = lo + 1.0
        else:
            raise DataError(f"bounds must satisfy lower < upper, got [{lo}, {hi}]")
    return lo, hi, from_data


# --------------------------------------------------------------------------- auc


def cmd_auc(args) -> int:
    from ..ldp.auc import ldp_auc, quantize_scores
    from ..ldp.ustat import exact_auc

    if not 1 <= args.bits <= 24:
        raise ValueError(f"--bits must lie in 1..24, got {args.bits}")
    cols = load_csv(_source(args), [args.score], label=args.label)
    s, y = cols[args.score], cols[args.label]
    lo, hi, from_data = _bounds(s, args.lower, args.upper)
    q = quantize_scores(s, args.bits, lo, hi)  # floor on 2^bits bins, clipped (the maximum goes to the last bin)
    pos, neg = q[y == 1], q[y == 0]
    if pos.size == 0 or neg.size == 0:
        raise DataError(f"label column {args.label!r} must contain both 0 and 1")
    res = ldp_auc(pos, neg, args.bits, args.epsilon, splitting=args.splitting, a=args.a,
                  discarded=args.discarded, ties=args.ties, composition=args.composition, delta=args.delta)
    exact = exact_auc(s[y == 1], s[y == 0])
    payload = {
        "estimate": res.estimate,
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
        "bounds_from_data": from_data,
        "score": args.score,
        "label": args.label,
    }
    lines = [
        f"locally private AUC (hierarchical histograms, {args.splitting} split), eps={args.epsilon}"
        + (f", delta={args.delta}" if args.delta else ""),
        f"data      {args.csv or args.dataset}: score {args.score}, label {args.label} "
        f"(n={s.size}: {res.n_pos} positive, {res.n_neg} negative)",
        f"domain    2^{args.bits} bins on [{lo:g}, {hi:g}]" + (" (bounds from the data: demo only)" if from_data else ""),
        f"estimate  {res.estimate:.4f}",
        f"exact     {exact:.4f}  (quantized scores: {res.exact:.4f})",
        f"recursed nodes per level {res.recursed}, a={res.a:.3f}",
    ]
    return _emit(args, payload, lines)


# --------------------------------------------------------------------------- qmle


def cmd_qmle(args) -> int:
    from ..ldp.qmle import (
        fit_qmle_private,
        fit_qmle_public,
        quantile_regression,
        submit_private_x,
        submit_public_x,
    )

    if args.response in args.covariates:
        raise DataError(f"the response {args.response!r} cannot also be a covariate")
    cols = load_csv(_source(args), [args.response] + list(args.covariates))
    y = cols[args.response]
    x = np.column_stack([cols[c] for c in args.covariates])
    lo, hi, from_data = _bounds(y, args.lower, args.upper)
    exact = quantile_regression(y, x, args.tau)
    if args.private_x:
        xb = [(float(x[:, j].min()), float(x[:, j].max()) if x[:, j].max() > x[:, j].min() else float(x[:, j].min()) + 1.0)
              for j in range(x.shape[1])]
        z, w = submit_private_x(y, x, (lo, hi), xb, args.epsilon)
        res = fit_qmle_private(z, w, (lo, hi), xb, args.epsilon, args.tau, args.sigma)
        from_data = True
    else:
        xb = None
        z = submit_public_x(y, lo, hi, args.epsilon)
        res = fit_qmle_public(z, x, lo, hi, args.epsilon, args.tau, args.sigma)
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
        "bounds_from_data": from_data,
        "converged": res.converged,
        "loglik": res.loglik,
    }
    lines = [
        f"one-bit LDP QMLE, {args.tau}-quantile regression of {args.response} on "
        f"{', '.join(args.covariates)} ({'private' if args.private_x else 'public'} covariates), eps={args.epsilon}",
        f"data      {args.csv or args.dataset} (n={y.size}), response truncated to [{lo:g}, {hi:g}]"
        + (" (bounds from the data: demo only)" if from_data else "") + f", sigma={res.sigma:g}",
        f"{'coefficient':<14}{'estimate':>14}{'std.err':>14}{'exact (QR)':>14}",
    ]
    for nm, t, se, ex in zip(names, res.theta, res.std_errors, exact):
        lines.append(f"{nm:<14}{t:>14.5g}{se:>14.5g}{ex:>14.5g}")
    if not res.converged:
        lines.append("warning: the optimizer did not report convergence")
    return _emit(args, payload, lines)


# --------------------------------------------------------------------------- shuffled histogram


def cmd_shuffle_histogram(args) -> int:
    from ..datasets import check_integer_range
    from ..ldp.shuffle import HistogramProtocol, shuffled_histogram

    cols = load_csv(_source(args), [args.column])
    v = cols[args.column]
    ints = check_integer_range(v, 63, True, args.column)
    lo = int(ints.min()) if args.lower is None else args.lower
    hi = int(ints.max()) if args.upper is None else args.upper
    if hi < lo:
        raise DataError(f"domain bounds must satisfy lower <= upper, got [{lo}, {hi}]")
    bad = np.flatnonzero((ints < lo) | (ints > hi))
    if bad.size:
        r = int(bad[0])
        raise DataError(f"row {r + 1}, column {args.column!r}: value {int(ints[r])} is outside the domain [{lo}, {hi}]",
                        row=r + 1, column=args.column)
    d = hi - lo + 1
    if d > 1 << 20:
        raise ValueError(f"domain of {d} values is too large for this demo (at most 2^20)")
    res = shuffled_histogram(ints - lo, d, args.epsilon, args.delta)
    proto = HistogramProtocol(args.epsilon, args.delta, res.n, d)
    bound = proto.simultaneous_error_bound(args.beta)
    payload = {
        "estimate": res.estimate.tolist(),
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
        "bounds_from_data": args.lower is None or args.upper is None,
    }
    lines = [
        f"shuffled-model histogram (Balcer-Cheu P^hist), eps={args.epsilon}, delta={args.delta}",
        f"data      {args.csv or args.dataset}: column {args.column}, n={res.n}, d={d} values [{lo}, {hi}], "
        f"{res.messages} messages shuffled",
        f"{'value':>8}{'estimate':>12}{'exact':>12}",
    ]
    for val, e, t in zip(range(lo, hi + 1), res.estimate, res.exact):
        lines.append(f"{val:>8}{e:>12.4f}{t:>12.4f}")
    lines.append(f"max error {res.max_error:.4f} (bound {bound:.4f} with probability {1 - args.beta:g}; "
                 f"frequencies below {proto.inner.q:.4f} are reported as 0)")
    return _emit(args, payload, lines)


# --------------------------------------------------------------------------- Algorithm 1


def cmd_ustat(args) -> int:
    from ..ldp.ustat import (
        QuantizedUStatistic,
        Quantizer,
        data_bounds,
        exact_ustatistic,
    )

    kernel = args.kernel
    dataset = args.dataset or ("fair" if kernel == "kendall" else "breast_cancer")
    columns = args.columns or (["rate_marriage", "religious"] if kernel == "kendall" else ["mean_radius"])
    need = 2 if kernel == "kendall" else 1
    if len(columns) != need:
        raise ValueError(f"kernel {kernel} needs {need} column(s), got {len(columns)}")
    source = args.csv if args.csv else dataset_path(dataset)
    label = args.label if kernel == "auc" else None
    cols = load_csv(source, columns, label=label)
    data = cols[columns[0]] if need == 1 else np.column_stack([cols[c] for c in columns])
    discrete = args.discrete or kernel == "kendall"
    if discrete:
        levels = [np.unique(cols[c]).tolist() for c in columns]
        quant = Quantizer.discrete(levels)
        bounds = None
    else:
        lo, hi = data_bounds(data)
        quant = Quantizer.uniform(lo, hi, args.k)
        bounds = [lo.tolist(), hi.tolist()]
    proto = QuantizedUStatistic(kernel, quant, args.epsilon, args.quantized_kernel)
    if kernel == "auc":
        y = cols[label]
        pos, neg = data[y == 1], data[y == 0]
        if pos.size == 0 or neg.size == 0:
            raise DataError(f"label column {label!r} must contain both 0 and 1")
        cp, cn = proto.encode(pos), proto.encode(neg)
        est = proto.estimate_two_sample(proto.randomize(cp), proto.randomize(cn))
        exact_q = proto.exact_quantized_two_sample(cp, cn)
        exact = exact_ustatistic(data, "auc", y)
    else:
        cells = proto.encode(data)
        est = proto.estimate(proto.randomize(cells))
        exact_q = proto.exact_quantized(cells)
        exact = exact_ustatistic(data, kernel)
    n = int(data.shape[0])
    payload = {
        "estimate": est,
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
        "bounds": bounds,
        "bounds_from_data": True,
    }
    lines = [
        f"Algorithm 1 (quantization + k-ary RR), kernel {kernel}, eps={args.epsilon}, "
        f"{proto.cells} cells (beta={proto.beta:.4f})",
        f"data      {args.csv or dataset}: {', '.join(columns)} (n={n})"
        + ("" if discrete else f", {args.k} bins per coordinate on the data range (demo only)"),
        f"estimate  {est:.5g}",
        f"exact     {exact:.5g}  (quantized: {exact_q:.5g})",
    ]
    return _emit(args, payload, lines)
