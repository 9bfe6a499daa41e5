"""Secure two-party computation: fixed-key AES, half-gates garbling, channels, OT, the Yao runtime.

Modules, in dependency order:

- :mod:`mpc.aes`: fixed-key AES-128 over numpy block arrays, the TCCR hash of
  Guo-Katz-Wang-Yu 2020 and the MMO PRG (shared with :mod:`fss`).
- :mod:`mpc.halfgates`: pure half-gates ``garble_and`` / ``eval_and``
  (Zahur-Rosulek-Evans 2015).
- :mod:`mpc.garble`: the vectorized SIMD garbler and evaluator.
- :mod:`mpc.errors`, :mod:`mpc.channel`: channels (memory, TCP, null,
  transcript) and the session handshake.
- :mod:`mpc.baseot`, :mod:`mpc.iknp`, :mod:`mpc.ot`: Chou-Orlandi base OT and
  IKNP correlated / chosen-message OT.
- :mod:`mpc.twopc`: semi-honest Yao sessions (:class:`GarblerSession`,
  :class:`EvaluatorSession`).

Security model: semi-honest parties; secrets from ``os.urandom``; the channel
is assumed authentic and private (use TLS or a trusted network).
"""
