"""Real ECDF server processes on loopback, for demos, tests and benchmarks.

What it does
    :class:`ServerProcesses` starts m ``python -m pairwise ecdf serve``
    processes, each on a free loopback port (printed on its stdout), with
    ``--exit-with-parent`` so they go away even if the starting process is
    killed, and optionally with durable state (``state_dir``).  It can stop
    (SIGTERM), kill (SIGKILL, as a crash) and restart a server on the same
    port and state.  With ``tls=True`` it makes a throwaway CA in a
    temporary directory (:func:`pairwise.mpc.tls.create_certificate`) with
    certificates ``ecdf-server-J`` (role server, one per server),
    ``ecdf-querier`` and ``ecdf-client``, and every connection is mutual TLS.
    With ``cluster="local:N"`` every server starts a Dask LocalCluster of its
    own (``ecdf serve --cluster``); a list gives one spec per server, and one
    scheduler address for two servers is refused.

Security model
    Loopback only.  The throwaway CA key sits in the temporary directory
    for the life of the object (tests may mint more certificates with it)
    and is deleted by :meth:`ServerProcesses.stop`.
"""

from __future__ import annotations

import json
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from .wire import ServerUnavailable, format_address

__all__ = ["ServerProcesses"]


class ServerProcesses:
    """m real server processes on loopback (``python -m pairwise ecdf serve``), as a context manager.

    Each server listens on a free port and prints its address; logs go to a
    temporary file per server (:meth:`logs`).  ``state_dir``: every server
    keeps its state there (``ecdf-server-I.db``), so :meth:`restart` resumes
    it; without it the state is in memory.  :meth:`stop` terminates the
    processes this object started.
    """

    def __init__(self, m: int = 2, *, host: str = "127.0.0.1", budget: str | float = "10",
                 dataset_budgets: dict | None = None, timeout: float = 120.0, startup_timeout: float = 60.0,
                 state_dir: str | None = None, tls: bool = False, extra_args: tuple = (),
                 cluster: str | list | None = None) -> None:
        if m < 2:
            raise ValueError("need at least 2 servers")
        self.m = m
        self.state_dir = state_dir
        clusters = self._clusters(cluster, m)
        self.tls_dir: str | None = None
        self.querier_tls = self.client_tls = None
        if tls:
            from pairwise.mpc.tls import TLSConfig, create_certificate

            self.tls_dir = tempfile.mkdtemp(prefix="pairwise-ecdf-tls-")
            try:
                for j in range(m):
                    create_certificate(self.tls_dir, self.server_name(j), "server", days=2)
                create_certificate(self.tls_dir, "ecdf-querier", "querier", days=2)
                create_certificate(self.tls_dir, "ecdf-client", "client", days=2)
                self.querier_tls = TLSConfig(self.tls_dir, "ecdf-querier")
                self.client_tls = TLSConfig(self.tls_dir, "ecdf-client")
            except BaseException:
                shutil.rmtree(self.tls_dir, ignore_errors=True)
                raise
        self.host = host
        self.startup_timeout = startup_timeout
        self.procs: list[subprocess.Popen | None] = [None] * m
        self._logs = [tempfile.TemporaryFile(mode="w+") for _ in range(m)]
        self.addresses: list[tuple[str, int]] = [(host, 0)] * m
        self._args = []
        for j in range(m):
            args = ["--server-id", str(j), "--budget", str(budget), "--timeout", str(timeout),
                    "--exit-with-parent", *extra_args]
            if state_dir is not None:
                args += ["--state", str(state_dir)]
            if clusters[j] is not None:
                args += ["--cluster", clusters[j]]
            if self.tls_dir is not None:
                args += ["--tls", self.tls_dir, "--name", self.server_name(j)]
                for k in range(m):
                    if k != j:
                        args += ["--peer-name", f"{k}={self.server_name(k)}"]
            for k, v in (dataset_budgets or {}).items():
                args += ["--dataset-budget", f"{k}={v}"]
            self._args.append(args)
        try:
            for j in range(m):
                self._spawn(j, 0)
            deadline = time.monotonic() + startup_timeout
            for j in range(m):
                self.addresses[j] = self._read_address(j, deadline)
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _clusters(cluster, m: int) -> list:
        """``--cluster`` of each server: one local spec (each server starts its own LocalCluster), or one
        spec per server; one scheduler address for several servers is refused (they would share workers)."""
        from ..cluster import parse_cluster

        if cluster is None:
            return [None] * m
        specs = [cluster] * m if isinstance(cluster, str) else list(cluster)
        if len(specs) != m:
            raise ValueError(f"cluster: one spec for all {m} servers or one per server, got {len(specs)}")
        parsed = [None if c is None else parse_cluster(c) for c in specs]
        remote = [str(p) for p in parsed if p is not None and not p.local]
        if len(remote) != len(set(remote)):
            raise ValueError("cluster: two servers name one scheduler; each server needs a cluster of its own "
                             "(a worker holding two servers' key shares could reconstruct the clients' values)")
        return [None if p is None else str(p) for p in parsed]

    def _spawn(self, j: int, port: int) -> None:
        args = [sys.executable, "-m", "pairwise", "ecdf", "serve", "--listen", f"{self.host}:{port}", *self._args[j]]
        self.procs[j] = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._logs[j], text=True)

    def _read_address(self, j: int, deadline: float) -> tuple[str, int]:
        p = self.procs[j]
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerUnavailable(f"server {j} did not start within the startup timeout; log: {self.logs(j)}")
                if sel.select(timeout=min(left, 0.5)):
                    line = p.stdout.readline()
                    if not line:
                        raise ServerUnavailable(f"server {j} exited during startup; log: {self.logs(j)}")
                    try:
                        msg = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if msg.get("event") == "listening":
                        return msg["host"], int(msg["port"])
                elif p.poll() is not None:
                    raise ServerUnavailable(f"server {j} exited during startup; log: {self.logs(j)}")
        finally:
            sel.close()

    @staticmethod
    def server_name(j: int) -> str:
        """The certificate name of server j (``tls=True``)."""
        return f"ecdf-server-{j}"

    @property
    def servers(self) -> str:
        return ",".join(format_address(a) for a in self.addresses)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p is not None]

    def logs(self, j: int) -> str:
        f = self._logs[j]
        f.flush()
        f.seek(0)
        text = f.read()
        f.seek(0, 2)
        return text

    def kill(self, j: int, *, hard: bool = False) -> int | None:
        """Stop server j: SIGTERM (a clean shutdown), or SIGKILL with ``hard=True`` (a crash).

        Returns its exit status.  A server that ignores SIGTERM for 10 s is killed.
        """
        p = self.procs[j]
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        if p.stdout:
            p.stdout.close()
        return p.returncode

    def restart(self, j: int) -> None:
        """Start server j again on its port (and state), after :meth:`kill`."""
        if self.procs[j] is not None and self.procs[j].poll() is None:
            raise RuntimeError(f"server {j} is still running; kill it first")
        port = self.addresses[j][1]
        deadline = time.monotonic() + self.startup_timeout
        while True:  # the port may take a moment to be free again after a crash
            self._spawn(j, port)
            try:
                self.addresses[j] = self._read_address(j, deadline)
                return
            except ServerUnavailable:
                if time.monotonic() >= deadline or "address already in use" not in self.logs(j):
                    raise
                self.procs[j].wait(timeout=10)
                time.sleep(0.2)

    def stop(self) -> None:
        for p in self.procs:  # signal all first, then wait: the servers shut down in parallel
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for j in range(len(self.procs)):
            self.kill(j)
        for f in self._logs:
            f.close()
        self.procs, self._logs = [], []
        if self.tls_dir is not None:
            shutil.rmtree(self.tls_dir, ignore_errors=True)

    def __enter__(self) -> ServerProcesses:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

