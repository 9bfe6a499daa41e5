"""Wire format, addresses and errors shared by the ECDF servers, clients and querier.

What it does
    Every connection of the multi-server ECDF service is an
    :class:`pairwise.mpc.channel.TCPChannel` that starts with :func:`pairwise.mpc.channel.handshake`
    (session id ``pairwise-ecdf``, protocol digest ``pairwise-ecdf/1``); the
    connecting side names its role (``ecdf-client`` uploads keys,
    ``ecdf-querier`` asks for releases, ``ecdf-peer`` is the other server of a
    two-party garbled-circuit release) and the server answers as
    ``ecdf-server``.  Control messages are JSON objects in one frame each
    (at most :data:`CONTROL_MAX` bytes, UTF-8, parsed with :func:`json.loads`
    only); bulk data (client ids, key lengths, shares) are raw little-endian
    arrays (:meth:`pairwise.mpc.channel.Channel.send_array`) or byte frames whose sizes
    are announced in the preceding JSON.  Nothing is ever pickled.

    Replies are ``{"ok": true, ...}`` or ``{"ok": false, "error": message,
    "code": kind}``; :func:`raise_refusal` turns the latter into the matching
    exception, naming the server.

Security model
    The transport gives no confidentiality or integrity of its own (run it
    over a trusted network or TLS); messages are validated for type and
    size before use.  No message carries secrets in the clear except the
    clients' keys to their own server and shares, which are what the
    protocol sends.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from pairwise.mpc.channel import Channel, TCPChannel, handshake
from pairwise.mpc.errors import ChannelError, ProtocolError

__all__ = [
    "SESSION_ID",
    "PROTOCOL_DIGEST",
    "ROLE_SERVER",
    "ROLE_CLIENT",
    "ROLE_QUERIER",
    "ROLE_PEER",
    "CONTROL_MAX",
    "ECDFError",
    "BudgetExceeded",
    "DatasetError",
    "QueryRefused",
    "ServerUnavailable",
    "parse_address",
    "parse_servers",
    "format_address",
    "send_json",
    "recv_json",
    "connect",
    "parse_epsilon",
    "raise_refusal",
]

SESSION_ID = b"pairwise-ecdf"
PROTOCOL_DIGEST = b"pairwise-ecdf/1"
ROLE_SERVER = "ecdf-server"
ROLE_CLIENT = "ecdf-client"
ROLE_QUERIER = "ecdf-querier"
ROLE_PEER = "ecdf-peer"
#: Largest JSON control frame.
CONTROL_MAX = 1 << 20
#: Largest epsilon accepted in one request.
MAX_EPSILON = Fraction(10**6)


class ECDFError(ValueError):
    """A request of the ECDF service cannot be served as asked (the message says why)."""


class BudgetExceeded(ECDFError):
    """The dataset's privacy budget would be exceeded; the server refused the query."""


class DatasetError(ECDFError):
    """Unknown dataset, or an upload that does not match the dataset's parameters."""


class QueryRefused(ECDFError):
    """A server refused a request (bad parameters, inconsistent state)."""


class ServerUnavailable(ChannelError, ConnectionError):
    """A server could not be reached or dropped the connection; the message names it."""


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 as ``[::1]:PORT``) -> (host, port), with a clear error."""
    s = str(text).strip()
    if s.startswith("["):
        host, _, rest = s[1:].partition("]")
        port_s = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_s = s.rpartition(":")
    if not host or not port_s:
        raise ValueError(f"address {text!r} must be HOST:PORT")
    try:
        port = int(port_s)
    except ValueError:
        raise ValueError(f"address {text!r}: port {port_s!r} is not an integer") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"address {text!r}: port must be in 0..65535")
    return host, port


def parse_servers(text: str | list) -> list[tuple[str, int]]:
    """``HOST:PORT,HOST:PORT,...`` (or a list of addresses/tuples) -> list of (host, port), m >= 2."""
    if isinstance(text, str):
        items = [p for p in (x.strip() for x in text.split(",")) if p]
        addrs = [parse_address(p) for p in items]
    else:
        addrs = [tuple(a) if not isinstance(a, str) else parse_address(a) for a in text]
        addrs = [(str(h), int(p)) for h, p in addrs]
    if len(addrs) < 2:
        raise ValueError(f"need at least 2 servers (HOST:PORT,HOST:PORT), got {len(addrs)}")
    if any(p == 0 for _, p in addrs):
        raise ValueError("server ports must be non-zero")
    if len(set(addrs)) != len(addrs):
        raise ValueError("the server list names the same address twice")
    return addrs


def format_address(addr: tuple[str, int]) -> str:
    host, port = addr
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def send_json(ch: Channel, obj: dict) -> None:
    """One JSON object per frame (UTF-8)."""
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    if len(data) > CONTROL_MAX:
        raise ProtocolError(f"control message of {len(data)} bytes exceeds {CONTROL_MAX}")
    ch.send(data)
    ch.flush()


def recv_json(ch: Channel, timeout: float | None = None) -> dict[str, Any]:
    """Receive one JSON object (at most CONTROL_MAX bytes); anything else is a ProtocolError."""
    raw = ch.recv(timeout, max_size=CONTROL_MAX)
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"malformed control message from {getattr(ch, 'peer', 'peer')}: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"control message from {getattr(ch, 'peer', 'peer')} is not a JSON object")
    return obj


def connect(addr: tuple[str, int], role: str, *, label: str, connect_timeout: float, timeout: float) -> TCPChannel:
    """Connect and handshake as ``role``; failures raise :class:`ServerUnavailable` naming ``label``."""
    host, port = addr
    try:
        ch = TCPChannel.connect(host, port, deadline=connect_timeout, timeout=timeout)
    except ChannelError as exc:
        raise ServerUnavailable(f"{label} at {format_address(addr)} is unavailable: {exc}") from exc
    try:
        handshake(ch, role, SESSION_ID, PROTOCOL_DIGEST, peer_role=ROLE_SERVER, extra_label="protocol",
                  timeout=min(timeout, 30.0))
    except ChannelError as exc:
        ch.close()
        raise ServerUnavailable(f"{label} at {format_address(addr)}: handshake failed: {exc}") from exc
    return ch


def parse_epsilon(value: object, name: str = "epsilon") -> Fraction:
    """A positive, finite epsilon as an exact Fraction of its decimal form (0.1 -> 1/10)."""
    if isinstance(value, bool):
        raise ECDFError(f"{name} must be a number, got {value!r}")
    try:
        eps = Fraction(str(value)) if not isinstance(value, Fraction) else value
    except (ValueError, ZeroDivisionError):
        raise ECDFError(f"{name} must be a positive number, got {value!r}") from None
    if not 0 < eps <= MAX_EPSILON:
        raise ECDFError(f"{name} must lie in (0, {MAX_EPSILON}], got {value!r}")
    if eps.denominator > 10**30:  # e.g. "1e-999999": exact, but useless and too long to print or send
        raise ECDFError(f"{name} must be at least 1e-30 with at most 30 decimals, got {value!r}")
    return eps


def raise_refusal(label: str, reply: dict) -> None:
    """Raise the exception matching a ``{"ok": false}`` reply of server ``label``."""
    msg = f"{label} refused: {reply.get('error', 'unknown error')}"
    code = reply.get("code")
    if code == "budget":
        raise BudgetExceeded(msg)
    if code == "dataset":
        raise DatasetError(msg)
    if code == "unavailable":
        raise ServerUnavailable(msg)
    raise QueryRefused(msg)
