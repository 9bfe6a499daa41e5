"""``pairwise ustat``: the main job, DP U-statistics with the 2PC subsampling protocol.

``pairwise ustat (--statistic gini|kendall|auc|variance|collision | --kernel MODULE:FUNCTION)
--epsilon E [--data FILE.csv --columns A[,B] --lower L[,L2] --upper U[,U2] | --builtin NAME]
[--mode simulate|network] [--compare] [--json] ...`` ([BBGK20, Sec. 5]).

Without ``--data`` it runs on real data shipped in ``protocols/data`` with
their declared public domains (``domains.json``).  Every value is clamped
into the public domain and rounded to its fixed-point grid by its owner; the
sensitivity, the circuit width and the scale come from the bounds alone.
``--noise`` picks the in-circuit mechanism (``auto``: k-ary randomized
response for kendall and auc, the signed geometric for gini);
``--pair-delta`` is the delta of one pair's release (default 2^-40).

By default the report is one epsilon-DP release and its (1 - alpha)
interval, with the public parameters and costs: everything on stdout can be
published.  ``--compare`` adds the evaluation aids (the exact value and the
predicted errors, not private) and the Algorithm 1 baseline (a second
epsilon-LDP release, so the output as a whole is then (2 epsilon, delta)).
The JSON keys (a public interface) come in three groups: DP outputs
(``estimate``, ``estimate_clamped``, ``interval``, ...), public parameters
and costs, and, never to be published with a release, what is not private
(``clamped``, ``seconds``, ``exact``, ...).  In network mode the workers talk
mutual TLS 1.3 (``--tls DIR``, or a throwaway CA for the run).

Every option, the shipped data and the meaning of every JSON key:
``docs/cli.md``, "pairwise ustat"; the main job itself: ``docs/ustat.md``.

Security model: see :mod:`pairwise.protocols.ustat.driver` (semi-honest 2PC, CDP).
"""

from __future__ import annotations

import json

from pairwise.protocols.datasets import dataset_path
from pairwise.protocols.ustat.result import not_private_keys, release_keys

from .bounds import NOT_PRIVATE, add_bound_args, clamped_note, deprecated, resolve_domains
from .intervals import add_alpha, interval_line
from .options import (
    add_builtin,
    add_cluster_argument,
    add_columns,
    add_data,
    add_epsilon,
    add_json,
    add_progress,
    add_timeouts,
    positive_int,
    progress_bar,
)

DEFAULTS = {
    "gini": ("diabetes", ["progression"], None),
    "kendall": ("fair", ["rate_marriage", "religious"], None),
    "auc": ("breast_cancer", ["mean_radius"], "malignant"),
    "variance": ("diabetes", ["progression"], None),
    "collision": ("fair", ["rate_marriage"], None),
}
NAMES = {
    "gini": "Gini mean difference",
    "kendall": "Kendall's tau-a",
    "auc": "AUC",
    "variance": "variance ((x - y)^2 / 2)",
    "collision": "collision probability ([x = y])",
}

#: JSON keys of the Algorithm 1 baseline, a second epsilon-LDP release (``--compare`` only).
BASELINE_KEYS = ("rr_estimate", "rr_estimate_clamped", "rr_interval")
#: JSON keys that hold DP outputs (noisy values): the protocol's release group
#: (:class:`pairwise.protocols.ustat.result.Release`) and the RR baseline; see the module docstring.
DP_KEYS = release_keys() + BASELINE_KEYS
#: JSON keys computed without noise (or wall time): not private, for evaluation only
#: (:class:`pairwise.protocols.ustat.result.NotPrivate`). Every other key is a function of public inputs and is
#: identical on neighbouring datasets (tests/protocols/test_privacy_audit.py).
NOT_PRIVATE_KEYS = not_private_keys()
#: Not-private keys printed only with ``--compare`` (the exact value and the errors predicted from the data).
COMPARE_ONLY_KEYS = ("exact", "exact_quantized", "sample_mse", "theorem5_mse")

#: Bins per coordinate of the Algorithm 1 baseline (or its grid's points, if there are at most this many).
RR_BINS = 16


def _pairs_per_user(text: str):
    """``auto`` or a positive integer."""
    return "auto" if text == "auto" else positive_int(text)


def register(root, groups) -> None:
    p = root.add_parser(
        "ustat",
        help="DP U-statistic (gini, kendall, auc) with the 2PC subsampling protocol",
        description="Estimate a U-statistic of n users' private values with differential "
        "privacy: sampled pairs of users run the kernel plus discrete-Laplace noise "
        "in a garbled circuit (ustats paper, Sec. 5).",
    )
    p.add_argument(
        "--statistic",
        choices=sorted(DEFAULTS),
        help="gini (Gini mean difference), kendall (Kendall's tau-a), auc (area under the ROC), variance "
        "((x - y)^2 / 2: the sample variance) or collision ([x = y]: the collision probability)",
    )
    p.add_argument(
        "--kernel",
        metavar="MODULE:FUNCTION",
        help="any degree-2 kernel instead of --statistic: a function decorated with "
        "pairwise.circuits.kernel_spec.kernel(range=..., symmetric=...) (one column, --data, "
        "--columns A, --lower/--upper); its declared range is checked against its circuit",
    )
    add_epsilon(p, what="privacy budget per user")
    p.add_argument(
        "--pairs-per-user",
        type=_pairs_per_user,
        default=1,
        metavar="P",
        help="pairs each user takes part in, 1..n-1 (default 1), or auto: the P minimizing Theorem 5's "
        "bound with worst-case variances, from n, epsilon and the kernel's public range",
    )
    p.add_argument(
        "--mode",
        choices=["simulate", "network"],
        default="simulate",
        help="simulate: all pairs as real 2PC executions over an in-memory channel in this process; "
        "network: users hosted by --workers processes, real 2PC over loopback TCP",
    )
    add_cluster_argument(p, "simulate mode's SIMD batches (one Dask task each)")
    p.add_argument(
        "--design",
        choices=["subsample", "all"],
        default="subsample",
        help="subsample (the paper's protocol) or all pairs with advanced composition (baseline)",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        default=4,
        metavar="W",
        help="worker processes in network mode, 1..64 (default 4)",
    )
    p.add_argument(
        "--tls",
        metavar="DIR",
        help="network mode: mutual TLS with the certificates worker-0 .. worker-(W-1) in DIR "
        "(pairwise certs create); default: a throwaway CA made for the run",
    )
    p.add_argument(
        "--bits",
        type=int,
        metavar="W",
        help="circuit width (default: the smallest of 8/16/32/64 holding the public "
        "grid span (upper - lower) 10^decimals)",
    )
    p.add_argument(
        "--signed",
        action="store_true",
        help="deprecated, no effect: values are shifted by the public lower bound, the word is unsigned",
    )
    add_builtin(
        p,
        default=None,
        what="shipped dataset to read --columns from (default: "
        + "; ".join(f"{k}: {v[0]}" for k, v in sorted(DEFAULTS.items()))
        + ")",
    )
    add_data(p, what="CSV file with a header row (needs --lower/--upper)")
    add_columns(p, what="column(s): A for gini and auc scores, A,B for kendall")
    p.add_argument("--label", metavar="COLUMN", help="0/1 label column (auc; labels are public)")
    add_bound_args(p, "A, or A,B for kendall", decimals=True)
    p.add_argument(
        "--batch", type=positive_int, default=4096, metavar="B", help="pairs per SIMD execution (default 4096)"
    )
    p.add_argument(
        "--noise",
        choices=["auto", "krr", "discrete_laplace", "signed_geometric"],
        default="auto",
        help="in-circuit noise: auto (default: k-ary randomized response for kendall and auc, whose kernels "
        "take 3 values, the cheapest additive noise for gini), krr, discrete_laplace or signed_geometric",
    )
    p.add_argument(
        "--pair-delta",
        type=float,
        default=2.0**-40,
        help="delta of one pair's release (default 2^-40); it fixes the noise gadget's precision",
    )
    add_alpha(p)
    p.add_argument(
        "--compare",
        action="store_true",
        help="also print evaluation aids: the exact value and predicted errors (not private) and the "
        "Algorithm 1 baseline (a second epsilon-LDP release: the whole output is then 2 epsilon)",
    )
    add_timeouts(p, timeout=120.0, connect_timeout=120.0, timeout_what="a worker (network mode)")
    add_progress(p)
    add_json(p)
    p.set_defaults(func=cmd_ustat)


def _load(args):
    from pairwise.protocols.datasets import dataset_info, load_csv, load_dataset

    stat = args.statistic
    if args.kernel is not None:
        if args.data is None and args.builtin is None or not args.columns or len(args.columns) != 1:
            raise ValueError(
                "--kernel needs its data: --data FILE.csv (or --builtin NAME) and --columns A (one column)"
            )
        if args.label:
            raise ValueError("--kernel takes one-sample kernels of one column: no --label")
        cols = list(args.columns)
        builtin = None if args.data is not None else args.builtin
        domains = resolve_domains(args, cols, builtin)
        path, source = (args.data, args.data) if builtin is None else (dataset_path(builtin), f"{builtin} (shipped)")
        d = load_csv(path, cols)
        return [d[cols[0]]], None, source, cols, None, domains
    if args.data is not None and args.builtin is not None:
        raise ValueError("give either --data FILE.csv or --builtin NAME, not both")
    if args.label and stat != "auc":
        raise ValueError(f"--label is for auc (the 0/1 class column); {stat} takes no label")
    if args.data is None and not args.columns and args.label not in (None, DEFAULTS[stat][2]):
        raise ValueError(
            f"--label {args.label} needs --columns SCORE (the default data's columns are "
            f"{DEFAULTS[stat][1]} with label {DEFAULTS[stat][2]!r})"
        )
    if args.builtin is not None:
        dataset_info(args.builtin)  # an unknown name is named first, with the shipped ones
    if args.data is None and not args.columns:
        if args.builtin not in (None, DEFAULTS[stat][0]):
            raise ValueError(f"--builtin {args.builtin} needs --columns for {stat}")
        name, cols, label = DEFAULTS[stat]
        domains = resolve_domains(args, cols, name)
        d = load_dataset(name)
        source = f"{name} (shipped)"
        cols_data = [d[c] for c in cols]
        lab = d[label] if label else None
        return cols_data, lab, source, cols, label, domains
    if not args.columns:
        raise ValueError("--data needs --columns")
    cols = list(args.columns)
    want = 2 if stat == "kendall" else 1
    if len(cols) != want:
        raise ValueError(f"{stat} needs {want} column(s) in --columns, got {cols}")
    label = args.label
    builtin = None if args.data is not None else (args.builtin or DEFAULTS[stat][0])
    if stat == "auc" and not label:
        if builtin != DEFAULTS[stat][0]:
            raise ValueError("auc needs --label COLUMN (0/1)")
        label = DEFAULTS[stat][2]
    domains = resolve_domains(args, cols, builtin)
    path, source = (args.data, args.data) if builtin is None else (dataset_path(builtin), f"{builtin} (shipped)")
    d = load_csv(path, cols, label=label if stat == "auc" else None)
    return [d[c] for c in cols], (d[label] if stat == "auc" else None), source, cols, label, domains


def _rr_protocol(stat: str, domains, epsilon: float):
    """Algorithm 1 (Sec. 3) with bins from the public domains: the grid's points when a column's grid has
    at most RR_BINS points, else RR_BINS equal bins on [lower, upper]. Built (and validated) before any noise."""
    import numpy as np

    from pairwise.protocols.ldp.ustat import QuantizedUStatistic, Quantizer

    if all(d.span + 1 <= RR_BINS for d in domains):
        q = Quantizer.discrete([(d.lower + np.arange(d.span + 1) * d.step).tolist() for d in domains])
    else:
        q = Quantizer.uniform([d.lower for d in domains], [d.upper for d in domains], RR_BINS)
    kernels = {
        "variance": lambda a, b: (np.asarray(a) - np.asarray(b)) ** 2 / 2,
        "collision": lambda a, b: (np.asarray(a) == np.asarray(b)).astype(float),
    }
    return QuantizedUStatistic(kernels.get(stat, stat), q, epsilon)


def _rr_baseline(proto, cols, lab, domains, alpha: float) -> tuple[float, list[float]]:
    """Each user clamps into the public domain, quantizes and answers k-RR (OS CSPRNG): the unbiased estimate
    and its (1 - alpha) interval (:func:`pairwise.protocols.ldp.interval.alg1_interval`)."""
    import numpy as np

    from pairwise.dp.bounds import clamp
    from pairwise.protocols.ldp.interval import alg1_interval, alg1_kernel_range

    data = [clamp(c, d.lower, d.upper)[0] for c, d in zip(cols, domains)]
    if proto.two_sample:
        x, y = data[0], np.asarray(lab)
        iw = alg1_interval(proto.beta, 1.0, n_pos=int((y == 1).sum()), n_neg=int((y == 0).sum()), alpha=alpha)
        est = proto.estimate_two_sample(
            proto.randomize(proto.encode(x[y == 1])), proto.randomize(proto.encode(x[y == 0]))
        )
        return est, iw.around(est)
    pts = data[0] if len(data) == 1 else np.stack(data, 1)
    iw = alg1_interval(proto.beta, alg1_kernel_range((proto.matrix + proto.matrix.T) / 2), n=len(data[0]), alpha=alpha)
    est = proto.estimate(proto.randomize(proto.encode(pts)))
    return est, iw.around(est)


def _g(v) -> str:
    return "n/a (too many pairs to evaluate)" if v is None else f"{v:.6g}"


def cmd_ustat(args) -> int:
    from pairwise.dp.bounds import clamp_estimate
    from pairwise.protocols.ustat.driver import run_ustat

    from .options import warn

    if args.signed:
        deprecated("--signed", "--lower/--upper (values are shifted by the public lower bound)")
    spec = None
    if (args.statistic is None) == (args.kernel is None):
        raise ValueError("give --statistic NAME or --kernel MODULE:FUNCTION (one of them)")
    if args.kernel is not None:
        from pairwise.circuits.kernel_spec import load_kernel

        spec = load_kernel(args.kernel)  # imported and validated before any data is read
        args.statistic = spec.name
    cols, lab, source, names, label, domains = _load(args)
    stat = args.statistic
    for dom in domains:
        dom.span  # noqa: B018 - validates the public grid (PrivacyParameterError) before anything runs
    # validated before any noise; Algorithm 1's baseline needs a named statistic, so a user kernel has none
    rr = _rr_protocol(stat, domains, args.epsilon) if args.compare and spec is None else None
    bounds = dict(
        lower=[d.lower for d in domains], upper=[d.upper for d in domains], decimals=[d.scale_decimals for d in domains]
    )
    with progress_bar(args, f"{stat}: 2PC pairs", unit="pair") as progress:
        res = run_ustat(
            stat,
            cols[0],
            cols[1] if stat == "kendall" else None,
            lab,
            epsilon=args.epsilon,
            pairs_per_user=args.pairs_per_user,
            mode=args.mode,
            design=args.design,
            workers=args.workers,
            bits=args.bits,
            batch=args.batch,
            timeout=args.timeout,
            connect_timeout=args.connect_timeout,
            progress=progress,
            tls_dir=args.tls,
            noise=args.noise,
            pair_delta=args.pair_delta,
            cluster=args.cluster,
            alpha=args.alpha,
            compute_theorem5=args.compare,
            kernel=spec,
            **bounds,
        )
    d = res.as_dict()
    lo_nat, hi_nat = d["natural_range"]
    if rr is not None:
        d["rr_estimate"], d["rr_interval"] = (
            float(v) if not isinstance(v, list) else v for v in _rr_baseline(rr, cols, lab, domains, args.alpha)
        )
        d["rr_estimate_clamped"] = clamp_estimate(d["rr_estimate"], lo_nat, hi_nat)
    if not args.compare:
        for k in COMPARE_ONLY_KEYS:
            d.pop(k, None)
    d["data"] = source
    d["columns"] = names + ([label] if label else [])
    if d["clamped"] and not args.json:
        warn(clamped_note(d["clamped"], domains))
    if args.json:
        print(json.dumps(d))
        return 0
    name = NAMES.get(stat, f"kernel {args.kernel}") if spec is None else f"kernel {args.kernel}"
    dom = ", ".join(
        f"{c} in [{x['lower']:g}, {x['upper']:g}] ({x['decimals']} decimals)" for c, x in zip(names, d["domain"])
    )
    pct = f"{100 * (1 - args.alpha):g}%"
    print(f"{name} ({stat}) on {source}, columns {', '.join(d['columns'])}")
    print(f"  public domain    {dom}")
    print(
        f"  DP estimate      {res.estimate:.6g} (raw, unbiased); clamped to [{lo_nat:g}, {hi_nat:g}]: "
        f"{d['estimate_clamped']:.6g}"
    )
    print(
        f"  {pct} interval{' ' * max(1, 8 - len(pct))}{interval_line(d['interval'], None, (lo_nat, hi_nat))} "
        f"for the statistic of the clamped grid data; width {d['interval_width']:.4g} from public parameters "
        f"only (part of the release)"
    )
    print(f"  interval method  {d['interval_method']}")
    if d.get("kernel_check"):
        print(
            f"  kernel range     {d['natural_range'][0]:.6g} .. {d['natural_range'][1]:.6g} as declared, checked "
            f"{d['kernel_check']}"
        )
    if args.compare:
        print(
            f"  exact            {_g(d['exact'])} {NOT_PRIVATE}; on the clamped grid {_g(d['exact_quantized'])} "
            f"{NOT_PRIVATE}"
        )
        if d["sample_mse"] is not None:
            print(f"  predicted RMSE   {d['sample_mse'] ** 0.5:.4g} around the clamped-grid value {NOT_PRIVATE}")
        if d["theorem5_mse"] is not None:
            print(
                f"  Theorem 5 RMSE   {d['theorem5_mse'] ** 0.5:.4g} around the population value "
                f"({'two-sample analogue; ' if stat == 'auc' else ''}not private: uses the data's zetas)"
            )
        if rr is not None:
            print(
                f"  RR baseline      {d['rr_estimate']:.6g} (raw); clamped {d['rr_estimate_clamped']:.6g}; "
                f"{interval_line(d['rr_interval'], args.alpha, (lo_nat, hi_nat))}  "
                f"(Algorithm 1: quantization + k-ary RR, {rr.cells} cells: a second epsilon-LDP release)"
            )
        else:
            print("  RR baseline      none: Algorithm 1's baseline is defined for the named statistics only")
    print(
        f"  privacy          ({res.epsilon:g}, {res.delta:.3g})-DP per user for the 2PC estimate and its interval, "
        f"{res.pairs_per_user} pair(s) per user, eps {d['epsilon_per_pair']:.4g} per pair ({d['design']}, "
        f"{res.mode})"
        + (f"; with the RR baseline printed too, ({2 * res.epsilon:g}, {res.delta:.3g})" if rr is not None else "")
    )
    print(
        f"  noise            {d['noise']} in the circuit, variance <= {d['noise_variance_per_pair']:.4g} per pair "
        f"(eps {d['noise_epsilon_per_pair']:.4g}, delta {d['noise_delta_per_pair']:.3g} per pair)"
    )
    if d.get("pairs_per_user_rule"):
        print(f"  pairs per user   auto: P = {res.pairs_per_user} ({d['pairs_per_user_rule']})")
    print(
        f"  users / pairs    {res.n} / {res.pairs} 2PC executions of the kernel + noise circuit "
        f"({d['and_gates_per_pair']} AND each, {d['noise_and_gates_per_pair']} of them noise, {d['bits']}-bit words, "
        f"SIMD batches: {res.executions})"
    )
    if d.get("cluster"):
        print(f"  cluster          {d['cluster']}: {d['cluster_tasks']} Dask tasks on {d['cluster_workers']} worker(s)")
    print(f"  AND gates        {res.and_gates}")
    print(f"  bytes            {res.bytes} ({d['bytes_per_pair']:.0f} per pair)")
    if args.compare:
        print(f"  clamped          {clamped_note(d['clamped'], domains)}")
    print(f"  seconds          {res.seconds:.2f} {NOT_PRIVATE}")
    return 0
