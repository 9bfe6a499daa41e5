"""In-process channels: a connected memory pair, a discard channel and a recording wrapper.

What it does
    * :class:`MemoryChannel` -- ``MemoryChannel.pair()`` gives two connected
      ends for tests and for two threads of one process (thread-safe queues,
      a timeout on every receive).  Frames are copied on send; a buffer the
      receiver hands back with :meth:`MemoryChannel.recycle` is reused for
      the next frame of its size (up to :data:`RECYCLE_BYTES` per direction).
    * :class:`NullChannel` -- counts and discards (garbling benchmarks that
      must not pay for a network).
    * :class:`TranscriptChannel` -- wraps a channel and keeps a copy of every
      frame (tests that check what a party saw; debugging).

Security model
    Both ends live in one process, so there is nothing to protect in
    transit.  The counters are those of :class:`pairwise.mpc.channel.base.Channel`
    (the 4-byte length prefix of each frame is counted although nothing is
    encoded), so what a protocol costs in memory is what it costs on TCP.

References
    The discard channel follows emp-toolkit ``emp-tool/io`` (a channel that
    discards everything separates garbling speed from network speed).
"""

from __future__ import annotations

import threading
from collections import deque

from ..errors import ChannelError, ChannelTimeout, FrameError, PeerClosed
from .base import DEFAULT_MAX_FRAME, DEFAULT_TIMEOUT, Channel

__all__ = ["MemoryChannel", "NullChannel", "TranscriptChannel", "RECYCLE_BYTES"]


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

    def __init__(
        self,
        outbox: _Pipe,
        inbox: _Pipe,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_frame: int = DEFAULT_MAX_FRAME,
        name: str = "memory",
    ) -> None:
        super().__init__(timeout=timeout, max_frame=max_frame)
        self._out = outbox
        self._in = inbox
        self.name = name

    @classmethod
    def pair(
        cls, *, timeout: float = DEFAULT_TIMEOUT, max_frame: int = DEFAULT_MAX_FRAME
    ) -> tuple[MemoryChannel, MemoryChannel]:
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
