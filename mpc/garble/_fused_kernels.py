"""The AES-NI kernels of :mod:`pairwise.mpc.garble.fused`: half-gates with the hash's AES inside the loop.

What it does
    :func:`garble_batches` / :func:`eval_batches` run the AND batches
    [i0, i1) of a program (:func:`pairwise.mpc.garble.jit.program`) for the
    instances [n0, n1) of a chunk of ``bc``: per batch, its XOR/INV gates
    (:func:`linear`), then its AND gates (:func:`garble_ands`,
    :func:`eval_ands`), hash included, writing tables and output labels.
    The hash is TMMO, H(x, i) = pi(pi(x) ^ i) ^ pi(x) with pi the fixed-key
    AES of :mod:`pairwise.mpc.aes`, computed on four blocks at once
    (:func:`pairwise.mpc.garble._aesni.q_aes`: one VAES instruction per round
    on a 512-bit machine): the garbler hashes the quad (A0, B0, A0 ^ R, B0 ^ R)
    of one gate, the evaluator the quad (A, B, A', B') of two gates, and
    four quads are in flight so the rounds pipeline.  ``*_ands`` also take a
    gate range [j0, j1) of one batch, so two threads can share a wide level.

    Labels are a flat uint64 array, the label of slot s in instance n at
    words 2 (s bc + n); tables are the segment layout of
    ``docs/garbling.md``: (2 [T_G, T_E], 2 [lo, hi], k, bc) words from
    ``off``.  Same algebra, tweaks and bytes as the numpy program
    (:mod:`pairwise.mpc.garble.kernels`) and :mod:`pairwise.mpc.halfgates`.

Security model
    Semi-honest half-gates (Zahur-Rosulek-Evans 2015) with the TMMO hash,
    tweakable circular correlation robust when pi is a random permutation
    (Guo-Katz-Wang-Yu 2020, Sec. 7.4).  No branch and no memory index
    depends on a label, Delta or a permute bit: a permute bit selects with
    an all-ones mask (:func:`pairwise.mpc.garble._aesni.x_mask`), and every
    index and branch comes from the public program, the chunk size and the
    gate and instance counters.  AES runs on the AES-NI instructions
    (constant time).  ``boundscheck`` is off: indices come from the plan of
    a validated circuit and the callers size every array.

Follows
    Zahur, Rosulek, Evans, EUROCRYPT 2015, Fig. 2; Guo, Katz, Wang, Yu,
    S&P 2020, Sec. 7.4 (TMMO).
"""

from __future__ import annotations

from typing import Any

import numba as _nb
import numpy as np

from ._aesni import (
    CACHE,
    ld,
    q_aes,
    q_dup,
    q_make,
    q_p0,
    q_p1,
    q_p2,
    q_p3,
    q_xor,
    st,
    x_and,
    x_hi,
    x_lo,
    x_load,
    x_make,
    x_mask,
    x_store,
    x_xor,
)
from .jit import HEADER

_opts: dict[str, Any] = dict(cache=CACHE, nogil=True, boundscheck=False, fastmath=False, error_model="numpy")
_inl = dict(_opts, inline="always")
_ONE = np.uint64(1)


@_nb.njit(**_opts)
def linear(lab, P, l0, l1, bc, n0, n1):
    """XOR/INV gates [l0, l1) of the program for instances [n0, n1) (INV: an XOR with the one slot)."""
    n_and = ld(P, 0)
    n_lin = ld(P, 1)
    la = HEADER + 3 * n_and
    lb = la + n_lin
    lo = lb + n_lin
    if bc == 1:
        for g in range(l0, l1):
            x_store(lab, 2 * ld(P, lo + g), x_xor(x_load(lab, 2 * ld(P, la + g)), x_load(lab, 2 * ld(P, lb + g))))
        return
    for g in range(l0, l1):
        a = ld(P, la + g) * bc
        b = ld(P, lb + g) * bc
        o = ld(P, lo + g) * bc
        for n in range(n0, n1):
            x_store(lab, 2 * (o + n), x_xor(x_load(lab, 2 * (a + n)), x_load(lab, 2 * (b + n))))


@_nb.njit(**_inl)
def _next(j, n, n0, n1, more):
    """The (gate, instance) item after (j, n), instances fastest; (j, n) itself if ``more`` is False
    (the last item is then hashed again and stored again: same values, no branch on secrets)."""
    if more:
        n += 1
        if n == n1:
            n = n0
            j += 1
    return j, n


@_nb.njit(**_inl)
def _tweaks(base, j, inst, n):
    """Tweak blocks (2g, instance) and (2g + 1, instance) of AND gate g = base + j, instance inst + n."""
    t = np.uint64(2 * (base + j))
    hi = inst + np.uint64(n)
    return x_make(t, hi), x_make(t | _ONE, hi)


@_nb.njit(**_inl)
def _g_in(lab, P, aa, ab, j, n, bc, delta, base, inst):
    """Garbler, one gate: its zero labels A0, B0, Delta, the quad (A0, B0, A0^R, B0^R) and its tweaks."""
    a = x_load(lab, 2 * (ld(P, aa + j) * bc + n))
    b = x_load(lab, 2 * (ld(P, ab + j) * bc + n))
    d = x_load(delta, 2 * n)
    ta, tb = _tweaks(base, j, inst, n)
    return a, b, d, q_make(a, b, x_xor(a, d), x_xor(b, d)), q_dup(ta, tb)


@_nb.njit(**_inl)
def _g_out(lab, o, a, b, d, y, out, e, s):
    """Garbler, one gate: tables (words ``e + m*s``) and output zero label (``lab`` word ``o``) from
    H = (H(A0), H(B0), H(A1), H(B1)) (ZRE15 Fig. 2)."""
    ha0 = q_p0(y)
    hb0 = q_p1(y)
    da = x_xor(ha0, q_p2(y))  # H(A0) ^ H(A1)
    db = x_xor(hb0, q_p3(y))  # H(B0) ^ H(B1)
    pa = x_mask(x_lo(a))
    pb = x_mask(x_lo(b))
    tg = x_xor(da, x_and(pb, d))  # T_G = H(A0) ^ H(A1) ^ pb*R
    te = x_xor(db, a)  # T_E = H(B0) ^ H(B1) ^ A0
    c = x_xor(x_xor(ha0, hb0), x_xor(x_and(pa, tg), x_and(pb, db)))  # W_G ^ W_E
    st(out, e, x_lo(tg))
    st(out, e + s, x_hi(tg))
    st(out, e + 2 * s, x_lo(te))
    st(out, e + 3 * s, x_hi(te))
    x_store(lab, o, c)


@_nb.njit(**_inl)
def _geometry(P, i):
    """Batch ``i``'s (offsets in P of its and_a, and_b, and_o entries, AND count, first gate id)."""
    n_and = ld(P, 0)
    row = HEADER + 3 * n_and + 3 * ld(P, 1) + 5 * i
    a0 = ld(P, row)
    aa = HEADER + a0
    return aa, aa + n_and, aa + 2 * n_and, ld(P, row + 1) - a0, ld(P, row + 4)


@_nb.njit(**_inl)
def _tmmo(x, t, rk):
    """H(x, t) = pi(pi(x) ^ t) ^ pi(x) on four blocks."""
    p = q_aes(x, rk)
    return q_xor(q_aes(q_xor(p, t), rk), p)


@_nb.njit(**_inl)
def _g_in1(lab, P, aa, ab, j, d, t0, inst):
    """Garbler, one gate of a one-instance chunk (slot s at words 2s): as :func:`_g_in`."""
    a = x_load(lab, 2 * ld(P, aa + j))
    b = x_load(lab, 2 * ld(P, ab + j))
    t = t0 + np.uint64(2 * j)
    return a, b, q_make(a, b, x_xor(a, d), x_xor(b, d)), q_dup(x_make(t, inst), x_make(t | _ONE, inst))


@_nb.njit(**_opts)
def _garble_ands1(lab, P, geo, j0, j1, key, out, off):
    """:func:`garble_ands` for a one-instance chunk: four gates at a time, no instance counter.  ``geo``: the
    batch's (and_a, and_b, and_o offsets in P, AND count, first gate id), as :func:`_geometry`."""
    aa, ab, ao, k, base = geo
    delta, inst, rk = key
    d = x_load(delta, 0)
    t0 = np.uint64(2 * base)
    last = j1 - 1
    for j in range(j0, j1, 4):
        j2 = min(j + 1, last)
        j3 = min(j + 2, last)
        j4 = min(j + 3, last)
        a1, b1, x1, t1 = _g_in1(lab, P, aa, ab, j, d, t0, inst)
        a2, b2, x2, t2 = _g_in1(lab, P, aa, ab, j2, d, t0, inst)
        a3, b3, x3, t3 = _g_in1(lab, P, aa, ab, j3, d, t0, inst)
        a4, b4, x4, t4 = _g_in1(lab, P, aa, ab, j4, d, t0, inst)
        p1 = q_aes(x1, rk)
        p2 = q_aes(x2, rk)
        p3 = q_aes(x3, rk)
        p4 = q_aes(x4, rk)
        y1 = q_xor(q_aes(q_xor(p1, t1), rk), p1)
        y2 = q_xor(q_aes(q_xor(p2, t2), rk), p2)
        y3 = q_xor(q_aes(q_xor(p3, t3), rk), p3)
        y4 = q_xor(q_aes(q_xor(p4, t4), rk), p4)
        _g_out(lab, 2 * ld(P, ao + j), a1, b1, d, y1, out, off + j, k)
        _g_out(lab, 2 * ld(P, ao + j2), a2, b2, d, y2, out, off + j2, k)
        _g_out(lab, 2 * ld(P, ao + j3), a3, b3, d, y3, out, off + j3, k)
        _g_out(lab, 2 * ld(P, ao + j4), a4, b4, d, y4, out, off + j4, k)


@_nb.njit(**_opts)
def garble_ands(lab, P, i, j0, j1, rng, key, out, off):
    """Garble AND gates [j0, j1) of batch ``i`` for instances [n0, n1) of a chunk of bc, ``rng`` = (bc, n0, n1):
    tables into ``out`` from word ``off`` (the batch's segment), output zero labels into ``lab``.  ``key`` =
    (delta, inst, rk): the chunk's Delta per instance (2 words each), the instance id of the chunk's instance
    0, pi's round keys (x4)."""
    bc, n0, n1 = rng
    delta, inst, rk = key
    geo = _geometry(P, i)
    aa, ab, ao, k, base = geo
    if bc == 1:
        _garble_ands1(lab, P, geo, j0, j1, key, out, off)
        return
    s = k * bc
    total = (j1 - j0) * (n1 - n0)
    j, n = j0, n0
    for q in range(0, total, 4):  # four gates at a time (the last group repeats its last gate)
        j1_, n1_ = j, n
        j, n = _next(j, n, n0, n1, q + 1 < total)
        j2_, n2_ = j, n
        j, n = _next(j, n, n0, n1, q + 2 < total)
        j3_, n3_ = j, n
        j, n = _next(j, n, n0, n1, q + 3 < total)
        j4_, n4_ = j, n
        j, n = _next(j, n, n0, n1, True)
        a1, b1, d1, x1, t1 = _g_in(lab, P, aa, ab, j1_, n1_, bc, delta, base, inst)
        a2, b2, d2, x2, t2 = _g_in(lab, P, aa, ab, j2_, n2_, bc, delta, base, inst)
        a3, b3, d3, x3, t3 = _g_in(lab, P, aa, ab, j3_, n3_, bc, delta, base, inst)
        a4, b4, d4, x4, t4 = _g_in(lab, P, aa, ab, j4_, n4_, bc, delta, base, inst)
        p1 = q_aes(x1, rk)
        p2 = q_aes(x2, rk)
        p3 = q_aes(x3, rk)
        p4 = q_aes(x4, rk)
        y1 = q_xor(q_aes(q_xor(p1, t1), rk), p1)
        y2 = q_xor(q_aes(q_xor(p2, t2), rk), p2)
        y3 = q_xor(q_aes(q_xor(p3, t3), rk), p3)
        y4 = q_xor(q_aes(q_xor(p4, t4), rk), p4)
        _g_out(lab, 2 * (ld(P, ao + j1_) * bc + n1_), a1, b1, d1, y1, out, off + j1_ * bc + n1_, s)
        _g_out(lab, 2 * (ld(P, ao + j2_) * bc + n2_), a2, b2, d2, y2, out, off + j2_ * bc + n2_, s)
        _g_out(lab, 2 * (ld(P, ao + j3_) * bc + n3_), a3, b3, d3, y3, out, off + j3_ * bc + n3_, s)
        _g_out(lab, 2 * (ld(P, ao + j4_) * bc + n4_), a4, b4, d4, y4, out, off + j4_ * bc + n4_, s)


@_nb.njit(**_inl)
def _e_in(lab, P, aa, ab, j, n, bc, base, inst):
    """Evaluator, one gate: its active labels A, B and their tweaks."""
    a = x_load(lab, 2 * (ld(P, aa + j) * bc + n))
    b = x_load(lab, 2 * (ld(P, ab + j) * bc + n))
    ta, tb = _tweaks(base, j, inst, n)
    return a, b, ta, tb


@_nb.njit(**_inl)
def _e_out(lab, o, a, b, ha, hb, tab, e, s):
    """Evaluator, one gate: C = H(A) ^ H(B) ^ sa*T_G ^ sb*(T_E ^ A) (ZRE15 Fig. 2) into ``lab`` word ``o``."""
    tg = x_make(ld(tab, e), ld(tab, e + s))
    te = x_make(ld(tab, e + 2 * s), ld(tab, e + 3 * s))
    c = x_xor(x_xor(ha, hb), x_xor(x_and(x_mask(x_lo(a)), tg), x_and(x_mask(x_lo(b)), x_xor(te, a))))
    x_store(lab, o, c)


@_nb.njit(**_inl)
def _e_in1(lab, P, aa, ab, j, t0, inst):
    a = x_load(lab, 2 * ld(P, aa + j))
    b = x_load(lab, 2 * ld(P, ab + j))
    t = t0 + np.uint64(2 * j)
    return a, b, x_make(t, inst), x_make(t | _ONE, inst)


@_nb.njit(**_opts)
def _eval_ands1(lab, P, geo, j0, j1, key, tab, off):
    """:func:`eval_ands` for a one-instance chunk: eight gates at a time, no instance counter."""
    aa, ab, ao, k, base = geo
    inst, rk = key
    t0 = np.uint64(2 * base)
    last = j1 - 1
    for j in range(j0, j1, 8):
        j2 = min(j + 1, last)
        j3 = min(j + 2, last)
        j4 = min(j + 3, last)
        j5 = min(j + 4, last)
        j6 = min(j + 5, last)
        j7 = min(j + 6, last)
        j8 = min(j + 7, last)
        a1, b1, s1, u1 = _e_in1(lab, P, aa, ab, j, t0, inst)
        a2, b2, s2, u2 = _e_in1(lab, P, aa, ab, j2, t0, inst)
        a3, b3, s3, u3 = _e_in1(lab, P, aa, ab, j3, t0, inst)
        a4, b4, s4, u4 = _e_in1(lab, P, aa, ab, j4, t0, inst)
        a5, b5, s5, u5 = _e_in1(lab, P, aa, ab, j5, t0, inst)
        a6, b6, s6, u6 = _e_in1(lab, P, aa, ab, j6, t0, inst)
        a7, b7, s7, u7 = _e_in1(lab, P, aa, ab, j7, t0, inst)
        a8, b8, s8, u8 = _e_in1(lab, P, aa, ab, j8, t0, inst)
        y1 = _tmmo(q_make(a1, b1, a2, b2), q_make(s1, u1, s2, u2), rk)
        y2 = _tmmo(q_make(a3, b3, a4, b4), q_make(s3, u3, s4, u4), rk)
        y3 = _tmmo(q_make(a5, b5, a6, b6), q_make(s5, u5, s6, u6), rk)
        y4 = _tmmo(q_make(a7, b7, a8, b8), q_make(s7, u7, s8, u8), rk)
        _e_out(lab, 2 * ld(P, ao + j), a1, b1, q_p0(y1), q_p1(y1), tab, off + j, k)
        _e_out(lab, 2 * ld(P, ao + j2), a2, b2, q_p2(y1), q_p3(y1), tab, off + j2, k)
        _e_out(lab, 2 * ld(P, ao + j3), a3, b3, q_p0(y2), q_p1(y2), tab, off + j3, k)
        _e_out(lab, 2 * ld(P, ao + j4), a4, b4, q_p2(y2), q_p3(y2), tab, off + j4, k)
        _e_out(lab, 2 * ld(P, ao + j5), a5, b5, q_p0(y3), q_p1(y3), tab, off + j5, k)
        _e_out(lab, 2 * ld(P, ao + j6), a6, b6, q_p2(y3), q_p3(y3), tab, off + j6, k)
        _e_out(lab, 2 * ld(P, ao + j7), a7, b7, q_p0(y4), q_p1(y4), tab, off + j7, k)
        _e_out(lab, 2 * ld(P, ao + j8), a8, b8, q_p2(y4), q_p3(y4), tab, off + j8, k)


@_nb.njit(**_opts)
def eval_ands(lab, P, i, j0, j1, rng, key, tab, off):
    """Evaluate AND gates [j0, j1) of batch ``i`` for instances [n0, n1), ``rng`` = (bc, n0, n1), with the
    tables in ``tab`` from word ``off``; active output labels into ``lab``; ``key`` = (inst, rk) as for
    :func:`garble_ands`.  Eight gates at a time, two per quad."""
    bc, n0, n1 = rng
    inst, rk = key
    geo = _geometry(P, i)
    aa, ab, ao, k, base = geo
    if bc == 1:
        _eval_ands1(lab, P, geo, j0, j1, key, tab, off)
        return
    s = k * bc
    total = (j1 - j0) * (n1 - n0)
    j, n = j0, n0
    for q in range(0, total, 8):
        j1_, n1_ = j, n
        j, n = _next(j, n, n0, n1, q + 1 < total)
        j2_, n2_ = j, n
        j, n = _next(j, n, n0, n1, q + 2 < total)
        j3_, n3_ = j, n
        j, n = _next(j, n, n0, n1, q + 3 < total)
        j4_, n4_ = j, n
        j, n = _next(j, n, n0, n1, q + 4 < total)
        j5_, n5_ = j, n
        j, n = _next(j, n, n0, n1, q + 5 < total)
        j6_, n6_ = j, n
        j, n = _next(j, n, n0, n1, q + 6 < total)
        j7_, n7_ = j, n
        j, n = _next(j, n, n0, n1, q + 7 < total)
        j8_, n8_ = j, n
        j, n = _next(j, n, n0, n1, True)
        a1, b1, s1, u1 = _e_in(lab, P, aa, ab, j1_, n1_, bc, base, inst)
        a2, b2, s2, u2 = _e_in(lab, P, aa, ab, j2_, n2_, bc, base, inst)
        a3, b3, s3, u3 = _e_in(lab, P, aa, ab, j3_, n3_, bc, base, inst)
        a4, b4, s4, u4 = _e_in(lab, P, aa, ab, j4_, n4_, bc, base, inst)
        a5, b5, s5, u5 = _e_in(lab, P, aa, ab, j5_, n5_, bc, base, inst)
        a6, b6, s6, u6 = _e_in(lab, P, aa, ab, j6_, n6_, bc, base, inst)
        a7, b7, s7, u7 = _e_in(lab, P, aa, ab, j7_, n7_, bc, base, inst)
        a8, b8, s8, u8 = _e_in(lab, P, aa, ab, j8_, n8_, bc, base, inst)
        y1 = _tmmo(q_make(a1, b1, a2, b2), q_make(s1, u1, s2, u2), rk)
        y2 = _tmmo(q_make(a3, b3, a4, b4), q_make(s3, u3, s4, u4), rk)
        y3 = _tmmo(q_make(a5, b5, a6, b6), q_make(s5, u5, s6, u6), rk)
        y4 = _tmmo(q_make(a7, b7, a8, b8), q_make(s7, u7, s8, u8), rk)
        _e_out(lab, 2 * (ld(P, ao + j1_) * bc + n1_), a1, b1, q_p0(y1), q_p1(y1), tab, off + j1_ * bc + n1_, s)
        _e_out(lab, 2 * (ld(P, ao + j2_) * bc + n2_), a2, b2, q_p2(y1), q_p3(y1), tab, off + j2_ * bc + n2_, s)
        _e_out(lab, 2 * (ld(P, ao + j3_) * bc + n3_), a3, b3, q_p0(y2), q_p1(y2), tab, off + j3_ * bc + n3_, s)
        _e_out(lab, 2 * (ld(P, ao + j4_) * bc + n4_), a4, b4, q_p2(y2), q_p3(y2), tab, off + j4_ * bc + n4_, s)
        _e_out(lab, 2 * (ld(P, ao + j5_) * bc + n5_), a5, b5, q_p0(y3), q_p1(y3), tab, off + j5_ * bc + n5_, s)
        _e_out(lab, 2 * (ld(P, ao + j6_) * bc + n6_), a6, b6, q_p2(y3), q_p3(y3), tab, off + j6_ * bc + n6_, s)
        _e_out(lab, 2 * (ld(P, ao + j7_) * bc + n7_), a7, b7, q_p0(y4), q_p1(y4), tab, off + j7_ * bc + n7_, s)
        _e_out(lab, 2 * (ld(P, ao + j8_) * bc + n8_), a8, b8, q_p2(y4), q_p3(y4), tab, off + j8_ * bc + n8_, s)


@_nb.njit(**_opts)
def garble_batches(lab, P, i0, i1, rng, key, out, off):
    """Batches [i0, i1) (the last row, i = P[2], has XOR/INV gates only): each one's XOR/INV gates, then its
    AND gates (``rng``, ``key`` as for :func:`garble_ands`), tables from word ``off`` on.  Returns the word
    offset after the last table written."""
    bc, n0, n1 = rng
    rows = HEADER + 3 * ld(P, 0) + 3 * ld(P, 1)
    for i in range(i0, i1):
        r = rows + 5 * i
        linear(lab, P, ld(P, r + 2), ld(P, r + 3), bc, n0, n1)
        k = ld(P, r + 1) - ld(P, r)
        if k > 0:
            garble_ands(lab, P, i, 0, k, rng, key, out, off)
            off += 4 * k * bc
    return off


@_nb.njit(**_opts)
def eval_batches(lab, P, i0, i1, rng, key, tab, off):
    """:func:`garble_batches` for the evaluator (``key`` = (inst, rk)): tables read from ``tab`` from word
    ``off`` on."""
    bc, n0, n1 = rng
    rows = HEADER + 3 * ld(P, 0) + 3 * ld(P, 1)
    for i in range(i0, i1):
        r = rows + 5 * i
        linear(lab, P, ld(P, r + 2), ld(P, r + 3), bc, n0, n1)
        k = ld(P, r + 1) - ld(P, r)
        if k > 0:
            eval_ands(lab, P, i, 0, k, rng, key, tab, off)
            off += 4 * k * bc
    return off


@_nb.njit(**_opts)
def eval_fit(lab, P, i0, i1, bc, key, tab, off, end):
    """:func:`eval_batches` from batch ``i0`` while the next batch's tables lie in ``tab[off:end]`` (a piece of
    a stream); returns (the first batch not run, the word offset after the tables read)."""
    rows = HEADER + 3 * ld(P, 0) + 3 * ld(P, 1)
    i = i0
    while i < i1:
        r = rows + 5 * i
        k = ld(P, r + 1) - ld(P, r)
        if off + 4 * k * bc > end:
            break
        linear(lab, P, ld(P, r + 2), ld(P, r + 3), bc, 0, bc)
        if k > 0:
            eval_ands(lab, P, i, 0, k, (bc, 0, bc), key, tab, off)
            off += 4 * k * bc
        i += 1
    return i, off


@_nb.njit(**_opts)
def aes_blocks(x, out, rk):
    """out = pi(x) for the blocks of flat uint64 arrays (tests: against ``cryptography``)."""
    m = x.shape[0] // 2
    for q in range(0, m, 4):
        i1 = min(q + 1, m - 1)
        i2 = min(q + 2, m - 1)
        i3 = min(q + 3, m - 1)
        y = q_aes(q_make(x_load(x, 2 * q), x_load(x, 2 * i1), x_load(x, 2 * i2), x_load(x, 2 * i3)), rk)
        x_store(out, 2 * q, q_p0(y))
        x_store(out, 2 * i1, q_p1(y))
        x_store(out, 2 * i2, q_p2(y))
        x_store(out, 2 * i3, q_p3(y))


@_nb.njit(**_opts)
def tmmo_blocks(x, t, out, rk):
    """out = H(x, t) = pi(pi(x) ^ t) ^ pi(x) blockwise (tests: against :func:`pairwise.mpc.aes.tccr_hash`)."""
    m = x.shape[0] // 2
    for q in range(0, m, 4):
        i1 = min(q + 1, m - 1)
        i2 = min(q + 2, m - 1)
        i3 = min(q + 3, m - 1)
        y = _tmmo(
            q_make(x_load(x, 2 * q), x_load(x, 2 * i1), x_load(x, 2 * i2), x_load(x, 2 * i3)),
            q_make(x_load(t, 2 * q), x_load(t, 2 * i1), x_load(t, 2 * i2), x_load(t, 2 * i3)),
            rk,
        )
        x_store(out, 2 * q, q_p0(y))
        x_store(out, 2 * i1, q_p1(y))
        x_store(out, 2 * i2, q_p2(y))
        x_store(out, 2 * i3, q_p3(y))


@_nb.njit(**_opts)
def gather_out(lab, slots, bc, dst, batch, b0, bits):
    """Output labels of a chunk: block (o, b0 + n) of ``dst`` (flat words of (n_out, batch, 2)) = the label of
    slot ``slots[o]`` in instance n; if ``bits`` (flat uint8 of (n_out, batch)) is not empty, its permute bits
    too (the garbler's decoding bits)."""
    with_bits = bits.shape[0] > 0
    for o in range(slots.shape[0]):
        s = ld(slots, o) * bc
        d = o * batch + b0
        for n in range(bc):
            v = x_load(lab, 2 * (s + n))
            x_store(dst, 2 * (d + n), v)
            if with_bits:
                st(bits, d + n, np.uint8(x_lo(v) & _ONE))
