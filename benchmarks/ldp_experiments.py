"""Accuracy experiments of the local-model and shuffle-model protocols (seeded simulations).

1. [BBGK20, App. D.1]. Absolute AUC error against domain size 2^alpha
   on the synthetic datasets auc_one, ur and ithdigit. It compares the
   hierarchical-histogram protocol (Sec. 4, users split across levels)
   with Algorithm 1 (k = 2^alpha bins, k-ary RR), as in Figures 5 and 6.
2. [OMH22, Sec. 5]. Frobenius norm of the empirical
   covariance of the one-bit QMLE (median regression, public x) against n,
   for several eps. Real data: Fair's affairs survey (statsmodels),
   yrs_married on age, rows resampled without replacement.
3. [BC20]. Simultaneous (max) error of the shuffled
   histogram P^hist against domain size d, compared with local k-ary RR.
   The values are Fair's rate_marriage ratings, resampled with replacement
   to n users and embedded unchanged in [0, d).

Usage:
    python benchmarks/ldp_experiments.py [--quick] [--only d1 qmle shuffle] [--seed S]

Prints markdown tables. If matplotlib can be imported, it writes PNG plots
to benchmarks/plots/.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from pairwise.protocols.datasets import load_dataset
from pairwise.protocols.ldp.auc import run_experiment_auc_domain
from pairwise.protocols.ldp.qmle import run_experiment_qmle_covariance
from pairwise.protocols.ldp.shuffle import run_experiment_histogram_domain

PLOTS = Path(__file__).resolve().parent / "plots"


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except Exception:  # noqa: BLE001 - plots are optional
        return None


def experiment_d1(args, rng) -> None:
    n = 5000 if args.quick else 20000
    reps = 3 if args.quick else 10
    alphas = [1, 2, 4, 6, 8, 10, 12, 14, 16]
    eps = 1.0
    print(f"\n## App. D.1: |AUC error| vs domain size (n = {n} per class, eps = {eps}, {reps} runs)\n")
    print(
        "| dataset | alpha | d | AUC (raw) | AUC (quantized) | hierarchical: mean ± sd | Algorithm 1: mean ± sd "
        "| hierarchical, clipped to [0, 1]: mean | Algorithm 1, clipped: mean |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    results = {}
    for ds in ("auc_one", "ur", "ithdigit"):
        t = time.perf_counter()
        rows = run_experiment_auc_domain(ds, n, alphas, eps, reps, rng, digit=8)
        results[ds] = rows
        for r in rows:
            print(
                f"| {ds} | {r['alpha']} | {r['domain']} | {r['true_auc']:.3f} | {r['quantized_auc']:.3f} | "
                f"{r['hh_mean']:.4f} ± {r['hh_std']:.4f} | {r['rr_mean']:.4g} ± {r['rr_std']:.3g} | "
                f"{r['hh_clipped_mean']:.4f} | {r['rr_clipped_mean']:.4f} |"
            )
        print(f"<!-- {ds}: {time.perf_counter() - t:.1f} s -->")
    plot_auc_domain(results, eps, n, reps)


#: Panel titles of App. D.1's synthetic datasets (protocols/ldp/auc.py: synthetic_auc_dataset).
AUC_PANELS = {
    "auc_one": "positives at 1, negatives at 0 (true AUC 1)\n[dataset auc_one]",
    "ur": "both classes uniform on [0, 1) (true AUC about 0.5)\n[dataset ur]",
    "ithdigit": "positives at 2^-8, negatives at 0 (true AUC 1):\nclasses differ only in the 8th binary digit [ithdigit]",
}


def plot_auc_domain(results: dict, eps: float, n: int, reps: int) -> None:
    plt = _plt()
    if plt is None:
        return
    PLOTS.mkdir(exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6), sharey=True)
    for ax, (ds, rows) in zip(axes, results.items()):
        d = [r["domain"] for r in rows]
        for key, marker, label in (
            ("hh", "o", "hierarchical histograms, one bit per user (Sec. 4)"),
            ("rr", "s", "Algorithm 1: quantize to d bins + k-ary randomized response"),
        ):
            mean = [r[f"{key}_clipped_mean"] for r in rows]
            se = [r[f"{key}_clipped_std"] / np.sqrt(reps) for r in rows]
            ax.errorbar(d, mean, yerr=se, marker=marker, capsize=3, label=label)
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.02, 1.02)  # linear: a clipped estimate errs by 0 (exactly right) up to 1
        ax.set_title(AUC_PANELS[ds], fontsize=9)
        ax.set_xlabel("domain size d = number of score bins (log scale)")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("mean |estimated AUC - true AUC|\n(estimates clipped to [0, 1]; AUC has no unit)")
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle(
        f"Locally private AUC: error vs number of score bins (epsilon = {eps:g} per user, "
        f"n = {n} users per class; mean of {reps} runs, bars: 1 standard error)"
    )
    fig.tight_layout()
    fig.savefig(PLOTS / "ldp_auc_domain.png", dpi=110)
    plt.close(fig)


def experiment_qmle(args, rng) -> None:
    fair = load_dataset("fair")
    y, x = fair["yrs_married"], fair["age"]
    ns = [500, 1000, 2000, 4000]
    reps = 20 if args.quick else 100
    epsilons = [1.0, 2.0, 4.0]
    print(
        f"\n## Sec. 5: Frobenius norm of the QMLE's empirical covariance vs n "
        f"(fair: yrs_married ~ age, tau = 0.5, y truncated to [0, 25], sigma = 2.5, {reps} subsamples)\n"
    )
    out = {}
    for eps in epsilons:
        t = time.perf_counter()
        out[eps] = run_experiment_qmle_covariance(y, x, ns, reps, eps, rng, tau=0.5, sigma=2.5, bounds=(0.0, 25.0))
        print(f"<!-- eps={eps}: {time.perf_counter() - t:.1f} s -->")
    print("| n | " + " | ".join(f"eps={e}" for e in epsilons) + " |")
    print("|---|" + "---|" * len(epsilons))
    for i, n in enumerate(ns):
        print(f"| {n} | " + " | ".join(f"{out[e]['rows'][i]['frobenius']:.4g}" for e in epsilons) + " |")
    print("| slope of log-log fit | " + " | ".join(f"{out[e]['slope']:.3f}" for e in epsilons) + " |")
    plt = _plt()
    if plt is not None:
        PLOTS.mkdir(exist_ok=True)
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
        for e in epsilons:
            ax.plot(
                ns,
                [r["frobenius"] for r in out[e]["rows"]],
                marker="o",
                label=f"epsilon = {e:g} per user (one bit each)",
            )
        ref = out[epsilons[0]]["rows"][0]["frobenius"]
        ax.plot(ns, [ref * ns[0] / n for n in ns], "k--", label="reference slope: proportional to 1/n")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.minorticks_off()
        ax.set_xlabel("number of users n (rows drawn from the Fair survey, log scale)")
        ax.set_ylabel("||Cov(estimate)||_F, Frobenius norm\n(mixed units: intercept in years, slope in years/year)")
        ax.set_title(
            f"One-bit LDP median regression (QMLE):\nspread of the estimate vs n ({reps} subsamples per n)", fontsize=10
        )
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(PLOTS / "qmle_covariance.png", dpi=110)
        plt.close(fig)


def experiment_shuffle(args, rng) -> None:
    ratings = load_dataset("fair")["rate_marriage"].astype(np.int64) - 1
    n = 20000 if args.quick else 100000
    reps = 3 if args.quick else 10
    eps, delta = 1.0, 1e-6
    values = rng.choice(ratings, size=n, replace=True)
    ds = [8, 64, 512, 4096, 32768]
    print(
        f"\n## Shuffled histograms: simultaneous error vs domain size "
        f"(fair rate_marriage resampled to n = {n}, eps = {eps}, delta = {delta}, {reps} runs)\n"
    )
    t = time.perf_counter()
    rows = run_experiment_histogram_domain(values, ds, eps, delta, reps, rng)
    print("| d | shuffled P^hist: max error | bound (beta=0.05) | local k-RR: max error |")
    print("|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['d']} | {r['shuffle_mean']:.4f} ± {r['shuffle_std']:.4f} | {r['shuffle_bound']:.4f} | "
            f"{r['krr_mean']:.4f} ± {r['krr_std']:.4f} |"
        )
    print(f"<!-- {time.perf_counter() - t:.1f} s -->")
    plt = _plt()
    if plt is not None:
        PLOTS.mkdir(exist_ok=True)
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
        ax.errorbar(
            ds,
            [r["shuffle_mean"] for r in rows],
            [r["shuffle_std"] for r in rows],
            marker="o",
            label=f"shuffle model, Balcer-Cheu P^hist (epsilon = {eps:g}, delta = {delta:g})",
            capsize=3,
        )
        ax.errorbar(
            ds,
            [r["krr_mean"] for r in rows],
            [r["krr_std"] for r in rows],
            marker="s",
            label=f"local model, k-ary randomized response (epsilon = {eps:g})",
            capsize=3,
        )
        ax.axhline(
            1.0,
            color="grey",
            linestyle=":",
            label="largest error once estimates are clipped to [0, 1] (k-RR's are not)",
        )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("domain size d = number of histogram bins (log scale)")
        ax.set_ylabel("largest |estimated - true frequency| over the d bins\n(fraction of users)")
        ax.set_title(
            f"Private histogram of n = {n} marriage ratings (Fair survey):\n"
            f"worst-bin error vs domain size (mean and s.d. of {reps} runs)",
            fontsize=10,
        )
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(PLOTS / "shuffle_histogram_domain.png", dpi=110)
        plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (about 20 s)")
    ap.add_argument("--only", nargs="+", choices=["d1", "qmle", "shuffle"], default=["d1", "qmle", "shuffle"])
    ap.add_argument("--seed", type=int, default=2020)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    for name in args.only:
        {"d1": experiment_d1, "qmle": experiment_qmle, "shuffle": experiment_shuffle}[name](args, rng)


if __name__ == "__main__":
    main()
