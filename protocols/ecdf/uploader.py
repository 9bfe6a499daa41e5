"""Clients of the multi-server ECDF service: make keys and upload them ([BMR25, Sec. 4.1, 4.2]).

What it does
    One process may host many clients.  Each client's value is quantized to
    the public n-bit domain, its keys are made locally (verifiable DPF keys,
    ``vdpf``, for m = 2 (:mod:`pairwise.protocols.ecdf.validation`); ``mshare``
    keys for m > 2 (:mod:`pairwise.protocols.ecdf.shares`), or pointwise shares
    for the Sec. 4.1 baseline) and key j of every client goes to server j
    over TCP, in chunks whose frames stay within
    :data:`pairwise.protocols.ecdf.wire.UPLOAD_FRAME_MAX`.

    An upload is one request per server in two phases: every server accepts
    the header, then stages the chunks and answers which clients it rejected;
    every server is then told the union of the rejections and commits the
    remaining clients atomically, so all servers hold exactly the same
    clients, and if any server refuses or fails before the commit, no server
    stores anything.  Datasets are sealed: uploading to an existing dataset
    id is refused (:class:`pairwise.protocols.ecdf.wire.DatasetExists`)
    unless ``append=True``.

    :func:`upload`, :func:`upload_pointwise` and :func:`upload_source` (clients
    from a :class:`ClientSource`, e.g. a CSV file) stream: keys are made chunk
    by chunk while the previous chunks are sent, so memory stays bounded.
    Client ids are integers below 2^63 or strings stored as a keyed hash
    (:func:`stored_client_ids`).  ``progress(done, total)`` reports how many
    clients every server has been sent.  The phases, streaming, ids and
    progress in full: ``docs/ecdf-server.md``, "Uploads".

Security model
    Semi-honest parties (see :mod:`pairwise.protocols.ecdf.server`).  Keys and
    shares come from the OS CSPRNG.  A client process that hosts many
    clients knows their values, of course.  The progress counts are public
    (how many clients are uploaded), never data.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from pairwise.dp.validate import check_int, no_more_keywords, with_legacy
from pairwise.mpc.errors import ChannelError

from .ops import CommitRequest, PointwiseRequest, SeriesSpec, UploadRequest
from .shares import (
    MSHARE_MAX_BITS,
    ShareParameterError,
    grid_points,
    mshare_client_keys,
    pointwise_client_shares,
)
from .sources import STRING_ID_BIT, ArraySource, ClientBlock, ClientSource, _ids, stored_client_ids
from .validation import VDPF_MAX_DOMAIN_BITS, layout_for, vdpf_client_keys
from .wire import (
    ROLE_CLIENT,
    ServerUnavailable,
    call_ok,
    chunk_clients,
    connect_all,
    key_lengths,
    parallel,
    parse_servers,
    raise_refusal,
    recv_json,
    send_json,
    server_label,
)

__all__ = [
    "DEFAULT_PROB_BITS",
    "PointwiseRound",
    "STRING_ID_BIT",
    "UploadOptions",
    "ArraySource",
    "ClientBlock",
    "ClientSource",
    "UploadReport",
    "make_keys",
    "make_series",
    "send_keys",
    "stored_client_ids",
    "upload",
    "upload_pointwise",
    "upload_source",
]

#: Fixed-point grid of the expected-count weights of Hosmer-Lemeshow: w = round(p 2^8).
DEFAULT_PROB_BITS = 8
_CHUNK = 8192
#: Key leaves per chunk of a vdpf upload (both servers check a chunk, together, before the next arrives):
#: 4096 clients of one 10-bit key, fewer with more or larger keys.
_VDPF_LEAVES = 1 << 22


@dataclass(frozen=True)
class UploadOptions:
    """How an upload runs, shared by :func:`upload`, :func:`upload_source`, :func:`send_keys` and
    :func:`upload_pointwise` (each also takes these as loose keywords, as before).

    ``scheme``: ``auto`` (vdpf for two servers, mshare for more), ``vdpf`` or
    ``mshare`` (pointwise uploads ignore it); ``output_bits``: the share
    ring; ``timeout``: seconds any wait on a server may take;
    ``connect_timeout``: seconds to keep trying to reach a server; ``chunk``:
    clients per chunk (at most; the frame bound may lower it); ``append``: add
    clients to an existing dataset; ``meta``: public description stored with a
    new dataset; ``tls``: this client's :class:`pairwise.mpc.tls.TLSConfig`
    (None: plaintext, loopback only unless ``insecure``); ``progress(done,
    total)``: clients whose keys every server has been sent.
    """

    scheme: str = "auto"
    output_bits: int = 32
    timeout: float = 300.0
    connect_timeout: float = 5.0
    chunk: int = _CHUNK
    append: bool = False
    meta: dict | None = None
    tls: Any = None
    insecure: bool = False
    progress: Callable[[int, int], None] | None = None

    def __post_init__(self) -> None:
        for name in ("timeout", "connect_timeout"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ShareParameterError(f"{name} must be a positive number of seconds, got {v!r}")
        check_int(self.chunk, "chunk", lo=1, error=ShareParameterError)
        check_int(self.output_bits, "output_bits", lo=1, hi=64, error=ShareParameterError)
        if self.meta is not None and not isinstance(self.meta, dict):
            raise ShareParameterError(f"meta must be a dict of public metadata, got {type(self.meta).__name__}")


@dataclass(frozen=True)
class PointwiseRound:
    """The query round of a pointwise upload: ``grid_bits`` (2^grid_bits thresholds on the domain),
    ``thresholds`` (grid indices queried; None: the whole grid) and ``round_id`` (None: a fresh one)."""

    grid_bits: int
    thresholds: Any = None
    round_id: str | None = None


@dataclass
class UploadReport:
    """What every server accepted (committed) and rejected, and what the upload cost on the wire.

    ``accepted[j]`` is the number of clients server j committed (the same on
    every server); ``rejected[j]`` lists up to 100 of the clients it did not
    keep, with the reason (its own, or another server's rejection): its
    stored ``client`` id and its ``position`` in the upload (0-based);
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
    #: bytes the servers exchanged to check the clients' keys (vdpf), as each server counted them
    check_bytes: list[int] | None = None

    def as_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "scheme": self.scheme,
            "clients": self.clients,
            "accepted": self.accepted,
            "rejected_count": self.rejected_count,
            "rejected": self.rejected,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "upload_id": self.upload_id,
            "total_clients": self.total_clients,
            "check_bytes": self.check_bytes,
        }


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
    """The key scheme for ``m`` servers (``auto``: vdpf for 2, mshare for more); raises if it cannot serve them.

    ``dcf`` is a deprecated alias of ``vdpf`` (the servers no longer accept
    unverifiable DCF keys; the two-server scheme is the verifiable one).
    """
    return _scheme(scheme, m, domain_bits)


def _scheme(scheme: str, m: int, domain_bits: int) -> str:
    if scheme == "dcf":
        warnings.warn(
            "key scheme 'dcf' is deprecated: two servers now take verifiable 'vdpf' keys (used instead)",
            DeprecationWarning,
            stacklevel=3,
        )
        scheme = "vdpf"
    if scheme == "auto":
        scheme = "vdpf" if m == 2 else "mshare"
    if scheme not in ("vdpf", "mshare"):
        raise ShareParameterError(f"key scheme must be auto, vdpf or mshare, got {scheme!r}")
    if scheme == "vdpf" and m != 2:
        raise ShareParameterError("vdpf keys are two-party: use --scheme mshare (or auto) for m > 2 servers")
    if scheme == "vdpf" and domain_bits > VDPF_MAX_DOMAIN_BITS:
        raise ShareParameterError(
            f"vdpf keys are checked on their whole domain: at most 2^{VDPF_MAX_DOMAIN_BITS} "
            f"points (a release grid never has more), got domain bits {domain_bits}"
        )
    if scheme == "mshare" and m == 2:
        raise ShareParameterError("two servers take verifiable vdpf keys (mshare keys cannot be checked)")
    if scheme == "mshare" and domain_bits > MSHARE_MAX_BITS:
        raise ShareParameterError(f"mshare keys need a domain of at most 2^{MSHARE_MAX_BITS} points")
    return scheme


def make_keys(
    values, series: dict[str, tuple], *, scheme: str, m: int, domain_bits: int, output_bits: int = 32, first: int = 0
) -> list[dict[str, list[bytes]]]:
    """Keys of every client for every server: ``keys[j][series][i]`` (``vdpf``: a bundle per series, some empty);
    ``first``: the upload position of the first client (the public rotation of the ``mshare`` vector keys
    depends on it)."""
    scheme = _scheme(scheme, m, domain_bits)
    if scheme == "vdpf":
        return vdpf_client_keys(values, series, domain_bits=domain_bits, output_bits=output_bits)
    per: list[dict[str, list[bytes]]] = [dict() for _ in range(m)]
    for name, (w, _) in series.items():
        ks = mshare_client_keys(values, w, m=m, domain_bits=domain_bits, output_bits=output_bits, first=first)
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


class _Feed:
    """Blocks of frames made in one thread while the servers' threads send them: a bounded queue per server.

    ``make(block, first) -> [frames of server 0, frames of server 1, ...]``.
    At most ``depth`` chunks wait per server, so memory holds a few chunks
    whatever the upload's size; a server that fails stops the feed (the
    others then stop too, and nothing is committed anywhere).
    """

    _END = object()

    def __init__(self, source, size: int, m: int, make, depth: int = 2) -> None:
        self.queues = [queue.Queue(maxsize=depth) for _ in range(m)]
        self.stopped = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(source, size, make), daemon=True, name="ecdf-upload-keys"
        )
        self._thread.start()

    def _put(self, j: int, item) -> bool:
        while not self.stopped.is_set():
            try:
                self.queues[j].put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, source, size: int, make) -> None:
        try:
            first = 0
            for block in source.blocks(size):
                frames = make(block, first)
                for j, f in enumerate(frames):
                    if not self._put(j, (int(block.ids.size), f)):
                        return
                first += int(block.ids.size)
            if first != source.count:
                raise ShareParameterError(
                    f"the clients' source gave {first} clients, announced {source.count} "
                    "(did the file change during the upload?)"
                )
        except BaseException as exc:  # noqa: BLE001 - re-raised in the servers' threads
            self.error = exc
            self.stopped.set()
        finally:
            for j in range(len(self.queues)):
                self._put(j, self._END)

    def frames(self, j: int) -> Iterator[tuple[int, list]]:
        """Server j's chunks as (clients, frames), in order; raises the feed's error, if any."""
        while True:
            try:
                item = self.queues[j].get(timeout=0.2)
            except queue.Empty:
                if self.stopped.is_set():  # the maker failed (its error) or another server did (return)
                    if self.error is not None:
                        raise self.error from None  # the maker thread's error, not the queue timeout
                    return
                continue
            if item is self._END:
                if self.error is not None:
                    raise self.error
                return
            yield item

    def stop(self) -> None:
        self.stopped.set()
        for q in self.queues:  # unblock the maker
            while True:
                try:
                    q.get_nowait()
                except queue.Empty:
                    break
        self._thread.join(timeout=30)


def _run_upload(
    servers,
    dataset: str,
    count: int,
    scheme: str,
    header,
    send_chunks,
    opts: UploadOptions,
    *,
    before_send=None,
    on_fail=None,
) -> UploadReport:
    """Both phases of an upload on every server (see the module docstring).

    ``header(j, upload_id)`` is server j's request (an :class:`UploadRequest`);
    ``send_chunks(j, ch, sent)`` sends server j's chunks and calls
    ``sent(clients)`` after each one.  ``before_send()`` runs once every
    server has accepted its header (the keys are made from then on);
    ``on_fail()`` when any server fails.
    """
    t0 = time.perf_counter()
    upload_id = os.urandom(16).hex()
    m = len(servers)
    K = int(count)
    tally = _Sent(opts.progress, m, K)
    tally.report(0)
    chans = connect_all(servers, ROLE_CLIENT, opts.connect_timeout, opts.timeout, tls=opts.tls, insecure=opts.insecure)
    staged: list = [None] * m
    ready = threading.Barrier(m, action=before_send)
    errors: dict[int, BaseException] = {}  # by server: refusals, and failures that were not our own interrupt
    first_error: list[BaseException] = []
    lock = threading.Lock()

    def failed(j: int, exc: BaseException) -> None:
        """The first failure ends the upload on every server at once (nothing is committed anywhere)."""
        with lock:
            if not first_error or not isinstance(exc, ChannelError):
                errors[j] = exc
            if first_error:
                return
            first_error.append(exc)
        ready.abort()
        if on_fail is not None:
            on_fail()
        for ch in chans:
            ch.interrupt()

    def stage(j: int):
        label = server_label(servers, j)
        ch = chans[j]
        try:
            call_ok(servers, j, ch, header(j, upload_id).to_json())
            try:
                ready.wait(timeout=opts.timeout)  # the keys are made once every server accepted its header
            except threading.BrokenBarrierError:
                return  # another server refused or failed: its error is the one reported
            send_chunks(j, ch, lambda k: tally.add(j, k))
            reply = recv_json(ch)
            if not reply.get("ok"):
                raise_refusal(label, reply)
            staged[j] = (reply, ch.recv_array(np.uint64, int(reply["rejected_count"])).astype(np.int64))
        except ChannelError as exc:
            if not isinstance(exc, ServerUnavailable):
                exc = ServerUnavailable(f"{label}: upload failed: {exc}")
            failed(j, exc)
            raise exc from None
        except BaseException as exc:
            failed(j, exc)
            raise

    try:
        try:
            parallel(stage, m)
        except BaseException:
            if errors:  # the refusals and failures of their own, by server order (not what our interrupts caused)
                raise errors[min(errors)] from None
            raise
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
    # report: each server's own reasons first, then the clients another server rejected.  A server lists the
    # first 100 of its rejections with their ids, in the order of its rejected positions.
    who: dict[int, tuple[int, str]] = {}
    for j, (reply, pos) in enumerate(staged):
        for r, p in zip(reply.get("rejected", []), pos.tolist()):
            who.setdefault(int(p), (int(r["client"]), f"rejected by server {j}: {r['reason']}"))
    rejected = []
    for reply, pos in staged:
        own = [dict(r, position=int(p)) for r, p in zip(reply.get("rejected", []), pos.tolist())]
        mine = set(pos.tolist())
        others = []
        for p in drop.tolist():
            if p in mine:
                continue
            if len(own) + len(others) >= 100:
                break
            cid, why = who.get(int(p), (None, "rejected by another server"))
            others.append({"client": cid, "position": int(p), "reason": why})
        rejected.append((own + others)[:100])
    wire = [s["bytes_sent"] + s["bytes_received"] for s in st]
    return UploadReport(
        dataset,
        scheme,
        K,
        [int(r["accepted"]) for r in final],
        rejected,
        [int(drop.size)] * m,
        sum(wire),
        wire,
        time.perf_counter() - t0,
        upload_id,
        [int(r["clients"]) for r in final],
        [int(r.get("check_bytes", 0)) for r, _ in staged],
    )


def _stream(servers, dataset: str, source, scheme: str, header, make, size: int, opts: UploadOptions) -> UploadReport:
    """Connect, then make each chunk's frames (``make(block, first)``) while the previous ones are sent."""
    m = len(servers)
    feed: list[_Feed] = []

    def start() -> None:
        feed.append(_Feed(source, size, m, make))

    def send_chunks(j: int, ch, sent) -> None:
        for k, frames in feed[0].frames(j):
            for f in frames:
                if isinstance(f, np.ndarray):
                    ch.send_array(f)
                else:
                    ch.send(f)
            sent(k)

    def fail() -> None:
        if feed:
            feed[0].stopped.set()

    try:
        return _run_upload(
            servers, dataset, source.count, scheme, header, send_chunks, opts, before_send=start, on_fail=fail
        )
    finally:
        if feed:
            feed[0].stop()


def _vdpf_chunk(series: dict[str, int], domain_bits: int, output_bits: int, chunk: int) -> int:
    """Clients per chunk of a vdpf upload: the servers check each chunk together before the next, so a chunk
    holds at most :data:`_VDPF_LEAVES` key leaves (the wait per chunk stays short)."""
    lay = layout_for(dict(series), domain_bits, output_bits)
    leaves = sum(r.count << r.bits for s, r in lay.reads.items() if r.source == s)  # per client
    return min(chunk, max(1, _VDPF_LEAVES // leaves))


def _key_frames(
    block: ClientBlock, first: int, *, names, max_weights, scheme, m, domain_bits, output_bits
) -> list[list]:
    """Each server's three frames of one chunk: ids, key lengths (clients x series), the keys."""
    series = {s: (block.weights.get(s), max_weights[s]) for s in names}
    keys = make_keys(
        block.values, series, scheme=scheme, m=m, domain_bits=domain_bits, output_bits=output_bits, first=first
    )
    k = int(block.ids.size)
    out = []
    for j in range(m):
        rows = [[keys[j][s][i] for s in names] for i in range(k)]
        lens = np.array([[len(b) for b in row] for row in rows], dtype=np.uint32).reshape(k, len(names))
        out.append([block.ids.astype(np.uint64), lens, b"".join(b for row in rows for b in row)])
    return out


def upload_source(
    servers, dataset: str, source, *, domain_bits: int, options: UploadOptions | None = None, **legacy: Any
) -> UploadReport:
    """Upload the clients of ``source`` (a :class:`ClientSource`): connect to every server first, then make and
    send their keys chunk by chunk, so memory holds a few chunks whatever the number of clients.

    Every server checks the header (dataset id, parameters, staging space)
    before a single key is made; see :func:`upload`.  ``options``: an
    :class:`UploadOptions` (or its fields as keywords).
    """
    opts = with_legacy(options, UploadOptions, legacy, "upload_source")
    no_more_keywords(legacy, "upload_source")
    scheme, output_bits, chunk, append, meta = opts.scheme, opts.output_bits, opts.chunk, opts.append, opts.meta
    servers = parse_servers(servers)
    m = len(servers)
    scheme = _scheme(scheme, m, domain_bits)
    names = list(source.series)
    if not names:
        raise ShareParameterError("an upload needs at least one series")
    K = int(source.count)
    if K < 1:
        raise ShareParameterError("an upload needs at least one client")
    biggest = max(key_lengths(scheme, domain_bits, output_bits, dict(source.series)))
    if scheme == "vdpf":
        chunk = _vdpf_chunk(source.series, domain_bits, output_bits, chunk)
    size = chunk_clients(max(biggest * len(names), 4 * len(names)), want=chunk)
    chunks = tuple(min(size, K - c) for c in range(0, K, size))

    def header(j: int, upload_id: str) -> UploadRequest:
        return UploadRequest(
            dataset=dataset,
            scheme=scheme,
            m=m,
            server_id=j,
            domain_bits=domain_bits,
            output_bits=output_bits,
            append=bool(append),
            meta=dict(meta or {}),
            series=tuple(SeriesSpec(s, int(source.series[s])) for s in names),
            chunks=chunks,
            upload_id=upload_id,
            servers=tuple(servers) if scheme == "vdpf" else None,
        )

    def make(block: ClientBlock, first: int) -> list[list]:
        return _key_frames(
            block,
            first,
            names=names,
            max_weights=source.series,
            scheme=scheme,
            m=m,
            domain_bits=domain_bits,
            output_bits=output_bits,
        )

    return _stream(servers, dataset, source, scheme, header, make, size, opts)


def send_keys(
    servers,
    dataset: str,
    *,
    domain_bits: int,
    series_meta: dict[str, int],
    ids: np.ndarray,
    keys: list[dict[str, list[bytes]]],
    options: UploadOptions | None = None,
    **legacy: Any,
) -> UploadReport:
    """Send key j of every client to server j (all servers in parallel): keys made beforehand, e.g. by
    :func:`make_keys` (tests craft bad keys this way); see :func:`upload`.

    ``progress(done, total)``: clients whose keys every server has been sent (module docstring).
    ``options``: an :class:`UploadOptions` (or its fields as keywords, ``scheme`` and ``output_bits`` among them).
    """
    opts = with_legacy(options, UploadOptions, legacy, "send_keys")
    no_more_keywords(legacy, "send_keys")
    output_bits, chunk, append, meta = opts.output_bits, opts.chunk, opts.append, opts.meta
    servers = parse_servers(servers)
    m = len(servers)
    scheme = _scheme(opts.scheme, m, domain_bits)
    names = list(series_meta)
    K = int(ids.size)
    biggest = max((len(b) for j in range(m) for s in names for b in keys[j][s]), default=1)
    if scheme == "vdpf":
        chunk = _vdpf_chunk(series_meta, domain_bits, output_bits, chunk)
    chunk = chunk_clients(max(biggest * len(names), 4 * len(names)), want=chunk)
    chunks = [min(chunk, K - c) for c in range(0, K, chunk)]

    def header(j: int, upload_id: str) -> UploadRequest:
        return UploadRequest(
            dataset=dataset,
            scheme=scheme,
            m=m,
            server_id=j,
            domain_bits=domain_bits,
            output_bits=output_bits,
            append=bool(append),
            meta=dict(meta or {}),
            series=tuple(SeriesSpec(s, int(series_meta[s])) for s in names),
            chunks=tuple(chunks),
            upload_id=upload_id,
            servers=tuple(servers) if scheme == "vdpf" else None,
        )

    def send_chunks(j: int, ch, sent) -> None:
        for c0, k in zip(range(0, K, chunk), chunks):
            blobs = [[keys[j][s][i] for s in names] for i in range(c0, c0 + k)]
            lens = np.array([[len(b) for b in row] for row in blobs], dtype=np.uint32).reshape(k, len(names))
            ch.send_array(ids[c0 : c0 + k].astype(np.uint64))
            ch.send_array(lens)
            ch.send(b"".join(b for row in blobs for b in row))
            sent(k)

    return _run_upload(servers, dataset, K, scheme, header, send_chunks, opts)


def upload(
    servers,
    dataset: str,
    values,
    *,
    labels=None,
    probabilities=None,
    client_ids=None,
    domain_bits: int,
    prob_bits: int = DEFAULT_PROB_BITS,
    options: UploadOptions | None = None,
    **legacy: Any,
) -> UploadReport:
    """Make and upload the keys of clients holding ``values`` (domain points of ``domain_bits`` bits).

    ``labels`` (0/1) add the ROC series pos/neg; ``probabilities`` (with
    labels) add the Hosmer-Lemeshow series e1/e0.  Client i has id
    ``client_ids[i]`` (default i): a non-negative integer below 2^63, or a
    string (mapped by :func:`stored_client_ids`).  ``append``: add these
    clients to an existing dataset (otherwise an existing dataset id is
    refused).  ``meta``: public description stored with a new dataset (e.g.
    the value range, ``{"range": [lo, hi]}``); it is part of the dataset
    digest.  ``tls``: this client's :class:`pairwise.mpc.tls.TLSConfig` (a
    ``client`` or ``querier`` certificate); None: plaintext, loopback only
    unless ``insecure``.  ``progress(done, total)``: clients whose keys every
    server has been sent, ``(0, K)`` first (module docstring).  The servers
    are reached first; keys are made chunk by chunk while earlier chunks are
    sent (:func:`upload_source`).  ``options``: an :class:`UploadOptions`
    (or its fields as keywords: ``scheme``, ``output_bits``, ``timeout``, ...).
    """
    opts = with_legacy(options, UploadOptions, legacy, "upload")
    no_more_keywords(legacy, "upload")
    series = make_series(labels, probabilities, prob_bits)
    vals = np.asarray(values)
    ids = _ids(client_ids, vals.size, dataset)
    return upload_source(servers, dataset, ArraySource(vals, series, ids), domain_bits=domain_bits, options=opts)


def upload_pointwise(
    servers,
    dataset: str,
    values,
    *,
    domain_bits: int,
    labels=None,
    client_ids=None,
    source=None,
    query_round: PointwiseRound | None = None,
    options: UploadOptions | None = None,
    **legacy: Any,
) -> UploadReport:
    """Pointwise baseline (Sec. 4.1): every client sends additive shares of w [x <= tau_t] for each queried t.

    ``thresholds``: grid indices of this query round (default: the whole
    grid of 2^grid_bits thresholds).  A new ``round_id`` (default: a fresh
    one) replaces the dataset's shares with this round's (the budget stays);
    ``append=True`` with the current round's id adds clients to it.  The
    round is then released with :meth:`ECDFQuerier.ecdf` on the same dataset.
    ``source``: a :class:`ClientSource` instead of ``values``/``labels``/``client_ids``.
    ``progress(done, total)``: clients whose keys every server has been sent (module docstring).
    ``query_round``: a :class:`PointwiseRound` (or ``grid_bits``, ``thresholds``, ``round_id`` as keywords);
    ``options``: an :class:`UploadOptions` (or its fields as keywords).
    """
    if query_round is None and "grid_bits" not in legacy:
        raise TypeError("upload_pointwise() missing 1 required keyword-only argument: 'grid_bits'")
    q = with_legacy(query_round, PointwiseRound, legacy, "upload_pointwise")
    opts = with_legacy(options, UploadOptions, legacy, "upload_pointwise")
    no_more_keywords(legacy, "upload_pointwise")
    grid_bits, thresholds, round_id = q.grid_bits, q.thresholds, q.round_id
    output_bits, chunk, append, meta = opts.output_bits, opts.chunk, opts.append, opts.meta
    servers = parse_servers(servers)
    m = len(servers)
    if source is None:
        vals = np.asarray(values)
        source = ArraySource(vals, make_series(labels), _ids(client_ids, vals.size, dataset))
    names = list(source.series)
    N = 1 << grid_bits
    thr = np.arange(N) if thresholds is None else np.unique(np.asarray(thresholds, dtype=np.int64))
    pts = grid_points(domain_bits, grid_bits)[thr]
    rnd = round_id or os.urandom(8).hex()
    K = int(source.count)
    word = np.uint32 if output_bits <= 32 else np.uint64
    size = chunk_clients(len(names) * thr.size * np.dtype(word).itemsize, want=chunk)
    chunks = tuple(min(size, K - c) for c in range(0, K, size))

    def header(j: int, upload_id: str) -> PointwiseRequest:
        return PointwiseRequest(
            dataset=dataset,
            scheme="pointwise",
            m=m,
            server_id=j,
            domain_bits=domain_bits,
            output_bits=output_bits,
            grid_bits=grid_bits,
            thresholds=tuple(int(t) for t in thr),
            round=rnd,
            append=bool(append),
            meta=dict(meta or {}),
            series=tuple(SeriesSpec(s, int(source.series[s])) for s in names),
            chunks=chunks,
            upload_id=upload_id,
        )

    def make(block: ClientBlock, first: int) -> list[list]:
        shares = {
            s: pointwise_client_shares(
                block.values, block.weights.get(s), pts, m=m, domain_bits=domain_bits, output_bits=output_bits
            )
            for s in names
        }
        return [
            [block.ids.astype(np.uint64), np.stack([shares[s][j] for s in names], axis=1).astype(word)]
            for j in range(m)
        ]

    return _stream(servers, dataset, source, "pointwise", header, make, size, opts)
