"""The IKNP bit-matrix transpose as a compiled loop: 64x64 word tiles, delta swaps on 32 tiles at once.

What it does
    :func:`transpose_words` is the compiled body of
    :func:`pairwise.mpc.iknp.transpose_bit_matrix` for matrices of 64k rows
    (IKNP's 128): the rows, read as little-endian uint64 words, are cut into
    64x64 bit tiles; 32 tiles side by side (the same 64 rows, 32 consecutive
    words) are transposed together by the six delta-swap steps of Hacker's
    Delight (Sec. 7-3), each step one vector operation over the 32 tiles, and
    each transposed word goes to its output block.  :func:`load` compiles it
    (or loads it from numba's on-disk cache) on first use and answers
    whether it can run; the numpy 8x8-tile transpose of
    :mod:`pairwise.mpc.iknp` stays the fallback (numba missing or failing,
    ``PAIRWISE_JIT=0``, inside :func:`pairwise.mpc.garble.jit.disabled`) and
    the oracle (``tests/mpc/test_ot.py`` compares them).  Measured: 65,536
    COTs in 0.3 ms of CPU against 1.8-2.3 ms (benchmarks/RESULTS.md, issue 23).

Security model
    A permutation of bits: no branch and no memory index depends on the
    matrix (indices come from its public shape); nothing is logged.  The
    kernel is ``nogil``, so the two IKNP parties of one process (simulate
    mode) transpose on both cores.

Follows
    Warren, "Hacker's Delight", 2nd ed., Sec. 7-3 (transposing a bit matrix).
"""

from __future__ import annotations

from typing import Any

import numba as _nb
import numpy as np

__all__ = ["LANES", "transpose_words"]

_opts: dict[str, Any] = dict(cache=True, nogil=True, boundscheck=False, fastmath=False, error_model="numpy")

#: 64x64 tiles transposed together (32: measured 2x faster than 8 or 16 on AVX-512).
LANES = 32


@_nb.njit(inline="always", **_opts)
def _stage(a, j, m):
    """One delta-swap step: in every tile, bits j..2j-1 of row k trade places with bits 0..j-1 of row k + j."""
    sh = _nb.uint64(j)
    for k0 in range(0, 64, 2 * j):
        for kk in range(j):
            k = k0 + kk
            for lane in range(LANES):
                t = ((a[k, lane] >> sh) ^ a[k + j, lane]) & m
                a[k, lane] ^= t << sh
                a[k + j, lane] ^= t


@_nb.njit(**_opts)
def transpose_words(w, rows, cw, stride, nbits, out):
    """``out[i, g]`` bit ``j`` = bit ``i`` of row ``64g + j``, i < ``nbits``.

    Row ``r`` is the ``cw`` words ``w[r * stride : r * stride + cw]`` (``w`` flat uint64, so every caller's
    matrix, strided or not, is one compiled type); ``rows`` = 64 G; ``out`` is (nbits, G) uint64 with
    ``nbits <= 64 cw``; words beyond ``nbits`` are not written.
    """
    a = np.zeros((64, LANES), np.uint64)
    for g in range(rows // 64):
        for c0 in range(0, cw, LANES):
            nl = min(LANES, cw - c0)
            for j in range(64):
                for lane in range(nl):
                    a[j, lane] = w[(64 * g + j) * stride + c0 + lane]
            _stage(a, 32, _nb.uint64(0x00000000FFFFFFFF))
            _stage(a, 16, _nb.uint64(0x0000FFFF0000FFFF))
            _stage(a, 8, _nb.uint64(0x00FF00FF00FF00FF))
            _stage(a, 4, _nb.uint64(0x0F0F0F0F0F0F0F0F))
            _stage(a, 2, _nb.uint64(0x3333333333333333))
            _stage(a, 1, _nb.uint64(0x5555555555555555))
            for lane in range(nl):
                base = 64 * (c0 + lane)
                for i in range(min(64, nbits - base)):
                    out[base + i, g] = a[i, lane]
    return out
