"""Secure two-party computation: fixed-key AES, half-gates garbling, channels, OT, the Yao runtime.

Modules, in dependency order:

- :mod:`pairwise.mpc.aes`: fixed-key AES-128 over numpy block arrays, the TCCR hash of
  Guo-Katz-Wang-Yu 2020 and the MMO PRG (shared with :mod:`fss`).
- :mod:`pairwise.mpc.halfgates`: pure half-gates ``garble_and`` / ``eval_and``
  (Zahur-Rosulek-Evans 2015).
- :mod:`pairwise.mpc.garble`: the vectorized SIMD garbler and evaluator.
- :mod:`pairwise.mpc.errors`, :mod:`pairwise.mpc.tls`, :mod:`pairwise.mpc.channel`: channels
  (memory, TCP, null, transcript), mutual TLS 1.3 with role certificates, and the
  session handshake.
- :mod:`pairwise.mpc.baseot`, :mod:`pairwise.mpc.iknp`, :mod:`pairwise.mpc.ot`: Chou-Orlandi base OT and
  IKNP correlated / chosen-message OT.
- :mod:`pairwise.mpc.twopc`: semi-honest Yao sessions (:class:`GarblerSession`,
  :class:`EvaluatorSession`).

Security model: semi-honest parties; secrets from ``os.urandom``; the channel
is assumed authentic and private: TCP channels give that with ``tls=`` (mutual
TLS, :mod:`pairwise.mpc.tls`) and refuse plaintext off loopback unless told
``insecure=True``.
"""
