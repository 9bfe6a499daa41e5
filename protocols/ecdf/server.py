"""The multi-server differentially private ECDF service: one server process.

What it does
    m >= 2 servers hold the key shares of n clients' values (uploaded over TCP
    by one or more client processes) and release noisy ECDFs, per dataset,
    under a per-dataset privacy budget ([BMR25, Sec. 4]).  The keys
    (:mod:`pairwise.protocols.ecdf.shares`), the releases
    (:mod:`pairwise.protocols.ecdf.release`), the durable state and ledger
    (:mod:`pairwise.protocols.ecdf.storage`, :mod:`pairwise.protocols.ecdf.ledger`)
    and the requests (:mod:`pairwise.protocols.ecdf.handlers`, authorized by
    :mod:`pairwise.protocols.ecdf.auth`) live in their modules; this one runs
    the process: the listener and its mutual TLS, the bounded admission of
    connections (``PREAUTH_TIMEOUT``, ``PREAUTH_PER_ADDRESS``,
    ``PREAUTH_MIN_AGE``, slots reserved per role, a reaper for connections
    past their deadline), an optional Dask cluster of its own
    (:mod:`pairwise.protocols.ecdf.cluster`), and :meth:`ECDFServer.stop`
    (SIGTERM, SIGINT, ``--exit-with-parent``).  ``pairwise ecdf serve``
    (:mod:`pairwise.commands.ecdf`) prints one JSON line ``{"event":
    "listening", ...}`` when it accepts connections.

Security model
    Semi-honest servers; clients and querier may deviate: the ledger holds any
    querier sequence, and with two servers every client's keys are checked by
    both servers before it is accepted (:mod:`pairwise.protocols.ecdf.validation`).
    Identities and roles come from the transport (mutual TLS with role
    certificates); plaintext is for loopback only, unless ``insecure``.  With
    m = 2 a single server learns nothing about the clients' values or the
    noise; with m > 2 values are hidden from any m - 1 servers, and
    ``tolerate = t`` keeps a release eps-DP against the querier with any t
    servers.  A server's Dask workers are part of it, and each server needs a
    cluster of its own.  DP is for replace-one neighbours with n public, each
    release (eps, delta)-DP with its delta in the reply; each server enforces
    its own ledger, so budgets hold while one ledger is intact.  Every write
    is one SQLite transaction, so the state survives ``kill -9``.

Follows
    [BMR25, Sec. 4.1, 4.2, 5.1, Alg. 2].  Transport, bounded resources, the
    cluster, shutdown, the trust model in full and the command line:
    ``docs/ecdf-server.md``, "One server process".
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pairwise.dp.validate import check_int, no_more_keywords, with_legacy
from pairwise.mpc.channel import TCPChannel, TCPListener, handshake
from pairwise.mpc.errors import ChannelError, ChannelTimeout, PeerClosed

from ..cluster import ClusterSpec, open_cluster, parse_cluster
from .auth import Policy, peer_of
from .cluster import ClusterKeys
from .handlers import Budgets, PeerLinks, ServerState, Session
from .release import LAMBDA, MAX_SERIES
from .staging import (
    DEFAULT_CHECK_MEMORY,
    DEFAULT_STAGED_BYTES,
    DEFAULT_STAGED_BYTES_PER_CONNECTION,
    StagingBudget,
    parse_size,
)
from .storage import Storage, open_storage
from .wire import (
    PROTOCOL_DIGEST,
    ROLE_CLIENT,
    ROLE_PEER,
    ROLE_QUERIER,
    ROLE_SERVER,
    SESSION_ID,
    parse_epsilon,
    recv_json,
    send_json,
)

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_CONNECTIONS",
    "LAMBDA",
    "MAX_SERIES",
    "SAME_AS_BUDGET",
    "ECDFServer",
    "ServerOptions",
]

#: Default per-dataset privacy budget of a server (total epsilon).
DEFAULT_BUDGET = Fraction(10)
#: ``owner_budget`` default: each data owner's datasets share one budget equal to ``budget``.
SAME_AS_BUDGET = "same"
#: Connections served at once by default.
DEFAULT_MAX_CONNECTIONS = 64
_BUSY_QUEUE = 64
#: Seconds a new connection may take to authenticate (TLS handshake with a certificate of the CA, then the
#: protocol handshake) before it holds a serving slot; and how many connections from one address may be
#: authenticating at once.  Peers that never authenticate thus cannot hold the serving slots.
PREAUTH_TIMEOUT = 10.0
PREAUTH_PER_ADDRESS = 8
#: Seconds a connection must have been authenticating before a newcomer may take its place.
PREAUTH_MIN_AGE = 2.0
_BUSY_LINGER = 1.0
_CLOSING_MAX = 1024
_REAP_EVERY = 0.25
_JOIN_ON_STOP = 5.0


def _address_of(peer: str) -> str:
    """The host part of a channel's ``peer`` ("HOST:PORT", "[v6]:PORT" or a name)."""
    host, sep, _port = str(peer).rpartition(":")
    return host if sep else str(peer)


@dataclass(eq=False)
class _Pending:
    """A connection in the authentication stage: its address, since when, and whether it was cut."""

    pending: object  # the listener's PendingConnection
    addr: str
    since: float
    ch: object = None  # its channel once TLS is done
    cut: bool = False

    def interrupt(self) -> None:
        (self.ch if self.ch is not None else self.pending).interrupt()


#: the handshake's role claim -> the role a plaintext (loopback) connection is given for the serving slots
_CLAIMED_ROLES = {ROLE_QUERIER: "querier", ROLE_PEER: "server", ROLE_CLIENT: "client"}


@dataclass
class _Conn:
    ch: TCPChannel
    deadline: float
    extra: list = field(default_factory=list)  # further channels of its request (server-to-server)


@dataclass(frozen=True)
class ServerOptions:
    """The settings of one :class:`ECDFServer` (each is also accepted as a keyword of ``ECDFServer``).

    Budgets (epsilon as a Fraction, float or string): ``budget`` of each new
    dataset, ``dataset_budgets`` (name -> budget), ``owner_budget`` (each
    data owner's over its datasets; :data:`SAME_AS_BUDGET` by default, None:
    no such limit), ``total_budget`` (the server's; None: no limit).
    Timeouts: ``timeout`` (any wait on a peer), ``request_timeout`` (one
    request; default max(1800, 10 timeout)).  Limits: ``max_connections``,
    ``max_staged_bytes``, ``max_staged_bytes_per_connection`` and
    ``max_check_memory`` (bytes, or sizes such as ``"4G"``).  ``num_servers``: the m of this server's set
    (uploads for another m are refused; None: 2, or more if the server id,
    ``peers`` or the policy's server names reach beyond server 1).
    ``accept_unverified``: also accept pointwise and mshare uploads, whose
    clients the servers cannot check (default: vdpf keys only).  State:
    ``state_dir`` or a ready ``storage``.
    Network: ``peers`` (server id -> (host, port)), ``policy``, ``tls`` (a
    :class:`pairwise.mpc.tls.TLSConfig`; None: plaintext, loopback only
    unless ``insecure``).  ``log(msg)``; ``cluster``: a Dask cluster spec.
    """

    budget: Fraction | float | str = DEFAULT_BUDGET
    dataset_budgets: dict | None = None
    owner_budget: Fraction | float | str | None = SAME_AS_BUDGET
    total_budget: Fraction | float | str | None = None
    timeout: float = 120.0
    request_timeout: float | None = None
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_staged_bytes: int | str = DEFAULT_STAGED_BYTES
    max_staged_bytes_per_connection: int | str = DEFAULT_STAGED_BYTES_PER_CONNECTION
    max_check_memory: int | str = DEFAULT_CHECK_MEMORY
    num_servers: int | None = None
    accept_unverified: bool = False
    state_dir: str | None = None
    storage: Storage | None = None
    peers: dict | None = None
    policy: Policy | None = None
    tls: Any = None
    insecure: bool = False
    log: Callable[[str], None] | None = None
    cluster: Any = None

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, got {self.timeout!r}")
        if self.request_timeout is not None and not self.request_timeout > 0:
            raise ValueError(f"request timeout must be positive, got {self.request_timeout!r}")
        check_int(self.max_connections, "max connections", lo=1)
        if self.num_servers is not None:
            check_int(self.num_servers, "number of servers", lo=2, hi=254)


class ECDFServer:
    """One server of the ECDF service (see the module docstring); ``serve_forever`` runs it.

    ``options``: a :class:`ServerOptions`, or its fields as keywords (``budget=``, ``tls=``, ...).
    """

    def __init__(
        self,
        server_id: int,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        options: ServerOptions | None = None,
        **legacy: Any,
    ) -> None:
        opts = with_legacy(options, ServerOptions, legacy, "ECDFServer")
        no_more_keywords(legacy, "ECDFServer")
        budget, dataset_budgets, owner_budget, total_budget = (
            opts.budget,
            opts.dataset_budgets,
            opts.owner_budget,
            opts.total_budget,
        )
        timeout, max_connections, state_dir, storage = opts.timeout, opts.max_connections, opts.state_dir, opts.storage
        peers, policy, tls, insecure, log, cluster = (
            opts.peers,
            opts.policy,
            opts.tls,
            opts.insecure,
            opts.log,
            opts.cluster,
        )
        check_int(server_id, "server id", lo=0, hi=254)
        self.server_id = server_id
        self.timeout = float(timeout)
        self.request_timeout = (
            float(opts.request_timeout) if opts.request_timeout is not None else max(1800.0, 10 * timeout)
        )
        self.max_connections = max_connections
        self._log = (
            log
            if log is not None
            else (lambda msg: print(f"ecdf-server {server_id}: {msg}", file=sys.stderr, flush=True))
        )
        budget = parse_epsilon(budget, "budget")
        # by default every data owner's datasets share one budget: the same people under a new dataset id
        # cannot be released again
        owner_budget = (
            budget
            if owner_budget == SAME_AS_BUDGET
            else (None if owner_budget is None else parse_epsilon(owner_budget, "budget per owner"))
        )
        total_budget = None if total_budget is None else parse_epsilon(total_budget, "total budget")
        budgets = {str(k): parse_epsilon(v, f"budget of dataset {k!r}") for k, v in (dataset_budgets or {}).items()}
        staging = StagingBudget(
            parse_size(opts.max_staged_bytes, "max staged bytes"),
            parse_size(opts.max_staged_bytes_per_connection, "max staged bytes per connection"),
            directory=state_dir,
            check_memory=parse_size(opts.max_check_memory, "max check memory"),
        )
        peers = {int(j): (str(a[0]), int(a[1])) for j, a in (peers or {}).items()}
        if server_id in peers:
            raise ValueError(f"--peer names this server ({server_id}) itself")
        self.policy = policy or Policy(tls=tls is not None)
        if tls is not None and not self.policy.tls:
            raise ValueError("a TLS server needs a TLS policy (Policy(..., tls=True))")
        named = {server_id, *peers, *self.policy.server_names}
        m = opts.num_servers if opts.num_servers is not None else max(2, max(named) + 1)
        if max(named) >= m:
            raise ValueError(
                f"server {max(named)} (this server's id, a --peer or a --peer-name) is not below --num-servers {m}"
            )
        #: m, the servers of this set: an upload for another m is refused (no mshare keys with two servers)
        self.num_servers = m
        self.tls = tls
        if isinstance(cluster, str):
            cluster = parse_cluster(cluster)  # a bad spec is refused before anything starts
        self._cluster_stack = contextlib.ExitStack()
        self.cluster: ClusterKeys | None = None
        self.storage = storage if storage is not None else open_storage(state_dir, server_id)
        try:
            if cluster is not None:
                self.cluster = self._open_cluster(cluster)
            self.state = ServerState(
                server_id,
                self.storage,
                budgets=Budgets(budget, budgets, owner_budget, total_budget),
                links=PeerLinks(peers, self.policy, self.timeout, tls, insecure),
                log=self._log,
                cluster=self.cluster,
                staging=staging,
                num_servers=m,
                accept_unverified=bool(opts.accept_unverified),
            )
            self.listener = TCPListener(host, port, backlog=min(128, 2 * max_connections), tls=tls, insecure=insecure)
        except BaseException:
            self._close_cluster()
            self.storage.close()
            raise
        self.host, self.port = host, self.listener.port
        self._stop = threading.Event()
        self._conns: dict[int, _Conn] = {}
        self._conns_lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        # authenticated connections being served: max_connections for anyone, plus a reserve per role that
        # a crowd of clients cannot take (queriers; the other servers, for the two-server noise)
        self.reserved_per_role = max(2, max_connections // 8)
        self._serving = {"any": 0, "querier": 0, "server": 0}
        # connections still authenticating (TLS, then the protocol handshake), by their arrival
        self.preauth_capacity = 2 * max_connections + PREAUTH_PER_ADDRESS
        self._preauth: dict[int, _Pending] = {}
        self._busy: queue.Queue = queue.Queue(maxsize=_BUSY_QUEUE)  # plaintext: told busy by one thread
        self._closing: list[tuple[float, object]] = []  # TLS: told busy; closed by the reaper a moment later
        self.stop_reason = ""

    # ------------------------------------------------------------------ cluster
    def _open_cluster(self, cluster) -> ClusterKeys:
        """Start this server's own local cluster (mutual TLS with a throwaway certificate, no dashboard) or
        connect to its scheduler; a cluster that cannot start or has no worker refuses the start."""
        client = self._cluster_stack.enter_context(
            open_cluster(cluster, timeout=self.timeout, connect_timeout=min(self.timeout, 30.0), secure=True)
        )
        spec = str(cluster) if isinstance(cluster, ClusterSpec) else "client"
        keys = ClusterKeys(client, timeout=self.timeout, spec=spec)
        d = keys.describe()
        self._log(
            f"Dask cluster {spec}: {d['workers']} worker(s), {d['threads']} thread(s), scheduler "
            f"{d['scheduler']}; this server's key shares are evaluated there"
        )
        return keys

    def _close_cluster(self) -> None:
        try:
            self._cluster_stack.close()  # a local cluster's workers are stopped here
        except Exception as exc:  # noqa: BLE001 - shutting down: report, do not raise
            self._log(f"closing the Dask cluster failed: {exc}")

    # ------------------------------------------------------------------ lifecycle
    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def serve_forever(self, *, watch_parent: bool = False) -> None:
        """Accept connections until :meth:`stop` (or, with ``watch_parent``, until the parent process exits)."""
        parent = os.getppid()
        helpers = [
            threading.Thread(target=self._reap, daemon=True, name="ecdf-reaper"),
            threading.Thread(target=self._refuse_busy, daemon=True, name="ecdf-busy"),
        ]
        for t in helpers:
            t.start()
        try:
            while not self._stop.is_set():
                if watch_parent and os.getppid() != parent:
                    self.stop("the parent process exited")
                    break
                try:
                    ch = self.listener.accept_socket(timeout=0.5)  # TLS runs in the connection's own thread
                except ChannelTimeout:
                    continue
                except ChannelError as exc:
                    if self._stop.is_set():
                        break
                    self._log(f"accept failed: {exc}")
                    continue
                pre = self._admit(ch)  # ch: a PendingConnection
                if pre is None:
                    self._refuse(ch)
                    continue
                t = threading.Thread(
                    target=self._serve_connection, args=(pre,), daemon=True, name=f"ecdf-conn-{ch.peer}"
                )
                with self._conns_lock:
                    self._threads.add(t)
                t.start()
        finally:
            self._shutdown()

    def stop(self, reason: str = "stop requested") -> None:
        """Ask :meth:`serve_forever` to shut down (safe from a signal handler or any thread)."""
        if not self._stop.is_set():
            self.stop_reason = reason
        self._stop.set()

    def _shutdown(self) -> None:
        self._stop.set()
        self.listener.close()
        with self._conns_lock:
            conns = list(self._conns.values())
            threads = list(self._threads)
        for c in conns:
            for ch in [c.ch, *c.extra]:
                ch.interrupt()
        self.state.hub.close_all()
        end = time.monotonic() + _JOIN_ON_STOP
        for t in threads:
            t.join(timeout=max(0.0, end - time.monotonic()))
        while True:
            try:
                self._busy.get_nowait().close()
            except queue.Empty:
                break
        with self._conns_lock:
            closing, self._closing = self._closing, []
        for _, pending in closing:
            pending.close()
        self._close_cluster()
        self.storage.close()
        self._log(f"stopped ({self.stop_reason or 'listener closed'}); state closed")

    # ------------------------------------------------------------------ deadlines and busy replies
    def _reap(self) -> None:
        while not self._stop.wait(_REAP_EVERY):
            now = time.monotonic()
            with self._conns_lock:
                late = [c for c in self._conns.values() if c.deadline < now]
                due = [p for t, p in self._closing if t <= now]
                self._closing = [(t, p) for t, p in self._closing if t > now]
            for pending in due:  # told busy a moment ago: the alert has reached the peer
                pending.close()
            for c in late:
                self._log(f"connection {c.ch.peer} passed its deadline; closing it")
                c.deadline = float("inf")
                for ch in [c.ch, *c.extra]:
                    ch.interrupt()

    def _busy_reply(self) -> dict:
        return {
            "ok": False,
            "code": "busy",
            "server_id": self.server_id,
            "error": f"server {self.server_id} serves its maximum of {self.max_connections} connections; retry later",
        }

    def _refuse(self, pending) -> None:
        """Tell a connection that arrived while the authentication stage is full that the server is busy.

        TLS: a ``user_canceled`` alert at once, without blocking (the client
        raises :class:`pairwise.mpc.errors.PeerBusy`, which it retries until its
        connect deadline, then reports as busy), and the socket is closed by
        the reaper a moment later.  Plaintext (loopback): one thread answers the
        protocol handshake with a ``busy`` reply.
        """
        if self.tls is not None:
            pending.tell_busy()
            with self._conns_lock:
                if len(self._closing) < _CLOSING_MAX:
                    self._closing.append((time.monotonic() + _BUSY_LINGER, pending))
                    return
            pending.close()
            return
        try:
            self._busy.put_nowait(pending)
        except queue.Full:
            pending.close()

    # ------------------------------------------------------------------ admission
    def _admit(self, pending) -> _Pending | None:
        """Admit a new connection to the authentication stage, or None (the server is busy).

        At most ``PREAUTH_PER_ADDRESS`` connections from one address and
        :attr:`preauth_capacity` in all authenticate at once.  When a limit is
        reached the newcomer takes the place of the oldest connection -- of its
        own address, or else of the address with the most connections
        authenticating -- provided that one has been authenticating for
        ``PREAUTH_MIN_AGE`` seconds (an honest handshake takes milliseconds):
        strangers holding idle connections are pushed out by whoever comes
        next, and cannot lock anyone out for longer than that.  Only a flood
        of connections all younger than that is told busy.
        """
        addr = _address_of(pending.peer)
        now = time.monotonic()
        with self._conns_lock:
            live = [p for p in self._preauth.values() if not p.cut]
            mine = [p for p in live if p.addr == addr]
            victim = None
            if len(mine) >= PREAUTH_PER_ADDRESS:
                victim = min(mine, key=lambda p: p.since)
            elif len(live) >= self.preauth_capacity:
                per: dict[str, list] = {}
                for p in live:
                    per.setdefault(p.addr, []).append(p)
                crowd = max(per.values(), key=lambda ps: (len(ps), -min(q.since for q in ps)))
                victim = min(crowd, key=lambda p: p.since)
                if now - victim.since < PREAUTH_MIN_AGE:
                    victim = min(live, key=lambda p: p.since)
            if victim is not None:
                if now - victim.since < PREAUTH_MIN_AGE:
                    return None
                victim.cut = True
            pre = _Pending(pending, addr, now)
            self._preauth[id(pre)] = pre
        if victim is not None:
            victim.interrupt()
        return pre

    def _end_preauth(self, pre: _Pending) -> None:
        with self._conns_lock:
            self._preauth.pop(id(pre), None)

    def _take_slot(self, role: str) -> str | None:
        """A serving slot for an authenticated connection of ``role``: one of ``max_connections``, else one of
        the reserve of queriers and servers; None when there is none (the connection is told busy)."""
        with self._conns_lock:
            if self._serving["any"] < self.max_connections:
                self._serving["any"] += 1
                return "any"
            if role in ("querier", "server") and self._serving[role] < self.reserved_per_role:
                self._serving[role] += 1
                return role
        return None

    def _give_slot(self, slot: str) -> None:
        with self._conns_lock:
            self._serving[slot] -= 1

    def _refuse_busy(self) -> None:
        while not self._stop.is_set():
            try:
                ch = self._busy.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                ch = ch.open(recv_timeout=5.0, handshake_timeout=5.0)
                handshake(ch, ROLE_SERVER, SESSION_ID, PROTOCOL_DIGEST, extra_label="protocol", timeout=5.0)
                send_json(ch, self._busy_reply())
            except (ChannelError, ValueError):
                pass
            finally:
                ch.close()

    # ------------------------------------------------------------------ connections
    def _serve_connection(self, pre: _Pending) -> None:
        pending = pre.pending
        session: Session | None = None
        parked = False
        key = None
        slot = None
        try:
            limit = min(self.timeout, PREAUTH_TIMEOUT)
            try:
                # TLS handshake and certificate check (a no-op in plaintext); every role may connect, each
                # request is then authorized by role (Policy.authorize)
                ch = pending.open(recv_timeout=limit, handshake_timeout=limit)
            except ChannelError as exc:
                why = "its place was taken by a newer connection" if pre.cut else str(exc)
                self._log(f"connection from {pending.peer} refused: {why}")
                return
            pre.ch = ch
            conn = _Conn(ch, time.monotonic() + limit)  # the reaper cuts a handshake that stalls past it
            key = id(conn)
            with self._conns_lock:
                self._conns[key] = conn
            if pre.cut:
                ch.interrupt()
            try:
                hs = handshake(ch, ROLE_SERVER, SESSION_ID, PROTOCOL_DIGEST, extra_label="protocol", timeout=limit)
            except (ChannelError, ValueError) as exc:
                why = "its place was taken by a newer connection" if pre.cut else str(exc)
                self._log(f"handshake with {ch.peer} failed: {why}")
                return
            self._end_preauth(pre)
            peer = peer_of(ch)
            role = peer.role if peer is not None else _CLAIMED_ROLES.get(hs.peer_role, "client")
            slot = self._take_slot(role)
            if slot is None:  # authenticated, but every serving slot (and this role's reserve) is taken
                with contextlib.suppress(ChannelError, OSError):
                    send_json(ch, self._busy_reply())
                return
            conn.deadline = time.monotonic() + self.timeout
            ch.timeout = self.timeout  # authenticated: the server's own wait for requests from now on
            if hs.peer_role == ROLE_PEER:
                parked = self.state.hub.accept(ch)
                return
            if hs.peer_role not in (ROLE_CLIENT, ROLE_QUERIER):
                self._log(f"{ch.peer} claims unknown role {hs.peer_role!r}; closing")
                return
            session = Session(self.state, ch, owner=peer.name if peer is not None else "")
            session.on_channel = conn.extra.append
            self._requests(ch, conn, session, peer)
        finally:
            if session is not None:
                session.close()
            if key is not None and not parked:
                ch.close()
            with self._conns_lock:
                self._conns.pop(key, None)
                self._threads.discard(threading.current_thread())
            self._end_preauth(pre)
            if slot is not None:
                self._give_slot(slot)

    def _requests(self, ch: TCPChannel, conn: _Conn, session: Session, peer) -> None:
        try:
            while not self._stop.is_set():
                conn.deadline = time.monotonic() + self.timeout
                try:
                    req = recv_json(ch, timeout=self.timeout)
                except PeerClosed:
                    break
                conn.deadline = time.monotonic() + self.request_timeout
                if not session.answer(req, peer):
                    break  # bulk frames may still be in flight: end the connection cleanly
        except ChannelError as exc:
            if not self._stop.is_set():
                self._log(f"connection {ch.peer}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the server; report it
            self._log(f"internal error on connection {ch.peer}: {type(exc).__name__}: {exc}")
            try:
                send_json(
                    ch,
                    {
                        "ok": False,
                        "error": f"internal server error: {type(exc).__name__}: {exc}",
                        "code": "internal",
                        "server_id": self.server_id,
                    },
                )
            except ChannelError:
                pass
