"""Coverage and width of the published (1 - alpha) intervals, by simulation (issue 25 item 1).

Run: .venv/bin/python benchmarks/interval_coverage.py [--reps 1000] [--alpha 0.05] [--statistics gini,...]
[--pairs-per-user 1,3] [--no-alg1]

For each statistic, data set (shipped, held-out column, synthetic worst case) and epsilon, the release is
drawn ``--reps`` times with the exact law of its randomness (protocols/ustat/simulate.py for 2PC: the pair
design and the gadget's exact noise; k-RR reports for Algorithm 1) and the table gives the observed
coverage of the target, the interval's half-width and the root-mean-square error of the estimate (so
half-width / RMSE shows how conservative the tail bound is: a normal interval would be 1.96).  The same
simulation, with fewer draws, is tests/statistical/test_interval_coverage.py.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "statistical"))

from test_interval_coverage import DATA, _alg1, _seed  # noqa: E402  (the test's data sets, one definition)

from pairwise.circuits.kernel_spec import BUILTIN_SPECS  # noqa: E402
from pairwise.protocols.ustat.config import UStatConfig  # noqa: E402
from pairwise.protocols.ustat.data import _exact, prepare_data  # noqa: E402
from pairwise.protocols.ustat.simulate import simulate_releases  # noqa: E402


def ustat_row(stat, data, eps, reps, alpha, P=1):
    rng = np.random.default_rng(_seed(stat, data, eps, "bench") if P == 1 else _seed(stat, data, eps, P, "bench"))
    cols, lab, b = DATA[(stat, data)](rng)
    pd = prepare_data(stat, cols[0], cols[1] if stat == "kendall" else None, lab, kernel=BUILTIN_SPECS.get(stat), **b)
    est, iw = simulate_releases(UStatConfig(stat, eps, alpha=alpha, pairs_per_user=P, **b), pd, reps, rng)
    t = _exact(pd)
    cover = float(((est - iw.below <= t) & (t <= est + iw.above)).mean())
    return pd.x.size + (pd.y.size if stat == "auc" else 0), cover, iw.width / 2, float(np.sqrt(np.mean((est - t) ** 2)))


def alg1_row(stat, data, eps, reps, alpha):
    from pairwise.dp.bounds import clamp
    from pairwise.protocols.ldp.interval import alg1_interval, alg1_kernel_range

    rng = np.random.default_rng(_seed(stat, data, eps, "bench-alg1"))
    cols, lab, b = DATA[(stat, data)](rng)
    proto = _alg1(stat, cols, lab, b, eps)
    cols = [clamp(c, lo, hi)[0] for c, lo, hi in zip(cols, b["lower"], b["upper"])]
    if stat == "auc":
        cp, cn = proto.encode(cols[0][lab == 1]), proto.encode(cols[0][lab == 0])
        t = proto.exact_quantized_two_sample(cp, cn)
        iw = alg1_interval(proto.beta, 1.0, n_pos=cp.size, n_neg=cn.size, alpha=alpha)
        est = np.array(
            [
                proto.estimate_two_sample(proto.simulate_randomize(cp, rng), proto.simulate_randomize(cn, rng))
                for _ in range(reps)
            ]
        )
        n = cp.size + cn.size
    else:
        cells = proto.encode(cols[0] if stat == "gini" else np.stack(cols, 1))
        t = proto.exact_quantized(cells)
        iw = alg1_interval(
            proto.beta, alg1_kernel_range((proto.matrix + proto.matrix.T) / 2), n=cells.size, alpha=alpha
        )
        est = np.array([proto.estimate(proto.simulate_randomize(cells, rng)) for _ in range(reps)])
        n = cells.size
    cover = float(((est - iw.below <= t) & (t <= est + iw.above)).mean())
    return n, cover, iw.width / 2, float(np.sqrt(np.mean((est - t) ** 2)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--statistics", default="gini,kendall,auc,variance,collision")
    ap.add_argument("--pairs-per-user", default="1", help="comma-separated P values of the 2PC rows")
    ap.add_argument("--no-alg1", action="store_true", help="2PC rows only")
    args = ap.parse_args()
    stats = args.statistics.split(",")
    print(f"load average at start: {os.getloadavg()[0]:.1f}; {args.reps} draws per row, alpha = {args.alpha}")
    t0 = time.time()
    print("\n| release | statistic | data | n | eps | coverage | half-width | RMSE | half-width / RMSE |")
    print("|---|---|---|---|---|---|---|---|---|")
    runs = [(f"2PC ustat, P = {P}", functools.partial(ustat_row, P=int(P))) for P in args.pairs_per_user.split(",")]
    if not args.no_alg1:
        runs.append(("Algorithm 1", alg1_row))
    for release, fn in runs:
        for stat in stats:
            if fn is alg1_row and stat in BUILTIN_SPECS:  # Algorithm 1's CLI takes gini, kendall and auc
                continue
            for data in ("shipped", "held-out", "worst"):
                for eps in (0.5, 1.0, 4.0):
                    n, cover, half, rmse = fn(stat, data, eps, args.reps, args.alpha)
                    print(
                        f"| {release} | {stat} | {data} | {n} | {eps:g} | {cover:.3f} | {half:.4g} | {rmse:.4g} | "
                        f"{half / rmse:.2f} |",
                        flush=True,
                    )
    print(f"\n({time.time() - t0:.0f} s; load average at end: {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
