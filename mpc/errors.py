"""Exceptions raised by the channel and oblivious-transfer layers of :mod:`mpc`.

What it does
    One small hierarchy so that callers (the Yao runtime, the command line,
    servers) can catch "something went wrong with the peer or the transport"
    as one class, :class:`ChannelError`, while tests and users can still tell
    the causes apart.  ``ChannelError`` derives from :class:`OSError`, so the
    ``pairwise`` command line prints it as a one-line error.

    ====================  =====================================================
    ChannelError          base class; also "channel is closed / unusable"
    ChannelTimeout        no data (or no connection) within the timeout
    PeerClosed            the peer closed or reset the connection
    TruncatedFrame        the peer vanished in the middle of a frame
    FrameError            a frame is malformed: oversized, wrong length,
                          non-zero padding bits, garbage
    ConnectError          could not connect before the deadline / bad host
    PeerBusy              the peer serves its maximum of connections and
                          cancelled the handshake: retry later
    AddressInUse          the port to listen on is taken
    HandshakeError        session parameters differ (magic, version, session
                          id, role, circuit digest)
    AuthenticationError   TLS failed: no certificate, one from another CA,
                          an expired one, TLS on one side only
    AccessDenied          the peer's certificate is valid but its role or
                          name is not allowed here
    InsecureTransport     plaintext requested on a non-loopback address
                          without an explicit ``insecure=True``
    ProtocolError         a well-framed message with impossible content
                          (invalid curve point, batch desynchronisation)
    TamperedStream        an end-to-end TLS record failed authentication:
                          a relay changed, dropped or injected bytes
    ====================  =====================================================

Security model
    Messages carry only the facts needed to act (sizes, ports, digests of
    public data); no exception ever includes key material, labels or Delta.
"""

from __future__ import annotations

from pairwise.dp.errors import PairwiseError

__all__ = [
    "ChannelError",
    "ChannelTimeout",
    "PeerClosed",
    "TruncatedFrame",
    "FrameError",
    "ConnectError",
    "PeerBusy",
    "AddressInUse",
    "HandshakeError",
    "AuthenticationError",
    "AccessDenied",
    "InsecureTransport",
    "ProtocolError",
    "TamperedStream",
]


class ChannelError(PairwiseError, OSError):
    """Base class of every transport / peer failure in :mod:`mpc`."""


class ChannelTimeout(ChannelError, TimeoutError):
    """Nothing arrived from the peer (or no peer connected) within the timeout."""


class PeerClosed(ChannelError, ConnectionError):
    """The peer closed or reset the connection (e.g. its process died)."""


class FrameError(ChannelError):
    """A frame violates the framing rules (too large, wrong size, garbage)."""


class TruncatedFrame(FrameError, PeerClosed):
    """The connection ended in the middle of a frame."""


class ConnectError(ChannelError, ConnectionError):
    """Could not reach the peer: unresolvable host, or nobody listening before the deadline."""


class PeerBusy(ConnectError):
    """The peer is busy: it cancelled the TLS handshake (a ``user_canceled`` alert) before reading anything.

    Not an authentication failure; :meth:`pairwise.mpc.channel.TCPChannel.connect`
    retries it until its deadline, then raises it.
    """


class AddressInUse(ChannelError):
    """The address/port to listen on is already taken by another socket."""


class HandshakeError(ChannelError):
    """The two parties disagree on magic, version, session id, role or circuit digest."""


class AuthenticationError(HandshakeError):
    """The TLS handshake failed: a missing, untrusted or expired certificate, or TLS on one side only."""


class AccessDenied(HandshakeError):
    """The peer authenticated, but its certificate's role or name is not allowed for this connection."""


class InsecureTransport(ChannelError):
    """A plaintext connection to or from a non-loopback address was requested without ``insecure=True``."""


class ProtocolError(ChannelError):
    """The peer sent a correctly framed message whose content is invalid."""


class TamperedStream(ChannelError):
    """A TLS record failed its authentication check (or the partner reports one did).

    Raised by :class:`pairwise.mpc.channel.tunnel.TLSTunnel` when a byte of the
    end-to-end TLS stream was changed, dropped, reordered or injected on the
    way (by a relay or the network).  The stream is unusable afterwards.
    """
