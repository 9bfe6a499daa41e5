"""Random input groups and stream-derived garbler labels in the Yao runtime (mpc.twopc).

Garbler input labels come from the session's label stream (the evaluator holds
the *active* labels, AES-128-CTR blocks under the garbler's label key); groups
named in ``random=`` are drawn by their owner inside the runtime: the garbler's
from ``os.urandom`` (labels from the stream, nothing sent), the evaluator's as
the choice bits of random correlated OTs (no correction bits).  References:
``Circuit.evaluate_bits`` on the bits the runtime reports, ``cryptography``'s
AES-CTR for the label stream, byte counts of the wire format, and two-sample
tests of the parties' views (alpha stated where used).
"""

from __future__ import annotations

import types

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from scipy import stats

import pairwise.mpc.iknp as iknp
import pairwise.mpc.twopc as twopc
from pairwise.circuits.builder import Builder, Int
from pairwise.circuits.ir import EVALUATOR, GARBLER, Circuit, CircuitError
from pairwise.mpc.channel import HEADER_BYTES
from pairwise.mpc.garble import Evaluator
from pairwise.mpc.twopc import ExecutionMismatch
from tests.support.twopc import EXEC_HEADER, Pair

W = 8


def mixed_circuit() -> Circuit:
    """x, rx (garbler), y, ry (evaluator), 8 bits each; outputs that depend on all four (the test knows them all)."""
    b = Builder("random_mix")
    x, rx = b.input("x", W, GARBLER), b.input("rx", W, GARBLER)
    y, ry = b.input("y", W, EVALUATOR), b.input("ry", W, EVALUATOR)
    b.output("sum", x + rx + y + ry)
    b.output("prod", (x ^ ry) * (y ^ rx))
    b.output("lt", rx < ry)
    return b.build()


def masked_circuit(random_party) -> Circuit:
    """out = x ^ (x & y): the owner's random bits r enter AND gates, (v & r) ^ (v & ~r) = v, and cancel.

    The outputs do not depend on r, so the other party's view must not either.
    """
    b = Builder(f"masked_{random_party.value}")
    x, y = b.input("x", W, GARBLER), b.input("y", W, EVALUATOR)
    r = b.input("rx" if random_party == GARBLER else "ry", W, random_party)
    v = x if random_party == GARBLER else y
    bits = []
    for i in range(W):
        through = b.xor(b.and_(v.bits[i], r.bits[i]), b.and_(v.bits[i], b.inv(r.bits[i])))  # = v_i, via r_i
        bits.append(b.xor(through, b.and_(x.bits[i], y.bits[i])))
    b.output("out", Int(b, bits))
    return b.build()


def leaky_circuit(random_party) -> Circuit:
    """Like masked_circuit, but the output is r itself: the negative control of the view tests."""
    b = Builder(f"leaky_{random_party.value}")
    b.input("x", W, GARBLER), b.input("y", W, EVALUATOR)
    r = b.input("rx" if random_party == GARBLER else "ry", W, random_party)
    b.output("out", r)
    return b.build()


def bits(rng, batch: int) -> np.ndarray:
    return rng.integers(0, 2, size=(batch, W)).astype(bool)


@pytest.fixture(scope="module")
def rpair():
    p = Pair(transcript=True, ot_batch=1024)
    yield p
    p.close()


# --------------------------------------------------------------------------- correctness


@pytest.mark.parametrize("batch", [1, 37])
def test_random_groups_exact_against_plaintext(rpair, batch):
    c = mixed_circuit()
    rng = np.random.default_rng(batch)
    x, y = bits(rng, batch), bits(rng, batch)
    rg, re_ = rpair.run(c, {"x": x}, {"y": y}, random=("rx", "ry"))
    assert set(rg.random_bits) == {"rx"} and set(re_.random_bits) == {"ry"}  # each party sees only its own
    rx, ry = rg.random_bits["rx"], re_.random_bits["ry"]
    assert rx.shape == ry.shape == (batch, W) and rx.dtype == ry.dtype == np.bool_
    want = c.evaluate_bits([x, rx, y, ry])
    for got in (rg.output_bits, re_.output_bits):
        assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_random_bits_are_fresh_and_balanced(rpair):
    """4000 random bits per party and execution: each share of ones lies in [0.45, 0.55] (fails w.p. < 1e-9)."""
    c = mixed_circuit()
    rng = np.random.default_rng(3)
    seen = []
    for _ in range(2):
        rg, re_ = rpair.run(c, {"x": bits(rng, 500)}, {"y": bits(rng, 500)}, random=("rx", "ry"))
        for r in (rg.random_bits["rx"], re_.random_bits["ry"]):
            assert 0.45 < r.mean() < 0.55
            seen.append(r)
    assert not np.array_equal(seen[0], seen[2]) and not np.array_equal(seen[1], seen[3])
    assert not np.array_equal(seen[0], seen[1])


def test_garbler_labels_are_the_aes_ctr_label_stream_never_rewound(monkeypatch):
    """The evaluator's labels of the garbler's wires are the AES-128-CTR keystream under the garbler's label key
    (its frame right after the hello), block after block across executions: fresh labels every execution."""
    c = mixed_circuit()
    labels = []

    class Recording(Evaluator):
        def evaluate(self, active_inputs, tables):
            labels.append(np.array(active_inputs))
            return super().evaluate(active_inputs, tables)

    monkeypatch.setattr(twopc.session, "Evaluator", Recording)
    p = Pair(transcript=True, ot_batch=1024)
    try:
        key = bytes(p.garbler_channel.sent[1])  # hello, then the label key
        assert len(key) == 16 and key != bytes(16)
        n_g = sum(g.width for g in c.groups_of(GARBLER))
        gw = np.concatenate([g.wires for g in c.groups_of(GARBLER)])
        rng = np.random.default_rng(4)
        batches = (5, 1, 7)
        for x in batches:
            p.run(c, {"x": bits(rng, x)}, {"y": bits(rng, x)}, random=("rx", "ry"))
        ref = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor().update(bytes(16 * n_g * sum(batches)))
        blocks = np.frombuffer(ref, dtype="<u8").reshape(-1, 2)
        pos = 0
        for lab, batch in zip(labels, batches):
            want = np.concatenate(
                [
                    blocks[pos + g0 * batch : pos + (g0 + g.width) * batch].reshape(g.width, batch, 2)
                    for g0, g in zip((0, W), c.groups_of(GARBLER))
                ]
            )
            assert np.array_equal(lab[gw], want)
            pos += n_g * batch
        assert len({lab[gw].tobytes() for lab in labels}) == 3
    finally:
        p.close()


# --------------------------------------------------------------------------- bytes on the wire


def test_random_bits_cost_no_bytes(rpair):
    """Same circuit, same batch: rx/ry as random groups vs passed as ordinary inputs."""
    c = mixed_circuit()
    batch = 64
    rng = np.random.default_rng(5)
    x, y, r1, r2 = (bits(rng, batch) for _ in range(4))
    ev = rpair.evaluator.cot
    b0 = ev.batches
    rg, re_ = rpair.run(c, {"x": x, "rx": r1}, {"y": y, "ry": r2})
    b1 = ev.batches
    rg2, re2 = rpair.run(c, {"x": x}, {"y": y}, random=("rx", "ry"))
    b2 = ev.batches
    n_out = sum(g.width for g in c.outputs)
    tables = 32 * c.n_and * batch
    dec = -(-n_out * batch // 8)
    for r in (rg, rg2):  # the garbler: header + tables + decoding bits, whatever its input bits
        assert r.bytes_sent - HEADER_BYTES * r.messages_sent == EXEC_HEADER.size + tables + dec
    # an IKNP batch in between puts d in a frame of its own
    iknp_bytes = lambda k: k * (HEADER_BYTES + 16 + 16 * ev.batch_size) + (HEADER_BYTES if k else 0)  # noqa: E731
    out_bits = HEADER_BYTES + -(-n_out * batch // 8)
    # the evaluator: d bits for y and ry before; for y only now (ry are COT choice bits)
    assert re_.bytes_sent == EXEC_HEADER.size + HEADER_BYTES + iknp_bytes(b1 - b0) + 2 * W * batch // 8 + out_bits
    assert re2.bytes_sent == EXEC_HEADER.size + HEADER_BYTES + iknp_bytes(b2 - b1) + W * batch // 8 + out_bits


def test_only_random_groups_needs_batch_and_sends_no_correction(rpair):
    c = leaky_circuit(EVALUATOR)  # groups x, y, ry; make x and y random as well: nobody feeds anything
    e_cot = rpair.evaluator.cot
    with pytest.raises(CircuitError, match="batch="):
        rpair.garbler.run(c, {}, random=("x", "y", "ry"))
    f0e = len(rpair.evaluator_channel.sent)
    b0 = e_cot.batches
    rg, re_ = rpair.run(c, None, None, random=("x", "y", "ry"), batch=9)
    new = rpair.evaluator_channel.sent[f0e:]
    # header, IKNP batches if the pool ran dry, the output bits: no d frame for the 2 * 8 * 9 random bits
    assert len(new) == 1 + (e_cot.batches - b0) + 1
    assert np.array_equal(rg.output_bits[0], re_.random_bits["ry"]) and rg.outputs is not None


# --------------------------------------------------------------------------- mismatches and bad calls


def test_random_group_sets_must_match_on_both_sides():
    c = mixed_circuit()
    rng = np.random.default_rng(6)
    p = Pair(transcript=True, ot_batch=1024)
    try:
        p.run(c, {"x": bits(rng, 3)}, {"y": bits(rng, 3)}, random=("rx", "ry"))  # the COT pool is filled
        f0g, f0e = len(p.garbler_channel.sent), len(p.evaluator_channel.sent)
        g, e = p.run_both(
            c,
            {"x": bits(rng, 3)},
            c,
            {"y": bits(rng, 3), "ry": bits(rng, 3)},
            g_kw={"random": ("rx", "ry")},
            e_kw={"random": ("rx",)},
        )
        for ok, exc in (g, e):
            assert not ok and isinstance(exc, ExecutionMismatch) and "random input groups" in str(exc)
        # the evaluator's request, the garbler's header alone: no label, no table
        assert len(p.garbler_channel.sent) == f0g + 1 and len(p.garbler_channel.sent[-1]) == EXEC_HEADER.size
        assert len(p.evaluator_channel.sent) == f0e + 1
    finally:
        p.close()


@pytest.mark.parametrize(
    "inputs, random, message",
    [
        ({"x": [1], "rx": [2]}, ("rx", "ry"), "random input groups"),
        ({"x": [1]}, ("rz",), "not inputs"),
        ({"x": [1]}, ("rx", "rx"), "named twice"),
    ],
)
def test_bad_random_arguments_raise_before_any_byte(rpair, inputs, random, message):
    c = mixed_circuit()
    sent = rpair.garbler_channel.bytes_sent
    with pytest.raises(CircuitError, match=message):
        rpair.garbler.run(c, inputs, random=random)
    assert rpair.garbler_channel.bytes_sent == sent


# --------------------------------------------------------------------------- the views do not depend on r

#: Family-wise error rate of each view test (Bonferroni over its features).
ALPHA = 1e-6


def _max_z(group0: np.ndarray, group1: np.ndarray) -> tuple[float, float]:
    """Largest two-proportion |z| over the feature columns of two (N, F) bool samples, and its Bonferroni bound."""
    p0, p1 = group0.mean(axis=0), group1.mean(axis=0)
    n0, n1 = group0.shape[0], group1.shape[0]
    pool = (p0 * n0 + p1 * n1) / (n0 + n1)
    var = pool * (1 - pool) * (1 / n0 + 1 / n1)
    z = np.where(var > 0, np.abs(p0 - p1) / np.sqrt(np.where(var > 0, var, 1)), 0.0)
    return float(z.max()), float(stats.norm.isf(ALPHA / (2 * group0.shape[1])))


def _evaluator_view(pair, circuit: Circuit, monkeypatch, r_value: bool, reps: int, batch: int) -> np.ndarray:
    """(reps * batch, F) bool: per instance, what the evaluator sees with the garbler's random bits all = r_value.

    Features: the permute bit of its label on every wire, every bit of the instance's tables, the decoding
    bits, its outputs.
    """
    recs = []

    class Recording(Evaluator):
        def __init__(self, *a, **kw):
            super().__init__(*a, record_wires=True, **kw)
            recs.append(self)

    monkeypatch.setattr(twopc.session, "Evaluator", Recording)
    pair.evaluator._shapes.clear()  # (the session keeps one Evaluator per shape: make it a Recording)
    monkeypatch.setattr(twopc.session, "urandom_bits", lambda b, w: np.full((b, w), r_value, bool))
    rng = np.random.default_rng()
    n_out = sum(g.width for g in circuit.outputs)
    rows = []
    for _ in range(reps):
        f0 = len(pair.garbler_channel.sent)
        _, re_ = pair.run(circuit, {"x": bits(rng, batch)}, {"y": bits(rng, batch)}, random=("rx",), output="evaluator")
        frames = pair.garbler_channel.sent[f0:]
        stream = np.frombuffer(b"".join(frames)[EXEC_HEADER.size :], dtype=np.uint8)  # after the garbler's header
        n_tab = 32 * circuit.n_and * batch
        words = stream[:n_tab].view("<u8")
        # one chunk (batch <= chunk): segments (2, 2, k, batch) per AND level, in order: instance n is column n
        segs, pos = [], 0
        for lv in circuit.levels:
            if lv.n_and:
                segs.append(words[pos : pos + 4 * lv.n_and * batch].reshape(-1, batch))
                pos += 4 * lv.n_and * batch
        words_n = np.concatenate(segs) if segs else np.zeros((0, batch), "<u8")  # (4 * n_and, batch)
        tab = np.unpackbits(words_n.T.copy().view(np.uint8), axis=1).astype(bool)
        dec = np.unpackbits(stream[n_tab:], count=n_out * batch, bitorder="little").reshape(n_out, batch).T
        lab = (recs[-1].wire_labels[..., 0] & np.uint64(1)).astype(bool)  # (n_wires, batch)
        outs = np.concatenate(re_.output_bits, axis=1)
        rows.append(np.concatenate([lab.T, tab, dec, outs], axis=1))
    return np.concatenate(rows)


@pytest.mark.parametrize("leaky", [False, True], ids=["masked", "negative-control"])
def test_evaluator_view_same_for_garbler_random_bits_0_and_1(rpair, monkeypatch, leaky):
    """Two-sample test (Bonferroni, alpha = 1e-6) of the evaluator's view with rx = 0...0 vs rx = 1...1.

    On masked_circuit (outputs independent of rx) no feature may differ; the negative control
    (output = rx) shows that the same test rejects when the view depends on rx.
    """
    c = leaky_circuit(GARBLER) if leaky else masked_circuit(GARBLER)
    v0 = _evaluator_view(rpair, c, monkeypatch, False, reps=4, batch=256)
    v1 = _evaluator_view(rpair, c, monkeypatch, True, reps=4, batch=256)
    z, bound = _max_z(v0, v1)
    if leaky:
        assert z > bound
    else:
        assert z < bound, (z, bound)


def test_garbler_header_is_the_same_for_any_inputs_and_random_bits(rpair, monkeypatch):
    """The header that opens the garbler's stream carries no input: the same for any x and rx (offset aside)."""
    c = masked_circuit(GARBLER)
    heads = []
    for r_value, xv in ((False, 0), (True, 1), (True, 0)):
        monkeypatch.setattr(twopc.session, "urandom_bits", lambda b, w, v=r_value: np.full((b, w), v, bool))
        f0 = len(rpair.garbler_channel.sent)
        rpair.run(c, {"x": np.full((3, W), bool(xv))}, {"y": np.zeros((3, W), bool)}, random=("rx",))
        h = list(EXEC_HEADER.unpack_from(rpair.garbler_channel.sent[f0]))
        h[5] = 0  # the instance offset advances per execution
        heads.append(h)
    assert heads[0] == heads[1] == heads[2] and heads[0][1].hex() == c.content_hash


def _garbler_view(pair, circuit: Circuit, monkeypatch, r_value: bool, reps: int) -> np.ndarray:
    """(reps, F) bool: per execution (batch 16, one IKNP batch of 256 COTs each), what the garbler receives
    and learns with the evaluator's COT choice bits all = r_value: every bit of the evaluator's frames
    (header, IKNP matrix, d bits, output permute bits) and its outputs."""
    zero_or_one = b"\xff" if r_value else b"\x00"
    monkeypatch.setattr(iknp, "os", types.SimpleNamespace(urandom=lambda n: zero_or_one * n))
    rng = np.random.default_rng()
    rows = []
    for _ in range(reps):
        f0 = len(pair.evaluator_channel.sent)
        rg, _ = pair.run(circuit, {"x": bits(rng, 16)}, {"y": bits(rng, 16)}, random=("ry",), output="garbler")
        frames = [bytearray(f) for f in pair.evaluator_channel.sent[f0:]]
        assert len(frames[1]) == 16 + 16 * 256  # the execution's IKNP batch: (batch number, m), 128 x 256 bits
        frames[0][60:68] = bytes(8)  # counters aside: the instance offset of the execution header,
        frames[1][:8] = bytes(8)  # and the IKNP batch number
        raw = np.frombuffer(b"".join(frames), dtype=np.uint8)
        rows.append(np.concatenate([np.unpackbits(raw).astype(bool), np.concatenate(rg.output_bits, axis=1).ravel()]))
    lens = {r.size for r in rows}
    assert len(lens) == 1  # same frame sizes whatever the bits
    return np.stack(rows)


@pytest.mark.parametrize("leaky", [False, True], ids=["masked", "negative-control"])
def test_garbler_view_same_for_evaluator_random_bits_0_and_1(monkeypatch, leaky):
    """Two-sample test (Bonferroni, alpha = 1e-6) of the garbler's view with ry = 0...0 vs 1...1 (forced COT choice bits)."""
    c = leaky_circuit(EVALUATOR) if leaky else masked_circuit(EVALUATOR)
    p = Pair(transcript=True, ot_batch=256)  # 16 instances x 16 evaluator bits = one IKNP batch per execution
    try:
        v0 = _garbler_view(p, c, monkeypatch, False, reps=150)
        v1 = _garbler_view(p, c, monkeypatch, True, reps=150)
    finally:
        p.close()
    z, bound = _max_z(v0, v1)
    if leaky:
        assert z > bound
    else:
        assert z < bound, (z, bound)
