"""The AES-NI path: every chunk shape on compiled loops with the hash's AES inside them, on all cores.

What it does
    When the CPU has AES-NI and numba loads (:func:`pairwise.mpc.garble.jit.fused_ready`),
    :class:`~pairwise.mpc.garble.garbler.Garbler` and
    :class:`~pairwise.mpc.garble.evaluator.Evaluator` run every chunk here,
    whatever its instance count and level widths: :func:`garble` and
    :func:`evaluate` hand the program of the circuit
    (:func:`pairwise.mpc.garble.jit._jit_program`) to the kernels of
    :mod:`._fused_kernels`, one call per run of AND levels, with no OpenSSL
    call and no Python work per level beyond that call.  The labels of a
    chunk live in one pooled (n_slots, bc, 2) buffer (:class:`_Scratch`).

    Both cores: when the caller needs no progress in between (``garble()``
    into memory, ``evaluate`` of tables held whole), a chunk of at least
    2 :data:`MIN_THREAD_ITEMS` AND gate-instances is split into instance
    ranges, one per thread, each running all levels with no synchronisation;
    a chunk with too few instances has its *wide* levels (at least
    :data:`MIN_THREAD_ITEMS` gate-instances) split into gate ranges, with
    one join per wide level.  The kernels are ``nogil``; the threads
    (:data:`THREADS`, default: the CPUs this process may use) are a pool
    started on first use, and a part that no pool thread has taken yet is
    run by the caller (so a busy pool never makes it wait).  Tables and
    labels do not depend on the split.  Streaming runs (``iter_tables``,
    ``iter_into``, tables arriving as a stream) use one thread, since their
    consumer or producer is the other core's work.

Security model
    As :mod:`._fused_kernels`: semi-honest half-gates, TMMO over fixed-key
    AES (Guo-Katz-Wang-Yu 2020, Sec. 7.4), no branch or memory index on
    secrets; the split into threads depends only on public sizes.  Scratch
    is pooled like the numpy program's (it keeps the labels of a finished
    run in this process's memory).

Follows
    Zahur-Rosulek-Evans 2015, Fig. 2; docs/garbling.md "The AES-NI path".
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from ..aes import FIXED_ROUND_KEYS_X4
from .format import _U64, _Reader
from .jit import HEADER, _jit_program, fused_kernels
from .plan import _chunks, _Plan
from .program import _keep_spare

if TYPE_CHECKING:
    from .garbler import Garbler

__all__ = ["THREADS", "MIN_THREAD_ITEMS", "garble", "evaluate"]


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


#: Threads one garbling or evaluation may use (``PAIRWISE_THREADS``, default: the CPUs of this process).
THREADS = int(os.environ.get("PAIRWISE_THREADS", "0") or 0) or _cpus()
#: A thread gets at least this many AND gate-instances (about 100 us of work) or XOR/INV gate-instances x 8.
MIN_THREAD_ITEMS = 1 << 13

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(1, THREADS - 1), thread_name_prefix="pairwise-garble")
        return _POOL


def _parallel(parts: list[Callable[[], object]]) -> list:
    """Run the callables on the calling thread and the pool; a part no pool thread has started yet is run
    by the caller itself, so a pool busy with another garbling never makes this one wait for it."""
    if len(parts) == 1:
        return [parts[0]()]
    futs = [_pool().submit(p) for p in parts[1:]]
    res: list = []
    err: BaseException | None = None
    for i, p in enumerate(parts):  # every part runs to its end (they share buffers) before anything is raised
        try:
            res.append(p() if i == 0 or futs[i - 1].cancel() else futs[i - 1].result())
        except BaseException as exc:  # noqa: BLE001 - re-raised below, once all parts are done
            err = err or exc
            res.append(None)
    if err is not None:
        raise err
    return res


def _split(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    step = -(-(hi - lo) // parts)
    return [(a, min(hi, a + step)) for a in range(lo, hi, step)]


class _Scratch:
    """The labels of one chunk, (n_slots, chunk, 2) words, and (garbler) its Delta per instance."""

    def __init__(self, plan: _Plan, chunk: int) -> None:
        self.lab = np.empty(plan.n_slots * chunk * 2, _U64)
        self.delta = np.empty(chunk * 2, _U64)
        self.tables: np.ndarray | None = None  # (garbler, streaming) the tables of one chunk
        self.nbytes = self.lab.nbytes + self.delta.nbytes

    @classmethod
    def acquire(cls, plan: _Plan, role: str, chunk: int) -> _Scratch:
        try:
            return plan.pool.get(("fused", role, chunk), []).pop()
        except IndexError:
            return cls(plan, chunk)

    def release(self, plan: _Plan, role: str, chunk: int, keep: bool) -> None:
        _keep_spare(plan.pool, ("fused", role, chunk), self, keep)


class _Info:
    """What the AES-NI path needs of a plan, computed once: the program, AND count per batch (the last row:
    0), per batch its XOR/INV gates split by level (ranges of independent gates, which threads may share),
    and the output slots."""

    def __init__(self, plan: _Plan) -> None:
        P, _ = _jit_program(plan)
        nb = int(P[2])
        rows = P[HEADER + 3 * int(P[0]) + 3 * int(P[1]) :].reshape(nb + 1, 5)
        lins: list[list[tuple[int, int]]] = [[] for _ in range(nb + 1)]
        i, pos = 0, 0
        for lv in plan.levels:  # (the order of jit._jit_program: a level's ANDs start batch i, its XORs follow)
            if lv.k:
                i += 1
            if lv.n_lin:
                lins[i].append((pos, pos + lv.n_lin))
                pos += lv.n_lin
        for r, ranges in zip(rows, lins):
            assert sum(b - a for a, b in ranges) == r[3] - r[2] and (not ranges or ranges[0][0] == r[2])
        self.P = P
        self.nb = nb
        self.ks = [int(k) for k in rows[:, 1] - rows[:, 0]]
        self.lins = lins
        self.n_and = sum(self.ks)
        self.max_k = max(self.ks)
        self.out_slots = np.ascontiguousarray(plan.out_slots, dtype=np.int64)
        self._spans: dict[tuple[int, int], list[tuple[int, int]]] = {}

    def spans(self, bc: int, every: int) -> list[tuple[int, int]]:
        """:func:`_spans` of this program, kept per (chunk size, every): a session's executions repeat them."""
        got = self._spans.get((bc, every))
        if got is None:
            if len(self._spans) >= 64:
                self._spans.clear()
            got = self._spans[bc, every] = _spans(self.ks, bc, every)
        return got


def _info(plan: _Plan) -> _Info:
    got = plan.jit.get("fused")
    if got is None:
        got = plan.jit["fused"] = _Info(plan)
    return got


def _run_whole(K, role: str, lab, info: _Info, bc: int, key: tuple, tab, off: int) -> int:
    """All batches of a chunk, on up to THREADS threads (instance ranges, or gate ranges of wide levels)."""
    P, nb, ks = info.P, info.nb, info.ks
    threads = THREADS
    run = K.garble_batches if role == "garbler" else K.eval_batches
    wide = info.max_k * bc >= 2 * MIN_THREAD_ITEMS  # a level worth splitting by gates
    split = bc >= 2 and info.n_and * bc >= 2 * MIN_THREAD_ITEMS  # instances worth splitting
    if threads == 1 or not (wide or split):
        return int(run(lab, P, 0, nb + 1, (bc, 0, bc), key, tab, off))
    if split:
        parts = min(threads, bc, info.n_and * bc // MIN_THREAD_ITEMS)
        res = _parallel(
            [
                lambda n0=n0, n1=n1: run(lab, P, 0, nb + 1, (bc, n0, n1), key, tab, off)  # type: ignore[misc]  # lambdas bind loop values as defaults
                for n0, n1 in _split(0, bc, parts)
            ]
        )
        return int(res[0])
    ands = K.garble_ands if role == "garbler" else K.eval_ands
    i = 0
    while i <= nb:  # runs of narrow levels in one call each; wide levels split by gates
        j = i
        while j <= nb and ks[j] * bc < 2 * MIN_THREAD_ITEMS:
            j += 1
        if j > i:
            off = int(run(lab, P, i, j, (bc, 0, bc), key, tab, off))
        if j > nb:
            break
        for l0, l1 in info.lins[j]:  # XOR/INV gates level by level (a level's gates are independent)
            lp = min(threads, max(1, (l1 - l0) * bc // (8 * MIN_THREAD_ITEMS)))
            _parallel([lambda a=a, b=b: K.linear(lab, P, a, b, bc, 0, bc) for a, b in _split(l0, l1, lp)])  # type: ignore[misc]  # lambdas bind loop values as defaults
        k = ks[j]
        parts = min(threads, k * bc // MIN_THREAD_ITEMS)
        _parallel(
            [
                lambda a=a, b=b, j=j, off=off: ands(lab, P, j, a, b, (bc, 0, bc), key, tab, off)  # type: ignore[misc]  # lambdas bind loop values as defaults
                for a, b in _split(0, k, parts)
            ]
        )
        off += 4 * k * bc
        i = j + 1
    return off


def _spans(ks: list[int], bc: int, every: int) -> list[tuple[int, int]]:
    """Runs of batches [i, j) whose tables reach ``every`` bytes (the last run ends with the last row)."""
    out, i, acc = [], 0, 0
    nb = len(ks) - 1
    for j in range(nb + 1):
        acc += 32 * ks[j] * bc
        if (acc >= every and acc > 0) or j == nb:
            out.append((i, j + 1))
            i, acc = j + 1, 0
    return out


#: A streaming garbler (``iter_tables``) garbles a chunk in one call when its tables take at most this many
#: bytes (then yields the chunk's segments one by one), else level by level.
CHUNK_TABLE_BYTES = 16 << 20

#: Label copies (inputs in, outputs out) of at least this many blocks are split over the threads.
MIN_THREAD_COPY = 1 << 16


def _copy_in(dst: np.ndarray, src: np.ndarray, par: bool) -> None:
    """dst[...] = src, (rows, bc, 2) blocks, split by rows over the threads when ``par`` and large
    (numpy copies release the GIL)."""
    rows = dst.shape[0]
    if not par or dst.size < 2 * MIN_THREAD_COPY * 2 or rows < 2:
        dst[...] = src
        return
    parts = min(THREADS, rows, dst.size // (2 * MIN_THREAD_COPY))
    _parallel([lambda a=a, b=b: np.copyto(dst[a:b], src[a:b]) for a, b in _split(0, rows, parts)])  # type: ignore[misc]  # lambdas bind loop values as defaults


def _gather(
    K, lab, slots: np.ndarray, bc: int, out_flat: np.ndarray, batch: int, b0: int, bits_flat: np.ndarray, par: bool
) -> None:
    """K.gather_out, split by output rows over the threads when ``par`` and large."""
    n_out = slots.shape[0]
    if not par or n_out * bc < 2 * MIN_THREAD_COPY or n_out < 2:
        K.gather_out(lab, slots, bc, out_flat, batch, b0, bits_flat)
        return
    parts = min(THREADS, n_out, n_out * bc // MIN_THREAD_COPY)
    _parallel(
        [
            lambda a=a, b=b: K.gather_out(
                lab,
                slots[a:b],
                bc,
                out_flat[2 * a * batch :],
                batch,
                b0,  # type: ignore[misc]  # lambdas bind loop values as defaults
                bits_flat[a * batch :] if bits_flat.shape[0] else bits_flat,
            )
            for a, b in _split(0, n_out, parts)
        ]
    )


def _groups(chunks: list[tuple[int, int]], parts: int) -> list[list[tuple[int, int]]]:
    """Consecutive chunks in ``parts`` groups of about equal instance counts."""
    total = chunks[-1][1]
    groups: list[list[tuple[int, int]]] = [[] for _ in range(parts)]
    for b0, b1 in chunks:
        groups[min(parts - 1, b0 * parts // total)].append((b0, b1))
    return [g for g in groups if g]


def garble(
    g: Garbler,
    plan: _Plan,
    zero: np.ndarray,
    dest: np.ndarray | None,
    scratch: np.ndarray | None,
    every: int,
    whole: bool,
) -> Iterator[np.ndarray]:
    """Garble every chunk of the garbler ``g`` (its Delta per instance, instance offset, batch, chunk,
    scratch policy, and output arrays); yield table segments as :meth:`Garbler._run` does.

    With ``dest`` (all tables, flat words): views of what was written since
    the last yield once that reaches ``every`` bytes, or (``whole``) all of
    it at the end, the chunks then going to every thread; without: each
    AND level's segment, in ``scratch`` (reused) or a fresh array.  Fills
    ``output_zero`` (n_out, batch, 2), ``decode_bits`` (n_out, batch) and,
    if given, ``wire_zero`` (n_wires, batch, 2) (the arrays of ``g``).
    """
    delta, instance_offset, batch, chunk, keep = g.delta, g.instance_offset, g.batch, g.chunk, g._keep
    output_zero, decode_bits, wire_zero = g.output_zero, g.decode_bits, g.wire_zero
    assert output_zero is not None and decode_bits is not None  # allocated by Garbler._run
    K = fused_kernels()
    info = _info(plan)
    P, nb, ks = info.P, info.nb, info.ks
    rk = FIXED_ROUND_KEYS_X4
    n_in = plan.in_slots.shape[0]
    out_flat, bits_flat = output_zero.reshape(-1), decode_bits.reshape(-1).view(np.uint8)

    def start(w: _Scratch, b0: int, b1: int, par: bool = False) -> tuple:
        bc = b1 - b0
        lab = w.lab[: plan.n_slots * bc * 2]
        lab3 = lab.reshape(plan.n_slots, bc, 2)
        _copy_in(lab3[:n_in], zero[:, b0:b1], par)
        lab3[plan.one_slot] = delta[b0:b1]
        dl = w.delta[: 2 * bc]
        dl.reshape(bc, 2)[...] = delta[b0:b1]
        return bc, lab, lab3, (dl, _U64(instance_offset + b0), rk)

    def finish(lab, lab3, bc: int, b0: int, b1: int, par: bool = False) -> None:
        _gather(K, lab, info.out_slots, bc, out_flat, batch, b0, bits_flat, par)
        if wire_zero is not None:
            wire_zero[:, b0:b1] = lab3[: wire_zero.shape[0]]

    chunks = _chunks(batch, chunk)
    if dest is not None and whole and THREADS > 1 and len(chunks) > 1 and info.n_and * batch >= 2 * MIN_THREAD_ITEMS:

        def group(cs: list[tuple[int, int]]) -> None:  # a thread's chunks, one call each, tables in place
            w = _Scratch.acquire(plan, "garbler", chunk)
            try:
                for b0, b1 in cs:
                    bc, lab, lab3, key = start(w, b0, b1)
                    K.garble_batches(lab, P, 0, nb + 1, (bc, 0, bc), key, dest, 4 * info.n_and * b0)
                    finish(lab, lab3, bc, b0, b1)
            finally:
                w.release(plan, "garbler", chunk, keep)

        _parallel([lambda cs=cs: group(cs) for cs in _groups(chunks, THREADS)])  # type: ignore[misc]  # lambdas bind loop values as defaults
        yield dest
        return
    w = _Scratch.acquire(plan, "garbler", chunk)
    pos = 0
    par = whole and dest is not None and THREADS > 1
    try:
        for b0, b1 in chunks:
            bc, lab, lab3, key = start(w, b0, b1, par)
            if dest is not None and whole:
                end = _run_whole(K, "garbler", lab, info, bc, key, dest, pos)
                yield dest[pos:end]
                pos = end
            elif dest is not None:
                for i, j in info.spans(bc, every):
                    end = int(K.garble_batches(lab, P, i, j, (bc, 0, bc), key, dest, pos))
                    if end > pos:
                        yield dest[pos:end]
                    pos = end
            elif 32 * info.n_and * bc <= CHUNK_TABLE_BYTES:  # the chunk in one call, then its segments
                if w.tables is None:
                    w.tables = np.empty(4 * info.n_and * chunk, _U64)
                    w.nbytes += w.tables.nbytes
                K.garble_batches(lab, P, 0, nb + 1, (bc, 0, bc), key, w.tables, 0)
                pos = 0
                for k in ks:
                    if k:
                        seg = w.tables[pos : pos + 4 * k * bc]
                        pos += 4 * k * bc
                        if scratch is None:
                            yield seg.copy()
                        else:
                            scratch[: seg.shape[0]] = seg
                            yield scratch[: seg.shape[0]]
            else:
                for i in range(nb + 1):
                    size = 4 * ks[i] * bc
                    seg = (scratch[:size] if scratch is not None else np.empty(size, _U64)) if size else _EMPTY
                    K.garble_batches(lab, P, i, i + 1, (bc, 0, bc), key, seg, 0)
                    if size:
                        yield seg
            finish(lab, lab3, bc, b0, b1, par)
    finally:
        w.release(plan, "garbler", chunk, keep)


def evaluate(
    plan: _Plan,
    act: np.ndarray,
    instance_offset: int,
    batch: int,
    chunk: int,
    reader: _Reader,
    keep: bool,
    out: np.ndarray,
    wire_labels: np.ndarray | None,
) -> None:
    """Evaluate every chunk, pulling each run of tables from ``reader``; output labels into ``out``.

    Tables held whole (``reader.whole``) let the chunks (or a single
    chunk's instances or wide levels) use every thread; from a stream, each
    run of levels whose tables lie in the piece at hand is one call (a
    level spanning pieces is copied once by the reader).
    """
    K = fused_kernels()
    info = _info(plan)
    P, nb, ks = info.P, info.nb, info.ks
    rk = FIXED_ROUND_KEYS_X4
    n_in = plan.in_slots.shape[0]
    out_flat = out.reshape(-1)

    def start(w: _Scratch, b0: int, b1: int, par: bool = False) -> tuple:
        bc = b1 - b0
        lab = w.lab[: plan.n_slots * bc * 2]
        lab3 = lab.reshape(plan.n_slots, bc, 2)
        _copy_in(lab3[:n_in], act[:, b0:b1], par)
        lab3[plan.one_slot] = 0
        return bc, lab, lab3, (_U64(instance_offset + b0), rk)

    def finish(lab, lab3, bc: int, b0: int, b1: int, par: bool = False) -> None:
        _gather(K, lab, info.out_slots, bc, out_flat, batch, b0, _NO_BITS, par)
        if wire_labels is not None:
            wire_labels[:, b0:b1] = lab3[: wire_labels.shape[0]]

    chunks = _chunks(batch, chunk)
    if reader.whole and THREADS > 1 and len(chunks) > 1 and info.n_and * batch >= 2 * MIN_THREAD_ITEMS:
        tab, off = reader.read_at(32 * info.n_and * batch)

        def group(cs: list[tuple[int, int]]) -> None:
            w = _Scratch.acquire(plan, "evaluator", chunk)
            try:
                for b0, b1 in cs:
                    bc, lab, lab3, key = start(w, b0, b1)
                    K.eval_batches(lab, P, 0, nb + 1, (bc, 0, bc), key, tab, off + 4 * info.n_and * b0)
                    finish(lab, lab3, bc, b0, b1)
            finally:
                w.release(plan, "evaluator", chunk, keep)

        _parallel([lambda cs=cs: group(cs) for cs in _groups(chunks, THREADS)])  # type: ignore[misc]  # lambdas bind loop values as defaults
        return
    w = _Scratch.acquire(plan, "evaluator", chunk)
    par = reader.whole and THREADS > 1
    try:
        for b0, b1 in chunks:
            bc, lab, lab3, key = start(w, b0, b1, par)
            if reader.whole:
                tab, off = reader.read_at(32 * info.n_and * bc)
                _run_whole(K, "evaluator", lab, info, bc, key, tab, off)
            else:  # one call per piece of the stream: every level whose tables lie in it
                i = 0
                while i <= nb:
                    words, off, n = reader.peek()
                    i2, end = K.eval_fit(lab, P, i, nb + 1, bc, key, words, off, off + n)
                    if i2 > i:
                        reader.skip(8 * (end - off))
                        i = i2
                    else:  # the next level's tables span pieces: one copy
                        tab, o = reader.read_at(32 * ks[i] * bc)
                        K.eval_batches(lab, P, i, i + 1, (bc, 0, bc), key, tab, o)
                        i += 1
            finish(lab, lab3, bc, b0, b1, par)
    finally:
        w.release(plan, "evaluator", chunk, keep)


_EMPTY = np.zeros(0, _U64)
_NO_BITS = np.zeros(0, np.uint8)
