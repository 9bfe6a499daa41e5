"""Tests of mpc.baseot and mpc.iknp (in one process, both parties as threads over MemoryChannel).

Two-process runs over TCP are in tests/system/test_ot_tcp.py.
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pairwise.mpc.aes import aes_ecb_reference, random_blocks, tccr_hash
from pairwise.mpc.baseot import BaseOTReceiver, BaseOTSender, derive_key
from pairwise.mpc.channel import MemoryChannel, TranscriptChannel
from pairwise.mpc.errors import ChannelError, ProtocolError
from pairwise.mpc.iknp import (
    KAPPA,
    COTReceiver,
    COTSender,
    RowPRG,
    check_delta,
    chosen_ot_tweaks,
    transpose_bit_matrix,
)

ALPHA = 1e-6  # significance level of every statistical check in this file


def run_pair(fa, fb, timeout=30.0):
    """fa(a) here, fb(b) in a thread, over a MemoryChannel pair; exceptions are returned."""
    a, b = MemoryChannel.pair(timeout=timeout)
    out = {}

    def side(name, f, ch):
        try:
            with ch:  # closed at the end, as a real party would: the peer then sees PeerClosed
                out[name] = f(ch)
        except BaseException as exc:  # noqa: BLE001
            out[name] = exc

    th = threading.Thread(target=side, args=("b", fb, b))
    th.start()
    side("a", fa, a)
    th.join(timeout + 5)
    assert not th.is_alive()
    return out["a"], out["b"]


def ok(*results):
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def new_delta() -> np.ndarray:
    d = random_blocks(1)[0]
    d[0] |= np.uint64(1)
    return d


def block_ints(blocks: np.ndarray) -> list[int]:
    return [int(lo) | (int(hi) << 64) for lo, hi in np.asarray(blocks).reshape(-1, 2)]


# =========================================================================== transpose


def transpose_reference(rows: np.ndarray) -> np.ndarray:
    bits = np.unpackbits(rows, axis=1, bitorder="little")  # (R, 8C)
    return np.packbits(bits.T, axis=1, bitorder="little")  # (8C, R/8)


@pytest.mark.parametrize("shape", [(8, 1), (16, 3), (64, 5), (128, 16), (128, 1024), (256, 7)])
def test_transpose_matches_unpackbits_reference(shape):
    rows = np.frombuffer(os.urandom(shape[0] * shape[1]), dtype=np.uint8).reshape(shape)
    assert np.array_equal(transpose_bit_matrix(rows), transpose_reference(rows))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 40), st.data())
def test_transpose_property(r8, c, data):
    raw = data.draw(st.binary(min_size=8 * r8 * c, max_size=8 * r8 * c))
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(8 * r8, c)
    out = transpose_bit_matrix(rows)
    assert np.array_equal(out, transpose_reference(rows))
    assert np.array_equal(transpose_bit_matrix(out), rows)  # an involution on square-compatible shapes


def test_transpose_blocks_bit_semantics_with_python_ints():
    m = 24 * 8
    rows = np.frombuffer(os.urandom(KAPPA * m // 8), dtype=np.uint8).reshape(KAPPA, m // 8)
    blocks = transpose_bit_matrix(rows).view(np.uint64)
    assert blocks.shape == (m, 2)
    row_ints = [int.from_bytes(rows[j].tobytes(), "little") for j in range(KAPPA)]
    for i, b in enumerate(block_ints(blocks)):
        assert b == sum(((row_ints[j] >> i) & 1) << j for j in range(KAPPA))


def test_transpose_into_block_slice_and_strided_input():
    m = 3 * 2048 * 8 + 64  # several internal column chunks plus a partial one
    buf = np.frombuffer(os.urandom(KAPPA * (m // 8 + 16)), dtype=np.uint8).reshape(KAPPA, m // 8 + 16)
    rows = buf[:, 5 : 5 + m // 8]  # strided view, as produced by RowPRG
    blocks = np.zeros((m + 10, 2), dtype=np.uint64)
    res = transpose_bit_matrix(rows, out=blocks[3 : 3 + m].view(np.uint8))
    expect = transpose_reference(np.ascontiguousarray(rows))
    assert np.array_equal(res, expect)
    assert np.array_equal(blocks[3 : 3 + m].view(np.uint8), expect)
    assert not blocks[:3].any() and not blocks[3 + m :].any()
    with pytest.raises(ValueError, match="C-contiguous"):
        transpose_bit_matrix(rows, out=np.empty((m, 15), np.uint8))


@pytest.mark.parametrize(
    "shape, pad", [((128, 8192), 16), ((128, 8192), 5), ((128, 13), 0), ((192, 9), 3), ((64, 40), 8), ((128, 1), 0)]
)
def test_compiled_transpose_equals_numpy_transpose(shape, pad):
    """The compiled 64x64-tile loop (aligned word view, or padded copy) against the numpy 8x8-tile oracle."""
    from pairwise.mpc import iknp
    from pairwise.mpc.garble import jit

    r, c = shape
    buf = np.frombuffer(os.urandom(r * (c + pad)), dtype=np.uint8).reshape(r, c + pad)
    rows = buf[:, :c]  # a strided view, as RowPRG returns
    assert iknp._compiled_transpose()
    got = transpose_bit_matrix(rows)
    with jit.disabled():
        assert not iknp._compiled_transpose()
        want = transpose_bit_matrix(rows)
    assert np.array_equal(got, want)
    assert np.array_equal(want, transpose_reference(np.ascontiguousarray(rows)))


@pytest.mark.parametrize("bad", [np.zeros((7, 2), np.uint8), np.zeros((8, 2), np.uint16), np.zeros(8, np.uint8)])
def test_transpose_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="multiple of 8"):
        transpose_bit_matrix(bad)


def test_row_prg_is_aes_ctr_continued_across_calls():
    seeds = random_blocks(KAPPA)
    prg = RowPRG(seeds)
    first, second = prg.next(48).copy(), prg.next(32).copy()
    stream = np.concatenate((first, second), axis=1)  # 80 bytes = 5 AES blocks per row
    for j in (0, 1, 77, 127):
        # independent reference: AES-ECB of the big-endian counter blocks 0..4 under key seeds[j]
        key = np.ascontiguousarray(seeds[j], dtype="<u8").tobytes()
        counters = b"".join(i.to_bytes(16, "big") for i in range(5))
        assert stream[j].tobytes() == aes_ecb_reference(key, counters)
    assert len({stream[j].tobytes() for j in range(KAPPA)}) == KAPPA


# =========================================================================== base OT


# Independent reference for edwards25519: pycryptodome's own point arithmetic (not libsodium, not OpenSSL).
_P25519 = 2**255 - 19


def _ed_point(enc: bytes):
    """pycryptodome point of an Ed25519 encoding (y, sign of x), by its own decoder."""
    from Crypto.PublicKey import ECC

    return ECC.import_key(b"\x30\x2a\x30\x05\x06\x03\x2b\x65\x70\x03\x21\x00" + enc).pointQ


def _ed_encode(point) -> bytes:
    x, y = (int(v) for v in point.xy)
    return (y | (x & 1) << 255).to_bytes(32, "little")


def _u_of(point) -> bytes:
    y = int(point.xy[1])
    return ((1 + y) * pow(1 - y, -1, _P25519) % _P25519).to_bytes(32, "little")


def _clamp(secret: bytes) -> int:
    k = bytearray(secret)
    k[0] &= 248
    k[31] &= 127
    k[31] |= 64
    return int.from_bytes(k, "little")


def test_point_encoding_and_u_coordinates_match_pycryptodome():
    import nacl.bindings as na
    from Crypto.PublicKey import ECC

    from pairwise.mpc.baseot import u_coordinates

    g = ECC._curves["ed25519"].G
    for k in (1, 2, 12345, 2**200 + 7):
        enc = na.crypto_scalarmult_ed25519_base_noclamp(k.to_bytes(32, "little"))
        assert enc == _ed_encode(g * k) and _ed_point(enc) == g * k
    pts = [g * (int.from_bytes(os.urandom(31), "little") + 1) for _ in range(33)]
    assert u_coordinates([int(p.xy[1]) for p in pts]) == [_u_of(p) for p in pts]
    assert u_coordinates([]) == []
    # u of a clamped multiple of G is the X25519 public key of the same secret (cryptography's X25519)
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    secret = os.urandom(32)
    pub = X25519PrivateKey.from_private_bytes(secret).public_key().public_bytes_raw()
    assert _u_of(g * _clamp(secret)) == pub == u_coordinates([int((g * _clamp(secret)).xy[1])])[0]


def test_x25519_scalar_is_a_clamped_plus_minus_b():
    from pairwise.mpc.baseot import _L, _x25519_scalar

    for b in [1, 2, 7, _L - 1, _L // 2, _L // 2 + 1] + [
        int.from_bytes(os.urandom(32), "little") % (_L - 1) + 1 for _ in range(200)
    ]:
        s = int.from_bytes(_x25519_scalar(b), "little")
        assert s & 7 == 0 and s >> 254 == 1  # X25519's clamping leaves it unchanged
        assert s % _L in (b, _L - b)


def test_small_order_list_is_exactly_the_torsion_points():
    """The 5 y values refused as small order: every point with such a y has order dividing 8 (pycryptodome)."""
    from pairwise.mpc.baseot import _SMALL_ORDER_Y, check_point

    for y in _SMALL_ORDER_Y:
        for sign in (0, 1):
            enc = (y | sign << 255).to_bytes(32, "little")
            with pytest.raises(ProtocolError, match="small order"):
                check_point(enc)
            try:
                point = _ed_point(enc)
            except ValueError:  # x = 0 with the sign bit set has no point
                continue
            assert (point * 8).is_point_at_infinity() or (point * 8).xy == (0, 1)


def test_check_point_rejects_malformed_encodings():
    from pairwise.mpc.baseot import check_point

    with pytest.raises(ProtocolError, match="expected 32 bytes"):
        check_point(b"\x05" * 31)
    with pytest.raises(ProtocolError, match="non-canonical"):
        check_point((_P25519 + 2).to_bytes(32, "little"))
    assert check_point((9).to_bytes(32, "little")) == 9


def test_kdf_matches_hashlib_and_binds_session_and_index():
    a, b, p = os.urandom(32), os.urandom(32), os.urandom(32)
    ref = hashlib.sha256(
        b"pairwise/co-ot/v3\x00" + struct.pack("!H", 3) + b"sid" + struct.pack("!Q", 7) + a + b + p
    ).digest()[:16]
    assert derive_key(b"sid", 7, a, b, p) == ref
    assert derive_key(b"sie", 7, a, b, p) != ref
    assert derive_key(b"sid", 8, a, b, p) != ref
    assert derive_key(b"sid", 7, b, a, p) != ref


@pytest.mark.parametrize("n", [1, 5, 33, 128])  # 33: a full frame of points and one more
def test_base_random_ot(n):
    choices = np.frombuffer(os.urandom(n), dtype=np.uint8) & 1
    (k0, k1), k = ok(
        *run_pair(
            lambda ch: BaseOTSender(ch, "base-test").send_random(n),
            lambda ch: BaseOTReceiver(ch, "base-test").recv_random(choices),
        )
    )
    c = choices.astype(bool)
    assert k.shape == k0.shape == k1.shape == (n, 2) and k.dtype == np.uint64
    assert np.array_equal(k, np.where(c[:, None], k1, k0))
    assert not np.any(np.all(k == np.where(c[:, None], k0, k1), axis=1))  # never the other key
    assert len(set(block_ints(k0)) | set(block_ints(k1))) == 2 * n  # all keys distinct


def test_base_ot_keys_match_pycryptodome_reference(monkeypatch):
    """The keys (libsodium and OpenSSL) recomputed from the recorded secrets with pycryptodome's arithmetic."""
    from Crypto.PublicKey import ECC

    import pairwise.mpc.baseot as B

    drawn: dict[str, list] = {}
    real_bytes, real_below = B.secrets.token_bytes, B.secrets.randbelow

    class Recording:
        @staticmethod
        def token_bytes(n):
            v = real_bytes(n)
            drawn.setdefault("a", []).append(v)
            return v

        @staticmethod
        def randbelow(n):
            v = real_below(n)
            drawn.setdefault("b", []).append(v + 1)
            return v

    monkeypatch.setattr(B, "secrets", Recording)
    n = 6
    choices = np.array([0, 1, 1, 0, 1, 0], dtype=np.uint8)
    (k0, k1), k = ok(
        *run_pair(
            lambda ch: BaseOTSender(ch, "ref").send_random(n),
            lambda ch: BaseOTReceiver(ch, "ref").recv_random(choices),
        )
    )
    g = ECC._curves["ed25519"].G
    (secret,), bs = drawn["a"], drawn["b"]
    a = _clamp(secret)
    big_a = g * a
    a_enc = _ed_encode(big_a)
    assert len(bs) == n
    for j, (b, c) in enumerate(zip(bs, choices)):
        big_b = g * b + big_a if c else g * b
        b_enc = _ed_encode(big_b)
        want0 = derive_key(b"ref", j, a_enc, b_enc, _u_of(big_b * a))
        want1 = derive_key(b"ref", j, a_enc, b_enc, _u_of((big_b + (-big_a)) * a))
        assert k0[j].astype("<u8").tobytes() == want0 and k1[j].astype("<u8").tobytes() == want1
        mine = derive_key(b"ref", j, a_enc, b_enc, _u_of(big_a * b))
        assert mine == (want1 if c else want0)
    assert np.array_equal(k, np.where(choices[:, None].astype(bool), k1, k0))


def test_base_chosen_ot_and_index_advance():
    n = 20
    m0, m1 = random_blocks(n), random_blocks(n)
    c1 = np.frombuffer(os.urandom(n), dtype=np.uint8) & 1
    c2 = 1 - c1

    def sender(ch):
        s = BaseOTSender(ch, "chosen")
        s.send(m0, m1)
        s.send(m0, m1)
        return s.index

    def receiver(ch):
        r = BaseOTReceiver(ch, "chosen")
        return r.recv(c1), r.recv(c2), r.index

    idx, (g1, g2, ridx) = ok(*run_pair(sender, receiver))
    assert idx == ridx == 2 * n
    assert np.array_equal(g1, np.where(c1[:, None].astype(bool), m1, m0))
    assert np.array_equal(g2, np.where(c2[:, None].astype(bool), m1, m0))


def test_base_ot_desync_detected():
    def sender(ch):
        s = BaseOTSender(ch, "desync")
        s.index = 5  # as if an earlier call happened on this side only
        return s.send_random(4)

    rs, rr = run_pair(sender, lambda ch: BaseOTReceiver(ch, "desync").recv_random([0, 1, 0, 1]), timeout=3)
    assert isinstance(rr, ProtocolError) and "desynchronised" in str(rr)


def _torsion_encoding() -> bytes:
    """An encoding of a point of order 8 (libsodium's blacklist)."""
    return (2707385501144840649318225287225658788936804267575313519463743609750303402022).to_bytes(32, "little")


def _off_curve_encoding() -> bytes:
    """y = 2: no x with (x, 2) on edwards25519."""
    return (2).to_bytes(32, "little")


def _mixed_order_encoding() -> bytes:
    """y = 3: on the curve, not in the prime-order subgroup."""
    return (3).to_bytes(32, "little")


@pytest.mark.parametrize(
    "bad, word",
    [
        (b"\x00" * 32, "small order"),
        ((1).to_bytes(32, "little"), "small order"),  # the identity
        (_torsion_encoding(), "small order"),
        (_off_curve_encoding(), "prime-order group"),
        (_mixed_order_encoding(), "prime-order group"),
        ((_P25519 + 3).to_bytes(32, "little"), "non-canonical"),
    ],
)
def test_base_ot_receiver_rejects_invalid_sender_point(bad, word):
    def bad_sender(ch):
        ch.send(struct.pack("!QI", 0, 3) + bad)
        return None

    _, rr = run_pair(bad_sender, lambda ch: BaseOTReceiver(ch, "s").recv_random([1, 0, 1]), timeout=3)
    assert isinstance(rr, ProtocolError) and word in str(rr), rr


@pytest.mark.parametrize(
    "bad, word",
    [
        (b"\x00" * 32, "small order"),
        ((_P25519 - 1).to_bytes(32, "little"), "small order"),  # order 2
        (_torsion_encoding(), "small order"),
        (_off_curve_encoding(), "not on the curve"),
        ((_P25519 + 3).to_bytes(32, "little"), "non-canonical"),
    ],
)
def test_base_ot_sender_rejects_invalid_receiver_points(bad, word):
    import nacl.bindings as na

    good = na.crypto_scalarmult_ed25519_base_noclamp((5).to_bytes(32, "little"))

    def bad_receiver(ch):
        ch.recv()
        ch.send(good + bad)  # the second point is bad
        return None

    rs, _ = run_pair(lambda ch: BaseOTSender(ch, "s").send_random(2), bad_receiver, timeout=3)
    assert isinstance(rs, ProtocolError) and "base OT 1" in str(rs) and word in str(rs), rs

    def short_receiver(ch):
        ch.recv()
        ch.send(b"\x01" * 100)

    rs, _ = run_pair(lambda ch: BaseOTSender(ch, "s").send_random(2), short_receiver, timeout=3)
    assert isinstance(rs, (ProtocolError, ChannelError)) and "64 bytes" in str(rs)


def test_base_ot_sender_accepts_a_torsion_component_without_effect():
    """B + T (T of order 8) gives the sender the same shared point as B: its scalar is a multiple of 8."""
    from Crypto.PublicKey import ECC

    from pairwise.mpc.baseot import _L

    g = ECC._curves["ed25519"].G
    t = _ed_point(_torsion_encoding())
    b = int.from_bytes(os.urandom(32), "little") % (_L - 1) + 1
    res = {}

    def receiver(ch):
        raw = ch.recv()
        a_enc = bytes(raw[-32:])
        encs = [_ed_encode(g * b), _ed_encode(g * b + t)]
        ch.send(b"".join(encs))
        shared = _u_of(_ed_point(a_enc) * b)  # what an honest receiver with choice 0 derives
        res["want"] = [derive_key(b"t", j, a_enc, e, shared) for j, e in enumerate(encs)]
        return None

    (k0, _), _ = ok(*run_pair(lambda ch: BaseOTSender(ch, "t").send_random(2), receiver, timeout=10))
    assert [k0[j].astype("<u8").tobytes() for j in range(2)] == res["want"]


def test_base_ot_sender_refuses_b_equal_to_a():
    def receiver(ch):
        raw = ch.recv()
        ch.send(bytes(raw[-32:]))  # B = A: B - A is the identity
        return None

    rs, _ = run_pair(lambda ch: BaseOTSender(ch, "s").send_random(1), receiver, timeout=3)
    assert isinstance(rs, ProtocolError) and "B - A has small order" in str(rs), rs


def test_base_ot_validates_arguments():
    a, _ = MemoryChannel.pair()
    with pytest.raises(ValueError, match="0/1"):
        BaseOTReceiver(a, "s").recv_random([0, 2])
    with pytest.raises(ValueError, match="expected 3"):
        BaseOTSender(a, "s").send(np.zeros((3, 2), np.uint64), np.zeros((4, 2), np.uint64))
    with pytest.raises(ValueError, match="session id"):
        BaseOTSender(a, "")


# =========================================================================== IKNP correlated OT


def cot_pair(
    fs,
    fr,
    *,
    delta=None,
    sid_s="iknp-test",
    sid_r="iknp-test",
    batch_s=1 << 16,
    batch_r=1 << 16,
    timeout=60.0,
    wrap_receiver=False,
):
    """Set up a COTSender/COTReceiver pair, run fs(sender) and fr(receiver); return results (+ receiver channel)."""
    delta = new_delta() if delta is None else delta
    holder = {}

    def s_side(ch):
        s = COTSender(ch, delta, sid_s, batch_size=batch_s)
        s.setup()
        return fs(s)

    def r_side(ch):
        if wrap_receiver:
            ch = holder["transcript"] = TranscriptChannel(ch)
        r = COTReceiver(ch, sid_r, batch_size=batch_r)
        r.setup()
        return fr(r)

    rs, rr = run_pair(s_side, r_side, timeout=timeout)
    return delta, rs, rr, holder.get("transcript")


def test_100k_random_cots_and_correlation_is_delta():
    n = 100_000
    delta, q, (r, t), _ = cot_pair(lambda s: s.send_random(n), lambda rc: rc.recv_random(n))
    ok(q, r)
    assert q.shape == t.shape == (n, 2) and r.shape == (n,) and r.dtype == np.bool_
    # the defining relation, checked on all 10^5 COTs
    assert np.array_equal(t, q ^ (r[:, None].astype(np.uint64) * delta))
    # the correlation is exactly Delta where r = 1 and zero where r = 0
    diff = q ^ t
    assert np.all(diff[r] == delta) and np.all(diff[~r] == 0)
    # r is uniform: two-sided binomial test at ALPHA
    assert stats.binomtest(int(r.sum()), n, 0.5).pvalue > ALPHA
    # q looks uniform bit by bit (Bonferroni over 128 positions) and has no repeats
    bits = np.unpackbits(q.view(np.uint8), axis=1, bitorder="little")
    ones = bits.sum(axis=0)
    assert min(stats.binomtest(int(k), n, 0.5).pvalue for k in ones) > ALPHA / 128
    assert len(np.unique(q, axis=0)) == n


def test_cot_batches_across_call_boundaries():
    sizes = [0, 1, 127, 129, 1000, 3000, 64]

    def fs(s):
        qs = [s.send_random(k) for k in sizes]
        return qs, s.index, s.generated, s.available

    def fr(rc):
        out = [rc.recv_random(k) for k in sizes]
        return out, rc.index, rc.generated, rc.available

    delta, (qs, si, sg, sa), (rts, ri, rg, ra), _ = cot_pair(fs, fr, batch_s=1024, batch_r=1024)
    total = sum(sizes)
    assert si == ri == total
    assert sg == rg == 1024 * -(-total // 1024) and sa == ra == sg - total
    for q, (r, t), k in zip(qs, rts, sizes):
        assert q.shape == (k, 2)
        assert np.array_equal(t, q ^ (r[:, None].astype(np.uint64) * delta))
    # successive calls hand out fresh COTs (no reuse across the batch boundary)
    all_q = np.concatenate(qs)
    assert len(np.unique(all_q, axis=0)) == total


def test_cots_into_caller_arrays_are_the_same_stream():
    """out= writes the COTs into caller storage: from the pool, across batches and into a partial batch,
    interleaved with plain calls; the correlation holds, nothing outside out is touched, no COT repeats."""
    sizes = [100, 2500, 50, 1024, 7]  # batch 1024: pool, several batches + a partial one, pool, ...

    def fs(s):
        qs = []
        for i, k in enumerate(sizes):
            if i % 2 == 0:
                buf = np.full((k + 2, 2), 7, np.uint64)
                q = s.send_random(k, out=buf[1 : k + 1])
                assert np.shares_memory(q, buf)
                assert (buf[0] == 7).all() and (buf[-1] == 7).all()
                qs.append(buf[1 : k + 1].copy())
            else:
                qs.append(s.send_random(k).copy())
        return qs, s.index

    def fr(rc):
        rts = []
        for i, k in enumerate(sizes):
            if i % 2 == 0:
                buf = np.full((k + 2, 2), 7, np.uint64)
                r, t = rc.recv_random(k, out=buf[1 : k + 1])
                assert np.shares_memory(t, buf) and (buf[0] == 7).all() and (buf[-1] == 7).all()
                rts.append((r.copy(), buf[1 : k + 1].copy()))
            else:
                r, t = rc.recv_random(k)
                rts.append((r.copy(), t.copy()))
        return rts, rc.index

    delta, (qs, si), (rts, ri), _ = cot_pair(fs, fr, batch_s=1024, batch_r=1024)
    assert si == ri == sum(sizes)
    for q, (r, t) in zip(qs, rts):
        assert np.array_equal(t, q ^ (r[:, None].astype(np.uint64) * delta))
    all_q = np.concatenate(qs)
    assert len(np.unique(all_q, axis=0)) == all_q.shape[0]


def test_cot_out_must_fit():
    def fs(s):
        with pytest.raises(ValueError, match="out must hold"):
            s.send_random(10, out=np.empty((9, 2), np.uint64))
        with pytest.raises(ValueError, match="out must hold"):
            s.send_random(10, out=np.empty((10, 2), np.uint64)[:, ::-1])
        return s.send_random(3)

    def fr(rc):
        return rc.recv_random(3)

    delta, q, (r, t), _ = cot_pair(fs, fr, batch_s=1024, batch_r=1024)
    assert np.array_equal(t, q ^ (r[:, None].astype(np.uint64) * delta))


def test_labels_derandomization_one_message():
    n = 1000
    x = np.frombuffer(os.urandom(n), dtype=np.uint8) & 1

    def fs(s):
        s.precompute(n)
        before = (s.channel.messages_received, s.channel.bytes_received)
        zero = s.send_labels(n)
        after = (s.channel.messages_received, s.channel.bytes_received)
        return zero, before, after

    def fr(rc):
        rc.precompute(n)
        before = (rc.channel.messages_sent, rc.channel.bytes_sent)
        active = rc.recv_labels(x)
        after = (rc.channel.messages_sent, rc.channel.bytes_sent)
        return active, before, after

    delta, (zero, sb, sa), (active, rb, ra), _ = cot_pair(fs, fr)
    ok(zero, active)
    # evaluator holds the label of its bit: zero xor x*Delta
    assert np.array_equal(active, zero ^ (x[:, None].astype(np.uint64) * delta))
    assert np.all((zero ^ active)[x == 0] == 0)
    # exactly one message of ceil(n/8) bytes (+4-byte frame prefix) from evaluator to garbler
    assert ra[0] - rb[0] == 1 and ra[1] - rb[1] == (n + 7) // 8 + 4
    assert sa[0] - sb[0] == 1 and sa[1] - sb[1] == (n + 7) // 8 + 4


def test_labels_then_random_share_one_stream():
    x = np.array([1, 0, 1, 1, 0], dtype=bool)

    def fs(s):
        return s.send_labels(5), s.send_random(7), s.send_labels(3)

    def fr(rc):
        return rc.recv_labels(x), rc.recv_random(7), rc.recv_labels(x[:3])

    delta, (z1, q, z2), (a1, (r, t), a2), _ = cot_pair(fs, fr, batch_s=128, batch_r=128)
    d = delta
    assert np.array_equal(a1, z1 ^ (x[:, None].astype(np.uint64) * d))
    assert np.array_equal(t, q ^ (r[:, None].astype(np.uint64) * d))
    assert np.array_equal(a2, z2 ^ (x[:3, None].astype(np.uint64) * d))


@pytest.mark.parametrize("blocks", [1, 3])
def test_chosen_ot_receiver_gets_chosen_and_cannot_open_other(blocks):
    n = 500
    shape = (n, 2) if blocks == 1 else (n, blocks, 2)
    m0 = random_blocks(*shape[:-1])
    m1 = random_blocks(*shape[:-1])
    b = (np.frombuffer(os.urandom(n), dtype=np.uint8) & 1).astype(bool)

    def fs(s):
        s.precompute(n)
        s.send_chosen(m0, m1)

    def fr(rc):
        rc.precompute(n)
        start = rc.index
        # white-box: the receiver's COT values t for the n COTs the chosen OT will consume
        t = rc._pool[0][1][rc._offset : rc._offset + n].copy()
        return rc.recv_chosen(b, blocks=blocks), start, t

    delta, rs, rr, tr = cot_pair(fs, fr, wrap_receiver=True)
    ok(rs, rr)
    got, start, t = rr
    sel = b.reshape((n,) + (1,) * (len(shape) - 1))
    assert got.shape == shape
    assert np.array_equal(got, np.where(sel, m1, m0))

    # Everything the receiver saw: the base-OT point A, then y0 || y1.  Neither an unchosen
    # message nor Delta occurs in it at any byte offset.
    seen = b"".join(tr.received)
    windows = {seen[i : i + 16] for i in range(len(seen) - 15)}
    unchosen = np.where(sel, m0, m1).reshape(n, blocks, 2)
    assert not any(u.tobytes() in windows for u in unchosen.reshape(-1, 2))
    assert delta.tobytes() not in windows

    # Independent recomputation of the pads with tccr_hash and the documented tweaks:
    # the receiver's own pad H(t) opens exactly the chosen message; the other message
    # needs H(t xor Delta), i.e. Delta, which the receiver never receives.
    y = np.frombuffer(tr.received[-1], dtype=np.uint64).reshape(2, n, blocks, 2)
    y_mine = np.where(b[:, None, None], y[1], y[0])
    y_other = np.where(b[:, None, None], y[0], y[1])
    tw = chosen_ot_tweaks("iknp-test", start, n, blocks)
    assert np.all(tw[..., 1] >> np.uint64(63) == 1)  # top bit of the tweak's high word is set
    pad_own = tccr_hash(t[:, None, :], tw)
    assert np.array_equal(y_mine ^ pad_own, got.reshape(n, blocks, 2))
    assert not np.any(np.all((y_other ^ pad_own) == unchosen, axis=-1))
    assert np.array_equal(y_other ^ tccr_hash((t ^ delta)[:, None, :], tw), unchosen)


def test_chosen_ot_tweaks_unique_and_session_dependent():
    a = chosen_ot_tweaks("s1", 10, 100, 4)
    b = chosen_ot_tweaks("s1", 110, 100, 4)
    c = chosen_ot_tweaks("s2", 10, 100, 4)
    both = np.concatenate((a.reshape(-1, 2), b.reshape(-1, 2)))
    assert len(np.unique(both, axis=0)) == 800
    assert not np.array_equal(a, c)
    assert np.array_equal(a[:, :, 0], np.broadcast_to(np.arange(10, 110, dtype=np.uint64)[:, None], (100, 4)))


def test_zero_length_requests():
    empty = np.empty((0, 2), dtype=np.uint64)

    def fs(s):
        return s.send_random(0), s.send_labels(0), s.send_chosen(empty, empty), s.send_random(3)

    def fr(rc):
        return rc.recv_random(0), rc.recv_labels([]), rc.recv_chosen([]), rc.recv_random(3)

    delta, (q0, z0, _, q), ((r0, t0), a0, c0, (r, t)), _ = cot_pair(fs, fr, batch_s=128, batch_r=128)
    assert q0.shape == z0.shape == t0.shape == a0.shape == c0.shape == (0, 2) and r0.shape == (0,)
    assert np.array_equal(t, q ^ (r[:, None].astype(np.uint64) * delta))


def test_session_id_is_bound_into_the_cots():
    n = 2048
    delta, q, (r, t), _ = cot_pair(
        lambda s: s.send_random(n), lambda rc: rc.recv_random(n), sid_s="session-A", sid_r="session-B"
    )
    ok(q, r)
    correct = np.all(t == q ^ (r[:, None].astype(np.uint64) * delta), axis=1)
    assert correct.mean() < 0.01  # different base-OT keys: no correlation at all


def test_batch_size_mismatch_detected():
    _, rs, rr, _ = cot_pair(
        lambda s: s.send_random(10), lambda rc: rc.recv_random(10), batch_s=1024, batch_r=2048, timeout=5
    )
    assert isinstance(rs, ProtocolError) and "COT batch mismatch" in str(rs)


def test_delta_validation():
    a, _ = MemoryChannel.pair()
    d = new_delta()
    even = d.copy()
    even[0] &= ~np.uint64(1)
    with pytest.raises(ValueError, match="lowest bit must be 1"):
        COTSender(a, even, "s")
    with pytest.raises(ValueError, match=r"\(2,\) uint64"):
        COTSender(a, d.astype(np.int64), "s")
    with pytest.raises(ValueError, match=r"\(2,\) uint64"):
        check_delta(random_blocks(2))
    assert np.array_equal(check_delta(d), d)


def test_usage_errors():
    a, _ = MemoryChannel.pair()
    s = COTSender(a, new_delta(), "s")
    with pytest.raises(RuntimeError, match=r"setup\(\) must run"):
        s.send_random(1)
    with pytest.raises(ValueError, match="batch_size"):
        COTReceiver(a, "s", batch_size=1000)
    with pytest.raises(ValueError, match="batch_size"):
        COTReceiver(a, "s", batch_size=1 << 21)
    r = COTReceiver(a, "s")
    r._ready = True  # only to reach argument validation without a peer
    with pytest.raises(ValueError, match="0/1"):
        r.recv_labels([0, 3])
    with pytest.raises(ValueError, match="non-negative"):
        r.recv_random(-1)
    with pytest.raises(ValueError, match="blocks per message"):
        r.recv_chosen([0, 1], blocks=0)


def test_setup_is_idempotent_and_base_traffic():
    def fs(s):
        before = s.channel.bytes_received
        s.setup()  # second call: no traffic
        return s.channel.bytes_received - before, s.channel.bytes_received

    def fr(rc):
        rc.setup()
        return rc.channel.bytes_received

    _, (extra, s_recv), r_recv, _ = cot_pair(fs, fr)
    assert extra == 0
    # base OTs with reversed roles: the COT sender (base-OT receiver) got (index, n, A) = 12 + 32
    # bytes; the COT receiver (base-OT sender) got 128 points of 32 bytes in frames of
    # POINTS_PER_FRAME; +4 per frame prefix
    from pairwise.mpc.baseot import POINTS_PER_FRAME

    assert s_recv == 12 + 32 + 4 and r_recv == 128 * 32 + 4 * -(-128 // POINTS_PER_FRAME)


# =========================================================================== COTs from base OTs (mpc.basecot)


@pytest.mark.parametrize("sizes", [[1], [79], [5, 200, 3]])
def test_base_cots_are_delta_correlated_across_batches(sizes):
    from pairwise.mpc.basecot import BaseCOTReceiver, BaseCOTSender

    delta = new_delta()

    def sender(ch):
        s = BaseCOTSender(ch, delta, "bcot")
        s.setup()
        out = []
        for n in sizes:
            s.batch_size = n
            out.append(s.send_random(n))
        return out

    def receiver(ch):
        r = BaseCOTReceiver(ch, "bcot")
        r.setup()
        out = []
        for n in sizes:
            r.batch_size = n
            out.append(r.recv_random(n))
        return out

    qs, rts = ok(*run_pair(sender, receiver))
    q = np.concatenate(qs)
    r = np.concatenate([x for x, _ in rts])
    t = np.concatenate([y for _, y in rts])
    assert np.array_equal(t, q ^ (r[:, None].astype(np.uint64) * delta))
    assert len(set(block_ints(q))) == q.shape[0]  # fresh keys for every COT
    if r.size >= 200:  # the choice bits are uniform: P(|ones - n/2| > 4.9 sigma) < ALPHA
        assert abs(r.sum() - r.size / 2) < 4.9 * np.sqrt(r.size) / 2
