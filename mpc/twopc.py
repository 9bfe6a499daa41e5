"""Semi-honest Yao two-party computation over a :class:`~pairwise.mpc.channel.Channel`.

What it does
    :class:`GarblerSession` and :class:`EvaluatorSession` run any
    :class:`~pairwise.circuits.ir.Circuit`, for one instance or B SIMD instances, with
    each party's private inputs, over a channel:

    1. session start (once): :func:`pairwise.mpc.channel.handshake` (magic, version,
       session id, roles, and a digest of the runtime parameters), then 128
       base OTs inside IKNP (:mod:`pairwise.mpc.iknp`); the garbler's base-OT choice bits
       are its session Delta, so every extended OT is correlated with Delta;
    2. per execution: both parties send an execution header (circuit content
       hash, AND count, batch, chunk, instance offset, output mode, a digest
       of the names of the random input groups; the garbler's header also
       carries a fresh 16-byte *label seed*) and then compare; a difference
       raises :class:`ExecutionMismatch` ("circuit mismatch ...") on *both*
       sides before any label or OT message moves.  (Each side sets up its
       garbler/evaluator while the headers travel.);
    3. the evaluator's input labels through correlated OTs: for its ordinary
       inputs derandomized ones (it sends d = r xor x; the garbler's zero
       labels are q xor d*Delta), for its random inputs none at all (below);
    4. the garbler's input labels cost no message: both sides expand the
       label seed into the garbler's *active* labels (:func:`pairwise.mpc.aes.ctr_blocks`);
    5. one byte stream: the garbled tables, then (if the evaluator learns the
       output) the output decoding bits, cut into frames that grow from
       ``FIRST_FRAME`` to ``FRAME_TARGET`` bytes and shrink again towards the
       end (never more than ``STREAM_FRAME``): the evaluator starts on the
       first few KiB while the garbler garbles the rest, and a whole AES-128
       execution is about ten frames, not one per AND level.  Streams up to
       ``STREAM_BUFFER`` bytes are garbled into a buffer the session reuses and
       sent from it without copies; larger ones segment by segment, so
       neither side holds the tables of a large batch;
    6. if the garbler learns the output, the evaluator sends the permute bits
       of its output labels (before it decodes its own outputs, so the
       garbler is not kept waiting).

    :meth:`GarblerSession.run` and :meth:`EvaluatorSession.run` are steps 2-6,
    one phase method per step, with the step numbers in their comments.

    Instance ids (the garbling tweak's high word) advance with every execution
    of a session, so the session Delta never sees a repeated tweak.

    COT batches: a session made with ``ot_batch=None`` runs its first IKNP
    batch with ``FIRST_COT_BATCH`` (1024) COTs and each later batch with at
    least twice as many (up to :data:`pairwise.mpc.iknp.DEFAULT_BATCH`), both sides
    deriving the size from the same state (see :meth:`_Session._size_cot_batch`);
    an explicit ``ot_batch`` is used as is.

Input labels and random inputs
    The garbler's inputs cost no OT (emp-sh2pc's scheme): both parties
    expand the garbler's per-execution label seed S with AES-128-CTR into
    the *active* labels A of the garbler's input wires, and the garbler sets
    the zero labels A xor b*Delta.  Random input groups (``random=`` of
    ``run``) are drawn inside the runtime by their owner and returned to it
    only (:attr:`ExecutionResult.random_bits`): a garbler group from
    ``os.urandom``, an evaluator group as the choice bits of random
    correlated OTs (no message beyond the IKNP extension).  The scheme and
    the semi-honest security argument (why A, the tables and the decoding
    bits hide the garbler's bits, and why nothing the garbler sees depends
    on the evaluator's random bits) are in ``docs/twopc.md``.

Security model
    Semi-honest (honest-but-curious) parties, as in the papers (ustats, Sec. 5
    and App. C.2).  Labels, Delta, label seeds, random bits and OT secrets
    come from ``os.urandom``.  What each party learns: the outputs it is
    given, the circuit, the batch size, its own random bits; not the other's
    inputs or random bits.  The channel is assumed authentic and private
    (run it over TLS or a trusted network); a malicious peer can make
    outputs wrong, and that is not detected.

Failure policy
    Inputs are converted and range-checked before anything is sent; every
    receive has the channel's timeout; a mismatch of circuit or parameters is
    reported on both sides; a peer that disconnects raises
    :class:`pairwise.mpc.errors.PeerClosed` / :class:`pairwise.mpc.errors.ChannelError`; a
    stream of tables longer or shorter than the headers announce raises
    :class:`pairwise.mpc.errors.ProtocolError`.  RUNTIME_VERSION 4 (seed-derived
    garbler labels, random inputs; 3 brought the TMMO hash): peers of earlier
    versions are refused at the handshake.

Follows
    Yao 1986; Lindell-Pinkas 2009 (semi-honest Yao); emp-sh2pc's input
    scheme; docs/twopc.md; DESIGN.md "mpc: vectorized garbling" (two-party runtime).
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Self, Sequence, TypeAlias

import numpy as np

from pairwise.circuits.ir import Circuit, CircuitError, EVALUATOR, GARBLER, InputGroup, Party, bits_to_ints, ints_to_bits

from .aes import ctr_blocks, random_blocks
from .channel import Channel, handshake
from .errors import HandshakeError, ProtocolError
from .garble import Evaluator, Garbler, decode, default_chunk, split_outputs, urandom_bits, wire_slice
from .iknp import DEFAULT_BATCH, COTReceiver, COTSender

__all__ = [
    "GarblerSession",
    "EvaluatorSession",
    "ExecutionResult",
    "ExecutionMismatch",
    "OUTPUT_MODES",
    "prepare_inputs",
    "STREAM_FRAME",
    "FIRST_FRAME",
    "FRAME_TARGET",
    "STREAM_BUFFER",
    "FIRST_COT_BATCH",
]

#: Largest frame used for streaming garbled tables.
STREAM_FRAME = 1 << 22
#: The garbler's per-execution stream (input labels, tables, decoding bits) goes out in frames of
#: at least this many bytes (the last one may be shorter): few system calls and wake-ups per
#: execution, yet the evaluator starts on the first frame while the garbler garbles the rest.
FRAME_TARGET = 1 << 16
#: Executions whose garbler stream (labels, tables, decoding bits) fits in this many bytes are
#: garbled into one buffer that the session reuses, and sent from it without copies.
STREAM_BUFFER = 8 << 20
#: Size of the garbler's first frame of tables (frames then double up to FRAME_TARGET).
FIRST_FRAME = 1 << 13
#: COT batch of a session created with ``ot_batch=None``: the first IKNP batch, then each new
#: batch is at least twice the previous one, up to :data:`pairwise.mpc.iknp.DEFAULT_BATCH`.
FIRST_COT_BATCH = 1024
OUTPUT_MODES = ("both", "evaluator", "garbler")
RUNTIME_VERSION = b"pairwise-yao/4"
#: magic, circuit hash, AND gates, batch, chunk, instance offset, output mode, digest of the random
#: groups' names, the garbler's label seed (zero from the evaluator)
_EXEC = struct.Struct("<4s32sQQQQB8s16s")
_NO_SEED = bytes(16)
_EXEC_MAGIC = b"EXEC"

#: One input group's value: an int, a sequence of ints (a batch), or (batch, width) bool bits.
GroupValue: TypeAlias = int | np.integer | Sequence[int] | np.ndarray
#: A party's ``inputs`` to ``run`` (see :func:`prepare_inputs`): a mapping group name -> value,
#: one value per group of the party, or the bare value of its only group; ``None`` when it feeds none.
PartyInputs: TypeAlias = Mapping[str, GroupValue] | Sequence[GroupValue] | GroupValue | None
#: The random input groups of an execution: one group name or several (``None``/empty: none).
RandomGroups: TypeAlias = str | Iterable[str] | None


class ExecutionMismatch(HandshakeError):
    """The two parties disagree on the circuit or the execution parameters."""


@dataclass
class ExecutionResult:
    """Outputs of one execution and what it cost on the wire (this party's view).

    ``outputs`` has one entry per output group: a Python int for a batch of
    1 given as scalars, else an array/list of ints; ``None`` when this party
    does not learn the output.
    """

    outputs: list | None
    output_bits: list[np.ndarray] | None
    and_gates: int
    batch: int
    bytes_sent: int
    bytes_received: int
    messages_sent: int
    messages_received: int
    seconds: float
    extra: dict = field(default_factory=dict)
    #: this party's own random input groups (``random=`` of run): name -> (batch, width) bool bits
    random_bits: dict[str, np.ndarray] = field(default_factory=dict)

    def as_dict(self) -> dict:
        def conv(v):
            if isinstance(v, np.ndarray):
                return [int(x) for x in v]
            if isinstance(v, list):
                return [int(x) for x in v]
            return int(v)

        return {
            "outputs": None if self.outputs is None else [conv(o) for o in self.outputs],
            "and_gates": self.and_gates,
            "batch": self.batch,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "messages_sent": self.messages_sent,
            "messages_received": self.messages_received,
            "seconds": self.seconds,
        }


def prepare_inputs(circuit: Circuit, party: Party | str, values: PartyInputs, *,
                   skip: Iterable[str] = ()) -> tuple[list[np.ndarray], int, bool]:
    """Convert a party's inputs to bit arrays, with range checks, before any secret moves.

    ``values``: a mapping group name -> int or sequence of ints, or a sequence
    with one entry per group of that party (in circuit order), or, if the party
    owns exactly one group, a bare int / sequence of ints.  Bool arrays of
    shape (batch, width) are taken as bits.  Groups named in ``skip`` (random
    groups, drawn by the runtime) are not inputs.  Returns (bits per group,
    batch, scalar) where ``scalar`` says every value was a single int; batch
    is 0 when the party has no group to feed.
    """
    party = Party(party)
    skip = set(skip)
    groups = tuple(g for g in circuit.groups_of(party) if g.name not in skip)
    if not groups:
        if values is not None and not (isinstance(values, (Mapping, list, tuple)) and len(values) == 0):
            given = sorted(values) if isinstance(values, Mapping) else values
            raise CircuitError(f"{party.value} feeds no input group here (its groups: "
                               f"{[g.name for g in circuit.groups_of(party)]}, random: {sorted(skip)}), got {given!r}")
        return [], 0, False
    seq: list[Any]
    if isinstance(values, Mapping):
        passed_random = sorted(set(values) & skip)
        if passed_random:
            raise CircuitError(f"{passed_random} are random input groups: the runtime draws their bits; do not pass them")
        unknown = set(values) - {g.name for g in groups}
        if unknown:
            raise CircuitError(f"{party.value} has no input group(s) {sorted(unknown)}; its groups: {[g.name for g in groups]}")
        missing = [g.name for g in groups if g.name not in values]
        if missing:
            raise CircuitError(f"missing {party.value} input group(s) {missing}")
        seq = [values[g.name] for g in groups]
    elif len(groups) == 1 and not (isinstance(values, (list, tuple)) and len(values) == 1 and not isinstance(values[0], (int, np.integer))):
        seq = [values]
    else:
        seq = list(values)  # type: ignore[arg-type]  # (several groups: values must be a sequence)
    if len(seq) != len(groups):
        raise CircuitError(f"{party.value} owns {len(groups)} input group(s) {[g.name for g in groups]}, got {len(seq)} value(s)")
    bits = []
    batch = None
    scalar = True
    for g, v in zip(groups, seq):
        if isinstance(v, np.ndarray) and v.dtype == np.bool_:
            b = v
            if b.ndim != 2 or b.shape[1] != g.width:
                raise CircuitError(f"bits for {g.name!r} must have shape (batch, {g.width}), got {b.shape}")
            scalar = False
        elif isinstance(v, (int, np.integer)):
            b = ints_to_bits([int(v)], g.width, g.signed, name=g.name)
        else:
            b = ints_to_bits(list(v), g.width, g.signed, name=g.name)
            scalar = False
        if batch is None:
            batch = b.shape[0]
        elif b.shape[0] != batch:
            raise CircuitError(f"all input groups must have the same batch size ({batch} vs {b.shape[0]} for {g.name!r})")
        bits.append(b)
    if batch is None:
        batch = 0
    return bits, batch, scalar


def _random_groups(circuit: Circuit, random: RandomGroups) -> tuple[InputGroup, ...]:
    """The input groups named in ``random`` (a name or an iterable of names), in circuit order."""
    names = [random] if isinstance(random, str) else list(random or ())
    known = {g.name for g in circuit.inputs}
    bad = [n for n in names if n not in known]
    if bad:
        raise CircuitError(f"random input group(s) {bad} are not inputs of {circuit.name!r}; its groups: {sorted(known)}")
    if len(set(names)) != len(names):
        raise CircuitError(f"random input groups named twice: {names}")
    return tuple(g for g in circuit.inputs if g.name in set(names))


def _random_digest(groups: tuple[InputGroup, ...]) -> bytes:
    return hashlib.sha256(b"random-groups\0" + b"\0".join(g.name.encode() for g in groups)).digest()[:8]


def _fresh_label_seed() -> bytes:
    """The garbler's per-execution label seed: 16 bytes from ``os.urandom`` (tests may fix it)."""
    return os.urandom(16)


def _exec_header(circuit: Circuit, batch: int, chunk: int, offset: int, output: str,
                 random: tuple[InputGroup, ...] = (), seed: bytes = _NO_SEED) -> bytes:
    return _EXEC.pack(_EXEC_MAGIC, bytes.fromhex(circuit.content_hash), circuit.n_and, batch, chunk, offset,
                      OUTPUT_MODES.index(output), _random_digest(random), seed)


def _compare_exec(mine: bytes, theirs: bytes, circuit: Circuit) -> bytes:
    """Raise unless the peer's header matches ours (all fields but the seed); return the peer's seed."""
    if len(theirs) != _EXEC.size or not theirs.startswith(_EXEC_MAGIC):
        raise ProtocolError(f"expected an execution header ({_EXEC.size} bytes), got {len(theirs)} bytes")
    m = _EXEC.unpack(mine)
    t = _EXEC.unpack(theirs)
    if m[1] != t[1] or m[2] != t[2]:
        raise ExecutionMismatch(
            f"circuit mismatch: this side runs {circuit.name!r} (hash {m[1].hex()[:16]}, {m[2]} AND), "
            f"the peer's circuit has hash {t[1].hex()[:16]} ({t[2]} AND); both parties must use the same circuit, width and signedness"
        )
    names = ("batch", "chunk", "instance offset", "output mode")
    for name, a, b in zip(names, m[3:7], t[3:7]):
        if a != b:
            if name == "output mode":
                a, b = OUTPUT_MODES[a] if a < 3 else a, OUTPUT_MODES[b] if b < 3 else b
            raise ExecutionMismatch(f"execution parameter mismatch: {name} is {a} here and {b} at the peer")
    if m[7] != t[7]:
        raise ExecutionMismatch("execution parameter mismatch: the two parties name different random input groups "
                                "(run(..., random=...) must list the same groups on both sides)")
    return t[8]


def _exchange_headers(channel: Channel, mine: bytes, circuit: Circuit) -> bytes:
    channel.send(mine)
    channel.flush()
    return _check_peer_header(channel, mine, circuit)


def _check_peer_header(channel: Channel, mine: bytes, circuit: Circuit) -> bytes:
    theirs = channel.recv(max_size=_EXEC.size)
    return _compare_exec(mine, bytes(theirs), circuit)


def _resolve_batch(from_inputs: int, fed: bool, batch: int | None, party: str) -> int:
    """The execution's batch: from the party's inputs, or ``batch=`` when it feeds none (they must agree)."""
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
            raise CircuitError(f"batch must be a positive integer, got {batch!r}")
        if fed and from_inputs != batch:
            raise CircuitError(f"batch={batch} but the {party}'s inputs have batch {from_inputs}")
        return int(batch)
    if not fed:
        raise CircuitError(f"the {party} feeds no input group here, so batch= must give the batch size")
    return from_inputs


def _outputs_from_bits(circuit: Circuit, bits: np.ndarray, scalar: bool) -> tuple[list, list[np.ndarray]]:
    per_group = split_outputs(circuit, bits)
    outs = []
    for g, b in zip(circuit.outputs, per_group):
        ints = bits_to_ints(b, g.signed)
        outs.append(int(ints[0]) if scalar else ints)
    return outs, per_group


class _FrameWriter:
    """The garbler's per-execution byte stream, cut into frames of FRAME_TARGET..STREAM_FRAME bytes.

    Pieces smaller than a frame are copied into a pending frame that goes out
    once it holds FRAME_TARGET bytes; large pieces go out as they are, in
    frames of at most STREAM_FRAME bytes.  A piece may change as soon as
    :meth:`write` returns (the engine reuses one scratch buffer for all
    segments).
    """

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.limit = STREAM_FRAME
        self.target = min(FRAME_TARGET, self.limit)
        self.pending = bytearray(self.target)
        self.size = 0

    def write(self, data) -> None:
        mv = memoryview(data).cast("B")
        if self.size:  # complete the pending frame first
            k = min(len(mv), self.target - self.size)
            self.pending[self.size : self.size + k] = mv[:k]
            self.size += k
            mv = mv[k:]
            if self.size < self.target:
                return
            self.channel.send(self.pending)
            self.size = 0
        while len(mv) >= self.target:
            n = min(len(mv), self.limit)
            self.channel.send(mv[:n])
            mv = mv[n:]
        if len(mv):
            self.pending[: len(mv)] = mv
            self.size = len(mv)

    def close(self) -> None:
        if self.size:
            self.channel.send(memoryview(self.pending)[: self.size])
            self.size = 0


class _FrameReader:
    """The evaluator's view of that stream: exactly ``total`` bytes, split into frames in any way."""

    def __init__(self, channel: Channel, total: int) -> None:
        self.channel = channel
        self.left = total  # bytes not yet received
        self.frame: bytearray | None = None
        self.cur = memoryview(b"")
        self.pos = 0

    def _next_frame(self) -> None:
        if self.left <= 0:
            raise ProtocolError("the garbler's execution stream is longer than announced")
        self._recycle()
        frame = self.channel.recv_frame(max_size=min(STREAM_FRAME, self.left))
        if not frame:
            raise ProtocolError("empty frame in the garbler's execution stream")
        self.left -= len(frame)
        self.frame = frame
        self.cur, self.pos = memoryview(frame), 0

    def _recycle(self) -> None:
        """Hand the consumed frame back to the channel (the evaluator reads one level's tables at a time,
        so nothing reads a frame once the next one is needed)."""
        if self.frame is not None:
            self.cur = memoryview(b"")
            self.channel.recycle(self.frame)
            self.frame = None

    def read(self, n: int) -> memoryview:
        """The next ``n`` bytes (a view of the frame when they lie in one frame, else a copy)."""
        if self.pos == len(self.cur) and n:
            self._next_frame()
        if len(self.cur) - self.pos >= n:
            out = self.cur[self.pos : self.pos + n]
            self.pos += n
            return out
        buf = bytearray(n)
        got = 0
        while got < n:
            if self.pos == len(self.cur):
                self._next_frame()
            k = min(n - got, len(self.cur) - self.pos)
            buf[got : got + k] = self.cur[self.pos : self.pos + k]
            got += k
            self.pos += k
        return memoryview(buf)

    def pieces(self, n: int):
        """Yield views of the next ``n`` bytes as they arrive (frame by frame)."""
        while n:
            if self.pos == len(self.cur):
                self._next_frame()
            k = min(n, len(self.cur) - self.pos)
            yield self.cur[self.pos : self.pos + k]
            self.pos += k
            n -= k

    def finish(self) -> None:
        if self.left or self.pos != len(self.cur):
            raise ProtocolError("the garbler's execution stream has trailing bytes")
        self._recycle()


def _unpack_bits(data: memoryview, n: int) -> np.ndarray:
    """``n`` bits packed as by :meth:`Channel.send_bits` (padding bits must be zero)."""
    packed = np.frombuffer(data, dtype=np.uint8)
    if n % 8 and packed[-1] >> (n % 8):
        raise ProtocolError(f"decoding bits for {n} outputs have non-zero padding bits")
    return np.unpackbits(packed, count=n, bitorder="little").view(np.bool_)


@dataclass
class _Execution:
    """One execution as both sides' phases see it: public parameters, this party's inputs, its costs so far."""

    circuit: Circuit
    output: str
    random: tuple[InputGroup, ...]  # the random input groups (of either party)
    rnames: set[str]
    bits: list[np.ndarray]  # this party's ordinary input groups, in circuit order
    batch: int
    scalar: bool
    chunk: int
    offset: int  # instance id of the first instance
    t0: float
    c0: tuple[int, int, int, int]
    random_bits: dict[str, np.ndarray] = field(default_factory=dict)


def _check_run(circuit: Circuit, output: str, random: RandomGroups) -> tuple[tuple[InputGroup, ...], set[str]]:
    """The output mode and random groups of ``run``, checked: (random groups, their names)."""
    if output not in OUTPUT_MODES:
        raise ValueError(f"output must be one of {OUTPUT_MODES}, got {output!r}")
    rnd = _random_groups(circuit, random)
    return rnd, {g.name for g in rnd}


class _Session:
    role: str

    def __init__(self, channel: Channel, session_id: bytes | str, ot_batch: int | None) -> None:
        self.channel = channel
        self.session_id = session_id
        self._ot_batch = ot_batch
        self.executions = 0
        self._next_instance = 0
        self.setup_seconds = 0.0
        self._labels: np.ndarray | None = None  # reused storage of the input labels (see _label_buffer)

    def _label_buffer(self, circuit: Circuit, batch: int) -> np.ndarray:
        """(n_inputs, batch, 2) storage for one execution's input labels, reused across executions.

        Large batches would otherwise write hundreds of MB of fresh memory per
        execution (page faults); the session keeps the largest buffer it has
        needed until it is closed.
        """
        n = 2 * circuit.n_inputs * batch
        if self._labels is None or self._labels.shape[0] < n:
            self._labels = np.empty(n, np.uint64)
        return self._labels[:n].reshape(circuit.n_inputs, batch, 2)

    def _size_cot_batch(self, need: int) -> None:
        """Before taking ``need`` COTs: size the next IKNP batch (sessions made with ``ot_batch=None``).

        Both parties call this at the same point with the same ``need`` and the
        same COT state, so their batch sizes stay equal: the shortfall rounded up
        to 1024, at least twice the previous batch, at most DEFAULT_BATCH.  A
        short session thus pushes 16 KiB of OT traffic, not 1 MiB, and a long one
        soon runs in full-size batches.
        """
        short = need - self.cot.available
        if self._ot_batch is not None or short <= 0:
            return
        size = -(-short // FIRST_COT_BATCH) * FIRST_COT_BATCH
        if self.cot.batches:
            size = max(size, 2 * self.cot.batch_size)
        self.cot.batch_size = min(size, DEFAULT_BATCH)

    def _counters(self) -> tuple[int, int, int, int]:
        s = self.channel.stats()
        return s["bytes_sent"], s["bytes_received"], s["messages_sent"], s["messages_received"]

    # -- the phases both sides share (steps of the module docstring)
    def _start(self, circuit: Circuit, output: str, rnd: tuple[InputGroup, ...], rnames: set[str],
               bits: list[np.ndarray], batch: int, scalar: bool, chunk: int | None) -> _Execution:
        """Open an execution once the inputs are checked: the clock and the byte counters start here."""
        t0 = time.perf_counter()
        c0 = self._counters()
        chunk = default_chunk(circuit, batch) if chunk is None else chunk
        return _Execution(circuit, output, rnd, rnames, bits, batch, scalar, chunk, self._next_instance, t0, c0)

    def _send_header(self, ex: _Execution, seed: bytes = _NO_SEED) -> bytes:
        """Step 2, first half: send this side's execution header (the garbler's carries its label seed)."""
        mine = _exec_header(ex.circuit, ex.batch, ex.chunk, ex.offset, ex.output, ex.random, seed)
        self.channel.send(mine)
        self.channel.flush()
        return mine

    def _check_header(self, ex: _Execution, mine: bytes) -> bytes:
        """Step 2, second half: the peer's header must match ours (both sides raise otherwise); its seed."""
        return _check_peer_header(self.channel, mine, ex.circuit)

    def _evaluator_groups(self, ex: _Execution) -> tuple[list[InputGroup], list[InputGroup], int, int]:
        """Step 3's shape, the same on both sides: the evaluator's ordinary and random groups and their COT counts."""
        e_groups = ex.circuit.groups_of(EVALUATOR)
        ordinary = [g for g in e_groups if g.name not in ex.rnames]
        randoms = [g for g in e_groups if g.name in ex.rnames]
        return ordinary, randoms, sum(g.width for g in ordinary) * ex.batch, sum(g.width for g in randoms) * ex.batch

    @staticmethod
    def _stream_sizes(ex: _Execution) -> tuple[int, int, int]:
        """Step 5's sizes: (table bytes, output wires, decoding-bit bytes: 0 unless the evaluator learns the output)."""
        n_out = sum(g.width for g in ex.circuit.outputs)
        n_dec = -(-n_out * ex.batch // 8) if ex.output in ("both", "evaluator") else 0
        return 32 * ex.circuit.n_and * ex.batch, n_out, n_dec

    def _finish(self, ex: _Execution, outs: list | None, per_group: list[np.ndarray] | None) -> ExecutionResult:
        """Close the execution: advance the instance ids (fresh tweaks for the next one) and count its cost."""
        self._next_instance += ex.batch
        self.executions += 1
        c0, c1 = ex.c0, self._counters()
        return ExecutionResult(outs, per_group, ex.circuit.n_and * ex.batch, ex.batch, c1[0] - c0[0], c1[1] - c0[1],
                               c1[2] - c0[2], c1[3] - c0[3], time.perf_counter() - ex.t0, random_bits=ex.random_bits)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GarblerSession(_Session):
    """The garbler side of a Yao session (one base-OT setup, many executions).

    >>> # with a connected channel ch and a matching EvaluatorSession on the peer:
    >>> # s = GarblerSession(ch); r = s.run(circuit, {"x": 5})
    """

    role = "garbler"

    def __init__(self, channel: Channel, session_id: bytes | str = b"pairwise-2pc", *, ot_batch: int | None = None,
                 extra: bytes = b"") -> None:
        super().__init__(channel, session_id, ot_batch)
        t0 = time.perf_counter()
        hs = handshake(channel, "garbler", session_id, RUNTIME_VERSION + extra, peer_role="evaluator",
                       extra_label="circuit" if extra else "runtime")
        self.delta = random_blocks(2)[0]
        self.delta[0] |= np.uint64(1)
        self.cot = COTSender(channel, self.delta, hs.run_id, batch_size=FIRST_COT_BATCH if ot_batch is None else ot_batch)
        self._stream: np.ndarray | None = None  # reused buffer of the per-execution stream
        self._scratch: np.ndarray | None = None  # reused buffer of the table segments of larger streams
        self.cot.setup()
        self.setup_seconds = time.perf_counter() - t0

    def _send_stream(self, mv: memoryview, start: int, end: int) -> int:
        """Send ``mv[start:end]`` in frames of at most STREAM_FRAME bytes; returns ``end``."""
        while start < end:
            n = min(end - start, STREAM_FRAME)
            self.channel.send(mv[start : start + n])
            start += n
        return end

    def run(self, circuit: Circuit, inputs: PartyInputs, *, output: str = "both", chunk: int | None = None,
            random: RandomGroups = (), batch: int | None = None) -> ExecutionResult:
        """Run one execution with the garbler's ``inputs``.

        ``random``: names of the input groups (of either party) whose bits are
        random and private to their owner; the evaluator must name the same
        groups.  The garbler's random bits come from ``os.urandom`` and are
        returned in ``random_bits``; ``inputs`` holds only the other groups.
        The batch is that of the inputs, or ``batch`` when the garbler feeds
        no input group.  The steps are those of the module docstring; the
        garbler sets up its labels (step 4) while its header travels.
        """
        ex = self._open(circuit, inputs, output, chunk, random, batch)  # inputs checked before anything is sent
        seed = _fresh_label_seed()  # fixes the active labels of the garbler's input wires (module docstring)
        mine = self._send_header(ex, seed)  # 2. the execution headers: ours goes out ...
        gar = self._garbler_labels(ex, seed)  # 4. the garbler's labels from the seed, while it travels
        self._check_header(ex, mine)  # 2. ... and the evaluator's must match
        self._evaluator_zero_labels(ex, gar)  # 3. the evaluator's labels, by correlated OT
        self._send_tables(ex, gar)  # 5. one byte stream: the tables, then the decoding bits
        return self._finish(ex, *self._outputs(ex, gar))  # 6. the output, if the garbler learns it

    def _open(self, circuit: Circuit, inputs: PartyInputs, output: str, chunk: int | None, random: RandomGroups,
              batch: int | None) -> _Execution:
        """The garbler's inputs converted and checked, the batch resolved; the execution starts."""
        rnd, rnames = _check_run(circuit, output, random)
        bits, batch_in, scalar = prepare_inputs(circuit, GARBLER, inputs, skip=rnames)
        g_groups = circuit.groups_of(GARBLER)
        fed = len(g_groups) > len([g for g in g_groups if g.name in rnames])
        batch = _resolve_batch(batch_in, fed, batch, "garbler")
        return self._start(circuit, output, rnd, rnames, bits, batch, scalar, chunk)

    def _garbler_labels(self, ex: _Execution, seed: bytes) -> Garbler:
        """Step 4: a Garbler whose zero labels for the garbler's groups are A xor b*Delta, A from the seed."""
        circuit, batch = ex.circuit, ex.batch
        gar = Garbler(circuit, batch, delta=self.delta, instance_offset=ex.offset, chunk=ex.chunk, keep_scratch=True,
                      input_buffer=self._label_buffer(circuit, batch))
        pos, it = 0, iter(ex.bits)
        for g in circuit.groups_of(GARBLER):  # active labels: the seed's AES-CTR stream, group after group, wire-major
            if g.name in ex.rnames:
                b = ex.random_bits[g.name] = urandom_bits(batch, g.width)
            else:
                b = next(it)
            n = g.width * batch
            if isinstance(wire_slice(g), slice):  # expanded straight into the label storage
                view = gar.input_view(g.name)
                ctr_blocks(seed, n, start=pos, out=view.reshape(n, 2))
            else:
                view = ctr_blocks(seed, n, start=pos).reshape(g.width, batch, 2)
            gar.set_active_labels(g.name, view, b)
            pos += n
        return gar

    def _evaluator_zero_labels(self, ex: _Execution, gar: Garbler) -> None:
        """Step 3: the evaluator's ordinary groups by derandomized COTs, random ones by random COTs (q, no message)."""
        ordinary, randoms, n_ord, n_rnd = self._evaluator_groups(ex)
        if not n_ord + n_rnd:
            return
        batch = ex.batch
        self._size_cot_batch(n_ord + n_rnd)
        if n_ord:
            zero = self.cot.send_labels(n_ord)
            pos = 0
            for g in ordinary:
                gar.set_zero_labels(g.name, zero[pos : pos + g.width * batch].reshape(g.width, batch, 2))
                pos += g.width * batch
        for g in randoms:  # q of random COTs, written straight into the label storage when it can be
            n = g.width * batch
            if isinstance(wire_slice(g), slice):
                view = gar.input_view(g.name)
                self.cot.send_random(n, out=view.reshape(n, 2))
            else:
                view = self.cot.send_random(n).reshape(g.width, batch, 2)
            gar.set_zero_labels(g.name, view)

    def _send_tables(self, ex: _Execution, gar: Garbler) -> None:
        """Step 5: garble while sending: the tables, then (if the evaluator learns the output) the decoding bits."""
        n_tab, _, n_dec = self._stream_sizes(ex)
        total = n_tab + n_dec
        if total <= STREAM_BUFFER:
            # garble into a reused buffer; send each FRAME_TARGET bytes as they are ready (no copies)
            if self._stream is None or self._stream.nbytes < total:
                self._stream = np.empty(-(-total // 8), np.uint64)
            buf = self._stream.view(np.uint8)[:total]
            mv = memoryview(buf)
            sent, size = 0, FIRST_FRAME
            for done in gar.iter_into(mv[:n_tab], FIRST_FRAME):  # (no need to hear of less than a first frame)
                # frames grow from FIRST_FRAME to FRAME_TARGET and shrink again towards the end (at most
                # half of what remains), so the evaluator starts early and finishes soon after the garbler
                if done - sent >= max(FIRST_FRAME, min(size, (total - sent) >> 1), 1):
                    sent = self._send_stream(mv, sent, done)
                    size = min(2 * size, FRAME_TARGET)
            if n_dec:
                buf[n_tab:] = np.packbits(gar.decode_bits.reshape(-1), bitorder="little")
            self._send_stream(mv, sent, total)
        else:  # segment by segment through one reused scratch buffer
            need = gar.max_segment_words()
            if self._scratch is None or self._scratch.shape[0] < need:
                self._scratch = np.empty(need, np.uint64)
            out = _FrameWriter(self.channel)
            for seg in gar.iter_tables(scratch=self._scratch):
                out.write(seg)
            if n_dec:
                out.write(np.packbits(gar.decode_bits.reshape(-1), bitorder="little"))
            out.close()
        self.channel.flush()

    def _outputs(self, ex: _Execution, gar: Garbler) -> tuple[list | None, list[np.ndarray] | None]:
        """Step 6: if the garbler learns the output, the permute bits of the evaluator's output labels, decoded."""
        if ex.output not in ("both", "garbler"):
            return None, None
        n_out = gar.decode_bits.shape[0]
        lsb = self.channel.recv_bits(n_out * ex.batch).reshape(n_out, ex.batch)
        return _outputs_from_bits(ex.circuit, lsb ^ gar.decode_bits, ex.scalar)


class EvaluatorSession(_Session):
    """The evaluator side of a Yao session."""

    role = "evaluator"

    def __init__(self, channel: Channel, session_id: bytes | str = b"pairwise-2pc", *, ot_batch: int | None = None,
                 extra: bytes = b"") -> None:
        super().__init__(channel, session_id, ot_batch)
        t0 = time.perf_counter()
        hs = handshake(channel, "evaluator", session_id, RUNTIME_VERSION + extra, peer_role="garbler",
                       extra_label="circuit" if extra else "runtime")
        self.cot = COTReceiver(channel, hs.run_id, batch_size=FIRST_COT_BATCH if ot_batch is None else ot_batch)
        self.cot.setup()
        self.setup_seconds = time.perf_counter() - t0

    def run(self, circuit: Circuit, inputs: PartyInputs, *, output: str = "both", chunk: int | None = None,
            random: RandomGroups = (), batch: int | None = None) -> ExecutionResult:
        """Run one execution with the evaluator's ``inputs`` (same batch as the garbler's).

        ``random`` names the same groups as the garbler's call; the
        evaluator's random bits are the choice bits of random correlated OTs
        and are returned in ``random_bits``.  ``batch`` gives the batch when
        the evaluator feeds no input group (an int ``inputs`` is accepted
        for that too, as before).  The steps are those of the module docstring.
        """
        ex = self._open(circuit, inputs, output, chunk, random, batch)  # inputs checked before anything is sent
        mine = self._send_header(ex)  # 2. the execution headers: ours goes out ...
        ev = Evaluator(circuit, ex.batch, instance_offset=ex.offset, chunk=ex.chunk, keep_scratch=True)  # (while it travels)
        seed = self._check_header(ex, mine)  # 2. ... and the garbler's must match; it carries the label seed
        active = self._label_buffer(circuit, ex.batch)
        self._own_labels(ex, active)  # 3. the evaluator's labels, by correlated OT
        self._garbler_labels(ex, seed, active)  # 4. the garbler's active labels: its seed, expanded
        out_labels, dec = self._receive_tables(ex, ev, active)  # 5. the byte stream, evaluated as it arrives
        return self._finish(ex, *self._outputs(ex, out_labels, dec))  # 6. the garbler's output first, then ours

    def _open(self, circuit: Circuit, inputs: PartyInputs, output: str, chunk: int | None, random: RandomGroups,
              batch: int | None) -> _Execution:
        """The evaluator's inputs converted and checked, the batch resolved; the execution starts."""
        rnd, rnames = _check_run(circuit, output, random)
        e_groups = circuit.groups_of(EVALUATOR)
        ordinary = [g for g in e_groups if g.name not in rnames]
        if not ordinary and batch is None:  # the older spellings: the batch size as the inputs, or batch 1
            if isinstance(inputs, (int, np.integer)) and not isinstance(inputs, bool):
                batch = int(inputs)
                inputs = None
            elif not e_groups:
                inputs, batch = None, 1
        bits, batch_in, scalar = prepare_inputs(circuit, EVALUATOR, inputs, skip=rnames)
        batch = _resolve_batch(batch_in, bool(ordinary), batch, "evaluator")
        if not e_groups:
            scalar = True
        return self._start(circuit, output, rnd, rnames, bits, batch, scalar, chunk)

    def _own_labels(self, ex: _Execution, active: np.ndarray) -> None:
        """Step 3: active labels of the evaluator's groups: derandomized COTs (sends d = r xor x) for the ordinary
        ones, the choice bits of random COTs (nothing sent) for the random ones."""
        ordinary, randoms, n_ord, n_rnd = self._evaluator_groups(ex)
        if not n_ord + n_rnd:
            return
        batch = ex.batch
        self._size_cot_batch(n_ord + n_rnd)
        if n_ord:
            x = np.concatenate([b.T for b in ex.bits])  # (n, batch): wire-major, as the garbler reshapes
            lab = self.cot.recv_labels(x.reshape(-1))
            pos = 0
            for g in ordinary:
                active[g.wires] = lab[pos : pos + g.width * batch].reshape(g.width, batch, 2)
                pos += g.width * batch
        for g in randoms:
            k, w = g.width * batch, wire_slice(g)
            if isinstance(w, slice):
                r, _ = self.cot.recv_random(k, out=active[w].reshape(k, 2))
            else:
                r, t = self.cot.recv_random(k)
                active[w] = t.reshape(g.width, batch, 2)
            ex.random_bits[g.name] = np.ascontiguousarray(r.reshape(g.width, batch).T)

    @staticmethod
    def _garbler_labels(ex: _Execution, seed: bytes, active: np.ndarray) -> None:
        """Step 4: the garbler's active labels, the seed's AES-CTR stream group after group (no message)."""
        pos = 0
        for g in ex.circuit.groups_of(GARBLER):
            k, w = g.width * ex.batch, wire_slice(g)
            if isinstance(w, slice):
                ctr_blocks(seed, k, start=pos, out=active[w].reshape(k, 2))
            else:
                active[w] = ctr_blocks(seed, k, start=pos).reshape(g.width, ex.batch, 2)
            pos += k

    def _receive_tables(self, ex: _Execution, ev: Evaluator, active: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Step 5: evaluate the tables frame by frame as they arrive; then the decoding bits, if sent."""
        n_tab, n_out, n_dec = self._stream_sizes(ex)
        stream = _FrameReader(self.channel, n_tab + n_dec)
        out_labels = ev.evaluate(active, stream.pieces(n_tab))
        dec = _unpack_bits(stream.read(n_dec), n_out * ex.batch).reshape(n_out, ex.batch) if n_dec else None
        stream.finish()
        return out_labels, dec

    def _outputs(self, ex: _Execution, out_labels: np.ndarray,
                 dec: np.ndarray | None) -> tuple[list | None, list[np.ndarray] | None]:
        """Step 6: send the permute bits of the output labels if the garbler learns the output (first, so it
        is not kept waiting), then decode ours if we got the decoding bits."""
        if ex.output in ("both", "garbler"):
            self.channel.send_bits(((out_labels[..., 0] & np.uint64(1)).astype(bool)).reshape(-1))
            self.channel.flush()
        if dec is None:
            return None, None
        return _outputs_from_bits(ex.circuit, decode(out_labels, dec), ex.scalar)


def circuit_digest(circuit: Circuit, params: bytes = b"") -> bytes:
    """A short digest of a circuit and parameters for the session handshake's ``extra``."""
    return hashlib.sha256(b"circuit\x00" + circuit.content_hash.encode() + b"\x00" + params).digest()[:16]
