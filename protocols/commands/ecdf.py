"""``pairwise ecdf``: the multi-server differentially private ECDF service.

Commands
    ``pairwise ecdf serve --server-id I --listen HOST:PORT [--budget E] [--dataset-budget NAME=E ...]
    [--timeout S]``
        Run server I until killed.  Prints ``{"event": "listening", ...}`` on
        stdout once it accepts connections (port 0 picks a free port).
    ``pairwise ecdf run --servers HOST:PORT,HOST:PORT[,...] --data FILE.csv --column NAME --epsilon E
    [--label COL] [--roc] [--quantiles Q,...] [--domain-bits N] [--grid-bits G] [--range LO,HI]
    [--mechanism paper|hierarchical] [--scheme auto|dcf|mshare|pointwise] [--dataset ID] [--json]``
        Be the clients (one per CSV row, id = row number) and the querier:
        upload the keys, release the noisy ECDF of the column over the grid
        and print exact vs DP vs smoothed.  ``--roc`` (with ``--label``)
        also releases the ROC curve with another epsilon.
    ``pairwise ecdf status --servers ... [--dataset ID] [--json]``
        Each server's clients and budget for a dataset.
    ``pairwise ecdf demo [--epsilon E] [--plot out.png] [--servers-count M] [--json]``
        (also ``pairwise demo ecdf``) Starts M (default 2) server processes on
        loopback, uploads the shipped breast_cancer data (mean_radius,
        quantized to 2^10 bins of the public range [5, 30]; label
        malignant), releases the ECDF with epsilon and the ROC curve of
        mean_radius as a score for malignancy with another epsilon, prints
        exact vs DP vs smoothed, optionally plots them (matplotlib).

JSON keys of ``run`` and ``demo`` (public interface): ``thresholds`` (real
threshold values, the grid's upper bin edges), ``exact``, ``dp``,
``smoothed`` (ECDF values in [0, 1] at those thresholds), ``epsilon`` (of the
ECDF release), ``bytes`` (all bytes on the wire: uploads, querier and
server-to-server), plus ``delta``, ``n``, ``servers``, ``bytes_detail``,
``quantiles``, ``roc``/``auc``/``auc_exact`` when computed.

Security model: see :mod:`pairwise.protocols.ecdf.server`.
"""

from __future__ import annotations

import json
import os
import sys

from .options import add_epsilon, add_json, add_timeouts, positive_int, seconds

DEMO_RANGE = (5.0, 30.0)
DEMO_BITS = 10


def register(root, groups) -> None:
    p = root.add_parser("ecdf", help="multi-server DP ECDF service (FSS keys, tree mechanism, 2PC noise)")
    sub = p.add_subparsers(dest="ecdf_command", metavar="WHAT")
    p.set_defaults(func=lambda args, _p=p: (_p.print_help(), 2)[1])

    s = sub.add_parser("serve", help="run one ECDF server")
    s.add_argument("--server-id", type=int, required=True, help="this server's index I (0..m-1)")
    s.add_argument("--listen", required=True, help="HOST:PORT to listen on (port 0: pick a free port)")
    s.add_argument("--budget", default="10", help="privacy budget (total epsilon) per dataset (default 10)")
    s.add_argument("--dataset-budget", action="append", default=[], metavar="NAME=E",
                   help="budget of one dataset (repeatable)")
    s.add_argument("--timeout", type=seconds, default=120.0, metavar="S",
                   help="seconds any wait on a client, querier or the other servers may take (default 120)")
    s.set_defaults(func=cmd_serve)

    r = sub.add_parser("run", help="upload a CSV column as clients and release its DP ECDF")
    _query_args(r)
    r.add_argument("--data", required=True, help="CSV file with a header row")
    r.add_argument("--column", required=True, help="numeric column")
    r.add_argument("--label", help="0/1 label column (ROC series)")
    r.add_argument("--roc", action="store_true", help="also release the ROC curve (needs --label, another epsilon)")
    r.add_argument("--dataset", help="dataset id on the servers (default FILE:COLUMN)")
    r.add_argument("--range", help="public range LO,HI of the column (default: the column's min,max)")
    r.add_argument("--domain-bits", type=int, default=10, help="quantization bits n (default 10)")
    r.add_argument("--scheme", choices=["auto", "dcf", "mshare", "pointwise"], default="auto",
                   help="auto: dcf keys for 2 servers, mshare for more; pointwise: the Sec. 4.1 baseline")
    r.set_defaults(func=cmd_run)

    st = sub.add_parser("status", help="each server's clients and budget")
    st.add_argument("--servers", required=True, metavar="HOST:PORT,...",
                    help="HOST:PORT,HOST:PORT[,...] of the servers, in server-id order")
    st.add_argument("--dataset", metavar="ID", help="only this dataset (default: every dataset on the servers)")
    add_timeouts(st, timeout=30.0, connect_timeout=5.0, timeout_what="a server")
    add_json(st, "print one JSON list, one object per server")
    st.set_defaults(func=cmd_status)

    for parent in (sub, groups["demo"]):
        d = parent.add_parser("demo" if parent is sub else "ecdf",
                              help="ECDF and ROC of breast_cancer mean_radius with servers on loopback")
        add_epsilon(d, default=1.0, what="epsilon of the ECDF release (the ROC spends the same again)")
        d.add_argument("--plot", help="write a PNG of true vs DP vs smoothed ECDF and the ROC (matplotlib)")
        d.add_argument("--servers-count", type=positive_int, default=2, metavar="M",
                       help="number of server processes, 2 or more (default 2)")
        d.add_argument("--mechanism", choices=["paper", "hierarchical"], default="paper",
                       help="paper: Theorem 3.1 (default); hierarchical: noisy nodes + consistency")
        add_json(d)
        d.set_defaults(func=cmd_demo)


def _query_args(p) -> None:
    p.add_argument("--servers", required=True, help="HOST:PORT,HOST:PORT[,...] in server-id order")
    add_epsilon(p, what="epsilon of the ECDF release (--roc spends the same again)")
    p.add_argument("--grid-bits", type=int, help="threshold grid 2^G (default: the domain)")
    p.add_argument("--mechanism", choices=["paper", "hierarchical"], default="paper",
                   help="paper: Theorem 3.1 (default); hierarchical: noisy nodes + consistency")
    p.add_argument("--quantiles", help="comma-separated quantile levels, e.g. 0.25,0.5,0.75 (Algorithm 1)")
    p.add_argument("--tolerate", type=int, default=0,
                   help="m > 2: keep epsilon-DP against the querier colluding with this many servers")
    add_timeouts(p, timeout=600.0, connect_timeout=5.0, timeout_what="a server")
    add_json(p)


def _budgets(items) -> dict:
    out = {}
    for it in items:
        name, sep, val = it.partition("=")
        if not sep or not name:
            raise ValueError(f"--dataset-budget needs NAME=E, got {it!r}")
        out[name] = val
    return out


def cmd_serve(args) -> int:
    from ..ecdf.server import ECDFServer
    from ..ecdf.wire import parse_address

    host, port = parse_address(args.listen)
    srv = ECDFServer(args.server_id, host, port, budget=args.budget,
                     dataset_budgets=_budgets(args.dataset_budget), timeout=args.timeout)
    print(json.dumps({"event": "listening", "server_id": args.server_id, "host": host, "port": srv.port}),
          flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def _quantile_levels(text):
    if not text:
        return []
    try:
        qs = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--quantiles must be comma-separated numbers, got {text!r}") from None
    if any(not 0 < q <= 1 for q in qs):
        raise ValueError("quantile levels must lie in (0, 1]")
    return qs


def _release_and_report(querier, dataset, values, lo, hi, n_bits, args, labels=None, upload_bytes=0,
                        pointwise=False):
    """Release the ECDF (and ROC), compare with the exact values; returns the JSON dict."""
    import numpy as np

    from pairwise.dp.ecdf import auc, inverse_ecdf
    from ..ecdf.client import roc_points
    from ..ecdf.shares import bin_upper_edges

    g = args.grid_bits or n_bits
    if labels is not None:
        _check_budget(querier, dataset, 2 * args.epsilon)
    rel = querier.ecdf(dataset, args.epsilon, grid_bits=g, mechanism=args.mechanism, tolerate=args.tolerate)
    step = 1 << (n_bits - g)
    x = np.asarray(values, dtype=np.int64)
    exact_counts = np.array([(x <= (t + 1) * step - 1).sum() for t in rel.thresholds], dtype=float)
    n = x.size
    edges = bin_upper_edges(lo, hi, n_bits, g)[rel.thresholds]
    out = {"thresholds": edges.tolist(), "exact": (exact_counts / n).tolist(), "dp": rel.ecdf.tolist(),
           "smoothed": rel.smoothed.tolist(), "epsilon": rel.epsilon, "delta": rel.delta, "n": rel.n,
           "servers": rel.servers, "mechanism": rel.mechanism, "noise": rel.noise,
           "scheme": "pointwise" if pointwise else ("dcf" if rel.servers == 2 else "mshare"),
           "grid_bits": g, "domain_bits": n_bits, "range": [lo, hi],
           "max_abs_error": float(np.abs(rel.ecdf - exact_counts / n).max()),
           "max_abs_error_smoothed": float(np.abs(rel.smoothed - exact_counts / n).max()),
           "theorem31_rmse": None if rel.mse_per_threshold is None else float(np.sqrt(rel.mse_per_threshold) / n)}
    detail = {"upload": upload_bytes, "querier": rel.bytes.get("querier", 0), "servers": rel.bytes.get("servers", 0)}
    qs = _quantile_levels(getattr(args, "quantiles", None))
    if qs:
        qi = np.atleast_1d(rel.quantiles(qs))
        pos = np.searchsorted(rel.thresholds, qi)
        out["quantiles"] = {str(q): float(edges[p]) for q, p in zip(qs, pos)}
        ex = np.atleast_1d(np.asarray(inverse_ecdf(exact_counts / n, qs)))
        out["quantiles_exact"] = {str(q): float(edges[i]) for q, i in zip(qs, ex)}
    if labels is not None:
        roc = querier.roc(dataset, args.epsilon, grid_bits=g, mechanism=args.mechanism, tolerate=args.tolerate)
        y = np.asarray(labels).astype(int)
        cp = np.array([((x <= (t + 1) * step - 1) & (y == 1)).sum() for t in range(1 << g)], dtype=float)
        cn = np.array([((x <= (t + 1) * step - 1) & (y == 0)).sum() for t in range(1 << g)], dtype=float)
        f_ex, t_ex = roc_points(cp, cn)
        out["roc"] = {"fpr": roc.fpr.tolist(), "tpr": roc.tpr.tolist(), "fpr_exact": f_ex.tolist(),
                      "tpr_exact": t_ex.tolist(), "epsilon": roc.epsilon, "delta": roc.delta}
        out["auc"] = roc.auc
        out["auc_exact"] = auc(f_ex, t_ex)
        detail["querier"] += roc.positives.bytes.get("querier", 0)  # one release for both classes
        detail["servers"] += roc.positives.bytes.get("servers", 0)
        out["epsilon_total"] = rel.epsilon + roc.epsilon
    out["bytes_detail"] = detail
    out["bytes"] = int(sum(detail.values()))
    return out


def _check_budget(querier, dataset: str, need: float) -> None:
    """Refuse early if a server cannot afford ``need`` (ECDF + ROC), instead of failing after the first release."""
    from fractions import Fraction

    from ..ecdf.wire import BudgetExceeded

    for st in querier.status(dataset):
        i = st["info"]
        left = Fraction(i["budget"]) - Fraction(i["spent"]) - Fraction(i["reserved"])
        if left < Fraction(str(need)):
            raise BudgetExceeded(f"server {st['server_id']}: dataset {dataset!r} has {float(left):g} of its privacy "
                                 f"budget left; the ECDF and the ROC need {need:g}")


def _print_report(out: dict, title: str) -> None:
    import numpy as np

    print(title)
    print(f"  servers {out['servers']} ({out['scheme']} keys, {out['noise']} noise), n = {out['n']}, "
          f"grid 2^{out['grid_bits']} thresholds, {out['mechanism']} tree, "
          f"({out['epsilon']:g}, {out['delta']:.2g})-DP")
    th, ex, dp_, sm = (np.asarray(out[k]) for k in ("thresholds", "exact", "dp", "smoothed"))
    rows = np.unique(np.linspace(0, th.size - 1, min(th.size, 11)).round().astype(int))
    print(f"  {'threshold':>12} {'exact':>8} {'DP':>8} {'smoothed':>9}")
    for i in rows:
        print(f"  {th[i]:12.4g} {ex[i]:8.4f} {dp_[i]:8.4f} {sm[i]:9.4f}")
    print(f"  max |DP - exact| = {out['max_abs_error']:.4f}, smoothed {out['max_abs_error_smoothed']:.4f}"
          + (f" (Theorem 3.1 RMSE {out['theorem31_rmse']:.4f})" if out.get("theorem31_rmse") else ""))
    if "quantiles" in out:
        for q, v in out["quantiles"].items():
            print(f"  quantile {q}: DP {v:.4g}, exact {out['quantiles_exact'][q]:.4g}")
    if "auc" in out:
        print(f"  ROC: AUC DP {out['auc']:.4f}, exact {out['auc_exact']:.4f} (epsilon {out['roc']['epsilon']:g}; "
              f"total spent {out['epsilon_total']:g})")
    d = out["bytes_detail"]
    print(f"  bytes: {out['bytes']} (uploads {d['upload']}, querier {d['querier']}, between servers {d['servers']})")


def cmd_run(args) -> int:
    import numpy as np

    from ..datasets import load_csv
    from ..ecdf.client import ECDFQuerier, upload, upload_pointwise
    from ..ecdf.shares import quantize
    from ..ecdf.wire import parse_servers

    servers = parse_servers(args.servers)
    if args.roc and not args.label:
        raise ValueError("--roc needs --label COLUMN (0/1)")
    d = load_csv(args.data, [args.column], label=args.label)
    col = np.asarray(d[args.column], dtype=float)
    labels = np.asarray(d[args.label]).astype(int) if args.label else None
    if args.range:
        try:
            lo, hi = (float(v) for v in args.range.split(","))
        except ValueError:
            raise ValueError(f"--range must be LO,HI, got {args.range!r}") from None
    else:
        lo, hi = float(col.min()), float(col.max())
    x = quantize(col, lo, hi, args.domain_bits)
    dataset = args.dataset or f"{os.path.basename(args.data)}:{args.column}"
    if args.scheme == "pointwise":
        g = args.grid_bits or args.domain_bits
        rep = upload_pointwise(servers, dataset, x, grid_bits=g, domain_bits=args.domain_bits,
                               timeout=args.timeout, connect_timeout=args.connect_timeout)
        labels_for_roc = None
        if args.roc:
            raise ValueError("--roc is not offered with the pointwise baseline")
    else:
        rep = upload(servers, dataset, x, labels=labels, domain_bits=args.domain_bits, scheme=args.scheme,
                     timeout=args.timeout, connect_timeout=args.connect_timeout)
        labels_for_roc = labels if args.roc else None
    q = ECDFQuerier(servers, timeout=args.timeout, connect_timeout=args.connect_timeout)
    out = _release_and_report(q, dataset, x, lo, hi, args.domain_bits, args, labels=labels_for_roc,
                              upload_bytes=rep.bytes, pointwise=args.scheme == "pointwise")
    out["dataset"] = dataset
    out["upload"] = {"accepted": rep.accepted, "rejected_count": rep.rejected_count}
    if args.json:
        print(json.dumps(out))
        return 0
    _print_report(out, f"DP ECDF of {args.column} in {args.data} (dataset {dataset!r}, range [{lo:g}, {hi:g}])")
    if any(rep.rejected_count):
        print(f"  note: rejected clients per server {rep.rejected_count} "
              f"(first reasons: {[r[0]['reason'] for r in rep.rejected if r]})")
    return 0


def cmd_status(args) -> int:
    from fractions import Fraction

    from ..ecdf.client import ECDFQuerier

    q = ECDFQuerier(args.servers, timeout=args.timeout, connect_timeout=args.connect_timeout)
    st = q.status(args.dataset)
    if args.json:
        print(json.dumps(st))
        return 0
    for r in st:
        infos = [r["info"]] if "info" in r else r.get("datasets", [])
        print(f"server {r['server_id']}: {len(infos)} dataset(s)")
        for i in infos:
            print(f"  {i['dataset']}: {i['clients']} clients, {i['scheme']} m={i['m']}, series {sorted(i['series'])}, "
                  f"spent {float(Fraction(i['spent'])):g} of {float(Fraction(i['budget'])):g}")
    return 0


def _plot(out: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("--plot needs matplotlib (pip install 'pairwise-mpc[plot]')") from None
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    ax = axes[0]
    ax.step(out["thresholds"], out["exact"], where="post", label="exact (not private)", color="black")
    ax.plot(out["thresholds"], out["dp"], label=f"DP release (epsilon = {out['epsilon']:g})", alpha=0.6)
    ax.plot(out["thresholds"], out["smoothed"], label="DP release, smoothed (Eq. 3, p = 2)")
    ax.set_xlabel("mean radius of the cell nuclei (dataset units)")
    ax.set_ylabel("ECDF: fraction of patients with\nmean radius <= x")
    ax.legend()
    ax.set_title(f"ECDF, n = {out['n']} patients, {out['servers']} servers, {len(out['thresholds'])} thresholds",
                 fontsize=10)
    if "roc" in out:
        ax = axes[1]
        ax.plot(out["roc"]["fpr_exact"], out["roc"]["tpr_exact"], color="black",
                label=f"exact, not private (AUC {out['auc_exact']:.3f})")
        ax.plot(out["roc"]["fpr"], out["roc"]["tpr"], label=f"DP, smoothed (AUC {out['auc']:.3f})")
        ax.plot([0, 1], [0, 1], ":", color="grey", label="chance (AUC 0.5)")
        ax.set_xlabel("false positive rate (benign flagged, fraction)")
        ax.set_ylabel("true positive rate (malignant flagged, fraction)")
        ax.set_title(f"ROC of mean radius as a score for malignancy (epsilon = {out['roc']['epsilon']:g})",
                     fontsize=10)
        ax.legend()
    fig.suptitle("Differentially private ECDF and ROC from the multi-server service (breast_cancer data)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cmd_demo(args) -> int:
    import numpy as np

    from ..datasets import load_dataset
    from ..ecdf.client import ECDFQuerier, ServerProcesses, upload
    from ..ecdf.shares import quantize

    d = load_dataset("breast_cancer")
    lo, hi = DEMO_RANGE
    x = quantize(d["mean_radius"], lo, hi, DEMO_BITS)
    y = np.asarray(d["malignant"]).astype(int)
    budget = max(10.0, 4 * args.epsilon)
    with ServerProcesses(args.servers_count, budget=budget) as sp:
        rep = upload(sp.addresses, "breast_cancer:mean_radius", x, labels=y, domain_bits=DEMO_BITS)
        q = ECDFQuerier(sp.addresses, timeout=600)
        args.grid_bits, args.tolerate, args.quantiles = None, 0, "0.25,0.5,0.75"
        out = _release_and_report(q, "breast_cancer:mean_radius", x, lo, hi, DEMO_BITS, args, labels=y,
                                  upload_bytes=rep.bytes)
    out["dataset"] = "breast_cancer:mean_radius"
    if args.plot:
        _plot(out, args.plot)
        out["plot"] = args.plot
    if args.json:
        print(json.dumps(out))
        return 0
    _print_report(out, f"DP ECDF demo: breast_cancer mean_radius (569 patients) on {DEMO_BITS}-bit bins of "
                       f"[{lo:g}, {hi:g}], label malignant")
    if args.plot:
        print(f"  plot written to {args.plot}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from ..cli import main

    sys.exit(main(["ecdf", *sys.argv[1:]]))
