"""Durable state of the collect aggregator: tasks, registrations, reports, pairs and results, in one SQLite file.

What it does
    :class:`AggregatorStore` keeps ``DIR/collect-aggregator.db`` (the
    conventions of :class:`pairwise.protocols.service.storage.SQLiteStore`:
    0700 directory, 0600 file, WAL, ``synchronous=FULL``, one lock file per
    running aggregator):

    * ``tasks``: id, protocol, spec (public parameters, JSON), state
      (``open``, ``running``, ``closed``, ``done``, ``failed``), the reason of a
      failure, the stored result (JSON) once computed;
    * ``users``: who joined which task (certificate name), its public label
      and its public assignment (JSON), in join order;
    * ``reports``: one local-model report per (task, user), primary key
      (task, user): a report can never be counted twice;
    * ``pairs``: the sampled 2PC sessions of a task (garbler, evaluator, round),
      their state (``planned``, ``started``, ``completed``, ``dropped``), the
      evaluator's noisy value and the relayed byte count;
    * ``task_keys``: the private X25519 key of each shuffle task's sealed
      boxes (:mod:`pairwise.protocols.collect.sealed`), written with the task;
    * ``shuffle_batches``: the shuffler's batches (permuted sealed boxes and
      their number of users, no names), primary key (task, batch id): a
      redelivered batch is never stored or counted twice.

Durability contract
    Every method that changes state is one transaction that is on disk when
    it returns, and the aggregator calls it *before* it acknowledges
    anything: a registration before ``join`` is answered, a report before
    ``report`` is, the sampled pairs before any user hears of them, a
    session's ``started`` mark before its relay carries a byte, a pair's
    value before the evaluator's ``pair_result`` is acknowledged, the result
    before ``result`` returns it.  A restarted aggregator therefore never
    counts a report twice, never runs a session twice and never re-pairs a
    user.

Security model
    The file holds public parameters, users' names, labels and assignments,
    randomized reports and noisy values: what the aggregator is allowed to
    learn; and the private keys of shuffle tasks (a secret: the file is 0600).  No user value is ever stored (none is ever received).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from ..service.storage import SQLiteStore, StorageError, state_directory

__all__ = ["SCHEMA_VERSION", "AggregatorStore", "PairRow", "StorageError", "TaskRow", "open_store"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY, protocol TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL, creator TEXT NOT NULL,
    created REAL NOT NULL, closed REAL, finished REAL, reason TEXT NOT NULL DEFAULT '', result TEXT);
CREATE TABLE IF NOT EXISTS users (
    task TEXT NOT NULL REFERENCES tasks(id), name TEXT NOT NULL, seq INTEGER NOT NULL, label INTEGER,
    assignment TEXT NOT NULL, joined REAL NOT NULL, PRIMARY KEY (task, name));
CREATE TABLE IF NOT EXISTS reports (
    task TEXT NOT NULL, name TEXT NOT NULL, report TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (task, name), FOREIGN KEY (task, name) REFERENCES users(task, name));
CREATE TABLE IF NOT EXISTS pairs (
    task TEXT NOT NULL REFERENCES tasks(id), session INTEGER NOT NULL, round INTEGER NOT NULL,
    garbler TEXT NOT NULL, evaluator TEXT NOT NULL, state TEXT NOT NULL, value INTEGER, bytes INTEGER NOT NULL
    DEFAULT 0, reason TEXT NOT NULL DEFAULT '', updated REAL NOT NULL, PRIMARY KEY (task, session));
CREATE TABLE IF NOT EXISTS task_keys (
    task TEXT PRIMARY KEY REFERENCES tasks(id), private_key BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS shuffle_batches (
    task TEXT NOT NULL REFERENCES tasks(id), batch_id TEXT NOT NULL, seq INTEGER NOT NULL, users INTEGER NOT NULL,
    boxes BLOB NOT NULL, final INTEGER NOT NULL, dropped_users INTEGER NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (task, batch_id));
"""

#: task states
OPEN, RUNNING, CLOSED, DONE, FAILED = "open", "running", "closed", "done", "failed"
#: pair states
PLANNED, STARTED, COMPLETED, DROPPED = "planned", "started", "completed", "dropped"


@dataclass
class TaskRow:
    id: str
    protocol: str
    spec: dict
    state: str
    creator: str
    created: float
    closed: float | None = None
    finished: float | None = None
    reason: str = ""
    result: dict | None = None


@dataclass
class PairRow:
    session: int
    round: int
    garbler: str
    evaluator: str
    state: str
    value: int | None = None
    bytes: int = 0
    reason: str = ""
    extra: dict = field(default_factory=dict)


class AggregatorStore(SQLiteStore):
    """The aggregator's SQLite state (see the module docstring)."""

    what = "aggregator state"

    def __init__(self, path: str | None) -> None:
        super().__init__(path, schema=_SCHEMA, version=SCHEMA_VERSION, meta={"kind": "collect-aggregator"})

    def _check_meta(self, rows: dict[str, str]) -> None:
        if rows.get("kind") != "collect-aggregator":
            raise StorageError(
                f"{self.path} is not the state of a collect aggregator (it is a "
                f"{rows.get('kind', 'different')} file); give the aggregator its own --state"
            )

    # ------------------------------------------------------------------ tasks
    def create_task(self, task_id: str, spec: dict, creator: str, *, private_key: bytes | None = None) -> TaskRow:
        """Store a new task (and, for a shuffle task, the private key of its sealed boxes, in the same transaction)."""
        now = time.time()

        def work(db) -> None:
            if db.execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone():
                from .wire import CollectError

                raise CollectError(f"task {task_id!r} exists already; choose another --id")
            db.execute(
                "INSERT INTO tasks(id, protocol, spec, state, creator, created) VALUES (?, ?, ?, ?, ?, ?)",
                (task_id, spec["protocol"], json.dumps(spec), OPEN, creator, now),
            )
            if private_key is not None:
                db.execute("INSERT INTO task_keys(task, private_key) VALUES (?, ?)", (task_id, bytes(private_key)))

        self._write(work)
        return TaskRow(task_id, spec["protocol"], spec, OPEN, creator, now)

    def tasks(self) -> list[TaskRow]:
        rows = self._read(
            "SELECT id, protocol, spec, state, creator, created, closed, finished, reason, result "
            "FROM tasks ORDER BY created, id"
        )
        return [
            TaskRow(
                r[0],
                r[1],
                json.loads(r[2]),
                r[3],
                r[4],
                r[5],
                r[6],
                r[7],
                r[8],
                None if r[9] is None else json.loads(r[9]),
            )
            for r in rows
        ]

    def set_state(self, task_id: str, state: str, *, reason: str = "", result: dict | None = None) -> None:
        """Move a task to ``state`` (``closed``/``running`` stamp ``closed``; ``done``/``failed`` stamp ``finished``)."""
        now = time.time()

        def work(db) -> None:
            if state in (CLOSED, RUNNING):
                db.execute("UPDATE tasks SET state = ?, closed = ? WHERE id = ?", (state, now, task_id))
            else:
                db.execute(
                    "UPDATE tasks SET state = ?, finished = ?, reason = ?, result = ? WHERE id = ?",
                    (state, now, reason, None if result is None else json.dumps(result), task_id),
                )

        self._write(work)

    # ------------------------------------------------------------------ users and reports
    def add_user(self, task_id: str, name: str, label: int | None, assignment: dict) -> bool:
        """Register ``name`` (True), or leave an existing registration as it is (False)."""

        def work(db) -> bool:
            if db.execute("SELECT 1 FROM users WHERE task = ? AND name = ?", (task_id, name)).fetchone():
                return False
            (seq,) = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM users WHERE task = ?", (task_id,)).fetchone()
            db.execute(
                "INSERT INTO users(task, name, seq, label, assignment, joined) VALUES (?, ?, ?, ?, ?, ?)",
                (task_id, name, seq, label, json.dumps(assignment), time.time()),
            )
            return True

        return self._write(work)

    def add_users(self, task_id: str, rows: list[tuple[str, int | None, dict]]) -> list[bool]:
        """Register every (name, label, assignment) of ``rows`` in one transaction (one commit for many users:
        the aggregator batches the joins that arrive while the previous commit waits for the disk)."""

        def work(db) -> list[bool]:
            (seq,) = db.execute("SELECT COALESCE(MAX(seq), 0) FROM users WHERE task = ?", (task_id,)).fetchone()
            out = []
            for name, label, assignment in rows:
                if db.execute("SELECT 1 FROM users WHERE task = ? AND name = ?", (task_id, name)).fetchone():
                    out.append(False)
                    continue
                seq += 1
                db.execute(
                    "INSERT INTO users(task, name, seq, label, assignment, joined) VALUES (?, ?, ?, ?, ?, ?)",
                    (task_id, name, seq, label, json.dumps(assignment), time.time()),
                )
                out.append(True)
            return out

        return self._write(work)

    def users(self, task_id: str) -> list[tuple[str, int | None, dict]]:
        """(name, label, assignment) of every registered user, in join order."""
        return [
            (r[0], r[1], json.loads(r[2]))
            for r in self._read("SELECT name, label, assignment FROM users WHERE task = ? ORDER BY seq", (task_id,))
        ]

    def add_report(self, task_id: str, name: str, report: dict) -> bool:
        """Store ``name``'s report (True); an identical one already stored is not stored again (False).

        A *different* report already stored raises :class:`~pairwise.protocols.collect.wire.AlreadyJoined`:
        one report per user and task, whatever the user sends later.
        """
        text = json.dumps(report, sort_keys=True)

        def work(db) -> bool:
            row = db.execute("SELECT report FROM reports WHERE task = ? AND name = ?", (task_id, name)).fetchone()
            if row is not None:
                if row[0] == text:
                    return False
                from .wire import AlreadyJoined

                raise AlreadyJoined(
                    f"a different report of {name!r} for task {task_id!r} was counted already; "
                    "one report per user, nothing changed"
                )
            db.execute(
                "INSERT INTO reports(task, name, report, at) VALUES (?, ?, ?, ?)", (task_id, name, text, time.time())
            )
            return True

        return self._write(work)

    def reports(self, task_id: str) -> list[tuple[str, dict]]:
        return [
            (r[0], json.loads(r[1]))
            for r in self._read("SELECT name, report FROM reports WHERE task = ? ORDER BY at, name", (task_id,))
        ]

    def report_count(self, task_id: str) -> int:
        return int(self._read("SELECT COUNT(*) FROM reports WHERE task = ?", (task_id,))[0][0])

    # ------------------------------------------------------------------ pairs
    def start_pairs(self, task_id: str, pairs: list[tuple[str, str, int]]) -> None:
        """Store the sampled pairs and move the task to ``running``, in one transaction."""
        now = time.time()

        def work(db) -> None:
            db.executemany(
                "INSERT INTO pairs(task, session, round, garbler, evaluator, state, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(task_id, s, rnd, g, e, PLANNED, now) for s, (g, e, rnd) in enumerate(pairs)],
            )
            db.execute("UPDATE tasks SET state = ?, closed = ? WHERE id = ?", (RUNNING, now, task_id))

        self._write(work)

    def pairs(self, task_id: str) -> list[PairRow]:
        return [
            PairRow(*r)
            for r in self._read(
                "SELECT session, round, garbler, evaluator, state, value, bytes, reason FROM pairs WHERE task = ? "
                "ORDER BY session",
                (task_id,),
            )
        ]

    def update_pair(
        self,
        task_id: str,
        session: int,
        state: str,
        *,
        value: int | None = None,
        nbytes: int | None = None,
        reason: str = "",
    ) -> None:
        def work(db) -> None:
            db.execute(
                "UPDATE pairs SET state = ?, value = COALESCE(?, value), bytes = COALESCE(?, bytes), "
                "reason = ?, updated = ? WHERE task = ? AND session = ?",
                (state, value, nbytes, reason, time.time(), task_id, session),
            )

        self._write(work)

    # ------------------------------------------------------------------ shuffle model
    def task_key(self, task_id: str) -> bytes | None:
        """The private key of a shuffle task's sealed boxes (None for other tasks)."""
        rows = self._read("SELECT private_key FROM task_keys WHERE task = ?", (task_id,))
        return bytes(rows[0][0]) if rows else None

    def add_shuffle_batch(
        self, task_id: str, batch_id: str, seq: int, users: int, boxes: bytes, final: bool, dropped_users: int
    ) -> bool:
        """Store one batch from the shuffler (True), or recognise a redelivered one by its id (False)."""

        def work(db) -> bool:
            if db.execute(
                "SELECT 1 FROM shuffle_batches WHERE task = ? AND batch_id = ?", (task_id, batch_id)
            ).fetchone():
                return False
            db.execute(
                "INSERT INTO shuffle_batches(task, batch_id, seq, users, boxes, final, dropped_users, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (task_id, batch_id, seq, users, bytes(boxes), int(bool(final)), dropped_users, time.time()),
            )
            return True

        return self._write(work)

    def has_final_shuffle_batch(self, task_id: str) -> bool:
        return bool(self._read("SELECT 1 FROM shuffle_batches WHERE task = ? AND final = 1", (task_id,)))

    def shuffle_batches(self, task_id: str) -> list[tuple[int, bytes, bool, int]]:
        """(users, boxes, final, dropped users) of every stored batch of a task, in the shuffler's order."""
        return [
            (r[0], bytes(r[1]), bool(r[2]), r[3])
            for r in self._read(
                "SELECT users, boxes, final, dropped_users FROM shuffle_batches WHERE task = ? ORDER BY seq", (task_id,)
            )
        ]


def open_store(state_dir: str | None) -> AggregatorStore:
    """The aggregator's state: ``STATE_DIR/collect-aggregator.db`` (directory created with mode 0700), or in memory."""
    if state_dir is None:
        return AggregatorStore(None)
    state_directory(state_dir)
    return AggregatorStore(os.path.join(state_dir, "collect-aggregator.db"))
