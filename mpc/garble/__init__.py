"""Vectorized half-gates garbling and evaluation of whole circuits over SIMD batches.

What it does
    :class:`Garbler` garbles a :class:`~pairwise.circuits.ir.Circuit` for
    ``B`` independent instances at once and :class:`Evaluator` evaluates the
    result, with no Python loop over gates or instances.  Three paths, one
    chosen at start-up (:func:`.jit.path`), give the same tables: with numba
    and AES-NI, every chunk runs on compiled loops that compute the hash's
    AES rounds themselves, on all cores (:mod:`.fused`); without AES-NI,
    one-instance chunks run compiled loops around OpenSSL; otherwise (or
    with ``PAIRWISE_JIT=0``) the numpy program runs level by level with
    fixed-key AES calls that cover a whole level step.  Modules, in
    dependency order:

    - :mod:`.format`: :class:`GarbleError`, the table bytes and their header
      (:class:`GarbledCircuit`), the table reader, output decoding;
    - :mod:`.plan`: the level schedule mapped to label slots; instance chunks;
    - :mod:`.program`: scratch and per-level programs of the numpy path;
    - :mod:`.kernels`: the per-level AND kernels of the numpy path;
    - :mod:`.jit`: the loader of the compiled paths, the program array;
    - :mod:`.fused` (with :mod:`._fused_kernels`, :mod:`._aesni`): the AES-NI path;
    - :mod:`._jit_kernels`: the OpenSSL compiled path (one-instance chunks);
    - :mod:`.garbler`, :mod:`.evaluator`: the two roles;
    - :mod:`.local`: :func:`garble_and_evaluate`, both roles in one process.

    The package re-exports the names of the former module, private ones
    included; a setting (``STEP_GATES``, ``POOL_BYTES``) is read in the module
    that defines it, so a test that changes one sets it there.

Security model
    Semi-honest Yao with half-gates and free-XOR.  Labels and Delta come
    from the OS CSPRNG unless the caller supplies them.  The hash is TMMO,
    H(x, i) = pi(pi(x) ^ i) ^ pi(x), tweakable circular correlation robust
    when the fixed-key AES pi is a random permutation, which half-gates
    needs; tweaks stay unique across the garblings of a session when they use
    disjoint ``instance_offset`` ranges.  The derivation, the byte layout and
    what the evaluator learns: ``docs/garbling.md``.

Follows: [ZRE15, Fig. 2]; [GKWY20, Sec. 7.4].
"""

from __future__ import annotations

# ruff: noqa: F401 - this module re-exports the names of its submodules
from pairwise.circuits.ir import Circuit, CircuitError

from ..aes import BlockBuffer, FixedKeyAES, TccrHasher, default_aes, random_blocks
from ..halfgates import TWEAK_INSTANCE_LIMIT
from . import jit as _jit
from .evaluator import Evaluator
from .format import (
    _HEADER,
    _MAGIC,
    _ONE,
    _U64,
    _VERSION,
    HEADER_SIZE,
    GarbledCircuit,
    GarbleError,
    _as_blocks,
    _Reader,
    decode,
    split_outputs,
    table_bytes,
    urandom_bits,
)
from .garbler import Garbler, _same_memory, fresh_delta
from .jit import _NO_TABLES, JIT_MAX_WIDTH, _Jit1, _jit_eval1, _jit_garble1, _jit_program, _use_jit
from .kernels import (
    _ONE0,
    _and,
    _copy,
    _eval_ands,
    _eval_ands1,
    _eval_direct,
    _garble_ands,
    _garble_ands1,
    _garble_direct,
    _mul,
    _neg,
    _xor,
)
from .local import garble_and_evaluate
from .plan import (
    _PLANS,
    _SLICES,
    CHUNK_LABEL_BYTES,
    MAX_CHUNK,
    _build_plan,
    _check_batch,
    _check_chunk,
    _check_offset,
    _chunks,
    _last_use,
    _LevelPlan,
    _Plan,
    _plan,
    _segment_sizes,
    _two_planes,
    default_chunk,
    wire_slice,
)
from .program import (
    DIRECT_CALL_WORDS,
    POOL_BYTES,
    STEP_GATES,
    _direct_and,
    _direct_lin,
    _flat,
    _keep_spare,
    _planar,
    _Work,
)

__all__ = [
    "GarbleError",
    "GarbledCircuit",
    "Garbler",
    "Evaluator",
    "HEADER_SIZE",
    "STEP_GATES",
    "default_chunk",
    "fresh_delta",
    "decode",
    "split_outputs",
    "garble_and_evaluate",
    "table_bytes",
    "urandom_bits",
    "wire_slice",
]
