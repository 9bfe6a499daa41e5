"""Struct-of-arrays key batches shared by the DPF and the DCF.

What it does
    A key batch holds K keys of one party, one domain size n and one output
    size l as numpy arrays (one row per key, correction words level-major so
    that level i of every key is one contiguous slice):

    ======  ==============  ===================================================
    seeds   (K, 2) uint64   root seed s_b^(0) of each key
    scw     (n, 2, K)       seed corrections s_CW^(i): [i, 0] low words,
                            [i, 1] high words
    tcw     (n, 2, K) uint8 control-bit corrections: [i, 0] = t_CW^L,
                            [i, 1] = t_CW^R, each 0/1
    vcw     (n, K) uint64   value corrections V_CW^(i) mod 2^l (DCF only)
    fcw     (K,) uint64     output correction CW^(n+1) mod 2^l
    ccw     (K, 4, 2)       check correction cs of a verifiable DPF (VDPF only:
                            four 128-bit blocks, :mod:`pairwise.fss.vdpf`)
    ======  ==============  ===================================================

    Word planes instead of (lo, hi) pairs keep every numpy operation of the
    tree walk on contiguous 1-D arrays (numpy is several times slower on a
    trailing axis of length 2).  The batch (de)serializes all keys at once (:mod:`pairwise.fss.keys`), evaluates
    them level by level with one AES call per tree level over a chunk of keys
    (subclasses supply the tree walk), and indexes/slices/concatenates.  A
    single key (:class:`FSSKey`) is a batch of one with scalar-friendly
    methods.

Security model
    Semi-honest, two non-colluding servers: each holds the keys of one party
    index; a key alone is pseudorandom and reveals nothing about alpha or
    beta beyond n and l (the security theorems of Boyle-Gilboa-Ishai 2016, Sec. 3, and
    Boyle et al. 2021, Sec. 3).  The batch never prints key material (``repr`` shows only the
    public parameters).  Nothing here checks that a client's two keys are
    consistent: that is the verifiable DPF of :mod:`pairwise.fss.vdpf`.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import ClassVar, overload

import numpy as np

from pairwise.mpc.aes import FixedKeyAES

from .keys import (
    KIND_DCF,
    KIND_NAMES,
    KIND_VDPF,
    DecodedKeys,
    FSSParameterError,
    IntArrayLike,
    IntLike,
    KeyFormatError,
    decode_keys,
    encode_keys,
    key_layout,
    points_array,
    validate_point,
)

__all__ = ["DEFAULT_CHUNK", "GEN_CHUNK", "FSSKeyBatch", "FSSKey", "reconstruct"]

#: Keys (or points) per vectorized chunk: large enough that each AES call and
#: numpy op covers thousands of blocks, small enough that a chunk's working
#: set stays in the L2 cache.  ``chunk=None`` in an eval call means one chunk.
DEFAULT_CHUNK = 1 << 15

#: Keys per vectorized chunk of key generation (arrays of both parties' seeds).
GEN_CHUNK = 1 << 13


@overload
def reconstruct(share0: IntLike, share1: IntLike, l: int) -> int: ...
@overload
def reconstruct(share0: IntArrayLike, share1: IntLike | IntArrayLike, l: int) -> np.ndarray: ...
@overload
def reconstruct(share0: IntLike, share1: IntArrayLike, l: int) -> np.ndarray: ...


def reconstruct(share0: IntLike | IntArrayLike, share1: IntLike | IntArrayLike, l: int) -> int | np.ndarray:
    """f(x) = share0 + share1 mod 2^l, for ints or uint64 arrays of shares."""
    if isinstance(share0, (int, np.integer)) and isinstance(share1, (int, np.integer)):
        return (int(share0) + int(share1)) % (1 << l)
    s = np.asarray(share0, dtype=np.uint64) + np.asarray(share1, dtype=np.uint64)
    return s & np.uint64((1 << l) - 1) if l < 64 else s


class FSSKeyBatch:
    """K keys of one kind, party, n and l as arrays (see the module docstring)."""

    KIND: ClassVar[int]
    KEY_CLASS: ClassVar[type[FSSKey]]

    def __init__(
        self,
        party: int,
        n: int,
        l: int,
        seeds: np.ndarray,
        scw: np.ndarray,
        tcw: np.ndarray,
        fcw: np.ndarray,
        vcw: np.ndarray | None = None,
        ccw: np.ndarray | None = None,
    ) -> None:
        if party not in (0, 1):
            raise FSSParameterError(f"party must be 0 or 1, got {party}")
        lay = key_layout(self.KIND, n, l)
        K = seeds.shape[0]
        shapes = {"seeds": (seeds, (K, 2)), "scw": (scw, (n, 2, K)), "tcw": (tcw, (n, 2, K)), "fcw": (fcw, (K,))}
        if self.KIND == KIND_DCF:
            if vcw is None:
                raise FSSParameterError("a DCF key batch needs value corrections vcw")
            shapes["vcw"] = (vcw, (n, K))
        elif vcw is not None:
            raise FSSParameterError("a DPF key batch has no value corrections")
        if self.KIND == KIND_VDPF:
            if ccw is None:
                raise FSSParameterError("a VDPF key batch needs check corrections ccw")
            shapes["ccw"] = (ccw, (K, 4, 2))
        elif ccw is not None:
            raise FSSParameterError("only a VDPF key batch has check corrections")
        for name, (arr, shape) in shapes.items():
            if arr.shape != shape:
                raise FSSParameterError(f"{name} has shape {arr.shape}, expected {shape}")
        self.party, self.n, self.l = int(party), lay.n, lay.l
        self.seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
        self.scw = np.ascontiguousarray(scw, dtype=np.uint64)
        self.tcw = np.ascontiguousarray(tcw, dtype=np.uint8)
        self.fcw = np.ascontiguousarray(fcw, dtype=np.uint64)
        self.vcw: np.ndarray | None = None if vcw is None else np.ascontiguousarray(vcw, dtype=np.uint64)
        self.ccw: np.ndarray | None = None if ccw is None else np.ascontiguousarray(ccw, dtype=np.uint64)
        for frozen in (self.seeds, self.scw, self.tcw, self.fcw, self.vcw, self.ccw):
            if frozen is not None:
                frozen.flags.writeable = False

    # ------------------------------------------------------------------ basics
    @property
    def mask(self) -> np.uint64:
        """2^l - 1 as uint64."""
        return np.uint64((1 << self.l) - 1)

    @property
    def key_bytes(self) -> int:
        """Serialized size of one key."""
        return key_layout(self.KIND, self.n, self.l).size

    def __len__(self) -> int:
        return self.seeds.shape[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(party={self.party}, n={self.n}, l={self.l}, keys={len(self)})"

    def _take(self, idx) -> FSSKeyBatch:
        return type(self)(
            self.party,
            self.n,
            self.l,
            self.seeds[idx],
            self.scw[:, :, idx],
            self.tcw[:, :, idx],
            self.fcw[idx],
            None if self.vcw is None else self.vcw[:, idx],
            None if self.ccw is None else self.ccw[idx],
        )

    def __getitem__(self, item):
        if isinstance(item, (int, np.integer)):
            k = int(item)
            if not -len(self) <= k < len(self):
                raise IndexError(f"key index {k} out of range for a batch of {len(self)}")
            k %= len(self)
            return self.KEY_CLASS(self._take(slice(k, k + 1)))
        if isinstance(item, slice):
            return self._take(item)
        idx = np.asarray(item)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        return self._take(idx.astype(np.intp))

    @classmethod
    def concat(cls, batches: Sequence[FSSKeyBatch]) -> FSSKeyBatch:
        """One batch holding the keys of ``batches`` in order (same party, n, l)."""
        if not batches:
            raise FSSParameterError("concat needs at least one batch")
        b0 = batches[0]
        for b in batches:
            if not isinstance(b, cls) or (b.party, b.n, b.l) != (b0.party, b0.n, b0.l):
                raise FSSParameterError("concat needs batches of one kind, party, n and l")
        return cls(
            b0.party,
            b0.n,
            b0.l,
            np.concatenate([b.seeds for b in batches]),
            np.concatenate([b.scw for b in batches], axis=2),
            np.concatenate([b.tcw for b in batches], axis=2),
            np.concatenate([b.fcw for b in batches]),
            None if b0.vcw is None else np.concatenate([b.vcw for b in batches], axis=1),
            None if b0.ccw is None else np.concatenate([b.ccw for b in batches]),
        )

    @classmethod
    def from_keys(cls, keys: Sequence[FSSKey]) -> FSSKeyBatch:
        """Batch of single keys (same party, n, l)."""
        return cls.concat([k.batch for k in keys])

    # ------------------------------------------------------------------ bytes
    def to_bytes_array(self) -> np.ndarray:
        """(K, key_bytes) uint8 array, row k = the serialized key k."""
        return encode_keys(
            self.KIND, self.party, self.n, self.l, self.seeds, self.scw, self.tcw, self.fcw, self.vcw, self.ccw
        )

    def to_bytes_list(self) -> list[bytes]:
        """The serialized keys, one ``bytes`` per key."""
        return [row.tobytes() for row in self.to_bytes_array()]

    @classmethod
    def _from_decoded(cls, d: DecodedKeys) -> FSSKeyBatch:
        return cls(d.party, d.n, d.l, d.seeds, d.scw, d.tcw, d.fcw, d.vcw, d.ccw)

    @classmethod
    def from_bytes_list(
        cls, blobs: Sequence[bytes], *, n: int | None = None, l: int | None = None, party: int | None = None
    ) -> FSSKeyBatch:
        """Parse serialized keys into a batch (vectorized).

        n, l and party default to those of the first key; every key must
        match.  Raises :class:`KeyFormatError` whose ``index`` is the first
        bad key and whose ``indices`` lists all of them.
        """
        d, _, _ = decode_keys(blobs, cls.KIND, n=n, l=l, party=party)
        return cls._from_decoded(d)

    @classmethod
    def parse_valid(
        cls, blobs: Sequence[bytes], *, n: int, l: int, party: int
    ) -> tuple[FSSKeyBatch, list[int], dict[int, KeyFormatError]]:
        """Parse the well-formed keys and report the others.

        Returns ``(batch, kept, rejected)``: ``batch[j]`` is ``blobs[kept[j]]``
        and ``rejected`` maps each bad index to its :class:`KeyFormatError`.
        This is what a server uses to drop misbehaving clients and go on.
        """
        d, kept, errors = decode_keys(blobs, cls.KIND, n=n, l=l, party=party, collect=True)
        return cls._from_decoded(d), kept, errors

    # ------------------------------------------------------------------ evaluation
    def _walk(self, x, key_slice: slice | None, aes: FixedKeyAES | None) -> np.ndarray:
        """Shares (uint64, reduced mod 2^l) of the keys in ``key_slice`` at ``x``.

        ``x`` is a Python int (all keys at x) or a uint64 array with one point
        per key of the slice, or (for a batch of one key) one per output.
        """
        raise NotImplementedError

    def _points(self, x: IntLike | IntArrayLike) -> int | np.ndarray:
        if np.ndim(x) == 0:
            return validate_point(x, self.n)
        return points_array(x, self.n)

    def eval(
        self, x: IntLike | IntArrayLike, *, chunk: int | None = DEFAULT_CHUNK, aes: FixedKeyAES | None = None
    ) -> np.ndarray:
        """Party shares of every key at x: an int (all keys at one point) or an array of K points.

        Returns a (K,) uint64 array of shares in [0, 2^l).  Vectorized across
        keys: one AES call per tree level per chunk of ``chunk`` keys.
        """
        pts = self._points(x)
        K = len(self)
        if not isinstance(pts, int) and pts.shape != (K,):
            raise FSSParameterError(f"x must be one point or one point per key ({K}), got {pts.shape[0]}")
        step = K if not chunk else max(1, int(chunk))
        if K <= step:
            return self._walk(pts, None, aes)
        out = np.empty(K, dtype=np.uint64)
        for c0 in range(0, K, step):
            sl = slice(c0, min(K, c0 + step))
            out[sl] = self._walk(pts if isinstance(pts, int) else pts[sl], sl, aes)
        return out

    def eval_sum(
        self, x: IntLike | IntArrayLike, *, chunk: int | None = DEFAULT_CHUNK, aes: FixedKeyAES | None = None
    ) -> int:
        """This party's share of sum_k f_k(x) mod 2^l (an int)."""
        shares = self.eval(x, chunk=chunk, aes=aes)
        return int(np.sum(shares, dtype=np.uint64)) & ((1 << self.l) - 1)

    def eval_sums(
        self, xs: IntArrayLike, *, chunk: int | None = DEFAULT_CHUNK, aes: FixedKeyAES | None = None
    ) -> np.ndarray:
        """Shares of sum_k f_k(x) mod 2^l for each x in ``xs`` ((m,) uint64)."""
        pts = points_array(xs, self.n)
        return np.array([self.eval_sum(int(x), chunk=chunk, aes=aes) for x in pts], dtype=np.uint64)


class FSSKey:
    """One key: a batch of size one, with int-in/int-out evaluation."""

    BATCH_CLASS: ClassVar[type[FSSKeyBatch]]

    def __init__(self, batch: FSSKeyBatch) -> None:
        if not isinstance(batch, self.BATCH_CLASS) or len(batch) != 1:
            raise FSSParameterError(f"{type(self).__name__} wraps a {self.BATCH_CLASS.__name__} of one key")
        self.batch = batch

    @property
    def party(self) -> int:
        return self.batch.party

    @property
    def n(self) -> int:
        return self.batch.n

    @property
    def l(self) -> int:
        return self.batch.l

    def __repr__(self) -> str:
        return f"{type(self).__name__}(party={self.party}, n={self.n}, l={self.l})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return hmac.compare_digest(self.to_bytes(), other.to_bytes())

    __hash__ = None  # type: ignore[assignment]

    def to_bytes(self) -> bytes:
        """Versioned, deterministic serialization (see :mod:`pairwise.fss.keys`)."""
        return self.batch.to_bytes_array()[0].tobytes()

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        n: int | None = None,
        l: int | None = None,
        party: int | None = None,
    ) -> FSSKey:
        """Parse one key; raises :class:`KeyFormatError` if it is malformed."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise KeyFormatError(f"key must be bytes, got {type(data).__name__}")
        try:
            d, _, _ = decode_keys([bytes(data)], cls.BATCH_CLASS.KIND, n=n, l=l, party=party)
        except KeyFormatError as exc:
            reason = str(exc).split(": ", 1)[-1]
            raise KeyFormatError(f"{KIND_NAMES[cls.BATCH_CLASS.KIND]} key: {reason}") from None
        return cls(cls.BATCH_CLASS._from_decoded(d))

    def eval(self, x: int, *, aes: FixedKeyAES | None = None) -> int:
        """This party's share of f(x) in [0, 2^l)."""
        x = validate_point(x, self.n)
        return int(self.batch._walk(x, None, aes)[0])

    def eval_many(
        self, xs: IntArrayLike, *, chunk: int | None = DEFAULT_CHUNK, aes: FixedKeyAES | None = None
    ) -> np.ndarray:
        """Shares of f at every point of ``xs`` ((m,) uint64), vectorized across points."""
        pts = points_array(xs, self.n)
        m = pts.shape[0]
        step = m if not chunk else max(1, int(chunk))
        out = np.empty(m, dtype=np.uint64)
        for c0 in range(0, m, step):
            sl = slice(c0, min(m, c0 + step))
            out[sl] = self.batch._walk(pts[sl], None, aes)
        return out
