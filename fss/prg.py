"""The length-doubling (DPF) and length-tripling (DCF) PRG of the FSS trees, on fixed-key AES.

What it does
    Every node of a DPF/DCF evaluation tree holds a 127-bit seed s.  Expanding
    s gives the material of its two children from the blocks
    B_j = G(s)_j = pi(sigma(s) xor j) xor sigma(s) of the fixed-key PRG
    :func:`pairwise.mpc.aes.mmo_prg`: (s^L, t^L) from B_0, (s^R, t^R) from
    B_1 (the seed with its lowest bit cleared, and that bit), and for a DCF
    (v^L, v^R) from the two 64-bit words of B_2, mod 2^l.  The leaf
    conversion is the high 64-bit word of the seed mod 2^l.
    :func:`expand_words` expands every seed fully (key generation);
    :class:`PathExpander` computes only the child on the evaluation path
    (one AES call per level covering 1 or 2 blocks per key).  Both produce
    the same blocks as :func:`pairwise.mpc.aes.mmo_prg`.

Security model / assumption
    The DPF/DCF security proofs need exactly one thing of G: that it is a
    PRG, i.e. G(s) looks uniform when the seed s is uniform and unknown to
    the key holder.  G meets it with pi (AES-128 under a fixed public key)
    modelled as a random permutation: distinguishing advantage at most
    3q / 2^127 for q queries to pi (127-bit seeds), plus the collision
    probability of the seeds' points.  No correlation robustness is needed
    (seeds are never correlated with a secret offset), so this is not the
    TCCR hash of the garbling engine, and must not be replaced by it or used
    as it.  Root seeds come from ``os.urandom``.

Follows
    G(s) of [BGI16, Fig. 1] (DPF) and [BCG+21, Fig. 1] (DCF).  The output
    table, the leaf conversion and the argument: ``docs/fss.md``, "The PRG of
    the trees".
"""

from __future__ import annotations

import numpy as np

from pairwise.mpc.aes import FixedKeyAES, default_aes, empty_blocks, mmo_prg

__all__ = ["LSB_CLEAR", "expand", "expand_words", "PathExpander"]

#: AND mask that clears the control bit (bit 0) of a block's low word.
LSB_CLEAR = np.uint64(0xFFFF_FFFF_FFFF_FFFE)
_ONE = np.uint64(1)
_TWO = np.uint64(2)


def expand(seeds: np.ndarray, with_values: bool, aes: FixedKeyAES | None = None):
    """Full expansion G(s) of every seed block (shape (..., 2)), via :func:`pairwise.mpc.aes.mmo_prg`.

    Returns ``(sL, tL, sR, tR, vL, vR)``: seeds (..., 2) with bit 0 cleared,
    control bits (...,) uint64 in {0, 1}, and the value words (...,) uint64
    (not reduced mod 2^l; ``None`` when ``with_values`` is false).  This is
    the reference form; the key generator uses :func:`expand_words`, which
    gives the same numbers on word planes.
    """
    blocks = mmo_prg(seeds, 3 if with_values else 2, aes)
    tL = blocks[..., 0, 0] & _ONE
    tR = blocks[..., 1, 0] & _ONE
    blocks[..., 0:2, 0] &= LSB_CLEAR
    sL = blocks[..., 0, :]
    sR = blocks[..., 1, :]
    if with_values:
        return sL, tL, sR, tR, blocks[..., 2, 0], blocks[..., 2, 1]
    return sL, tL, sR, tR, None, None


def expand_words(
    s_lo: np.ndarray, s_hi: np.ndarray, nblocks: int, aes: FixedKeyAES | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """B_j = H(s, j) for j < nblocks on word planes: ``[(lo_0, hi_0), (lo_1, hi_1), ...]``.

    ``s_lo``/``s_hi`` are 1-D uint64 arrays of the seeds' low/high words; the
    result words are contiguous 1-D arrays (one AES call for all blocks).
    Equal to :func:`pairwise.mpc.aes.mmo_prg` block for block.
    """
    aes = aes or default_aes()
    m = s_lo.shape[0]
    sig_hi = s_lo ^ s_hi  # sigma(s) = (s_lo ^ s_hi) || s_hi as (high, low) words
    inp = empty_blocks((m, nblocks))
    for j in range(nblocks):
        np.bitwise_xor(s_hi, np.uint64(j), out=inp[:, j, 0])
        np.copyto(inp[:, j, 1], sig_hi)
    aes.permute(inp, out=inp)
    return [(inp[:, j, 0] ^ s_hi, inp[:, j, 1] ^ sig_hi) for j in range(nblocks)]


class PathExpander:
    """Evaluation-side PRG for M seeds (word planes), with preallocated buffers.

    :meth:`step` computes only B_x = H(s, x) (x the path bit, a scalar or one
    per seed) and, for a DCF, B_2 = H(s, 2): one AES call over 1 or 2 blocks
    per seed.  It returns the child block's low and high words and, for a
    DCF, the value word v^x (low word of B_2 for x = 0, high word for x = 1).
    The returned arrays are buffers reused by the next call.
    """

    def __init__(self, m: int, with_values: bool, aes: FixedKeyAES | None = None) -> None:
        self.aes = aes or default_aes()
        self.nb = 2 if with_values else 1
        self.sig_hi = np.empty(m, dtype=np.uint64)
        self.inp = empty_blocks((m, self.nb))
        self.out = empty_blocks((m, self.nb))
        self.c_lo = np.empty(m, dtype=np.uint64)
        self.c_hi = np.empty(m, dtype=np.uint64)
        self.v = np.empty(m, dtype=np.uint64) if with_values else None

    def step(self, s_lo: np.ndarray, s_hi: np.ndarray, xbit, xbool: np.ndarray | None = None):
        """(c_lo, c_hi, v) for path bit ``xbit`` (int 0/1, or a uint64 array with ``xbool`` its bool form)."""
        sig_hi, inp, out = self.sig_hi, self.inp, self.out
        # sigma(s): low word s_hi, high word s_lo ^ s_hi (see mpc.aes.sigma)
        np.bitwise_xor(s_lo, s_hi, out=sig_hi)
        np.bitwise_xor(s_hi, xbit if xbool is not None else np.uint64(xbit), out=inp[:, 0, 0])
        np.copyto(inp[:, 0, 1], sig_hi)
        if self.nb == 2:
            np.bitwise_xor(s_hi, _TWO, out=inp[:, 1, 0])
            np.copyto(inp[:, 1, 1], sig_hi)
        self.aes.permute(inp, out=out)
        np.bitwise_xor(out[:, 0, 0], s_hi, out=self.c_lo)
        np.bitwise_xor(out[:, 0, 1], sig_hi, out=self.c_hi)
        if self.nb == 1:
            return self.c_lo, self.c_hi, None
        if xbool is None:
            np.bitwise_xor(out[:, 1, xbit], sig_hi if xbit else s_hi, out=self.v)
        else:
            assert self.v is not None  # with_values
            np.copyto(self.v, np.where(xbool, out[:, 1, 1] ^ sig_hi, out[:, 1, 0] ^ s_hi))
        return self.c_lo, self.c_hi, self.v
