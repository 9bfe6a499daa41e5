"""The numba kernels of :mod:`pairwise.mpc.garble.jit` (imported by it on first use; see its docstring).

What it does
    Three compiled loops for one-instance half-gates: :func:`garble_step`,
    :func:`eval_step` and :func:`tweak`, over a program array made by
    :func:`pairwise.mpc.garble.jit.program`.  Kept in their own module so that
    importing :mod:`pairwise.mpc.garble.jit` does not import numba, and so numba's
    on-disk cache (``cache=True``) can key them by module and line.

Security model
    As :mod:`pairwise.mpc.garble.jit`: branch-free on labels and permute bits
    (selection by masks ``0 - bit``), indices only from the public circuit
    schedule, nothing logged.  ``boundscheck`` is off: every index comes
    from the plan of a validated circuit and every table array has the
    exact size its batch needs (checked by the caller's reader).

Paper
    Zahur-Rosulek-Evans 2015, Fig. 2 (half-gates); Guo-Katz-Wang-Yu 2020,
    Sec. 7 (TMMO): H(x, i) = pi(pi(x) xor i) xor pi(x).
"""

from __future__ import annotations

from typing import Any

import numba as _nb
import numpy as np

from .jit import HEADER  # the program header: n_and, n_lin, number of AND batches

_opts: dict[str, Any] = dict(cache=True, nogil=True, boundscheck=False, fastmath=False, error_model="numpy")


@_nb.njit(inline="always", **_opts)
def _batch(P, i):
    """(first AND of batch i, its AND count, offset of the AND input/output slot arrays, of the batch rows).

    Program layout (:func:`pairwise.mpc.garble.jit.program`): header, and_a, and_b,
    and_o (n_and each), lin_a, lin_b, lin_o (n_lin each), then one row
    (a0, a1, l0, l1, base) per batch.
    """
    n_and = P[0]
    bat0 = HEADER + 3 * n_and + 3 * P[1]
    p = bat0 + 5 * i
    return P[p], P[p + 1] - P[p], n_and, bat0


@_nb.njit(**_opts)
def _linear(lab, P, i):
    n_and = P[0]
    n_lin = P[1]
    la = HEADER + 3 * n_and
    lb = la + n_lin
    lo = lb + n_lin
    bat = lo + n_lin + 5 * i
    for g in range(P[bat + 2], P[bat + 3]):
        a = P[la + g]
        b = P[lb + g]
        o = P[lo + g]
        lab[o, 0] = lab[a, 0] ^ lab[b, 0]
        lab[o, 1] = lab[a, 1] ^ lab[b, 1]


@_nb.njit(**_opts)
def garble_step(lab, P, i, x, y, out, off, d0, d1):
    """Garbler, batch ``i``: tables of batch i-1 into ``out[off:off + 4k]``, linear gates, gathers of batch i.

    ``x`` / ``y`` (4k, 2): after the AES calls of batch i-1, pi(x) and
    pi(pi(x) ^ tweak) for the blocks [A0 | B0 | A1 | B1]; the tables are
    planar, [T_G lo | T_G hi | T_E lo | T_E hi], k words each; (d0, d1) =
    Delta.  Returns the number of AND gates of batch i (0 for the last
    call, i = batches).
    """
    if i > 0:
        a0, k, n_and, _ = _batch(P, i - 1)
        aa, ab, ao = HEADER, HEADER + n_and, HEADER + 2 * n_and
        for j in range(k):
            a = P[aa + a0 + j]
            b = P[ab + a0 + j]
            ha0l = y[j, 0] ^ x[j, 0]
            ha0h = y[j, 1] ^ x[j, 1]
            hb0l = y[k + j, 0] ^ x[k + j, 0]
            hb0h = y[k + j, 1] ^ x[k + j, 1]
            ha1l = y[2 * k + j, 0] ^ x[2 * k + j, 0]
            ha1h = y[2 * k + j, 1] ^ x[2 * k + j, 1]
            hb1l = y[3 * k + j, 0] ^ x[3 * k + j, 0]
            hb1h = y[3 * k + j, 1] ^ x[3 * k + j, 1]
            al = lab[a, 0]
            ah = lab[a, 1]
            ma = np.uint64(0) - (al & np.uint64(1))
            mb = np.uint64(0) - (lab[b, 0] & np.uint64(1))
            dbl = hb0l ^ hb1l
            dbh = hb0h ^ hb1h
            tgl = ha0l ^ ha1l ^ (mb & d0)
            tgh = ha0h ^ ha1h ^ (mb & d1)
            out[off + j] = tgl
            out[off + k + j] = tgh
            out[off + 2 * k + j] = dbl ^ al
            out[off + 3 * k + j] = dbh ^ ah
            o = P[ao + a0 + j]
            lab[o, 0] = ha0l ^ hb0l ^ (ma & tgl) ^ (mb & dbl)
            lab[o, 1] = ha0h ^ hb0h ^ (ma & tgh) ^ (mb & dbh)
    _linear(lab, P, i)
    if i == P[2]:  # the last step: no batch to gather
        return 0
    a0, k, n_and, _ = _batch(P, i)
    aa, ab = HEADER, HEADER + n_and
    for j in range(k):
        a = P[aa + a0 + j]
        b = P[ab + a0 + j]
        al = lab[a, 0]
        ah = lab[a, 1]
        bl = lab[b, 0]
        bh = lab[b, 1]
        x[j, 0] = al
        x[j, 1] = ah
        x[k + j, 0] = bl
        x[k + j, 1] = bh
        x[2 * k + j, 0] = al ^ d0
        x[2 * k + j, 1] = ah ^ d1
        x[3 * k + j, 0] = bl ^ d0
        x[3 * k + j, 1] = bh ^ d1
    return k


@_nb.njit(**_opts)
def eval_step(lab, P, i, x, y, tab, off):
    """Evaluator, batch ``i``: output labels of batch i-1 from ``tab[off:off + 4k]``, linear gates, gathers [A | B]."""
    if i > 0:
        a0, k, n_and, _ = _batch(P, i - 1)
        aa, ab, ao = HEADER, HEADER + n_and, HEADER + 2 * n_and
        for j in range(k):
            a = P[aa + a0 + j]
            b = P[ab + a0 + j]
            al = lab[a, 0]
            ah = lab[a, 1]
            ma = np.uint64(0) - (al & np.uint64(1))
            mb = np.uint64(0) - (lab[b, 0] & np.uint64(1))
            o = P[ao + a0 + j]
            lab[o, 0] = (
                y[j, 0] ^ x[j, 0] ^ y[k + j, 0] ^ x[k + j, 0] ^ (ma & tab[off + j]) ^ (mb & (tab[off + 2 * k + j] ^ al))
            )
            lab[o, 1] = (
                y[j, 1]
                ^ x[j, 1]
                ^ y[k + j, 1]
                ^ x[k + j, 1]
                ^ (ma & tab[off + k + j])
                ^ (mb & (tab[off + 3 * k + j] ^ ah))
            )
    _linear(lab, P, i)
    if i == P[2]:  # the last step: no batch to gather
        return 0
    a0, k, n_and, _ = _batch(P, i)
    aa, ab = HEADER, HEADER + n_and
    for j in range(k):
        a = P[aa + a0 + j]
        b = P[ab + a0 + j]
        x[j, 0] = lab[a, 0]
        x[j, 1] = lab[a, 1]
        x[k + j, 0] = lab[b, 0]
        x[k + j, 1] = lab[b, 1]
    return k


@_nb.njit(**_opts)
def tweak(P, i, x, y, parts, instance):
    """y = x xor tweak for batch ``i``'s ``parts`` x k blocks: tweak (2 g + (part & 1), instance)."""
    _, k, _, bat0 = _batch(P, i)
    base = np.uint64(2 * P[bat0 + 5 * i + 4])
    for q in range(parts):
        off = q * k
        t = base + np.uint64(q & 1)
        for j in range(k):
            y[off + j, 0] = x[off + j, 0] ^ (t + np.uint64(2 * j))
            y[off + j, 1] = x[off + j, 1] ^ instance
    return k
