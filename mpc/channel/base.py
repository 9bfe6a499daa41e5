"""The channel base class: ordered frames, typed helpers, byte counters and the failure policy.

What it does
    A :class:`Channel` moves *frames* (byte strings) in order between two
    parties.  This base class holds what every transport shares: the typed
    helpers every protocol uses (128-bit block arrays, packed bit arrays,
    fixed-width integer arrays), the byte/message counters and the error
    policy.  A subclass only moves frames (``_send_frame``, ``_recv_frame``,
    optionally ``_flush``/``_close``): :mod:`pairwise.mpc.channel.memory`
    (memory pair, discard, transcript) and :mod:`pairwise.mpc.channel.tcp`.

Wire format (version 1)
    frame  = length:uint32-be || payload          (length <= max_frame)
    The counters count wire bytes, the 4-byte length prefix included, so
    memory and TCP channels report identical numbers.

Failure policy
    Every wait has a timeout (``timeout`` seconds of silence; default
    :data:`DEFAULT_TIMEOUT`).  Errors are :class:`pairwise.mpc.errors.ChannelError`
    subclasses (an ``OSError``) with a message naming the peer, the sizes and
    what to do.  After an error that leaves the byte stream in an unknown
    state (bad frame, timeout mid-frame, failed send) the channel is unusable
    and every later call raises.  A frame larger than ``max_frame`` is
    refused before any memory is allocated for it.

Security model
    A semi-honest transport: its job is to never hang, never mis-frame and
    to reject malformed input early.  Nothing is ever pickled; peers' bytes
    are only parsed with ``struct`` and ``numpy.frombuffer`` after their
    length has been checked.  Confidentiality and integrity are the
    transport's (mutual TLS in :mod:`pairwise.mpc.channel.tcp`).

References
    Framing follows emp-toolkit ``emp-tool/io`` and MPyC's explicit
    ``struct`` frames.  The whole design: ``docs/channels.md``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Self, TypeAlias

import numpy as np
import numpy.typing as npt

from ..errors import ChannelError, FrameError

__all__ = [
    "Channel",
    "BytesLike",
    "HEADER_BYTES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_FRAME",
]

#: Bytes of the length prefix of every frame (counted in ``bytes_sent``/``bytes_received``).
HEADER_BYTES = 4
_HEADER = struct.Struct("!I")
#: Seconds a receive waits for the peer before :class:`ChannelTimeout`.
DEFAULT_TIMEOUT = 60.0
#: Largest frame accepted by default (256 MiB); bigger payloads are chunked by the caller.
DEFAULT_MAX_FRAME = 1 << 28
_MAX_FRAME_LIMIT = (1 << 32) - 1

#: What :meth:`Channel.send` takes: a bytes-like object (C-contiguous numpy arrays are sent as raw memory).
BytesLike: TypeAlias = bytes | bytearray | memoryview | np.ndarray


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
            raise ChannelError(f"{type(self).__name__} is unusable after an earlier error: {self._failure}")

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

    def recv_array(
        self, dtype: npt.DTypeLike, shape: int | tuple[int, ...], *, timeout: float | None = None
    ) -> np.ndarray:
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
