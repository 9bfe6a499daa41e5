"""Per-threshold MSE of the ECDF service's mechanisms: paper (Theorem 3.1), hierarchical (binary) and k-ary.

Closed form: every release is exact counts plus a public linear map of i.i.d.
discrete Laplace node noise, so threshold t's MSE is |w_t|^2 Var(DL(a)) with
a = exp(-eps_v), eps_v = eps / (L + 1) (paper: w_t = L + 1 ones) or
eps / (2h) (trees of h levels below the public root, least-squares
consistent).  The table gives the mean over the 2^g thresholds, in counts^2,
and paper / k-ary.  Measured: ``--reps`` releases of the demo data
(breast-cancer mean radius, 569 patients, its public domain) simulated with
the servers' exact law (:mod:`pairwise.protocols.ecdf.simulate`), empirical
mean squared error over all thresholds.  ``--dominance``: instead, for every
grid the service accepts (2^1 .. 2^20), whether the closed-form bound
``dominates_paper`` holds (k-ary below the paper at every threshold and every
epsilon; public root and class series).  Usage::

    python benchmarks/ecdf_mechanisms_mse.py [--grids 6,8,10,12] [--eps 0.1,1,10] [--reps 2000]
    python benchmarks/ecdf_mechanisms_mse.py --dominance
"""

from __future__ import annotations

import argparse

import numpy as np

from pairwise.protocols.datasets import column_domain, load_dataset
from pairwise.protocols.ecdf.shares import quantize
from pairwise.protocols.ecdf.simulate import service_noise_map, simulate_cumulative

MECHS = ("paper", "hierarchical", "kary")


def closed_form(mechanism: str, g: int, eps: float) -> float:
    nm = service_noise_map(mechanism, g, eps)
    if nm.radices is None:
        return (g + 1) * nm.law.variance
    sq, _ = nm.prefix_map.threshold_norms()
    return float(sq.mean()) * nm.law.variance


def measured(mechanism: str, g: int, eps: float, reps: int) -> float:
    d = load_dataset("breast_cancer")
    dom = column_domain("breast_cancer", "mean_radius")
    x = quantize(np.clip(d["mean_radius"], dom.lower, dom.upper), dom.lower, dom.upper, g)
    h = np.bincount(np.asarray(x, dtype=np.int64), minlength=1 << g)
    nm = service_noise_map(mechanism, g, eps)
    C = simulate_cumulative(h, nm, np.random.default_rng(g * 1000 + int(eps * 10)), reps)
    return float(np.mean((C - np.cumsum(h)) ** 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grids", default="6,8,10,12")
    ap.add_argument("--eps", default="0.1,1,10")
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--measure-grid", type=int, default=10)
    ap.add_argument("--dominance", action="store_true")
    a = ap.parse_args()
    from pairwise.dp.kary import dominates_paper, tree_radices

    if a.dominance:
        from pairwise.protocols.ecdf.shares import MAX_GRID_BITS

        print("| grid | radices (kary) | dominates_paper: public root | class series |")
        print("|---|---|---|---|")
        for g in range(1, MAX_GRID_BITS + 1):
            rad = tree_radices(g)
            print(
                f"| 2^{g} | {'x'.join(map(str, rad))} | {dominates_paper(rad, True)} | {dominates_paper(rad, False)} |",
                flush=True,
            )
        return

    print(
        "| grid | eps | radices (kary) | paper MSE | hierarchical MSE | kary MSE | paper / kary "
        "| paper / hierarchical |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for g in (int(v) for v in a.grids.split(",")):
        for eps in (float(v) for v in a.eps.split(",")):
            p, hi, k = (closed_form(m, g, eps) for m in MECHS)
            print(
                f"| 2^{g} | {eps:g} | {'x'.join(map(str, tree_radices(g)))} | {p:.4g} | {hi:.4g} | {k:.4g} "
                f"| {p / k:.2f} | {p / hi:.2f} |",
                flush=True,
            )
    g = a.measure_grid
    print(f"\nmeasured on the demo data, 2^{g} thresholds, {a.reps} simulated releases each (counts^2):")
    print("| eps | paper | hierarchical | kary | paper / kary | closed form paper / kary |")
    print("|---|---|---|---|---|---|")
    for eps in (float(v) for v in a.eps.split(",")):
        p, hi, k = (measured(m, g, eps, a.reps) for m in MECHS)
        print(
            f"| {eps:g} | {p:.4g} | {hi:.4g} | {k:.4g} | {p / k:.2f} | "
            f"{closed_form('paper', g, eps) / closed_form('kary', g, eps):.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
