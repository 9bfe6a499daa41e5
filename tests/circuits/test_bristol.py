"""Tests of circuits.bristol: the standard circuit files against cryptography / hashlib, I/O and errors.

Bit order (SOURCE.md, and confirmed here for every file):
- Bristol Fashion files: wire i of a group is bit i of the group's value read
  as a big-endian integer (wire 0 = least significant bit of the last byte);
  the output likewise.  AES: input 1 = key, input 2 = plaintext.
  SHA-256 (sha256.txt, the compression function): input 1 (512 bits) = the
  message block, input 2 (256 bits) = the chaining state H0..H7 as one
  big-endian integer, output = the new state, big-endian.  The widths fix the
  order (512 vs 256), and the standard IV then gives hashlib's digest of any
  message shorter than 56 bytes.  Note that the output is the full
  compression output (feed-forward included), so two blocks chain.
- Old Bristol format (bristol_format/): the bit order is reversed: wire 0 is
  the MOST significant bit of the big-endian value, for inputs and outputs.
  AES-non-expanded.txt: input 1 = plaintext, input 2 = key (found by trying
  all combinations against FIPS-197 C.1, then checked on random pairs);
  sha-1.txt / sha-256.txt: one 512-bit padded block, standard IV built in.

Tests that start processes are in tests/system/test_bristol_processes.py.
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from pairwise.circuits.bristol import (
    BristolFormatError,
    bristol_layout,
    format_bristol_fashion,
    parse_bristol_fashion,
    parse_bristol_old,
    read_bristol_fashion,
    read_bristol_old,
    write_bristol_fashion,
)
from pairwise.circuits.builder import Builder
from pairwise.circuits.ir import EVALUATOR, GARBLER, CircuitError, Party
from pairwise.circuits.kernels import kendall, variance

# file: (ngates, nwires, input widths, output widths, AND, XOR, INV), from SOURCE.md
FASHION = {
    "aes_128.txt": (36663, 36919, [128, 128], [128], 6400, 28176, 2087),
    "aes_192.txt": (41565, 41885, [192, 128], [128], 7168, 32080, 2317),
    "aes_256.txt": (50666, 51050, [256, 128], [128], 8832, 39008, 2826),
    "sha256.txt": (135073, 135841, [512, 256], [256], 22573, 110644, 1856),
}
OLD = {
    "AES-non-expanded.txt": (33616, 33872, [128, 128], [128], 6800, 25124, 1692),
    "adder_32bit.txt": (375, 439, [32, 32], [33], 127, 61, 187),
    "sha-1.txt": (106601, 107113, [512], [160], 37300, 24166, 45135),
    "sha-256.txt": (116246, 116758, [512], [256], 22272, 91780, 2194),
}
SHA256_IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)


@functools.cache
def _read(path: str, old: bool = False):
    return read_bristol_old(path) if old else read_bristol_fashion(path)


def fashion(bristol_dir: Path, name: str):
    return _read(str(bristol_dir / name))


def old(bristol_dir: Path, name: str):
    return _read(str(bristol_dir / "bristol_format" / name), old=True)


def aes_ecb(key: bytes, block: bytes) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(block) + enc.finalize()


def be(b: bytes) -> int:
    return int.from_bytes(b, "big")


def bitrev(v: int, n: int) -> int:
    return int(format(v, f"0{n}b")[::-1], 2)


def sha_pad(msg: bytes) -> list[bytes]:
    """Standard SHA-1/SHA-256 padding into 64-byte blocks."""
    m = msg + b"\x80" + b"\0" * ((55 - len(msg)) % 64) + struct.pack(">Q", 8 * len(msg))
    assert len(m) % 64 == 0
    return [m[i : i + 64] for i in range(0, len(m), 64)]


# ---------------------------------------------------------------------- inventory
def test_every_fashion_file_is_known_and_matches_source_md(bristol_dir):
    files = sorted(p.name for p in bristol_dir.glob("*.txt"))
    assert files == sorted(FASHION), "a new circuit file needs a test here"
    for name, (ng, nw, ins, outs, n_and, n_xor, n_inv) in FASHION.items():
        c = fashion(bristol_dir, name)
        with open(bristol_dir / name) as fh:
            assert [int(t) for t in fh.readline().split()] == [ng, nw]
        s = c.stats()
        assert (c.n_gates, c.n_wires) == (ng, nw)
        assert (s.and_gates, s.xor_gates, s.inv_gates) == (n_and, n_xor, n_inv)
        assert [g.width for g in c.inputs] == ins and [g.width for g in c.outputs] == outs
        assert [g.party for g in c.inputs] == [GARBLER, EVALUATOR]  # default ownership
        assert s.bytes == 32 * n_and


def test_every_old_format_file_reads(bristol_dir):
    d = bristol_dir / "bristol_format"
    assert sorted(p.name for p in d.glob("*.txt")) == sorted(OLD)
    for name, (ng, nw, ins, outs, n_and, n_xor, n_inv) in OLD.items():
        c = old(bristol_dir, name)
        s = c.stats()
        assert (c.n_gates, c.n_wires) == (ng, nw)
        assert (s.and_gates, s.xor_gates, s.inv_gates) == (n_and, n_xor, n_inv)
        assert [g.width for g in c.inputs] == ins and [g.width for g in c.outputs] == outs


# ---------------------------------------------------------------------- AES
FIPS197 = {  # FIPS-197 Appendix C.1-C.3: plaintext 00112233..ff, key 000102..
    16: "69c4e0d86a7b0430d8cdb78070b4c55a",
    24: "dda97ca4864cdfe06eaf70a0ec0d7191",
    32: "8ea2b7ca516745bfeafc49904b496089",
}


@pytest.mark.parametrize("name, klen", [("aes_128.txt", 16), ("aes_192.txt", 24), ("aes_256.txt", 32)])
def test_aes_against_cryptography(bristol_dir, name, klen):
    c = fashion(bristol_dir, name)
    rng = np.random.default_rng(klen)  # simulation data: a seed is safe
    keys = [rng.bytes(klen) for _ in range(64)] + [bytes(range(klen)), b"\0" * klen, b"\xff" * klen]
    pts = [rng.bytes(16) for _ in range(64)] + [
        bytes.fromhex("00112233445566778899aabbccddeeff"),
        b"\0" * 16,
        b"\xff" * 16,
    ]
    (out,) = c.evaluate([be(k) for k in keys], [be(p) for p in pts])
    got = [int(v).to_bytes(16, "big") for v in out]
    assert got == [aes_ecb(k, p) for k, p in zip(keys, pts)]
    assert got[64].hex() == FIPS197[klen]


def test_aes_swapped_inputs_do_not_match(bristol_dir):
    """The test can fail: key and plaintext swapped gives a different cipher text."""
    c = fashion(bristol_dir, "aes_128.txt")
    k, p = bytes(range(16)), bytes.fromhex("00112233445566778899aabbccddeeff")
    assert c.evaluate(be(p), be(k))[0].to_bytes(16, "big") != aes_ecb(k, p)


# ---------------------------------------------------------------------- SHA-256
def _iv_int() -> int:
    return be(b"".join(struct.pack(">I", h) for h in SHA256_IV))


def test_sha256_compression_one_block(bristol_dir):
    c = fashion(bristol_dir, "sha256.txt")
    rng = np.random.default_rng(256)
    msgs = [b"", b"abc", b"a" * 55] + [rng.bytes(int(n)) for n in rng.integers(0, 56, size=40)]
    blocks = [be(sha_pad(m)[0]) for m in msgs]
    (out,) = c.evaluate(blocks, [_iv_int()] * len(msgs))
    assert [int(v).to_bytes(32, "big") for v in out] == [hashlib.sha256(m).digest() for m in msgs]
    assert hashlib.sha256(b"abc").hexdigest() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_sha256_two_blocks_chain(bristol_dir):
    """The chaining input really is the state: compress(compress(IV, b1), b2) = SHA-256."""
    c = fashion(bristol_dir, "sha256.txt")
    rng = np.random.default_rng(512)
    msgs = [rng.bytes(int(n)) for n in rng.integers(56, 120, size=12)]
    padded = [sha_pad(m) for m in msgs]
    assert all(len(p) == 2 for p in padded)
    (mid,) = c.evaluate([be(p[0]) for p in padded], [_iv_int()] * len(msgs))
    (out,) = c.evaluate([be(p[1]) for p in padded], [int(v) for v in mid])
    assert [int(v).to_bytes(32, "big") for v in out] == [hashlib.sha256(m).digest() for m in msgs]


# ---------------------------------------------------------------------- write / read
@pytest.mark.parametrize("name", sorted(FASHION))
def test_fashion_roundtrip_identical(bristol_dir, name, tmp_path):
    c = fashion(bristol_dir, name)
    assert bristol_layout(c) is c  # already in Bristol Fashion layout
    text = format_bristol_fashion(c)
    with open(bristol_dir / name) as fh:
        orig = [ln.split() for ln in fh if ln.strip()]
    assert [ln.split() for ln in text.splitlines() if ln.strip()] == orig  # same gates, same numbering
    path = tmp_path / name
    write_bristol_fashion(c, path)
    c2 = read_bristol_fashion(path)
    assert c2.content_hash == c.content_hash
    assert np.array_equal(c2.op, c.op) and np.array_equal(c2.in0, c.in0) and np.array_equal(c2.out, c.out)


def test_builder_circuits_roundtrip(tmp_path):
    b = Builder("mix")
    x = b.input("x", 10, GARBLER, signed=True)
    y = b.input("y", 10, EVALUATOR, signed=True)
    b.output("p", x * y)
    b.output("a", abs(x - y))
    b.output("k", b.const(5, 3))
    b.output("xin", x)
    for c in (b.build(), kendall(8, True), variance(8, False)):
        path = tmp_path / f"{c.name}.txt"
        write_bristol_fashion(c, path)
        c2 = read_bristol_fashion(path, parties=[g.party for g in c.inputs])
        for arr in ("op", "in0", "out"):
            assert np.array_equal(getattr(c2, arr), getattr(c, arr))
        assert c2.n_wires == c.n_wires
        assert [g.width for g in c2.inputs] == [g.width for g in c.inputs]
        assert [g.width for g in c2.outputs] == [g.width for g in c.outputs]
        rng = np.random.default_rng(3)
        bits = [rng.integers(0, 2, size=(50, g.width)).astype(bool) for g in c.inputs]
        for o1, o2 in zip(c.evaluate_bits(bits), c2.evaluate_bits(bits)):
            assert np.array_equal(o1, o2)
        # writing the re-read circuit reproduces the file byte for byte
        text = format_bristol_fashion(c)
        assert format_bristol_fashion(c2) == text


def test_written_header_follows_the_format(tmp_path):
    c = kendall(8)
    lines = format_bristol_fashion(c).splitlines()
    assert [int(t) for t in lines[0].split()] == [c.n_gates, c.n_wires]
    assert [int(t) for t in lines[1].split()] == [2, 16, 16]
    assert [int(t) for t in lines[2].split()] == [1, 2]
    kinds = [ln.split()[-1] for ln in lines[3:] if ln.strip()]
    assert len(kinds) == c.n_gates and set(kinds) <= {"XOR", "AND", "INV"}
    assert kinds.count("AND") == c.stats().and_gates


def test_parties_argument(bristol_dir):
    path = bristol_dir / "aes_128.txt"
    c = read_bristol_fashion(path, parties=["evaluator", "garbler"])
    assert [g.party for g in c.inputs] == [Party.EVALUATOR, Party.GARBLER]
    assert c.content_hash != fashion(bristol_dir, "aes_128.txt").content_hash
    with pytest.raises(CircuitError):
        read_bristol_fashion(path, parties=[GARBLER])
    with pytest.raises(ValueError):
        read_bristol_fashion(path, parties=["garbler", "mallory"])


# ---------------------------------------------------------------------- old format
def test_old_adder_against_python_ints(bristol_dir):
    c = old(bristol_dir, "adder_32bit.txt")
    rng = np.random.default_rng(32)
    a = [int(v) for v in rng.integers(0, 1 << 32, size=100, dtype=np.uint64)] + [
        0,
        0,
        (1 << 32) - 1,
        (1 << 32) - 1,
        1 << 31,
    ]
    b = [int(v) for v in rng.integers(0, 1 << 32, size=100, dtype=np.uint64)] + [
        0,
        (1 << 32) - 1,
        1,
        (1 << 32) - 1,
        1 << 31,
    ]
    (out,) = c.evaluate(a, b)
    assert [int(v) for v in out] == [x + y for x, y in zip(a, b)]  # 33-bit sum, LSB-first like Fashion


def test_old_aes_against_cryptography(bristol_dir):
    c = old(bristol_dir, "AES-non-expanded.txt")
    rng = np.random.default_rng(128)
    keys = [bytes(range(16))] + [rng.bytes(16) for _ in range(50)]
    pts = [bytes.fromhex("00112233445566778899aabbccddeeff")] + [rng.bytes(16) for _ in range(50)]
    (out,) = c.evaluate([bitrev(be(p), 128) for p in pts], [bitrev(be(k), 128) for k in keys])
    got = [bitrev(int(v), 128).to_bytes(16, "big") for v in out]
    assert got == [aes_ecb(k, p) for k, p in zip(keys, pts)]
    assert got[0].hex() == FIPS197[16]


@pytest.mark.parametrize("name, h, nbits", [("sha-256.txt", hashlib.sha256, 256), ("sha-1.txt", hashlib.sha1, 160)])
def test_old_sha_against_hashlib(bristol_dir, name, h, nbits):
    c = old(bristol_dir, name)
    rng = np.random.default_rng(nbits)
    msgs = [b"", b"abc"] + [rng.bytes(int(n)) for n in rng.integers(0, 56, size=10)]
    (out,) = c.evaluate([bitrev(be(sha_pad(m)[0]), 512) for m in msgs])
    assert [bitrev(int(v), nbits).to_bytes(nbits // 8, "big") for v in out] == [h(m).digest() for m in msgs]


def test_formats_are_not_confused(bristol_dir):
    with pytest.raises(BristolFormatError):
        read_bristol_fashion(bristol_dir / "bristol_format" / "adder_32bit.txt")
    with pytest.raises(BristolFormatError):
        parse_bristol_old((bristol_dir / "aes_128.txt").read_text())


# ---------------------------------------------------------------------- EQ, EQW, MAND
EXTENDED = """7 12
2 2 2
1 5

1 1 1 4 EQ
1 1 0 5 EQ
4 2 0 1 2 3 6 7 MAND
1 1 0 9 EQW
2 1 6 7 8 XOR
1 1 3 10 EQW
1 1 1 11 EQ
"""


def test_eq_eqw_mand_gates():
    c = parse_bristol_fashion(EXTENDED)
    assert c.stats().and_gates == 2
    for a in range(4):
        for d in range(4):
            w6 = (a & 1) & (d & 1)
            w7 = (a >> 1) & (d >> 1)
            want = w7 | (w6 ^ w7) << 1 | (a & 1) << 2 | (d >> 1) << 3 | 1 << 4  # wires 7, 8, 9, 10, 11
            assert c.evaluate(a, d) == [want]
    c2 = parse_bristol_fashion(format_bristol_fashion(c))
    assert c2.content_hash == bristol_layout(c).content_hash
    assert c2.evaluate(list(range(4)) * 4, [d for d in range(4) for _ in range(4)])[0].tolist() == [
        int(v) for v in c.evaluate(list(range(4)) * 4, [d for d in range(4) for _ in range(4)])[0]
    ]


# ---------------------------------------------------------------------- malformed files
GOOD = """3 7
2 2 2
1 2

2 1 0 2 4 XOR
2 1 1 3 5 AND
1 1 4 6 INV
"""


def test_good_small_file():
    c = parse_bristol_fashion(GOOD)
    for a in range(4):
        for d in range(4):
            w4 = (a & 1) ^ (d & 1)
            w5 = (a >> 1) & (d >> 1)
            assert c.evaluate(a, d) == [w5 | (1 - w4) << 1]


MALFORMED = [
    # (description, text, line, message fragment)
    ("more gates announced than present", GOOD.replace("3 7", "4 7", 1), 7, "truncated"),
    ("fewer gates announced than present", GOOD.replace("3 7", "2 7", 1), 7, "extra content"),
    ("too few wires in header", GOOD.replace("3 7", "3 6", 1), 7, "out of range"),
    ("too many wires in header", GOOD.replace("3 7", "3 8", 1), 1, "never set"),
    ("input count mismatch", GOOD.replace("2 2 2", "3 2 2", 1), 2, "line 2"),
    ("output count mismatch", GOOD.replace("1 2\n", "2 2\n", 1), 3, "line 3"),
    ("outputs larger than wires", GOOD.replace("1 2\n", "1 9\n", 1), 1, "do not fit"),
    ("unknown gate", GOOD.replace("AND", "NAND"), 6, "NAND"),
    ("wire out of range", GOOD.replace("2 1 1 3 5 AND", "2 1 1 9 5 AND"), 6, "out of range"),
    ("negative wire", GOOD.replace("2 1 1 3 5 AND", "2 1 -1 3 5 AND"), 6, "out of range"),
    ("wire used before it is set", GOOD.replace("2 1 0 2 4 XOR", "2 1 0 5 4 XOR"), 5, "before it is set"),
    ("wire set twice", GOOD.replace("1 1 4 6 INV", "1 1 4 5 INV"), 7, "set twice"),
    ("truncated file", GOOD.rsplit("\n", 2)[0] + "\n", 6, "truncated"),
    ("truncated gate line", GOOD[: GOOD.rindex(" INV")], 7, ""),
    ("truncated header", "3 7\n2 2 2\n", 2, "header"),
    ("empty file", "", 0, "header"),
    ("wire count of gate line", GOOD.replace("2 1 1 3 5 AND", "2 1 1 3 AND"), 6, "wires"),
    ("AND with one input", GOOD.replace("2 1 1 3 5 AND", "1 1 1 5 AND"), 6, "AND"),
    ("INV with two inputs", GOOD.replace("1 1 4 6 INV", "2 1 4 5 6 INV"), 7, "INV"),
    ("not an integer", GOOD.replace("2 1 1 3 5 AND", "2 1 x 3 5 AND"), 6, "integers"),
    ("bad header counts", GOOD.replace("3 7", "3 x", 1), 1, "integers"),
    ("negative gate count", GOOD.replace("3 7", "-3 7", 1), 1, "counts"),
    ("EQ constant not a bit", GOOD.replace("1 1 4 6 INV", "1 1 2 6 EQ"), 7, "EQ"),
    ("MAND arity", GOOD.replace("2 1 1 3 5 AND", "3 1 1 3 0 5 MAND"), 6, "MAND"),
]


@pytest.mark.parametrize("desc, text, line, fragment", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_fashion_names_the_line(desc, text, line, fragment):
    with pytest.raises(BristolFormatError) as info:
        parse_bristol_fashion(text, source="bad.txt")
    err = info.value
    assert isinstance(err, CircuitError) and isinstance(err, ValueError)
    assert err.line == line, (desc, str(err))
    assert err.source == "bad.txt"
    if line:
        assert f"line {line}" in str(err)
    assert fragment in str(err)


@pytest.mark.parametrize("token", ["9" * (2 << 20), "x" * (2 << 20)], ids=["digits", "letters"])
def test_an_error_on_a_huge_token_does_not_repeat_it_whole(token):
    """Issue 22: a Bristol error repeated the offending line whole (20 MB of stderr for a 20 MB token)."""
    for text, line in (
        (GOOD.replace("2 1 1 3 5 AND", f"2 1 1 {token} 5 AND"), 6),
        (GOOD.replace("2 1 1 3 5 AND", f"2 1 1 3 5 {token}"), 6),
        (GOOD + token + "\n", 8),
    ):
        with pytest.raises(BristolFormatError) as info:
            parse_bristol_fashion(text, source="bad.txt")
        assert info.value.line == line and len(str(info.value)) < 600, len(str(info.value))
        assert "characters" in str(info.value)


def test_malformed_old_format_names_the_line():
    text = "2 5\n2 1 1\n\n2 1 0 1 3 XOR\n2 1 0 7 4 AND\n"
    with pytest.raises(BristolFormatError) as info:
        parse_bristol_old(text)
    assert info.value.line == 5 and "out of range" in str(info.value)
    with pytest.raises(BristolFormatError) as info:
        parse_bristol_old("2 5\n2 1\n")
    assert info.value.line == 2


def test_binary_file_rejected(tmp_path):
    path = tmp_path / "binary.txt"
    path.write_bytes(b"3 7\n2 2 2\n1 2\n\xff\xfe\x00garbage\n")
    with pytest.raises(BristolFormatError):
        read_bristol_fashion(path)
    with pytest.raises(BristolFormatError):
        read_bristol_old(path)


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(OSError):
        read_bristol_fashion(tmp_path / "nope.txt")


def test_token_mutations_and_random_bytes_raise_only_format_errors():
    """Garbage raises BristolFormatError or parses into a circuit that round-trips; no other exception.

    300 single-token mutations of a good file and 300 random byte strings
    (seeded).  Not vacuous: most inputs must be rejected, and every accepted
    one must format back to a file that parses to the same circuit.
    """
    rng = np.random.default_rng(99)
    lines = GOOD.splitlines()
    texts = []
    for _ in range(300):
        mutated = list(lines)
        k = int(rng.integers(0, len(mutated)))
        toks = mutated[k].split()
        if toks:
            t = int(rng.integers(0, len(toks)))
            toks[t] = rng.choice(["0", "1", "2", "7", "-1", "99", "XOR", "AND", "INV", "EQW", "", "3.5"])
            mutated[k] = " ".join(toks)
        texts.append("\n".join(mutated) + "\n")
    texts += [
        bytes(rng.integers(0, 256, int(rng.integers(1, 80)), dtype=np.uint8)).decode("latin-1") for _ in range(300)
    ]
    rejected = accepted = 0
    for text in texts:
        try:
            c = parse_bristol_fashion(text)
        except BristolFormatError:
            rejected += 1
            continue
        accepted += 1
        again = parse_bristol_fashion(format_bristol_fashion(c))
        assert again.content_hash == c.content_hash
    assert rejected > 300 and rejected + accepted == len(texts)


def test_read_with_os_pathlike_and_str(bristol_dir):
    p = bristol_dir / "bristol_format" / "adder_32bit.txt"
    assert read_bristol_old(str(p)).content_hash == read_bristol_old(p).content_hash
    assert os.path.basename(read_bristol_old(p).name) == "adder_32bit"
