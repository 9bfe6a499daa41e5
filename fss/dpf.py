"""Distributed point functions (tree-based DPF of Boyle-Gilboa-Ishai, CCS 2016).

What it does
    A DPF shares the point function f_{alpha,beta} : {0,1}^n -> Z_2^l,
    f(alpha) = beta and f(x) = 0 for x != alpha, as two keys k_0, k_1 with
    Eval(k_0, x) + Eval(k_1, x) = f(x) mod 2^l.  This module implements
    Gen and Eval of BGI16 Fig. 1 (the tree construction with one seed
    correction and two control-bit corrections per level, and the final
    output correction CW^(n+1) = (-1)^{t_1}[beta - Convert(s_0) + Convert(s_1)]),
    with the PRG of :mod:`pairwise.fss.prg`, and

    * :func:`dpf_gen_batch`: Gen for K (alpha, beta) at once, one AES call per
      level over both parties' seeds of every key; :func:`dpf_gen` for one;
    * :meth:`DPFKeyBatch.eval`: K keys at one point or at one point each;
      :meth:`DPFKey.eval_many`: one key at many points; both one AES call
      per level (per chunk), vectorized across keys/points;
    * :meth:`DPFKey.full_domain` / :meth:`DPFKeyBatch.full_domain_sum`:
      Eval on all 2^n points by expanding the tree level by level (one AES
      call per level over all nodes of the level); the sum over a batch of
      clients' keys gives a share of their histogram.

    Points are n-bit unsigned integers whose bits are read most significant
    first (level 1 = the top bit), so full-domain output index = x.

Security model
    Two non-colluding semi-honest servers; each key alone is computationally
    indistinguishable from a key of any other (alpha, beta) with the same n
    and l (BGI16 Sec. 3), assuming the fixed-key-AES hash of :mod:`pairwise.fss.prg`
    is a PRG (ideal-permutation model).  Root seeds are drawn from the OS
    CSPRNG (``os.urandom`` via :func:`pairwise.mpc.aes.random_blocks`).  No early
    termination: key size is 16 + 16n + ceil(n/4) + ceil(l/8) bytes plus a
    5-byte header (:mod:`pairwise.fss.keys`).
"""

from __future__ import annotations

import numpy as np

from pairwise.mpc.aes import FixedKeyAES, default_aes, random_blocks

from .base import GEN_CHUNK, FSSKey, FSSKeyBatch
from .keys import (
    KIND_DPF,
    FSSParameterError,
    IntArrayLike,
    IntLike,
    alphas_array,
    betas_array,
    validate_params,
    validate_point,
)
from .prg import LSB_CLEAR, PathExpander, expand_words

__all__ = ["DPFKey", "DPFKeyBatch", "dpf_gen", "dpf_gen_batch", "FULL_DOMAIN_MAX_BITS"]

_ONE = np.uint64(1)

#: Largest n accepted by full-domain evaluation (2^n outputs must fit in memory).
FULL_DOMAIN_MAX_BITS = 26


def _cneg(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """(-1)^t * x mod 2^64 for t in {0, 1} (uint64 arrays)."""
    m = np.negative(t)
    return (x ^ m) + t


def _tree_gen(alphas: np.ndarray, n: int, roots: np.ndarray, aes: FixedKeyAES | None = None):
    """The seed/control-bit tree of BGI16 Fig. 1 for K points, from given root seeds roots (2, K, 2).

    Returns (scw (n,2,K), tcw (n,2,K) uint8, S_lo (2,K), S_hi (2,K), T (2,K)): the
    correction words and both parties' seed words and control bits at the
    leaf alpha.  The DPF and the verifiable DPF (:mod:`pairwise.fss.vdpf`)
    share it; they differ only in how the leaf becomes an output.
    """
    aes = aes or default_aes()
    K = alphas.shape[0]
    S_lo = np.ascontiguousarray(roots[..., 0])  # (2, K): party, key
    S_hi = np.ascontiguousarray(roots[..., 1])
    T = np.zeros((2, K), dtype=np.uint64)
    T[1] = 1
    scw = np.empty((n, 2, K), dtype=np.uint64)
    tcw = np.empty((n, 2, K), dtype=np.uint8)
    for i in range(n):
        a = (alphas >> np.uint64(n - 1 - i)) & _ONE
        am = np.negative(a)  # all ones where Keep = R (alpha_i = 1)
        (l0, h0), (l1, h1) = [
            (lo.reshape(2, K), hi.reshape(2, K)) for lo, hi in expand_words(S_lo.reshape(-1), S_hi.reshape(-1), 2, aes)
        ]
        tL = l0 & _ONE
        tR = l1 & _ONE
        l0 &= LSB_CLEAR
        l1 &= LSB_CLEAR
        d_lo = l0 ^ l1
        d_hi = h0 ^ h1
        keep_lo = l0 ^ (am & d_lo)
        keep_hi = h0 ^ (am & d_hi)
        lose_lo = keep_lo ^ d_lo
        lose_hi = keep_hi ^ d_hi
        np.bitwise_xor(lose_lo[0], lose_lo[1], out=scw[i, 0])  # s_CW = s_0^Lose ^ s_1^Lose
        np.bitwise_xor(lose_hi[0], lose_hi[1], out=scw[i, 1])
        tcL = tL[0] ^ tL[1] ^ a ^ _ONE
        tcR = tR[0] ^ tR[1] ^ a
        tcw[i, 0] = tcL
        tcw[i, 1] = tcR
        t_keep = tL ^ (am & (tL ^ tR))
        tc_keep = tcL ^ (am & (tcL ^ tcR))
        Tm = np.negative(T)
        S_lo = keep_lo ^ (Tm & scw[i, 0])
        S_hi = keep_hi ^ (Tm & scw[i, 1])
        T = t_keep ^ (T & tc_keep)
    return scw, tcw, S_lo, S_hi, T


def _dpf_gen_from_roots(
    alphas: np.ndarray, betas: np.ndarray, n: int, l: int, roots: np.ndarray, aes: FixedKeyAES | None = None
):
    """Gen of BGI16 Fig. 1 for K keys from given root seeds roots (2, K, 2).

    Returns (scw (n,K,2), tcw (n,K,2) uint8, fcw (K,)); deterministic in the
    inputs (tests use it for known answers; callers use fresh CSPRNG roots).
    """
    scw, tcw, _S_lo, S_hi, T = _tree_gen(alphas, n, roots, aes)
    mask = np.uint64((1 << l) - 1)
    # CW^(n+1) = (-1)^{t_1} [beta - Convert(s_0) + Convert(s_1)]
    fcw = _cneg(betas - S_hi[0] + S_hi[1], T[1]) & mask
    return scw, tcw, fcw


def dpf_gen_batch(
    alphas: IntArrayLike, betas: IntLike | IntArrayLike, n: int, l: int, *, aes: FixedKeyAES | None = None
) -> tuple[DPFKeyBatch, DPFKeyBatch]:
    """Keys for K point functions f_k(x) = betas[k] * [x == alphas[k]] mod 2^l.

    ``betas`` is one integer for all keys or one per key, in (-2^l, 2^l)
    (negative values mean their residue mod 2^l).  Returns the party-0 and
    the party-1 batch; key k of each is one client's pair.
    """
    n, l = validate_params(n, l)
    a = alphas_array(alphas, n)
    b = betas_array(betas, l, a.shape[0])
    roots = random_blocks(2, a.shape[0])
    K = a.shape[0]
    if K <= GEN_CHUNK:
        scw, tcw, fcw = _dpf_gen_from_roots(a, b, n, l, roots, aes)
    else:
        scw = np.empty((n, 2, K), dtype=np.uint64)
        tcw = np.empty((n, 2, K), dtype=np.uint8)
        fcw = np.empty(K, dtype=np.uint64)
        for c0 in range(0, K, GEN_CHUNK):
            sl = slice(c0, min(K, c0 + GEN_CHUNK))
            scw[:, :, sl], tcw[:, :, sl], fcw[sl] = _dpf_gen_from_roots(a[sl], b[sl], n, l, roots[:, sl], aes)
    # separate copies: party b's batch must not reference the other party's root seeds
    return (DPFKeyBatch(0, n, l, roots[0].copy(), scw, tcw, fcw), DPFKeyBatch(1, n, l, roots[1].copy(), scw, tcw, fcw))


def dpf_gen(alpha: int, beta: int, n: int, l: int, *, aes: FixedKeyAES | None = None) -> tuple[DPFKey, DPFKey]:
    """Keys (k_0, k_1) of f(x) = beta * [x == alpha] over n-bit x, outputs mod 2^l."""
    n, l = validate_params(n, l)
    alpha = validate_point(alpha, n, "alpha")
    k0, k1 = dpf_gen_batch([alpha], beta, n, l, aes=aes)
    return k0[0], k1[0]


class DPFKeyBatch(FSSKeyBatch):
    """K DPF keys of one party (struct of arrays); see :class:`pairwise.fss.base.FSSKeyBatch`."""

    KIND = KIND_DPF

    def _leaf_values(self, s_lo: np.ndarray, s_hi: np.ndarray, aes: FixedKeyAES | None) -> np.ndarray:
        """Convert(s) of every leaf seed (uint64, not reduced): the seed's high word (BGI16).

        The verifiable DPF overrides it with a PRG block of the seed
        (:mod:`pairwise.fss.vdpf`).  May return ``s_hi`` itself (callers copy).
        """
        return s_hi

    def _outputs(
        self, s_lo: np.ndarray, s_hi: np.ndarray, T: np.ndarray, fcw: np.ndarray, aes: FixedKeyAES | None
    ) -> np.ndarray:
        """(-1)^b [Convert(s) + t CW^(n+1)] mod 2^l at leaves (s, t); ``fcw`` broadcasts against them."""
        V = self._leaf_values(s_lo, s_hi, aes) + (np.negative(T) & fcw)
        if self.party:
            np.negative(V, out=V)
        V &= self.mask
        return V

    def _path(self, x, key_slice, aes):
        """Leaf seed words and control bit (s_lo, s_hi, t) of the keys in ``key_slice`` at ``x``."""
        sl = key_slice if key_slice is not None else slice(None)
        seeds, scw, tcw = self.seeds[sl], self.scw[:, :, sl], self.tcw[:, :, sl]
        scalar = isinstance(x, int)
        m = seeds.shape[0] if scalar else x.shape[0]
        n = self.n
        s_lo = np.empty(m, dtype=np.uint64)
        s_hi = np.empty(m, dtype=np.uint64)
        s_lo[...] = seeds[:, 0]
        s_hi[...] = seeds[:, 1]
        T = np.full(m, self.party, dtype=np.uint64)
        Tm = np.empty(m, dtype=np.uint64)
        tmp = np.empty(m, dtype=np.uint64)
        ex = PathExpander(m, False, aes)
        for i in range(n):
            if scalar:
                xb = (x >> (n - 1 - i)) & 1
                c_lo, c_hi, _ = ex.step(s_lo, s_hi, xb)
                tsel = tcw[i, xb]
            else:
                xv = (x >> np.uint64(n - 1 - i)) & _ONE
                xbool = xv.astype(bool)
                c_lo, c_hi, _ = ex.step(s_lo, s_hi, xv, xbool)
                tsel = np.where(xbool, tcw[i, 1], tcw[i, 0])
            np.negative(T, out=Tm)
            np.bitwise_and(T, tsel, out=T)
            np.bitwise_and(c_lo, _ONE, out=tmp)
            T ^= tmp
            np.bitwise_and(Tm, scw[i, 0], out=s_lo)
            s_lo ^= c_lo
            s_lo &= LSB_CLEAR
            np.bitwise_and(Tm, scw[i, 1], out=s_hi)
            s_hi ^= c_hi
        return s_lo, s_hi, T

    def _walk(self, x, key_slice, aes):
        s_lo, s_hi, T = self._path(x, key_slice, aes)
        fcw = self.fcw[key_slice if key_slice is not None else slice(None)]
        # (-1)^b [Convert(s^(n)) + t^(n) CW^(n+1)]
        return self._outputs(s_lo, s_hi, T, fcw, aes)

    # ------------------------------------------------------------------ full domain
    def _full_domain_leaves(self, sl: slice, aes: FixedKeyAES | None):
        """(s_lo, s_hi, t) at every leaf of keys ``sl``, each (Kc, 2^n), expanding level by level.

        Level i holds the 2^i nodes of every key in index order (children of
        node j are 2j and 2j + 1), so the leaves come out indexed by x.
        """
        seeds, scw, tcw = self.seeds[sl], self.scw[:, :, sl], self.tcw[:, :, sl]
        kc = seeds.shape[0]
        s_lo = seeds[:, 0].reshape(kc, 1).copy()  # (Kc, width)
        s_hi = seeds[:, 1].reshape(kc, 1).copy()
        T = np.full((kc, 1), self.party, dtype=np.uint64)
        for i in range(self.n):
            w = s_lo.shape[1]
            (l0, h0), (l1, h1) = expand_words(s_lo.reshape(-1), s_hi.reshape(-1), 2, aes)
            Tm = np.negative(T)
            new_lo = np.empty((kc, w, 2), dtype=np.uint64)
            new_hi = np.empty((kc, w, 2), dtype=np.uint64)
            new_t = np.empty((kc, w, 2), dtype=np.uint64)
            for side, (lo, hi) in enumerate(((l0, h0), (l1, h1))):
                lo = lo.reshape(kc, w)
                hi = hi.reshape(kc, w)
                new_t[:, :, side] = (lo & _ONE) ^ (T & tcw[i, side][:, None])
                new_lo[:, :, side] = (lo & LSB_CLEAR) ^ (Tm & scw[i, 0][:, None])
                new_hi[:, :, side] = hi ^ (Tm & scw[i, 1][:, None])
            s_lo = new_lo.reshape(kc, 2 * w)
            s_hi = new_hi.reshape(kc, 2 * w)
            T = new_t.reshape(kc, 2 * w)
        return s_lo, s_hi, T

    def _full_domain_chunk(self, sl: slice, aes: FixedKeyAES | None) -> np.ndarray:
        """(Kc, 2^n) shares of keys ``sl`` at every point."""
        s_lo, s_hi, T = self._full_domain_leaves(sl, aes)
        return self._outputs(s_lo, s_hi, T, self.fcw[sl][:, None], aes)

    def _check_full_domain(self) -> None:
        if self.n > FULL_DOMAIN_MAX_BITS:
            raise FSSParameterError(
                f"full-domain evaluation of an n={self.n}-bit domain would produce 2^{self.n} "
                f"outputs; it is limited to n <= {FULL_DOMAIN_MAX_BITS}"
            )

    def full_domain(self, *, aes: FixedKeyAES | None = None) -> np.ndarray:
        """(K, 2^n) shares of every key at every point (row k, column x)."""
        self._check_full_domain()
        out = np.empty((len(self), 1 << self.n), dtype=np.uint64)
        for sl in self._domain_chunks():
            out[sl] = self._full_domain_chunk(sl, aes)
        return out

    def full_domain_sum(self, *, aes: FixedKeyAES | None = None) -> np.ndarray:
        """(2^n,) share of sum_k f_k(x) mod 2^l for every x: a share of the keys' histogram."""
        self._check_full_domain()
        acc = np.zeros(1 << self.n, dtype=np.uint64)
        for sl in self._domain_chunks():
            acc += self._full_domain_chunk(sl, aes).sum(axis=0, dtype=np.uint64)
        acc &= self.mask
        return acc

    def _domain_chunks(self):
        per = max(1, (1 << 16) >> self.n)  # about 2^16 leaves per chunk
        K = len(self)
        return [slice(c, min(K, c + per)) for c in range(0, K, per)]


class DPFKey(FSSKey):
    """One DPF key; Eval via :meth:`eval`, :meth:`eval_many`, :meth:`full_domain`."""

    BATCH_CLASS = DPFKeyBatch
    batch: DPFKeyBatch

    def full_domain(self, *, aes: FixedKeyAES | None = None) -> np.ndarray:
        """(2^n,) shares of f at every point x = 0 .. 2^n - 1."""
        return self.batch.full_domain(aes=aes)[0]


DPFKeyBatch.KEY_CLASS = DPFKey
