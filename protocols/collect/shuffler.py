"""The shuffler: strips sender identities from sealed messages it cannot read, permutes them, forwards them.

What it does
    ``pairwise collect shuffler --listen HOST:PORT --upstream AGGREGATOR
    --state DIR --tls DIR --name NAME`` is a process of its own between the
    users and the aggregator of a shuffle-model task (Balcer-Cheu's trusted
    shuffler; :mod:`pairwise.protocols.collect.histogram`):

    1. A user connects (mutual TLS 1.3; the certificate names the user) and
       submits its sealed boxes for a task: ``{"op": "submit", "task": ID,
       "boxes": k}``, then one frame of k boxes of the task's fixed size.
    2. The shuffler checks what it can without reading anything: the task is
       a shuffle task and still open, 1 <= k <= the task's most boxes per user
       (d + 1), every box has the format byte and the size, and
       :class:`ShufflerStore` commits the submission before it answers.
    3. Batches: when a task closes (the aggregator's status says so, polled
       every ``--poll`` seconds) or ``--batch-size`` users are pending, the
       store cuts a batch in one transaction: the pending boxes of at least
       n users (the task's minimum; fewer are never forwarded) are permuted
       uniformly with the OS CSPRNG
       (:func:`pairwise.protocols.ldp.shuffle.secure_permutation`), written
       to an outbox with the number of users, and the link from users to
       boxes is deleted.  The outbox is then delivered to the aggregator and
       removed once acknowledged; a batch the aggregator already has (the
       shuffler crashed before the acknowledgement) is acknowledged again,
       not counted twice.

Replays and duplicates
    One submission per (task, certificate name): a second one is refused
    (``duplicate``).  Every box carries a fresh ephemeral public key
    (:func:`pairwise.protocols.collect.sealed.enc_of`); the shuffler refuses a
    submission that repeats a key it has seen for the task, in the submission
    or from anyone earlier (``replayed``): a replayed or copied box is never
    forwarded.  All of this reads public bytes only.  The aggregator refuses
    a batch id twice and opens a box only under its task's context.

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

import numpy as np

from pairwise.protocols.ldp.shuffle import secure_permutation

from . import sealed

__all__ = [
    "ShuffleError",
    "ShufflerStore",
    "Batch",
    "TaskInfo",
]

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS task (
    task_id TEXT PRIMARY KEY,
    params TEXT NOT NULL,             -- the aggregator's public parameters (JSON)
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


class ShuffleError(ValueError):
    """A submission the shuffler refuses; ``code`` says why (for the JSON reply)."""

    def __init__(self, message: str, code: str = "refused") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class TaskInfo:
    """What the shuffler needs of a task's public parameters."""

    task_id: str
    min_users: int
    max_boxes: int
    box_bytes: int
    params: dict

    @classmethod
    def from_params(cls, task_id: str, params: dict) -> "TaskInfo":
        """From the aggregator's task description (``protocol`` must be ``shuffle-histogram``)."""
        from .histogram import HistogramTask, box_bytes, max_boxes

        if params.get("protocol") != "shuffle-histogram":
            raise ShuffleError(f"task {task_id!r} is a {params.get('protocol')!r} task, not a shuffle task", "wrong_task")
        try:
            task = HistogramTask(epsilon=params["epsilon"], delta=params["delta"], lower=params["lower"],
                                 upper=params["upper"], min_users=params["min_users"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ShuffleError(f"task {task_id!r} has unusable parameters ({exc})", "bad_task") from None
        return cls(task_id, task.min_users, max_boxes(task), box_bytes(), dict(params))


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


class ShufflerStore:
    """The shuffler's state in one SQLite file (WAL, ``synchronous=FULL``, committed before any reply).

    ``path=None`` keeps it in memory (tests).  Methods are thread-safe: the
    connection threads and the forwarder share one store.
    """

    what = "shuffler state"

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        where = path or ":memory:"
        try:
            self._db = sqlite3.connect(where, check_same_thread=False, isolation_level=None, timeout=30.0)
            if path is not None:
                os.chmod(path, 0o600)
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta(key, value) VALUES ('schema', ?)", (str(_SCHEMA_VERSION),))
            elif int(row[0]) > _SCHEMA_VERSION:
                raise OSError(f"the {self.what} {path} was written by a newer pairwise; upgrade pairwise")
        except sqlite3.Error as exc:
            raise OSError(f"cannot open the {self.what} {where}: {exc}") from exc

    def _write(self, fn):
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                out = fn(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return out

    def _read(self, sql: str, args: tuple = ()) -> list:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None  # type: ignore[assignment]

    # ---------------------------------------------------------------- tasks
    def task(self, task_id: str) -> tuple[TaskInfo, str] | None:
        """(task info, status) of a known task, else None."""
        rows = self._read("SELECT params, status FROM task WHERE task_id = ?", (task_id,))
        if not rows:
            return None
        return TaskInfo.from_params(task_id, json.loads(rows[0][0])), rows[0][1]

    def remember_task(self, info: TaskInfo) -> None:
        """Record a task's parameters (as fetched from the aggregator) if it is new."""
        self._write(lambda db: db.execute("INSERT OR IGNORE INTO task(task_id, params, status) VALUES (?, ?, 'open')",
                                          (info.task_id, json.dumps(info.params, sort_keys=True))))

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
            raise ShuffleError(f"a submission is a whole number of {size}-byte boxes, got {len(data)} bytes", "malformed")
        k = len(data) // size
        if k > info.max_boxes:
            raise ShuffleError(f"{k} boxes is more than a user of this task sends (at most {info.max_boxes})", "malformed")
        encs = []
        for i in range(k):
            box = data[i * size:(i + 1) * size]
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
                raise ShuffleError(f"{user!r} already submitted to task {info.task_id!r} (one submission per user)",
                                   "duplicate")
            try:
                db.executemany("INSERT INTO seen_key(task_id, enc) VALUES (?, ?)", [(info.task_id, e) for e in encs])
            except sqlite3.IntegrityError:
                raise ShuffleError("the submission repeats a box already submitted to this task (a replay)",
                                   "replayed") from None
            db.execute("INSERT INTO submission(task_id, user, boxes) VALUES (?, ?, ?)", (info.task_id, user, bytes(data)))
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
            info = TaskInfo.from_params(task_id, json.loads(row[0]))
            pending = db.execute("SELECT user, boxes FROM submission WHERE task_id = ? AND batch IS NULL",
                                 (task_id,)).fetchall()
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
            db.execute("UPDATE submission SET boxes = NULL, batch = ? WHERE task_id = ? AND batch IS NULL", (k, task_id))
            batch_id = os.urandom(16).hex()
            db.execute("INSERT INTO outbox(task_id, batch, batch_id, users, boxes, final, dropped_users) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)", (task_id, k, batch_id, users, shuffled, int(final), dropped))
            db.execute("UPDATE task SET next_batch = ?, status = ?, dropped_users = dropped_users + ? WHERE task_id = ?",
                       (k + 1, "final" if final else "open", dropped, task_id))
            return Batch(task_id, k, batch_id, users, shuffled, final, dropped)

        return self._write(tx)

    def outbox(self) -> list[Batch]:
        """Batches cut but not yet acknowledged by the aggregator, oldest first."""
        rows = self._read("SELECT task_id, batch, batch_id, users, boxes, final, dropped_users FROM outbox "
                          "ORDER BY task_id, batch")
        return [Batch(r[0], r[1], r[2], r[3], bytes(r[4]), bool(r[5]), r[6]) for r in rows]

    def acknowledge(self, batch: Batch) -> None:
        """The aggregator committed ``batch``: drop it from the outbox; a delivered final batch ends the task."""

        def tx(db):
            db.execute("DELETE FROM outbox WHERE task_id = ? AND batch = ?", (batch.task_id, batch.batch))
            if batch.final:
                db.execute("UPDATE task SET status = 'done' WHERE task_id = ?", (batch.task_id,))

        self._write(tx)
