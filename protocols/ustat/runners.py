"""How the pairs of the 2PC U-statistic protocol run: one runner interface for the three modes.

What it does
    A :class:`PairRunner` takes the public noisy-kernel circuit and every
    sampled pair's two circuit inputs and returns a :class:`RunOutput`: the
    exact integer sum of the reported values (the estimate is affine in it,
    :meth:`pairwise.circuits.noise.NoisyCircuit.debias`), their count, the
    bytes on the wire, the number of SIMD executions and, where the mode
    keeps them, the per-pair outputs the aggregator received.

    * :class:`SimulateRunner`: every SIMD batch is a real execution of
      :class:`pairwise.mpc.twopc.GarblerSession` /
      :class:`pairwise.mpc.twopc.EvaluatorSession` (real garbling, real IKNP
      OT, bytes counted on the wire) over an in-memory channel between two
      threads of this process.
    * :class:`ClusterRunner`: the same executions as Dask tasks
      (:mod:`pairwise.protocols.ustat.cluster`); tasks return only sums.
    * :class:`NetworkRunner`: users hosted by worker processes
      (:mod:`pairwise.protocols.ustat.worker`, user u on worker u mod W); the
      pairs whose garbler is on worker a and evaluator on worker b form one
      Yao session over loopback TCP between a and b, in mutual TLS 1.3
      (certificates ``worker-K`` of ``Transport.tls_dir`` or a throwaway CA).

    :func:`runner_for` picks the runner of a :class:`UStatConfig`.

Security model
    As :mod:`pairwise.protocols.ustat.driver`: semi-honest parties; each party's
    random bits (labels, Delta, OT secrets, noise coins) are drawn by its own
    side of the runtime from the OS CSPRNG.  Simulate and cluster modes play
    both parties in one trust domain (measurement, not deployment).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..transport import Transport
from .config import UStatConfig, UStatError

__all__ = [
    "PairRunner",
    "PairJob",
    "RunOutput",
    "ClusterInfo",
    "SimulateRunner",
    "ClusterRunner",
    "NetworkRunner",
    "runner_for",
]

Progress = Callable[[int, int], None] | None


@dataclass(frozen=True)
class PairJob:
    """What every mode needs: the public circuit, the circuit inputs of each pair and the public pair design.

    ``gx[i]`` / ``ey[i]``: the garbler's and the evaluator's input of pair i;
    ``owner_g`` / ``owner_e``: the user index hosting each side (network mode);
    ``params``: the :func:`pairwise.circuits.noise.noisy_kernel` arguments a
    worker process rebuilds the same circuit from.
    """

    nc: Any
    gx: Any
    ey: Any
    owner_g: np.ndarray
    owner_e: np.ndarray
    params: dict

    @property
    def pairs(self) -> int:
        return len(self.gx)


@dataclass(frozen=True)
class ClusterInfo:
    """Where a cluster run went: public costs, and the tasks' wall time (not private)."""

    cluster: str
    workers: int
    tasks: int
    task_seconds: float


@dataclass(frozen=True)
class RunOutput:
    """What the aggregator holds after the pairs ran (see the module docstring)."""

    total: int
    count: int
    bytes: int
    executions: int
    outputs: np.ndarray | None = None
    cluster: ClusterInfo | None = None


class PairRunner(Protocol):
    """One way to run every pair's noisy-kernel circuit (simulate, cluster or network)."""

    def run(self, job: PairJob, progress: Progress = None) -> RunOutput: ...


def _aggregate(nc, out: np.ndarray) -> tuple[int, int]:
    """What a batch of noisy outputs reports to the aggregator: the exact integer sum of the reported
    values (``nc.reported_values``: the noisy value, or a k-RR code's value) and their count.  The
    estimate is affine in that sum (``nc.debias``), so batches combine exactly."""
    return int(nc.reported_values(out).astype(object).sum()), int(np.size(out))


def _run_simulate(nc, gx, ey, batch: int, progress) -> tuple[np.ndarray, int, int]:
    """All pairs as SIMD executions of one Yao session over an in-memory channel (two threads)."""
    from pairwise.circuits.ir import ints_to_bits
    from pairwise.mpc.channel import MemoryChannel
    from pairwise.mpc.twopc import EvaluatorSession, GarblerSession

    circuit, m = nc.circuit, len(gx)
    # every pair's input bits at once (range-checked), sliced per batch: no Python loop per pair
    gin, ein = ({g.name: g for g in circuit.inputs}[k] for k in ("x", "y"))
    gbits = ints_to_bits(np.asarray(gx), gin.width, gin.signed, name="x")
    ebits = ints_to_bits(np.asarray(ey), ein.width, ein.signed, name="y")
    a, b = MemoryChannel.pair(timeout=600)
    outputs: list[np.ndarray] = []
    err: list[BaseException] = []
    starts = list(range(0, m, batch))

    def evaluator() -> None:
        try:
            s = EvaluatorSession(b, session_id=b"pairwise-ustat")
            for s0 in starts:
                s1 = min(m, s0 + batch)
                res = s.run(circuit, {"y": ebits[s0:s1]}, output="evaluator", random=("rx", "ry"))
                outputs.append(np.asarray(res.outputs[0], dtype=np.int64))
        except BaseException as exc:  # surfaced in the caller
            err.append(exc)
            b.close()

    th = threading.Thread(target=evaluator, name="ustat-evaluator", daemon=True)
    th.start()
    try:
        g = GarblerSession(a, session_id=b"pairwise-ustat")
        for s0 in starts:
            s1 = min(m, s0 + batch)
            g.run(circuit, {"x": gbits[s0:s1]}, output="evaluator", random=("rx", "ry"))
            if progress:
                progress(s1, m)
    except BaseException as exc:
        a.close()
        th.join(5)
        if err:
            raise err[0] from exc
        raise
    th.join()
    if err:
        raise err[0]
    st = a.stats()
    a.close()
    return np.concatenate(outputs), st["bytes_sent"] + st["bytes_received"], len(starts)


def _free_ports(k: int) -> list[int]:
    import socket

    socks, ports = [], []
    try:
        for _ in range(k):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _worker_name(w: int) -> str:
    return f"worker-{w}"


def _run_network(
    nc, params: dict, owner_g: np.ndarray, owner_e: np.ndarray, gx, ey, workers: int, transport: Transport, progress
) -> tuple[np.ndarray, int, int]:
    """Users hosted by ``workers`` processes; each (garbler worker, evaluator worker) group of pairs
    is one real Yao session over loopback TCP between those processes (or two threads of one worker).

    ``owner_g`` / ``owner_e``: the worker hosting each pair's garbler / evaluator.  Sessions run in
    mutual TLS with the certificates ``worker-K`` of ``transport.tls_dir``, or of a throwaway CA when
    it is None; each side pins the other worker's name.  ``transport.tls=False``: plaintext (loopback
    only).  ``transport.timeout`` bounds every wait of a worker on its peer, ``connect_deadline`` how
    long it keeps trying to reach it.  Every worker is stopped when this function leaves, normally or not (SIGTERM
    and Ctrl-C included), and dies with this process.
    """
    import contextlib
    import json
    import subprocess
    import sys

    from pairwise.mpc.tls import throwaway_credentials

    from ..processes import spawn, terminate
    from ..transport import transport_argv

    m = len(gx)
    timeout, tls_dir, tls = transport.timeout, transport.tls_dir, transport.tls
    groups: dict[tuple[int, int], np.ndarray] = {}
    for key in set(zip(owner_g.tolist(), owner_e.tolist())):
        groups[key] = np.flatnonzero((owner_g == key[0]) & (owner_e == key[1]))
    ports = _free_ports(len(groups))
    jobs = {
        w: {
            "worker": w,
            "params": params,
            "sessions": [],
            "timeout": timeout,
            "connect_timeout": transport.connect_deadline,
        }
        for w in range(workers)
    }
    order = {}
    for sid, ((wg, we), idx) in enumerate(sorted(groups.items())):
        order[sid] = idx
        jobs[wg]["sessions"].append(
            {
                "id": sid,
                "role": "garbler",
                "port": ports[sid],
                "peer": _worker_name(we),
                "inputs": [int(gx[i]) for i in idx],
            }
        )
        jobs[we]["sessions"].append(
            {
                "id": sid,
                "role": "evaluator",
                "port": ports[sid],
                "peer": _worker_name(wg),
                "inputs": [int(ey[i]) for i in idx],
            }
        )
    active = [w for w, job in jobs.items() if job["sessions"]]
    if not tls:
        creds = contextlib.nullcontext(None)
    elif tls_dir is None:
        creds = throwaway_credentials([(_worker_name(w), "client") for w in active])
    else:
        from pairwise.mpc.tls import TLSConfig

        for w in active:  # a missing or unusable certificate fails here, before any process starts
            TLSConfig(tls_dir, _worker_name(w))
        creds = contextlib.nullcontext(tls_dir)
    # One thread per worker feeds its job on stdin and collects its report, all with a deadline
    # (a worker reads its whole job before it connects to any peer, so every job must go out at once).
    limit = timeout * 4 + 30
    procs: dict[int, subprocess.Popen] = {}
    reports: dict[int, tuple[str, str] | None] = {}

    def drive(w: int, p: subprocess.Popen, job_text: str) -> None:
        try:
            reports[w] = p.communicate(input=job_text, timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            reports[w] = None
        except (OSError, ValueError):  # the pipes were closed under us: we are shutting down
            reports[w] = None

    threads = []
    with creds as cert_dir:
        try:
            for w in active:
                tls_args = transport_argv(cert_dir, _worker_name(w)) if cert_dir is not None else []
                p = spawn(
                    [sys.executable, "-m", "pairwise.protocols.ustat.worker", *tls_args],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                procs[w] = p
                t = threading.Thread(target=drive, args=(w, p, json.dumps(jobs[w])), daemon=True)
                t.start()
                threads.append(t)
            for t in threads:
                t.join(limit + 10)
        finally:
            terminate(procs.values())  # no-op for workers that finished; SIGTERM/SIGKILL for the rest
            for t in threads:
                t.join(10)
    out = np.zeros(m, dtype=np.int64)
    filled = np.zeros(m, dtype=bool)
    total_bytes = 0
    errors = []
    for w, p in procs.items():
        rep_io = reports.get(w)
        if rep_io is None:
            errors.append(f"worker {w}: did not finish within {limit:.0f} s")
            continue
        stdout, stderr = rep_io
        lines = [ln for ln in stdout.strip().splitlines() if ln.startswith("{")]
        if not lines:
            errors.append(f"worker {w} exited with {p.returncode}: {stderr.strip()[-500:]}")
            continue
        rep = json.loads(lines[-1])
        errors.extend(f"worker {w}: {e}" for e in rep["errors"])
        for key, r in rep["sessions"].items():
            sid = int(key.split(":")[0])
            if key.endswith(":evaluator"):
                out[order[sid]] = r["outputs"]
                filled[order[sid]] = True
            else:
                total_bytes += r["bytes_sent"] + r["bytes_received"]
        if progress:
            progress(int(filled.sum()), m)
    if errors:
        raise UStatError("network run failed: " + "; ".join(errors))
    if not filled.all():
        raise UStatError(f"network run lost {int((~filled).sum())} pair outputs")
    return out, total_bytes, len(groups)


class SimulateRunner:
    """Every batch of ``batch`` pairs is one real Yao execution over an in-memory channel (this process)."""

    def __init__(self, batch: int) -> None:
        self.batch = int(batch)

    def run(self, job: PairJob, progress: Progress = None) -> RunOutput:
        out, nbytes, executions = _run_simulate(job.nc, job.gx, job.ey, self.batch, progress)
        total, count = _aggregate(job.nc, out)
        return RunOutput(total, count, nbytes, executions, outputs=out)


class ClusterRunner:
    """Simulate mode's batches as Dask tasks (:func:`pairwise.protocols.ustat.cluster.run_simulate_cluster`)."""

    def __init__(self, cluster: Any, batch: int, timeout: float) -> None:
        self.cluster, self.batch, self.timeout = cluster, int(batch), float(timeout)

    def run(self, job: PairJob, progress: Progress = None) -> RunOutput:
        from .cluster import run_simulate_cluster

        cr = run_simulate_cluster(self.cluster, job.nc, job.gx, job.ey, self.batch, progress, self.timeout)
        info = ClusterInfo(cr["cluster"], cr["workers"], cr["tasks"], cr["seconds"])
        return RunOutput(cr["sum"], cr["count"], cr["bytes"], cr["executions"], outputs=None, cluster=info)


class NetworkRunner:
    """Users hosted by ``workers`` processes, real 2PC over loopback TCP between them (``transport``: TLS, timeouts)."""

    def __init__(self, workers: int, transport: Transport) -> None:
        self.workers, self.transport = int(workers), transport

    def run(self, job: PairJob, progress: Progress = None) -> RunOutput:
        t, w = self.transport, self.workers
        out, nbytes, executions = _run_network(
            job.nc, job.params, job.owner_g % w, job.owner_e % w, job.gx, job.ey, w, t, progress
        )
        total, count = _aggregate(job.nc, out)
        return RunOutput(total, count, nbytes, executions, outputs=out)


def runner_for(config: UStatConfig) -> PairRunner:
    """The runner of ``config``'s mode: network, cluster (simulate with ``cluster=``) or simulate."""
    if config.mode == "network":
        return NetworkRunner(config.workers, config.transport)
    if config.cluster is not None:
        return ClusterRunner(config.cluster, config.batch, config.transport.timeout)
    return SimulateRunner(config.batch)
