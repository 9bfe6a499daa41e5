"""The vectorized DPF/DCF against a from-the-paper reference in Python integers.

The reference below is written independently of ``fss``: AES comes straight
from ``cryptography``, the PRG and Convert follow the definitions in
``docs/fss.md`` ("The PRG of the trees"), Gen/Eval follow BGI16 Fig. 1 (DPF) and
BCGGIKR21 Fig. 1 (DCF) step by step (one key, one level, one bit at a time),
and the key bytes follow the table in ``docs/fss.md`` ("Key byte format").  Tests check that

* the library's PRG (whole-tree and path-only) equals the reference PRG;
* Gen from fixed root seeds produces byte-identical keys (known answers);
* Eval of keys made by the public, CSPRNG-seeded Gen equals reference Eval;
* reference shares reconstruct the function (so the reference is right).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from pairwise.fss import DCFKeyBatch, DPFKeyBatch, dcf_gen, dcf_gen_batch, dpf_gen
from pairwise.fss.dcf import _dcf_gen_from_roots
from pairwise.fss.dpf import _dpf_gen_from_roots
from pairwise.fss.prg import PathExpander, expand, expand_words
from pairwise.mpc.aes import FIXED_KEY, mmo_prg

M64 = (1 << 64) - 1
_ENC = Cipher(algorithms.AES(FIXED_KEY), modes.ECB()).encryptor()


# ----------------------------------------------------------------------------- reference


def ref_H(s: int, j: int) -> int:
    """pi(sigma(s) ^ j) ^ sigma(s); sigma(hi || lo) = (hi ^ lo) || hi; blocks little-endian."""
    lo, hi = s & M64, s >> 64
    sig = ((hi ^ lo) << 64) | hi
    y = int.from_bytes(_ENC.update((sig ^ j).to_bytes(16, "little")), "little")
    return y ^ sig


def ref_G(s: int):
    b0, b1, b2 = ref_H(s, 0), ref_H(s, 1), ref_H(s, 2)
    return b0 & ~1, b0 & 1, b1 & ~1, b1 & 1, b2 & M64, b2 >> 64


def ref_convert(s: int, l: int) -> int:
    return (s >> 64) % (1 << l)


def bit(x: int, n: int, i: int) -> int:
    """i-th bit of x, i = 0 the most significant of n bits."""
    return (x >> (n - 1 - i)) & 1


def ref_gen(kind: str, alpha: int, beta: int, n: int, l: int, roots: tuple[int, int], cmp: str = "lt"):
    """BGI16 / BCGGIKR21 Fig. 1 Gen; returns (key bytes of party 0, of party 1)."""
    mod = 1 << l
    s = list(roots)
    t = [0, 1]
    v_alpha = 0
    levels = []
    for i in range(n):
        a = bit(alpha, n, i)
        g = [ref_G(s[b]) for b in (0, 1)]
        sL = [g[b][0] for b in (0, 1)]
        tL = [g[b][1] for b in (0, 1)]
        sR = [g[b][2] for b in (0, 1)]
        tR = [g[b][3] for b in (0, 1)]
        vL = [g[b][4] % mod for b in (0, 1)]
        vR = [g[b][5] % mod for b in (0, 1)]
        if a == 0:
            keep, lose = "L", "R"
        else:
            keep, lose = "R", "L"
        s_k, s_l = (sL, sR) if keep == "L" else (sR, sL)
        v_k, v_l = (vL, vR) if keep == "L" else (vR, vL)
        t_k = tL if keep == "L" else tR
        s_cw = s_l[0] ^ s_l[1]
        sign1 = -1 if t[1] else 1
        v_cw = 0
        if kind == "dcf":
            v_cw = sign1 * (v_l[1] - v_l[0] - v_alpha)
            if (lose == "L" and cmp in ("lt", "le")) or (lose == "R" and cmp in ("gt", "ge")):
                v_cw += sign1 * beta
            v_cw %= mod
            v_alpha = (v_alpha - v_k[1] + v_k[0] + sign1 * v_cw) % mod
        t_cwL = tL[0] ^ tL[1] ^ a ^ 1
        t_cwR = tR[0] ^ tR[1] ^ a
        levels.append((s_cw, v_cw, t_cwL, t_cwR))
        t_cw_keep = t_cwL if keep == "L" else t_cwR
        for b in (0, 1):
            s[b] = s_k[b] ^ (s_cw if t[b] else 0)
        t = [t_k[b] ^ (t[b] & t_cw_keep) for b in (0, 1)]
    sign1 = -1 if t[1] else 1
    if kind == "dcf":
        leaf = beta if cmp in ("le", "ge") else 0
        cw_last = sign1 * (ref_convert(s[1], l) - ref_convert(s[0], l) - v_alpha + leaf) % mod
    else:
        cw_last = sign1 * (beta - ref_convert(s[0], l) + ref_convert(s[1], l)) % mod
    return tuple(ref_serialize(kind, b, n, l, roots[b], levels, cw_last) for b in (0, 1))


def ref_serialize(kind: str, party: int, n: int, l: int, seed: int, levels, cw_last: int) -> bytes:
    w = (l + 7) // 8
    out = bytearray([1, 1 if kind == "dpf" else 2, party, n, l])
    out += seed.to_bytes(16, "little")
    bits = 0
    for i, (s_cw, v_cw, tl, tr) in enumerate(levels):
        out += s_cw.to_bytes(16, "little")
        if kind == "dcf":
            out += v_cw.to_bytes(w, "little")
        bits |= tl << (2 * i) | tr << (2 * i + 1)
    out += bits.to_bytes((2 * n + 7) // 8, "little")
    out += cw_last.to_bytes(w, "little")
    return bytes(out)


def ref_parse(blob: bytes):
    ver, kind, party, n, l = blob[:5]
    assert ver == 1
    w = (l + 7) // 8
    pos = 5
    seed = int.from_bytes(blob[pos : pos + 16], "little")
    pos += 16
    levels = []
    for _ in range(n):
        s_cw = int.from_bytes(blob[pos : pos + 16], "little")
        pos += 16
        v_cw = 0
        if kind == 2:
            v_cw = int.from_bytes(blob[pos : pos + w], "little")
            pos += w
        levels.append([s_cw, v_cw])
    nb = (2 * n + 7) // 8
    bits = int.from_bytes(blob[pos : pos + nb], "little")
    pos += nb
    for i in range(n):
        levels[i] += [(bits >> (2 * i)) & 1, (bits >> (2 * i + 1)) & 1]
    cw_last = int.from_bytes(blob[pos : pos + w], "little")
    assert pos + w == len(blob)
    return kind, party, n, l, seed, levels, cw_last


def ref_eval(blob: bytes, x: int) -> int:
    """Eval of Fig. 1 (DPF or DCF) for one key at one point."""
    kind, b, n, l, s, levels, cw_last = ref_parse(blob)
    mod = 1 << l
    sign = -1 if b else 1
    t = b
    V = 0
    for i, (s_cw, v_cw, tcl, tcr) in enumerate(levels):
        sL, tL, sR, tR, vL, vR = ref_G(s)
        if t:
            sL, sR, tL, tR = sL ^ s_cw, sR ^ s_cw, tL ^ tcl, tR ^ tcr
        if bit(x, n, i) == 0:
            if kind == 2:
                V += sign * (vL % mod + t * v_cw)
            s, t = sL, tL
        else:
            if kind == 2:
                V += sign * (vR % mod + t * v_cw)
            s, t = sR, tR
    V += sign * (ref_convert(s, l) + t * cw_last)
    return V % mod


def truth(cmp: str, alpha: int, beta: int, l: int, x: int) -> int:
    hit = {"lt": x < alpha, "le": x <= alpha, "gt": x > alpha, "ge": x >= alpha, "eq": x == alpha}[cmp]
    return beta % (1 << l) if hit else 0


# ----------------------------------------------------------------------------- tests


def _np_blocks(ints):
    return np.array([[v & M64, v >> 64] for v in ints], dtype=np.uint64)


def test_prg_matches_reference():
    rng = random.Random(1)
    seeds = [rng.getrandbits(128) for _ in range(37)]
    blocks = mmo_prg(_np_blocks(seeds), 3)
    lo = np.array([s & M64 for s in seeds], dtype=np.uint64)
    hi = np.array([s >> 64 for s in seeds], dtype=np.uint64)
    words = expand_words(lo, hi, 3)
    sL, tL, sR, tR, vL, vR = expand(_np_blocks(seeds), True)
    for k, s in enumerate(seeds):
        want = [ref_H(s, j) for j in range(3)]
        assert [int(blocks[k, j, 0]) | int(blocks[k, j, 1]) << 64 for j in range(3)] == want
        assert [int(words[j][0][k]) | int(words[j][1][k]) << 64 for j in range(3)] == want
        g = ref_G(s)
        got = (
            int(sL[k, 0]) | int(sL[k, 1]) << 64,
            int(tL[k]),
            int(sR[k, 0]) | int(sR[k, 1]) << 64,
            int(tR[k]),
            int(vL[k]),
            int(vR[k]),
        )
        assert got == g


@pytest.mark.parametrize("values", [False, True])
def test_path_expander_matches_reference(values):
    rng = random.Random(2)
    seeds = [rng.getrandbits(128) & ~1 for _ in range(29)]
    lo = np.array([s & M64 for s in seeds], dtype=np.uint64)
    hi = np.array([s >> 64 for s in seeds], dtype=np.uint64)
    ex = PathExpander(len(seeds), values)
    xs = np.array([rng.getrandbits(1) for _ in seeds], dtype=np.uint64)
    for xbit in (0, 1, xs):
        xbool = None if isinstance(xbit, int) else xbit.astype(bool)
        c_lo, c_hi, v = ex.step(lo, hi, xbit, xbool)
        for k, s in enumerate(seeds):
            xb = xbit if isinstance(xbit, int) else int(xs[k])
            assert int(c_lo[k]) | int(c_hi[k]) << 64 == ref_H(s, xb)
            if values:
                b2 = ref_H(s, 2)
                assert int(v[k]) == (b2 >> 64 if xb else b2 & M64)
            else:
                assert v is None


GEN_CASES = [
    # (n, l, alpha, beta)
    (1, 1, 0, 1),
    (1, 1, 1, 1),
    (3, 5, 5, 17),
    (8, 8, 0, 255),
    (8, 8, 255, 3),
    (13, 20, 4097, 123456),
    (32, 32, 0xDEADBEEF, 1),
    (40, 64, 2**40 - 1, 2**64 - 5),
    (64, 33, 2**63 + 12345, 2**32 + 7),
    (64, 64, 0, 2**63),
]


@pytest.mark.parametrize("n,l,alpha,beta", GEN_CASES)
@pytest.mark.parametrize("cmp", ["lt", "le", "gt", "ge"])
def test_dcf_gen_known_answer_bytes(n, l, alpha, beta, cmp):
    rng = random.Random(f"{n},{l},{alpha},{cmp}")
    roots = (rng.getrandbits(128), rng.getrandbits(128))
    want0, want1 = ref_gen("dcf", alpha, beta, n, l, roots, cmp)
    npr = np.stack([_np_blocks([roots[0]]), _np_blocks([roots[1]])])  # (2, 1, 2)
    scw, vcw, tcw, fcw = _dcf_gen_from_roots(
        np.array([alpha], dtype=np.uint64), np.array([beta], dtype=np.uint64), n, l, cmp, npr
    )
    got0 = DCFKeyBatch(0, n, l, npr[0], scw, tcw, fcw, vcw).to_bytes_list()[0]
    got1 = DCFKeyBatch(1, n, l, npr[1], scw, tcw, fcw, vcw).to_bytes_list()[0]
    assert got0 == want0
    assert got1 == want1
    # and the reference Eval of these bytes is correct at a few points
    for x in {0, alpha, max(alpha - 1, 0), min(alpha + 1, 2**n - 1), 2**n - 1}:
        assert (ref_eval(want0, x) + ref_eval(want1, x)) % (1 << l) == truth(cmp, alpha, beta, l, x)


@pytest.mark.parametrize("n,l,alpha,beta", GEN_CASES)
def test_dpf_gen_known_answer_bytes(n, l, alpha, beta):
    rng = random.Random(f"dpf{n},{l},{alpha}")
    roots = (rng.getrandbits(128), rng.getrandbits(128))
    want0, want1 = ref_gen("dpf", alpha, beta, n, l, roots)
    npr = np.stack([_np_blocks([roots[0]]), _np_blocks([roots[1]])])
    scw, tcw, fcw = _dpf_gen_from_roots(
        np.array([alpha], dtype=np.uint64), np.array([beta], dtype=np.uint64), n, l, npr
    )
    assert DPFKeyBatch(0, n, l, npr[0], scw, tcw, fcw).to_bytes_list()[0] == want0
    assert DPFKeyBatch(1, n, l, npr[1], scw, tcw, fcw).to_bytes_list()[0] == want1
    for x in {0, alpha, max(alpha - 1, 0), min(alpha + 1, 2**n - 1), 2**n - 1}:
        assert (ref_eval(want0, x) + ref_eval(want1, x)) % (1 << l) == truth("eq", alpha, beta, l, x)


def test_batched_gen_matches_reference_per_key():
    """Vectorized Gen of many keys at once = reference Gen of each key with its roots."""
    rng = random.Random(3)
    n, l, K = 12, 16, 20
    alphas = [rng.getrandbits(n) for _ in range(K)]
    betas = [rng.getrandbits(l) for _ in range(K)]
    roots = [(rng.getrandbits(128), rng.getrandbits(128)) for _ in range(K)]
    npr = np.stack([_np_blocks([r[0] for r in roots]), _np_blocks([r[1] for r in roots])])
    scw, vcw, tcw, fcw = _dcf_gen_from_roots(
        np.array(alphas, dtype=np.uint64), np.array(betas, dtype=np.uint64), n, l, "lt", npr
    )
    b0 = DCFKeyBatch(0, n, l, npr[0], scw, tcw, fcw, vcw).to_bytes_list()
    b1 = DCFKeyBatch(1, n, l, npr[1], scw, tcw, fcw, vcw).to_bytes_list()
    for k in range(K):
        assert (b0[k], b1[k]) == ref_gen("dcf", alphas[k], betas[k], n, l, roots[k], "lt")


@pytest.mark.parametrize("n,l", [(5, 3), (32, 32), (64, 64), (64, 11)])
def test_library_eval_matches_reference_eval(n, l):
    rng = random.Random(f"eval{n},{l}")
    alpha = rng.getrandbits(n)
    beta = rng.getrandbits(l)
    for kind in ("dcf", "dpf"):
        k0, k1 = dcf_gen(alpha, beta, n, l) if kind == "dcf" else dpf_gen(alpha, beta, n, l)
        b0, b1 = k0.to_bytes(), k1.to_bytes()
        xs = [alpha, rng.getrandbits(n), rng.getrandbits(n), 0, 2**n - 1]
        for x in xs:
            assert k0.eval(x) == ref_eval(b0, x)
            assert k1.eval(x) == ref_eval(b1, x)
        many = k0.eval_many(np.array(xs, dtype=np.uint64))
        assert [int(v) for v in many] == [ref_eval(b0, x) for x in xs]


def test_batch_eval_per_key_points_matches_reference():
    rng = random.Random(4)
    n, l, K = 20, 24, 40
    alphas = [rng.getrandbits(n) for _ in range(K)]
    k0, k1 = dcf_gen_batch(alphas, 5, n, l, comparison="ge")
    xs = np.array([rng.getrandbits(n) if k % 3 else alphas[k] for k in range(K)], dtype=np.uint64)
    y0 = k0.eval(xs, chunk=7)
    blobs = k0.to_bytes_list()
    assert [int(v) for v in y0] == [ref_eval(blobs[k], int(xs[k])) for k in range(K)]
