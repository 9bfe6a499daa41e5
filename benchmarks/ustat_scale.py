"""Scale of the 2PC subsampling protocol: simulation mode at n = 1e5 and 1e6, network mode at >= 100 users.

Run: .venv/bin/python benchmarks/ustat_scale.py [--n 100000 1000000] [--network-users 200] [--workers 4]

Simulation mode runs every SIMD batch of pairs as a real Yao execution (garbling, IKNP
OT, bytes on an in-memory channel) of the Kendall kernel + in-circuit discrete Laplace;
the garbler and the evaluator proceed in lockstep per batch (each execution starts with
a header exchange), so memory is bounded by one batch of tables, not by n.  Users are a
bootstrap resample of the Fair ratings (rate_marriage, religious) to n people.  Prints
time, AND gates, bytes, pairs per second and the peak resident memory of the process.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from pairwise.protocols.datasets import load_dataset
from pairwise.protocols.ustat.driver import run_ustat


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


#: The ratings' public domains (survey scales 1-5 and 1-4; protocols/data/domains.json).
RATINGS = {"lower": [1, 1], "upper": [5, 4], "decimals": [0, 0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="*", default=[100_000, 1_000_000])
    ap.add_argument("--network-users", type=int, default=200)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epsilon", type=float, default=1.0)
    args = ap.parse_args()
    fair = load_dataset("fair")
    rng = np.random.default_rng(7)
    rows = []
    for n in args.n:
        idx = rng.integers(0, fair["rate_marriage"].size, size=n)
        x, y = fair["rate_marriage"][idx], fair["religious"][idx]
        t0 = time.perf_counter()
        r = run_ustat("kendall", x, y, epsilon=args.epsilon, pairs_per_user=1, mode="simulate", batch=8192,
                      compute_theorem5=False, **RATINGS)
        dt = time.perf_counter() - t0
        rows.append(("simulate", n, r, dt))
        print(f"simulate n={n}: {dt:.1f} s, pairs {r.pairs}, AND {r.and_gates}, bytes {r.bytes}, "
              f"peak RSS {peak_rss_mib():.0f} MiB, estimate {r.estimate:.4f} (exact {r.exact:.4f})", flush=True)
    if args.network_users:
        n = args.network_users
        idx = rng.integers(0, fair["rate_marriage"].size, size=n)
        t0 = time.perf_counter()
        r = run_ustat("kendall", fair["rate_marriage"][idx], fair["religious"][idx], epsilon=args.epsilon,
                      pairs_per_user=1, mode="network", workers=args.workers, **RATINGS)
        dt = time.perf_counter() - t0
        rows.append(("network", n, r, dt))
        print(f"network n={n} ({args.workers} worker processes, {r.executions} TCP sessions): {dt:.1f} s, "
              f"bytes {r.bytes}", flush=True)
    print()
    print("| mode | users | pairs | AND/pair | AND gates | bytes | seconds | pairs/s | M AND/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, n, r, dt in rows:
        print(f"| {mode} | {n} | {r.pairs} | {r.extra['and_gates_per_pair']} | {r.and_gates} | {r.bytes} | "
              f"{dt:.1f} | {r.pairs / dt:.0f} | {r.and_gates / dt / 1e6:.2f} |")
    print(f"\npeak RSS of this process: {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
