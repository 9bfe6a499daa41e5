"""The collect aggregator: an asyncio service that runs tasks among real users who each hold one record.

What it does
    ``pairwise collect serve --listen HOST:PORT --state DIR --tls DIR --name NAME``
    runs :class:`Aggregator`: one asyncio event loop that accepts TCP, starts
    mutual TLS 1.3 (:mod:`pairwise.mpc.tls`) only within a bounded handshake
    gate (:mod:`.admission`: the rest are told busy before TLS), runs
    admission and the session handshake (:mod:`pairwise.protocols.service.aio`), then serves JSON
    requests (:mod:`pairwise.protocols.collect.wire`), each authorized by the
    peer's certificate role.  Its state is one SQLite file
    (:mod:`pairwise.protocols.collect.storage`); every change is committed
    there before it is acknowledged.  A collector creates a task (protocol and
    public parameters, :mod:`pairwise.protocols.collect.tasks`), users join it,
    and the task moves ``open`` -> (registration closes: ``min_users`` reached
    and the deadline passed, or ``task close``) -> ``done`` with its result
    stored, or ``failed`` with the reason.

    * Local model (here): a joining user gets its public assignment, then
      uploads one report, checked against the randomizer's output range and
      stored once; at close the analyzer runs over the stored reports.
    * 2PC ([BBGK20, Sec. 5]): pairing and relays in :mod:`.aggregator_pairs`;
      waiting users poll, holding no connection (:mod:`.aggregator_poll`).
    * Shuffle model: :mod:`pairwise.protocols.collect.aggregator_shuffle`.

Restarts and faults
    State is reloaded from SQLite (a session started before a crash is never
    relayed again).  Every wait has a timeout (10 s to authenticate,
    ``timeout`` of silence on a request connection); a bad report or a
    malformed frame is refused for that user alone; SIGTERM stops the loop,
    drops every connection and closes the state.  Details: ``docs/collect.md``
    ("Faults").

Security model
    Semi-honest aggregator.  It learns the tasks, who joined (certificate
    names, public labels), the randomized reports (local model), who is
    paired with whom, byte counts and the noisy values (2PC); never a user's
    value.  Results are computed once and stored, so asking again returns
    the same release.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import threading
import time
from collections import deque

from pairwise.mpc.errors import ChannelError, PeerClosed, ProtocolError

from ..service.aio import AsyncConnection, accept_connection, limit_tls_buffers
from . import storage as st
from .admission import Admission, HandshakeGate, tell_busy
from .aggregator_pairs import _HANDOFF, PairOps, _Session
from .aggregator_poll import PollOps
from .aggregator_shuffle import ShuffleOps
from .relay import Relay
from .storage import StorageError, open_store
from .tasks import protocol_of, validate_task
from .wire import (
    PROTOCOL_DIGEST,
    ROLE_AGGREGATOR,
    ROLE_COLLECTOR,
    ROLE_SHUFFLER,
    ROLE_USER,
    SESSION_ID,
    AlreadyJoined,
    CollectError,
    NotFinished,
    RegistrationClosed,
    TaskFailed,
    UnknownTask,
    check_task_id,
    error_code,
    op_class,
    policy,
)

__all__ = ["Aggregator", "DEFAULT_MAX_CONNECTIONS", "PREAUTH_TIMEOUT"]

#: Seconds a new connection may take for TLS, admission and the session handshake (generous: thousands of
#: users may connect at once, and one event loop runs their handshakes one after the other).
PREAUTH_TIMEOUT = 30.0
#: Connections served at once by default (a 2PC user holds one control connection and one per running session).
DEFAULT_MAX_CONNECTIONS = 16384
_CHECK_EVERY = 0.5


class _Task:
    """A task in memory: its row, registrations, live control connections and sessions."""

    def __init__(self, row: st.TaskRow) -> None:
        self.row = row
        self.proto = protocol_of(row.protocol)
        self.lock = asyncio.Lock()
        self.users: dict[str, tuple[int | None, dict]] = {}
        self.by_class: dict = {}
        self.reports = 0
        self.live: dict[str, AsyncConnection] = {}
        self.sessions: dict[int, _Session] = {}
        self.close_requested = False
        self.started = time.monotonic()
        self.next_poll: dict[str, float] = {}  # polling 2PC user -> when it was told to come back (monotonic)
        self.mine: dict[str, list[int]] = {}  # 2PC user -> its sessions
        self.handed: set[int] = set()  # sessions told to polling users and not known to have ended
        self.joined_at: deque[float] = deque(maxlen=256)  # when the latest users registered (monotonic): the pace
        self.ended_at: deque[float] = deque(maxlen=256)  # when the latest handed-out sessions ended (monotonic)
        self.committing: dict[str, asyncio.Future] = {}  # users whose registration is being stored
        self.join_queue: list = []  # registrations waiting for the next commit
        self.join_writer = False

    @property
    def spec(self) -> dict:
        return self.row.spec

    @property
    def id(self) -> str:
        return self.row.id

    def add_user(self, name: str, label, assignment: dict) -> None:
        self.users[name] = (label, assignment)
        self.by_class.setdefault(label, []).append(assignment)

    def drop_user(self, name: str) -> None:
        """Forget a registration that could not be stored (the user was told so and may retry)."""
        label, assignment = self.users.pop(name)
        self.by_class[label].remove(assignment)

    def counts(self) -> dict:
        out = {"users_registered": len(self.users)}
        if self.proto.model == "local":
            out["reports"] = self.reports
        if self.proto.model == "2pc":
            states = [s.row.state for s in self.sessions.values()]
            out.update(
                users_connected=len(self.live),
                pairs_planned=len(states),
                pairs_completed=states.count(st.COMPLETED),
                pairs_dropped=states.count(st.DROPPED),
            )
        return out

    def view(self) -> dict:
        r = self.row
        return {
            "id": r.id,
            "protocol": r.protocol,
            "title": r.spec.get("title", ""),
            "state": r.state,
            "reason": r.reason,
            "created": r.created,
            "closed": r.closed,
            "finished": r.finished,
            **self.counts(),
            "spec": r.spec,
        }


class Aggregator(PollOps, PairOps, ShuffleOps):
    """The collect service (see the module docstring; 2PC: :mod:`.aggregator_pairs` and :mod:`.aggregator_poll`,
    shuffle: :mod:`.aggregator_shuffle`).

    ``tls``: a :class:`pairwise.mpc.tls.TLSConfig` (mutual TLS 1.3), else
    plaintext on loopback only unless ``insecure`` (users then name
    themselves in their requests; there is no identity to check).
    ``timeout``: seconds of silence a request connection may keep.
    ``relay_tap(session, direction, data)``: sees every relayed byte (tests).
    ``admission``: the handshake gate and the pacing of waiting users
    (:class:`~pairwise.protocols.collect.admission.Admission`).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        state_dir: str | None = None,
        tls=None,
        insecure: bool = False,
        timeout: float = 120.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        log=None,
        relay_tap=None,
        admission: Admission | None = None,
    ) -> None:
        from pairwise.mpc.tls import check_plaintext

        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise ValueError(f"max connections must be a positive integer, got {max_connections!r}")
        if tls is None:
            check_plaintext(host, port, insecure=insecure, what="listening on")
        self.host, self.port = host, port
        self.tls = tls
        self.timeout = float(timeout)
        self.max_connections = max_connections
        self.admission = admission if admission is not None else Admission()
        self.gate = HandshakeGate(self.admission)
        self._ssl = None
        self._busy = 0
        self._stats_at, self._stats_seen = 0.0, (0, 0)
        self.name = tls.name if tls is not None else f"{host}:{port}"
        self._log = (
            log if log is not None else (lambda m: print(f"collect-aggregator: {m}", file=sys.stderr, flush=True))
        )
        self.policy = policy()
        self.relay = Relay(self.timeout, tap=relay_tap)
        self.store = open_store(state_dir)
        self.tasks: dict[str, _Task] = {}
        self._conns: set[AsyncConnection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self.stop_reason = ""
        try:
            self._load()
        except BaseException:
            self.store.close()
            raise

    # ------------------------------------------------------------------ state
    def _load(self) -> None:
        now = time.monotonic()
        for row in self.store.tasks():
            t = _Task(row)
            for name, label, assignment in self.store.users(row.id):
                t.add_user(name, label, assignment)
            t.reports = self.store.report_count(row.id)
            for p in self.store.pairs(row.id):
                s = _Session(p, planned_at=now)
                s.interrupted = p.state == st.STARTED
                t.sessions[p.session] = s
                for u in (p.garbler, p.evaluator):
                    t.mine.setdefault(u, []).append(p.session)
            if t.proto.model == "2pc" and row.state in (st.OPEN, st.CLOSED):
                t.next_poll = dict.fromkeys(t.users, now)  # registered before the restart: may come back
            self.tasks[row.id] = t

    async def _db(self, fn, *args, **kw):
        """A storage call in a worker thread (SQLite commits wait for the disk, not the event loop)."""
        return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kw))

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Bind and start accepting (``self.port`` is then the bound port)."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ssl = self.tls.context(server=True) if self.tls is not None else None
        limit_tls_buffers()  # 16 KiB instead of asyncio's 256 KiB per TLS connection (10^4 users: 2 each)
        # plain TCP: TLS starts in _on_connect once the handshake gate admits the connection (.admission)
        self._server = await asyncio.start_server(
            self._on_connect, self.host, self.port, backlog=4096, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        if self.tls is None:
            self.name = f"{self.host}:{self.port}"

    async def serve(self, *, watch_parent: bool = False, on_listening=None) -> None:
        """Run until :meth:`stop` (or, with ``watch_parent``, until the parent process exits)."""
        await self.start()
        if on_listening is not None:
            on_listening(self)
        parent = os.getppid()
        try:
            while not self._stop.is_set():
                if watch_parent and os.getppid() != parent:
                    self.stop("the parent process exited")
                    break
                await self._tick()
                try:
                    await asyncio.wait_for(self._stop.wait(), _CHECK_EVERY)
                except TimeoutError:
                    pass
        finally:
            await self._shutdown()

    def stop(self, reason: str = "stop requested") -> None:
        """Ask :meth:`serve` to return (safe from a signal handler or any thread)."""
        if not self.stop_reason:
            self.stop_reason = reason
        loop, ev = self._loop, self._stop
        if loop is not None and ev is not None:
            try:
                loop.call_soon_threadsafe(ev.set)
            except RuntimeError:
                pass

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for c in list(self._conns):
            c.abort()
        for t in self.tasks.values():
            for s in t.sessions.values():
                for _, fut in list(s.waiting.values()):
                    if not fut.done():
                        fut.cancel()
        await asyncio.sleep(0)
        self.store.close()
        self._log(f"stopped ({self.stop_reason or 'stop requested'}); state closed")

    def run(self, **kw) -> None:
        """:meth:`serve` in a fresh event loop (blocks)."""
        asyncio.run(self.serve(**kw))

    def start_in_thread(self, timeout: float = 30.0) -> Aggregator:
        """Serve from a background thread (tests, demos); returns once listening."""
        ready = threading.Event()
        errors: list = []

        def main() -> None:
            try:
                asyncio.run(self.serve(on_listening=lambda _a: ready.set()))
            except BaseException as exc:  # noqa: BLE001 - surfaced to the starting thread
                errors.append(exc)
                ready.set()

        self._thread = threading.Thread(target=main, name="collect-aggregator", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or errors:
            raise errors[0] if errors else TimeoutError("the aggregator did not start")
        return self

    def stop_thread(self, timeout: float = 30.0) -> None:
        self.stop()
        if self._thread is not None:
            self._thread.join(timeout)

    # ------------------------------------------------------------------ connections
    async def _on_connect(self, reader, writer) -> None:
        peer = writer.get_extra_info("peername")
        slot = None
        if len(self._conns) < self.max_connections:
            slot = self.gate.enter(peer[0] if isinstance(peer, tuple) else str(peer), writer.transport)
        if slot is None:  # before any TLS: the price of an accept (.admission)
            if self._ssl is not None and self._busy < 4096:
                self._busy += 1
                try:
                    await tell_busy(reader, writer)
                finally:
                    self._busy -= 1
            else:
                writer.transport.abort()
            return
        limit = self.admission.handshake_timeout
        raw = writer.transport
        try:
            if self._ssl is not None:
                try:
                    await writer.start_tls(self._ssl, ssl_handshake_timeout=limit)
                except AttributeError:  # asyncio 3.11 when the peer left as the handshake ended (no transport)
                    pass
                if writer.transport is None:
                    writer._transport = raw  # so the writer's finalizer finds a transport to check
                    raise PeerClosed(f"{peer} closed the connection during the TLS handshake")
            conn, hs = await asyncio.wait_for(
                accept_connection(
                    reader, writer, role=ROLE_AGGREGATOR, session_id=SESSION_ID, digest=PROTOCOL_DIGEST, timeout=limit
                ),
                limit,
            )
        except (TimeoutError, ChannelError, ValueError, OSError, ConnectionError) as exc:
            if not slot.evicted:
                self._log(f"connection refused: {exc or 'authentication timed out'}")
            (writer.transport or raw).abort()
            return
        finally:
            self.gate.leave(slot)
        self._conns.add(conn)
        handed_off = False
        try:
            if hs.peer_role not in (ROLE_USER, ROLE_COLLECTOR, ROLE_SHUFFLER):
                self._log(f"{conn.peer} claims unknown role {hs.peer_role!r}; closing")
                return
            handed_off = await self._requests(conn)
        finally:
            self._conns.discard(conn)
            if not handed_off:
                await conn.close()

    async def _requests(self, conn: AsyncConnection) -> bool:
        """Serve requests until the peer closes; True when a handler kept the connection (and closed it)."""
        peer = conn.identity
        while self._stop is not None and not self._stop.is_set():
            try:
                req = await conn.recv_json(timeout=self.timeout)
            except ChannelError:
                return False
            except ProtocolError as exc:  # a malformed frame: this connection alone is refused
                self._log(f"{conn.peer}: {exc}")
                await self._refuse(conn, CollectError(f"malformed request: {exc}"))
                return False
            op = req.get("op")
            try:
                what = op_class(op)
                if what is None:
                    raise CollectError(f"unknown operation {op!r}")
                self.policy.authorize(what, peer)
                name = self._user_name(conn, req) if what == "participate" else (peer.name if peer else "")
                reply = await getattr(self, f"_op_{op}")(conn, name, req)
            except (CollectError, StorageError) as exc:
                if not isinstance(exc, (NotFinished, UnknownTask)):
                    self._log(f"{op} from {conn.peer}: {exc}")
                await self._refuse(conn, exc)
                continue
            except ChannelError:
                return False
            if reply is _HANDOFF:
                return True
            try:
                await conn.send_json({"ok": True, **reply})
            except ChannelError:
                return False
        return False

    @staticmethod
    def _user_name(conn: AsyncConnection, req: dict) -> str:
        if conn.identity is not None:
            return conn.identity.name
        name = req.get("user")  # plaintext loopback: the user names itself (module docstring)
        if not isinstance(name, str) or not 1 <= len(name) <= 64:
            raise CollectError('a user without a certificate must name itself ("user": NAME) on plaintext loopback')
        return name

    async def _refuse(self, conn: AsyncConnection, exc: BaseException) -> None:
        code = "storage" if isinstance(exc, StorageError) else error_code(exc)
        try:
            await conn.send_json({"ok": False, "error": str(exc), "code": code})
        except ChannelError:
            pass

    def _task(self, req: dict) -> _Task:
        tid = check_task_id(req.get("task"))
        t = self.tasks.get(tid)
        if t is None:
            raise UnknownTask(f"no task {tid!r} on this aggregator")
        return t

    # ------------------------------------------------------------------ collector requests
    async def _op_task_create(self, conn, name, req) -> dict:
        protocol = req.get("protocol")
        params = req.get("params")
        tid = req.get("id") or secrets.token_hex(4)
        check_task_id(tid)
        if tid in self.tasks:
            raise CollectError(f"task {tid!r} exists already; choose another --id")
        if isinstance(params, dict) and protocol == "ustat-2pc" and "pair_channel" not in params and self.tls is None:
            params = {**params, "pair_channel": "plain"}  # users without certificates cannot run TLS to each other
        spec = await self._db(validate_task, protocol, params)  # may build a circuit: off the event loop
        key = self._shuffle_keys(spec) if protocol_of(spec["protocol"]).model == "shuffle" else None
        row = await self._db(self.store.create_task, tid, spec, name, private_key=key)
        t = self.tasks[tid] = _Task(row)
        self._log(f"task {tid} created by {name or 'a plaintext collector'}: {protocol}")
        return {"task": t.view()}

    async def _op_task_list(self, conn, name, req) -> dict:
        return {"tasks": [t.view() for t in self.tasks.values()]}

    async def _op_task_show(self, conn, name, req) -> dict:
        return {"task": self._task(req).view()}

    async def _op_task_close(self, conn, name, req) -> dict:
        t = self._task(req)
        if t.row.state != st.OPEN:
            raise RegistrationClosed(f"task {t.id} is {t.row.state}; its registration closed already")
        t.close_requested = True
        await self._close(t)
        return {"task": t.view()}

    async def _op_result(self, conn, name, req) -> dict:
        t = self._task(req)
        if t.row.state == st.DONE:
            return {"result": t.row.result}
        if t.row.state == st.FAILED:
            raise TaskFailed(f"task {t.id} failed: {t.row.reason}")
        raise NotFinished(f"task {t.id} is {t.row.state}: no result yet ({_progress(t)})")

    # ------------------------------------------------------------------ user requests
    async def _op_task_info(self, conn, name, req) -> dict:
        t = self._task(req)
        return {
            "task": {
                "id": t.id,
                "protocol": t.row.protocol,
                "state": t.row.state,
                "spec": t.spec,
                "aggregator": self.name,
                "model": t.proto.model,
                "describe": t.proto.describe(t.spec),
            }
        }

    def _label(self, t: _Task, req: dict):
        label = req.get("label")
        if t.proto.needs_label(t.spec):
            if label not in (0, 1) or isinstance(label, bool):
                raise CollectError(f"task {t.id} needs the user's public 0/1 label")
            return int(label)
        if label is not None:
            raise CollectError(f"task {t.id} takes no label")
        return None

    async def _op_join(self, conn, name, req):
        t = self._task(req)
        label = self._label(t, req)
        model = t.proto.model
        if model == "shuffle":
            raise CollectError(
                f"task {t.id} is a shuffle-model task: its messages go through a shuffler "
                "(pairwise collect shuffler), not through join"
            )
        committing = t.committing.get(name)
        if committing is not None:  # the same user's retried join while its first is being stored
            try:
                await asyncio.shield(committing)
            except (StorageError, OSError):
                pass  # the first was not stored: this one tries again
        async with t.lock:
            known = t.users.get(name)
            if known is not None and known[0] != label:
                raise AlreadyJoined(f"{name!r} joined task {t.id} with label {known[0]}, not {label}")
            if t.row.state != st.OPEN and (known is None or model == "local"):
                raise RegistrationClosed(f"task {t.id} is {t.row.state}: registration closed, nothing was stored")
            if model == "2pc" and name in t.live and not req.get("poll"):
                raise AlreadyJoined(f"{name!r} is already connected to task {t.id} from another connection")
            new = known is None
            if new:
                assignment = t.proto.assign(t.spec, label, t.by_class.get(label, [])) if model == "local" else {}
                t.add_user(name, label, assignment)  # the next joiner's assignment counts this one
                stored = t.committing[name] = asyncio.get_running_loop().create_future()
            assignment = t.users[name][1]
        if new:  # on disk before the reply: one commit for the joins that arrive meanwhile (_store_joins)
            try:
                await self._store_join(t, name, label, assignment)
            except BaseException as exc:
                t.drop_user(name)
                stored.set_exception(exc)
                stored.exception()  # retrieved: a retried join awaiting it raises on its own
                raise
            finally:
                t.committing.pop(name, None)
            stored.set_result(True)
            t.joined_at.append(time.monotonic())
        if model == "local":
            return {"assignment": assignment, "joined": new}
        if req.get("poll"):  # registered; waits without a connection (.aggregator_poll)
            return {
                "registered": True,
                "resumed": not new,
                "state": t.row.state,
                "users": len(t.users),
                "retry_after": self._tell_when(t, name),
            }
        await conn.send_json(
            {"ok": True, "registered": True, "resumed": not new, "state": t.row.state, "users": len(t.users)}
        )
        await self._control(t, conn, name)
        return _HANDOFF

    async def _store_join(self, t: _Task, name: str, label, assignment: dict) -> None:
        """Store one registration, batched with the others waiting (group commit: a commit waits for the disk,
        and joins that arrive meanwhile go into the next one together instead of queueing one by one)."""
        done = asyncio.get_running_loop().create_future()
        t.join_queue.append(((name, label, assignment), done))
        if not t.join_writer:
            t.join_writer = True
            try:
                while t.join_queue:
                    batch, t.join_queue = t.join_queue, []
                    try:
                        await self._db(self.store.add_users, t.id, [row for row, _ in batch])
                    except (StorageError, OSError) as exc:
                        for _, f in batch:
                            f.set_exception(exc)
                            f.exception()
                    else:
                        for _, f in batch:
                            f.set_result(None)
            finally:
                t.join_writer = False
        await done

    async def _op_report(self, conn, name, req) -> dict:
        t = self._task(req)
        if t.proto.model != "local":
            raise CollectError(f"task {t.id} takes no reports ({t.proto.model} model)")
        async with t.lock:
            if t.row.state != st.OPEN:
                raise RegistrationClosed(
                    f"task {t.id} is {t.row.state}: registration closed, the report was not counted"
                )
            if name not in t.users:
                raise CollectError(f"{name!r} has not joined task {t.id}: join first")
            label, assignment = t.users[name]
            report = t.proto.check_report(t.spec, assignment, label, req.get("report"))
            new = await self._db(self.store.add_report, t.id, name, report)
            t.reports += int(new)
        return {"counted": True, "duplicate": not new}

    async def _op_ping(self, conn, name, req) -> dict:
        return {}

    async def _op_pair_result(self, conn, name, req):  # a polling user's report, as a request
        t = self._task(req)
        if t.proto.model != "2pc":
            raise CollectError(f"task {t.id} has no 2PC sessions")
        await self._pair_report(t, name, req.get("op"), req)
        return {"session": req.get("session"), "state": t.sessions[req["session"]].row.state}

    _op_pair_done = _op_pair_failed = _op_pair_result

    # ------------------------------------------------------------------ closing and finishing
    async def _tick(self) -> None:
        now, mono = time.time(), time.monotonic()
        seen = (self.gate.refused, self.gate.evicted)
        if mono >= self._stats_at and seen != self._stats_seen:  # admission at a glance, for operators
            self._stats_at, self._stats_seen = mono + 30.0, seen
            self._log(
                f"admission: {len(self._conns)} connections, {len(self.gate)} handshakes in flight; "
                f"{seen[0]} told busy, {seen[1]} evicted so far"
            )
        for t in list(self.tasks.values()):
            try:
                if t.row.state == st.OPEN and t.proto.model in ("local", "2pc"):
                    count = t.reports if t.proto.model == "local" else len(self._alive(t))
                    if now >= t.spec["deadline_at"] and count >= t.spec["min_users"]:
                        await self._close(t)
                elif t.row.state == st.OPEN and t.proto.model == "shuffle" and now >= t.spec["deadline_at"]:
                    await self._close(t)  # only the shuffler knows how many users submitted
                elif t.row.state == st.CLOSED:
                    await self._close(t)
                elif t.row.state == st.RUNNING:
                    limit = t.spec["timeout"]
                    for s in list(t.sessions.values()):
                        if s.row.state == st.PLANNED and mono - s.planned_at > limit and not s.waiting:
                            await self._drop(t, s, f"not started within {limit:g} s")
                        elif s.row.state == st.STARTED and (s.interrupted or s.relay_ended_at is not None):
                            since = s.planned_at if s.interrupted else s.relay_ended_at
                            if mono - since > limit:
                                await self._drop(t, s, f"no value reported within {limit:g} s")
                    await self._maybe_finish(t)
            except (StorageError, CollectError) as exc:
                self._log(f"task {t.id}: {exc}")

    async def _close(self, t: _Task) -> None:
        async with t.lock:
            if t.row.state not in (st.OPEN, st.CLOSED):
                return
            if t.proto.model == "2pc":
                await self._pair(t)
                return
            if t.proto.model == "shuffle":
                await self._close_shuffle(t)
                return
            if t.row.state == st.OPEN:
                await self._db(self.store.set_state, t.id, st.CLOSED)
                t.row.state = st.CLOSED
            rows = await self._db(self._local_rows, t)
            try:
                result = await self._db(t.proto.finish, dict(t.spec), rows)
            except (CollectError, ValueError) as exc:
                await self._fail(t, str(exc))
                return
            await self._done(t, result, reports=len(rows), pairs_planned=None, pairs_completed=None, pairs_dropped=None)

    def _local_rows(self, t: _Task) -> list:
        return [(t.users[name][0], t.users[name][1], rep) for name, rep in self.store.reports(t.id)]

    async def _done(self, t: _Task, result: dict, **counts) -> None:
        result = {**result, "task": t.id, "protocol": t.row.protocol, "users_registered": len(t.users), **counts}
        await self._db(self.store.set_state, t.id, st.DONE, result=result)  # stored once: the same release after
        t.row.state, t.row.result = st.DONE, result
        self._log(f"task {t.id} done")
        self._finished(t)

    async def _fail(self, t: _Task, reason: str) -> None:
        await self._db(self.store.set_state, t.id, st.FAILED, reason=reason)
        t.row.state, t.row.reason = st.FAILED, reason
        self._log(f"task {t.id} failed: {reason}")
        self._finished(t)

    def _finished(self, t: _Task) -> None:
        for _name, c in list(t.live.items()):
            self._event(c, {"event": "finished", "state": t.row.state, "reason": t.row.reason})


def _progress(t: _Task) -> str:
    c = t.counts()
    if t.proto.model == "2pc" and t.row.state == st.RUNNING:
        return f"{c['pairs_completed']} of {c['pairs_planned']} pairs completed, {c['pairs_dropped']} dropped"
    if t.proto.model == "local":
        return f"{c['reports']} report(s), {t.spec['min_users']} needed"
    return f"{c['users_registered']} user(s) registered, {t.spec['min_users']} needed"
