"""The numba loops of the VDPF full-domain verification (imported by :mod:`pairwise.fss.vdpf` on first use).

What it does
    The bookkeeping between the AES calls of :meth:`pairwise.fss.vdpf.VDPFKeyBatch.iter_verify`,
    fused into one pass each: the PRG inputs of a tree level (:func:`prep`),
    both children of every node with their corrections (:func:`children`),
    the leaves' value and check-hash inputs (:func:`leaf_prep`), outputs
    and tag inputs (:func:`leaf_finish`) and the XOR fold into one tag per
    key (:func:`fold`).  The AES calls stay in OpenSSL (``cryptography``,
    AES-NI).  Same numbers as the numpy path (``tests/fss/test_vdpf.py``
    compares them).  Kept apart so that importing :mod:`pairwise.fss` does not
    import numba, and so numba's on-disk cache can key them.

Security model
    Branch-free on seeds and control bits (selection by masks ``0 - t``);
    every index comes from the public shapes.  ``boundscheck`` is off: the
    caller allocates every array with the shape the loops expect.
"""

from __future__ import annotations

from typing import Any

import numba as _nb
import numpy as np

_opts: dict[str, Any] = dict(cache=True, nogil=True, boundscheck=False, fastmath=False, error_model="numpy")
_ONE = np.uint64(1)
_TWO = np.uint64(2)
_ZERO = np.uint64(0)
_CLEAR = np.uint64(0xFFFF_FFFF_FFFF_FFFE)


@_nb.njit(**_opts)
def prep(lo, hi, inp):
    """inp[i, c] = sigma(s_i) xor c for c in {0, 1}: the PRG inputs of nodes (lo, hi) flattened (M,)."""
    for i in range(lo.shape[0]):
        sl = hi[i]
        sh = lo[i] ^ hi[i]
        inp[i, 0, 0] = sl
        inp[i, 0, 1] = sh
        inp[i, 1, 0] = sl ^ _ONE
        inp[i, 1, 1] = sh


@_nb.njit(**_opts)
def children(E, lo, hi, T, cw, out):
    """Both children of every node (BGI16 Fig. 1 Eval): s^c xor t s_CW, t^c xor t t_CW^c, lowest bit cleared.

    E (kc * w, 2, 2): pi of :func:`prep`'s inputs; lo, hi, T (kc, w); ``cw`` the level's correction words
    (scw_lo, scw_hi, tcw_l, tcw_r), each (kc,); ``out`` the children (nlo, nhi, nT), each (kc, 2 w), child
    c of node j at 2 j + c.
    """
    scw_lo, scw_hi, tcw_l, tcw_r = cw
    nlo, nhi, nT = out
    kc, w = lo.shape
    for k in range(kc):
        slo = scw_lo[k]
        shi = scw_hi[k]
        tl = np.uint64(tcw_l[k])
        tr = np.uint64(tcw_r[k])
        for j in range(w):
            i = k * w + j
            sig_lo = hi[k, j]
            sig_hi = lo[k, j] ^ hi[k, j]
            t = T[k, j]
            m = _ZERO - t
            b0 = E[i, 0, 0] ^ sig_lo
            b1 = E[i, 1, 0] ^ sig_lo
            nlo[k, 2 * j] = (b0 & _CLEAR) ^ (m & slo)
            nhi[k, 2 * j] = E[i, 0, 1] ^ sig_hi ^ (m & shi)
            nT[k, 2 * j] = (b0 & _ONE) ^ (t & tl)
            nlo[k, 2 * j + 1] = (b1 & _CLEAR) ^ (m & slo)
            nhi[k, 2 * j + 1] = E[i, 1, 1] ^ sig_hi ^ (m & shi)
            nT[k, 2 * j + 1] = (b1 & _ONE) ^ (t & tr)


@_nb.njit(**_opts)
def leaf_prep(lo, hi, X, y, vin):
    """Leaves (kc, W): vin = sigma(s) xor 2 (value block), y[j] = sigma(s) xor X[j] (check-hash inputs)."""
    kc, W = lo.shape
    for k in range(kc):
        for x in range(W):
            sl = hi[k, x]
            sh = lo[k, x] ^ hi[k, x]
            i = k * W + x
            vin[i, 0] = sl ^ _TWO
            vin[i, 1] = sh
            y[0, k, x, 0] = sl ^ X[0, x, 0]
            y[0, k, x, 1] = sh ^ X[0, x, 1]
            y[1, k, x, 0] = sl ^ X[1, x, 0]
            y[1, k, x, 1] = sh ^ X[1, x, 1]
            y[2, k, x, 0] = sl ^ X[2, x, 0]
            y[2, k, x, 1] = sh ^ X[2, x, 1]
            y[3, k, x, 0] = sl ^ X[3, x, 0]
            y[3, k, x, 1] = sh ^ X[3, x, 1]


@_nb.njit(**_opts)
def leaf_finish(vout, hi, T, key, H, y, cs, M, out):
    """Outputs (-1)^b [V(s) + t CW] mod 2^l into out (kc, W), and the tag inputs H ^= y ^ t cs ^ M in place.

    vout (kc W, 2): pi(sigma(s) xor 2); ``key`` the batch's (fcw (kc,), party, mask); H (4, kc, W, 2):
    pi_j(y_j); cs (kc, 4, 2); M (4, W, 2).
    """
    fcw, party, mask = key
    kc, W = hi.shape
    for k in range(kc):
        f = fcw[k]
        c00, c01, c10, c11 = cs[k, 0, 0], cs[k, 0, 1], cs[k, 1, 0], cs[k, 1, 1]
        c20, c21, c30, c31 = cs[k, 2, 0], cs[k, 2, 1], cs[k, 3, 0], cs[k, 3, 1]
        for x in range(W):
            m = _ZERO - T[k, x]
            v = (vout[k * W + x, 0] ^ hi[k, x]) + (m & f)
            if party:
                v = _ZERO - v
            out[k, x] = v & mask
            H[0, k, x, 0] ^= y[0, k, x, 0] ^ (m & c00) ^ M[0, x, 0]
            H[0, k, x, 1] ^= y[0, k, x, 1] ^ (m & c01) ^ M[0, x, 1]
            H[1, k, x, 0] ^= y[1, k, x, 0] ^ (m & c10) ^ M[1, x, 0]
            H[1, k, x, 1] ^= y[1, k, x, 1] ^ (m & c11) ^ M[1, x, 1]
            H[2, k, x, 0] ^= y[2, k, x, 0] ^ (m & c20) ^ M[2, x, 0]
            H[2, k, x, 1] ^= y[2, k, x, 1] ^ (m & c21) ^ M[2, x, 1]
            H[3, k, x, 0] ^= y[3, k, x, 0] ^ (m & c30) ^ M[3, x, 0]
            H[3, k, x, 1] ^= y[3, k, x, 1] ^ (m & c31) ^ M[3, x, 1]


@_nb.njit(**_opts)
def fold(H, tags):
    """tags[k] = XOR over j and x of H[j, k, x] (H (4, kc, W, 2), tags (kc, 2))."""
    kc = H.shape[1]
    W = H.shape[2]
    for k in range(kc):
        a = _ZERO
        b = _ZERO
        for x in range(W):
            a ^= H[0, k, x, 0] ^ H[1, k, x, 0] ^ H[2, k, x, 0] ^ H[3, k, x, 0]
            b ^= H[0, k, x, 1] ^ H[1, k, x, 1] ^ H[2, k, x, 1] ^ H[3, k, x, 1]
        tags[k, 0] = a
        tags[k, 1] = b
