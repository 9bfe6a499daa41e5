"""The AES-NI path in fresh interpreters (each AES width, a width the CPU lacks) and bench garble's command line.

The kernels compiled for 128-bit AES-NI, 256-bit and 512-bit VAES (as far as this CPU goes) must give the
same tables and labels; a width is chosen at import (PAIRWISE_AES_WIDTH), so each runs in its own process.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pairwise.mpc import jit

pytestmark = pytest.mark.skipif(not jit.fused_ready(), reason="no AES-NI (or numba) on this machine")


_DIGEST = """
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


def test_every_aes_width_gives_the_same_tables():
    """The kernels compiled for 128-bit AES-NI, 256-bit and 512-bit VAES (as far as this CPU goes) agree."""
    from pairwise.mpc.garble import _aesni

    digests = {}
    for width in (128, 256, 512):
        if width > _aesni.aes_width():
            continue
        env = dict(os.environ, PAIRWISE_AES_WIDTH=str(width))
        res = subprocess.run([sys.executable, "-c", _DIGEST], env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr
        got_width, digest = res.stdout.split()
        assert int(got_width) == width
        digests[width] = digest
    assert len(set(digests.values())) == 1, digests


def test_a_width_the_cpu_lacks_is_refused():
    from pairwise.mpc.garble import _aesni

    env = dict(os.environ, PAIRWISE_AES_WIDTH="1024")
    res = subprocess.run([sys.executable, "-c", "from pairwise.mpc.garble import _aesni"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "PAIRWISE_AES_WIDTH" in res.stderr
    assert _aesni.WIDTH in (128, 256, 512)


def test_bench_garble_prints_per_machine_and_per_core_rates(capsys):
    from pairwise.cli import main

    assert main(["bench", "garble", "--circuit", "gini", "--bits", "8", "--batch", "64", "--repeat", "2",
                 "--threads", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "per machine" in out and "per core" in out and "1 thread(s)" in out
