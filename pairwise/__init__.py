"""pairwise: secure two-party and multi-server computation of private statistics.

What it does
    The top-level package is a small, typed API over the framework's layers;
    everything else lives in the subpackages, which the repository keeps as
    top-level folders and ``pyproject.toml`` maps under this package with
    setuptools ``package-dir``:

    - :mod:`pairwise.dp`: mechanisms, exact samplers, accounting, tree mechanism;
    - :mod:`pairwise.circuits`: circuit IR, builder, kernels, noise gadgets, Bristol I/O;
    - :mod:`pairwise.mpc`: fixed-key AES, the garbling engine, channels, OT, Yao sessions;
    - :mod:`pairwise.fss`: DPF and DCF keys with batched evaluation;
    - :mod:`pairwise.protocols`: the papers' protocols;
    - :mod:`pairwise.cli`, :mod:`pairwise.commands`: the ``pairwise`` command line,
      the one layer above the protocols (kept in this folder).

    The API (names are imported lazily, so ``import pairwise`` stays cheap):

    - :func:`ustat`: the main job, a differentially private U-statistic by
      the 2PC subsampling protocol ([BBGK20, Sec. 5]);
    - :func:`load_circuit`: a kernel name, ``"aes128"`` or a Bristol Fashion file;
    - :func:`garble_and_evaluate`: garble, evaluate and decode in one process
      (a correctness tool: both roles run here);
    - :class:`GarblerSession`, :class:`EvaluatorSession`: semi-honest Yao over any
      :class:`Channel` (one base-OT setup, many executions);
    - :class:`Channel`, :class:`MemoryChannel`, :class:`TCPChannel`;
    - FSS batches: :func:`dcf_gen_batch`, :func:`dpf_gen_batch`,
      :class:`DCFKeyBatch`, :class:`DPFKeyBatch`, :func:`reconstruct`;
    - :class:`PairwiseError`: the base of every exception the package defines
      (each also keeps its stdlib base: ``ValueError``, ``OSError``, ...).

Security model
    Per module (semi-honest parties; secrets from the OS CSPRNG; see each
    subpackage's docstring).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__: str = version("pairwise-mpc")
except PackageNotFoundError:  # pragma: no cover - running from a tree that was never installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from pairwise.circuits.catalog import resolve_circuit as load_circuit
    from pairwise.circuits.ir import Circuit
    from pairwise.circuits.kernel_spec import KernelSpec
    from pairwise.dp.errors import PairwiseError
    from pairwise.fss import DCFKeyBatch, DPFKeyBatch, dcf_gen_batch, dpf_gen_batch, reconstruct
    from pairwise.mpc.channel import Channel, MemoryChannel, TCPChannel
    from pairwise.mpc.garble import garble_and_evaluate
    from pairwise.mpc.twopc import EvaluatorSession, ExecutionResult, GarblerSession
    from pairwise.protocols.ustat import UStatResult

__all__ = [
    "__version__",
    "ustat",
    "load_circuit",
    "garble_and_evaluate",
    "GarblerSession",
    "EvaluatorSession",
    "ExecutionResult",
    "Channel",
    "MemoryChannel",
    "TCPChannel",
    "Circuit",
    "UStatResult",
    "dcf_gen_batch",
    "dpf_gen_batch",
    "DCFKeyBatch",
    "DPFKeyBatch",
    "reconstruct",
    "PairwiseError",
]

#: public name -> (module, attribute), imported on first use (PEP 562)
_LAZY: dict[str, tuple[str, str]] = {
    "load_circuit": ("pairwise.circuits.catalog", "resolve_circuit"),
    "Circuit": ("pairwise.circuits.ir", "Circuit"),
    "garble_and_evaluate": ("pairwise.mpc.garble", "garble_and_evaluate"),
    "GarblerSession": ("pairwise.mpc.twopc", "GarblerSession"),
    "EvaluatorSession": ("pairwise.mpc.twopc", "EvaluatorSession"),
    "ExecutionResult": ("pairwise.mpc.twopc", "ExecutionResult"),
    "Channel": ("pairwise.mpc.channel", "Channel"),
    "MemoryChannel": ("pairwise.mpc.channel", "MemoryChannel"),
    "TCPChannel": ("pairwise.mpc.channel", "TCPChannel"),
    "UStatResult": ("pairwise.protocols.ustat", "UStatResult"),
    "dcf_gen_batch": ("pairwise.fss", "dcf_gen_batch"),
    "dpf_gen_batch": ("pairwise.fss", "dpf_gen_batch"),
    "DCFKeyBatch": ("pairwise.fss", "DCFKeyBatch"),
    "DPFKeyBatch": ("pairwise.fss", "DPFKeyBatch"),
    "reconstruct": ("pairwise.fss", "reconstruct"),
    "PairwiseError": ("pairwise.dp.errors", "PairwiseError"),
}


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'pairwise' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def ustat(
    statistic: str | KernelSpec | None = None,
    x: np.ndarray | list[float] | None = None,
    y: np.ndarray | list[float] | None = None,
    labels: np.ndarray | list[int] | None = None,
    *,
    epsilon: float,
    kernel: KernelSpec | None = None,
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> UStatResult:
    """A differentially private U-statistic by the 2PC subsampling protocol, with its (1 - alpha) interval.

    ``statistic`` is ``"gini"`` (one column ``x``), ``"kendall"`` (columns
    ``x`` and ``y``), ``"auc"`` (scores ``x`` and 0/1 ``labels``),
    ``"variance"`` or ``"collision"`` (one column); or give ``kernel=``, any
    degree-2 kernel declared with
    :func:`pairwise.circuits.kernel_spec.kernel` (one column ``x``). Every
    sampled pair of users computes its kernel plus noise in a real garbled
    circuit; ``options`` are those of
    :func:`pairwise.protocols.ustat.run_ustat` (public bounds, pairs per
    user or ``"auto"``, ``alpha``, mode, design, ...). Returns the result
    object (``release.estimate``, ``release.interval``, the guarantee,
    costs; ``as_dict()`` gives the CLI's JSON keys).
    """
    from pairwise.protocols.ustat import run_ustat

    if x is None:
        raise TypeError("ustat() needs the data x")
    if kernel is not None:
        options["kernel"] = kernel
    return run_ustat(statistic, x, y, labels, epsilon=epsilon, progress=progress, **options)
