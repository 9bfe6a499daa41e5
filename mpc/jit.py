"""Compiled half-gates loops for one-instance chunks: the engine's latency path.

What it does
    At one instance, a numpy level costs its number of calls, not its bytes:
    AES-128 from Bristol Fashion is 264 levels (60 with AND gates) and the
    numpy program of :mod:`pairwise.mpc.garble` spends about 2,000 numpy
    calls per execution on gathers, XORs and scatters of a few hundred
    16-byte labels.  This module moves that bookkeeping into loops compiled
    by `numba <https://numba.pydata.org>`_ (LLVM; the well-kept JIT of the
    scientific Python stack, chosen over a hand-written C extension so the
    engine stays Python source with one toolchain).  Per *AND batch* (the
    AND gates of one level) the engine now makes four calls:

    1. ``garble_step`` / ``eval_step`` (in :mod:`pairwise.mpc._jit_kernels`,
       the module that imports numba): finish the previous batch
       (hash outputs -> tables and output labels), run every XOR and INV gate
       up to this batch, and gather this batch's hash inputs;
    2. OpenSSL AES-ECB over the batch's blocks: x = pi(x);
    3. ``tweak``: y = pi(x) xor tweak;
    4. OpenSSL AES-ECB: y = pi(y).

    The hash stays fixed-key AES through ``cryptography`` (OpenSSL, AES-NI,
    constant time); numba only does XOR, AND with masks and indexing.  The
    algebra, the tweaks, the label layout and the table bytes are exactly
    those of the numpy program (Zahur-Rosulek-Evans 2015, Fig. 2, with the
    TMMO hash of Guo-Katz-Wang-Yu 2020, H(x, i) = pi(pi(x) xor i) xor pi(x));
    ``tests/test_jit.py`` checks that both produce identical tables and
    labels.

    The program (:func:`program`) is one int64 array per circuit schedule:
    a header, the slot indices of every AND gate's inputs and output, of
    every XOR/INV gate's operands and output, and per AND batch its gate
    range, its XOR/INV range (the linear gates that run before its gathers)
    and its first AND index.  Passing one array keeps numba's per-call
    dispatch at about a microsecond.

Security model
    Same as :mod:`pairwise.mpc.garble` (semi-honest half-gates).  The
    compiled loops have no branch and no memory index that depends on a
    label or on a permute bit: a bit selects with an all-ones/all-zeros mask
    (``0 - bit``), so timing does not depend on secrets beyond what the
    numpy program already does.  Nothing is logged.  Compiled code is cached
    by numba on disk (``cache=True``: numba's own cache of the kernels'
    machine code, next to :mod:`pairwise.mpc._jit_kernels` or in the user's
    cache directory, keyed by source and CPU); it holds no data.

    If numba cannot be imported or fails to compile, or ``PAIRWISE_JIT=0``
    is set in the environment, or inside :func:`disabled`, :func:`ready` is
    False and the engine runs its numpy program (same tables).  The engine
    takes this path only when every chunk is one instance and no level is
    wider than ``pairwise.mpc.garble.JIT_MAX_WIDTH`` AND gates.  Importing this module does not import
    numba; :func:`warm_up` (or the first one-instance garbling) does.

Paper
    Zahur, Rosulek, Evans, "Two Halves Make a Whole", EUROCRYPT 2015, Fig. 2;
    Guo, Katz, Wang, Yu, "Efficient and Secure Multiparty Computation from
    Fixed-Key Block Ciphers", S&P 2020 (TMMO, Sec. 7).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import types
from typing import Iterator

import numpy as np

__all__ = ["ENABLED", "HEADER", "disabled", "kernels", "program", "ready", "warm_up"]

log = logging.getLogger(__name__)

#: Program header: n_and, n_lin, number of AND batches.
HEADER = 3

#: False when ``PAIRWISE_JIT=0``: the engine then runs its numpy program (tests switch it per call).
ENABLED = os.environ.get("PAIRWISE_JIT", "1") != "0"

_K: types.SimpleNamespace | bool | None = None  # the compiled kernels; False: numba failed; None: not tried
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
    global _K
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
            log.warning("compiled garbling loops unavailable (%s: %s); using the numpy program", type(exc).__name__, exc)
            _K = False
    return _K is not False


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
