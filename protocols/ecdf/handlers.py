"""Request handlers of one ECDF server: uploads (stage, commit), status, releases, ledger reconciliation.

What it does
    :class:`ServerState` is what a server shares between its connections:
    the storage, the ledger (:class:`Budgets`), the datasets, the claims of
    uploads in progress, how it reaches the other servers (:class:`PeerLinks`)
    and its own Dask cluster, if any (:mod:`pairwise.protocols.ecdf.cluster`).
    :class:`Session` serves the requests of one connection: the server's
    connection loop calls :meth:`Session.answer` once per control frame
    (authorization, then the request parsed into its type of
    :mod:`pairwise.protocols.ecdf.ops`, then the handler :attr:`Session.DISPATCH`
    names for its ``op``).  A session owns what its connection has in flight:
    one staged upload, one prepared release; :meth:`Session.close` discards
    both (nothing is stored or charged).

    Uploads (``upload`` / ``pointwise``, then ``commit`` or ``discard``) are
    handled by :class:`pairwise.protocols.ecdf.upload_handlers.UploadHandlers`,
    a mixin of :class:`Session`; the steps are in ``docs/ecdf-server.md``
    ("The server's side of an upload").

Releases (ops ``prepare``, ``link``, ``go``, ``abort``; ``ledger``, ``adopt``)
    ``prepare`` validates the request (:func:`pairwise.protocols.ecdf.release.plan_release`),
    takes a consistent snapshot of the dataset, evaluates it on the server's
    cluster if it has one (a failed cluster refuses with nothing held) and
    reserves the charge; its reply carries the dataset and ledger digests,
    which the querier compares across servers.  ``link`` connects server 0
    to server 1 and checks its identity, still before any charge.  ``go``
    writes the charge to the ledger durably, then runs the release over the
    snapshot.  ``ledger`` / ``adopt`` let the querier make the servers'
    ledgers agree (:mod:`pairwise.protocols.ecdf.ledger`).  Details:
    ``docs/ecdf-server.md`` ("Releases").

Security model
    See :mod:`pairwise.protocols.ecdf.server`; authorization happens before a
    handler runs (:mod:`pairwise.protocols.ecdf.auth`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from pairwise.mpc.channel import TCPChannel
from pairwise.mpc.errors import ChannelError

from ..cluster import ClusterError
from .auth import op_of
from .dataset import Dataset, Snapshot
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
    HoldsRequest,
    LedgerRequest,
    LinkRequest,
    PointwiseRequest,
    PrepareRequest,
    Request,
    StatusRequest,
    UploadRequest,
    UploadsRequest,
)
from .peers import PeerHub, ask_holds, connect_peer, garbler_session
from .release import ReleasePlan, plan_release, release_points, run_release
from .staging import StagedUpload, StagingBudget
from .storage import Storage, StorageError
from .upload_handlers import UploadHandlers
from .wire import (
    DatasetError,
    ECDFError,
    QueryRefused,
    ServerUnavailable,
    UnknownDataset,
    error_code,
    fmt_eps,
    format_address,
    send_json,
)

__all__ = ["MAX_CLIENTS", "META_MAX", "Budgets", "PeerLinks", "ServerState", "Session"]


@dataclass(frozen=True)
class Budgets:
    """A server's privacy budgets, parsed: ``budget`` (each new dataset's), ``dataset_budgets`` (name ->
    budget, overriding it), ``owner_budget`` (each data owner's, over its datasets; None: no such limit)
    and ``total_budget`` (the server's over everything; None: no limit)."""

    budget: Fraction
    dataset_budgets: dict = field(default_factory=dict)
    owner_budget: Fraction | None = None
    total_budget: Fraction | None = None

    def __post_init__(self) -> None:
        for name in ("budget", "owner_budget", "total_budget"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, Fraction) and v > 0):
                raise ValueError(f"{name} must be a positive Fraction, got {v!r}")


@dataclass(frozen=True)
class PeerLinks:
    """How a server reaches and admits the others: ``peers`` (server id -> configured address), the
    authorization ``policy``, ``timeout`` (seconds any wait on a peer may take), ``tls`` (this server's
    :class:`pairwise.mpc.tls.TLSConfig`, None: plaintext, loopback only unless ``insecure``)."""

    peers: dict
    policy: Any
    timeout: float
    tls: Any = None
    insecure: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or not self.timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout!r}")


class ServerState:
    """Everything the connections of one server share (see the module docstring)."""

    def __init__(
        self,
        server_id: int,
        storage: Storage,
        *,
        budgets: Budgets,
        links: PeerLinks,
        log,
        cluster=None,
        staging: StagingBudget | None = None,
        num_servers: int = 2,
        accept_unverified: bool = False,
    ) -> None:
        budget, dataset_budgets = budgets.budget, budgets.dataset_budgets
        timeout, peers, policy, tls, insecure = links.timeout, links.peers, links.policy, links.tls, links.insecure
        self.server_id = server_id
        #: m of this server's set: uploads (keys of a kind) for another m are refused
        self.num_servers = num_servers
        #: accept uploads the servers cannot check (pointwise, mshare); False: vdpf keys only
        self.accept_unverified = accept_unverified
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
        self.ledger = Ledger(storage, server_id, owner_budget=budgets.owner_budget, total_budget=budgets.total_budget)
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
                    log(
                        f"dataset {rec.name!r} keeps its stored budget {fmt_eps(rec.budget)}; a budget is "
                        f"never raised after creation (--dataset-budget {fmt_eps(override)} ignored)"
                    )
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
        return {"dataset": ds is not None, "held": ds is not None and upload_id in ds.upload_ids(), "staged": staged}

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
            return {
                "spec": self.cluster.spec,
                "scheduler": self.cluster.scheduler,
                "scheduler_id": self.cluster.scheduler_id,
                "error": str(exc),
            }

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
                "Nothing was reserved or charged; retry the release (the keys are sent to the cluster again)"
            ) from exc
        seconds = time.perf_counter() - t0
        return replace(
            snap,
            shares=ev,
            timings={"shares": seconds, "cluster": seconds},
            cluster={"spec": self.cluster.spec, "shards": self.cluster.shards(ds.name)},
        )

    def info(self, ds: Dataset) -> dict:
        """The dataset's public state, its spend, and the spend of every budget its releases draw from.

        ``left``: what a release may still spend, the least over the dataset's,
        its owners' and the server's budgets.
        """
        led = self.ledger
        out = ds.info()
        owners = self.storage.owners(ds.name)
        out.update(
            spent=str(led.spent(ds.name)),
            reserved=str(led.reserved(ds.name)),
            releases=led.releases(ds.name),
            ledger=led.digest(ds.name),
            left=str(max(Fraction(0), led.left(ds.name, ds.record.budget, owners))),
            owners=[
                {
                    "owner": o,
                    "spent": str(led.owner_spent(o)),
                    "reserved": str(led.owner_reserved(o)),
                    "budget": None if led.owner_budget is None else str(led.owner_budget),
                }
                for o in owners
            ],
            total={
                "spent": str(led.total_spent()),
                "reserved": str(led.total_reserved()),
                "budget": None if led.total_budget is None else str(led.total_budget),
            },
        )
        return out


class Session(UploadHandlers):
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

    # ------------------------------------------------------------------ status
    def op_status(self, req: StatusRequest) -> None:
        send_json(self.ch, self.status(req.dataset))

    def status(self, name: str | None) -> dict:
        st = self.state
        if name is None:
            with st.lock:
                all_ds = list(st.datasets.values())
            return {
                "ok": True,
                "server_id": self.sid,
                "datasets": [st.info(d) for d in all_ds],
                "cluster": st.cluster_info(),
            }
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
        return {
            "ok": True,
            "server_id": self.sid,
            "clients": snap.count,
            "digest": snap.digest,
            "ledger": st.ledger.digest(ds.name),
            "info": st.info(ds),
            "cluster_id": st.cluster.scheduler_id if st.cluster is not None else None,
        }

    def op_link(self, req: LinkRequest) -> None:
        """Server 0 of a two-server release, once every server prepared it: reach server 1 now, so an
        impostor or a dead peer refuses the release before anything is charged."""
        st = self.state
        if self.query is None:
            raise QueryRefused("link needs a prepared release")
        plan, ds, snap, peer = self.query
        if ds.m == 2 and self.sid == 0 and peer is None:
            peer = connect_peer(
                plan.rid,
                self._peer_address(plan),
                st.policy,
                connect_timeout=min(st.timeout, 10.0),
                timeout=st.timeout,
                tls=st.tls,
                insecure=st.insecure,
                dial=st.dial,
            )
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
            got = self.state.hub.open_evaluator(
                plan.rid, "peer server 0" + (f" ({format_address(addr)})" if addr else "")
            )
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
            st.log(
                f"release {plan.rid} on {ds.name!r}: charged {fmt_eps(plan.charge)}, "
                f"spent {fmt_eps(spent)} of {fmt_eps(ds.record.budget)}"
            )
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
            raise QueryRefused(
                f"dataset {ds.name!r} is shared among m = {ds.m} servers, the request lists {len(req.servers)}"
            )
        views = {}
        for j in range(ds.m):
            if j == self.sid:
                continue
            addr = st.peers.get(j) or (tuple(req.servers[j]) if req.servers is not None else None)
            if addr is None:
                raise QueryRefused(
                    f"server {self.sid} cannot ask server {j} whether it holds upload {upload_id}: "
                    f"configure --peer {j}=HOST:PORT or send the servers' list; nothing was dropped"
                )
            try:
                views[j] = ask_holds(
                    addr,
                    j,
                    HoldsRequest(ds.name, upload_id, self.sid),
                    st.policy,
                    connect_timeout=min(st.timeout, 10.0),
                    timeout=min(st.timeout, 30.0),
                    tls=st.tls,
                    insecure=st.insecure,
                    dial=st.dial,
                )
            except (ChannelError, ECDFError) as exc:
                raise ServerUnavailable(
                    f"server {self.sid} could not ask server {j} whether it holds upload "
                    f"{upload_id} of {ds.name!r}: {exc}; nothing was dropped"
                ) from exc
        lost = [j for j, v in views.items() if not v["dataset"]]
        if lost:
            raise DatasetError(
                f"server {lost[0]} holds no dataset {ds.name!r}: a lost state is not repaired by "
                "deleting the other servers' clients; nothing was dropped (upload the data again "
                "under a new dataset id, which draws from the same data owner's budget)"
            )
        busy = [j for j, v in views.items() if v["staged"]]
        if busy or st.is_staged(ds.name, upload_id):
            raise DatasetError(
                f"upload {upload_id} of {ds.name!r} is being uploaded right now"
                + (f" (staged on server {busy[0]})" if busy else "")
                + "; nothing was dropped: retry the repair once it has committed or failed"
            )
        if all(v["held"] for v in views.values()):
            raise DatasetError(
                f"every server holds upload {upload_id} of {ds.name!r}: repair drops only an upload "
                "that some server lacks (an upload interrupted between the servers' commits); "
                "nothing was dropped"
            )
        before = ds.count
        ds.drop_upload(st.storage, upload_id)
        st.log(f"dataset {ds.name!r}: dropped upload {upload_id} ({before - ds.count} clients) by repair")
        return {
            "ok": True,
            "server_id": self.sid,
            "clients": ds.count,
            "dropped": before - ds.count,
            "digest": ds.digest(),
        }

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
            st.log(
                f"ledger of {ds.name!r}: adopted {added} charge(s) recorded by another server; "
                f"spent {fmt_eps(st.ledger.spent(ds.name))}"
            )
        return {"ok": True, "added": added, "spent": str(st.ledger.spent(ds.name)), "ledger": st.ledger.digest(ds.name)}

    def op_uploads(self, req: UploadsRequest) -> None:
        ds = self.state.dataset(req.dataset)
        send_json(self.ch, {"ok": True, "server_id": self.sid, "uploads": ds.upload_ids(), "clients": ds.count})

    #: op -> (request type, handler): the requests of clients and queriers (see :mod:`.ops`)
    DISPATCH: dict = {
        "upload": (UploadRequest, UploadHandlers.op_upload),
        "pointwise": (PointwiseRequest, UploadHandlers.op_upload),
        "commit": (CommitRequest, UploadHandlers.op_commit),
        "discard": (DiscardRequest, UploadHandlers.op_discard),
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
