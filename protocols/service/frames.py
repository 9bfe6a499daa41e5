"""JSON control frames and addresses, shared by every service's wire format.

What it does
    A service conversation is a sequence of frames on a
    :class:`pairwise.mpc.channel.Channel` (length:uint32-be || payload).
    Control messages are one JSON object per frame, UTF-8, at most
    :data:`CONTROL_MAX` bytes, parsed with :func:`json.loads` only
    (:func:`send_json`, :func:`recv_json`); a frame announcing more is
    refused before its payload is read.  :func:`parse_address` and
    :func:`format_address` read and print ``HOST:PORT`` (IPv6 as
    ``[::1]:PORT``).  The asyncio side of the same frames is
    :mod:`pairwise.protocols.service.aio`.

Security model
    Peers' bytes are size-checked before allocation and parsed as JSON only:
    nothing is ever pickled.  Confidentiality and integrity come from the
    channel (mutual TLS).
"""

from __future__ import annotations

import json
from typing import Any

from pairwise.mpc.channel import Channel
from pairwise.mpc.errors import ProtocolError

__all__ = ["CONTROL_MAX", "decode_json", "encode_json", "format_address", "parse_address", "recv_json", "send_json"]

#: Largest JSON control frame.
CONTROL_MAX = 1 << 20


def encode_json(obj: dict) -> bytes:
    """One control message as bytes (compact UTF-8 JSON), refused above :data:`CONTROL_MAX`."""
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    if len(data) > CONTROL_MAX:
        raise ProtocolError(f"control message of {len(data)} bytes exceeds {CONTROL_MAX}")
    return data


def decode_json(raw: bytes, peer: object = "peer") -> dict[str, Any]:
    """A received control frame as a dict; anything else (bad UTF-8, bad JSON, not an object) is a ProtocolError."""
    try:
        obj = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"malformed control message from {peer}: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"control message from {peer} is not a JSON object")
    return obj


def send_json(ch: Channel, obj: dict) -> None:
    """One JSON object per frame (UTF-8)."""
    ch.send(encode_json(obj))
    ch.flush()


def recv_json(ch: Channel, timeout: float | None = None) -> dict[str, Any]:
    """Receive one JSON object (at most CONTROL_MAX bytes); anything else is a ProtocolError."""
    raw = ch.recv(timeout, max_size=CONTROL_MAX)
    return decode_json(raw, getattr(ch, "peer", "peer"))


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


def format_address(addr: tuple[str, int]) -> str:
    host, port = addr
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
