"""A circuit of your own, run between two processes with the ``pairwise 2pc`` command line.

The circuit: the dot product of two private vectors of eight 16-bit signed
integers, x (the garbler's) and y (the evaluator's), built with
:class:`pairwise.circuits.builder.Builder`.  Both parties name it the same way,
``--circuit examples/custom_circuit.py:dot_product``; the inputs go per named
group as integers (``--input x=...`` fills the groups x0 .. x7), and each party
prints the output group ``dot``, decoded as a signed integer.

Run it:

    python examples/custom_circuit.py

It starts the garbler and the evaluator as two ``pairwise 2pc`` processes on
loopback (plaintext is allowed on loopback only; add ``--tls DIR --name NAME``
on both sides for anything else, see examples/tls.py), prints both results and
checks them against the dot product in Python integers.  By hand, in two
terminals:

    pairwise 2pc garbler   --listen 127.0.0.1:9000  --circuit examples/custom_circuit.py:dot_product --input x=-3,5,7,-8,100,-200,300,32767
    pairwise 2pc evaluator --connect 127.0.0.1:9000 --circuit examples/custom_circuit.py:dot_product --input y=1,2,3,4,5,6,7,-32768

Security model: semi-honest Yao; each party learns the dot product and nothing
else about the other's vector.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from pairwise.circuits.builder import Builder
from pairwise.circuits.ir import EVALUATOR, GARBLER, Circuit

N, BITS = 8, 16


def dot_product() -> Circuit:
    """sum x_i * y_i over 8 pairs of 16-bit signed integers, exact in 35 signed bits."""
    b = Builder("dot8x16")
    xs = [b.input(f"x{i}", BITS, GARBLER, signed=True) for i in range(N)]
    ys = [b.input(f"y{i}", BITS, EVALUATOR, signed=True) for i in range(N)]
    width = 2 * BITS + 3  # |x y| < 2^30 and 8 terms: 33 bits of magnitude, plus the sign
    acc = None
    for x, y in zip(xs, ys):
        term = x.extend(width) * y.extend(width)
        acc = term if acc is None else acc + term
    b.output("dot", acc)
    return b.build()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    x = [-3, 5, 7, -8, 100, -200, 300, 32767]
    y = [1, 2, 3, 4, 5, 6, 7, -32768]
    spec = f"{os.path.abspath(__file__)}:dot_product"
    port = _free_port()
    cli = [sys.executable, "-m", "pairwise", "2pc"]
    common = ["--circuit", spec, "--json", "--timeout", "60", "--connect-timeout", "60"]
    garbler = subprocess.Popen(
        cli + ["garbler", "--listen", f"127.0.0.1:{port}", "--input", "x=" + ",".join(map(str, x))] + common,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    evaluator = subprocess.Popen(
        cli + ["evaluator", "--connect", f"127.0.0.1:{port}", "--input", "y=" + ",".join(map(str, y))] + common,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = {}
    for role, proc in (("garbler", garbler), ("evaluator", evaluator)):
        try:
            out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            garbler.kill()
            evaluator.kill()
            raise SystemExit(f"{role} did not finish") from None
        if proc.returncode:
            raise SystemExit(f"{role} failed: {err.strip()}")
        results[role] = json.loads(out.strip().splitlines()[-1])
    want = sum(a * b for a, b in zip(x, y))
    for role, r in results.items():
        print(
            f"{role:<9} dot = {r['named_outputs']['dot']}  ({r['and_gates']} AND gates, "
            f"{r['bytes_sent']} bytes sent, {r['seconds'] * 1e3:.0f} ms)"
        )
        assert r["named_outputs"]["dot"] == want, (role, r["named_outputs"], want)
    print(f"plaintext dot = {want}: both parties agree with it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
