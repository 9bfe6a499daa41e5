"""Verifiable DPF (fss.vdpf): evaluation, bytes, golden vectors, and that malformed pairs are caught.

References: plain Python ints (the point function beta [x == alpha] mod 2^l)
and the committed golden vectors in tests/vectors/vdpf_v2.json, which are
both parsed (committed bytes -> outputs, tags) and regenerated from a fixed
seed by :func:`simulated_vdpf_vectors` (a seeded generator, for known answers
only; real keys use os.urandom).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairwise.fss import (
    FORMAT_VERSION,
    VDPF_FORMAT_VERSION,
    DPFKey,
    FSSParameterError,
    KeyFormatError,
    VDPFKey,
    VDPFKeyBatch,
    VDPFVerifier,
    dpf_gen,
    dpf_key_bytes,
    reconstruct,
    vdpf_gen,
    vdpf_gen_batch,
    vdpf_key_bytes,
    vdpf_verify_pair,
)
from pairwise.fss.keys import CHECK_BYTES, KIND_VDPF, key_layout
from pairwise.fss.vdpf import _vdpf_gen_from_roots, check_hash

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "vdpf_v2.json"
FIXED_VERIFIER_KEY = bytes(range(32))  # known answers only; servers draw theirs from os.urandom


def point(alpha: int, beta: int, n: int, l: int) -> np.ndarray:
    out = np.zeros(1 << n, dtype=np.uint64)
    out[alpha] = beta % (1 << l)
    return out


# --------------------------------------------------------------------------- evaluation
@pytest.mark.parametrize("n,l", [(1, 1), (1, 64), (5, 7), (8, 32), (10, 64), (12, 20)])
def test_full_domain_and_pointwise_evaluation_give_the_point_function(n, l):
    rng = np.random.default_rng(n * 100 + l)
    K = 7
    alphas = rng.integers(0, 1 << n, K)
    betas = [int(v) for v in rng.integers(0, 1 << min(l, 63), K)]
    betas[0] = (1 << l) - 1
    k0, k1 = vdpf_gen_batch(alphas, np.array(betas, dtype=object), n, l)
    full = reconstruct(k0.full_domain(), k1.full_domain(), l)
    for k in range(K):
        assert np.array_equal(full[k], point(int(alphas[k]), betas[k], n, l))
    xs = np.arange(1 << n)
    for k in (0, K - 1):
        one0, one1 = k0[k], k1[k]
        assert np.array_equal(reconstruct(one0.eval_many(xs), one1.eval_many(xs), l), full[k])
        assert reconstruct(one0.eval(int(alphas[k])), one1.eval(int(alphas[k])), l) == betas[k] % (1 << l)
    # batched evaluation at one point equals one key at a time, and the histogram is the sum
    t = int(alphas[2])
    assert np.array_equal(k0.eval(t), np.array([k0[k].eval(t) for k in range(K)], dtype=np.uint64))
    hist = reconstruct(k0.full_domain_sum(), k1.full_domain_sum(), l)
    ref = [sum(int(v) for v in full[:, x]) % (1 << l) for x in range(1 << n)]  # Python ints
    assert [int(v) for v in hist] == ref


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 9), l=st.integers(1, 64), data=st.data())
def test_honest_pairs_are_accepted_with_their_payload(n, l, data):
    K = data.draw(st.integers(1, 5))
    alphas = data.draw(st.lists(st.integers(0, (1 << n) - 1), min_size=K, max_size=K))
    betas = data.draw(st.lists(st.integers(-(1 << l) + 1, (1 << l) - 1), min_size=K, max_size=K))
    k0, k1 = vdpf_gen_batch(alphas, betas, n, l)
    ok, beta = vdpf_verify_pair(k0, k1)
    assert ok.all()
    assert [int(b) for b in beta] == [b % (1 << l) for b in betas]


def test_tags_are_equal_exactly_for_equal_check_vectors():
    k0, k1 = vdpf_gen_batch([3, 3, 9], [1, 1, 1], 4, 16)
    v = VDPFVerifier(bytes(32))
    t0, _ = k0.verify_tags(v)
    t1, _ = k1.verify_tags(v)
    assert (t0 == t1).all()
    assert not (t0[0] == t0[1]).all()  # two clients with the same point have unrelated tags
    other, _ = k0.verify_tags(VDPFVerifier(bytes(31) + b"\x01"))
    assert not (other == t0).all(axis=1).any()  # another verifier key, other tags
    assert "secret" in repr(v) and "00" not in repr(v)


def test_check_hash_blocks_use_four_permutations_and_bind_the_leaf():
    s_lo = np.array([0x1234 << 1], dtype=np.uint64)
    s_hi = np.array([0xABCDEF], dtype=np.uint64)
    h0 = check_hash(np.array([0], dtype=np.uint64), s_lo, s_hi)[0]
    h1 = check_hash(np.array([1], dtype=np.uint64), s_lo, s_hi)[0]
    assert h0.shape == (4, 2)
    assert len({tuple(b) for b in h0}) == 4  # independent permutations: four different blocks
    assert not (h0 == h1).any(axis=1).any()  # another leaf, every block changes


# --------------------------------------------------------------------------- bytes
def test_key_bytes_version_size_and_round_trip():
    for n, l in [(1, 1), (6, 32), (20, 64)]:
        assert vdpf_key_bytes(n, l) == dpf_key_bytes(n, l) + CHECK_BYTES
    k0, k1 = vdpf_gen(5, 1, 6, 32)
    b0, b1 = k0.to_bytes(), k1.to_bytes()
    assert len(b0) == vdpf_key_bytes(6, 32) == 187
    assert b0[:5] == bytes([VDPF_FORMAT_VERSION, KIND_VDPF, 0, 6, 32]) and b1[2] == 1
    assert VDPFKey.from_bytes(b0) == k0 and VDPFKey.from_bytes(b0).to_bytes() == b0
    assert VDPFKeyBatch.from_bytes_list([b0]).to_bytes_list() == [b0]
    # DPF and VDPF readers refuse each other's keys by version and kind, with a clear message
    d0, _ = dpf_gen(5, 1, 6, 32)
    with pytest.raises(KeyFormatError, match="this is a DPF key, expected a VDPF key"):
        VDPFKey.from_bytes(d0.to_bytes())
    with pytest.raises(KeyFormatError, match="this is a VDPF key, expected a DPF key"):
        DPFKey.from_bytes(b0)
    with pytest.raises(
        KeyFormatError,
        match=rf"unsupported key format version {FORMAT_VERSION} \(this library "
        rf"reads version {VDPF_FORMAT_VERSION}\)",
    ):
        VDPFKey.from_bytes(bytes([FORMAT_VERSION]) + b0[1:])
    with pytest.raises(KeyFormatError, match="truncated: 186 bytes, expected 187"):
        VDPFKey.from_bytes(b0[:-1])
    with pytest.raises(KeyFormatError, match="1 trailing bytes"):
        VDPFKey.from_bytes(b0 + b"\x00")
    zero = b0[:-CHECK_BYTES] + bytes(CHECK_BYTES)
    with pytest.raises(KeyFormatError, match="check correction is all zero"):
        VDPFKey.from_bytes(zero)
    batch, kept, bad = VDPFKeyBatch.parse_valid([b0, zero, b0[:50], b0], n=6, l=32, party=0)
    assert kept == [0, 3] and sorted(bad) == [1, 2] and len(batch) == 2


def test_parameters_are_validated_before_anything_is_drawn():
    with pytest.raises(FSSParameterError, match="n must be <= 26"):
        vdpf_gen_batch([0], 1, 27, 8)
    with pytest.raises(FSSParameterError, match="alpha"):
        vdpf_gen(64, 1, 6, 8)
    with pytest.raises(FSSParameterError, match="beta"):
        vdpf_gen(1, 256, 6, 8)
    with pytest.raises(FSSParameterError, match="verifier key"):
        VDPFVerifier(b"short")
    k0, k1 = vdpf_gen_batch([1], 1, 4, 8)
    with pytest.raises(FSSParameterError, match="party 0's and party 1's"):
        vdpf_verify_pair(k1, k0)
    with pytest.raises(FSSParameterError, match="needs check corrections"):
        VDPFKeyBatch(0, 4, 8, k0.seeds, k0.scw, k0.tcw, k0.fcw)


# --------------------------------------------------------------------------- malicious pairs
N_BITS, L_BITS = 4, 16
LAYOUT = key_layout(KIND_VDPF, N_BITS, L_BITS)
# every correction word of a key: name -> byte range (shared by both halves of an honest pair)
FIELDS = {
    f"s_cw[{i + 1}]": range(LAYOUT.levels_offset + 16 * i, LAYOUT.levels_offset + 16 * (i + 1)) for i in range(N_BITS)
}
FIELDS["t_cw"] = range(LAYOUT.bits_offset, LAYOUT.bits_offset + LAYOUT.bits_bytes)
FIELDS["cw_out"] = range(LAYOUT.final_offset, LAYOUT.final_offset + LAYOUT.value_bytes)
FIELDS["cs"] = range(LAYOUT.check_offset, LAYOUT.check_offset + CHECK_BYTES)


def _accept(b0: bytes, b1: bytes, verifier: VDPFVerifier) -> tuple[bool, np.ndarray | None]:
    """(accepted, reconstructed outputs) of a pair of key bytes, as the two servers would see it."""
    try:
        k0 = VDPFKeyBatch.from_bytes_list([b0], n=N_BITS, l=L_BITS, party=0)
        k1 = VDPFKeyBatch.from_bytes_list([b1], n=N_BITS, l=L_BITS, party=1)
    except KeyFormatError:
        return False, None
    ok, _ = vdpf_verify_pair(k0, k1, verifier)
    return bool(ok[0]), reconstruct(k0.full_domain()[0], k1.full_domain()[0], L_BITS)


@pytest.mark.parametrize("field", list(FIELDS))
def test_every_bit_flip_of_every_correction_word_is_caught_or_stays_a_point_function(field):
    """Flip each bit of one correction word in both halves (what a malicious client controls).

    Seed, control-bit and check corrections: the pair is refused (format or
    check).  The output correction only changes beta, so the pair stays one
    point function, and the ECDF's weight check refuses it
    (tests/system/test_ecdf_validation_processes.py).
    """
    alpha, beta = 9, 1
    k0, k1 = vdpf_gen(alpha, beta, N_BITS, L_BITS)
    b0, b1 = k0.to_bytes(), k1.to_bytes()
    v = VDPFVerifier(bytes(range(1, 33)))
    assert _accept(b0, b1, v)[0]
    flips = 0
    for byte in FIELDS[field]:
        for bit in range(8):
            m0, m1 = bytearray(b0), bytearray(b1)
            m0[byte] ^= 1 << bit
            m1[byte] ^= 1 << bit
            ok, out = _accept(bytes(m0), bytes(m1), v)
            if field == "cw_out":
                # beta' = beta -/+ 2^bit: still zero off alpha (possibly zero at alpha too), never beta
                assert ok and np.count_nonzero(np.delete(out, alpha)) == 0 and out[alpha] != beta
            elif ok:
                pytest.fail(f"{field} byte {byte} bit {bit}: a flipped pair was accepted with outputs {out}")
            flips += 1
    assert flips == 8 * len(FIELDS[field])


def test_root_seed_flips_and_mixed_halves_are_refused():
    v = VDPFVerifier(bytes(range(32)))
    k0, k1 = vdpf_gen_batch([3, 3], [1, 1], N_BITS, L_BITS)
    a0, a1 = k0[0].to_bytes(), k1[0].to_bytes()
    c1 = k1[1].to_bytes()  # another client's half, same point and weight
    assert _accept(a0, a1, v)[0]
    assert not _accept(a0, c1, v)[0]
    for bit in range(128):  # every bit of party 1's root seed
        m = bytearray(a1)
        m[5 + bit // 8] ^= 1 << (bit % 8)
        ok, out = _accept(a0, bytes(m), v)
        assert not ok, (bit, out)


def test_a_hand_made_two_point_pair_is_refused():
    """Keep both children of alpha's parent alive at the last level: outputs at two leaves, refused."""
    roots = np.random.default_rng(7).integers(0, 2**64, (2, 1, 2), dtype=np.uint64)
    scw, tcw, fcw, ccw = _vdpf_gen_from_roots(np.array([6], np.uint64), np.array([1], np.uint64), N_BITS, L_BITS, roots)
    scw = scw.copy()
    scw[N_BITS - 1, 0, 0] ^= np.uint64(2)  # the lose child's seeds no longer meet (its control bits do)
    k0 = VDPFKeyBatch(0, N_BITS, L_BITS, roots[0], scw, tcw, fcw, ccw=ccw)
    k1 = VDPFKeyBatch(1, N_BITS, L_BITS, roots[1], scw, tcw, fcw, ccw=ccw)
    out = reconstruct(k0.full_domain()[0], k1.full_domain()[0], L_BITS)
    assert np.count_nonzero(out) == 2  # without the check this pair shares a two-point function
    ok, _ = vdpf_verify_pair(k0, k1)
    assert not ok[0]


# --------------------------------------------------------------------------- golden vectors
def simulated_vdpf_vectors(seed: int = 20261127) -> dict:
    """Known-answer vectors from a *seeded* generator (simulation only): keys, outputs, tags."""
    rng = np.random.default_rng(seed)
    cases = []
    for n, l, alpha, beta in [(1, 8, 1, 200), (4, 16, 9, 1), (6, 32, 0, 2**31 - 1), (8, 64, 255, 2**64 - 1)]:
        roots = rng.integers(0, 2**64, (2, 1, 2), dtype=np.uint64)
        scw, tcw, fcw, ccw = _vdpf_gen_from_roots(
            np.array([alpha], np.uint64), np.array([beta], np.uint64), n, l, roots
        )
        keys = [VDPFKeyBatch(b, n, l, roots[b], scw, tcw, fcw, ccw=ccw) for b in (0, 1)]
        v = VDPFVerifier(FIXED_VERIFIER_KEY)
        tags = [k.verify_tags(v)[0][0] for k in keys]
        outputs = [k.full_domain()[0] for k in keys]
        cases.append(
            {
                "n": n,
                "l": l,
                "alpha": alpha,
                "beta": str(beta),
                "key0": keys[0].to_bytes_list()[0].hex(),
                "key1": keys[1].to_bytes_list()[0].hex(),
                "outputs0": [str(int(v)) for v in outputs[0]],
                "outputs1": [str(int(v)) for v in outputs[1]],
                "tag": np.ascontiguousarray(tags[0], dtype="<u8").tobytes().hex(),
            }
        )
        assert (tags[0] == tags[1]).all()
    return {
        "format": "pairwise VDPF key, version 2 (fss/keys.py)",
        "seed": seed,
        "verifier_key": FIXED_VERIFIER_KEY.hex(),
        "cases": cases,
    }


def test_golden_vectors_parse_and_evaluate():
    vec = json.loads(VECTORS.read_text())
    v = VDPFVerifier(bytes.fromhex(vec["verifier_key"]))
    for case in vec["cases"]:
        n, l = case["n"], case["l"]
        k0 = VDPFKey.from_bytes(bytes.fromhex(case["key0"]), n=n, l=l, party=0)
        k1 = VDPFKey.from_bytes(bytes.fromhex(case["key1"]), n=n, l=l, party=1)
        y0, y1 = k0.full_domain(), k1.full_domain()
        assert [str(int(a)) for a in y0] == case["outputs0"] and [str(int(a)) for a in y1] == case["outputs1"]
        assert np.array_equal(reconstruct(y0, y1, l), point(case["alpha"], int(case["beta"]), n, l))
        for k in (k0, k1):
            tag = k.batch.verify_tags(v)[0][0]
            assert np.ascontiguousarray(tag, dtype="<u8").tobytes().hex() == case["tag"]


def test_golden_vectors_regenerate_from_their_seed():
    assert simulated_vdpf_vectors(json.loads(VECTORS.read_text())["seed"]) == json.loads(VECTORS.read_text())


@pytest.mark.parametrize("n", [1, 2, 7, 11])
def test_compiled_and_numpy_verification_agree(n):
    """The numba loops (fss._vdpf_kernels) give the numpy path's outputs and tags, chunk by chunk."""
    from pairwise.fss.vdpf import compiled_kernels

    assert compiled_kernels() is not None  # numba is a core dependency: the compiled path must load
    rng = np.random.default_rng(n)
    k0, k1 = vdpf_gen_batch(rng.integers(0, 1 << n, 37), rng.integers(0, 1 << 20, 37), n, 24)
    v = VDPFVerifier(bytes(range(7, 39)))
    for kb in (k0, k1):
        fast = list(kb.iter_verify(v, compiled=True, leaves_per_chunk=64))
        slow = list(kb.iter_verify(v, compiled=False, leaves_per_chunk=64))
        assert len(fast) == len(slow) > 1
        for a, b in zip(fast, slow):
            assert a.rows == b.rows and np.array_equal(a.outputs, b.outputs) and np.array_equal(a.tags, b.tags)
        assert np.array_equal(np.concatenate([e.outputs for e in fast]), kb.full_domain())
