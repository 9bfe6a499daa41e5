"""Scale-out on Dask distributed: the cluster setup and the bounded task loop that pairwise's drivers share.

What it does
    :func:`parse_cluster` reads a cluster spec (``local``, ``local:N``,
    ``tcp://HOST:PORT``, ``tls://HOST:PORT``), :func:`open_cluster` turns it
    into a connected :class:`distributed.Client` (starting and tearing down a
    :class:`distributed.LocalCluster` of N single-threaded worker processes
    for ``local``), and :func:`run_bounded` runs a stream of tasks with at
    most ``window`` of them in flight, a deadline on every wait, and a
    callback per finished task.  :mod:`pairwise.protocols.ustat.cluster` (the
    U-statistic simulation) and the ECDF servers use it.

Why Dask distributed
    It is the scheduler the design names (docs/design.md, "Deployment
    decisions"): pure Python and numpy-native, ``LocalCluster`` uses every core of one machine,
    and ``Client("tls://scheduler:8786")`` runs the same tasks on a cluster
    started with ``dask scheduler`` / ``dask worker``.  It is an optional
    dependency, the ``cluster`` extra: ``pip install -e '.[cluster]'`` in a
    checkout (the ``dev`` extra, hence CI, includes it).

Failure model
    A task is never retried by pairwise.  On a ``local`` cluster the scheduler
    runs with ``allowed-failures = 0``, so a worker that dies while it holds a
    task fails the run at once with :class:`ClusterError` naming the task;
    on a remote scheduler its own ``distributed.scheduler.allowed-failures``
    decides how often a task is moved to another worker first (Dask's default
    is 3).  A run in which no task finishes within ``timeout`` seconds (every
    worker gone, a stalled worker, an unreachable scheduler) fails with
    :class:`ClusterError` too, never hangs; pending tasks are cancelled.

Security model
    The driver and its workers are one trust domain: tasks and their inputs
    travel with Dask's own serialization (pickle) between processes of the
    same operator, never between protocol peers.  Over a network, use
    ``tls://`` addresses with Dask's TLS settings
    (``distributed.comm.tls.*`` in the Dask config or its
    ``DASK_DISTRIBUTED__COMM__TLS__*`` environment variables).  What each
    task sees is stated by the protocol that submits it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pairwise.dp.errors import PairwiseError

__all__ = [
    "ClusterError",
    "ClusterSpec",
    "parse_cluster",
    "open_cluster",
    "run_bounded",
    "cluster_threads",
    "keep_large_allocations",
    "INSTALL_HINT",
]

#: How to get Dask distributed: the ``cluster`` extra, installed from a checkout (pairwise-mpc is not on PyPI yet).
INSTALL_HINT = "pip install -e '.[cluster]' in a checkout of pairwise (Dask distributed)"
MAX_LOCAL_WORKERS = 256
_LOCAL = re.compile(r"local(?::(\d+))?")
_REMOTE = re.compile(r"(tcp|tls)://([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})")


class ClusterError(PairwiseError, RuntimeError):
    """The cluster could not be reached or started, a worker died holding a task, or a wait timed out."""


@dataclass(frozen=True)
class ClusterSpec:
    """A parsed ``--cluster`` value: a local cluster of ``workers`` processes or a scheduler ``address``."""

    workers: int | None = None
    address: str | None = None

    @property
    def local(self) -> bool:
        return self.address is None

    def __str__(self) -> str:
        return f"local:{self.workers}" if self.local else str(self.address)


def local_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def parse_cluster(spec: str) -> ClusterSpec:
    """``local`` (one worker process per core), ``local:N``, ``tcp://HOST:PORT`` or ``tls://HOST:PORT``."""
    if not isinstance(spec, str):
        raise ClusterError(f"a cluster spec is a string, got {type(spec).__name__}")
    s = spec.strip()
    m = _LOCAL.fullmatch(s)
    if m:
        n = local_cores() if m.group(1) is None else int(m.group(1))
        if not 1 <= n <= MAX_LOCAL_WORKERS:
            raise ClusterError(f"local cluster size must be in 1..{MAX_LOCAL_WORKERS}, got {n}")
        return ClusterSpec(workers=n)
    m = _REMOTE.fullmatch(s)
    if m:
        if not 1 <= int(m.group(3)) <= 65535:
            raise ClusterError(f"port out of range in cluster address {spec!r}")
        return ClusterSpec(address=s)
    raise ClusterError(f"cluster spec must be 'local', 'local:N', 'tcp://HOST:PORT' or 'tls://HOST:PORT', got {spec!r}")


def _loopback(address: str) -> bool:
    """Whether a ``tcp://HOST:PORT`` or ``tls://HOST:PORT`` address names this machine's loopback interface."""
    import ipaddress

    host = address.split("://", 1)[1].rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may leave the machine
        return False


def _distributed():
    try:
        import distributed
    except ImportError as exc:
        raise ClusterError(f"--cluster needs Dask distributed, which is not installed: {INSTALL_HINT}") from exc
    return distributed


def _quiet_shutdown_logs() -> None:
    """In a worker process: log only critical messages of Dask from here on (shutdown)."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def dask_setup(worker) -> None:  # noqa: ARG001 - Dask's preload interface (distributed.preloading)
    """Dask preload, run in each worker process of a ``local`` cluster as it starts: ignore SIGINT.

    Ctrl-C in a terminal signals the whole foreground process group: the
    driver (which stops and retires its workers, :func:`_retire_workers`) and
    every worker process, whose asyncio runner would end in a
    ``KeyboardInterrupt`` traceback on the driver's stderr.  The driver alone
    stops its workers; SIGTERM and the driver's own exit still end them.
    """
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


#: the preload that runs :func:`dask_setup` in a local cluster's workers
_WORKER_PRELOAD = __name__


def _retire_workers(client, timeout: float) -> None:
    """Stop a local cluster's workers before its scheduler, within ``timeout`` seconds.

    Closed the other way round, a worker whose heartbeat falls in the
    scheduler's shutdown logs a ``CommClosedError`` traceback on the
    server's stderr (seen on a loaded machine).  Retired first, the workers
    have nothing left to tell the scheduler.  Runs in a daemon thread so that
    a scheduler that does not answer cannot hold up a SIGTERM shutdown.
    """

    def retire() -> None:
        with contextlib.suppress(Exception):
            # The run's results are in hand: what a worker says while the cluster shuts down
            # (a heartbeat that meets a closed scheduler) is noise, not an error of the run.
            client.run(_quiet_shutdown_logs)
        with contextlib.suppress(Exception):
            workers = list(client.scheduler_info().get("workers", {}))
            if workers:
                client.retire_workers(workers, close_workers=True)

    t = threading.Thread(target=retire, daemon=True, name="dask-retire")
    t.start()
    t.join(timeout)


@contextlib.contextmanager
def open_cluster(
    cluster: Any, *, timeout: float = 60.0, connect_timeout: float = 30.0, secure: bool = False
) -> Iterator[Any]:
    """Yield a connected :class:`distributed.Client` for ``cluster``.

    ``cluster`` is a spec string (see :func:`parse_cluster`), a
    :class:`ClusterSpec`, or an existing ``Client`` (yielded as is and left
    open: its owner closes it).  A ``local`` cluster is started here (N worker
    processes, one thread each, dashboard on a free loopback port) and closed
    on exit; a remote scheduler must answer within ``connect_timeout`` and
    have at least one worker within ``timeout`` seconds.  ``tcp://`` is
    refused unless its host is loopback: across a network, ``tls://``.  ``secure``: the
    local cluster's scheduler, workers and client talk mutual TLS with a
    throwaway certificate held in memory by this process and its workers
    (``Security.temporary()``), so no other process of the machine can join
    it or fetch its data through the loopback port, and without a dashboard
    (a remote scheduler uses Dask's own TLS settings, see ``tls://``).
    """
    distributed = _distributed()
    if isinstance(cluster, distributed.Client):
        yield cluster
        return
    spec = cluster if isinstance(cluster, ClusterSpec) else parse_cluster(cluster)
    import dask

    if spec.local:
        # allowed-failures = 0: a worker death fails the task (and the run) instead of a silent re-run.
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            try:
                # secure: no dashboard (the scheduler's HTTP server, health routes only, on a free loopback port)
                extra = {"security": True, "scheduler_kwargs": {"dashboard": False}} if secure else {}
                lc = distributed.LocalCluster(
                    n_workers=spec.workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address="127.0.0.1:0",
                    silence_logs=logging.ERROR,
                    preload=[_WORKER_PRELOAD],
                    **extra,
                )
            except Exception as exc:  # noqa: BLE001 - any start-up failure becomes one clear error
                raise ClusterError(f"could not start a local Dask cluster of {spec.workers} workers: {exc}") from exc
        try:
            client = distributed.Client(lc, timeout=timeout)
            try:
                yield client
            finally:
                _retire_workers(client, min(timeout, 10.0))
                with contextlib.suppress(Exception):
                    client.close(timeout=timeout)
        finally:
            dlog = logging.getLogger("distributed")
            level = dlog.level
            dlog.setLevel(logging.CRITICAL)  # the nannies of this process, while the cluster closes
            try:
                with contextlib.suppress(Exception):
                    lc.close(timeout=timeout)
            finally:
                dlog.setLevel(level)
        return
    if spec.address.startswith("tcp://") and not _loopback(spec.address):
        raise ClusterError(
            f"{spec.address} is not on this machine: tcp:// would carry the tasks (their inputs, "
            "key shares) in the clear across the network; use tls://HOST:PORT with Dask's TLS "
            "settings (README, 'Running on a cluster')"
        )
    if spec.address.startswith("tls://"):
        sec = distributed.Security()  # from Dask's config: distributed.comm.tls.*
        if not (sec.tls_ca_file and sec.tls_client_cert):
            raise ClusterError(
                f"{spec.address} needs Dask's TLS settings: set DASK_DISTRIBUTED__COMM__TLS__CA_FILE, "
                "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY "
                "(or distributed.comm.tls.* in a Dask config file)"
            )
    try:
        client = distributed.Client(spec.address, timeout=connect_timeout)
    except (OSError, TimeoutError) as exc:
        raise ClusterError(
            f"cannot reach the Dask scheduler at {spec.address} within {connect_timeout:g} s "
            f"(start one with: dask scheduler): {exc}"
        ) from exc
    try:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError as exc:
            raise ClusterError(
                f"the Dask scheduler at {spec.address} has no worker after {timeout:g} s "
                "(start one with: dask worker " + spec.address + ")"
            ) from exc
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=timeout)


_MALLOC_TUNED = False
#: glibc's ``mallopt`` parameter numbers (malloc.h), the largest block kept on the heap, and the free
#: heap top an arena keeps instead of returning it to the OS.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD, _TRIM_THRESHOLD = 32 << 20, 64 << 20


def keep_large_allocations() -> None:
    """Let this worker process reuse freed memory instead of faulting in fresh pages for every array (once per process).

    Dask's nanny starts every worker with ``MALLOC_TRIM_THRESHOLD_=65536``
    (``distributed.nanny.pre-spawn-environ``).  That has two effects on a
    task that allocates and frees arrays of 100 KiB to a few MiB in a loop,
    as the engine (labels, tables, scratch per execution) and the DCF walk
    (per-level arrays of every key, per threshold) do:

    * setting any of glibc's malloc thresholds switches off its dynamic mmap
      threshold, so every array above 128 KiB becomes a fresh ``mmap``,
      zero-filled page by page on first touch and unmapped when freed;
    * a freed block at the top of the heap is returned to the OS as soon as
      64 KiB are free there, so the next array faults its pages in again.

    Measured (2026-11-25/26): a U-statistic task ran 1.4x slower in a Dask
    worker than in a plain process (65,536 pairs: 1.06 s against 0.75 s),
    and the DCF evaluation of 50,000 keys at 1,024 thresholds 1.5-2.3x
    slower (about one million minor page faults per call against 20).
    This raises the mmap threshold to 32 MiB (glibc's maximum on 64-bit)
    and the trim threshold to 64 MiB, which restores the plain process's
    speed (3.1-3.3 s against 3.3-3.8 s, 12 faults): each malloc arena of the
    worker may keep up to 64 MiB of free heap instead of returning it, a
    bounded cost.  A no-op where the C library is not glibc.  Called at the
    start of every task that runs the engine or evaluates keys.
    """
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED = True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


def cluster_threads(client) -> int:
    """Total worker threads the scheduler knows of (at least 1)."""
    workers = client.scheduler_info().get("workers", {})
    return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))


def _worker_summary(client) -> str:
    try:
        return f"{len(client.scheduler_info().get('workers', {}))} worker(s) connected"
    except Exception as exc:  # noqa: BLE001 - diagnostics only
        return f"scheduler unreachable ({exc})"


def run_bounded(
    client,
    fn: Callable,
    items: Iterable[tuple],
    *,
    window: int,
    timeout: float,
    on_result: Callable[[int, Any], None],
    name: str = "task",
    shared: tuple = (),
) -> int:
    """Run ``fn(*shared, *item)`` for every item as a Dask task, at most ``window`` in flight.

    Items are submitted lazily (the driver never materializes more than
    ``window`` tasks), each with ``pure=False`` so equal inputs still run
    separately (each task draws its own randomness).  ``on_result(index,
    result)`` is called in the driver as each task finishes, in completion
    order.  Returns the number of tasks run.  Raises :class:`ClusterError`
    when a worker died holding a task or when no task finished within
    ``timeout`` seconds; a task's own exception propagates unchanged.
    Pending tasks are cancelled on any error.
    """
    distributed = _distributed()
    from distributed.scheduler import KilledWorker

    if window < 1:
        raise ClusterError(f"window must be >= 1, got {window}")
    it = iter(enumerate(items))
    pending: dict[Any, int] = {}
    finished = 0

    def submit_next() -> None:
        nxt = next(it, None)
        if nxt is not None:
            i, item = nxt
            pending[client.submit(fn, *shared, *item, pure=False, retries=0)] = i

    try:
        for _ in range(window):
            submit_next()
        while pending:
            try:
                done, _ = distributed.wait(list(pending), timeout=timeout, return_when="FIRST_COMPLETED")
            except TimeoutError as exc:
                raise ClusterError(
                    f"no {name} finished within {timeout:g} s ({len(pending)} in flight, "
                    f"{finished} done; {_worker_summary(client)})"
                ) from exc
            for fut in done:
                i = pending.pop(fut)
                try:
                    res = fut.result(timeout=timeout)
                except KilledWorker as exc:
                    raise ClusterError(f"{name} {i} was lost: the worker running it died ({exc})") from exc
                except distributed.client.FutureCancelledError as exc:
                    raise ClusterError(f"{name} {i} was cancelled by the cluster: {exc}") from exc
                on_result(i, res)
                finished += 1
                submit_next()
    finally:
        if pending:
            with contextlib.suppress(Exception):
                client.cancel(list(pending))
    return finished


def __getattr__(name: str) -> Any:
    """``add_cluster_argument``, an argparse helper, moved to :mod:`pairwise.commands.options` with the
    command line; the old name still resolves, with a :class:`DeprecationWarning`, for one release."""
    if name == "add_cluster_argument":
        import warnings

        warnings.warn(
            "pairwise.protocols.cluster.add_cluster_argument moved to "
            "pairwise.commands.options.add_cluster_argument; the old name will be removed in the next "
            "release",
            DeprecationWarning,
            stacklevel=2,
        )
        from pairwise.commands.options import add_cluster_argument

        return add_cluster_argument
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
