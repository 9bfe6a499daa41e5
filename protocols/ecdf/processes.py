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

Each server is one :class:`pairwise.protocols.service.processes.ServiceProcess`
(start, wait for the ``listening`` line, logs, kill, restart on the same
port), the supervision every service shares.
"""

from __future__ import annotations

import shutil
import tempfile
import time

from ..service.processes import ServiceProcess, stop_all
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

    def __init__(
        self,
        m: int = 2,
        *,
        host: str = "127.0.0.1",
        budget: str | float = "10",
        dataset_budgets: dict | None = None,
        timeout: float = 120.0,
        startup_timeout: float = 60.0,
        state_dir: str | None = None,
        tls: bool = False,
        extra_args: tuple = (),
        cluster: str | list | None = None,
    ) -> None:
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
        self.services: list[ServiceProcess] = []
        try:
            for j in range(m):
                args = [
                    "--server-id",
                    str(j),
                    "--num-servers",
                    str(m),
                    "--budget",
                    str(budget),
                    "--timeout",
                    str(timeout),
                ]
                args += extra_args
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
                svc = ServiceProcess(
                    ["ecdf", "serve"],
                    args,
                    host=host,
                    label=f"server {j}",
                    startup_timeout=startup_timeout,
                    error=ServerUnavailable,
                    start=False,
                )
                self.services.append(svc)
                svc.spawn(0)
            deadline = time.monotonic() + startup_timeout
            for svc in self.services:  # all spawned first: they start in parallel
                svc.address = svc.wait_listening(deadline)
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
            raise ValueError(
                "cluster: two servers name one scheduler; each server needs a cluster of its own "
                "(a worker holding two servers' key shares could reconstruct the clients' values)"
            )
        return [None if p is None else str(p) for p in parsed]

    @staticmethod
    def server_name(j: int) -> str:
        """The certificate name of server j (``tls=True``)."""
        return f"ecdf-server-{j}"

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [svc.address for svc in self.services]

    @property
    def procs(self) -> list:
        """The ``subprocess.Popen`` of each server (None before it started)."""
        return [svc.proc for svc in self.services]

    @property
    def servers(self) -> str:
        return ",".join(format_address(a) for a in self.addresses)

    @property
    def pids(self) -> list[int]:
        return [svc.pid for svc in self.services if svc.pid is not None]

    def logs(self, j: int) -> str:
        return self.services[j].logs()

    def kill(self, j: int, *, hard: bool = False) -> int | None:
        """Stop server j: SIGTERM (a clean shutdown), or SIGKILL with ``hard=True`` (a crash).

        Returns its exit status.  A server that ignores SIGTERM for 10 s is killed.
        """
        return self.services[j].kill(hard=hard)

    def restart(self, j: int) -> None:
        """Start server j again on its port (and state), after :meth:`kill`."""
        if self.services[j].running:
            raise RuntimeError(f"server {j} is still running; kill it first")
        self.services[j].restart()

    def stop(self) -> None:
        stop_all(getattr(self, "services", []))  # signal all first, then wait: the servers shut down in parallel
        self.services = []
        if self.tls_dir is not None:
            shutil.rmtree(self.tls_dir, ignore_errors=True)

    def __enter__(self) -> ServerProcesses:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
