"""Scratch buffers and per-level programs of the numpy path, and the scratch pool.

What it does
    :class:`_Work` holds the scratch of one garbling or evaluation, sized for
    its largest instance chunk, and per instance count ``bc`` a *program*:
    per level, the steps of its AND gates and of its XOR/INV gates, each a
    tuple of index arrays and of the buffer views its numpy calls use.  At
    small batches the engine's cost is its number of calls, so the level
    loops of :mod:`~pairwise.mpc.garble.garbler` and
    :mod:`~pairwise.mpc.garble.evaluator` only unpack these tuples and call
    the kernels of :mod:`~pairwise.mpc.garble.kernels`.  Narrow levels of
    large chunks take the per-gate ("direct") form (:data:`DIRECT_CALL_WORDS`).
    Steps hold about :data:`STEP_GATES` gate-instances, so the working set
    stays in cache.  Scratch is pooled with the plan (:func:`_keep_spare`,
    :data:`POOL_BYTES`); the compiled path's scratch shares that budget.

Security model
    The buffers hold labels while a run lasts; a pooled buffer keeps the
    labels of a finished run in this process's memory until a later run of
    the same circuit overwrites it.  Nothing leaves the process; every index
    comes from the public schedule.

Follows
    docs/garbling.md "Programs (small batches)" and "Chunks and steps".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..aes import TccrHasher
from .format import _ONE, _U64
from .plan import _LevelPlan, _Plan

#: Gate-instances processed per numpy step: the hash buffers (2 x 4 blocks per gate-instance for the
#: garbler), the tweak tile and the gathered labels stay within the 2 MiB L2 cache (2^13; it was 2^14
#: with the one-AES hash, whose working set was half as large).
STEP_GATES = 1 << 13

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
    def acquire(cls, max_bc: int, plan: _Plan, role: str) -> _Work:
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
        self.tiles1_delta: tuple[int, int] | None = None
        prog = []
        tw_pos = 0
        for lv in plan.levels:
            ands: list[tuple[Any, ...]] = []
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
                    rows_u,
                    rows_w,
                    w,
                    w[0],
                    tw,
                    bits,
                    bits[0],
                    bits[1],
                    c,
                    t,
                    np.ascontiguousarray(lv.and_out[:, g0:g1]),
                    g0,
                    g1,
                    g0 == 0 and g1 == lv.k,
                )
                if garbler:
                    u = _flat(self.u, (2, 2, k, 2))  # [zero, one] x [A, B] labels, interleaved
                    v = _flat(self.v, (2, 2, k, 2))
                    d = _flat(p_buf, (2, 2, k))
                    if k not in self.tiles1:
                        self.tiles1[k] = (np.empty((k, 2), _U64), np.empty((2, k), _U64))
                    rt, rp = self.tiles1[k]
                    ands.append(
                        common
                        + (
                            4 * k,
                            u,
                            u[0],
                            u[1],
                            v,
                            v[0].transpose(0, 2, 1),
                            v[1].transpose(0, 2, 1),
                            v[0, 0].T,
                            v[0, 1].T,
                            d,
                            d[0],
                            d[1],
                            rt,
                            rp,
                        )
                    )
                else:
                    u = _flat(self.u, (2, k, 2))
                    v = _flat(self.v, (2, k, 2))
                    ands.append(common + (2 * k, u, v, v[0].T, v[1].T))
            lins: list[tuple[Any, ...]] = []
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
            ands: list[tuple[Any, ...]] = []
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
                    rows,
                    x.reshape(rows.shape + (bc,)),
                    x[:, 0],
                    x[:, 1],
                    x[0],
                    tw,
                    tw[..., 0],
                    np.ascontiguousarray(lv.tlo[:, g0:g1]),
                    c,
                    c[0],
                    c[1],
                    m,
                    m[0],
                    m[1],
                    t,
                    np.ascontiguousarray(lv.and_out[:, g0:g1]),
                    g0,
                    g1,
                    g0 == 0 and g1 == lv.k,
                )
                if garbler:
                    u = _flat(self.u, (2, 2, k, bc, 2))  # hash inputs [zero, one] x [A, B], interleaved
                    v = _flat(self.v, (2, 2, k, bc, 2))  # their hashes
                    d = _flat(self.d, (2, 2, k, bc))  # H(X0) ^ H(X1), planar
                    ands.append(
                        common
                        + (
                            4 * k * bc,
                            u,
                            v,
                            u[0],
                            u[1],
                            u[0, ..., 0],
                            u[0, ..., 1],
                            _flat(self.rt_buf, (k, bc, 2)),
                            v[0, ..., 0],
                            v[1, ..., 0],
                            v[0, ..., 1],
                            v[1, ..., 1],
                            v[0, 0, ..., 0],
                            v[0, 1, ..., 0],
                            v[0, 0, ..., 1],
                            v[0, 1, ..., 1],
                            d,
                            d[:, 0],
                            d[:, 1],
                            d[0],
                            d[1],
                        )
                    )
                else:
                    u = _flat(self.u, (2, k, bc, 2))  # hash inputs [A, B], interleaved
                    v = _flat(self.v, (2, k, bc, 2))
                    ands.append(
                        common
                        + (
                            2 * k * bc,
                            u,
                            v,
                            u[..., 0],
                            u[..., 1],
                            v[0, ..., 0],
                            v[1, ..., 0],
                            v[0, ..., 1],
                            v[1, ..., 1],
                        )
                    )
            lins: list[tuple[Any, ...]] = []
            dlins: tuple[tuple[Any, Any, Any], ...] = ()
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
        res: list[tuple[Any, ...]] = []
        for j in range(lv.k):
            (a, a0, a1), (b, b0, b1) = (rows_of(int(x) // 2) for x in lv.and_rows[:, 0, j])
            o = rows_of(int(lv.and_out[0, j]) // 2)[0]
            common = (j, a, b, o, m, m[0], m[1], tw, tw[..., 0], np.ascontiguousarray(lv.tlo[:, j]), c, c[0], c[1], t)
            if self.role == "garbler":
                u = _flat(self.u, (2, 2, bc, 2))  # [zero, one] x [A, B], interleaved
                v = _flat(self.v, (2, 2, bc, 2))
                d = _flat(self.d, (2, 2, bc))  # H(X0) ^ H(X1), planar (2 [A, B], 2 [lo, hi], bc)
                res.append(
                    common
                    + (
                        4 * bc,
                        u,
                        v,
                        a0,
                        a1,
                        b0,
                        b1,
                        u[0, 0, :, 0],
                        u[0, 0, :, 1],
                        u[0, 1, :, 0],
                        u[0, 1, :, 1],
                        u[0],
                        u[1],
                        _flat(self.rt_buf, (bc, 2)),
                        u[0, :, :, 0],
                        _flat(self.const_buf, (2, bc)),
                        v[0, ..., 0],
                        v[1, ..., 0],
                        v[0, ..., 1],
                        v[1, ..., 1],
                        d,
                        d[:, 0],
                        d[:, 1],
                        d[0],
                        d[1],
                        v[0, 0, :, 0],
                        v[0, 1, :, 0],
                        v[0, 0, :, 1],
                        v[0, 1, :, 1],
                    )
                )
            else:
                u = _flat(self.u, (2, bc, 2))  # [A, B], interleaved
                v = _flat(self.v, (2, bc, 2))
                res.append(
                    common
                    + (
                        2 * bc,
                        u,
                        v,
                        a0,
                        a1,
                        b0,
                        b1,
                        u[0, :, 0],
                        u[0, :, 1],
                        u[1, :, 0],
                        u[1, :, 1],
                        u[:, :, 0],
                        v[0, :, 0],
                        v[1, :, 0],
                        v[0, :, 1],
                        v[1, :, 1],
                    )
                )
        return tuple(res)


#: Cost of one numpy call in uint64 words of elementwise work (~1 us at ~0.3 ns per word), for the
#: choice between the two codes of a level at ``bc`` > 1 instances.  Gathered steps (of ``step``
#: gates) pay a gather and a scatter, 6 words per gate-instance more, in ~17 calls per AND step and
#: 3 per XOR/INV step; the direct code (label rows used in place, :meth:`_Work._direct_ands`,
#: ``dlins``) pays ~18 calls per AND gate and 1 per XOR/INV gate, which wins on narrow levels of
#: large chunks (gini's carry chain: one AND and two XORs per level at 8192 instances).
DIRECT_CALL_WORDS = 3000


def _direct_and(k: int, bc: int, step: int) -> bool:
    """Whether the ``k`` ANDs of a level take the per-gate code (see DIRECT_CALL_WORDS)."""
    w = DIRECT_CALL_WORDS
    return k > 0 and k * 18 * w - -(-k // step) * 17 * w <= 6 * k * bc


def _direct_lin(n: int, bc: int, step: int) -> bool:
    """Whether the ``n`` XOR/INV gates of a level take one XOR call each on the label rows."""
    w = DIRECT_CALL_WORDS
    return n > 0 and n * w - -(-n // step) * 3 * w <= 6 * n * bc
