"""The AES-NI kernels compiled for every AES width this CPU has give the same tables (and how long they compile).

A width (128-bit AES-NI, 256- or 512-bit VAES) is chosen at import (``PAIRWISE_AES_WIDTH``), so each runs
in its own interpreter; a width other than the CPU's own compiles every kernel without numba's on-disk
cache (a minute or more of CPU), which is why this lives here and not in the test suite (the suite checks
the AES rounds per width: tests/system/test_aesni_processes.py).  Garbles and evaluates the kendall
kernel with noise at batch 1 and 6 with fixed Delta and labels, hashes tables, output labels and
evaluated labels, and exits 1 if any width differs.

    .venv/bin/python benchmarks/aes_widths.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

DIGEST = """
import hashlib, numpy as np
from pairwise.mpc import jit
from pairwise.mpc.garble import Garbler, Evaluator
from pairwise.circuits.kernels import build_kernel
assert jit.path() == "aesni", jit.path()
c = build_kernel("kendall", 8, True)
h = hashlib.sha256()
for batch in (1, 6):
    rng = np.random.default_rng(batch)
    d = rng.integers(0, 2**64, (batch, 2), dtype=np.uint64); d[:, 0] |= np.uint64(1)
    z = rng.integers(0, 2**64, (c.n_inputs, batch, 2), dtype=np.uint64)
    g = Garbler(c, batch, delta=d, input_zero=z)
    gc = g.garble()
    h.update(bytes(gc.tables)); h.update(g.output_zero.tobytes())
    h.update(Evaluator(c, batch).evaluate(g.input_zero, gc).tobytes())
from pairwise.mpc.garble import _aesni
print(_aesni.WIDTH, h.hexdigest())
"""


def main() -> int:
    from pairwise.mpc.garble import _aesni

    digests = {}
    for width in (w for w in (128, 256, 512) if w <= _aesni.aes_width()):
        env = dict(os.environ, PAIRWISE_AES_WIDTH=str(width))
        t = time.perf_counter()
        res = subprocess.run([sys.executable, "-c", DIGEST], env=env, capture_output=True, text=True, timeout=3600)
        if res.returncode:
            print(res.stderr, file=sys.stderr)
            return 1
        got, digest = res.stdout.split()
        digests[int(got)] = digest
        print(f"width {got}: {digest} ({time.perf_counter() - t:.1f} s incl. compiling)", flush=True)
    same = len(set(digests.values())) == 1
    print("same tables at every width" if same else "WIDTHS DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
