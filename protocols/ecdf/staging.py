"""Uploads staged on an ECDF server before they commit: on disk, within byte budgets, never in RAM.

What it does
    An upload arrives chunk by chunk and is committed only when every
    server has staged it (:mod:`pairwise.protocols.ecdf.handlers`).  Until
    then each accepted chunk -- ids, upload positions and raw keys (or
    pointwise share words) per series -- is appended to a
    :class:`StagedFile`, an unlinked temporary file in the server's state
    directory (or the system's temporary directory without ``--state``):
    nothing of it is kept in memory but an index of a few integers per
    chunk (and, for a ``vdpf`` upload, one histogram share of 2^n words per
    series, summed from the servers' check, which the commit hands to the
    dataset instead of expanding the keys again), and the file vanishes when it is closed, when the upload is
    discarded or committed, and with the process (even after ``kill -9``).
    The commit streams the chunks back, one at a time, into the durable
    store (:meth:`pairwise.protocols.ecdf.storage.Storage.commit_upload`).

    :class:`StagingBudget` bounds the disk, and the memory of the servers'
    check of ``vdpf`` keys: every upload reserves, from its
    header alone, the most bytes it can stage (:func:`staged_bytes_bound`,
    a function of the announced client count, the series and the scheme's
    key sizes), at most ``per_connection`` (one staged upload per
    connection) and, together with every other staged upload of the
    server, at most ``total``; a ``vdpf`` upload also reserves the memory
    of its check (:func:`pairwise.protocols.ecdf.validation.check_memory_bound`,
    up to 1.7 GiB for Hosmer-Lemeshow keys on 2^21 leaves) within
    ``check_memory``.  Memory per connection is otherwise one chunk: its
    frames are at most :data:`pairwise.protocols.ecdf.wire.UPLOAD_FRAME_MAX`
    bytes each and are parsed, checked and written before the next is read.

Security model
    A client certificate that stages and never commits holds one
    connection (until its request deadline), its reserved disk bytes and
    8 bytes of claimed ids per staged client (:class:`pairwise.protocols.ecdf.dataset.IdSet`);
    nothing else.  The file holds this server's key shares, like the state:
    it is created 0600 in the 0700 state directory and unlinked at once.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from .storage import DatasetRecord
from .wire import QueryRefused, ServerBusy

__all__ = [
    "DEFAULT_CHECK_MEMORY",
    "DEFAULT_STAGED_BYTES",
    "DEFAULT_STAGED_BYTES_PER_CONNECTION",
    "StagedChunk",
    "StagedFile",
    "StagedUpload",
    "StagingBudget",
    "parse_size",
    "staged_bytes_bound",
    "take_raw",
]

#: Bytes all the staged uploads of a server may hold on disk (``ecdf serve --max-staged-bytes``).
DEFAULT_STAGED_BYTES = 16 << 30
#: Bytes one connection's staged upload may hold on disk (``--max-staged-bytes-per-connection``).
DEFAULT_STAGED_BYTES_PER_CONNECTION = 8 << 30
#: Memory the servers' checks of vdpf uploads may take together (``--max-check-memory``).
DEFAULT_CHECK_MEMORY = 4 << 30
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: object, what: str = "size") -> int:
    """``123``, ``64M``, ``16G`` (binary units, an optional ``B`` or ``iB``) -> bytes (a positive integer)."""
    if isinstance(text, int) and not isinstance(text, bool):
        n = text
    else:
        s = str(text).strip().lower().removesuffix("ib").removesuffix("b")
        unit = s[-1:] if s[-1:] in _UNITS and s[-1:] else ""
        try:
            n = int(float(s[:-1] if unit else s) * _UNITS[unit])
        except ValueError:
            raise ValueError(f"{what} must be a number of bytes such as 512M or 16G, got {text!r}") from None
    if n < 1:
        raise ValueError(f"{what} must be positive, got {text!r}")
    return n


def take_raw(lens: np.ndarray, data: bytes, rows: np.ndarray, k: int) -> tuple[np.ndarray, bytes]:
    """Rows ``rows`` of k stored records: variable-size keys (``lens`` per record) or, with empty
    ``lens``, k records of equal size (pointwise share words)."""
    mv = memoryview(data)
    if lens.size:
        offs = np.concatenate([[0], np.cumsum(lens, dtype=np.int64)])
        return lens[rows], b"".join(mv[offs[r] : offs[r + 1]] for r in rows)
    width = len(data) // max(1, k)
    return lens, b"".join(mv[r * width : (r + 1) * width] for r in rows)


def staged_bytes_bound(clients: int, key_sizes: list[int]) -> int:
    """The most bytes ``clients`` staged clients can take: 16 bytes of id and position each, plus the
    sum over their keys of each key's largest size (``key_sizes``: one entry per client and series kind,
    already multiplied out by the caller)."""
    return 16 * int(clients) + int(sum(key_sizes))


@dataclass
class StagedChunk:
    """One staged chunk read back: accepted clients' ids, their positions in the upload, and raw keys
    (or share words) per series."""

    ids: np.ndarray
    pos: np.ndarray
    raw: dict[str, tuple[np.ndarray, bytes]]  # series -> (lens, concatenated keys / LE share words)

    def drop(self, positions: np.ndarray) -> StagedChunk:
        """This chunk without the clients at upload ``positions``."""
        keep = ~np.isin(self.pos, positions)
        if keep.all():
            return self
        rows = np.flatnonzero(keep)
        raw = {s: take_raw(lens, data, rows, self.ids.size) for s, (lens, data) in self.raw.items()}
        return StagedChunk(self.ids[rows], self.pos[rows], raw)


class StagedFile:
    """The accepted chunks of one staged upload, in an unlinked temporary file (see the module docstring)."""

    def __init__(self, directory: str | None) -> None:
        self._f = tempfile.TemporaryFile(dir=directory, prefix="ecdf-staged-")  # 0600, unlinked on POSIX
        self._index: list[tuple[int, int, list[tuple[str, int, int]]]] = []  # (offset, clients, series parts)
        self.bytes = 0
        self.clients = 0

    def _write(self, data: bytes) -> int:
        self._f.write(data)
        self.bytes += len(data)
        return len(data)

    def put(self, ids: np.ndarray, pos: np.ndarray, raw: dict[str, tuple[np.ndarray, bytes]]) -> None:
        """Append one chunk (written before the next chunk is read)."""
        offset = self.bytes
        k = int(ids.size)
        self._write(np.ascontiguousarray(ids, dtype="<u8").tobytes())
        self._write(np.ascontiguousarray(pos, dtype="<i8").tobytes())
        parts = []
        for s, (lens, data) in raw.items():
            nl = self._write(np.ascontiguousarray(lens, dtype="<u4").tobytes())
            nd = self._write(bytes(data))
            parts.append((s, nl, nd))
        self._index.append((offset, k, parts))
        self.clients += k

    def __len__(self) -> int:
        return len(self._index)

    def chunks(self) -> Iterator[StagedChunk]:
        """The staged chunks in order, one in memory at a time."""
        self._f.flush()
        fd = self._f.fileno()
        for offset, k, parts in self._index:
            at = offset

            def read(n: int) -> bytes:
                nonlocal at
                data = os.pread(fd, n, at)
                if len(data) != n:
                    raise OSError(f"staged upload file truncated ({len(data)} of {n} bytes)")
                at += n
                return data

            ids = np.frombuffer(read(8 * k), dtype="<u8").astype(np.uint64)
            pos = np.frombuffer(read(8 * k), dtype="<i8").astype(np.int64)
            raw = {}
            for s, nl, nd in parts:
                lens = np.frombuffer(read(nl), dtype="<u4").astype(np.int64)
                raw[s] = (lens, read(nd))
            yield StagedChunk(ids, pos, raw)

    def close(self) -> None:
        try:
            self._f.close()
        except OSError:
            pass


class StagingBudget:
    """Disk bytes the staged uploads of one server hold: each upload reserves its bound up front."""

    def __init__(
        self,
        total: int = DEFAULT_STAGED_BYTES,
        per_connection: int = DEFAULT_STAGED_BYTES_PER_CONNECTION,
        directory: str | None = None,
        check_memory: int = DEFAULT_CHECK_MEMORY,
    ) -> None:
        self.total = int(total)
        self.per_connection = int(per_connection)
        self.directory = directory
        self.check_memory = int(check_memory)
        self._lock = threading.Lock()
        self.reserved = 0
        self.checking = 0  # memory reserved by the vdpf checks in progress

    def reserve(self, nbytes: int, server_id: int) -> None:
        """Hold ``nbytes`` for one staged upload, or refuse: too large for one connection
        (:class:`QueryRefused`), or the server's staging space is taken by other uploads
        (:class:`ServerBusy`, retry later)."""
        if nbytes > self.per_connection:
            raise QueryRefused(
                f"server {server_id}: this upload may stage up to {nbytes} bytes, more than the "
                f"{self.per_connection} bytes one connection may stage (--max-staged-bytes-per-connection); "
                "upload the clients in several appends"
            )
        with self._lock:
            if self.reserved + nbytes > self.total:
                raise ServerBusy(
                    f"server {server_id} is staging other uploads ({self.reserved} of {self.total} bytes, "
                    f"--max-staged-bytes); this upload needs up to {nbytes}: retry later"
                )
            self.reserved += nbytes

    def release(self, nbytes: int) -> None:
        with self._lock:
            self.reserved = max(0, self.reserved - int(nbytes))

    def reserve_check(self, nbytes: int, server_id: int) -> None:
        """Hold ``nbytes`` of memory for one upload's vdpf check, or refuse: more than the server allows
        any check (:class:`QueryRefused`), or the other checks in progress hold it (:class:`ServerBusy`)."""
        if nbytes > self.check_memory:
            raise QueryRefused(
                f"server {server_id}: checking this upload's keys takes up to {nbytes} bytes of memory, more "
                f"than the {self.check_memory} bytes this server gives its checks (--max-check-memory); "
                "use fewer domain bits or probability bits"
            )
        with self._lock:
            if self.checking + nbytes > self.check_memory:
                raise ServerBusy(
                    f"server {server_id} is checking other uploads ({self.checking} of {self.check_memory} "
                    f"bytes of memory, --max-check-memory); this upload's check needs up to {nbytes}: retry later"
                )
            self.checking += nbytes

    def release_check(self, nbytes: int) -> None:
        with self._lock:
            self.checking = max(0, self.checking - int(nbytes))

    def open(self) -> StagedFile:
        return StagedFile(self.directory)


@dataclass
class StagedUpload:
    """An upload received on one connection, not yet committed (discarded if the connection ends).

    ``dataset``: where its client ids are claimed (the live dataset for an
    append, a fresh one for a new dataset or round); ``live``: the existing
    dataset, None for a new one.  ``file``: its staged chunks on disk;
    ``reserved``: the disk bytes it holds of the server's budget.
    """

    upload_id: str
    record: DatasetRecord
    create: bool
    replace: bool
    file: StagedFile | None = None
    dataset: object = None
    live: object = None
    announced: int = 0  # clients announced by the header (positions 0 .. announced - 1)
    reserved: int = 0
    check_reserved: int = 0  # vdpf: the memory its check holds of the server's --max-check-memory
    accepted: int = 0  # clients staged (parsed, claimed, written)
    rejected: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # positions this server rejected
    registered: bool = False  # counted in the server's staged uploads (asked before a repair drops one)
    per_client: int = 0  # the most key bytes one client may send (bounds each chunk's key frame)
    verify: object | None = None  # vdpf: the check channel with the other server (peers.VerifyLink)
    checked: int = 0  # vdpf: chunks checked so far
    check_seconds: float = 0.0  # vdpf: time in the checks (with the waits for the other server)
    #: vdpf: histogram shares of the staged clients per series (2^n words each, fixed by the header), summed
    #: chunk by chunk from the check's own expansion, so the commit need not expand the keys again
    hists: dict | None = None
