"""The compiled paths' loader and program, and the OpenSSL compiled path (CPUs without AES-NI).

What it does
    :func:`warm_up` / :func:`ready` load numba's kernels (importing numba
    only then: 0.4-0.9 s with numba's on-disk cache, ``cache=True``) and
    decide the path of this process (:func:`path`): ``aesni`` when the CPU
    has AES-NI (:func:`fused_ready`; the AES-NI path is
    :mod:`pairwise.mpc.garble.fused`, every chunk shape), else ``openssl``,
    else ``numpy``.  :func:`program` packs a schedule into one int64 array
    (cached per plan by :func:`_jit_program`); both compiled paths take it.
    :data:`ENABLED` is False with ``PAIRWISE_JIT=0`` (numpy program),
    :data:`AESNI` False with ``PAIRWISE_AESNI=0`` (the OpenSSL path, as on
    a CPU without AES-NI), :func:`disabled` turns both off for a block, and
    if numba is missing or fails one warning is logged and the engine stays
    on numpy.  ``pairwise.mpc.jit`` is this module (its former name).

    The OpenSSL path: when every chunk is one instance and no level has more
    than :data:`JIT_MAX_WIDTH` AND gates (:func:`_use_jit`), the garbler
    and the evaluator run each chunk through :func:`_jit_garble1` /
    :func:`_jit_eval1`: per AND level one compiled call (finish the previous
    level, run the XOR/INV gates, gather the hash inputs:
    :mod:`~pairwise.mpc.garble._jit_kernels`), one OpenSSL AES-ECB call, one
    compiled tweak call and a second AES-ECB call; :class:`_Jit1` is its
    pooled scratch.  Same algebra, tweaks, label layout and table bytes as
    the numpy program (``tests/mpc/test_jit.py``, ``tests/mpc/test_aesni.py``).

Security model
    As the numpy program: semi-honest half-gates, the TMMO hash (OpenSSL or
    AES-NI instructions, constant time).  The compiled loops have no branch
    and no memory index that depends on a label or a permute bit
    (selection by masks ``0 - bit``); indices come from the public
    schedule.  numba's cache holds machine code, no data; nothing is logged
    but the fallback warnings.

Follows
    Zahur-Rosulek-Evans 2015, Fig. 2; Guo-Katz-Wang-Yu 2020, Sec. 7 (TMMO);
    docs/garbling.md "Three paths, chosen at start-up".
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import types
from collections.abc import Callable, Iterator

import numpy as np

from ..aes import BlockBuffer, FixedKeyAES
from .format import _U64, _Reader
from .plan import _Plan
from .program import _keep_spare

__all__ = [
    "ENABLED",
    "AESNI",
    "HEADER",
    "disabled",
    "kernels",
    "fused_kernels",
    "fused_ready",
    "path",
    "program",
    "ready",
    "warm_up",
]

# (the logger keeps the module's former name, so existing logging configuration still applies)
log = logging.getLogger("pairwise.mpc.jit")

#: Program header: n_and, n_lin, number of AND batches.
HEADER = 3

#: False when ``PAIRWISE_JIT=0``: the engine then runs its numpy program (tests switch it per call).
ENABLED = os.environ.get("PAIRWISE_JIT", "1") != "0"

#: False when ``PAIRWISE_AESNI=0``: no AES-NI kernels; the compiled path is then the OpenSSL one (one-instance
#: chunks) and other chunks run the numpy program, as on a CPU without AES-NI (tests switch it per call).
AESNI = os.environ.get("PAIRWISE_AESNI", "1") != "0"

_K: types.SimpleNamespace | bool | None = None  # the compiled kernels; False: numba failed; None: not tried
_F: types.ModuleType | bool | None = None  # the AES-NI kernels; False: no AES-NI or they failed; None: not tried
_OFF: contextvars.ContextVar[bool] = contextvars.ContextVar("pairwise_jit_off", default=False)


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run the numpy program inside this block (this thread or task only; :data:`ENABLED` is untouched).

    For a run of a single execution (``pairwise 2pc``), where loading numba
    would cost more than it saves.
    """
    token = _OFF.set(True)
    try:
        yield
    finally:
        _OFF.reset(token)


def ready() -> bool:
    """True if the compiled loops can run (compiling or loading them from numba's cache on the first call)."""
    if not ENABLED or _OFF.get():
        return False
    if _K is None:
        warm_up()
    return _K is not False


def fused_ready() -> bool:
    """True if the AES-NI kernels (:mod:`pairwise.mpc.garble.fused`) can run: compiled loops enabled, the CPU
    has AES-NI, and :data:`AESNI` is on."""
    global _F
    if not (AESNI and ready()):
        return False
    if _F is None:
        _F = _load_fused()
    return _F is not False


def fused_kernels() -> types.ModuleType:
    """The AES-NI kernels (:mod:`._fused_kernels`); call :func:`fused_ready` first."""
    return _F  # type: ignore[return-value]


def path() -> str:
    """The path one-instance chunks take now: "aesni", "openssl" (compiled loops, AES by OpenSSL) or "numpy"."""
    return "aesni" if fused_ready() else "openssl" if ready() else "numpy"


def kernels() -> types.SimpleNamespace:
    """The compiled functions (``garble_step``, ``eval_step``, ``tweak``); call :func:`ready` first."""
    return _K  # type: ignore[return-value]


def warm_up() -> bool:
    """Compile the loops (or load them from numba's on-disk cache) and run each once on a tiny program.

    The first call in a process costs 0.4-0.9 s with numba's on-disk cache
    (importing numba is most of it) and a few seconds the first time on a
    machine (compilation).  A party that will run many one-instance
    executions calls it at start (``benchmarks/_twoparty_worker.py`` does),
    so no execution, and no waiting peer, pays it; otherwise the first such
    garbling or evaluation does.  Returns :func:`ready`.  If numba is missing
    or fails, logs one warning and leaves the engine on its numpy program.
    """
    global _K, _F
    if not ENABLED:
        return False
    if _K is None:
        try:
            k = _compile()
            # one call per argument type the engine passes (numba compiles per type): C-contiguous uint64
            # arrays; flat tables, writable (garbler, received frames) or read-only (bytes)
            lab = np.zeros((3, 2), np.uint64)
            prog = program([0], [1], [2], [0], [1], [2], [(0, 1, 0, 0, 0), (1, 1, 0, 1, 0)])
            x = np.zeros((4, 2), np.uint64)
            y = np.zeros((4, 2), np.uint64)
            tab = np.zeros(4, np.uint64)
            frozen = np.frombuffer(bytes(32), np.uint64)
            for tables in (tab, frozen):
                k.garble_step(lab, prog, 0, x, y, tab, 0, np.uint64(1), np.uint64(0))
                k.tweak(prog, 0, x, y, 4, np.uint64(0))
                k.garble_step(lab, prog, 1, x, y, tab, 0, np.uint64(1), np.uint64(0))
                k.eval_step(lab, prog, 0, x, y, tables, 0)
                k.eval_step(lab, prog, 1, x, y, tables, 0)
            _K = k
        except Exception as exc:  # noqa: BLE001 - any numba failure means: use the numpy program
            log.warning(
                "compiled garbling loops unavailable (%s: %s); using the numpy program", type(exc).__name__, exc
            )
            _K = False
    if _F is None and _K is not False and AESNI:
        _F = _load_fused()
    return _K is not False


def _load_fused() -> types.ModuleType | bool:
    """Import and check the AES-NI kernels: False (with one warning if they fail) when the CPU has no AES-NI."""
    try:
        from . import _aesni  # noqa: F401 - raises ImportError without AES-NI
    except ImportError:
        log.info("no AES-NI on this CPU: garbling hashes with OpenSSL's AES")
        return False
    try:
        from ..aes import FIXED_KEY, FIXED_ROUND_KEYS_X4, aes_ecb_reference
        from . import _fused_kernels as f

        # known answer against OpenSSL, then one call per argument type the engine passes
        x = np.arange(10, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        y = np.empty_like(x)
        f.aes_blocks(x, y, FIXED_ROUND_KEYS_X4)
        if y.tobytes() != aes_ecb_reference(FIXED_KEY, x.tobytes()):
            raise RuntimeError("AES-NI kernels disagree with OpenSSL's AES")
        prog = program([0], [1], [2], [0], [1], [2], [(0, 1, 0, 0, 0), (1, 1, 0, 1, 0)])
        lab = np.zeros(6, np.uint64)
        tab = np.zeros(4, np.uint64)
        d = np.ones(2, np.uint64)
        frozen = np.frombuffer(bytes(32), np.uint64)
        gkey, ekey = (d, np.uint64(0), FIXED_ROUND_KEYS_X4), (np.uint64(0), FIXED_ROUND_KEYS_X4)
        f.garble_batches(lab, prog, 0, 2, (1, 0, 1), gkey, tab, 0)
        f.garble_ands(lab, prog, 0, 0, 1, (1, 0, 1), gkey, tab, 0)
        f.linear(lab, prog, 0, 1, 1, 0, 1)
        for tables in (tab, frozen):
            f.eval_fit(lab, prog, 0, 2, 1, ekey, tables, 0, 4)
            f.eval_batches(lab, prog, 0, 2, (1, 0, 1), ekey, tables, 0)
            f.eval_ands(lab, prog, 0, 0, 1, (1, 0, 1), ekey, tables, 0)
        f.gather_out(lab, np.zeros(1, np.int64), 1, np.zeros(2, np.uint64), 1, 0, np.zeros(1, np.uint8))
        from . import fused  # noqa: F401 - (its import, too, before any timer)

        return f
    except Exception as exc:  # noqa: BLE001 - any failure: the OpenSSL path
        log.warning("AES-NI garbling kernels unavailable (%s: %s); hashing with OpenSSL", type(exc).__name__, exc)
        return False


def program(and_a, and_b, and_o, lin_a, lin_b, lin_o, batches) -> np.ndarray:
    """Pack a schedule into one int64 array.

    ``and_*`` / ``lin_*``: slot indices (AND gates in AND-index order, XOR
    and INV gates in schedule order); ``batches``: rows (a0, a1, l0, l1,
    base), one per AND batch plus a last row (a1, a1, l0, l1, 0) with the
    linear gates after the last batch.  Batch i runs linear gates
    [l0, l1) and then gathers AND gates [a0, a1), whose first AND index is
    ``base``.
    """
    parts = [np.asarray(p, dtype=np.int64).reshape(-1) for p in (and_a, and_b, and_o, lin_a, lin_b, lin_o)]
    bat = np.asarray(batches, dtype=np.int64).reshape(-1, 5)
    n_and, n_lin = parts[0].shape[0], parts[3].shape[0]
    if any(p.shape[0] != n_and for p in parts[:3]) or any(p.shape[0] != n_lin for p in parts[3:]):
        raise ValueError("AND and XOR/INV index arrays must have matching lengths")
    head = np.array([n_and, n_lin, bat.shape[0] - 1], dtype=np.int64)
    return np.ascontiguousarray(np.concatenate([head, *parts, bat.reshape(-1)]))


def _compile() -> types.SimpleNamespace:
    """Import the njit kernels (importing numba only now: importing this module costs nothing)."""
    from . import _jit_kernels as k

    return types.SimpleNamespace(garble_step=k.garble_step, eval_step=k.eval_step, tweak=k.tweak)


class _Jit1:
    """Scratch of one one-instance garbling/evaluation on the compiled path (this module).

    ``lab`` (n_slots, 2) holds the chunk's labels (slot s: low word, high
    word); ``x`` / ``y`` are the hash buffers of one AND batch with the
    slack OpenSSL needs; ``batches`` lists per AND batch its gate count and
    the four OpenSSL views of its hash blocks (``parts`` blocks per gate: 4
    for the garbler, 2 for the evaluator).  Pooled per plan and role like
    :class:`~pairwise.mpc.garble.program._Work`.
    """

    def __init__(self, plan: _Plan, parts: int) -> None:
        self.prog, sizes = _jit_program(plan)
        n = parts * max(sizes, default=0)  # <= parts * JIT_MAX_WIDTH blocks (see _use_jit)
        self.lab = np.empty((plan.n_slots, 2), _U64)
        self._xb, self._yb = BlockBuffer(n), BlockBuffer(n)
        self.x, self.y = self._xb.blocks, self._yb.blocks
        xmv, ymv = self._xb._mv, self._yb._mv
        self.batches = [
            (k, xmv[: 16 * parts * k], xmv[: 16 * parts * k + 15], ymv[: 16 * parts * k], ymv[: 16 * parts * k + 15])
            for k in sizes
        ]
        self.nbytes = self.lab.nbytes + 2 * (16 * n + 16)

    @classmethod
    def acquire(cls, plan: _Plan, role: str) -> _Jit1:
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
    return chunk == 1 and plan.max_and_width <= JIT_MAX_WIDTH and ready()


def _jit_program(plan: _Plan) -> tuple[np.ndarray, list[int]]:
    """The plan as one :func:`program` array (cached) and the AND count per batch.

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
        program(cat(and_a), cat(and_b), cat(and_o), cat(lin_a), cat(lin_b), cat(lin_o), batches),
        sizes,
    )
    return got


def _jit_garble1(
    plan: _Plan,
    lab_in: np.ndarray,
    delta: np.ndarray,
    instance: int,
    sink: tuple[np.ndarray | None, int, int],
    scratch: np.ndarray | None,
    aes: FixedKeyAES,
    finish: Callable[[np.ndarray], None],
    keep: bool = False,
) -> Iterator[np.ndarray]:
    """Garble one instance on the compiled path; yields table segments as :meth:`Garbler._run` does.

    ``lab_in`` (n_in, 2) zero labels of the input slots, ``delta`` (2,).
    ``sink`` = (dest, pos, every): tables go to ``dest`` (flat uint64) from word ``pos`` on, yielded as the
    views written since the previous yield once they reach ``every`` bytes
    (and at the end); without ``dest`` each level's (2, 2, k) tables are
    yielded, in ``scratch`` (reused) or in fresh arrays.  At the end
    ``finish`` gets the zero labels (n_slots, 2) of every slot, before the
    scratch is reused.  ``keep``: as for :meth:`_Work.release`.
    """
    dest, pos, every = sink
    w = _Jit1.acquire(plan, "garbler")
    prog, lab, x, y = w.prog, w.lab, w.x, w.y
    lab[: lab_in.shape[0]] = lab_in
    lab[plan.one_slot] = delta
    d0, d1 = _U64(delta[0]), _U64(delta[1])
    inst = _U64(instance)
    enc = aes._enc
    kern = kernels()
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


def _jit_eval1(
    plan: _Plan,
    lab_in: np.ndarray,
    instance: int,
    reader: _Reader,
    aes: FixedKeyAES,
    finish: Callable[[np.ndarray], None],
    keep: bool = False,
) -> None:
    """Evaluate one instance on the compiled path; ``finish`` gets the active labels (n_slots, 2) of every slot."""
    w = _Jit1.acquire(plan, "evaluator")
    prog, lab, x, y = w.prog, w.lab, w.x, w.y
    lab[: lab_in.shape[0]] = lab_in
    lab[plan.one_slot] = 0
    inst = _U64(instance)
    enc = aes._enc
    kern = kernels()
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
