"""Request handlers of one ECDF server: uploads (stage, commit), status, releases, ledger reconciliation.

What it does
    :class:`ServerState` is what a server shares between its connections:
    the storage, the ledger, the datasets, the claims of uploads in
    progress and the server's own Dask cluster, if any
    (:mod:`pairwise.protocols.ecdf.cluster`).  :class:`Session` serves the
    requests of one connection (the server's connection loop calls
    :meth:`Session.answer` once per control frame: authorization, then the
    request parsed into its type of :mod:`pairwise.protocols.ecdf.ops`, then
    the handler :attr:`Session.DISPATCH` names for its ``op``) and owns what that connection has in flight: one staged upload, one
    prepared release.  When the connection ends, :meth:`Session.close`
    discards both (nothing is stored or charged).

Uploads (ops ``upload`` / ``pointwise``, then ``commit`` or ``discard``)
    1. The header names the dataset, its public parameters, a fresh
       ``upload_id``, ``append`` and the chunk sizes.  A new dataset id is
       claimed for this upload; an existing one is refused (datasets are
       sealed) unless ``append`` is set, or, for a pointwise dataset, unless
       the header starts a new query round (which replaces the round's
       shares; the budget stays).  Each chunk's client count must be at most
       :func:`pairwise.protocols.ecdf.wire.chunk_clients` of the scheme's
       per-client size, so every frame size is known before it is read.
    2. The header reserves the most disk its chunks can take
       (:class:`pairwise.protocols.ecdf.staging.StagingBudget`; refused if
       the connection's or the server's staging budget cannot hold it).
       The chunks arrive: ids, key lengths (each at most the scheme's key
       size), keys (exactly the sum of the lengths) -- or the pointwise
       share words.  A malformed key rejects its client, as does an
       ``mshare`` key of the wrong kind for its position (this server holds
       the vector keys of positions p = server id mod m); a client id that
       is already in the dataset or in a concurrent upload is rejected.
       ``vdpf`` keys are checked by both servers together, chunk by chunk
       (:mod:`pairwise.protocols.ecdf.validation`, over the check channel
       server 0 opened when it accepted the header,
       :func:`pairwise.protocols.ecdf.peers.open_verify_link`): a client
       both servers do not accept is not staged, by either server.
       Each chunk's accepted clients are written to the upload's staged file
       before the next chunk is read, so memory holds one chunk.  The reply
       lists the rejected positions of the upload.
    3. The uploader sends every server the union of all servers' rejected
       positions (``commit``); each server drops them and commits the rest
       in one transaction (:meth:`pairwise.protocols.ecdf.storage.Storage.commit_upload`),
       so all servers hold the same clients.  ``discard`` (or a closed
       connection) forgets the staged upload.

Releases (ops ``prepare``, ``go``, ``abort``)
    ``prepare`` validates the request (:func:`pairwise.protocols.ecdf.release.plan_release`),
    takes a consistent snapshot of the dataset (one row per client in every
    series it reads, or a refusal), on a server with a Dask cluster evaluates
    the snapshot's keys there (:meth:`ServerState.evaluate_on_cluster`: a
    failed cluster refuses the request with nothing held) and reserves the
    charge; its reply carries the dataset digest and the ledger digest (and
    the cluster's scheduler id, so the querier can refuse servers that share
    one), which the querier compares
    across servers.  ``link`` (two servers, to server 0) connects server 0 to
    server 1 and checks its identity, still before any charge.  ``go``
    writes the charge to the ledger durably, then runs the release over the
    snapshot.  ``ledger`` / ``adopt`` let the
    querier make the servers' ledgers agree (:mod:`pairwise.protocols.ecdf.ledger`).

Security model
    See :mod:`pairwise.protocols.ecdf.server`; authorization happens before a
    handler runs (:mod:`pairwise.protocols.ecdf.auth`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from fractions import Fraction

import numpy as np

from pairwise.mpc.channel import TCPChannel
from pairwise.mpc.errors import ChannelError, ProtocolError

from ..cluster import ClusterError
from .auth import op_of
from .dataset import Dataset, Snapshot, split_keys
from .ledger import Ledger
from .ops import (
    MAX_CLIENTS,
    META_MAX,
    AbortRequest,
    AdoptRequest,
    CommitRequest,
    DiscardRequest,
    DropUploadRequest,
    GoRequest,
    LedgerRequest,
    LinkRequest,
    PointwiseRequest,
    PrepareRequest,
    Request,
    StatusRequest,
    UploadRequest,
    UploadsRequest,
)
from .peers import PeerHub, ask_holds, connect_peer, garbler_session, open_verify_link
from .release import ReleasePlan, plan_release, release_points, run_release
from .shares import KIND_VECTOR, parse_keys
from .staging import StagedUpload, StagingBudget
from .storage import ChunkRecord, DatasetRecord, Storage, StorageError
from .validation import VDPFSeries, check_chunk, layout_for
from .wire import (
    UPLOAD_FRAME_MAX,
    DatasetError,
    DatasetExists,
    ECDFError,
    QueryRefused,
    ServerUnavailable,
    UnknownDataset,
    error_code,
    fmt_eps,
    format_address,
    key_lengths,
    send_json,
)

__all__ = ["MAX_CLIENTS", "META_MAX", "ServerState", "Session"]

_MAX_REJECT_REPORT = 100


class ServerState:
    """Everything the connections of one server share (see the module docstring)."""

    def __init__(self, server_id: int, storage: Storage, *, budget: Fraction, dataset_budgets: dict,
                 timeout: float, peers: dict[int, tuple[str, int]], policy, log, tls=None,
                 insecure: bool = False, cluster=None, owner_budget: Fraction | None = None,
                 total_budget: Fraction | None = None, staging: StagingBudget | None = None) -> None:
        self.server_id = server_id
        #: disk for uploads staged but not committed (:mod:`pairwise.protocols.ecdf.staging`)
        self.staging = staging if staging is not None else StagingBudget()
        #: this server's own Dask cluster (:class:`pairwise.protocols.ecdf.cluster.ClusterKeys`), or None
        self.cluster = cluster
        self.tls, self.insecure = tls, insecure
        self.storage = storage
        self.budget = budget
        self.dataset_budgets = dataset_budgets
        self.timeout = timeout
        self.peers = peers
        self.policy = policy
        self.log = log
        self.lock = threading.Lock()
        self.datasets: dict[str, Dataset] = {}
        self.claims: dict[str, str] = {}  # dataset -> upload id creating it (or starting a new round)
        self.ledger = Ledger(storage, server_id, owner_budget=owner_budget, total_budget=total_budget)
        self.hub = PeerHub(policy, timeout, log)
        self.hub.holds = self.holds
        self._staged: dict[tuple[str, str], int] = {}  # (dataset, upload id) -> connections staging it
        #: how this server reaches another server (:func:`pairwise.protocols.ecdf.peers.dial_peer` over TCP;
        #: in-process tests connect servers by memory channels)
        self.dial = None
        for rec in storage.datasets():
            override = dataset_budgets.get(rec.name)
            if override is not None and override != rec.budget:
                if override < rec.budget:
                    storage.update_budget(rec.name, override)
                    rec.budget = override
                    log(f"dataset {rec.name!r}: budget lowered to {fmt_eps(override)} (--dataset-budget)")
                else:
                    log(f"dataset {rec.name!r} keeps its stored budget {fmt_eps(rec.budget)}; a budget is "
                        f"never raised after creation (--dataset-budget {fmt_eps(override)} ignored)")
            ds = Dataset(rec, server_id)
            ds.load_ids(storage)
            self.datasets[rec.name] = ds
        self.ledger.load()  # every dataset's charges: owner and server budgets span datasets

    def stage(self, dataset: str, upload_id: str, sign: int) -> None:
        """Count one more (``sign`` +1) or one fewer (-1) connection staging ``upload_id`` of ``dataset``."""
        with self.lock:
            key = (dataset, upload_id)
            left = self._staged.get(key, 0) + sign
            if left > 0:
                self._staged[key] = left
            else:
                self._staged.pop(key, None)

    def is_staged(self, dataset: str, upload_id: str) -> bool:
        with self.lock:
            return (dataset, upload_id) in self._staged

    def holds(self, dataset: str, upload_id: str) -> dict:
        """Another server's question before a repair: do we hold the dataset, the upload (committed), or is the
        upload staged here right now?"""
        with self.lock:
            ds = self.datasets.get(dataset)
            staged = (dataset, upload_id) in self._staged
        return {"dataset": ds is not None, "held": ds is not None and upload_id in ds.upload_ids(),
                "staged": staged}

    def budget_for(self, name: str) -> Fraction:
        return self.dataset_budgets.get(name, self.budget)

    def dataset(self, name) -> Dataset:
        with self.lock:
            ds = self.datasets.get(name) if isinstance(name, str) else None
        if ds is None:
            raise UnknownDataset(f"server {self.server_id} has no dataset {name!r} (upload the clients' keys first)")
        return ds

    def cluster_info(self) -> dict | None:
        """The cluster this server evaluates keys on (spec, scheduler, workers, threads), None without one;
        a scheduler that does not answer is reported, not raised."""
        if self.cluster is None:
            return None
        try:
            return self.cluster.describe()
        except ClusterError as exc:
            return {"spec": self.cluster.spec, "scheduler": self.cluster.scheduler,
                    "scheduler_id": self.cluster.scheduler_id, "error": str(exc)}

    def evaluate_on_cluster(self, ds: Dataset, plan: ReleasePlan, snap: Snapshot) -> Snapshot:
        """``snap`` with its key shares evaluated on this server's cluster at the release's points.

        Runs before anything is reserved: a failure of the cluster refuses the
        request (:class:`ServerUnavailable`, code ``unavailable``) with nothing
        held, and the retry scatters the keys again.  Without a cluster, or for
        a pointwise round (share values, nothing to evaluate), ``snap`` as is.
        """
        if self.cluster is None or ds.scheme in ("pointwise", "vdpf"):  # vdpf: histogram shares, computed at upload
            return snap
        t0 = time.perf_counter()
        self.log(f"release {plan.rid} on {ds.name!r}: evaluating {snap.count} clients' keys on the cluster")
        try:
            ev = self.cluster.evaluate(ds.name, snap.digest, snap.shares, release_points(ds, plan))
        except ClusterError as exc:
            self.log(f"release {plan.rid} on {ds.name!r}: the cluster failed; refused, nothing reserved: {exc}")
            raise ServerUnavailable(
                f"server {self.server_id}: its Dask cluster failed while evaluating the keys of {ds.name!r}: {exc}. "
                "Nothing was reserved or charged; retry the release (the keys are sent to the cluster again)") from exc
        seconds = time.perf_counter() - t0
        return replace(snap, shares=ev, timings={"shares": seconds, "cluster": seconds},
                       cluster={"spec": self.cluster.spec, "shards": self.cluster.shards(ds.name)})

    def info(self, ds: Dataset) -> dict:
        """The dataset's public state, its spend, and the spend of every budget its releases draw from.

        ``left``: what a release may still spend, the least over the dataset's,
        its owners' and the server's budgets.
        """
        led = self.ledger
        out = ds.info()
        owners = self.storage.owners(ds.name)
        out.update(spent=str(led.spent(ds.name)), reserved=str(led.reserved(ds.name)),
                   releases=led.releases(ds.name), ledger=led.digest(ds.name),
                   left=str(max(Fraction(0), led.left(ds.name, ds.record.budget, owners))),
                   owners=[{"owner": o, "spent": str(led.owner_spent(o)), "reserved": str(led.owner_reserved(o)),
                            "budget": None if led.owner_budget is None else str(led.owner_budget)}
                           for o in owners],
                   total={"spent": str(led.total_spent()), "reserved": str(led.total_reserved()),
                          "budget": None if led.total_budget is None else str(led.total_budget)})
        return out


def _reject_report(rejected: list[tuple[int, str]]) -> list[dict]:
    return [{"client": c, "reason": why} for c, why in rejected[:_MAX_REJECT_REPORT]]


_WARM = threading.Event()


def _warm_up_check() -> None:
    """Load the compiled VDPF check loops (numba, about 40 MB) in the background, once per process, when the
    first verified upload arrives: while its header round trip runs, not at start (a server that never sees
    a vdpf upload, e.g. one of three, never loads them)."""
    if not _WARM.is_set():
        _WARM.set()
        from pairwise.fss.vdpf import compiled_kernels

        threading.Thread(target=compiled_kernels, daemon=True, name="ecdf-warm-up").start()


class Session:
    """The requests of one connection (see the module docstring)."""

    def __init__(self, state: ServerState, ch: TCPChannel, owner: str = "") -> None:
        self.state = state
        self.ch = ch
        #: the data owner this connection uploads for: its certificate name ("" without TLS)
        self.owner = owner
        self.staged: StagedUpload | None = None
        self.query: tuple | None = None  # (plan, dataset, snapshot, server 0's channel to server 1 or None)
        self.sid = state.server_id
        #: called with every further channel a request opens (the server's deadlines interrupt them too)
        self.on_channel = lambda channel: None

    # ------------------------------------------------------------------ dispatch
    def answer(self, req: dict, peer) -> bool:
        """Serve one control frame ``req`` of this connection's peer (its transport identity ``peer``).

        The request is authorized (:meth:`pairwise.protocols.ecdf.auth.Policy.authorize`) before it is
        parsed, then handled; a refusal -- a bad parameter, a peer server that failed, state that could
        not be written (nothing of the request was stored) -- is answered ``{"ok": false, "error",
        "code"}``.  Returns False when the connection must end (an upload refused while its bulk frames
        may still be in flight); transport failures propagate.
        """
        op = req.get("op")
        try:
            what = op_of(op)
            if what is None:
                raise QueryRefused(f"unknown operation {op!r}")
            self.state.policy.authorize(what, peer)
            self.handle(op, req)
        except (ValueError, ServerUnavailable, StorageError) as exc:
            code = "storage" if isinstance(exc, StorageError) else error_code(exc)
            self.state.log(f"{op} from {getattr(self.ch, 'peer', 'peer')} refused: {exc}")
            send_json(self.ch, {"ok": False, "error": str(exc), "code": code, "server_id": self.sid})
            return op not in ("upload", "pointwise", "commit")
        return True

    def handle(self, op: str, req: dict) -> None:
        """Parse the control frame ``req`` as the request type of ``op`` and run its handler."""
        kind, method = self.DISPATCH.get(op, (None, None)) if isinstance(op, str) else (None, None)
        if kind is None:
            raise QueryRefused(f"unknown operation {op!r}")
        method(self, kind.from_json(req))

    def dispatch(self, request: Request) -> None:
        """Run the handler of an already parsed ``request``."""
        self.DISPATCH[request.op][1](self, request)

    def close(self) -> None:
        """The connection ended: forget what it staged or prepared (nothing stored, nothing charged)."""
        self.discard()
        self.abort()

    # ------------------------------------------------------------------ uploads
    def op_upload(self, req: UploadRequest) -> None:
        st = self.state
        pointwise = isinstance(req, PointwiseRequest)
        name, scheme, m, n, l = req.dataset, req.scheme, req.m, req.domain_bits, req.output_bits
        series = req.series_weights
        if req.server_id != self.sid:
            raise QueryRefused(f"these keys are for server {req.server_id}, but this is server {self.sid}: "
                               "list the servers in the order of their --server-id")
        upload_id, append, meta = req.upload_id, req.append, req.meta
        if self.staged is not None:
            raise QueryRefused("an upload is already staged on this connection")
        g = thr = rnd = None
        if pointwise:
            g, rnd = req.grid_bits, req.round
            thr = np.array(req.thresholds, dtype=np.int64)
            lens_allowed: tuple[int, ...] = ()
        else:
            lens_allowed = key_lengths(scheme, n, l, series)
        chunks = list(req.chunks)
        params = (scheme, m, n, l, tuple(sorted(series.items())))
        with st.lock:
            ds = st.datasets.get(name)
            create = replace_round = False
            if ds is None:
                if append:
                    raise DatasetError(f"server {self.sid} has no dataset {name!r} to append to")
                if name in st.claims:
                    raise DatasetError(f"dataset {name!r} is being created by another upload right now")
                record = DatasetRecord(name, scheme, m, n, l, dict(series), st.budget_for(name), meta,
                                       grid_bits=g, thresholds=None if thr is None else thr.tolist(), round=rnd)
                create = True
            else:
                if ds.params() != params:
                    r = ds.record
                    raise DatasetError(
                        f"dataset {name!r} exists with scheme {r.scheme}, m={r.m}, domain bits {r.n}, "
                        f"output bits {r.l}, series {r.series}; this upload does not match")
                if pointwise and rnd != ds.record.round:
                    if append:
                        raise DatasetError(f"round {rnd!r} is not the current round {ds.record.round!r} of "
                                           f"{name!r}: append only adds clients to the current round")
                    if name in st.claims:
                        raise DatasetError(f"dataset {name!r} is being replaced by another upload right now")
                    record = replace(ds.record, grid_bits=g, thresholds=thr.tolist(), round=rnd, meta=meta)
                    replace_round = True
                elif not append:
                    raise DatasetExists(
                        f"dataset {name!r} already exists on server {self.sid} ({ds.count} clients; datasets are "
                        "sealed once uploaded): release over it without uploading (ecdf query), append new "
                        "clients explicitly, or upload under a new dataset id")
                else:
                    record = ds.record
                    if meta and meta != (ds.record.meta or {}):
                        # e.g. another public domain: its clients would sit on another grid than the stored ones
                        raise DatasetError(
                            f"dataset {name!r} was uploaded with the public metadata {ds.record.meta or {}}; an "
                            f"append must declare the same (its clients must be quantized on the same public "
                            f"domain and grid), got {meta}")
                    if pointwise and (ds.record.grid_bits != g or ds.record.thresholds != thr.tolist()):
                        raise DatasetError(f"round {rnd!r} of {name!r} uses other thresholds")
            if create or replace_round:
                st.claims[name] = upload_id
        # claims on client ids: the live dataset for an append, a fresh one for a new dataset or round
        target = ds if ds is not None and not replace_round else Dataset(record, self.sid, new=True)
        staged = StagedUpload(upload_id, record, create, replace_round, dataset=target, live=ds,
                              announced=sum(chunks), per_client=req.per_client())
        try:
            # the most this upload can stage, from its header alone: reserved before a single key is read
            bound = self._staged_bound(req, lens_allowed)
            st.staging.reserve(bound, self.sid)
            staged.reserved = bound
            staged.file = st.staging.open()
            if scheme == "vdpf":
                _warm_up_check()
            if scheme == "vdpf" and self.sid == 0:  # server 0 opens the upload's check with server 1 before "ready"
                staged.verify = self._verify_link(req)
        except BaseException:
            self._release(staged)
            raise
        self.staged = staged
        st.stage(name, upload_id, +1)
        staged.registered = True
        send_json(self.ch, {"ok": True, "ready": True})
        rejected: list[tuple[int, str]] = []
        rejected_pos: list[int] = []
        base = 0
        for k in chunks:
            if pointwise:
                bad = self._recv_pointwise(k, series, l, thr, base)
            elif scheme == "vdpf":
                bad = self._recv_verified(k, series, n, l, base, chunks)
            else:
                bad = self._recv_keys(k, series, scheme, m, n, l, lens_allowed, base)
            for pos, cid, why in bad:
                rejected.append((cid, why))
                rejected_pos.append(pos)
            base += k
        staged.rejected = np.array(rejected_pos, dtype=np.int64)
        if staged.verify is not None:
            v = staged.verify
            st.log(f"upload {upload_id}: checked {sum(chunks)} clients' keys with {v.label} in "
                   f"{staged.check_seconds:.2f} s ({v.waited:.2f} s of it waiting for that server), "
                   f"{v.bytes()} bytes on the check channel")
        send_json(self.ch, {"ok": True, "staged": True, "accepted": staged.accepted,
                            "check_bytes": 0 if staged.verify is None else staged.verify.bytes(),
                            "rejected_count": len(rejected), "rejected": _reject_report(rejected)})
        self.ch.send_array(np.array(rejected_pos, dtype=np.uint64))

    def _staged_bound(self, req: UploadRequest, lens_allowed: tuple[int, ...]) -> int:
        """The most disk bytes ``req`` can stage: 16 bytes of id and position per client, plus its keys at their
        largest (``mshare``: a vector key only for the positions p = server id mod m, a seed key elsewhere)."""
        K, S = sum(req.chunks), len(req.series)
        if isinstance(req, PointwiseRequest):
            return 16 * K + 8 * K * S * len(req.thresholds)
        if req.scheme == "mshare":
            vec = max(0, (K - self.sid + req.m - 1) // req.m)
            return 16 * K + S * (vec * max(lens_allowed) + (K - vec) * min(lens_allowed))
        return 16 * K + S * K * max(lens_allowed)

    def _stage(self, ids: np.ndarray, ok: np.ndarray, reasons: dict[int, str], raw, base: int,
               histograms=None) -> list:
        """Claim the ids of the parsed-good clients and append them to the staged file.

        ``raw(rows)``: series -> (lens, bytes) of those rows; ``histograms(rows)`` (vdpf): add those rows to
        the upload's histograms.  Returns [(position, id, reason)] for the clients not staged.
        """
        staged = self.staged
        good = np.flatnonzero(ok)
        claimed, dup = staged.dataset.claim(ids[good], id(staged))
        for j, why in dup.items():
            reasons[int(good[j])] = why
        rows = good[claimed]
        if rows.size:
            staged.file.put(ids[rows], base + rows.astype(np.int64), raw(rows))
            staged.accepted += int(rows.size)
            if histograms is not None:
                histograms(rows)
        return [(base + i, int(ids[i]), reasons[i]) for i in sorted(reasons)]

    def _recv_key_frames(self, k, S, per_client):
        """One chunk's ids, key lengths (k, S) and keys (one bytes object per client and series, client-major).

        Honest keys fill at most ``k * per_client`` bytes, which the header's chunk bound keeps within
        UPLOAD_FRAME_MAX; the frame may use the rest of UPLOAD_FRAME_MAX, so a key of the wrong length is its
        client's problem (rejected when parsed), not the upload's.
        """
        ids = self.ch.recv_array(np.uint64, k)
        lens = self.ch.recv_array(np.uint32, (k, S)).astype(np.int64)
        limit = max(k * per_client, UPLOAD_FRAME_MAX)
        if int(lens.sum()) > limit:
            raise ProtocolError(f"a key frame of {int(lens.sum())} bytes exceeds the {limit} bytes of {k} clients' "
                                f"keys")
        total = int(lens.sum())  # <= UPLOAD_FRAME_MAX (k per_client <= UPLOAD_FRAME_MAX by the chunk bound)
        data = self.ch.recv_frame(max_size=total)
        if len(data) != total:
            raise ProtocolError(f"key frame of {len(data)} bytes, announced {total}")
        return ids, lens, split_keys(lens.reshape(-1), bytes(data))

    def _recv_keys(self, k, series, scheme, m, n, l, lens_allowed, base):
        names = list(series)
        S = len(names)
        ids, lens, flat = self._recv_key_frames(k, S, S * max(lens_allowed))
        ok = np.ones(k, dtype=bool)
        reasons: dict[int, str] = {}
        for j, s in enumerate(names):
            shares, kept, bad = parse_keys(scheme, flat[j::S], party=self.sid, m=m, n=n, l=l)
            for i, why in bad.items():
                ok[i] = False
                reasons.setdefault(i, f"series {s}: {why}")
            if scheme == "mshare":  # the public rotation: this server holds vector keys at positions p = id mod m
                mine = (base + np.asarray(kept, dtype=np.int64)) % m == self.sid
                for i, vector, want in zip(kept, shares.kinds == KIND_VECTOR, mine):
                    if vector != want:
                        ok[i] = False
                        reasons.setdefault(i, f"series {s}: mshare key {i}: server {self.sid} holds the vector key "
                                              f"of the clients at upload positions p = {self.sid} mod {m} and a seed "
                                              f"key otherwise; position {base + i} sent a "
                                              f"{'vector' if vector else 'seed'} key")
            del shares

        def raw(rows):
            return {s: (lens[rows, j], b"".join(flat[int(i) * S + j] for i in rows)) for j, s in enumerate(names)}

        return self._stage(ids, ok, reasons, raw, base)

    def _verify_link(self, req: UploadRequest):
        """Server 0: open this upload's check with server 1 (its configured address, else the uploader's list)."""
        st = self.state
        addr = st.peers.get(1) or (req.servers[1] if req.servers else None)
        if addr is None:
            raise QueryRefused("server 0 does not know server 1's address to check the upload's keys with "
                               "(configure --peer 1=HOST:PORT, or send the servers' list)")
        link = open_verify_link(req.upload_id, req.chunks, tuple(addr), st.policy,
                                connect_timeout=min(st.timeout, 10.0), timeout=st.timeout, tls=st.tls,
                                insecure=st.insecure, dial=st.dial)
        self.on_channel(link.ch)
        return link

    def _recv_verified(self, k, series, n, l, base, chunks):
        """One chunk of ``vdpf`` keys: parse, evaluate, compare digests with the other server, then stage
        the raw keys of the clients both servers accept (a release expands them again from storage)."""
        staged = self.staged
        if staged.verify is None:  # server 1: server 0 opened the check when it accepted the header
            staged.verify = self.state.hub.verify_link(staged.upload_id, chunks, "peer server 0")
            self.on_channel(staged.verify.ch)
        names = list(series)
        S = len(names)
        ids, lens, flat = self._recv_key_frames(k, S, staged.per_client)
        t0 = time.perf_counter()
        ok, reasons, shares = check_chunk({s: flat[j::S] for j, s in enumerate(names)}, layout_for(series, n, l),
                                          self.sid, staged.verify, staged.checked)
        staged.check_seconds += time.perf_counter() - t0
        staged.checked += 1
        accepted = np.flatnonzero(ok)

        def raw(rows):
            return {s: (lens[rows, j], b"".join(flat[int(i) * S + j] for i in rows)) for j, s in enumerate(names)}

        def histograms(rows):  # the staged rows' part of the check's histograms (rows: among the accepted)
            taken = np.searchsorted(accepted, rows)
            for s, sh in shares.items():
                h = sh.take(taken).hist
                staged.hists[s] = h.copy() if s not in staged.hists else staged.hists[s] + h

        if staged.hists is None:
            staged.hists = {}
        return self._stage(ids, ok, reasons, raw, base, histograms)

    def _recv_pointwise(self, k, series, l, thr, base):
        names = list(series)
        ids = self.ch.recv_array(np.uint64, k)
        word = np.uint32 if l <= 32 else np.uint64  # shares travel as 4-byte words when they fit
        vals = self.ch.recv_array(word, (k, len(names), thr.size)).astype(np.uint64)
        bad = (vals > np.uint64((1 << l) - 1)).any(axis=(1, 2)) if l < 64 else np.zeros(k, bool)
        reasons = {int(i): f"share not below 2^{l}" for i in np.flatnonzero(bad)}

        def raw(rows):
            return {s: (np.zeros(0, np.int64), np.ascontiguousarray(vals[rows, j, :], dtype="<u8").tobytes())
                    for j, s in enumerate(names)}

        return self._stage(ids, ~bad, reasons, raw, base)

    def op_commit(self, req: CommitRequest) -> None:
        st, staged = self.state, self.staged
        if staged is None or req.upload_id != staged.upload_id:
            raise QueryRefused("commit needs the upload staged on this connection")
        d = req.drop
        announced = staged.announced
        if not d <= announced:
            raise ProtocolError(f"drop count {d!r} out of range")
        drop = np.unique(self.ch.recv_array(np.uint64, d).astype(np.int64))
        if d and (drop.max() >= announced):
            raise ProtocolError("a dropped position lies outside the upload")
        self.staged = None
        # the clients this server staged and no server rejected
        kept = staged.accepted - int(np.setdiff1d(drop, staged.rejected, assume_unique=True).size)
        ids: list[np.ndarray] = []
        try:
            live = staged.live
            if live is not None and not staged.replace and live.record.round != staged.record.round:
                raise DatasetError(f"a new round of {staged.record.name!r} replaced the one this upload appends to")
            if kept:
                def records():  # one staged chunk in memory at a time
                    for c in staged.file.chunks():
                        c = c.drop(drop)
                        if c.ids.size:
                            ids.append(c.ids)
                            yield ChunkRecord(staged.upload_id, len(ids) - 1, c.ids, c.raw)

                st.storage.commit_upload(staged.record, staged.upload_id, records(), create=staged.create,
                                         replace=staged.replace, owner=self.owner)
                target = staged.dataset if staged.create else live
                # vdpf: the check's histograms are the upload's shares, unless the commit drops clients this
                # server staged (another server rejected them); then the next release expands the stored keys
                hists = staged.hists if kept == staged.accepted else None
                target.add_upload(staged.upload_id, ids, token=id(staged), record=staged.record,
                                  replace=staged.replace, parsed=None if hists is None else
                                  {s: VDPFSeries(h, kept, staged.record.l) for s, h in hists.items()})
                if staged.create:
                    st.ledger.load(staged.record.name)
                    with st.lock:
                        st.datasets[staged.record.name] = target
        finally:
            self._release(staged)
        ds = st.datasets.get(staged.record.name)
        what = "new round of" if staged.replace else ("new dataset" if staged.create else "append to")
        st.log(f"upload {staged.upload_id} ({what} {staged.record.name!r}): committed {kept} client(s)")
        send_json(self.ch, {"ok": True, "accepted": kept, "clients": 0 if ds is None else ds.count,
                            "digest": None if ds is None else ds.digest()})

    def _release(self, staged: StagedUpload) -> None:
        """Forget a staged upload: its check channel, its claimed ids, its claim on a new dataset id, its disk and
        reserved bytes."""
        if staged.verify is not None:
            staged.verify.close()
        elif staged.record.scheme == "vdpf":
            self.state.hub.forget_link(staged.upload_id)
        staged.dataset.unclaim(id(staged))
        with self.state.lock:
            if self.state.claims.get(staged.record.name) == staged.upload_id:
                del self.state.claims[staged.record.name]
        if staged.file is not None:
            staged.file.close()
            staged.file = None
        if getattr(staged, "registered", False):
            self.state.stage(staged.record.name, staged.upload_id, -1)
            staged.registered = False
        self.state.staging.release(staged.reserved)
        staged.reserved = 0

    def op_discard(self, req: DiscardRequest) -> None:
        self.discard()
        send_json(self.ch, {"ok": True})

    def discard(self) -> None:
        if self.staged is not None:
            staged, self.staged = self.staged, None
            self._release(staged)

    # ------------------------------------------------------------------ status
    def op_status(self, req: StatusRequest) -> None:
        send_json(self.ch, self.status(req.dataset))

    def status(self, name: str | None) -> dict:
        st = self.state
        if name is None:
            with st.lock:
                all_ds = list(st.datasets.values())
            return {"ok": True, "server_id": self.sid, "datasets": [st.info(d) for d in all_ds],
                    "cluster": st.cluster_info()}
        return {"ok": True, "server_id": self.sid, "info": st.info(st.dataset(name)), "cluster": st.cluster_info()}

    # ------------------------------------------------------------------ releases
    def op_prepare(self, req: PrepareRequest) -> None:
        send_json(self.ch, self.prepare(req))

    def prepare(self, req: PrepareRequest) -> dict:
        st = self.state
        if self.query is not None:
            raise QueryRefused("a release is already prepared on this connection")
        ds = st.dataset(req.dataset)
        plan = plan_release(ds, req)
        snap = ds.snapshot(st.storage, plan.series)  # rows match the client count, or a refusal
        snap = st.evaluate_on_cluster(ds, plan, snap)  # before any reservation: a lost worker charges nothing
        st.ledger.reserve(ds.name, ds.record.budget, plan.rid, plan.charge, st.storage.owners(ds.name))
        if ds.m == 2 and self.sid == 1:
            st.hub.expect(plan.rid)
        self.query = (plan, ds, snap, None)
        return {"ok": True, "server_id": self.sid, "clients": snap.count, "digest": snap.digest,
                "ledger": st.ledger.digest(ds.name), "info": st.info(ds),
                "cluster_id": st.cluster.scheduler_id if st.cluster is not None else None}

    def op_link(self, req: LinkRequest) -> None:
        """Server 0 of a two-server release, once every server prepared it: reach server 1 now, so an
        impostor or a dead peer refuses the release before anything is charged."""
        st = self.state
        if self.query is None:
            raise QueryRefused("link needs a prepared release")
        plan, ds, snap, peer = self.query
        if ds.m == 2 and self.sid == 0 and peer is None:
            peer = connect_peer(plan.rid, self._peer_address(plan), st.policy, connect_timeout=min(st.timeout, 10.0),
                                timeout=st.timeout, tls=st.tls, insecure=st.insecure, dial=st.dial)
            self.query = (plan, ds, snap, peer)
        send_json(self.ch, {"ok": True, "server_id": self.sid})

    def op_abort(self, req: AbortRequest) -> None:
        self.abort()
        send_json(self.ch, {"ok": True})

    def abort(self) -> None:
        if self.query is not None:
            (plan, ds, _, peer), self.query = self.query, None
            self.state.ledger.unreserve(ds.name, plan.rid)
            self.state.hub.forget(plan.rid)
            if peer is not None:
                peer[0].close()

    def _peer_address(self, plan: ReleasePlan):
        """The other server's address: this server's configuration (--peer), else the querier's list."""
        other = 1 - self.sid
        addr = self.state.peers.get(other) or (plan.servers[other] if plan.servers else None)
        if addr is None and self.sid == 0:
            raise QueryRefused("server 0 does not know server 1's address (configure --peer 1=HOST:PORT)")
        return None if addr is None else tuple(addr)

    def _open_peer(self, plan: ReleasePlan, peer):
        if self.sid == 0:
            got = garbler_session(plan.rid, *peer)
        else:
            addr = self._peer_address(plan)
            got = self.state.hub.open_evaluator(plan.rid, "peer server 0" + (f" ({format_address(addr)})"
                                                                             if addr else ""))
        self.on_channel(got[1])
        return got

    def op_go(self, req: GoRequest) -> None:
        st = self.state
        if self.query is None:
            raise QueryRefused("go needs a prepared release")
        (plan, ds, snap, peer), self.query = self.query, None
        try:
            try:
                spent = st.ledger.charge(ds.name, plan.rid, plan.kind)  # durable before any noise or share
            except BaseException:
                st.ledger.unreserve(ds.name, plan.rid)
                raise
            st.log(f"release {plan.rid} on {ds.name!r}: charged {fmt_eps(plan.charge)}, "
                   f"spent {fmt_eps(spent)} of {fmt_eps(ds.record.budget)}")
            head, vals = run_release(ds, snap, plan, lambda: self._open_peer(plan, peer), self.sid)
        finally:
            st.hub.forget(plan.rid)
            if peer is not None:
                peer[0].close()
        send_json(self.ch, head)
        self.ch.send_array(vals)

    def op_drop_upload(self, req: DropUploadRequest) -> None:
        send_json(self.ch, self.drop_upload(req))

    def drop_upload(self, req: DropUploadRequest) -> dict:
        """Repair: delete one committed upload that some other server lacks, so the servers hold the same data
        again.  Charges stay: the ledger is never reduced.

        This server asks every other server first (:func:`pairwise.protocols.ecdf.peers.ask_holds`, at its
        ``--peer`` address or else the querier's) and drops nothing unless every one of them holds the
        dataset, none is staging the upload right now, and at least one lacks it: an upload that every
        server holds is the owners' data, not an interrupted commit, whoever asks.
        """
        st = self.state
        ds = st.dataset(req.dataset)
        upload_id = req.upload_id
        with st.lock:
            if ds.name in st.claims:
                raise DatasetError(f"dataset {ds.name!r} is being uploaded to right now; retry the repair later")
        if upload_id not in ds.upload_ids():
            raise DatasetError(f"dataset {ds.name!r} has no upload {upload_id!r} on server {self.sid}")
        if req.servers is not None and len(req.servers) != ds.m:
            raise QueryRefused(f"dataset {ds.name!r} is shared among m = {ds.m} servers, the request lists "
                               f"{len(req.servers)}")
        views = {}
        for j in range(ds.m):
            if j == self.sid:
                continue
            addr = st.peers.get(j) or (tuple(req.servers[j]) if req.servers is not None else None)
            if addr is None:
                raise QueryRefused(f"server {self.sid} cannot ask server {j} whether it holds upload {upload_id}: "
                                   f"configure --peer {j}=HOST:PORT or send the servers' list; nothing was dropped")
            try:
                views[j] = ask_holds(addr, j, self.sid, ds.name, upload_id, st.policy,
                                     connect_timeout=min(st.timeout, 10.0), timeout=min(st.timeout, 30.0),
                                     tls=st.tls, insecure=st.insecure, dial=st.dial)
            except (ChannelError, ECDFError) as exc:
                raise ServerUnavailable(f"server {self.sid} could not ask server {j} whether it holds upload "
                                        f"{upload_id} of {ds.name!r}: {exc}; nothing was dropped") from exc
        lost = [j for j, v in views.items() if not v["dataset"]]
        if lost:
            raise DatasetError(f"server {lost[0]} holds no dataset {ds.name!r}: a lost state is not repaired by "
                               "deleting the other servers' clients; nothing was dropped (upload the data again "
                               "under a new dataset id)")
        busy = [j for j, v in views.items() if v["staged"]]
        if busy or st.is_staged(ds.name, upload_id):
            raise DatasetError(f"upload {upload_id} of {ds.name!r} is being uploaded right now"
                               + (f" (staged on server {busy[0]})" if busy else "")
                               + "; nothing was dropped: retry the repair once it has committed or failed")
        if all(v["held"] for v in views.values()):
            raise DatasetError(f"every server holds upload {upload_id} of {ds.name!r}: repair drops only an upload "
                               "that some server lacks (an upload interrupted between the servers' commits); "
                               "nothing was dropped")
        before = ds.count
        ds.drop_upload(st.storage, upload_id)
        st.log(f"dataset {ds.name!r}: dropped upload {upload_id} ({before - ds.count} clients) by repair")
        return {"ok": True, "server_id": self.sid, "clients": ds.count, "dropped": before - ds.count,
                "digest": ds.digest()}

    def op_ledger(self, req: LedgerRequest) -> None:
        ds = self.state.dataset(req.dataset)
        entries, more = self.state.ledger.page(ds.name, req.offset)
        send_json(self.ch, {"ok": True, "entries": entries, "more": more, "digest": self.state.ledger.digest(ds.name)})

    def op_adopt(self, req: AdoptRequest) -> None:
        send_json(self.ch, self.adopt(req))

    def adopt(self, req: AdoptRequest) -> dict:
        st = self.state
        ds = st.dataset(req.dataset)
        added = st.ledger.adopt(ds.name, list(req.entries), st.storage.owners(ds.name))
        if added:
            st.log(f"ledger of {ds.name!r}: adopted {added} charge(s) recorded by another server; "
                   f"spent {fmt_eps(st.ledger.spent(ds.name))}")
        return {"ok": True, "added": added, "spent": str(st.ledger.spent(ds.name)),
                "ledger": st.ledger.digest(ds.name)}

    def op_uploads(self, req: UploadsRequest) -> None:
        ds = self.state.dataset(req.dataset)
        send_json(self.ch, {"ok": True, "server_id": self.sid, "uploads": ds.upload_ids(), "clients": ds.count})

    #: op -> (request type, handler): the requests of clients and queriers (see :mod:`.ops`)
    DISPATCH: dict = {
        "upload": (UploadRequest, op_upload),
        "pointwise": (PointwiseRequest, op_upload),
        "commit": (CommitRequest, op_commit),
        "discard": (DiscardRequest, op_discard),
        "status": (StatusRequest, op_status),
        "prepare": (PrepareRequest, op_prepare),
        "link": (LinkRequest, op_link),
        "go": (GoRequest, op_go),
        "abort": (AbortRequest, op_abort),
        "ledger": (LedgerRequest, op_ledger),
        "adopt": (AdoptRequest, op_adopt),
        "uploads": (UploadsRequest, op_uploads),
        "drop_upload": (DropUploadRequest, op_drop_upload),
    }
