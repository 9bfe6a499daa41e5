"""Durable service state in one SQLite file: opening, locking, transactions (shared by every service).

What it does
    The services of pairwise (the ECDF servers, :mod:`pairwise.protocols.ecdf.storage`;
    the collect aggregator, :mod:`pairwise.protocols.collect.storage`; a
    user's local ledger, :mod:`pairwise.protocols.collect.ledger`) keep what
    they must not forget in one SQLite file each.  This module holds what
    they share:

    * :func:`state_directory`: ``--state DIR`` created with mode 0700 (an
      existing one that group or others may enter is refused);
    * :func:`exclusive_lock`: an exclusive ``flock`` held for the life of a
      server process, so two processes never interleave writes to one state;
    * :class:`SQLiteStore`: the connection (file mode 0600, WAL journal,
      ``synchronous=FULL`` so a committed transaction survives a crash of
      the process and of the machine, foreign keys on), one ``BEGIN
      IMMEDIATE`` transaction per write (:meth:`SQLiteStore._write`), reads
      under the same lock (:meth:`SQLiteStore._read`), and a schema version
      kept in a ``meta`` table (a file written by a newer pairwise is refused,
      and so is a zero-length file, which SQLite would open as empty);
    * :class:`StorageError`: every failure, with the file named and what to do.

    The standard library's :mod:`sqlite3` is the engine: no server to run,
    one file per party.  Nothing above the store classes knows SQL.

Security model
    The file may hold secrets (an ECDF server's key shares) or private data
    (a user's stored reports), so the directory is 0700 and the file 0600.
    No peer data is ever unpickled: rows hold text, JSON and raw bytes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator

from pairwise.dp.errors import PairwiseError

__all__ = ["StorageError", "SQLiteStore", "exclusive_lock", "state_directory"]


class StorageError(PairwiseError, OSError):
    """The state cannot be opened or written (the message names the file and what to do)."""


def exclusive_lock(path: str, *, what: str = "server"):
    """Hold an exclusive advisory lock on ``path`` for the life of the returned file (released on exit/kill)."""
    import fcntl

    f = open(path, "a+")  # noqa: SIM115 - kept open while the process runs
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise StorageError(
            f"the {what} state guarded by {path} is in use by another running {what} process; "
            f"stop it first, or give this {what} another --state directory"
        ) from None
    return f


@contextlib.contextmanager
def opening_lock(path: str, timeout: float) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` while a shared file is opened (waits at most ``timeout`` s).

    A file that several processes or threads open at once (a user's ledger)
    is zero-length between its creation by one opener and its first write:
    without this lock, another opener would take it for a truncated file.
    ``flock`` locks belong to one open file description, so threads of one
    process exclude each other too.
    """
    import fcntl

    f = open(path, "a+")  # noqa: SIM115 - closed below
    try:
        end = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= end:
                    raise StorageError(
                        f"{path} stayed locked for {timeout:g} s by another process opening the same file; retry"
                    ) from None
                time.sleep(0.01)
        yield
    finally:
        f.close()  # releases the lock


def state_directory(state_dir: str) -> str:
    """``state_dir``, created with mode 0700 if absent; :class:`StorageError` if it cannot be, or if an
    existing directory lets other users in (group or other permission bits: they could read the state)."""
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot create the state directory {state_dir}: {exc.strerror}") from exc
    if not os.path.isdir(state_dir):
        raise StorageError(f"--state {state_dir} is not a directory")
    mode = os.stat(state_dir).st_mode & 0o777
    if mode & 0o077:
        raise StorageError(
            f"the state directory {state_dir} has mode {mode:04o}: other users could read the "
            f"secrets it holds; run 'chmod 700 {state_dir}' (or give a new --state directory, "
            "which is created with mode 0700)"
        )
    return state_dir


class SQLiteStore:
    """One SQLite file (``path``; ``None``: in memory, lost on exit) with the conventions of the module docstring.

    ``schema``: the ``CREATE TABLE IF NOT EXISTS`` script; ``version``: the
    schema version stored in ``meta``; ``lock``: hold :func:`exclusive_lock`
    on the file's ``.lock`` sibling (a server); without it several processes
    may share the file, each write being one ``BEGIN IMMEDIATE`` transaction
    (``busy_timeout`` seconds of waiting for another writer).  Subclasses call
    :meth:`_check_meta` hooks through ``meta`` (extra rows written on creation
    and checked on open).
    """

    #: what the file is, for messages ("server state", "user ledger", ...)
    what = "state"

    def __init__(
        self,
        path: str | None,
        *,
        schema: str,
        version: int,
        lock: bool = True,
        meta: dict[str, str] | None = None,
        busy_timeout: float = 30.0,
    ) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._lockfile = None
        where = path or ":memory:"
        shared: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if path is not None and not lock:  # openers at once agree: the first creates, the others find it written
            base = path[:-3] if path.endswith(".db") else path
            shared = opening_lock(base + ".open.lock", busy_timeout)
        with shared:
            self._open(path, where, schema=schema, version=version, lock=lock, meta=meta, busy_timeout=busy_timeout)

    def _open(
        self,
        path: str | None,
        where: str,
        *,
        schema: str,
        version: int,
        lock: bool,
        meta: dict[str, str] | None,
        busy_timeout: float,
    ) -> None:
        try:
            if path is not None and os.path.isfile(path) and os.path.getsize(path) == 0:
                # SQLite opens a zero-length file as an empty database: the server would start with no
                # datasets and a fresh privacy ledger.  A state file is never empty once created.
                raise StorageError(
                    f"the {self.what} {path} is empty (0 bytes): it was truncated or replaced, "
                    "and opening it would start with nothing stored (no datasets, an unspent "
                    "budget); restore it from a backup, or remove it to start anew"
                )
            if path is not None and lock:
                base = path[:-3] if path.endswith(".db") else path
                self._lockfile = exclusive_lock(base + ".lock", what=self.what.split()[0])
            self._db = sqlite3.connect(where, check_same_thread=False, isolation_level=None, timeout=busy_timeout)
            if path is not None:
                os.chmod(path, 0o600)
                mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StorageError(
                        f"cannot put the {self.what} {path} in WAL mode (got {mode}); use a local file system"
                    )
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);" + schema
            )
            self._init_meta(version, dict(meta or {}))
        except sqlite3.Error as exc:
            self._release_lock()
            raise StorageError(f"cannot open the {self.what} {where}: {exc}") from exc
        except StorageError:
            self._release_lock()
            raise
        except OSError as exc:  # a read-only or foreign state directory, a lock file that is not a file
            self._release_lock()
            raise StorageError(
                f"cannot open the {self.what} {where}: {exc.strerror or exc} "
                f"({exc.filename or where}); the state directory must be writable by this "
                "user"
            ) from exc
        except BaseException:
            self._release_lock()
            raise

    # ------------------------------------------------------------------ schema
    def _init_meta(self, version: int, meta: dict[str, str]) -> None:
        with self._tx() as db:  # one transaction: processes that open a new file at once agree on its meta
            rows = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if not rows:
                db.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", [("schema", str(version)), *meta.items()])
                return
        if int(rows.get("schema", "0")) > version:
            raise StorageError(
                f"the {self.what} {self.path} was written by a newer pairwise (schema "
                f"{rows['schema']} > {version}); upgrade pairwise"
            )
        self._check_meta(rows)

    def _check_meta(self, rows: dict[str, str]) -> None:
        """Hook: refuse a file that belongs to another party (called on open with the stored meta rows)."""

    # ------------------------------------------------------------------ transactions
    class _Tx:
        def __init__(self, outer: SQLiteStore) -> None:
            self.outer = outer

        def __enter__(self):
            self.outer._lock.acquire()
            try:
                self.outer._db.execute("BEGIN IMMEDIATE")
            except BaseException:
                self.outer._lock.release()
                raise
            return self.outer._db

        def __exit__(self, typ, exc, tb) -> None:
            try:
                self.outer._db.execute("COMMIT" if typ is None else "ROLLBACK")
            finally:
                self.outer._lock.release()

    def _tx(self) -> _Tx:
        """``with self._tx() as db:`` one ``BEGIN IMMEDIATE`` transaction, committed on a normal exit."""
        return SQLiteStore._Tx(self)

    def _read(self, sql: str, args: tuple = ()) -> list:
        with self._lock:
            try:
                if self._db is None:
                    raise StorageError(f"the {self.what} {self.path or ':memory:'} is closed")
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StorageError(f"reading the {self.what} {self.path or ':memory:'} failed: {exc}") from exc

    def _write(self, fn):
        """Run ``fn(db)`` in one transaction; returns its result once it is on disk (or raises, nothing stored)."""
        try:
            with self._tx() as db:
                return fn(db)
        except StorageError:
            raise
        except (sqlite3.Error, OSError) as exc:  # OSError: a full disk, data that ``fn`` streams in failed
            raise StorageError(
                f"writing the {self.what} {self.path or ':memory:'} failed ({exc}); nothing of this request was stored"
            ) from exc

    def _release_lock(self) -> None:
        if self._lockfile is not None:
            try:
                self._lockfile.close()
            finally:
                self._lockfile = None

    def close(self) -> None:
        """Checkpoint the WAL, close the file and release the lock (idempotent)."""
        with self._lock:
            db, self._db = getattr(self, "_db", None), None
            if db is not None:
                try:
                    if self.path is not None:
                        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.Error:
                    pass  # the WAL is replayed on the next open; nothing is lost
                db.close()
        self._release_lock()
