"""Tests of the half-gates reference (mpc.halfgates) and the vectorized engine (mpc.garble).

References: plaintext evaluation (Circuit.evaluate_bits), cryptography's AES for the
AES-128 Bristol circuit, and the per-gate reference functions for the engine's tables.

Tests that start processes are in tests/system/test_garble_processes.py.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from pairwise.circuits.bristol import read_bristol_fashion, read_bristol_old
from pairwise.circuits.ir import EVALUATOR, GARBLER, INV, XOR, Circuit, InputGroup, OutputGroup
from pairwise.mpc.aes import random_blocks
from pairwise.mpc.garble import (
    HEADER_SIZE,
    Evaluator,
    GarbledCircuit,
    GarbleError,
    Garbler,
    decode,
    default_chunk,
    fresh_delta,
    garble_and_evaluate,
    split_outputs,
    table_bytes,
)
from pairwise.mpc.halfgates import eval_and, garble_and, lsb, tweak_blocks
from tests.support.bristol import BRISTOL_DIR, bristol_names
from tests.support.garble import random_bits, random_circuit

BRISTOL = str(BRISTOL_DIR)
BRISTOL_FILES = bristol_names()  # tests using these request the bristol_dir fixture: skip locally, fail in CI
OLD_FILES = bristol_names("bristol_format")


@functools.cache
def bristol(name: str) -> Circuit:
    return read_bristol_fashion(os.path.join(BRISTOL, name))


def aes128() -> Circuit:
    """AES-128 Bristol Fashion circuit as shipped in circuits/data (same file as ../shared)."""
    from pairwise.circuits.catalog import resolve_circuit

    return resolve_circuit("aes128")


def check_garbled_equals_plaintext(circuit: Circuit, batch: int, seed: int, **kw) -> None:
    rng = np.random.default_rng(seed)
    bits = random_bits(rng, circuit, batch)
    got = garble_and_evaluate(circuit, bits, **kw)
    want = circuit.evaluate_bits(bits)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == bool and g.shape == w.shape
        assert np.array_equal(g, w)


# ---------------------------------------------------------------------------- pure half-gates
def test_tweak_blocks_layout_and_errors():
    t = tweak_blocks(np.array([0, 5]), 1, np.array([[3], [9]]))
    assert t.shape == (2, 2, 2)
    assert t[1, 1].tolist() == [11, 9] and t[0, 0].tolist() == [1, 3]
    with pytest.raises(ValueError, match="half"):
        tweak_blocks(0, 2)
    with pytest.raises(ValueError, match="instance"):
        tweak_blocks(0, 0, -1)
    with pytest.raises(ValueError, match="AND index"):
        tweak_blocks(1 << 63, 0)


def test_halfgates_all_four_input_combinations():
    n = 64  # 64 independent gates, each with its own labels and Delta
    a0, b0 = random_blocks(n), random_blocks(n)
    delta = fresh_delta(n)
    idx = np.arange(100, 100 + n)
    table, c0 = garble_and(a0, b0, delta, idx, instance=7)
    assert table.shape == (n, 2, 2) and c0.shape == (n, 2)
    for a in (0, 1):
        for b in (0, 1):
            ka = a0 ^ (delta if a else 0)
            kb = b0 ^ (delta if b else 0)
            c = eval_and(ka, kb, table, idx, instance=7)
            want = c0 ^ (delta if a & b else 0)
            assert np.array_equal(c, want), (a, b)
            # The evaluator never gets the other output label.
            assert not (c == (want ^ delta)).all(axis=-1).any()


def test_halfgates_wrong_tweak_or_table_fails():
    a0, b0 = random_blocks(32), random_blocks(32)
    delta = fresh_delta(1)[0]
    table, c0 = garble_and(a0, b0, delta, 3)
    a1, b1 = a0 ^ delta, b0 ^ delta
    good = eval_and(a1, b1, table, 3)
    assert np.array_equal(good, c0 ^ delta)
    assert not (eval_and(a1, b1, table, 4) == good).all(axis=-1).any()
    assert not (eval_and(a1, b1, table, 3, instance=1) == good).all(axis=-1).any()
    bad = table.copy()
    bad[:, 0, 1] ^= np.uint64(1 << 40)  # T_G is used when lsb(a) = 1, T_E when lsb(b) = 1
    hit = lsb(a1)
    assert np.array_equal((eval_and(a1, b1, bad, 3) != good).any(axis=-1), hit)


def test_halfgates_rejects_even_delta_and_bad_table():
    d = fresh_delta(1)[0]
    d[0] &= ~np.uint64(1)
    with pytest.raises(ValueError, match="lowest bit"):
        garble_and(random_blocks(1), random_blocks(1), d, 0)
    with pytest.raises(ValueError, match="table"):
        eval_and(random_blocks(1), random_blocks(1), random_blocks(1, 3), 0)


# ---------------------------------------------------------------------------- engine vs reference
def force_direct(monkeypatch) -> None:
    """Make every level of every chunk of > 1 instance take the engine's per-gate (direct) code.

    The engine picks it for narrow levels of large chunks only (numpy calls cost nothing here).
    """
    import pairwise.mpc.garble.program as P  # (the module that reads it)

    monkeypatch.setattr(P, "DIRECT_CALL_WORDS", 0)


@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize("chunk", [None, 2])
def test_engine_tables_match_reference_gate_by_gate(chunk, direct, monkeypatch):
    """Parse the documented byte layout and recompute every table with garble_and."""
    if direct:
        force_direct(monkeypatch)
    c = random_circuit(11, n_gates=120)
    batch, off = 5, 1000
    g = Garbler(c, batch, instance_offset=off, chunk=chunk, record_wires=True)
    gc = g.garble()
    zero = g.wire_zero  # (n_wires, batch, 2)
    words = np.frombuffer(gc.to_bytes()[HEADER_SIZE:], dtype="<u8")
    pos = 0
    for b0 in range(0, batch, g.chunk):
        b1 = min(batch, b0 + g.chunk)
        bc = b1 - b0
        for lv in c.levels:
            k = lv.n_and
            if not k:
                continue
            seg = words[pos : pos + 4 * k * bc].reshape(2, 2, k, bc)
            pos += 4 * k * bc
            got = np.moveaxis(seg, 1, -1)  # (h, g, n, w)
            a0 = zero[lv.and_in0, b0:b1]
            bz = zero[lv.and_in1, b0:b1]
            inst = np.arange(off + b0, off + b1)[None, :]
            table, c0 = garble_and(a0, bz, g.delta[None, b0:b1], lv.and_index[:, None], inst)
            assert np.array_equal(got[0], table[..., 0, :])
            assert np.array_equal(got[1], table[..., 1, :])
            assert np.array_equal(zero[lv.and_out, b0:b1], c0)
        # XOR and INV wires follow free-XOR.
    op, i0, i1, o = c.op, c.in0, c.in1, c.out
    x = op == XOR
    assert np.array_equal(zero[o[x]], zero[i0[x]] ^ zero[i1[x]])
    v = op == INV
    assert np.array_equal(zero[o[v]], zero[i0[v]] ^ g.delta[None])
    assert pos == words.shape[0]


# ---------------------------------------------------------------------------- differential tests
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("batch", [1, 7, 130])
def test_random_circuits(seed, batch):
    check_garbled_equals_plaintext(random_circuit(seed), batch, seed)


@pytest.mark.parametrize("name", BRISTOL_FILES)
@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_bristol_fashion_files(bristol_dir, name, batch):
    if name.startswith("sha256") and batch == 1000:
        pytest.skip("covered by test_bristol_sha256_batch_1000 (slow)")
    check_garbled_equals_plaintext(bristol(name), batch, seed=batch)


@pytest.mark.slow
def test_bristol_sha256_batch_1000(bristol_dir):
    check_garbled_equals_plaintext(bristol("sha256.txt"), 1000, seed=3)


@pytest.mark.parametrize("name", OLD_FILES)
def test_old_bristol_format_files(bristol_dir, name):
    c = read_bristol_old(os.path.join(BRISTOL, "bristol_format", name))
    check_garbled_equals_plaintext(c, 7, seed=5)


def test_garbled_aes_matches_cryptography():
    c = aes128()
    batch = 9
    keys = [os.urandom(16) for _ in range(batch)]
    pts = [os.urandom(16) for _ in range(batch)]

    def to_bits(blobs):  # wire j = bit j of the big-endian integer
        return np.array([[(int.from_bytes(b, "big") >> j) & 1 for j in range(128)] for b in blobs], dtype=bool)

    (out,) = garble_and_evaluate(c, [to_bits(keys), to_bits(pts)], chunk=4)
    for i in range(batch):
        ct = Cipher(algorithms.AES(keys[i]), modes.ECB()).encryptor().update(pts[i])
        v = sum(int(bit) << j for j, bit in enumerate(out[i]))
        assert v.to_bytes(16, "big") == ct


def _kernel_cases():
    try:
        from pairwise.circuits.kernels import KERNELS
    except ImportError:  # pragma: no cover - kernels land with the circuits issue
        return []
    return [(n, w, s) for n in sorted(KERNELS) for w in (8, 13, 32) for s in (False, True)]


@functools.cache
def kernel(name, bits, signed):
    from pairwise.circuits.kernels import build_kernel

    return build_kernel(name, bits, signed)


@pytest.mark.parametrize("name,bits,signed", _kernel_cases())
@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_kernels(name, bits, signed, batch):
    check_garbled_equals_plaintext(kernel(name, bits, signed), batch, seed=bits * 31 + batch)


# ---------------------------------------------------------------------------- Delta and labels
def test_delta_lsb_and_distinct_per_instance():
    g = Garbler(aes128(), 500)
    assert g.delta.shape == (500, 2) and g.delta.dtype == np.uint64
    assert (g.delta[:, 0] & np.uint64(1)).all()
    assert np.unique(g.delta, axis=0).shape[0] == 500
    # Zero labels are fresh too: all distinct, and none equals a Delta.
    z = g.input_zero.reshape(-1, 2)
    assert np.unique(z, axis=0).shape[0] == z.shape[0]


def test_caller_delta_and_input_zero():
    c = aes128()
    batch = 6
    delta = fresh_delta(1)[0]
    ev_zero = random_blocks(128, batch)
    g = Garbler(c, batch, delta=delta, input_zero={"in1": ev_zero}, instance_offset=40)
    assert np.array_equal(g.delta, np.broadcast_to(delta, (batch, 2)))
    assert np.array_equal(g.zero_labels("in1"), ev_zero)
    rng = np.random.default_rng(2)
    bits = random_bits(rng, c, batch)
    # The evaluator's labels as correlated OT would give them: zero ^ bit * Delta.
    ev_active = ev_zero ^ np.where(bits[1].T[..., None], delta, np.uint64(0))
    active = np.concatenate([g.encode("in0", bits[0]), ev_active])
    gc = g.garble()
    out = Evaluator(c, batch, instance_offset=40).evaluate(active, gc)
    assert np.array_equal(split_outputs(c, decode(out, g.decode_bits))[0], c.evaluate_bits(bits)[0])
    assert np.array_equal(g.decode_bits, (g.output_zero[..., 0] & np.uint64(1)).astype(bool))


def test_full_input_zero_array():
    c = random_circuit(3)
    z = random_blocks(c.n_inputs, 4)
    g = Garbler(c, 4, input_zero=z)
    assert np.array_equal(g.input_zero, z)


def test_bad_parameters_raise():
    c = aes128()
    with pytest.raises(GarbleError, match="batch"):
        Garbler(c, 0)
    with pytest.raises(GarbleError, match="batch"):
        Evaluator(c, -3)
    with pytest.raises(GarbleError, match="chunk"):
        Garbler(c, 4, chunk=0)
    with pytest.raises(GarbleError, match="instance_offset"):
        Garbler(c, 4, instance_offset=-1)
    with pytest.raises(GarbleError, match="2\\*\\*63"):
        Garbler(c, 4, instance_offset=(1 << 63) - 2)
    even = fresh_delta(1)[0]
    even[0] ^= np.uint64(1)
    with pytest.raises(GarbleError, match="lowest bit"):
        Garbler(c, 4, delta=even)
    with pytest.raises(GarbleError, match="shape"):
        Garbler(c, 4, delta=fresh_delta(3))
    with pytest.raises(GarbleError, match="uint64"):
        Garbler(c, 4, delta=np.array([1, 2]))
    with pytest.raises(GarbleError, match="no input group"):
        Garbler(c, 4, input_zero={"nope": random_blocks(128, 4)})
    with pytest.raises(GarbleError, match="shape"):
        Garbler(c, 4, input_zero={"in1": random_blocks(128, 5)})
    with pytest.raises(GarbleError, match="shape"):
        Garbler(c, 4).encode("in0", np.zeros((4, 127), bool))
    with pytest.raises(GarbleError, match="shape"):
        Evaluator(c, 4).evaluate(random_blocks(255, 4), b"")
    with pytest.raises(GarbleError, match="do not match"):
        decode(random_blocks(3, 4), np.zeros((3, 5), bool))
    with pytest.raises(GarbleError, match="input groups"):
        garble_and_evaluate(c, [np.zeros((1, 128), bool)])


def test_garbler_garbles_once():
    g = Garbler(random_circuit(1), 2)
    g.garble()
    with pytest.raises(GarbleError, match="already garbled"):
        g.garble()


# ---------------------------------------------------------------------------- evaluator's view
def test_evaluator_view_has_no_inactive_label_or_delta():
    """Tables + active input labels never contain a label the evaluator must not learn."""
    c = aes128()
    batch = 3
    all_wires = Circuit(c.n_wires, c.op, c.in0, c.in1, c.out, c.inputs, [OutputGroup("w", np.arange(c.n_wires))])
    rng = np.random.default_rng(9)
    bits = random_bits(rng, c, batch)
    values = all_wires.evaluate_bits(bits)[0].T  # (n_wires, batch) plaintext value of every wire
    g = Garbler(c, batch, record_wires=True)
    active = g.encode_all(bits)
    gc = g.garble()
    ev = Evaluator(c, batch, record_wires=True)
    ev.evaluate(active, gc)
    zero, delta = g.wire_zero, g.delta[None]
    mask = np.where(values[..., None], delta, np.uint64(0))
    # The evaluator holds exactly the active label of every wire ...
    assert np.array_equal(ev.wire_labels, zero ^ mask)
    inactive = zero ^ mask ^ delta
    secret = {bytes(b) for b in inactive.reshape(-1, 2).view(np.uint8).reshape(-1, 16)}
    secret |= {bytes(b) for b in g.delta.view(np.uint8).reshape(-1, 16)}
    # ... and its view (tables, active input labels) contains no inactive label nor Delta.
    view = bytes(gc.tables) + active.tobytes()
    blocks = {view[i : i + 16] for i in range(0, len(view), 16)}
    assert not (blocks & secret)
    # Sanity check of the check itself: the garbler's material does contain them.
    assert {bytes(b) for b in zero.reshape(-1, 2).view(np.uint8).reshape(-1, 16)} & secret


# ---------------------------------------------------------------------------- tampering
def test_corrupting_one_table_byte_changes_output():
    c = aes128()
    batch = 64
    rng = np.random.default_rng(4)
    bits = random_bits(rng, c, batch)
    want = c.evaluate_bits(bits)[0]
    g = Garbler(c, batch, chunk=batch)  # one chunk (the layout decoded below)
    active = g.encode_all(bits)
    gc = g.garble()
    tables = np.frombuffer(bytes(gc.tables), dtype=np.uint8)
    assert np.array_equal(
        split_outputs(c, decode(Evaluator(c, batch, chunk=batch).evaluate(active, tables.tobytes()), g.decode_bits))[0],
        want,
    )
    positions = rng.integers(0, 32 * c.n_and, size=12)  # a byte of some ciphertext of some gate
    for p in positions:
        gate_bytes = tables.reshape(-1)  # one chunk: layout (level segments of (2, 2, k, batch) words)
        bad = gate_bytes.copy()
        # Flip byte p's position in every instance: locate (segment, h, w, g, byte) from p.
        seg_starts = np.cumsum([0] + [32 * lv.n_and for lv in c.levels if lv.n_and])
        s = int(np.searchsorted(seg_starts, p, side="right") - 1)
        k = (seg_starts[s + 1] - seg_starts[s]) // 32
        r = int(p - seg_starts[s])
        h, w, gi, byte = r // (16 * k), (r // (8 * k)) % 2, (r // 8) % k, r % 8
        base = seg_starts[s] * batch
        for n in range(batch):
            off = base + (((h * 2 + w) * k + gi) * batch + n) * 8 + byte
            bad[off] ^= 0x5A
        out = Evaluator(c, batch, chunk=batch).evaluate(active, bad.tobytes())
        got = split_outputs(c, decode(out, g.decode_bits))[0]
        assert not np.array_equal(got, want), f"corrupted byte {p} went unnoticed"


def test_wrong_instance_offset_breaks_output():
    c = aes128()
    rng = np.random.default_rng(5)
    bits = random_bits(rng, c, 8)
    g = Garbler(c, 8, instance_offset=100)
    active = g.encode_all(bits)
    gc = g.garble()
    out = Evaluator(c, 8, instance_offset=101).evaluate(active, gc.tables)
    assert not np.array_equal(split_outputs(c, decode(out, g.decode_bits))[0], c.evaluate_bits(bits)[0])
    with pytest.raises(GarbleError, match="does not match"):
        Evaluator(c, 8, instance_offset=101).evaluate(active, gc)


# ---------------------------------------------------------------------------- serialization and streaming
def test_serialized_size_and_roundtrip():
    c = aes128()
    batch = 5
    rng = np.random.default_rng(6)
    bits = random_bits(rng, c, batch)
    g = Garbler(c, batch, chunk=2, instance_offset=7)
    active = g.encode_all(bits)
    data = g.garble().to_bytes()
    assert HEADER_SIZE <= 80
    assert len(data) == HEADER_SIZE + 32 * c.n_and * batch == HEADER_SIZE + table_bytes(c, batch)
    assert data[:HEADER_SIZE] == g.header()
    gc = GarbledCircuit.from_bytes(data)
    assert (gc.batch, gc.chunk, gc.instance_offset, gc.n_and) == (batch, 2, 7, c.n_and)
    out = Evaluator(c, batch, chunk=2, instance_offset=7).evaluate(active, gc)
    assert np.array_equal(split_outputs(c, decode(out, g.decode_bits))[0], c.evaluate_bits(bits)[0])
    with pytest.raises(GarbleError, match="does not match"):
        Evaluator(c, batch, chunk=3, instance_offset=7).evaluate(active, gc)
    with pytest.raises(GarbleError, match="magic"):
        GarbledCircuit.from_bytes(b"XXXX" + data[4:])
    with pytest.raises(GarbleError, match="version"):
        GarbledCircuit.from_bytes(data[:4] + b"\x09\x00" + data[6:])
    with pytest.raises(GarbleError, match="body"):
        GarbledCircuit.from_bytes(data[:-1])
    with pytest.raises(GarbleError, match="header"):
        GarbledCircuit.from_bytes(data[:10])


def test_streaming_segments_any_split():
    c = aes128()
    batch = 11
    rng = np.random.default_rng(7)
    bits = random_bits(rng, c, batch)
    want = c.evaluate_bits(bits)[0]
    g = Garbler(c, batch, chunk=4)
    active = g.encode_all(bits)
    segs = [bytes(s) for s in g.iter_tables()]
    assert [len(s) for s in segs] == g.segment_sizes() == Evaluator(c, batch, chunk=4).segment_sizes()
    assert len(segs) == 3 * sum(1 for lv in c.levels if lv.n_and)  # 3 chunks x AND levels
    blob = b"".join(segs)
    assert len(blob) == table_bytes(c, batch)
    # Re-split the stream at random points (including 1-byte pieces and empty pieces).
    cuts = sorted(rng.integers(0, len(blob), size=200).tolist())
    pieces = [blob[a:b] for a, b in zip([0] + cuts, cuts + [len(blob)])] + [b""]
    pieces[:0] = [blob[:0]]
    for source in (iter(segs), iter(pieces), blob):
        out = Evaluator(c, batch, chunk=4).evaluate(active, source)
        assert np.array_equal(split_outputs(c, decode(out, g.decode_bits))[0], want)
    with pytest.raises(GarbleError, match="ended early"):
        Evaluator(c, batch, chunk=4).evaluate(active, iter(segs[:-1]))
    with pytest.raises(GarbleError, match="trailing"):
        Evaluator(c, batch, chunk=4).evaluate(active, iter(segs + [b"\0"]))
    with pytest.raises(GarbleError, match="trailing"):
        Evaluator(c, batch, chunk=4).evaluate(active, blob + b"\0" * 16)


def test_garbler_streams_into_evaluator_directly(bristol_dir):
    """A generator pipeline: neither side holds all tables."""
    c = bristol("aes_256.txt")
    batch = 20
    rng = np.random.default_rng(8)
    bits = random_bits(rng, c, batch)
    g = Garbler(c, batch, chunk=6)
    active = g.encode_all(bits)
    out = Evaluator(c, batch, chunk=6).evaluate(active, g.iter_tables())
    assert np.array_equal(split_outputs(c, decode(out, g.decode_bits))[0], c.evaluate_bits(bits)[0])


def test_sink_and_chunking_give_same_results():
    c = random_circuit(4, n_gates=200)
    batch = 10
    rng = np.random.default_rng(1)
    bits = random_bits(rng, c, batch)
    want = c.evaluate_bits(bits)
    for chunk in (1, 3, 10, 50):
        g = Garbler(c, batch, chunk=chunk)
        active = g.encode_all(bits)
        got = []
        assert g.garble(sink=got.append) is None
        out = Evaluator(c, batch, chunk=chunk).evaluate(active, got)
        res = split_outputs(c, decode(out, g.decode_bits))
        assert all(np.array_equal(a, b) for a, b in zip(res, want))


def test_default_chunk_is_deterministic_and_bounded():
    c = aes128()
    assert default_chunk(c, 1) == 1
    assert default_chunk(c, 1000) == default_chunk(c, 10**4) == default_chunk(c, 10**4) <= 16384
    from pairwise.mpc.garble import CHUNK_LABEL_BYTES, _plan

    plan = _plan(c)  # a chunk's labels fit CHUNK_LABEL_BYTES (the L2 cache), and not much less
    assert CHUNK_LABEL_BYTES // 2 < 16 * (plan.n_slots + plan.max_width) * default_chunk(c, 10**4) <= CHUNK_LABEL_BYTES
    assert Garbler(c, 10**4).chunk == Evaluator(c, 10**4).chunk


# ---------------------------------------------------------------------------- edge circuits
def test_circuit_without_and_gates():
    c = Circuit(
        5,
        [XOR, INV],
        [0, 3],
        [1, 0],
        [3, 4],
        [InputGroup("a", GARBLER, np.arange(2)), InputGroup("b", EVALUATOR, np.arange(2, 3))],
        [OutputGroup("x", np.array([3, 4, 2]))],
    )
    assert c.n_and == 0
    for batch in (1, 5):
        check_garbled_equals_plaintext(c, batch, seed=batch)
    g = Garbler(c, 2)
    assert g.garble().to_bytes() == g.header()


def test_garbler_and_evaluator_in_two_threads():
    """Objects built in the main thread, run concurrently in two threads over a queue."""
    import queue
    import threading

    c = aes128()
    batch = 40
    rng = np.random.default_rng(12)
    bits = random_bits(rng, c, batch)
    g = Garbler(c, batch, chunk=16)
    ev = Evaluator(c, batch, chunk=16)
    active = g.encode_all(bits)
    q: queue.Queue = queue.Queue(maxsize=4)
    errors = []

    def produce():
        try:
            for seg in g.iter_tables():
                q.put(bytes(seg), timeout=60)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            q.put(None, timeout=60)

    def consume():
        while (item := q.get(timeout=60)) is not None:
            yield item

    t = threading.Thread(target=produce)
    t.start()
    out = ev.evaluate(active, consume())
    t.join(timeout=60)
    assert not errors
    assert np.array_equal(split_outputs(c, decode(out, g.decode_bits))[0], c.evaluate_bits(bits)[0])


def test_garble_into_caller_buffer():
    c = random_circuit(6, n_gates=80)
    batch = 3
    rng = np.random.default_rng(3)
    bits = random_bits(rng, c, batch)
    buf = bytearray(table_bytes(c, batch))
    g = Garbler(c, batch)
    active = g.encode_all(bits)
    gc = g.garble(out=buf)
    assert bytes(gc.tables) == bytes(buf) and any(buf)
    out = Evaluator(c, batch).evaluate(active, buf)
    assert all(
        np.array_equal(a, b) for a, b in zip(split_outputs(c, decode(out, g.decode_bits)), c.evaluate_bits(bits))
    )
    with pytest.raises(GarbleError, match="exactly"):
        Garbler(c, batch).garble(out=bytearray(len(buf) + 1))
    with pytest.raises(GarbleError, match="exactly"):
        Garbler(c, batch).garble(out=bytes(len(buf)))
    with pytest.raises(GarbleError, match="either"):
        Garbler(c, batch).garble(sink=lambda s: None, out=buf)


def test_labels_set_later_cost_no_random_bytes_and_open_groups_get_fresh_ones(monkeypatch):
    """Groups set after construction (from OT, from a seed) draw no CSPRNG labels; open ones draw them when needed."""
    import pairwise.mpc.garble.garbler as G  # (the module that draws the labels)

    c = aes128()
    batch = 3
    delta = fresh_delta(1)[0]
    calls = []
    real = G.random_blocks
    monkeypatch.setattr(G, "random_blocks", lambda *shape: calls.append(shape) or real(*shape))
    g = Garbler(c, batch, delta=delta)
    assert calls == []
    ev_zero = real(128, batch)
    g.set_zero_labels("in1", ev_zero)
    assert calls == []
    z0 = g.zero_labels("in0")  # still open: fresh labels now
    assert calls == [(128, batch)] and np.array_equal(g.zero_labels("in0"), z0)
    assert np.array_equal(g.zero_labels("in1"), ev_zero)
    g.garble()
    assert calls == [(128, batch)]


@pytest.mark.parametrize("shared_delta", [True, False])
def test_input_buffer_view_and_active_labels_in_place(shared_delta):
    """Labels written in place through input_view, zero = active ^ bits * Delta, decode correctly."""
    c = aes128()
    batch = 5
    rng = np.random.default_rng(8)
    bits = random_bits(rng, c, batch)
    delta = fresh_delta(1)[0] if shared_delta else fresh_delta(batch)
    buf = np.full((c.n_inputs, batch, 2), 3, np.uint64)
    g = Garbler(c, batch, delta=delta, input_buffer=buf)
    view = g.input_view("in0")
    assert np.shares_memory(view, buf) and view.shape == (128, batch, 2)
    active0 = random_blocks(128, batch)
    view[...] = active0
    g.set_active_labels("in0", view, bits[0])  # in place
    d = np.broadcast_to(delta, (batch, 2))
    assert np.array_equal(g.zero_labels("in0"), active0 ^ np.where(bits[0].T[..., None], d, np.uint64(0)))
    ev_zero = random_blocks(128, batch)
    g.set_zero_labels("in1", ev_zero)  # a copy into the buffer
    assert np.shares_memory(g.zero_labels("in1"), buf) and np.array_equal(g.zero_labels("in1"), ev_zero)
    ev_active = ev_zero ^ np.where(bits[1].T[..., None], d, np.uint64(0))
    gc = g.garble()
    out = Evaluator(c, batch).evaluate(np.concatenate([active0, ev_active]), gc)
    assert np.array_equal(split_outputs(c, decode(out, g.decode_bits))[0], c.evaluate_bits(bits)[0])
    with pytest.raises(GarbleError, match="after garbling"):
        g.input_view("in0")
    with pytest.raises(GarbleError, match="input_buffer"):
        Garbler(c, batch, input_buffer=np.empty((c.n_inputs, batch + 1, 2), np.uint64))


def test_tables_through_a_reused_scratch_are_the_same_bytes():
    c = kernel("variance", 8, False)
    batch = 40
    delta = fresh_delta(1)[0]
    zero = random_blocks(c.n_inputs, batch)
    fresh = b"".join(bytes(s) for s in Garbler(c, batch, delta=delta, input_zero=zero, chunk=16).iter_tables())
    g = Garbler(c, batch, delta=delta, input_zero=zero, chunk=16)
    scratch = np.empty(g.max_segment_words(), np.uint64)
    pieces = []
    for seg in g.iter_tables(scratch=scratch):
        assert np.shares_memory(np.frombuffer(seg, np.uint8), scratch)
        pieces.append(bytes(seg))
    assert b"".join(pieces) == fresh
    with pytest.raises(GarbleError, match="scratch"):
        next(Garbler(c, batch).iter_tables(scratch=np.empty(1, np.uint64)))


@pytest.mark.parametrize("name,batch,chunk", [("gini", 300, 128), ("kendall", 37, None), ("aes", 5, 3)])
def test_direct_and_gathered_levels_give_the_same_bytes(monkeypatch, name, batch, chunk):
    """The per-gate code for narrow levels (labels used in place) and the gather/scatter steps are
    the same garbling: byte-identical tables and output labels for one Delta and input labels, and
    each evaluator decodes the other's tables to the plaintext outputs."""
    from pairwise.circuits.kernels import build_kernel

    def make():
        return aes128() if name == "aes" else build_kernel(name, 16)

    rng = np.random.default_rng(5)
    c = make()
    bits = random_bits(rng, c, batch)
    delta = fresh_delta(batch)
    zero = random_blocks(c.n_inputs, batch)
    runs = []
    for direct in (False, True):
        with monkeypatch.context() as m:
            if direct:
                force_direct(m)
            c = make()
            g = Garbler(c, batch, delta=delta, input_zero=zero, chunk=chunk, instance_offset=77)
            active = g.encode_all(bits)
            gc = g.garble()
            runs.append((c, bytes(gc.tables), g.output_zero.copy(), g.decode_bits, active))
    assert runs[0][1] == runs[1][1]
    assert np.array_equal(runs[0][2], runs[1][2])
    want = c.evaluate_bits(bits)
    for direct, (c, tables, _, dbits, active) in zip((False, True), runs[::-1]):  # each decodes the other's
        with monkeypatch.context() as m:
            if direct:
                force_direct(m)
            c = make()
            out = Evaluator(c, batch, chunk=chunk, instance_offset=77).evaluate(active, tables)
            got = split_outputs(c, decode(out, dbits))
            assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_caller_delta_is_copied():
    c = random_circuit(2)
    d = fresh_delta(4)
    g = Garbler(c, 4, delta=d)
    d[:] = 0
    assert (g.delta[:, 0] & np.uint64(1)).all()


try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is a dev dependency
    given = None

if given is not None:

    @settings(max_examples=30, deadline=None)
    @given(
        seed=st.integers(0, 10**6),
        n_gates=st.integers(1, 150),
        batch=st.integers(1, 40),
        chunk=st.one_of(st.none(), st.integers(1, 50)),
        offset=st.integers(0, 2**62),
    )
    def test_hypothesis_random_circuits(seed, n_gates, batch, chunk, offset):
        c = random_circuit(seed, n_gates=n_gates)
        check_garbled_equals_plaintext(c, batch, seed, chunk=chunk, instance_offset=offset)


def test_package_keeps_the_names_of_the_former_module():
    """mpc.garble became a package: every name the single module defined stays importable from it."""
    import pairwise.mpc.garble as G
    from pairwise.mpc.garble import format, garbler, jit, plan, program

    former = """CHUNK_LABEL_BYTES DIRECT_CALL_WORDS Evaluator GarbleError GarbledCircuit Garbler HEADER_SIZE
        JIT_MAX_WIDTH MAX_CHUNK POOL_BYTES STEP_GATES _HEADER _Jit1 _LevelPlan _MAGIC _NO_TABLES _ONE _ONE0
        _PLANS _Plan _Reader _SLICES _U64 _VERSION _Work _and _as_blocks _build_plan _check_batch _check_chunk
        _check_offset _chunks _copy _direct_and _direct_lin _eval_ands _eval_ands1 _eval_direct _flat
        _garble_ands _garble_ands1 _garble_direct _jit _jit_eval1 _jit_garble1 _jit_program _keep_spare
        _last_use _mul _neg _plan _planar _same_memory _segment_sizes _two_planes _use_jit _xor decode
        default_chunk fresh_delta garble_and_evaluate split_outputs table_bytes urandom_bits wire_slice""".split()
    assert [n for n in former if not hasattr(G, n)] == []
    assert set(G.__all__) <= set(former)
    assert (G.Garbler, G.GarbledCircuit, G._plan, G._Work, G._jit_garble1, G.STEP_GATES) == (
        garbler.Garbler,
        format.GarbledCircuit,
        plan._plan,
        program._Work,
        jit._jit_garble1,
        program.STEP_GATES,
    )
