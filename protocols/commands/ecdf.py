"""``pairwise ecdf``: the multi-server differentially private ECDF service.

Commands
    ``pairwise ecdf serve --server-id I --listen HOST:PORT [--budget E] [--dataset-budget NAME=E ...]
    [--timeout S]``
        Run server I until killed.  Prints ``{"event": "listening", ...}`` on
        stdout once it accepts connections (port 0 picks a free port).
    ``pairwise ecdf run --servers HOST:PORT,HOST:PORT[,...] --data FILE.csv --column NAME --epsilon E
    --lower LO --upper HI [--label COL] [--roc] [--quantiles Q,...] [--domain-bits N] [--grid-bits G]
    [--mechanism paper|hierarchical] [--scheme auto|dcf|mshare|pointwise] [--dataset ID] [--json]``
        Be the clients (one per CSV row, id = row number) and the querier:
        each client clamps its value into the public domain [LO, HI] and
        quantizes it to 2^N equal bins; upload the keys, release the noisy
        ECDF of the column over the grid and print exact vs DP vs smoothed.
        ``--roc`` (with ``--label``) also releases the ROC curve with another
        epsilon.  ``--range LO,HI`` is a deprecated alias of ``--lower/--upper``.
        Every parameter (epsilon, quantile levels, grid, scheme, ...) is
        checked before anything is uploaded or any budget is charged.
    ``pairwise ecdf status --servers ... [--dataset ID] [--json]``
        Each server's clients and budget for a dataset.
    ``pairwise ecdf demo [--epsilon E] [--plot out.png] [--servers-count M] [--json]``
        (also ``pairwise demo ecdf``) Starts M (default 2) server processes on
        loopback, uploads the shipped breast_cancer data (mean_radius,
        quantized to 2^10 bins of its declared public domain [5, 30]; label
        malignant), releases the ECDF with epsilon and the ROC curve of
        mean_radius as a score for malignancy with another epsilon, prints
        exact vs DP vs smoothed, optionally plots them (matplotlib).

JSON keys of ``run`` and ``demo`` (public interface):

* DP outputs: ``dp`` (the raw noisy ECDF at the thresholds, unbiased, may
  leave [0, 1] and decrease), ``smoothed`` (Eq. (3) smoothing: the same
  release made non-decreasing and in [0, 1], i.e. clamped to the natural
  range), ``quantiles`` (Algorithm 1 on ``smoothed``), ``roc`` (``fpr``,
  ``tpr``, ``epsilon``, ``delta``) and ``auc`` (in [0, 1] by construction).
* Public parameters and costs: ``thresholds`` (real threshold values, the
  grid's upper bin edges, from the public domain), ``epsilon`` (of the ECDF
  release), ``epsilon_total``, ``delta``, ``n`` (clients, public),
  ``servers``, ``mechanism``, ``noise``, ``scheme``, ``grid_bits``,
  ``domain_bits``, ``range`` (the public domain [lower, upper]),
  ``theorem31_rmse``, ``bytes`` (all bytes on the wire: uploads, querier
  and server-to-server) and ``bytes_detail``, ``dataset``, ``upload``.
  The querier's byte count includes the servers' JSON timing reports, so
  ``bytes`` varies by a few bytes from run to run (never with the data).
* Not private (computed without noise, for evaluation only): ``exact``,
  ``max_abs_error``, ``max_abs_error_smoothed``, ``quantiles_exact``,
  ``roc.fpr_exact``, ``roc.tpr_exact``, ``auc_exact``, ``clamped`` (values
  clamped into the public domain by their owners).

Security model: see :mod:`pairwise.protocols.ecdf.server`.
"""

from __future__ import annotations

import json
import os
import sys

from .bounds import NOT_PRIVATE, add_bound_args, clamped_note, deprecated, resolve_domains

#: JSON keys (dotted for nested ones) that hold DP outputs or their post-processing.
DP_KEYS = ("dp", "smoothed", "quantiles", "roc.fpr", "roc.tpr", "auc")
#: JSON keys computed without noise: not private, for evaluation only. Every other key is a function of
#: public inputs and is identical on neighbouring datasets (tests/test_privacy_audit.py), except:
NOT_PRIVATE_KEYS = ("exact", "max_abs_error", "max_abs_error_smoothed", "quantiles_exact", "roc.fpr_exact",
                    "roc.tpr_exact", "auc_exact", "clamped")
#: byte counts that include the servers' JSON timing reports, so they vary by a few bytes from run to run.
MEASURED_KEYS = ("bytes", "bytes_detail.querier")

#: The demo's data: a shipped dataset, its column (public domain declared in protocols/data/domains.json), its label.
DEMO_DATA = ("breast_cancer", "mean_radius", "malignant")
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
    s.add_argument("--timeout", type=float, default=120.0, help="seconds any wait may take (default 120)")
    s.set_defaults(func=cmd_serve)

    r = sub.add_parser("run", help="upload a CSV column as clients and release its DP ECDF")
    _query_args(r)
    r.add_argument("--data", required=True, help="CSV file with a header row")
    r.add_argument("--column", required=True, help="numeric column")
    r.add_argument("--label", help="0/1 label column (ROC series)")
    r.add_argument("--roc", action="store_true", help="also release the ROC curve (needs --label, another epsilon)")
    r.add_argument("--dataset", help="dataset id on the servers (default FILE:COLUMN)")
    add_bound_args(r, "--column")
    r.add_argument("--range", help="deprecated alias of --lower LO --upper HI")
    r.add_argument("--domain-bits", type=int, default=10, help="quantization bits n (default 10)")
    r.add_argument("--scheme", choices=["auto", "dcf", "mshare", "pointwise"], default="auto",
                   help="auto: dcf keys for 2 servers, mshare for more; pointwise: the Sec. 4.1 baseline")
    r.set_defaults(func=cmd_run)

    st = sub.add_parser("status", help="each server's clients and budget")
    st.add_argument("--servers", required=True)
    st.add_argument("--dataset")
    st.add_argument("--timeout", type=float, default=30.0)
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)

    for parent in (sub, groups["demo"]):
        d = parent.add_parser("demo" if parent is sub else "ecdf",
                              help="ECDF and ROC of breast_cancer mean_radius with servers on loopback")
        d.add_argument("--epsilon", type=float, default=1.0, help="epsilon of the ECDF (and of the ROC) (default 1)")
        d.add_argument("--plot", help="write a PNG of true vs DP vs smoothed ECDF and the ROC (matplotlib)")
        d.add_argument("--servers-count", type=int, default=2, help="number of server processes (default 2)")
        d.add_argument("--mechanism", choices=["paper", "hierarchical"], default="paper")
        d.add_argument("--json", action="store_true")
        d.set_defaults(func=cmd_demo)


def _query_args(p) -> None:
    p.add_argument("--servers", required=True, help="HOST:PORT,HOST:PORT[,...] in server-id order")
    p.add_argument("--epsilon", type=float, required=True, help="epsilon of the ECDF release")
    p.add_argument("--grid-bits", type=int, help="threshold grid 2^G (default: the domain)")
    p.add_argument("--mechanism", choices=["paper", "hierarchical"], default="paper",
                   help="paper: Theorem 3.1 (default); hierarchical: noisy nodes + consistency")
    p.add_argument("--quantiles", help="comma-separated quantile levels, e.g. 0.25,0.5,0.75 (Algorithm 1)")
    p.add_argument("--tolerate", type=int, default=0,
                   help="m > 2: keep epsilon-DP against the querier colluding with this many servers")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for a server (default 600)")
    p.add_argument("--connect-timeout", type=float, default=5.0, help="seconds to reach a server (default 5)")
    p.add_argument("--json", action="store_true")


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
    from ..ecdf.shares import MAX_GRID_BITS
    from ..ecdf.wire import parse_epsilon

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
    if not isinstance(args.tolerate, int) or not 0 <= args.tolerate < m or (m == 2 and args.tolerate):
        raise ValueError(f"--tolerate must be in [0, m) (0 for two servers), got {args.tolerate}")
    return qs


def _release_and_report(querier, dataset, values, lo, hi, n_bits, args, labels=None, upload_bytes=0,
                        pointwise=False, qs=()):
    """Release the ECDF (and ROC), compare with the exact values; returns the JSON dict.

    ``qs``: quantile levels, validated by the caller before anything was uploaded.
    """
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
    print(f"  {'threshold':>12} {'exact*':>8} {'DP':>8} {'smoothed':>9}   (* not private)")
    for i in rows:
        print(f"  {th[i]:12.4g} {ex[i]:8.4f} {dp_[i]:8.4f} {sm[i]:9.4f}")
    print(f"  max |DP - exact| = {out['max_abs_error']:.4f}, smoothed {out['max_abs_error_smoothed']:.4f} "
          f"{NOT_PRIVATE}" + (f"; Theorem 3.1 RMSE {out['theorem31_rmse']:.4f}" if out.get("theorem31_rmse") else ""))
    print("  DP: raw noisy ECDF (unbiased, may leave [0, 1]); smoothed: Eq. (3), non-decreasing in [0, 1]")
    if "quantiles" in out:
        for q, v in out["quantiles"].items():
            print(f"  quantile {q}: DP {v:.4g}, exact {out['quantiles_exact'][q]:.4g} {NOT_PRIVATE}")
    if "auc" in out:
        print(f"  ROC: AUC DP {out['auc']:.4f}, exact {out['auc_exact']:.4f} {NOT_PRIVATE} (epsilon "
              f"{out['roc']['epsilon']:g}; total spent {out['epsilon_total']:g})")
    if "clamped" in out:
        from pairwise.dp.bounds import PublicDomain

        print(f"  clamped: {clamped_note(out['clamped'], [PublicDomain(*out['range'])])}")
    d = out["bytes_detail"]
    print(f"  bytes: {out['bytes']} (uploads {d['upload']}, querier {d['querier']}, between servers {d['servers']})")


def _run_domain(args):
    """The public domain of ``--column``: --lower/--upper, or the deprecated --range LO,HI."""
    if args.range is not None:
        deprecated("--range LO,HI", "--lower LO --upper HI")
        if args.lower is not None or args.upper is not None:
            raise ValueError("give either --lower/--upper or the deprecated --range, not both")
        parts = args.range.split(",")
        if len(parts) != 2:
            raise ValueError(f"--range must be LO,HI, got {args.range!r}")
        args.lower, args.upper = parts[0], parts[1]
    return resolve_domains(args, [args.column], None)[0]


def cmd_run(args) -> int:
    import numpy as np

    from pairwise.dp.bounds import clamp

    from ..datasets import load_csv
    from ..ecdf.client import ECDFQuerier, scheme_for, upload, upload_pointwise
    from ..ecdf.shares import quantize
    from ..ecdf.wire import parse_servers

    servers = parse_servers(args.servers)
    if args.roc and not args.label:
        raise ValueError("--roc needs --label COLUMN (0/1)")
    if args.roc and args.scheme == "pointwise":
        raise ValueError("--roc is not offered with the pointwise baseline")
    dom = _run_domain(args)
    qs = _validate_release_args(args, len(servers), args.domain_bits, args.roc)
    if args.scheme != "pointwise":
        scheme_for(args.scheme, len(servers), args.domain_bits)
    d = load_csv(args.data, [args.column], label=args.label)
    col, clamped = clamp(d[args.column], dom.lower, dom.upper)  # each client clamps its own value
    labels = np.asarray(d[args.label]).astype(int) if args.label else None
    lo, hi = dom.lower, dom.upper
    x = quantize(col, lo, hi, args.domain_bits)
    dataset = args.dataset or f"{os.path.basename(args.data)}:{args.column}"
    if args.scheme == "pointwise":
        g = args.grid_bits or args.domain_bits
        rep = upload_pointwise(servers, dataset, x, grid_bits=g, domain_bits=args.domain_bits,
                               timeout=args.timeout, connect_timeout=args.connect_timeout)
        labels_for_roc = None
    else:
        rep = upload(servers, dataset, x, labels=labels, domain_bits=args.domain_bits, scheme=args.scheme,
                     timeout=args.timeout, connect_timeout=args.connect_timeout)
        labels_for_roc = labels if args.roc else None
    q = ECDFQuerier(servers, timeout=args.timeout, connect_timeout=args.connect_timeout)
    out = _release_and_report(q, dataset, x, lo, hi, args.domain_bits, args, labels=labels_for_roc,
                              upload_bytes=rep.bytes, pointwise=args.scheme == "pointwise", qs=qs)
    out["dataset"] = dataset
    out["clamped"] = clamped
    out["upload"] = {"accepted": rep.accepted, "rejected_count": rep.rejected_count}
    if args.json:
        print(json.dumps(out))
        return 0
    _print_report(out, f"DP ECDF of {args.column} in {args.data} (dataset {dataset!r}, public domain [{lo:g}, {hi:g}])")
    if any(rep.rejected_count):
        print(f"  note: rejected clients per server {rep.rejected_count} "
              f"(first reasons: {[r[0]['reason'] for r in rep.rejected if r]})")
    return 0


def cmd_status(args) -> int:
    from fractions import Fraction

    from ..ecdf.client import ECDFQuerier

    q = ECDFQuerier(args.servers, timeout=args.timeout)
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
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    ax = axes[0]
    ax.step(out["thresholds"], out["exact"], where="post", label="exact", color="black")
    ax.plot(out["thresholds"], out["dp"], label=f"DP (eps={out['epsilon']:g})", alpha=0.6)
    ax.plot(out["thresholds"], out["smoothed"], label="DP smoothed (Eq. 3, p=2)")
    ax.set_xlabel("mean radius")
    ax.set_ylabel("ECDF")
    ax.legend()
    ax.set_title(f"breast_cancer mean_radius, n={out['n']}, {out['servers']} servers")
    if "roc" in out:
        ax = axes[1]
        ax.plot(out["roc"]["fpr_exact"], out["roc"]["tpr_exact"], color="black",
                label=f"exact (AUC {out['auc_exact']:.3f})")
        ax.plot(out["roc"]["fpr"], out["roc"]["tpr"], label=f"DP smoothed (AUC {out['auc']:.3f})")
        ax.plot([0, 1], [0, 1], ":", color="grey")
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        ax.set_title(f"ROC of mean_radius for malignant (eps={out['roc']['epsilon']:g})")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cmd_demo(args) -> int:
    import numpy as np

    from pairwise.dp.bounds import clamp

    from ..datasets import column_domain, load_dataset
    from ..ecdf.client import ECDFQuerier, ServerProcesses, upload
    from ..ecdf.shares import quantize
    from ..ecdf.wire import parse_epsilon

    name, column, label = DEMO_DATA
    dom = column_domain(name, column)
    args.grid_bits, args.tolerate, args.quantiles = None, 0, "0.25,0.5,0.75"
    qs = _validate_release_args(args, args.servers_count, DEMO_BITS, roc=True)
    if not 2 <= args.servers_count <= 16:
        raise ValueError(f"--servers-count must be in [2, 16], got {args.servers_count}")
    d = load_dataset(name)
    lo, hi = dom.lower, dom.upper
    col, clamped = clamp(d[column], lo, hi)  # each client clamps its own value
    x = quantize(col, lo, hi, DEMO_BITS)
    y = np.asarray(d[label]).astype(int)
    budget = max(10.0, 4 * float(parse_epsilon(args.epsilon)))
    dataset = f"{name}:{column}"
    with ServerProcesses(args.servers_count, budget=budget) as sp:
        rep = upload(sp.addresses, dataset, x, labels=y, domain_bits=DEMO_BITS)
        q = ECDFQuerier(sp.addresses, timeout=600)
        out = _release_and_report(q, dataset, x, lo, hi, DEMO_BITS, args, labels=y, upload_bytes=rep.bytes, qs=qs)
    out["dataset"] = dataset
    out["clamped"] = clamped
    if args.plot:
        _plot(out, args.plot)
        out["plot"] = args.plot
    if args.json:
        print(json.dumps(out))
        return 0
    _print_report(out, f"DP ECDF demo: {name} {column} ({x.size} patients) on {DEMO_BITS}-bit bins of "
                       f"its public domain [{lo:g}, {hi:g}], label {label}")
    if args.plot:
        print(f"  plot written to {args.plot}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from ..cli import main

    sys.exit(main(["ecdf", *sys.argv[1:]]))
