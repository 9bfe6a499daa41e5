"""The runtime's wire format: version tag, execution header, the garbler's byte stream, the label stream.

What it does
    * :data:`VERSION_TAG` goes into the session handshake (``extra``), so peers
      of another runtime or base-OT version are refused with a message naming
      both versions (:func:`explain_handshake_error`);
    * the 80-byte execution header (:func:`exec_header`, :func:`compare_headers`):
      magic, circuit content hash, AND count, batch, chunk, instance offset,
      output mode, digest of the random groups' names;
    * :class:`FrameWriter` / :class:`FrameReader`: the garbler's per-execution
      stream (its header, the tables, the decoding bits) cut into frames in
      any way the sender likes, read back as exactly the announced bytes;
    * :class:`LabelStream`: the session's AES-128-CTR keystream of the
      garbler's *active* input labels (emp-sh2pc's shared PRG).

Security model
    Headers carry public parameters only.  The label key is drawn by the
    garbler from ``os.urandom`` once per session and sent to the evaluator;
    active labels are pseudorandom if AES is a PRF, fresh per execution (the
    stream never rewinds), independent of Delta and of the garbler's bits
    (docs/twopc.md has the argument).  Every read is bounded by the sizes
    both sides derive from the circuit; a stream longer or shorter than
    announced raises :class:`~pairwise.mpc.errors.ProtocolError`.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from pairwise.circuits.ir import Circuit, InputGroup

from ..baseot import CURVE, OT_VERSION
from ..channel import Channel
from ..errors import HandshakeError, ProtocolError
from .inputs import OUTPUT_MODES

#: Largest frame used for streaming garbled tables.
STREAM_FRAME = 1 << 22
#: The garbler's per-execution stream is cut into SPLIT frames of about equal size (fewer when they would
#: be smaller than MIN_FRAME), or into frames of about FRAME_TARGET bytes when it is longer: each frame
#: costs both sides a system call and a wake-up (about 20 us of CPU each, benchmarks/RESULTS.md), and
#: with k frames the evaluator finishes about 1/k of an execution after the garbler.
SPLIT = 3
MIN_FRAME = 1 << 15
FRAME_TARGET = 1 << 18
#: Executions whose garbler stream fits in this many bytes are garbled into one buffer that the
#: session reuses, and sent from it without copies.
STREAM_BUFFER = 8 << 20


def frame_ends(total: int) -> list[int]:
    """Where the frames of a ``total``-byte stream end (the schedule above); the last is ``total``."""
    k = max(-(-total // FRAME_TARGET), min(SPLIT, total // MIN_FRAME), 1)
    return [-(-i * total // k) for i in range(1, k + 1)]


#: Runtime protocol version: 5 = one request frame from the evaluator (header + correction bits),
#: the garbler's header inside its stream, a session label stream, base OTs on edwards25519.
RUNTIME_VERSION = b"pairwise-yao/5"
VERSION_TAG = RUNTIME_VERSION + f" ot=co15-{CURVE}/{OT_VERSION}".encode()
#: magic, circuit hash, AND gates, batch, chunk, instance offset, output mode, digest of the random
#: groups' names, padding to 80 bytes (the tables that follow stay 8-byte aligned)
EXEC = struct.Struct("<4s32sQQQQB8s3x")
EXEC_MAGIC = b"EXEC"


class ExecutionMismatch(HandshakeError):
    """The two parties disagree on the circuit or the execution parameters."""


class VersionMismatch(HandshakeError):
    """The peer runs another version of the runtime (or of its base OT)."""


def session_extra(extra: bytes, cot: str = "iknp") -> bytes:
    """The handshake ``extra`` of a session: the version tag (with the COT source unless it is IKNP), a NUL,
    the caller's digest."""
    tag = VERSION_TAG if cot == "iknp" else VERSION_TAG + f" cot={cot}".encode()
    return tag + b"\x00" + bytes(extra)


def peer_version(peer_extra: bytes) -> str | None:
    """The runtime version a peer announced in its handshake ``extra`` (None: not a pairwise runtime)."""
    if not peer_extra.startswith(b"pairwise-yao/"):
        return None
    if b"\x00" in peer_extra:
        tag = peer_extra.split(b"\x00", 1)[0]
    else:  # versions 1-4 wrote the tag and the digest with no separator
        m = re.match(rb"pairwise-yao/\d", peer_extra)
        tag = m.group(0) if m else peer_extra[:16]
    return tag.decode("ascii", "replace")


def explain_handshake_error(exc: HandshakeError, my_extra: bytes) -> HandshakeError:
    """A handshake failure as a :class:`VersionMismatch` or :class:`ExecutionMismatch` when it is one
    (``my_extra``: what this side sent, :func:`session_extra`)."""
    peer_extra = getattr(exc, "peer_extra", None)
    if peer_extra is None:
        return exc
    theirs = peer_version(peer_extra)
    mine = peer_version(my_extra)
    err: HandshakeError
    if theirs != mine:
        err = VersionMismatch(
            f"runtime version mismatch: this side runs {mine}, the peer runs "
            f"{theirs or 'something else (not a pairwise two-party runtime)'}; "
            "run the same pairwise release on both sides"
        )
    else:
        err = ExecutionMismatch(str(exc))  # same version: the caller's digest (the circuit) differs
    err.peer_extra = peer_extra  # type: ignore[union-attr]  # a per-instance attribute (see handshake)
    return err


def random_digest(groups: tuple[InputGroup, ...]) -> bytes:
    return hashlib.sha256(b"random-groups\0" + b"\0".join(g.name.encode() for g in groups)).digest()[:8]


def exec_header(
    circuit: Circuit, batch: int, chunk: int, offset: int, output: str, random: tuple[InputGroup, ...] = ()
) -> bytes:
    return EXEC.pack(
        EXEC_MAGIC,
        bytes.fromhex(circuit.content_hash),
        circuit.n_and,
        batch,
        chunk,
        offset,
        OUTPUT_MODES.index(output),
        random_digest(random),
    )


def compare_headers(mine: bytes, theirs, circuit: Circuit) -> None:
    """Raise :class:`ExecutionMismatch` unless the peer's header equals ours (same message on both sides)."""
    theirs = bytes(theirs)
    if len(theirs) != EXEC.size or not theirs.startswith(EXEC_MAGIC):
        raise ProtocolError(f"expected an execution header ({EXEC.size} bytes), got {len(theirs)} bytes")
    if theirs == mine:
        return
    m = EXEC.unpack(mine)
    t = EXEC.unpack(theirs)
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
        raise ExecutionMismatch(
            "execution parameter mismatch: the two parties name different random input groups "
            "(run(..., random=...) must list the same groups on both sides)"
        )
    raise ProtocolError("malformed execution header from the peer")


class LabelStream:
    """The session's keystream of the garbler's active input labels: AES-128-CTR under a 16-byte key.

    Both parties hold one with the same key and call :meth:`fill` with the
    same counts in the same order, so block i of the stream is the active
    label of the i-th garbler input wire (and instance) of the session.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) != 16:
            raise ValueError(f"label key must be 16 bytes, got {len(key)}")
        self._enc = Cipher(algorithms.AES(bytes(key)), modes.CTR(bytes(16))).encryptor()
        self._zeros = bytes(0)
        self._buf = bytearray(0)

    @staticmethod
    def new_key() -> bytes:
        return os.urandom(16)

    def fill(self, out: np.ndarray) -> None:
        """Write the next ``out.shape[0]`` blocks into the (n, 2) uint64 array ``out`` (any strides)."""
        nbytes = 16 * out.shape[0]
        if len(self._zeros) < nbytes:
            self._zeros = bytes(nbytes)
            self._buf = bytearray(nbytes + 16)  # OpenSSL wants 15 bytes of slack after the output
        self._enc.update_into(memoryview(self._zeros)[:nbytes], self._buf)
        out[...] = np.frombuffer(self._buf, dtype="<u8", count=2 * out.shape[0]).reshape(out.shape)


class FrameWriter:
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


class FrameReader:
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


def unpack_bits(data, n: int, what: str = "bits") -> np.ndarray:
    """``n`` bits packed little-endian 8 per byte (padding bits must be zero), as bools."""
    packed = np.frombuffer(data, dtype=np.uint8)
    if packed.shape[0] != (n + 7) // 8:
        raise ProtocolError(f"{what}: expected {(n + 7) // 8} bytes for {n} bits, got {packed.shape[0]}")
    if n % 8 and packed[-1] >> (n % 8):
        raise ProtocolError(f"{what} for {n} bits have non-zero padding bits")
    return np.unpackbits(packed, count=n, bitorder="little").view(np.bool_)


def circuit_digest(circuit: Circuit, params: bytes = b"") -> bytes:
    """A short digest of a circuit and parameters for the session handshake's ``extra``."""
    return hashlib.sha256(b"circuit\x00" + circuit.content_hash.encode() + b"\x00" + params).digest()[:16]
