"""Circuit layer of pairwise: IR, builder, arithmetic, kernels, Bristol Fashion I/O.

Modules, in dependency order:

- :mod:`pairwise.circuits.ir`: the immutable array :class:`Circuit`, its level schedule,
  statistics, plaintext batch evaluation and networkx export.
- :mod:`pairwise.circuits.bristol`: Bristol Fashion reader/writer, old Bristol reader.
- :mod:`pairwise.circuits.builder`: :class:`Builder` and fixed-width :class:`Int` with
  AND-minimal operators.
- :mod:`pairwise.circuits.kernels`: U-statistic kernels (gini, auc, kendall, variance,
  collision).
- :mod:`pairwise.circuits.catalog`: resolve ``kernel | aes128 | file`` to a circuit.

Security model: circuits are public; private inputs always name their party.
No cryptography here (the engine is in :mod:`mpc`).
"""

from .bristol import BristolFormatError, parse_bristol_fashion, read_bristol_fashion, write_bristol_fashion
from .builder import Builder, Int
from .catalog import resolve_circuit
from .ir import AND, EVALUATOR, GARBLER, INV, XOR, Circuit, CircuitError, CircuitStats, Party
from .kernels import KERNELS, build_kernel

__all__ = [
    "AND",
    "XOR",
    "INV",
    "Party",
    "GARBLER",
    "EVALUATOR",
    "Circuit",
    "CircuitError",
    "CircuitStats",
    "Builder",
    "Int",
    "KERNELS",
    "build_kernel",
    "resolve_circuit",
    "BristolFormatError",
    "read_bristol_fashion",
    "parse_bristol_fashion",
    "write_bristol_fashion",
]
