"""Accuracy of the DP-ECDF machinery against [BMR25], and sampler throughput.

Prints markdown tables:

1. Theorem 3.1: empirical per-threshold MSE of the tree mechanism (paper layout)
   versus 2 (L+1)^3 / eps^2, for Laplace and discrete Laplace noise.
2. Least-squares consistency (Hay et al. / Honaker) versus the paper's layout.
3. Smoothing gains on X_pois(lambda) (Sec. 6.3, Figure 2; Figure 3 for lambda):
   ||F - F'||^2 / ||F - F^||^2 for p = 1, 2 in leaf and tree (Eq. 3) space.
4. Hosmer-Lemeshow (Alg. 2) relative MSE versus epsilon on synthetic data.
5. Throughput of the exact samplers (values per second).

Usage:
    .venv/bin/python benchmarks/dp_ecdf.py            # full run (several minutes)
    .venv/bin/python benchmarks/dp_ecdf.py --quick    # small sizes, < 1 minute
    .venv/bin/python benchmarks/dp_ecdf.py --only theorem31 throughput

Experiments use seeded SIMULATION noise (numpy), as the paper does; the
throughput table uses the exact OS-CSPRNG samplers.
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

import numpy as np

from pairwise.dp.ecdf import (
    dyadic_prefix_sums,
    hierarchical_mechanism,
    hosmer_lemeshow,
    hosmer_lemeshow_dp,
    path_sums,
    smooth_ecdf,
    theorem31_mse,
    tree_mechanism,
    tree_node_noise,
    tree_noise_scale,
)
from pairwise.dp.samplers import (
    conservative_scale,
    discrete_laplace_array,
    sample_discrete_laplace,
    snapping_laplace_array,
)


def table(header: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def theorem31(quick: bool) -> str:
    rng = np.random.default_rng(2024)
    rows = []
    configs = [(4, 2000), (8, 2000), (10, 2000), (15, 1000)] if not quick else [(4, 2000), (8, 500)]
    for L, trials in configs:
        for eps in (0.1, 1.0):
            scale = tree_noise_scale(L, eps)
            for noise in ("laplace", "discrete_laplace"):
                sq = np.zeros(1 << L)
                done = 0
                while done < trials:  # batches keep memory bounded for L = 15
                    batch = min(trials - done, max(1, (1 << 22) // (1 << (L + 1))))
                    err = path_sums(tree_node_noise(L, scale, noise=noise, rng=rng, trials=batch))
                    sq += np.sum(err.astype(float) ** 2, axis=0)
                    done += batch
                mse = sq / trials
                theory = theorem31_mse(L, eps)
                rel = mse / theory
                rows.append(
                    [
                        L,
                        eps,
                        noise,
                        trials,
                        f"{mse.mean():.4g}",
                        f"{theory:.4g}",
                        f"{rel.mean():.4f}",
                        f"{np.abs(rel - 1).max():.3f}",
                    ]
                )
    return table(
        [
            "L",
            "eps",
            "noise",
            "trials",
            "MSE (mean over thresholds)",
            "2(L+1)^3/eps^2",
            "ratio",
            "max per-threshold |ratio-1|",
        ],
        rows,
    )


def consistency(quick: bool) -> str:
    rng = np.random.default_rng(7)
    rows = []
    for L in (8, 10, 12) if not quick else (8,):
        counts = rng.poisson(3, 1 << L)
        exact = np.cumsum(counts)
        trials = 200 if not quick else 50
        sq = {"paper (Thm 3.1)": 0.0, "hierarchical raw": 0.0, "hierarchical + LS consistency": 0.0}
        for _ in range(trials):
            sq["paper (Thm 3.1)"] += np.mean((tree_mechanism(counts, 1.0, rng=rng).cumulative - exact) ** 2)
            h = hierarchical_mechanism(counts, 1.0, rng=rng)
            sq["hierarchical raw"] += np.mean((dyadic_prefix_sums(h.node_values) - exact) ** 2)
            sq["hierarchical + LS consistency"] += np.mean((h.cumulative - exact) ** 2)
        theory = theorem31_mse(L, 1.0)
        for name, total in sq.items():
            mse = total / trials
            rows.append([L, name, trials, f"{mse:.4g}", f"{mse / theory:.3f}"])
    return table(
        ["L", "mechanism (eps = 1, discrete Laplace)", "trials", "per-threshold MSE (counts^2)", "/ Thm 3.1"], rows
    )


def smoothing(quick: bool) -> str:
    n_bins = 1 << (15 if not quick else 11)
    runs = 3 if not quick else 2
    rng = np.random.default_rng(11)
    rows = []
    methods = [(2, "leaf"), (1, "leaf"), (2, "tree"), (1, "tree")]
    for eps in (0.05, 0.1, 0.2, 0.5, 1.0, 2.0):
        ratios = {m: [] for m in methods}
        secs = {m: 0.0 for m in methods}
        for _ in range(runs):
            counts = rng.poisson(3.0, n_bins)
            f = np.cumsum(counts) / counts.sum()
            f_hat = tree_mechanism(counts, eps, noise="laplace", rng=rng).ecdf
            base = np.sum((f_hat - f) ** 2)
            for p, space in methods:
                t0 = time.perf_counter()
                s = smooth_ecdf(f_hat, p, space=space)
                secs[(p, space)] += time.perf_counter() - t0
                ratios[(p, space)].append(np.sum((s - f) ** 2) / base)
        rows.append([eps] + [f"{np.mean(ratios[m]):.3f}" for m in methods] + [f"{secs[m] / runs:.2f}" for m in methods])
    head = ["eps"] + [f"ratio p={p} {s}" for p, s in methods] + [f"s p={p} {s}" for p, s in methods]
    fig2 = table(head, rows)
    rows3 = []
    for lam in (0.3, 1.0, 3.0, 10.0, 30.0):
        r = []
        for _ in range(runs):
            counts = rng.poisson(lam, n_bins)
            f = np.cumsum(counts) / counts.sum()
            f_hat = tree_mechanism(counts, 1.0, noise="laplace", rng=rng).ecdf
            r.append(np.sum((smooth_ecdf(f_hat, 2) - f) ** 2) / np.sum((f_hat - f) ** 2))
        rows3.append([lam, f"{np.mean(r):.3f}"])
    fig3 = table(["lambda (eps = 1)", "ratio p=2 leaf"], rows3)
    return (
        f"N = {n_bins}, lambda = 3, {runs} runs per cell, Laplace noise (simulation):\n\n{fig2}"
        f"\n\nFigure 3 analogue (N = {n_bins}, eps = 1):\n\n{fig3}"
    )


def hosmer(quick: bool) -> str:
    rng = np.random.default_rng(5)
    n = 20_000 if not quick else 5_000
    p = rng.beta(2, 5, n)
    y = (rng.random(n) < np.clip(1.3 * p, 0, 1)).astype(np.int64)
    exact = hosmer_lemeshow(p, y, Q=10, L=10)
    rows = []
    runs = 100 if not quick else 20
    for eps in (0.5, 1.0, 2.0, 5.0, 10.0):
        vals = np.array([hosmer_lemeshow_dp(p, y, eps, rng=rng).statistic for _ in range(runs)])
        rows.append(
            [eps, runs, f"{exact:.2f}", f"{np.median(vals):.2f}", f"{np.mean((vals - exact) ** 2) / exact**2:.4f}"]
        )
    return f"n = {n}, Q = 10, L = 10, miscalibrated model (true p = 1.3 x predicted):\n\n" + table(
        ["eps", "runs", "exact H", "median DP H", "relative MSE"], rows
    )


def throughput() -> str:
    rows = []
    for scale in (Fraction(3, 2), 55, conservative_scale(16, 0.3)):
        t0 = time.perf_counter()
        discrete_laplace_array(scale, 1_000_000)
        dt = time.perf_counter() - t0
        rows.append([f"discrete_laplace_array, scale {float(scale):.4g}", "1e6", f"{1e6 / dt:,.0f}"])
    t0 = time.perf_counter()
    for _ in range(20_000):
        sample_discrete_laplace(Fraction(3, 2))
    rows.append(["sample_discrete_laplace (scalar), scale 1.5", "2e4", f"{2e4 / (time.perf_counter() - t0):,.0f}"])
    t0 = time.perf_counter()
    snapping_laplace_array(np.zeros(100_000), 3.0, -1000, 1000)
    rows.append(["snapping_laplace_array, scale 3", "1e5", f"{1e5 / (time.perf_counter() - t0):,.0f}"])
    counts = np.random.default_rng(0).poisson(3, 1 << 15)
    t0 = time.perf_counter()
    tree_mechanism(counts, 1.0)
    rows.append(
        [
            "tree_mechanism exact CSPRNG, N = 2^15 (65535 nodes)",
            "1 release",
            f"{1 / (time.perf_counter() - t0):.2f} releases/s",
        ]
    )
    return table(["sampler", "draws", "values / s"], rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes for a fast smoke run")
    ap.add_argument(
        "--only",
        nargs="+",
        metavar="SECTION",
        choices=["theorem31", "consistency", "smoothing", "hosmer", "throughput"],
        help="run only these sections",
    )
    args = ap.parse_args()
    sections = [
        (
            "theorem31",
            "Theorem 3.1: per-threshold MSE of the tree mechanism (simulation)",
            lambda: theorem31(args.quick),
        ),
        ("consistency", "Least-squares consistency versus the paper's layout", lambda: consistency(args.quick)),
        ("smoothing", "Smoothing on X_pois (Figure 2): squared error after / before", lambda: smoothing(args.quick)),
        ("hosmer", "Hosmer-Lemeshow (Algorithm 2)", lambda: hosmer(args.quick)),
        ("throughput", "Exact sampler throughput (OS CSPRNG)", throughput),
    ]
    for key, title, fn in sections:
        if args.only and key not in args.only:
            continue
        t0 = time.perf_counter()
        body = fn()
        print(f"## {title}\n\n{body}\n\n({time.perf_counter() - t0:.1f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
