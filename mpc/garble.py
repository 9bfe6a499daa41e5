"""Vectorized half-gates garbling and evaluation of whole circuits over SIMD batches.

What it does
    :class:`Garbler` garbles a :class:`~pairwise.circuits.ir.Circuit` for ``B``
    independent instances at once and :class:`Evaluator` evaluates the
    result.  Neither loops over gates or instances in Python: the circuit's
    level schedule (:attr:`Circuit.levels`) is walked once, and each level is
    a handful of numpy calls plus one fixed-key AES call covering every AND
    gate of the level for every instance (4 hashes per AND for the garbler,
    2 for the evaluator).  The per-gate algebra is that of the pure reference
    functions in :mod:`pairwise.mpc.halfgates` (Zahur-Rosulek-Evans 2015, Fig. 2, with
    free-XOR and point-and-permute); the tests check the engine against them
    gate by gate.

    Inside the engine, labels are *planar*: an array ``(slots, 2, b)`` of
    ``uint64`` holding, per slot, the low words and the high words of the
    labels of ``b`` instances in two separate rows, so every XOR, mask and
    select is a contiguous numpy call with no length-2 inner loop (and a
    wire's label is one contiguous (2, b) block); only the AES input and
    output use interleaved 16-byte blocks.  Wires are mapped to a small
    set of reusable *slots* (a wire's slot is freed after its last reader's
    level), so memory is the circuit's live width, not its wire count.  An
    INV gate is an XOR with a constant-one slot that holds Delta on the
    garbler's side (the one-wire's zero label) and the zero block on the
    evaluator's side (its active label), so XOR and INV of a level are one
    gather-xor-scatter for both roles.  Narrow levels of large chunks (a
    ripple-carry chain: one AND and a few XORs per level at thousands of
    instances) skip the gather and the scatter and work on the label rows in
    place, one numpy call per XOR gate and per operand of an AND
    (:func:`_garble_direct`, :func:`_eval_direct`); same algebra, same tables.

    The batch is processed in instance chunks of ``chunk`` instances (both
    parties must use the same chunk size; :func:`default_chunk` is a
    deterministic function of the circuit and the batch), and a level's
    gates are processed in steps of about ``STEP_GATES`` gate-instances so
    the working set stays in cache.  Neither affects results; only ``chunk``
    affects the byte order of the tables.

    Small batches are bound by call counts, not bytes (AES-128 at one
    instance: 264 levels, 60 of them with ANDs, ~100 gates per level), so
    per instance count the engine precomputes a *program*: per level and
    step, the index arrays and every buffer view its numpy calls need
    (:class:`_Work`); the level loop then only unpacks tuples and calls
    ufuncs (gather, XOR, scatter for a XOR/INV level).  Chunks of one
    instance get their own AND-level code (:func:`_garble_ands1`,
    :func:`_eval_ands1`: the same algebra in ~18 / 14 calls on mostly
    contiguous same-shape operands, which numpy runs on its fast path).
    Scratch buffers and programs of small batches are pooled per circuit,
    so repeated executions (the two-party runtime) pay for them once.

    When every chunk is one instance (batch 1, or chunk 1) and no level has
    more than :data:`JIT_MAX_WIDTH` AND gates, the chunks run, when numba is
    available, on compiled loops instead (:mod:`pairwise.mpc.jit`); a
    one-instance tail of a larger batch stays on numpy, so it never waits
    for numba to load.  Per AND level one compiled call
    finishes the previous level, runs the XOR/INV gates and gathers the hash
    inputs, and OpenSSL still does every hash (two AES-ECB calls per level).
    Same algebra, same tables, about 3x less time per AES-128 execution;
    ``PAIRWISE_JIT=0`` selects the numpy program.

Security model
    Semi-honest (honest-but-curious) Yao with half-gates.  Labels and Delta
    are 128-bit and come from the OS CSPRNG (:func:`pairwise.mpc.aes.random_blocks`)
    unless the caller supplies them (the two-party runtime supplies one
    session Delta and the zero labels of the evaluator's input wires, which
    come out of IKNP correlated OT).  Each instance has its own Delta by
    default, with lowest bit 1 (point-and-permute).  A :class:`Garbler`
    garbles once: evaluating one garbled circuit on two inputs of the
    evaluator would leak, so fresh labels are drawn per garbling.  Whoever
    receives the decoding bits learns the outputs.

Hash and assumption
    H(x, i) = pi(pi(x) ^ i) ^ pi(x): TMMO, the tweakable circular
    correlation-robust (TCCR) hash of Guo, Katz, Wang and Yu (S&P 2020,
    eprint 2019/074 Sec. 7.4) over the fixed-key AES pi of
    :mod:`pairwise.mpc.aes`, which they prove TCCR when pi is a random
    permutation; half-gates is secure with a TCCR hash (GKWY 2020, Sec. 7;
    ZRE 2015).  The engine computes it with :class:`pairwise.mpc.aes.TccrHasher`,
    the in-place form of :func:`pairwise.mpc.aes.tccr_hash` (two AES calls per
    level step: 8 AES blocks per AND gate for the garbler, 4 for the
    evaluator).  The proof needs every tweak to be used with one label pair
    {x, x ^ Delta} only (the garbler hashes both labels of an AND input under
    the gate's tweak, the evaluator the active one).

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
    16 bytes (low word LE, high word LE), as in :mod:`pairwise.mpc.aes`.
    :meth:`Garbler.iter_tables` yields exactly these segments
    (:meth:`Garbler.iter_into` writes them into a caller's buffer);
    :meth:`Evaluator.evaluate` accepts them re-split arbitrarily.  The order
    of the AND gates is the schedule's (``and_index``), so both parties must
    run the same :mod:`pairwise.circuits.ir` schedule and hash: the header's version (3) and
    the two-party runtime's version say which.
    :class:`GarbledCircuit` adds a fixed ``HEADER_SIZE``-byte header.

Follows
    Zahur, Rosulek, Evans, "Two Halves Make a Whole", EUROCRYPT 2015;
    Guo, Katz, Wang, Yu, "Efficient and Secure Multiparty Computation from
    Fixed-Key Block Ciphers", S&P 2020; DESIGN.md "mpc: vectorized garbling".
"""

from __future__ import annotations

import os
import struct
import sys
import weakref
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from pairwise.circuits.ir import Circuit, CircuitError

from . import jit as _jit
from .aes import BlockBuffer, FixedKeyAES, TccrHasher, default_aes, random_blocks
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
    "urandom_bits",
    "wire_slice",
]

if sys.byteorder != "little":  # pragma: no cover - the block layout is little-endian
    raise ImportError("pairwise.mpc.garble needs a little-endian machine (block layout of mpc.aes)")

#: Gate-instances processed per numpy step: the hash buffers (2 x 4 blocks per gate-instance for the
#: garbler), the tweak tile and the gathered labels stay within the 2 MiB L2 cache (2^13; it was 2^14
#: with the one-AES hash, whose working set was half as large).
STEP_GATES = 1 << 13
#: Labels of one instance chunk may use at most this many bytes (by default).
CHUNK_LABEL_BYTES = 96 << 20
#: Largest default instance chunk (2^13 since the TMMO hash: circuits with one AND per level garble
#: a whole level per step, and a 2^14-instance step no longer fits the cache).
MAX_CHUNK = 8192

_MAGIC = b"PWGC"
#: 3: tables hashed with TMMO (mpc.aes.tccr_hash).  Version 2 files (the sigma-based hash) and
#: version 1 files (laid out by the older per-AND-stage schedule) would decode to garbage and are
#: refused.
_VERSION = 3
_HEADER = struct.Struct("<4sHH32sQQQQ")
HEADER_SIZE = _HEADER.size  # 72 bytes

_U64 = np.uint64
_ONE = np.uint64(1)
_ONE0 = np.array(1, dtype=np.uint64)  # as an array operand: faster ufunc dispatch than a scalar


class GarbleError(ValueError):
    """Bad parameters or malformed garbled material (sizes, headers, labels)."""


# ---------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class _LevelPlan:
    """One level in slot coordinates; rows index the (2 * n_slots, b) view of the labels."""

    and_rows: np.ndarray  # (2 [A, B], 2 [lo, hi], k) input rows of the AND gates
    and_out: np.ndarray  # (2 [lo, hi], k) output rows
    and_base: int
    tlo: np.ndarray  # (2 [T_G, T_E], k, 1) uint64: low tweak words 2*g + h
    lin_rows: np.ndarray  # (2 [a, b], 2 [lo, hi], n): XOR gates, then INV as XOR with the one slot
    lin_out: np.ndarray  # (2, n)
    k: int  # number of AND gates
    n_lin: int  # number of XOR + INV gates


@dataclass(frozen=True)
class _Plan:
    n_slots: int  # including the constant-one slot
    one_slot: int
    in_slots: np.ndarray
    out_slots: np.ndarray
    levels: tuple[_LevelPlan, ...]
    n_and: int
    max_width: int  # most gates of one kind in a level
    max_and_width: int  # most AND gates in a level
    # spare scratch buffers (small ones only), reused by later garblings/evaluations
    pool: dict = field(default_factory=dict, compare=False, repr=False)
    # the compiled one-instance path (:mod:`pairwise.mpc.jit`): its program (its scratch is pooled in ``pool``)
    jit: dict = field(default_factory=dict, compare=False, repr=False)


_PLANS: "weakref.WeakKeyDictionary[Circuit, dict[bool, _Plan]]" = weakref.WeakKeyDictionary()


def _plan(circuit: Circuit, layout: str = "compact") -> _Plan:
    """The circuit's level schedule mapped to label slots (cached per circuit and layout).

    ``layout`` "compact" reuses the slot of a wire after its last reader
    (memory = the circuit's live width); "wires" gives wire w slot w (for
    ``record_wires``).
    """
    per = _PLANS.setdefault(circuit, {})
    if layout not in per:
        per[layout] = _build_plan(circuit, layout)
    return per[layout]


def _two_planes(slots: np.ndarray) -> np.ndarray:
    """Row indices (2, k) of ``slots``' low and high words in the (2 * n_slots, b) view of (n_slots, 2, b) labels."""
    return np.stack([2 * slots, 2 * slots + 1]).astype(np.intp)


def _last_use(levels, nw: int, out_wires: np.ndarray) -> np.ndarray:
    """Per wire: the last level reading it (or writing it, if nobody reads it); outputs: len(levels)."""
    last = np.full(nw, -1, dtype=np.int64)
    prod = np.full(nw, -1, dtype=np.int64)
    for li, lv in enumerate(levels):
        for arr in (lv.and_in0, lv.and_in1, lv.xor_in0, lv.xor_in1, lv.inv_in):
            last[arr] = li
        for arr in (lv.and_out, lv.xor_out, lv.inv_out):
            prod[arr] = li
    last = np.where(last < 0, prod, last)
    last[out_wires] = len(levels)  # outputs stay live to the end
    return last


def _build_plan(circuit: Circuit, layout: str) -> _Plan:
    levels = circuit.levels
    nl = len(levels)
    n_in = circuit.n_inputs
    nw = circuit.n_wires
    out_wires = (
        np.concatenate([g.wires for g in circuit.outputs]) if circuit.outputs else np.zeros(0, np.int64)
    )
    if layout == "wires":
        slot = np.arange(nw, dtype=np.intp)
        n_slots = nw
    else:
        last = _last_use(levels, nw, out_wires)
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
    rows = _two_planes(slot)  # (2, n_wires): each wire's rows in both planes
    rows_one = _two_planes(np.array([n_slots]))  # the constant-one slot
    for lv in levels:
        k = lv.n_and
        base = int(lv.and_index[0]) if k else n_and
        if k and not np.array_equal(lv.and_index, np.arange(base, base + k)):
            raise CircuitError("level AND indices must be dense and increasing (IR contract)")
        g = np.arange(base, base + k, dtype=_U64) * _U64(2)
        tlo = np.stack([g, g + _ONE]) if k else np.zeros((2, 0), _U64)
        n_inv = lv.inv_in.shape[0]
        lin_a = np.concatenate([rows[:, lv.xor_in0], rows[:, lv.inv_in]], axis=1)
        lin_b = np.concatenate([rows[:, lv.xor_in1], np.repeat(rows_one, n_inv, axis=1)], axis=1)
        plans.append(
            _LevelPlan(
                and_rows=np.ascontiguousarray(np.stack([rows[:, lv.and_in0], rows[:, lv.and_in1]])),
                and_out=np.ascontiguousarray(rows[:, lv.and_out]),
                and_base=base,
                tlo=np.ascontiguousarray(tlo[:, :, None]),
                lin_rows=np.ascontiguousarray(np.stack([lin_a, lin_b])),
                lin_out=np.ascontiguousarray(np.concatenate([rows[:, lv.xor_out], rows[:, lv.inv_out]], axis=1)),
                k=k,
                n_lin=lin_a.shape[1],
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
        max_and_width=max((lv.k for lv in plans), default=0),
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


_SLICES: dict[int, tuple[np.ndarray, slice | np.ndarray]] = {}  # id(wires) -> (wires, answer), IR arrays only


def wire_slice(g) -> slice | np.ndarray:
    """An input group's wires as a slice when they are consecutive (views instead of fancy-index copies), else the wire array."""
    w = g.wires
    hit = _SLICES.get(id(w))
    if hit is not None and hit[0] is w:
        return hit[1]
    res: slice | np.ndarray = w
    if w.shape[0] and w[-1] - w[0] + 1 == w.shape[0] and (w.shape[0] == 1 or bool((np.diff(w) == 1).all())):
        res = slice(int(w[0]), int(w[-1]) + 1)
    if not w.flags.writeable:  # the IR's frozen arrays: the answer cannot change (the entry keeps w alive)
        if len(_SLICES) >= 4096:
            _SLICES.clear()
        _SLICES[id(w)] = (w, res)
    return res


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays are the very same view (same start, shape and strides)."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides)


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


#: Scratch buffers (with their programs) are kept with the plan for the next garbling or
#: evaluation while all those kept for one circuit total at most this many bytes.
POOL_BYTES = 16 << 20  # (4 MiB before the two-buffer hash doubled the scratch of mid-size batches)


def _keep_spare(pool: dict, key: tuple, work, keep: bool) -> None:
    """Put ``work`` (scratch with ``nbytes``) back in ``pool[key]``: at most two per key while everything
    kept for the circuit totals POOL_BYTES, or (``keep``) one more of any size."""
    kept = sum(w.nbytes for spare in list(pool.values()) for w in list(spare))
    spare = pool.setdefault(key, [])
    if (kept + work.nbytes <= POOL_BYTES and len(spare) < 2) or (keep and not spare):
        spare.append(work)


class _Work:
    """Scratch buffers of one garbling/evaluation, sized for its largest chunk, and the level programs.

    Fresh memory is expensive to touch (page faults), so one set of buffers
    serves every chunk, level and step.  A *program* (:meth:`start_chunk`)
    is, per level, the list of steps of the AND gates and of the XOR/INV
    gates, each step a tuple of index arrays and of the views of the
    buffers its numpy calls use, made once per instance count ``bc``: at
    small batches the engine's cost is the number of Python and numpy calls
    per level, so the loops only unpack tuples and call ufuncs.  Small
    :class:`_Work` objects (e.g. batch 1) are pooled with the plan
    (:meth:`acquire` / :meth:`release`), so repeated executions of a circuit
    reuse buffers and programs.  One :class:`_Work` serves one garbling or
    evaluation at a time.
    """

    def __init__(self, max_bc: int, plan: _Plan, role: str) -> None:
        self.plan = plan
        self.role = role
        self.max_bc = max_bc
        self.step_gates = STEP_GATES  # buffers and programs are sized for this step
        n = min(plan.max_width * max_bc, max(STEP_GATES, max_bc))  # >= step * b for every chunk
        self.x = np.empty(4 * n, _U64)  # (2 [A,B], 2 [lo,hi], k, b)
        self.xs = np.empty(2 * n, _U64)  # XOR levels: (2 [lo,hi], n, b)
        self.d = np.empty(4 * n, _U64)
        self.m = np.empty(2 * n, _U64)
        self.t = np.empty(2 * n, _U64)
        self.c = np.empty(2 * n, _U64)
        self.hasher = TccrHasher(4 * n)  # interleaved hash inputs x (then pi(x)) and outputs y
        self.u = self.hasher.x.reshape(-1)
        self.v = self.hasher.y.reshape(-1)
        self.tw = np.empty(4 * n, _U64)  # tweak blocks of a step, (2 [A,B], k, b, 2)
        self.rt_buf = np.empty(2 * n, _U64)  # Delta interleaved, tiled over a step's gates (k, b, 2)
        self.lab_buf = np.empty(2 * plan.n_slots * max_bc, _U64)
        self.const_buf = np.empty(3 * max_bc, _U64)  # Delta planar (2, b), instance ids (b)
        self.nbytes = 8 * (21 * n + 16 * n + self.lab_buf.shape[0] + self.const_buf.shape[0])
        self._programs: dict[tuple, tuple] = {}  # (bc, DIRECT_CALL_WORDS) -> program

    @classmethod
    def acquire(cls, max_bc: int, plan: _Plan, role: str) -> "_Work":
        """A pooled :class:`_Work` for (max_bc, role) if one is free, else a new one."""
        try:
            return plan.pool.get((max_bc, role, STEP_GATES), []).pop()
        except IndexError:
            return cls(max_bc, plan, role)

    def release(self, keep: bool = False) -> None:
        """Keep these buffers for the next run of the circuit: at most two per batch size and role while
        all kept ones total POOL_BYTES, or (``keep``: a session that will run the circuit again) one more
        of any size, so repeated large executions do not touch fresh memory (page faults)."""
        _keep_spare(self.plan.pool, (self.max_bc, self.role, self.step_gates), self, keep)

    def start_chunk(self, bc: int, delta_planar: np.ndarray | None, first_instance: int):
        """Prepare a chunk of ``bc`` instances.

        Returns (labels (2, n_slots, bc), the source/target of the gathers
        and scatters (the (2 * n_slots, bc) view, or the flat one for bc = 1),
        the program for bc).
        """
        self.bc = bc
        step = max(1, min(self.plan.max_width, self.step_gates // bc))
        c = self.const_buf
        self.r = _flat(c, (2, 1, bc))
        self.inst = c[2 * bc : 3 * bc]
        self.inst[:] = np.arange(first_instance, first_instance + bc, dtype=_U64)
        if bc > 1:  # the tweaks' high words: the instance ids, for every gate of a step (set once per chunk)
            _flat(self.tw, (2, step, bc, 2))[..., 1] = self.inst
        if delta_planar is not None and bc > 1:  # (one instance: _start_chunk1 tiles Delta per step size)
            r = self.r[:, 0]
            r[...] = delta_planar  # (2, b)
            tile = _flat(self.rt_buf, (step, bc, 2))  # Delta interleaved, tiled over gates
            tile[:, :, 0] = r[0]
            tile[:, :, 1] = r[1]
        lab = _flat(self.lab_buf, (self.plan.n_slots, 2, bc))
        src = lab.reshape(-1) if bc == 1 else lab.reshape(2 * self.plan.n_slots, bc)
        key = (bc, DIRECT_CALL_WORDS)
        prog = self._programs.get(key)
        if prog is None:
            prog = self._programs[key] = self._program(bc, step)
        if bc == 1:
            self._start_chunk1(delta_planar, first_instance)
        return lab, src, prog

    def _program1(self, step: int) -> tuple:
        """The program for chunks of one instance (see :func:`_garble_ands1`)."""
        garbler = self.role == "garbler"
        plan = self.plan
        n = min(plan.max_width, step)
        w_buf = np.empty(6 * n, _U64)  # (3, 2, k): A0 planar [lo, hi], then the lo words of A, A, B, B
        p_buf = np.empty(4 * n, _U64)  # H(X0) ^ H(X1), planar (2 [A, B], 2 [lo, hi], k)
        t_buf = np.empty(2 * n, _U64)
        c_buf = np.empty(2 * n, _U64)
        n_steps = sum(-(-lv.k // step) for lv in plan.levels)
        self.tw1 = np.empty(4 * plan.n_and + 4 * n_steps, _U64)  # tweak blocks per step (2, k, 2)
        self.tiles1: dict[int, tuple] = {}  # k -> (Delta interleaved (k, 2), Delta planar (2, k))
        self.tiles1_delta = None
        prog = []
        tw_pos = 0
        for lv in plan.levels:
            ands = []
            for g0 in range(0, lv.k, step):
                g1 = min(lv.k, g0 + step)
                k = g1 - g0
                r = lv.and_rows[:, :, g0:g1]  # (2 [A, B], 2 [lo, hi], k)
                lo = r[:, 0]
                rows_u = np.ascontiguousarray(r.transpose(0, 2, 1))  # the labels interleaved, (2 [A, B], k, 2)
                rows_w = np.ascontiguousarray(np.stack([r[0], lo[[0, 0]], lo[[1, 1]]]))
                w = _flat(w_buf, (3, 2, k))
                tw = self.tw1[tw_pos : tw_pos + 4 * k].reshape(2, k, 2)
                tw_pos += 4 * k
                g = np.arange(lv.and_base + g0, lv.and_base + g1, dtype=_U64) * _U64(2)
                tw[0, :, 0] = g
                tw[1, :, 0] = g + _ONE
                bits = w[1:3]  # (2 [A, B], 2, k): permute bits, repeated for both words
                c = _flat(c_buf, (2, k))
                t = _flat(t_buf, (2, k))
                common = (
                    rows_u, rows_w, w, w[0], tw, bits, bits[0], bits[1], c, t,
                    np.ascontiguousarray(lv.and_out[:, g0:g1]), g0, g1, g0 == 0 and g1 == lv.k,
                )
                if garbler:
                    u = _flat(self.u, (2, 2, k, 2))  # [zero, one] x [A, B] labels, interleaved
                    v = _flat(self.v, (2, 2, k, 2))
                    d = _flat(p_buf, (2, 2, k))
                    if k not in self.tiles1:
                        self.tiles1[k] = (np.empty((k, 2), _U64), np.empty((2, k), _U64))
                    rt, rp = self.tiles1[k]
                    ands.append(common + (
                        4 * k, u, u[0], u[1], v, v[0].transpose(0, 2, 1), v[1].transpose(0, 2, 1),
                        v[0, 0].T, v[0, 1].T, d, d[0], d[1], rt, rp,
                    ))
                else:
                    u = _flat(self.u, (2, k, 2))
                    v = _flat(self.v, (2, k, 2))
                    ands.append(common + (2 * k, u, v, v[0].T, v[1].T))
            lins = []
            for g0 in range(0, lv.n_lin, step):
                g1 = min(lv.n_lin, g0 + step)
                rows = np.ascontiguousarray(lv.lin_rows[:, :, g0:g1])
                y = _flat(self.x, rows.shape)
                z = _flat(self.xs, (2, g1 - g0))
                lins.append((rows, y, y[0], y[1], z, np.ascontiguousarray(lv.lin_out[:, g0:g1])))
            prog.append((lv, tuple(ands), tuple(lins), (), ()))
        self.tw1 = self.tw1[:tw_pos]
        self.nbytes += 8 * (14 * n + tw_pos + 4 * sum(self.tiles1))
        return tuple(prog)

    def _start_chunk1(self, delta_planar: np.ndarray | None, first_instance: int) -> None:
        """Per-chunk constants of the one-instance program: tweak high words, Delta tiles (garbler)."""
        self.tw1.reshape(-1, 2)[:, 1] = first_instance
        if delta_planar is None:
            return
        key = (int(delta_planar[0, 0]), int(delta_planar[1, 0]))
        if key == self.tiles1_delta:
            return
        r = delta_planar[:, 0]
        for rt, rp in self.tiles1.values():
            rt[...] = r
            rp[...] = r[:, None]
        self.tiles1_delta = key

    def _program(self, bc: int, step: int) -> tuple:
        """Per level: (AND steps, XOR/INV steps) for chunks of ``bc`` instances (see the class doc)."""
        if bc == 1:
            return self._program1(step)
        garbler = self.role == "garbler"
        prog = []
        lab = _flat(self.lab_buf, (self.plan.n_slots, 2, bc))  # (as start_chunk lays them out)
        slot_rows: dict[int, tuple] = {}

        def rows_of(s: int) -> tuple:  # a slot's (2, bc) labels and its two word rows, one set of views per slot
            r = slot_rows.get(s)
            if r is None:
                r = slot_rows[s] = (lab[s], lab[s, 0], lab[s, 1])
            return r

        for lv in self.plan.levels:
            ands = []
            dands = self._direct_ands(lv, bc, step, rows_of) if bc > 1 and _direct_and(lv.k, bc, step) else ()
            for g0 in range(0, 0 if dands else lv.k, step):
                g1 = min(lv.k, g0 + step)
                k = g1 - g0
                rows = np.ascontiguousarray(lv.and_rows[:, :, g0:g1])
                x = _flat(self.x, (2, 2, k, bc))  # gathered labels [A, B] x [lo, hi], planar
                c = _flat(self.c, (2, k, bc))
                m = _flat(self.m, (2, k, bc))  # all-ones masks of the permute bits
                t = _flat(self.t, (2, k, bc))
                # tweaks [A, B] x gates x instances, interleaved; the high words (instance ids) are set
                # per chunk (start_chunk), for a step of `step` gates, so a shorter step reads a
                # strided part of that tile
                tw = _flat(self.tw, (2, step, bc, 2))[:, :k]
                common = (
                    rows, x.reshape(rows.shape + (bc,)), x[:, 0], x[:, 1], x[0], tw, tw[..., 0], np.ascontiguousarray(lv.tlo[:, g0:g1]),
                    c, c[0], c[1], m, m[0], m[1], t,
                    np.ascontiguousarray(lv.and_out[:, g0:g1]), g0, g1, g0 == 0 and g1 == lv.k,
                )
                if garbler:
                    u = _flat(self.u, (2, 2, k, bc, 2))  # hash inputs [zero, one] x [A, B], interleaved
                    v = _flat(self.v, (2, 2, k, bc, 2))  # their hashes
                    d = _flat(self.d, (2, 2, k, bc))  # H(X0) ^ H(X1), planar
                    ands.append(common + (
                        4 * k * bc, u, v, u[0], u[1], u[0, ..., 0], u[0, ..., 1], _flat(self.rt_buf, (k, bc, 2)),
                        v[0, ..., 0], v[1, ..., 0], v[0, ..., 1], v[1, ..., 1],
                        v[0, 0, ..., 0], v[0, 1, ..., 0], v[0, 0, ..., 1], v[0, 1, ..., 1],
                        d, d[:, 0], d[:, 1], d[0], d[1],
                    ))
                else:
                    u = _flat(self.u, (2, k, bc, 2))  # hash inputs [A, B], interleaved
                    v = _flat(self.v, (2, k, bc, 2))
                    ands.append(common + (
                        2 * k * bc, u, v, u[..., 0], u[..., 1], v[0, ..., 0], v[1, ..., 0], v[0, ..., 1], v[1, ..., 1],
                    ))
            lins = []
            dlins = ()
            if _direct_lin(lv.n_lin, bc, step):  # one XOR call per gate on the label rows themselves
                sl = lv.lin_rows[:, 0] // 2  # (2 [a, b], n) slots
                dlins = tuple(
                    (rows_of(a)[0], rows_of(b)[0], rows_of(o)[0])
                    for a, b, o in zip(*sl.tolist(), (lv.lin_out[0] // 2).tolist())
                )
            for g0 in range(0, 0 if dlins else lv.n_lin, step):
                g1 = min(lv.n_lin, g0 + step)
                n = g1 - g0
                rows = np.ascontiguousarray(lv.lin_rows[:, :, g0:g1])
                y = _flat(self.x, (2, 2, n, bc))
                z = _flat(self.xs, (2, n, bc))
                lins.append((rows, y, y[0], y[1], z, np.ascontiguousarray(lv.lin_out[:, g0:g1])))
            prog.append((lv, tuple(ands), tuple(lins), dands, dlins))
        return tuple(prog)

    def _direct_ands(self, lv: _LevelPlan, bc: int, step: int, rows_of: Callable[[int], tuple]) -> tuple:
        """Per AND gate of a narrow level: the views :func:`_garble_direct` / :func:`_eval_direct` use.

        The gate's input and output labels are used in place, (2 [lo, hi], bc) rows of the labels
        (``rows_of(slot)``), so there is no gather and no scatter; the hash buffers hold one gate.
        """
        tw = _flat(self.tw, (2, step, bc, 2))[:, 0]  # (2 [A, B], bc, 2), high words set by start_chunk
        m = _flat(self.m, (2, bc))  # all-ones masks of the permute bits of A and B
        c = _flat(self.c, (2, bc))
        t = _flat(self.t, (2, bc))
        res = []
        for j in range(lv.k):
            (a, a0, a1), (b, b0, b1) = (rows_of(int(x) // 2) for x in lv.and_rows[:, 0, j])
            o = rows_of(int(lv.and_out[0, j]) // 2)[0]
            common = (j, a, b, o, m, m[0], m[1], tw, tw[..., 0], np.ascontiguousarray(lv.tlo[:, j]), c, c[0], c[1], t)
            if self.role == "garbler":
                u = _flat(self.u, (2, 2, bc, 2))  # [zero, one] x [A, B], interleaved
                v = _flat(self.v, (2, 2, bc, 2))
                d = _flat(self.d, (2, 2, bc))  # H(X0) ^ H(X1), planar (2 [A, B], 2 [lo, hi], bc)
                res.append(common + (
                    4 * bc, u, v, a0, a1, b0, b1, u[0, 0, :, 0], u[0, 0, :, 1], u[0, 1, :, 0], u[0, 1, :, 1],
                    u[0], u[1], _flat(self.rt_buf, (bc, 2)), u[0, :, :, 0], _flat(self.const_buf, (2, bc)),
                    v[0, ..., 0], v[1, ..., 0], v[0, ..., 1], v[1, ..., 1], d, d[:, 0], d[:, 1], d[0], d[1],
                    v[0, 0, :, 0], v[0, 1, :, 0], v[0, 0, :, 1], v[0, 1, :, 1],
                ))
            else:
                u = _flat(self.u, (2, bc, 2))  # [A, B], interleaved
                v = _flat(self.v, (2, bc, 2))
                res.append(common + (
                    2 * bc, u, v, a0, a1, b0, b1, u[0, :, 0], u[0, :, 1], u[1, :, 0], u[1, :, 1], u[:, :, 0],
                    v[0, :, 0], v[1, :, 0], v[0, :, 1], v[1, :, 1],
                ))
        return tuple(res)


#: Cost of one numpy call in uint64 words of elementwise work (~1 us at ~0.3 ns per word), for the
#: choice between the two codes of a level at ``bc`` > 1 instances.  Gathered steps (of ``step``
#: gates) pay a gather and a scatter, 6 words per gate-instance more, in ~17 calls per AND step and
#: 3 per XOR/INV step; the direct code (label rows used in place, :meth:`_Work._direct_ands`,
#: ``dlins``) pays ~18 calls per AND gate and 1 per XOR/INV gate, which wins on narrow levels of
#: large chunks (gini's carry chain: one AND and two XORs per level at 8192 instances).
DIRECT_CALL_WORDS = 3000


class _Jit1:
    """Scratch of one one-instance garbling/evaluation on the compiled path (:mod:`pairwise.mpc.jit`).

    ``lab`` (n_slots, 2) holds the chunk's labels (slot s: low word, high
    word); ``x`` / ``y`` are the hash buffers of one AND batch with the
    slack OpenSSL needs; ``batches`` lists per AND batch its gate count and
    the four OpenSSL views of its hash blocks (``parts`` blocks per gate: 4
    for the garbler, 2 for the evaluator).  Pooled per plan and role like
    :class:`_Work`.
    """

    def __init__(self, plan: _Plan, parts: int) -> None:
        self.prog, sizes = _jit_program(plan)
        n = parts * max(sizes, default=0)  # <= parts * JIT_MAX_WIDTH blocks (see _use_jit)
        self.lab = np.empty((plan.n_slots, 2), _U64)
        self._xb, self._yb = BlockBuffer(n), BlockBuffer(n)
        self.x, self.y = self._xb.blocks, self._yb.blocks
        xmv, ymv = self._xb._mv, self._yb._mv
        self.batches = [(k, xmv[: 16 * parts * k], xmv[: 16 * parts * k + 15],
                         ymv[: 16 * parts * k], ymv[: 16 * parts * k + 15]) for k in sizes]
        self.nbytes = self.lab.nbytes + 2 * (16 * n + 16)

    @classmethod
    def acquire(cls, plan: _Plan, role: str) -> "_Jit1":
        try:
            return plan.pool.get(("jit", role), []).pop()
        except IndexError:
            return cls(plan, 4 if role == "garbler" else 2)

    def release(self, plan: _Plan, role: str, keep: bool = False) -> None:
        """Back to the plan's pool under the same rule and budget as :class:`_Work` (:func:`_keep_spare`)."""
        _keep_spare(plan.pool, ("jit", role), self, keep)


#: The compiled path runs circuits whose widest AND level has at most this many gates: its hash
#: buffers hold one whole level (4 blocks per gate), so this bounds each of the two at 1 MiB; wider levels
#: are cheap per gate on the numpy program anyway.
JIT_MAX_WIDTH = 1 << 14


def _use_jit(plan: _Plan, chunk: int) -> bool:
    """Whether one-instance chunks run compiled: every chunk is one instance (batch 1, or chunk 1), so a
    one-instance tail of a larger batch never loads numba, and the circuit's levels are not too wide."""
    return chunk == 1 and plan.max_and_width <= JIT_MAX_WIDTH and _jit.ready()


def _jit_program(plan: _Plan) -> tuple[np.ndarray, list[int]]:
    """The plan as one :func:`pairwise.mpc.jit.program` array (cached) and the AND count per batch.

    AND batches are the levels with AND gates, in order.  Step i finishes
    batch i-1, runs the XOR/INV gates of batch i-1's level (they may read
    its AND outputs) and of the AND-free levels up to batch i's level, then
    gathers batch i's AND inputs: the schedule's order, gate by gate.
    """
    got = plan.jit.get("program")
    if got is not None:
        return got
    and_a, and_b, and_o, lin_a, lin_b, lin_o, batches, sizes = [], [], [], [], [], [], [], []
    n_and = n_lin = l0 = 0
    for lv in plan.levels:
        if lv.k:
            and_a.append(lv.and_rows[0, 0] // 2)
            and_b.append(lv.and_rows[1, 0] // 2)
            and_o.append(lv.and_out[0] // 2)
            batches.append((n_and, n_and + lv.k, l0, n_lin, lv.and_base))
            sizes.append(lv.k)
            n_and += lv.k
            l0 = n_lin
        if lv.n_lin:
            lin_a.append(lv.lin_rows[0, 0] // 2)
            lin_b.append(lv.lin_rows[1, 0] // 2)
            lin_o.append(lv.lin_out[0] // 2)
            n_lin += lv.n_lin
    batches.append((n_and, n_and, l0, n_lin, 0))
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64)  # noqa: E731
    got = plan.jit["program"] = (
        _jit.program(cat(and_a), cat(and_b), cat(and_o), cat(lin_a), cat(lin_b), cat(lin_o), batches),
        sizes,
    )
    return got


def _jit_garble1(plan: _Plan, lab_in: np.ndarray, delta: np.ndarray, instance: int, dest: np.ndarray | None,
                 pos: int, scratch: np.ndarray | None, aes: FixedKeyAES, finish: Callable[[np.ndarray], None],
                 every: int = 0, keep: bool = False) -> Iterator[np.ndarray]:
    """Garble one instance on the compiled path; yields table segments as :meth:`Garbler._run` does.

    ``lab_in`` (n_in, 2) zero labels of the input slots, ``delta`` (2,).
    Tables go to ``dest`` (flat uint64) from word ``pos`` on, yielded as the
    views written since the previous yield once they reach ``every`` bytes
    (and at the end); without ``dest`` each level's (2, 2, k) tables are
    yielded, in ``scratch`` (reused) or in fresh arrays.  At the end
    ``finish`` gets the zero labels (n_slots, 2) of every slot, before the
    scratch is reused.  ``keep``: as for :meth:`_Work.release`.
    """
    w = _Jit1.acquire(plan, "garbler")
    prog, lab, x, y = w.prog, w.lab, w.x, w.y
    lab[: lab_in.shape[0]] = lab_in
    lab[plan.one_slot] = delta
    d0, d1 = _U64(delta[0]), _U64(delta[1])
    inst = _U64(instance)
    enc = aes._enc
    kern = _jit.kernels()
    step, tw = kern.garble_step, kern.tweak
    out, off, k_prev, mark = (dest, pos, 0, pos) if dest is not None else (_NO_TABLES, 0, 0, 0)
    for i, (k, xi, xo, yi, yo) in enumerate(w.batches):
        step(lab, prog, i, x, y, out, off, d0, d1)
        if dest is not None:
            off += 4 * k_prev
            if 8 * (off - mark) >= every and off > mark:
                yield dest[mark:off]
                mark = off
        elif i:
            yield out.reshape(2, 2, k_prev)
        enc.update_into(xi, xo)
        tw(prog, i, x, y, 4, inst)
        enc.update_into(yi, yo)
        if dest is None:
            out = scratch[: 4 * k] if scratch is not None else np.empty(4 * k, _U64)
        k_prev = k
    step(lab, prog, len(w.batches), x, y, out, off, d0, d1)
    finish(lab)
    w.release(plan, "garbler", keep)
    if dest is not None:
        off += 4 * k_prev
        if off > mark:
            yield dest[mark:off]
    elif k_prev:
        yield out.reshape(2, 2, k_prev)


def _jit_eval1(plan: _Plan, lab_in: np.ndarray, instance: int, reader: "_Reader", aes: FixedKeyAES,
               finish: Callable[[np.ndarray], None], keep: bool = False) -> None:
    """Evaluate one instance on the compiled path; ``finish`` gets the active labels (n_slots, 2) of every slot."""
    w = _Jit1.acquire(plan, "evaluator")
    prog, lab, x, y = w.prog, w.lab, w.x, w.y
    lab[: lab_in.shape[0]] = lab_in
    lab[plan.one_slot] = 0
    inst = _U64(instance)
    enc = aes._enc
    kern = _jit.kernels()
    step, tw = kern.eval_step, kern.tweak
    tab, off = _NO_TABLES, 0
    for i, (k, xi, xo, yi, yo) in enumerate(w.batches):
        step(lab, prog, i, x, y, tab, off)
        enc.update_into(xi, xo)
        tw(prog, i, x, y, 2, inst)
        enc.update_into(yi, yo)
        tab, off = reader.read_at(32 * k)
    step(lab, prog, len(w.batches), x, y, tab, off)
    finish(lab)
    w.release(plan, "evaluator", keep)


_NO_TABLES = np.zeros(0, _U64)


def _direct_and(k: int, bc: int, step: int) -> bool:
    """Whether the ``k`` ANDs of a level take the per-gate code (see DIRECT_CALL_WORDS)."""
    w = DIRECT_CALL_WORDS
    return k > 0 and k * 18 * w - -(-k // step) * 17 * w <= 6 * k * bc


def _direct_lin(n: int, bc: int, step: int) -> bool:
    """Whether the ``n`` XOR/INV gates of a level take one XOR call each on the label rows."""
    w = DIRECT_CALL_WORDS
    return n > 0 and n * w - -(-n // step) * 3 * w <= 6 * n * bc


_xor = np.bitwise_xor
_and = np.bitwise_and
_neg = np.negative
_mul = np.multiply
_copy = np.copyto


def _garble_ands(src: np.ndarray, steps: tuple, w: _Work, tab: np.ndarray, aes: FixedKeyAES) -> None:
    """Garble every AND of a level into ``tab`` (2, 2, k, b); write output zero labels.

    H(X, i) = pi(pi(X) ^ i) ^ pi(X) (TMMO, :func:`pairwise.mpc.aes.tccr_hash`) for
    X in {A0, A1, B0, B1} of every gate and instance: one :class:`TccrHasher`
    call over 4 k b blocks.
    """
    r, hasher = w.r, w.hasher
    for (rows, xt, xlo, xhi, xa, tw, twlo, tlo, c, clo, chi, m, ma, mb, t, out, g0, g1, whole,
         nblk, u, v, u0, u1, u0lo, u0hi, rt, v0lo, v1lo, v0hi, v1hi, valo, vblo, vahi, vbhi,
         d, dlo, dhi, da, db) in steps:
        src.take(rows, axis=0, out=xt, mode="clip")
        # hash inputs u[z, s, g, n] = X0 for z = 0, X0 ^ R for z = 1 (s in {A, B}), interleaved (one
        # strided copy per word: numpy walks a transposed destination in a cache-hostile order)
        _copy(u0lo, xlo)
        _copy(u0hi, xhi)
        _xor(u0, rt, u1)
        _copy(twlo, tlo)  # tweak (2*g + s, instance); the instance ids are in place (start_chunk)
        hasher(nblk, tw, u, v, aes)  # v = H(u, tweak), the tweak shared by X0 and X1
        _xor(v0lo, v1lo, dlo)  # d[s] = H(X0) ^ H(X1), planar
        _xor(v0hi, v1hi, dhi)
        _and(xlo, _ONE0, m)
        _neg(m, m)
        if whole:
            tg, te = tab[0], tab[1]
        else:
            tg, te = tab[0, :, g0:g1], tab[1, :, g0:g1]
        _and(mb, r, t)  # pb * R
        _xor(da, t, tg)  # T_G = H(A0) ^ H(A1) ^ pb*R
        _xor(db, xa, te)  # T_E = H(B0) ^ H(B1) ^ A0
        # C0 = H(A0) ^ pa*T_G ^ H(B0) ^ pb*(H(B0) ^ H(B1))
        _xor(valo, vblo, clo)
        _xor(vahi, vbhi, chi)
        _and(ma, tg, t)
        _xor(c, t, c)
        _and(mb, db, t)
        _xor(c, t, c)
        src[out] = c


def _eval_ands(src: np.ndarray, steps: tuple, w: _Work, tab: np.ndarray, aes: FixedKeyAES) -> None:
    """Evaluate every AND of a level with tables ``tab`` (2, 2, k, b); write active labels."""
    hasher = w.hasher
    for (rows, xt, xlo, xhi, xa, tw, twlo, tlo, c, clo, chi, m, ma, mb, t, out, g0, g1, whole,
         nblk, u, v, ulo, uhi, valo, vblo, vahi, vbhi) in steps:
        src.take(rows, axis=0, out=xt, mode="clip")
        _copy(ulo, xlo)
        _copy(uhi, xhi)
        _copy(twlo, tlo)
        hasher(nblk, tw, u, v, aes)
        # C = H(A) ^ H(B) ^ sa*T_G ^ sb*(T_E ^ A)
        _xor(valo, vblo, clo)
        _xor(vahi, vbhi, chi)
        _and(xlo, _ONE0, m)
        _neg(m, m)
        if whole:
            tg, te = tab[0], tab[1]
        else:
            tg, te = tab[0, :, g0:g1], tab[1, :, g0:g1]
        _and(ma, tg, t)
        _xor(c, t, c)
        _xor(te, xa, t)
        _and(t, mb, t)
        _xor(c, t, c)
        src[out] = c


def _garble_ands1(src: np.ndarray, steps: tuple, tab: np.ndarray, hasher: TccrHasher, aes: FixedKeyAES) -> None:
    """:func:`_garble_ands` for one instance (tables ``tab`` (2, 2, k)), in fewer numpy calls.

    At one instance a level costs its number of numpy calls, and calls on
    same-shape contiguous operands (numpy's fast path) cost about half as
    much as strided or broadcast ones.  So one gather puts the zero labels
    straight into the hash buffer, interleaved, and a second one fills
    w = [A0 planar], [lo words of A, A, B, B]; the tweak blocks are
    precomputed per step; the hash differences land planar with one call;
    the permute bits multiply (0 or 1) instead of masking; Delta is tiled to
    the step's size.  Same algebra, same tables.
    """
    for (rows_u, rows_w, w, xa, tw, bits, ba, bb, c, t, out, g0, g1, whole,
         nblk, u, u0, u1, v, v0t, v1t, vat, vbt, d, da, db, rt, rp) in steps:
        src.take(rows_u, axis=0, out=u0, mode="clip")
        src.take(rows_w, axis=0, out=w, mode="clip")
        _xor(u0, rt, u1)  # X1 = X0 ^ R
        hasher(nblk, tw, u, v, aes)
        _xor(v0t, v1t, d)  # H(X0) ^ H(X1), planar
        _and(bits, _ONE0, bits)
        if whole:
            tg, te = tab[0], tab[1]
        else:
            tg, te = tab[0, :, g0:g1], tab[1, :, g0:g1]
        _mul(bb, rp, t)
        _xor(da, t, tg)  # T_G = H(A0) ^ H(A1) ^ pb*R
        _xor(db, xa, te)  # T_E = H(B0) ^ H(B1) ^ A0
        _xor(vat, vbt, c)  # H(A0) ^ H(B0)
        _mul(ba, tg, t)
        _xor(c, t, c)  # ^ pa*T_G
        _mul(bb, db, t)
        _xor(c, t, c)  # ^ pb*(H(B0) ^ H(B1))
        src[out] = c


def _eval_ands1(src: np.ndarray, steps: tuple, tab: np.ndarray, hasher: TccrHasher, aes: FixedKeyAES) -> None:
    """:func:`_eval_ands` for one instance (tables ``tab`` (2, 2, k)); see :func:`_garble_ands1`."""
    for (rows_u, rows_w, w, xa, tw, bits, ba, bb, c, t, out, g0, g1, whole,
         nblk, u, v, vat, vbt) in steps:
        src.take(rows_u, axis=0, out=u, mode="clip")
        src.take(rows_w, axis=0, out=w, mode="clip")
        hasher(nblk, tw, u, v, aes)
        _xor(vat, vbt, c)  # H(A) ^ H(B), planar
        _and(bits, _ONE0, bits)
        if whole:
            tg, te = tab[0], tab[1]
        else:
            tg, te = tab[0, :, g0:g1], tab[1, :, g0:g1]
        _mul(ba, tg, t)
        _xor(c, t, c)  # ^ sa*T_G
        _xor(te, xa, t)
        _mul(t, bb, t)
        _xor(c, t, c)  # ^ sb*(T_E ^ A)
        src[out] = c


def _garble_direct(steps: tuple, tab: np.ndarray, hasher: TccrHasher, aes: FixedKeyAES) -> None:
    """:func:`_garble_ands` one gate at a time on the label rows in place (narrow levels, large chunks).

    Same algebra and tables: the gate's zero labels are copied word by word
    into the interleaved hash buffer (no gather), the permute-bit masks are
    read off the low-word rows, and the last XOR writes the output zero label
    into its row (no scatter).
    """
    for (j, a, b, o, m, ma, mb, tw, twlo, tlo, c, clo, chi, t,
         nblk, u, v, a0, a1, b0, b1, ua0, ua1, ub0, ub1, u0, u1, rt, ulo, r,
         v0lo, v1lo, v0hi, v1hi, d, dlo, dhi, da, db, valo, vblo, vahi, vbhi) in steps:
        _copy(ua0, a0)
        _copy(ua1, a1)
        _copy(ub0, b0)
        _copy(ub1, b1)
        _xor(u0, rt, u1)  # X1 = X0 ^ R
        _and(a0, _ONE0, ma)  # (from the contiguous low-word rows: ~4x faster than from u)
        _and(b0, _ONE0, mb)
        _neg(m, m)
        _copy(twlo, tlo)
        hasher(nblk, tw, u, v, aes)
        _xor(v0lo, v1lo, dlo)  # d[s] = H(X0) ^ H(X1), planar
        _xor(v0hi, v1hi, dhi)
        tg, te = tab[0, :, j], tab[1, :, j]
        _and(mb, r, t)  # pb * R
        _xor(da, t, tg)  # T_G = H(A0) ^ H(A1) ^ pb*R
        _xor(db, a, te)  # T_E = H(B0) ^ H(B1) ^ A0
        _xor(valo, vblo, clo)  # C0 = H(A0) ^ H(B0) ^ pa*T_G ^ pb*(H(B0) ^ H(B1))
        _xor(vahi, vbhi, chi)
        _and(ma, tg, t)
        _xor(c, t, c)
        _and(mb, db, t)
        _xor(c, t, o)


def _eval_direct(steps: tuple, tab: np.ndarray, hasher: TccrHasher, aes: FixedKeyAES) -> None:
    """:func:`_eval_ands` one gate at a time on the label rows in place; see :func:`_garble_direct`."""
    for (j, a, b, o, m, ma, mb, tw, twlo, tlo, c, clo, chi, t,
         nblk, u, v, a0, a1, b0, b1, ua0, ua1, ub0, ub1, ulo, valo, vblo, vahi, vbhi) in steps:
        _copy(ua0, a0)
        _copy(ua1, a1)
        _copy(ub0, b0)
        _copy(ub1, b1)
        _and(a0, _ONE0, ma)
        _and(b0, _ONE0, mb)
        _neg(m, m)
        _copy(twlo, tlo)
        hasher(nblk, tw, u, v, aes)
        # C = H(A) ^ H(B) ^ sa*T_G ^ sb*(T_E ^ A)
        _xor(valo, vblo, clo)
        _xor(vahi, vbhi, chi)
        tg, te = tab[0, :, j], tab[1, :, j]
        _and(ma, tg, t)
        _xor(c, t, c)
        _xor(te, a, t)
        _and(t, mb, t)
        _xor(c, t, o)


# ---------------------------------------------------------------------------- byte source
class _Reader:
    """Reads exact-size uint64 segments from bytes or from an iterable of byte chunks.

    A segment is a view of the chunk it lies in, or, when it spans chunks, of
    a scratch buffer that the next such segment reuses: each result is valid
    until the next :meth:`read` (the engine uses one level's tables at a time).
    """

    def __init__(self, source) -> None:
        self._scratch = np.empty(0, _U64)
        if isinstance(source, (bytes, bytearray, memoryview, np.ndarray)):
            self._it: Iterator | None = None
            self._set(memoryview(source).cast("B") if not isinstance(source, np.ndarray) else memoryview(
                np.ascontiguousarray(source)
            ).cast("B"))
        else:
            self._it = iter(source)
            self._set(memoryview(b""))

    def _set(self, cur: memoryview) -> None:
        self._cur = cur
        self._pos = 0
        # the chunk as aligned uint64 words, when it is (reads at 8-byte offsets are then a slice)
        words = np.frombuffer(cur, dtype="<u8", count=len(cur) // 8) if len(cur) >= 8 else None
        self._words = words if words is not None and words.flags.aligned else None

    def read_at(self, n: int) -> tuple[np.ndarray, int]:
        """The next ``n`` bytes (a multiple of 8) as (words, offset): ``words[offset:offset + n // 8]``.

        No slicing or reshaping on the fast path (aligned, inside the current
        chunk): the compiled evaluator indexes the chunk's words directly.
        """
        pos = self._pos
        if self._words is not None and len(self._cur) - pos >= n and not pos & 7:
            self._pos = pos + n
            return self._words, pos >> 3
        return self.read(n, (n >> 3,)), 0

    def read(self, n: int, shape: tuple[int, ...]) -> np.ndarray:
        while self._pos == len(self._cur) and n and self._it is not None:  # chunk used up: the next one
            nxt = next(self._it, None)
            if nxt is None:
                raise GarbleError(f"garbled tables ended early: a segment needs {n} bytes, none arrived")
            self._set(memoryview(nxt).cast("B"))
        pos = self._pos
        avail = len(self._cur) - pos
        if avail >= n:
            self._pos = pos + n
            if self._words is not None and not (pos | n) & 7:
                return self._words[pos >> 3 : (pos + n) >> 3].reshape(shape)
            return np.frombuffer(self._cur[pos : pos + n], dtype="<u8").copy().reshape(shape)
        if self._scratch.shape[0] * 8 < n:
            self._scratch = np.empty(-(-n // 8), _U64)
        buf = memoryview(self._scratch.view(np.uint8))[:n]
        got = 0
        while True:
            take = min(avail, n - got)
            buf[got : got + take] = self._cur[self._pos : self._pos + take]
            got += take
            self._pos += take
            if got == n:
                return self._scratch[: n >> 3].reshape(shape)
            nxt = next(self._it, None) if self._it is not None else None
            if nxt is None:
                raise GarbleError(f"garbled tables ended early: a segment needs {n} bytes, only {got} arrived")
            self._set(memoryview(nxt).cast("B"))
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
            (n_inputs, batch, 2) array; groups that are neither given here
            nor set later (:meth:`set_zero_labels`, :meth:`set_active_labels`)
            get fresh CSPRNG labels when they are first needed.
        instance_offset: instance id of the first instance (tweak high word);
            see the module docstring for why it must grow across garblings
            that share a Delta.
        chunk: instances per chunk (default :func:`default_chunk`); the
            evaluator must use the same value.
        record_wires: keep every wire's zero label in ``wire_zero``
            (n_wires, batch, 2), for tests; costs n_wires*batch*16 bytes.
        keep_scratch: keep the scratch buffers for the next garbling of
            this circuit and chunk size even when they are large (sessions
            that repeat executions; small ones are always kept).
        input_buffer: an (n_inputs, batch, 2) uint64 array to hold the zero
            labels of the input wires (its contents are ignored), e.g. one a
            session reuses for every execution, so that large batches do not
            touch fresh memory; fill groups in place through
            :meth:`input_view`.

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
        keep_scratch: bool = False,
        input_buffer: np.ndarray | None = None,
    ) -> None:
        self.circuit = circuit
        self.batch = _check_batch(batch)
        self.chunk = _check_chunk(circuit, self.batch, chunk)
        self.instance_offset = _check_offset(instance_offset, self.batch)
        self._aes = aes  # None: the running thread's default_aes(), resolved per run
        self._plan = _plan(circuit, "wires" if record_wires else "compact")
        self.record_wires = record_wires
        self._keep = keep_scratch
        if delta is None:
            self.delta = fresh_delta(self.batch)
        else:
            d = np.asarray(delta)
            if d.dtype != np.uint64 or d.shape not in ((2,), (self.batch, 2)):
                raise GarbleError(f"delta must be a uint64 block of shape (2,) or ({self.batch}, 2), got {d.dtype} {d.shape}")
            if not (d[..., 0] & _ONE).all():
                raise GarbleError("delta must have lowest bit 1 (point-and-permute)")
            self.delta = np.empty((self.batch, 2), _U64)  # a private copy
            self.delta[...] = d
        self._used = False
        n_in = circuit.n_inputs
        if isinstance(input_zero, np.ndarray):
            self._zero = np.array(_as_blocks(input_zero, (n_in, self.batch, 2), "input_zero"))
            self._open: set[str] = set()
        else:
            # groups the caller leaves open get fresh CSPRNG labels when first needed (_fill_open), so
            # labels that are set later (from OT, from a seed) cost no random bytes
            if input_buffer is None:
                self._zero = np.empty((n_in, self.batch, 2), _U64)
            else:
                self._zero = _as_blocks(input_buffer, (n_in, self.batch, 2), "input_buffer")
                if not self._zero.flags.c_contiguous or not self._zero.flags.writeable:
                    raise GarbleError("input_buffer must be a writable C-contiguous array")
            self._open = {g.name for g in circuit.inputs}
            for name, arr in dict(input_zero or {}).items():
                self.set_zero_labels(name, arr)
        self.output_zero: np.ndarray | None = None
        self.decode_bits: np.ndarray | None = None
        self.wire_zero: np.ndarray | None = None

    # -- inputs
    def set_zero_labels(self, group: str, labels) -> None:
        """Use ``labels`` (width, batch, 2) as the zero labels of input group ``group`` (before garbling).

        E.g. the zero labels of the evaluator's inputs that come out of
        correlated OT once the evaluator's OT message has arrived, while the
        rest of the Garbler was set up earlier.
        """
        g = self._settable_group(group)
        w = wire_slice(g)
        lab = _as_blocks(labels, (g.width, self.batch, 2), f"input_zero[{group!r}]")
        if not _same_memory(lab, self._zero[w]):  # (filled in place through input_view: nothing to copy)
            self._zero[w] = lab
        self._open.discard(g.name)

    def _settable_group(self, group: str):
        """The input group ``group``, if its labels may still be set (before garbling)."""
        if self._used:
            raise GarbleError("zero labels cannot change after garbling")
        try:
            return self.circuit.input_group(group)
        except KeyError as exc:
            raise GarbleError(str(exc.args[0])) from None

    def input_view(self, group: str) -> np.ndarray:
        """The writable (width, batch, 2) storage of the zero labels of ``group`` (consecutive wires).

        Fill it in place (e.g. ``COTSender.send_random(n, out=view.reshape(-1, 2))``
        or :func:`pairwise.mpc.aes.ctr_blocks` with ``out``), then pass it to
        :meth:`set_zero_labels` or :meth:`set_active_labels`, which then copy
        nothing.
        """
        g = self._settable_group(group)
        w = wire_slice(g)
        if not isinstance(w, slice):
            raise GarbleError(f"input group {group!r} has no consecutive wires: set its labels with set_zero_labels")
        return self._zero[w]

    @property
    def input_zero(self) -> np.ndarray:
        """Zero labels (n_inputs, batch, 2) of all input wires."""
        self._fill_open()
        return self._zero

    def _fill_open(self) -> None:
        for g in self.circuit.inputs:
            if g.name in self._open:
                self._zero[wire_slice(g)] = random_blocks(g.width, self.batch)
        self._open.clear()

    def set_active_labels(self, group: str, active, bits) -> None:
        """Fix the labels of input group ``group`` by its *active* labels: zero = active ^ bits*Delta.

        ``active`` (width, batch, 2) is known to the evaluator (e.g. expanded
        from a seed the garbler sent it: emp-sh2pc's input scheme, see
        :mod:`pairwise.mpc.twopc`); ``bits`` (batch, width) bool are the
        group's input bits, which only the garbler knows.  The evaluator then
        holds the label of ``bits`` and, Delta being secret, learns nothing
        about them.
        """
        g = self._settable_group(group)
        a = _as_blocks(active, (g.width, self.batch, 2), f"active labels of {group!r}")
        b = np.asarray(bits, dtype=bool)
        if b.shape != (self.batch, g.width):
            raise GarbleError(f"bits for {group!r} must have shape ({self.batch}, {g.width}), got {b.shape}")
        w = wire_slice(g)
        if isinstance(w, slice):  # in place, word plane by word plane, through a bounded temporary
            z = self._zero[w]
            if not _same_memory(a, z):
                np.copyto(z, a)
            bits_wm = np.ascontiguousarray(b.T).view(np.uint8)  # (width, batch), 0/1
            rows = max(1, (1 << 18) // self.batch)
            tmp = np.empty((min(rows, g.width), self.batch), _U64)
            for r0 in range(0, g.width, rows):
                r1 = min(g.width, r0 + rows)
                t = tmp[: r1 - r0]
                for k in (0, 1):
                    np.multiply(bits_wm[r0:r1], self.delta[:, k], out=t)  # bit * Delta word
                    np.bitwise_xor(z[r0:r1, :, k], t, out=z[r0:r1, :, k])
        else:
            mask = np.negative(b.T.astype(_U64))[..., None]  # (width, batch, 1) all-ones where bit = 1
            self._zero[w] = a ^ (mask & self.delta[None])
        self._open.discard(g.name)

    def zero_labels(self, group: str) -> np.ndarray:
        """Zero labels (width, batch, 2) of an input group."""
        g = self.circuit.input_group(group)
        if g.name in self._open:
            self._fill_open()
        return self._zero[wire_slice(g)]

    def encode(self, group: str, bits) -> np.ndarray:
        """Active labels (width, batch, 2) of ``group`` for ``bits`` (batch, width) bool."""
        g = self.circuit.input_group(group)
        b = np.asarray(bits, dtype=bool)
        if b.shape != (self.batch, g.width):
            raise GarbleError(f"bits for {group!r} must have shape ({self.batch}, {g.width}), got {b.shape}")
        mask = np.negative(b.T.astype(_U64))[..., None]  # (width, batch, 1) all-ones where bit = 1
        return self.zero_labels(group) ^ (mask & self.delta[None])

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

    def iter_tables(self, scratch: np.ndarray | None = None) -> Iterator[memoryview]:
        """Garble, yielding one table segment (bytes-like) per instance chunk and AND level.

        Each yielded buffer is fresh (the garbler never writes it again), or,
        with ``scratch`` (a flat uint64 array of at least
        :meth:`max_segment_words` words, e.g. one a sender reuses), a view of
        ``scratch`` that the next segment overwrites: use (send) each segment
        before asking for the next one.
        """
        if scratch is not None:
            scratch = np.asarray(scratch)
            if (scratch.dtype != _U64 or scratch.ndim != 1 or scratch.shape[0] < self.max_segment_words()
                    or not scratch.flags.c_contiguous or not scratch.flags.writeable):
                raise GarbleError(f"scratch must be a writable, contiguous flat uint64 array of at least "
                                  f"{self.max_segment_words()} words")
        for tab in self._run(None, scratch):
            yield memoryview(tab).cast("B")

    def max_segment_words(self) -> int:
        """uint64 words of the largest table segment (for the ``scratch`` of :meth:`iter_tables`)."""
        return max(self.segment_sizes(), default=0) // 8

    def iter_into(self, out, every: int = 0) -> Iterator[int]:
        """Garble into ``out`` segment by segment; after each segment yield the bytes of ``out`` written so far.

        ``out`` is a writable C-contiguous buffer of exactly
        :func:`table_bytes` bytes (8-byte aligned for speed), e.g. a slice of a
        buffer that a sender reuses across garblings: the caller can send what
        is written while the rest is garbled, with no copy and no allocation.
        ``every``: a hint that yields less than that many new bytes apart are
        not needed (the compiled one-instance path then yields less often).
        """
        if not isinstance(every, (int, np.integer)) or isinstance(every, bool) or every < 0:
            raise GarbleError(f"every must be a non-negative number of bytes, got {every!r}")
        dest = self._dest(out)
        done = 0
        for tab in self._run(dest, None, int(every)):
            done += tab.nbytes
            yield done

    def _dest(self, out) -> np.ndarray:
        size = table_bytes(self.circuit, self.batch)
        try:
            mv = memoryview(out).cast("B")
        except TypeError:
            raise GarbleError("out must be a writable C-contiguous buffer") from None
        if mv.readonly or mv.nbytes != size:
            raise GarbleError(f"out must be a writable buffer of exactly {size} bytes, got {mv.nbytes}")
        return np.frombuffer(mv, dtype=_U64) if size else np.empty(0, _U64)

    def _run(self, dest: np.ndarray | None, scratch: np.ndarray | None = None,
             every: int = 0) -> Iterator[np.ndarray]:
        """Garble; yield each segment as a (2, 2, k, b) array, (2, 2, k) for one-instance chunks.

        Segments are views of ``dest`` (all tables, in order) if given, else
        views of the start of ``scratch`` (reused) if given, else fresh arrays.
        With ``dest``, one-instance chunks on the compiled path yield flat
        views of what was written since the last yield, once that reaches
        ``every`` bytes (fewer Python round trips; same bytes).
        """
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
        zero = self.input_zero  # (fills the groups still open with fresh labels)
        w = None
        jit1 = _use_jit(plan, self.chunk)
        for b0, b1 in _chunks(self.batch, self.chunk):
            bc = b1 - b0
            if bc == 1 and jit1:  # the latency path: compiled loops, same tables
                def finish(lab: np.ndarray, b0: int = b0) -> None:
                    self.output_zero[:, b0] = lab[plan.out_slots]
                    if self.record_wires:
                        self.wire_zero[:, b0] = lab[: self.circuit.n_wires]

                for seg in _jit_garble1(plan, zero[:, b0], self.delta[b0], self.instance_offset + b0, dest, pos,
                                        scratch, aes, finish, every, self._keep):
                    if dest is not None:
                        pos += seg.shape[0]
                    yield seg
                continue
            if w is None:
                w = _Work.acquire(self.chunk, plan, "garbler")
            rp = _planar(self.delta[b0:b1])  # (2, b)
            lab, src, prog = w.start_chunk(bc, rp, self.instance_offset + b0)
            lab[:n_in] = zero[:, b0:b1].transpose(0, 2, 1)  # input wires own slots 0..n_in-1
            lab[plan.one_slot] = rp  # zero label of the constant one: Delta
            for lv, ands, lins, dands, dlins in prog:
                if lv.k:
                    size = 4 * lv.k * bc
                    if dest is None and scratch is not None:
                        tab = scratch[:size].reshape((2, 2, lv.k, bc) if bc > 1 else (2, 2, lv.k))
                    elif dest is None:
                        tab = np.empty((2, 2, lv.k, bc) if bc > 1 else (2, 2, lv.k), _U64)
                    else:
                        tab = dest[pos : pos + size].reshape((2, 2, lv.k, bc) if bc > 1 else (2, 2, lv.k))
                    pos += size
                    if dands:
                        _garble_direct(dands, tab, w.hasher, aes)
                    elif bc > 1:
                        _garble_ands(src, ands, w, tab, aes)
                    else:
                        _garble_ands1(src, ands, tab, w.hasher, aes)
                    yield tab
                for rows, y, y0, y1, z, orow in lins:  # XOR and INV (= XOR with the one slot)
                    src.take(rows, axis=0, out=y, mode="clip")
                    _xor(y0, y1, z)
                    src[orow] = z
                for a, b, o in dlins:
                    _xor(a, b, o)
            self.output_zero[:, b0:b1] = lab[plan.out_slots].transpose(0, 2, 1)
            if self.record_wires:
                self.wire_zero[:, b0:b1] = lab[: self.circuit.n_wires].transpose(0, 2, 1)
        if w is not None:
            w.release(self._keep)
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
        dest = np.empty(size // 8, _U64) if out is None else self._dest(out)
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
    (n_wires, batch, 2), for tests.  ``keep_scratch``: as for :class:`Garbler`.
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
        keep_scratch: bool = False,
    ) -> None:
        self.circuit = circuit
        self.batch = _check_batch(batch)
        self.chunk = _check_chunk(circuit, self.batch, chunk)
        self.instance_offset = _check_offset(instance_offset, self.batch)
        self._aes = aes  # None: the running thread's default_aes(), resolved per run
        self._plan = _plan(circuit, "wires" if record_wires else "compact")
        self.record_wires = record_wires
        self._keep = keep_scratch
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
        w = None
        jit1 = _use_jit(plan, self.chunk)
        for b0, b1 in _chunks(self.batch, self.chunk):
            bc = b1 - b0
            if bc == 1 and jit1:  # the latency path: compiled loops, same algebra
                def finish(lab: np.ndarray, b0: int = b0) -> None:
                    out[:, b0] = lab[plan.out_slots]
                    if self.record_wires:
                        self.wire_labels[:, b0] = lab[: self.circuit.n_wires]

                _jit_eval1(plan, act[:, b0], self.instance_offset + b0, reader, aes, finish, self._keep)
                continue
            if w is None:
                w = _Work.acquire(self.chunk, plan, "evaluator")
            lab, src, prog = w.start_chunk(bc, None, self.instance_offset + b0)
            lab[: plan.in_slots.shape[0]] = act[:, b0:b1].transpose(0, 2, 1)
            lab[plan.one_slot] = 0  # active label of the constant one
            for lv, ands, lins, dands, dlins in prog:
                if dands:
                    _eval_direct(dands, reader.read(32 * lv.k * bc, (2, 2, lv.k, bc)), w.hasher, aes)
                elif ands:
                    if bc > 1:
                        _eval_ands(src, ands, w, reader.read(32 * lv.k * bc, (2, 2, lv.k, bc)), aes)
                    else:
                        _eval_ands1(src, ands, reader.read(32 * lv.k, (2, 2, lv.k)), w.hasher, aes)
                for rows, y, y0, y1, z, orow in lins:  # XOR and INV (= XOR with the one slot)
                    src.take(rows, axis=0, out=y, mode="clip")
                    _xor(y0, y1, z)
                    src[orow] = z
                for a, b, o in dlins:
                    _xor(a, b, o)
            out[:, b0:b1] = lab[plan.out_slots].transpose(0, 2, 1)
            if self.record_wires:
                self.wire_labels[:, b0:b1] = lab[: self.circuit.n_wires].transpose(0, 2, 1)
        if w is not None:
            w.release(self._keep)
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


def urandom_bits(batch: int, width: int) -> np.ndarray:
    """(batch, width) uniform bits from ``os.urandom`` (a party's random input group).

    The result is the transpose of a C-contiguous (width, batch) array, the
    wire-major layout in which the garbler applies them to its labels.
    """
    raw = np.frombuffer(os.urandom(-(-batch * width // 8)), dtype=np.uint8)
    return np.unpackbits(raw, count=batch * width, bitorder="little").view(np.bool_).reshape(width, batch).T


def garble_and_evaluate(
    circuit: Circuit, inputs: Sequence[np.ndarray], *, chunk: int | None = None, instance_offset: int = 0,
    random: str | Iterable[str] = (), batch: int | None = None,
) -> list[np.ndarray]:
    """Garble, evaluate and decode in one process (for checks and the CLI).

    ``inputs``: one (batch, width) bool array per input group, as for
    :meth:`Circuit.evaluate_bits`, leaving out the groups named in
    ``random``, whose bits are drawn here from ``os.urandom`` (as the
    two-party runtime's random inputs; ``batch`` gives the batch when no
    group is left to feed).  Returns one (batch, width) bool array per
    output group.  Both roles run here, so this is a correctness tool, not a
    secure computation.
    """
    names = {random} if isinstance(random, str) else set(random)
    if names:
        unknown = names - {g.name for g in circuit.inputs}
        if unknown:
            raise GarbleError(f"random input group(s) {sorted(unknown)} are not inputs of {circuit.name!r}")
        fed = [g for g in circuit.inputs if g.name not in names]
        given = list(inputs)
        if len(given) != len(fed):
            raise GarbleError(f"{len(fed)} input group(s) to feed besides the random ones, got {len(given)} inputs")
        if given:
            batch = np.asarray(given[0]).shape[0]
        elif batch is None or batch < 1:
            raise GarbleError("no input group to feed: give batch=")
        it = iter(given)
        inputs = [urandom_bits(batch, g.width) if g.name in names else next(it) for g in circuit.inputs]
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
