"""The clients of an ECDF upload: their ids as stored, and sources that yield them block by block.

What it does
    :func:`stored_client_ids` maps client ids (non-negative integers below
    2^63, or strings) to their stored uint64 form; a :class:`ClientSource`
    yields an upload's clients as :class:`ClientBlock` s, so an upload never
    holds them all (:class:`ArraySource`: in-memory arrays; the command
    line's CSV source reads a file twice).  Used by
    :mod:`pairwise.protocols.ecdf.uploader`, which re-exports these names.

Security model
    None of its own: a client id is a pseudonym, not a secret (see
    :func:`stored_client_ids`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .shares import ShareParameterError

__all__ = ["STRING_ID_BIT", "ArraySource", "ClientBlock", "ClientSource", "stored_client_ids"]


#: Stored ids of string client ids have the top bit set; numeric ids are below 2^63 (no collision between them).
STRING_ID_BIT = np.uint64(1 << 63)


def stored_client_ids(ids, dataset: str) -> np.ndarray:
    """The stored form (uint64) of client ids: non-negative integers below 2^63 stand for themselves, every
    other id is a string mapped by a keyed hash.

    A string id ``s`` (``p01000``, an e-mail address, a UUID) is stored as
    2^63 + the first 63 bits of SHA-256("pairwise-ecdf/client-id" || 0 ||
    dataset || 0 || s) (UTF-8): every data owner of the dataset maps the same
    person to the same id without asking anyone (the hash is keyed by the
    dataset id only, which all of them know), all servers get identical ids
    (their digests agree), and no new server state is needed.  String ids
    never collide with numeric ones (the top bit); two distinct strings
    collide with probability 2^-63 per pair (about 5e-6 for 10^7 ids), and a
    collision can never merge two people silently: the server rejects the
    second as a duplicate and the owner's upload report names it.  The hash
    hides nothing: an id is a pseudonym, not a secret (numeric ids travel as
    they are).  A cell that reads as a number (``1000``, ``1000.0``) is that
    number, as before.
    """
    import hashlib

    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ShareParameterError("client ids must be a 1-D list")
    if np.issubdtype(arr.dtype, np.integer):
        if (arr < 0).any():
            raise ShareParameterError("numeric client ids must be non-negative integers")
        if arr.size and arr.max() >= STRING_ID_BIT:
            raise ShareParameterError(
                "numeric client ids must be below 2^63 (larger ones are reserved for the hashes of string ids)"
            )
        return arr.astype(np.uint64)
    # the common case, whole numbers as text or floats: vectorized (text comes as str arrays, or as object
    # arrays of str from a CSV file, which hold each cell at its own length)
    all_text = arr.dtype.kind == "O" and all(type(v) is str for v in arr.tolist())
    if arr.dtype.kind in "fUS" or all_text:
        try:
            f = arr.astype(np.float64)
        except ValueError:
            f = None
        if (
            f is not None
            and np.isfinite(f).all()
            and (f == np.floor(f)).all()
            and (f >= 0).all()
            and (f < 2.0**53).all()
        ):
            return f.astype(np.uint64)
    out = np.empty(arr.size, dtype=np.uint64)
    key = b"pairwise-ecdf/client-id\x00" + dataset.encode("utf-8") + b"\x00"
    for i, v in enumerate(arr.tolist()):
        number = _as_number(v)
        if number is not None:
            out[i] = number
            continue
        text = str(v)
        if not text:
            raise ShareParameterError(f"client id at position {i} is empty")
        h = int.from_bytes(hashlib.sha256(key + text.encode("utf-8")).digest()[:8], "big")
        out[i] = np.uint64((h >> 1) | (1 << 63))
    return out


def _as_number(v) -> int | None:
    """A client id cell that is a number: its integer value if integral, non-negative and below 2^63."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, np.integer)):
        n = int(v)
    else:
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None
        if not np.isfinite(f) or f != np.floor(f):
            return None
        text = str(v).strip()
        n = int(text) if text.isdigit() else int(f)
        if not text.isdigit() and abs(f) >= 2.0**53:  # a float that cannot be exact: keep it as a string
            return None
    return n if 0 <= n < (1 << 63) else None


def _ids(client_ids_, count: int, dataset: str = "") -> np.ndarray:
    if client_ids_ is None:
        return np.arange(count, dtype=np.uint64)
    ids = stored_client_ids(client_ids_, dataset)
    if ids.shape != (count,):
        raise ShareParameterError(f"client ids must be {count} non-negative integers or strings")
    return ids


@dataclass
class ClientBlock:
    """Consecutive clients of an upload: their values (domain points), weights per series (None: 1), ids."""

    values: np.ndarray
    weights: dict[str, np.ndarray | None]
    ids: np.ndarray


class ClientSource(Protocol):
    """Where an upload's clients come from, block by block, so an upload never holds them all.

    ``count``: how many clients (the upload header announces it);
    ``series``: name -> max weight; ``blocks(size)`` yields consecutive
    :class:`ClientBlock` of ``size`` clients (the last may be shorter), in
    the same order every time it is called.
    """

    count: int
    series: dict[str, int]

    def blocks(self, size: int) -> Iterator[ClientBlock]: ...


class ArraySource:
    """The clients of in-memory arrays (values, :func:`make_series` series, ids)."""

    def __init__(self, values, series: dict[str, tuple], ids: np.ndarray) -> None:
        self.values = np.asarray(values)
        self._series = series
        self.ids = ids
        self.count = int(self.values.size)
        self.series = {s: int(w) for s, (_, w) in series.items()}

    def blocks(self, size: int) -> Iterator[ClientBlock]:
        for c0 in range(0, self.count, size):
            sl = slice(c0, c0 + size)
            yield ClientBlock(
                self.values[sl],
                {s: None if w is None else np.asarray(w)[sl] for s, (w, _) in self._series.items()},
                self.ids[sl],
            )
