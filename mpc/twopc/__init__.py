"""Semi-honest Yao two-party computation over a :class:`~pairwise.mpc.channel.Channel`.

What it does
    :class:`GarblerSession` and :class:`EvaluatorSession` run any
    :class:`~pairwise.circuits.ir.Circuit`, for one instance or B SIMD
    instances, with each party's private inputs, over a channel.  Setup, once
    per session: the handshake of :mod:`pairwise.mpc.channel` with this
    runtime's version tag (runtime 5, base OT v3; another version is refused:
    :class:`VersionMismatch`), the garbler's 16-byte *label key*, then 128
    base OTs inside IKNP whose choice bits are the garbler's session Delta
    (or, with ``cot="base"``, one base OT per correlated OT:
    :mod:`pairwise.mpc.basecot`).

    Per execution (the phase methods of ``run`` carry these numbers):
    1. both sides check and convert their inputs; 2. the evaluator sends one
    frame, its execution header and the correction bits of its inputs;
    3. the garbler's labels come from the shared AES-CTR label stream, at no
    cost; 4. the evaluator's labels come from correlated OTs; 5. the garbler
    sends its header, the tables and the decoding bits in ``SPLIT`` frames
    (a mismatched header makes both sides raise :class:`ExecutionMismatch`
    before any label moves); 6. if the garbler learns the output, the
    evaluator sends the permute bits of its output labels.  Each step in
    full, with the frame counts: ``docs/twopc.md``, "The protocol, step by step".

    Modules: :mod:`.inputs` (input checks, output decoding), :mod:`.wire` (version,
    header, frames, label stream; patch the frame sizes there), :mod:`.session`.

Security model
    Semi-honest parties, as in the papers ([BBGK20, Sec. 5 and App. C.2]).
    Labels, Delta, the label key, random bits and OT secrets come from
    ``os.urandom``.  Each party learns the outputs it is given, the circuit
    and the batch size, its own random bits; not the other's inputs or random
    bits (argument in ``docs/twopc.md``).  The channel is assumed authentic
    and private (TLS off loopback); a malicious peer can make outputs wrong
    undetected.  Every receive has the channel's timeout; a session is
    unusable after a failure inside an execution.

Follows
    Yao 1986; Lindell-Pinkas 2009; emp-sh2pc's input scheme (shared label PRG).
"""

from __future__ import annotations

from .inputs import OUTPUT_MODES, GroupValue, PartyInputs, RandomGroups, prepare_inputs
from .session import (
    BASE_COT_MAX_BITS,
    COT_SOURCES,
    FIRST_COT_BATCH,
    EvaluatorSession,
    ExecutionResult,
    GarblerSession,
    fresh_cot,
)
from .wire import (
    EXEC,
    FRAME_TARGET,
    MIN_FRAME,
    RUNTIME_VERSION,
    SPLIT,
    STREAM_BUFFER,
    STREAM_FRAME,
    VERSION_TAG,
    ExecutionMismatch,
    VersionMismatch,
    circuit_digest,
)

__all__ = [
    "GarblerSession",
    "EvaluatorSession",
    "ExecutionResult",
    "ExecutionMismatch",
    "VersionMismatch",
    "OUTPUT_MODES",
    "prepare_inputs",
    "circuit_digest",
    "GroupValue",
    "PartyInputs",
    "RandomGroups",
    "RUNTIME_VERSION",
    "VERSION_TAG",
    "EXEC",
    "STREAM_FRAME",
    "SPLIT",
    "MIN_FRAME",
    "FRAME_TARGET",
    "STREAM_BUFFER",
    "FIRST_COT_BATCH",
    "COT_SOURCES",
    "BASE_COT_MAX_BITS",
    "fresh_cot",
]
