"""Key bytes: sizes, versioned deterministic round trips, and clear errors on malformed keys."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairwise.fss import (
    FORMAT_VERSION,
    DCFKey,
    DCFKeyBatch,
    DPFKey,
    FSSParameterError,
    KeyFormatError,
    dcf_gen,
    dcf_gen_batch,
    dcf_key_bytes,
    dpf_gen,
    dpf_key_bytes,
    reconstruct,
)


def expected_dcf_size(n, l):
    w = -(-l // 8)
    return 5 + 16 + n * (16 + w) + -(-2 * n // 8) + w


def test_key_sizes():
    assert dcf_key_bytes(32, 32) == 673  # DESIGN: 668 bytes of material + 5-byte header
    assert dcf_key_bytes(32, 32) <= 700  # issue target
    # information-theoretic lambda + n(lambda + l + 2) + l bits, for l a multiple of 8 and 4 | n
    assert dcf_key_bytes(32, 32) - 5 == (128 + 32 * (128 + 32 + 2) + 32) // 8
    for n, l in [(1, 1), (7, 13), (64, 64), (20, 9)]:
        assert dcf_key_bytes(n, l) == expected_dcf_size(n, l)
        assert dpf_key_bytes(n, l) == 5 + 16 + 16 * n + -(-2 * n // 8) + -(-l // 8)
        k0, k1 = dcf_gen(0, 1, n, l)
        assert len(k0.to_bytes()) == len(k1.to_bytes()) == dcf_key_bytes(n, l)
        d0, _ = dpf_gen(0, 1, n, l)
        assert len(d0.to_bytes()) == dpf_key_bytes(n, l)
    with pytest.raises(FSSParameterError):
        dcf_key_bytes(0, 8)


@pytest.mark.parametrize("n,l", [(1, 1), (3, 5), (32, 32), (64, 64), (33, 63)])
def test_round_trip_is_deterministic(n, l):
    k0, k1 = dcf_gen(2**n - 1, 1, n, l, comparison="le")
    b0 = k0.to_bytes()
    assert b0[0] == FORMAT_VERSION and b0[1] == 2 and b0[2] == 0 and b0[3] == n and b0[4] == l
    assert k1.to_bytes()[2] == 1
    back = DCFKey.from_bytes(b0)
    assert back.to_bytes() == b0 and back == k0
    assert DCFKey.from_bytes(bytearray(b0)) == k0
    assert DCFKey.from_bytes(memoryview(b0)) == k0
    assert back.to_bytes() == DCFKey.from_bytes(back.to_bytes()).to_bytes()
    x = 2**n - 1
    assert reconstruct(back.eval(x), DCFKey.from_bytes(k1.to_bytes()).eval(x), l) == 1
    # the two parties' keys differ, and fresh keys of the same function differ
    assert k0 != k1
    assert dcf_gen(2**n - 1, 1, n, l, comparison="le")[0] != k0


def test_batch_round_trip_many_keys():
    alphas = np.arange(0, 5000, 7, dtype=np.uint64)
    k0, _ = dcf_gen_batch(alphas, 3, 13, 11)
    blobs = k0.to_bytes_list()
    assert len(blobs) == len(alphas) and {len(b) for b in blobs} == {dcf_key_bytes(13, 11)}
    back = DCFKeyBatch.from_bytes_list(blobs, n=13, l=11, party=0)
    assert back.to_bytes_list() == blobs
    for name in ("seeds", "scw", "tcw", "fcw", "vcw"):
        assert np.array_equal(getattr(back, name), getattr(k0, name)), name
    assert np.array_equal(k0.to_bytes_array()[17], np.frombuffer(blobs[17], dtype=np.uint8))


def _dcf_blob(n=8, l=13, alpha=77, party=0):
    k = dcf_gen(alpha, 5, n, l)[party]
    return bytearray(k.to_bytes())


def _mutate(blob: bytearray, pos: int, value: int) -> bytes:
    b = bytearray(blob)
    b[pos] = value
    return bytes(b)


def test_single_key_errors():
    blob = _dcf_blob()  # n = 8, l = 13: 5 + 16 + 8*18 + 2 + 2 = 169 bytes
    size = len(blob)
    assert size == expected_dcf_size(8, 13)
    cases = [
        (b"", r"truncated: 0 bytes, shorter than the 5-byte header"),
        (bytes(blob[:3]), r"truncated: 3 bytes"),
        (bytes(blob[:-1]), rf"truncated: {size - 1} bytes, expected {size} for a DCF key with n=8, l=13"),
        (bytes(blob) + b"\0", rf"1 trailing bytes: {size + 1} bytes, expected {size}"),
        (_mutate(blob, 0, 2), r"unsupported key format version 2 \(this library reads version 1\)"),
        (_mutate(blob, 1, 7), r"unknown key kind byte 7, expected 2 \(DCF\)"),
        (_mutate(blob, 1, 1), r"this is a DPF key, expected a DCF key"),
        (_mutate(blob, 2, 2), r"party byte is 2, must be 0 or 1"),
        (_mutate(blob, 3, 0), r"domain bits n = 0 in the header, must be in 1..64"),
        (_mutate(blob, 3, 65), r"domain bits n = 65 in the header"),
        (_mutate(blob, 4, 0), r"output bits l = 0 in the header"),
        (_mutate(blob, 4, 200), r"output bits l = 200 in the header"),
        (_mutate(blob, 3, 9), r"truncated: 169 bytes, expected 188 for a DCF key with n=9, l=13"),
    ]
    for data, match in cases:
        with pytest.raises(KeyFormatError, match="^DCF key: " + match) as exc:
            DCFKey.from_bytes(data)
        assert exc.value.index is None
    with pytest.raises(KeyFormatError, match="must be bytes"):
        DCFKey.from_bytes("not bytes")  # type: ignore[arg-type]
    with pytest.raises(KeyFormatError, match="domain bits n = 8, expected 16"):
        DCFKey.from_bytes(bytes(blob), n=16)
    with pytest.raises(KeyFormatError, match="output bits l = 13, expected 32"):
        DCFKey.from_bytes(bytes(blob), l=32)
    with pytest.raises(KeyFormatError, match="key for party 0, expected party 1"):
        DCFKey.from_bytes(bytes(blob), party=1)
    assert isinstance(KeyFormatError("x"), ValueError)


def test_non_canonical_keys_rejected():
    n, l = 3, 13  # w = 2 value bytes with 3 unused bits; 6 control bits in 1 byte
    blob = _dcf_blob(n=n, l=l, alpha=5)
    lvl = 16 + 2
    first_level = 21
    # lowest bit of a seed correction
    with pytest.raises(KeyFormatError, match="seed correction has its lowest bit set"):
        DCFKey.from_bytes(_mutate(blob, first_level + lvl, blob[first_level + lvl] | 1))
    # value correction above bit l-1
    vpos = first_level + 16 + 1
    with pytest.raises(KeyFormatError, match=r"value correction has bits set above bit 12 \(not reduced mod 2\^13\)"):
        DCFKey.from_bytes(_mutate(blob, vpos, blob[vpos] | 0x80))
    # output correction above bit l-1
    with pytest.raises(KeyFormatError, match="output correction has bits set above bit 12"):
        DCFKey.from_bytes(_mutate(blob, len(blob) - 1, blob[-1] | 0x20))
    # control-bit padding
    bpos = first_level + n * lvl
    with pytest.raises(KeyFormatError, match="padding bits after the control-bit corrections"):
        DCFKey.from_bytes(_mutate(blob, bpos, blob[bpos] | 0x40))
    # DPF: same checks on its layout
    d = bytearray(dpf_gen(1, 1, 3, 13)[0].to_bytes())
    with pytest.raises(KeyFormatError, match="DPF key: the output correction has bits set"):
        DPFKey.from_bytes(_mutate(d, len(d) - 1, d[-1] | 0x80))


def test_every_truncation_is_a_clear_error():
    for blob in (_dcf_blob(n=5, l=9, alpha=7), bytearray(dpf_gen(3, 1, 5, 9)[1].to_bytes())):
        cls = DCFKey if blob[1] == 2 else DPFKey
        for cut in range(len(blob)):
            with pytest.raises(KeyFormatError, match="truncated"):
                cls.from_bytes(bytes(blob[:cut]))


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=0, max_size=120), st.integers(0, 119), st.integers(0, 255))
def test_arbitrary_bytes_never_crash(junk, pos, val):
    """Random bytes and single-byte corruptions: KeyFormatError or a canonical key, nothing else."""
    base = bytearray(dcf_gen(9, 1, 4, 6)[0].to_bytes())
    for data in (junk, _mutate(base, pos % len(base), val)):
        try:
            k = DCFKey.from_bytes(data)
        except KeyFormatError:
            continue
        assert k.to_bytes() == bytes(data)
        # the header's l may itself be the corrupted byte (a valid key of another width): the output is
        # reduced mod 2^l of the key as parsed (asserting < 2^6 failed whenever byte 4, l, became 7)
        assert 0 <= k.eval(3) < (1 << k.l)


def test_batch_error_names_the_bad_index():
    k0, _ = dcf_gen_batch(np.arange(10, dtype=np.uint64), 1, 8, 16)
    blobs = k0.to_bytes_list()
    bad = list(blobs)
    bad[3] = bad[3][:-2]
    with pytest.raises(KeyFormatError, match=r"^DCF key 3: truncated") as exc:
        DCFKeyBatch.from_bytes_list(bad)
    assert exc.value.index == 3 and exc.value.indices == [3]
    other = dcf_gen(1, 1, 9, 16)[0].to_bytes()
    bad[7] = other
    bad[8] = dcf_gen(1, 1, 8, 16)[1].to_bytes()
    with pytest.raises(KeyFormatError, match=r"DCF key 3: .*\(and 2 more bad keys: \[7, 8\]\)") as exc:
        DCFKeyBatch.from_bytes_list(bad, n=8, l=16, party=0)
    assert exc.value.indices == [3, 7, 8]
    assert "n = 9, expected 8" in exc.value.reasons[7]
    assert "party 1, expected party 0" in exc.value.reasons[8]
    # without n/l/party given, the first key decides; a bad first key is skipped for inference
    bad0 = [b"\x01"] + blobs[1:]
    with pytest.raises(KeyFormatError, match=r"^DCF key 0: truncated") as exc:
        DCFKeyBatch.from_bytes_list(bad0)
    assert exc.value.index == 0
    with pytest.raises(KeyFormatError, match=r"^DCF key 1: must be bytes, got str"):
        DCFKeyBatch.from_bytes_list([blobs[0], "oops"] + blobs[2:])
    with pytest.raises(KeyFormatError, match="one bytes object"):
        DCFKeyBatch.from_bytes_list(blobs[0])
    with pytest.raises(FSSParameterError, match="empty list"):
        DCFKeyBatch.from_bytes_list([])
    with pytest.raises(KeyFormatError, match="DCF key 0: truncated"):
        DCFKeyBatch.from_bytes_list([b""], n=8, l=16, party=0)


def test_parse_valid_keeps_the_good_keys():
    alphas = np.arange(20, dtype=np.uint64) * 10
    k0, k1 = dcf_gen_batch(alphas, 1, 8, 16)
    blobs = k0.to_bytes_list()
    blobs[2] = blobs[2] + b"x"
    blobs[5] = dpf_gen(1, 1, 8, 16)[0].to_bytes()
    blobs[11] = blobs[11][:10]
    batch, kept, rejected = DCFKeyBatch.parse_valid(blobs, n=8, l=16, party=0)
    assert sorted(rejected) == [2, 5, 11]
    assert kept == [i for i in range(20) if i not in (2, 5, 11)]
    assert all(isinstance(e, KeyFormatError) and e.index == i for i, e in rejected.items())
    assert "this is a DPF key" in str(rejected[5])
    assert len(batch) == 17
    y = reconstruct(batch.eval(55), k1[np.array(kept)].eval(55), 16)
    assert np.array_equal(y, (55 < alphas[kept]).astype(np.uint64))
    # all bad: an empty batch, every index rejected
    empty, kept, rejected = DCFKeyBatch.parse_valid([b"", b"\x01\x02"], n=8, l=16, party=0)
    assert len(empty) == 0 and kept == [] and sorted(rejected) == [0, 1]


def test_batch_constructor_checks_shapes():
    k0, _ = dcf_gen_batch([1, 2], 1, 8, 8)
    with pytest.raises(FSSParameterError, match="scw has shape"):
        DCFKeyBatch(0, 8, 8, k0.seeds, k0.scw[:, :, :1], k0.tcw, k0.fcw, k0.vcw)
    with pytest.raises(FSSParameterError, match="party must be 0 or 1"):
        DCFKeyBatch(2, 8, 8, k0.seeds, k0.scw, k0.tcw, k0.fcw, k0.vcw)
    with pytest.raises(FSSParameterError, match="needs value corrections"):
        DCFKeyBatch(0, 8, 8, k0.seeds, k0.scw, k0.tcw, k0.fcw)
    with pytest.raises(FSSParameterError, match="one kind, party, n and l"):
        DCFKeyBatch.concat([k0, dcf_gen_batch([1], 1, 8, 9)[0]])
    assert not k0.scw.flags.writeable  # key arrays are read-only
