"""The engine's formats: garbled-table bytes and their header, the table reader, output bits.

What it does
    :class:`GarbleError`; :class:`GarbledCircuit`, the tables of a batch with
    a fixed ``HEADER_SIZE``-byte header; :class:`_Reader`, which hands the
    evaluator exact-size ``uint64`` segments from bytes or from a stream of
    chunks split in any way; :func:`table_bytes`; :func:`decode` and
    :func:`split_outputs` (output labels -> bits -> groups);
    :func:`urandom_bits` (a party's random input group).

    The tables of a batch are ``32 * n_and * B`` bytes: for each instance
    chunk, for each level that has AND gates (schedule order), one segment,
    the little-endian ``uint64`` array of shape (2 [T_G, T_E], 2 [lo, hi], k,
    b) for the level's k ANDs and the chunk's b instances.  The header is
    magic ``PWGC``, version 3 (TMMO hash), flags 0, the circuit's SHA-256
    content hash, n_and, batch, chunk, instance_offset (little-endian).  The
    full layout is in ``docs/garbling.md`` ("Byte layout of the tables").

Security model
    Public material only: the tables, their sizes and the decoding bits are
    what the evaluator receives anyway.  Malformed input (a bad header, a
    stream shorter or longer than announced, wrong shapes or dtypes) raises
    :class:`GarbleError`, never a silent wrong answer.  :func:`urandom_bits`
    draws from ``os.urandom``.

Follows
    Zahur-Rosulek-Evans 2015 (half-gates: two ciphertexts per AND gate);
    docs/garbling.md.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from pairwise.circuits.ir import Circuit
from pairwise.dp.errors import PairwiseError

if sys.byteorder != "little":  # pragma: no cover - the block layout is little-endian
    raise ImportError("pairwise.mpc.garble needs a little-endian machine (block layout of mpc.aes)")

_MAGIC = b"PWGC"
#: 3: tables hashed with TMMO (mpc.aes.tccr_hash).  Version 2 files (the sigma-based hash) and
#: version 1 files (laid out by the older per-AND-stage schedule) would decode to garbage and are
#: refused.
_VERSION = 3
_HEADER = struct.Struct("<4sHH32sQQQQ")
HEADER_SIZE = _HEADER.size  # 72 bytes

_U64 = np.uint64
_ONE = np.uint64(1)
_NO_WORDS = np.zeros(0, _U64)


class GarbleError(PairwiseError, ValueError):
    """Bad parameters or malformed garbled material (sizes, headers, labels)."""


def table_bytes(circuit: Circuit, batch: int) -> int:
    """Size in bytes of the garbled tables: 32 per AND gate per instance."""
    return 32 * circuit.n_and * batch


def _as_blocks(a, shape: tuple[int, ...], what: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype != np.uint64:
        raise GarbleError(f"{what} must be a uint64 block array, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise GarbleError(f"{what} must have shape {shape}, got {arr.shape}")
    return arr


class _Reader:
    """Reads exact-size uint64 segments from bytes or from an iterable of byte chunks.

    A segment is a view of the chunk it lies in, or, when it spans chunks, of
    a scratch buffer that the next such segment reuses: each result is valid
    until the next :meth:`read` (the engine uses one level's tables at a time).
    """

    def __init__(self, source) -> None:
        self._scratch = np.empty(0, _U64)
        #: True when the tables are held whole (bytes, an array): any later segment can be read at once
        self.whole = isinstance(source, (bytes, bytearray, memoryview, np.ndarray))
        if self.whole:
            self._it: Iterator | None = None
            self._set(
                memoryview(source).cast("B")
                if not isinstance(source, np.ndarray)
                else memoryview(np.ascontiguousarray(source)).cast("B")
            )
        else:
            self._it = iter(source)
            self._set(memoryview(b""))

    def _set(self, cur: memoryview) -> None:
        self._cur = cur
        self._pos = 0
        # the chunk as aligned uint64 words, when it is (reads at 8-byte offsets are then a slice)
        words = np.frombuffer(cur, dtype="<u8", count=len(cur) // 8) if len(cur) >= 8 else None
        self._words = words if words is not None and words.flags.aligned else None

    def read_at(self, n: int) -> tuple[np.ndarray, int]:
        """The next ``n`` bytes (a multiple of 8) as (words, offset): ``words[offset:offset + n // 8]``.

        No slicing or reshaping on the fast path (aligned, inside the current
        chunk): the compiled evaluator indexes the chunk's words directly.
        """
        pos = self._pos
        if self._words is not None and len(self._cur) - pos >= n and not pos & 7:
            self._pos = pos + n
            return self._words, pos >> 3
        return self.read(n, (n >> 3,)), 0

    def peek(self) -> tuple[np.ndarray, int, int]:
        """(words, offset, n): the rest of the current chunk, ``words[offset:offset + n]``, readable with no
        copy (n = 0 when the position is not word-aligned); waits for the next chunk of a stream when this
        one is used up.  :meth:`skip` then consumes what was used."""
        while self._pos == len(self._cur) and self._it is not None:
            nxt = next(self._it, None)
            if nxt is None:
                return _NO_WORDS, 0, 0
            self._set(memoryview(nxt).cast("B"))
        if self._words is None or self._pos & 7:
            return _NO_WORDS, 0, 0
        return self._words, self._pos >> 3, (len(self._cur) - self._pos) >> 3

    def skip(self, n: int) -> None:
        """Consume ``n`` bytes of the current chunk (after :meth:`peek`)."""
        if n > len(self._cur) - self._pos:  # pragma: no cover - callers skip what peek showed
            raise GarbleError("skip past the current chunk")
        self._pos += n

    def read(self, n: int, shape: tuple[int, ...]) -> np.ndarray:
        while self._pos == len(self._cur) and n and self._it is not None:  # chunk used up: the next one
            nxt = next(self._it, None)
            if nxt is None:
                raise GarbleError(f"garbled tables ended early: a segment needs {n} bytes, none arrived")
            self._set(memoryview(nxt).cast("B"))
        pos = self._pos
        avail = len(self._cur) - pos
        if avail >= n:
            self._pos = pos + n
            if self._words is not None and not (pos | n) & 7:
                return self._words[pos >> 3 : (pos + n) >> 3].reshape(shape)
            return np.frombuffer(self._cur[pos : pos + n], dtype="<u8").copy().reshape(shape)
        if self._scratch.shape[0] * 8 < n:
            self._scratch = np.empty(-(-n // 8), _U64)
        buf = memoryview(self._scratch.view(np.uint8))[:n]
        got = 0
        while True:
            take = min(avail, n - got)
            buf[got : got + take] = self._cur[self._pos : self._pos + take]
            got += take
            self._pos += take
            if got == n:
                return self._scratch[: n >> 3].reshape(shape)
            nxt = next(self._it, None) if self._it is not None else None
            if nxt is None:
                raise GarbleError(f"garbled tables ended early: a segment needs {n} bytes, only {got} arrived")
            self._set(memoryview(nxt).cast("B"))
            avail = len(self._cur)

    def finish(self) -> None:
        extra = len(self._cur) - self._pos
        if self._it is not None and extra == 0:
            for nxt in self._it:
                extra += len(memoryview(nxt).cast("B"))
                if extra:
                    break
        if extra:
            raise GarbleError("garbled tables have trailing bytes: batch, chunk or circuit do not match")


@dataclass(frozen=True)
class GarbledCircuit:
    """Garbled tables of a batch with the header that identifies them.

    ``to_bytes()`` is ``HEADER_SIZE`` + 32 * n_and * batch bytes: magic
    ``PWGC``, version, flags (0), the circuit's SHA-256 content hash, n_and,
    batch, chunk, instance_offset (little-endian), then the tables in the
    layout of the module docstring (docs/garbling.md has it in full).
    """

    circuit_hash: str
    n_and: int
    batch: int
    chunk: int
    instance_offset: int
    tables: bytes | bytearray | memoryview

    def header(self) -> bytes:
        return _HEADER.pack(
            _MAGIC,
            _VERSION,
            0,
            bytes.fromhex(self.circuit_hash),
            self.n_and,
            self.batch,
            self.chunk,
            self.instance_offset,
        )

    def to_bytes(self) -> bytes:
        return self.header() + bytes(self.tables)

    @property
    def nbytes(self) -> int:
        return HEADER_SIZE + len(self.tables)

    @classmethod
    def parse_header(cls, data: bytes | bytearray | memoryview) -> tuple[str, int, int, int, int]:
        """(circuit_hash, n_and, batch, chunk, instance_offset) from the first HEADER_SIZE bytes."""
        if len(data) < HEADER_SIZE:
            raise GarbleError(f"garbled circuit header needs {HEADER_SIZE} bytes, got {len(data)}")
        magic, version, flags, h, n_and, batch, chunk, off = _HEADER.unpack_from(bytes(data[:HEADER_SIZE]))
        if magic != _MAGIC:
            raise GarbleError("not a garbled circuit (bad magic)")
        if version != _VERSION or flags != 0:
            raise GarbleError(f"unsupported garbled circuit version {version} (flags {flags}); expected {_VERSION}")
        if batch < 1 or chunk < 1 or chunk > batch:
            raise GarbleError(f"garbled circuit header has invalid batch {batch} / chunk {chunk}")
        return h.hex(), n_and, batch, chunk, off

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> GarbledCircuit:
        h, n_and, batch, chunk, off = cls.parse_header(data)
        body = memoryview(data)[HEADER_SIZE:]
        if len(body) != 32 * n_and * batch:
            raise GarbleError(
                f"garbled circuit body is {len(body)} bytes, expected 32 * {n_and} ANDs * {batch} instances"
            )
        return cls(h, n_and, batch, chunk, off, body)


def decode(active_out: np.ndarray, decode_bits: np.ndarray) -> np.ndarray:
    """Output bits (n_out, batch) bool: lsb(active label) xor decoding bit."""
    a = np.asarray(active_out)
    d = np.asarray(decode_bits, dtype=bool)
    if a.shape[:-1] != d.shape or a.shape[-1:] != (2,):
        raise GarbleError(f"active labels {a.shape} do not match decoding bits {d.shape}")
    return ((a[..., 0] & _ONE).astype(bool)) ^ d


def split_outputs(circuit: Circuit, bits: np.ndarray) -> list[np.ndarray]:
    """(n_out, batch) bits -> one (batch, width) bool array per output group."""
    res = []
    pos = 0
    for g in circuit.outputs:
        res.append(np.ascontiguousarray(bits[pos : pos + g.width].T))
        pos += g.width
    return res


def urandom_bits(batch: int, width: int) -> np.ndarray:
    """(batch, width) uniform bits from ``os.urandom`` (a party's random input group).

    The result is the transpose of a C-contiguous (width, batch) array, the
    wire-major layout in which the garbler applies them to its labels.
    """
    raw = np.frombuffer(os.urandom(-(-batch * width // 8)), dtype=np.uint8)
    return np.unpackbits(raw, count=batch * width, bitorder="little").view(np.bool_).reshape(width, batch).T
