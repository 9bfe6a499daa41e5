"""Every script in examples/ runs as documented: two real processes, exit status 0, results checked.

The scripts check their own outputs (against Python ints, ``cryptography``'s AES
or the plaintext circuit) and exit non-zero on a mismatch; here each runs as a
user would start it, with a generous bound and no timing assertion.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
BOUND = 600  # seconds: a loaded 2-core machine, several processes per example

CASES = {
    "custom_circuit.py": ([], ["dot = -1073707660", "both parties agree"]),
    "tls.py": ([], ["garbler alice: |x - y| = 247", "peer 'bob'", "TLS: True"]),
    "many_executions.py": (
        ["--executions", "20"],
        ["all outputs equal cryptography's AES", "evaluator: 20 executions"],
    ),
    "benchmark.py": (["--executions", "20", "--simd", "8"], ["outputs checked against the plaintext circuit: True"]),
}


def test_every_example_is_tested():
    scripts = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py"))
    assert scripts == sorted(CASES), scripts


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(CASES))
def test_example_runs(script):
    args, expect = CASES[script]
    proc = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script), *args], cwd=ROOT, capture_output=True, text=True, timeout=BOUND
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for text in expect:
        assert text in proc.stdout, (text, proc.stdout)
