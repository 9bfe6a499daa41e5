"""The shuffler: strips sender identities from sealed messages it cannot read, permutes them, forwards them.

What it does
    ``pairwise collect shuffler --listen HOST:PORT --upstream AGGREGATOR
    --state DIR --tls DIR --name NAME`` is a process of its own between the
    users and the aggregator of a shuffle-model task ([BC20]'s trusted
    shuffler; :mod:`pairwise.protocols.collect.histogram`).  Users submit their sealed boxes for a task (one submission per
    certificate name, at most d + 1 boxes of the task's fixed size); the
    shuffler checks what it can without reading anything and commits the
    submission (:class:`ShufflerStore`).  When the task closes or
    ``--batch-size`` users are pending, the store cuts a batch of the boxes
    of at least n users, permuted uniformly with the OS CSPRNG
    (:func:`pairwise.protocols.ldp.shuffle.secure_permutation`), deletes the
    link from users to boxes in the same transaction, and delivers the batch
    from a durable outbox until the aggregator acknowledges it (a redelivery
    is not counted twice).  Step by step: ``docs/collect-relay-shuffler.md``,
    "The shuffler, step by step".

Replays and duplicates
    A second submission is refused (``duplicate``), and so is one that
    repeats a box's ephemeral public key already seen for the task
    (``replayed``): a replayed or copied box is never forwarded.

Security model
    The shuffler learns who submitted to which task and how many boxes
    (1 + Bin(d, p), independent of the value), never what they say (IND-CCA2
    sealed boxes).  The aggregator receives boxes in a uniformly random order
    and the number of users per batch, never a name or a connection.  The
    shuffler is trusted not to collude with the aggregator and to shuffle
    (the shuffle model's assumption).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from pairwise.dp.errors import PairwiseError
from pairwise.dp.validate import no_more_keywords, with_legacy
from pairwise.protocols.ldp.shuffle import secure_permutation

from ..service.storage import SQLiteStore, StorageError, state_directory
from . import sealed

__all__ = [
    "ShuffleError",
    "ShufflerStore",
    "Batch",
    "TaskInfo",
]

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS task (
    task_id TEXT PRIMARY KEY,
    params TEXT NOT NULL,             -- the aggregator's public description of the task (JSON)
    status TEXT NOT NULL,             -- open | final (the last batch is cut) | done (delivered)
    next_batch INTEGER NOT NULL DEFAULT 0,
    dropped_users INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS submission (
    task_id TEXT NOT NULL REFERENCES task(task_id),
    user TEXT NOT NULL,
    boxes BLOB,                       -- NULL once its batch is cut: the link user -> boxes is gone
    batch INTEGER,                    -- NULL while pending
    PRIMARY KEY (task_id, user)
);
CREATE TABLE IF NOT EXISTS seen_key (
    task_id TEXT NOT NULL,
    enc BLOB NOT NULL,
    PRIMARY KEY (task_id, enc)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outbox (
    task_id TEXT NOT NULL,
    batch INTEGER NOT NULL,
    batch_id TEXT NOT NULL,           -- random, so the aggregator can tell a redelivery from a new batch
    users INTEGER NOT NULL,
    boxes BLOB NOT NULL,              -- permuted
    final INTEGER NOT NULL,
    dropped_users INTEGER NOT NULL,
    PRIMARY KEY (task_id, batch)
);
"""


class ShuffleError(PairwiseError, ValueError):
    """A submission the shuffler refuses; ``code`` says why (for the JSON reply)."""

    def __init__(self, message: str, code: str = "refused") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class TaskInfo:
    """What the shuffler needs of a task: from the aggregator's public description (``task_info``)."""

    task_id: str
    min_users: int
    max_boxes: int
    box_bytes: int
    info: dict  # {"protocol": ..., "spec": {...}} as the aggregator describes the task

    @classmethod
    def from_info(cls, task_id: str, info: dict) -> TaskInfo:
        """From the aggregator's description of a task (``protocol`` must be ``shuffle-histogram``)."""
        from .histogram import HistogramTask, box_bytes, max_boxes

        if info.get("protocol") != "shuffle-histogram":
            raise ShuffleError(f"task {task_id!r} is a {info.get('protocol')!r} task, not a shuffle task", "wrong_task")
        spec = info.get("spec")
        try:
            task = HistogramTask.from_spec(spec)  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ShuffleError(f"task {task_id!r} has unusable parameters ({exc})", "bad_task") from None
        public = {"protocol": info["protocol"], "spec": dict(spec)}  # type: ignore[arg-type]
        return cls(task_id, task.min_users, max_boxes(task), box_bytes(), public)


@dataclass(frozen=True)
class Batch:
    """A cut batch, ready for the aggregator: permuted boxes of ``users`` users (no names)."""

    task_id: str
    batch: int
    batch_id: str
    users: int
    boxes: bytes
    final: bool
    dropped_users: int

    @property
    def count(self) -> int:
        return 0 if not self.boxes else len(self.boxes) // sealed.box_size(sealed.LABEL_BYTES)


class ShufflerStore(SQLiteStore):
    """The shuffler's state in one SQLite file (:class:`pairwise.protocols.service.storage.SQLiteStore`: WAL,
    ``synchronous=FULL``, 0600, one lock per running shuffler); every change is committed before any reply.

    ``path=None`` keeps it in memory (tests).  Methods are thread-safe: the
    connection threads and the forwarder share one store.
    """

    what = "shuffler state"

    def __init__(self, path: str | None) -> None:
        super().__init__(path, schema=_SCHEMA, version=_SCHEMA_VERSION, meta={"kind": "collect-shuffler"})

    def _check_meta(self, rows: dict[str, str]) -> None:
        if rows.get("kind") != "collect-shuffler":
            raise StorageError(
                f"{self.path} is not the state of a collect shuffler (it is a "
                f"{rows.get('kind', 'different')} file); give the shuffler its own --state"
            )

    # ---------------------------------------------------------------- tasks
    def task(self, task_id: str) -> tuple[TaskInfo, str] | None:
        """(task info, status) of a known task, else None."""
        rows = self._read("SELECT params, status FROM task WHERE task_id = ?", (task_id,))
        if not rows:
            return None
        return TaskInfo.from_info(task_id, json.loads(rows[0][0])), rows[0][1]

    def remember_task(self, info: TaskInfo) -> None:
        """Record a task's parameters (as fetched from the aggregator) if it is new."""
        self._write(
            lambda db: db.execute(
                "INSERT OR IGNORE INTO task(task_id, params, status) VALUES (?, ?, 'open')",
                (info.task_id, json.dumps(info.info, sort_keys=True)),
            )
        )

    def tasks_with_work(self) -> list[str]:
        """Tasks not yet delivered in full (open, or final with an outbox)."""
        return [r[0] for r in self._read("SELECT task_id FROM task WHERE status != 'done' ORDER BY task_id")]

    def pending_users(self, task_id: str) -> int:
        return self._read("SELECT COUNT(*) FROM submission WHERE task_id = ? AND batch IS NULL", (task_id,))[0][0]

    # ---------------------------------------------------------------- submissions
    def submit(self, info: TaskInfo, user: str, data: bytes) -> int:
        """Store one user's boxes (``data``: k boxes back to back); returns k. Raises :class:`ShuffleError`."""
        size = info.box_bytes
        if not isinstance(user, str) or not user:
            raise ShuffleError("a submission needs an authenticated user name", "unauthorized")
        if len(data) == 0 or len(data) % size:
            raise ShuffleError(
                f"a submission is a whole number of {size}-byte boxes, got {len(data)} bytes", "malformed"
            )
        k = len(data) // size
        if k > info.max_boxes:
            raise ShuffleError(
                f"{k} boxes is more than a user of this task sends (at most {info.max_boxes})", "malformed"
            )
        encs = []
        for i in range(k):
            box = data[i * size : (i + 1) * size]
            try:
                encs.append(sealed.enc_of(box))
            except sealed.SealedBoxError as exc:
                raise ShuffleError(f"box {i + 1} of the submission is malformed: {exc}", "malformed") from None
        if len(set(encs)) != k:
            raise ShuffleError("the submission repeats a box (the same ephemeral key twice)", "replayed")

        def tx(db):
            st = db.execute("SELECT status FROM task WHERE task_id = ?", (info.task_id,)).fetchone()
            if st is None:
                raise ShuffleError(f"unknown task {info.task_id!r}", "unknown_task")
            if st[0] != "open":
                raise ShuffleError(f"task {info.task_id!r} is closed: its last batch left the shuffler", "closed")
            if db.execute("SELECT 1 FROM submission WHERE task_id = ? AND user = ?", (info.task_id, user)).fetchone():
                raise ShuffleError(
                    f"{user!r} already submitted to task {info.task_id!r} (one submission per user)", "duplicate"
                )
            try:
                db.executemany("INSERT INTO seen_key(task_id, enc) VALUES (?, ?)", [(info.task_id, e) for e in encs])
            except sqlite3.IntegrityError:
                raise ShuffleError(
                    "the submission repeats a box already submitted to this task (a replay)", "replayed"
                ) from None
            db.execute(
                "INSERT INTO submission(task_id, user, boxes) VALUES (?, ?, ?)", (info.task_id, user, bytes(data))
            )
            return k

        return self._write(tx)

    # ---------------------------------------------------------------- batches
    def cut_batch(self, task_id: str, *, final: bool, at_least: int | None = None) -> Batch | None:
        """Cut a batch of the pending submissions into the outbox (one transaction); None if there is none.

        Not final: only with at least ``max(n, at_least)`` pending users.
        Final: the task closes; pending users go out if there are at least n
        of them, else they are dropped (their boxes deleted, their number
        reported) -- a batch of fewer than n users is never forwarded.
        """

        def tx(db):
            row = db.execute("SELECT params, status, next_batch FROM task WHERE task_id = ?", (task_id,)).fetchone()
            if row is None or row[1] != "open":
                return None
            info = TaskInfo.from_info(task_id, json.loads(row[0]))
            pending = db.execute(
                "SELECT user, boxes FROM submission WHERE task_id = ? AND batch IS NULL", (task_id,)
            ).fetchall()
            need = max(info.min_users, int(at_least or 0))
            if not final and len(pending) < need:
                return None
            k = int(row[2])
            dropped = 0
            if len(pending) >= info.min_users:
                blob = b"".join(p[1] for p in pending)
                arr = np.frombuffer(blob, dtype=np.uint8).reshape(-1, info.box_bytes)
                shuffled = arr[secure_permutation(arr.shape[0])].tobytes()
                users = len(pending)
            else:  # final, too few to hide anyone: never forwarded
                shuffled, users, dropped = b"", 0, len(pending)
            db.execute(
                "UPDATE submission SET boxes = NULL, batch = ? WHERE task_id = ? AND batch IS NULL", (k, task_id)
            )
            batch_id = os.urandom(16).hex()
            db.execute(
                "INSERT INTO outbox(task_id, batch, batch_id, users, boxes, final, dropped_users) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (task_id, k, batch_id, users, shuffled, int(final), dropped),
            )
            db.execute(
                "UPDATE task SET next_batch = ?, status = ?, dropped_users = dropped_users + ? WHERE task_id = ?",
                (k + 1, "final" if final else "open", dropped, task_id),
            )
            return Batch(task_id, k, batch_id, users, shuffled, final, dropped)

        return self._write(tx)

    def outbox(self) -> list[Batch]:
        """Batches cut but not yet acknowledged by the aggregator, oldest first."""
        rows = self._read(
            "SELECT task_id, batch, batch_id, users, boxes, final, dropped_users FROM outbox ORDER BY task_id, batch"
        )
        return [Batch(r[0], r[1], r[2], r[3], bytes(r[4]), bool(r[5]), r[6]) for r in rows]

    def acknowledge(self, batch: Batch) -> None:
        """The aggregator committed ``batch``: drop it from the outbox; a delivered final batch ends the task."""

        def tx(db):
            db.execute("DELETE FROM outbox WHERE task_id = ? AND batch = ?", (batch.task_id, batch.batch))
            if batch.final:
                db.execute("UPDATE task SET status = 'done' WHERE task_id = ?", (batch.task_id,))

        self._write(tx)


# ---------------------------------------------------------------------------------------------------------
# The service: requests and the forwarder (transport-independent; the server glue calls these)
# ---------------------------------------------------------------------------------------------------------


class Upstream:
    """What the shuffler asks of the aggregator (implemented over the aggregator's wire format).

    ``task(task_id)`` returns the task's public description (the
    aggregator's ``task_info``: ``protocol``, ``state``, ``spec``) or raises
    :class:`ShuffleError` with code ``unknown_task``; ``deliver(batch)``
    returns once the aggregator has committed the batch (idempotent in
    ``batch.batch_id``).
    """

    def task(self, task_id: str) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def deliver(self, batch: Batch) -> None:  # pragma: no cover - interface
        raise NotImplementedError


#: Refusal codes of the aggregator after which a batch is discarded instead of retried.
PERMANENT_REFUSALS = frozenset({"unknown", "unknown_task", "failed", "closed", "refused"})
#: Task states (as the aggregator reports them) in which the shuffler still accepts submissions.
OPEN_STATUSES = frozenset({"open"})


class Shuffler:
    """The shuffler's logic: accept submissions, cut batches, deliver them (thread-safe).

    ``batch_size``: cut a batch as soon as this many users are pending (at
    least the task's n); ``None``: one batch per task, when it closes.
    """

    def __init__(
        self, store: ShufflerStore, upstream: Upstream, *, batch_size: int | None = None, log=lambda msg: None
    ) -> None:
        if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) < 1):
            raise ValueError(f"batch size must be a positive number of users, got {batch_size!r}")
        self.store, self.upstream, self.batch_size, self.log = store, upstream, batch_size, log
        self._fetch_lock = threading.Lock()

    def task_info(self, task_id: str) -> TaskInfo:
        """A task's parameters: from the store, or fetched from the aggregator once (then remembered)."""
        if not isinstance(task_id, str) or not 0 < len(task_id) <= 128:
            raise ShuffleError(f"a task id is a string of 1..128 characters, got {task_id!r}", "malformed")
        known = self.store.task(task_id)
        if known is not None:
            return known[0]
        with self._fetch_lock:
            known = self.store.task(task_id)
            if known is not None:
                return known[0]
            desc = self.upstream.task(task_id)
            info = TaskInfo.from_info(task_id, desc)
            if desc.get("state") not in OPEN_STATUSES:
                raise ShuffleError(
                    f"task {task_id!r} is not open for submissions (it is {desc.get('state')!r})", "closed"
                )
            self.store.remember_task(info)
            return info

    def submit(self, user: str, task_id: str, data: bytes) -> int:
        """One user's submission (``user``: the name its certificate proved); committed before this returns."""
        info = self.task_info(task_id)
        k = self.store.submit(info, user, data)
        if self.batch_size is not None and self.store.pending_users(task_id) >= max(self.batch_size, info.min_users):
            self.cut(task_id, final=False)
        return k

    def cut(self, task_id: str, *, final: bool) -> Batch | None:
        b = self.store.cut_batch(task_id, final=final, at_least=self.batch_size)
        if b is not None:
            self.log(
                f"task {task_id}: batch {b.batch} cut: {b.users} users, {b.count} boxes"
                + (f", {b.dropped_users} users dropped (fewer than n)" if b.dropped_users else "")
                + (" (final)" if final else "")
            )
        return b

    def step(self) -> None:
        """One round of the forwarder: close the tasks the aggregator closed, deliver the outbox."""
        for task_id in self.store.tasks_with_work():
            known = self.store.task(task_id)
            if known is None or known[1] != "open":
                continue
            try:
                status = self.upstream.task(task_id).get("state")
            except (ShuffleError, OSError) as exc:
                self.log(f"task {task_id}: cannot read its status from the aggregator ({exc}); retrying")
                continue
            if status not in OPEN_STATUSES:
                self.cut(task_id, final=True)
        for b in self.store.outbox():
            try:
                self.upstream.deliver(b)
            except ShuffleError as exc:
                if exc.code in PERMANENT_REFUSALS:  # the task is gone or finished: the batch can never count
                    self.log(f"task {b.task_id}: batch {b.batch} refused for good ({exc}); discarded")
                    self.store.acknowledge(b)
                    continue
                self.log(f"task {b.task_id}: batch {b.batch} not delivered ({exc}); retrying")
                return  # keep the order of batches
            except OSError as exc:
                self.log(f"task {b.task_id}: batch {b.batch} not delivered ({exc}); retrying")
                return
            self.store.acknowledge(b)
            self.log(f"task {b.task_id}: batch {b.batch} delivered")


# ---------------------------------------------------------------------------------------------------------
# Transport: the shuffler's listener (users) and the users' submit call
# ---------------------------------------------------------------------------------------------------------

#: Session id and protocol digest of the hello on every connection of a user to the shuffler.
SESSION_ID = b"pairwise-collect-shuffler"
PROTOCOL_DIGEST = b"pairwise-collect-shuffler/1"
ROLE_SHUFFLER, ROLE_SUBMITTER = "collect-shuffler", "collect-user"  # as pairwise.protocols.collect.wire
#: Largest submission frame the shuffler reads (MAX_BINS + 1 boxes of 54 bytes is about 221 KB).
SUBMIT_FRAME_MAX = 1 << 20


def _json_io():
    from pairwise.protocols.service.frames import recv_json, send_json

    return send_json, recv_json


class ShufflerServer:
    """The shuffler's listener: one thread per connection (at most ``max_connections`` at once).

    ``user_roles``: certificate roles allowed to submit (``None``: any role
    of the CA).  Each connection: TLS (the certificate names the user), the
    hello, one ``submit`` request and its boxes, one reply, close.  A
    forwarder thread runs :meth:`Shuffler.step` every ``poll`` seconds.
    """

    def __init__(
        self,
        shuffler: Shuffler,
        host: str,
        port: int,
        *,
        tls=None,
        insecure: bool = False,
        timeout: float = 30.0,
        poll: float = 1.0,
        max_connections: int = 64,
        user_roles=None,
        log=lambda msg: None,
    ) -> None:
        from pairwise.mpc.channel import TCPListener

        self.shuffler, self.timeout, self.poll, self.log = shuffler, float(timeout), float(poll), log
        self.user_roles = user_roles
        self.listener = TCPListener(host, port, backlog=min(128, 2 * max_connections), tls=tls, insecure=insecure)
        self.host, self.port = host, self.listener.port
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def serve_forever(self) -> None:
        from pairwise.mpc.errors import ChannelError, ChannelTimeout

        fwd = threading.Thread(target=self._forward, name="shuffler-forwarder", daemon=True)
        fwd.start()
        try:
            while not self._stop.is_set():
                try:
                    pending = self.listener.accept_socket(timeout=0.5)
                except ChannelTimeout:
                    continue
                except ChannelError as exc:
                    if self._stop.is_set():
                        break
                    self.log(f"accept failed: {exc}")
                    continue
                if not self._slots.acquire(timeout=self.timeout):
                    pending.close()
                    continue
                t = threading.Thread(target=self._serve, args=(pending,), daemon=True)
                self._threads = [x for x in self._threads if x.is_alive()] + [t]
                t.start()
        finally:
            self._stop.set()
            self.listener.close()
            fwd.join(self.timeout)
            for t in self._threads:
                t.join(self.timeout)

    def stop(self) -> None:
        self._stop.set()

    def _forward(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.shuffler.step()
            except Exception as exc:  # noqa: BLE001 - the forwarder keeps running; the outbox is durable
                self.log(f"forwarder: {exc}")
        try:
            self.shuffler.step()  # a last delivery attempt on a clean stop
        except Exception as exc:  # noqa: BLE001
            self.log(f"forwarder: {exc}")

    def _serve(self, pending) -> None:
        from pairwise.mpc.channel import handshake
        from pairwise.mpc.errors import ChannelError

        send_json, recv_json = _json_io()
        ch = None
        try:
            ch = pending.open(
                recv_timeout=self.timeout, handshake_timeout=min(self.timeout, 10.0), peer_roles=self.user_roles
            )
            handshake(
                ch,
                ROLE_SHUFFLER,
                SESSION_ID,
                PROTOCOL_DIGEST,
                peer_role=ROLE_SUBMITTER,
                extra_label="protocol",
                timeout=self.timeout,
            )
            req = recv_json(ch)
            try:
                if req.get("op") != "submit":
                    raise ShuffleError(f"unknown request {req.get('op')!r} (the shuffler takes 'submit')", "malformed")
                # the boxes follow the request at once: read them (bounded) before any refusal, so the
                # reply is not lost to a reset on unread data
                data = ch.recv(max_size=SUBMIT_FRAME_MAX)
                user = ch.peer_identity.name if ch.peer_identity is not None else req.get("user")
                if not isinstance(user, str) or not 1 <= len(user) <= 64:  # plaintext loopback: the user names itself
                    raise ShuffleError(
                        'a user without a certificate must name itself ("user": NAME) on plaintext loopback',
                        "malformed",
                    )
                task_id, k = req.get("task"), req.get("boxes")
                if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k:
                    raise ShuffleError(f"'boxes' must be a positive integer, got {k!r}", "malformed")
                info = self.shuffler.task_info(task_id)
                if len(data) != k * info.box_bytes:
                    raise ShuffleError(
                        f"announced {k} boxes ({k * info.box_bytes} bytes), sent {len(data)} bytes", "malformed"
                    )
                accepted = self.shuffler.submit(user, task_id, data)
                send_json(ch, {"ok": True, "accepted": accepted})
            except ShuffleError as exc:
                send_json(ch, {"ok": False, "code": exc.code, "error": str(exc)})
        except (ChannelError, ValueError, OSError) as exc:
            self.log(f"connection from {pending.peer}: {exc}")
        finally:
            if ch is not None:
                ch.close()
            else:
                pending.close()
            self._slots.release()


def submit(
    host: str,
    port: int,
    task_id: str,
    boxes: list[bytes],
    *,
    tls=None,
    insecure: bool = False,
    peer_names=None,
    user: str | None = None,
    timeout: float = 30.0,
    connect_timeout: float = 10.0,
) -> int:
    """A user's submission of its sealed boxes to the shuffler; returns the number accepted.

    Raises :class:`ShuffleError` (with the shuffler's ``code``) when refused, a
    :class:`pairwise.mpc.errors.ChannelError` when the shuffler cannot be
    reached.  ``peer_names``: the shuffler's certificate name(s) to accept;
    ``user``: this user's name on a plaintext loopback connection (with TLS
    the certificate names the user).
    """
    from pairwise.mpc.channel import TCPChannel, handshake

    send_json, recv_json = _json_io()
    if not boxes:
        raise ShuffleError("nothing to submit", "malformed")
    ch = TCPChannel.connect(
        host, port, deadline=connect_timeout, timeout=timeout, tls=tls, insecure=insecure, peer_names=peer_names
    )
    try:
        handshake(
            ch,
            ROLE_SUBMITTER,
            SESSION_ID,
            PROTOCOL_DIGEST,
            peer_role=ROLE_SHUFFLER,
            extra_label="protocol",
            timeout=timeout,
        )
        send_json(
            ch,
            {"op": "submit", "task": task_id, "boxes": len(boxes), **({"user": user} if tls is None and user else {})},
        )
        ch.send(b"".join(boxes))
        reply = recv_json(ch)
    finally:
        ch.close()
    if not reply.get("ok"):
        raise ShuffleError(
            f"the shuffler refused the submission: {reply.get('error', 'no reason given')}",
            str(reply.get("code", "refused")),
        )
    return int(reply["accepted"])


class AggregatorUpstream(Upstream):
    """The aggregator as the shuffler's upstream: ``shuffle_task`` and ``shuffle_batch`` over its wire format.

    One connection per call (the shuffler calls rarely: once per new task,
    once per poll of an open task, once per batch), with the shuffler's
    ``server`` certificate; ``server_name`` pins the aggregator's name.
    """

    def __init__(
        self,
        address: str,
        *,
        tls=None,
        insecure: bool = False,
        server_name: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
    ) -> None:
        from .wire import parse_address

        self.addr = parse_address(address)
        self.tls, self.insecure, self.server_name = tls, insecure, server_name
        self.timeout, self.connect_timeout = float(timeout), float(connect_timeout)

    def _connect(self):
        from .wire import ROLE_SHUFFLER as ROLE
        from .wire import connect

        return connect(
            self.addr,
            ROLE,
            tls=self.tls,
            insecure=self.insecure,
            server_name=self.server_name,
            connect_timeout=self.connect_timeout,
            timeout=self.timeout,
        )

    def task(self, task_id: str) -> dict:
        from .wire import UnknownTask, call

        ch = self._connect()
        try:
            return call(ch, {"op": "shuffle_task", "task": task_id}, timeout=self.timeout)["task"]
        except UnknownTask as exc:
            raise ShuffleError(str(exc), "unknown_task") from None
        finally:
            ch.close()

    def deliver(self, batch: Batch) -> None:
        """Send one batch (header, then the boxes in frames of whole boxes) and wait for the aggregator's commit."""
        from .aggregator_shuffle import frame_boxes
        from .wire import CollectError, raise_refusal

        size = sealed.box_size(sealed.LABEL_BYTES)
        per = frame_boxes(size) * size
        send_json, recv_json = _json_io()
        ch = self._connect()
        try:
            send_json(
                ch,
                {
                    "op": "shuffle_batch",
                    "task": batch.task_id,
                    "batch": batch.batch,
                    "batch_id": batch.batch_id,
                    "users": batch.users,
                    "boxes": batch.count,
                    "final": batch.final,
                    "dropped_users": batch.dropped_users,
                },
            )
            for i in range(0, len(batch.boxes), per):
                ch.send(batch.boxes[i : i + per])
            ch.flush()
            reply = recv_json(ch, timeout=self.timeout)
        finally:
            ch.close()
        if not reply.get("ok"):
            try:
                raise_refusal("the aggregator", reply)
            except CollectError as exc:
                raise ShuffleError(str(exc), str(reply.get("code", "refused"))) from None


def open_store(state_dir: str | None) -> ShufflerStore:
    """The shuffler's state: ``STATE_DIR/collect-shuffler.db`` (directory created with mode 0700), or in memory."""
    if state_dir is None:
        return ShufflerStore(None)
    state_directory(state_dir)
    return ShufflerStore(os.path.join(state_dir, "collect-shuffler.db"))


@dataclass(frozen=True)
class ShufflerOptions:
    """The settings of :func:`run_shuffler`: ``state_dir`` (None: in memory), ``tls`` (this shuffler's
    :class:`pairwise.mpc.tls.TLSConfig`; None: plaintext, loopback only unless ``insecure``), the
    aggregator's pinned ``upstream_name``, ``batch_size`` (None: the task's), ``poll`` (seconds between
    checks of the aggregator) and ``timeout`` (seconds any wait may take)."""

    state_dir: str | None = None
    tls: Any = None
    insecure: bool = False
    upstream_name: str | None = None
    batch_size: int | None = None
    poll: float = 1.0
    timeout: float = 60.0

    def __post_init__(self) -> None:
        for name in ("poll", "timeout"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ShuffleError(f"{name} must be a positive number of seconds, got {v!r}")


def run_shuffler(
    listen: str,
    upstream: str,
    *,
    options: ShufflerOptions | None = None,
    on_listening=None,
    log=None,
    stop_event: threading.Event | None = None,
    **legacy: Any,
) -> None:
    """``pairwise collect shuffler``: serve users and forward batches until ``stop_event`` is set (or SIGTERM).

    ``options``: a :class:`ShufflerOptions`, or its fields as keywords."""
    from .wire import parse_address

    o = with_legacy(options, ShufflerOptions, legacy, "run_shuffler")
    no_more_keywords(legacy, "run_shuffler")
    state_dir, tls, insecure, upstream_name, batch_size, poll, timeout = (
        o.state_dir,
        o.tls,
        o.insecure,
        o.upstream_name,
        o.batch_size,
        o.poll,
        o.timeout,
    )

    host, port = parse_address(listen)
    store = open_store(state_dir)
    try:
        shuf = Shuffler(
            store,
            AggregatorUpstream(upstream, tls=tls, insecure=insecure, server_name=upstream_name, timeout=timeout),
            batch_size=batch_size,
            log=log or (lambda m: None),
        )
        srv = ShufflerServer(
            shuf,
            host,
            port,
            tls=tls,
            insecure=insecure,
            timeout=timeout,
            poll=poll,
            user_roles=None if tls is None else ("user",),
            log=log or (lambda m: None),
        )
        if stop_event is not None:
            threading.Thread(target=lambda: (stop_event.wait(), srv.stop()), daemon=True).start()
        if on_listening is not None:
            on_listening(srv)
        srv.serve_forever()
    finally:
        store.close()
