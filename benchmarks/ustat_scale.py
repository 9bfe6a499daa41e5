"""Scale of the 2PC subsampling protocol: simulation mode at n = 1e5 and 1e6, network mode at >= 100 users.

Run: .venv/bin/python benchmarks/ustat_scale.py [--n 100000 1000000] [--network-users 200] [--workers 4]
     [--batch 8192] [--no-bench]

Simulation mode runs every SIMD batch of pairs as a real Yao execution (garbling, IKNP
OT, bytes on an in-memory channel) of the Kendall kernel + in-circuit discrete Laplace;
the garbler and the evaluator proceed in lockstep per batch (each execution starts with
a header exchange), so memory is bounded by one batch of tables, not by n.  Users are a
bootstrap resample of the Fair ratings (rate_marriage, religious) to n people.  Prints
time, AND gates, bytes, pairs per second, AND gates per second, the process's user and
system CPU time (system time is mostly page faults of fresh memory) and the peak resident
memory.  For comparison it then runs ``pairwise bench garble``'s measurement
(in-memory garbling and evaluation, one thread, best of 3) on the very circuit the
simulation garbled, at the same batch.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import pairwise.protocols.ustat.driver as ustat_driver
from pairwise.protocols.commands.garble import bench_garble
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
    ap.add_argument("--batch", type=int, default=8192, help="pairs per SIMD execution in simulation mode")
    ap.add_argument("--no-bench", action="store_true", help="skip the bench-garble comparison")
    args = ap.parse_args()
    fair = load_dataset("fair")
    rng = np.random.default_rng(7)
    rows = []
    seen = {}
    real_simulate = ustat_driver._run_simulate

    def spy(nc, *a, **kw):  # remember the circuit the simulation garbles (for the comparison below) and its time
        seen["circuit"] = nc.circuit
        t = time.perf_counter()
        try:
            return real_simulate(nc, *a, **kw)
        finally:
            seen["seconds"] = time.perf_counter() - t

    ustat_driver._run_simulate = spy
    for n in args.n:
        idx = rng.integers(0, fair["rate_marriage"].size, size=n)
        x, y = fair["rate_marriage"][idx], fair["religious"][idx]
        u0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        r = run_ustat("kendall", x, y, epsilon=args.epsilon, pairs_per_user=1, mode="simulate", batch=args.batch,
                      compute_theorem5=False, **RATINGS)
        dt = time.perf_counter() - t0
        u1 = resource.getrusage(resource.RUSAGE_SELF)
        rows.append(("simulate", n, r, dt))
        print(f"simulate n={n}: {dt:.1f} s, pairs {r.pairs}, AND {r.and_gates}, bytes {r.bytes} "
              f"({r.bytes / r.pairs:.0f} per pair), {r.pairs / dt:.0f} pairs/s, {r.and_gates / dt / 1e6:.2f} M AND/s, "
              f"CPU user {u1.ru_utime - u0.ru_utime:.1f} s sys {u1.ru_stime - u0.ru_stime:.1f} s, "
              f"peak RSS {peak_rss_mib():.0f} MiB, estimate {r.estimate:.4f} (exact {r.exact:.4f})", flush=True)
        core = seen["seconds"]
        print(f"  of which the two-party executions (_run_simulate: sessions, OT, garbling, evaluation): {core:.1f} s, "
              f"{r.pairs / core:.0f} pairs/s, {r.and_gates / core / 1e6:.2f} M AND/s (the rest: imports, data, "
              "pair sampling, the exact value)", flush=True)
    ustat_driver._run_simulate = real_simulate
    if seen and not args.no_bench:
        c = seen["circuit"]
        b = bench_garble(c, args.batch)
        print(f"bench garble on the same circuit ({c.n_and} AND, batch {args.batch}): garble {b['garble_mands']:.2f} "
              f"M AND/s, evaluate {b['eval_mands']:.2f} M AND/s (one thread each, in memory, best of 3; "
              f"{b['garble_mands'] * 1e6 / c.n_and:.0f} pairs/s of garbling alone)", flush=True)
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
