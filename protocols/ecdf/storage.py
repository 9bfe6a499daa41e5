"""Durable state of one ECDF server: datasets, accepted clients' keys and the privacy ledger.

What it does
    Everything a server must not forget across a restart lives behind the
    small :class:`Storage` interface:

    * **datasets**: public parameters (scheme, m, domain and output bits,
      series and their weight bounds, pointwise round and grid), the budget
      fixed when the dataset was created, and public metadata the uploader
      attached (e.g. the value range);
    * **uploads**: each committed upload request (one id, one atomic
      transaction) with its clients' ids and this server's key material per
      series, in chunks of at most :data:`pairwise.protocols.ecdf.wire.UPLOAD_FRAME_MAX`
      bytes (raw serialized keys, parsed again on load: a corrupted file is
      caught by the same validation as a malformed upload);
    * **ledger**: one row per release charged against a dataset's budget
      (release id, exact epsilon as a fraction, how it was recorded).

    :class:`SQLiteStorage` is the implementation we ship: stdlib :mod:`sqlite3`
    in WAL mode with ``synchronous=FULL`` (:mod:`pairwise.protocols.service.storage`),
    so a committed transaction survives a crash of the process *and* of the
    machine; nothing above this module knows SQL (``docs/ecdf-server.md``).

Durability contract (what the server relies on)
    * :meth:`Storage.commit_upload` is atomic: after it returns, the whole
      upload is on disk; if the process dies during it, none of it is.
    * :meth:`Storage.record_charges` returns only after the ledger rows are
      on disk.  The server calls it *before* drawing any noise or sending
      any share of a release, so a crash can lose a release but never
      un-spend budget.

Security model
    The file holds this server's key shares (its halves of every client's keys per
    series): protect it like a private key (the directory is created with
    mode 0700, the database file 0600).  It holds no secret of the other
    servers, and no noise (noise is drawn per release and never stored).
    A second process that opens the same state is refused (an exclusive
    ``flock`` on ``DIR/ecdf-server-I.lock``), so two servers can never
    interleave writes to one ledger.
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..service.storage import SQLiteStore, StorageError, exclusive_lock, state_directory

__all__ = [
    "SCHEMA_VERSION",
    "ChunkRecord",
    "DatasetRecord",
    "LedgerEntry",
    "SQLiteStorage",
    "Storage",
    "StorageError",
    "open_storage",
]

#: Version of the SQLite schema (stored in the file; a newer file is refused).
SCHEMA_VERSION = 2  # 2: uploads carry their owner, ledger rows the owners they were charged to


@dataclass
class DatasetRecord:
    """Public parameters of a dataset (what :meth:`Storage.datasets` returns)."""

    name: str
    scheme: str
    m: int
    n: int
    l: int
    series: dict[str, int]
    budget: Fraction
    meta: dict = field(default_factory=dict)
    grid_bits: int | None = None
    thresholds: list[int] | None = None
    round: str | None = None
    created: float = 0.0


@dataclass
class ChunkRecord:
    """One stored chunk of one upload: client ids and, per series, (lengths, bytes) of this server's keys.

    For ``dcf``/``mshare`` keys ``keys[s] = (lens uint32 (k,), concatenated keys)``;
    for ``pointwise`` shares ``keys[s] = (empty, (k, T) uint64 little-endian)``.
    """

    upload_id: str
    chunk: int
    ids: np.ndarray
    keys: dict[str, tuple[np.ndarray, bytes]]


@dataclass(frozen=True)
class LedgerEntry:
    """One charge: release ``rid`` spent ``epsilon`` of the dataset's budget (``how``: released | adopted).

    ``owners``: the data owners (certificate names; ``""`` for uploads without
    one) whose uploads the release covered; it is charged to each of their
    owner budgets too.
    """

    rid: str
    epsilon: Fraction
    how: str = "released"
    at: float = 0.0
    owners: tuple[str, ...] = ()


class Storage(ABC):
    """What the server keeps durably; see the module docstring for the contract."""

    @abstractmethod
    def datasets(self) -> list[DatasetRecord]:
        """Every dataset's public parameters."""

    @abstractmethod
    def chunks(self, dataset: str, *, with_keys: bool = True, upload_id: str | None = None) -> Iterator[ChunkRecord]:
        """The stored chunks of ``dataset`` (or of its upload ``upload_id`` only), in commit order
        (``with_keys=False``: client ids only)."""

    @abstractmethod
    def commit_upload(
        self,
        record: DatasetRecord,
        upload_id: str,
        chunks: Iterable[ChunkRecord],
        *,
        create: bool,
        replace: bool,
        owner: str = "",
    ) -> None:
        """Atomically: create the dataset (``create``) or replace its round (``replace``: drop its
        stored clients, store the record's new round), then store the upload's chunks, made by the
        data owner ``owner`` (its certificate name; ``""`` without one).  ``chunks`` may be a generator
        (read from the staged upload one at a time); if it raises, nothing is stored."""

    @abstractmethod
    def owners(self, dataset: str) -> list[str]:
        """The distinct owners of ``dataset``'s committed uploads, sorted."""

    @abstractmethod
    def drop_upload(self, dataset: str, upload_id: str) -> None:
        """Delete one committed upload of ``dataset`` (its clients and keys) in one transaction (repair)."""

    @abstractmethod
    def update_budget(self, dataset: str, budget: Fraction) -> None:
        """Lower a dataset's stored budget (the operator tightened it)."""

    @abstractmethod
    def ledger(self, dataset: str) -> list[LedgerEntry]:
        """The charges recorded for ``dataset``."""

    @abstractmethod
    def ledger_all(self) -> dict[str, list[LedgerEntry]]:
        """The charges of every dataset (at startup: owner and server-wide budgets span datasets)."""

    @abstractmethod
    def record_charges(self, dataset: str, entries: list[LedgerEntry]) -> None:
        """Durably add charges; returns after the data is on disk.

        A release id already present keeps the larger of its stored and its new
        epsilon (a charge is never lowered, and never silently dropped), and the
        union of the owners it was charged to.
        """

    @abstractmethod
    def close(self) -> None:
        """Flush and release the state (idempotent)."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS datasets (
    name TEXT PRIMARY KEY, scheme TEXT NOT NULL, m INTEGER NOT NULL, domain_bits INTEGER NOT NULL,
    output_bits INTEGER NOT NULL, series TEXT NOT NULL, budget TEXT NOT NULL, meta TEXT NOT NULL,
    grid_bits INTEGER, thresholds TEXT, round TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS uploads (
    dataset TEXT NOT NULL REFERENCES datasets(name), upload_id TEXT NOT NULL, seq INTEGER NOT NULL,
    committed REAL NOT NULL, owner TEXT NOT NULL DEFAULT '', PRIMARY KEY (dataset, upload_id));
CREATE TABLE IF NOT EXISTS chunks (
    dataset TEXT NOT NULL, upload_id TEXT NOT NULL, chunk INTEGER NOT NULL, ids BLOB NOT NULL,
    PRIMARY KEY (dataset, upload_id, chunk));
CREATE TABLE IF NOT EXISTS chunk_keys (
    dataset TEXT NOT NULL, upload_id TEXT NOT NULL, chunk INTEGER NOT NULL, series TEXT NOT NULL,
    lens BLOB NOT NULL, data BLOB NOT NULL, PRIMARY KEY (dataset, upload_id, chunk, series));
CREATE TABLE IF NOT EXISTS ledger (
    dataset TEXT NOT NULL, rid TEXT NOT NULL, epsilon TEXT NOT NULL, how TEXT NOT NULL, at REAL NOT NULL,
    owners TEXT NOT NULL DEFAULT '[]', PRIMARY KEY (dataset, rid));
"""


class SQLiteStorage(SQLiteStore, Storage):
    """:class:`Storage` in one SQLite file (``path``), or in memory (``path=None``: lost on exit).

    One connection shared by the server's threads behind a lock (SQLite
    serializes writers anyway); WAL journal, ``synchronous=FULL``; the file
    conventions are :class:`pairwise.protocols.service.storage.SQLiteStore`'s.
    """

    what = "server state"

    def __init__(self, path: str | None, server_id: int) -> None:
        self.server_id = server_id
        super().__init__(path, schema=_SCHEMA, version=SCHEMA_VERSION, meta={"server_id": str(server_id)})

    # ------------------------------------------------------------------ plumbing
    def _check_meta(self, rows: dict[str, str]) -> None:
        if rows.get("server_id") != str(self.server_id):
            raise StorageError(
                f"the state {self.path} belongs to server {rows.get('server_id')}, "
                f"not to server {self.server_id}; give each server its own state "
                "(or the --server-id it was created with)"
            )
        if int(rows.get("schema", "0")) < 2:
            self._migrate_to_2()

    def _migrate_to_2(self) -> None:
        """Schema 1 -> 2: owners on uploads (unknown: ``""``) and on ledger rows (their dataset's owners)."""
        with self._tx() as db:
            cols = {r[1] for r in db.execute("PRAGMA table_info(uploads)")}
            if "owner" not in cols:
                db.execute("ALTER TABLE uploads ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
            cols = {r[1] for r in db.execute("PRAGMA table_info(ledger)")}
            if "owners" not in cols:
                db.execute("ALTER TABLE ledger ADD COLUMN owners TEXT NOT NULL DEFAULT '[]'")
            for (name,) in db.execute("SELECT name FROM datasets").fetchall():
                owners = [
                    r[0]
                    for r in db.execute("SELECT DISTINCT owner FROM uploads WHERE dataset = ? ORDER BY owner", (name,))
                ]
                db.execute(
                    "UPDATE ledger SET owners = ? WHERE dataset = ? AND owners = '[]'",
                    (json.dumps(owners or [""]), name),
                )
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))

    # ------------------------------------------------------------------ datasets
    def datasets(self) -> list[DatasetRecord]:
        rows = self._read(
            "SELECT name, scheme, m, domain_bits, output_bits, series, budget, meta, grid_bits, "
            "thresholds, round, created FROM datasets ORDER BY created, name"
        )
        return [
            DatasetRecord(
                name=r[0],
                scheme=r[1],
                m=r[2],
                n=r[3],
                l=r[4],
                series=json.loads(r[5]),
                budget=Fraction(r[6]),
                meta=json.loads(r[7]),
                grid_bits=r[8],
                thresholds=None if r[9] is None else json.loads(r[9]),
                round=r[10],
                created=r[11],
            )
            for r in rows
        ]

    def chunks(self, dataset: str, *, with_keys: bool = True, upload_id: str | None = None) -> Iterator[ChunkRecord]:
        heads = self._read(
            "SELECT c.upload_id, c.chunk, c.ids FROM chunks c JOIN uploads u "
            "ON u.dataset = c.dataset AND u.upload_id = c.upload_id "
            "WHERE c.dataset = ?" + ("" if upload_id is None else " AND c.upload_id = ?") + " ORDER BY u.seq, c.chunk",
            (dataset,) if upload_id is None else (dataset, upload_id),
        )
        for upload_id, chunk, ids in heads:
            keys = {}
            for series, lens, data in (
                []
                if not with_keys
                else self._read(
                    "SELECT series, lens, data FROM chunk_keys WHERE dataset = ? AND upload_id = ? AND chunk = ?",
                    (dataset, upload_id, chunk),
                )
            ):
                keys[series] = (np.frombuffer(lens, dtype="<u4").astype(np.int64), bytes(data))
            yield ChunkRecord(upload_id, chunk, np.frombuffer(ids, dtype="<u8").astype(np.uint64), keys)

    def commit_upload(
        self,
        record: DatasetRecord,
        upload_id: str,
        chunks: Iterable[ChunkRecord],
        *,
        create: bool,
        replace: bool,
        owner: str = "",
    ) -> None:
        def work(db) -> None:
            name = record.name
            if create:
                db.execute(
                    "INSERT INTO datasets(name, scheme, m, domain_bits, output_bits, series, budget, meta, "
                    "grid_bits, thresholds, round, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        name,
                        record.scheme,
                        record.m,
                        record.n,
                        record.l,
                        json.dumps(record.series),
                        str(record.budget),
                        json.dumps(record.meta),
                        record.grid_bits,
                        None if record.thresholds is None else json.dumps(record.thresholds),
                        record.round,
                        record.created or time.time(),
                    ),
                )
            elif replace:
                for table in ("chunk_keys", "chunks", "uploads"):
                    db.execute(f"DELETE FROM {table} WHERE dataset = ?", (name,))
                db.execute(
                    "UPDATE datasets SET grid_bits = ?, thresholds = ?, round = ?, meta = ? WHERE name = ?",
                    (
                        record.grid_bits,
                        None if record.thresholds is None else json.dumps(record.thresholds),
                        record.round,
                        json.dumps(record.meta),
                        name,
                    ),
                )
            (seq,) = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM uploads WHERE dataset = ?", (name,)).fetchone()
            db.execute(
                "INSERT INTO uploads(dataset, upload_id, seq, committed, owner) VALUES (?, ?, ?, ?, ?)",
                (name, upload_id, seq, time.time(), owner),
            )
            for c in chunks:
                db.execute(
                    "INSERT INTO chunks(dataset, upload_id, chunk, ids) VALUES (?, ?, ?, ?)",
                    (name, upload_id, c.chunk, np.ascontiguousarray(c.ids, dtype="<u8").tobytes()),
                )
                db.executemany(
                    "INSERT INTO chunk_keys(dataset, upload_id, chunk, series, lens, data) VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (name, upload_id, c.chunk, s, np.ascontiguousarray(lens, dtype="<u4").tobytes(), data)
                        for s, (lens, data) in c.keys.items()
                    ],
                )

        self._write(work)

    def drop_upload(self, dataset: str, upload_id: str) -> None:
        def work(db) -> None:
            for table in ("chunk_keys", "chunks", "uploads"):
                db.execute(f"DELETE FROM {table} WHERE dataset = ? AND upload_id = ?", (dataset, upload_id))

        self._write(work)

    def owners(self, dataset: str) -> list[str]:
        return [
            r[0] for r in self._read("SELECT DISTINCT owner FROM uploads WHERE dataset = ? ORDER BY owner", (dataset,))
        ]

    def update_budget(self, dataset: str, budget: Fraction) -> None:
        self._write(lambda db: db.execute("UPDATE datasets SET budget = ? WHERE name = ?", (str(budget), dataset)))

    # ------------------------------------------------------------------ ledger
    def ledger(self, dataset: str) -> list[LedgerEntry]:
        return self.ledger_all(dataset).get(dataset, [])

    def ledger_all(self, dataset: str | None = None) -> dict[str, list[LedgerEntry]]:
        rows = self._read(
            "SELECT dataset, rid, epsilon, how, at, owners FROM ledger"
            + ("" if dataset is None else " WHERE dataset = ?")
            + " ORDER BY at, rid",
            () if dataset is None else (dataset,),
        )
        out: dict[str, list[LedgerEntry]] = {}
        for r in rows:
            out.setdefault(r[0], []).append(LedgerEntry(r[1], Fraction(r[2]), r[3], r[4], tuple(json.loads(r[5]))))
        return out

    def record_charges(self, dataset: str, entries: list[LedgerEntry]) -> None:
        now = time.time()

        def work(db) -> None:
            for e in entries:
                row = db.execute(
                    "SELECT epsilon, how, owners FROM ledger WHERE dataset = ? AND rid = ?", (dataset, e.rid)
                ).fetchone()
                if row is None:
                    db.execute(
                        "INSERT INTO ledger(dataset, rid, epsilon, how, at, owners) VALUES (?, ?, ?, ?, ?, ?)",
                        (dataset, e.rid, str(e.epsilon), e.how, e.at or now, json.dumps(sorted(e.owners))),
                    )
                    continue
                # a charge only ever grows: keep the maximum epsilon and every owner it was charged to
                eps, how = (e.epsilon, e.how) if e.epsilon > Fraction(row[0]) else (Fraction(row[0]), row[1])
                owners = sorted(set(json.loads(row[2])) | set(e.owners))
                db.execute(
                    "UPDATE ledger SET epsilon = ?, how = ?, owners = ? WHERE dataset = ? AND rid = ?",
                    (str(eps), how, json.dumps(owners), dataset, e.rid),
                )

        self._write(work)


#: kept for callers of the old private name
_exclusive_lock = exclusive_lock


def open_storage(state_dir: str | None, server_id: int) -> SQLiteStorage:
    """The state of server ``server_id``: ``STATE_DIR/ecdf-server-I.db`` (created with mode 0700), or in memory."""
    if state_dir is None:
        return SQLiteStorage(None, server_id)
    state_directory(state_dir)
    return SQLiteStorage(os.path.join(state_dir, f"ecdf-server-{server_id}.db"), server_id)
