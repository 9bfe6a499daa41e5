"""Bias of the ECDF service's ROC AUC as a function of n and epsilon, and the replacement's interval coverage.

The service releases the positives' and the negatives' cumulative counts
with epsilon / 2 each (Sec. 5.1).  Two estimators of the AUC (the one of the
release grid: P(pos above neg) + P(same bin) / 2) are compared on the same
simulated releases (:mod:`pairwise.protocols.ecdf.simulate`, the servers'
exact noise law, seeded):

* ``smoothed``: the service's AUC before issue 25 -- Eq. (3) smoothing (p = 2,
  bounds [0, n]) of each class, ROC points normalised by the smoothed class
  totals, trapezoids;
* ``plug-in``: U^ / (n^_pos (n - n^_pos)) from the raw releases (unbiased
  numerator, :func:`pairwise.dp.ecdf_intervals.auc_estimate`), with its 95%
  interval (:func:`pairwise.protocols.ecdf.estimates.roc_auc_interval`).

Data: the demo's breast-cancer mean radius on its public domain (10-bit
bins, 569 patients), and resamples of it (with replacement, seeded) to other
n; the exact AUC is that of each sample.  Usage::

    python benchmarks/ecdf_auc_bias.py [--reps 200] [--grid-bits 10] [--ns 569,2000] [--eps 1,2,4,8]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from pairwise.dp.ecdf import auc as trapezoid_auc
from pairwise.dp.smoothing import smooth_ecdf
from pairwise.protocols.datasets import column_domain, load_dataset
from pairwise.protocols.ecdf.estimates import roc_auc_interval
from pairwise.protocols.ecdf.querier import roc_points
from pairwise.protocols.ecdf.shares import quantize
from pairwise.protocols.ecdf.simulate import service_noise_map, simulate_cumulative


def demo_scores(grid_bits: int):
    d = load_dataset("breast_cancer")
    dom = column_domain("breast_cancer", "mean_radius")
    x = quantize(np.clip(d["mean_radius"], dom.lower, dom.upper), dom.lower, dom.upper, grid_bits)
    return np.asarray(x, dtype=np.int64), np.asarray(d["malignant"]).astype(int)


def exact_auc(hp, hn) -> float:
    cn = np.cumsum(hn)
    return float((hp * (np.concatenate([[0], cn[:-1]]) + hn / 2)).sum() / (hp.sum() * hn.sum()))


def smoothed_auc(cp, cn, n) -> float:
    p = smooth_ecdf(cp, 2, lower=0.0, upper=float(n))
    q = smooth_ecdf(cn, 2, lower=0.0, upper=float(n))
    try:
        f, t = roc_points(p, q)
    except Exception:  # a class total smoothed to 0: the service refuses; count as missing
        return float("nan")
    return float(trapezoid_auc(f, t))


def run(n: int, eps: float, grid_bits: int, reps: int, seed: int, mechanism: str = "paper") -> dict:
    rng = np.random.default_rng(seed)
    x, y = demo_scores(grid_bits)
    if n != x.size:
        idx = rng.integers(0, x.size, n)
        x, y = x[idx], y[idx]
    N = 1 << grid_bits
    hp, hn = np.bincount(x[y == 1], minlength=N), np.bincount(x[y == 0], minlength=N)
    A = exact_auc(hp, hn)
    nm_pos = service_noise_map(mechanism, grid_bits, eps / 2, root_public=False)
    nm_neg = service_noise_map(mechanism, grid_bits, eps / 2, root_public=False)
    P = simulate_cumulative(hp, nm_pos, rng, reps)
    Q = simulate_cumulative(hn, nm_neg, rng, reps)
    sm, pl, cover, width = [], [], 0, []
    for r in range(reps):
        sm.append(smoothed_auc(P[r], Q[r], n))
        iv = roc_auc_interval(P[r], Q[r], n, nm_pos, nm_neg, 0.05)
        pl.append(iv.estimate)
        cover += iv.interval[0] <= A <= iv.interval[1]
        width.append(iv.interval[1] - iv.interval[0])
    sm, pl = np.array(sm), np.array(pl)

    def stats(v):
        v = v[np.isfinite(v)]
        return float(v.mean() - A), float(v.std(ddof=1) / math.sqrt(v.size)), float(v.std(ddof=1)), v.size

    return {
        "n": n,
        "eps": eps,
        "exact": A,
        "smoothed": stats(sm),
        "plugin": stats(pl),
        "below": float(np.mean(sm[np.isfinite(sm)] < A)),
        "cover": cover / reps,
        "width": float(np.mean(width)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--grid-bits", type=int, default=10)
    ap.add_argument("--ns", default="569,2000,10000")
    ap.add_argument("--eps", default="1,2,4,8")
    ap.add_argument("--mechanism", default="paper")
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args()
    print(
        f"grid 2^{a.grid_bits}, {a.mechanism} mechanism, {a.reps} simulated releases per row, ROC epsilon "
        "split eps/2 per class; bias = mean - exact (standard error)"
    )
    print(
        "| n | eps | exact AUC | smoothed: bias (se) | smoothed below exact | smoothed sd | plug-in: bias (se) "
        "| plug-in sd | 95% interval coverage | mean width |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.time()
    for n in (int(v) for v in a.ns.split(",")):
        for eps in (float(v) for v in a.eps.split(",")):
            r = run(n, eps, a.grid_bits, a.reps, a.seed + n + int(eps * 10), a.mechanism)
            s, p = r["smoothed"], r["plugin"]
            print(
                f"| {n} | {eps:g} | {r['exact']:.4f} | {s[0]:+.4f} ({s[1]:.4f}) | {r['below']:.2f} | {s[2]:.4f} "
                f"| {p[0]:+.4f} ({p[1]:.4f}) | {p[2]:.4f} | {r['cover']:.3f} | {r['width']:.3f} |",
                flush=True,
            )
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
