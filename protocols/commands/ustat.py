"""``pairwise ustat``: the main job, DP U-statistics with the 2PC subsampling protocol.

``pairwise ustat --statistic (gini|kendall|auc) --epsilon E [--pairs-per-user P]
[--mode simulate|network] [--cluster local[:N]|tcp://HOST:PORT] [--design subsample|all] [--workers W] [--bits W [--signed]]
[--data FILE.csv --columns A[,B] [--label COLUMN]] [--json]``

Without ``--data`` it runs on real data shipped in ``protocols/data``
(SOURCES.md): gini on the diabetes disease-progression target (442 patients),
kendall on Fair's survey ratings rate_marriage vs religious (6366 people), auc
on the breast-cancer mean radius as a score for the malignant label (569).
JSON keys: ``statistic``, ``estimate``, ``exact``, ``epsilon``, ``delta``, ``n``,
``pairs``, ``and_gates``, ``bytes``, ``seconds`` (and more: ``theorem5_mse``, the
Algorithm 1 baseline ``rr_estimate`` on the same data and budget, ...).

Security model: see :mod:`pairwise.protocols.ustat.driver` (semi-honest 2PC, CDP).
"""

from __future__ import annotations

import json
import sys

DEFAULTS = {
    "gini": ("diabetes", ["progression"], None),
    "kendall": ("fair", ["rate_marriage", "religious"], None),
    "auc": ("breast_cancer", ["mean_radius"], "malignant"),
}


def register(root, groups) -> None:
    from ..cluster import add_cluster_argument

    p = root.add_parser("ustat", help="DP U-statistic (gini, kendall, auc) with the 2PC subsampling protocol")
    p.add_argument("--statistic", required=True, choices=sorted(DEFAULTS))
    p.add_argument("--epsilon", type=float, required=True, help="privacy budget per user (epsilon > 0)")
    p.add_argument("--pairs-per-user", type=int, default=1, help="P: pairs each user takes part in (default 1)")
    p.add_argument("--mode", choices=["simulate", "network"], default="simulate",
                   help="simulate: all pairs as real 2PC executions over an in-memory channel in this process; "
                        "network: users hosted by --workers processes, real 2PC over loopback TCP")
    add_cluster_argument(p, "simulate mode's SIMD batches (one Dask task each)")
    p.add_argument("--design", choices=["subsample", "all"], default="subsample",
                   help="subsample (the paper's protocol) or all pairs with advanced composition (baseline)")
    p.add_argument("--workers", type=int, default=4, help="worker processes in network mode (default 4)")
    p.add_argument("--bits", type=int, help="circuit width; with --data the values must be integers that fit it")
    p.add_argument("--signed", action="store_true", help="with --bits: values are signed (two's complement)")
    p.add_argument("--data", help="CSV file with a header row")
    p.add_argument("--columns", help="column(s): A for gini/auc scores, A,B for kendall")
    p.add_argument("--label", help="0/1 label column (auc)")
    p.add_argument("--batch", type=int, default=4096, help="pairs per SIMD execution (default 4096)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_ustat)


def _load(args):
    from ..datasets import load_csv, load_dataset

    stat = args.statistic
    if args.data is None:
        name, cols, label = DEFAULTS[stat]
        d = load_dataset(name)
        source = f"{name} (shipped)"
        cols_data = [d[c] for c in cols]
        lab = d[label] if label else None
        return cols_data, lab, source, cols, label
    if not args.columns:
        raise ValueError("--data needs --columns")
    cols = [c.strip() for c in args.columns.split(",") if c.strip()]
    want = 2 if stat == "kendall" else 1
    if len(cols) != want:
        raise ValueError(f"{stat} needs {want} column(s) in --columns, got {cols}")
    if stat == "auc" and not args.label:
        raise ValueError("auc needs --label COLUMN (0/1)")
    d = load_csv(args.data, cols, label=args.label if stat == "auc" else None)
    return [d[c] for c in cols], (d[args.label] if stat == "auc" else None), args.data, cols, args.label


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
    from ..ustat.driver import run_ustat

    cols, lab, source, names, label = _load(args)
    stat = args.statistic
    progress = None
    if not args.json and sys.stderr.isatty():
        def progress(done, total):
            w = 30
            k = int(w * done / total)
            print(f"\r  [{'#' * k}{'.' * (w - k)}] {done}/{total} pairs", end="", file=sys.stderr, flush=True)
    if args.bits is not None:
        from ..datasets import check_integer_range

        for c, name in zip(cols, names):
            check_integer_range(c, args.bits, args.signed, name)
    res = run_ustat(stat, cols[0], cols[1] if stat == "kendall" else None, lab, epsilon=args.epsilon,
                    pairs_per_user=args.pairs_per_user, mode=args.mode, design=args.design,
                    workers=args.workers, bits=args.bits, batch=args.batch, progress=progress,
                    cluster=args.cluster)
    if progress:
        print(file=sys.stderr)
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
    if d.get("cluster"):
        print(f"  cluster          {d['cluster']}: {d['cluster_tasks']} Dask tasks on {d['cluster_workers']} worker(s)")
    print(f"  AND gates        {res.and_gates}")
    print(f"  bytes            {res.bytes}")
    print(f"  seconds          {res.seconds:.2f}")
    return 0
