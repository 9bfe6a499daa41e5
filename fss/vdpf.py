"""Verifiable DPF: point-function keys whose two halves two servers can check to be one point function.

What it does
    The DPF of :mod:`pairwise.fss.dpf` (BGI16) with the full-domain verification
    of de Castro and Polychroniadou, "Lightweight, Maliciously Secure Verifiable
    Function Secret Sharing" (EUROCRYPT 2022, Sec. 4, VerDPF).  After the tree,
    leaf x of party b has seed s and control bit t; its output is
    (-1)^b [V(s) + t CW^(n+1)], V a PRG block of s, and its *check value* is
    rho_b(x) = H(x, s) xor t cs, where H maps to 4 lambda = 512 bits and
    cs = H(alpha, s_0(alpha)) xor H(alpha, s_1(alpha)) is in both keys.  An
    honest pair has rho_0(x) = rho_1(x) at every x; the servers compare the
    2^n check values through one 16-byte tag each (:class:`VDPFVerifier`).

Soundness (malicious client; both keys and every correction word chosen by it)
    A pair passes iff both keys carry the same public part (correction words,
    cs), cs != 0 (the format refuses 0) and rho_0 = rho_1 on the whole domain.
    Then every leaf has either equal (s, t) in both trees -- output share sum
    0 -- or s_0 != s_1, t_0 != t_1 and H(x, s_0) xor H(x, s_1) = cs; a second
    such leaf is a 4-way XOR collision of H, a leaf with s_0 != s_1, t_0 = t_1 a
    collision, a leaf with s_0 = s_1, t_0 != t_1 would need cs = 0.  So the
    outputs are beta e_alpha for one alpha (or all zero).  H(x, s)_j =
    pi_j(y_j) xor y_j with y_j = sigma(s) xor (x << 32 j), pi_0..pi_3 AES-128
    under four fixed public keys, modelled as independent random permutations
    (ideal cipher).  Two points meet inside at most one pi_j, so a collision
    or 4-XOR needs >= 254 bits of equations on values of fresh permutation
    points: error <= q^4 2^-508 + q^2 2^(2n+4-381) + q 2^(2n+4-254) for q
    queries.  The tag comparison (AES under a secret key unknown to the client,
    a PRP) errs with probability <= 2^-126 per key.  The payload beta is
    *not* checked here (two-point linear checks on the outputs do it).

Privacy (semi-honest servers)
    A key alone is a DPF key plus cs and fcw, which are masked by H and V of
    the other party's leaf seed, pseudorandom to this party (BGI16 Sec. 3, CP22
    Thm. 4.3); the tags of an accepted pair are equal, so they tell nothing.
    Keys come from ``os.urandom``; the verifier key from the servers.

Cost: key = DPF key + 64 bytes (:func:`pairwise.fss.keys.vdpf_key_bytes`);
full-domain verification ~11 AES blocks per leaf (OpenSSL ECB calls over
whole chunks of keys), the glue in numba loops (:mod:`pairwise.fss._vdpf_kernels`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from pairwise.mpc.aes import FixedKeyAES, default_aes, empty_blocks, random_blocks

from .base import GEN_CHUNK
from .dpf import FULL_DOMAIN_MAX_BITS, DPFKey, DPFKeyBatch, _cneg, _tree_gen
from .keys import (
    KIND_VDPF,
    FSSParameterError,
    IntArrayLike,
    IntLike,
    alphas_array,
    betas_array,
    validate_params,
    validate_point,
)

__all__ = [
    "CHECK_KEYS",
    "VDPFKey",
    "VDPFKeyBatch",
    "VDPFVerifier",
    "VDPFEvaluation",
    "check_hash",
    "vdpf_gen",
    "vdpf_gen_batch",
    "vdpf_verify_pair",
    "VDPF_MAX_BITS",
    "VERIFIER_KEY_BYTES",
]

#: The four fixed public AES keys of the check permutations pi_0..pi_3 (SHA-256 of a label, 16 bytes).
CHECK_KEYS = tuple(hashlib.sha256(b"pairwise/fss/vdpf/check-permutation/" + bytes([j])).digest()[:16] for j in range(4))
#: Largest domain of a VDPF key (full-domain verification is O(2^n) per key; x must fit in 32 bits).
VDPF_MAX_BITS = FULL_DOMAIN_MAX_BITS
#: Bytes of a verifier key: 16 for the position masks, 16 for the tag permutation.
VERIFIER_KEY_BYTES = 32

_ONE = np.uint64(1)
_TWO = np.uint64(2)
_LOCAL = threading.local()
log = logging.getLogger("pairwise.fss.vdpf")
_KERNELS = None  # the numba loops (fss._vdpf_kernels); False: unavailable; None: not tried
_KERNELS_LOCK = threading.Lock()


def compiled_kernels():
    """The compiled loops of :mod:`pairwise.fss._vdpf_kernels`, or None (``PAIRWISE_JIT=0``, or numba failed).

    The first call compiles them (or loads numba's on-disk cache) and runs
    each once; a failure logs one warning and the numpy path is used.
    """
    global _KERNELS
    if os.environ.get("PAIRWISE_JIT", "1") == "0":
        return None
    with _KERNELS_LOCK:
        if _KERNELS is None:
            try:
                from . import _vdpf_kernels as k

                b = VDPFKeyBatch(
                    0,
                    1,
                    8,
                    np.zeros((1, 2), np.uint64),
                    np.zeros((1, 2, 1), np.uint64),
                    np.zeros((1, 2, 1), np.uint8),
                    np.zeros(1, np.uint64),
                    ccw=np.ones((1, 4, 2), np.uint64),
                )
                _jit_chunk(k, b, slice(0, 1), VDPFVerifier(bytes(32)), _x_masks(np.arange(2)), None)
                _KERNELS = k
            except Exception as exc:  # noqa: BLE001 - any numba failure: use the numpy path
                log.warning("compiled VDPF loops unavailable (%s: %s); using numpy", type(exc).__name__, exc)
                _KERNELS = False
    return _KERNELS or None


def _check_aes() -> tuple[FixedKeyAES, ...]:
    """pi_0..pi_3 for the calling thread (OpenSSL contexts are not shared between threads)."""
    got = getattr(_LOCAL, "check", None)
    if got is None:
        got = _LOCAL.check = tuple(FixedKeyAES(k) for k in CHECK_KEYS)
    return got


def leaf_values(s_lo: np.ndarray, s_hi: np.ndarray, aes: FixedKeyAES | None = None) -> np.ndarray:
    """V(s): low word of the PRG block G(s)_2 = pi(sigma(s) xor 2) xor sigma(s) (:mod:`pairwise.fss.prg`)."""
    aes = aes or default_aes()
    shape = s_lo.shape
    lo = s_lo.reshape(-1)
    hi = s_hi.reshape(-1)
    inp = empty_blocks(lo.shape[0])
    np.bitwise_xor(hi, _TWO, out=inp[:, 0])  # sigma(s): low word s_hi, high word s_lo ^ s_hi
    np.bitwise_xor(lo, hi, out=inp[:, 1])
    aes.permute(inp, out=inp)
    return (inp[:, 0] ^ hi).reshape(shape)


def _x_masks(x: np.ndarray) -> np.ndarray:
    """(4, W, 2) blocks x << 32 j placed as 128-bit values (the leaf index inside pi_j's input)."""
    x = np.asarray(x, dtype=np.uint64).reshape(-1)
    X = np.zeros((4, x.size, 2), dtype=np.uint64)
    X[0, :, 0] = x
    X[1, :, 0] = x << np.uint64(32)
    X[2, :, 1] = x
    X[3, :, 1] = x << np.uint64(32)
    return X


def _sigma_blocks(s_lo: np.ndarray, s_hi: np.ndarray) -> np.ndarray:
    """sigma(s) as blocks (..., 2): low word s_hi, high word s_lo ^ s_hi (:func:`pairwise.mpc.aes.sigma`)."""
    sig = np.empty(s_lo.shape + (2,), dtype=np.uint64)
    sig[..., 0] = s_hi
    np.bitwise_xor(s_lo, s_hi, out=sig[..., 1])
    return sig


def _check_blocks(X: np.ndarray, sig: np.ndarray) -> np.ndarray:
    """H as slabs (4, K, W, 2) from leaf masks X (4, W, 2) and sigma(s) (K, W, 2)."""
    y = np.bitwise_xor(sig[None], X[:, None])  # (4, K, W, 2), contiguous
    H = empty_blocks(y.shape[:-1])
    for j, aes in enumerate(_check_aes()):
        aes.permute(y[j], out=H[j])
    H ^= y
    return H


def check_hash(x: np.ndarray, s_lo: np.ndarray, s_hi: np.ndarray) -> np.ndarray:
    """H(x, s): (..., 4, 2) blocks, block j = pi_j(y_j) xor y_j, y_j = sigma(s) xor (x << 32 j).

    ``x`` broadcasts against the seed words (points < 2^32).  Independent
    permutations per block and the leaf index inside the permutation input:
    see the module docstring for why.
    """
    shape = np.broadcast_shapes(np.shape(x), s_lo.shape)
    xs = np.broadcast_to(np.asarray(x, dtype=np.uint64), shape).reshape(-1)
    sig = _sigma_blocks(np.broadcast_to(s_lo, shape).reshape(-1), np.broadcast_to(s_hi, shape).reshape(-1))
    y = np.bitwise_xor(sig[None], _x_masks(xs))  # (4, m, 2)
    out = np.empty((xs.size, 4, 2), dtype=np.uint64)
    for j, aes in enumerate(_check_aes()):
        out[:, j, :] = aes.permute(y[j]) ^ y[j]
    return out.reshape(shape + (4, 2))


def _xor_fold(a: np.ndarray) -> np.ndarray:
    """XOR over axis 1 of a (K, W, 2) array with W a power of two, by halving (contiguous slabs)."""
    b = np.ascontiguousarray(a).reshape(a.shape[0], -1)
    w = b.shape[1]
    b = b.copy() if b.base is a or b is a else b
    while w > 2:
        h = w // 2
        np.bitwise_xor(b[:, :h], b[:, h:w], out=b[:, :h])
        w = h
    return b[:, :2].copy()


class VDPFVerifier:
    """The servers' secret for one verification: position masks and a tag permutation.

    ``tag(x, rho)`` of a key is XOR over leaves x and blocks j of
    E_k2(rho(x)_j xor M(x, j)), M(x, j) = E_k1(x, j, n): a PRF of the whole
    check vector under a key the client never sees.  Two keys' tags are equal
    iff their check vectors are, except with probability <= 2^-126 (a nonempty
    symmetric difference of PRP inputs XORs to zero).  One instance per
    thread; ``key`` must be 32 bytes from ``os.urandom`` (drawn by a server
    *after* it holds the client's keys, or never shown to any client).
    """

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, (bytes, bytearray)) or len(key) != VERIFIER_KEY_BYTES:
            raise FSSParameterError(f"a verifier key is {VERIFIER_KEY_BYTES} bytes")
        self._mask_aes = FixedKeyAES(bytes(key[:16]))
        self._tag_aes = FixedKeyAES(bytes(key[16:]))
        self._masks: dict[int, np.ndarray] = {}

    def __repr__(self) -> str:
        return "VDPFVerifier(<secret>)"

    def masks(self, n: int) -> np.ndarray:
        """M(x, j) for every x of an n-bit domain as slabs (4, 2^n, 2), cached (n <= 20)."""
        got = self._masks.get(n)
        if got is not None:
            return got
        x = np.arange(1 << n, dtype=np.uint64)
        inp = empty_blocks((4, x.size))
        inp[:, :, 0] = x[None, :]
        inp[:, :, 1] = (np.arange(4, dtype=np.uint64) | np.uint64(n << 8))[:, None]
        self._mask_aes.permute(inp, out=inp)
        if n <= 20:
            self._masks[n] = inp
        return inp

    def tag_slabs(self, rho: np.ndarray, n: int) -> np.ndarray:
        """(K, 2) tags of check values given as slabs rho (4, K, 2^n, 2) of an n-bit domain (rho is overwritten)."""
        rho ^= self.masks(n)[:, None]
        self._tag_aes.permute(rho, out=rho)
        folded = rho[0]
        folded ^= rho[1]
        folded ^= rho[2]
        folded ^= rho[3]
        return _xor_fold(folded)

    def tags(self, rho: np.ndarray, n: int) -> np.ndarray:
        """(K, 2) tags of check values rho (K, 2^n, 4, 2) (the layout of :func:`check_hash`)."""
        return self.tag_slabs(np.ascontiguousarray(np.moveaxis(rho, 2, 0)), n)


@dataclass
class VDPFEvaluation:
    """Full-domain evaluation of keys ``rows`` of a batch: outputs (Kc, 2^n) mod 2^l and tags (Kc, 2)."""

    rows: slice
    outputs: np.ndarray
    tags: np.ndarray


def _vdpf_gen_from_roots(
    alphas: np.ndarray, betas: np.ndarray, n: int, l: int, roots: np.ndarray, aes: FixedKeyAES | None = None
):
    """Gen for K keys from root seeds roots (2, K, 2): (scw, tcw, fcw, ccw (K, 4, 2)); deterministic.

    The tree is BGI16's; then fcw = (-1)^{t_1} [beta - V(s_0) + V(s_1)] and
    cs = H(alpha, s_0) xor H(alpha, s_1) at the leaf alpha (CP22, VerDPF.Gen).
    """
    scw, tcw, S_lo, S_hi, T = _tree_gen(alphas, n, roots, aes)
    mask = np.uint64((1 << l) - 1)
    V = leaf_values(S_lo, S_hi, aes)
    fcw = _cneg(betas - V[0] + V[1], T[1]) & mask
    H = check_hash(alphas[None, :], S_lo, S_hi)  # (2, K, 4, 2)
    return scw, tcw, fcw, H[0] ^ H[1]


def vdpf_gen_batch(
    alphas: IntArrayLike, betas: IntLike | IntArrayLike, n: int, l: int, *, aes: FixedKeyAES | None = None
) -> tuple[VDPFKeyBatch, VDPFKeyBatch]:
    """Keys for K point functions f_k(x) = betas[k] [x == alphas[k]] mod 2^l, verifiable (module docstring).

    Returns the party-0 and party-1 batches; key k of each is client k's pair.
    Root seeds from the OS CSPRNG; vectorized (one AES call per level).
    """
    n, l = validate_params(n, l)
    if n > VDPF_MAX_BITS:
        raise FSSParameterError(f"VDPF keys are verified on the full domain: n must be <= {VDPF_MAX_BITS}, got {n}")
    a = alphas_array(alphas, n)
    b = betas_array(betas, l, a.shape[0])
    K = a.shape[0]
    scw = np.empty((n, 2, K), dtype=np.uint64)
    tcw = np.empty((n, 2, K), dtype=np.uint8)
    fcw = np.empty(K, dtype=np.uint64)
    ccw = np.empty((K, 4, 2), dtype=np.uint64)
    roots = random_blocks(2, K)
    for c0 in range(0, K, GEN_CHUNK):
        sl = slice(c0, min(K, c0 + GEN_CHUNK))
        scw[:, :, sl], tcw[:, :, sl], fcw[sl], ccw[sl] = _vdpf_gen_from_roots(a[sl], b[sl], n, l, roots[:, sl], aes)
    while True:  # cs = 0 has probability 2^-512; the format refuses it, so draw such a key again
        zero = np.flatnonzero(~ccw.reshape(K, 8).any(axis=1))
        if zero.size == 0:
            break
        roots[:, zero] = random_blocks(2, zero.size)
        scw[:, :, zero], tcw[:, :, zero], fcw[zero], ccw[zero] = _vdpf_gen_from_roots(
            a[zero], b[zero], n, l, roots[:, zero], aes
        )
    return (
        VDPFKeyBatch(0, n, l, roots[0].copy(), scw, tcw, fcw, ccw=ccw),
        VDPFKeyBatch(1, n, l, roots[1].copy(), scw, tcw, fcw, ccw=ccw),
    )


def vdpf_gen(alpha: int, beta: int, n: int, l: int, *, aes: FixedKeyAES | None = None) -> tuple[VDPFKey, VDPFKey]:
    """Keys (k_0, k_1) of f(x) = beta [x == alpha] over n-bit x, outputs mod 2^l, verifiable."""
    n, l = validate_params(n, l)
    alpha = validate_point(alpha, n, "alpha")
    k0, k1 = vdpf_gen_batch([alpha], beta, n, l, aes=aes)
    return k0[0], k1[0]


class VDPFKeyBatch(DPFKeyBatch):
    """K verifiable DPF keys of one party: DPF evaluation, plus full-domain check values and tags."""

    KIND = KIND_VDPF

    def _leaf_values(self, s_lo, s_hi, aes):
        return leaf_values(s_lo, s_hi, aes)

    def _check_full_domain(self) -> None:
        super()._check_full_domain()
        if self.n > VDPF_MAX_BITS:
            raise FSSParameterError(f"VDPF full-domain verification needs n <= {VDPF_MAX_BITS}")

    def public_bytes(self) -> np.ndarray:
        """(K, P) uint8: each key's bytes without the party byte and the root seed (equal in an honest pair)."""
        raw = self.to_bytes_array()
        return np.concatenate([raw[:, :2], raw[:, 3:5], raw[:, 21:]], axis=1)

    def iter_verify(
        self,
        verifier: VDPFVerifier,
        *,
        leaves_per_chunk: int = 1 << 15,
        aes: FixedKeyAES | None = None,
        compiled: bool | None = None,
    ) -> Iterator[VDPFEvaluation]:
        """Full-domain outputs and tags of every key, in chunks of about ``leaves_per_chunk`` leaves.

        The check values rho(x) = H(x, s(x)) xor t(x) cs never leave the
        chunk: each chunk yields its keys' outputs and tags only.  The
        compiled loops run when available (``compiled=False`` forces the
        numpy path, ``True`` requires the loops); both give the same numbers.
        """
        self._check_full_domain()
        n, K = self.n, len(self)
        per = max(1, leaves_per_chunk >> n)
        X = _x_masks(np.arange(1 << n, dtype=np.uint64))
        k = compiled_kernels() if compiled is not False else None
        if compiled and k is None:
            raise FSSParameterError("the compiled VDPF loops are unavailable (PAIRWISE_JIT=0 or numba failed)")
        scratch: dict = {}  # the compiled path's buffers, reused by every chunk (no fresh pages per chunk)
        for c0 in range(0, K, per):
            sl = slice(c0, min(K, c0 + per))
            if k is not None:
                yield _jit_chunk(k, self, sl, verifier, X, aes, scratch)
                continue
            s_lo, s_hi, T = self._full_domain_leaves(sl, aes)
            outputs = self._outputs(s_lo, s_hi, T, self.fcw[sl][:, None], aes)
            rho = _check_blocks(X, _sigma_blocks(s_lo, s_hi))  # (4, kc, 2^n, 2)
            assert self.ccw is not None  # a VDPF batch always has its check words
            cs = np.moveaxis(self.ccw[sl], 1, 0)  # (4, kc, 2)
            rho ^= np.negative(T)[None, :, :, None] & cs[:, :, None, :]
            yield VDPFEvaluation(sl, outputs, verifier.tag_slabs(rho, n))

    def verify_tags(self, verifier: VDPFVerifier, **kw) -> tuple[np.ndarray, np.ndarray]:
        """(tags (K, 2), outputs (K, 2^n)) of all keys at once (small batches; servers stream :meth:`iter_verify`)."""
        tags = np.empty((len(self), 2), dtype=np.uint64)
        out = np.empty((len(self), 1 << self.n), dtype=np.uint64)
        for ev in self.iter_verify(verifier, **kw):
            tags[ev.rows], out[ev.rows] = ev.tags, ev.outputs
        return tags, out


def _blocks(scratch: dict | None, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialised block array of ``shape`` (:func:`empty_blocks`), from ``scratch`` when it is large enough."""
    count = int(np.prod(shape))
    if scratch is None:
        return empty_blocks(shape)
    buf = scratch.get(name)
    if buf is None or buf.shape[0] < count:
        buf = scratch[name] = empty_blocks(count)
    return buf[:count].reshape(*shape, 2)


def _words(scratch: dict | None, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialised uint64 array of ``shape``, from ``scratch`` when it is large enough."""
    count = int(np.prod(shape))
    if scratch is None:
        return np.empty(shape, dtype=np.uint64)
    buf = scratch.get(name)
    if buf is None or buf.shape[0] < count:
        buf = scratch[name] = np.empty(count, dtype=np.uint64)
    return buf[:count].reshape(shape)


def _jit_chunk(
    k,
    batch: VDPFKeyBatch,
    sl: slice,
    verifier: VDPFVerifier,
    X: np.ndarray,
    aes: FixedKeyAES | None,
    scratch: dict | None = None,
) -> VDPFEvaluation:
    """One chunk of :meth:`VDPFKeyBatch.iter_verify` through the compiled loops (same numbers as numpy).

    ``scratch``: buffers kept across chunks (the outputs and tags returned are fresh arrays).
    """
    aes = aes or default_aes()
    n = batch.n
    seeds = batch.seeds[sl]
    kc = seeds.shape[0]
    lo = np.ascontiguousarray(seeds[:, 0]).reshape(kc, 1)
    hi = np.ascontiguousarray(seeds[:, 1]).reshape(kc, 1)
    T = np.full((kc, 1), batch.party, dtype=np.uint64)
    for i in range(n):
        w = lo.shape[1]
        E = _blocks(scratch, "E", (kc * w, 2))
        k.prep(lo.reshape(-1), hi.reshape(-1), E)
        aes.permute(E, out=E)
        side = "ab"[i % 2]  # two sets of level buffers, alternating: this level's input is the other set
        nlo = _words(scratch, "lo" + side, (kc, 2 * w))
        nhi = _words(scratch, "hi" + side, (kc, 2 * w))
        nT = _words(scratch, "t" + side, (kc, 2 * w))
        cw = (
            np.ascontiguousarray(batch.scw[i, 0, sl]),
            np.ascontiguousarray(batch.scw[i, 1, sl]),
            np.ascontiguousarray(batch.tcw[i, 0, sl]),
            np.ascontiguousarray(batch.tcw[i, 1, sl]),
        )
        k.children(E, lo, hi, T, cw, (nlo, nhi, nT))
        lo, hi, T = nlo, nhi, nT
    W = 1 << n
    y = _blocks(scratch, "y", (4, kc, W))
    vin = _blocks(scratch, "vin", (kc * W,))
    k.leaf_prep(lo, hi, X, y, vin)
    aes.permute(vin, out=vin)
    H = _blocks(scratch, "H", (4, kc, W))
    for j, caes in enumerate(_check_aes()):
        caes.permute(y[j], out=H[j])
    out = np.empty((kc, W), dtype=np.uint64)
    assert batch.ccw is not None  # a VDPF batch always has its check words
    k.leaf_finish(
        vin,
        hi,
        T,
        (np.ascontiguousarray(batch.fcw[sl]), batch.party, batch.mask),
        H,
        y,
        np.ascontiguousarray(batch.ccw[sl]),
        verifier.masks(n),
        out,
    )
    verifier._tag_aes.permute(H, out=H)
    tags = np.empty((kc, 2), dtype=np.uint64)
    k.fold(H, tags)
    return VDPFEvaluation(sl, out, tags)


class VDPFKey(DPFKey):
    """One VDPF key; evaluation as :class:`pairwise.fss.DPFKey`."""

    BATCH_CLASS = VDPFKeyBatch


VDPFKeyBatch.KEY_CLASS = VDPFKey


def vdpf_verify_pair(
    k0: VDPFKeyBatch, k1: VDPFKeyBatch, verifier: VDPFVerifier | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Both servers' check in one place (tests, simulations): (accepted (K,) bool, beta (K,) uint64).

    Accepted: equal public parts and equal tags, i.e. the pair shares one
    point function; beta is the sum of its outputs mod 2^l (its payload),
    which the caller checks against its own public weight range.
    """
    if not (isinstance(k0, VDPFKeyBatch) and isinstance(k1, VDPFKeyBatch)) or (k0.party, k1.party) != (0, 1):
        raise FSSParameterError("vdpf_verify_pair needs party 0's and party 1's VDPF key batches")
    if (k0.n, k0.l, len(k0)) != (k1.n, k1.l, len(k1)):
        raise FSSParameterError("the two batches differ in n, l or size")
    import os

    verifier = verifier or VDPFVerifier(os.urandom(VERIFIER_KEY_BYTES))
    t0, y0 = k0.verify_tags(verifier)
    t1, y1 = k1.verify_tags(verifier)
    p0, p1 = k0.public_bytes(), k1.public_bytes()
    same = np.array([hmac.compare_digest(a.tobytes(), b.tobytes()) for a, b in zip(p0, p1)], dtype=bool)
    accepted = same & (t0 == t1).all(axis=1)
    beta = (y0.sum(axis=1, dtype=np.uint64) + y1.sum(axis=1, dtype=np.uint64)) & k0.mask
    return accepted, beta
