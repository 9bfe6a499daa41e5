"""The U-statistic simulation on Dask distributed: one task per run of up to eight SIMD batches of sampled pairs.

What it does
    :func:`run_simulate_cluster` is ``run_ustat(..., mode="simulate",
    cluster=...)``'s dispatch: the driver has sampled the pairs (public, [BBGK20, Sec. 5]
    step 1) and cut them into equal tasks of at most
    :data:`BATCHES_PER_TASK` SIMD batches; every task runs
    :func:`pairwise.protocols.ustat.runners._run_simulate` on its pairs (one
    Yao session, one batch per execution, in sequence) -- the same
    real garbler/evaluator execution (garbling, IKNP OT, bytes counted on an
    in-memory channel between two threads) as the in-process simulation.
    Each party's random bits (labels, Delta, OT secrets, the noise gadget's
    coins) are drawn inside the task from the worker's OS CSPRNG; nothing
    random is shipped from the driver.  A task returns only aggregates
    (:func:`pairwise.protocols.ustat.runners._aggregate`: the exact integer sum
    of its noisy kernel values and their count, plus bytes, executions and
    the task's wall time), never a per-pair value, and the driver adds them up.

    At most ``2 x`` (worker threads) tasks are in flight
    (:func:`pairwise.protocols.cluster.run_bounded`), and a task garbles one
    batch at a time: memory per worker is bounded by one batch (plus its
    task's packed inputs, 16 bytes per pair), and the driver only ever
    serializes a window of tasks.  Every wait has a
    deadline; a worker that dies holding a batch fails the run with
    :class:`pairwise.protocols.cluster.ClusterError`.

What each machine learns
    This is a simulation, as in-process: a worker plays *both* parties of
    every batch it runs, so it sees both parties' inputs of that batch (the
    garbler's x and the evaluator's y of each pair) and the batch's noisy
    sum.  The driver holds all the data already and receives only per-batch
    noisy sums.  For a deployment where the parties are separate, use
    ``mode="network"`` (worker processes per user group, real TCP between
    them).

Security model
    As :mod:`pairwise.protocols.ustat.driver` (semi-honest, computational DP)
    for the protocol it simulates; the driver and its Dask workers are one
    trust domain (:mod:`pairwise.protocols.cluster`).
"""

from __future__ import annotations

import time
from typing import Any

from ..cluster import cluster_threads, keep_large_allocations, open_cluster, run_bounded
from .runners import _aggregate, _run_simulate

__all__ = ["run_simulate_cluster"]


#: Most SIMD batches one task runs (one Yao session, executions in sequence).  A task pays a
#: session's set-up (base OTs, fresh label and scratch buffers) once: at n = 10^6 (8,192 pairs per
#: batch, 2 workers) one batch per task took 17.2 task-seconds in all, eight took 12.5.
BATCHES_PER_TASK = 8


def _batch_task(nc, gx, ey, batch: int) -> dict:
    """One Dask task: real Yao executions of the noisy kernel over its pairs, ``batch`` per execution; aggregates only."""
    keep_large_allocations()
    t0 = time.perf_counter()
    out, nbytes, executions = _run_simulate(nc, gx, ey, max(1, batch), None)
    total, count = _aggregate(nc, out)
    return {
        "sum": total,
        "count": count,
        "bytes": int(nbytes),
        "executions": int(executions),
        "seconds": time.perf_counter() - t0,
    }


def run_simulate_cluster(cluster: Any, nc, gx, ey, batch: int, progress, timeout: float) -> dict:
    """Run every batch of pairs ``(gx, ey)`` as a Dask task on ``cluster`` (spec string or ``Client``).

    Returns ``{"sum", "count", "bytes", "executions", "seconds", "tasks", "cluster", "workers",
    "threads"}`` (``seconds``: the tasks' own wall time, summed).
    """
    m = len(gx)
    with open_cluster(cluster, timeout=timeout) as client:
        threads = cluster_threads(client)
        # Tasks of equal size, their number a multiple of the worker threads, each at most
        # BATCHES_PER_TASK executions of at most ``batch`` pairs: every thread gets work even when m
        # is small, no short last task idles the rest, and a session's set-up is paid per task.
        batches = max(1, -(-m // batch))
        tasks = -(-batches // (threads * BATCHES_PER_TASK)) * threads
        size = max(1, -(-m // tasks))
        batch = min(batch, size)
        info = client.scheduler_info()
        # The circuit is public and the same for every batch: one copy per worker, not one per task.
        nc_future = client.scatter(nc, broadcast=True, hash=False, timeout=timeout)
        acc = {"sum": 0, "count": 0, "bytes": 0, "executions": 0, "seconds": 0.0}

        def on_result(_i: int, r: dict) -> None:
            for k in acc:
                acc[k] += r[k]
            if progress:
                progress(acc["count"], m)

        items = ((gx[s0 : s0 + size], ey[s0 : s0 + size], batch) for s0 in range(0, m, size))
        tasks = run_bounded(
            client,
            _batch_task,
            items,
            window=2 * threads,
            timeout=timeout,
            on_result=on_result,
            name="batch",
            shared=(nc_future,),
        )
        address = info.get("address", "")
    if acc["count"] != m:
        raise RuntimeError(f"cluster run returned {acc['count']} of {m} pair values")
    acc.update(
        tasks=tasks,
        cluster=str(cluster) if isinstance(cluster, str) else address,
        workers=len(info.get("workers", {})),
        threads=threads,
    )
    return acc
