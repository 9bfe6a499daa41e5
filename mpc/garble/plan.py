"""The circuit's level schedule mapped to label slots, and how a batch is cut into chunks.

What it does
    :func:`_plan` maps the levels of a circuit (:attr:`Circuit.levels`) to
    *slots*: a wire's slot is freed after the level of its last reader, so
    labels take the circuit's live width, not its wire count (layout
    "compact"), or wire w gets slot w (layout "wires", for
    ``record_wires``).  Per level, :class:`_LevelPlan` holds the label rows
    of the AND gates' inputs and outputs, the low words 2*g + h of their
    tweaks, and the XOR and INV gates (INV is an XOR with a constant-one
    slot).  Plans are cached per circuit and carry the scratch pool and the
    compiled path's program.

    Also the batch bookkeeping both roles share: :func:`default_chunk` (a
    deterministic function of circuit and batch, so both parties agree), the
    argument checks, the chunk and segment sizes, and :func:`wire_slice`.

Security model
    Everything here is a function of the public circuit and batch: no label,
    no secret.  AND indices must be dense and increasing (the IR contract),
    so the tweaks (2g + h, instance) are distinct within a garbling
    (docs/garbling.md "Tweak uniqueness").

Follows
    Zahur-Rosulek-Evans 2015 (half-gates with free-XOR); docs/garbling.md
    "Labels, slots and levels" and "Chunks and steps".
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from pairwise.circuits.ir import Circuit, CircuitError
from pairwise.dp.validate import check_int

from ..halfgates import TWEAK_INSTANCE_LIMIT
from .format import _ONE, _U64, GarbleError

#: Labels of one instance chunk may use at most this many bytes (by default): half the 2 MiB L2 cache, so a
#: chunk's labels stay in cache from level to level (was 96 MiB; the AES-NI path garbles AES-128 at
#: B = 1024 about 1.3x faster per core in chunks of ~50 than of 1024, kendall in ~500 than in 8192; the
#: numpy program is as fast at either size).
CHUNK_LABEL_BYTES = 1 << 20
#: Largest default instance chunk (2^13 since the TMMO hash: circuits with one AND per level garble
#: a whole level per step, and a 2^14-instance step no longer fits the cache).
MAX_CHUNK = 8192


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
    # the compiled one-instance path (:mod:`pairwise.mpc.garble.jit`): its program (its scratch is pooled in ``pool``)
    jit: dict = field(default_factory=dict, compare=False, repr=False)


_PLANS: weakref.WeakKeyDictionary[Circuit, dict[str, _Plan]] = weakref.WeakKeyDictionary()


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
    out_wires = np.concatenate([g.wires for g in circuit.outputs]) if circuit.outputs else np.zeros(0, np.int64)
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


def default_chunk(circuit: Circuit, batch: int) -> int:
    """Deterministic instance-chunk size for ``batch`` instances of ``circuit``.

    At most :data:`MAX_CHUNK` instances, and the chunk's labels fit in
    :data:`CHUNK_LABEL_BYTES`.  Both parties compute the same value.
    """
    _check_batch(batch)
    plan = _plan(circuit)
    per_instance = 16 * (plan.n_slots + plan.max_width)
    return int(max(1, min(batch, MAX_CHUNK, CHUNK_LABEL_BYTES // per_instance)))


def _check_batch(batch) -> int:
    return check_int(batch, "batch", lo=1, error=GarbleError)


def _check_chunk(circuit: Circuit, batch: int, chunk) -> int:
    if chunk is None:
        return default_chunk(circuit, batch)
    return min(check_int(chunk, "chunk", lo=1, error=GarbleError), batch)


def _check_offset(offset, batch: int) -> int:
    offset = check_int(offset, "instance_offset", lo=0, error=GarbleError)
    if offset + batch > TWEAK_INSTANCE_LIMIT:
        raise GarbleError("instance ids (instance_offset + batch) must stay below 2**63")
    return offset


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
