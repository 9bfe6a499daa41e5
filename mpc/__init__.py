"""Secure two-party computation: fixed-key AES, half-gates garbling, channels, OT, the Yao runtime.

Modules, in dependency order:

- :mod:`pairwise.mpc.aes`: fixed-key AES-128 over numpy block arrays; ``tccr_hash``, the
  one correlation-robust hash of the project (TMMO pi(pi(x) ^ i) ^ pi(x), tweakable
  circular correlation robust when pi is a random permutation: Guo-Katz-Wang-Yu S&P 2020,
  Sec. 7.4), used by garbling and chosen OT; and ``mmo_prg``, the fixed-key PRG of the FSS
  trees (a PRG on secret uniform seeds in the same model).
- :mod:`pairwise.mpc.halfgates`: pure half-gates ``garble_and`` / ``eval_and``
  (Zahur-Rosulek-Evans 2015).
- :mod:`pairwise.mpc.garble`: the SIMD garbler and evaluator (a package: plan, program,
  kernels, byte format, the two roles; the AES-NI path, every chunk shape on compiled loops
  with the hash's AES inside, on all cores, in :mod:`pairwise.mpc.garble.fused`; the loader
  in :mod:`pairwise.mpc.garble.jit`, also importable as ``pairwise.mpc.jit``; see
  docs/garbling.md).
- :mod:`pairwise.mpc.errors`, :mod:`pairwise.mpc.tls`, :mod:`pairwise.mpc.channel`: channels
  (memory, TCP, null, transcript), mutual TLS 1.3 with role certificates, and the
  session handshake.
- :mod:`pairwise.mpc.baseot`, :mod:`pairwise.mpc.iknp`, :mod:`pairwise.mpc.ot`: Chou-Orlandi base OT and
  IKNP correlated / chosen-message OT.
- :mod:`pairwise.mpc.twopc`: semi-honest Yao sessions (:class:`GarblerSession`,
  :class:`EvaluatorSession`); the garbler's input labels come from a label stream
  keyed once per session, and random input groups (``run(..., random=...)``) are drawn by their owner
  inside the runtime at no label cost on the wire.

Security model: semi-honest parties; secrets from ``os.urandom``; the channel
is assumed authentic and private: TCP channels give that with ``tls=`` (mutual
TLS, :mod:`pairwise.mpc.tls`) and refuse plaintext off loopback unless told
``insecure=True``.  Fixed-key AES is modelled as a random permutation (the
assumption of both the hash and the PRG), the OT extension's seed expansion
needs AES as a PRF, the base OTs CDH in the prime-order group of edwards25519.
"""
