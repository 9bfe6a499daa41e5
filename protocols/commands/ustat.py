"""``pairwise ustat``: the main job, DP U-statistics with the 2PC subsampling protocol.

``pairwise ustat --statistic (gini|kendall|auc) --epsilon E [--pairs-per-user P]
[--mode simulate|network] [--design subsample|all] [--workers W] [--bits W [--signed]]
[--data FILE.csv | --builtin NAME] [--columns A[,B]] [--label COLUMN] [--batch B]
[--timeout S] [--connect-timeout S] [--progress|--no-progress] [--json]``

Without ``--data`` it runs on real data shipped in ``protocols/data``
(SOURCES.md): gini on the diabetes disease-progression target (442 patients),
kendall on Fair's survey ratings rate_marriage vs religious (6366 people), auc
on the breast-cancer mean radius as a score for the malignant label (569);
``--builtin NAME --columns ...`` picks other shipped columns.  A progress bar
over the 2PC pairs goes to stderr (``--progress``/``--no-progress``; default:
when stderr is a terminal).
JSON keys: ``statistic``, ``estimate``, ``exact``, ``epsilon``, ``delta``, ``n``,
``pairs``, ``and_gates``, ``bytes``, ``seconds`` (and more: ``theorem5_mse``, the
Algorithm 1 baseline ``rr_estimate`` on the same data and budget, ...).

Security model: see :mod:`pairwise.protocols.ustat.driver` (semi-honest 2PC, CDP).
"""

from __future__ import annotations

import json

from ..datasets import dataset_path
from .options import (
    add_builtin,
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
}


def register(root, groups) -> None:
    p = root.add_parser("ustat", help="DP U-statistic (gini, kendall, auc) with the 2PC subsampling protocol",
                        description="Estimate a U-statistic of n users' private values with differential "
                                    "privacy: sampled pairs of users run the kernel plus discrete-Laplace noise "
                                    "in a garbled circuit (ustats paper, Sec. 5).")
    p.add_argument("--statistic", required=True, choices=sorted(DEFAULTS),
                   help="gini (Gini mean difference), kendall (Kendall's tau-a) or auc (area under the ROC)")
    add_epsilon(p, what="privacy budget per user")
    p.add_argument("--pairs-per-user", type=positive_int, default=1, metavar="P",
                   help="pairs each user takes part in, 1..n-1 (default 1)")
    p.add_argument("--mode", choices=["simulate", "network"], default="simulate",
                   help="simulate: all pairs as real 2PC executions over an in-memory channel in this process; "
                        "network: users hosted by --workers processes, real 2PC over loopback TCP")
    p.add_argument("--design", choices=["subsample", "all"], default="subsample",
                   help="subsample (the paper's protocol) or all pairs with advanced composition (baseline)")
    p.add_argument("--workers", type=positive_int, default=4, metavar="W",
                   help="worker processes in network mode, 1..64 (default 4)")
    p.add_argument("--bits", type=int, metavar="W",
                   help="circuit width (8..64); with --data the values must be integers that fit it")
    p.add_argument("--signed", action="store_true", help="with --bits: values are signed (two's complement)")
    add_builtin(p, default=None, what="shipped dataset to read --columns from (default: "
                + "; ".join(f"{k}: {v[0]}" for k, v in sorted(DEFAULTS.items())) + ")")
    add_data(p, what="CSV file with a header row (instead of the shipped data)")
    add_columns(p, what="column(s): A for gini and auc scores, A,B for kendall")
    p.add_argument("--label", metavar="COLUMN", help="0/1 label column (auc)")
    p.add_argument("--batch", type=positive_int, default=4096, metavar="B",
                   help="pairs per SIMD execution (default 4096)")
    add_timeouts(p, timeout=120.0, connect_timeout=120.0, timeout_what="a worker (network mode)")
    add_progress(p)
    add_json(p)
    p.set_defaults(func=cmd_ustat)


def _load(args):
    from ..datasets import load_csv, load_dataset

    stat = args.statistic
    if args.data is not None and args.builtin is not None:
        raise ValueError("give either --data FILE.csv or --builtin NAME, not both")
    if args.data is None and not args.columns:
        if args.builtin not in (None, DEFAULTS[stat][0]):
            raise ValueError(f"--builtin {args.builtin} needs --columns for {stat}")
        name, cols, label = DEFAULTS[stat]
        d = load_dataset(name)
        source = f"{name} (shipped)"
        cols_data = [d[c] for c in cols]
        lab = d[label] if label else None
        return cols_data, lab, source, cols, label
    if not args.columns:
        raise ValueError("--data needs --columns")
    cols = list(args.columns)
    want = 2 if stat == "kendall" else 1
    if len(cols) != want:
        raise ValueError(f"{stat} needs {want} column(s) in --columns, got {cols}")
    label = args.label
    if stat == "auc" and not label:
        if args.data is None and (args.builtin or DEFAULTS[stat][0]) == DEFAULTS[stat][0]:
            label = DEFAULTS[stat][2]
        else:
            raise ValueError("auc needs --label COLUMN (0/1)")
    if args.data is None:
        name = args.builtin or DEFAULTS[stat][0]
        path, source = dataset_path(name), f"{name} (shipped)"
    else:
        path = source = args.data
    d = load_csv(path, cols, label=label if stat == "auc" else None)
    return [d[c] for c in cols], (d[label] if stat == "auc" else None), source, cols, label


def _rr_baseline(stat: str, cols, lab, epsilon: float) -> float:
    """Algorithm 1 (Sec. 3) on the same data and budget, with the OS CSPRNG: the data's own
    levels when it has at most 16 distinct values per column, else 16 bins on the data range."""
    import numpy as np

    from ..ldp.ustat import ldp_ustatistic

    if stat == "kendall":
        data = np.stack([cols[0], cols[1]], 1)
        levels = [np.unique(c).tolist() for c in cols[:2]]
        if max(len(lv) for lv in levels) <= 16:
            return float(ldp_ustatistic(data, stat, None, epsilon, levels=levels))
        return float(ldp_ustatistic(data, stat, 16, epsilon))
    return float(ldp_ustatistic(np.asarray(cols[0]), stat, 16, epsilon, labels=lab))


def cmd_ustat(args) -> int:
    from ..ustat.driver import check_magnitude, run_ustat

    cols, lab, source, names, label = _load(args)
    stat = args.statistic
    for c, name in zip(cols, names):
        check_magnitude(c, name)
    if args.bits is not None:
        from ..datasets import check_integer_range

        for c, name in zip(cols, names):
            check_integer_range(c, args.bits, args.signed, name)
    with progress_bar(args, f"{stat}: 2PC pairs", unit="pair") as progress:
        res = run_ustat(stat, cols[0], cols[1] if stat == "kendall" else None, lab, epsilon=args.epsilon,
                        pairs_per_user=args.pairs_per_user, mode=args.mode, design=args.design,
                        workers=args.workers, bits=args.bits, batch=args.batch, timeout=args.timeout,
                        connect_timeout=args.connect_timeout, progress=progress)
    d = res.as_dict()
    d["rr_estimate"] = _rr_baseline(stat, cols, lab, args.epsilon)
    d["data"] = source
    d["columns"] = names + ([label] if label else [])
    if args.json:
        print(json.dumps(d))
        return 0
    print(f"{stat} on {source}, columns {', '.join(d['columns'])}")
    print(f"  DP estimate      {res.estimate:.6g}")
    print(f"  exact            {res.exact:.6g}")
    if res.theorem5_mse is not None:
        print(f"  Theorem 5 RMSE   {res.theorem5_mse ** 0.5:.4g}")
    print(f"  RR baseline      {d['rr_estimate']:.6g}  (Algorithm 1: quantization + k-ary RR, same epsilon)")
    print(f"  privacy          ({res.epsilon:g}, {res.delta:.3g})-DP per user, {res.pairs_per_user} pair(s) per user, "
          f"eps {d['epsilon_per_pair']:.4g} per pair ({d['design']}, {res.mode})")
    print(f"  users / pairs    {res.n} / {res.pairs} 2PC executions of the kernel + noise circuit "
          f"({d['and_gates_per_pair']} AND each, SIMD batches: {res.executions})")
    print(f"  AND gates        {res.and_gates}")
    print(f"  bytes            {res.bytes}")
    print(f"  seconds          {res.seconds:.2f}")
    return 0
