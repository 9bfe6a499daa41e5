"""Client validation of the vdpf scheme, in process: both servers' checks on honest and malicious clients.

Both servers' halves run here (no network): each parses its key bundles,
evaluates them with the same verifier key and the digests are compared, as
the servers do over their channel (the network path is tested with real
processes in tests/system/test_ecdf_validation_processes.py).  References: Python-int
histograms of the honest clients' (x, weight).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairwise.fss import vdpf_gen_batch, vdpf_key_bytes
from pairwise.fss.keys import KIND_VDPF, key_layout
from pairwise.protocols.ecdf.shares import ShareParameterError
from pairwise.protocols.ecdf.uploader import make_series
from pairwise.protocols.ecdf.validation import (
    VERIFY_KEY_BYTES,
    ChunkCheck,
    accepted,
    layout_for,
    load_series,
    vdpf_client_keys,
)

NB, L = 5, 32
SIZE = 1 << NB


def both_servers(keys, series_meta, verify_key=None):
    """(accepted mask, {series: reconstructed histogram of the accepted clients}, reasons) of one upload chunk."""
    lay = layout_for(series_meta, NB, L)
    verify_key = verify_key or os.urandom(VERIFY_KEY_BYTES)
    K = len(next(iter(keys[0].values())))
    chunks, oks, reasons = [], [], {}
    for b in (0, 1):
        chunk, good, bad = ChunkCheck.parse(keys[b], layout=lay, party=b)
        chunk.evaluate(verify_key)
        ok = np.zeros(K, bool)
        ok[good] = True
        dig = np.zeros((K, 16), np.uint8)
        dig[good] = chunk.digests
        chunks.append((chunk, good, dig))
        oks.append(ok)
        reasons.update(bad)
    acc = accepted(chunks[0][2], chunks[1][2], oks[0], oks[1])
    hist = {}
    for chunk, good, _ in chunks:
        keep = np.array([good.index(i) for i in np.flatnonzero(acc)], dtype=np.intp)
        for s, v in chunk.take(keep).series().items():
            hist[s] = v.hist if s not in hist else (hist[s] + v.hist) & np.uint64((1 << L) - 1)
    return acc, hist, reasons


def reference(x, w, keep) -> np.ndarray:
    h = np.zeros(SIZE, dtype=object)
    for xi, wi, k in zip(x, w, keep):
        if k:
            h[xi] += int(wi)
    return np.array([v % (1 << L) for v in h], dtype=np.uint64)


def honest(seed, K=12, labels=False, probs=False):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, SIZE, K)
    y = rng.integers(0, 2, K) if labels or probs else None
    p = rng.random(K) if probs else None
    if probs:
        p[0], p[1] = 0.0, 1.0  # the ends of the weight range: w = 0 and w = 2^b
    series = make_series(y, p, prob_bits=3)
    keys = vdpf_client_keys(x, series, domain_bits=NB, output_bits=L)
    meta = {s: w for s, (_, w) in series.items()}
    return x, series, keys, meta


@pytest.mark.parametrize("kind", ["ecdf", "roc", "hl"])
def test_honest_clients_are_accepted_and_give_the_exact_histograms(kind):
    x, series, keys, meta = honest(1, labels=kind == "roc", probs=kind == "hl")
    acc, hist, reasons = both_servers(keys, meta)
    assert acc.all() and not reasons
    for s, (w, _) in series.items():
        ww = np.ones(x.size, dtype=np.int64) if w is None else w
        assert np.array_equal(hist[s], reference(x, ww, acc)), s
    if kind == "hl":
        assert set(hist) == {"pos", "neg", "e1", "e0"}
        assert np.array_equal(
            (hist["e1"] + hist["e0"]) & np.uint64(2**L - 1),
            np.uint64(8) * ((hist["pos"] + hist["neg"]) & np.uint64(2**L - 1)),
        )


def _replace(keys, s, i, bundles):
    for b in (0, 1):
        keys[b][s][i] = bundles[b]


def _vdpf(alpha, beta, bits):
    k0, k1 = vdpf_gen_batch([alpha], beta, bits, L)
    return k0.to_bytes_list()[0], k1.to_bytes_list()[0]


ATTACKS = {
    # name: (layout kind, series, bundle maker (x) -> (bundle for server 0, for server 1))
    "huge weight": ("ecdf", "all", lambda x: _vdpf(0, 2**31 - 1, NB)),
    "negative weight": ("ecdf", "all", lambda x: _vdpf(x, -569, NB)),
    "weight 0": ("ecdf", "all", lambda x: _vdpf(x, 0, NB)),
    "weight 2 in the ROC series": ("roc", "pos", lambda x: _vdpf(SIZE | x, 2, NB + 1)),
    "ROC label key of another domain": ("roc", "pos", lambda x: _vdpf(x, 1, NB)),
    "HL bit of weight 2": ("hl", "e1", None),
    "HL bits at another x": ("hl", "e1", None),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_malicious_client_is_rejected_alone(name):
    kind, s, make = ATTACKS[name]
    x, series, keys, meta = honest(2, labels=kind == "roc", probs=kind == "hl")
    bad = 4
    if make is not None:
        _replace(keys, s, bad, make(int(x[bad])))
    else:  # e1 bundles: b + 1 keys at (bit, x); one of them with weight 2, or all at another x
        lay = layout_for(meta, NB, L)
        count = lay.reads["e1"].count
        other = (int(x[bad]) + 1) % SIZE
        parts = [
            _vdpf(
                SIZE | (other if name.endswith("another x") else int(x[bad])),
                2 if (name.endswith("weight 2") and j == 0) else 1,
                NB + 1,
            )
            for j in range(count)
        ]
        _replace(keys, s, bad, (b"".join(p[0] for p in parts), b"".join(p[1] for p in parts)))
    acc, hist, reasons = both_servers(keys, meta)
    assert acc.tolist() == [i != bad for i in range(x.size)]
    for t, (w, _) in series.items():  # the release is the honest clients' alone
        ww = np.ones(x.size, dtype=np.int64) if w is None else w
        assert np.array_equal(hist[t], reference(x, ww, acc)), t


N_LAYOUT = key_layout(KIND_VDPF, NB, L)
CWS = [f"s_cw[{i + 1}]" for i in range(NB)] + ["t_cw", "cw_out", "cs"]


def _cw_bytes(name):
    lay = N_LAYOUT
    if name.startswith("s_cw"):
        i = int(name[5:-1]) - 1
        return range(lay.levels_offset + 16 * i, lay.levels_offset + 16 * (i + 1))
    return {
        "t_cw": range(lay.bits_offset, lay.bits_offset + lay.bits_bytes),
        "cw_out": range(lay.final_offset, lay.final_offset + lay.value_bytes),
        "cs": range(lay.check_offset, lay.check_offset + 64),
    }[name]


@pytest.mark.parametrize("cw", CWS)
def test_each_correction_word_bit_flipped_is_rejected(cw):
    """Flip one bit (a few positions per CW) in both halves of one client's key; that client alone is rejected."""
    x, series, keys, meta = honest(3)
    r = _cw_bytes(cw)
    positions = sorted({r.start, r.start + len(r) // 2, r.stop - 1})
    for byte in positions:
        for bit in (1, 6):  # bit 0 of a seed correction is refused by the format; these reach the check
            ks = [{s: list(v) for s, v in keys[b].items()} for b in (0, 1)]
            for b in (0, 1):
                m = bytearray(ks[b]["all"][3])
                m[byte] ^= 1 << bit
                ks[b]["all"][3] = bytes(m)
            acc, hist, _ = both_servers(ks, meta)
            assert acc.tolist() == [i != 3 for i in range(x.size)], (cw, byte, bit)
            assert np.array_equal(hist["all"], reference(x, np.ones(x.size), acc))


def test_mixed_halves_truncated_extended_and_misplaced_bundles_are_rejected():
    x, series, keys, meta = honest(4, labels=True)
    keys[1]["pos"][0] = keys[1]["pos"][1]  # server 1 gets another client's half
    keys[0]["pos"][2] = keys[0]["pos"][2][:-1]  # truncated
    keys[1]["pos"][3] = keys[1]["pos"][3] + b"\x00"  # extended
    keys[0]["neg"][5] = keys[0]["pos"][5]  # a bundle where the layout says the series has none
    acc, hist, reasons = both_servers(keys, meta)
    assert np.flatnonzero(~acc).tolist() == [0, 2, 3, 5]  # client 1 still holds both of its own halves
    assert "expected 0" in reasons[5] and "read from the keys of pos" in reasons[5]
    assert "key bundle truncated" in reasons[2] and "with 1 trailing bytes" in reasons[3]
    for s, (w, _) in series.items():
        assert np.array_equal(hist[s], reference(x, w, acc))


def test_layouts_refuse_what_the_scheme_cannot_verify():
    with pytest.raises(ShareParameterError, match="domain bits"):
        layout_for({"all": 1}, 21, 32)
    with pytest.raises(ShareParameterError, match="supports the series"):
        layout_for({"all": 2}, 5, 32)
    with pytest.raises(ShareParameterError, match="supports the series"):
        layout_for({"pos": 1, "neg": 1, "e1": 8}, 5, 32)
    with pytest.raises(ShareParameterError, match="2\\^b"):
        layout_for({"pos": 1, "neg": 1, "e1": 6, "e0": 6}, 5, 32)
    lay = layout_for({"pos": 1, "neg": 1, "e1": 8, "e0": 8}, 5, 32)
    assert lay.blob_bytes("pos") == vdpf_key_bytes(6, 32) and lay.blob_bytes("neg") == 0
    assert lay.blob_bytes("e1") == 4 * vdpf_key_bytes(6, 32) and lay.owners == ["pos", "e1"]


def test_stored_bundles_load_into_the_same_series():
    x, series, keys, meta = honest(5, probs=True)
    lay = layout_for(meta, NB, L)
    chunk, good, _ = ChunkCheck.parse(keys[0], layout=lay, party=0)
    chunk.evaluate(os.urandom(VERIFY_KEY_BYTES))
    loaded = load_series(keys[0], layout=lay, party=0)
    for s, v in chunk.series().items():
        assert np.array_equal(loaded[s].hist, v.hist) and len(loaded[s]) == x.size
    pts = np.array([0, 7, SIZE - 1])
    assert np.array_equal(
        loaded["e1"].cumulative_shares(pts), np.cumsum(loaded["e1"].hist, dtype=np.uint64)[pts] & np.uint64(2**L - 1)
    )
    with pytest.raises(ShareParameterError, match="row subset"):
        loaded["e1"].take(np.arange(3))


# --------------------------------------------------------------------------- golden vectors
VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "ecdf_vdpf_bundles_v1.json"


def simulated_bundle_vectors(seed: int = 20261127) -> dict:
    """Known answers for the vdpf bundle layout and the servers' digests, from a *seeded* generator.

    Three Hosmer-Lemeshow clients (x, label, weight in [0, 4]) on a 4-bit
    domain: every key from fixed root seeds (simulation only), each
    server's bundles, digests under a fixed verifier key, histogram shares.
    """
    from pairwise.fss import VDPFKeyBatch
    from pairwise.fss.vdpf import _vdpf_gen_from_roots

    rng = np.random.default_rng(seed)
    n, l, S = 4, 32, 4
    series = {"pos": 1, "neg": 1, "e1": S, "e0": S}
    lay = layout_for(series, n, l)
    clients = [(5, 1, 4), (0, 0, 0), (15, 1, 3)]
    bundles: list[dict[str, list[str]]] = [{s: [] for s in series} for _ in (0, 1)]
    for x, y, w in clients:
        extra = int(w == S)
        low = w - extra
        points = {"pos": [(y << n) | x], "e1": [(((low >> j) & 1) << n) | x for j in range(2)] + [(extra << n) | x]}
        for s in series:
            if lay.reads[s].source != s:
                for b in (0, 1):
                    bundles[b][s].append("")
                continue
            raw = [b"", b""]
            for alpha in points[s]:
                roots = rng.integers(0, 2**64, (2, 1, 2), dtype=np.uint64)
                scw, tcw, fcw, ccw = _vdpf_gen_from_roots(
                    np.array([alpha], np.uint64), np.array([1], np.uint64), n + 1, l, roots
                )
                for b in (0, 1):
                    raw[b] += VDPFKeyBatch(b, n + 1, l, roots[b], scw, tcw, fcw, ccw=ccw).to_bytes_list()[0]
            for b in (0, 1):
                bundles[b][s].append(raw[b].hex())
    key = bytes(range(VERIFY_KEY_BYTES))
    out = {
        "format": "pairwise ECDF vdpf key bundles (protocols/ecdf/validation.py), layout 1",
        "seed": seed,
        "domain_bits": n,
        "output_bits": l,
        "series": series,
        "clients": [list(c) for c in clients],
        "verify_key": key.hex(),
        "bundles": bundles,
        "digests": None,
        "histograms": [],
    }
    for b in (0, 1):
        chunk, good, bad = ChunkCheck.parse(
            {s: [bytes.fromhex(h) for h in v] for s, v in bundles[b].items()}, layout=lay, party=b
        )
        chunk.evaluate(key)
        digests = [d.tobytes().hex() for d in chunk.digests]
        assert not bad and (out["digests"] in (None, digests))  # an honest client: equal digests at both servers
        out["digests"] = digests
        out["histograms"].append({s: [str(int(v)) for v in sh.hist] for s, sh in chunk.series().items()})
    return out


def test_bundle_golden_vectors_parse_and_give_their_digests_and_histograms():
    vec = json.loads(VECTORS.read_text())
    n, l = vec["domain_bits"], vec["output_bits"]
    lay = layout_for(vec["series"], n, l)
    key = bytes.fromhex(vec["verify_key"])
    hists = []
    for b in (0, 1):
        chunk, good, bad = ChunkCheck.parse(
            {s: [bytes.fromhex(h) for h in v] for s, v in vec["bundles"][b].items()}, layout=lay, party=b
        )
        chunk.evaluate(key)
        assert not bad and [d.tobytes().hex() for d in chunk.digests] == vec["digests"]
        got = {s: [str(int(v)) for v in sh.hist] for s, sh in chunk.series().items()}
        assert got == vec["histograms"][b]
        hists.append({s: np.array([int(v) for v in h], dtype=object) for s, h in got.items()})
    for s in vec["series"]:  # the two servers' shares add up to the clients' weighted histogram
        want = [0] * (1 << n)
        for x, y, w in vec["clients"]:
            want[x] += {"pos": y, "neg": 1 - y, "e1": w, "e0": 4 - w}[s]
        assert [int(v) % (1 << l) for v in hists[0][s] + hists[1][s]] == want, s


def test_bundle_golden_vectors_regenerate_from_their_seed():
    vec = json.loads(VECTORS.read_text())
    assert simulated_bundle_vectors(vec["seed"]) == vec


# --------------------------------------------------------------------------- any deviation
def _contribution(keys, i, lay):
    """Client i's reconstructed series vectors (Python ints mod 2^L), from its two bundles alone."""
    from pairwise.fss import VDPFKeyBatch, reconstruct

    out = {}
    for s, _ in lay.series:
        r = lay.reads[s]
        size = vdpf_key_bytes(r.bits, L)
        vec = np.zeros(SIZE, dtype=object)
        for j in range(r.count):
            k0 = VDPFKeyBatch.from_bytes_list([keys[0][r.source][i][j * size : (j + 1) * size]])
            k1 = VDPFKeyBatch.from_bytes_list([keys[1][r.source][i][j * size : (j + 1) * size]])
            y = reconstruct(k0.full_domain()[0], k1.full_domain()[0], L)
            part = y if r.half is None else y[r.half * SIZE : (r.half + 1) * SIZE]
            vec += r.coefs[j] * np.array([int(v) for v in part], dtype=object)
        out[s] = [int(v) % (1 << L) for v in vec]
    return out


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_whatever_a_client_sends_an_accepted_client_adds_one_point_with_an_admissible_weight(data):
    """Random deviations of one client's bundles (bit flips in one or both halves, truncation, extension,
    another client's bytes, all series of a Hosmer-Lemeshow layout): either that client is rejected, or
    what it adds is w_s at one x for every series s, with w in the series' public range -- and every
    other client is accepted."""
    x, series, keys, meta = honest(data.draw(st.integers(0, 2**16)), K=4, probs=True)
    lay = layout_for(meta, NB, L)
    bad = data.draw(st.integers(0, 3))
    for _ in range(data.draw(st.integers(1, 3))):
        s = data.draw(st.sampled_from(lay.owners))
        kind = data.draw(st.sampled_from(["flip one", "flip both", "truncate", "extend", "swap"]))
        sides = (0, 1) if kind == "flip both" else (data.draw(st.integers(0, 1)),)
        blob = keys[sides[0]][s][bad]
        if not blob:  # truncated to nothing by an earlier step
            continue
        pos = data.draw(st.integers(0, len(blob) - 1))
        bit = data.draw(st.integers(0, 7))
        for b in sides:
            old = keys[b][s][bad]
            if kind.startswith("flip"):
                if pos < len(old):  # (the other half may be shorter after an earlier truncation)
                    keys[b][s][bad] = old[:pos] + bytes([old[pos] ^ (1 << bit)]) + old[pos + 1 :]
            elif kind == "truncate":
                keys[b][s][bad] = old[:pos]
            elif kind == "extend":
                keys[b][s][bad] = old + bytes([bit])
            else:
                keys[b][s][bad] = keys[b][s][(bad + 1) % 4]
    acc, _, _ = both_servers(keys, meta)
    assert all(acc[i] for i in range(4) if i != bad)  # honest clients are never rejected
    if acc[bad]:
        c = _contribution(keys, bad, lay)
        xs = {j for s in c for j, v in enumerate(c[s]) if v}
        assert len(xs) <= 1, c  # one x for every series
        w = {s: max(c[s]) for s in c}
        assert w["pos"] + w["neg"] == 1 and w["e1"] + w["e0"] == 8 and 0 <= w["e1"] <= 8, w
