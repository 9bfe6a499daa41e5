"""Distributed comparison functions (the DCF of [BCG+21]).

What it does
    A DCF shares the comparison function f^<_{alpha,beta} : {0,1}^n -> Z_2^l,
    f(x) = beta if x < alpha else 0 (x, alpha unsigned n-bit integers), as two
    keys with Eval(k_0, x) + Eval(k_1, x) = f(x) mod 2^l.  This is Gen/Eval of
    [BCG+21, Sec. 3, Fig. 1]: per level a seed correction s_CW, a value
    correction V_CW and two control-bit corrections, plus the output
    correction CW^(n+1), with the PRG of :mod:`pairwise.fss.prg`.

    ``comparison=`` of :func:`dcf_gen` / :func:`dcf_gen_batch` picks
    ``"lt"`` (the paper's f^<, default), ``"le"``, ``"gt"`` or ``"ge"`` at no
    extra cost; Eval is the same for all four and the key format does not
    record the choice.  The ECDF servers ([BMR25, Sec. 4.2]) use ``"ge"``
    with alpha = x_i, beta = 1, so ``eval_sum(t)`` is a share of
    #{i : x_i <= t}.  How Gen places the payload for each variant:
    ``docs/fss.md``, "Comparison conventions of the DCF".

    * :func:`dcf_gen_batch`: Gen for K (alpha, beta) at once, one AES call per
      level over both parties' seeds of all keys; :func:`dcf_gen` for one.
    * :meth:`DCFKeyBatch.eval` / ``eval_sum``: K keys at one threshold (or one
      point per key) with one AES call per level per chunk of keys, 2 AES
      blocks per key per level.  :meth:`DCFKey.eval_many`: one key at many
      points.

Security model
    Two non-colluding semi-honest servers; each key alone hides alpha and
    beta ([BCG+21, Sec. 3], with the fixed-key-AES PRG of :mod:`pairwise.fss.prg`
    in the ideal-permutation model).  Root seeds come from the OS CSPRNG.  Key
    size: lambda + n(lambda + l + 2) + l bits of material, stored in
    21 + n(16 + ceil(l/8)) + ceil(n/4) + ceil(l/8) bytes (673 for n = l = 32).
"""

from __future__ import annotations

import numpy as np

from pairwise.mpc.aes import FixedKeyAES, default_aes, random_blocks

from .base import GEN_CHUNK, FSSKey, FSSKeyBatch
from .keys import (
    KIND_DCF,
    FSSParameterError,
    IntArrayLike,
    IntLike,
    alphas_array,
    betas_array,
    validate_params,
    validate_point,
)
from .prg import LSB_CLEAR, PathExpander, expand_words

__all__ = ["COMPARISONS", "DCFKey", "DCFKeyBatch", "dcf_gen", "dcf_gen_batch"]

#: Supported comparison conventions (see the module docstring).
COMPARISONS = ("lt", "le", "gt", "ge")

_ONE = np.uint64(1)
#: Largest domain for DCFKeyBatch.full_domain_sum (2^20 outputs per party).
DCF_FULL_DOMAIN_MAX_BITS = 20


def _cneg(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """(-1)^t * x mod 2^64 for t in {0, 1} (uint64 arrays)."""
    m = np.negative(t)
    return (x ^ m) + t


def _check_comparison(comparison: str) -> str:
    if comparison not in COMPARISONS:
        raise FSSParameterError(f"comparison must be one of {COMPARISONS}, got {comparison!r}")
    return comparison


def _dcf_gen_from_roots(
    alphas: np.ndarray,
    betas: np.ndarray,
    n: int,
    l: int,
    comparison: str,
    roots: np.ndarray,
    aes: FixedKeyAES | None = None,
):
    """Gen of BCGGIKR21 Fig. 1 for K keys from given root seeds roots (2, K, 2).

    Returns (scw (n,K,2), vcw (n,K), tcw (n,K,2) uint8, fcw (K,)), values
    reduced mod 2^l.  Deterministic in its inputs; callers pass fresh
    CSPRNG roots (tests pass fixed ones for known answers).

    ``acc`` is the paper's V_alpha: the sum of both parties' value shares
    along alpha's path so far.  (-1)^{t_1} V_CW is chosen so that leaving the
    path at level i makes the running sum equal that branch's payload.
    """
    aes = aes or default_aes()
    K = alphas.shape[0]
    mask = np.uint64((1 << l) - 1)
    pay_left = comparison in ("lt", "le")
    S_lo = np.ascontiguousarray(roots[..., 0])  # (2, K): party, key
    S_hi = np.ascontiguousarray(roots[..., 1])
    T = np.zeros((2, K), dtype=np.uint64)
    T[1] = 1
    acc = np.zeros(K, dtype=np.uint64)
    scw = np.empty((n, 2, K), dtype=np.uint64)
    vcw = np.empty((n, K), dtype=np.uint64)
    tcw = np.empty((n, 2, K), dtype=np.uint8)
    for i in range(n):
        a = (alphas >> np.uint64(n - 1 - i)) & _ONE
        am = np.negative(a)  # all ones where Keep = R (alpha_i = 1), i.e. Lose = L
        (l0, h0), (l1, h1), (vL, vR) = [
            (lo.reshape(2, K), hi.reshape(2, K)) for lo, hi in expand_words(S_lo.reshape(-1), S_hi.reshape(-1), 3, aes)
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
        dv = vL ^ vR
        v_keep = vL ^ (am & dv)
        v_lose = v_keep ^ dv
        # payload of the branch that leaves alpha's path here
        pay = betas & (am if pay_left else ~am)
        inner = v_lose[1] - v_lose[0] - acc + pay  # = (-1)^{t_1} V_CW
        np.bitwise_and(_cneg(inner, T[1]), mask, out=vcw[i])
        acc += v_keep[0] - v_keep[1] + inner
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
    leaf = betas if comparison in ("le", "ge") else np.uint64(0)
    fcw = _cneg(S_hi[1] - S_hi[0] - acc + leaf, T[1]) & mask
    return scw, vcw, tcw, fcw


def _dcf_gen_chunked(alphas, betas, n, l, comparison, roots, aes):
    """:func:`_dcf_gen_from_roots` over chunks of :data:`GEN_CHUNK` keys (cache-sized arrays)."""
    K = alphas.shape[0]
    if K <= GEN_CHUNK:
        return _dcf_gen_from_roots(alphas, betas, n, l, comparison, roots, aes)
    scw = np.empty((n, 2, K), dtype=np.uint64)
    vcw = np.empty((n, K), dtype=np.uint64)
    tcw = np.empty((n, 2, K), dtype=np.uint8)
    fcw = np.empty(K, dtype=np.uint64)
    for c0 in range(0, K, GEN_CHUNK):
        sl = slice(c0, min(K, c0 + GEN_CHUNK))
        scw[:, :, sl], vcw[:, sl], tcw[:, :, sl], fcw[sl] = _dcf_gen_from_roots(
            alphas[sl], betas[sl], n, l, comparison, roots[:, sl], aes
        )
    return scw, vcw, tcw, fcw


def dcf_gen_batch(
    alphas: IntArrayLike,
    betas: IntLike | IntArrayLike,
    n: int,
    l: int,
    *,
    comparison: str = "lt",
    aes: FixedKeyAES | None = None,
) -> tuple[DCFKeyBatch, DCFKeyBatch]:
    """Keys for K comparison functions f_k(x) = betas[k] * [x CMP alphas[k]] mod 2^l.

    ``betas`` is one integer for all keys or one per key, in (-2^l, 2^l).
    Returns the party-0 and party-1 batches; key k of each is client k's
    pair.  Vectorized: one AES call per tree level for all keys.
    """
    n, l = validate_params(n, l)
    comparison = _check_comparison(comparison)
    a = alphas_array(alphas, n)
    b = betas_array(betas, l, a.shape[0])
    roots = random_blocks(2, a.shape[0])
    scw, vcw, tcw, fcw = _dcf_gen_chunked(a, b, n, l, comparison, roots, aes)
    # separate copies: party b's batch must not reference the other party's root seeds
    return (
        DCFKeyBatch(0, n, l, roots[0].copy(), scw, tcw, fcw, vcw),
        DCFKeyBatch(1, n, l, roots[1].copy(), scw, tcw, fcw, vcw),
    )


def dcf_gen(
    alpha: int, beta: int, n: int, l: int, *, comparison: str = "lt", aes: FixedKeyAES | None = None
) -> tuple[DCFKey, DCFKey]:
    """Keys (k_0, k_1) of f(x) = beta * [x CMP alpha] (default x < alpha), outputs mod 2^l."""
    n, l = validate_params(n, l)
    alpha = validate_point(alpha, n, "alpha")
    k0, k1 = dcf_gen_batch([alpha], beta, n, l, comparison=comparison, aes=aes)
    return k0[0], k1[0]


class DCFKeyBatch(FSSKeyBatch):
    """K DCF keys of one party (struct of arrays); see :class:`pairwise.fss.base.FSSKeyBatch`.

    A server holding n clients' keys parses them with :meth:`from_bytes_list`
    (or :meth:`parse_valid` to drop malformed ones) and calls
    ``eval_sum(t)`` for its share of sum_i f_i(t), or ``eval(t)`` for the
    per-client shares.
    """

    KIND = KIND_DCF

    def _walk(self, x, key_slice, aes):
        sl = key_slice if key_slice is not None else slice(None)
        seeds, scw, vcw = self.seeds[sl], self.scw[:, :, sl], self.vcw[:, sl]
        tcw, fcw = self.tcw[:, :, sl], self.fcw[sl]
        scalar = isinstance(x, int)
        m = seeds.shape[0] if scalar else x.shape[0]
        n = self.n
        s_lo = np.empty(m, dtype=np.uint64)
        s_hi = np.empty(m, dtype=np.uint64)
        s_lo[...] = seeds[:, 0]
        s_hi[...] = seeds[:, 1]
        T = np.full(m, self.party, dtype=np.uint64)
        Tm = np.empty(m, dtype=np.uint64)
        V = np.zeros(m, dtype=np.uint64)
        tmp = np.empty(m, dtype=np.uint64)
        ex = PathExpander(m, True, aes)
        for i in range(n):
            if scalar:
                xb = (x >> (n - 1 - i)) & 1
                c_lo, c_hi, v = ex.step(s_lo, s_hi, xb)
                tsel = tcw[i, xb]
            else:
                xv = (x >> np.uint64(n - 1 - i)) & _ONE
                xbool = xv.astype(bool)
                c_lo, c_hi, v = ex.step(s_lo, s_hi, xv, xbool)
                tsel = np.where(xbool, tcw[i, 1], tcw[i, 0])
            np.negative(T, out=Tm)
            # V += (-1)^b [v^x + t V_CW]  (the sign is applied once at the end)
            V += v
            np.bitwise_and(Tm, vcw[i], out=tmp)
            V += tmp
            # t <- t^x xor t * t_CW^x
            np.bitwise_and(T, tsel, out=T)
            np.bitwise_and(c_lo, _ONE, out=tmp)
            T ^= tmp
            # s <- s^x xor t * s_CW
            np.bitwise_and(Tm, scw[i, 0], out=s_lo)
            s_lo ^= c_lo
            s_lo &= LSB_CLEAR
            np.bitwise_and(Tm, scw[i, 1], out=s_hi)
            s_hi ^= c_hi
        V += s_hi  # Convert(s^(n))
        np.negative(T, out=Tm)
        np.bitwise_and(Tm, fcw, out=tmp)
        V += tmp
        if self.party:
            np.negative(V, out=V)
        V &= self.mask
        return V

    def full_domain_sum(self, *, aes: FixedKeyAES | None = None) -> np.ndarray:
        """(2^n,) this party's share of sum_k f_k(x) mod 2^l at every x (n <= DCF_FULL_DOMAIN_MAX_BITS).

        Breadth-first expansion of every key's tree with the per-level rules of
        :meth:`_walk` (Boyle et al. 2021, Fig. 1 Eval: V += v^x + t V_CW,
        t <- t^x xor t t_CW^x, s <- s^x xor t s_CW; at the leaf V += Convert(s)
        + t CW^(n+1), negated for party 1), applied to both children of every
        node of a level at once: a key's 2^n leaves cost about 2^(n+1) PRG
        calls of 3 blocks instead of n 2^n calls for 2^n separate walks.  Keys
        go in chunks of about 2^16 leaves.  The ECDF servers use it to get
        shares of every threshold's count in one pass.
        """
        n = self.n
        if n > DCF_FULL_DOMAIN_MAX_BITS:
            raise FSSParameterError(
                f"full-domain DCF evaluation of an n={n}-bit domain is limited to n <= {DCF_FULL_DOMAIN_MAX_BITS}"
            )
        K = len(self)
        acc = np.zeros(1 << n, dtype=np.uint64)
        per = max(1, (1 << 16) >> n)
        for c0 in range(0, K, per):
            sl = slice(c0, min(K, c0 + per))
            seeds, scw, tcw = self.seeds[sl], self.scw[:, :, sl], self.tcw[:, :, sl]
            assert self.vcw is not None  # a DCF batch always has value corrections
            vcw, fcw = self.vcw[:, sl], self.fcw[sl]
            kc = seeds.shape[0]
            s_lo = seeds[:, 0].reshape(kc, 1).copy()
            s_hi = seeds[:, 1].reshape(kc, 1).copy()
            T = np.full((kc, 1), self.party, dtype=np.uint64)
            V = np.zeros((kc, 1), dtype=np.uint64)
            for i in range(n):
                w = s_lo.shape[1]
                (l0, h0), (l1, h1), (vl, vh) = expand_words(s_lo.reshape(-1), s_hi.reshape(-1), 3, aes)
                Tm = np.negative(T)
                base = V + (Tm & vcw[i][:, None])
                new_lo = np.empty((kc, w, 2), dtype=np.uint64)
                new_hi = np.empty((kc, w, 2), dtype=np.uint64)
                new_t = np.empty((kc, w, 2), dtype=np.uint64)
                new_v = np.empty((kc, w, 2), dtype=np.uint64)
                for side, (lo, hi, v) in enumerate(((l0, h0, vl), (l1, h1, vh))):
                    lo = lo.reshape(kc, w)
                    hi = hi.reshape(kc, w)
                    new_v[:, :, side] = base + v.reshape(kc, w)
                    new_t[:, :, side] = (lo & _ONE) ^ (T & tcw[i, side][:, None].astype(np.uint64))
                    new_lo[:, :, side] = (lo ^ (Tm & scw[i, 0][:, None])) & LSB_CLEAR
                    new_hi[:, :, side] = hi ^ (Tm & scw[i, 1][:, None])
                s_lo, s_hi = new_lo.reshape(kc, 2 * w), new_hi.reshape(kc, 2 * w)
                T, V = new_t.reshape(kc, 2 * w), new_v.reshape(kc, 2 * w)
            V = V + s_hi + (np.negative(T) & fcw[:, None])
            if self.party:
                V = np.negative(V)
            acc += V.sum(axis=0, dtype=np.uint64)
        acc &= self.mask
        return acc


class DCFKey(FSSKey):
    """One DCF key; Eval via :meth:`eval` (one point) and :meth:`eval_many` (many points)."""

    BATCH_CLASS = DCFKeyBatch


DCFKeyBatch.KEY_CLASS = DCFKey
