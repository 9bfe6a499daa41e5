"""The session handshake: both parties send a versioned hello, then both compare.

What it does
    :func:`handshake` starts a session on any
    :class:`~pairwise.mpc.channel.base.Channel`: both parties *first send* a
    :class:`Hello` (magic, protocol version, role, session id, an ``extra``
    digest such as the circuit hash, a fresh nonce) and *then* compare it
    with the peer's, in the same order on both sides, so a mismatch is
    detected and raised on both sides with the same message.
    :func:`session_bytes` normalises a session id (the OT layer uses it too).

Wire format (version 1)
    hello  = b"PAIRWISE" || version:uint16-be || nonce[16]
             || len:uint8 || role || len:uint16-be || session_id
             || len:uint16-be || extra
    sent as one frame.  :data:`PROTOCOL_VERSION` versions the frames, the
    hello and the OT messages; bump it on any change.

Security model
    Semi-honest: the hello makes two honest parties agree on what they run
    (peer, version, session, circuit) and fail loudly when they do not; it
    authenticates nobody (that is the transport's job, mutual TLS in
    :mod:`pairwise.mpc.channel.tcp`).  The nonce, from ``os.urandom``, gives
    every run a fresh :attr:`HandshakeResult.run_id` (SHA-256 of both hellos)
    that higher layers may mix into key derivations.  A peer's hello is parsed
    with ``struct`` after its size was bounded; nothing is pickled.

References
    The "exchange then compare" handshake is our own (both sides must report
    the same mismatch).  The whole design: ``docs/channels.md``.  (The module
    is called ``hello`` so that ``pairwise.mpc.channel.handshake`` stays the
    function.)
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass

from ..errors import AuthenticationError, ChannelTimeout, FrameError, HandshakeError
from .base import Channel

__all__ = [
    "Hello",
    "HandshakeResult",
    "handshake",
    "hello_message",
    "check_hello",
    "session_bytes",
    "MAGIC",
    "PROTOCOL_VERSION",
]


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
        return b"".join(
            (
                _HELLO_FIXED.pack(MAGIC, self.version, self.nonce),
                struct.pack("!B", len(role)),
                role,
                struct.pack("!H", len(self.session_id)),
                self.session_id,
                struct.pack("!H", len(self.extra)),
                self.extra,
            )
        )

    @classmethod
    def decode(cls, data: bytes) -> Hello:
        """Parse a hello; raises :class:`HandshakeError` for a wrong magic, version or layout."""
        from ..tls import TLS_REQUIRED

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
            role = data[pos + 1 : pos + 1 + lr].decode("ascii")
            pos += 1 + lr
            (ls,) = struct.unpack_from("!H", data, pos)
            sid = data[pos + 2 : pos + 2 + ls]
            pos += 2 + ls
            (le,) = struct.unpack_from("!H", data, pos)
            extra = data[pos + 2 : pos + 2 + le]
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


def handshake(
    channel: Channel,
    role: str,
    session_id: bytes | str,
    extra: bytes = b"",
    *,
    peer_role: str | None = None,
    extra_label: str = "circuit",
    timeout: float | None = None,
) -> HandshakeResult:
    """Exchange hellos, then check magic, version, session id, roles and ``extra`` -- on both sides.

    ``role`` names this party (e.g. ``"garbler"``); the peer must claim a
    different role, and exactly ``peer_role`` if given.  ``extra`` is a short
    digest both sides must hold identically (the Yao runtime passes a hash of
    the circuit and parameters); on a difference both sides raise
    :class:`HandshakeError` with ``"<extra_label> mismatch"`` in the message
    (``"circuit mismatch"`` by default) and the peer's ``extra`` as the
    exception's ``peer_extra`` attribute.  The checks run in the same order on
    both sides, so both report the same first mismatch.
    """
    mine = hello_message(role, session_id, extra, peer_role=peer_role)
    channel.send(mine)
    channel.flush()
    try:
        theirs_raw = channel.recv(timeout, max_size=_HELLO_MAX)
    except FrameError as exc:
        raise HandshakeError(f"the peer did not send a pairwise handshake: {exc}") from exc
    except ChannelTimeout as exc:
        raise ChannelTimeout(f"handshake: {exc}") from exc
    return check_hello(mine, theirs_raw, peer_role=peer_role, extra_label=extra_label)


def hello_message(role: str, session_id: bytes | str, extra: bytes = b"", *, peer_role: str | None = None) -> bytes:
    """This party's hello (a fresh nonce), after checking its fields: the first frame :func:`handshake` sends.

    For transports that are not a :class:`Channel` (an asyncio server:
    :mod:`pairwise.protocols.service.aio`), which then pass the peer's frame
    to :func:`check_hello`.
    """
    role = _check_role(role)
    if peer_role is not None:
        _check_role(peer_role)
    sid = session_bytes(session_id)
    extra = bytes(extra)
    if len(extra) > _MAX_EXTRA:
        raise ValueError(f"handshake extra must be at most {_MAX_EXTRA} bytes (send a digest), got {len(extra)}")
    return Hello(role=role, session_id=sid, extra=extra, nonce=os.urandom(_NONCE_BYTES)).encode()


def check_hello(
    mine: bytes, theirs_raw: bytes, *, peer_role: str | None = None, extra_label: str = "circuit"
) -> HandshakeResult:
    """The checks of :func:`handshake` on our hello ``mine`` and the peer's frame ``theirs_raw``.

    Raises :class:`HandshakeError` (or :class:`AuthenticationError` for a
    peer that requires TLS) on the first mismatch, in the same order on both sides.
    """
    own = Hello.decode(mine)
    role, sid, extra = own.role, own.session_id, own.extra
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
        err = HandshakeError(
            f"{extra_label} mismatch: this side has digest {mine_d}, the peer has {theirs_d}; "
            f"both parties must use the same {extra_label}"
        )
        err.peer_extra = theirs.extra  # type: ignore[attr-defined]  # for callers that put a version tag in extra and want to name it
        raise err
    run_id = hashlib.sha256(b"pairwise/run-id\x00" + b"".join(sorted((bytes(mine), bytes(theirs_raw))))).digest()[:16]
    return HandshakeResult(role=role, peer_role=theirs.role, session_id=sid, extra=extra, run_id=run_id)
