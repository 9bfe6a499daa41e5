"""The per-level half-gates kernels of the numpy path: the AND gates of one level, garbled or evaluated.

What it does
    Three forms of one algebra (Zahur-Rosulek-Evans 2015, Fig. 2), each a
    loop over the steps of a program of :class:`~pairwise.mpc.garble.program._Work`:
    :func:`_garble_ands` / :func:`_eval_ands` (gathered steps of more than
    one instance), :func:`_garble_ands1` / :func:`_eval_ands1` (one instance,
    fewer calls on same-shape contiguous operands) and :func:`_garble_direct`
    / :func:`_eval_direct` (one gate at a time on the label rows in place,
    for narrow levels of large chunks).  All write the same tables and
    labels.  The ufunc aliases (``_xor``, ``_and``, ...) are also what the
    XOR/INV loops of the garbler and the evaluator call
    (``benchmarks/garbling.py --profile`` wraps them).

Security model
    Semi-honest half-gates with free-XOR.  A permute bit selects by an
    all-ones mask or a multiplication by 0/1, never by a branch or a
    secret-dependent index; indices come from the public schedule.  The
    hash is TMMO, H(x, i) = pi(pi(x) ^ i) ^ pi(x), through
    :class:`~pairwise.mpc.aes.TccrHasher` (two AES-ECB calls per step),
    tweakable circular correlation robust when the fixed-key AES pi is a
    random permutation (Guo-Katz-Wang-Yu 2020, Sec. 7.4), with tweaks
    (2g + h, instance id).

Follows
    Zahur, Rosulek, Evans, EUROCRYPT 2015, Fig. 2; Guo, Katz, Wang, Yu,
    S&P 2020; docs/garbling.md.
"""

from __future__ import annotations

import numpy as np

from ..aes import FixedKeyAES, TccrHasher
from .program import _Work

_ONE0 = np.array(1, dtype=np.uint64)  # as an array operand: faster ufunc dispatch than a scalar

_xor = np.bitwise_xor
_and = np.bitwise_and
_neg = np.negative
_mul = np.multiply
_copy = np.copyto


def _garble_ands(src: np.ndarray, steps: tuple, w: _Work, tab: np.ndarray, aes: FixedKeyAES) -> None:
    """Garble every AND of a level into ``tab`` (2, 2, k, b); write output zero labels.

    H(X, i) = pi(pi(X) ^ i) ^ pi(X) (TMMO, :func:`pairwise.mpc.aes.tccr_hash`) for
    X in {A0, A1, B0, B1} of every gate and instance: one :class:`TccrHasher`
    call over 4 k b blocks.
    """
    r, hasher = w.r, w.hasher
    # fmt: off
    for (rows, xt, xlo, xhi, xa, tw, twlo, tlo, c, clo, chi, m, ma, mb, t, out, g0, g1, whole,
         nblk, u, v, u0, u1, u0lo, u0hi, rt, v0lo, v1lo, v0hi, v1hi, valo, vblo, vahi, vbhi,
         d, dlo, dhi, da, db) in steps:  # the step tuple, in its documented layout
    # fmt: on
        src.take(rows, axis=0, out=xt, mode="clip")
        # hash inputs u[z, s, g, n] = X0 for z = 0, X0 ^ R for z = 1 (s in {A, B}), interleaved (one
        # strided copy per word: numpy walks a transposed destination in a cache-hostile order)
        _copy(u0lo, xlo)
        _copy(u0hi, xhi)
        _xor(u0, rt, u1)
        _copy(twlo, tlo)  # tweak (2*g + s, instance); the instance ids are in place (start_chunk)
        hasher(nblk, tw, u, v, aes)  # v = H(u, tweak), the tweak shared by X0 and X1
        _xor(v0lo, v1lo, dlo)  # d[s] = H(X0) ^ H(X1), planar
        _xor(v0hi, v1hi, dhi)
        _and(xlo, _ONE0, m)
        _neg(m, m)
        if whole:
            tg, te = tab[0], tab[1]
        else:
            tg, te = tab[0, :, g0:g1], tab[1, :, g0:g1]
        _and(mb, r, t)  # pb * R
        _xor(da, t, tg)  # T_G = H(A0) ^ H(A1) ^ pb*R
        _xor(db, xa, te)  # T_E = H(B0) ^ H(B1) ^ A0
        # C0 = H(A0) ^ pa*T_G ^ H(B0) ^ pb*(H(B0) ^ H(B1))
        _xor(valo, vblo, clo)
        _xor(vahi, vbhi, chi)
        _and(ma, tg, t)
        _xor(c, t, c)
        _and(mb, db, t)
        _xor(c, t, c)
        src[out] = c


def _eval_ands(src: np.ndarray, steps: tuple, w: _Work, tab: np.ndarray, aes: FixedKeyAES) -> None:
    """Evaluate every AND of a level with tables ``tab`` (2, 2, k, b); write active labels."""
    hasher = w.hasher
    # fmt: off
    for (rows, xt, xlo, xhi, xa, tw, twlo, tlo, c, clo, chi, m, ma, mb, t, out, g0, g1, whole,
         nblk, u, v, ulo, uhi, valo, vblo, vahi, vbhi) in steps:  # the step tuple, in its documented layout
    # fmt: on
        src.take(rows, axis=0, out=xt, mode="clip")
        _copy(ulo, xlo)
        _copy(uhi, xhi)
        _copy(twlo, tlo)
        hasher(nblk, tw, u, v, aes)
        # C = H(A) ^ H(B) ^ sa*T_G ^ sb*(T_E ^ A)
        _xor(valo, vblo, clo)
        _xor(vahi, vbhi, chi)
        _and(xlo, _ONE0, m)
        _neg(m, m)
        if whole:
            tg, te = tab[0], tab[1]
        else:
            tg, te = tab[0, :, g0:g1], tab[1, :, g0:g1]
        _and(ma, tg, t)
        _xor(c, t, c)
        _xor(te, xa, t)
        _and(t, mb, t)
        _xor(c, t, c)
        src[out] = c


def _garble_ands1(src: np.ndarray, steps: tuple, tab: np.ndarray, hasher: TccrHasher, aes: FixedKeyAES) -> None:
    """:func:`_garble_ands` for one instance (tables ``tab`` (2, 2, k)), in fewer numpy calls.

    At one instance a level costs its number of numpy calls, and calls on
    same-shape contiguous operands (numpy's fast path) cost about half as
    much as strided or broadcast ones.  So one gather puts the zero labels
    straight into the hash buffer, interleaved, and a second one fills
    w = [A0 planar], [lo words of A, A, B, B]; the tweak blocks are
    precomputed per step; the hash differences land planar with one call;
    the permute bits multiply (0 or 1) instead of masking; Delta is tiled to
    the step's size.  Same algebra, same tables.
    """
    # fmt: off
    for (rows_u, rows_w, w, xa, tw, bits, ba, bb, c, t, out, g0, g1, whole,
         nblk, u, u0, u1, v, v0t, v1t, vat, vbt, d, da, db, rt, rp) in steps:  # the step tuple, in its documented layout
    # fmt: on
        src.take(rows_u, axis=0, out=u0, mode="clip")
        src.take(rows_w, axis=0, out=w, mode="clip")
        _xor(u0, rt, u1)  # X1 = X0 ^ R
        hasher(nblk, tw, u, v, aes)
        _xor(v0t, v1t, d)  # H(X0) ^ H(X1), planar
        _and(bits, _ONE0, bits)
        if whole:
            tg, te = tab[0], tab[1]
        else:
            tg, te = tab[0, :, g0:g1], tab[1, :, g0:g1]
        _mul(bb, rp, t)
        _xor(da, t, tg)  # T_G = H(A0) ^ H(A1) ^ pb*R
        _xor(db, xa, te)  # T_E = H(B0) ^ H(B1) ^ A0
        _xor(vat, vbt, c)  # H(A0) ^ H(B0)
        _mul(ba, tg, t)
        _xor(c, t, c)  # ^ pa*T_G
        _mul(bb, db, t)
        _xor(c, t, c)  # ^ pb*(H(B0) ^ H(B1))
        src[out] = c


def _eval_ands1(src: np.ndarray, steps: tuple, tab: np.ndarray, hasher: TccrHasher, aes: FixedKeyAES) -> None:
    """:func:`_eval_ands` for one instance (tables ``tab`` (2, 2, k)); see :func:`_garble_ands1`."""
    for rows_u, rows_w, w, xa, tw, bits, ba, bb, c, t, out, g0, g1, whole, nblk, u, v, vat, vbt in steps:
        src.take(rows_u, axis=0, out=u, mode="clip")
        src.take(rows_w, axis=0, out=w, mode="clip")
        hasher(nblk, tw, u, v, aes)
        _xor(vat, vbt, c)  # H(A) ^ H(B), planar
        _and(bits, _ONE0, bits)
        if whole:
            tg, te = tab[0], tab[1]
        else:
            tg, te = tab[0, :, g0:g1], tab[1, :, g0:g1]
        _mul(ba, tg, t)
        _xor(c, t, c)  # ^ sa*T_G
        _xor(te, xa, t)
        _mul(t, bb, t)
        _xor(c, t, c)  # ^ sb*(T_E ^ A)
        src[out] = c


def _garble_direct(steps: tuple, tab: np.ndarray, hasher: TccrHasher, aes: FixedKeyAES) -> None:
    """:func:`_garble_ands` one gate at a time on the label rows in place (narrow levels, large chunks).

    Same algebra and tables: the gate's zero labels are copied word by word
    into the interleaved hash buffer (no gather), the permute-bit masks are
    read off the low-word rows, and the last XOR writes the output zero label
    into its row (no scatter).
    """
    # fmt: off
    for (j, a, b, o, m, ma, mb, tw, twlo, tlo, c, clo, chi, t,
         nblk, u, v, a0, a1, b0, b1, ua0, ua1, ub0, ub1, u0, u1, rt, ulo, r,
         v0lo, v1lo, v0hi, v1hi, d, dlo, dhi, da, db, valo, vblo, vahi, vbhi) in steps:  # the step tuple, in its documented layout
    # fmt: on
        _copy(ua0, a0)
        _copy(ua1, a1)
        _copy(ub0, b0)
        _copy(ub1, b1)
        _xor(u0, rt, u1)  # X1 = X0 ^ R
        _and(a0, _ONE0, ma)  # (from the contiguous low-word rows: ~4x faster than from u)
        _and(b0, _ONE0, mb)
        _neg(m, m)
        _copy(twlo, tlo)
        hasher(nblk, tw, u, v, aes)
        _xor(v0lo, v1lo, dlo)  # d[s] = H(X0) ^ H(X1), planar
        _xor(v0hi, v1hi, dhi)
        tg, te = tab[0, :, j], tab[1, :, j]
        _and(mb, r, t)  # pb * R
        _xor(da, t, tg)  # T_G = H(A0) ^ H(A1) ^ pb*R
        _xor(db, a, te)  # T_E = H(B0) ^ H(B1) ^ A0
        _xor(valo, vblo, clo)  # C0 = H(A0) ^ H(B0) ^ pa*T_G ^ pb*(H(B0) ^ H(B1))
        _xor(vahi, vbhi, chi)
        _and(ma, tg, t)
        _xor(c, t, c)
        _and(mb, db, t)
        _xor(c, t, o)


def _eval_direct(steps: tuple, tab: np.ndarray, hasher: TccrHasher, aes: FixedKeyAES) -> None:
    """:func:`_eval_ands` one gate at a time on the label rows in place; see :func:`_garble_direct`."""
    # fmt: off
    for (j, a, b, o, m, ma, mb, tw, twlo, tlo, c, clo, chi, t,
         nblk, u, v, a0, a1, b0, b1, ua0, ua1, ub0, ub1, ulo, valo, vblo, vahi, vbhi) in steps:  # the step tuple, in its documented layout
    # fmt: on
        _copy(ua0, a0)
        _copy(ua1, a1)
        _copy(ub0, b0)
        _copy(ub1, b1)
        _and(a0, _ONE0, ma)
        _and(b0, _ONE0, mb)
        _neg(m, m)
        _copy(twlo, tlo)
        hasher(nblk, tw, u, v, aes)
        # C = H(A) ^ H(B) ^ sa*T_G ^ sb*(T_E ^ A)
        _xor(valo, vblo, clo)
        _xor(vahi, vbhi, chi)
        tg, te = tab[0, :, j], tab[1, :, j]
        _and(ma, tg, t)
        _xor(c, t, c)
        _xor(te, a, t)
        _and(t, mb, t)
        _xor(c, t, o)
