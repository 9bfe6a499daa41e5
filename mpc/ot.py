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

How the Yao runtime uses it (both parties, same session id and batch size)::

    # garbler                                   # evaluator
    cot = COTSender(ch, delta, sid)             cot = COTReceiver(ch, sid)
    cot.setup()                                 cot.setup()
    cot.precompute(n_eval_inputs)               cot.precompute(n_eval_inputs)
    zero = cot.send_labels(n_eval_inputs)       active = cot.recv_labels(x_bits)
    # zero[i] xor x_i*delta == active[i]

Security model
    Semi-honest parties; CDH in the prime-order group of edwards25519 and
    SHA-256 (random oracle) for the base OTs; AES as a PRF for the seed expansion and the tweakable circular
    correlation-robust hash TMMO (fixed-key AES as a random permutation,
    Guo-Katz-Wang-Yu 2020) for chosen OT on the extension (IKNP 2003; the
    correlated variant of ALSZ 2013 / emp-ot).  Details in each module.
"""

from __future__ import annotations

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
