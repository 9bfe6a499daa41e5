"""Message channels between two parties: in-memory, TCP and discard, plus the session handshake.

Modules, in dependency order:

- :mod:`pairwise.mpc.channel.base`: :class:`Channel` (ordered frames, typed
  helpers for blocks, bits and arrays, byte/message counters, the failure
  policy) and the frame constants;
- :mod:`pairwise.mpc.channel.memory`: :class:`MemoryChannel` (an in-process
  pair), :class:`NullChannel` (discards), :class:`TranscriptChannel` (records);
- :mod:`pairwise.mpc.channel.tcp`: :class:`TCPChannel`, :class:`TCPListener`,
  :class:`PendingConnection`: length-prefixed frames over TCP, in mutual TLS
  1.3 (:mod:`pairwise.mpc.tls`) with an admission step, or in plaintext on
  loopback only;
- :mod:`pairwise.mpc.channel.hello`: :func:`handshake` (:class:`Hello`,
  :class:`HandshakeResult`, :func:`session_bytes`), the versioned first
  message of every session;
- :mod:`pairwise.mpc.channel.tunnel`: :class:`TLSTunnel`, mutual TLS 1.3
  end to end over the frames of another channel (a relay that must see only
  ciphertext).

Every name of the former single module ``pairwise.mpc.channel`` is
re-exported here, private helpers included, so existing imports keep working.
A module-level setting is read by the module that defines it: patch it there
(``pairwise.mpc.channel.memory.RECYCLE_BYTES``), not on this package.

Security model: a semi-honest transport that never hangs, never mis-frames
and rejects malformed input early; confidentiality and integrity come from
mutual TLS, and plaintext TCP is refused off loopback unless the caller says
``insecure=True``.  The design, wire formats and failure policy in full:
``docs/channels.md``.
"""

from __future__ import annotations

from ..errors import (
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
    TamperedStream,
    TruncatedFrame,
)
from .base import (
    _HEADER,
    _MAX_FRAME_LIMIT,
    DEFAULT_MAX_FRAME,
    DEFAULT_TIMEOUT,
    HEADER_BYTES,
    BytesLike,
    Channel,
    _as_byte_view,
    _check_timeout,
    _frombuffer,
)
from .hello import (
    _HELLO_FIXED,
    _HELLO_MAX,
    _MAX_EXTRA,
    _MAX_ROLE,
    _MAX_SESSION,
    _NONCE_BYTES,
    MAGIC,
    PROTOCOL_VERSION,
    HandshakeResult,
    Hello,
    _check_role,
    _show,
    check_hello,
    handshake,
    hello_message,
    session_bytes,
)
from .memory import RECYCLE_BYTES, MemoryChannel, NullChannel, TranscriptChannel, _Pipe
from .tcp import (
    _ADMIT,
    _ADMIT_MAX,
    _FLUSH_AT,
    _RECV_STEP,
    _SMALL_FRAME,
    _ZEROS,
    DEFAULT_HANDSHAKE_TIMEOUT,
    AcceptLimits,
    PeerFilter,
    PendingConnection,
    TCPChannel,
    TCPListener,
    _admission,
    _admit,
    _admitted,
    _check_peers,
    _check_port,
    _describe_oserror,
)
from .tunnel import TLSTunnel

__all__ = [
    "Channel",
    "MemoryChannel",
    "TCPChannel",
    "TCPListener",
    "AcceptLimits",
    "PendingConnection",
    "NullChannel",
    "TranscriptChannel",
    "TLSTunnel",
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
    "TamperedStream",
]
