"""One dataset held by an ECDF server: its clients, its key material, its digest, consistent snapshots.

What it does
    :class:`Dataset` is the in-memory view of a stored dataset
    (:mod:`pairwise.protocols.ecdf.storage`).  Client ids are loaded at
    startup; key material is parsed from storage on the first release that
    needs it (:meth:`Dataset.snapshot`) and kept.  All state changes go
    through the dataset's lock, so a release never sees half an upload:

    * :meth:`Dataset.add_upload` appends one committed upload (ids and the
      parsed shares of every series together);
    * :meth:`Dataset.snapshot` returns, under the lock, the client count,
      one share object per needed series -- each checked to hold exactly
      one row per client -- and the dataset digest.  The release then works
      on that snapshot only.

    :meth:`Dataset.digest` is what the servers compare before every release:
    SHA-256 over the public parameters (scheme, m, domain and output bits,
    series and weight bounds, pointwise round and grid, public metadata), the
    sorted ids of the committed uploads and the sorted client ids.  Keys are
    random shares and differ between servers by design; the upload ids tie
    them to one generation of keys, so a server holding keys of another
    upload (or none) has another digest.

    Uploads are *staged* per connection (on disk,
    :mod:`pairwise.protocols.ecdf.staging`) and become visible only when
    committed; while staged, their client ids are claimed
    (:meth:`Dataset.claim`), so two concurrent uploads cannot both add a
    client.  Client ids, committed and claimed, are held in :class:`IdSet`
    (sorted arrays, 8 bytes per id); the key material of a committed upload
    is parsed from storage by the first release that needs it.

Security model
    Server-local bookkeeping; see :mod:`pairwise.protocols.ecdf.server`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field

import numpy as np

from pairwise.fss import KeyFormatError

from .shares import PointwiseShares, ShareParameterError, grid_points, parse_keys, reduce_mod
from .storage import ChunkRecord, DatasetRecord, Storage, StorageError
from .validation import layout_for, load_series
from .wire import DatasetError

__all__ = ["Dataset", "IdSet", "Snapshot", "split_keys"]


def split_keys(lens: np.ndarray, data: bytes) -> list[bytes]:
    """Cut concatenated keys into one bytes object per key (``lens`` sums to ``len(data)``)."""
    offs = np.concatenate([[0], np.cumsum(lens, dtype=np.int64)])
    mv = memoryview(data)
    return [bytes(mv[offs[i] : offs[i + 1]]) for i in range(len(lens))]


def __getattr__(name: str):
    """Names that moved to :mod:`pairwise.protocols.ecdf.staging` (kept importable from here)."""
    if name in ("StagedChunk", "StagedUpload", "take_raw"):
        from . import staging

        return getattr(staging, name)
    raise AttributeError(name)


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` by a sort: numpy 2.4's hash-based ``np.unique`` takes about 10 s per million uint64
    ids here (a sort, 0.1 s), which made the commit of a 10^7-client upload take most of an hour."""
    out = np.sort(a, kind="stable")
    if out.size > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


class IdSet:
    """A set of client ids as a few sorted, disjoint uint64 arrays (8 bytes per id).

    :meth:`add` takes ids known to be new; arrays of similar size are merged
    (as the digits of a binary counter), so there are O(log n) of them and a
    membership test of k ids costs O(k log^2 n).
    """

    def __init__(self) -> None:
        self._arrays: list[np.ndarray] = []
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, ids: np.ndarray) -> None:
        new = _sorted_unique(np.asarray(ids, dtype=np.uint64))
        if not new.size:
            return
        self._size += new.size
        self._arrays.append(new)
        while len(self._arrays) > 1 and self._arrays[-2].size <= 2 * self._arrays[-1].size:
            b = self._arrays.pop()
            a = self._arrays.pop()
            merged = np.concatenate([a, b])  # disjoint: a sort merges them (no np.union1d, see _sorted_unique)
            merged.sort(kind="stable")
            self._arrays.append(merged)

    def contains(self, ids: np.ndarray) -> np.ndarray:
        """A boolean mask: which of ``ids`` are in the set."""
        ids = np.asarray(ids, dtype=np.uint64)
        out = np.zeros(ids.size, dtype=bool)
        for a in self._arrays:
            at = np.searchsorted(a, ids)
            hit = at < a.size
            out[hit] |= a[at[hit]] == ids[hit]
        return out

    def sorted(self) -> np.ndarray:
        if not self._arrays:
            return np.zeros(0, dtype=np.uint64)
        return np.sort(np.concatenate(self._arrays)) if len(self._arrays) > 1 else self._arrays[0]


@dataclass
class Snapshot:
    """What one release works on: a fixed client count, its shares per series, the digest they had."""

    count: int
    shares: dict[str, object]
    digest: str
    #: seconds already spent on the release while it was prepared (``shares``: the cluster's evaluation)
    timings: dict = field(default_factory=dict)
    #: the cluster that evaluated the shares (spec, workers, threads, shards), None without one
    cluster: dict | None = None


class Dataset:
    """A dataset of one server (see the module docstring)."""

    def __init__(self, record: DatasetRecord, server_id: int, *, new: bool = False) -> None:
        self.record = record
        self.server_id = server_id
        self.lock = threading.Lock()
        self._ids = IdSet()
        self._uploads: list[str] = []
        # None: key material not loaded yet (a new dataset has nothing to load)
        self._parts: dict[str, list] | None = {s: [] for s in record.series} if new else None
        self._unparsed: list[str] = []  # committed uploads whose keys are not in _parts yet
        self._cache: dict[str, object] = {}
        self._pending: dict[int, IdSet] = {}  # the ids claimed by each staged upload (by its claim token)
        self._digest: str | None = None

    # ------------------------------------------------------------------ public parameters
    @property
    def name(self) -> str:
        return self.record.name

    @property
    def scheme(self) -> str:
        return self.record.scheme

    @property
    def m(self) -> int:
        return self.record.m

    @property
    def n(self) -> int:
        return self.record.n

    @property
    def l(self) -> int:
        return self.record.l

    @property
    def series(self) -> dict[str, int]:
        return self.record.series

    @property
    def count(self) -> int:
        with self.lock:
            return len(self._ids)

    def params(self) -> tuple:
        r = self.record
        return (r.scheme, r.m, r.n, r.l, tuple(sorted(r.series.items())))

    def series_weight(self, name: str) -> int:
        if name in self.series:
            return self.series[name]
        if name == "all" and "pos" in self.series and "neg" in self.series:
            return 1
        raise DatasetError(f"dataset {self.name!r} has no series {name!r} (it has {sorted(self.series)})")

    def base_series(self, name: str) -> list[str]:
        """The stored series a release of ``name`` reads (``all`` of a labelled dataset = pos + neg)."""
        self.series_weight(name)
        return [name] if name in self.series else ["pos", "neg"]

    # ------------------------------------------------------------------ loading and uploads
    def load_ids(self, storage: Storage) -> None:
        """Read the committed client ids (not the keys) from storage."""
        with self.lock:
            self._load_ids_locked(storage)

    def _load_ids_locked(self, storage: Storage) -> None:
        for c in storage.chunks(self.name, with_keys=False):
            self._add_ids(c.upload_id, c.ids)

    def _add_ids(self, upload_id: str, ids: np.ndarray) -> None:
        if not self._uploads or self._uploads[-1] != upload_id:
            self._uploads.append(upload_id)
        self._ids.add(ids)
        self._digest = None

    def _load_keys(self, storage: Storage, upload_id: str | None = None) -> None:
        """Parse the stored keys of every upload (or of ``upload_id`` only, appended to the parsed ones)."""
        parts: dict[str, list] = {s: [] for s in self.series}
        for c in storage.chunks(self.name, upload_id=upload_id):
            for s in self.series:
                if s not in c.keys:
                    raise StorageError(f"stored dataset {self.name!r} lacks series {s!r} in upload {c.upload_id}")
            if self.record.scheme == "vdpf":  # the series share keys: parse the chunk's bundles together
                for s, sh in self._parse_verified(c).items():
                    parts[s].append(sh)
                continue
            for s in self.series:
                parts[s].append(self._parse_stored(c, s))
        if upload_id is None or self._parts is None:
            self._parts = parts
        else:
            for s, got in parts.items():
                self._parts[s].extend(got)
        self._cache = {}

    def _parse_stored(self, c: ChunkRecord, s: str):
        r = self.record
        lens, data = c.keys[s]
        k = c.ids.size
        if r.scheme == "pointwise":
            T = len(r.thresholds or [])
            if len(data) != 8 * k * T:
                raise StorageError(
                    f"stored pointwise shares of {self.name!r} have {len(data)} bytes, expected {8 * k * T}"
                )
            vals = np.frombuffer(data, dtype="<u8").astype(np.uint64).reshape(k, T)
            pts = grid_points(r.n, r.grid_bits)[np.asarray(r.thresholds, dtype=np.int64)]
            return PointwiseShares(pts, reduce_mod(vals, r.l), r.l)
        if lens.size != k or int(lens.sum()) != len(data):
            raise StorageError(f"stored keys of {self.name!r} (upload {c.upload_id}) are truncated")
        shares, _kept, bad = parse_keys(r.scheme, split_keys(lens, data), party=self.server_id, m=r.m, n=r.n, l=r.l)
        if bad:
            raise StorageError(
                f"stored keys of dataset {self.name!r} (upload {c.upload_id}) are corrupt: {next(iter(bad.values()))}"
            )
        return shares

    def _parse_verified(self, c: ChunkRecord) -> dict:
        """Histogram shares of a stored chunk of (verified) vdpf key bundles (:func:`validation.load_series`)."""
        r = self.record
        keys = {}
        for s in self.series:
            lens, data = c.keys[s]
            if lens.size != c.ids.size or int(lens.sum()) != len(data):
                raise StorageError(f"stored keys of {self.name!r} (upload {c.upload_id}) are truncated")
            keys[s] = split_keys(lens, data)
        try:
            return load_series(keys, layout=layout_for(dict(r.series), r.n, r.l), party=self.server_id)
        except (KeyFormatError, ShareParameterError) as exc:
            raise StorageError(
                f"stored keys of dataset {self.name!r} (upload {c.upload_id}) are corrupt: {exc}"
            ) from None

    def claim(self, ids: np.ndarray, token: int) -> tuple[np.ndarray, dict[int, str]]:
        """Claim client ids for the staged upload ``token`` (an id of the caller's choosing, e.g. ``id(upload)``):
        (mask of the newly claimed, {index: reason} for the others: already committed or claimed by this
        upload, an earlier repeat in ``ids``, or claimed by a concurrent upload)."""
        ids = np.asarray(ids, dtype=np.uint64)
        reasons: dict[int, str] = {}
        with self.lock:
            mine = self._pending.setdefault(token, IdSet())
            _, first = np.unique(ids, return_index=True)
            repeat = np.ones(ids.size, dtype=bool)
            repeat[first] = False
            dup = repeat | self._ids.contains(ids) | mine.contains(ids)
            busy = np.zeros(ids.size, dtype=bool)
            for other, claims in self._pending.items():
                if other != token:
                    busy |= claims.contains(ids)
            busy &= ~dup
            for i in np.flatnonzero(dup):
                reasons[int(i)] = f"duplicate client id {int(ids[i])}"
            for i in np.flatnonzero(busy):
                reasons[int(i)] = f"client id {int(ids[i])} is being uploaded by a concurrent upload"
            ok = ~(dup | busy)
            mine.add(ids[ok])
        return ok, reasons

    def unclaim(self, token: int) -> None:
        """Forget every id claimed by the staged upload ``token``."""
        with self.lock:
            self._pending.pop(token, None)

    def add_upload(
        self,
        upload_id: str,
        ids: list[np.ndarray],
        *,
        token: int,
        record: DatasetRecord | None = None,
        replace: bool = False,
        parsed: dict | None = None,
    ) -> None:
        """Make a committed upload visible (after :meth:`Storage.commit_upload` returned): its client ids,
        and its keys parsed from storage by the next release, or ``parsed`` (series -> shares of exactly
        these clients, e.g. the histograms of the servers' vdpf check).  ``replace``: a new pointwise round
        (``record``) replaces every client."""
        with self.lock:
            if replace:
                self.record = record
                self._ids, self._uploads = IdSet(), []
                self._parts = {s: [] for s in self.series}
                self._unparsed = []
                self._cache = {}
            for chunk_ids in ids:
                self._add_ids(upload_id, chunk_ids)
            if not self._uploads or self._uploads[-1] != upload_id:
                self._uploads.append(upload_id)
            if self._parts is not None:
                if parsed is not None and set(parsed) == set(self.series):
                    for s, sh in parsed.items():
                        self._parts[s].append(sh)
                        self._cache.pop(s, None)
                else:
                    self._unparsed.append(upload_id)
            self._pending.pop(token, None)
            self._digest = None

    def upload_ids(self) -> list[str]:
        """The committed uploads, in commit order."""
        with self.lock:
            return list(self._uploads)

    def drop_upload(self, storage: Storage, upload_id: str) -> None:
        """Delete one committed upload (repair of an upload that not every server committed): from storage in
        one transaction, then from memory (ids reloaded, keys reloaded on the next release)."""
        with self.lock:
            if upload_id not in self._uploads:
                raise DatasetError(f"dataset {self.name!r} has no upload {upload_id!r} on server {self.server_id}")
            storage.drop_upload(self.name, upload_id)
            self._ids, self._uploads = IdSet(), []
            self._load_ids_locked(storage)
            self._parts = None
            self._unparsed = []
            self._cache = {}
            self._digest = None

    # ------------------------------------------------------------------ releases
    def _shares(self, s: str):
        got = self._cache.get(s)
        if got is None:
            parts = [p for p in self._parts[s] if len(p)]
            if not parts:
                return None
            got = type(parts[0]).concat(parts) if len(parts) > 1 else parts[0]
            self._parts[s] = [got]
            self._cache[s] = got
        return got

    def snapshot(self, storage: Storage, series: list[str]) -> Snapshot:
        """Count, shares of the stored series behind ``series`` and digest, taken together under the lock.

        Raises :class:`DatasetError` if the dataset has no clients or if any
        series does not hold exactly one row per client (the caller has not
        charged anything yet).
        """
        need = sorted({b for s in series for b in self.base_series(s)})
        with self.lock:
            count = len(self._ids)
            if count == 0:
                raise DatasetError(f"dataset {self.name!r} holds no clients")
            if self._parts is None:
                self._load_keys(storage)
                self._unparsed = []
            while self._unparsed:
                self._load_keys(storage, self._unparsed[0])
                self._unparsed.pop(0)
            shares = {}
            for s in need:
                sh = self._shares(s)
                rows = 0 if sh is None else len(sh)
                if rows != count:
                    raise DatasetError(
                        f"server {self.server_id}: dataset {self.name!r} is inconsistent "
                        f"({rows} rows of series {s!r} for {count} clients); refusing the release"
                    )
                shares[s] = sh
            return Snapshot(count, shares, self._digest_locked())

    def digest(self) -> str:
        with self.lock:
            return self._digest_locked()

    def _digest_locked(self) -> str:
        if self._digest is None:
            r = self.record
            params = {
                "dataset": r.name,
                "scheme": r.scheme,
                "m": r.m,
                "domain_bits": r.n,
                "output_bits": r.l,
                "series": sorted(r.series.items()),
                "grid_bits": r.grid_bits,
                "thresholds": r.thresholds,
                "round": r.round,
                "meta": r.meta,
            }
            h = hashlib.sha256(b"pairwise-ecdf/dataset\x00")
            h.update(json.dumps(params, sort_keys=True).encode())
            h.update(json.dumps(sorted(self._uploads)).encode())
            h.update(self._ids.sorted().astype("<u8").tobytes())
            self._digest = h.hexdigest()
        return self._digest

    def info(self) -> dict:
        r = self.record
        with self.lock:
            count, uploads = len(self._ids), len(self._uploads)
            digest = self._digest_locked()
        return {
            "dataset": r.name,
            "scheme": r.scheme,
            "m": r.m,
            "domain_bits": r.n,
            "output_bits": r.l,
            "series": dict(r.series),
            "clients": count,
            "uploads": uploads,
            "sealed": True,
            "budget": str(r.budget),
            "grid_bits": r.grid_bits,
            "round": r.round,
            "meta": r.meta,
            "digest": digest,
        }
