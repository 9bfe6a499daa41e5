"""Function secret sharing: DPF, DCF and verifiable DPF keys with vectorized batch evaluation (network-free).

What it does
    Two-party FSS over n-bit domains (1 <= n <= 64) with outputs in Z_2^l
    (1 <= l <= 64): a dealer (a client) splits a function f into keys k_0, k_1
    with Eval(k_0, x) + Eval(k_1, x) = f(x) mod 2^l, and each of two
    non-colluding servers evaluates its key locally.

    * distributed point functions, f(x) = beta * [x == alpha]
      ([BGI16, Fig. 1]): :func:`dpf_gen`,
      :func:`dpf_gen_batch`, :class:`DPFKey`, :class:`DPFKeyBatch` (with
      full-domain evaluation and a histogram-share ``full_domain_sum``);
    * distributed comparison functions, f(x) = beta * [x < alpha] and the
      "le"/"gt"/"ge" variants ([BCG+21, Fig. 1]): :func:`dcf_gen`, :func:`dcf_gen_batch`,
      :class:`DCFKey`, :class:`DCFKeyBatch`;
    * verifiable distributed point functions (de Castro-Polychroniadou,
      EUROCRYPT 2022): :func:`vdpf_gen_batch`, :class:`VDPFKeyBatch` -- two
      servers check, with one 16-byte tag each (:class:`VDPFVerifier`), that a
      client's two keys share one point function (:mod:`pairwise.fss.vdpf`);
    * versioned, deterministic key bytes and clear errors
      (:class:`KeyFormatError`, :class:`FSSParameterError`).

Modules, in dependency order
    ``keys`` (parameters, errors, byte format) -> ``prg`` (fixed-key AES PRG
    on :mod:`pairwise.mpc.aes`) -> ``base`` (struct-of-arrays key batches) -> ``dpf``,
    ``dcf`` -> ``vdpf``.

Quick use (clients' keys to two servers, shares of a count): ``docs/fss.md``.

Security model
    Semi-honest, two non-colluding servers; a single key reveals nothing
    about (alpha, beta) beyond n and l, under the assumption that fixed-key
    AES behaves as a random permutation (the PRG of :mod:`pairwise.fss.prg`).  Keys
    come from the OS CSPRNG.  No verification that a client's keys are
    well-formed as a pair (a malicious client can share a different function);
    the byte format is validated.
"""

from .base import DEFAULT_CHUNK, GEN_CHUNK, FSSKey, FSSKeyBatch, reconstruct
from .dcf import COMPARISONS, DCFKey, DCFKeyBatch, dcf_gen, dcf_gen_batch
from .dpf import FULL_DOMAIN_MAX_BITS, DPFKey, DPFKeyBatch, dpf_gen, dpf_gen_batch
from .keys import (
    FORMAT_VERSION,
    VDPF_FORMAT_VERSION,
    FSSParameterError,
    KeyFormatError,
    dcf_key_bytes,
    dpf_key_bytes,
    vdpf_key_bytes,
)
from .vdpf import (
    VDPF_MAX_BITS,
    VERIFIER_KEY_BYTES,
    VDPFEvaluation,
    VDPFKey,
    VDPFKeyBatch,
    VDPFVerifier,
    vdpf_gen,
    vdpf_gen_batch,
    vdpf_verify_pair,
)

__all__ = [
    "COMPARISONS",
    "DEFAULT_CHUNK",
    "GEN_CHUNK",
    "FORMAT_VERSION",
    "VDPF_FORMAT_VERSION",
    "VDPF_MAX_BITS",
    "VERIFIER_KEY_BYTES",
    "VDPFEvaluation",
    "VDPFKey",
    "VDPFKeyBatch",
    "VDPFVerifier",
    "vdpf_gen",
    "vdpf_gen_batch",
    "vdpf_key_bytes",
    "vdpf_verify_pair",
    "FULL_DOMAIN_MAX_BITS",
    "DCFKey",
    "DCFKeyBatch",
    "DPFKey",
    "DPFKeyBatch",
    "FSSKey",
    "FSSKeyBatch",
    "FSSParameterError",
    "KeyFormatError",
    "dcf_gen",
    "dcf_gen_batch",
    "dcf_key_bytes",
    "dpf_gen",
    "dpf_gen_batch",
    "dpf_key_bytes",
    "reconstruct",
]
