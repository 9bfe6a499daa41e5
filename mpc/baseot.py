"""Base oblivious transfer: Chou-Orlandi "simplest OT" in the prime-order group of edwards25519.

What it does
    ``n`` 1-out-of-2 OTs of 128-bit strings in two messages, batched with one
    sender key.  The natural output is *random* OT (the sender gets two random
    keys per transfer, the receiver the one it chose); :meth:`BaseOTSender.send`
    / :meth:`BaseOTReceiver.recv` add one message to transfer chosen 128-bit
    messages (one-time pad with the keys).  The IKNP extension
    (:mod:`pairwise.mpc.iknp`) uses 128 random base OTs as its seeds.

    The sender sends A = a'G, the receiver B_j = b_j G + c_j A, and the keys
    are KDF(sid, index0 + j, A, B_j, u(.)) of the shared point, with
    KDF = SHA-256 over the domain tag ``pairwise/co-ot/v3``; u(P) is the
    X25519 coordinate.  X25519 comes from ``cryptography`` (OpenSSL), point
    arithmetic from libsodium (PyNaCl).

Security model
    Semi-honest sender and receiver.  Receiver privacy is perfect (B_j is a
    uniform group element for either choice).  Sender privacy: CDH in the
    prime-order group with SHA-256 as a random oracle ([CO15, Thm 1]).  The
    session id, the global OT index and the transcript (A, B_j) enter every
    key derivation, which answers the known flaw of the CO15 UC proof in the
    semi-honest setting (malicious security would need another protocol).
    Received points are checked (32 bytes, canonical, not small-order, on the
    curve, A in the prime-order subgroup); a bad point raises
    :class:`pairwise.mpc.errors.ProtocolError`.  Secrets (a, b_j, keys) come
    from :mod:`secrets` / the OS CSPRNG and never leave the object except as
    return values.  Both parties must call in the same order so that OT
    indices agree (a desynchronised batch header raises ProtocolError); the
    session id must be unique per pair of parties and run (e.g. the
    ``run_id`` of :func:`pairwise.mpc.channel.handshake`).

Follows
    [CO15, Fig. 1], batched.  The protocol step by step, where each operation
    comes from, and the proof and its caveat: ``docs/ot.md``, "The base OTs,
    step by step".
"""

from __future__ import annotations

import hashlib
import secrets
import struct

import nacl.bindings as _na
import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from nacl.exceptions import RuntimeError as _NaClError

from .channel import Channel, session_bytes
from .errors import ProtocolError

__all__ = [
    "CURVE",
    "POINT_BYTES",
    "OT_VERSION",
    "BaseOTSender",
    "BaseOTReceiver",
    "derive_key",
    "check_point",
    "u_coordinates",
]

#: The group: the prime-order subgroup of edwards25519 (keys through X25519 coordinates).
CURVE = "edwards25519"
#: Wire version of the base OT (2 was CO15 on NIST P-256); :mod:`pairwise.mpc.twopc` puts it in its handshake.
OT_VERSION = 3
#: Bytes of an encoded point (Ed25519 compressed encoding).
POINT_BYTES = 32
_P = 2**255 - 19
#: Order of the base point.
_L = 2**252 + 27742317777372353535851937790883648493
_INV8 = pow(8, -1, _L)
_Y_MASK = (1 << 255) - 1
#: y of the small-order points (orders 1, 2, 4 and 8), as libsodium's blacklist lists them.
_SMALL_ORDER_Y = frozenset(
    (
        0,
        1,
        _P - 1,
        2707385501144840649318225287225658788936804267575313519463743609750303402022,
        55188659117513257062467267217118295137698188065244968500265048394206261417927,
    )
)
_DOMAIN = b"pairwise/co-ot/v3\x00"
_HEADER = struct.Struct("!QI")  # first OT index, number of OTs
#: The receiver sends its points in frames of this many, so the sender starts on the first ones
#: while the receiver computes the rest.
POINTS_PER_FRAME = 32


def derive_key(session_id: bytes, index: int, a_enc: bytes, b_enc: bytes, u_enc: bytes) -> bytes:
    """KDF(sid, index, A, B, U): the 16-byte key of OT number ``index`` (see module docstring)."""
    h = hashlib.sha256(_DOMAIN)
    h.update(struct.pack("!H", len(session_id)))
    h.update(session_id)
    h.update(struct.pack("!Q", index))
    h.update(a_enc)
    h.update(b_enc)
    h.update(u_enc)
    return h.digest()[:16]


def check_point(data: bytes, what: str = "point") -> int:
    """Check a received encoding: 32 bytes, canonical, not of small order; returns its y.

    (On the curve is checked by the libsodium operation that uses the point.)
    """
    if len(data) != POINT_BYTES:
        raise ProtocolError(f"{what}: expected {POINT_BYTES} bytes, got {len(data)}")
    y = int.from_bytes(data, "little") & _Y_MASK
    if y >= _P:
        raise ProtocolError(f"{what}: non-canonical encoding (y >= p)")
    if y in _SMALL_ORDER_Y:
        raise ProtocolError(f"{what} is a point of small order (the identity or a torsion point)")
    return y


def u_coordinates(ys: list[int]) -> list[bytes]:
    """X25519 coordinates u = (1 + y) / (1 - y) mod p of Edwards points, with one modular inversion.

    Montgomery's trick: invert the product of the denominators, then peel one
    factor off per point.  Every y must differ from 1 (the identity).
    """
    dens = [(1 - y) % _P for y in ys]
    prefix = [1] * (len(dens) + 1)
    for j, d in enumerate(dens):
        prefix[j + 1] = prefix[j] * d % _P
    inv = pow(prefix[-1], -1, _P) if dens else 1
    out = [b""] * len(dens)
    for j in range(len(dens) - 1, -1, -1):
        inv_j = inv * prefix[j] % _P
        inv = inv * dens[j] % _P
        out[j] = ((1 + ys[j]) * inv_j % _P).to_bytes(32, "little")
    return out


def _x25519_scalar(b: int) -> bytes:
    """A clamped X25519 scalar s (8k, 2^251 <= k < 2^252) with s = +-b mod l, so u(sP) = u(bP) on the group.

    k0 = b / 8 mod l lies in [2^251, 2^252), or else l - k0 does (except when
    k0 is within 2^125 of 2^252 or of 0, probability ~2^-126): either gives
    u(8k P) = u(+-b P).
    """
    k = b * _INV8 % _L
    if not (1 << 251) <= k < (1 << 252):
        k = _L - k
        if not (1 << 251) <= k < (1 << 252):
            raise ValueError("scalar has no X25519 form")  # caller draws another b
    return (8 * k).to_bytes(32, "little")


def _keys_to_blocks(keys: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(keys), dtype="<u8").astype(np.uint64).reshape(len(keys), 2)


def _check_blocks(m: np.ndarray, n: int | None, name: str) -> np.ndarray:
    arr = np.asarray(m)
    if arr.dtype != np.uint64 or arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{name} must be a uint64 block array of shape (n, 2), got {arr.dtype} {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} blocks, expected {n}")
    return arr


class BaseOTSender:
    """Chou-Orlandi sender over ``channel``; call :meth:`send_random` or :meth:`send`.

    ``index`` is the next global OT index (both parties start at 0 for a
    session id and advance by ``n`` per call).
    """

    def __init__(self, channel: Channel, session_id: bytes | str) -> None:
        self.channel = channel
        self.session_id = session_bytes(session_id)
        self.index = 0

    def send_random(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Run ``n`` random OTs; return the sender's keys ``(k0, k1)``, each an (n, 2) block array."""
        n = int(n)
        if n < 0 or n > 1 << 24:
            raise ValueError(f"number of base OTs must be in 0..2^24, got {n}")
        start = self.index
        secret = secrets.token_bytes(32)
        key_a = X25519PrivateKey.from_private_bytes(secret)
        a_enc = _na.crypto_scalarmult_ed25519_base(secret)  # clamp(secret) G, the same clamping as X25519
        del secret
        self.channel.send(_HEADER.pack(start, n) + a_enc)
        self.channel.flush()
        k0, k1 = [], []
        sid = self.session_id
        for j0 in range(0, n, POINTS_PER_FRAME):  # frame by frame, as the receiver sends its points
            k = min(POINTS_PER_FRAME, n - j0)
            raw = self.channel.recv(max_size=POINT_BYTES * k)
            if len(raw) != POINT_BYTES * k:
                raise ProtocolError(f"base OT: expected {k} points ({POINT_BYTES * k} bytes), got {len(raw)} bytes")
            b_encs: list[bytes] = []
            ys: list[int] = []
            for i in range(k):  # validated in order: the first bad point is the one reported
                b_enc = raw[i * POINT_BYTES : (i + 1) * POINT_BYTES]
                what = f"base OT {start + j0 + i}: receiver's point B"
                y_b = check_point(b_enc, what)
                try:
                    d_enc = _na.crypto_core_ed25519_sub(b_enc, a_enc)  # B - A (refuses points off the curve)
                except _NaClError:
                    raise ProtocolError(f"{what} is not on the curve {CURVE}") from None
                y_d = int.from_bytes(d_enc, "little") & _Y_MASK
                if y_d in _SMALL_ORDER_Y:
                    raise ProtocolError(f"{what}: B - A has small order (B equals A up to torsion)")
                b_encs.append(b_enc)
                ys += (y_b, y_d)
            us = u_coordinates(ys)
            for i, b_enc in enumerate(b_encs):
                idx = start + j0 + i
                try:
                    s0 = key_a.exchange(X25519PublicKey.from_public_bytes(us[2 * i]))
                    s1 = key_a.exchange(X25519PublicKey.from_public_bytes(us[2 * i + 1]))
                except ValueError:  # an all-zero shared secret: a point of small order slipped through
                    raise ProtocolError(f"base OT {idx}: receiver's point B gives a small-order shared point") from None
                k0.append(derive_key(sid, idx, a_enc, b_enc, s0))
                k1.append(derive_key(sid, idx, a_enc, b_enc, s1))
        self.index = start + n
        return _keys_to_blocks(k0), _keys_to_blocks(k1)

    def send(self, m0: np.ndarray, m1: np.ndarray) -> None:
        """Chosen-message OT of 128-bit messages: the receiver learns m0[j] or m1[j] per its choice bit."""
        m0 = _check_blocks(m0, None, "m0")
        m1 = _check_blocks(m1, m0.shape[0], "m1")
        k0, k1 = self.send_random(m0.shape[0])
        self.channel.send_blocks(np.concatenate((m0 ^ k0, m1 ^ k1)))
        self.channel.flush()

    #: the name of chosen-message OT in :class:`pairwise.mpc.ot.OTSender` (the extension's spelling)
    send_chosen = send


class BaseOTReceiver:
    """Chou-Orlandi receiver over ``channel``; call :meth:`recv_random` or :meth:`recv`."""

    def __init__(self, channel: Channel, session_id: bytes | str) -> None:
        self.channel = channel
        self.session_id = session_bytes(session_id)
        self.index = 0

    def recv_random(self, choices) -> np.ndarray:
        """Run random OTs with these choice bits; return the chosen keys, an (n, 2) block array."""
        c = _choice_bits(choices)
        n = c.shape[0]
        start = self.index
        raw = self.channel.recv(max_size=_HEADER.size + POINT_BYTES)
        if len(raw) != _HEADER.size + POINT_BYTES:
            raise ProtocolError(
                f"base OT: sender's first message has {len(raw)} bytes, expected {_HEADER.size + POINT_BYTES}"
            )
        got_start, got_n = _HEADER.unpack_from(raw)
        if (got_start, got_n) != (start, n):
            raise ProtocolError(
                f"base OT desynchronised: sender runs OTs {got_start}..{got_start + got_n - 1}, "
                f"receiver expects {start}..{start + n - 1}"
            )
        a_enc = bytes(raw[_HEADER.size :])
        y_a = check_point(a_enc, "base OT: sender's point A")
        if not _na.crypto_core_ed25519_is_valid_point(a_enc):  # on the curve and in the prime-order group
            raise ProtocolError(f"base OT: sender's point A is not a point of the prime-order group of {CURVE}")
        (u_a,) = u_coordinates([y_a])
        sid = self.session_id
        encs, scalars = [], []
        for j0 in range(0, n, POINTS_PER_FRAME):  # a frame as soon as it is ready: the sender starts on it
            for j in range(j0, min(n, j0 + POINTS_PER_FRAME)):
                while True:
                    b = secrets.randbelow(_L - 1) + 1
                    try:
                        scalars.append(_x25519_scalar(b))
                        break
                    except ValueError:  # probability ~2^-126
                        continue
                b_enc = _na.crypto_scalarmult_ed25519_base_noclamp(b.to_bytes(32, "little"))
                encs.append(_na.crypto_core_ed25519_add(b_enc, a_enc) if c[j] else b_enc)
                del b
            self.channel.send(b"".join(encs[j0:]))
            self.channel.flush()
        # then u(b_j A): the sender's two multiplications per OT run at the same time
        keys = [
            derive_key(sid, start + j, a_enc, b_enc, _na.crypto_scalarmult(s, u_a))
            for j, (b_enc, s) in enumerate(zip(encs, scalars))
        ]
        self.index = start + n
        return _keys_to_blocks(keys)

    def recv(self, choices) -> np.ndarray:
        """Chosen-message OT: return m_{c_j}[j] for each choice bit, an (n, 2) block array."""
        c = _choice_bits(choices)
        k = self.recv_random(c)
        y = self.channel.recv_blocks((2, c.shape[0]))
        return np.where(c[:, None], y[1], y[0]) ^ k

    #: the name of chosen-message OT in :class:`pairwise.mpc.ot.OTReceiver` (the extension's spelling)
    recv_chosen = recv


def _choice_bits(choices) -> np.ndarray:
    c = np.asarray(choices)
    if c.ndim != 1:
        raise ValueError(f"choice bits must be a 1-D array, got shape {c.shape}")
    if c.dtype != np.bool_:
        if c.size and not np.isin(c, (0, 1)).all():
            raise ValueError("choice bits must be booleans or integers 0/1")
        c = c.astype(np.bool_)
    if c.shape[0] > 1 << 24:
        raise ValueError("at most 2^24 base OTs per call")
    return c
