"""Sealed boxes: a user encrypts one message to the aggregator's public key, anonymously.

What it does
    :func:`seal` encrypts a short message to an X25519 public key with HPKE
    (RFC 9180) in base mode, single shot, cipher suite
    DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / ChaCha20-Poly1305, from
    ``cryptography``'s :class:`~cryptography.hazmat.primitives.hpke.Suite`:
    a fresh ephemeral X25519 key per message (``Suite.encrypt`` draws it from
    the OS CSPRNG), the encapsulated key ``enc`` (32 bytes) in front of the
    AEAD ciphertext.  This is the construction of libsodium's
    ``crypto_box_seal`` (an ephemeral-static Diffie-Hellman key, then an
    AEAD), standardized.  :func:`open_box` decrypts with the private key.

        box = 0x01 || enc[32] || ChaCha20-Poly1305(key, nonce, aad="", message)

    The *context* (protocol name, version, task id, purpose:
    :func:`box_context`) is HPKE's ``info``: it enters the key schedule, so a
    box sealed for one task or purpose does not open under another (RFC 9180,
    Sec. 8.1, recommends ``info`` for this in the single-shot API; it binds
    exactly as associated data would).  :func:`enc_of` returns a box's
    ``enc``, a public value that is fresh per box: replay detection keys on
    it without decrypting anything.

Security model and assumptions
    IND-CCA2 confidentiality of the message against anyone without the
    private key, including the shuffler that forwards boxes, from the
    Gap-Diffie-Hellman assumption on X25519 with HKDF-SHA256 modelled as a
    random oracle (DHKEM is IND-CCA2 under Gap-DH in the ROM: Alwen, Blanchet,
    Hauck, Kiltz, Lipp, Riepel, "Analysing the HPKE standard", EUROCRYPT
    2021) and the AEAD security of ChaCha20-Poly1305 (RFC 8439; one message
    per key, so the nonce never repeats).  Base mode authenticates no sender:
    the recipient learns nothing about who sealed a box, which is the point
    (the shuffler knows who sent it and cannot read it).  Message length is
    not hidden: every message of a protocol has one fixed size
    (:func:`pack_label`).  The aggregator's key pair comes from the OS CSPRNG
    (:func:`generate_keypair`).
"""

from __future__ import annotations

import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.hpke import AEAD, KDF, KEM, Suite

from pairwise.dp.errors import PairwiseError

__all__ = [
    "BOX_VERSION",
    "ENC_BYTES",
    "TAG_BYTES",
    "LABEL_BYTES",
    "SealedBoxError",
    "generate_keypair",
    "public_key_of",
    "box_context",
    "box_size",
    "seal",
    "open_box",
    "enc_of",
    "pack_label",
    "unpack_label",
]

#: First byte of every box (the format; bump on any change of suite or layout).
BOX_VERSION = 1
#: Bytes of the encapsulated ephemeral X25519 key.
ENC_BYTES = 32
#: Bytes of the ChaCha20-Poly1305 tag.
TAG_BYTES = 16
#: Plaintext of one shuffled-histogram message: version byte and a uint32 label.
_LABEL = struct.Struct("!BI")
LABEL_BYTES = _LABEL.size
_SUITE = Suite(KEM.X25519, KDF.HKDF_SHA256, AEAD.CHACHA20_POLY1305)
_CONTEXT_PREFIX = b"pairwise/collect/sealed-box/v1\x00"


class SealedBoxError(PairwiseError, ValueError):
    """A box that is malformed, sealed under another key or context, or altered; or a bad key or context."""


def generate_keypair() -> tuple[bytes, bytes]:
    """A fresh X25519 key pair from the OS CSPRNG: (private 32 bytes, public 32 bytes), raw encodings."""
    from cryptography.hazmat.primitives import serialization

    sk = X25519PrivateKey.generate()
    raw = sk.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    return raw, public_key_of(raw)


def public_key_of(private_key: bytes) -> bytes:
    """The raw public key of a raw X25519 private key."""
    from cryptography.hazmat.primitives import serialization

    return _private(private_key).public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _private(private_key: bytes) -> X25519PrivateKey:
    if not isinstance(private_key, (bytes, bytearray)) or len(private_key) != 32:
        raise SealedBoxError("an X25519 private key is 32 raw bytes")
    return X25519PrivateKey.from_private_bytes(bytes(private_key))


def _public(public_key: bytes) -> X25519PublicKey:
    if not isinstance(public_key, (bytes, bytearray)) or len(public_key) != 32:
        raise SealedBoxError("an X25519 public key is 32 raw bytes (64 hex digits)")
    if bytes(public_key) == bytes(32):
        raise SealedBoxError("the all-zero X25519 public key is not a key")
    return X25519PublicKey.from_public_bytes(bytes(public_key))


def box_context(task_id: str, purpose: str) -> bytes:
    """The HPKE ``info`` of a box: this format's label, the task id and the purpose (e.g. ``shuffle-histogram``).

    Both are non-empty UTF-8 strings without NUL (they are NUL-separated),
    at most 256 bytes each.
    """
    parts = []
    for name, value in (("task id", task_id), ("purpose", purpose)):
        if not isinstance(value, str) or not value or "\x00" in value:
            raise SealedBoxError(f"the box context's {name} must be a non-empty string without NUL, got {value!r}")
        b = value.encode("utf-8")
        if len(b) > 256:
            raise SealedBoxError(f"the box context's {name} is longer than 256 bytes")
        parts.append(b)
    return _CONTEXT_PREFIX + parts[0] + b"\x00" + parts[1]


def box_size(message_bytes: int) -> int:
    """Bytes of a box that holds a message of ``message_bytes`` bytes."""
    return 1 + ENC_BYTES + int(message_bytes) + TAG_BYTES


def seal(message: bytes, public_key: bytes, context: bytes) -> bytes:
    """Encrypt ``message`` to ``public_key`` (raw X25519) under ``context`` (:func:`box_context`)."""
    if not isinstance(context, bytes) or not context.startswith(_CONTEXT_PREFIX):
        raise SealedBoxError("seal needs a context made by box_context(task_id, purpose)")
    ct = _SUITE.encrypt(bytes(message), _public(public_key), info=context)
    return bytes([BOX_VERSION]) + ct


def enc_of(box: bytes) -> bytes:
    """The box's encapsulated ephemeral key (public, fresh per box): the key for replay detection."""
    _check_shape(box, None)
    return bytes(box[1 : 1 + ENC_BYTES])


def _check_shape(box: bytes, message_bytes: int | None) -> None:
    if not isinstance(box, (bytes, bytearray, memoryview)):
        raise SealedBoxError(f"a sealed box is bytes, got {type(box).__name__}")
    n = len(box)
    if n < box_size(0):
        raise SealedBoxError(f"a sealed box of {n} bytes is too short (at least {box_size(0)})")
    if message_bytes is not None and n != box_size(message_bytes):
        raise SealedBoxError(f"a sealed box of {n} bytes; this protocol's boxes are {box_size(message_bytes)} bytes")
    if box[0] != BOX_VERSION:
        raise SealedBoxError(f"sealed box format {box[0]} is not supported (expected {BOX_VERSION})")


def open_box(box: bytes, private_key: bytes, context: bytes, *, message_bytes: int | None = None) -> bytes:
    """Decrypt a box; :class:`SealedBoxError` if it is malformed, altered, or sealed to another key or context.

    ``message_bytes``: the protocol's fixed message size (a box of another
    size is refused before any cryptography runs).
    """
    _check_shape(box, message_bytes)
    try:
        return _SUITE.decrypt(bytes(box[1:]), _private(private_key), info=context)
    except InvalidTag:
        raise SealedBoxError(
            "the sealed box does not open: altered, or sealed for another key, task or purpose"
        ) from None
    except ValueError as exc:  # e.g. an invalid encapsulated key
        raise SealedBoxError(f"the sealed box is malformed ({exc})") from None


def pack_label(label: int) -> bytes:
    """The plaintext of one shuffled-histogram message: version 1 and the label (bin index) as uint32."""
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < 1 << 32:
        raise SealedBoxError(f"a message label is an integer in 0..2^32-1, got {label!r}")
    return _LABEL.pack(1, label)


def unpack_label(message: bytes) -> int:
    """Inverse of :func:`pack_label` (:class:`SealedBoxError` for any other layout)."""
    if len(message) != LABEL_BYTES:
        raise SealedBoxError(f"a label message is {LABEL_BYTES} bytes, got {len(message)}")
    version, label = _LABEL.unpack(message)
    if version != 1:
        raise SealedBoxError(f"label message version {version} is not supported")
    return label
