"""The AES-NI path in fresh interpreters (each AES width, a width the CPU lacks) and bench garble's command line.

The AES rounds compiled for 128-bit AES-NI, 256- and 512-bit VAES (as far as this CPU goes) must equal
cryptography's AES; a width is chosen at import (PAIRWISE_AES_WIDTH), so each runs in its own process.
Whole circuits' tables at every width: benchmarks/aes_widths.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pairwise.mpc import jit

pytestmark = pytest.mark.skipif(not jit.fused_ready(), reason="no AES-NI (or numba) on this machine")


_ROUNDS = """
import os, numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from pairwise.mpc.aes import FIXED_ROUND_KEYS_X4, random_blocks, round_keys_x4, tccr_hash
from pairwise.mpc.garble import _aesni, _fused_kernels as K
for m in (1, 3, 4, 5, 64):
    key, x = os.urandom(16), random_blocks(m)
    out = np.empty_like(x)
    K.aes_blocks(x.reshape(-1), out.reshape(-1), round_keys_x4(key))
    assert out.tobytes() == Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(x.tobytes()), m
x, t = random_blocks(37), random_blocks(37)
out = np.empty_like(x)
K.tmmo_blocks(x.reshape(-1), t.reshape(-1), out.reshape(-1), FIXED_ROUND_KEYS_X4)
assert np.array_equal(out, tccr_hash(x, t))
print(_aesni.WIDTH)
"""


def test_every_aes_width_matches_cryptography():
    """The AES rounds and the TMMO hash compiled for each AES width this CPU has (128-bit AES-NI, 256- and
    512-bit VAES) against cryptography's AES and mpc.aes.tccr_hash.

    The width only changes how the rounds are emitted (``_aesni.q_aes``); every kernel takes its AES from
    there, so checking the rounds per width checks the kernels' AES.  Compiling every kernel at a width
    other than the CPU's own (no on-disk cache) takes minutes of CPU under load: the tables of whole
    circuits at every width are compared by ``benchmarks/aes_widths.py``."""
    from pairwise.mpc.garble import _aesni

    for width in (w for w in (128, 256, 512) if w <= _aesni.aes_width()):
        env = dict(os.environ, PAIRWISE_AES_WIDTH=str(width))
        res = subprocess.run([sys.executable, "-c", _ROUNDS], env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr
        assert int(res.stdout.split()[-1]) == width


def test_a_width_the_cpu_lacks_is_refused():
    from pairwise.mpc.garble import _aesni

    env = dict(os.environ, PAIRWISE_AES_WIDTH="1024")
    res = subprocess.run(
        [sys.executable, "-c", "from pairwise.mpc.garble import _aesni"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode != 0 and "PAIRWISE_AES_WIDTH" in res.stderr
    assert _aesni.WIDTH in (128, 256, 512)


def test_bench_garble_prints_per_machine_and_per_core_rates(capsys):
    from pairwise.cli import main

    assert (
        main(
            [
                "bench",
                "garble",
                "--circuit",
                "gini",
                "--bits",
                "8",
                "--batch",
                "64",
                "--repeat",
                "2",
                "--threads",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "per machine" in out and "per core" in out and "1 thread(s)" in out
