"""Shape of the fast paths: level counts, frames and bytes per execution, COT batches (counts only).

What the latency work (issue 4 / issue 3) relies on, checked as *counts*, never
timings:

* the level schedule (circuits.ir ``Circuit.levels``): the engine contract on
  real circuits, and never more levels than the per-AND-stage grouping it
  replaced (re-implemented here as an independent reference); AES-128 in at
  most 264 levels (was 314), the 64-bit multiplier at most its old 3968;
* the garbler's stream (mpc.twopc): per AES-128 execution a handful of frames
  (header, input labels, tables and decoding bits in frames of FIRST_FRAME ..
  FRAME_TARGET bytes), not one frame per AND level; the exact payload; the
  evaluator's frames unchanged (header, OT bits, output bits); the large-stream
  path (> STREAM_BUFFER bytes) and tiny STREAM_FRAME limits; a garbler that
  vanishes in the middle of the stream;
* sessions made with ``ot_batch=None`` start with a 1024-COT IKNP batch and
  grow, the two sides always agreeing;
* the engine's multi-step paths (levels wider than a step, at one instance and
  at several), against plaintext evaluation.

Both parties run in one process (garbler in the test thread, evaluator in a
worker thread) over MemoryChannel.pair: the real protocol, real OT and real
garbling.
"""

from __future__ import annotations

import os
import queue
import threading

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

import pairwise.mpc.garble as garble
import pairwise.mpc.twopc as twopc
from pairwise.circuits.builder import Builder
from pairwise.circuits.catalog import resolve_circuit
from pairwise.circuits.ir import AND, EVALUATOR, GARBLER, INV, Circuit
from pairwise.circuits.kernels import build_kernel
from pairwise.mpc import jit
from pairwise.mpc.channel import HEADER_BYTES, MemoryChannel, PeerClosed, TranscriptChannel
from pairwise.mpc.iknp import DEFAULT_BATCH
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, session

WAIT = 60.0


# --------------------------------------------------------------------------- schedule


def stage_grouping_levels(c: Circuit) -> int:
    """Levels of the previous schedule: one level per (AND stage, linear sub-depth within the stage)."""
    wand = [0] * c.n_wires
    wlin = [0] * c.n_wires
    keys = set()
    for o, a, b, w in zip(c.op.tolist(), c.in0.tolist(), c.in1.tolist(), c.out.tolist()):
        b = a if o == INV else b
        s = max(wand[a], wand[b])
        if o == AND:
            s, lin = s + 1, 0
        else:
            lin = max(wlin[a] if wand[a] == s else 0, wlin[b] if wand[b] == s else 0) + 1
        wand[w], wlin[w] = s, lin
        keys.add((s, max(lin, 1)))
    return len(keys)


def check_contract(c: Circuit) -> None:
    """ANDs read earlier levels; XOR/INV read earlier levels or the level's ANDs; AND levels = AND-depth."""
    ready = np.zeros(c.n_wires, dtype=bool)
    ready[: c.n_inputs] = True
    next_and = and_levels = 0
    for lv in c.levels:
        assert ready[lv.and_in0].all() and ready[lv.and_in1].all()
        assert np.array_equal(lv.and_index, np.arange(next_and, next_and + lv.n_and))
        next_and += lv.n_and
        and_levels += bool(lv.n_and)
        ready[lv.and_out] = True
        assert ready[lv.xor_in0].all() and ready[lv.xor_in1].all() and ready[lv.inv_in].all()
        ready[lv.xor_out] = True
        ready[lv.inv_out] = True
    assert next_and == c.n_and and ready.all()
    assert and_levels == c.stats().and_depth


def mul64() -> Circuit:
    b = Builder("mul64")
    x = b.input("x", 64, GARBLER)
    y = b.input("y", 64, EVALUATOR)
    b.output("z", x * y)
    return b.build()


def test_aes128_levels():
    c = resolve_circuit("aes128")
    check_contract(c)
    assert c.stats().and_depth == 60
    assert len(c.levels) <= 264 < stage_grouping_levels(c) == 314


@pytest.mark.parametrize(
    "name, bits", [("gini", 32), ("kendall", 32), ("variance", 32), ("auc", 16), ("collision", 64), ("mul", 64)]
)
def test_levels_not_more_than_stage_grouping(name, bits):
    c = mul64() if name == "mul" else build_kernel(name, bits)
    check_contract(c)
    assert len(c.levels) <= stage_grouping_levels(c)
    if name == "mul":
        assert len(c.levels) <= 3968


def test_sha256_levels(bristol_dir):
    from pairwise.circuits.bristol import read_bristol_fashion

    c = read_bristol_fashion(bristol_dir / "sha256.txt")
    check_contract(c)
    assert len(c.levels) <= 13913 < 19301 == stage_grouping_levels(c)


# --------------------------------------------------------------------------- engine steps


@pytest.mark.parametrize("batch", [1, 3])
def test_engine_levels_wider_than_a_step(monkeypatch, batch):
    """STEP_GATES patched tiny: every level runs in many steps (both the one-instance and the batch path).

    The numpy program only: the compiled one-instance path has no steps (tests/mpc/test_jit.py)."""
    monkeypatch.setattr(garble.program, "STEP_GATES", 5)  # (set where the engine reads it)
    monkeypatch.setattr(jit, "ENABLED", False)
    rng = np.random.default_rng(7)
    for c in (resolve_circuit("aes128"), build_kernel("kendall", 8, True)):
        bits = [rng.integers(0, 2, (batch, g.width)).astype(bool) for g in c.inputs]
        got = garble.garble_and_evaluate(c, bits)
        assert all(np.array_equal(a, b) for a, b in zip(got, c.evaluate_bits(bits)))


def test_engine_reuses_scratch_between_garblings(monkeypatch):
    """Batch-1 scratch buffers (and their level programs) go back to the plan's pool and are reused.

    The numpy program; tests/mpc/test_jit.py checks the compiled path's pool."""
    monkeypatch.setattr(jit, "ENABLED", False)
    c = build_kernel("gini", 16)
    bits = [np.ones((1, g.width), bool) for g in c.inputs]
    garble.garble_and_evaluate(c, bits)
    pool = garble._plan(c).pool
    key = (1, "garbler", garble.STEP_GATES)
    assert len(pool[key]) == 1
    work = pool[key][0]
    garble.garble_and_evaluate(c, bits)
    assert pool[key] == [work]


# --------------------------------------------------------------------------- two parties in one process


class Pair:
    """GarblerSession here, EvaluatorSession in a thread, over (optionally recorded) MemoryChannels."""

    def __init__(self, *, garbler_channel=None, **kw) -> None:
        a, b = MemoryChannel.pair(timeout=WAIT)
        self.garbler_channel = TranscriptChannel(a) if garbler_channel is None else garbler_channel(a)
        self.evaluator_channel = TranscriptChannel(b)
        self._jobs: queue.Queue = queue.Queue()
        self._results: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, args=(kw,), daemon=True)
        self._thread.start()
        self.garbler = GarblerSession(self.garbler_channel, **kw)
        ok, value = self._results.get(timeout=WAIT)
        if not ok:
            raise value
        self.evaluator = value

    def _loop(self, kw) -> None:
        try:
            session = EvaluatorSession(self.evaluator_channel, **kw)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self._results.put((False, exc))
            return
        self._results.put((True, session))
        while (job := self._jobs.get()) is not None:
            try:
                self._results.put((True, session.run(*job[:2], **job[2])))
            except BaseException as exc:  # noqa: BLE001
                self._results.put((False, exc))

    def run(self, circuit, g_in, e_in, **kw):
        self._jobs.put((circuit, e_in, kw))
        try:
            g = (True, self.garbler.run(circuit, g_in, **kw))
        except Exception as exc:  # noqa: BLE001
            g = (False, exc)
        e = self._results.get(timeout=WAIT)
        return g, e

    def run_ok(self, circuit, g_in, e_in, **kw):
        (gok, g), (eok, e) = self.run(circuit, g_in, e_in, **kw)
        if not gok:
            raise g
        if not eok:
            raise e
        return g, e

    def close(self) -> None:
        self._jobs.put(None)
        self.garbler.close()
        self.evaluator.close()
        self._thread.join(WAIT)


def aes_ecb(key: bytes, block: bytes) -> bytes:
    return Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(block)


def stream_frames(frames: list[bytes]) -> list[bytes]:
    """The garbler's frames of one execution without its header: the header opens the stream, or goes alone
    first when the COT pool had to grow (its input labels come from the session's label stream: no bytes)."""
    assert bytes(frames[0][:4]) == b"EXEC" and len(frames[0]) >= twopc.EXEC.size
    if len(frames[0]) == twopc.EXEC.size:
        return list(frames[1:])
    return [bytes(frames[0][twopc.EXEC.size :])] + list(frames[1:])


def test_aes128_frames_and_bytes_per_execution():
    c = resolve_circuit("aes128")
    p = Pair(ot_batch=1024)
    try:
        for i in range(3):
            key, pt = os.urandom(16), os.urandom(16)
            f0, e0 = len(p.garbler_channel.sent), len(p.evaluator_channel.sent)
            rg, re_ = p.run_ok(c, int.from_bytes(key, "big"), int.from_bytes(pt, "big"))
            assert rg.outputs[0] == re_.outputs[0] == int.from_bytes(aes_ecb(key, pt), "big")
            stream = stream_frames(p.garbler_channel.sent[f0:])
            tables = 32 * c.n_and
            assert sum(map(len, stream)) == tables + 16  # tables + 128 decoding bits
            # SPLIT (3) frames, not one per AND level (60): each ends at the first level boundary after its
            # share of the stream (frame_ends), the last one takes the rest with the decoding bits
            frames = p.garbler_channel.sent[f0:]
            apart = i == 0  # the first execution grows the COT pool: the headers cross on their own first
            assert len(frames) == twopc.wire.SPLIT + apart == 3 + apart, [len(f) for f in frames]
            ends = twopc.wire.frame_ends((0 if apart else twopc.EXEC.size) + tables + 16)
            pos = 0
            for f, end in zip(frames[apart:-1], ends):
                pos += len(f)
                assert end <= pos < end + session._yield_every(ends) + 32 * 280  # + the engine's yield step
            assert rg.messages_sent == len(stream) + apart  # else the header rides in the stream's first frame
            assert rg.bytes_sent == HEADER_BYTES * rg.messages_sent + twopc.EXEC.size + tables + 16
            # the evaluator: one request (header + the OT bits d), the output bits; in the first execution
            # the pool is empty: header, an IKNP batch, d, the output bits
            sent = [len(f) for f in p.evaluator_channel.sent[e0:]]
            if i == 0:
                assert re_.messages_sent == 4 and sent[0] == twopc.EXEC.size and sent[-2:] == [16, 16]
            else:
                assert re_.messages_sent == 2 and sent == [twopc.EXEC.size + 16, 16]
    finally:
        p.close()


def test_small_kernel_frame_overhead():
    """gini32: one frame, 32 B/AND plus a fixed 80 + 4 + 4 bytes (the garbler's 32 input bits cost no label bytes)."""
    c = build_kernel("gini", 32)
    p = Pair(ot_batch=1024)
    try:
        p.run_ok(c, 5, 9)
        rg, _ = p.run_ok(c, 7, 3)
        assert rg.outputs == [4]
        assert rg.messages_sent == 1  # one frame: header, tables, decoding bits
        n_out = sum(g.width for g in c.outputs)
        assert rg.bytes_sent == HEADER_BYTES + twopc.EXEC.size + 32 * c.n_and + n_out // 8
    finally:
        p.close()


@pytest.mark.parametrize("buffer, frame", [(1000, None), (1000, 1000), (None, 1000)])
def test_stream_paths_and_frame_limits(monkeypatch, buffer, frame):
    """The reused-buffer path and the segment-writer path (stream > STREAM_BUFFER), with tiny frame limits."""
    if buffer is not None:
        monkeypatch.setattr(twopc.wire, "STREAM_BUFFER", buffer)
    if frame is not None:
        monkeypatch.setattr(twopc.wire, "STREAM_FRAME", frame)
    c = build_kernel("variance", 16)
    rng = np.random.default_rng(5)
    g, e = [int(v) for v in rng.integers(0, 1 << 16, 40)], [int(v) for v in rng.integers(0, 1 << 16, 40)]
    p = Pair(ot_batch=1024)
    try:
        f0 = len(p.garbler_channel.sent)
        rg, re_ = p.run_ok(c, g, e)
        want = c.evaluate(g, e)[0]
        assert [int(v) for v in rg.outputs[0]] == [int(v) for v in re_.outputs[0]] == [int(v) for v in want]
        stream = stream_frames(p.garbler_channel.sent[f0:])
        n_out = sum(gr.width for gr in c.outputs)
        assert sum(map(len, stream)) == 32 * c.n_and * 40 + -(-n_out * 40 // 8)
        limit = twopc.wire.STREAM_FRAME
        frames = p.garbler_channel.sent[f0 + 1 :]  # (the first execution: the garbler's header went alone)
        assert len(p.garbler_channel.sent[f0]) == twopc.EXEC.size
        assert max(map(len, frames)) <= limit
        if buffer is not None:  # segment writer: every frame but the last has FRAME_TARGET .. STREAM_FRAME bytes
            assert all(min(twopc.wire.FRAME_TARGET, limit) <= len(f) for f in frames[:-1])
    finally:
        p.close()


class CutChannel(TranscriptChannel):
    """Closes the connection instead of sending its ``cut_after``-th frame (counted once armed)."""

    cut_after: int | None = None

    def _send_frame(self, view) -> None:
        if self.cut_after is not None:
            if self.cut_after == 0:
                self.inner.close()
                raise PeerClosed("test: the garbler is gone")
            self.cut_after -= 1
        super()._send_frame(view)


def test_garbler_gone_in_the_middle_of_the_stream():
    """For every frame of the table stream: the garbler vanishes there, the evaluator gets PeerClosed."""
    c = resolve_circuit("aes128")
    p = Pair(ot_batch=1024)
    try:
        f0 = len(p.garbler_channel.sent)
        p.run_ok(c, 1, 2)
        n_stream = len(p.garbler_channel.sent) - f0  # the execution's frames: its header opens the first
    finally:
        p.close()
    assert n_stream >= 3
    for cut in range(n_stream):  # before the first frame, inside the tables, before the decoding bits
        p = Pair(ot_batch=1024, garbler_channel=CutChannel)
        try:
            p.garbler_channel.cut_after = cut
            (gok, gexc), (eok, eexc) = p.run(c, 1, 2)
            assert not gok and isinstance(gexc, PeerClosed) and "the garbler is gone" in str(gexc)
            assert not eok and isinstance(eexc, PeerClosed), eexc
        finally:
            p.garbler_channel.cut_after = None
            p.close()


# --------------------------------------------------------------------------- COT batches of default sessions


def test_default_session_cot_batches_start_small_and_grow_in_step():
    p = Pair()  # ot_batch=None
    gc, ec = p.garbler.cot, p.evaluator.cot
    try:
        c = resolve_circuit("aes128")
        e0 = p.evaluator_channel.bytes_sent
        rg, re_ = p.run_ok(c, 1, 2)
        # one IKNP batch of 1024 COTs: 16 KiB (+16-byte header), not 1 MiB
        assert (ec.batches, ec.batch_size) == (gc.batches, gc.batch_size) == (1, 1024)
        assert re_.bytes_sent == p.evaluator_channel.bytes_sent - e0 < 20_000
        sizes = [ec.batch_size]
        k = build_kernel("kendall", 32)  # 64 evaluator bits per instance
        for batch in (30, 30, 100, 1000, 1500):
            before = ec.batches
            g_in = [1] * batch
            p.run_ok(k, g_in, g_in)
            assert (ec.batches, ec.batch_size, ec.index) == (gc.batches, gc.batch_size, gc.index)
            if ec.batches > before:
                sizes.append(ec.batch_size)
        assert sizes == sorted(sizes) and sizes[-1] <= DEFAULT_BATCH
        assert all(b >= min(2 * a, DEFAULT_BATCH) for a, b in zip(sizes, sizes[1:])), sizes
        assert len(sizes) >= 3
    finally:
        p.close()


def test_explicit_cot_batch_is_kept():
    p = Pair(ot_batch=2048)
    try:
        k = build_kernel("kendall", 32)
        p.run_ok(k, [1] * 100, [2] * 100)  # 6400 COTs: four batches of 2048
        assert (
            (p.evaluator.cot.batch_size, p.evaluator.cot.batches)
            == (2048, 4)
            == (p.garbler.cot.batch_size, p.garbler.cot.batches)
        )
    finally:
        p.close()


# --------------------------------------------------------------------------- the runtime leaves the engine's bytes alone


def test_stream_tables_are_the_engines_tables_bit_for_bit(monkeypatch):
    """The tables in the garbler's stream equal a standalone Garbler's for the same zero labels, Delta and
    instance offset, and the decoding bits its decode bits: frames, buffers and the session's reused
    Regarbler change nothing."""
    from pairwise.mpc.garble import Garbler, table_bytes
    from pairwise.mpc.garble.garbler import Regarbler

    made = []

    class Recording(Regarbler):
        def iter_into(self, zero, instance_offset, dest, every=0):
            made.append(
                (self.circuit, self.batch, self.chunk, np.array(self.delta[0]), np.array(zero), instance_offset)
            )
            return super().iter_into(zero, instance_offset, dest, every)

    monkeypatch.setattr(session, "Regarbler", Recording)
    c = resolve_circuit("aes128")
    p = Pair(ot_batch=1024)
    try:
        for i in range(3):
            f0 = len(p.garbler_channel.sent)
            p.run_ok(c, 1000 + i, 2000 + i)
            stream = b"".join(stream_frames(p.garbler_channel.sent[f0:]))
            circuit, batch, chunk, delta, zero, offset = made[-1]
            ref = Garbler(circuit, batch, delta=delta, input_zero=zero, instance_offset=offset, chunk=chunk)
            tables = bytes(ref.garble().tables)
            n = table_bytes(c, 1)
            assert stream[:n] == tables and offset == i
            assert stream[n:] == np.packbits(ref.decode_bits.reshape(-1), bitorder="little").tobytes()
        assert len(made) == 3
    finally:
        p.close()


@pytest.mark.parametrize("fused_path", [True, False])
def test_regarbler_matches_garbler_and_refuses_reused_offsets(fused_path):
    """Regarbler (the session's reused garbler) gives a fresh Garbler's tables and decoding bits on both of its
    paths (the AES-NI driver called directly; a Garbler per garbling, as without AES-NI), and refuses an
    instance offset that would repeat tweaks under its Delta."""
    from pairwise.mpc.garble import GarbleError, Garbler, table_bytes
    from pairwise.mpc.garble.garbler import Regarbler, fresh_delta

    c = resolve_circuit("aes128")
    delta = fresh_delta(1)[0]
    rg = Regarbler(c, 1, delta)
    rg._fused = rg._fused and fused_path
    dest = np.empty(table_bytes(c, 1) // 8, np.uint64)
    for offset in (0, 1, 5):
        zero = np.frombuffer(os.urandom(16 * c.n_inputs), np.uint64).reshape(c.n_inputs, 1, 2).copy()
        done = list(rg.iter_into(zero, offset, dest, 1 << 14))
        assert done[-1] == dest.nbytes
        ref = Garbler(c, 1, delta=delta, input_zero=zero, instance_offset=offset)
        assert dest.tobytes() == bytes(ref.garble().tables)
        assert (rg.decode_bits == ref.decode_bits).all() and (rg.output_zero == ref.output_zero).all()
    for bad in (5, 0):
        with pytest.raises(GarbleError, match="reuses tweaks"):
            next(rg.iter_into(zero, bad, dest))
