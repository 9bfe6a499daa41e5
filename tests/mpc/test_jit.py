"""Tests of mpc.jit: the compiled one-instance path gives the numpy program's tables and labels, bit for bit.

References: the numpy program of mpc.garble (itself checked gate by gate against
mpc.halfgates), plaintext evaluation (Circuit.evaluate_bits) and cryptography's AES.
With the compiled path on by default, the numpy one-instance program (still what a
one-instance tail chunk, a wide level and `pairwise 2pc` run) is exercised here, by the
ENABLED=False side of every comparison, which is also checked against plaintext.

Tests that start processes are in tests/system/test_jit_processes.py.
"""

from __future__ import annotations

import logging
import os
import sys

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from pairwise.circuits.ir import AND, EVALUATOR, GARBLER, INV, XOR, Circuit, InputGroup, OutputGroup
from pairwise.circuits.kernels import build_kernel
from pairwise.mpc import garble, jit
from pairwise.mpc.garble import Evaluator, GarbleError, Garbler, decode
from pairwise.mpc.garble import garbler as garbler_module
from pairwise.mpc.garble import program as program_module
from tests.support.bristol import BRISTOL_DIR
from tests.support.garble import random_bits, random_circuit

pytestmark = pytest.mark.skipif(not jit.ready(), reason="numba is not available")


def _xor_only() -> Circuit:
    """Two 3-bit inputs, outputs a ^ b and ~a: no AND gate at all."""
    op = np.array([XOR, XOR, XOR, INV, INV, INV])
    in0 = np.array([0, 1, 2, 0, 1, 2])
    in1 = np.array([3, 4, 5, 0, 0, 0])
    out = np.arange(6, 12)
    return Circuit(
        12,
        op,
        in0,
        in1,
        out,
        (InputGroup("a", GARBLER, np.arange(3)), InputGroup("b", EVALUATOR, np.arange(3, 6))),
        (OutputGroup("x", out[:3]), OutputGroup("n", out[3:])),
        name="xor-only",
    )


def _one_and() -> Circuit:
    """out = ~(a & b) ^ a: an AND whose output feeds an INV and a XOR in the level after it."""
    op = np.array([AND, INV, XOR])
    in0 = np.array([0, 2, 3])
    in1 = np.array([1, 0, 0])
    out = np.array([2, 3, 4])
    return Circuit(
        5,
        op,
        in0,
        in1,
        out,
        (InputGroup("a", GARBLER, np.array([0])), InputGroup("b", EVALUATOR, np.array([1]))),
        (OutputGroup("o", np.array([4])),),
        name="one-and",
    )


def _circuits():
    out = [
        ("xor-only", _xor_only),
        ("one-and", _one_and),
        ("gini16", lambda: build_kernel("gini", 16)),
        ("kendall8-noise", lambda: build_kernel("kendall", 8, True)),
        ("random", lambda: random_circuit(11, n_gates=200)),
    ]
    if BRISTOL_DIR.is_dir():
        from pairwise.circuits.bristol import read_bristol_fashion

        out.append(("aes128", lambda: read_bristol_fashion(BRISTOL_DIR / "aes_128.txt")))
    return out


def _run(monkeypatch, compiled: bool, c: Circuit, batch: int, seed: int, **kw):
    """Garble and evaluate with fixed Delta, labels and inputs on one path; everything both sides produce."""
    monkeypatch.setattr(jit, "ENABLED", compiled)
    rng = np.random.default_rng(seed)
    delta = rng.integers(0, 2**63, (batch, 2), dtype=np.uint64) | np.uint64(1) << np.uint64(63)
    delta[:, 0] |= np.uint64(1)
    zero = rng.integers(0, 2**63, (c.n_inputs, batch, 2), dtype=np.uint64)
    bits = random_bits(rng, c, batch)
    g = Garbler(c, batch, delta=delta, input_zero=zero, **kw)
    gc = g.garble()
    act = g.encode_all(bits)
    e = Evaluator(c, batch, **kw)
    out = e.evaluate(act, gc)
    got = decode(out, g.decode_bits)
    want = np.concatenate([b.T for b in c.evaluate_bits(bits)]) if c.outputs else got
    assert np.array_equal(got, want)  # the plaintext reference, on either path
    return bytes(gc.tables), g.output_zero, g.decode_bits, out, g.wire_zero, e.wire_labels


@pytest.mark.parametrize("name,make", _circuits(), ids=[n for n, _ in _circuits()])
@pytest.mark.parametrize(
    "batch,kw",
    [
        (1, {}),
        (1, {"instance_offset": 12345}),
        (3, {"chunk": 1, "instance_offset": 7}),  # three one-instance chunks: per-chunk Delta, tweaks, tables
        (1, {"record_wires": True}),  # the "wires" slot layout
    ],
)
def test_compiled_path_equals_numpy_program(monkeypatch, name, make, batch, kw):
    c = make()
    jitted = _run(monkeypatch, True, c, batch, 5, **kw)
    numpy_ = _run(monkeypatch, False, c, batch, 5, **kw)
    for a, b in zip(jitted, numpy_):
        assert (a is None and b is None) or np.array_equal(np.asarray(a), np.asarray(b))


def test_compiled_path_is_used_and_pools_its_scratch(monkeypatch):
    """Batch 1 runs the compiled loops (not the numpy program) and reuses one scratch per role."""
    monkeypatch.setattr(jit, "ENABLED", True)
    monkeypatch.setattr(jit, "AESNI", False)  # the OpenSSL compiled path (CPUs without AES-NI)
    c = build_kernel("gini", 16)
    bits = [np.ones((1, g.width), bool) for g in c.inputs]
    calls = []
    real = garbler_module._jit_garble1

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(garbler_module, "_jit_garble1", spy)
    garble.garble_and_evaluate(c, bits)
    assert calls == [1]
    plan = garble._plan(c)
    assert (1, "garbler", garble.STEP_GATES) not in plan.pool  # no numpy scratch was made
    work = plan.pool[("jit", "garbler")][-1]
    garble.garble_and_evaluate(c, bits)
    assert plan.pool[("jit", "garbler")] == [work]


def _wide(n: int) -> Circuit:
    """n independent AND gates in one level."""
    op = np.full(n, AND)
    out = np.arange(2 * n, 3 * n)
    return Circuit(
        3 * n,
        op,
        np.arange(n),
        np.arange(n, 2 * n),
        out,
        (InputGroup("a", GARBLER, np.arange(n)), InputGroup("b", EVALUATOR, np.arange(n, 2 * n))),
        (OutputGroup("o", out),),
        name=f"wide{n}",
    )


def _compiled_runs(monkeypatch) -> list:
    calls: list = []
    real = garbler_module._jit_garble1

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(garbler_module, "_jit_garble1", spy)
    return calls


@pytest.mark.parametrize("batch,chunk,compiled", [(1, None, True), (3, 1, True), (3, 2, False), (5, None, False)])
def test_only_all_one_instance_chunks_run_compiled(monkeypatch, batch, chunk, compiled):
    """Without AES-NI, a one-instance tail of a larger batch (3 = 2 + 1) stays on numpy: it never waits for
    numba to load."""
    monkeypatch.setattr(jit, "ENABLED", True)
    monkeypatch.setattr(jit, "AESNI", False)
    calls = _compiled_runs(monkeypatch)
    c = build_kernel("gini", 16)
    bits = [np.ones((batch, g.width), bool) for g in c.inputs]
    got = garble.garble_and_evaluate(c, bits, chunk=chunk)
    assert all(np.array_equal(a, b) for a, b in zip(got, c.evaluate_bits(bits)))
    assert bool(calls) == compiled


def test_wide_levels_stay_on_numpy_and_scratch_stays_within_the_pool_budget(monkeypatch):
    """Hash buffers hold one whole level on the compiled path, so levels wider than JIT_MAX_WIDTH run numpy;
    what either path keeps for the next run stays within POOL_BYTES (the OpenSSL compiled path)."""
    monkeypatch.setattr(jit, "ENABLED", True)
    monkeypatch.setattr(jit, "AESNI", False)
    calls = _compiled_runs(monkeypatch)
    for n, compiled in ((garble.JIT_MAX_WIDTH, True), (garble.JIT_MAX_WIDTH + 1, False)):
        c = _wide(n)
        bits = [np.ones((1, n), bool), np.zeros((1, n), bool)]
        assert not garble.garble_and_evaluate(c, bits)[0].any()
        bits[1][:] = True
        got = garble.garble_and_evaluate(c, bits)
        assert got[0].all()
        assert bool(calls) == compiled
        calls.clear()
        kept = sum(w.nbytes for spare in garble._plan(c).pool.values() for w in spare)
        assert kept <= garble.POOL_BYTES


def test_compiled_scratch_obeys_the_pool_budget(monkeypatch):
    monkeypatch.setattr(jit, "ENABLED", True)
    monkeypatch.setattr(jit, "AESNI", False)
    monkeypatch.setattr(program_module, "POOL_BYTES", 100)  # smaller than one scratch: nothing is kept
    c = build_kernel("gini", 16)
    garble._plan(c).pool.clear()  # (the plan is shared with earlier tests)
    garble.garble_and_evaluate(c, [np.ones((1, g.width), bool) for g in c.inputs])
    assert not garble._plan(c).pool.get(("jit", "garbler"))
    g = Garbler(c, 1, keep_scratch=True)  # a session that runs the circuit again keeps one of any size
    Evaluator(c, 1, keep_scratch=True).evaluate(g.input_zero, g.garble())
    assert len(garble._plan(c).pool[("jit", "garbler")]) == 1
    assert len(garble._plan(c).pool[("jit", "evaluator")]) == 1


def test_disabled_block_is_local_and_restores():
    import threading

    assert jit.ready()
    seen = {}
    with jit.disabled():
        assert not jit.ready()
        t = threading.Thread(target=lambda: seen.setdefault("other", jit.ready()))
        t.start()
        t.join(60)
    assert jit.ready() and jit.ENABLED
    assert seen["other"] is True  # another thread was not switched off


def test_bad_scratch_and_every_are_refused_up_front():
    c = build_kernel("gini", 16)
    g = Garbler(c, 1)
    frozen = np.frombuffer(bytes(8 * g.max_segment_words()), np.uint64)
    with pytest.raises(GarbleError, match="writable, contiguous"):
        next(g.iter_tables(scratch=frozen))
    strided = np.zeros(2 * g.max_segment_words(), np.uint64)[::2]
    with pytest.raises(GarbleError, match="writable, contiguous"):
        next(Garbler(c, 1).iter_tables(scratch=strided))
    for every in (None, -1, 1.5, True):
        with pytest.raises(GarbleError, match="every must be"):
            next(Garbler(c, 1).iter_into(bytearray(32 * c.n_and), every))


def test_garbled_aes_one_instance_matches_cryptography(bristol_dir):
    from pairwise.circuits.bristol import read_bristol_fashion

    c = read_bristol_fashion(bristol_dir / "aes_128.txt")
    assert jit.ready()
    for _ in range(3):
        key, pt = os.urandom(16), os.urandom(16)
        want = Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(pt)
        # wire j = bit j of the big-endian integer (as tests/mpc/test_garble.py)
        kb, pb = ([[(int.from_bytes(b, "big") >> j) & 1 for j in range(128)]] for b in (key, pt))
        (out,) = garble.garble_and_evaluate(c, [np.array(kb, bool), np.array(pb, bool)])
        assert sum(int(bit) << j for j, bit in enumerate(out[0])).to_bytes(16, "big") == want


@pytest.mark.parametrize("source", ["bytes", "bytearray", "chunks"])
def test_evaluator_reads_tables_of_any_kind(source):
    c = build_kernel("kendall", 8, True)
    rng = np.random.default_rng(3)
    bits = random_bits(rng, c, 1)
    g = Garbler(c, 1)
    gc = g.garble()
    raw = bytes(gc.tables)
    tables = {"bytes": raw, "bytearray": bytearray(raw), "chunks": [raw[i : i + 7] for i in range(0, len(raw), 7)]}[
        source
    ]
    act = g.encode_all(bits)
    out = Evaluator(c, 1).evaluate(act, tables)
    want = np.concatenate([b.T for b in c.evaluate_bits(bits)])
    assert np.array_equal(decode(out, g.decode_bits), want)


@pytest.mark.parametrize("cut", [-32, -1, 8])
def test_compiled_evaluator_rejects_wrong_table_sizes(cut):
    c = build_kernel("gini", 16)
    g = Garbler(c, 1)
    raw = bytes(g.garble().tables)
    bad = raw[:cut] if cut < 0 else raw + bytes(cut)
    with pytest.raises(GarbleError, match="ended early|trailing"):
        Evaluator(c, 1).evaluate(g.input_zero, bad)


def test_numba_failure_falls_back_to_the_numpy_program(monkeypatch, caplog):
    monkeypatch.setattr(jit, "_K", None)

    def broken():
        raise RuntimeError("no LLVM here")

    monkeypatch.setattr(jit, "_compile", broken)
    with caplog.at_level(logging.WARNING, logger="pairwise.mpc.jit"):
        assert jit.ready() is False
    assert "numpy program" in caplog.text and "no LLVM here" in caplog.text
    c = build_kernel("gini", 16)
    bits = [np.ones((1, g.width), bool) for g in c.inputs]
    got = garble.garble_and_evaluate(c, bits)
    assert all(np.array_equal(a, b) for a, b in zip(got, c.evaluate_bits(bits)))


def test_program_rejects_mismatched_index_arrays():
    with pytest.raises(ValueError, match="matching lengths"):
        jit.program([0, 1], [1], [2], [], [], [], [(0, 0, 0, 0, 0)])


@pytest.mark.parametrize("every", [0, 1, 8192, 1 << 40])
def test_iter_into_every_changes_only_how_often_it_yields(every):
    """iter_into(out, every): same bytes as garble(); progress is monotonic, ends at the table size, and a
    yield comes at least ``every`` bytes after the previous one (except the last)."""
    c = random_circuit(3, n_gates=3000)  # ~1,500 ANDs over many levels: ~48 KB of tables
    rng = np.random.default_rng(4)
    delta = np.array([rng.integers(0, 2**63) | 1, rng.integers(0, 2**63)], dtype=np.uint64)
    zero = rng.integers(0, 2**63, (c.n_inputs, 1, 2), dtype=np.uint64)
    want = bytes(Garbler(c, 1, delta=delta, input_zero=zero).garble().tables)
    out = bytearray(len(want))
    done = list(Garbler(c, 1, delta=delta, input_zero=zero).iter_into(out, every))
    assert bytes(out) == want and done[-1] == len(want)
    steps = np.diff([0] + done)
    assert (steps > 0).all() and (steps[:-1] >= every).all()
    levels = sum(1 for lv in garble._plan(c).levels if lv.k)
    if every <= 1:
        assert len(done) == levels  # one yield per AND level
    elif every > len(want):
        assert len(done) == 1
    else:
        assert 1 < len(done) <= len(want) // every + 1 < levels


def test_former_module_name_is_the_same_module(monkeypatch):
    """``pairwise.mpc.jit`` (the module's former home) is :mod:`pairwise.mpc.garble.jit` itself, so a setting
    made through either name reaches the engine."""
    import pairwise.mpc.garble.jit as new

    assert jit is new and garble.jit is new and sys.modules["pairwise.mpc.jit"] is new
    monkeypatch.setattr(jit, "ENABLED", False)
    assert new.ready() is False and not new._use_jit(garble._plan(build_kernel("gini", 8)), 1)
