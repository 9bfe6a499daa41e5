"""A user's own privacy ledger: what this user has spent on collect tasks, kept on the user's device.

What it does
    :class:`UserLedger` is one SQLite file (``--state DIR`` of ``pairwise
    collect join``, default ``$XDG_STATE_HOME/pairwise`` or
    ``~/.local/state/pairwise``; file ``collect-ledger.db``, the conventions
    of :class:`pairwise.protocols.service.storage.SQLiteStore`).  One row per
    (aggregator, task) the user took part in: the task's epsilon (an exact
    fraction) and delta, and, for the local model, the report the user sent.

    * :meth:`UserLedger.charge` is the durable check-and-charge the client
      runs *before* anything about its value leaves the device: it refuses
      (:class:`~pairwise.protocols.collect.wire.CapExceeded`) when the task's
      epsilon is above what the budget has left, and a task already on
      record is not charged again.  Several joins may run at once (one
      ``BEGIN IMMEDIATE`` transaction each), so two tasks can never both
      pass a check that only one of them fits.
    * :meth:`UserLedger.keep_report` stores a local-model report with its
      charge; a retry (an aggregator that restarted, a lost reply) sends the
      stored report again, never a fresh randomization, so one task costs
      its epsilon once.

Security model
    The aggregator cannot drain a user: whatever tasks it creates, this
    user's spending is bounded by its own budget (basic composition over
    tasks), and each task by its own ``--max-epsilon`` cap.  The file holds
    randomized reports, not values; it is private to the user (0600).
"""

from __future__ import annotations

import json
import os
import time
from fractions import Fraction

from ..service.storage import SQLiteStore, StorageError, state_directory
from .wire import CapExceeded

__all__ = ["DEFAULT_BUDGET", "DEFAULT_MAX_EPSILON", "UserLedger", "default_state_dir", "open_ledger"]

#: A user's default cap on one task's epsilon (``--max-epsilon``).
DEFAULT_MAX_EPSILON = 1.0
#: A user's default total over every task it joins (``--budget``).
DEFAULT_BUDGET = 10.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS charges (
    aggregator TEXT NOT NULL, task TEXT NOT NULL, protocol TEXT NOT NULL, epsilon TEXT NOT NULL,
    delta REAL NOT NULL, at REAL NOT NULL, report TEXT, PRIMARY KEY (aggregator, task));
"""


def _fmt(x: Fraction) -> str:
    return f"{float(x):.6g}"


class UserLedger(SQLiteStore):
    """The user's ledger (see the module docstring); several processes of one user may share it."""

    what = "user ledger"

    def __init__(self, path: str | None) -> None:
        super().__init__(path, schema=_SCHEMA, version=1, lock=False, meta={"kind": "collect-user-ledger"})

    def _check_meta(self, rows: dict[str, str]) -> None:
        if rows.get("kind") != "collect-user-ledger":
            raise StorageError(f"{self.path} is not a collect user ledger; give join its own --state directory")

    def spent(self) -> Fraction:
        return sum((Fraction(r[0]) for r in self._read("SELECT epsilon FROM charges")), Fraction(0))

    def entry(self, aggregator: str, task: str) -> dict | None:
        rows = self._read(
            "SELECT protocol, epsilon, delta, at, report FROM charges WHERE aggregator = ? AND task = ?",
            (aggregator, task),
        )
        if not rows:
            return None
        p, eps, delta, at, rep = rows[0]
        return {
            "protocol": p,
            "epsilon": Fraction(eps),
            "delta": delta,
            "at": at,
            "report": None if rep is None else json.loads(rep),
        }

    def entries(self) -> list[dict]:
        return [
            {
                "aggregator": r[0],
                "task": r[1],
                "protocol": r[2],
                "epsilon": float(Fraction(r[3])),
                "delta": r[4],
                "at": r[5],
                "reported": r[6] is not None,
            }
            for r in self._read(
                "SELECT aggregator, task, protocol, epsilon, delta, at, report FROM charges ORDER BY at"
            )
        ]

    def check(self, epsilon: Fraction, budget: Fraction, *, aggregator: str, task: str) -> None:
        """Refuse (nothing written) a task that the budget cannot pay; a task already charged passes."""
        if self.entry(aggregator, task) is not None:
            return
        spent = self.spent()
        if spent + epsilon > budget:
            raise CapExceeded(
                f"refusing task {task!r}: its epsilon {_fmt(epsilon)} is more than this user's ledger "
                f"has left ({_fmt(budget - spent)} of the budget {_fmt(budget)}; spent {_fmt(spent)})"
            )

    def charge(
        self, aggregator: str, task: str, protocol: str, epsilon: Fraction, delta: float, budget: Fraction
    ) -> bool:
        """Record the task's charge durably (True), or find it recorded already (False); raise if it does not fit."""

        def work(db) -> bool:
            if db.execute("SELECT 1 FROM charges WHERE aggregator = ? AND task = ?", (aggregator, task)).fetchone():
                return False
            spent = sum((Fraction(r[0]) for r in db.execute("SELECT epsilon FROM charges")), Fraction(0))
            if spent + epsilon > budget:
                raise CapExceeded(
                    f"refusing task {task!r}: its epsilon {_fmt(epsilon)} is more than this user's "
                    f"ledger has left ({_fmt(budget - spent)} of the budget {_fmt(budget)})"
                )
            db.execute(
                "INSERT INTO charges(aggregator, task, protocol, epsilon, delta, at) VALUES (?, ?, ?, ?, ?, ?)",
                (aggregator, task, protocol, str(epsilon), float(delta), time.time()),
            )
            return True

        return self._write(work)

    def keep_report(self, aggregator: str, task: str, report: dict) -> dict:
        """Store ``report`` with the task's charge unless one is stored already; returns the stored one."""

        def work(db) -> dict:
            row = db.execute(
                "SELECT report FROM charges WHERE aggregator = ? AND task = ?", (aggregator, task)
            ).fetchone()
            if row is None:
                raise StorageError(f"no charge for task {task!r} in {self.path}: charge before randomizing")
            if row[0] is not None:
                return json.loads(row[0])
            db.execute(
                "UPDATE charges SET report = ? WHERE aggregator = ? AND task = ?",
                (json.dumps(report, sort_keys=True), aggregator, task),
            )
            return report

        return self._write(work)


def default_state_dir() -> str:
    """``$XDG_STATE_HOME/pairwise``, else ``~/.local/state/pairwise``."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "pairwise")


def open_ledger(state_dir: str | None = None) -> UserLedger:
    """The ledger in ``state_dir`` (default :func:`default_state_dir`), created with mode 0700."""
    d = state_directory(state_dir or default_state_dir())
    return UserLedger(os.path.join(d, "collect-ledger.db"))
