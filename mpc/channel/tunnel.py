"""End-to-end TLS 1.3 between two parties, carried in the frames of another channel (a relay).

What it does
    :class:`TLSTunnel` is a :class:`~pairwise.mpc.channel.base.Channel` whose
    frames travel inside a TLS 1.3 session that runs over the frames of a
    *carrier* channel (any transport: a memory pair, TCP, or a stream that an
    untrusted server relays between two users who only connect outbound).
    It drives stdlib :class:`ssl.SSLObject` over two :class:`ssl.MemoryBIO`
    buffers, sending OpenSSL's output as carrier frames of whole TLS records.

    1. Handshake: mutual TLS 1.3 with :class:`pairwise.mpc.tls.TLSConfig` (the
       CA is the only trust anchor); one side is the TLS server (``server=True``).
    2. Pinning and admission: each side checks the partner's certificate name
       against ``peer_name`` and its role against ``peer_roles``, then both
       send their verdict inside the tunnel before reading the other's, so a
       refused partner fails on *both* sides (:class:`~pairwise.mpc.errors.AccessDenied`).
    3. Data: frames ``length:uint32-be || payload`` in the TLS plaintext
       (``0x80000001`` is an in-band abort, ``0x80000002`` the *fin* of
       tunnel version 2); small frames are coalesced until :meth:`flush`, a
       receive, or 64 KiB.
    4. :meth:`finish`: both send a *fin* inside TLS, wait for the partner's,
       then exchange ``close_notify``, so a party that only sent learns that
       its partner received everything intact.  Report a result only after
       :meth:`finish` returned.

Security model
    The carrier (relay) is untrusted: it sees record sizes and timing, never
    plaintext, and cannot change a byte unnoticed.  TLS 1.3 records are AEAD
    with implicit sequence numbers and the record header in the associated
    data (RFC 8446, Sec. 5.2), so a changed, dropped, reordered or injected
    byte raises :class:`~pairwise.mpc.errors.TamperedStream` on the receiving
    side, which alerts the partner, who raises it too.  A relay that drops the
    alert or stalls causes :class:`~pairwise.mpc.errors.ChannelTimeout` or
    :class:`~pairwise.mpc.errors.PeerClosed`: never a hang, never a silent
    success.  A relay can mount the handshake only with a certificate from
    the CA; it must not hold ``ca.key``.

Follows
    RFC 8446; stdlib ``ssl`` "Memory BIO support"; ``docs/channels.md``, "TLS through a relay".
"""

from __future__ import annotations

import ssl
import struct
import time
from typing import TYPE_CHECKING

from ..errors import (
    AccessDenied,
    AuthenticationError,
    ChannelError,
    ChannelTimeout,
    FrameError,
    HandshakeError,
    PeerClosed,
    ProtocolError,
    TamperedStream,
    TruncatedFrame,
)
from .base import _HEADER, DEFAULT_MAX_FRAME, Channel, _check_timeout
from .tcp import _ADMIT, _ADMIT_MAX, PeerFilter, _admission, _check_peers

if TYPE_CHECKING:
    from ..tls import PeerIdentity, TLSConfig

__all__ = ["TLSTunnel", "check_records"]

#: TLS record header: content type (1), legacy version (2), length (2).
_RECORD = struct.Struct("!BHH")
#: Largest TLSCiphertext fragment in TLS 1.3 (RFC 8446, Sec. 5.2): 2^14 + 256.
MAX_RECORD = (1 << 14) + 256
_APPLICATION_DATA = 23
_HANDSHAKE_TYPES = frozenset((20, 21, 22, 23))  # change_cipher_spec, alert, handshake, application_data
#: Carrier frames group whole records up to this many bytes.
CARRIER_CHUNK = 1 << 18
#: Plaintext coalesced before it is encrypted and sent.
PUSH_AT = 1 << 16
_CONTROL = 1 << 31
_ABORT = _CONTROL | 1
_FIN = _CONTROL | 2
_RECV_STEP = 1 << 20


def check_records(data: bytes | bytearray | memoryview, *, handshake_done: bool) -> str | None:
    """Why ``data`` is not a sequence of whole, well-formed TLS 1.3 records (``None``: it is).

    After the handshake every record is application data (outer type 23,
    legacy version 0x0303, 17..2^14+256 bytes: at least one content-type
    byte and a 16-byte AEAD tag).  During the handshake change_cipher_spec,
    alert and handshake records are also allowed, and version 0x0301 (the
    first ClientHello's).
    """
    mv = memoryview(data).cast("B")
    pos, n = 0, len(mv)
    if n == 0:
        return "an empty carrier frame"
    while pos < n:
        if n - pos < _RECORD.size:
            return f"{n - pos} trailing bytes are not a TLS record header"
        ctype, version, length = _RECORD.unpack_from(mv, pos)
        if handshake_done:
            if ctype != _APPLICATION_DATA or version != 0x0303:
                return f"record of type {ctype} version {version:#06x} after the handshake (expected 23, 0x0303)"
            if not 17 <= length <= MAX_RECORD:
                return f"record length {length} outside 17..{MAX_RECORD}"
        else:
            if ctype not in _HANDSHAKE_TYPES or version not in (0x0301, 0x0303):
                return f"record of type {ctype} version {version:#06x} is not TLS"
            if not 1 <= length <= MAX_RECORD:
                return f"record length {length} outside 1..{MAX_RECORD}"
        pos += _RECORD.size + length
        if pos > n:
            return f"a record of {length} bytes is cut off at the end of the frame"
    return None


def _split_records(data: bytes) -> list[memoryview]:
    """``data`` (whole records) cut at record boundaries into pieces of at most :data:`CARRIER_CHUNK` bytes."""
    if len(data) <= CARRIER_CHUNK:
        return [memoryview(data)]
    mv, out, start, pos = memoryview(data), [], 0, 0
    while pos < len(data):
        _, _, length = _RECORD.unpack_from(mv, pos)
        end = pos + _RECORD.size + length
        if end - start > CARRIER_CHUNK and pos > start:
            out.append(mv[start:pos])
            start = pos
        pos = end
    out.append(mv[start:])
    return out


class TLSTunnel(Channel):
    """Frames in mutual TLS 1.3 between two parties, over the frames of a carrier channel.

    ``carrier``: the channel the TLS records travel on (the tunnel owns it
    and closes it).  ``tls``: this party's credentials.  ``server``: which
    side plays the TLS server (the two parties must choose differently).
    ``peer_name``: the partner's certificate name, pinned; ``peer_roles``:
    allowed partner roles (``None``: any).  ``timeout`` bounds every wait for
    the partner (default: the carrier's); ``handshake_timeout`` bounds the
    handshake and admission together (default: ``timeout``).

    The handshake runs in the constructor: on return :attr:`peer_identity`
    is the partner's verified identity.  Raises :class:`AuthenticationError`
    (TLS failed), :class:`AccessDenied` (name or role refused, on either
    side), :class:`ChannelTimeout` or :class:`PeerClosed`; the carrier is
    closed on failure.

    Counters count the tunnel's plaintext frames (as every channel does);
    :attr:`carrier` counts the ciphertext on the wire.
    """

    def __init__(
        self,
        carrier: Channel,
        tls: TLSConfig,
        *,
        server: bool,
        peer_name: str,
        peer_roles: PeerFilter = None,
        timeout: float | None = None,
        handshake_timeout: float | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        if not isinstance(carrier, Channel):
            raise TypeError(f"carrier must be a Channel, got {type(carrier).__name__}")
        if not isinstance(peer_name, str) or not peer_name:
            raise ValueError("peer_name (the partner's certificate name, as announced) is required")
        timeout = carrier.timeout if timeout is None else _check_timeout(timeout)
        if int(max_frame) >= _CONTROL:
            raise ValueError(f"a tunnel's max_frame must be below 2^31 bytes, got {max_frame}")
        if carrier.max_frame < _RECORD.size + MAX_RECORD:
            raise ValueError(
                f"the carrier's max_frame ({carrier.max_frame}) cannot hold one TLS record "
                f"({_RECORD.size + MAX_RECORD} bytes)"
            )
        super().__init__(timeout=timeout, max_frame=max_frame)
        self.carrier = carrier
        self._carrier_base = carrier.stats()  # what the carrier carried before the tunnel is not the tunnel's
        self.server = bool(server)
        self.peer_name = peer_name
        self.peer = f"partner {peer_name!r}"
        self.peer_identity: PeerIdentity | None = None
        self._roles, self._names = _check_peers(tls, peer_roles, peer_name)
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._ssl = tls.context(server=self.server).wrap_bio(self._incoming, self._outgoing, server_side=self.server)
        self._tls_up = False  # the TLS handshake finished (records are application data from now on)
        self._established = False  # ... and both sides admitted each other
        self._finished = False
        self._pbuf = bytearray()
        hs = self.timeout if handshake_timeout is None else _check_timeout(handshake_timeout, "handshake_timeout")
        try:
            self._handshake(hs)
            self._admit(hs)
            self._established = True
        except BaseException:
            self._fail(ChannelError("the tunnel handshake failed"))
            raise
        self.bytes_sent = self.bytes_received = self.messages_sent = self.messages_received = 0

    # -------------------------------------------------------------- properties
    @property
    def secure(self) -> bool:
        """Always True: a tunnel is mutually authenticated TLS 1.3 end to end."""
        return True

    def wire_stats(self) -> dict[str, int]:
        """The carrier's counters since the tunnel began: the TLS bytes and frames the relay forwarded."""
        now = self.carrier.stats()
        return {k: now[k] - self._carrier_base[k] for k in now}

    # --------------------------------------------------------------- handshake
    def _handshake(self, limit: float) -> None:
        end = time.monotonic() + limit
        while True:
            try:
                self._ssl.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._send_outgoing()
                self.carrier.flush()
                remaining = end - time.monotonic()
                if remaining <= 0:
                    raise ChannelTimeout(f"TLS handshake with {self.peer} did not finish within {limit:g} s") from None
                self._feed(remaining, handshake_done=False)
            except ssl.SSLError as exc:
                raise self._ssl_failure(exc) from None
        self._send_outgoing()  # the client's Finished
        self.carrier.flush()
        self._tls_up = True
        from ..tls import CertificateError, identity_from_der

        der = self._ssl.getpeercert(binary_form=True)
        if not der:  # cannot happen with CERT_REQUIRED; do not rely on it
            raise AuthenticationError(f"TLS {self.peer} presented no certificate")
        try:
            self.peer_identity = identity_from_der(der)
        except (CertificateError, ValueError) as exc:
            raise AuthenticationError(f"TLS {self.peer}: {exc}") from None

    def _admit(self, limit: float) -> None:
        """Both sides send their verdict on the partner's certificate, then read the other's (as tcp._admit)."""
        reason = _admission(self.peer_identity, self._roles, self._names)
        self.send(_ADMIT + (b"\x01" if reason is None else b"\x00" + reason.encode("utf-8")[:512]))
        self.flush()
        try:
            theirs = self.recv(limit, max_size=_ADMIT_MAX)
        except ChannelError:
            if reason is not None:
                raise AccessDenied(f"refused {self.peer_identity} as {self.peer}: {reason}") from None
            raise
        if reason is not None:
            raise AccessDenied(f"refused {self.peer_identity} as {self.peer}: {reason}")
        if not theirs.startswith(_ADMIT) or len(theirs) < len(_ADMIT) + 1:
            raise HandshakeError(f"{self.peer} sent no admission message inside the tunnel")
        if theirs[len(_ADMIT)] != 1:
            why = theirs[len(_ADMIT) + 1 :].decode("utf-8", "replace")
            raise AccessDenied(f"{self.peer_identity} ({self.peer}) refused this tunnel: {why}")

    # ------------------------------------------------------------- TLS plumbing
    def _send_outgoing(self) -> None:
        """Send what OpenSSL wrote (whole records) to the carrier."""
        data = self._outgoing.read()
        if data:
            try:
                for piece in _split_records(data):
                    self.carrier.send(piece)
            except ChannelError as exc:
                if self._tls_up and not isinstance(exc, TamperedStream):
                    self._salvage(exc)
                raise

    def _salvage(self, cause: ChannelError) -> None:
        """The carrier failed while we were sending: did the partner say why before it left?

        A partner that detects tampering sends an alert (or our abort) and
        disconnects, possibly while we are still sending.  Read what the
        carrier still delivers (a few seconds at most), parse the plaintext
        for an abort at frame boundaries, and raise :class:`TamperedStream`
        if the partner reported one; otherwise return (the caller re-raises
        ``cause``).
        """
        limit = min(self.timeout, 5.0)
        end = time.monotonic() + limit
        need, header = 0, bytearray()  # plaintext framing state: bytes of payload still to skip, partial header
        try:
            while True:
                try:
                    chunk = self._ssl.read(1 << 16)
                except ssl.SSLWantReadError:
                    remaining = end - time.monotonic()
                    if remaining <= 0:
                        return
                    frame = self.carrier.recv(remaining)
                    if check_records(frame, handshake_done=True) is not None:
                        return
                    self._incoming.write(frame)
                    continue
                except ssl.SSLZeroReturnError:
                    return
                except ssl.SSLError as exc:
                    err = self._ssl_failure(exc)
                    if isinstance(err, TamperedStream):
                        raise err from cause
                    return
                mv, pos = memoryview(chunk), 0
                while pos < len(mv):
                    if need:
                        step = min(need, len(mv) - pos)
                        need, pos = need - step, pos + step
                        continue
                    take = min(_HEADER.size - len(header), len(mv) - pos)
                    header += mv[pos : pos + take]
                    pos += take
                    if len(header) == _HEADER.size:
                        (n,) = _HEADER.unpack(header)
                        header.clear()
                        if n == _ABORT:
                            raise TamperedStream(
                                f"{self.peer} reports that a frame from us arrived corrupt: the "
                                "relay changed bytes; discard this session's results"
                            ) from cause
                        need = 0 if n & _CONTROL else n  # a fin carries no payload
        except ChannelError as exc:
            if isinstance(exc, TamperedStream):
                raise
            return

    def _feed(self, timeout: float, *, handshake_done: bool) -> None:
        """One carrier frame into OpenSSL, after checking it holds whole TLS records."""
        try:
            frame = self.carrier.recv(timeout, max_size=max(CARRIER_CHUNK, _RECORD.size + MAX_RECORD))
        except FrameError as exc:
            if isinstance(exc, TruncatedFrame):  # the partner or the relay vanished mid-frame
                raise
            # a tunnel never sends a larger or malformed carrier frame: the relay's framing was altered
            if handshake_done:
                self._send_abort()
            raise TamperedStream(
                f"the relay delivered a corrupt frame from {self.peer} ({exc}); discard this session's results"
            ) from None
        why = check_records(frame, handshake_done=handshake_done)
        if why is not None:
            if handshake_done:
                self._send_abort()
            raise TamperedStream(
                f"a frame relayed from {self.peer} is not whole TLS records ({why}): the bytes were changed "
                "between you and the partner (by the relay?); discard this session's results"
            )
        self._incoming.write(frame)

    def _send_abort(self) -> None:
        """Tell the partner, inside TLS, that we saw a corrupt carrier frame (best effort)."""
        try:
            self._ssl.write(_HEADER.pack(_ABORT))
            self._send_outgoing()
            self.carrier.flush()
        except (ssl.SSLError, ChannelError, ValueError):
            pass

    def _ssl_failure(self, exc: ssl.SSLError) -> ChannelError:
        """The exception for an OpenSSL failure; first sends the alert OpenSSL queued for the partner."""
        try:
            self._send_outgoing()
            self.carrier.flush()
        except (ChannelError, ValueError):
            pass
        reason = exc.reason or ""
        if reason == "DECRYPTION_FAILED_OR_BAD_RECORD_MAC":
            return TamperedStream(
                f"a TLS record from {self.peer} failed authentication: bytes were changed, dropped or injected "
                "between you and the partner (by the relay?); discard this session's results"
            )
        if "BAD_RECORD_MAC" in reason:
            return TamperedStream(
                f"{self.peer} reports that a TLS record from us failed authentication: the relay changed, "
                "dropped or injected bytes; discard this session's results"
            )
        if reason == "APPLICATION_DATA_AFTER_CLOSE_NOTIFY":
            return ProtocolError(f"{self.peer} sent data that was never read before the end of the session")
        if not self._established:
            from ..tls import describe_ssl_error

            return AuthenticationError(f"TLS handshake with {self.peer} failed: {describe_ssl_error(exc)}")
        return TamperedStream(
            f"the TLS stream with {self.peer} is corrupt ({reason or exc}): the relay changed "
            "bytes, or the partner saw corrupt bytes; discard this session's results"
        )

    # ------------------------------------------------------------------ frames
    def _push(self, data) -> None:
        try:
            view = memoryview(data).cast("B")
            while view.nbytes:
                n = self._ssl.write(view)
                view = view[n:]
        except ssl.SSLError as exc:
            raise self._ssl_failure(exc) from None
        self._send_outgoing()

    def _send_frame(self, view: memoryview) -> None:
        n = view.nbytes
        try:
            self._pbuf += _HEADER.pack(n)
            if n <= PUSH_AT:
                self._pbuf += view
                if len(self._pbuf) >= PUSH_AT:
                    self._flush_plain()
            else:
                self._flush_plain()
                self._push(view)
        except ChannelError as exc:
            self._fail(exc)
            raise

    def _flush_plain(self) -> None:
        if self._pbuf:
            data, self._pbuf = self._pbuf, bytearray()
            self._push(data)

    def _flush(self) -> None:
        try:
            self._flush_plain()
            self.carrier.flush()
        except ChannelError as exc:
            self._fail(exc)
            raise

    def _read_into(self, buf: bytearray, start: int, timeout: float) -> None:
        """Fill ``buf[start:]`` with plaintext, feeding carrier frames to OpenSSL as needed."""
        mv = memoryview(buf)
        pos = start
        while pos < len(buf):
            try:
                pos += self._ssl.read(len(buf) - pos, mv[pos:])  # type: ignore[operator]  # with a buffer: an int
                continue
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                raise PeerClosed(
                    f"{self.peer} ended the TLS session (close_notify) in the middle of the protocol"
                ) from None
            except ssl.SSLError as exc:
                raise self._ssl_failure(exc) from None
            self._feed(timeout, handshake_done=self._tls_up)

    def _recv_frame(self, timeout: float, limit: int) -> bytearray:
        try:
            self._flush()  # what we buffered reaches the partner before we wait for it
            head = bytearray(_HEADER.size)
            self._read_into(head, 0, timeout)
            (n,) = _HEADER.unpack(head)
            if n & _CONTROL:
                if n == _ABORT:
                    raise TamperedStream(
                        f"{self.peer} reports that a frame from us arrived corrupt: the relay "
                        "changed bytes; discard this session's results"
                    )
                raise FrameError(f"{self.peer} sent an unknown control code {n:#010x} inside the tunnel")
            if n > limit:
                raise FrameError(f"{self.peer} announced a frame of {n} bytes, larger than the limit of {limit} bytes")
            buf = bytearray(min(n, _RECV_STEP))
            self._read_into(buf, 0, timeout)
            while len(buf) < n:  # grow only as the bytes arrive: an announced length never allocates
                got = len(buf)
                buf.extend(bytes(min(_RECV_STEP, n - got)))
                self._read_into(buf, got, timeout)
            return buf
        except ChannelError as exc:
            self._fail(exc)
            raise

    # ---------------------------------------------------------------- lifecycle
    def finish(self, timeout: float | None = None) -> None:
        """End the session cleanly and confirm that the partner received everything intact.

        Flushes, sends a fin frame and waits for the partner's, then sends
        TLS ``close_notify`` and waits for the partner's (at most ``timeout``
        in all, default the channel's).  Both parties call it at the
        end of a protocol; a party reports its result only after it returned.
        Raises :class:`TamperedStream` if either side saw a corrupt record,
        :class:`ProtocolError` if the partner sent data that was never read,
        :class:`ChannelTimeout` / :class:`PeerClosed` if the partner vanished.
        Closes the tunnel and its carrier in every case.
        """
        t = self.timeout if timeout is None else _check_timeout(timeout)
        try:
            self._check_usable()
            end = time.monotonic() + t
            self._pbuf += _HEADER.pack(_FIN)
            self._flush()
            self._await_fin(end, t)
            while True:
                try:
                    self._ssl.unwrap()
                    break
                except ssl.SSLWantReadError:
                    self._send_outgoing()
                    self.carrier.flush()
                    remaining = end - time.monotonic()
                    if remaining <= 0:
                        raise ChannelTimeout(
                            f"{self.peer} did not confirm the end of the session within {t:g} s"
                        ) from None
                    self._feed(remaining, handshake_done=True)
                except ssl.SSLError as exc:
                    raise self._ssl_failure(exc) from None
            self._send_outgoing()
            self._finished = True
        except ChannelError as exc:
            self._fail(exc)
            raise
        finally:
            self.close()

    def _await_fin(self, end: float, t: float) -> None:
        """Read the partner's fin frame (by ``end``): its record MAC vouches for everything the partner received."""
        head = bytearray(_HEADER.size)
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise ChannelTimeout(f"{self.peer} did not confirm the end of the session within {t:g} s")
        try:
            self._read_into(head, 0, remaining)
        except ChannelTimeout:
            raise ChannelTimeout(f"{self.peer} did not confirm the end of the session within {t:g} s") from None
        except PeerClosed:
            raise PeerClosed(
                f"{self.peer} ended the session without confirming it received everything intact "
                "(it failed, or the relay cut the stream); discard this session's results"
            ) from None
        (n,) = _HEADER.unpack(head)
        if n == _FIN:
            return
        if n == _ABORT:
            raise TamperedStream(
                f"{self.peer} reports that a frame from us arrived corrupt: the relay "
                "changed bytes; discard this session's results"
            )
        if n & _CONTROL:
            raise FrameError(f"{self.peer} sent an unknown control code {n:#010x} inside the tunnel")
        raise ProtocolError(f"{self.peer} sent data that was never read before the end of the session")

    def _close(self) -> None:
        if self._tls_up and not self._finished and self._failure is None:
            try:  # a close_notify, so the partner sees PeerClosed rather than a timeout
                self._ssl.unwrap()
            except (ssl.SSLError, ValueError):
                pass
            try:
                self._send_outgoing()
                self.carrier.flush()
            except (ChannelError, ValueError):
                pass
        self.carrier.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("failed" if self._failure else "open")
        return (
            f"<TLSTunnel {state} {'server' if self.server else 'client'} to {self.peer} "
            f"sent={self.messages_sent}/{self.bytes_sent}B received={self.messages_received}/{self.bytes_received}B>"
        )
