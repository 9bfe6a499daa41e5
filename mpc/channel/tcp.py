"""TCP channels: length-prefixed frames over a socket, in mutual TLS 1.3 or in plaintext on loopback.

What it does
    * :class:`TCPChannel` -- the frames of :mod:`pairwise.mpc.channel.base`
      over a connected stream socket.  :meth:`TCPChannel.connect` retries
      until a deadline, :meth:`TCPChannel.listen` accepts one peer.  Each send
      is written at once (length prefix and payload in one ``sendmsg``); with
      ``buffered=True`` small frames are coalesced in a send buffer written by
      ``flush()``, by any receive, by ``close()``, or at 256 KiB.  A frame is
      received incrementally, the buffer growing 1 MiB at a time as the bytes
      arrive, so a peer that announces a large frame and sends nothing costs
      at most 1 MiB, never the announced length.
    * :class:`TCPListener` accepts many peers: a server hands each accepted
      connection (a :class:`PendingConnection`, before TLS) to its own thread
      (:meth:`TCPListener.accept_socket`), or waits for the first valid peer
      despite stray connections (:meth:`TCPListener.accept_first`).
    * Admission (TLS only): right after the TLS handshake each side sends its
      verdict on the peer's certificate role and name, then reads the other's:
          admit = b"PAIRWISE/ADMIT" || 0x01                  (peer accepted)
                | b"PAIRWISE/ADMIT" || 0x00 || reason[<=512] (peer refused)
      The counters start after it, so TLS and plaintext runs count the same.

Security model
    Plaintext TCP gives no confidentiality or integrity, so :class:`TCPChannel`
    and :class:`TCPListener` refuse it on non-loopback addresses unless told
    ``insecure=True`` (:class:`~pairwise.mpc.errors.InsecureTransport`).
    With ``tls=`` (a :class:`pairwise.mpc.tls.TLSConfig`) the same frames
    travel in mutual TLS 1.3 with a pinned CA, and :attr:`TCPChannel.peer_identity` is the peer's
    verified certificate name and role, which admission checks against the
    allowed ``peer_roles``/``peer_names`` on both sides.  A TLS endpoint
    answers a plaintext peer with one plaintext frame
    ``b"PAIRWISE/TLS-REQUIRED: ..."``, and a plaintext endpoint recognises a
    TLS ClientHello as its first "frame"; both fail saying what to fix.

References
    Stdlib :mod:`socket` and :mod:`ssl` (certificates and handshakes in
    :mod:`pairwise.mpc.tls`); framing as emp-toolkit ``emp-tool/io``.  The
    whole design: ``docs/channels.md``.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from pairwise.dp.validate import check_int, no_more_keywords, with_legacy

from ..errors import (
    AccessDenied,
    AddressInUse,
    AuthenticationError,
    ChannelError,
    ChannelTimeout,
    ConnectError,
    FrameError,
    HandshakeError,
    PeerBusy,
    PeerClosed,
    TruncatedFrame,
)
from .base import _HEADER, DEFAULT_MAX_FRAME, DEFAULT_TIMEOUT, HEADER_BYTES, Channel, _check_timeout

__all__ = ["TCPChannel", "TCPListener", "PendingConnection", "PeerFilter", "AcceptLimits", "DEFAULT_HANDSHAKE_TIMEOUT"]

# Optional TCP send buffering (buffered=True): frames up to _SMALL_FRAME bytes are
# copied into the send buffer, written when it reaches _FLUSH_AT bytes or before a receive.
_SMALL_FRAME = 1 << 16
_FLUSH_AT = 1 << 18

if TYPE_CHECKING:
    from ..tls import PeerIdentity, TLSConfig

#: Allowed peer certificate roles or names: one, or several (``None``: any).
PeerFilter: TypeAlias = str | Iterable[str] | None


# Frames larger than this are received incrementally: the buffer grows by this much only
# after the bytes already announced have arrived, so an announced length never allocates.
_RECV_STEP = 1 << 20
#: Frames handed back with :meth:`TCPChannel.recycle` are kept for reuse up to this many bytes in all.
_RECYCLE_BYTES = 1 << 20
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
        from ..tls import describe_ssl_error

        return describe_ssl_error(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _check_peers(
    tls: TLSConfig | None, peer_roles: PeerFilter, peer_names: PeerFilter
) -> tuple[frozenset | None, frozenset | None]:
    roles = None if peer_roles is None else frozenset([peer_roles] if isinstance(peer_roles, str) else peer_roles)
    names = None if peer_names is None else frozenset([peer_names] if isinstance(peer_names, str) else peer_names)
    if tls is None and (roles is not None or names is not None):
        raise ValueError("peer roles or names can only be checked on a TLS connection (give tls=TLSConfig(...))")
    if roles is not None:
        from ..tls import check_role

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


def _admit(ch: TCPChannel, roles: frozenset | None, names: frozenset | None, timeout: float) -> None:
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
        why = theirs[len(_ADMIT) + 1 :].decode("utf-8", "replace")
        raise AccessDenied(f"{ch.peer_identity} at {ch.peer} refused this connection: {why}")
    # the counters report the application's frames, as on a plaintext channel
    ch.bytes_sent = ch.bytes_received = ch.messages_sent = ch.messages_received = 0


def _admitted(ch: TCPChannel, roles: frozenset | None, names: frozenset | None, timeout: float) -> TCPChannel:
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

    def __init__(
        self,
        sock: socket.socket,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_frame: int = DEFAULT_MAX_FRAME,
        peer: str | None = None,
        buffered: bool = False,
        peer_identity: PeerIdentity | None = None,
    ) -> None:
        super().__init__(timeout=timeout, max_frame=max_frame)
        self.buffered = bool(buffered)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.timeout)
        self._sock = sock
        self._tls = isinstance(sock, ssl.SSLSocket)
        self._sock_timeout = self.timeout
        self._wbuf = bytearray()
        self._hdr = bytearray(HEADER_BYTES)  # each frame's length prefix is read into this one buffer
        self._free: dict[int, list[bytearray]] = {}  # recycled frames by size (see recycle)
        self._free_bytes = 0
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
    def connect(
        cls,
        host: str,
        port: int,
        deadline: float = 10.0,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_frame: int = DEFAULT_MAX_FRAME,
        buffered: bool = False,
        tls: TLSConfig | None = None,
        insecure: bool = False,
        peer_roles: PeerFilter = None,
        peer_names: PeerFilter = None,
    ) -> TCPChannel:
        """Connect to ``host:port``, retrying (refused, unreachable, timed out) for up to ``deadline`` seconds.

        With ``tls`` (a :class:`pairwise.mpc.tls.TLSConfig`) the connection is
        mutual TLS 1.3, and the peer must hold one of ``peer_roles`` and one of
        ``peer_names`` (each ``None``: any) -- else :class:`AccessDenied`.
        Without ``tls`` the host must be a loopback address unless
        ``insecure=True`` (:class:`InsecureTransport`).  Raises
        :class:`ConnectError` at once if the host name cannot be resolved,
        and when the deadline passes without a connection; TLS failures
        (:class:`AuthenticationError`) are not retried.  A busy peer
        (:class:`PeerBusy`: it cancelled the TLS handshake) is retried with
        backoff until the deadline, then raised.
        """
        from ..tls import check_plaintext, client_handshake

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
                try:
                    ssock, ident = client_handshake(sock, tls, timeout=hs_timeout, peer=label)
                except PeerBusy as exc:
                    last, attempts = exc, attempts + 1
                    if end - time.monotonic() <= delay:
                        raise
                    continue
                return _admitted(
                    cls(
                        ssock, timeout=timeout, max_frame=max_frame, peer=label, buffered=buffered, peer_identity=ident
                    ),
                    roles,
                    names,
                    hs_timeout,
                )
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
    def connect_once(
        cls,
        host: str,
        port: int,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        tls: TLSConfig | None = None,
        insecure: bool = False,
        peer_roles: PeerFilter = None,
        peer_names: PeerFilter = None,
    ) -> TCPChannel:
        """One attempt of :meth:`connect` (TCP within ``timeout``, then TLS and admission), never retried.

        For callers that own their retry policy (thousands of clients of one
        server back off for seconds, not :meth:`connect`'s half second): a busy
        peer raises :class:`PeerBusy` at once, an unreachable one
        :class:`ConnectError`; the other errors are those of :meth:`connect`.
        """
        from ..tls import check_plaintext, client_handshake

        port = _check_port(port, allow_zero=False)
        timeout = _check_timeout(timeout)
        roles, names = _check_peers(tls, peer_roles, peer_names)
        if tls is None:
            check_plaintext(host, port, insecure=insecure, what="connection to")
        label = f"{host}:{port}"
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except socket.gaierror as exc:
            raise ConnectError(f"cannot resolve host {host!r}: {exc.strerror}; check the host name") from exc
        except OSError as exc:
            raise ConnectError(
                f"could not connect to {label} ({_describe_oserror(exc)}); is the peer running and listening there?"
            ) from exc
        if tls is None:
            return cls(sock, timeout=timeout, peer=label)
        ssock, ident = client_handshake(sock, tls, timeout=timeout, peer=label)
        return _admitted(cls(ssock, timeout=timeout, peer=label, peer_identity=ident), roles, names, timeout)

    @classmethod
    def listen(
        cls,
        host: str,
        port: int,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        recv_timeout: float | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        buffered: bool = False,
        tls: TLSConfig | None = None,
        insecure: bool = False,
        peer_roles: PeerFilter = None,
        peer_names: PeerFilter = None,
    ) -> TCPChannel:
        """Listen on ``host:port``, accept exactly one peer within ``timeout`` seconds, stop listening.

        The channel's receive timeout is ``recv_timeout`` (default: ``timeout``).
        ``tls``/``insecure``/``peer_roles``/``peer_names`` as in :meth:`connect`.
        Use :class:`TCPListener` to learn an ephemeral port, to serve many
        peers, or to keep waiting after a stray connection
        (:meth:`TCPListener.accept_first`).
        """
        with TCPListener(host, port, tls=tls, insecure=insecure) as listener:
            return listener.accept(
                timeout,
                recv_timeout=recv_timeout,
                max_frame=max_frame,
                buffered=buffered,
                peer_roles=peer_roles,
                peer_names=peer_names,
            )

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
        exc: ChannelError
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
        except TimeoutError:
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
        header = self._hdr
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
        spare = self._free.get(n)
        if spare:  # a recycled frame of this size: every byte is overwritten below (or the channel fails)
            buf = spare.pop()
            self._free_bytes -= n
            self._recv_into(buf, 0, timeout, frame_start=False, total=n)
            return buf
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

    def recycle(self, frame: bytes | bytearray) -> None:
        """Keep a consumed frame for the next frame of the same size (up to 1 MiB in all): streams of
        same-size frames (the garbled tables of repeated executions) then allocate nothing."""
        n = len(frame)
        if type(frame) is bytearray and n and self._free_bytes + n <= _RECYCLE_BYTES:
            self._free.setdefault(n, []).append(frame)
            self._free_bytes += n

    def _recv_into(
        self, buf: bytearray, start: int, timeout: float, *, frame_start: bool, total: int | None = None
    ) -> None:
        """Fill ``buf[start:]`` from the socket (``total``: the frame size, for messages)."""
        exc: ChannelError
        n, got = len(buf), start
        total = n if total is None else total
        with memoryview(buf) as view:
            while got < n:
                try:
                    k = self._sock.recv_into(view[got:], n - got)
                except TimeoutError:
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
        return TruncatedFrame(
            f"{self.peer} closed the connection in the middle of a frame: got {got} of {n} bytes ({why})"
        )

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
    accept loop; another thread may cut a stalled handshake with
    :meth:`interrupt`, or refuse the connection at once as busy
    (:meth:`tell_busy`).
    """

    def __init__(self, listener: TCPListener, sock: socket.socket, peer: str) -> None:
        self._listener = listener
        self._sock: socket.socket | None = sock
        self._live: socket.socket | None = sock  # the socket a handshake in progress uses (raw, then TLS)
        self.peer = peer

    def _track(self, sock: socket.socket) -> None:
        self._live = sock

    def interrupt(self) -> None:
        """Shut the connection down from any thread: a handshake in :meth:`open` fails at once."""
        live = self._live
        if live is not None:
            try:
                socket.socket.shutdown(live, socket.SHUT_RDWR)  # the plain call: never touches TLS state
            except OSError:
                pass

    def tell_busy(self) -> None:
        """Refuse this (TLS) connection as busy without opening it, without blocking: the peer is sent
        :data:`pairwise.mpc.tls.BUSY_ALERT` (it raises :class:`PeerBusy`) and our side is half-closed.
        Call :meth:`close` a moment later (it first reads what the peer sent, so the close sends no reset
        that could destroy the alert)."""
        from ..tls import BUSY_ALERT

        sock = self._sock
        if sock is None:
            return
        self._refused = True
        try:
            sock.setblocking(False)
            sock.send(BUSY_ALERT)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def open(
        self,
        *,
        recv_timeout: float = DEFAULT_TIMEOUT,
        max_frame: int = DEFAULT_MAX_FRAME,
        buffered: bool = False,
        handshake_timeout: float | None = None,
        peer_roles: PeerFilter = None,
        peer_names: PeerFilter = None,
    ) -> TCPChannel:
        """TLS handshake and admission (on a TLS listener), then the channel.

        Raises :class:`AuthenticationError` (no or untrusted certificate,
        plaintext peer), :class:`AccessDenied` (role or name not in
        ``peer_roles``/``peer_names``; the peer is told why) or
        :class:`ChannelTimeout` after ``handshake_timeout`` seconds (default
        ``min(recv_timeout, DEFAULT_HANDSHAKE_TIMEOUT)``); the connection is
        then closed.
        """
        from ..tls import server_handshake

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
        hs_timeout = _check_timeout(
            handshake_timeout
            if handshake_timeout is not None
            else min(_check_timeout(recv_timeout), DEFAULT_HANDSHAKE_TIMEOUT)
        )
        ssock, ident = server_handshake(sock, tls, timeout=hs_timeout, peer=self.peer, on_wrap=self._track)
        return _admitted(
            TCPChannel(
                ssock, timeout=recv_timeout, max_frame=max_frame, peer=self.peer, buffered=buffered, peer_identity=ident
            ),
            roles,
            names,
            hs_timeout,
        )

    def close(self) -> None:
        self._live = None
        if self._sock is not None:
            if getattr(self, "_refused", False):  # read what the peer sent (without blocking): a FIN, not a reset
                try:
                    self._sock.setblocking(False)
                    for _ in range(16):
                        if not self._sock.recv(1 << 16):
                            break
                except OSError:
                    pass
            self._sock.close()
            self._sock = None


@dataclass(frozen=True)
class AcceptLimits:
    """How :meth:`TCPListener.accept_first` bounds the connections it handshakes at once: each attempt
    gets at most ``handshake_timeout`` seconds, at most ``max_pending`` attempts run at once and at most
    ``per_address`` from one address (a newcomer beyond either limit takes the oldest one's place)."""

    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    max_pending: int = 64
    per_address: int = 16

    def __post_init__(self) -> None:
        _check_timeout(self.handshake_timeout, "handshake_timeout")
        check_int(self.max_pending, "max_pending", lo=1)
        check_int(self.per_address, "per_address", lo=1)


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

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        backlog: int = 16,
        tls: TLSConfig | None = None,
        insecure: bool = False,
    ) -> None:
        port = _check_port(port, allow_zero=True)
        self.host = host
        self.tls = tls
        self._sock: socket.socket | None
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except socket.gaierror as exc:
            raise ChannelError(f"cannot listen on {host}:{port}: cannot resolve host ({exc.strerror})") from exc
        if tls is None:
            from ..tls import check_plaintext

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
                raise ChannelError(
                    f"cannot listen on {host}:{port}: permission denied (ports below 1024 need privileges)"
                ) from exc
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
        except TimeoutError:
            raise ChannelTimeout(f"no peer connected to {self.host}:{self.port} within {timeout:g} s") from None
        except OSError as exc:
            raise ChannelError(f"accept on {self.host}:{self.port} failed: {_describe_oserror(exc)}") from exc
        peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else str(addr)
        return PendingConnection(self, conn, peer)

    def accept(
        self,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        recv_timeout: float | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        buffered: bool = False,
        handshake_timeout: float | None = None,
        peer_roles: PeerFilter = None,
        peer_names: PeerFilter = None,
    ) -> TCPChannel:
        """Wait up to ``timeout`` seconds for one peer; return its channel (receive timeout ``recv_timeout`` or ``timeout``).

        On a TLS listener the handshake and admission run here (see
        :meth:`PendingConnection.open` for the errors); a failed peer raises,
        so a server that must outlive stray connections uses
        :meth:`accept_first` or :meth:`accept_socket`.
        """
        pending = self.accept_socket(timeout)
        return pending.open(
            recv_timeout=recv_timeout if recv_timeout is not None else timeout,
            max_frame=max_frame,
            buffered=buffered,
            handshake_timeout=handshake_timeout,
            peer_roles=peer_roles,
            peer_names=peer_names,
        )

    def accept_first(
        self,
        timeout: float,
        setup,
        *,
        recv_timeout: float | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        buffered: bool = False,
        peer_roles=None,
        peer_names=None,
        on_reject=None,
        limits: AcceptLimits | None = None,
        **legacy: Any,
    ):
        """Accept peers until one passes TLS, admission and ``setup(channel)``; return ``(channel, setup_result)``.

        ``setup`` runs the application's first exchange (e.g. the session
        handshake).  Every connection is handshaken in a thread of its own as
        soon as it arrives, so a silent or slow connection delays nobody: the
        first to finish ``setup`` wins and the others are closed.  A connection
        that fails TLS or admission, or whose ``setup`` raises
        :class:`HandshakeError` or fails before the peer sent a single frame (a
        stray connection: garbage, a port scanner, the wrong protocol, a peer
        with another circuit), is closed, reported to ``on_reject(message)``,
        and the listener keeps waiting; a connection that fails later raises.
        Each attempt gets at most ``handshake_timeout`` seconds until ``setup``
        returns; at most ``max_pending`` attempts run at once, at most
        ``per_address`` from one address, and a newcomer beyond either limit
        takes the place of the oldest such attempt (which is cut).  The whole
        wait lasts at most ``timeout``, after which :class:`ChannelTimeout`
        names the rejected connections.  ``limits``: an :class:`AcceptLimits`
        (or its fields ``handshake_timeout``, ``max_pending``, ``per_address`` as keywords).
        """
        import threading

        lim = with_legacy(limits, AcceptLimits, legacy, "accept_first")
        no_more_keywords(legacy, "accept_first")
        handshake_timeout, max_pending, per_address = lim.handshake_timeout, lim.max_pending, lim.per_address
        timeout = _check_timeout(timeout)
        recv_timeout = _check_timeout(recv_timeout if recv_timeout is not None else timeout, "recv_timeout")
        hs_limit = _check_timeout(handshake_timeout, "handshake_timeout")
        end = time.monotonic() + timeout
        cond = threading.Condition()
        attempts: dict[PendingConnection, tuple[float, str]] = {}
        cut: set[PendingConnection] = set()
        rejected: list[str] = []
        out: dict = {}

        def reject(msg: str) -> None:
            rejected.append(msg)
            if on_reject is not None:
                on_reject(msg)

        def attempt(pending: PendingConnection) -> None:
            ch = None
            budget = max(0.05, min(end - time.monotonic(), hs_limit))
            try:
                ch = pending.open(
                    recv_timeout=recv_timeout,
                    max_frame=max_frame,
                    buffered=buffered,
                    handshake_timeout=budget,
                    peer_roles=peer_roles,
                    peer_names=peer_names,
                )
                ch.timeout = min(recv_timeout, budget)  # the first exchange of a stray must not hold us long
                result = setup(ch)
                ch.timeout = recv_timeout
                with cond:
                    if "winner" not in out and "error" not in out:
                        out["winner"] = (ch, result)
                        attempts.pop(pending, None)  # never interrupted below
                        ch = None
            except ChannelError as exc:
                stray = ch is None or isinstance(exc, HandshakeError) or ch.messages_received == 0
                with cond:
                    if pending in cut or "winner" in out:
                        reject(
                            f"closed connection from {pending.peer}: "
                            + (
                                "a valid peer was accepted meanwhile"
                                if "winner" in out
                                else "newer connections took its place"
                            )
                        )
                    elif stray:
                        reject(f"rejected connection from {pending.peer}: {exc}")
                    else:
                        out.setdefault("error", exc)
            except BaseException as exc:  # noqa: BLE001 - a failed setup ends the wait, as it always did
                with cond:
                    out.setdefault("error", exc)
            finally:
                if ch is not None:
                    ch.close()
                with cond:
                    attempts.pop(pending, None)
                    cond.notify_all()

        def evict(among: list) -> None:
            oldest = min(among, key=lambda p: attempts[p][0])
            cut.add(oldest)
            oldest.interrupt()

        while True:
            with cond:
                if out:
                    break
            remaining = end - time.monotonic()
            if remaining <= 0:
                break
            try:
                pending = self.accept_socket(min(remaining, 0.25))
            except ChannelTimeout:
                continue
            host = pending.peer.rpartition(":")[0] or pending.peer
            with cond:
                live = [p for p in attempts if p not in cut]
                mine = [p for p in live if attempts[p][1] == host]
                if len(mine) >= per_address:
                    evict(mine)
                elif len(live) >= max_pending:
                    evict(live)
                attempts[pending] = (time.monotonic(), host)
            threading.Thread(target=attempt, args=(pending,), daemon=True, name=f"accept-{pending.peer}").start()
        with cond:
            if out:  # a winner or an error: cut every other attempt now
                for p in attempts:
                    p.interrupt()
            while attempts:  # each attempt ends within its own budget (<= handshake_timeout)
                cond.wait(timeout=1.0)
            if "winner" in out and "error" in out:
                out.pop("error")
        if "winner" in out:
            return out["winner"]
        if "error" in out:
            raise out["error"]
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
