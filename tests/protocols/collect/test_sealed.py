"""Sealed boxes (protocols.collect.sealed) against an independent RFC 9180 reference.

The reference below is HPKE base mode written from RFC 9180 (Secs. 4.1, 5.1,
5.2, 7.1) with stdlib ``hmac``/``hashlib`` for HKDF-SHA256 and the raw X25519
and ChaCha20-Poly1305 primitives of ``cryptography`` -- not its HPKE class,
which the module under test uses.  The reference is first pinned to the RFC's
test vector A.2.1 (DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
ChaCha20Poly1305, base mode); then boxes made by :func:`seal` must open
with the reference, and boxes made by the reference must open with
:func:`open_box`.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from pairwise.protocols.collect import sealed
from pairwise.protocols.collect.sealed import SealedBoxError

# ---------------------------------------------------------------- reference: RFC 9180 base mode, one suite
KEM_ID, KDF_ID, AEAD_ID = 0x0020, 0x0001, 0x0003
SUITE_KEM = b"KEM" + struct.pack("!H", KEM_ID)
SUITE_HPKE = b"HPKE" + struct.pack("!HHH", KEM_ID, KDF_ID, AEAD_ID)


def extract(salt: bytes, ikm: bytes) -> bytes:
    return hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()


def expand(prk: bytes, info: bytes, n: int) -> bytes:
    out, t, i = b"", b"", 1
    while len(out) < n:
        t = hmac.new(prk, t + info + bytes([i]), hashlib.sha256).digest()
        out, i = out + t, i + 1
    return out[:n]


def labeled_extract(suite: bytes, salt: bytes, label: bytes, ikm: bytes) -> bytes:
    return extract(salt, b"HPKE-v1" + suite + label + ikm)


def labeled_expand(suite: bytes, prk: bytes, label: bytes, info: bytes, n: int) -> bytes:
    return expand(prk, struct.pack("!H", n) + b"HPKE-v1" + suite + label + info, n)


def raw(pk) -> bytes:
    return pk.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def kem_shared_secret(dh: bytes, enc: bytes, pkr: bytes) -> bytes:
    eae_prk = labeled_extract(SUITE_KEM, b"", b"eae_prk", dh)
    return labeled_expand(SUITE_KEM, eae_prk, b"shared_secret", enc + pkr, 32)


def key_schedule(shared: bytes, info: bytes) -> tuple[bytes, bytes]:
    psk_id_hash = labeled_extract(SUITE_HPKE, b"", b"psk_id_hash", b"")
    info_hash = labeled_extract(SUITE_HPKE, b"", b"info_hash", info)
    ctx = b"\x00" + psk_id_hash + info_hash
    secret = labeled_extract(SUITE_HPKE, shared, b"secret", b"")
    return labeled_expand(SUITE_HPKE, secret, b"key", ctx, 32), labeled_expand(
        SUITE_HPKE, secret, b"base_nonce", ctx, 12
    )


def ref_open(ct_with_enc: bytes, skr: X25519PrivateKey, info: bytes, aad: bytes = b"") -> bytes:
    enc, ct = ct_with_enc[:32], ct_with_enc[32:]
    dh = skr.exchange(X25519PublicKey.from_public_bytes(enc))
    key, nonce = key_schedule(kem_shared_secret(dh, enc, raw(skr.public_key())), info)
    return ChaCha20Poly1305(key).decrypt(nonce, ct, aad)  # sequence number 0: the nonce is base_nonce


def ref_seal(pt: bytes, pkr: bytes, info: bytes, ske: X25519PrivateKey, aad: bytes = b"") -> bytes:
    enc = raw(ske.public_key())
    dh = ske.exchange(X25519PublicKey.from_public_bytes(pkr))
    key, nonce = key_schedule(kem_shared_secret(dh, enc, pkr), info)
    return enc + ChaCha20Poly1305(key).encrypt(nonce, pt, aad)


# RFC 9180, Appendix A.2.1 (base mode)
A21 = {
    k: bytes.fromhex(v)
    for k, v in {
        "info": "4f6465206f6e2061204772656369616e2055726e",
        "skEm": "f4ec9b33b792c372c1d2c2063507b684ef925b8c75a42dbcbf57d63ccd381600",
        "pkEm": "1afa08d3dec047a643885163f1180476fa7ddb54c6a8029ea33f95796bf2ac4a",
        "skRm": "8057991eef8f1f1af18f4a9491d16a1ce333f695d4db8e38da75975c4478e0fb",
        "pkRm": "4310ee97d88cc1f088a5576c77ab0cf5c3ac797f3d95139c6c84b5429c59662a",
        "shared_secret": "0bbe78490412b4bbea4812666f7916932b828bba79942424abb65244930d69a7",
        "key": "ad2744de8e17f4ebba575b3f5f5a8fa1f69c2a07f6e7500bc60ca6e3e3ec1c91",
        "base_nonce": "5c4d98150661b848853b547f",
        "pt": "4265617574792069732074727574682c20747275746820626561757479",
        "aad": "436f756e742d30",
        "ct": "1c5250d8034ec2b784ba2cfd69dbdb8af406cfe3ff938e131f0def8c8b60b4db21993c62ce81883d2dd1b51a28",
    }.items()
}


def test_reference_reproduces_rfc9180_vector_a21():
    ske = X25519PrivateKey.from_private_bytes(A21["skEm"])
    skr = X25519PrivateKey.from_private_bytes(A21["skRm"])
    assert raw(ske.public_key()) == A21["pkEm"] and raw(skr.public_key()) == A21["pkRm"]
    dh = ske.exchange(skr.public_key())
    shared = kem_shared_secret(dh, A21["pkEm"], A21["pkRm"])
    assert shared == A21["shared_secret"]
    assert key_schedule(shared, A21["info"]) == (A21["key"], A21["base_nonce"])
    box = ref_seal(A21["pt"], A21["pkRm"], A21["info"], ske, A21["aad"])
    assert box == A21["pkEm"] + A21["ct"]
    assert ref_open(box, skr, A21["info"], A21["aad"]) == A21["pt"]


def test_seal_is_rfc9180_base_mode_both_ways():
    sk, pk = sealed.generate_keypair()
    assert sealed.public_key_of(sk) == pk
    skr = X25519PrivateKey.from_private_bytes(sk)
    ctx = sealed.box_context("task-7", "shuffle-histogram")
    for label in (0, 1, 41, 2**32 - 1):
        msg = sealed.pack_label(label)
        box = sealed.seal(msg, pk, ctx)
        assert len(box) == sealed.box_size(len(msg)) == 54 and box[0] == sealed.BOX_VERSION
        assert ref_open(box[1:], skr, ctx) == msg  # the module's box opens with the RFC reference
        mine = bytes([sealed.BOX_VERSION]) + ref_seal(msg, pk, ctx, X25519PrivateKey.generate())
        assert sealed.unpack_label(sealed.open_box(mine, sk, ctx, message_bytes=sealed.LABEL_BYTES)) == label


def test_fresh_ephemeral_key_per_box():
    _, pk = sealed.generate_keypair()
    ctx = sealed.box_context("t", "p")
    boxes = [sealed.seal(b"same", pk, ctx) for _ in range(50)]
    assert len({sealed.enc_of(b) for b in boxes}) == 50
    assert len(set(boxes)) == 50


def test_context_binds_task_and_purpose():
    sk, pk = sealed.generate_keypair()
    box = sealed.seal(sealed.pack_label(3), pk, sealed.box_context("task-1", "shuffle-histogram"))
    for other in (sealed.box_context("task-2", "shuffle-histogram"), sealed.box_context("task-1", "other")):
        with pytest.raises(SealedBoxError, match="does not open"):
            sealed.open_box(box, sk, other)
    with pytest.raises(SealedBoxError, match="does not open"):
        sealed.open_box(box, sealed.generate_keypair()[0], sealed.box_context("task-1", "shuffle-histogram"))


@pytest.mark.parametrize("pos", [0, 1, 20, 33, 40, 53])
def test_every_altered_byte_is_refused(pos):
    sk, pk = sealed.generate_keypair()
    ctx = sealed.box_context("t", "shuffle-histogram")
    box = bytearray(sealed.seal(sealed.pack_label(9), pk, ctx))
    box[pos] ^= 0x20
    with pytest.raises(SealedBoxError):
        sealed.open_box(bytes(box), sk, ctx, message_bytes=sealed.LABEL_BYTES)


def test_malformed_inputs_get_clear_errors():
    sk, pk = sealed.generate_keypair()
    ctx = sealed.box_context("t", "p")
    box = sealed.seal(sealed.pack_label(1), pk, ctx)
    with pytest.raises(SealedBoxError, match="too short"):
        sealed.open_box(box[:20], sk, ctx)
    with pytest.raises(SealedBoxError, match="54 bytes"):
        sealed.open_box(box + b"x", sk, ctx, message_bytes=sealed.LABEL_BYTES)
    with pytest.raises(SealedBoxError, match="32 raw bytes"):
        sealed.seal(b"x", pk[:31], ctx)
    with pytest.raises(SealedBoxError, match="all-zero"):
        sealed.seal(b"x", bytes(32), ctx)
    with pytest.raises(SealedBoxError, match="box_context"):
        sealed.seal(b"x", pk, b"raw context")
    for bad in ("", "a\x00b", 5):
        with pytest.raises(SealedBoxError):
            sealed.box_context(bad, "p")  # type: ignore[arg-type]
    for bad in (-1, 2**32, True, 1.0):
        with pytest.raises(SealedBoxError):
            sealed.pack_label(bad)  # type: ignore[arg-type]
    with pytest.raises(SealedBoxError, match="version"):
        sealed.unpack_label(b"\x02\x00\x00\x00\x01")
    with pytest.raises(SealedBoxError):
        sealed.open_box(bytes([2]) + box[1:], sk, ctx)
