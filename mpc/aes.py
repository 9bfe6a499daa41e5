"""Fixed-key AES-128 over numpy arrays of 128-bit blocks, and the hashes built on it.

What it does
    Blocks are numpy ``uint64`` arrays whose last axis has length 2: ``[..., 0]``
    is the low 64 bits and ``[..., 1]`` the high 64 bits of the block, so the
    memory of a C-contiguous array *is* the little-endian byte string of its
    blocks and AES runs on it with no copy.  One call to :meth:`FixedKeyAES.permute`
    encrypts every block of an array with one OpenSSL AES-ECB call (AES-NI
    through ``cryptography``), which is what keeps the garbling engine and the
    FSS evaluator fast in Python: the cost is per call, not per block.

Hashes
    ``sigma`` is the linear orthomorphism of Guo, Katz, Wang and Yu,
    "Efficient and Secure Multiparty Computation from Fixed-Key Block Ciphers"
    (IEEE S&P 2020), sigma(x_L || x_R) = (x_L xor x_R) || x_L.

    ``tccr_hash(x, tweak)`` = pi(sigma(x) xor tweak) xor sigma(x) is their
    tweakable circular correlation-robust (TCCR) hash, the one half-gates needs
    (Zahur-Rosulek-Evans 2015 require circular correlation robustness for
    free-XOR: Delta appears both in the hashed value and in the output).

    ``mmo_prg(seeds, n)`` expands each seed to ``n`` blocks as
    tccr_hash(seed, i) for i = 0..n-1: the fixed-key PRG used by the DPF/DCF
    keys and (historically) the OT extension; IKNP now expands its seeds with AES-CTR keyed by each seed (mpc.iknp).

Security model / assumption
    pi is AES-128 under a fixed, public key (``FIXED_KEY``), modelled as a
    random permutation (ideal-cipher model), as in GKWY 2020 and EMP-toolkit.
    The hash is secure only if every (input, tweak) pair used under one Delta
    is distinct: callers must give each hash call a unique tweak (the garbler
    uses (instance, gate, half-gate); the PRG uses the block index, and every
    seed is fresh randomness).  Nothing here is secret; keys, labels and seeds
    come from the caller, drawn with :func:`random_blocks` (``os.urandom``).
"""

from __future__ import annotations

import os
import threading

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = [
    "FIXED_KEY",
    "FixedKeyAES",
    "default_aes",
    "sigma",
    "tccr_hash",
    "mmo_prg",
    "random_blocks",
    "empty_blocks",
    "blocks_from_bytes",
    "blocks_to_bytes",
    "aes_ecb_reference",
    "BlockBuffer",
]

#: Public fixed key of the permutation pi (first 16 bytes of SHA-256("pairwise fixed-key AES")).
FIXED_KEY = bytes.fromhex("5d1b2b1c8f5ee8e4dd1f6a1b5b7c3a6e")


class FixedKeyAES:
    """AES-128 with one key, applied in place to whole numpy block arrays.

    The encryptor object of ``cryptography`` is reused across calls (ECB keeps
    no state between full blocks), and output goes into a caller-visible
    buffer with no intermediate ``bytes`` objects.
    """

    def __init__(self, key: bytes = FIXED_KEY) -> None:
        if len(key) != 16:
            raise ValueError(f"AES-128 key must be 16 bytes, got {len(key)}")
        self._enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
        self._scratch = bytearray(0)

    def permute(self, blocks: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Return pi(blocks), shape preserved.

        With ``out=None`` the result is written by OpenSSL straight into a fresh
        array (allocated with the 15 bytes of slack ``update_into`` needs).  An
        explicit ``out`` (which may alias ``blocks``) costs one extra memcpy
        unless it came from :func:`empty_blocks`.
        """
        src = np.ascontiguousarray(blocks, dtype=np.uint64)
        if src.shape[-1:] != (2,):
            raise ValueError(f"blocks must have last axis 2 (uint64 pairs), got shape {src.shape}")
        nbytes = src.nbytes
        if out is None:
            out = empty_blocks(src.shape[:-1])
        elif out.shape != src.shape or out.dtype != np.uint64 or not out.flags.c_contiguous:
            raise ValueError("out must be a C-contiguous uint64 array of the same shape")
        if nbytes == 0:
            return out
        dst = _slack_view(out)
        if dst is not None:
            self._enc.update_into(memoryview(src).cast("B"), dst)
            return out
        need = nbytes + 15
        if len(self._scratch) < need:
            self._scratch = bytearray(need)
        mv = memoryview(self._scratch)
        self._enc.update_into(memoryview(src).cast("B"), mv)
        out.reshape(-1).view(np.uint8)[:] = np.frombuffer(mv[:nbytes], dtype=np.uint8)
        return out


def empty_blocks(shape: tuple[int, ...] | int) -> np.ndarray:
    """An uninitialised (*shape, 2) uint64 block array that AES can fill in place.

    The array is a view of a byte buffer 16 bytes longer than the data, so
    :meth:`FixedKeyAES.permute` can hand OpenSSL the buffer directly.
    """
    if isinstance(shape, int):
        shape = (shape,)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(16 * count + 16, dtype=np.uint8)
    return raw[: 16 * count].view(np.uint64).reshape(*shape, 2)


def _slack_view(arr: np.ndarray) -> memoryview | None:
    """A writable byte view of ``arr`` extended into the buffer's trailing slack, if any."""
    base = arr.base
    while base is not None and isinstance(base, np.ndarray) and base.base is not None and base.dtype != np.uint8:
        base = base.base
    if not (isinstance(base, np.ndarray) and base.dtype == np.uint8 and base.ndim == 1 and base.flags.c_contiguous):
        return None
    start = arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if start < 0 or start + arr.nbytes + 15 > base.nbytes:
        return None
    return memoryview(base)[start : start + arr.nbytes + 15]


_LOCAL = threading.local()


def default_aes() -> FixedKeyAES:
    """The fixed-key permutation pi for the calling thread (public key, no secret state).

    One encryptor per thread: OpenSSL cipher contexts (and ``cryptography``'s
    wrappers) must not be used from two threads at once, and a garbler and an
    evaluator often run as two threads of one process.
    """
    aes = getattr(_LOCAL, "aes", None)
    if aes is None:
        aes = _LOCAL.aes = FixedKeyAES()
    return aes


def sigma(x: np.ndarray) -> np.ndarray:
    """Linear orthomorphism sigma(x_L || x_R) = (x_L xor x_R) || x_L (GKWY 2020).

    With x_L the high word and x_R the low word: new_hi = hi xor lo, new_lo = hi.
    """
    out = np.empty(np.shape(x), dtype=np.uint64)
    np.bitwise_xor(x[..., 1], x[..., 0], out=out[..., 1])
    out[..., 0] = x[..., 1]
    return out


def tccr_hash(x: np.ndarray, tweak: np.ndarray, aes: FixedKeyAES | None = None) -> np.ndarray:
    """H(x, i) = pi(sigma(x) xor i) xor sigma(x), elementwise over block arrays.

    ``tweak`` is a block array broadcastable to ``x`` (uint64 pairs); every
    (x, tweak) pair under one secret offset must use a distinct tweak.
    """
    aes = aes or default_aes()
    s = sigma(x)
    t = empty_blocks(np.broadcast_shapes(s.shape, np.shape(tweak))[:-1])
    np.bitwise_xor(s, tweak, out=t)
    aes.permute(t, out=t)
    t ^= s
    return t


def mmo_prg(seeds: np.ndarray, n: int, aes: FixedKeyAES | None = None) -> np.ndarray:
    """Expand each seed block to ``n`` blocks: out[..., j, :] = tccr_hash(seed, j).

    ``seeds`` has shape (..., 2); the result has shape (..., n, 2).  One AES
    call covers all seeds and all n outputs.
    """
    aes = aes or default_aes()
    seeds = np.asarray(seeds, dtype=np.uint64)
    s = sigma(seeds)[..., None, :]  # (..., 1, 2)
    idx = np.zeros((n, 2), dtype=np.uint64)
    idx[:, 0] = np.arange(n, dtype=np.uint64)
    t = empty_blocks(seeds.shape[:-1] + (n,))
    np.bitwise_xor(s, idx, out=t)
    aes.permute(t, out=t)
    t ^= s
    return t


def random_blocks(*shape: int) -> np.ndarray:
    """Uniform 128-bit blocks from the OS CSPRNG (``os.urandom``), shape (*shape, 2)."""
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    buf = os.urandom(16 * count)
    return np.frombuffer(buf, dtype=np.uint64).reshape(*shape, 2).copy()


def blocks_from_bytes(data: bytes | bytearray | memoryview) -> np.ndarray:
    """View a byte string of length 16k as a (k, 2) block array (copy, writable)."""
    if len(data) % 16:
        raise ValueError(f"block data must be a multiple of 16 bytes, got {len(data)}")
    return np.frombuffer(data, dtype="<u8").astype(np.uint64).reshape(-1, 2)


def blocks_to_bytes(blocks: np.ndarray) -> bytes:
    """Little-endian bytes of a block array (16 bytes per block)."""
    return np.ascontiguousarray(blocks, dtype="<u8").tobytes()


def aes_ecb_reference(key: bytes, data: bytes) -> bytes:
    """Plain AES-ECB of ``data`` under ``key`` (for tests and known-answer checks)."""
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(data) + enc.finalize()


class BlockBuffer:
    """A reusable block array that fixed-key AES rewrites in place with no per-call checks.

    ``blocks`` is an (n, 2) ``uint64`` array backed by a byte buffer with the
    slack OpenSSL's ``update_into`` needs, and the byte view is made once, so
    :meth:`permute_prefix` costs one OpenSSL call (the hot loop of the garbling
    engine calls it once per level step; :meth:`FixedKeyAES.permute` spends
    ~10 us per call locating the slack).  Added for :mod:`pairwise.mpc.garble`.
    """

    def __init__(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"block count must be non-negative, got {n}")
        self._raw = np.empty(16 * n + 16, dtype=np.uint8)
        self.blocks = self._raw[: 16 * n].view(np.uint64).reshape(n, 2)
        self._mv = memoryview(self._raw)

    def permute_prefix(self, m: int, aes: FixedKeyAES | None = None) -> np.ndarray:
        """blocks[:m] = pi(blocks[:m]) in place; returns that (m, 2) view."""
        if not 0 <= m <= self.blocks.shape[0]:
            raise ValueError(f"prefix of {m} blocks does not fit a buffer of {self.blocks.shape[0]}")
        if m:
            (aes or default_aes())._enc.update_into(self._mv[: 16 * m], self._mv[: 16 * m + 15])
        return self.blocks[:m]
