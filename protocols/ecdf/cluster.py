"""Key evaluation of one ECDF server on its own Dask cluster (for ``pairwise ecdf serve --cluster``).

What it does
    A server's dominant cost is evaluating every client's key at the
    release's thresholds (dp-ecdf Sec. 4.2: with m = 2, one DCF key per
    client and server, [x_i <= t] = 1 - [t < x_i]; with m > 2, PRG-expanded
    histogram shares).  :class:`ClusterKeys` splits each stored series into
    row shards (``take``), scatters them once to the server's Dask workers
    (:mod:`pairwise.protocols.cluster`), and for a release runs one task per
    shard -- ``shard.cumulative_shares(points)``, the same code the server
    runs without a cluster -- and adds the shard results mod 2^l on the
    server.  Addition of additive shares is exact, so the release is equal,
    bit for bit, to the one computed without a cluster.  Shards stay on the
    workers between releases and are scattered again when the dataset
    changes (its digest) or a worker holding one was lost.

Failures
    Every wait has the server's timeout; a worker that dies or stalls while
    it holds a shard or a task raises :class:`pairwise.protocols.cluster.ClusterError`
    and drops this dataset's shards, so the next release scatters them again
    from the server's key store.  A server is meant to call
    :meth:`ClusterKeys.evaluate` while it prepares a release, before it
    reserves or charges any budget, so that such a failure refuses the
    release before anything is sent to the querier and a retry starts clean
    (``pairwise ecdf serve --cluster``: wired into the request handlers once
    the ECDF service rewrite has landed; not yet).

Security model
    The workers belong to the server: they hold this server's key shares (as
    the server itself does) and compute shares of partial counts, which come
    back to the server and nowhere else; noise is drawn on the server, never
    on a worker.  Each server must have its own cluster: two servers' keys
    on one worker would let it reconstruct the clients' values.  Tasks and
    shards travel with Dask's serialization between the server and its own
    workers only (use ``tls://`` across machines).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..cluster import ClusterError, cluster_threads, run_bounded
from .shares import reduce_mod

__all__ = ["ClusterKeys", "EvaluatedShares"]


def _eval_shard(shard, points: np.ndarray) -> np.ndarray:
    """One Dask task: this shard's shares of the weighted cumulative counts at ``points`` (uint64)."""
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


class ClusterKeys:
    """One server's shards on its Dask cluster; see the module docstring."""

    def __init__(self, client, *, timeout: float, shards_per_thread: int = 2) -> None:
        self.client = client
        self.timeout = float(timeout)
        self.shards_per_thread = int(shards_per_thread)
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], tuple[str, int, list]] = {}

    def describe(self) -> dict:
        info = self.client.scheduler_info()
        return {"workers": len(info.get("workers", {})), "threads": cluster_threads(self.client),
                "scheduler": info.get("id", "")}

    def forget(self, dataset: str) -> None:
        with self._lock:
            for key in [k for k in self._cache if k[0] == dataset]:
                self._drop(key)

    def _drop(self, key) -> None:
        got = self._cache.pop(key, None)
        if got is not None:
            try:
                self.client.cancel(got[2])
            except Exception:  # noqa: BLE001 - best effort; the futures are released anyway
                pass

    def _shards(self, dataset: str, series: str, digest: str, shares) -> list:
        key = (dataset, series)
        got = self._cache.get(key)
        if got is not None and got[0] == digest and got[1] == len(shares) \
                and all(f.status == "finished" for f in got[2]):
            return got[2]
        self._drop(key)
        rows = len(shares)
        k = max(1, min(rows, self.shards_per_thread * cluster_threads(self.client)))
        bounds = np.linspace(0, rows, k + 1).round().astype(np.int64)
        parts = [shares.take(np.arange(a, b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        try:
            futures = self.client.scatter(parts, hash=False, timeout=self.timeout)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"could not scatter the keys of {dataset!r}/{series} to the cluster: {exc}") from exc
        self._cache[key] = (digest, rows, futures)
        return futures

    def evaluate(self, dataset: str, digest: str, shares: dict[str, Any], points: np.ndarray) -> dict[str, Any]:
        """``{series: EvaluatedShares}`` at ``points`` for every series in ``shares`` (all rows of each)."""
        pts = np.unique(np.asarray(points, dtype=np.uint64))
        out: dict[str, Any] = {}
        with self._lock:
            try:
                for series, sh in shares.items():
                    futures = self._shards(dataset, series, digest, sh)
                    total = np.zeros(pts.size, dtype=np.uint64)

                    def add(_i: int, r: np.ndarray) -> None:
                        nonlocal total
                        if r.shape != total.shape:
                            raise ClusterError(f"a shard of {dataset!r}/{series} returned {r.shape} values, "
                                               f"expected {total.shape}")
                        total += r  # uint64 wraps mod 2^64, and 2^l divides 2^64

                    run_bounded(self.client, _eval_shard, ((f, pts) for f in futures), window=len(futures),
                                timeout=self.timeout, on_result=add, name="key shard")
                    out[series] = EvaluatedShares(pts, reduce_mod(total, sh.l), len(sh), sh.l)
            except BaseException:
                for key in [k for k in self._cache if k[0] == dataset]:
                    self._drop(key)
                raise
        return out
