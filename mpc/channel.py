"""Message channels between two parties: in-memory, TCP and discard, plus the session handshake.

What it does
    A :class:`Channel` moves *frames* (byte strings) in order between two
    parties.  The base class holds the typed helpers every protocol uses
    (128-bit block arrays, packed bit arrays, fixed-width integer arrays), the
    byte/message counters and the error policy; a subclass only moves frames:

    * :class:`MemoryChannel` -- ``MemoryChannel.pair()`` gives two connected
      ends for tests and for two threads of one process (thread-safe queues,
      a timeout on every receive).
    * :class:`TCPChannel` -- length-prefixed frames over a TCP socket:
      4-byte big-endian length, then the payload.  ``TCPChannel.connect``
      retries until a deadline, ``TCPChannel.listen`` accepts one peer,
      :class:`TCPListener` accepts many (a server hands each accepted
      connection to its own thread, :meth:`TCPListener.accept_socket`) or
      waits for the first valid peer despite stray connections
      (:meth:`TCPListener.accept_first`).  Each send is written at once
      (length prefix and payload in one ``sendmsg``); with ``buffered=True``
      small frames are instead coalesced in a send buffer that is written by
      :meth:`Channel.flush`, by any receive, by :meth:`Channel.close`, or
      when it reaches 256 KiB.  With ``tls=`` (a
      :class:`pairwise.mpc.tls.TLSConfig`) the same frames travel in mutual
      TLS 1.3, and :attr:`TCPChannel.peer_identity` is the peer's verified
      certificate name and role.
    * :class:`NullChannel` -- counts and discards (garbling benchmarks that
      must not pay for a network).
    * :class:`TranscriptChannel` -- wraps a channel and keeps a copy of every
      frame (tests that check what a party saw; debugging).

    :func:`handshake` starts a session: both parties *first send* a hello
    (magic, protocol version, role, session id, an ``extra`` digest such as
    the circuit hash, a fresh nonce) and *then* compare it with the peer's, so
    a mismatch is detected and raised on both sides with the same message.

Wire format (version 1)
    frame  = length:uint32-be || payload          (length <= max_frame)
    hello  = b"PAIRWISE" || version:uint16-be || nonce[16]
             || len:uint8 || role || len:uint16-be || session_id
             || len:uint16-be || extra
    On TLS, right after the TLS handshake each side sends one admission
    frame and then reads the other's:
    admit  = b"PAIRWISE/ADMIT" || 0x01                  (peer accepted)
           | b"PAIRWISE/ADMIT" || 0x00 || reason[<=512] (peer refused: role or name)
    A TLS endpoint answers a plaintext peer with one plaintext frame
    ``b"PAIRWISE/TLS-REQUIRED: ..."`` (reported by :meth:`Hello.decode`), and a
    plaintext endpoint recognises a TLS ClientHello as its first "frame".
    Nothing is ever pickled; peers' bytes are only parsed with ``struct`` and
    ``numpy.frombuffer`` after their length has been checked.

Failure policy
    Every wait has a timeout (``timeout`` seconds of silence; default
    :data:`DEFAULT_TIMEOUT`).  Errors are :class:`pairwise.mpc.errors.ChannelError`
    subclasses (an ``OSError``) with a message naming the peer, the sizes and
    what to do.  After an error that leaves the byte stream in an unknown
    state (bad frame, timeout mid-frame, failed send) the channel is unusable
    and every later call raises.  A frame larger than ``max_frame`` is
    refused before any memory is allocated for it, and a frame within the
    limit is received incrementally: the buffer grows 1 MiB at a time as the
    bytes arrive, so a peer that announces a large frame and sends nothing
    costs at most 1 MiB, never the announced length.

Security model
    The channel is a semi-honest transport: its job is to never hang, never
    mis-frame and to reject malformed input early.  Plaintext TCP gives no
    confidentiality or integrity, so :class:`TCPChannel` and
    :class:`TCPListener` refuse it on non-loopback addresses unless told
    ``insecure=True`` (:class:`InsecureTransport`); mutual TLS 1.3 with a
    pinned CA (:mod:`pairwise.mpc.tls`) provides both, plus the peer's
    authenticated name and role, which the admission step checks against the
    allowed ``peer_roles``/``peer_names`` on both sides.  The handshake nonce
    gives every run a fresh :attr:`HandshakeResult.run_id` that higher layers
    may mix into key derivations.

References
    Framing and the discard channel follow emp-toolkit ``emp-tool/io`` and
    MPyC's explicit ``struct`` frames; the "exchange then compare" handshake is
    our own (both sides must report the same mismatch).
"""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import ssl
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Self, Sequence, TypeAlias

import numpy as np
import numpy.typing as npt

from .errors import (
    AccessDenied,
    AddressInUse,
    AuthenticationError,
    ChannelError,
    ChannelTimeout,
    ConnectError,
    FrameError,
    HandshakeError,
    InsecureTransport,
    PeerClosed,
    ProtocolError,
    TruncatedFrame,
)

__all__ = [
    "Channel",
    "MemoryChannel",
    "TCPChannel",
    "TCPListener",
    "PendingConnection",
    "NullChannel",
    "TranscriptChannel",
    "Hello",
    "HandshakeResult",
    "handshake",
    "session_bytes",
    "MAGIC",
    "PROTOCOL_VERSION",
    "HEADER_BYTES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_FRAME",
    "DEFAULT_HANDSHAKE_TIMEOUT",
    # re-exported errors
    "ChannelError",
    "ChannelTimeout",
    "PeerClosed",
    "TruncatedFrame",
    "FrameError",
    "ConnectError",
    "AddressInUse",
    "HandshakeError",
    "AuthenticationError",
    "AccessDenied",
    "InsecureTransport",
    "ProtocolError",
]

#: Bytes of the length prefix of every frame (counted in ``bytes_sent``/``bytes_received``).
HEADER_BYTES = 4
_HEADER = struct.Struct("!I")
#: Seconds a receive waits for the peer before :class:`ChannelTimeout`.
DEFAULT_TIMEOUT = 60.0
#: Largest frame accepted by default (256 MiB); bigger payloads are chunked by the caller.
DEFAULT_MAX_FRAME = 1 << 28
_MAX_FRAME_LIMIT = (1 << 32) - 1
# Optional TCP send buffering (buffered=True): frames up to _SMALL_FRAME bytes are
# copied into the send buffer, written when it reaches _FLUSH_AT bytes or before a receive.
_SMALL_FRAME = 1 << 16
_FLUSH_AT = 1 << 18

if TYPE_CHECKING:
    from .tls import PeerIdentity, TLSConfig

#: What :meth:`Channel.send` takes: a bytes-like object (C-contiguous numpy arrays are sent as raw memory).
BytesLike: TypeAlias = bytes | bytearray | memoryview | np.ndarray
#: Allowed peer certificate roles or names: one, or several (``None``: any).
PeerFilter: TypeAlias = str | Iterable[str] | None


def _check_timeout(timeout: float, name: str = "timeout") -> float:
    try:
        t = float(timeout)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, got {timeout!r}") from None
    if not (t > 0 and t < float("inf")):
        raise ValueError(f"{name} must be a positive finite number of seconds, got {timeout!r}")
    return t


def _as_byte_view(data: BytesLike) -> memoryview:
    """A flat unsigned-byte view of a bytes-like object (C-contiguous numpy arrays too)."""
    if isinstance(data, np.ndarray):
        data = np.ascontiguousarray(data)
    view = memoryview(data)  # type: ignore[arg-type]  # (numpy's stubs declare __buffer__ only on Python >= 3.12)
    if not view.c_contiguous:
        raise ValueError("frame data must be C-contiguous")
    if view.nbytes == 0:
        return memoryview(b"")  # (cast() refuses shapes with a zero)
    return view.cast("B") if (view.format != "B" or view.ndim != 1) else view


class Channel:
    """Ordered, framed, two-party message channel (abstract base class).

    Counters (wire bytes, including the 4-byte length prefix of each frame, so
    that memory and TCP channels report identical numbers):
    ``bytes_sent``, ``bytes_received``, ``messages_sent``, ``messages_received``.

    A channel has one owner thread at each end.  Subclasses implement
    ``_send_frame(view)``, ``_recv_frame(timeout, limit)`` and optionally
    ``_flush()`` / ``_close()``.
    """

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.timeout = _check_timeout(timeout)
        max_frame = int(max_frame)
        if not 0 < max_frame <= _MAX_FRAME_LIMIT:
            raise ValueError(f"max_frame must be in 1..{_MAX_FRAME_LIMIT} bytes, got {max_frame}")
        self.max_frame = max_frame
        self.bytes_sent = 0
        self.bytes_received = 0
        self.messages_sent = 0
        self.messages_received = 0
        self._closed = False
        self._failure: BaseException | None = None

    # ------------------------------------------------------------------ hooks
    def _send_frame(self, view: memoryview) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _recv_frame(self, timeout: float, limit: int) -> bytes | bytearray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _flush(self) -> None:
        pass

    def _close(self) -> None:
        pass

    # ------------------------------------------------------------ state/errors
    @property
    def closed(self) -> bool:
        return self._closed

    def _check_usable(self) -> None:
        if self._closed:
            raise ChannelError(f"{type(self).__name__} is closed")
        if self._failure is not None:
            raise ChannelError(
                f"{type(self).__name__} is unusable after an earlier error: {self._failure}"
            )

    def _fail(self, exc: BaseException) -> None:
        """Mark the stream as desynchronised: later calls raise, the transport is released."""
        if self._failure is None:
            self._failure = exc
        try:
            self._close()
        except OSError:
            pass

    # ------------------------------------------------------------- raw frames
    def send(self, data: BytesLike) -> None:
        """Send one frame (any bytes-like object; C-contiguous numpy arrays are sent as raw memory).

        On a buffered channel (``TCPChannel(..., buffered=True)``) the frame
        is on the wire only after :meth:`flush`, any receive, or
        :meth:`close`; protocols call :meth:`flush` before waiting on
        anything but this channel, so they work on both kinds.
        """
        self._check_usable()
        view = _as_byte_view(data)
        n = view.nbytes
        if n > self.max_frame:
            raise FrameError(
                f"refusing to send a frame of {n} bytes: larger than max_frame={self.max_frame}; "
                "split the payload or raise max_frame on both sides"
            )
        self._send_frame(view)
        self.bytes_sent += n + HEADER_BYTES
        self.messages_sent += 1

    def recv(self, timeout: float | None = None, *, max_size: int | None = None) -> bytes:
        """Receive the next frame.

        ``timeout`` overrides the channel's timeout for this call; ``max_size``
        lowers the size limit for this frame (a larger announced frame raises
        :class:`FrameError` before anything is allocated).
        """
        frame = self._recv(timeout, max_size)
        return frame if isinstance(frame, bytes) else bytes(frame)

    def recv_frame(self, timeout: float | None = None, *, max_size: int | None = None) -> bytearray:
        """Like :meth:`recv` but returns the frame's own buffer (a writable ``bytearray``, no copy).

        For large frames that are parsed with ``numpy.frombuffer``.
        """
        frame = self._recv(timeout, max_size)
        return frame if isinstance(frame, bytearray) else bytearray(frame)

    def _recv(self, timeout: float | None, max_size: int | None) -> bytes | bytearray:
        self._check_usable()
        t = self.timeout if timeout is None else _check_timeout(timeout)
        limit = self.max_frame if max_size is None else min(int(max_size), self.max_frame)
        try:
            frame = self._recv_frame(t, limit)
        except FrameError as exc:
            self._fail(exc)
            raise
        self.bytes_received += len(frame) + HEADER_BYTES
        self.messages_received += 1
        return frame

    # ---------------------------------------------------------- typed helpers
    def send_blocks(self, blocks: np.ndarray) -> None:
        """Send a uint64 block array (..., 2) as 16 little-endian bytes per block (one frame)."""
        arr = np.asarray(blocks)
        if arr.ndim == 0 or arr.shape[-1] != 2:
            raise ValueError(f"blocks must have last axis 2 (uint64 pairs), got shape {arr.shape}")
        if arr.dtype != np.uint64:
            raise ValueError(f"blocks must be uint64, got {arr.dtype}")
        self.send(np.ascontiguousarray(arr, dtype="<u8"))

    def recv_blocks(self, shape: int | tuple[int, ...] | None = None, *, timeout: float | None = None) -> np.ndarray:
        """Receive a block array; ``shape`` (count or tuple, without the last axis 2) is enforced.

        With ``shape=None`` any multiple of 16 bytes is accepted and a (k, 2)
        array returned.  The result is a fresh, writable uint64 array.
        """
        if shape is None:
            frame = self._recv(timeout, None)
            if len(frame) % 16:
                raise self._frame_error(f"block frame of {len(frame)} bytes is not a multiple of 16")
            out_shape: tuple[int, ...] = (len(frame) // 16, 2)
        else:
            dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
            dims = tuple(int(d) for d in dims)
            if any(d < 0 for d in dims):
                raise ValueError(f"block shape must be non-negative, got {dims}")
            count = int(np.prod(dims, dtype=np.int64))
            frame = self._recv(timeout, 16 * count)
            if len(frame) != 16 * count:
                raise self._frame_error(
                    f"expected {count} blocks ({16 * count} bytes), got a frame of {len(frame)} bytes"
                )
            out_shape = dims + (2,)
        return _frombuffer(frame, np.uint64, out_shape)

    def send_bits(self, bits: np.ndarray | Sequence[int]) -> None:
        """Send a 1-D array of bits (bool, or integers 0/1) packed 8 per byte, little-endian bit order."""
        arr = np.asarray(bits)
        if arr.ndim != 1:
            raise ValueError(f"bits must be a 1-D array, got shape {arr.shape}")
        if arr.dtype != np.bool_:
            if arr.size and not np.isin(arr, (0, 1)).all():
                raise ValueError("bits must be booleans or integers 0/1")
            arr = arr.astype(np.bool_)
        self.send(np.packbits(arr, bitorder="little"))

    def recv_bits(self, n: int, *, timeout: float | None = None) -> np.ndarray:
        """Receive exactly ``n`` packed bits; returns a bool array of shape (n,).

        The frame must be ceil(n/8) bytes with zero padding bits.
        """
        n = int(n)
        if n < 0:
            raise ValueError(f"bit count must be non-negative, got {n}")
        nbytes = (n + 7) // 8
        frame = self._recv(timeout, nbytes)
        if len(frame) != nbytes:
            raise self._frame_error(f"expected {n} bits ({nbytes} bytes), got a frame of {len(frame)} bytes")
        packed = np.frombuffer(frame, dtype=np.uint8)
        if n % 8 and packed[-1] >> (n % 8):
            raise self._frame_error(f"bit frame for {n} bits has non-zero padding bits")
        return np.unpackbits(packed, count=n, bitorder="little").view(np.bool_)

    def send_array(self, arr: np.ndarray) -> None:
        """Send a fixed-width numeric array as little-endian raw bytes (shape is not sent)."""
        a = np.asarray(arr)
        if a.dtype.kind not in "biuf" or a.dtype.itemsize == 0:
            raise ValueError(f"send_array needs a fixed-width numeric array, got dtype {a.dtype}")
        self.send(np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")))

    def recv_array(self, dtype: npt.DTypeLike, shape: int | tuple[int, ...], *,
                   timeout: float | None = None) -> np.ndarray:
        """Receive an array sent by :meth:`send_array`; dtype and shape are enforced by size."""
        dt = np.dtype(dtype)
        if dt.kind not in "biuf":
            raise ValueError(f"recv_array needs a fixed-width numeric dtype, got {dt}")
        dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
        count = int(np.prod(dims, dtype=np.int64))
        frame = self._recv(timeout, count * dt.itemsize)
        if len(frame) != count * dt.itemsize:
            raise self._frame_error(
                f"expected {count} values of {dt} ({count * dt.itemsize} bytes), got a frame of {len(frame)} bytes"
            )
        return _frombuffer(frame, dt, dims)

    def _frame_error(self, message: str) -> FrameError:
        exc = FrameError(message)
        self._fail(exc)
        return exc

    # ------------------------------------------------------------ lifecycle
    def recycle(self, frame: bytes | bytearray) -> None:
        """Hint that the caller is done with a frame it received: the channel may reuse its memory.

        Only a frame returned by :meth:`recv_frame` may be passed, and nothing
        may read or write it afterwards.  The default does nothing;
        :class:`MemoryChannel` hands the buffer back to the sending side, so
        streams of same-size frames (garbled tables) stop touching fresh
        memory.
        """

    def flush(self) -> None:
        """Push buffered frames to the transport (no-op for unbuffered channels)."""
        self._check_usable()
        self._flush()

    def close(self) -> None:
        """Flush (best effort) and release the transport; idempotent. The peer then sees :class:`PeerClosed`."""
        if self._closed:
            return
        try:
            if self._failure is None:
                self._flush()
        except ChannelError:
            pass
        finally:
            self._closed = True
            self._close()

    def stats(self) -> dict[str, int]:
        """The four counters as a dict (for benchmark tables and JSON output)."""
        return {
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "messages_sent": self.messages_sent,
            "messages_received": self.messages_received,
        }

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("failed" if self._failure else "open")
        return (
            f"<{type(self).__name__} {state} sent={self.messages_sent}/{self.bytes_sent}B "
            f"received={self.messages_received}/{self.bytes_received}B>"
        )


def _frombuffer(frame: bytes | bytearray, dtype: npt.DTypeLike, shape: tuple[int, ...]) -> np.ndarray:
    le = np.dtype(dtype).newbyteorder("<")
    arr = np.frombuffer(frame, dtype=le).reshape(shape)
    if arr.dtype != np.dtype(dtype) or not arr.flags.writeable:
        arr = arr.astype(np.dtype(dtype))  # copy: native byte order, writable
    return arr


# ---------------------------------------------------------------------------
# In-memory pair
# ---------------------------------------------------------------------------


#: Bytes of recycled frame buffers a MemoryChannel direction keeps for reuse.
RECYCLE_BYTES = 64 << 20


class _Pipe:
    """One direction of a MemoryChannel pair: a frame queue, the writer's closed flag, recycled buffers."""

    __slots__ = ("cond", "frames", "writer_closed", "reader_closed", "free", "free_bytes")

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.frames: deque[bytearray] = deque()
        self.writer_closed = False
        self.reader_closed = False
        self.free: dict[int, list[bytearray]] = {}  # frame buffers handed back by the reader, by size
        self.free_bytes = 0


class MemoryChannel(Channel):
    """One end of an in-process channel; create both ends with :meth:`pair`.

    Frames are copied on send (the sender may reuse its buffers), into a
    buffer the receiver handed back with :meth:`recycle` when one of the
    same size is free (up to ``RECYCLE_BYTES`` per direction), else into a
    new one: a stream of same-size frames then reuses the same memory.
    Each end may be driven by a different thread; a receive waits at most
    ``timeout``.
    """

    def __init__(self, outbox: _Pipe, inbox: _Pipe, *, timeout: float = DEFAULT_TIMEOUT,
                 max_frame: int = DEFAULT_MAX_FRAME, name: str = "memory") -> None:
        super().__init__(timeout=timeout, max_frame=max_frame)
        self._out = outbox
        self._in = inbox
        self.name = name

    @classmethod
    def pair(cls, *, timeout: float = DEFAULT_TIMEOUT, max_frame: int = DEFAULT_MAX_FRAME) -> tuple[MemoryChannel, MemoryChannel]:
        """Two connected ends ``(a, b)``: what ``a`` sends, ``b`` receives, and vice versa."""
        ab, ba = _Pipe(), _Pipe()
        return (
            cls(ab, ba, timeout=timeout, max_frame=max_frame, name="memory-a"),
            cls(ba, ab, timeout=timeout, max_frame=max_frame, name="memory-b"),
        )

    def _send_frame(self, view: memoryview) -> None:
        out = self._out
        n = view.nbytes
        frame = None
        if out.free:
            with out.cond:
                spare = out.free.get(n)
                if spare:
                    frame = spare.pop()
                    out.free_bytes -= n
        if frame is None:
            frame = bytearray(view)
        else:
            frame[:] = view
        with out.cond:
            if out.reader_closed:
                raise PeerClosed(f"{self.name}: the peer closed its end of the in-memory channel")
            out.frames.append(frame)
            out.cond.notify()

    def recycle(self, frame: bytes | bytearray) -> None:
        inbox = self._in
        if isinstance(frame, bytearray) and len(frame):
            with inbox.cond:
                if inbox.free_bytes + len(frame) <= RECYCLE_BYTES and not inbox.reader_closed:
                    inbox.free.setdefault(len(frame), []).append(frame)
                    inbox.free_bytes += len(frame)

    def _recv_frame(self, timeout: float, limit: int) -> bytearray:
        inbox = self._in
        with inbox.cond:
            if not inbox.cond.wait_for(lambda: inbox.frames or inbox.writer_closed, timeout):
                raise ChannelTimeout(f"{self.name}: no message from the peer within {timeout:g} s")
            if not inbox.frames:
                raise PeerClosed(f"{self.name}: the peer closed the in-memory channel")
            frame = inbox.frames.popleft()
        if len(frame) > limit:
            raise FrameError(f"{self.name}: frame of {len(frame)} bytes exceeds the limit of {limit} bytes")
        return frame

    def _close(self) -> None:
        with self._out.cond:
            self._out.writer_closed = True
            self._out.cond.notify_all()
        with self._in.cond:
            self._in.reader_closed = True
            self._in.frames.clear()
            self._in.free.clear()
            self._in.free_bytes = 0


# ---------------------------------------------------------------------------
# Null channel and transcript wrapper
# ---------------------------------------------------------------------------


class NullChannel(Channel):
    """Counts and discards everything sent; cannot receive (benchmarks of one party alone)."""

    def _send_frame(self, view: memoryview) -> None:
        pass

    def _recv_frame(self, timeout: float, limit: int) -> bytes:
        raise ChannelError("NullChannel discards everything and has no peer: nothing to receive")


class TranscriptChannel(Channel):
    """Wraps a channel and keeps a copy of every frame in ``sent`` and ``received``.

    For tests ("which bytes did this party see?") and debugging; it doubles
    the memory of the traffic, so keep it out of production runs.
    """

    def __init__(self, inner: Channel) -> None:
        super().__init__(timeout=inner.timeout, max_frame=inner.max_frame)
        self.inner = inner
        self.sent: list[bytes] = []
        self.received: list[bytes] = []

    def _send_frame(self, view: memoryview) -> None:
        self.inner.send(view)
        self.sent.append(bytes(view))

    def _recv_frame(self, timeout: float, limit: int) -> bytes | bytearray:
        frame = self.inner._recv(timeout, limit)
        self.received.append(bytes(frame))
        return frame

    def _flush(self) -> None:
        self.inner.flush()

    def _close(self) -> None:
        self.inner.close()


# ---------------------------------------------------------------------------
# TCP
# ---------------------------------------------------------------------------

# Frames larger than this are received incrementally: the buffer grows by this much only
# after the bytes already announced have arrived, so an announced length never allocates.
_RECV_STEP = 1 << 20
_ZEROS = bytes(_RECV_STEP)
#: Seconds a TLS handshake plus admission may take on an accepted connection (default).
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
_ADMIT = b"PAIRWISE/ADMIT"
_ADMIT_MAX = len(_ADMIT) + 1 + 512


def _describe_oserror(exc: BaseException | None) -> str:
    if exc is None:
        return "no attempt made"
    if isinstance(exc, socket.timeout):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        from .tls import describe_ssl_error

        return describe_ssl_error(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _check_peers(tls: TLSConfig | None, peer_roles: PeerFilter,
                 peer_names: PeerFilter) -> tuple[frozenset | None, frozenset | None]:
    roles = None if peer_roles is None else frozenset([peer_roles] if isinstance(peer_roles, str) else peer_roles)
    names = None if peer_names is None else frozenset([peer_names] if isinstance(peer_names, str) else peer_names)
    if tls is None and (roles is not None or names is not None):
        raise ValueError("peer roles or names can only be checked on a TLS connection (give tls=TLSConfig(...))")
    if roles is not None:
        from .tls import check_role

        for r in roles:
            check_role(r)
    return roles, names


def _admission(identity, roles: frozenset | None, names: frozenset | None) -> str | None:
    """Why ``identity`` is not allowed (None: allowed)."""
    if roles is not None and identity.role not in roles:
        return f"role {identity.role!r} of {identity.name!r} is not allowed here (allowed: {', '.join(sorted(roles))})"
    if names is not None and identity.name not in names:
        return f"{identity.name!r} is not the expected peer (expected: {', '.join(sorted(names))})"
    return None


def _admit(ch: "TCPChannel", roles: frozenset | None, names: frozenset | None, timeout: float) -> None:
    """The admission step after TLS: both sides send their verdict on the other, then read the other's.

    Each side checks the peer's certificate role and name against what it
    allows and sends one frame (accepted, or refused with the reason) *before*
    reading the peer's, so a refused party learns why; then both close on a
    refusal.  Raises :class:`AccessDenied` on either refusal.  The byte and
    message counters start after this step (TLS records and admission are
    not counted, so plaintext and TLS runs report the same numbers).
    """
    reason = _admission(ch.peer_identity, roles, names)
    mine = _ADMIT + (b"\x01" if reason is None else b"\x00" + reason.encode("utf-8")[:512])
    ch.send(mine)
    ch.flush()
    try:
        theirs = ch.recv(timeout, max_size=_ADMIT_MAX)
    except ChannelError:
        if reason is not None:
            raise AccessDenied(f"refused {ch.peer_identity} at {ch.peer}: {reason}") from None
        raise
    if reason is not None:
        raise AccessDenied(f"refused {ch.peer_identity} at {ch.peer}: {reason}")
    if not theirs.startswith(_ADMIT) or len(theirs) < len(_ADMIT) + 1:
        raise HandshakeError(f"{ch.peer} sent no TLS admission message (not a pairwise endpoint?)")
    if theirs[len(_ADMIT)] != 1:
        why = theirs[len(_ADMIT) + 1:].decode("utf-8", "replace")
        raise AccessDenied(f"{ch.peer_identity} at {ch.peer} refused this connection: {why}")
    # the counters report the application's frames, as on a plaintext channel
    ch.bytes_sent = ch.bytes_received = ch.messages_sent = ch.messages_received = 0


def _admitted(ch: "TCPChannel", roles: frozenset | None, names: frozenset | None, timeout: float) -> "TCPChannel":
    """``ch`` after a successful :func:`_admit`; closed when admission fails."""
    try:
        _admit(ch, roles, names, timeout)
    except BaseException:
        ch.close()
        raise
    return ch


class TCPChannel(Channel):
    """Length-prefixed frames over a connected TCP socket (which the channel owns), optionally in mutual TLS.

    Build it with :meth:`connect`, :meth:`listen` or :meth:`TCPListener.accept`;
    ``TCPChannel(sock)`` wraps any connected stream socket (e.g. one accepted by
    your own server loop).  ``timeout`` bounds every wait for the peer (seconds
    of silence while receiving, or of a stalled send).  ``buffered=True``
    coalesces small frames until :meth:`flush` or the next receive (fewer
    system calls for protocols that send many small frames in a row).

    On a TLS channel, :attr:`peer_identity` is the peer's verified
    :class:`pairwise.mpc.tls.PeerIdentity` (certificate name and role), for the
    application to authorize on; it is ``None`` on a plaintext channel.
    """

    def __init__(self, sock: socket.socket, *, timeout: float = DEFAULT_TIMEOUT,
                 max_frame: int = DEFAULT_MAX_FRAME, peer: str | None = None, buffered: bool = False,
                 peer_identity: PeerIdentity | None = None) -> None:
        super().__init__(timeout=timeout, max_frame=max_frame)
        self.buffered = bool(buffered)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.timeout)
        self._sock = sock
        self._tls = isinstance(sock, ssl.SSLSocket)
        self._sock_timeout = self.timeout
        self._wbuf = bytearray()
        self.peer_identity = peer_identity
        if peer is None:
            try:
                name = sock.getpeername()
                peer = f"{name[0]}:{name[1]}" if isinstance(name, tuple) else str(name or "peer")
            except OSError:
                peer = "peer"
        self.peer = peer

    @property
    def secure(self) -> bool:
        """True on a mutually authenticated TLS channel."""
        return self._tls

    # -- construction -------------------------------------------------------
    @classmethod
    def connect(cls, host: str, port: int, deadline: float = 10.0, *, timeout: float = DEFAULT_TIMEOUT,
                max_frame: int = DEFAULT_MAX_FRAME, buffered: bool = False, tls: TLSConfig | None = None,
                insecure: bool = False, peer_roles: PeerFilter = None, peer_names: PeerFilter = None) -> TCPChannel:
        """Connect to ``host:port``, retrying (refused, unreachable, timed out) for up to ``deadline`` seconds.

        With ``tls`` (a :class:`pairwise.mpc.tls.TLSConfig`) the connection is
        mutual TLS 1.3, and the peer must hold one of ``peer_roles`` and one of
        ``peer_names`` (each ``None``: any) -- else :class:`AccessDenied`.
        Without ``tls`` the host must be a loopback address unless
        ``insecure=True`` (:class:`InsecureTransport`).  Raises
        :class:`ConnectError` at once if the host name cannot be resolved,
        and when the deadline passes without a connection; TLS failures
        (:class:`AuthenticationError`) are not retried.
        """
        from .tls import check_plaintext, client_handshake

        port = _check_port(port, allow_zero=False)
        deadline = _check_timeout(deadline, "deadline")
        roles, names = _check_peers(tls, peer_roles, peer_names)
        end = time.monotonic() + deadline
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ConnectError(f"cannot resolve host {host!r}: {exc.strerror}; check the host name") from exc
        if tls is None:
            check_plaintext(host, port, insecure=insecure, what="connection to")
        label = f"{host}:{port}"
        delay, attempts, last = 0.02, 0, None
        while True:
            for family, socktype, proto, _, addr in infos:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    break
                sock = socket.socket(family, socktype, proto)
                sock.settimeout(remaining)
                try:
                    sock.connect(addr)
                except OSError as exc:
                    sock.close()
                    last, attempts = exc, attempts + 1
                    continue
                if tls is None:
                    return cls(sock, timeout=timeout, max_frame=max_frame, peer=label, buffered=buffered)
                hs_timeout = _check_timeout(timeout)
                ssock, ident = client_handshake(sock, tls, timeout=hs_timeout, peer=label)
                return _admitted(cls(ssock, timeout=timeout, max_frame=max_frame, peer=label, buffered=buffered,
                                     peer_identity=ident), roles, names, hs_timeout)
            remaining = end - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(delay, remaining))
            delay = min(2 * delay, 0.5)
        raise ConnectError(
            f"could not connect to {host}:{port} within {deadline:g} s after {attempts} attempt(s) "
            f"(last error: {_describe_oserror(last)}); is the peer running and listening there?"
        )

    @classmethod
    def listen(cls, host: str, port: int, timeout: float = DEFAULT_TIMEOUT, *, recv_timeout: float | None = None,
               max_frame: int = DEFAULT_MAX_FRAME, buffered: bool = False, tls: TLSConfig | None = None,
               insecure: bool = False, peer_roles: PeerFilter = None, peer_names: PeerFilter = None) -> TCPChannel:
        """Listen on ``host:port``, accept exactly one peer within ``timeout`` seconds, stop listening.

        The channel's receive timeout is ``recv_timeout`` (default: ``timeout``).
        ``tls``/``insecure``/``peer_roles``/``peer_names`` as in :meth:`connect`.
        Use :class:`TCPListener` to learn an ephemeral port, to serve many
        peers, or to keep waiting after a stray connection
        (:meth:`TCPListener.accept_first`).
        """
        with TCPListener(host, port, tls=tls, insecure=insecure) as listener:
            return listener.accept(timeout, recv_timeout=recv_timeout, max_frame=max_frame, buffered=buffered,
                                   peer_roles=peer_roles, peer_names=peer_names)

    # -- frames -------------------------------------------------------------
    def _set_sock_timeout(self, timeout: float) -> None:
        if timeout != self._sock_timeout:
            self._sock.settimeout(timeout)
            self._sock_timeout = timeout

    def _send_frame(self, view: memoryview) -> None:
        n = view.nbytes
        self._wbuf += _HEADER.pack(n)
        if (self.buffered or self._tls) and n <= _SMALL_FRAME:
            self._wbuf += view  # TLS: one record for prefix and payload
            if not self.buffered or len(self._wbuf) >= _FLUSH_AT:
                self._flush()
        else:
            buffered, self._wbuf = self._wbuf, bytearray()
            self._sendv((buffered, view))

    def _flush(self) -> None:
        if self._wbuf:
            buffered, self._wbuf = self._wbuf, bytearray()
            self._sendv((buffered,))

    def _sendv(self, parts) -> None:
        self._set_sock_timeout(self.timeout)
        views = [memoryview(p).cast("B") for p in parts if len(p)]
        try:
            if self._tls:  # SSLSocket has no sendmsg; sendall writes whole records
                for v in views:
                    self._sock.sendall(v)
                return
            while views:
                sent = self._sock.sendmsg(views)
                while sent:
                    head = len(views[0])
                    if sent >= head:
                        sent -= head
                        views.pop(0)
                    else:
                        views[0] = views[0][sent:]
                        sent = 0
        except socket.timeout:
            exc = ChannelTimeout(f"send to {self.peer} stalled for {self.timeout:g} s (the peer is not reading)")
            self._fail(exc)
            raise exc from None
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as err:
            exc = PeerClosed(f"connection to {self.peer} closed by the peer while sending ({_describe_oserror(err)})")
            self._fail(exc)
            raise exc from None
        except OSError as err:
            exc = ChannelError(f"send to {self.peer} failed: {_describe_oserror(err)}")
            self._fail(exc)
            raise exc from None
        finally:
            views.clear()

    def _recv_frame(self, timeout: float, limit: int) -> bytearray:
        self._flush()
        self._set_sock_timeout(timeout)
        header = bytearray(HEADER_BYTES)
        self._recv_into(header, 0, timeout, frame_start=True)
        (n,) = _HEADER.unpack(header)
        if n > limit:
            if not self._tls and self.messages_received == 0 and header[0] == 0x16 and header[1] == 0x03:
                raise FrameError(
                    f"{self.peer} started a TLS handshake, but this side runs without TLS "
                    "(give both sides --tls DIR --name NAME, or neither)"
                )
            raise FrameError(
                f"frame of {n} bytes announced by {self.peer} exceeds the limit of {limit} bytes "
                "(garbage or another protocol on this port, or max_frame too small)"
            )
        # Never allocate from the announced length alone: up to _RECV_STEP at once, then
        # one more step each time the bytes received so far fill the buffer.
        buf = bytearray(min(n, _RECV_STEP))
        got = 0
        while got < n:
            if got == len(buf):
                buf += _ZEROS if n - got >= _RECV_STEP else _ZEROS[: n - got]
            self._recv_into(buf, got, timeout, frame_start=False, total=n)
            got = len(buf)
        return buf

    def _recv_into(self, buf: bytearray, start: int, timeout: float, *, frame_start: bool,
                   total: int | None = None) -> None:
        """Fill ``buf[start:]`` from the socket (``total``: the frame size, for messages)."""
        n, got = len(buf), start
        total = n if total is None else total
        with memoryview(buf) as view:
            while got < n:
                try:
                    k = self._sock.recv_into(view[got:], n - got)
                except socket.timeout:
                    if frame_start and got == 0:
                        raise ChannelTimeout(f"no message from {self.peer} within {timeout:g} s") from None
                    exc = ChannelTimeout(
                        f"{self.peer} stalled for {timeout:g} s in the middle of a frame ({got} of {total} bytes)"
                    )
                    self._fail(exc)
                    raise exc from None
                except (ConnectionResetError, ConnectionAbortedError, ssl.SSLEOFError) as err:
                    exc = self._closed_error(frame_start and got == 0, got, total, _describe_oserror(err))
                    self._fail(exc)
                    raise exc from None
                except ssl.SSLError as err:  # an alert from the peer: it refused our certificate, ...
                    exc = AuthenticationError(f"TLS connection with {self.peer} failed: {_describe_oserror(err)}")
                    self._fail(exc)
                    raise exc from None
                except OSError as err:
                    exc = ChannelError(f"receive from {self.peer} failed: {_describe_oserror(err)}")
                    self._fail(exc)
                    raise exc from None
                if k == 0:
                    exc = self._closed_error(frame_start and got == 0, got, total, "end of stream")
                    self._fail(exc)
                    raise exc
                got += k

    def _closed_error(self, at_boundary: bool, got: int, n: int, why: str) -> PeerClosed:
        if at_boundary:
            return PeerClosed(f"{self.peer} closed the connection ({why})")
        return TruncatedFrame(f"{self.peer} closed the connection in the middle of a frame: got {got} of {n} bytes ({why})")

    def interrupt(self) -> None:
        """Shut the connection down from any thread (a server's deadline, shutdown).

        A receive or send blocked in the owner thread fails at once with a
        :class:`ChannelError`; the owner still calls :meth:`close`.
        """
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


def _check_port(port: int, *, allow_zero: bool) -> int:
    try:
        p = int(port)
    except (TypeError, ValueError):
        raise ValueError(f"port must be an integer, got {port!r}") from None
    lo = 0 if allow_zero else 1
    if not lo <= p <= 65535:
        raise ValueError(f"port must be in {lo}..65535, got {port}")
    return p


class PendingConnection:
    """A TCP connection accepted by :meth:`TCPListener.accept_socket` whose TLS handshake has not run yet.

    A server that serves each connection in its own thread calls
    :meth:`open` in that thread, so a slow or stalled peer never blocks the
    accept loop.
    """

    def __init__(self, listener: "TCPListener", sock: socket.socket, peer: str) -> None:
        self._listener = listener
        self._sock: socket.socket | None = sock
        self.peer = peer

    def open(self, *, recv_timeout: float = DEFAULT_TIMEOUT, max_frame: int = DEFAULT_MAX_FRAME,
             buffered: bool = False, handshake_timeout: float | None = None, peer_roles: PeerFilter = None,
             peer_names: PeerFilter = None) -> TCPChannel:
        """TLS handshake and admission (on a TLS listener), then the channel.

        Raises :class:`AuthenticationError` (no or untrusted certificate,
        plaintext peer), :class:`AccessDenied` (role or name not in
        ``peer_roles``/``peer_names``; the peer is told why) or
        :class:`ChannelTimeout` after ``handshake_timeout`` seconds (default
        ``min(recv_timeout, DEFAULT_HANDSHAKE_TIMEOUT)``); the connection is
        then closed.
        """
        from .tls import server_handshake

        sock, self._sock = self._sock, None
        if sock is None:
            raise ChannelError(f"connection from {self.peer} was already opened or closed")
        tls = self._listener.tls
        try:
            roles, names = _check_peers(tls, peer_roles, peer_names)
        except ValueError:
            sock.close()
            raise
        if tls is None:
            return TCPChannel(sock, timeout=recv_timeout, max_frame=max_frame, peer=self.peer, buffered=buffered)
        hs_timeout = _check_timeout(handshake_timeout if handshake_timeout is not None
                                    else min(_check_timeout(recv_timeout), DEFAULT_HANDSHAKE_TIMEOUT))
        ssock, ident = server_handshake(sock, tls, timeout=hs_timeout, peer=self.peer)
        return _admitted(TCPChannel(ssock, timeout=recv_timeout, max_frame=max_frame, peer=self.peer,
                                    buffered=buffered, peer_identity=ident), roles, names, hs_timeout)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class TCPListener:
    """A listening TCP socket that accepts any number of peers, each as a :class:`TCPChannel`.

    ``port=0`` picks a free port (read it from :attr:`port`).  With ``tls`` (a
    :class:`pairwise.mpc.tls.TLSConfig`) every accepted connection is mutual
    TLS 1.3; without it, ``host`` must be a loopback address unless
    ``insecure=True``.  A multi-client server hands each connection to its
    own thread before the TLS handshake, so a stalled peer blocks nobody::

        with TCPListener("0.0.0.0", 9000, tls=TLSConfig("certs", "server-0")) as lst:
            while True:
                pending = lst.accept_socket(timeout=3600)
                threading.Thread(target=lambda p=pending: serve_one(p.open(peer_roles={"querier"})),
                                 daemon=True).start()
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, backlog: int = 16,
                 tls: TLSConfig | None = None, insecure: bool = False) -> None:
        port = _check_port(port, allow_zero=True)
        self.host = host
        self.tls = tls
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except socket.gaierror as exc:
            raise ChannelError(f"cannot listen on {host}:{port}: cannot resolve host ({exc.strerror})") from exc
        if tls is None:
            from .tls import check_plaintext

            check_plaintext(host, port, insecure=insecure, what="listening on")
        family, socktype, proto, _, addr = infos[0]
        sock = socket.socket(family, socktype, proto)
        try:
            if os.name != "nt":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(backlog)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise AddressInUse(
                    f"cannot listen on {host}:{port}: address already in use "
                    "(another process holds this port; stop it or choose another port)"
                ) from exc
            if exc.errno == errno.EACCES:
                raise ChannelError(f"cannot listen on {host}:{port}: permission denied (ports below 1024 need privileges)") from exc
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ChannelError(f"cannot listen on {host}:{port}: address not available on this machine") from exc
            raise ChannelError(f"cannot listen on {host}:{port}: {_describe_oserror(exc)}") from exc
        self._sock = sock
        self.port = sock.getsockname()[1]

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def accept_socket(self, timeout: float = DEFAULT_TIMEOUT) -> PendingConnection:
        """Wait up to ``timeout`` seconds for one TCP connection; TLS runs later, in :meth:`PendingConnection.open`."""
        timeout = _check_timeout(timeout)
        if self._sock is None:
            raise ChannelError("TCPListener is closed")
        self._sock.settimeout(timeout)
        try:
            conn, addr = self._sock.accept()
        except socket.timeout:
            raise ChannelTimeout(f"no peer connected to {self.host}:{self.port} within {timeout:g} s") from None
        except OSError as exc:
            raise ChannelError(f"accept on {self.host}:{self.port} failed: {_describe_oserror(exc)}") from exc
        peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else str(addr)
        return PendingConnection(self, conn, peer)

    def accept(self, timeout: float = DEFAULT_TIMEOUT, *, recv_timeout: float | None = None,
               max_frame: int = DEFAULT_MAX_FRAME, buffered: bool = False, handshake_timeout: float | None = None,
               peer_roles: PeerFilter = None, peer_names: PeerFilter = None) -> TCPChannel:
        """Wait up to ``timeout`` seconds for one peer; return its channel (receive timeout ``recv_timeout`` or ``timeout``).

        On a TLS listener the handshake and admission run here (see
        :meth:`PendingConnection.open` for the errors); a failed peer raises,
        so a server that must outlive stray connections uses
        :meth:`accept_first` or :meth:`accept_socket`.
        """
        pending = self.accept_socket(timeout)
        return pending.open(recv_timeout=recv_timeout if recv_timeout is not None else timeout,
                            max_frame=max_frame, buffered=buffered, handshake_timeout=handshake_timeout,
                            peer_roles=peer_roles, peer_names=peer_names)

    def accept_first(self, timeout: float, setup, *, recv_timeout: float | None = None,
                     max_frame: int = DEFAULT_MAX_FRAME, buffered: bool = False,
                     handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT, peer_roles=None, peer_names=None,
                     on_reject=None):
        """Accept peers until one passes TLS, admission and ``setup(channel)``; return ``(channel, setup_result)``.

        ``setup`` runs the application's first exchange (e.g. the session
        handshake).  A connection that fails TLS or admission, or whose
        ``setup`` raises :class:`HandshakeError` or fails before the peer sent
        a single frame (a stray connection: garbage, a port scanner, the wrong
        protocol, a peer with another circuit), is closed, reported to
        ``on_reject(message)``, and the listener keeps waiting.  Each attempt
        gets at most ``handshake_timeout`` seconds until ``setup`` returns;
        the whole wait at most ``timeout``, after which :class:`ChannelTimeout`
        names the rejected connections.
        """
        timeout = _check_timeout(timeout)
        recv_timeout = _check_timeout(recv_timeout if recv_timeout is not None else timeout, "recv_timeout")
        end = time.monotonic() + timeout
        rejected: list[str] = []
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                break
            try:
                pending = self.accept_socket(remaining)
            except ChannelTimeout:
                break
            budget = max(0.05, min(remaining, _check_timeout(handshake_timeout, "handshake_timeout")))
            ch = None
            try:
                ch = pending.open(recv_timeout=recv_timeout, max_frame=max_frame, buffered=buffered,
                                  handshake_timeout=budget, peer_roles=peer_roles, peer_names=peer_names)
                ch.timeout = min(recv_timeout, budget)  # the first exchange of a stray must not hold us long
                result = setup(ch)
                ch.timeout = recv_timeout
                return ch, result
            except ChannelError as exc:
                stray = ch is None or isinstance(exc, HandshakeError) or ch.messages_received == 0
                if ch is not None:
                    ch.close()
                if not stray:
                    raise
                msg = f"rejected connection from {pending.peer}: {exc}"
                rejected.append(msg)
                if on_reject is not None:
                    on_reject(msg)
        if not rejected:
            raise ChannelTimeout(f"no peer connected to {self.host}:{self.port} within {timeout:g} s")
        raise ChannelTimeout(
            f"no valid peer connected to {self.host}:{self.port} within {timeout:g} s; "
            f"{len(rejected)} connection(s) rejected, the last: {rejected[-1]}"
        )

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> TCPListener:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------
# Handshake
# ---------------------------------------------------------------------------

#: First bytes of every session.
MAGIC = b"PAIRWISE"
#: Version of the wire protocol (frames, hello, OT messages); bump on any change.
PROTOCOL_VERSION = 1
_NONCE_BYTES = 16
_HELLO_FIXED = struct.Struct("!8sH16s")
_MAX_ROLE = 32
_MAX_SESSION = 1024
_MAX_EXTRA = 4096
_HELLO_MAX = _HELLO_FIXED.size + 1 + _MAX_ROLE + 2 + _MAX_SESSION + 2 + _MAX_EXTRA


def session_bytes(session_id: bytes | bytearray | str) -> bytes:
    """Normalise a session id (str as UTF-8, or bytes) and check it is 1..1024 bytes."""
    if isinstance(session_id, str):
        sid = session_id.encode("utf-8")
    elif isinstance(session_id, (bytes, bytearray, memoryview)):
        sid = bytes(session_id)
    else:
        raise ValueError(f"session id must be str or bytes, got {type(session_id).__name__}")
    if not 1 <= len(sid) <= _MAX_SESSION:
        raise ValueError(f"session id must be 1..{_MAX_SESSION} bytes, got {len(sid)}")
    return sid


def _show(data: bytes) -> str:
    try:
        text = data.decode("ascii")
        if text.isprintable():
            return repr(text if len(text) <= 40 else text[:37] + "...")
    except UnicodeDecodeError:
        pass
    return "0x" + data[:12].hex() + ("..." if len(data) > 12 else "")


@dataclass(frozen=True)
class Hello:
    """The first message of a session (see the module docstring for the layout)."""

    role: str
    session_id: bytes
    extra: bytes = b""
    nonce: bytes = b"\x00" * _NONCE_BYTES
    version: int = PROTOCOL_VERSION

    def encode(self) -> bytes:
        role = self.role.encode("ascii")
        return b"".join((
            _HELLO_FIXED.pack(MAGIC, self.version, self.nonce),
            struct.pack("!B", len(role)), role,
            struct.pack("!H", len(self.session_id)), self.session_id,
            struct.pack("!H", len(self.extra)), self.extra,
        ))

    @classmethod
    def decode(cls, data: bytes) -> Hello:
        """Parse a hello; raises :class:`HandshakeError` for a wrong magic, version or layout."""
        from .tls import TLS_REQUIRED

        if data.startswith(TLS_REQUIRED):
            raise AuthenticationError(
                "the peer requires mutual TLS and this side connected without it; "
                "run with --tls DIR --name NAME (certificates from `pairwise certs create`)"
            )
        if len(data) < _HELLO_FIXED.size or not data.startswith(MAGIC):
            raise HandshakeError(
                "the peer is not a pairwise endpoint (its first message lacks the pairwise magic); "
                "check the host and port"
            )
        _, version, nonce = _HELLO_FIXED.unpack_from(data)
        if version != PROTOCOL_VERSION:
            raise HandshakeError(
                f"protocol version mismatch: this side speaks version {PROTOCOL_VERSION}, "
                f"the peer speaks version {version}; run the same release on both sides"
            )
        try:
            pos = _HELLO_FIXED.size
            (lr,) = struct.unpack_from("!B", data, pos)
            role = data[pos + 1: pos + 1 + lr].decode("ascii")
            pos += 1 + lr
            (ls,) = struct.unpack_from("!H", data, pos)
            sid = data[pos + 2: pos + 2 + ls]
            pos += 2 + ls
            (le,) = struct.unpack_from("!H", data, pos)
            extra = data[pos + 2: pos + 2 + le]
            pos += 2 + le
            if pos != len(data) or len(role) != lr or len(sid) != ls or len(extra) != le:
                raise ValueError("length fields do not match the message")
        except (struct.error, UnicodeDecodeError, ValueError) as exc:
            raise HandshakeError(f"malformed handshake message from the peer ({exc})") from None
        return cls(role=role, session_id=bytes(sid), extra=bytes(extra), nonce=nonce, version=version)


@dataclass(frozen=True)
class HandshakeResult:
    """What both parties agreed on.

    ``run_id`` (16 bytes) = SHA-256 of both hellos (sorted), so it is fresh for
    every run even when the session id is reused; pass it to the OT layer as
    its session id if one session id serves many runs.
    """

    role: str
    peer_role: str
    session_id: bytes
    extra: bytes
    run_id: bytes


def _check_role(role: str) -> str:
    if not isinstance(role, str) or not 1 <= len(role) <= _MAX_ROLE or not role.isascii() or not role.isprintable():
        raise ValueError(f"role must be 1..{_MAX_ROLE} printable ASCII characters, got {role!r}")
    return role


def handshake(channel: Channel, role: str, session_id: bytes | str, extra: bytes = b"", *,
              peer_role: str | None = None, extra_label: str = "circuit",
              timeout: float | None = None) -> HandshakeResult:
    """Exchange hellos, then check magic, version, session id, roles and ``extra`` -- on both sides.

    ``role`` names this party (e.g. ``"garbler"``); the peer must claim a
    different role, and exactly ``peer_role`` if given.  ``extra`` is a short
    digest both sides must hold identically (the Yao runtime passes a hash of
    the circuit and parameters); on a difference both sides raise
    :class:`HandshakeError` with ``"<extra_label> mismatch"`` in the message
    (``"circuit mismatch"`` by default).  The checks run in the same order on
    both sides, so both report the same first mismatch.
    """
    role = _check_role(role)
    if peer_role is not None:
        _check_role(peer_role)
    sid = session_bytes(session_id)
    extra = bytes(extra)
    if len(extra) > _MAX_EXTRA:
        raise ValueError(f"handshake extra must be at most {_MAX_EXTRA} bytes (send a digest), got {len(extra)}")
    mine = Hello(role=role, session_id=sid, extra=extra, nonce=os.urandom(_NONCE_BYTES)).encode()
    channel.send(mine)
    channel.flush()
    try:
        theirs_raw = channel.recv(timeout, max_size=_HELLO_MAX)
    except FrameError as exc:
        raise HandshakeError(f"the peer did not send a pairwise handshake: {exc}") from exc
    except ChannelTimeout as exc:
        raise ChannelTimeout(f"handshake: {exc}") from exc
    theirs = Hello.decode(theirs_raw)
    if theirs.session_id != sid:
        raise HandshakeError(
            f"session id mismatch: this side uses {_show(sid)}, the peer uses {_show(theirs.session_id)}"
        )
    if theirs.role == role:
        raise HandshakeError(f"role conflict: both parties claim the role {role!r}")
    if peer_role is not None and theirs.role != peer_role:
        raise HandshakeError(f"role mismatch: expected the peer to be {peer_role!r}, it says {theirs.role!r}")
    if theirs.extra != extra:
        mine_d = hashlib.sha256(extra).hexdigest()[:16]
        theirs_d = hashlib.sha256(theirs.extra).hexdigest()[:16]
        raise HandshakeError(
            f"{extra_label} mismatch: this side has digest {mine_d}, the peer has {theirs_d}; "
            f"both parties must use the same {extra_label}"
        )
    run_id = hashlib.sha256(b"pairwise/run-id\x00" + b"".join(sorted((mine, bytes(theirs_raw))))).digest()[:16]
    return HandshakeResult(role=role, peer_role=theirs.role, session_id=sid, extra=extra, run_id=run_id)
