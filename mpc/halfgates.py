"""Half-gates garbling of single AND gates: the pure reference functions.

What it does
    :func:`garble_and` and :func:`eval_and` garble and evaluate AND gates with
    the half-gates scheme of [ZRE15, Fig. 2], with free-XOR
    (Kolesnikov-Schneider 2008) and point-and-permute (the permute bit of a
    label is its lowest bit, and Delta has lowest bit 1).  They take plain
    block arrays (``uint64`` pairs, last axis 2, as in :mod:`pairwise.mpc.aes`),
    broadcast over any leading shape, and have no state, no channel and no
    randomness: a test can run all four input combinations of one gate.  The
    vectorized engine :mod:`pairwise.mpc.garble` computes the same values
    level by level for whole circuits and batches; its tests compare it with
    these functions.  The equations of one gate (garbler half, evaluator
    half, what the evaluator computes): ``docs/garbling.md``, "One AND gate".

Hash and tweaks
    H(x, i) = pi(pi(x) ^ i) ^ pi(x) is TMMO [GKWY20, Sec. 7.4], with pi the
    fixed-key AES of :mod:`pairwise.mpc.aes` (:func:`pairwise.mpc.aes.tccr_hash`).
    The tweak of half h (0 = garbler half, 1 = evaluator half) of the AND
    gate with dense index g in instance n is the block ``(lo, hi) = (2*g + h, n)``
    (:func:`tweak_blocks`).  Distinct (g, h, n) give distinct tweaks as long
    as g < 2**63 and n < 2**63: the top bit of the high word is reserved
    (zero) for garbling, so other users of the same Delta (e.g. hashing the
    correlated OTs) stay disjoint by setting it.

Security model
    Semi-honest.  Security of the scheme needs each tweak to be used with
    one label pair (x, x ^ Delta) only, and H to be TCCR, which TMMO is when
    fixed-key AES is a random permutation ([GKWY20, Sec. 7]; [ZRE15, Thm. 1]
    for half-gates given such a hash).
"""

from __future__ import annotations

import numpy as np

from .aes import FixedKeyAES, tccr_hash

__all__ = ["TWEAK_INSTANCE_LIMIT", "tweak_blocks", "lsb", "garble_and", "eval_and"]

#: Instance ids and AND indices must stay below this (the high tweak bit is reserved).
TWEAK_INSTANCE_LIMIT = 1 << 63

_ONE = np.uint64(1)


def tweak_blocks(and_index, half: int, instance=0) -> np.ndarray:
    """The tweak block(s) (2*and_index + half, instance), broadcast together.

    ``and_index`` and ``instance`` are ints or integer arrays; the result has
    the broadcast shape plus a last axis of 2 (lo, hi).
    """
    if half not in (0, 1):
        raise ValueError(f"half must be 0 (garbler half) or 1 (evaluator half), got {half!r}")
    g = np.asarray(and_index)
    n = np.asarray(instance)
    if (g < 0).any() or (g >= TWEAK_INSTANCE_LIMIT).any():
        raise ValueError("AND index out of range for a tweak: must be in [0, 2**63)")
    if (n < 0).any() or (n >= TWEAK_INSTANCE_LIMIT).any():
        raise ValueError("instance id out of range for a tweak: must be in [0, 2**63)")
    g = g.astype(np.uint64)
    n = n.astype(np.uint64)
    shape = np.broadcast_shapes(g.shape, n.shape)
    out = np.empty(shape + (2,), dtype=np.uint64)
    out[..., 0] = g * np.uint64(2) + np.uint64(half)
    out[..., 1] = n
    return out


def lsb(blocks: np.ndarray) -> np.ndarray:
    """Point-and-permute bit of each block (lowest bit of the low word), as bool."""
    return (np.asarray(blocks, dtype=np.uint64)[..., 0] & _ONE).astype(bool)


def _select(bit: np.ndarray, block: np.ndarray) -> np.ndarray:
    """bit * block for bool ``bit`` (shape ...) and blocks (shape ..., 2)."""
    return np.where(bit[..., None], block, np.uint64(0))


def garble_and(a0, b0, delta, and_index, instance=0, aes: FixedKeyAES | None = None):
    """Garble AND gate(s): returns ``(table, c0)``.

    ``a0``, ``b0``: zero labels of the two inputs (blocks, shape (..., 2));
    ``delta``: the free-XOR offset (lowest bit 1), broadcastable to them;
    ``and_index``/``instance``: ints or arrays naming each gate for its tweaks.
    ``table`` has shape (..., 2, 2): ``table[..., 0, :]`` is T_G and
    ``table[..., 1, :]`` is T_E; ``c0`` is the output zero label.
    """
    a0 = np.asarray(a0, dtype=np.uint64)
    b0 = np.asarray(b0, dtype=np.uint64)
    delta = np.asarray(delta, dtype=np.uint64)
    if not (lsb(delta)).all():
        raise ValueError("Delta must have lowest bit 1 (point-and-permute)")
    tg_tweak = tweak_blocks(and_index, 0, instance)
    te_tweak = tweak_blocks(and_index, 1, instance)
    a1 = a0 ^ delta
    b1 = b0 ^ delta
    pa = lsb(a0)
    pb = lsb(b0)
    ha0 = tccr_hash(a0, tg_tweak, aes)
    ha1 = tccr_hash(a1, tg_tweak, aes)
    hb0 = tccr_hash(b0, te_tweak, aes)
    hb1 = tccr_hash(b1, te_tweak, aes)
    tg = ha0 ^ ha1 ^ _select(pb, np.broadcast_to(delta, ha0.shape))
    wg0 = ha0 ^ _select(pa, tg)
    te = hb0 ^ hb1 ^ a0
    we0 = hb0 ^ _select(pb, te ^ a0)
    c0 = wg0 ^ we0
    return np.stack([tg, te], axis=-2), c0


def eval_and(a, b, table, and_index, instance=0, aes: FixedKeyAES | None = None) -> np.ndarray:
    """Evaluate AND gate(s) on active labels ``a``, ``b`` with ``table`` (..., 2, 2)."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    table = np.asarray(table, dtype=np.uint64)
    if table.shape[-2:] != (2, 2):
        raise ValueError(f"a half-gates table has shape (..., 2, 2), got {table.shape}")
    tg, te = table[..., 0, :], table[..., 1, :]
    wg = tccr_hash(a, tweak_blocks(and_index, 0, instance), aes) ^ _select(lsb(a), tg)
    we = tccr_hash(b, tweak_blocks(and_index, 1, instance), aes) ^ _select(lsb(b), te ^ a)
    return wg ^ we
