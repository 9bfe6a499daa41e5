"""Fixed-key AES-128 over numpy arrays of 128-bit blocks, and the hash and PRG built on it.

What it does
    Blocks are numpy ``uint64`` arrays whose last axis has length 2: ``[..., 0]``
    is the low 64 bits and ``[..., 1]`` the high 64 bits of the block, so the
    memory of a C-contiguous array *is* the little-endian byte string of its
    blocks and AES runs on it with no copy.  One call to :meth:`FixedKeyAES.permute`
    encrypts every block of an array with one OpenSSL AES-ECB call (AES-NI
    through ``cryptography``): the cost is per call, not per block.

    * ``tccr_hash(x, i)`` = pi(pi(x) xor i) xor pi(x) is TMMO, the one hash of
      every correlation-robust use: half-gates with free-XOR
      (:mod:`pairwise.mpc.halfgates`, :mod:`pairwise.mpc.garble` through
      :class:`TccrHasher`) and chosen OT on Delta-correlated OTs (pads
      H(q, i) and H(q xor Delta, i)).  :func:`round_keys` gives the AES-NI
      kernels the round keys of pi.
    * ``mmo_prg(s, n)`` outputs the blocks G(s)_j = pi(sigma(s) xor j) xor
      sigma(s), j < n, a PRG for the FSS trees and the ECDF share expansion;
      ``sigma`` is the orthomorphism (x_L xor x_R) || x_L of [GKWY20].

Security model / assumption
    pi is AES-128 under a fixed, public key (``FIXED_KEY``), modelled as a
    random permutation (ideal-cipher model), as in [GKWY20] and EMP-toolkit.
    TMMO is tweakable circular correlation robust (TCCR) under that model
    [GKWY20, Sec. 7.4], which [ZRE15] half-gates and chosen OT need; it is
    secure only if every (input, tweak) pair used under one Delta is distinct:
    callers give each call a unique tweak (the garbler (instance, gate,
    half-gate); chosen OT sets the top tweak bit and uses the OT index).
    ``mmo_prg`` is a PRG in the same model for seeds with at least 127 bits
    of entropy (distinguishing advantage at most n q / 2^127 + (n m)^2 / 2^127
    for q queries to pi and m seeds); it is *not* a correlation-robust hash
    and must never be applied to correlated inputs such as labels.  Nothing
    here is secret; keys, labels and seeds come from the caller, drawn with
    :func:`random_blocks` (``os.urandom``).

Follows
    [GKWY20, Sec. 7.4]; [ZRE15].  The PRG argument, the hash used before
    TMMO and why MITCCRH was measured but not adopted: ``docs/garbling.md``,
    "Fixed-key AES: the hash and the PRG".
"""

from __future__ import annotations

import math
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
    "TccrHasher",
    "mmo_prg",
    "ctr_blocks",
    "random_blocks",
    "empty_blocks",
    "blocks_from_bytes",
    "blocks_to_bytes",
    "aes_ecb_reference",
    "BlockBuffer",
    "round_keys",
    "round_keys_x4",
    "FIXED_ROUND_KEYS_X4",
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
    """H(x, i) = pi(pi(x) xor i) xor pi(x) (TMMO, GKWY 2020 Sec. 7.4), elementwise over block arrays.

    The tweakable circular correlation-robust hash of this project (module
    docstring): TCCR when pi is a random permutation.  ``tweak`` is a block
    array broadcastable to ``x`` (uint64 pairs); every (x, tweak) pair under
    one secret offset must use a distinct tweak.
    """
    x = np.asarray(x, dtype=np.uint64)
    shape = np.broadcast_shapes(x.shape, np.shape(tweak))
    m = int(np.prod(shape[:-1], dtype=np.int64))
    h = TccrHasher(m)
    xv, yv = h.x.reshape(shape), h.y.reshape(shape)
    xv[...] = x
    h(m, tweak, xv, yv, aes)
    return yv.copy()


class TccrHasher:
    """Two reusable block buffers that compute :func:`tccr_hash` in place: the engine's hot path.

    Fill ``x[:m]`` with the inputs, then ``hasher(m, tweak, xv, yv)`` with
    ``xv`` / ``yv`` views of ``x[:m]`` / ``y[:m]`` shaped so that ``tweak``
    broadcasts to them (e.g. one tweak for both labels of a wire).  After the
    call ``x[:m]`` holds pi(x) and ``y[:m]`` holds H(x, tweak) =
    pi(pi(x) xor tweak) xor pi(x): two OpenSSL calls and two numpy calls, with
    the views made once by the caller (the garbling engine precomputes them
    per level step).
    """

    def __init__(self, n: int) -> None:
        self._xb = BlockBuffer(n)
        self._yb = BlockBuffer(n)
        self.x = self._xb.blocks
        self.y = self._yb.blocks
        self._views: dict[int, tuple[memoryview, ...]] = {}  # m -> the OpenSSL in/out views of both buffers

    def __call__(self, m: int, tweak, xv: np.ndarray, yv: np.ndarray, aes: FixedKeyAES | None = None) -> None:
        views = self._views.get(m)
        if views is None:
            if not 0 <= m <= self.x.shape[0]:
                raise ValueError(f"{m} blocks do not fit a hasher of {self.x.shape[0]}")
            xmv, ymv = self._xb._mv, self._yb._mv
            views = self._views[m] = (xmv[: 16 * m], xmv[: 16 * m + 15], ymv[: 16 * m], ymv[: 16 * m + 15])
        enc = (aes or default_aes())._enc
        if m:
            enc.update_into(views[0], views[1])  # x = pi(x)
        np.bitwise_xor(xv, tweak, out=yv)  # y = pi(x) ^ i
        if m:
            enc.update_into(views[2], views[3])  # y = pi(pi(x) ^ i)
        np.bitwise_xor(yv, xv, out=yv)  # y = pi(pi(x) ^ i) ^ pi(x)


def mmo_prg(seeds: np.ndarray, n: int, aes: FixedKeyAES | None = None) -> np.ndarray:
    """PRG: expand each seed block to ``n`` blocks, out[..., j, :] = pi(sigma(s) xor j) xor sigma(s).

    A PRG for seeds that are uniform and secret (random-permutation model;
    module docstring), not a correlation-robust hash.  ``seeds`` has shape
    (..., 2); the result has shape (..., n, 2).  One AES call covers all
    seeds and all n outputs.
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


#: Blocks of keystream per OpenSSL call in :func:`ctr_blocks` (a 1 MiB zero buffer, in cache).
_CTR_STEP = 1 << 16
_CTR_ZEROS = bytes(16 * _CTR_STEP)


def ctr_blocks(key: bytes, n: int, *, start: int = 0, out: np.ndarray | None = None) -> np.ndarray:
    """Blocks ``start`` .. ``start + n - 1`` of the AES-128-CTR keystream under ``key`` (counter from 0), shape (n, 2).

    A PRG from a 16-byte seed, assuming AES is a PRF (the key is the seed;
    no fixed-key assumption).  Used by the two-party runtime to expand the
    garbler's per-execution label seed (:mod:`pairwise.mpc.twopc`); IKNP's row
    PRG is the same construction.  ``out``: a C-contiguous (n, 2) uint64
    array to fill (e.g. a view of the garbler's label storage), else a
    fresh one.  One OpenSSL call per 2^16 blocks.
    """
    if len(key) != 16:
        raise ValueError(f"AES-128 key must be 16 bytes, got {len(key)}")
    if n < 0 or start < 0:
        raise ValueError(f"block count and start must be non-negative, got {n}, {start}")
    if out is None:
        raw = np.empty(16 * n + 16, dtype=np.uint8)
        out = raw[: 16 * n].view(np.uint64).reshape(n, 2)
    elif out.shape != (n, 2) or out.dtype != np.uint64 or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous ({n}, 2) uint64 array")
    if n == 0:
        return out
    enc = Cipher(algorithms.AES(bytes(key)), modes.CTR(start.to_bytes(16, "big"))).encryptor()
    dst = _slack_view(out)
    if dst is not None:  # OpenSSL writes straight into out (it needs 15 bytes of slack)
        step = _CTR_STEP
        for b0 in range(0, n, step):
            m = min(step, n - b0)
            enc.update_into(memoryview(_CTR_ZEROS)[: 16 * m], dst[16 * b0 : 16 * (b0 + m) + 15])
        return out
    flat = out.reshape(-1).view(np.uint8)
    last = (n - 1) // _CTR_STEP * _CTR_STEP  # all but the last step straight into out, the last via a copy
    mv = memoryview(flat)
    for b0 in range(0, last, _CTR_STEP):
        enc.update_into(memoryview(_CTR_ZEROS), mv[16 * b0 : 16 * (b0 + _CTR_STEP) + 15])
    flat[16 * last :] = np.frombuffer(enc.update(memoryview(_CTR_ZEROS)[: 16 * (n - last)]), dtype=np.uint8)
    return out


def random_blocks(*shape: int) -> np.ndarray:
    """Uniform 128-bit blocks from the OS CSPRNG (``os.urandom``), shape (*shape, 2)."""
    count = math.prod(shape) if shape else 1
    return np.frombuffer(bytearray(os.urandom(16 * count)), dtype=np.uint64).reshape(*shape, 2)


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


def _sbox() -> bytes:
    """The AES S-box (FIPS 197, Sec. 5.1.1): the inverse in GF(2^8) (by powers of the generator 3), then
    the affine map."""
    exp, x = [0] * 255, 1
    for i in range(255):
        exp[i] = x
        x ^= ((x << 1) ^ (0x1B if x & 0x80 else 0)) & 0xFF  # x * 3
    log = {v: i for i, v in enumerate(exp)}
    out = bytearray(256)
    for a in range(256):
        x = s = exp[(255 - log[a]) % 255] if a else 0
        for _ in range(4):
            x = ((x << 1) | (x >> 7)) & 0xFF
            s ^= x
        out[a] = s ^ 0x63
    return bytes(out)


def round_keys(key: bytes) -> np.ndarray:
    """The 11 round keys of AES-128 under ``key`` (FIPS 197, Sec. 5.2), as an (11, 2) block array.

    For *public* keys only (the fixed key of :data:`FIXED_KEY`): the S-box
    lookups here are table lookups, fine for a public key, not for a secret
    one.  Used by the compiled AES-NI kernels of :mod:`pairwise.mpc.garble`,
    whose AES rounds take the round keys from memory; the tests check the
    keys against ``cryptography``'s AES.
    """
    if len(key) != 16:
        raise ValueError(f"AES-128 key must be 16 bytes, got {len(key)}")
    sbox = _SBOX
    w = [list(key[4 * i : 4 * i + 4]) for i in range(4)]
    rcon = 1
    for i in range(4, 44):
        t = list(w[i - 1])
        if i % 4 == 0:
            t = [sbox[b] for b in t[1:] + t[:1]]
            t[0] ^= rcon
            rcon = ((rcon << 1) ^ (0x1B if rcon & 0x80 else 0)) & 0xFF
        w.append([a ^ b for a, b in zip(w[i - 4], t)])
    return np.frombuffer(bytes(b for word in w for b in word), dtype="<u8").astype(np.uint64).reshape(11, 2)


def round_keys_x4(key: bytes) -> np.ndarray:
    """:func:`round_keys` with each round key repeated four times: 88 words, for the four-block AES rounds."""
    return np.ascontiguousarray(np.repeat(round_keys(key)[:, None, :], 4, axis=1).reshape(-1))


_SBOX = _sbox()
#: Round keys of pi (:data:`FIXED_KEY`), each repeated four times (public).
FIXED_ROUND_KEYS_X4 = round_keys_x4(FIXED_KEY)
FIXED_ROUND_KEYS_X4.flags.writeable = False
