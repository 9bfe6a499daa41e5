"""Semi-honest Yao two-party computation over a :class:`~pairwise.mpc.channel.Channel`.

What it does
    :class:`GarblerSession` and :class:`EvaluatorSession` run any
    :class:`~pairwise.circuits.ir.Circuit`, for one instance or B SIMD
    instances, with each party's private inputs, over a channel.

    Setup, once per session: the handshake of :mod:`pairwise.mpc.channel`
    with this runtime's version tag (runtime 5, base OT v3) and the caller's
    ``extra`` digest (a peer of another version is refused naming both
    versions: :class:`VersionMismatch`); the garbler's 16-byte *label key*;
    then 128 base OTs inside IKNP, the garbler's base-OT choice bits being its
    session Delta, so every extended OT is correlated with Delta.  A session
    made with ``cot="base"`` skips IKNP and takes every correlated OT from its
    own base OT (:mod:`pairwise.mpc.basecot`): cheaper for a fresh session with
    up to ~128 evaluator input bits (the command line picks it then).

    Per execution (the phase methods of ``run`` carry these numbers):

    1. both sides check and convert their inputs before anything is sent;
    2. the evaluator sends ONE frame: its execution header (circuit content
       hash, AND count, batch, chunk, instance offset, output mode, digest of
       the random groups' names) and the correction bits d = r xor x of its
       ordinary inputs; the garbler compares the header with its own (step 5
       tells the evaluator).  When the COT pool must grow first (a session's
       first execution, a refill), the two headers cross on their own and are
       checked on both sides before any OT message, then the batch, then d;
    3. the garbler's input labels cost no message: both sides take the next
       blocks of the session's AES-CTR *label stream* as the garbler's
       *active* labels, and the garbler sets zero labels A xor b*Delta;
    4. the evaluator's labels from correlated OTs: t (evaluator) and
       q xor d*Delta (garbler) for ordinary inputs, t and q for random ones;
    5. one byte stream from the garbler: its header (so that on a mismatch
       both sides raise :class:`ExecutionMismatch` before any label moves: the
       garbler then sends its header alone), the garbled tables, then the
       decoding bits if the evaluator learns the output, in ``SPLIT`` (3)
       frames of about equal size (fewer for short streams, frames of about
       ``FRAME_TARGET`` for long ones), so the evaluator works on the first
       frames while the garbler garbles the rest;
    6. if the garbler learns the output, the evaluator sends the permute bits
       of its output labels (before decoding its own).

    An AES-128 execution is thus one frame from the evaluator plus one for
    the output, and three from the garbler (before version 5: 9 frames from
    the garbler, 3 from the evaluator, a header each way, a label seed).  Instance ids
    (the garbling tweak's high word) advance with every execution, so the
    session Delta never sees a repeated tweak.  A session made with
    ``ot_batch=None`` runs IKNP batches of 1024, 2048, ... 65536 COTs.

Modules: :mod:`.inputs` (conversion and checks of inputs, decoding of
outputs), :mod:`.wire` (version tag, header, frames, label stream; the frame
sizes are read there, so patch them there), :mod:`.session` (the two roles).

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
    Yao 1986; Lindell-Pinkas 2009 (semi-honest Yao); emp-sh2pc's input
    scheme (shared label PRG, derandomized COTs); docs/twopc.md.
"""

from __future__ import annotations

from .inputs import OUTPUT_MODES, GroupValue, PartyInputs, RandomGroups, prepare_inputs
from .session import COT_SOURCES, FIRST_COT_BATCH, EvaluatorSession, ExecutionResult, GarblerSession
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
]
