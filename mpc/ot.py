"""Oblivious transfer for the pairwise framework: one import point for the OT layer.

What it does
    Re-exports the two layers so callers write ``from pairwise.mpc.ot import ...``:

    * :mod:`pairwise.mpc.baseot` -- 128-bit base OTs, Chou-Orlandi "simplest OT" in
      the prime-order group of edwards25519 (libsodium through PyNaCl, X25519
      through ``cryptography``), with received points validated and the
      session id and OT index inside every key derivation:
      :class:`BaseOTSender`, :class:`BaseOTReceiver`.
    * :mod:`pairwise.mpc.iknp` -- the IKNP extension with the garbler as extension
      sender whose base-OT choice bits are Delta, so every extended OT is a
      correlated OT with offset Delta: :class:`COTSender` (garbler),
      :class:`COTReceiver` (evaluator); random COTs precomputed in batches,
      derandomised Yao label transfer (``send_labels`` / ``recv_labels``:
      one message of n bits), chosen-message OT (``send_chosen`` /
      ``recv_chosen``) with the TCCR hash (TMMO) of :mod:`pairwise.mpc.aes`, and the
      vectorised bit-matrix transpose :func:`transpose_bit_matrix`.
    * :mod:`pairwise.mpc.basecot` -- the same correlated OTs with one base OT each
      (:class:`BaseCOTSender`, :class:`BaseCOTReceiver`), for sessions with few
      evaluator input bits, where 128 base OTs and an IKNP batch cost more.

The interfaces (``typing.Protocol``, runtime-checkable) say what "sender" and
"receiver" mean across both layers: :class:`OTSender` / :class:`OTReceiver`
(chosen-message OT of 128-bit blocks: ``send_chosen`` / ``recv_chosen``, met by
the base OTs and the extension), :class:`RandomCOTSender` /
:class:`RandomCOTReceiver` (random correlated OTs with offset Delta, met by
both COT implementations) and :class:`CorrelatedOTSender` /
:class:`CorrelatedOTReceiver` (the extension's full interface, as the Yao
runtime uses it).

Usage (both parties on one session id and batch size): ``docs/ot.md``.

Security model
    Semi-honest parties; CDH in the prime-order group of edwards25519 and
    SHA-256 (random oracle) for the base OTs; AES as a PRF for the seed expansion and the tweakable circular
    correlation-robust hash TMMO (fixed-key AES as a random permutation,
    [GKWY20, Sec. 7.4]) for chosen OT on the extension ([IKNP03]; the
    correlated variant of ALSZ 2013 / emp-ot); base OTs [CO15].  Details in each module.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .basecot import BaseCOTReceiver, BaseCOTSender
from .baseot import BaseOTReceiver, BaseOTSender
from .iknp import (
    DEFAULT_BATCH,
    KAPPA,
    MAX_BATCH,
    COTReceiver,
    COTSender,
    check_delta,
    chosen_ot_tweaks,
    transpose_bit_matrix,
)

__all__ = [
    "OTSender",
    "OTReceiver",
    "RandomCOTSender",
    "RandomCOTReceiver",
    "CorrelatedOTSender",
    "CorrelatedOTReceiver",
    "BaseOTSender",
    "BaseOTReceiver",
    "BaseCOTSender",
    "BaseCOTReceiver",
    "COTSender",
    "COTReceiver",
    "transpose_bit_matrix",
    "chosen_ot_tweaks",
    "check_delta",
    "KAPPA",
    "DEFAULT_BATCH",
    "MAX_BATCH",
]


@runtime_checkable
class OTSender(Protocol):
    """The sender of chosen-message OT of 128-bit blocks.

    ``send_chosen(m0, m1)``: uint64 block arrays of one shape, (n, 2) (the
    extension also takes (n, L, 2)); the receiver learns ``m0[i]`` or ``m1[i]``
    by its choice bit ``b_i`` and nothing of the other, the sender learns
    nothing of the bits.  Met by :class:`BaseOTSender` and :class:`COTSender`.
    """

    def send_chosen(self, m0: np.ndarray, m1: np.ndarray, /) -> None: ...


@runtime_checkable
class OTReceiver(Protocol):
    """The receiver of chosen-message OT: ``recv_chosen(bits)`` returns ``m_{b_i}``, an (n, 2) block array.

    ``bits``: n booleans or 0/1 integers.  Met by :class:`BaseOTReceiver` and :class:`COTReceiver`.
    """

    def recv_chosen(self, bits: npt.ArrayLike, /) -> np.ndarray: ...


@runtime_checkable
class RandomCOTSender(Protocol):
    """The sender of random correlated OTs with offset ``delta`` (the Yao garbler).

    ``setup()`` runs the base OTs once (idempotent); ``precompute(n)`` makes
    ``n`` random COTs ahead; ``send_random(n)`` returns blocks ``q`` with the
    receiver holding ``t = q xor r*delta``.  Met by :class:`COTSender` (IKNP)
    and :class:`BaseCOTSender` (one base OT each).
    """

    delta: np.ndarray

    def setup(self) -> None: ...

    def precompute(self, n: int, /) -> None: ...

    def send_random(self, n: int, out: np.ndarray | None = None, /) -> np.ndarray: ...


@runtime_checkable
class RandomCOTReceiver(Protocol):
    """The receiver of random correlated OTs: ``recv_random(n)`` returns bits ``r`` and blocks ``t = q xor r*delta``.

    Met by :class:`COTReceiver` and :class:`BaseCOTReceiver`.
    """

    def setup(self) -> None: ...

    def precompute(self, n: int, /) -> None: ...

    def recv_random(self, n: int, out: np.ndarray | None = None, /) -> tuple[np.ndarray, np.ndarray]: ...


@runtime_checkable
class CorrelatedOTSender(OTSender, RandomCOTSender, Protocol):
    """The full correlated-OT sender: random COTs, chosen-message OT and ``send_labels(n)``.

    ``send_labels(n)`` transfers Yao input labels and returns the zero labels.
    Met by :class:`COTSender`.
    """

    def send_labels(self, n: int, /) -> np.ndarray: ...


@runtime_checkable
class CorrelatedOTReceiver(OTReceiver, RandomCOTReceiver, Protocol):
    """The counterpart of :class:`CorrelatedOTSender`: ``recv_labels(x_bits)`` returns the active labels.

    Met by :class:`COTReceiver`.
    """

    def recv_labels(self, x_bits: npt.ArrayLike, /) -> np.ndarray: ...
