"""The garbler: labels, Delta and the garbled tables of a circuit for a SIMD batch.

What it does
    :class:`Garbler` garbles a circuit for ``B`` instances at once, chunk by
    chunk and level by level (on the AES-NI path of
    :mod:`~pairwise.mpc.garble.fused`; without AES-NI, the numpy program of
    :mod:`~pairwise.mpc.garble.program` and :mod:`~pairwise.mpc.garble.kernels`
    or, for one-instance chunks, the OpenSSL compiled path of
    :mod:`~pairwise.mpc.garble.jit`), and yields the tables segment by segment
    (:meth:`~Garbler.iter_tables`, :meth:`~Garbler.iter_into`) or returns
    them whole (:meth:`~Garbler.garble`).  Input labels are drawn here, set
    by the caller (from OT), or fixed by their active labels
    (:meth:`~Garbler.set_active_labels`, the seed scheme of
    :mod:`pairwise.mpc.twopc`).  After garbling it holds the output zero
    labels and the decoding bits.

Security model
    Semi-honest half-gates with free-XOR.  Delta (lowest bit 1,
    point-and-permute) and labels come from the OS CSPRNG
    (:func:`fresh_delta`, :func:`pairwise.mpc.aes.random_blocks`) unless the
    caller supplies them; a Garbler garbles once (fresh labels per
    garbling).  Tweaks are (2g + h, instance id), so garblings that share a
    Delta must use disjoint ``instance_offset`` ranges (docs/garbling.md
    "Tweak uniqueness").  Whoever receives the decoding bits learns the
    outputs.

Follows
    Zahur-Rosulek-Evans 2015, Fig. 2; Guo-Katz-Wang-Yu 2020 (TMMO hash);
    docs/garbling.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from pairwise.circuits.ir import Circuit
from pairwise.dp.validate import check_int

from ..aes import FixedKeyAES, default_aes, random_blocks
from . import jit as _jit_mod
from .format import _ONE, _U64, GarbledCircuit, GarbleError, _as_blocks, table_bytes
from .jit import _jit_garble1, _use_jit
from .kernels import _garble_ands, _garble_ands1, _garble_direct, _xor
from .plan import _check_batch, _check_chunk, _check_offset, _chunks, _plan, _segment_sizes, wire_slice
from .program import _planar, _Work


def fresh_delta(batch: int) -> np.ndarray:
    """Independent CSPRNG free-XOR offsets, one per instance, shape (batch, 2), lsb 1."""
    d = random_blocks(batch)
    d[:, 0] |= _ONE
    return d


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays are the very same view (same start, shape and strides)."""
    return (
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.shape == b.shape
        and a.strides == b.strides
    )


class Garbler:
    """Garbles ``circuit`` for ``batch`` instances.

    Parameters
        delta: None (default: an independent CSPRNG Delta per instance), one
            block of shape (2,) shared by all instances (the IKNP session
            Delta), or (batch, 2); every Delta must have lowest bit 1.
        input_zero: zero labels chosen by the caller, as a mapping from
            input-group name to a (width, batch, 2) block array, or one
            (n_inputs, batch, 2) array; groups that are neither given here
            nor set later (:meth:`set_zero_labels`, :meth:`set_active_labels`)
            get fresh CSPRNG labels when they are first needed.
        instance_offset: instance id of the first instance (tweak high word);
            see docs/garbling.md ("Tweak uniqueness") for why it must grow
            across garblings that share a Delta.
        chunk: instances per chunk (default :func:`default_chunk`); the
            evaluator must use the same value.
        record_wires: keep every wire's zero label in ``wire_zero``
            (n_wires, batch, 2), for tests; costs n_wires*batch*16 bytes.
        keep_scratch: keep the scratch buffers for the next garbling of
            this circuit and chunk size even when they are large (sessions
            that repeat executions; small ones are always kept).
        input_buffer: an (n_inputs, batch, 2) uint64 array to hold the zero
            labels of the input wires (its contents are ignored), e.g. one a
            session reuses for every execution, so that large batches do not
            touch fresh memory; fill groups in place through
            :meth:`input_view`.

    After :meth:`iter_tables` is exhausted (or :meth:`garble` returns),
    ``output_zero`` (n_out, batch, 2) and ``decode_bits`` (n_out, batch) hold
    the output zero labels and their permute bits, outputs in the order of
    ``circuit.outputs``.  A Garbler garbles once.
    """

    def __init__(
        self,
        circuit: Circuit,
        batch: int,
        *,
        delta=None,
        input_zero: Mapping[str, np.ndarray] | np.ndarray | None = None,
        instance_offset: int = 0,
        chunk: int | None = None,
        aes: FixedKeyAES | None = None,
        record_wires: bool = False,
        keep_scratch: bool = False,
        input_buffer: np.ndarray | None = None,
    ) -> None:
        self.circuit = circuit
        self.batch = _check_batch(batch)
        self.chunk = _check_chunk(circuit, self.batch, chunk)
        self.instance_offset = _check_offset(instance_offset, self.batch)
        self._aes = aes  # None: the running thread's default_aes(), resolved per run
        self._plan = _plan(circuit, "wires" if record_wires else "compact")
        self.record_wires = record_wires
        self._keep = keep_scratch
        if delta is None:
            self.delta = fresh_delta(self.batch)
        else:
            d = np.asarray(delta)
            if d.dtype != np.uint64 or d.shape not in ((2,), (self.batch, 2)):
                raise GarbleError(
                    f"delta must be a uint64 block of shape (2,) or ({self.batch}, 2), got {d.dtype} {d.shape}"
                )
            if not (d[..., 0] & _ONE).all():
                raise GarbleError("delta must have lowest bit 1 (point-and-permute)")
            self.delta = np.empty((self.batch, 2), _U64)  # a private copy
            self.delta[...] = d
        self._used = False
        n_in = circuit.n_inputs
        if isinstance(input_zero, np.ndarray):
            self._zero = np.array(_as_blocks(input_zero, (n_in, self.batch, 2), "input_zero"))
            self._open: set[str] = set()
        else:
            # groups the caller leaves open get fresh CSPRNG labels when first needed (_fill_open), so
            # labels that are set later (from OT, from a seed) cost no random bytes
            if input_buffer is None:
                self._zero = np.empty((n_in, self.batch, 2), _U64)
            else:
                self._zero = _as_blocks(input_buffer, (n_in, self.batch, 2), "input_buffer")
                if not self._zero.flags.c_contiguous or not self._zero.flags.writeable:
                    raise GarbleError("input_buffer must be a writable C-contiguous array")
            self._open = {g.name for g in circuit.inputs}
            for name, arr in dict(input_zero or {}).items():
                self.set_zero_labels(name, arr)
        self.output_zero: np.ndarray | None = None
        self.decode_bits: np.ndarray | None = None
        self.wire_zero: np.ndarray | None = None

    # -- inputs
    def set_zero_labels(self, group: str, labels) -> None:
        """Use ``labels`` (width, batch, 2) as the zero labels of input group ``group`` (before garbling).

        E.g. the zero labels of the evaluator's inputs that come out of
        correlated OT once the evaluator's OT message has arrived, while the
        rest of the Garbler was set up earlier.
        """
        g = self._settable_group(group)
        w = wire_slice(g)
        lab = _as_blocks(labels, (g.width, self.batch, 2), f"input_zero[{group!r}]")
        if not _same_memory(lab, self._zero[w]):  # (filled in place through input_view: nothing to copy)
            self._zero[w] = lab
        self._open.discard(g.name)

    def _settable_group(self, group: str):
        """The input group ``group``, if its labels may still be set (before garbling)."""
        if self._used:
            raise GarbleError("zero labels cannot change after garbling")
        try:
            return self.circuit.input_group(group)
        except KeyError as exc:
            raise GarbleError(str(exc.args[0])) from None

    def input_view(self, group: str) -> np.ndarray:
        """The writable (width, batch, 2) storage of the zero labels of ``group`` (consecutive wires).

        Fill it in place (e.g. ``COTSender.send_random(n, out=view.reshape(-1, 2))``
        or :func:`pairwise.mpc.aes.ctr_blocks` with ``out``), then pass it to
        :meth:`set_zero_labels` or :meth:`set_active_labels`, which then copy
        nothing.
        """
        g = self._settable_group(group)
        w = wire_slice(g)
        if not isinstance(w, slice):
            raise GarbleError(f"input group {group!r} has no consecutive wires: set its labels with set_zero_labels")
        return self._zero[w]

    @property
    def input_zero(self) -> np.ndarray:
        """Zero labels (n_inputs, batch, 2) of all input wires."""
        self._fill_open()
        return self._zero

    def _fill_open(self) -> None:
        for g in self.circuit.inputs:
            if g.name in self._open:
                self._zero[wire_slice(g)] = random_blocks(g.width, self.batch)
        self._open.clear()

    def set_active_labels(self, group: str, active, bits) -> None:
        """Fix the labels of input group ``group`` by its *active* labels: zero = active ^ bits*Delta.

        ``active`` (width, batch, 2) is known to the evaluator (e.g. expanded
        from a seed the garbler sent it: emp-sh2pc's input scheme, see
        :mod:`pairwise.mpc.twopc`); ``bits`` (batch, width) bool are the
        group's input bits, which only the garbler knows.  The evaluator then
        holds the label of ``bits`` and, Delta being secret, learns nothing
        about them.
        """
        g = self._settable_group(group)
        a = _as_blocks(active, (g.width, self.batch, 2), f"active labels of {group!r}")
        b = np.asarray(bits, dtype=bool)
        if b.shape != (self.batch, g.width):
            raise GarbleError(f"bits for {group!r} must have shape ({self.batch}, {g.width}), got {b.shape}")
        w = wire_slice(g)
        if isinstance(w, slice) and g.width * self.batch <= 1 << 12:  # small: one masked XOR (fewest calls)
            z = self._zero[w]
            mask = np.negative(b.T.view(np.uint8), dtype=_U64)[..., None]  # all-ones where bit = 1
            np.bitwise_xor(a, np.bitwise_and(mask, self.delta[None], out=np.empty_like(z)), out=z)
        elif isinstance(w, slice):  # in place, word plane by word plane, through a bounded temporary
            z = self._zero[w]
            if not _same_memory(a, z):
                np.copyto(z, a)
            bits_wm = np.ascontiguousarray(b.T).view(np.uint8)  # (width, batch), 0/1
            rows = max(1, (1 << 18) // self.batch)
            tmp = np.empty((min(rows, g.width), self.batch), _U64)
            for r0 in range(0, g.width, rows):
                r1 = min(g.width, r0 + rows)
                t = tmp[: r1 - r0]
                for k in (0, 1):
                    np.multiply(bits_wm[r0:r1], self.delta[:, k], out=t)  # bit * Delta word
                    np.bitwise_xor(z[r0:r1, :, k], t, out=z[r0:r1, :, k])
        else:
            mask = np.negative(b.T.astype(_U64))[..., None]  # (width, batch, 1) all-ones where bit = 1
            self._zero[w] = a ^ (mask & self.delta[None])
        self._open.discard(g.name)

    def zero_labels(self, group: str) -> np.ndarray:
        """Zero labels (width, batch, 2) of an input group."""
        g = self.circuit.input_group(group)
        if g.name in self._open:
            self._fill_open()
        return self._zero[wire_slice(g)]

    def encode(self, group: str, bits) -> np.ndarray:
        """Active labels (width, batch, 2) of ``group`` for ``bits`` (batch, width) bool."""
        g = self.circuit.input_group(group)
        b = np.asarray(bits, dtype=bool)
        if b.shape != (self.batch, g.width):
            raise GarbleError(f"bits for {group!r} must have shape ({self.batch}, {g.width}), got {b.shape}")
        mask = np.negative(b.T.astype(_U64))[..., None]  # (width, batch, 1) all-ones where bit = 1
        return self.zero_labels(group) ^ (mask & self.delta[None])

    def encode_all(self, inputs: Sequence) -> np.ndarray:
        """Active labels (n_inputs, batch, 2) for one (batch, width) bool array per input group."""
        if len(inputs) != len(self.circuit.inputs):
            raise GarbleError(f"circuit has {len(self.circuit.inputs)} input groups, got {len(inputs)} inputs")
        if not inputs:
            return np.zeros((0, self.batch, 2), _U64)
        return np.concatenate([self.encode(g.name, b) for g, b in zip(self.circuit.inputs, inputs)])

    # -- tables
    def header(self) -> bytes:
        return GarbledCircuit(
            self.circuit.content_hash, self.circuit.n_and, self.batch, self.chunk, self.instance_offset, b""
        ).header()

    def segment_sizes(self) -> list[int]:
        """Byte sizes of the segments :meth:`iter_tables` yields, in order."""
        return _segment_sizes(self._plan, self.batch, self.chunk)

    def iter_tables(self, scratch: np.ndarray | None = None) -> Iterator[memoryview]:
        """Garble, yielding one table segment (bytes-like) per instance chunk and AND level.

        Each yielded buffer is fresh (the garbler never writes it again), or,
        with ``scratch`` (a flat uint64 array of at least
        :meth:`max_segment_words` words, e.g. one a sender reuses), a view of
        ``scratch`` that the next segment overwrites: use (send) each segment
        before asking for the next one.
        """
        if scratch is not None:
            scratch = np.asarray(scratch)
            if (
                scratch.dtype != _U64
                or scratch.ndim != 1
                or scratch.shape[0] < self.max_segment_words()
                or not scratch.flags.c_contiguous
                or not scratch.flags.writeable
            ):
                raise GarbleError(
                    f"scratch must be a writable, contiguous flat uint64 array of at least "
                    f"{self.max_segment_words()} words"
                )
        for tab in self._run(None, scratch):
            yield memoryview(tab).cast("B")

    def max_segment_words(self) -> int:
        """uint64 words of the largest table segment (for the ``scratch`` of :meth:`iter_tables`)."""
        return max(self.segment_sizes(), default=0) // 8

    def iter_into(self, out, every: int = 0) -> Iterator[int]:
        """Garble into ``out`` segment by segment; after each segment yield the bytes of ``out`` written so far.

        ``out`` is a writable C-contiguous buffer of exactly
        :func:`table_bytes` bytes (8-byte aligned for speed), e.g. a slice of a
        buffer that a sender reuses across garblings: the caller can send what
        is written while the rest is garbled, with no copy and no allocation.
        ``every``: a hint that yields less than that many new bytes apart are
        not needed (the compiled one-instance path then yields less often).
        """
        check_int(every, "every", lo=0, error=GarbleError)
        dest = self._dest(out)
        done = 0
        for tab in self._run(dest, None, int(every)):
            done += tab.nbytes
            yield done

    def _dest(self, out) -> np.ndarray:
        size = table_bytes(self.circuit, self.batch)
        try:
            mv = memoryview(out).cast("B")
        except TypeError:
            raise GarbleError("out must be a writable C-contiguous buffer") from None
        if mv.readonly or mv.nbytes != size:
            raise GarbleError(f"out must be a writable buffer of exactly {size} bytes, got {mv.nbytes}")
        return np.frombuffer(mv, dtype=_U64) if size else np.empty(0, _U64)

    def _run(
        self, dest: np.ndarray | None, scratch: np.ndarray | None = None, every: int = 0, whole: bool = False
    ) -> Iterator[np.ndarray]:
        """Garble; yield each segment as a (2, 2, k, b) array, (2, 2, k) for one-instance chunks.

        Segments are views of ``dest`` (all tables, in order) if given, else
        views of the start of ``scratch`` (reused) if given, else fresh arrays.
        With ``dest``, the compiled paths yield flat views of what was
        written since the last yield, once that reaches ``every`` bytes
        (fewer Python round trips; same bytes); ``whole`` (``garble()``: no
        progress needed) lets the AES-NI path yield once per chunk and use
        every thread (:mod:`~pairwise.mpc.garble.fused`).
        """
        if self._used:
            raise GarbleError("this Garbler has already garbled; make a new one (fresh labels) per garbling")
        self._used = True
        plan = self._plan
        n_out = plan.out_slots.shape[0]
        n_in = plan.in_slots.shape[0]
        self.output_zero = np.empty((n_out, self.batch, 2), _U64)
        if self.record_wires:
            self.wire_zero = np.empty((self.circuit.n_wires, self.batch, 2), _U64)
        pos = 0
        aes = self._aes or default_aes()
        zero = self.input_zero  # (fills the groups still open with fresh labels)
        if _jit_mod.fused_ready():  # every chunk shape, AES inside the compiled loops
            from . import fused

            self.decode_bits = np.empty((n_out, self.batch), bool)
            yield from fused.garble(self, plan, zero, dest, scratch, every, whole)
            return
        w = None
        jit1 = _use_jit(plan, self.chunk)
        for b0, b1 in _chunks(self.batch, self.chunk):
            bc = b1 - b0
            if bc == 1 and jit1:  # the latency path: compiled loops, same tables

                def finish(lab: np.ndarray, b0: int = b0) -> None:
                    self.output_zero[:, b0] = lab[plan.out_slots]  # type: ignore[index]  # allocated above
                    if self.record_wires:
                        self.wire_zero[:, b0] = lab[: self.circuit.n_wires]  # type: ignore[index]  # allocated when record_wires

                for seg in _jit_garble1(
                    plan,
                    zero[:, b0],
                    self.delta[b0],
                    self.instance_offset + b0,
                    (dest, pos, every),
                    scratch,
                    aes,
                    finish,
                    self._keep,
                ):
                    if dest is not None:
                        pos += seg.shape[0]
                    yield seg
                continue
            if w is None:
                w = _Work.acquire(self.chunk, plan, "garbler")
            rp = _planar(self.delta[b0:b1])  # (2, b)
            lab, src, prog = w.start_chunk(bc, rp, self.instance_offset + b0)
            lab[:n_in] = zero[:, b0:b1].transpose(0, 2, 1)  # input wires own slots 0..n_in-1
            lab[plan.one_slot] = rp  # zero label of the constant one: Delta
            for lv, ands, lins, dands, dlins in prog:
                if lv.k:
                    size = 4 * lv.k * bc
                    if dest is None and scratch is not None:
                        tab = scratch[:size].reshape((2, 2, lv.k, bc) if bc > 1 else (2, 2, lv.k))
                    elif dest is None:
                        tab = np.empty((2, 2, lv.k, bc) if bc > 1 else (2, 2, lv.k), _U64)
                    else:
                        tab = dest[pos : pos + size].reshape((2, 2, lv.k, bc) if bc > 1 else (2, 2, lv.k))
                    pos += size
                    if dands:
                        _garble_direct(dands, tab, w.hasher, aes)
                    elif bc > 1:
                        _garble_ands(src, ands, w, tab, aes)
                    else:
                        _garble_ands1(src, ands, tab, w.hasher, aes)
                    yield tab
                for rows, y, y0, y1, z, orow in lins:  # XOR and INV (= XOR with the one slot)
                    src.take(rows, axis=0, out=y, mode="clip")
                    _xor(y0, y1, z)
                    src[orow] = z
                for a, b, o in dlins:
                    _xor(a, b, o)
            self.output_zero[:, b0:b1] = lab[plan.out_slots].transpose(0, 2, 1)
            if self.record_wires:
                self.wire_zero[:, b0:b1] = lab[: self.circuit.n_wires].transpose(0, 2, 1)  # type: ignore[index]  # allocated when record_wires
        if w is not None:
            w.release(self._keep)
        self.decode_bits = (self.output_zero[..., 0] & _ONE).astype(bool)

    def garble(self, sink: Callable[[memoryview], object] | None = None, *, out=None) -> GarbledCircuit | None:
        """Garble the whole batch.

        With ``sink=None`` return a :class:`GarbledCircuit` holding all tables
        (32 * n_and * batch bytes in memory), written into ``out`` if given (a
        writable buffer of exactly that size, e.g. reused across garblings)
        or into a fresh buffer; otherwise call ``sink(segment)`` for every
        segment of :meth:`iter_tables` and return None (memory stays bounded
        by one instance chunk).
        """
        if sink is not None:
            if out is not None:
                raise GarbleError("give either sink or out, not both")
            for seg in self.iter_tables():
                sink(seg)
            return None
        size = table_bytes(self.circuit, self.batch)
        dest = np.empty(size // 8, _U64) if out is None else self._dest(out)
        for _ in self._run(dest, whole=True):
            pass
        return GarbledCircuit(
            self.circuit.content_hash,
            self.circuit.n_and,
            self.batch,
            self.chunk,
            self.instance_offset,
            memoryview(dest).cast("B"),
        )


class Regarbler:
    """Repeated garblings of one circuit, batch and chunk under one Delta (a session's executions).

    What a :class:`Garbler` checks and looks up on every construction (batch,
    chunk, Delta, the plan, the output buffers) is done once here; each
    :meth:`iter_into` then garbles with the caller's fresh zero labels of
    every input wire and a fresh instance offset.  The offsets must grow by
    at least the batch from one garbling to the next (checked: tweaks never
    repeat under the shared Delta, docs/garbling.md "Tweak uniqueness"); the
    zero labels are the caller's to make fresh (the two-party session draws
    them from its label stream and from OT for every execution).

    After :meth:`iter_into` is exhausted, ``decode_bits`` (n_out, batch) and
    ``output_zero`` (n_out, batch, 2) hold that garbling's results, until the
    next garbling overwrites them.  Without the AES-NI path every garbling
    goes through a new :class:`Garbler` (same tables).
    """

    def __init__(self, circuit: Circuit, batch: int, delta: np.ndarray, chunk: int | None = None) -> None:
        # one Garbler holds what the AES-NI driver reads (Delta per instance, batch, chunk, output arrays);
        # only its instance offset changes from one garbling to the next
        g = self._g = Garbler(circuit, batch, delta=delta, chunk=chunk, instance_offset=0, keep_scratch=True)
        self.circuit, self.batch, self.chunk, self.delta = circuit, g.batch, g.chunk, g.delta
        self._plan = g._plan
        n_out = self._plan.out_slots.shape[0]
        self.output_zero = g.output_zero = np.empty((n_out, self.batch, 2), _U64)
        self.decode_bits = g.decode_bits = np.empty((n_out, self.batch), bool)
        self._size = table_bytes(circuit, self.batch)
        self._next = 0  # the lowest instance offset the next garbling may use
        self._fused = _jit_mod.fused_ready()

    def iter_into(self, zero: np.ndarray, instance_offset: int, dest: np.ndarray, every: int = 0) -> Iterator[int]:
        """Garble with input zero labels ``zero`` (n_inputs, batch, 2) uint64 into ``dest`` (the tables'
        uint64 words, exactly); yield the bytes of ``dest`` written so far, as :meth:`Garbler.iter_into`."""
        if instance_offset < self._next:
            raise GarbleError(
                f"instance offset {instance_offset} reuses tweaks: the next garbling under this "
                f"Delta must start at instance {self._next} or later"
            )
        if dest.dtype != _U64 or dest.nbytes != self._size or zero.shape != (self.circuit.n_inputs, self.batch, 2):
            raise GarbleError(
                f"dest must be {self._size // 8} uint64 words and zero labels of shape "
                f"({self.circuit.n_inputs}, {self.batch}, 2)"
            )
        _check_offset(instance_offset, self.batch)
        self._next = instance_offset + self.batch
        if not self._fused:
            gar = Garbler(
                self.circuit,
                self.batch,
                delta=self.delta,
                input_zero=zero,
                instance_offset=instance_offset,
                chunk=self.chunk,
                keep_scratch=True,
            )
            yield from gar.iter_into(memoryview(dest).cast("B"), every)
            assert gar.output_zero is not None and gar.decode_bits is not None  # (set by the garbling)
            self.output_zero[...] = gar.output_zero
            self.decode_bits[...] = gar.decode_bits
            return
        from . import fused

        done = 0
        self._g.instance_offset = instance_offset
        for tab in fused.garble(self._g, self._plan, zero, dest, None, every, False):
            done += tab.nbytes
            yield done
