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
       hash, AND count, batch, chunk, instance offset, output mode) and then
       compare; a difference raises :class:`ExecutionMismatch` ("circuit
       mismatch ...") on *both* sides before any label moves.  (Each side
       sets up its garbler/evaluator while the headers travel.);
    3. the evaluator's input labels through derandomized correlated OTs
       (it sends d = r xor x; the garbler's zero labels are q xor d*Delta);
    4. the garbler's active input labels (one frame);
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

    Instance ids (the garbling tweak's high word) advance with every execution
    of a session, so the session Delta never sees a repeated tweak.

    COT batches: a session made with ``ot_batch=None`` runs its first IKNP
    batch with ``FIRST_COT_BATCH`` (1024) COTs and each later batch with at
    least twice as many (up to :data:`pairwise.mpc.iknp.DEFAULT_BATCH`), both sides
    deriving the size from the same state (see :meth:`_Session._size_cot_batch`);
    an explicit ``ot_batch`` is used as is.

Security model
    Semi-honest (honest-but-curious) parties, as in the papers (ustats, Sec. 5
    and App. C.2).  Labels, Delta and OT secrets come from ``os.urandom``.
    What each party learns: the outputs it is given, the circuit, the batch
    size; not the other's inputs.  The channel is assumed authentic and
    private (run it over TLS or a trusted network); a malicious peer can make
    outputs wrong, and that is not detected.

Failure policy
    Inputs are converted and range-checked before anything is sent; every
    receive has the channel's timeout; a mismatch of circuit or parameters is
    reported on both sides; a peer that disconnects raises
    :class:`pairwise.mpc.errors.PeerClosed` / :class:`pairwise.mpc.errors.ChannelError`; a
    stream of tables longer or shorter than the headers announce raises
    :class:`pairwise.mpc.errors.ProtocolError`.  RUNTIME_VERSION 3: tables hashed
    with TMMO (:mod:`pairwise.mpc.aes`); peers of earlier versions (another hash,
    or one frame per AND level) are refused at the handshake.

Follows
    Yao 1986; Lindell-Pinkas 2009 (semi-honest Yao); emp-sh2pc's input
    scheme; DESIGN.md "mpc: vectorized garbling" (two-party runtime).
"""

from __future__ import annotations

import hashlib
import struct
import time
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from pairwise.circuits.ir import Circuit, CircuitError, EVALUATOR, GARBLER, Party, bits_to_ints, ints_to_bits

from .aes import random_blocks
from .channel import Channel, handshake
from .errors import HandshakeError, ProtocolError
from .garble import Evaluator, Garbler, decode, default_chunk, split_outputs
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
RUNTIME_VERSION = b"pairwise-yao/3"
_EXEC = struct.Struct("<4s32sQQQQB")
_EXEC_MAGIC = b"EXEC"


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


def prepare_inputs(circuit: Circuit, party: Party | str, values) -> tuple[list[np.ndarray], int, bool]:
    """Convert a party's inputs to bit arrays, with range checks, before any secret moves.

    ``values``: a mapping group name -> int or sequence of ints, or a sequence
    with one entry per group of that party (in circuit order), or, if the party
    owns exactly one group, a bare int / sequence of ints.  Bool arrays of
    shape (batch, width) are taken as bits.  Returns (bits per group, batch,
    scalar) where ``scalar`` says every value was a single int.
    """
    party = Party(party)
    groups = circuit.groups_of(party)
    if isinstance(values, Mapping):
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
        seq = list(values)
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


def _exec_header(circuit: Circuit, batch: int, chunk: int, offset: int, output: str) -> bytes:
    return _EXEC.pack(_EXEC_MAGIC, bytes.fromhex(circuit.content_hash), circuit.n_and, batch, chunk, offset, OUTPUT_MODES.index(output))


def _compare_exec(mine: bytes, theirs: bytes, circuit: Circuit) -> None:
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
    for name, a, b in zip(names, m[3:], t[3:]):
        if a != b:
            if name == "output mode":
                a, b = OUTPUT_MODES[a] if a < 3 else a, OUTPUT_MODES[b] if b < 3 else b
            raise ExecutionMismatch(f"execution parameter mismatch: {name} is {a} here and {b} at the peer")


def _exchange_headers(channel: Channel, mine: bytes, circuit: Circuit) -> None:
    channel.send(mine)
    channel.flush()
    _check_peer_header(channel, mine, circuit)


def _check_peer_header(channel: Channel, mine: bytes, circuit: Circuit) -> None:
    theirs = channel.recv(max_size=_EXEC.size)
    _compare_exec(mine, bytes(theirs), circuit)


def _outputs_from_bits(circuit: Circuit, bits: np.ndarray, scalar: bool) -> tuple[list, list[np.ndarray]]:
    per_group = split_outputs(circuit, bits)
    outs = []
    for g, b in zip(circuit.outputs, per_group):
        ints = bits_to_ints(b, g.signed)
        outs.append(int(ints[0]) if scalar else ints)
    return outs, per_group


class _FrameWriter:
    """The garbler's per-execution byte stream, cut into frames of FRAME_TARGET..STREAM_FRAME bytes.

    Pieces smaller than a frame are collected and sent as one frame (one
    copy); large pieces go out as they are, in frames of at most
    STREAM_FRAME bytes.  A piece must not change after :meth:`write` (the
    engine's table segments are fresh buffers).
    """

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.limit = STREAM_FRAME
        self.target = min(FRAME_TARGET, self.limit)
        self.parts: list[memoryview] = []
        self.size = 0

    def write(self, data) -> None:
        mv = memoryview(data).cast("B")
        if self.size + len(mv) < self.target:
            if len(mv):
                self.parts.append(mv)
                self.size += len(mv)
            return
        if self.parts:  # complete the pending frame with the head of this piece
            head = self.target - self.size
            self.parts.append(mv[:head])
            self.channel.send(b"".join(self.parts))
            self.parts, self.size = [], 0
            mv = mv[head:]
        while len(mv) >= self.target:
            n = min(len(mv), self.limit)
            self.channel.send(mv[:n])
            mv = mv[n:]
        if len(mv):
            self.parts, self.size = [mv], len(mv)

    def close(self) -> None:
        if self.parts:
            self.channel.send(b"".join(self.parts))
            self.parts, self.size = [], 0


class _FrameReader:
    """The evaluator's view of that stream: exactly ``total`` bytes, split into frames in any way."""

    def __init__(self, channel: Channel, total: int) -> None:
        self.channel = channel
        self.left = total  # bytes not yet received
        self.cur = memoryview(b"")
        self.pos = 0

    def _next_frame(self) -> None:
        if self.left <= 0:
            raise ProtocolError("the garbler's execution stream is longer than announced")
        frame = self.channel.recv_frame(max_size=min(STREAM_FRAME, self.left))
        if not frame:
            raise ProtocolError("empty frame in the garbler's execution stream")
        self.left -= len(frame)
        self.cur, self.pos = memoryview(frame), 0

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


def _unpack_bits(data: memoryview, n: int) -> np.ndarray:
    """``n`` bits packed as by :meth:`Channel.send_bits` (padding bits must be zero)."""
    packed = np.frombuffer(data, dtype=np.uint8)
    if n % 8 and packed[-1] >> (n % 8):
        raise ProtocolError(f"decoding bits for {n} outputs have non-zero padding bits")
    return np.unpackbits(packed, count=n, bitorder="little").view(np.bool_)


class _Session:
    role: str

    def __init__(self, channel: Channel, session_id: bytes | str, ot_batch: int | None) -> None:
        self.channel = channel
        self.session_id = session_id
        self._ot_batch = ot_batch
        self.executions = 0
        self._next_instance = 0
        self.setup_seconds = 0.0

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

    def close(self) -> None:
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
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
        self.cot.setup()
        self.setup_seconds = time.perf_counter() - t0

    def _send_stream(self, mv: memoryview, start: int, end: int) -> int:
        """Send ``mv[start:end]`` in frames of at most STREAM_FRAME bytes; returns ``end``."""
        while start < end:
            n = min(end - start, STREAM_FRAME)
            self.channel.send(mv[start : start + n])
            start += n
        return end

    def run(self, circuit: Circuit, inputs, *, output: str = "both", chunk: int | None = None) -> ExecutionResult:
        """Run one execution (batch = the inputs' batch size) with the garbler's ``inputs``."""
        if output not in OUTPUT_MODES:
            raise ValueError(f"output must be one of {OUTPUT_MODES}, got {output!r}")
        bits, batch, scalar = prepare_inputs(circuit, GARBLER, inputs)
        if not circuit.groups_of(GARBLER):
            batch = None
        t0 = time.perf_counter()
        c0 = self._counters()
        # the batch size comes from the garbler's inputs; a garbler without inputs learns it from the header
        if batch is None:
            raise CircuitError("the garbler must own at least one input group (it fixes the batch size)")
        chunk = default_chunk(circuit, batch) if chunk is None else chunk
        offset = self._next_instance
        mine = _exec_header(circuit, batch, chunk, offset, output)
        self.channel.send(mine)
        self.channel.flush()
        # set up the garbling while the header travels: fresh labels for the garbler's inputs, its active labels
        gar = Garbler(circuit, batch, delta=self.delta, instance_offset=offset, chunk=chunk)
        active = np.concatenate([gar.encode(g.name, b) for g, b in zip(circuit.groups_of(GARBLER), bits)])
        _check_peer_header(self.channel, mine, circuit)
        ev_groups = circuit.groups_of(EVALUATOR)
        n_ev = sum(g.width for g in ev_groups)
        if n_ev:
            self._size_cot_batch(n_ev * batch)
            zero = self.cot.send_labels(n_ev * batch).reshape(n_ev, batch, 2)
            pos = 0
            for g in ev_groups:
                gar.set_zero_labels(g.name, zero[pos : pos + g.width])
                pos += g.width
        self.channel.send_blocks(active)
        # then one byte stream: the tables and the decoding bits
        n_tab = 32 * circuit.n_and * batch
        n_out = sum(g.width for g in circuit.outputs)
        n_dec = -(-n_out * batch // 8) if output in ("both", "evaluator") else 0
        total = n_tab + n_dec
        if total <= STREAM_BUFFER:
            # garble into a reused buffer; send each FRAME_TARGET bytes as they are ready (no copies)
            if self._stream is None or self._stream.nbytes < total:
                self._stream = np.empty(-(-total // 8), np.uint64)
            buf = self._stream.view(np.uint8)[:total]
            mv = memoryview(buf)
            sent, size = 0, FIRST_FRAME
            for done in gar.iter_into(mv[:n_tab]):
                # frames grow from FIRST_FRAME to FRAME_TARGET and shrink again towards the end (at most
                # half of what remains), so the evaluator starts early and finishes soon after the garbler
                if done - sent >= max(FIRST_FRAME, min(size, (total - sent) >> 1), 1):
                    sent = self._send_stream(mv, sent, done)
                    size = min(2 * size, FRAME_TARGET)
            if n_dec:
                buf[n_tab:] = np.packbits(gar.decode_bits.reshape(-1), bitorder="little")
            self._send_stream(mv, sent, total)
        else:
            out = _FrameWriter(self.channel)
            for seg in gar.iter_tables():
                out.write(seg)
            if n_dec:
                out.write(np.packbits(gar.decode_bits.reshape(-1), bitorder="little"))
            out.close()
        self.channel.flush()
        outs = per_group = None
        if output in ("both", "garbler"):
            n_out = gar.decode_bits.shape[0]
            lsb = self.channel.recv_bits(n_out * batch).reshape(n_out, batch)
            outs, per_group = _outputs_from_bits(circuit, lsb ^ gar.decode_bits, scalar)
        self._next_instance += batch
        self.executions += 1
        c1 = self._counters()
        return ExecutionResult(outs, per_group, circuit.n_and * batch, batch, c1[0] - c0[0], c1[1] - c0[1],
                               c1[2] - c0[2], c1[3] - c0[3], time.perf_counter() - t0)


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

    def run(self, circuit: Circuit, inputs, *, output: str = "both", chunk: int | None = None) -> ExecutionResult:
        """Run one execution with the evaluator's ``inputs`` (same batch as the garbler's)."""
        if output not in OUTPUT_MODES:
            raise ValueError(f"output must be one of {OUTPUT_MODES}, got {output!r}")
        ev_groups = circuit.groups_of(EVALUATOR)
        if ev_groups:
            bits, batch, scalar = prepare_inputs(circuit, EVALUATOR, inputs)
        else:
            bits, batch, scalar = [], int(inputs) if isinstance(inputs, int) else 1, True
        t0 = time.perf_counter()
        c0 = self._counters()
        chunk = default_chunk(circuit, batch) if chunk is None else chunk
        offset = self._next_instance
        mine = _exec_header(circuit, batch, chunk, offset, output)
        self.channel.send(mine)
        self.channel.flush()
        ev = Evaluator(circuit, batch, instance_offset=offset, chunk=chunk)  # while the header travels
        _check_peer_header(self.channel, mine, circuit)
        n_in = circuit.n_inputs
        active = np.empty((n_in, batch, 2), np.uint64)
        if ev_groups:
            x = np.concatenate([b.T for b in bits])  # (n_ev, batch): wire-major, as the garbler reshapes
            self._size_cot_batch(x.size)
            lab = self.cot.recv_labels(x.reshape(-1)).reshape(x.shape[0], batch, 2)
            pos = 0
            for g in ev_groups:
                active[g.wires] = lab[pos : pos + g.width]
                pos += g.width
        gwires = [g.wires for g in circuit.groups_of(GARBLER)]
        n_g = sum(w.shape[0] for w in gwires)
        n_out = sum(g.width for g in circuit.outputs)
        n_dec = -(-n_out * batch // 8) if output in ("both", "evaluator") else 0
        n_tab = 32 * circuit.n_and * batch
        glab = self.channel.recv_blocks((n_g * batch,)).reshape(n_g, batch, 2) if n_g else None
        pos = 0
        for w in gwires:
            active[w] = glab[pos : pos + w.shape[0]]
            pos += w.shape[0]
        stream = _FrameReader(self.channel, n_tab + n_dec)
        out_labels = ev.evaluate(active, stream.pieces(n_tab))
        dec = _unpack_bits(stream.read(n_dec), n_out * batch).reshape(n_out, batch) if n_dec else None
        stream.finish()
        if output in ("both", "garbler"):  # first unblock the garbler, then decode for ourselves
            self.channel.send_bits(((out_labels[..., 0] & np.uint64(1)).astype(bool)).reshape(-1))
            self.channel.flush()
        outs = per_group = None
        if dec is not None:
            outs, per_group = _outputs_from_bits(circuit, decode(out_labels, dec), scalar)
        self._next_instance += batch
        self.executions += 1
        c1 = self._counters()
        return ExecutionResult(outs, per_group, circuit.n_and * batch, batch, c1[0] - c0[0], c1[1] - c0[1],
                               c1[2] - c0[2], c1[3] - c0[3], time.perf_counter() - t0)


def circuit_digest(circuit: Circuit, params: bytes = b"") -> bytes:
    """A short digest of a circuit and parameters for the session handshake's ``extra``."""
    return hashlib.sha256(b"circuit\x00" + circuit.content_hash.encode() + b"\x00" + params).digest()[:16]
