"""Correlated OTs straight from base OTs: one Chou-Orlandi OT per COT, for sessions that need few.

What it does
    :class:`BaseCOTSender` (the Yao garbler, holding Delta) and
    :class:`BaseCOTReceiver` (the evaluator) hand out the same correlated OTs
    as the IKNP classes of :mod:`pairwise.mpc.iknp`, with the same interface
    (``setup``, ``send_random`` / ``recv_random``, ``precompute``, the pool and
    its batch schedule), but every COT is one base OT of
    :mod:`pairwise.mpc.baseot` instead of a row of an extension matrix:

        batch of m:  S: (k0_j, k1_j) <- m random base OTs, receiver's choice r_j random
                     S -> R: u_j = k0_j xor k1_j xor Delta      (16 bytes per COT)
                     S: q_j = k0_j        R: t_j = k_{r_j} xor r_j u_j = q_j xor r_j Delta

    A fresh session with a few dozen evaluator input bits (a noisy kernel
    between two users) then runs that many base OTs instead of 128 base OTs
    plus an IKNP batch of at least 1024 COTs: half the CPU and a tenth of the
    bytes at 31-79 bits (benchmarks/RESULTS.md, "A fresh session's OTs").
    The garbler is the base-OT *sender* here (in IKNP it is the receiver).

Security model
    Semi-honest.  Receiver privacy: r_j is the choice bit of a base OT (hidden
    perfectly, :mod:`pairwise.mpc.baseot`).  Delta stays hidden: u_j is
    one-time padded by k_{1-r_j}, which the receiver cannot compute (CDH).
    Every base OT's keys serve one COT; the session id and the global OT index
    enter each key derivation.  Choice bits come from ``os.urandom``.
"""

from __future__ import annotations

import os

import numpy as np

from .baseot import BaseOTReceiver, BaseOTSender
from .channel import Channel
from .iknp import MAX_BATCH, _IKNPParty, check_delta

__all__ = ["BaseCOTSender", "BaseCOTReceiver"]


class _BaseCOTParty(_IKNPParty):
    """Pool and batch schedule of :class:`pairwise.mpc.iknp` with batches of any size (one base OT per COT)."""

    def __init__(self, channel: Channel, session_id: bytes | str, batch_size: int) -> None:
        super().__init__(channel, session_id, 128)
        self.batch_size = _check_batch(batch_size)

    def _base_session(self) -> bytes:
        return self.session_id + b"/base-cot"

    def setup(self) -> None:
        """Nothing to run ahead: every batch runs its own base OTs (idempotent)."""
        self._ready = True


def _check_batch(m) -> int:
    m = int(m)
    if not 1 <= m <= MAX_BATCH:
        raise ValueError(f"batch_size must be in 1..{MAX_BATCH}, got {m}")
    return m


class BaseCOTSender(_BaseCOTParty):
    """The correlated-OT sender (the garbler) over base OTs; ``delta`` as for :class:`~pairwise.mpc.iknp.COTSender`."""

    _role = "sender"
    _layout = ((np.dtype(np.uint64), (2,)),)

    def __init__(self, channel: Channel, delta, session_id: bytes | str, *, batch_size: int = 128) -> None:
        super().__init__(channel, session_id, batch_size)
        self.delta = check_delta(delta)
        self._base = BaseOTSender(channel, self._base_session())

    def _extend(self, out: tuple[np.ndarray, ...]) -> None:
        (q_out,) = out
        k0, k1 = self._base.send_random(q_out.shape[0])
        u = k0 ^ k1
        u ^= self.delta
        self.channel.send_blocks(u)
        self.channel.flush()
        q_out[...] = k0

    def _alloc(self, n: int) -> tuple[np.ndarray]:
        return (np.empty((n, 2), dtype=np.uint64),)

    def send_random(self, n: int, out: np.ndarray | None = None) -> np.ndarray:
        """The next ``n`` random COTs: blocks ``q`` (n, 2); the receiver holds ``t = q xor r*Delta``."""
        return self._take(int(n), None if out is None else (out,))[0]


class BaseCOTReceiver(_BaseCOTParty):
    """The correlated-OT receiver (the evaluator) over base OTs."""

    _role = "receiver"
    _layout = ((np.dtype(np.bool_), ()), (np.dtype(np.uint64), (2,)))

    def __init__(self, channel: Channel, session_id: bytes | str, *, batch_size: int = 128) -> None:
        super().__init__(channel, session_id, batch_size)
        self._base = BaseOTReceiver(channel, self._base_session())

    def _extend(self, out: tuple[np.ndarray, ...]) -> None:
        r_out, t_out = out
        m = t_out.shape[0]
        r = np.unpackbits(np.frombuffer(os.urandom(-(-m // 8)), np.uint8), count=m, bitorder="little").view(np.bool_)
        k = self._base.recv_random(r)
        u = self.channel.recv_blocks(m)
        np.bitwise_xor(k, r.astype(np.uint64)[:, None] * u, out=t_out)  # no branch on r
        r_out[...] = r

    def _alloc(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.empty(n, dtype=np.bool_), np.empty((n, 2), dtype=np.uint64)

    def recv_random(self, n: int, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The next ``n`` random COTs: bits ``r`` and blocks ``t`` = q xor r*Delta (``out``: where t goes)."""
        r, t = self._take(int(n), None if out is None else (np.empty(int(n), np.bool_), out))
        self.channel.flush()
        return r, t
