"""Reproduce the ustats paper's Figure 4: error vs epsilon of the private U-statistic protocols.

Run: .venv/bin/python benchmarks/ustat_figure4.py [--trials T] [--garbled-runs G] [--out benchmarks/results/ustat.md]

Compared, on real data shipped in protocols/data (error = estimate minus the exact
U-statistic of the fixed data set, MSE over T seeded trials):

- RR: Algorithm 1 (quantization + k-ary randomized response, unbiased kernel
  estimator, protocols.ldp_ustat.simulate_ldp_ustatistic) on the data's own levels
  (Kendall: 5 x 4 rating levels) or 16 bins on the data range (Gini);
- 2PC all pairs: every pair releases its kernel plus discrete Laplace at the per-pair
  epsilon that advanced composition over n - 1 releases (delta' = 1e-8) turns into eps;
  its error is the noise alone, computed exactly as Var(noise) / #pairs;
- 2PC subsampling, P = 1 and P = 5 (Sec. 5): P permutations, kernel + discrete Laplace
  at eps / P per pair, drawn from the exact distribution of the garbled noise gadget
  (circuits.noise.simulate_discrete_laplace with the gadget's own parameters).

As in the paper, the 2PC primitive is simulated for the curves (the paper: "the 2PC
primitive to compute f~ is simulated"); the same gadget distribution is what the garbled
circuit outputs (tests/test_noise_garbled.py checks it by chi-square on 1e5 garbled
samples), and --garbled-runs G adds G real garbled end-to-end runs
(protocols.ustat.run_ustat, simulation mode: real garbling and IKNP OT) at eps = 1, P = 1
to check the simulated MSE.

A second table checks Theorem 5: datasets of size n are drawn from the empirical
distribution (bootstrap), so zeta_1, zeta_2 and U_f are exact for that population, and
the empirical MSE of the subsampled, noised estimate is compared with Theorem 5.
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from pairwise.circuits.noise import noisy_kernel, simulate_discrete_laplace
from pairwise.protocols.datasets import column_domain, load_dataset
from pairwise.protocols.ldp.ustat import simulate_ldp_ustatistic
from pairwise.protocols.ustat.driver import per_pair_epsilon, prepare_data, run_ustat
from pairwise.protocols.ustat.stats import sample_pairs, sample_two_sample_pairs, theorem5_mse, u_statistic, zetas

EPS = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
ROOT = Path(__file__).resolve().parent


# Public domains of the columns (declared in protocols/data/domains.json), never the data's min/max.
_COLUMNS = {"kendall": ("fair", ["rate_marriage", "religious"]), "gini": ("diabetes", ["progression"]),
            "auc": ("breast_cancer", ["mean_radius"])}


def bounds(stat) -> dict:
    name, cols = _COLUMNS[stat]
    doms = [column_domain(name, c) for c in cols]
    return {"lower": [d.lower for d in doms], "upper": [d.upper for d in doms],
            "decimals": [d.scale_decimals for d in doms]}


def kernel_values(stat, pd, pairs):
    i, j = pairs[:, 0], pairs[:, 1]
    if stat == "auc":  # circuit units 2[x > y] + [x = y]
        return 2.0 * (pd.x[i] > pd.y[j]) + (pd.x[i] == pd.y[j])
    if stat == "kendall":
        return np.sign(pd.x[i] - pd.x[j]) * np.sign(pd.y[i] - pd.y[j])
    return np.abs(pd.x[i] - pd.x[j]).astype(np.float64)


def gadget(stat, pd, eps_pair, m):
    return noisy_kernel(stat, pd.bits, False, epsilon=eps_pair, sensitivity=pd.range_, n_samples=m)


def noise_variance(params) -> float:
    a = float(params.alpha)
    return 2 * a / (1 - a) ** 2


def curves(stat, x, y, levels, trials, rng, labels=None):
    pd = prepare_data(stat, x, y, labels, **bounds(stat))
    if stat == "auc":
        exact = u_statistic("auc", pd.x.astype(float), pd.y.astype(float))
        conv = 0.5
        n_pos, n_neg = pd.x.size, pd.y.size
        k_all, m_all = max(n_pos, n_neg), n_pos * n_neg
    else:
        n = pd.x.size
        conv = pd.scale if stat == "gini" else 1.0
        exact = u_statistic(stat, pd.x.astype(float), None if pd.y is None else pd.y.astype(float)) * conv
        k_all, m_all = n - 1, n * (n - 1) // 2
    rows = []
    data2 = np.stack([x, y], 1) if stat == "kendall" else np.asarray(x)
    for eps in EPS:
        row = {"eps": eps}
        # RR, Algorithm 1
        k = None if levels is not None else 16  # 16 bins on the public domain
        b = bounds(stat)
        errs = [simulate_ldp_ustatistic(data2, stat, k, eps, rng, levels=levels, labels=labels,
                                        bounds=(b["lower"], b["upper"])) - exact
                for _ in range(trials)]
        row["rr"] = float(np.mean(np.square(errs)))
        # all pairs, advanced composition over the k_all releases of the busiest user
        eps0, _ = per_pair_epsilon(eps, "all", 1, k_all + 1, 1e-8)
        a = np.exp(-float(eps0) / pd.range_)
        row["all_pairs"] = float(2 * a / (1 - a) ** 2 / m_all) * conv**2
        # subsampling P = 1, 5 with the gadget's exact noise
        for P in (1, 5):
            if stat == "auc":
                m = P * min(n_pos, n_neg)
            else:
                m = P * (n // 2)
            nc = gadget(stat, pd, Fraction(eps).limit_denominator(10**6) / P, m)
            e = np.empty(trials)
            for t in range(trials):
                if stat == "auc":
                    pairs = sample_two_sample_pairs(n_pos, n_neg, P, rng)
                else:
                    pairs = sample_pairs(n, P, rng)
                noisy = kernel_values(stat, pd, pairs) + simulate_discrete_laplace(nc.params, m, rng)
                e[t] = noisy.mean() * conv - exact
            row[f"sub_P{P}"] = float(np.mean(e**2))
        rows.append(row)
    return rows


def theorem5_check(stat, x, y, trials, rng):
    pd = prepare_data(stat, x, y, **bounds(stat))
    pop_n = pd.x.size
    z = zetas(stat, pd.x.astype(float), None if pd.y is None else pd.y.astype(float))
    out = []
    for n, P, eps in [(400, 1, 1.0), (400, 5, 1.0), (2000, 1, 4.0), (2000, 5, 4.0)]:
        m = P * (n // 2)
        nc = gadget(stat, pd, Fraction(eps) / P, m)
        e = np.empty(trials)
        for t in range(trials):
            idx = rng.integers(0, pop_n, size=n)
            sub = type(pd)(pd.statistic, pd.x[idx], None if pd.y is None else pd.y[idx], pd.bits, pd.scale, pd.range_)
            pairs = sample_pairs(n, P, rng)
            e[t] = (kernel_values(stat, sub, pairs) + simulate_discrete_laplace(nc.params, m, rng)).mean() - z.mean
        emp = float(np.mean(e**2))
        th = theorem5_mse(n, P, z.zeta1, z.zeta2, noise_variance(nc.params))
        se = emp * np.sqrt(2 / trials)
        out.append({"n": n, "P": P, "eps": eps, "empirical": emp, "theorem5": th, "ratio": emp / th, "rel_se": se / emp})
    return out


def garbled_check(stat, x, y, runs, trials_sim_row, labels=None):
    if runs <= 0:
        return None
    errs = []
    t0 = time.perf_counter()
    for _ in range(runs):
        r = run_ustat(stat, x, y, labels, epsilon=1.0, pairs_per_user=1, **bounds(stat))
        errs.append(r.estimate - r.exact)
    return {"runs": runs, "mse": float(np.mean(np.square(errs))), "simulated_mse": trials_sim_row["sub_P1"],
            "seconds_per_run": (time.perf_counter() - t0) / runs}


def plot(name, rows, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(5.5, 4))
    eps = [r["eps"] for r in rows]
    for key, label in [("rr", "RR (Algorithm 1)"), ("all_pairs", "2PC all pairs, $\\delta'$=1e-8"),
                       ("sub_P1", "2PC subsampling, P=1"), ("sub_P5", "2PC subsampling, P=5")]:
        ax.plot(eps, [np.sqrt(r[key]) for r in rows], marker="o", label=label)
    ax.set_yscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("standard error (RMSE)")
    ax.set_title(name, fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--garbled-runs", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "results" / "ustat.md"))
    args = ap.parse_args()
    rng = np.random.default_rng(20261121)
    fair = load_dataset("fair")
    diab = load_dataset("diabetes")
    bc = load_dataset("breast_cancer")
    cases = [
        ("Kendall's tau-a, Fair ratings (rate_marriage vs religious, n=6366)", "kendall",
         fair["rate_marriage"], fair["religious"], [[1, 2, 3, 4, 5], [1, 2, 3, 4]]),
        ("Gini mean difference, diabetes progression (n=442)", "gini", diab["progression"], None, None),
        ("AUC, breast cancer mean radius vs malignant (212 + 357)", "auc", bc["mean_radius"], None, None),
    ]
    labels_of = {"auc": bc["malignant"]}
    lines = ["# U-statistics: the paper's Figure 4 and Theorem 5", "",
             f"Command: `.venv/bin/python benchmarks/ustat_figure4.py --trials {args.trials} --garbled-runs {args.garbled_runs}`", "",
             "MSE against the exact U-statistic of the fixed data (seeded trials); see the script's docstring for what is simulated.", ""]
    for title, stat, x, y, levels in cases:
        t0 = time.perf_counter()
        rows = curves(stat, x, y, levels, args.trials, rng, labels_of.get(stat))
        lines += [f"## {title}", "", "| eps | RR (Alg. 1) | 2PC all pairs | 2PC subsampling P=1 | 2PC subsampling P=5 |", "|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['eps']} | {r['rr']:.3g} | {r['all_pairs']:.3g} | {r['sub_P1']:.3g} | {r['sub_P5']:.3g} |")
        png = ROOT / "plots" / f"ustat_figure4_{stat}.png"
        png.parent.mkdir(exist_ok=True)
        if plot(title, rows, png):
            lines += ["", f"Plot: `benchmarks/plots/{png.name}`"]
        best = [min(("rr", "all_pairs", "sub_P1", "sub_P5"), key=lambda k: r[k]) for r in rows]
        per_eps = ", ".join(f"{r['eps']}: {b}" for r, b in zip(rows, best))
        lines += ["", f"Best method per eps: {per_eps}."]
        hp = [r for r in rows if r["eps"] <= 2]
        ratio = [min(r["rr"], r["all_pairs"]) / r["sub_P1"] for r in hp]
        lines += [f"High privacy (eps <= 2): the best baseline's MSE is {min(ratio):.1f}x to {max(ratio):.1f}x that of subsampling with P=1."]
        g = garbled_check(stat, x, y, args.garbled_runs, rows[2], labels_of.get(stat))
        if g:
            lines += ["", f"Real garbled runs (run_ustat, eps=1, P=1): {g['runs']} runs, MSE {g['mse']:.3g} vs simulated {g['simulated_mse']:.3g} "
                      f"({g['seconds_per_run']:.1f} s per run)."]
        lines += ["", f"({time.perf_counter() - t0:.0f} s)", ""]
        print("\n".join(lines[-20:]), flush=True)
    # Theorem 5
    lines += ["## Theorem 5 against the empirical MSE (bootstrap from the data, exact gadget noise)", "",
              "| statistic | n | P | eps | empirical MSE | Theorem 5 | ratio | rel. s.e. |", "|---|---|---|---|---|---|---|---|"]
    for title, stat, x, y, _ in cases:
        if stat == "auc":  # Theorem 5 is stated for one-sample U-statistics
            continue
        for r in theorem5_check(stat, x, y, max(400, args.trials * 2), rng):
            lines.append(f"| {stat} | {r['n']} | {r['P']} | {r['eps']} | {r['empirical']:.4g} | {r['theorem5']:.4g} | {r['ratio']:.3f} | {r['rel_se']:.3f} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
