"""mpc.jit in fresh interpreters (when numba is imported, PAIRWISE_JIT) and under an in-process ``pairwise 2pc``."""

from __future__ import annotations

import os
import subprocess
import sys

from pairwise.mpc import jit


def test_tail_chunk_of_one_does_not_import_numba():
    """Without AES-NI (PAIRWISE_AESNI=0: there every chunk shape runs compiled), a one-instance tail chunk
    of a larger batch stays on the numpy program with the rest: it never waits for numba to load."""
    code = (
        "import sys, numpy as np\n"
        "from pairwise.mpc import garble\n"
        "from pairwise.circuits.kernels import build_kernel\n"
        "c = build_kernel('gini', 16)\n"
        "b = garble.default_chunk(c, 10**6) + 1\n"
        "garble.garble_and_evaluate(c, [np.ones((b, g.width), bool) for g in c.inputs])\n"
        "print('numba' in sys.modules)\n"
    )
    env = dict(os.environ, PAIRWISE_AESNI="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"]


def test_cli_2pc_leaves_the_compiled_path_on():
    """An in-process `pairwise 2pc` (here one that fails to connect) must not switch the engine off for the process."""
    from pairwise.cli import main

    assert jit.ENABLED
    try:
        main(
            [
                "2pc",
                "evaluator",
                "--connect",
                "127.0.0.1:9",
                "--circuit",
                "gini",
                "--input",
                "1",
                "--connect-timeout",
                "0.3",
                "--timeout",
                "1",
            ]
        )
    except SystemExit:
        pass
    assert jit.ENABLED and jit.ready()


def test_disabled_by_environment_and_numba_not_imported_by_the_engine():
    code = (
        "import sys, numpy as np\n"
        "from pairwise.mpc import garble, jit\n"
        "from pairwise.circuits.kernels import build_kernel\n"
        "assert 'numba' not in sys.modules, 'importing the engine imported numba'\n"
        "c = build_kernel('gini', 16)\n"
        "bits = [np.ones((1, g.width), bool) for g in c.inputs]\n"
        "got = garble.garble_and_evaluate(c, bits)\n"
        "assert all(np.array_equal(a, b) for a, b in zip(got, c.evaluate_bits(bits)))\n"
        "print(jit.ready(), 'numba' in sys.modules)\n"
    )
    env = dict(os.environ, PAIRWISE_JIT="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
    env["PAIRWISE_JIT"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
