"""Resolve a circuit name given on the command line or in a protocol to a :class:`Circuit`.

A spec is one of: a kernel name (:data:`pairwise.circuits.kernels.KERNELS`), ``aes128``
(the Bristol Fashion AES-128 circuit shipped in ``circuits/data``), or a path to
a Bristol Fashion file (``.gz`` allowed).  Bristol files give input group 1 to
the garbler and the others to the evaluator.

Security model: none (circuits are public).
"""

from __future__ import annotations

import gzip
import os
from functools import lru_cache
from importlib import resources

from .bristol import parse_bristol_fashion
from .ir import Circuit, CircuitError
from .kernels import KERNELS, build_kernel

__all__ = ["resolve_circuit", "read_circuit_file", "BUILTIN_FILES"]

BUILTIN_FILES = {"aes128": "aes_128.txt.gz"}


def read_circuit_file(path: str | os.PathLike) -> Circuit:
    """Read a Bristol Fashion file, plain or gzip-compressed."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CircuitError(
            f"no such circuit file: {path!r} (give a kernel name {sorted(KERNELS)}, 'aes128', or a Bristol Fashion file)"
        )
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="ascii") as fh:
            text = fh.read()
    except (UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise CircuitError(f"{path}: not a Bristol Fashion text file ({exc})") from None
    name = os.path.basename(path).split(".")[0]
    return parse_bristol_fashion(text, name=name, source=path)


@lru_cache(maxsize=8)
def _builtin(name: str) -> Circuit:
    ref = resources.files("pairwise.circuits").joinpath("data", BUILTIN_FILES[name])
    with resources.as_file(ref) as p:
        return read_circuit_file(p)


def resolve_circuit(spec: str, bits: int = 32, signed: bool = False) -> Circuit:
    """Kernel name, built-in file name, or Bristol Fashion path -> Circuit."""
    if spec in KERNELS:
        return build_kernel(spec, bits, signed)
    if spec in BUILTIN_FILES:
        return _builtin(spec)
    return read_circuit_file(spec)
