"""Circuit sizes: AND/XOR/INV/depth/bytes for every kernel at 8, 16, 32, 64 bits, the kernels with their
default in-circuit noise, and the Bristol files.

Run: .venv/bin/python benchmarks/circuit_sizes.py [--markdown]
Sizes are exact counts (no timing); ``bytes`` is the half-gates garbled size, 32 per AND.
Kernel + noise rows: :func:`pairwise.circuits.noise.noisy_kernel` at eps = 1 with the default
mechanism (``auto``: k-ary randomized response for auc, kendall and collision, the signed
geometric or discrete Laplace otherwise; sensitivity = the kernel's full range, delta 2^-40).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pairwise.circuits.catalog import read_circuit_file
from pairwise.circuits.kernels import KERNELS, build_kernel
from pairwise.circuits.noise import noisy_kernel

BRISTOL = Path(__file__).resolve().parents[2] / "shared" / "circuits" / "bristol_fashion"
COLS = ("and", "xor", "inv", "depth", "and_depth", "bytes")


def rows():
    for name in KERNELS:
        for w in (8, 16, 32, 64):
            for signed in (False, True):
                st = build_kernel(name, w, signed).stats().as_dict()
                yield f"{name} ({'signed' if signed else 'unsigned'})", w, st
    for name in KERNELS:
        for w in (8, 16, 32):
            nc = noisy_kernel(name, w, epsilon=1, fixed_point_bits=16 if name == "variance" else None)
            yield f"{name} + {nc.mechanism}", w, nc.circuit.stats().as_dict()
    if BRISTOL.is_dir():
        for f in sorted(BRISTOL.glob("*.txt")):
            st = read_circuit_file(f).stats().as_dict()
            yield f.name, "-", st


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    data = list(rows())
    if args.markdown:
        print("| circuit | bits | " + " | ".join(COLS) + " |")
        print("|---|---|" + "---|" * len(COLS))
        for name, w, st in data:
            print(f"| {name} | {w} | " + " | ".join(str(st[k]) for k in COLS) + " |")
    else:
        print(f"{'circuit':<30} {'bits':>4} " + " ".join(f"{k:>9}" for k in COLS))
        for name, w, st in data:
            print(f"{name:<30} {w!s:>4} " + " ".join(f"{st[k]:>9}" for k in COLS))


if __name__ == "__main__":
    main()
