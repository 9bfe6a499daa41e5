"""Key evaluation of one ECDF server on its own Dask cluster (``pairwise ecdf serve --cluster``).

What it does
    A server's dominant cost is evaluating every client's key at the
    release's thresholds ([BMR25, Sec. 4.2]).  :class:`ClusterKeys` splits
    each stored series into row shards, scatters them round-robin over the
    worker threads of the server's Dask workers
    (:mod:`pairwise.protocols.cluster`), and for a release runs one task per
    shard (``shard.cumulative_shares(points)``, the code the server runs
    without a cluster) and adds the shard results mod 2^l on the server, so
    the release is equal, bit for bit, to the one computed without a
    cluster.  Shards stay on the workers between releases (for at most
    :data:`MAX_DATASETS` datasets) and are scattered again when the dataset
    changes or a worker holding one was lost.

    The request handlers call :meth:`ClusterKeys.evaluate` while they prepare
    a release, *before* any budget is reserved or charged; the release then
    runs over the evaluated shares (:class:`EvaluatedShares`).  Every wait
    has the server's timeout; a lost or stalled worker raises
    :class:`pairwise.protocols.cluster.ClusterError`, and the ``prepare`` is
    refused (code ``unavailable``) with nothing reserved, charged or sent.
    Memory bounds and the failure handling in full: ``docs/ecdf-server.md``,
    "Key evaluation on a Dask cluster".

Security model
    The workers belong to the server: they hold this server's key shares (as
    the server itself does) and compute shares of partial counts, which come
    back to the server and nowhere else; noise is drawn on the server, never
    on a worker, and the release's values never reach a worker.  Each server
    must have its own cluster: two servers' keys on one worker would let it
    reconstruct the clients' values (``--cluster local`` starts a cluster for
    this server alone, talking mutual TLS with a throwaway in-memory
    certificate; the querier refuses a release whose servers report one
    scheduler).  Tasks and shards travel with Dask's serialization between
    the server and its own workers only (use ``tls://`` across machines).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..cluster import ClusterError, keep_large_allocations, run_bounded
from .shares import reduce_mod

__all__ = ["ClusterKeys", "EvaluatedShares"]


def _eval_shard(shard, points: np.ndarray) -> np.ndarray:
    """One Dask task: this shard's shares of the weighted cumulative counts at ``points`` (uint64)."""
    keep_large_allocations()  # the walk frees and reallocates MBs per level: without it, a page fault per page
    return np.asarray(shard.cumulative_shares(points, None), dtype=np.uint64)


class EvaluatedShares:
    """A series whose cumulative shares were computed ahead at a fixed set of points (stands in for its shares)."""

    def __init__(self, points: np.ndarray, values: np.ndarray, rows: int, l: int) -> None:
        order = np.argsort(points, kind="stable")
        self.points = np.asarray(points, dtype=np.uint64)[order]
        self.values = np.asarray(values, dtype=np.uint64)[order]
        self.rows, self.l = rows, l

    def __len__(self) -> int:
        return self.rows

    def cumulative_shares(self, points: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        if rows is not None:
            raise ValueError("shares evaluated on the cluster cover all rows; a row subset needs the stored keys")
        pts = np.asarray(points, dtype=np.uint64)
        col = np.searchsorted(self.points, pts)
        ok = col < self.points.size
        if not ok.all() or (self.points[col] != pts).any():
            raise ValueError("a threshold outside the points evaluated ahead on the cluster was requested")
        return self.values[col]


def _bounded(fn, timeout: float, what: str):
    """``fn()`` in a helper thread, waited for at most ``timeout`` seconds (a Dask client call without a
    deadline of its own, such as ``scheduler_info``, must not hang a request on a stalled scheduler)."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True, name="ecdf-cluster-call")
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise ClusterError(f"the Dask scheduler did not answer ({what}) within {timeout:g} s")
    if "error" in box:
        raise ClusterError(f"the Dask scheduler failed ({what}): {box['error']}") from box["error"]
    return box["value"]


#: Datasets whose shards a server's workers keep between releases (least recently released dropped
#: first): the workers' memory is bounded by this many datasets' keys, not by every dataset ever released.
MAX_DATASETS = 4


class ClusterKeys:
    """One server's shards on its Dask cluster; see the module docstring.

    ``client``: a connected :class:`distributed.Client` of this server's own
    cluster; ``timeout``: the server's timeout, for every wait; ``spec``: how
    the cluster was named (``local:2``, ``tcp://...``), for reports.
    """

    def __init__(
        self, client, *, timeout: float, shards_per_thread: int = 2, spec: str = "", max_datasets: int = MAX_DATASETS
    ) -> None:
        if not max_datasets >= 1:
            raise ValueError(f"max_datasets must be >= 1, got {max_datasets!r}")
        self.max_datasets = int(max_datasets)
        self._recent: list[str] = []  # datasets with shards on the workers, least recently released first
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        if shards_per_thread < 1:
            raise ValueError(f"shards per thread must be >= 1, got {shards_per_thread!r}")
        self.client = client
        self.timeout = float(timeout)
        self.shards_per_thread = int(shards_per_thread)
        self.spec = str(spec)
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], tuple[str, int, list]] = {}
        info = self._info()
        self.scheduler = str(info.get("address", ""))
        self.scheduler_id = str(info.get("id", ""))

    def _info(self) -> dict:
        return _bounded(self.client.scheduler_info, self.timeout, "scheduler info")

    def describe(self) -> dict:
        """What ``status`` reports: the spec, the scheduler and its current workers and threads."""
        workers = self._info().get("workers", {})
        return {
            "spec": self.spec,
            "scheduler": self.scheduler,
            "scheduler_id": self.scheduler_id,
            "workers": len(workers),
            "threads": sum(max(1, int(w.get("nthreads", 1))) for w in workers.values()),
        }

    def shards(self, dataset: str) -> int:
        """Shards of ``dataset`` held by the workers now (all series)."""
        return sum(len(v[2]) for k, v in list(self._cache.items()) if k[0] == dataset)

    def forget(self, dataset: str) -> None:
        with self._lock:
            self._forget(dataset)

    def _forget(self, dataset: str) -> None:
        if dataset in self._recent:
            self._recent.remove(dataset)
        for key in [k for k in self._cache if k[0] == dataset]:
            # dropping the futures releases the data on the workers (asynchronously: nothing here waits
            # on a scheduler that may be gone)
            self._cache.pop(key, None)

    def _slots(self) -> list[str]:
        """One entry per worker thread (worker address), in a fixed order: where the shards go."""
        workers = self._info().get("workers", {})
        slots = [addr for addr, w in sorted(workers.items()) for _ in range(max(1, int(w.get("nthreads", 1))))]
        if not slots:
            raise ClusterError(f"the Dask cluster {self.spec or self.scheduler} has no worker")
        return slots

    def _shards(self, dataset: str, series: str, digest: str, shares) -> list:
        key = (dataset, series)
        got = self._cache.get(key)
        if (
            got is not None
            and got[0] == digest
            and got[1] == len(shares)
            and all(f.status == "finished" for f in got[2])
        ):
            return got[2]
        self._cache.pop(key, None)
        rows = len(shares)
        slots = self._slots()
        k = max(1, min(rows, self.shards_per_thread * len(slots)))
        bounds = np.linspace(0, rows, k + 1).round().astype(np.int64)
        futures = []
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            if b <= a:
                continue
            part = shares.take(np.arange(a, b))  # one shard in memory at a time
            try:
                futures += self.client.scatter(
                    [part], workers=[slots[i % len(slots)]], hash=False, timeout=self.timeout
                )
            except Exception as exc:  # noqa: BLE001 - any failure of the cluster refuses the release
                raise ClusterError(
                    f"could not scatter the keys of {dataset!r}/{series} to the cluster ({type(exc).__name__}: {exc})"
                ) from exc
            del part
        self._cache[key] = (digest, rows, futures)
        return futures

    def evaluate(self, dataset: str, digest: str, shares: dict[str, Any], points: np.ndarray) -> dict[str, Any]:
        """``{series: EvaluatedShares}`` at ``points`` for every series in ``shares`` (all rows of each).

        Raises :class:`ClusterError` if the cluster fails (a worker lost, a
        wait past the timeout); this dataset's shards are then dropped, so a
        retry scatters them again.
        """
        pts = np.unique(np.asarray(points, dtype=np.uint64))
        names = list(shares)
        if not self._lock.acquire(timeout=self.timeout):
            raise ClusterError(
                f"another release kept the cluster's shard table for more than {self.timeout:g} s; retry"
            )
        try:
            # make room first, so that the workers never hold more than max_datasets datasets' shards
            while dataset not in self._recent and len(self._recent) >= self.max_datasets:
                self._forget(self._recent[0])
            try:
                shards = {s: self._shards(dataset, s, digest, shares[s]) for s in names}
            except BaseException:
                self._forget(dataset)
                raise
            if dataset in self._recent:
                self._recent.remove(dataset)
            self._recent.append(dataset)
        finally:
            self._lock.release()
        items = [(s, f) for s in names for f in shards[s]]
        totals = {s: np.zeros(pts.size, dtype=np.uint64) for s in names}

        def add(i: int, r: np.ndarray) -> None:
            s = items[i][0]
            if r.shape != totals[s].shape:
                raise ClusterError(f"a shard of {dataset!r}/{s} returned {r.shape} values, expected {totals[s].shape}")
            totals[s] += r  # uint64 wraps mod 2^64, and 2^l divides 2^64

        try:
            run_bounded(
                self.client,
                _eval_shard,
                ((f, pts) for _s, f in items),
                window=max(1, len(items)),
                timeout=self.timeout,
                on_result=add,
                name="key shard",
            )
        except BaseException:
            if self._lock.acquire(timeout=self.timeout):  # else: lost shards are found lost next time anyway
                try:
                    self._forget(dataset)
                finally:
                    self._lock.release()
            raise
        return {s: EvaluatedShares(pts, reduce_mod(totals[s], shares[s].l), len(shares[s]), shares[s].l) for s in names}
