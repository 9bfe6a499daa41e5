"""Scale of the 2PC subsampling protocol: simulation mode at n = 1e5 and 1e6 (in process and on Dask), network mode.

Run::

    .venv/bin/python benchmarks/ustat_scale.py [--n 100000 1000000] [--network-users 200] [--workers 4]
    .venv/bin/python benchmarks/ustat_scale.py --n 100000 1000000 --cluster local:2 loopback:2 --network-users 0

Simulation mode runs every SIMD batch of pairs as a real Yao execution (garbling, IKNP
OT, bytes on an in-memory channel) of the Kendall kernel + in-circuit discrete Laplace;
the garbler and the evaluator proceed in lockstep per batch (each execution starts with
a header exchange), so memory is bounded by one batch of tables, not by n.  Users are a
bootstrap resample of the Fair ratings (rate_marriage, religious) to n people.  Prints
time, AND gates, bytes, pairs per second, AND gates per second, the process's user and
system CPU time (system time is mostly page faults of fresh memory) and the peak resident
memory.  For in-process runs it also prints the time of the two-party executions alone
(``_run_simulate``), and at the end ``pairwise bench garble``'s measurement (in-memory
garbling and evaluation, one thread, best of 3) on the very circuit the simulation
garbled, at the same batch (``--no-bench`` skips it).

``--cluster SPEC ...`` also runs every n on Dask (``run_ustat(cluster=...)``, one task per
batch), interleaved with the in-process run on the same data (A/B in one run, ``--repeat``
rounds): ``local:N`` is a LocalCluster of N worker processes, ``loopback:N`` a
``dask scheduler`` and N ``dask worker tcp://...`` processes that this script starts on
127.0.0.1, any other value a scheduler address.  Each cluster is started for its own run
and stopped after it (one cluster open at a time), then warmed up with a run of
``WARMUP_USERS`` users; start-up and warm-up are printed apart, not timed.  It prints the speed-up over the in-process run of the same
round, the workers' peak memory, the tasks' own pairs per task-second, and a projection
for ``--project`` users (default 10^7) from those rates plus the driver's own preparation
time measured at that size (pair sampling and input packing, no garbling).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import time

import numpy as np

import pairwise.protocols.ustat.runners as ustat_runners
from pairwise.commands.garble import bench_garble
from pairwise.protocols.cluster import cluster_threads, open_cluster
from pairwise.protocols.datasets import load_dataset
from pairwise.protocols.ustat.driver import _pair_inputs, prepare_data, run_ustat
from pairwise.protocols.ustat.stats import sample_pairs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _dask_loopback import loopback_cluster  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


#: Users of the untimed warm-up run on a freshly started cluster.
WARMUP_USERS = 20_000

#: The ratings' public domains (survey scales 1-5 and 1-4; protocols/data/domains.json).
RATINGS = {"lower": [1, 1], "upper": [5, 4], "decimals": [0, 0]}


def load_avg() -> str:
    return "/".join(f"{v:.2f}" for v in os.getloadavg())


def users(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    fair = load_dataset("fair")
    idx = rng.integers(0, fair["rate_marriage"].size, size=n)
    return fair["rate_marriage"][idx], fair["religious"][idx]


@contextlib.contextmanager
def cluster_client(spec: str, timeout: float):
    if spec.startswith("loopback:"):
        with loopback_cluster(int(spec.split(":", 1)[1]), timeout=timeout) as address:
            with open_cluster(address, timeout=timeout) as client:
                client.wait_for_workers(int(spec.split(":", 1)[1]), timeout=timeout)
                yield client
    else:
        with open_cluster(spec, timeout=timeout) as client:
            yield client


def driver_prep_seconds(n: int, rng) -> float:
    """The driver's own work at n users without garbling: data prep, pair sampling, input packing."""
    x, y = users(n, rng)
    t0 = time.perf_counter()
    pd = prepare_data("kendall", x, y, **RATINGS)
    pairs = sample_pairs(pd.x.size, 1, rng)
    _pair_inputs(pd, pairs)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="*", default=[100_000, 1_000_000])
    ap.add_argument("--network-users", type=int, default=200)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=8192, help="pairs per SIMD execution in simulation mode")
    ap.add_argument("--no-bench", action="store_true", help="skip the bench-garble comparison")
    ap.add_argument(
        "--cluster",
        nargs="*",
        default=[],
        metavar="SPEC",
        help="local:N, loopback:N (scheduler + N worker processes started here) or tcp://HOST:PORT",
    )
    ap.add_argument("--no-inprocess", action="store_true", help="skip the in-process baseline")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved rounds of every configuration")
    ap.add_argument("--project", type=int, default=10_000_000, help="users for the projection (0: none)")
    ap.add_argument("--timeout", type=float, default=600.0, help="deadline of every wait on a cluster")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    print(f"load average at start: {load_avg()}", flush=True)
    rows = []  # (config, n, round, result, seconds, load)
    seen = {}
    real_simulate = ustat_runners._run_simulate

    def spy(nc, *a, **kw):  # the circuit the in-process simulation garbles, and the executions' own time
        seen["circuit"] = nc.circuit
        t = time.perf_counter()
        try:
            return real_simulate(nc, *a, **kw)
        finally:
            seen["seconds"] = time.perf_counter() - t

    configs = ([] if args.no_inprocess else [None]) + list(args.cluster)
    worker_rss: dict[str, dict] = {}
    threads: dict[str, int] = {}
    for n in args.n:
        x, y = users(n, rng)
        wx, wy = users(min(n, WARMUP_USERS), rng)
        for rnd in range(args.repeat):
            for cfg in configs:
                with contextlib.ExitStack() as stack:
                    client = None
                    if cfg is not None:
                        # one cluster open at a time: a LocalCluster's scheduler runs in this process, and
                        # with a second cluster's client open here it ran 1.7-2x slower (2026-11-26)
                        t0 = time.perf_counter()
                        client = stack.enter_context(cluster_client(cfg, args.timeout))
                        threads[cfg] = cluster_threads(client)
                        start = time.perf_counter() - t0
                        run_ustat(
                            "kendall",
                            wx,
                            wy,
                            epsilon=args.epsilon,
                            pairs_per_user=1,
                            mode="simulate",
                            batch=args.batch,
                            compute_theorem5=False,
                            timeout=args.timeout,
                            cluster=client,
                            **RATINGS,
                        )  # warm-up: imports, circuit and plan caches in every worker
                        print(
                            f"cluster {cfg}: {threads[cfg]} worker thread(s), start-up {start:.1f} s, warm-up "
                            f"{time.perf_counter() - t0 - start:.1f} s (not timed below)",
                            flush=True,
                        )
                    seen.pop("seconds", None)
                    ustat_runners._run_simulate = spy if cfg is None else real_simulate
                    u0 = resource.getrusage(resource.RUSAGE_SELF)
                    t0 = time.perf_counter()
                    try:
                        r = run_ustat(
                            "kendall",
                            x,
                            y,
                            epsilon=args.epsilon,
                            pairs_per_user=1,
                            mode="simulate",
                            batch=args.batch,
                            compute_theorem5=False,
                            timeout=args.timeout,
                            cluster=client,
                            **RATINGS,
                        )
                    finally:
                        ustat_runners._run_simulate = real_simulate
                    dt = time.perf_counter() - t0
                    u1 = resource.getrusage(resource.RUSAGE_SELF)
                    if client is not None:
                        rss = client.run(peak_rss_mib)
                        prev = worker_rss.get(cfg, {})
                        worker_rss[cfg] = {i: max(v, prev.get(i, 0.0)) for i, v in enumerate(rss.values())}
                rows.append((cfg or "in-process", n, rnd, r, dt, load_avg()))
                print(
                    f"{cfg or 'in-process'} n={n} round {rnd}: {dt:.1f} s, pairs {r.pairs}, "
                    f"AND {r.and_gates}, bytes {r.bytes} ({r.bytes / r.pairs:.0f} per pair), "
                    f"{r.pairs / dt:.0f} pairs/s, {r.and_gates / dt / 1e6:.2f} M AND/s, executions {r.executions}, "
                    f"CPU user {u1.ru_utime - u0.ru_utime:.1f} s sys {u1.ru_stime - u0.ru_stime:.1f} s (this process), "
                    f"estimate {r.estimate:.4f} (exact {r.exact:.4f}), load {load_avg()}",
                    flush=True,
                )
                if "seconds" in seen:
                    core = seen["seconds"]
                    print(
                        f"  of which the two-party executions (_run_simulate: sessions, OT, garbling, "
                        f"evaluation): {core:.1f} s, {r.pairs / core:.0f} pairs/s, "
                        f"{r.and_gates / core / 1e6:.2f} M AND/s",
                        flush=True,
                    )
    if "circuit" in seen and not args.no_bench:
        c = seen["circuit"]
        b = bench_garble(c, args.batch)
        print(
            f"bench garble on the same circuit ({c.n_and} AND, batch {args.batch}): garble {b['garble_mands']:.2f} "
            f"M AND/s, evaluate {b['eval_mands']:.2f} M AND/s (one thread each, in memory, best of 3; "
            f"{b['garble_mands'] * 1e6 / c.n_and:.0f} pairs/s of garbling alone)",
            flush=True,
        )
    if args.network_users:
        n = args.network_users
        x, y = users(n, rng)
        t0 = time.perf_counter()
        r = run_ustat(
            "kendall", x, y, epsilon=args.epsilon, pairs_per_user=1, mode="network", workers=args.workers, **RATINGS
        )
        dt = time.perf_counter() - t0
        rows.append((f"network, {args.workers} worker processes", n, 0, r, dt, load_avg()))
        print(
            f"network n={n} ({args.workers} worker processes, {r.executions} TCP sessions): {dt:.1f} s, "
            f"bytes {r.bytes}",
            flush=True,
        )
    print()
    print(
        "| mode | users | round | pairs | AND/pair | AND gates | bytes | seconds | pairs/s | M AND/s | speed-up | load 1/5/15 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    base = {(n, rnd): dt for cfg, n, rnd, _, dt, _ in rows if cfg == "in-process"}
    for cfg, n, rnd, r, dt, load in rows:
        sp = base.get((n, rnd))
        speed = f"{sp / dt:.2f}x" if sp and cfg != "in-process" and not cfg.startswith("network") else "-"
        print(
            f"| {cfg} | {n} | {rnd} | {r.pairs} | {r.extra['and_gates_per_pair']} | {r.and_gates} | {r.bytes} | "
            f"{dt:.1f} | {r.pairs / dt:.0f} | {r.and_gates / dt / 1e6:.2f} | {speed} | {load} |"
        )
    print(f"\npeak RSS of this process (the driver): {peak_rss_mib():.0f} MiB")
    for spec, rss in worker_rss.items():
        print(f"peak RSS of the workers of {spec}: " + ", ".join(f"{v:.0f}" for v in rss.values()) + " MiB")
    task_rows = [(cfg, r) for cfg, _, _, r, _, _ in rows if r.extra.get("cluster_task_seconds")]
    if task_rows:
        print("\nper-task rates (the tasks' own wall time, summed over tasks):")
        rates = {}
        for cfg, r in task_rows:
            rate = r.pairs / r.extra["cluster_task_seconds"]
            rates.setdefault(cfg, []).append(rate)
            print(
                f"  {cfg} n={r.n}: {r.extra['cluster_tasks']} tasks, {rate:.0f} pairs per task-second "
                f"({rate * r.extra['and_gates_per_pair'] / 1e6:.2f} M AND per task-second)"
            )
        if args.project:
            prep = driver_prep_seconds(args.project, rng)
            m = args.project // 2
            print(
                f"\nPROJECTION (not a measurement) for n = {args.project} users (P = 1: {m} pairs): the driver's "
                f"preparation measured at that size: {prep:.1f} s; garbling at the slowest measured per-task rate, "
                "assuming the tasks scale linearly with worker threads (each thread one batch at a time):"
            )
            rate = min(min(v) for v in rates.values())
            for w in sorted({*threads.values(), 16, 64, 256}):
                print(f"  {w:4d} worker threads: {prep + m / (rate * w):8.0f} s")


if __name__ == "__main__":
    main()
