"""Clients, querier and applications of the multi-server ECDF service.

What it does
    * **Clients** (:func:`upload`, :func:`send_keys`, :func:`upload_pointwise`):
      one process may host many clients.  Each client's value is quantized to
      the public n-bit domain, its keys are made locally
      (:mod:`pairwise.protocols.ecdf.shares`: DCF keys for m = 2, ``mshare`` keys for
      m > 2, or pointwise shares for the Sec. 4.1 baseline) and key j of
      every client goes to server j over TCP, in chunks.  The servers answer
      which clients they accepted and which they rejected (malformed key,
      duplicate id).
    * **Querier** (:class:`ECDFQuerier`): asks the servers for a release
      (prepare on every server -- budget reserved, client sets compared; if
      the servers accepted different clients, the release is restricted to
      the intersection; then go), sums their shares mod 2^l (or checks that
      both servers opened the same noisy values) and post-processes:
      :meth:`ECDFQuerier.ecdf` / :meth:`ECDFQuerier.ecdf_many` (Theorem 3.1 tree, or the consistent
      hierarchical tree, then Eq. (3) smoothing), quantiles by Algorithm 1
      (:meth:`ECDFRelease.quantiles`), :meth:`ECDFQuerier.roc` (positives
      and negatives as two ECDFs with eps/2 each, Sec. 5.1) and
      :meth:`ECDFQuerier.hosmer_lemeshow` (Algorithm 2: an ECDF of the
      predicted probabilities with (L + 1) eps', Q - 1 quantile cuts, then
      the 4Q group statistics with eps' each, eps' = eps / (L + 9)).
    * :class:`ServerProcesses` starts m real server processes on loopback
      (``python -m pairwise ecdf serve``) for demos, tests and
      benchmarks.

Security model
    Semi-honest parties (see :mod:`pairwise.protocols.ecdf.server`).  Keys and
    shares come from the OS CSPRNG.  The querier learns only the released
    noisy values (and n); everything it computes afterwards is
    post-processing.  A client process that hosts many clients knows their
    values, of course.

Follows
    dp-ecdf (Barczewski, Mawass, Ramon): Eq. (2), Theorem 3.1, Eq. (3),
    Sec. 4.1-4.3 (Algorithm 1), Sec. 5.1 (ROC), Sec. 5.2 (Algorithm 2).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from pairwise.dp.ecdf import auc as trapezoid_auc
from pairwise.dp.ecdf import consistent_prefix_sums, hosmer_lemeshow_statistic, inverse_ecdf, smooth_ecdf

from .shares import (
    MAX_GRID_BITS,
    MSHARE_MAX_BITS,
    ShareParameterError,
    dcf_client_keys,
    grid_points,
    mshare_client_keys,
    pointwise_client_shares,
    reduce_mod,
    to_signed,
)
from .wire import (
    BudgetExceeded,
    ROLE_CLIENT,
    ROLE_QUERIER,
    ECDFError,
    QueryRefused,
    ServerUnavailable,
    connect,
    format_address,
    parse_epsilon,
    parse_servers,
    raise_refusal,
    recv_json,
    send_json,
)
from pairwise.mpc.errors import ChannelError

__all__ = [
    "UploadReport",
    "ECDFRelease",
    "CountsRelease",
    "ROCRelease",
    "HLRelease",
    "ECDFQuerier",
    "ServerProcesses",
    "make_series",
    "make_keys",
    "send_keys",
    "upload",
    "upload_pointwise",
    "scheme_for",
    "roc_points",
    "DEFAULT_PROB_BITS",
]

#: Fixed-point grid of the expected-count weights of Hosmer-Lemeshow: w = round(p 2^8).
DEFAULT_PROB_BITS = 8
_CHUNK = 8192
_FRAME_BUDGET = 64 << 20  # largest bulk frame an upload sends


def _ids(client_ids, count: int) -> np.ndarray:
    if client_ids is None:
        return np.arange(count, dtype=np.uint64)
    ids = np.asarray(client_ids)
    if ids.shape != (count,) or not np.issubdtype(ids.dtype, np.integer) or (ids < 0).any():
        raise ShareParameterError(f"client ids must be {count} non-negative integers")
    return ids.astype(np.uint64)


def _label(servers, j: int) -> str:
    return f"server {j} ({format_address(servers[j])})"


def _parallel(fn, count: int) -> list:
    """Run fn(j) for j < count in threads (one channel each); re-raise the first error by server order."""
    results: list = [None] * count
    errors: list = [None] * count

    def work(j):
        try:
            results[j] = fn(j)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors[j] = exc

    threads = [threading.Thread(target=work, args=(j,), daemon=True) for j in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results


def _connect_all(servers, role: str, connect_timeout: float, timeout: float) -> list:
    """Connect to every server (in parallel) before sending anything; a down server fails the whole call."""
    chans: list = [None] * len(servers)
    errors: list = [None] * len(servers)

    def work(j):
        try:
            chans[j] = connect(servers[j], role, label=_label(servers, j), connect_timeout=connect_timeout,
                               timeout=timeout)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors[j] = exc

    threads = [threading.Thread(target=work, args=(j,), daemon=True) for j in range(len(servers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if any(e is not None for e in errors):
        for ch in chans:
            if ch is not None:
                ch.close()
        raise next(e for e in errors if e is not None)
    return chans


# ----------------------------------------------------------------------------- uploads
@dataclass
class UploadReport:
    """What every server accepted and rejected, and what the upload cost on the wire."""

    dataset: str
    scheme: str
    clients: int
    accepted: list[int]
    rejected: list[list[dict]]
    rejected_count: list[int]
    bytes: int
    bytes_per_server: list[int]
    seconds: float

    def as_dict(self) -> dict:
        return {"dataset": self.dataset, "scheme": self.scheme, "clients": self.clients,
                "accepted": self.accepted, "rejected_count": self.rejected_count,
                "rejected": self.rejected, "bytes": self.bytes, "seconds": self.seconds}


def make_series(labels=None, probabilities=None, prob_bits: int = DEFAULT_PROB_BITS) -> dict[str, tuple]:
    """Series of a dataset: name -> (weights or None, max weight).

    No labels: ``all``.  Labels (0/1): ``pos`` (w = y) and ``neg`` (w = 1 - y);
    ``all`` is their sum.  With predicted probabilities as well (Hosmer-
    Lemeshow): also ``e1`` (w = round(p 2^b)) and ``e0`` (2^b - w).
    """
    if labels is None:
        if probabilities is not None:
            raise ShareParameterError("probabilities (Hosmer-Lemeshow) need labels")
        return {"all": (None, 1)}
    y = np.asarray(labels)
    if y.ndim != 1 or not np.all((y == 0) | (y == 1)):
        raise ShareParameterError("labels must be a 1-D array of 0/1")
    y = y.astype(np.uint64)
    out = {"pos": (y, 1), "neg": (np.uint64(1) - y, 1)}
    if probabilities is not None:
        p = np.asarray(probabilities, dtype=float)
        if p.shape != y.shape or np.isnan(p).any() or p.min() < 0 or p.max() > 1:
            raise ShareParameterError("probabilities must be one value in [0, 1] per label")
        scale = 1 << int(prob_bits)
        w = np.rint(p * scale).astype(np.uint64)
        out["e1"] = (w, scale)
        out["e0"] = (np.uint64(scale) - w, scale)
    return out


def scheme_for(scheme: str, m: int, domain_bits: int) -> str:
    """The key scheme for ``m`` servers (``auto``: dcf for 2, mshare for more); raises if it cannot serve them."""
    return _scheme(scheme, m, domain_bits)


def _scheme(scheme: str, m: int, domain_bits: int) -> str:
    if scheme == "auto":
        return "dcf" if m == 2 else "mshare"
    if scheme not in ("dcf", "mshare"):
        raise ShareParameterError(f"key scheme must be auto, dcf or mshare, got {scheme!r}")
    if scheme == "dcf" and m != 2:
        raise ShareParameterError("dcf keys are two-party: use --scheme mshare (or auto) for m > 2 servers")
    if scheme == "mshare" and domain_bits > MSHARE_MAX_BITS:
        raise ShareParameterError(f"mshare keys need a domain of at most 2^{MSHARE_MAX_BITS} points")
    return scheme


def make_keys(values, series: dict[str, tuple], *, scheme: str, m: int, domain_bits: int,
              output_bits: int = 32) -> list[dict[str, list[bytes]]]:
    """Keys of every client for every server: ``keys[j][series][i]``."""
    per: list[dict[str, list[bytes]]] = [dict() for _ in range(m)]
    for name, (w, _) in series.items():
        if scheme == "dcf":
            ks = dcf_client_keys(values, w, domain_bits=domain_bits, output_bits=output_bits)
        else:
            ks = mshare_client_keys(values, w, m=m, domain_bits=domain_bits, output_bits=output_bits)
        for j in range(m):
            per[j][name] = ks[j]
    return per


def _finish_upload(label: str, ch) -> dict:
    reply = recv_json(ch)
    if not reply.get("ok"):
        raise_refusal(label, reply)
    return reply


def _run_uploads(servers, chans, what: str, header, send_chunks) -> list[tuple[dict, int]]:
    """One upload per server, in parallel: header, server's go-ahead, chunks, final reply.

    ``header(j)`` is server j's JSON header and ``send_chunks(j, ch)`` sends its
    data frames.  Returns (reply, bytes on the wire) per server; a channel
    failure becomes :class:`ServerUnavailable` naming the server.
    """

    def one(j: int):
        label = _label(servers, j)
        ch = chans[j]
        try:
            send_json(ch, header(j))
            _finish_upload(label, ch)
            send_chunks(j, ch)
            reply = _finish_upload(label, ch)
            st = ch.stats()
            return reply, st["bytes_sent"] + st["bytes_received"]
        except ChannelError as exc:
            if isinstance(exc, ServerUnavailable):
                raise
            raise ServerUnavailable(f"{label}: {what} failed: {exc}") from exc
        finally:
            ch.close()

    return _parallel(one, len(chans))


def send_keys(servers, dataset: str, *, scheme: str, domain_bits: int, output_bits: int,
              series_meta: dict[str, int], ids: np.ndarray, keys: list[dict[str, list[bytes]]],
              timeout: float = 300.0, connect_timeout: float = 5.0, chunk: int = _CHUNK) -> UploadReport:
    """Send key j of every client to server j (all servers in parallel); see :func:`upload`."""
    servers = parse_servers(servers)
    m = len(servers)
    names = list(series_meta)
    K = int(ids.size)
    biggest = max((len(b) for j in range(m) for s in names for b in keys[j][s]), default=1)
    chunk = max(1, min(chunk, _FRAME_BUDGET // max(1, biggest * len(names))))  # key frames stay below 64 MiB
    chunks = [min(chunk, K - c) for c in range(0, K, chunk)]
    t0 = time.perf_counter()

    chans = _connect_all(servers, ROLE_CLIENT, connect_timeout, timeout)

    def header(j: int) -> dict:
        return {"op": "upload", "dataset": dataset, "scheme": scheme, "m": m, "server_id": j,
                "domain_bits": domain_bits, "output_bits": output_bits,
                "series": [{"name": s, "max_weight": int(series_meta[s])} for s in names],
                "chunks": chunks}

    def send_chunks(j: int, ch) -> None:
        for c0, k in zip(range(0, K, chunk), chunks):
            sl = slice(c0, c0 + k)
            blobs = [[keys[j][s][i] for s in names] for i in range(c0, c0 + k)]
            lens = np.array([[len(b) for b in row] for row in blobs], dtype=np.uint32).reshape(k, len(names))
            ch.send_array(ids[sl].astype(np.uint64))
            ch.send_array(lens)
            ch.send(b"".join(b for row in blobs for b in row))

    res = _run_uploads(servers, chans, "upload", header, send_chunks)
    return UploadReport(dataset, scheme, K, [r["accepted"] for r, _ in res], [r["rejected"] for r, _ in res],
                        [r["rejected_count"] for r, _ in res], sum(b for _, b in res), [b for _, b in res],
                        time.perf_counter() - t0)


def upload(servers, dataset: str, values, *, labels=None, probabilities=None, client_ids=None,
           domain_bits: int, scheme: str = "auto", output_bits: int = 32, prob_bits: int = DEFAULT_PROB_BITS,
           timeout: float = 300.0, connect_timeout: float = 5.0) -> UploadReport:
    """Make and upload the keys of clients holding ``values`` (domain points of ``domain_bits`` bits).

    ``labels`` (0/1) add the ROC series pos/neg; ``probabilities`` (with
    labels) add the Hosmer-Lemeshow series e1/e0.  Client i has id
    ``client_ids[i]`` (default i).
    """
    servers = parse_servers(servers)
    m = len(servers)
    scheme = _scheme(scheme, m, domain_bits)
    series = make_series(labels, probabilities, prob_bits)
    vals = np.asarray(values)
    ids = _ids(client_ids, vals.size)
    keys = make_keys(vals, series, scheme=scheme, m=m, domain_bits=domain_bits, output_bits=output_bits)
    return send_keys(servers, dataset, scheme=scheme, domain_bits=domain_bits, output_bits=output_bits,
                     series_meta={s: w for s, (_, w) in series.items()}, ids=ids, keys=keys,
                     timeout=timeout, connect_timeout=connect_timeout)


def upload_pointwise(servers, dataset: str, values, *, grid_bits: int, domain_bits: int, thresholds=None,
                     labels=None, client_ids=None, round_id: str | None = None, output_bits: int = 32,
                     timeout: float = 300.0, connect_timeout: float = 5.0, chunk: int = _CHUNK) -> UploadReport:
    """Pointwise baseline (Sec. 4.1): every client sends additive shares of w [x <= tau_t] for each queried t.

    ``thresholds``: grid indices of this query round (default: the whole
    grid of 2^grid_bits thresholds).  Returns the upload report; the round
    is then released with :meth:`ECDFQuerier.ecdf` on the same dataset.
    """
    servers = parse_servers(servers)
    m = len(servers)
    series = make_series(labels)
    vals = np.asarray(values)
    ids = _ids(client_ids, vals.size)
    N = 1 << grid_bits
    thr = np.arange(N) if thresholds is None else np.unique(np.asarray(thresholds, dtype=np.int64))
    pts = grid_points(domain_bits, grid_bits)[thr]
    shares = {s: pointwise_client_shares(vals, w, pts, m=m, domain_bits=domain_bits, output_bits=output_bits)
              for s, (w, _) in series.items()}
    names = list(series)
    rnd = round_id or os.urandom(8).hex()
    K = vals.size
    word = np.uint32 if output_bits <= 32 else np.uint64
    chunk = max(1, min(chunk, _FRAME_BUDGET // (len(names) * thr.size * np.dtype(word).itemsize)))
    chunks = [min(chunk, K - c) for c in range(0, K, chunk)]
    t0 = time.perf_counter()

    chans = _connect_all(servers, ROLE_CLIENT, connect_timeout, timeout)

    def header(j: int) -> dict:
        return {"op": "pointwise", "dataset": dataset, "scheme": "pointwise", "m": m, "server_id": j,
                "domain_bits": domain_bits, "output_bits": output_bits, "grid_bits": grid_bits,
                "thresholds": thr.tolist(), "round": rnd,
                "series": [{"name": s, "max_weight": int(series[s][1])} for s in names],
                "chunks": chunks}

    def send_chunks(j: int, ch) -> None:
        for c0, k in zip(range(0, K, chunk), chunks):
            sl = slice(c0, c0 + k)
            ch.send_array(ids[sl])
            block = np.stack([shares[s][j][sl] for s in names], axis=1)  # (k, S, T)
            ch.send_array(block.astype(word))

    res = _run_uploads(servers, chans, "pointwise upload", header, send_chunks)
    return UploadReport(dataset, "pointwise", int(K), [r["accepted"] for r, _ in res],
                        [r["rejected"] for r, _ in res], [r["rejected_count"] for r, _ in res],
                        sum(b for _, b in res), [b for _, b in res], time.perf_counter() - t0)


# ----------------------------------------------------------------------------- releases
@dataclass
class ECDFRelease:
    """A noisy ECDF released by the servers, with its post-processing.

    ``cumulative[k]`` is the noisy weighted count C(tau) at grid threshold
    ``thresholds[k]`` (domain point ``points[k]``); ``ecdf`` = cumulative / n;
    ``smoothed_counts`` = Eq. (3) smoothing (p = ``smoothing``, leaf space,
    bounds [0, n]); ``smoothed`` = smoothed_counts / n.
    """

    dataset: str
    series: str
    mechanism: str
    domain_bits: int
    grid_bits: int
    thresholds: np.ndarray
    points: np.ndarray
    cumulative: np.ndarray
    n: int
    epsilon: float
    delta: float
    node_variance: float
    smoothed_counts: np.ndarray
    noise: str
    servers: int
    bytes: dict = field(default_factory=dict)
    seconds: float = 0.0
    server_timings: list = field(default_factory=list)

    @property
    def ecdf(self) -> np.ndarray:
        return self.cumulative / self.n

    @property
    def smoothed(self) -> np.ndarray:
        return self.smoothed_counts / self.n

    @property
    def mse_per_threshold(self) -> float | None:
        """Theorem 3.1: (L + 1) Var(node noise) in counts^2 (paper mechanism)."""
        if self.mechanism != "paper":
            return None
        return (self.grid_bits + 1) * self.node_variance

    def quantiles(self, qs) -> np.ndarray:
        """Algorithm 1 on the smoothed ECDF: the first released threshold (grid index) where F >= q."""
        from pairwise.dp.bounds import validate_quantile_levels

        validate_quantile_levels(np.atleast_1d(np.asarray(qs, dtype=float)).tolist())
        return np.asarray(inverse_ecdf(self.smoothed, qs, thresholds=self.thresholds))

    def as_dict(self) -> dict:
        return {"dataset": self.dataset, "series": self.series, "mechanism": self.mechanism,
                "domain_bits": self.domain_bits, "grid_bits": self.grid_bits,
                "thresholds": self.thresholds.tolist(), "cumulative": self.cumulative.tolist(),
                "dp": self.ecdf.tolist(), "smoothed": self.smoothed.tolist(), "n": self.n,
                "epsilon": self.epsilon, "delta": self.delta, "noise": self.noise, "servers": self.servers,
                "bytes": self.bytes, "seconds": self.seconds}


@dataclass
class CountsRelease:
    """Noisy group counts (Alg. 2 lines 7-9): ``values[series]`` has one entry per group."""

    dataset: str
    cuts: np.ndarray
    values: dict[str, np.ndarray]
    epsilon_per_value: float
    epsilon: float
    delta: float
    bytes: dict = field(default_factory=dict)


@dataclass
class ROCRelease:
    """A private ROC curve (Sec. 5.1): two eps/2 ECDFs, smoothed, turned into (FPR, TPR) points."""

    fpr: np.ndarray
    tpr: np.ndarray
    auc: float
    positives: ECDFRelease
    negatives: ECDFRelease
    epsilon: float
    delta: float

    def as_dict(self) -> dict:
        return {"fpr": self.fpr.tolist(), "tpr": self.tpr.tolist(), "auc": self.auc,
                "epsilon": self.epsilon, "delta": self.delta}


@dataclass
class HLRelease:
    """Algorithm 2's output over the servers: the statistic and everything it published."""

    statistic: float
    cuts: np.ndarray
    o1: np.ndarray
    e1: np.ndarray
    o0: np.ndarray
    e0: np.ndarray
    epsilon: float
    epsilon_prime: float
    delta: float
    ecdf: ECDFRelease


def roc_points(cum_pos, cum_neg, higher_is_positive: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """ROC points from cumulative class counts at increasing thresholds (last entry = class total).

    ``higher_is_positive``: a score above the threshold predicts the positive
    class, TPR(t) = 1 - F_pos(t), FPR(t) = 1 - F_neg(t), traversed from the
    highest threshold ((0, 0)) down to "everything positive" ((1, 1)).
    Otherwise the paper's convention TPR = F_pos(t), FPR = F_neg(t).  The
    area under the curve (trapezoids) is P[s_pos > s_neg] + P[tie]/2 for
    exact counts.
    """
    p = np.asarray(cum_pos, dtype=float)
    q = np.asarray(cum_neg, dtype=float)
    if p[-1] <= 0 or q[-1] <= 0:
        raise ECDFError("the ROC curve needs a positive total of positives and of negatives "
                        "(the noisy totals are not positive: raise epsilon)")
    fp, fn = p / p[-1], q / q[-1]
    if higher_is_positive:
        tpr = np.concatenate([1.0 - fp[::-1], [1.0]])
        fpr = np.concatenate([1.0 - fn[::-1], [1.0]])
    else:
        tpr = np.concatenate([[0.0], fp])
        fpr = np.concatenate([[0.0], fn])
    return fpr, tpr


class ECDFQuerier:
    """The querier: releases noisy ECDFs (and applications) from the m servers."""

    def __init__(self, servers, *, timeout: float = 300.0, connect_timeout: float = 5.0) -> None:
        self.servers = parse_servers(servers)
        self.m = len(self.servers)
        if not timeout > 0 or not connect_timeout > 0:
            raise ValueError("timeouts must be positive")
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)

    # ------------------------------------------------------------------ validation (before any connection)
    def _check(self, *, series=None, thresholds=None, grid_bits=None, mechanism="paper", smoothing=2,
               tolerate=0) -> None:
        """Querier-side checks of a release's public parameters: a bad request never reaches a server,
        so nothing is reserved or charged (the servers check again before they charge).  Raises
        :class:`QueryRefused`, as a server would."""
        if mechanism not in ("paper", "hierarchical"):
            raise QueryRefused(f"mechanism must be 'paper' or 'hierarchical', got {mechanism!r}")
        if smoothing not in (None, 1, 2):
            raise QueryRefused(f"smoothing must be None, 1 or 2 (Eq. 3's p), got {smoothing!r}")
        if isinstance(tolerate, bool) or not isinstance(tolerate, int) or not 0 <= tolerate < self.m \
                or (self.m == 2 and tolerate):
            raise QueryRefused(f"tolerate must be an integer in [0, m) (0 for two servers), got {tolerate!r}")
        if grid_bits is not None and (isinstance(grid_bits, bool) or not isinstance(grid_bits, (int, np.integer))
                                      or not 1 <= int(grid_bits) <= MAX_GRID_BITS):
            raise QueryRefused(f"grid_bits must be an integer in [1, {MAX_GRID_BITS}], got {grid_bits!r}")
        if series is not None and (not series or len(set(series)) != len(series)
                                   or any(not isinstance(x, str) or not x for x in series)):
            raise QueryRefused(f"series must be distinct non-empty names, got {series!r}")
        if thresholds is not None:
            t = np.asarray(thresholds)
            if t.size == 0 or not np.issubdtype(t.dtype, np.integer) or (t < 0).any():
                raise QueryRefused("thresholds must be a non-empty list of non-negative grid indices")
            top = (1 << int(grid_bits)) - 1 if grid_bits is not None else None
            if top is not None and (t > top).any():
                raise QueryRefused(f"thresholds must be grid indices in [0, {top}] for grid_bits {grid_bits}")

    # ------------------------------------------------------------------ plumbing
    def _open(self) -> list:
        return _connect_all(self.servers, ROLE_QUERIER, self.connect_timeout, self.timeout)

    def _call(self, j: int, ch, msg: dict | None) -> dict:
        label = _label(self.servers, j)
        try:
            if msg is not None:
                send_json(ch, msg)
            return recv_json(ch, timeout=self.timeout)
        except ChannelError as exc:
            if isinstance(exc, ServerUnavailable):
                raise
            raise ServerUnavailable(f"{label} failed during the request: {exc}") from exc

    def status(self, dataset: str | None = None) -> list[dict]:
        """Each server's view of ``dataset`` (clients, series, budget, spent) or of all its datasets."""
        chans = self._open()
        try:
            out = []
            for j, ch in enumerate(chans):
                r = self._call(j, ch, {"op": "status", "dataset": dataset})
                if not r.get("ok"):
                    raise_refusal(_label(self.servers, j), r)
                out.append(r)
            return out
        finally:
            for ch in chans:
                ch.close()

    def release(self, dataset: str, request: dict) -> tuple[np.ndarray, list[dict], dict]:
        """Prepare / (intersect) / go on every server; returns (combined int64 values, headers, info)."""
        chans = self._open()
        t0 = time.perf_counter()
        try:
            rid = os.urandom(12).hex()
            prep = dict(request, op="prepare", rid=rid, dataset=dataset,
                        servers=[[h, p] for h, p in self.servers])
            for ch in chans:
                send_json(ch, prep)
            replies = [self._call(j, ch, None) for j, ch in enumerate(chans)]
            bad = [j for j, r in enumerate(replies) if not r.get("ok")]
            if bad:
                for j, ch in enumerate(chans):
                    if j not in bad:
                        try:
                            self._call(j, ch, {"op": "abort"})
                        except ChannelError:
                            pass
                raise_refusal(_label(self.servers, bad[0]), replies[bad[0]])
            info = replies[0]["info"]
            restrict = None
            if len({r["digest"] for r in replies}) > 1:
                sets = []
                for j, ch in enumerate(chans):
                    r = self._call(j, ch, {"op": "list"})
                    if not r.get("ok"):
                        raise_refusal(_label(self.servers, j), r)
                    sets.append(set(ch.recv_array(np.uint64, int(r["count"])).tolist()))
                common = set.intersection(*sets)
                if not common:
                    raise QueryRefused("the servers have no accepted client in common")
                restrict = np.array(sorted(common), dtype=np.uint64)
            for ch in chans:
                if restrict is None:
                    send_json(ch, {"op": "go"})
                else:
                    send_json(ch, {"op": "go", "restrict": True, "count": int(restrict.size)})
                    ch.send_array(restrict)
            heads, arrays = [], []
            for j, ch in enumerate(chans):
                h = self._call(j, ch, None)
                if not h.get("ok"):
                    raise_refusal(_label(self.servers, j), h)
                dt = np.int64 if h["encoding"] == "values" else np.uint64
                try:
                    arrays.append(ch.recv_array(dt, int(h["count"])))
                except ChannelError as exc:
                    raise ServerUnavailable(f"{_label(self.servers, j)} failed sending its result: {exc}") from exc
                heads.append(h)
            l = int(heads[0]["output_bits"])
            if heads[0]["encoding"] == "values":
                for j in range(1, len(arrays)):
                    if not np.array_equal(arrays[j], arrays[0]):
                        raise QueryRefused(f"servers 0 and {j} opened different noisy values (inconsistent state)")
                combined = arrays[0].astype(np.int64)
            else:
                total = np.zeros(arrays[0].size, dtype=np.uint64)
                for a in arrays:
                    total += a
                combined = to_signed(reduce_mod(total, l), l)
            st = [ch.stats() for ch in chans]
            meta = {"info": info, "clients": int(heads[0]["clients"]),
                    "restricted": restrict is not None, "seconds": time.perf_counter() - t0,
                    "bytes": {"querier": sum(s["bytes_sent"] + s["bytes_received"] for s in st),
                              # the peer channel is counted by both servers; report it once
                              "servers": max(int(h.get("peer_bytes", 0)) for h in heads)}}
            return combined, heads, meta
        finally:
            for ch in chans:
                ch.close()

    # ------------------------------------------------------------------ ECDF
    def ecdf(self, dataset: str, epsilon, *, series: str = "all", thresholds=None, grid_bits: int | None = None,
             mechanism: str = "paper", smoothing: int | None = 2, tolerate: int = 0) -> ECDFRelease:
        """Release the noisy ECDF of ``series`` at grid ``thresholds`` (default: the whole grid)."""
        return self.ecdf_many(dataset, epsilon, [series], thresholds=thresholds, grid_bits=grid_bits,
                              mechanism=mechanism, smoothing=smoothing, tolerate=tolerate)[0]

    def ecdf_many(self, dataset: str, epsilon_each, series: list[str], *, thresholds=None,
                  grid_bits: int | None = None, mechanism: str = "paper", smoothing: int | None = 2,
                  tolerate: int = 0) -> list[ECDFRelease]:
        """Release several series' ECDFs in one request (epsilon_each per series, one budget check).

        The servers reserve len(series) * epsilon_each at once, so either all
        series are released or none is (and, for m = 2, all their noise comes
        from one garbled-circuit session).
        """
        eps = parse_epsilon(epsilon_each)
        series = list(series)
        self._check(series=series, thresholds=thresholds, grid_bits=grid_bits, mechanism=mechanism,
                    smoothing=smoothing, tolerate=tolerate)
        req = {"kind": "ecdf", "series": series, "epsilon": str(eps), "mechanism": mechanism,
               "grid_bits": grid_bits, "tolerate": int(tolerate),
               "thresholds": None if thresholds is None else [int(t) for t in np.asarray(thresholds).ravel()]}
        vals, heads, meta = self.release(dataset, req)
        h = heads[0]
        g = int(h["grid_bits"])
        n = meta["clients"]
        L, N = g, 1 << g
        info = meta["info"]
        nb = int(info["domain_bits"])
        out = []
        start = 0
        for k, name in enumerate(h["series"]):
            var = float(h["variances"][k])
            if mechanism == "paper":
                thr = np.array(h["thresholds"], dtype=np.int64)
                cum = vals[start:start + thr.size].astype(float)
                start += thr.size
            else:
                levels, variances = [], []
                for lv in range(int(h["levels"][k])):
                    w = 1 << (L - lv)
                    levels.append(vals[start:start + w].astype(float))
                    variances.append(var)
                    start += w
                if h["root_public"][k]:
                    levels.append(np.array([float(n)]))
                    variances.append(0.0)
                full = consistent_prefix_sums(levels, variances)
                thr = np.arange(N) if thresholds is None else np.unique(np.asarray(thresholds, dtype=np.int64))
                cum = full[thr]
            sm = cum.astype(float) if smoothing is None else smooth_ecdf(cum, smoothing, lower=0.0, upper=float(n))
            out.append(ECDFRelease(dataset, name, mechanism, nb, g, thr, grid_points(nb, g)[thr], cum, n,
                                   float(Fraction(h["epsilon_per_series"])), float(h["deltas"][k]), var,
                                   np.asarray(sm, dtype=float), str(h["noise"]), self.m, meta["bytes"],
                                   meta["seconds"],
                                   [dict(x.get("timings", {}), total=x.get("seconds")) for x in heads]))
        return out

    def counts(self, dataset: str, cuts, epsilon_per_value, series, *, grid_bits: int | None = None,
               tolerate: int = 0) -> CountsRelease:
        """Noisy counts of the groups (b_{q-1}, b_q] of grid indices (b_0 = -1, b_Q = last) per series."""
        eps_v = parse_epsilon(epsilon_per_value, "epsilon_per_value")
        series = list(series)
        c = np.asarray(cuts)
        if c.size and (not np.issubdtype(c.dtype, np.integer) or (c < 0).any() or (np.diff(c.ravel()) < 0).any()):
            raise ECDFError("cuts must be non-decreasing non-negative grid indices")
        self._check(series=series, grid_bits=grid_bits, tolerate=tolerate)
        cuts = [int(x) for x in c.ravel()]
        req = {"kind": "counts", "series": series, "cuts": cuts, "epsilon_per_value": str(eps_v),
               "grid_bits": grid_bits, "tolerate": int(tolerate)}
        vals, heads, meta = self.release(dataset, req)
        Q = len(cuts) + 1
        out = {s: vals[i * Q:(i + 1) * Q].astype(float) for i, s in enumerate(series)}
        return CountsRelease(dataset, np.array(cuts), out, float(eps_v), float(Fraction(heads[0]["epsilon"])),
                             float(heads[0]["delta"]), meta["bytes"])

    # ------------------------------------------------------------------ applications
    def roc(self, dataset: str, epsilon, *, smoothing: int = 2, higher_is_positive: bool = True,
            grid_bits: int | None = None, mechanism: str = "paper", tolerate: int = 0) -> ROCRelease:
        """Sec. 5.1: release the positives' and the negatives' ECDFs with eps/2 each, then the ROC curve."""
        eps = parse_epsilon(epsilon)
        parse_epsilon(eps / 2, "epsilon / 2 (each class)")
        pos, neg = self.ecdf_many(dataset, eps / 2, ["pos", "neg"], grid_bits=grid_bits, mechanism=mechanism,
                                  smoothing=smoothing, tolerate=tolerate)
        fpr, tpr = roc_points(pos.smoothed_counts, neg.smoothed_counts, higher_is_positive)
        return ROCRelease(fpr, tpr, trapezoid_auc(fpr, tpr), pos, neg, float(eps), pos.delta + neg.delta)

    def hosmer_lemeshow(self, dataset: str, epsilon, *, Q: int = 10, smoothing: int = 2,
                        tolerate: int = 0) -> HLRelease:
        """Algorithm 2 over the servers (dataset uploaded with labels and probabilities).

        eps' = eps / (L + 9) with L the dataset's domain bits (the grid of the
        probabilities): line 5 releases the ECDF of the binned probabilities
        with (L + 1) eps' (Theorem 3.1: node scale 1/eps') and cuts it at
        q/Q by Algorithm 1; lines 7-9 release O1, O0 (counts) and E1, E0
        (sums of probabilities on a 2^-b grid) of every group with eps' per
        value -- 8 eps' in total, as in Theorem 5.1.
        """
        eps = parse_epsilon(epsilon)
        if isinstance(Q, bool) or not isinstance(Q, int) or not 2 <= Q <= 1024:
            raise ECDFError(f"Q must be an integer in [2, 1024], got {Q!r}")
        self._check(smoothing=smoothing, tolerate=tolerate)
        status = self.status(dataset)
        info = status[0]["info"]
        if "e1" not in info["series"]:
            raise ECDFError(f"dataset {dataset!r} was not uploaded with probabilities and labels")
        L = int(info["domain_bits"])
        scale = float(info["series"]["e1"])
        eps_p = eps / (L + 9)
        if L > MAX_GRID_BITS:
            raise ECDFError(f"Hosmer-Lemeshow needs the whole grid: domain bits {L} > {MAX_GRID_BITS}")
        for st in status:  # two releases: refuse before the first if the second could not be afforded
            i = st["info"]
            left = Fraction(i["budget"]) - Fraction(i["spent"]) - Fraction(i["reserved"])
            if left < eps:
                raise BudgetExceeded(f"server {st['server_id']}: dataset {dataset!r} has {float(left):g} of its "
                                     f"privacy budget left; Hosmer-Lemeshow needs {float(eps):g}")
        rel = self.ecdf(dataset, (L + 1) * eps_p, series="all", smoothing=smoothing, tolerate=tolerate)
        cuts = np.sort(np.asarray(inverse_ecdf(rel.smoothed, np.arange(1, Q) / Q), dtype=np.int64))
        cr = self.counts(dataset, cuts, eps_p, ["pos", "neg", "e1", "e0"], tolerate=tolerate)
        o1, o0 = cr.values["pos"], cr.values["neg"]
        e1, e0 = cr.values["e1"] / scale, cr.values["e0"] / scale
        stat = hosmer_lemeshow_statistic(o1, e1, o0, e0)
        return HLRelease(stat, cuts, o1, e1, o0, e0, rel.epsilon + cr.epsilon, float(eps_p),
                         rel.delta + cr.delta, rel)


# ----------------------------------------------------------------------------- server processes
class ServerProcesses:
    """m real server processes on loopback (``python -m pairwise ecdf serve``), as a context manager.

    Each server listens on a free port and prints its address; logs go to a
    temporary file per server (:meth:`logs`).  :meth:`stop` terminates the
    processes this object started.
    """

    def __init__(self, m: int = 2, *, host: str = "127.0.0.1", budget: str | float = "10",
                 dataset_budgets: dict | None = None, timeout: float = 120.0, startup_timeout: float = 60.0,
                 extra_args: tuple = ()) -> None:
        if m < 2:
            raise ValueError("need at least 2 servers")
        self.procs: list[subprocess.Popen] = []
        self._logs = []
        self.addresses: list[tuple[str, int]] = []
        try:
            for j in range(m):
                args = [sys.executable, "-m", "pairwise", "ecdf", "serve", "--server-id", str(j),
                        "--listen", f"{host}:0", "--budget", str(budget), "--timeout", str(timeout), *extra_args]
                for k, v in (dataset_budgets or {}).items():
                    args += ["--dataset-budget", f"{k}={v}"]
                log = tempfile.TemporaryFile(mode="w+")
                self._logs.append(log)
                self.procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True))
            deadline = time.monotonic() + startup_timeout
            for j, p in enumerate(self.procs):
                self.addresses.append(self._read_address(j, p, deadline))
        except BaseException:
            self.stop()
            raise

    def _read_address(self, j: int, p: subprocess.Popen, deadline: float) -> tuple[str, int]:
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

    @property
    def servers(self) -> str:
        return ",".join(format_address(a) for a in self.addresses)

    def logs(self, j: int) -> str:
        f = self._logs[j]
        f.flush()
        f.seek(0)
        text = f.read()
        f.seek(0, 2)
        return text

    def kill(self, j: int) -> None:
        """Terminate server j (e.g. to test a server that is down)."""
        p = self.procs[j]
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)

    def stop(self) -> None:
        for j in range(len(self.procs)):
            self.kill(j)
        for p in self.procs:
            if p.stdout:
                p.stdout.close()
        for f in self._logs:
            f.close()
        self.procs, self._logs = [], []

    def __enter__(self) -> "ServerProcesses":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
