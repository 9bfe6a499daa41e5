"""Pairwise frames, the TLS admission step and the session handshake on asyncio streams (server side).

What it does
    An asyncio server (the collect aggregator, :mod:`pairwise.protocols.collect.aggregator`)
    talks to clients that use the ordinary synchronous
    :class:`pairwise.mpc.channel.TCPChannel`, so it must speak exactly the
    same bytes:

    * frames: length:uint32-be || payload (:class:`AsyncConnection.recv`,
      :meth:`AsyncConnection.send`), the announced length checked against a
      limit *before* anything is read, every read bounded by a timeout;
    * after the TLS handshake (``asyncio.start_server(ssl=...)``), the
      admission step of :mod:`pairwise.mpc.channel.tcp`: each side sends its
      verdict on the other's certificate role and name, then reads the
      other's (:func:`accept_connection`);
    * the session hello of :mod:`pairwise.mpc.channel.hello` (magic,
      version, session id, roles, protocol digest), checked by the same
      :func:`~pairwise.mpc.channel.hello.check_hello` the synchronous side runs;
    * JSON control frames (:mod:`pairwise.protocols.service.frames`).

    :attr:`AsyncConnection.identity` is the peer's verified certificate
    identity (name, role), or None on a plaintext loopback connection.  After
    its protocol says so, a connection can be used as a raw byte stream
    (:meth:`AsyncConnection.read_bytes`, :meth:`AsyncConnection.write_bytes`),
    which is what a relay forwards.

Security model
    Same as :mod:`pairwise.mpc.channel.tcp`: mutual TLS 1.3 with the CA of
    :mod:`pairwise.mpc.tls`, roles checked at admission, no frame larger than
    the caller's limit, every wait bounded; peers' bytes are parsed with
    ``struct`` and ``json`` only.
"""

from __future__ import annotations

import asyncio
import struct

from pairwise.mpc.channel.hello import _HELLO_MAX, check_hello, hello_message
from pairwise.mpc.channel.tcp import _ADMIT, _ADMIT_MAX, _admission
from pairwise.mpc.errors import (
    AccessDenied,
    ChannelTimeout,
    FrameError,
    HandshakeError,
    PeerClosed,
    TruncatedFrame,
)

from .frames import CONTROL_MAX, decode_json, encode_json

__all__ = ["AsyncConnection", "accept_connection", "TLS_READ_BUFFER", "limit_tls_buffers"]

#: Bytes asyncio's TLS transport reads from OpenSSL at once, per connection.
TLS_READ_BUFFER = 16 * 1024


def limit_tls_buffers(size: int = TLS_READ_BUFFER) -> None:
    """Make asyncio's TLS transport preallocate ``size`` bytes per connection instead of 256 KiB.

    ``asyncio.sslproto.SSLProtocol`` gives every TLS connection a read buffer
    of ``max_size`` bytes (256 KiB in CPython 3.11-3.13), allocated at
    accept: an aggregator holding two connections for each of 10^4 users
    would keep 5 GiB of buffers for mostly idle connections.  A TLS record
    holds at most 16 KiB of plaintext, so 16 KiB reads lose little.  Call it once in a
    server process before it accepts connections (it changes that class
    attribute for the whole process).
    """
    from asyncio import sslproto

    if hasattr(sslproto, "SSLProtocol") and getattr(sslproto.SSLProtocol, "max_size", 0) > size:
        sslproto.SSLProtocol.max_size = int(size)


_HEADER = struct.Struct("!I")


class AsyncConnection:
    """One accepted connection: frames, JSON and raw bytes on an asyncio (reader, writer) pair.

    ``timeout``: the default bound of every read (seconds of silence).
    Counters ``bytes_sent``/``bytes_received`` count application bytes
    (frames with their 4-byte prefix, or raw bytes).
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        timeout: float,
        max_frame: int = CONTROL_MAX,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.timeout = float(timeout)
        self.max_frame = int(max_frame)
        self.identity = None
        self.bytes_sent = self.bytes_received = 0
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer or "peer")
        self.closed = False

    # ------------------------------------------------------------------ frames
    async def _exactly(self, n: int, timeout: float, *, frame_start: bool, total: int) -> bytes:
        try:
            return await asyncio.wait_for(self.reader.readexactly(n), timeout)
        except TimeoutError:
            if frame_start:
                raise ChannelTimeout(f"no message from {self.peer} within {timeout:g} s") from None
            raise ChannelTimeout(f"{self.peer} stalled for {timeout:g} s in the middle of a frame") from None
        except asyncio.IncompleteReadError as exc:
            if frame_start and not exc.partial:
                raise PeerClosed(f"{self.peer} closed the connection") from None
            raise TruncatedFrame(
                f"{self.peer} closed the connection in the middle of a frame: got {len(exc.partial)} of {total} bytes"
            ) from None
        except (ConnectionError, OSError) as exc:
            raise PeerClosed(f"{self.peer} closed the connection ({exc})") from None

    async def recv(self, timeout: float | None = None, *, max_size: int | None = None) -> bytes:
        """The next frame; a frame announced larger than ``max_size`` (default ``max_frame``) is refused unread."""
        t = self.timeout if timeout is None else float(timeout)
        limit = self.max_frame if max_size is None else min(int(max_size), self.max_frame)
        (n,) = _HEADER.unpack(await self._exactly(4, t, frame_start=True, total=4))
        if n > limit:
            raise FrameError(f"frame of {n} bytes announced by {self.peer} exceeds the limit of {limit} bytes")
        data = await self._exactly(n, t, frame_start=False, total=n) if n else b""
        self.bytes_received += n + 4
        return data

    def send(self, data: bytes) -> None:
        """Queue one frame (the event loop writes it; call :meth:`drain` to wait for the socket)."""
        if self.closed or self.writer.is_closing():
            raise PeerClosed(f"connection to {self.peer} is closed")
        self.writer.write(_HEADER.pack(len(data)) + bytes(data))
        self.bytes_sent += len(data) + 4

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until the queued bytes are handed to the socket (a peer that reads nothing stalls this)."""
        t = self.timeout if timeout is None else float(timeout)
        try:
            await asyncio.wait_for(self.writer.drain(), t)
        except TimeoutError:
            raise ChannelTimeout(f"send to {self.peer} stalled for {t:g} s (the peer is not reading)") from None
        except (ConnectionError, OSError) as exc:
            raise PeerClosed(f"connection to {self.peer} closed by the peer while sending ({exc})") from None

    async def recv_json(self, timeout: float | None = None) -> dict:
        """One JSON control frame (at most :data:`CONTROL_MAX` bytes)."""
        return decode_json(await self.recv(timeout, max_size=CONTROL_MAX), self.peer)

    async def send_json(self, obj: dict, *, timeout: float | None = None) -> None:
        self.send(encode_json(obj))
        await self.drain(timeout)

    # ------------------------------------------------------------------ raw bytes (a relay)
    async def read_bytes(self, n: int = 1 << 16, timeout: float | None = None) -> bytes:
        """Up to ``n`` raw bytes (b"" at the end of the stream); :class:`ChannelTimeout` after ``timeout`` of silence."""
        t = self.timeout if timeout is None else float(timeout)
        try:
            data = await asyncio.wait_for(self.reader.read(n), t)
        except TimeoutError:
            raise ChannelTimeout(f"{self.peer} sent nothing for {t:g} s") from None
        except (ConnectionError, OSError):
            return b""
        self.bytes_received += len(data)
        return data

    def write_bytes(self, data: bytes) -> None:
        if self.closed or self.writer.is_closing():
            raise PeerClosed(f"connection to {self.peer} is closed")
        self.writer.write(data)
        self.bytes_sent += len(data)

    def write_eof(self) -> None:
        """Half-close: the peer reads the end of the stream (TLS: a close_notify) after what was written."""
        try:
            if self.writer.can_write_eof():
                self.writer.write_eof()
            else:  # TLS transports cannot half-close: the whole connection ends
                self.writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass

    # ------------------------------------------------------------------ end
    def abort(self) -> None:
        """Drop the connection at once (no flush): a deadline passed or the server stops."""
        self.closed = True
        transport = self.writer.transport
        if transport is not None:
            transport.abort()

    async def close(self, timeout: float = 5.0) -> None:
        """Flush what is queued (within ``timeout``), then close."""
        if self.closed:
            return
        self.closed = True
        try:
            self.writer.close()
            await asyncio.wait_for(self.writer.wait_closed(), timeout)
        except (TimeoutError, ConnectionError, OSError, RuntimeError):
            self.abort()


async def accept_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    role: str,
    session_id: bytes,
    digest: bytes,
    timeout: float,
    peer_roles=None,
    max_frame: int = CONTROL_MAX,
):
    """Admission (on TLS) and hello of a newly accepted connection; returns (connection, HandshakeResult).

    ``peer_roles``: certificate roles admitted (None: any role of the CA;
    each request is then authorized by role).  Raises
    :class:`~pairwise.mpc.errors.ChannelError` subclasses (``AccessDenied``,
    ``HandshakeError``, ``ChannelTimeout``, ...) when the peer does not pass;
    the caller closes the connection.
    """
    conn = AsyncConnection(reader, writer, timeout=timeout, max_frame=max_frame)
    ssl_object = writer.get_extra_info("ssl_object")
    if ssl_object is not None:
        from pairwise.mpc.tls import CertificateError, identity_from_der

        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            raise HandshakeError(f"TLS peer {conn.peer} presented no certificate")
        try:
            conn.identity = identity_from_der(der)
        except (CertificateError, ValueError) as exc:
            raise HandshakeError(f"TLS peer {conn.peer}: {exc}") from None
        roles = None if peer_roles is None else frozenset(peer_roles)
        reason = _admission(conn.identity, roles, None)
        conn.send(_ADMIT + (b"\x01" if reason is None else b"\x00" + reason.encode("utf-8")[:512]))
        await conn.drain()
        theirs = await conn.recv(timeout, max_size=_ADMIT_MAX)
        if reason is not None:
            raise AccessDenied(f"refused {conn.identity} at {conn.peer}: {reason}")
        if not theirs.startswith(_ADMIT) or len(theirs) < len(_ADMIT) + 1:
            raise HandshakeError(f"{conn.peer} sent no TLS admission message (not a pairwise endpoint?)")
        if theirs[len(_ADMIT)] != 1:
            why = theirs[len(_ADMIT) + 1 :].decode("utf-8", "replace")
            raise AccessDenied(f"{conn.identity} at {conn.peer} refused this connection: {why}")
    mine = hello_message(role, session_id, digest)
    conn.send(mine)
    await conn.drain()
    try:
        theirs = await conn.recv(timeout, max_size=_HELLO_MAX)
    except FrameError as exc:
        raise HandshakeError(f"the peer did not send a pairwise handshake: {exc}") from exc
    hs = check_hello(mine, theirs, extra_label="protocol")
    conn.bytes_sent = conn.bytes_received = 0  # the counters report the application's bytes
    return conn, hs
