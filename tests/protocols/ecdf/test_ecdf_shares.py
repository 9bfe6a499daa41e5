"""Client keys and server share evaluation of the ECDF service (protocols.ecdf_shares), in process.

Every scheme's server shares must add up (mod 2^l) to the weighted cumulative
count sum_i w_i [x_i <= t], checked against a plain numpy count; malformed
keys must reject exactly their client.
"""

from __future__ import annotations

import numpy as np
import pytest

from pairwise.protocols.ecdf.shares import (
    DCFShares,
    MShareShares,
    PointwiseShares,
    ShareParameterError,
    dcf_client_keys,
    grid_points,
    key_bytes,
    mshare_client_keys,
    pointwise_client_shares,
    quantize,
    reduce_mod,
    to_signed,
)

L_BITS = 32


def reference(x, w, pts):
    return np.array([int((w * (x <= t)).sum()) for t in pts], dtype=np.uint64)


@pytest.fixture
def data():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 128, 257)
    w = rng.integers(0, 4, 257)
    return x, w


def combine(parts, pts, rows=None):
    total = np.zeros(len(pts), dtype=np.uint64)
    for p in parts:
        total += p.cumulative_shares(pts, rows)
    return reduce_mod(total, L_BITS)


def test_dcf_shares_give_weighted_cumulative_counts(data):
    x, w = data
    keys = dcf_client_keys(x, w, domain_bits=7, output_bits=L_BITS)
    parts = [DCFShares.parse(keys[b], party=b, m=2, n=7, l=L_BITS)[0] for b in range(2)]
    pts = grid_points(7, 7)
    assert np.array_equal(combine(parts, pts), reference(x, w, pts))
    rows = np.arange(3, 257, 5)
    assert np.array_equal(combine(parts, pts, rows), reference(x[rows], w[rows], pts))
    coarse = grid_points(7, 3)  # 8 thresholds: 15, 31, ..., 127
    assert coarse.tolist() == [15, 31, 47, 63, 79, 95, 111, 127]
    assert np.array_equal(combine(parts, coarse), reference(x, w, coarse))
    assert len(keys[0][0]) == key_bytes("dcf", 7, L_BITS)


@pytest.mark.parametrize("m", [2, 3, 5])
def test_mshare_shares_give_weighted_cumulative_counts(data, m):
    x, w = data
    keys = mshare_client_keys(x, w, m=m, domain_bits=7, output_bits=L_BITS)
    parts = [MShareShares.parse(keys[j], party=j, m=m, n=7, l=L_BITS)[0] for j in range(m)]
    pts = grid_points(7, 7)
    assert np.array_equal(combine(parts, pts), reference(x, w, pts))
    rows = np.arange(0, 257, 3)
    assert np.array_equal(combine([p.take(rows) for p in parts], pts), reference(x[rows], w[rows], pts))
    # client i's vector key goes to server i mod m; the others hold 22-byte seed keys
    for i in (0, 1, 7):
        sizes = [len(keys[j][i]) for j in range(m)]
        assert sizes[i % m] == key_bytes("mshare", 7, L_BITS, vector=True)
        assert sorted(sizes)[:-1] == [key_bytes("mshare", 7, L_BITS)] * (m - 1)
    # concatenating parts (several uploads) keeps the rows aligned across servers
    joined = [MShareShares.concat([p.take(np.arange(0, 100)), p.take(np.arange(100, 257))]) for p in parts]
    assert np.array_equal(combine(joined, pts), reference(x, w, pts))


def test_any_m_minus_1_mshare_keys_look_uniform():
    """With all m-1 keys of a client but one, the hidden value is masked: the partial sum is far from e_x."""
    x = np.array([5] * 200)
    m = 3
    keys = mshare_client_keys(x, None, m=m, domain_bits=4, output_bits=L_BITS)
    parts = [MShareShares.parse(keys[j], party=j, m=m, n=4, l=L_BITS)[0] for j in range(m)]
    partial = reduce_mod(parts[0].histogram_shares(np.array([2])) + parts[1].histogram_shares(np.array([2])), L_BITS)
    # client 2's vector is at server 2: servers 0, 1 hold only seeds -> pseudorandom words
    assert (partial > 1000).sum() >= 14


def test_pointwise_shares(data):
    x, w = data
    pts = grid_points(7, 7)[[0, 10, 64, 127]]
    shares = pointwise_client_shares(x, w, pts, m=3, domain_bits=7, output_bits=L_BITS)
    parts = [PointwiseShares(pts, s, L_BITS) for s in shares]
    assert np.array_equal(combine(parts, pts), reference(x, w, pts))
    with pytest.raises(ShareParameterError, match="not part of this pointwise round"):
        parts[0].cumulative_shares(np.array([3], dtype=np.uint64))


def test_malformed_dcf_key_rejects_only_its_client(data):
    x, w = data
    keys = dcf_client_keys(x, w, domain_bits=7, output_bits=L_BITS)
    bad = list(keys[0])
    bad[4] = bad[4][:-1]
    bad[9] = bytes([bad[9][0] ^ 0xFF]) + bad[9][1:]
    bad[12] = keys[1][12]  # the other server's key: wrong party
    sh, kept, rejected = DCFShares.parse(bad, party=0, m=2, n=7, l=L_BITS)
    assert sorted(rejected) == [4, 9, 12]
    assert "truncated" in rejected[4]
    assert len(sh) == len(kept) == 257 - 3


def test_malformed_mshare_keys_reject_only_their_clients(data):
    x, w = data
    m = 3
    keys = mshare_client_keys(x, w, m=m, domain_bits=7, output_bits=16)
    bad = list(keys[0])
    bad[3] = bad[3][:-1]  # client 3's vector key (3 mod 3 = 0) truncated
    bad[1] = b"\x02" + bad[1][1:]  # version 2
    bad[2] = bad[2][:2] + b"\x01" + bad[2][3:]  # party 1 at server 0
    bad[6] = bad[6] + b"\x00"  # a vector key one byte too long
    bad[7] = b"\x01"  # shorter than the header
    sh, kept, rejected = MShareShares.parse(bad, party=0, m=m, n=7, l=16)
    assert sorted(rejected) == [1, 2, 3, 6, 7]
    assert "truncated" in rejected[3] and "version" in rejected[1] and "party" in rejected[2]
    assert "too long" in rejected[6]
    assert len(sh) == 257 - 5


def test_non_canonical_mshare_word_rejected():
    keys = mshare_client_keys(np.array([1, 2, 3]), None, m=2, domain_bits=3, output_bits=12)
    blobs = list(keys[0])  # client 0 and 2 vectors at server 0
    raw = bytearray(blobs[0])
    raw[6 + 1] |= 0xF0  # word 0, high byte: bits 12..15 set
    blobs[0] = bytes(raw)
    sh, kept, rejected = MShareShares.parse(blobs, party=0, m=2, n=3, l=12)
    assert list(rejected) == [0] and "non-canonical" in rejected[0]
    assert kept == [1, 2] and len(sh) == 2 and sh.vectors.shape == (1, 8)


def test_quantize_grid_and_signed_lift():
    v = np.array([-1.0, 0.0, 0.24, 0.25, 0.999, 1.0, 7.0])
    assert quantize(v, 0.0, 1.0, 2).tolist() == [0, 0, 0, 1, 3, 3, 3]
    with pytest.raises(ShareParameterError, match="finite lo < hi"):
        quantize(v, 1.0, 1.0, 2)
    with pytest.raises(ShareParameterError, match="finite"):
        quantize(np.array([np.nan]), 0.0, 1.0, 2)
    assert to_signed(np.array([0, 1, (1 << 32) - 1, 1 << 31], dtype=np.uint64), 32).tolist() == [0, 1, -1, -(1 << 31)]
    with pytest.raises(ShareParameterError, match="domain"):
        dcf_client_keys(np.array([8]), None, domain_bits=3, output_bits=32)
    with pytest.raises(ShareParameterError, match="dcf scheme is two-party"):
        DCFShares.parse([], party=0, m=3, n=3, l=32)


@pytest.mark.parametrize("n,K", [(1, 7), (5, 300), (9, 150)])
def test_full_domain_dcf_sum_equals_pointwise_evaluation(n, K):
    """dcf_full_domain_sum (breadth-first) equals fss's own per-point evaluation, for both parties."""
    from pairwise.fss import dcf_gen_batch
    from pairwise.protocols.ecdf.shares import dcf_full_domain_sum

    rng = np.random.default_rng(n)
    x = rng.integers(0, 1 << n, K).astype(np.uint64)
    w = rng.integers(0, 1 << 20, K)
    k0, k1 = dcf_gen_batch(x, w, n, 40, comparison="ge")
    for kb in (k0, k1):
        ref = np.array([kb.eval_sum(t) for t in range(1 << n)], dtype=np.uint64)
        assert np.array_equal(dcf_full_domain_sum(kb), ref)
    assert np.array_equal(
        reduce_mod(dcf_full_domain_sum(k0) + dcf_full_domain_sum(k1), 40), reference(x, w, np.arange(1 << n))
    )
    # the server picks the full-domain path for many thresholds and per-point walks for few
    sh = DCFShares(k0, 40)
    few = np.array([0, (1 << n) - 1], dtype=np.uint64)
    assert np.array_equal(sh.cumulative_shares(few), np.array([k0.eval_sum(int(t)) for t in few], dtype=np.uint64))


def test_stored_client_ids_numbers_stand_for_themselves_and_strings_hash_into_the_top_half():
    import hashlib

    from pairwise.protocols.ecdf.client import stored_client_ids
    from pairwise.protocols.ecdf.shares import ShareParameterError

    assert stored_client_ids(np.array([0, 7, 2**63 - 1]), "d").tolist() == [0, 7, 2**63 - 1]
    assert stored_client_ids(np.array(["12", "3.0"]), "d").tolist() == [12, 3]
    s = stored_client_ids(np.array(["p01000", "p01001", "17"]), "d")
    h = int.from_bytes(hashlib.sha256(b"pairwise-ecdf/client-id\x00d\x00p01000").digest()[:8], "big")
    assert int(s[0]) == (h >> 1) | (1 << 63) and int(s[1]) >= 2**63 and s[0] != s[1] and int(s[2]) == 17
    assert stored_client_ids(np.array(["p01000"]), "d")[0] == s[0]  # every owner maps a person alike
    assert stored_client_ids(np.array(["p01000"]), "other")[0] != s[0]
    for bad in (np.array([-1]), np.array([2**63], dtype=np.uint64)):
        with pytest.raises(ShareParameterError):
            stored_client_ids(bad, "d")
