"""Clients of the multi-server ECDF service: make keys and upload them (dp-ecdf Sec. 4.1, 4.2).

What it does
    One process may host many clients.  Each client's value is quantized to
    the public n-bit domain, its keys are made locally
    (:mod:`pairwise.protocols.ecdf.shares`: DCF keys for m = 2, ``mshare``
    keys for m > 2, or pointwise shares for the Sec. 4.1 baseline) and key j
    of every client goes to server j over TCP, in chunks whose frames stay
    within :data:`pairwise.protocols.ecdf.wire.UPLOAD_FRAME_MAX`.

    An upload is one request per server in two phases
    (:mod:`pairwise.protocols.ecdf.handlers`): every server stages the
    chunks and answers which clients it rejected (malformed key, duplicate
    id); then every server is told the union of the rejections and commits
    the remaining clients atomically.  All servers therefore hold exactly
    the same clients.  If any server refuses or fails before the commit,
    no server stores anything.

    Datasets are sealed: uploading to an existing dataset id is refused
    (:class:`pairwise.protocols.ecdf.wire.DatasetExists`) unless
    ``append=True`` (new clients only; ids already present are rejected).
    For the pointwise baseline a new ``round_id`` starts a new query round.

Progress
    :func:`upload`, :func:`send_keys` and :func:`upload_pointwise` take
    ``progress=None``: a ``progress(done, total)`` callback (a progress
    bar's hook) called with the number of clients whose keys have been sent
    to every server, out of all K clients: ``(0, K)`` before the keys are
    made, then after each chunk (the least any server has been sent, so it
    never decreases), ending at ``(K, K)``.  Calls come from the servers'
    threads, one at a time (a lock orders them).  The counts are public
    (how many clients are uploaded), never data.

Security model
    Semi-honest parties (see :mod:`pairwise.protocols.ecdf.server`).  Keys and
    shares come from the OS CSPRNG.  A client process that hosts many
    clients knows their values, of course.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import numpy as np
from pairwise.mpc.errors import ChannelError

from .ops import CommitRequest, PointwiseRequest, SeriesSpec, UploadRequest
from .shares import (
    MSHARE_MAX_BITS,
    ShareParameterError,
    dcf_client_keys,
    grid_points,
    mshare_client_keys,
    pointwise_client_shares,
)
from .wire import (
    ROLE_CLIENT,
    ServerUnavailable,
    call_ok,
    chunk_clients,
    connect_all,
    parallel,
    parse_servers,
    raise_refusal,
    recv_json,
    send_json,
    server_label,
)

__all__ = [
    "DEFAULT_PROB_BITS",
    "UploadReport",
    "make_keys",
    "make_series",
    "send_keys",
    "upload",
    "upload_pointwise",
]

#: Fixed-point grid of the expected-count weights of Hosmer-Lemeshow: w = round(p 2^8).
DEFAULT_PROB_BITS = 8
_CHUNK = 8192


def _ids(client_ids, count: int) -> np.ndarray:
    if client_ids is None:
        return np.arange(count, dtype=np.uint64)
    ids = np.asarray(client_ids)
    if ids.shape != (count,) or not np.issubdtype(ids.dtype, np.integer) or (ids < 0).any():
        raise ShareParameterError(f"client ids must be {count} non-negative integers")
    return ids.astype(np.uint64)


@dataclass
class UploadReport:
    """What every server accepted (committed) and rejected, and what the upload cost on the wire.

    ``accepted[j]`` is the number of clients server j committed (the same on
    every server); ``rejected[j]`` lists up to 100 of the clients it did not
    keep, with the reason (its own, or another server's rejection);
    ``rejected_count[j]`` counts them all.
    """

    dataset: str
    scheme: str
    clients: int
    accepted: list[int]
    rejected: list[list[dict]]
    rejected_count: list[int]
    bytes: int
    bytes_per_server: list[int]
    seconds: float
    upload_id: str = ""
    total_clients: list[int] | None = None

    def as_dict(self) -> dict:
        return {"dataset": self.dataset, "scheme": self.scheme, "clients": self.clients,
                "accepted": self.accepted, "rejected_count": self.rejected_count,
                "rejected": self.rejected, "bytes": self.bytes, "seconds": self.seconds,
                "upload_id": self.upload_id, "total_clients": self.total_clients}


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
    if scheme == "mshare" and m == 2:
        raise ShareParameterError("mshare keys are for 3 or more servers: two servers use dcf keys (--scheme auto)")
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



class _Sent:
    """Clients whose keys every server has been sent, reported to ``progress(done, total)`` (module docstring).

    Each server's thread adds its own chunks (:meth:`add`); the reported count
    is the minimum over the servers, so it never decreases, and the lock keeps
    the calls in order.
    """

    def __init__(self, progress, m: int, total: int) -> None:
        self.progress, self.total = progress, int(total)
        self.sent = [0] * m
        self.reported = -1
        self.lock = threading.Lock()

    def report(self, done: int) -> None:
        if self.progress is None:
            return
        with self.lock:
            self._report(done)

    def add(self, j: int, clients: int) -> None:
        if self.progress is None:
            return
        with self.lock:
            self.sent[j] += int(clients)
            self._report(min(self.sent))

    def _report(self, done: int) -> None:
        if done > self.reported:
            self.reported = done
            self.progress(done, self.total)


def _run_upload(servers, dataset: str, ids: np.ndarray, scheme: str, header, send_chunks, *, timeout: float,
                connect_timeout: float, tls=None, insecure: bool = False, progress=None) -> UploadReport:
    """Both phases of an upload on every server (see the module docstring).

    ``header(j, upload_id)`` is server j's request (an :class:`UploadRequest`);
    ``send_chunks(j, ch, sent)`` sends server j's chunks and calls
    ``sent(clients)`` after each one.
    """
    t0 = time.perf_counter()
    upload_id = os.urandom(16).hex()
    m = len(servers)
    K = int(ids.size)
    tally = _Sent(progress, m, K)
    tally.report(0)
    chans = connect_all(servers, ROLE_CLIENT, connect_timeout, timeout, tls=tls, insecure=insecure)
    staged: list = [None] * m

    def stage(j: int):
        label = server_label(servers, j)
        ch = chans[j]
        try:
            call_ok(servers, j, ch, header(j, upload_id).to_json())
            send_chunks(j, ch, lambda k: tally.add(j, k))
            reply = recv_json(ch)
            if not reply.get("ok"):
                raise_refusal(label, reply)
            staged[j] = (reply, ch.recv_array(np.uint64, int(reply["rejected_count"])).astype(np.int64))
        except ChannelError as exc:
            if isinstance(exc, ServerUnavailable):
                raise
            raise ServerUnavailable(f"{label}: upload failed: {exc}") from exc

    try:
        parallel(stage, m)
        drop = np.unique(np.concatenate([s[1] for s in staged])) if m else np.zeros(0, np.int64)
        if drop.size and (drop.min() < 0 or drop.max() >= K):
            raise ServerUnavailable("a server reported a rejected client outside the upload")

        def commit(j: int) -> dict:
            send_json(chans[j], CommitRequest(upload_id, int(drop.size)).to_json())
            chans[j].send_array(drop.astype(np.uint64))
            return call_ok(servers, j, chans[j], None)

        final = parallel(commit, m)
        st = [ch.stats() for ch in chans]
    finally:
        for ch in chans:
            ch.close()
    tally.report(K)
    # report: each server's own reasons first, then the clients another server rejected
    why: dict[int, str] = {}
    for j, (reply, _) in enumerate(staged):
        for r in reply.get("rejected", []):
            why.setdefault(int(r["client"]), f"rejected by server {j}: {r['reason']}")
    rejected = []
    for j, (reply, _) in enumerate(staged):
        own = list(reply.get("rejected", []))
        mine = {int(r["client"]) for r in own}
        others = [{"client": int(ids[p]), "reason": why.get(int(ids[p]), "rejected by another server")}
                  for p in drop.tolist() if int(ids[p]) not in mine]
        rejected.append((own + others)[:100])
    wire = [s["bytes_sent"] + s["bytes_received"] for s in st]
    return UploadReport(dataset, scheme, K, [int(r["accepted"]) for r in final], rejected,
                        [int(drop.size)] * m, sum(wire), wire, time.perf_counter() - t0, upload_id,
                        [int(r["clients"]) for r in final])


def send_keys(servers, dataset: str, *, scheme: str, domain_bits: int, output_bits: int,
              series_meta: dict[str, int], ids: np.ndarray, keys: list[dict[str, list[bytes]]],
              timeout: float = 300.0, connect_timeout: float = 5.0, chunk: int = _CHUNK, append: bool = False,
              meta: dict | None = None, tls=None, insecure: bool = False, progress=None) -> UploadReport:
    """Send key j of every client to server j (all servers in parallel); see :func:`upload`.

    ``progress(done, total)``: clients whose keys every server has been sent (module docstring).
    """
    servers = parse_servers(servers)
    m = len(servers)
    names = list(series_meta)
    K = int(ids.size)
    biggest = max((len(b) for j in range(m) for s in names for b in keys[j][s]), default=1)
    chunk = chunk_clients(max(biggest * len(names), 4 * len(names)), want=chunk)
    chunks = [min(chunk, K - c) for c in range(0, K, chunk)]

    def header(j: int, upload_id: str) -> UploadRequest:
        return UploadRequest(dataset=dataset, scheme=scheme, m=m, server_id=j, domain_bits=domain_bits,
                             output_bits=output_bits, append=bool(append), meta=dict(meta or {}),
                             series=tuple(SeriesSpec(s, int(series_meta[s])) for s in names),
                             chunks=tuple(chunks), upload_id=upload_id)

    def send_chunks(j: int, ch, sent) -> None:
        for c0, k in zip(range(0, K, chunk), chunks):
            blobs = [[keys[j][s][i] for s in names] for i in range(c0, c0 + k)]
            lens = np.array([[len(b) for b in row] for row in blobs], dtype=np.uint32).reshape(k, len(names))
            ch.send_array(ids[c0:c0 + k].astype(np.uint64))
            ch.send_array(lens)
            ch.send(b"".join(b for row in blobs for b in row))
            sent(k)

    return _run_upload(servers, dataset, ids, scheme, header, send_chunks, timeout=timeout,
                       connect_timeout=connect_timeout, tls=tls, insecure=insecure, progress=progress)


def upload(servers, dataset: str, values, *, labels=None, probabilities=None, client_ids=None,
           domain_bits: int, scheme: str = "auto", output_bits: int = 32, prob_bits: int = DEFAULT_PROB_BITS,
           timeout: float = 300.0, connect_timeout: float = 5.0, append: bool = False,
           meta: dict | None = None, tls=None, insecure: bool = False, progress=None) -> UploadReport:
    """Make and upload the keys of clients holding ``values`` (domain points of ``domain_bits`` bits).

    ``labels`` (0/1) add the ROC series pos/neg; ``probabilities`` (with
    labels) add the Hosmer-Lemeshow series e1/e0.  Client i has id
    ``client_ids[i]`` (default i).  ``append``: add these clients to an
    existing dataset (otherwise an existing dataset id is refused).
    ``meta``: public description stored with a new dataset (e.g. the value
    range, ``{"range": [lo, hi]}``); it is part of the dataset digest.
    ``tls``: this client's :class:`pairwise.mpc.tls.TLSConfig` (a ``client``
    or ``querier`` certificate); None: plaintext, loopback only unless
    ``insecure``.  ``progress(done, total)``: clients whose keys every
    server has been sent, ``(0, K)`` first, before the keys are made
    (module docstring).
    """
    servers = parse_servers(servers)
    m = len(servers)
    scheme = _scheme(scheme, m, domain_bits)
    series = make_series(labels, probabilities, prob_bits)
    vals = np.asarray(values)
    ids = _ids(client_ids, vals.size)
    if progress:
        progress(0, int(ids.size))
    keys = make_keys(vals, series, scheme=scheme, m=m, domain_bits=domain_bits, output_bits=output_bits)
    return send_keys(servers, dataset, scheme=scheme, domain_bits=domain_bits, output_bits=output_bits,
                     series_meta={s: w for s, (_, w) in series.items()}, ids=ids, keys=keys,
                     timeout=timeout, connect_timeout=connect_timeout, append=append, meta=meta, tls=tls,
                     insecure=insecure, progress=progress)


def upload_pointwise(servers, dataset: str, values, *, grid_bits: int, domain_bits: int, thresholds=None,
                     labels=None, client_ids=None, round_id: str | None = None, output_bits: int = 32,
                     timeout: float = 300.0, connect_timeout: float = 5.0, chunk: int = _CHUNK,
                     append: bool = False, meta: dict | None = None, tls=None, insecure: bool = False,
                     progress=None) -> UploadReport:
    """Pointwise baseline (Sec. 4.1): every client sends additive shares of w [x <= tau_t] for each queried t.

    ``thresholds``: grid indices of this query round (default: the whole
    grid of 2^grid_bits thresholds).  A new ``round_id`` (default: a fresh
    one) replaces the dataset's shares with this round's (the budget stays);
    ``append=True`` with the current round's id adds clients to it.  The
    round is then released with :meth:`ECDFQuerier.ecdf` on the same dataset.
    ``progress(done, total)``: clients whose keys every server has been sent (module docstring).
    """
    servers = parse_servers(servers)
    m = len(servers)
    series = make_series(labels)
    vals = np.asarray(values)
    ids = _ids(client_ids, vals.size)
    if progress:
        progress(0, int(ids.size))
    N = 1 << grid_bits
    thr = np.arange(N) if thresholds is None else np.unique(np.asarray(thresholds, dtype=np.int64))
    pts = grid_points(domain_bits, grid_bits)[thr]
    shares = {s: pointwise_client_shares(vals, w, pts, m=m, domain_bits=domain_bits, output_bits=output_bits)
              for s, (w, _) in series.items()}
    names = list(series)
    rnd = round_id or os.urandom(8).hex()
    K = vals.size
    word = np.uint32 if output_bits <= 32 else np.uint64
    chunk = chunk_clients(len(names) * thr.size * np.dtype(word).itemsize, want=chunk)
    chunks = [min(chunk, K - c) for c in range(0, K, chunk)]

    def header(j: int, upload_id: str) -> PointwiseRequest:
        return PointwiseRequest(dataset=dataset, scheme="pointwise", m=m, server_id=j, domain_bits=domain_bits,
                                output_bits=output_bits, grid_bits=grid_bits,
                                thresholds=tuple(int(t) for t in thr), round=rnd, append=bool(append),
                                meta=dict(meta or {}),
                                series=tuple(SeriesSpec(s, int(series[s][1])) for s in names),
                                chunks=tuple(chunks), upload_id=upload_id)

    def send_chunks(j: int, ch, sent) -> None:
        for c0, k in zip(range(0, K, chunk), chunks):
            sl = slice(c0, c0 + k)
            ch.send_array(ids[sl])
            block = np.stack([shares[s][j][sl] for s in names], axis=1)  # (k, S, T)
            ch.send_array(block.astype(word))
            sent(k)

    return _run_upload(servers, dataset, ids, "pointwise", header, send_chunks, timeout=timeout,
                       connect_timeout=connect_timeout, tls=tls, insecure=insecure, progress=progress)
