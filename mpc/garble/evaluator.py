"""The evaluator: active input labels in, garbled tables streamed through, active output labels out.

What it does
    :class:`Evaluator` evaluates the tables of a
    :class:`~pairwise.mpc.garble.garbler.Garbler` run with the same circuit,
    batch, chunk and ``instance_offset``, level by level (the AES-NI path of
    :mod:`~pairwise.mpc.garble.fused`, or without AES-NI the numpy program
    or, for one-instance chunks, the OpenSSL compiled path of
    :mod:`~pairwise.mpc.garble.jit`).  It pulls exactly each level's bytes
    from a :class:`~pairwise.mpc.garble.format.GarbledCircuit` (header
    checked), raw bytes, or a stream split in any way, and refuses streams
    shorter or longer than the circuit needs.
    :func:`~pairwise.mpc.garble.format.decode` turns its output labels into
    bits.

Security model
    Semi-honest half-gates.  The evaluator holds one label per wire (the
    active one) and never Delta; when the TMMO hash is tweakable circular
    correlation robust (fixed-key AES as a random permutation), its view
    (labels, tables, decoding bits) is simulatable from the outputs
    (docs/garbling.md "What the evaluator learns").

Follows
    Zahur-Rosulek-Evans 2015, Fig. 2; Guo-Katz-Wang-Yu 2020.
"""

from __future__ import annotations

import numpy as np

from pairwise.circuits.ir import Circuit

from ..aes import FixedKeyAES, default_aes
from . import jit as _jit_mod
from .format import _U64, GarbledCircuit, GarbleError, _as_blocks, _Reader
from .jit import _jit_eval1, _use_jit
from .kernels import _eval_ands, _eval_ands1, _eval_direct, _xor
from .plan import _check_batch, _check_chunk, _check_offset, _chunks, _plan, _segment_sizes
from .program import _Work


class Evaluator:
    """Evaluates garbled tables of ``circuit`` for ``batch`` instances.

    ``instance_offset`` and ``chunk`` must equal the garbler's.  With
    ``record_wires`` the active label of every wire is kept in ``wire_labels``
    (n_wires, batch, 2), for tests.  ``keep_scratch``: as for :class:`Garbler`.
    """

    def __init__(
        self,
        circuit: Circuit,
        batch: int,
        *,
        instance_offset: int = 0,
        chunk: int | None = None,
        aes: FixedKeyAES | None = None,
        record_wires: bool = False,
        keep_scratch: bool = False,
    ) -> None:
        self.circuit = circuit
        self.batch = _check_batch(batch)
        self.chunk = _check_chunk(circuit, self.batch, chunk)
        self.instance_offset = _check_offset(instance_offset, self.batch)
        self._aes = aes  # None: the running thread's default_aes(), resolved per run
        self._plan = _plan(circuit, "wires" if record_wires else "compact")
        self.record_wires = record_wires
        self._keep = keep_scratch
        self.wire_labels: np.ndarray | None = None

    def segment_sizes(self) -> list[int]:
        return _segment_sizes(self._plan, self.batch, self.chunk)

    def check_header(self, header: bytes | bytearray | memoryview) -> None:
        """Raise :class:`GarbleError` unless ``header`` describes this circuit, batch, chunk and offset."""
        h, n_and, batch, chunk, off = GarbledCircuit.parse_header(header)
        want = (self.circuit.content_hash, self.circuit.n_and, self.batch, self.chunk, self.instance_offset)
        if (h, n_and, batch, chunk, off) != want:
            raise GarbleError(
                "garbled circuit does not match the evaluator: "
                f"(hash, n_and, batch, chunk, offset) = {(h[:12], n_and, batch, chunk, off)} "
                f"vs {(want[0][:12],) + want[1:]}"
            )

    def evaluate(self, active_inputs, tables) -> np.ndarray:
        """Active output labels (n_out, batch, 2).

        ``active_inputs``: one active label per input wire, (n_inputs, batch,
        2).  ``tables``: a :class:`GarbledCircuit` (its header is checked), the
        raw table bytes, or an iterable of byte chunks in stream order (any
        split; the evaluator pulls exactly what each level needs).  After the
        last segment the iterable is read to its end to reject trailing
        bytes, so it must end with the tables (e.g. a generator that yields
        exactly ``sum(segment_sizes())`` bytes; a generator from
        :meth:`Garbler.iter_tables` thereby also finishes the garbler).
        """
        n_in = self.circuit.n_inputs
        act = _as_blocks(active_inputs, (n_in, self.batch, 2), "active_inputs")
        if isinstance(tables, GarbledCircuit):
            self.check_header(tables.header())
            tables = tables.tables
        reader = _Reader(tables)
        plan = self._plan
        out = np.empty((plan.out_slots.shape[0], self.batch, 2), _U64)
        if self.record_wires:
            self.wire_labels = np.empty((self.circuit.n_wires, self.batch, 2), _U64)
        if _jit_mod.fused_ready():  # every chunk shape, AES inside the compiled loops
            from . import fused

            fused.evaluate(
                plan, act, self.instance_offset, self.batch, self.chunk, reader, self._keep, out, self.wire_labels
            )
            reader.finish()
            return out
        aes = self._aes or default_aes()
        w = None
        jit1 = _use_jit(plan, self.chunk)
        for b0, b1 in _chunks(self.batch, self.chunk):
            bc = b1 - b0
            if bc == 1 and jit1:  # the latency path: compiled loops, same algebra

                def finish(lab: np.ndarray, b0: int = b0) -> None:
                    out[:, b0] = lab[plan.out_slots]
                    if self.record_wires:
                        self.wire_labels[:, b0] = lab[: self.circuit.n_wires]  # type: ignore[index]  # allocated when record_wires

                _jit_eval1(plan, act[:, b0], self.instance_offset + b0, reader, aes, finish, self._keep)
                continue
            if w is None:
                w = _Work.acquire(self.chunk, plan, "evaluator")
            lab, src, prog = w.start_chunk(bc, None, self.instance_offset + b0)
            lab[: plan.in_slots.shape[0]] = act[:, b0:b1].transpose(0, 2, 1)
            lab[plan.one_slot] = 0  # active label of the constant one
            for lv, ands, lins, dands, dlins in prog:
                if dands:
                    _eval_direct(dands, reader.read(32 * lv.k * bc, (2, 2, lv.k, bc)), w.hasher, aes)
                elif ands:
                    if bc > 1:
                        _eval_ands(src, ands, w, reader.read(32 * lv.k * bc, (2, 2, lv.k, bc)), aes)
                    else:
                        _eval_ands1(src, ands, reader.read(32 * lv.k, (2, 2, lv.k)), w.hasher, aes)
                for rows, y, y0, y1, z, orow in lins:  # XOR and INV (= XOR with the one slot)
                    src.take(rows, axis=0, out=y, mode="clip")
                    _xor(y0, y1, z)
                    src[orow] = z
                for a, b, o in dlins:
                    _xor(a, b, o)
            out[:, b0:b1] = lab[plan.out_slots].transpose(0, 2, 1)
            if self.record_wires:
                self.wire_labels[:, b0:b1] = lab[: self.circuit.n_wires].transpose(0, 2, 1)  # type: ignore[index]  # allocated when record_wires
        if w is not None:
            w.release(self._keep)
        reader.finish()
        return out
