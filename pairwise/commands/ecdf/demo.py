"""``pairwise ecdf demo`` (also ``pairwise demo ecdf``): servers on loopback, the shipped data, ECDF and ROC.

Like every command, it prints the DP releases alone by default; ``--compare`` adds the exact ECDF, quantiles,
ROC and AUC of the shipped data next to them (and to ``--plot``'s curves), as ``ldp`` does on shipped data.

Security model: see :mod:`pairwise.protocols.ecdf.server`; the demo makes a
throwaway CA and runs every connection in mutual TLS.
"""

from __future__ import annotations

import json

from ..options import progress_bar
from .release import UPLOAD_BAR, ReleaseInputs, _print_report, _release_and_report, _release_bar, _validate_release_args

#: The demo's data: a shipped dataset, its column (public domain declared in protocols/data/domains.json), its label.
DEMO_DATA = ("breast_cancer", "mean_radius", "malignant")
DEMO_BITS = 10


#: How to get matplotlib: the ``plot`` extra, installed from a checkout (pairwise-mpc is not on PyPI yet).
PLOT_HINT = "pip install -e '.[plot]' in a checkout of pairwise"


def _plot(out: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError(f"--plot needs matplotlib: {PLOT_HINT}") from None
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    ax = axes[0]
    if "exact" in out:  # --compare: the exact curves (not private) next to the release
        ax.step(out["thresholds"], out["exact"], where="post", label="exact (not private)", color="black")
    ax.plot(out["thresholds"], out["dp"], label=f"DP release (epsilon = {out['epsilon']:g})", alpha=0.6)
    ax.plot(out["thresholds"], out["smoothed"], label="DP release, smoothed (Eq. 3, p = 2)")
    ax.set_xlabel("mean radius of the cell nuclei (dataset units)")
    ax.set_ylabel("ECDF: fraction of patients with\nmean radius <= x")
    ax.legend()
    ax.set_title(
        f"ECDF, n = {out['n']} patients, {out['servers']} servers, {len(out['thresholds'])} thresholds", fontsize=10
    )
    if "roc" in out:
        ax = axes[1]
        if "auc_exact" in out:
            ax.plot(
                out["roc"]["fpr_exact"],
                out["roc"]["tpr_exact"],
                color="black",
                label=f"exact, not private (AUC {out['auc_exact']:.3f})",
            )
        ax.plot(out["roc"]["fpr"], out["roc"]["tpr"], label=f"DP, smoothed (AUC {out['auc']:.3f}, plug-in)")
        ax.plot([0, 1], [0, 1], ":", color="grey", label="chance (AUC 0.5)")
        ax.set_xlabel("false positive rate (benign flagged, fraction)")
        ax.set_ylabel("true positive rate (malignant flagged, fraction)")
        ax.set_title(f"ROC of mean radius as a score for malignancy (epsilon = {out['roc']['epsilon']:g})", fontsize=10)
        ax.legend()
    fig.suptitle("Differentially private ECDF and ROC from the multi-server service (breast_cancer data)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _interrupt_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt in this (main) thread, so ``with`` blocks clean up children."""
    import signal

    def handler(num, _frame):
        signal.signal(num, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        raise KeyboardInterrupt(f"{signal.Signals(num).name}")

    signal.signal(signal.SIGTERM, handler)


def _demo_cluster(spec):
    """``demo --cluster``: a local spec (each server starts a LocalCluster of its own), else refused."""
    if spec is None:
        return None
    from pairwise.protocols.cluster import parse_cluster

    if not parse_cluster(spec).local:
        raise ValueError(
            f"ecdf demo --cluster takes local or local:N (a cluster per server), not {spec!r}: one "
            "scheduler for every server would let a worker hold all servers' key shares; start the "
            "servers with ecdf serve --cluster, each with its own scheduler, and use ecdf run"
        )
    return spec


def cmd_demo(args) -> int:
    import numpy as np

    from pairwise.dp.bounds import clamp
    from pairwise.protocols.datasets import column_domain, load_dataset
    from pairwise.protocols.ecdf.client import ECDFQuerier, ServerProcesses, upload
    from pairwise.protocols.ecdf.shares import quantize
    from pairwise.protocols.ecdf.wire import parse_epsilon

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
    cluster = _demo_cluster(args.cluster)
    _interrupt_on_sigterm()  # SIGTERM unwinds like Ctrl-C: the server processes are stopped on the way out
    # more than two servers take mshare keys, which the servers cannot check: this demo's own clients are honest
    unverified = ("--accept-unverified",) if args.servers_count > 2 else ()
    with ServerProcesses(
        args.servers_count,
        budget=budget,
        tls=True,
        startup_timeout=args.connect_timeout,
        cluster=cluster,
        extra_args=unverified,
    ) as sp:  # a throwaway CA, mutual TLS
        with progress_bar(args, UPLOAD_BAR, unit="client") as progress:
            rep = upload(
                sp.addresses,
                dataset,
                x,
                labels=y,
                domain_bits=DEMO_BITS,
                tls=sp.client_tls,
                timeout=args.timeout,
                connect_timeout=args.connect_timeout,
                progress=progress,
            )
        ref, ref_y = (x, y) if args.compare else (None, None)  # the exact reference: --compare only, as in run
        q = ECDFQuerier(sp.addresses, timeout=args.timeout, connect_timeout=args.connect_timeout, tls=sp.querier_tls)
        with progress_bar(args, _release_bar(True), unit="stage") as progress:
            out = _release_and_report(
                q,
                dataset,
                ReleaseInputs(lo, hi, DEMO_BITS, values=ref, labels=ref_y, upload_bytes=rep.bytes, qs=qs, roc=True),
                args,
                progress=progress,
            )
    out["dataset"] = dataset
    out["clamped"] = clamped
    if args.plot:
        _plot(out, args.plot)
        out["plot"] = args.plot
    if args.json:
        print(json.dumps(out))
        return 0
    _print_report(
        out,
        f"DP ECDF demo: {name} {column} ({x.size} patients) on {DEMO_BITS}-bit bins of "
        f"its public domain [{lo:g}, {hi:g}], label {label}",
        compare=args.compare,
    )
    if args.plot:
        print(f"  plot written to {args.plot}")
    return 0
