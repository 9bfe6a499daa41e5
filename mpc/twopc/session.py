"""The two roles of a Yao session: :class:`GarblerSession` and :class:`EvaluatorSession`.

What it does
    A session runs the steps of :mod:`pairwise.mpc.twopc` over one channel:
    the setup once (handshake, label key, base OTs inside IKNP), then any
    number of executions, each one phase method per step (numbered as in the
    package docstring).  What an execution's shape fixes (groups, COT counts,
    stream sizes, header) is computed once per circuit and parameters and
    kept (:class:`_Shape`).

Security model
    Semi-honest parties (package docstring).  Delta, the label key and the
    garbler's random bits come from ``os.urandom``; the evaluator's random
    bits are COT choice bits.  After any failure inside an execution the
    session is unusable (the two sides may be at different points of the
    protocol): later calls raise :class:`~pairwise.mpc.errors.ProtocolError`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Self

import numpy as np

from pairwise.circuits.ir import EVALUATOR, GARBLER, Circuit, InputGroup

from ..aes import random_blocks
from ..basecot import BaseCOTReceiver, BaseCOTSender
from ..channel import Channel, handshake
from ..errors import HandshakeError, ProtocolError
from ..garble import Evaluator, Garbler, decode, default_chunk, urandom_bits, wire_slice
from ..garble.garbler import Regarbler
from ..iknp import DEFAULT_BATCH, COTReceiver, COTSender, _IKNPParty
from . import wire as _w
from .inputs import (
    OUTPUT_MODES,
    PartyInputs,
    RandomGroups,
    _scalar_bits,
    outputs_from_bits,
    prepare_inputs,
    random_groups,
    resolve_batch,
)
from .wire import EXEC, ExecutionMismatch, FrameReader, FrameWriter, LabelStream, compare_headers, unpack_bits

__all__ = ["GarblerSession", "EvaluatorSession", "ExecutionResult", "FIRST_COT_BATCH", "COT_SOURCES"]
#: A fresh session takes its correlated OTs straight from base OTs (``cot="base"``) when the evaluator has
#: at most this many input bits, else from 128 base OTs and IKNP (benchmarks/RESULTS.md, "A fresh session's
#: OTs": up to 79 bits base OTs cost a fifth to a tenth; even at 128; IKNP wins at 256).
BASE_COT_MAX_BITS = 128


def fresh_cot(circuit: Circuit) -> str:
    """The COT source of a one-execution session of ``circuit``; both parties derive it from the circuit."""
    n = sum(g.width for g in circuit.groups_of(EVALUATOR))
    return "base" if n <= BASE_COT_MAX_BITS else "iknp"


#: Where the correlated OTs come from: ``iknp`` (128 base OTs once, then extension batches) or ``base``
#: (one base OT per COT, no extension: for sessions with few evaluator input bits, mpc.basecot).
COT_SOURCES = ("iknp", "base")

#: COT batch of a session created with ``ot_batch=None``: the first IKNP batch, then each new
#: batch is at least twice the previous one, up to :data:`pairwise.mpc.iknp.DEFAULT_BATCH`.
FIRST_COT_BATCH = 1024
_HDR = EXEC.size
_ONE = np.uint64(1)
#: The garbler accepts an evaluator request of up to this many bytes more than it expects, so that a peer
#: with a somewhat larger circuit still gets "circuit mismatch" (from the header) rather than a frame error.
REQUEST_SLACK = 8192


@dataclass
class ExecutionResult:
    """Outputs of one execution and what it cost on the wire (this party's view).

    ``outputs`` has one entry per output group, decoded as the group declares
    (signed or not): a Python int for a batch of 1 given as scalars, else an
    array/list of ints; ``None`` when this party does not learn the output.
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

    def named_outputs(self, circuit: Circuit) -> dict | None:
        """The outputs as {output group name: value} (``None`` when this party does not learn them)."""
        if self.outputs is None:
            return None
        return {g.name: v for g, v in zip(circuit.outputs, self.outputs)}

    def as_dict(self) -> dict:
        def conv(v):
            if isinstance(v, (np.ndarray, list)):
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


def _yield_every(ends: list[int]) -> int:
    """How often the garbler needs to hear of progress: once per frame (each yield is a round trip through
    the engine's Python driver; a frame then ends within one AND batch after its share of the stream)."""
    return max(1 << 12, ends[0] - 32)


def _scalar_inputs(inputs, ordinary: list[InputGroup]) -> list[np.ndarray] | None:
    """Bits of ``{group: int}`` naming exactly the ordinary groups (range-checked), else None (general path)."""
    if type(inputs) is not dict or len(inputs) != len(ordinary) or not ordinary:
        return None
    out = []
    for g in ordinary:
        v = inputs.get(g.name)
        if type(v) is not int:
            return None
        out.append(_scalar_bits(v, g))
    return out


def _bit_masks(bits: np.ndarray) -> np.ndarray:
    """(batch, width) bits -> (width, batch, 1) uint64 masks, all ones where the bit is 1 (no branch on a bit)."""
    return np.negative(bits.T.astype(np.uint64))[..., None]


class _Shape:
    """What a circuit and the execution parameters fix, the same on both sides; computed once and kept."""

    __slots__ = (
        "circuit",
        "batch",
        "chunk",
        "output",
        "random",
        "rnames",
        "g_groups",
        "e_ord",
        "e_rnd",
        "n_ord",
        "n_rnd",
        "n_g",
        "n_tab",
        "n_out",
        "n_dec",
        "header_args",
        "ord_slice",
        "gar",
        "ev",
        "frames",
    )

    def __init__(self, circuit: Circuit, batch: int, chunk: int, output: str, rnd: tuple[InputGroup, ...]) -> None:
        self.circuit, self.batch, self.chunk, self.output, self.random = circuit, batch, chunk, output, rnd
        self.rnames = frozenset(g.name for g in rnd)
        self.g_groups = circuit.groups_of(GARBLER)
        e_groups = circuit.groups_of(EVALUATOR)
        self.e_ord = tuple(g for g in e_groups if g.name not in self.rnames)
        self.e_rnd = tuple(g for g in e_groups if g.name in self.rnames)
        self.n_ord = sum(g.width for g in self.e_ord) * batch
        self.n_rnd = sum(g.width for g in self.e_rnd) * batch
        self.n_g = sum(g.width for g in self.g_groups) * batch
        self.n_tab = 32 * circuit.n_and * batch
        self.n_out = sum(g.width for g in circuit.outputs)
        self.n_dec = -(-self.n_out * batch // 8) if output in ("both", "evaluator") else 0
        self.header_args = (
            _w.EXEC_MAGIC,
            bytes.fromhex(circuit.content_hash),
            circuit.n_and,
            batch,
            chunk,
            OUTPUT_MODES.index(output),
            _w.random_digest(rnd),
        )
        # one ordinary evaluator group with consecutive wires: its COTs go straight into the label storage
        self.ord_slice = wire_slice(self.e_ord[0]) if len(self.e_ord) == 1 else None
        if not isinstance(self.ord_slice, slice):
            self.ord_slice = None
        self.gar: Regarbler | None = None  # (garbler) the session's Regarbler of this shape, once made
        self.ev: Evaluator | None = None  # (evaluator) its Evaluator, its instance offset set per execution
        self.frames: dict[int, tuple[list[int], int]] = {}  # (garbler) bytes already sent -> frame ends, yield hint

    def header(self, offset: int) -> bytes:
        m, h, n_and, batch, chunk, mode, digest = self.header_args
        return EXEC.pack(m, h, n_and, batch, chunk, offset, mode, digest)


@dataclass
class _Execution:
    """One execution as both sides' phases see it: its shape, this party's inputs, its costs so far."""

    shape: _Shape
    bits: list[np.ndarray]  # this party's ordinary input groups, in circuit order
    scalar: bool
    offset: int  # instance id of the first instance
    header: bytes
    t0: float
    c0: tuple[int, int, int, int]
    random_bits: dict[str, np.ndarray] = field(default_factory=dict)
    #: the headers were exchanged on their own (the COT pool had to grow first): the stream starts without one
    headers_apart: bool = False

    @property
    def batch(self) -> int:
        return self.shape.batch

    @property
    def circuit(self) -> Circuit:
        return self.shape.circuit


class _Session:
    role: str
    peer_role: str
    cot: _IKNPParty

    def __init__(
        self, channel: Channel, session_id: bytes | str, ot_batch: int | None, extra: bytes, cot: str = "iknp"
    ) -> None:
        if cot not in COT_SOURCES:
            raise ValueError(f"cot must be one of {COT_SOURCES}, got {cot!r}")
        self.cot_source = cot
        self.channel = channel
        self.session_id = session_id
        self._ot_batch = ot_batch
        self.executions = 0
        self._next_instance = 0
        self.setup_seconds = 0.0
        self._labels: np.ndarray | None = None  # reused storage of the input labels (see _label_buffer)
        self._shapes: dict[tuple, _Shape] = {}
        self._calls: dict[tuple, tuple] = {}  # per circuit, output mode and random groups: what run() resolves
        self._broken: BaseException | None = None
        self._t_setup = time.perf_counter()
        my_extra = _w.session_extra(extra, cot)
        try:
            self._hs = handshake(
                channel,
                self.role,
                session_id,
                my_extra,
                peer_role=self.peer_role,
                extra_label="circuit" if extra else "runtime",
            )
        except HandshakeError as exc:
            err = _w.explain_handshake_error(exc, my_extra)
            if err is exc:
                raise
            raise err from None

    # -- shared helpers
    def _shape(
        self, circuit: Circuit, batch: int, chunk: int | None, output: str, rnd: tuple[InputGroup, ...]
    ) -> _Shape:
        key = (id(circuit), batch, chunk, output, tuple(g.name for g in rnd))
        sh = self._shapes.get(key)
        if sh is None or sh.circuit is not circuit:
            if len(self._shapes) >= 64:
                self._shapes.clear()
            sh = self._shapes[key] = _Shape(
                circuit, batch, default_chunk(circuit, batch) if chunk is None else chunk, output, rnd
            )
        return sh

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
        if short <= 0:
            return
        if self.cot_source == "base":  # exactly the shortfall: every COT costs a base OT
            self.cot.batch_size = short
            return
        if self._ot_batch is not None:
            return
        size = -(-short // FIRST_COT_BATCH) * FIRST_COT_BATCH
        if self.cot.batches:
            size = max(size, 2 * self.cot.batch_size)
        self.cot.batch_size = min(size, DEFAULT_BATCH)

    def _counters(self) -> tuple[int, int, int, int]:
        ch = self.channel
        return ch.bytes_sent, ch.bytes_received, ch.messages_sent, ch.messages_received

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise ProtocolError(
                f"this {self.role} session is unusable after an earlier failure ({self._broken}); open a new session"
            )

    def _start(
        self,
        circuit: Circuit,
        output: str,
        random: RandomGroups,
        chunk: int | None,
        inputs: PartyInputs,
        batch: int | None,
        party,
    ) -> _Execution:
        """Step 1: the inputs converted and checked (nothing is sent before); the clock and counters start."""
        self._check_usable()
        rkey = random if isinstance(random, str) or random is None else tuple(random)
        key = (id(circuit), output, rkey)
        hit = self._calls.get(key)
        if hit is None or hit[0] is not circuit:
            if output not in OUTPUT_MODES:
                raise ValueError(f"output must be one of {OUTPUT_MODES}, got {output!r}")
            rnd = random_groups(circuit, rkey)
            rnames = frozenset(g.name for g in rnd)
            own = circuit.groups_of(party)
            if len(self._calls) >= 64:
                self._calls.clear()
            hit = self._calls[key] = (circuit, rnd, rnames, own, [g for g in own if g.name not in rnames])
        _, rnd, rnames, own, ordinary = hit
        if party == EVALUATOR and not ordinary and batch is None:  # older spellings: the batch as the inputs, or 1
            if isinstance(inputs, (int, np.integer)) and not isinstance(inputs, bool):
                batch, inputs = int(inputs), None
            elif not own:
                inputs, batch = None, 1
        fast = _scalar_inputs(inputs, ordinary)
        if fast is not None:  # the common call: {group: int} for every ordinary group, batch 1
            bits, batch_in, scalar = fast, 1, True
        else:
            bits, batch_in, scalar = prepare_inputs(circuit, party, inputs, skip=rnames)
        batch = resolve_batch(batch_in, bool(ordinary), batch, party.value)
        if party == EVALUATOR and not own:
            scalar = True
        sh = self._shape(circuit, batch, chunk, output, rnd)
        t0 = time.perf_counter()
        return _Execution(sh, bits, scalar, self._next_instance, sh.header(self._next_instance), t0, self._counters())

    def _finish(self, ex: _Execution, outs: list | None, per_group: list[np.ndarray] | None) -> ExecutionResult:
        """Close the execution: advance the instance ids (fresh tweaks for the next one) and count its cost."""
        self._next_instance += ex.batch
        self.executions += 1
        c0, c1 = ex.c0, self._counters()
        return ExecutionResult(
            outs,
            per_group,
            ex.circuit.n_and * ex.batch,
            ex.batch,
            c1[0] - c0[0],
            c1[1] - c0[1],
            c1[2] - c0[2],
            c1[3] - c0[3],
            time.perf_counter() - ex.t0,
            random_bits=ex.random_bits,
        )

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

    role, peer_role = "garbler", "evaluator"

    def __init__(
        self,
        channel: Channel,
        session_id: bytes | str = b"pairwise-2pc",
        *,
        ot_batch: int | None = None,
        extra: bytes = b"",
        cot: str = "iknp",
    ) -> None:
        super().__init__(channel, session_id, ot_batch, extra, cot)
        self.delta = random_blocks(1)[0]
        self.delta[0] |= np.uint64(1)
        key = LabelStream.new_key()
        channel.send(key)  # the label key, once per session: no message per execution for the garbler's inputs
        self._label_stream = LabelStream(key)
        self.cot: COTSender | BaseCOTSender
        if cot == "base":
            self.cot = BaseCOTSender(channel, self.delta, self._hs.run_id)
        else:
            self.cot = COTSender(
                channel, self.delta, self._hs.run_id, batch_size=FIRST_COT_BATCH if ot_batch is None else ot_batch
            )
        self._stream: np.ndarray | None = None  # reused buffer of the per-execution stream
        self._scratch: np.ndarray | None = None  # reused buffer of the table segments of larger streams
        self.cot.setup()
        self.setup_seconds = time.perf_counter() - self._t_setup

    def run(
        self,
        circuit: Circuit,
        inputs: PartyInputs,
        *,
        output: str = "both",
        chunk: int | None = None,
        random: RandomGroups = (),
        batch: int | None = None,
    ) -> ExecutionResult:
        """Run one execution with the garbler's ``inputs``.

        ``random``: names of the input groups (of either party) whose bits are
        random and private to their owner; the evaluator must name the same
        groups.  The garbler's random bits come from ``os.urandom`` and are
        returned in ``random_bits``; ``inputs`` holds only the other groups.
        The batch is that of the inputs, or ``batch`` when the garbler feeds
        no input group.  Steps as in the package docstring.
        """
        ex = self._start(circuit, output, random, chunk, inputs, batch, GARBLER)  # 1. inputs checked
        try:
            zero = self._label_buffer(ex.circuit, ex.batch)  # the zero labels of every input wire
            self._own_labels(ex, zero)  # 3. the garbler's groups: the label stream, no message
            d = self._receive_request(ex)  # 2. the evaluator's header (checked) and correction bits
            self._evaluator_labels(ex, zero, d)  # 4. the evaluator's groups' zero labels, from COTs
            gar = self._garbler(ex, zero)
            self._send_stream(ex, gar, zero)  # 5. our header, the tables, the decoding bits
            outs = self._outputs(ex, gar)  # 6. the output, if the garbler learns it
        except BaseException as exc:
            self._broken = exc
            raise
        return self._finish(ex, *outs)

    def _own_labels(self, ex: _Execution, zero: np.ndarray) -> None:
        """Step 3: zero labels A xor b*Delta of the garbler's groups, A the next blocks of the label stream."""
        sh = ex.shape
        batch = sh.batch
        it = iter(ex.bits)
        for g in sh.g_groups:  # the stream, group after group, wire-major
            if g.name in sh.rnames:
                b = ex.random_bits[g.name] = urandom_bits(batch, g.width)
            else:
                b = next(it)
            w = wire_slice(g)
            n = g.width * batch
            if isinstance(w, slice):  # expanded straight into the label storage
                view = zero[w]
                self._label_stream.fill(view.reshape(n, 2))
                view ^= _bit_masks(b) & self.delta
            else:
                a = np.empty((g.width, batch, 2), np.uint64)
                self._label_stream.fill(a.reshape(n, 2))
                zero[w] = a ^ (_bit_masks(b) & self.delta)

    def _garbler(self, ex: _Execution, zero: np.ndarray) -> Garbler | Regarbler:
        """The Garbler of the execution, with every input wire's zero label from ``zero``: for streams that fit
        the reused buffer, the shape's Regarbler (checks and buffers once per session)."""
        sh = ex.shape
        if _HDR + sh.n_tab + sh.n_dec <= _w.STREAM_BUFFER:
            if sh.gar is None:
                sh.gar = Regarbler(sh.circuit, sh.batch, self.delta, sh.chunk)
            return sh.gar
        if zero.nbytes <= 1 << 16:  # small: one copy in the constructor
            return Garbler(
                sh.circuit,
                sh.batch,
                delta=self.delta,
                input_zero=zero,
                instance_offset=ex.offset,
                chunk=sh.chunk,
                keep_scratch=True,
            )
        gar = Garbler(
            sh.circuit,
            sh.batch,
            delta=self.delta,
            instance_offset=ex.offset,
            chunk=sh.chunk,
            keep_scratch=True,
            input_buffer=zero,
        )  # large batches: no copy, the groups set in place
        for g in sh.circuit.inputs:
            w = wire_slice(g)
            gar.set_zero_labels(g.name, zero[w] if isinstance(w, slice) else zero[w].copy())
        return gar

    def _receive_request(self, ex: _Execution) -> np.ndarray | None:
        """Step 2: the evaluator's header, compared with ours (on a mismatch ours goes back alone and both
        sides raise), and its correction bits d when they came in the same frame."""
        sh = ex.shape
        self._size_cot_batch(sh.n_ord + sh.n_rnd)
        combined = self.cot.available >= sh.n_ord + sh.n_rnd  # (the evaluator decides alike)
        expect = _HDR + (-(-sh.n_ord // 8) if combined else 0)
        frame = self.channel.recv_frame(max_size=expect + REQUEST_SLACK)
        try:
            compare_headers(ex.header, memoryview(frame)[:_HDR], sh.circuit)
        except ExecutionMismatch:
            self.channel.send(ex.header)  # the evaluator reads it where it expects our stream, and raises too
            self.channel.flush()
            raise
        if len(frame) != expect:
            raise ProtocolError(f"the evaluator's request has {len(frame)} bytes, expected {expect}")
        if not combined:  # the pool must grow first: our header goes back now, the evaluator waits for it
            self.channel.send(ex.header)
            self.channel.flush()
            ex.headers_apart = True
            return None
        return unpack_bits(memoryview(frame)[_HDR:], sh.n_ord, "the evaluator's correction bits")

    def _evaluator_labels(self, ex: _Execution, zero: np.ndarray, d: np.ndarray | None) -> None:
        """Step 4: zero labels q xor d*Delta of the evaluator's ordinary groups, q of its random ones."""
        sh = ex.shape
        if sh.n_ord:
            if sh.ord_slice is not None:  # straight into the label storage
                q = self.cot.send_random(sh.n_ord, out=zero[sh.ord_slice].reshape(sh.n_ord, 2))
            else:
                q = self.cot.send_random(sh.n_ord)
            if d is None:  # (the request was the header alone: an IKNP batch came between)
                d = self.channel.recv_bits(sh.n_ord)
            q ^= d.view(np.uint8).astype(np.uint64)[:, None] * self.delta  # no index depends on d
            if sh.ord_slice is None:
                pos = 0
                for g in sh.e_ord:
                    n = g.width * sh.batch
                    zero[g.wires] = q[pos : pos + n].reshape(g.width, sh.batch, 2)
                    pos += n
        for g in sh.e_rnd:  # q of random COTs, written straight into the label storage when it can be
            n, w = g.width * sh.batch, wire_slice(g)
            if isinstance(w, slice):
                self.cot.send_random(n, out=zero[w].reshape(n, 2))
            else:
                zero[w] = self.cot.send_random(n).reshape(g.width, sh.batch, 2)

    def _send_stream(self, ex: _Execution, gar: Garbler | Regarbler, zero: np.ndarray) -> None:
        """Step 5: garble while sending: our header, the tables, then (if the evaluator learns the output) the
        decoding bits, in the frames of :func:`pairwise.mpc.twopc.wire.frame_ends`."""
        sh = ex.shape
        n_tab, n_dec = sh.n_tab, sh.n_dec
        total = _HDR + n_tab + n_dec
        if total <= _w.STREAM_BUFFER:
            # garble into a reused buffer after our header; send each piece as it is ready (no copies)
            if self._stream is None or self._stream.nbytes < total:
                self._stream = np.empty(-(-total // 8), np.uint64)
            buf = self._stream.view(np.uint8)[:total]
            buf[:_HDR] = np.frombuffer(ex.header, np.uint8)
            mv = memoryview(buf)
            sent = _HDR if ex.headers_apart else 0  # (the header went out on its own already)
            plan = sh.frames.get(sent)
            if plan is None:
                ends = [sent + e for e in _w.frame_ends(total - sent)]
                plan = sh.frames[sent] = (ends, _yield_every(ends))
            ends, every = plan
            i = 0
            assert isinstance(gar, Regarbler)  # (_garbler: the stream fits the buffer)
            words = self._stream[_HDR // 8 : (_HDR + n_tab) // 8]
            for done in gar.iter_into(zero, ex.offset, words, every):
                done += _HDR
                if done >= ends[i] and i < len(ends) - 1:  # a frame is complete: out it goes, while we garble on
                    sent = self._send_range(mv, sent, done)
                    while i < len(ends) - 1 and ends[i] <= done:
                        i += 1
            if n_dec:
                buf[_HDR + n_tab :] = np.packbits(gar.decode_bits.reshape(-1), bitorder="little")  # type: ignore[union-attr]
            self._send_range(mv, sent, total)
        else:  # segment by segment through one reused scratch buffer
            assert isinstance(gar, Garbler)
            need = gar.max_segment_words()
            if self._scratch is None or self._scratch.shape[0] < need:
                self._scratch = np.empty(need, np.uint64)
            out = FrameWriter(self.channel)
            if not ex.headers_apart:
                out.write(ex.header)
            for seg in gar.iter_tables(scratch=self._scratch):
                out.write(seg)
            if n_dec:
                out.write(np.packbits(gar.decode_bits.reshape(-1), bitorder="little"))  # type: ignore[union-attr]
            out.close()
        self.channel.flush()

    def _send_range(self, mv: memoryview, start: int, end: int) -> int:
        """Send ``mv[start:end]`` in frames of at most STREAM_FRAME bytes; returns ``end``."""
        while start < end:
            n = min(end - start, _w.STREAM_FRAME)
            self.channel.send(mv[start : start + n])
            start += n
        return end

    def _outputs(self, ex: _Execution, gar: Garbler | Regarbler) -> tuple[list | None, list[np.ndarray] | None]:
        """Step 6: if the garbler learns the output, the permute bits of the evaluator's output labels, decoded."""
        if ex.shape.output not in ("both", "garbler"):
            return None, None
        assert gar.decode_bits is not None  # garbled in step 5
        n_out = gar.decode_bits.shape[0]
        lsb = self.channel.recv_bits(n_out * ex.batch).reshape(n_out, ex.batch)
        return outputs_from_bits(ex.circuit, lsb ^ gar.decode_bits, ex.scalar)


class EvaluatorSession(_Session):
    """The evaluator side of a Yao session."""

    role, peer_role = "evaluator", "garbler"

    def __init__(
        self,
        channel: Channel,
        session_id: bytes | str = b"pairwise-2pc",
        *,
        ot_batch: int | None = None,
        extra: bytes = b"",
        cot: str = "iknp",
    ) -> None:
        super().__init__(channel, session_id, ot_batch, extra, cot)
        key = channel.recv(max_size=16)
        if len(key) != 16:
            raise ProtocolError(f"expected the garbler's 16-byte label key, got {len(key)} bytes")
        self._label_stream = LabelStream(key)
        self.cot: COTReceiver | BaseCOTReceiver
        if cot == "base":
            self.cot = BaseCOTReceiver(channel, self._hs.run_id)
        else:
            self.cot = COTReceiver(
                channel, self._hs.run_id, batch_size=FIRST_COT_BATCH if ot_batch is None else ot_batch
            )
        self.cot.setup()
        self.setup_seconds = time.perf_counter() - self._t_setup

    def run(
        self,
        circuit: Circuit,
        inputs: PartyInputs,
        *,
        output: str = "both",
        chunk: int | None = None,
        random: RandomGroups = (),
        batch: int | None = None,
    ) -> ExecutionResult:
        """Run one execution with the evaluator's ``inputs`` (same batch as the garbler's).

        ``random`` names the same groups as the garbler's call; the
        evaluator's random bits are the choice bits of random correlated OTs
        and are returned in ``random_bits``.  ``batch`` gives the batch when
        the evaluator feeds no input group (an int ``inputs`` is accepted
        for that too, as before).  Steps as in the package docstring.
        """
        ex = self._start(circuit, output, random, chunk, inputs, batch, EVALUATOR)  # 1. inputs checked
        try:
            sh = ex.shape
            active = self._label_buffer(sh.circuit, sh.batch)
            self._send_request(ex, active)  # 2. + 4. our header and correction bits; our labels from COTs
            self._garbler_labels(ex, active)  # 3. the garbler's active labels: the label stream
            ev = sh.ev
            if ev is None:
                ev = sh.ev = Evaluator(
                    sh.circuit, sh.batch, instance_offset=ex.offset, chunk=sh.chunk, keep_scratch=True
                )
            ev.instance_offset = ex.offset  # (the shape checked batch and chunk; _finish keeps offsets growing)
            out_labels, dec = self._receive_stream(ex, ev, active)  # 5. evaluated as it arrives
            outs = self._outputs(ex, out_labels, dec)  # 6. the garbler's output first, then ours
        except BaseException as exc:
            self._broken = exc
            raise
        return self._finish(ex, *outs)

    def _send_request(self, ex: _Execution, active: np.ndarray) -> None:
        """Steps 2 and 4: our header and the correction bits d = r xor x of our ordinary groups in one frame;
        when the COT pool must grow first: our header alone, the garbler's header back (both checked), the
        COT batch, then d.  Then our random groups' COTs."""
        sh = ex.shape
        self._size_cot_batch(sh.n_ord + sh.n_rnd)
        combined = self.cot.available >= sh.n_ord + sh.n_rnd  # (the garbler decides alike)
        if not combined:  # the pool must grow first: headers on their own, both checked before any OT message
            self.channel.send(ex.header)
            self.channel.flush()
            compare_headers(ex.header, self.channel.recv(max_size=_HDR), sh.circuit)
            ex.headers_apart = True
        if sh.n_ord:
            if sh.ord_slice is not None:
                r, t = self.cot.recv_random(sh.n_ord, out=active[sh.ord_slice].reshape(sh.n_ord, 2))
            else:
                r, t = self.cot.recv_random(sh.n_ord)
                pos = 0
                for g in sh.e_ord:
                    n = g.width * sh.batch
                    active[g.wires] = t[pos : pos + n].reshape(g.width, sh.batch, 2)
                    pos += n
            x = ex.bits[0].T.reshape(-1) if len(ex.bits) == 1 else np.concatenate([b.T for b in ex.bits]).reshape(-1)
            d = np.packbits(r ^ x, bitorder="little")  # wire-major, as the garbler reshapes
        else:
            d = np.zeros(0, np.uint8)
        if combined:
            self.channel.send(ex.header + d.tobytes())
        elif sh.n_ord:
            self.channel.send(d)
        self.channel.flush()
        for g in sh.e_rnd:
            k, w = g.width * sh.batch, wire_slice(g)
            if isinstance(w, slice):
                r, _ = self.cot.recv_random(k, out=active[w].reshape(k, 2))
            else:
                r, t = self.cot.recv_random(k)
                active[w] = t.reshape(g.width, sh.batch, 2)
            ex.random_bits[g.name] = np.ascontiguousarray(r.reshape(g.width, sh.batch).T)

    def _garbler_labels(self, ex: _Execution, active: np.ndarray) -> None:
        """Step 3: the garbler's active labels, the label stream group after group (no message)."""
        sh = ex.shape
        for g in sh.g_groups:
            k, w = g.width * sh.batch, wire_slice(g)
            if isinstance(w, slice):
                self._label_stream.fill(active[w].reshape(k, 2))
            else:
                tmp = np.empty((k, 2), np.uint64)
                self._label_stream.fill(tmp)
                active[w] = tmp.reshape(g.width, sh.batch, 2)

    def _receive_stream(
        self, ex: _Execution, ev: Evaluator, active: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Step 5: the garbler's header (compared with ours), then the tables evaluated frame by frame as they
        arrive, then the decoding bits, if sent."""
        sh = ex.shape
        stream = FrameReader(self.channel, (0 if ex.headers_apart else _HDR) + sh.n_tab + sh.n_dec)
        if not ex.headers_apart:
            compare_headers(ex.header, stream.read(_HDR), sh.circuit)
        out_labels = ev.evaluate(active, stream.pieces(sh.n_tab))
        dec = None
        if sh.n_dec:
            dec = unpack_bits(stream.read(sh.n_dec), sh.n_out * sh.batch, "decoding bits").reshape(sh.n_out, sh.batch)
        stream.finish()
        return out_labels, dec

    def _outputs(
        self, ex: _Execution, out_labels: np.ndarray, dec: np.ndarray | None
    ) -> tuple[list | None, list[np.ndarray] | None]:
        """Step 6: send the permute bits of the output labels if the garbler learns the output (first, so it
        is not kept waiting), then decode ours if we got the decoding bits."""
        if ex.shape.output in ("both", "garbler"):
            self.channel.send(np.packbits((out_labels[..., 0] & _ONE).astype(bool), axis=None, bitorder="little"))
            self.channel.flush()
        if dec is None:
            return None, None
        return outputs_from_bits(ex.circuit, decode(out_labels, dec), ex.scalar)
