"""A Dask scheduler and N worker processes on loopback, started with Dask's own command line.

Used by the scale benchmarks (``--cluster loopback:N``) to measure the same code path a real
cluster uses: ``dask scheduler`` and ``dask worker tcp://HOST:PORT`` as separate processes,
reached through ``Client("tcp://127.0.0.1:PORT")``.  Everything is torn down on exit (SIGTERM,
then SIGKILL after a deadline), and every wait has a deadline.

Security model: none of its own; loopback only.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator


def _stop(procs: list[subprocess.Popen], timeout: float = 20.0) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


@contextlib.contextmanager
def loopback_cluster(n_workers: int, *, nthreads: int = 1, timeout: float = 60.0) -> Iterator[str]:
    """Start ``dask scheduler`` and ``n_workers`` x ``dask worker`` on 127.0.0.1; yield the scheduler address."""
    dask_cli = [sys.executable, "-m", "dask"]
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="pairwise-dask-") as tmp:
        sfile = os.path.join(tmp, "scheduler.json")
        log = open(os.path.join(tmp, "log.txt"), "w")  # noqa: SIM115 - closed below
        try:
            procs.append(
                subprocess.Popen(
                    dask_cli
                    + ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", sfile],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            deadline = time.monotonic() + timeout
            address = None
            while address is None:
                if procs[0].poll() is not None:
                    raise RuntimeError(f"dask scheduler exited with {procs[0].returncode}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"dask scheduler did not start within {timeout:g} s")
                with contextlib.suppress(OSError, ValueError):
                    with open(sfile) as f:
                        address = json.load(f)["address"]
                time.sleep(0.2)
            for i in range(n_workers):
                procs.append(
                    subprocess.Popen(
                        dask_cli
                        + [
                            "worker",
                            address,
                            "--nthreads",
                            str(nthreads),
                            "--host",
                            "127.0.0.1",
                            "--no-dashboard",
                            "--name",
                            f"loopback-{i}",
                            "--death-timeout",
                            str(int(timeout)),
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
            yield address
        finally:
            _stop(procs)
            log.close()
