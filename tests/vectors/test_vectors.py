"""Golden vectors of the versioned byte formats (tests/vectors/*.json, written by generate.py), checked both ways.

Encode: the recorded inputs, encoded by today's code, give the recorded bytes (the whole file is rebuilt
and compared).  Decode: the recorded bytes, decoded by today's code, give the recorded fields, and key
shares reconstruct to the function they encode (checked with Python ints, not with the library).
"""

from __future__ import annotations

import json
import operator

import numpy as np
import pytest

from pairwise.circuits.kernels import build_kernel
from pairwise.fss import DCFKeyBatch, DPFKeyBatch
from pairwise.mpc.channel.hello import MAGIC, PROTOCOL_VERSION, Hello
from pairwise.mpc.garble.format import HEADER_SIZE, GarbledCircuit
from pairwise.mpc.twopc.inputs import OUTPUT_MODES
from pairwise.mpc.twopc.wire import EXEC, EXEC_MAGIC, compare_headers, random_digest
from pairwise.protocols.ecdf.shares import KIND_SEED, KIND_VECTOR, _expand, parse_mshare_keys

from . import generate

_LOADED: dict[str, dict] = {}


def _vectors(name: str) -> dict:
    if name not in _LOADED:
        _LOADED[name] = json.loads((generate.HERE / name).read_text())
    return _LOADED[name]


@pytest.mark.parametrize("name", sorted(generate.BUILDERS))
def test_encoding_the_recorded_inputs_gives_the_recorded_bytes(name):
    """Today's encoders reproduce the committed file exactly; a format change must bump its version."""
    assert generate.dumps(generate.BUILDERS[name]()) == (generate.HERE / name).read_text(), (
        f"{name}: the encoding changed. If deliberate, bump the format's version and run "
        f"`python tests/vectors/generate.py {name}`"
    )


def test_every_file_in_the_folder_is_checked():
    own = {p.name for p in generate.HERE.glob("*.json")} & set(generate.BUILDERS)
    assert own == set(generate.BUILDERS)


_CMP = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge}


@pytest.mark.parametrize(
    "case", _vectors("fss_keys_v1.json")["cases"], ids=lambda c: f"{c['kind']}-n{c['n']}-l{c['l']}"
)
def test_fss_keys_decode_to_the_generated_batches_and_reconstruct_the_function(case):
    cls = DPFKeyBatch if case["kind"] == "dpf" else DCFKeyBatch
    keys0 = [bytes.fromhex(k) for k in case["keys0"]]
    keys1 = [bytes.fromhex(k) for k in case["keys1"]]
    b0, b1 = cls.from_bytes_list(keys0), cls.from_bytes_list(keys1)
    assert (b0.party, b0.n, b0.l, b1.party) == (0, case["n"], case["l"], 1)
    g0, g1 = generate.fss_batches(case)
    for got, want in ((b0, g0), (b1, g1)):
        for field in ("seeds", "scw", "tcw", "fcw", "vcw"):
            a, b = getattr(got, field), getattr(want, field)
            assert (a is None and b is None) or np.array_equal(a, b), field
    assert b0.to_bytes_list() == keys0 and b1.to_bytes_list() == keys1
    l, mod = case["l"], 1 << case["l"]
    for x in range(1 << case["n"]):
        s0, s1 = b0.eval(x), b1.eval(x)
        for k, (alpha, beta) in enumerate(zip(case["alphas"], case["betas"])):
            hit = x == alpha if case["kind"] == "dpf" else _CMP[case["comparison"]](x, alpha)
            assert (int(s0[k]) + int(s1[k])) % mod == (beta % mod if hit else 0), (x, k, l)


@pytest.mark.parametrize("case", _vectors("garbled_header_v3.json")["cases"], ids=lambda c: str(c["n_and"]))
def test_garbled_header_decodes_to_its_fields(case):
    header = bytes.fromhex(case["header"])
    assert len(header) == HEADER_SIZE and header[:4] == b"PWGC" and int.from_bytes(header[4:6], "little") == 3
    fields = (case["circuit_hash"], case["n_and"], case["batch"], case["chunk"], case["instance_offset"])
    assert GarbledCircuit.parse_header(header) == fields
    if case["bytes"] is not None:
        gc = GarbledCircuit.from_bytes(bytes.fromhex(case["bytes"]))
        assert (gc.circuit_hash, gc.n_and, gc.batch, gc.chunk, gc.instance_offset) == fields
        assert bytes(gc.tables) == bytes.fromhex(case["tables"])


@pytest.mark.parametrize("case", _vectors("mshare_v1.json")["cases"], ids=lambda c: f"m{c['m']}-n{c['n']}-l{c['l']}")
def test_mshare_keys_parse_and_their_shares_sum_to_each_clients_weight(case):
    m, n, l = case["m"], case["n"], case["l"]
    mod, size = 1 << l, 1 << n
    total = np.zeros((len(case["values"]), size), dtype=object)
    for j, server in enumerate(case["keys"]):
        blobs = [bytes.fromhex(k) for k in server]
        assert all(b[:6] == bytes((1, b[1], j, m, n, l)) for b in blobs)
        kinds, seeds, vectors, vec_index, kept, rejected = parse_mshare_keys(blobs, party=j, m=m, n=n, l=l)
        assert not rejected and kept == list(range(len(blobs)))
        for i in kept:
            if kinds[i] == KIND_SEED:
                assert np.array_equal(seeds[i], np.frombuffer(blobs[i][6:], dtype="<u8"))
                share = _expand(seeds[i : i + 1], n, l)[0]
            else:
                assert kinds[i] == KIND_VECTOR and i % m == j  # the vector goes to server i mod m
                share = vectors[vec_index[i]]
            total[i] += np.array([int(v) for v in share], dtype=object)
    for i, (x, w) in enumerate(zip(case["values"], case["weights"])):
        assert [int(v) % mod for v in total[i]] == [w % mod if t == x else 0 for t in range(size)]


@pytest.mark.parametrize("case", _vectors("ir_v1.json")["cases"], ids=lambda c: c["kernel"])
def test_circuit_content_hash_is_stable(case):
    """The IR's only byte encoding is the canonical one under its content hash (one way: a hash has no decoder)."""
    c = build_kernel(case["kernel"], case["bits"], case["signed"])
    assert (c.n_and, c.n_gates, c.n_wires, c.content_hash) == (
        case["n_and"],
        case["n_gates"],
        case["n_wires"],
        case["content_hash"],
    )


@pytest.mark.parametrize("case", _vectors("hello_v1.json")["cases"], ids=lambda c: c["role"])
def test_hello_decodes_to_its_fields(case):
    raw = bytes.fromhex(case["bytes"])
    assert raw[:8] == MAGIC and int.from_bytes(raw[8:10], "big") == PROTOCOL_VERSION == 1
    want = Hello(
        role=case["role"],
        session_id=bytes.fromhex(case["session_id"]),
        extra=bytes.fromhex(case["extra"]),
        nonce=bytes.fromhex(case["nonce"]),
    )
    assert Hello.decode(raw) == want


@pytest.mark.parametrize("case", _vectors("exec_header_v5.json")["cases"], ids=lambda c: c["kernel"])
def test_exec_header_decodes_to_its_fields(case):
    raw = bytes.fromhex(case["bytes"])
    c = build_kernel(case["kernel"], case["bits"], case["signed"])
    assert len(raw) == 80 and EXEC.unpack(raw) == (
        EXEC_MAGIC,
        bytes.fromhex(case["content_hash"]),
        case["n_and"],
        case["batch"],
        case["chunk"],
        case["offset"],
        OUTPUT_MODES.index(case["output"]),
        random_digest(()),
    )
    compare_headers(raw, raw, c)  # the peer's equal header is accepted


# ----------------------------------------------------------------------------- base OT (Chou-Orlandi, v3)
_P25519 = 2**255 - 19


def _u_of(point: bytes) -> bytes:
    """X25519 u = (1 + y) / (1 - y) mod p of an Ed25519 encoding, in Python ints (the reference)."""
    y = int.from_bytes(point, "little") & ((1 << 255) - 1)
    return ((1 + y) * pow(1 - y, -1, _P25519) % _P25519).to_bytes(32, "little")


def _kdf(sid: bytes, index: int, a_enc: bytes, b_enc: bytes, u: bytes) -> str:
    """KDF(sid, i, A, B, U) of mpc/baseot.py's docstring, with hashlib."""
    import hashlib
    import struct

    data = b"pairwise/co-ot/v3\x00" + struct.pack("!H", len(sid)) + sid + struct.pack("!Q", index) + a_enc + b_enc + u
    return hashlib.sha256(data).digest()[:16].hex()


@pytest.mark.parametrize("case", _vectors("baseot_v3.json")["cases"], ids=lambda c: f"n={len(c['choices'])}")
def test_baseot_messages_decode_and_give_the_recorded_keys(case):
    """The recorded frames are (index0, n, A), the receiver's points in frames of 32, and (chosen OT) the
    padded messages; the sender's keys recomputed from them with ``cryptography`` X25519, Python-int
    coordinates and hashlib match the record, and the receiver got the key (message) of its choice."""
    import struct

    import nacl.bindings as na
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

    from pairwise.mpc.baseot import OT_VERSION, POINTS_PER_FRAME

    assert OT_VERSION == _vectors("baseot_v3.json")["version"] == 3
    sid, c = bytes.fromhex(case["session_id"]), case["choices"]
    n = len(c)
    frames = [(f["from"], bytes.fromhex(f["bytes"])) for f in case["frames"]]
    who, first = frames[0]
    assert who == "sender" and len(first) == 12 + 32 and struct.unpack("!QI", first[:12]) == (0, n)
    a_enc = first[12:]
    secret = bytes.fromhex(case["sender_secret"])
    assert a_enc == na.crypto_scalarmult_ed25519_base(secret)  # A = clamp(a) G
    points = [raw for who, raw in frames[1:] if who == "receiver"]
    assert [len(p) for p in points] == [32 * min(POINTS_PER_FRAME, n - j) for j in range(0, n, POINTS_PER_FRAME)]
    bs = [b"".join(points)[32 * j : 32 * j + 32] for j in range(n)]
    key = X25519PrivateKey.from_private_bytes(secret)
    k0 = [_kdf(sid, j, a_enc, b, key.exchange(X25519PublicKey.from_public_bytes(_u_of(b)))) for j, b in enumerate(bs)]
    k1 = [
        _kdf(
            sid,
            j,
            a_enc,
            b,
            key.exchange(X25519PublicKey.from_public_bytes(_u_of(na.crypto_core_ed25519_sub(b, a_enc)))),
        )
        for j, b in enumerate(bs)
    ]
    if not case["chosen"]:
        assert len(frames) == 2
        assert (k0, k1) == (case["k0"], case["k1"])
        assert case["received"] == [(k1 if cj else k0)[j] for j, cj in enumerate(c)]
        return
    who, padded = frames[-1]
    assert who == "sender" and len(frames) == 2 + len(points) and len(padded) == 2 * 16 * n
    m = [bytes.fromhex(x) for x in case["m0"] + case["m1"]]
    ks = [bytes.fromhex(x) for x in k0 + k1]
    assert padded == b"".join(bytes(p ^ q for p, q in zip(mi, ki)) for mi, ki in zip(m, ks))
    assert case["received"] == [(case["m1"] if cj else case["m0"])[j] for j, cj in enumerate(c)]
