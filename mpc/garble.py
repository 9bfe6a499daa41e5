"""Vectorized half-gates garbling and evaluation of whole circuits over SIMD batches.

What it does
    :class:`Garbler` garbles a :class:`~circuits.ir.Circuit` for ``B``
    independent instances at once and :class:`Evaluator` evaluates the
    result.  Neither loops over gates or instances in Python: the circuit's
    level schedule (:attr:`Circuit.levels`) is walked once, and each level is
    a handful of numpy calls plus one fixed-key AES call covering every AND
    gate of the level for every instance (4 hashes per AND for the garbler,
    2 for the evaluator).  The per-gate algebra is that of the pure reference
    functions in :mod:`mpc.halfgates` (Zahur-Rosulek-Evans 2015, Fig. 2, with
    free-XOR and point-and-permute); the tests check the engine against them
    gate by gate.

    Inside the engine, labels are *planar*: an array ``(2, slots, b)`` of
    ``uint64`` holding the low words and the high words of the labels of
    ``b`` instances in two separate planes, so every XOR, mask and select is
    a contiguous numpy call with no length-2 inner loop; only the AES input
    and output use interleaved 16-byte blocks.  Wires are mapped to a small
    set of reusable *slots* (a wire's slot is freed after its last reader's
    level), so memory is the circuit's live width, not its wire count.  An
    INV gate is an XOR with a constant-one slot that holds Delta on the
    garbler's side (the one-wire's zero label) and the zero block on the
    evaluator's side (its active label), so XOR and INV of a level are one
    gather-xor-scatter for both roles.

    The batch is processed in instance chunks of ``chunk`` instances (both
    parties must use the same chunk size; :func:`default_chunk` is a
    deterministic function of the circuit and the batch), and a level's
    gates are processed in steps of about ``STEP_GATES`` gate-instances so
    the working set stays in cache.  Neither affects results; only ``chunk``
    affects the byte order of the tables.

Security model
    Semi-honest (honest-but-curious) Yao with half-gates.  Labels and Delta
    are 128-bit and come from the OS CSPRNG (:func:`mpc.aes.random_blocks`)
    unless the caller supplies them (the two-party runtime supplies one
    session Delta and the zero labels of the evaluator's input wires, which
    come out of IKNP correlated OT).  Each instance has its own Delta by
    default, with lowest bit 1 (point-and-permute).  A :class:`Garbler`
    garbles once: evaluating one garbled circuit on two inputs of the
    evaluator would leak, so fresh labels are drawn per garbling.  Whoever
    receives the decoding bits learns the outputs.

Hash and assumption
    H(x, i) = pi(sigma(x) ^ i) ^ sigma(x), the tweakable circular
    correlation-robust hash of Guo, Katz, Wang and Yu (S&P 2020) over the
    fixed-key AES pi of :mod:`mpc.aes`, assumed to be an ideal permutation
    (GKWY 2020, Sec. 7: half-gates with this hash is secure in the
    random-permutation model).  The proof needs every tweak to be used with
    one label pair {x, x ^ Delta} only (the garbler hashes both labels of
    an AND input under the gate's tweak, the evaluator the active one).

Tweak uniqueness
    The tweak of half ``h`` (0: garbler half T_G, 1: evaluator half T_E) of
    the AND gate with dense index ``g`` (``Level.and_index``) in instance
    ``n`` is the block (lo, hi) = (2*g + h, n) with n = ``instance_offset``
    + the instance's position in the batch.  Within one garbling the map
    (g, h, n) -> tweak is injective because g < 2**62 and n < 2**63.  When
    many garblings share one Delta (one IKNP session), the caller gives
    each garbling a disjoint range of instance ids (``instance_offset``
    advanced by the batch size each time), so tweaks never repeat across the
    session.  The top bit of the high word is always 0 here; any other use of
    the same Delta with this hash (e.g. hashing correlated OTs) must set it.

What the evaluator learns
    One label per wire per instance (the active one), the tables and the
    decoding bits of the output wires.  Under the assumption above these are
    simulatable from the outputs: the evaluator learns the outputs of the
    instances and nothing else about the garbler's inputs; it never sees a
    label of the inactive value of any wire nor Delta.  Tables reveal the
    circuit (public) and the batch size.

Byte layout of the tables
    The garbled tables of a batch are ``32 * n_and * B`` bytes:
    for each instance chunk (instances [c*chunk, min(B, (c+1)*chunk)), in
    order), for each level that has AND gates (in schedule order), one
    *segment* of ``32 * k * b`` bytes (k: the level's ANDs, b: the chunk's
    instances), the little-endian ``uint64`` array of shape (2, 2, k, b)
    indexed [h, w, g, n]: word w (0 = low, 1 = high 64 bits) of ciphertext h
    (0 = T_G, 1 = T_E) of the level's g-th AND (``and_index`` = the level's
    first index + g) for the chunk's n-th instance.  A ciphertext is the
    16 bytes (low word LE, high word LE), as in :mod:`mpc.aes`.
    :meth:`Garbler.iter_tables` yields exactly these segments;
    :meth:`Evaluator.evaluate` accepts them re-split arbitrarily.
    :class:`GarbledCircuit` adds a fixed ``HEADER_SIZE``-byte header.

Follows
    Zahur, Rosulek, Evans, "Two Halves Make a Whole", EUROCRYPT 2015;
    Guo, Katz, Wang, Yu, "Efficient and Secure Multiparty Computation from
    Fixed-Key Block Ciphers", S&P 2020; DESIGN.md "mpc: vectorized garbling".
"""

from __future__ import annotations

import struct
import sys
import weakref
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

from circuits.ir import Circuit, CircuitError

from .aes import BlockBuffer, FixedKeyAES, default_aes, random_blocks
from .halfgates import TWEAK_INSTANCE_LIMIT

__all__ = [
    "GarbleError",
    "GarbledCircuit",
    "Garbler",
    "Evaluator",
    "HEADER_SIZE",
    "STEP_GATES",
    "default_chunk",
    "fresh_delta",
    "decode",
    "split_outputs",
    "garble_and_evaluate",
    "table_bytes",
]

if sys.byteorder != "little":  # pragma: no cover - the block layout is little-endian
    raise ImportError("mpc.garble needs a little-endian machine (block layout of mpc.aes)")

#: Gate-instances processed per numpy step (keeps the AES buffer ~1 MiB, in cache).
STEP_GATES = 1 << 14
#: Labels of one instance chunk may use at most this many bytes (by default).
CHUNK_LABEL_BYTES = 96 << 20
#: Largest default instance chunk.
MAX_CHUNK = 16384

_MAGIC = b"PWGC"
_VERSION = 1
_HEADER = struct.Struct("<4sHH32sQQQQ")
HEADER_SIZE = _HEADER.size  # 72 bytes

_U64 = np.uint64
_ONE = np.uint64(1)


class GarbleError(ValueError):
    """Bad parameters or malformed garbled material (sizes, headers, labels)."""


# ---------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class _LevelPlan:
    """One level in slot coordinates."""

    and_a: np.ndarray
    and_b: np.ndarray
    and_out: np.ndarray  # (2, k): output slots in the (2 * n_slots, b) view, per plane
    and_base: int
    tlo: np.ndarray  # (2, k) uint64: low tweak words 2*g + h
    lin_a: np.ndarray  # XOR gates, then INV gates as XOR with the constant-one slot
    lin_b: np.ndarray
    lin_out: np.ndarray  # (2, n), like and_out
    k: int  # number of AND gates


@dataclass(frozen=True)
class _Plan:
    n_slots: int  # including the constant-one slot
    one_slot: int
    in_slots: np.ndarray
    out_slots: np.ndarray
    levels: tuple[_LevelPlan, ...]
    n_and: int
    max_width: int  # most gates of one kind in a level


_PLANS: "weakref.WeakKeyDictionary[Circuit, dict[bool, _Plan]]" = weakref.WeakKeyDictionary()


def _plan(circuit: Circuit, compact: bool = True) -> _Plan:
    """The circuit's level schedule mapped to reusable label slots (cached per circuit)."""
    per = _PLANS.setdefault(circuit, {})
    if compact not in per:
        per[compact] = _build_plan(circuit, compact)
    return per[compact]


def _two_planes(slots: np.ndarray, n_slots: int) -> np.ndarray:
    """Row indices (2, k) of ``slots`` in both planes of a (2 * n_slots, b) label view."""
    return np.stack([slots, slots + n_slots]).astype(np.intp)


def _build_plan(circuit: Circuit, compact: bool) -> _Plan:
    levels = circuit.levels
    nl = len(levels)
    n_in = circuit.n_inputs
    nw = circuit.n_wires
    out_wires = (
        np.concatenate([g.wires for g in circuit.outputs]) if circuit.outputs else np.zeros(0, np.int64)
    )
    if not compact:
        slot = np.arange(nw, dtype=np.intp)
        n_slots = nw
    else:
        # last[w]: index of the last level reading w (or writing it, if nobody reads it).
        last = np.full(nw, -1, dtype=np.int64)
        prod = np.full(nw, -1, dtype=np.int64)
        for li, lv in enumerate(levels):
            for arr in (lv.and_in0, lv.and_in1, lv.xor_in0, lv.xor_in1, lv.inv_in):
                last[arr] = li
            for arr in (lv.and_out, lv.xor_out, lv.inv_out):
                prod[arr] = li
        last = np.where(last < 0, prod, last)
        last[out_wires] = nl  # outputs stay live to the end
        order = np.argsort(last, kind="stable")
        bounds = np.searchsorted(last[order], np.arange(-1, nl + 2))
        slot = np.full(nw, -1, dtype=np.intp)
        slot[:n_in] = np.arange(n_in)
        n_slots = n_in
        # Slots of wires freed after level li become available at level li + 1,
        # so a level never overwrites a slot that one of its own gates reads.
        freed = order[bounds[0] : bounds[1]]
        pool = slot[freed]
        pool = pool[pool >= 0]
        for li, lv in enumerate(levels):
            outs = np.concatenate([lv.and_out, lv.xor_out, lv.inv_out])
            m = outs.shape[0]
            reuse = min(m, pool.shape[0])
            fresh = np.arange(n_slots, n_slots + m - reuse, dtype=np.intp)
            slot[outs] = np.concatenate([pool[pool.shape[0] - reuse :][::-1], fresh])
            pool = pool[: pool.shape[0] - reuse]
            n_slots += m - reuse
            freed = order[bounds[li + 1] : bounds[li + 2]]
            got = slot[freed]
            pool = np.concatenate([pool, got[got >= 0]])
    plans = []
    n_and = 0
    max_width = 1
    for lv in levels:
        k = lv.n_and
        base = int(lv.and_index[0]) if k else n_and
        if k and not np.array_equal(lv.and_index, np.arange(base, base + k)):
            raise CircuitError("level AND indices must be dense and increasing (IR contract)")
        g = np.arange(base, base + k, dtype=_U64) * _U64(2)
        tlo = np.stack([g, g + _ONE]) if k else np.zeros((2, 0), _U64)
        plans.append(
            _LevelPlan(
                and_a=slot[lv.and_in0],
                and_b=slot[lv.and_in1],
                and_out=_two_planes(slot[lv.and_out], n_slots + 1),
                and_base=base,
                k=k,
                tlo=tlo,
                lin_a=np.concatenate([slot[lv.xor_in0], slot[lv.inv_in]]),
                lin_b=np.concatenate([slot[lv.xor_in1], np.full(lv.inv_in.shape[0], n_slots, np.intp)]),
                lin_out=_two_planes(np.concatenate([slot[lv.xor_out], slot[lv.inv_out]]), n_slots + 1),
            )
        )
        n_and += k
        max_width = max(max_width, k, lv.xor_out.shape[0] + lv.inv_out.shape[0])
    if n_and != circuit.n_and:
        raise CircuitError("level schedule does not cover every AND gate")
    if n_and and 2 * n_and >= TWEAK_INSTANCE_LIMIT:  # pragma: no cover - absurd sizes
        raise GarbleError("too many AND gates for 64-bit tweaks")
    return _Plan(
        n_slots=n_slots + 1,
        one_slot=n_slots,
        in_slots=slot[:n_in].copy(),
        out_slots=slot[out_wires],
        levels=tuple(plans),
        n_and=n_and,
        max_width=max_width,
    )


# ---------------------------------------------------------------------------- helpers
def default_chunk(circuit: Circuit, batch: int) -> int:
    """Deterministic instance-chunk size for ``batch`` instances of ``circuit``.

    At most :data:`MAX_CHUNK` instances, and the chunk's labels fit in
    :data:`CHUNK_LABEL_BYTES`.  Both parties compute the same value.
    """
    _check_batch(batch)
    plan = _plan(circuit)
    per_instance = 16 * (plan.n_slots + plan.max_width)
    return int(max(1, min(batch, MAX_CHUNK, CHUNK_LABEL_BYTES // per_instance)))


def table_bytes(circuit: Circuit, batch: int) -> int:
    """Size in bytes of the garbled tables: 32 per AND gate per instance."""
    return 32 * circuit.n_and * batch


def fresh_delta(batch: int) -> np.ndarray:
    """Independent CSPRNG free-XOR offsets, one per instance, shape (batch, 2), lsb 1."""
    d = random_blocks(batch)
    d[:, 0] |= _ONE
    return d


def _check_batch(batch) -> int:
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise GarbleError(f"batch must be a positive integer, got {batch!r}")
    return int(batch)


def _check_chunk(circuit: Circuit, batch: int, chunk) -> int:
    if chunk is None:
        return default_chunk(circuit, batch)
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise GarbleError(f"chunk must be a positive integer, got {chunk!r}")
    return int(min(chunk, batch))


def _check_offset(offset, batch: int) -> int:
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise GarbleError(f"instance_offset must be a non-negative integer, got {offset!r}")
    if int(offset) + batch > TWEAK_INSTANCE_LIMIT:
        raise GarbleError("instance ids (instance_offset + batch) must stay below 2**63")
    return int(offset)


def _chunks(batch: int, chunk: int) -> list[tuple[int, int]]:
    return [(b0, min(batch, b0 + chunk)) for b0 in range(0, batch, chunk)]


def _segment_sizes(plan: _Plan, batch: int, chunk: int) -> list[int]:
    return [32 * lv.k * (b1 - b0) for b0, b1 in _chunks(batch, chunk) for lv in plan.levels if lv.k]


def _as_blocks(a, shape: tuple[int, ...], what: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype != np.uint64:
        raise GarbleError(f"{what} must be a uint64 block array, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise GarbleError(f"{what} must have shape {shape}, got {arr.shape}")
    return arr


def _planar(blocks: np.ndarray) -> np.ndarray:
    """(..., b, 2) interleaved blocks -> (2, ..., b) contiguous planes."""
    return np.ascontiguousarray(np.moveaxis(blocks, -1, 0))


def _flat(buf: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A C-contiguous view of the first prod(shape) elements of a flat buffer."""
    n = 1
    for s in shape:
        n *= s
    return buf[:n].reshape(shape)


class _Work:
    """Scratch buffers of one garbling/evaluation, sized for its largest chunk and reused.

    Fresh memory is expensive to touch (page faults), so one set of buffers
    serves every chunk, level and step; :meth:`start_chunk` sets the chunk's
    instance count and (garbler) its Delta-dependent constants.
    """

    def __init__(self, max_bc: int, plan: _Plan) -> None:
        self.plan = plan
        n = min(plan.max_width * max_bc, max(STEP_GATES, max_bc))  # >= step * b for every chunk
        self.x = np.empty(4 * n, _U64)  # (2 [A,B], 2 [lo,hi], k, b)
        self.xs = np.empty(2 * n, _U64)  # (2 [A,B], k, b)
        self.d = np.empty(4 * n, _U64)
        self.m = np.empty(2 * n, _U64)
        self.t = np.empty(2 * n, _U64)
        self.c = np.empty(2 * n, _U64)
        self.aes_buf = BlockBuffer(4 * n)  # interleaved AES input/output
        self.u = self.aes_buf.blocks.reshape(-1)
        self.sr_buf = np.empty(2 * n, _U64)
        self.lab_buf = np.empty(2 * plan.n_slots * max_bc, _U64)

    def start_chunk(self, bc: int, delta_planar: np.ndarray | None) -> np.ndarray:
        """Prepare for a chunk of ``bc`` instances; returns its (2, n_slots, bc) label array."""
        self.bc = bc
        self.step = max(1, min(self.plan.max_width, STEP_GATES // bc))
        if delta_planar is not None:
            r = delta_planar  # (2, b)
            self.r = r[:, None, :]  # (2, 1, b)
            s = np.empty_like(r)  # sigma(R) planar: lo = R_hi, hi = R_lo ^ R_hi
            s[0] = r[1]
            np.bitwise_xor(r[0], r[1], out=s[1])
            self.sr = s[:, None, :]
            tile = _flat(self.sr_buf, (self.step, bc, 2))  # sigma(R) interleaved, tiled over gates
            tile[:, :, 0] = s[0]
            tile[:, :, 1] = s[1]
            self.sr_tile = tile.reshape(-1)
        return _flat(self.lab_buf, (2, self.plan.n_slots, bc))


def _steps(k: int, step: int) -> Iterator[tuple[int, int]]:
    for g0 in range(0, k, step):
        yield g0, min(k, g0 + step)


def _scatter(lab: np.ndarray, rows: np.ndarray, vals: np.ndarray) -> None:
    """lab[p, slot] = vals[p, i] for rows = (2, k) indices of a (2 * n_slots, b) view."""
    if lab.shape[2] == 1:  # 1-D fancy assignment is faster than 2-D for b = 1
        lab.reshape(-1)[rows] = vals.reshape(rows.shape)
    else:
        lab.reshape(-1, lab.shape[2])[rows] = vals


def _linear_gates(lab: np.ndarray, lv: _LevelPlan, w: _Work) -> None:
    """XOR gates and INV gates of a level (INV = XOR with the constant-one slot).

    The constant-one slot holds Delta for the garbler (its zero label) and
    the zero block for the evaluator (its active label, value 1), so
    INV costs the same as XOR and both roles share this code.
    """
    n = lv.lin_out.shape[1]
    if not n:
        return
    bc = w.bc
    step = w.step
    if n <= step:  # the common case: the whole level in one step, no slicing
        m = n * bc
        x = w.x[: 2 * m].reshape(2, n, bc)
        y = w.xs[: 2 * m].reshape(2, n, bc)
        lab.take(lv.lin_a, axis=1, out=x, mode="clip")
        lab.take(lv.lin_b, axis=1, out=y, mode="clip")
        np.bitwise_xor(x, y, out=x)
        _scatter(lab, lv.lin_out, x)
        return
    for g0 in range(0, n, step):
        g1 = min(n, g0 + step)
        m = (g1 - g0) * bc
        x = w.x[: 2 * m].reshape(2, g1 - g0, bc)
        y = w.xs[: 2 * m].reshape(2, g1 - g0, bc)
        lab.take(lv.lin_a[g0:g1], axis=1, out=x, mode="clip")
        lab.take(lv.lin_b[g0:g1], axis=1, out=y, mode="clip")
        np.bitwise_xor(x, y, out=x)
        _scatter(lab, lv.lin_out[:, g0:g1], x)


def _garble_ands(lab, lv: _LevelPlan, w: _Work, inst: np.ndarray, tab: np.ndarray, aes: FixedKeyAES) -> None:
    """Garble every AND of level ``lv`` into ``tab`` (2, 2, k, b); write output zero labels."""
    bc = w.bc
    for g0, g1 in _steps(lv.k, w.step):
        k = g1 - g0
        x = _flat(w.x, (2, 2, k, bc))  # gathered zero labels [A0, B0] planar
        lab.take(lv.and_a[g0:g1], axis=1, out=x[0], mode="clip")
        lab.take(lv.and_b[g0:g1], axis=1, out=x[1], mode="clip")
        xs = _flat(w.xs, (2, k, bc))  # lo ^ hi: the high word of sigma(x)
        np.bitwise_xor(x[:, 0], x[:, 1], out=xs)
        # AES input: u[z, s, g, n] = sigma(label) ^ tweak for z in {zero, one}, s in {A, B}.
        u = _flat(w.u, (2, 2, k, bc, 2))
        np.bitwise_xor(x[:, 1], lv.tlo[:, g0:g1, None], out=u[0, ..., 0])
        np.bitwise_xor(xs, inst, out=u[0, ..., 1])
        np.bitwise_xor(u[0], _flat(w.sr_tile, (k, bc, 2)), out=u[1])  # sigma(X1) = sigma(X0) ^ sigma(R)
        w.aes_buf.permute_prefix(4 * k * bc, aes)
        # d[s] = pi(u0) ^ pi(u1) ^ sigma(R) = H(X0) ^ H(X1), planar.
        d = _flat(w.d, (2, 2, k, bc))
        np.bitwise_xor(u[0, ..., 0], u[1, ..., 0], out=d[:, 0])
        np.bitwise_xor(u[0, ..., 1], u[1, ..., 1], out=d[:, 1])
        np.bitwise_xor(d, w.sr, out=d)
        m = _flat(w.m, (2, k, bc))  # all-ones masks of the permute bits pa, pb
        np.bitwise_and(x[:, 0], _ONE, out=m)
        np.negative(m, out=m)
        t = _flat(w.t, (2, k, bc))
        tg = tab[0, :, g0:g1]
        te = tab[1, :, g0:g1]
        np.bitwise_and(m[1], w.r, out=t)  # pb * R
        np.bitwise_xor(d[0], t, out=tg)  # T_G = H(A0) ^ H(A1) ^ pb*R
        np.bitwise_xor(d[1], x[0], out=te)  # T_E = H(B0) ^ H(B1) ^ A0
        # C0 = H(A0) ^ pa*T_G ^ H(B0) ^ pb*(H(B0) ^ H(B1)), H(X0) = pi(u0) ^ sigma(X0).
        c = _flat(w.c, (2, k, bc))
        np.bitwise_xor(u[0, 0, ..., 0], u[0, 1, ..., 0], out=c[0])
        np.bitwise_xor(u[0, 0, ..., 1], u[0, 1, ..., 1], out=c[1])
        np.bitwise_xor(c[0], x[0, 1], out=c[0])
        np.bitwise_xor(c[0], x[1, 1], out=c[0])
        np.bitwise_xor(c[1], xs[0], out=c[1])
        np.bitwise_xor(c[1], xs[1], out=c[1])
        np.bitwise_and(m[0], tg, out=t)
        np.bitwise_xor(c, t, out=c)
        np.bitwise_and(m[1], d[1], out=t)
        np.bitwise_xor(c, t, out=c)
        _scatter(lab, lv.and_out[:, g0:g1], c)


def _eval_ands(lab, lv: _LevelPlan, w: _Work, inst: np.ndarray, tab: np.ndarray, aes: FixedKeyAES) -> None:
    """Evaluate every AND of level ``lv`` with tables ``tab`` (2, 2, k, b); write active labels."""
    bc = w.bc
    for g0, g1 in _steps(lv.k, w.step):
        k = g1 - g0
        x = _flat(w.x, (2, 2, k, bc))  # active labels [A, B] planar
        lab.take(lv.and_a[g0:g1], axis=1, out=x[0], mode="clip")
        lab.take(lv.and_b[g0:g1], axis=1, out=x[1], mode="clip")
        xs = _flat(w.xs, (2, k, bc))
        np.bitwise_xor(x[:, 0], x[:, 1], out=xs)
        u = _flat(w.u, (2, k, bc, 2))
        np.bitwise_xor(x[:, 1], lv.tlo[:, g0:g1, None], out=u[..., 0])
        np.bitwise_xor(xs, inst, out=u[..., 1])
        w.aes_buf.permute_prefix(2 * k * bc, aes)
        # C = H(A) ^ H(B) ^ sa*T_G ^ sb*(T_E ^ A), H(X) = pi(u) ^ sigma(X).
        c = _flat(w.c, (2, k, bc))
        np.bitwise_xor(u[0, ..., 0], u[1, ..., 0], out=c[0])
        np.bitwise_xor(u[0, ..., 1], u[1, ..., 1], out=c[1])
        np.bitwise_xor(c[0], x[0, 1], out=c[0])
        np.bitwise_xor(c[0], x[1, 1], out=c[0])
        np.bitwise_xor(c[1], xs[0], out=c[1])
        np.bitwise_xor(c[1], xs[1], out=c[1])
        m = _flat(w.m, (2, k, bc))
        np.bitwise_and(x[:, 0], _ONE, out=m)
        np.negative(m, out=m)
        t = _flat(w.t, (2, k, bc))
        np.bitwise_and(m[0], tab[0, :, g0:g1], out=t)
        np.bitwise_xor(c, t, out=c)
        np.bitwise_xor(tab[1, :, g0:g1], x[0], out=t)
        np.bitwise_and(t, m[1], out=t)
        np.bitwise_xor(c, t, out=c)
        _scatter(lab, lv.and_out[:, g0:g1], c)


# ---------------------------------------------------------------------------- byte source
class _Reader:
    """Reads exact-size uint64 segments from bytes or from an iterable of byte chunks."""

    def __init__(self, source) -> None:
        if isinstance(source, (bytes, bytearray, memoryview, np.ndarray)):
            self._it: Iterator | None = None
            self._cur = memoryview(source).cast("B") if not isinstance(source, np.ndarray) else memoryview(
                np.ascontiguousarray(source)
            ).cast("B")
        else:
            self._it = iter(source)
            self._cur = memoryview(b"")
        self._pos = 0

    def read(self, n: int, shape: tuple[int, ...]) -> np.ndarray:
        avail = len(self._cur) - self._pos
        if avail >= n:
            mv = self._cur[self._pos : self._pos + n]
            self._pos += n
            arr = np.frombuffer(mv, dtype="<u8")
            if not arr.flags.aligned:
                arr = arr.copy()
            return arr.reshape(shape)
        buf = bytearray(n)
        got = 0
        while True:
            take = min(avail, n - got)
            buf[got : got + take] = self._cur[self._pos : self._pos + take]
            got += take
            self._pos += take
            if got == n:
                return np.frombuffer(buf, dtype="<u8").reshape(shape)
            nxt = next(self._it, None) if self._it is not None else None
            if nxt is None:
                raise GarbleError(f"garbled tables ended early: a segment needs {n} bytes, only {got} arrived")
            self._cur = memoryview(nxt).cast("B")
            self._pos = 0
            avail = len(self._cur)

    def finish(self) -> None:
        extra = len(self._cur) - self._pos
        if self._it is not None and extra == 0:
            for nxt in self._it:
                extra += len(memoryview(nxt).cast("B"))
                if extra:
                    break
        if extra:
            raise GarbleError("garbled tables have trailing bytes: batch, chunk or circuit do not match")


# ---------------------------------------------------------------------------- containers
@dataclass(frozen=True)
class GarbledCircuit:
    """Garbled tables of a batch with the header that identifies them.

    ``to_bytes()`` is ``HEADER_SIZE`` + 32 * n_and * batch bytes: magic
    ``PWGC``, version, flags (0), the circuit's SHA-256 content hash, n_and,
    batch, chunk, instance_offset (little-endian), then the tables in the
    layout of the module docstring.
    """

    circuit_hash: str
    n_and: int
    batch: int
    chunk: int
    instance_offset: int
    tables: bytes | bytearray | memoryview

    def header(self) -> bytes:
        return _HEADER.pack(
            _MAGIC, _VERSION, 0, bytes.fromhex(self.circuit_hash), self.n_and, self.batch, self.chunk, self.instance_offset
        )

    def to_bytes(self) -> bytes:
        return self.header() + bytes(self.tables)

    @property
    def nbytes(self) -> int:
        return HEADER_SIZE + len(self.tables)

    @classmethod
    def parse_header(cls, data: bytes | bytearray | memoryview) -> tuple[str, int, int, int, int]:
        """(circuit_hash, n_and, batch, chunk, instance_offset) from the first HEADER_SIZE bytes."""
        if len(data) < HEADER_SIZE:
            raise GarbleError(f"garbled circuit header needs {HEADER_SIZE} bytes, got {len(data)}")
        magic, version, flags, h, n_and, batch, chunk, off = _HEADER.unpack_from(bytes(data[:HEADER_SIZE]))
        if magic != _MAGIC:
            raise GarbleError("not a garbled circuit (bad magic)")
        if version != _VERSION or flags != 0:
            raise GarbleError(f"unsupported garbled circuit version {version} (flags {flags}); expected {_VERSION}")
        if batch < 1 or chunk < 1 or chunk > batch:
            raise GarbleError(f"garbled circuit header has invalid batch {batch} / chunk {chunk}")
        return h.hex(), n_and, batch, chunk, off

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> "GarbledCircuit":
        h, n_and, batch, chunk, off = cls.parse_header(data)
        body = memoryview(data)[HEADER_SIZE:]
        if len(body) != 32 * n_and * batch:
            raise GarbleError(
                f"garbled circuit body is {len(body)} bytes, expected 32 * {n_and} ANDs * {batch} instances"
            )
        return cls(h, n_and, batch, chunk, off, body)


# ---------------------------------------------------------------------------- garbler
class Garbler:
    """Garbles ``circuit`` for ``batch`` instances.

    Parameters
        delta: None (default: an independent CSPRNG Delta per instance), one
            block of shape (2,) shared by all instances (the IKNP session
            Delta), or (batch, 2); every Delta must have lowest bit 1.
        input_zero: zero labels chosen by the caller, as a mapping from
            input-group name to a (width, batch, 2) block array, or one
            (n_inputs, batch, 2) array; unspecified groups get fresh CSPRNG
            labels.
        instance_offset: instance id of the first instance (tweak high word);
            see the module docstring for why it must grow across garblings
            that share a Delta.
        chunk: instances per chunk (default :func:`default_chunk`); the
            evaluator must use the same value.
        record_wires: keep every wire's zero label in ``wire_zero``
            (n_wires, batch, 2), for tests; costs n_wires*batch*16 bytes.

    After :meth:`iter_tables` is exhausted (or :meth:`garble` returns),
    ``output_zero`` (n_out, batch, 2) and ``decode_bits`` (n_out, batch) hold
    the output zero labels and their permute bits, outputs in the order of
    ``circuit.outputs``.  A Garbler garbles once.
    """

    def __init__(
        self,
        circuit: Circuit,
        batch: int,
        *,
        delta=None,
        input_zero: Mapping[str, np.ndarray] | np.ndarray | None = None,
        instance_offset: int = 0,
        chunk: int | None = None,
        aes: FixedKeyAES | None = None,
        record_wires: bool = False,
    ) -> None:
        self.circuit = circuit
        self.batch = _check_batch(batch)
        self.chunk = _check_chunk(circuit, self.batch, chunk)
        self.instance_offset = _check_offset(instance_offset, self.batch)
        self._aes = aes  # None: the running thread's default_aes(), resolved per run
        self._plan = _plan(circuit, compact=not record_wires)
        self.record_wires = record_wires
        if delta is None:
            self.delta = fresh_delta(self.batch)
        else:
            d = np.asarray(delta)
            if d.dtype != np.uint64 or d.shape not in ((2,), (self.batch, 2)):
                raise GarbleError(f"delta must be a uint64 block of shape (2,) or ({self.batch}, 2), got {d.dtype} {d.shape}")
            if not (d[..., 0] & _ONE).all():
                raise GarbleError("delta must have lowest bit 1 (point-and-permute)")
            self.delta = np.array(np.broadcast_to(d, (self.batch, 2)), dtype=_U64)  # a private copy
        n_in = circuit.n_inputs
        self.input_zero = random_blocks(n_in, self.batch)
        if isinstance(input_zero, np.ndarray):
            self.input_zero[...] = _as_blocks(input_zero, (n_in, self.batch, 2), "input_zero")
        elif input_zero is not None:
            for name, arr in input_zero.items():
                try:
                    g = circuit.input_group(name)
                except KeyError as exc:
                    raise GarbleError(str(exc.args[0])) from None
                self.input_zero[g.wires] = _as_blocks(arr, (g.width, self.batch, 2), f"input_zero[{name!r}]")
        self.output_zero: np.ndarray | None = None
        self.decode_bits: np.ndarray | None = None
        self.wire_zero: np.ndarray | None = None
        self._used = False

    # -- inputs
    def zero_labels(self, group: str) -> np.ndarray:
        """Zero labels (width, batch, 2) of an input group."""
        return self.input_zero[self.circuit.input_group(group).wires]

    def encode(self, group: str, bits) -> np.ndarray:
        """Active labels (width, batch, 2) of ``group`` for ``bits`` (batch, width) bool."""
        g = self.circuit.input_group(group)
        b = np.asarray(bits, dtype=bool)
        if b.shape != (self.batch, g.width):
            raise GarbleError(f"bits for {group!r} must have shape ({self.batch}, {g.width}), got {b.shape}")
        mask = np.negative(b.T.astype(_U64))[..., None]  # (width, batch, 1) all-ones where bit = 1
        return self.input_zero[g.wires] ^ (mask & self.delta[None])

    def encode_all(self, inputs: Sequence) -> np.ndarray:
        """Active labels (n_inputs, batch, 2) for one (batch, width) bool array per input group."""
        if len(inputs) != len(self.circuit.inputs):
            raise GarbleError(f"circuit has {len(self.circuit.inputs)} input groups, got {len(inputs)} inputs")
        if not inputs:
            return np.zeros((0, self.batch, 2), _U64)
        return np.concatenate([self.encode(g.name, b) for g, b in zip(self.circuit.inputs, inputs)])

    # -- tables
    def header(self) -> bytes:
        return GarbledCircuit(self.circuit.content_hash, self.circuit.n_and, self.batch, self.chunk, self.instance_offset, b"").header()

    def segment_sizes(self) -> list[int]:
        """Byte sizes of the segments :meth:`iter_tables` yields, in order."""
        return _segment_sizes(self._plan, self.batch, self.chunk)

    def iter_tables(self) -> Iterator[memoryview]:
        """Garble, yielding one table segment (bytes-like) per instance chunk and AND level.

        Each yielded buffer is fresh (the garbler never writes it again).
        """
        for tab in self._run(None):
            yield memoryview(tab).cast("B")

    def _run(self, dest: np.ndarray | None) -> Iterator[np.ndarray]:
        """Garble; yield each segment as a (2, 2, k, b) array (a view of ``dest`` if given)."""
        if self._used:
            raise GarbleError("this Garbler has already garbled; make a new one (fresh labels) per garbling")
        self._used = True
        plan = self._plan
        n_out = plan.out_slots.shape[0]
        n_in = plan.in_slots.shape[0]
        self.output_zero = np.empty((n_out, self.batch, 2), _U64)
        if self.record_wires:
            self.wire_zero = np.empty((self.circuit.n_wires, self.batch, 2), _U64)
        pos = 0
        aes = self._aes or default_aes()
        w = _Work(self.chunk, plan)
        for b0, b1 in _chunks(self.batch, self.chunk):
            bc = b1 - b0
            rp = _planar(self.delta[b0:b1])  # (2, b)
            lab = w.start_chunk(bc, rp)
            inst = np.arange(self.instance_offset + b0, self.instance_offset + b1, dtype=_U64)
            lab[:, :n_in] = np.moveaxis(self.input_zero[:, b0:b1], -1, 0)  # input wires own slots 0..n_in-1
            lab[:, plan.one_slot] = rp  # zero label of the constant one: Delta
            for lv in plan.levels:
                if lv.k:
                    size = 4 * lv.k * bc
                    if dest is None:
                        tab = np.empty((2, 2, lv.k, bc), _U64)
                    else:
                        tab = dest[pos : pos + size].reshape(2, 2, lv.k, bc)
                    pos += size
                    _garble_ands(lab, lv, w, inst, tab, aes)
                    yield tab
                _linear_gates(lab, lv, w)
            self.output_zero[:, b0:b1] = np.moveaxis(lab[:, plan.out_slots], 0, -1)
            if self.record_wires:
                self.wire_zero[:, b0:b1] = np.moveaxis(lab[:, : self.circuit.n_wires], 0, -1)
        self.decode_bits = (self.output_zero[..., 0] & _ONE).astype(bool)

    def garble(self, sink: Callable[[memoryview], object] | None = None, *, out=None) -> GarbledCircuit | None:
        """Garble the whole batch.

        With ``sink=None`` return a :class:`GarbledCircuit` holding all tables
        (32 * n_and * batch bytes in memory), written into ``out`` if given (a
        writable buffer of exactly that size, e.g. reused across garblings)
        or into a fresh buffer; otherwise call ``sink(segment)`` for every
        segment of :meth:`iter_tables` and return None (memory stays bounded
        by one instance chunk).
        """
        if sink is not None:
            if out is not None:
                raise GarbleError("give either sink or out, not both")
            for seg in self.iter_tables():
                sink(seg)
            return None
        size = table_bytes(self.circuit, self.batch)
        if out is None:
            dest = np.empty(size // 8, _U64)
        else:
            try:
                mv = memoryview(out).cast("B")
            except TypeError:
                raise GarbleError("out must be a writable C-contiguous buffer") from None
            if mv.readonly or mv.nbytes != size:
                raise GarbleError(f"out must be a writable buffer of exactly {size} bytes, got {mv.nbytes}")
            dest = np.frombuffer(mv, dtype=_U64) if size else np.empty(0, _U64)
        for _ in self._run(dest):
            pass
        return GarbledCircuit(
            self.circuit.content_hash, self.circuit.n_and, self.batch, self.chunk, self.instance_offset,
            memoryview(dest).cast("B"),
        )


# ---------------------------------------------------------------------------- evaluator
class Evaluator:
    """Evaluates garbled tables of ``circuit`` for ``batch`` instances.

    ``instance_offset`` and ``chunk`` must equal the garbler's.  With
    ``record_wires`` the active label of every wire is kept in ``wire_labels``
    (n_wires, batch, 2), for tests.
    """

    def __init__(
        self,
        circuit: Circuit,
        batch: int,
        *,
        instance_offset: int = 0,
        chunk: int | None = None,
        aes: FixedKeyAES | None = None,
        record_wires: bool = False,
    ) -> None:
        self.circuit = circuit
        self.batch = _check_batch(batch)
        self.chunk = _check_chunk(circuit, self.batch, chunk)
        self.instance_offset = _check_offset(instance_offset, self.batch)
        self._aes = aes  # None: the running thread's default_aes(), resolved per run
        self._plan = _plan(circuit, compact=not record_wires)
        self.record_wires = record_wires
        self.wire_labels: np.ndarray | None = None

    def segment_sizes(self) -> list[int]:
        return _segment_sizes(self._plan, self.batch, self.chunk)

    def check_header(self, header: bytes | bytearray | memoryview) -> None:
        """Raise :class:`GarbleError` unless ``header`` describes this circuit, batch, chunk and offset."""
        h, n_and, batch, chunk, off = GarbledCircuit.parse_header(header)
        want = (self.circuit.content_hash, self.circuit.n_and, self.batch, self.chunk, self.instance_offset)
        if (h, n_and, batch, chunk, off) != want:
            raise GarbleError(
                "garbled circuit does not match the evaluator: "
                f"(hash, n_and, batch, chunk, offset) = {(h[:12], n_and, batch, chunk, off)} "
                f"vs {(want[0][:12],) + want[1:]}"
            )

    def evaluate(self, active_inputs, tables) -> np.ndarray:
        """Active output labels (n_out, batch, 2).

        ``active_inputs``: one active label per input wire, (n_inputs, batch,
        2).  ``tables``: a :class:`GarbledCircuit` (its header is checked), the
        raw table bytes, or an iterable of byte chunks in stream order (any
        split; the evaluator pulls exactly what each level needs).  After the
        last segment the iterable is read to its end to reject trailing
        bytes, so it must end with the tables (e.g. a generator that yields
        exactly ``sum(segment_sizes())`` bytes; a generator from
        :meth:`Garbler.iter_tables` thereby also finishes the garbler).
        """
        n_in = self.circuit.n_inputs
        act = _as_blocks(active_inputs, (n_in, self.batch, 2), "active_inputs")
        if isinstance(tables, GarbledCircuit):
            self.check_header(tables.header())
            tables = tables.tables
        reader = _Reader(tables)
        plan = self._plan
        out = np.empty((plan.out_slots.shape[0], self.batch, 2), _U64)
        if self.record_wires:
            self.wire_labels = np.empty((self.circuit.n_wires, self.batch, 2), _U64)
        aes = self._aes or default_aes()
        w = _Work(self.chunk, plan)
        for b0, b1 in _chunks(self.batch, self.chunk):
            bc = b1 - b0
            lab = w.start_chunk(bc, None)
            inst = np.arange(self.instance_offset + b0, self.instance_offset + b1, dtype=_U64)
            lab[:, : plan.in_slots.shape[0]] = np.moveaxis(act[:, b0:b1], -1, 0)
            lab[:, plan.one_slot] = 0  # active label of the constant one
            for lv in plan.levels:
                if lv.k:
                    tab = reader.read(32 * lv.k * bc, (2, 2, lv.k, bc))
                    _eval_ands(lab, lv, w, inst, tab, aes)
                _linear_gates(lab, lv, w)
            out[:, b0:b1] = np.moveaxis(lab[:, plan.out_slots], 0, -1)
            if self.record_wires:
                self.wire_labels[:, b0:b1] = np.moveaxis(lab[:, : self.circuit.n_wires], 0, -1)
        reader.finish()
        return out


# ---------------------------------------------------------------------------- outputs
def decode(active_out: np.ndarray, decode_bits: np.ndarray) -> np.ndarray:
    """Output bits (n_out, batch) bool: lsb(active label) xor decoding bit."""
    a = np.asarray(active_out)
    d = np.asarray(decode_bits, dtype=bool)
    if a.shape[:-1] != d.shape or a.shape[-1:] != (2,):
        raise GarbleError(f"active labels {a.shape} do not match decoding bits {d.shape}")
    return ((a[..., 0] & _ONE).astype(bool)) ^ d


def split_outputs(circuit: Circuit, bits: np.ndarray) -> list[np.ndarray]:
    """(n_out, batch) bits -> one (batch, width) bool array per output group."""
    res = []
    pos = 0
    for g in circuit.outputs:
        res.append(np.ascontiguousarray(bits[pos : pos + g.width].T))
        pos += g.width
    return res


def garble_and_evaluate(
    circuit: Circuit, inputs: Sequence, *, chunk: int | None = None, instance_offset: int = 0
) -> list[np.ndarray]:
    """Garble, evaluate and decode in one process (for checks and the CLI).

    ``inputs``: one (batch, width) bool array per input group, as for
    :meth:`Circuit.evaluate_bits`; returns one (batch, width) bool array per
    output group.  Both roles run here, so this is a correctness tool, not a
    secure computation.
    """
    try:
        bits = circuit._check_bit_inputs(inputs)
    except CircuitError as exc:
        raise GarbleError(str(exc)) from None
    batch = bits[0].shape[0] if bits else 1
    g = Garbler(circuit, batch, chunk=chunk, instance_offset=instance_offset)
    active = g.encode_all(bits) if bits else np.zeros((0, batch, 2), _U64)
    gc = g.garble()
    ev = Evaluator(circuit, batch, chunk=g.chunk, instance_offset=instance_offset)
    out = ev.evaluate(active, gc)
    return split_outputs(circuit, decode(out, g.decode_bits))
