"""The dp layer in a fresh interpreter: importing it loads nothing above it (issue 24)."""

from __future__ import annotations

import subprocess
import sys


def test_dp_imports_nothing_above_it():
    """A fresh interpreter that imports the whole dp layer loads no circuits, mpc, fss or protocols module."""
    code = (
        "import sys, pairwise.dp, pairwise.dp.dyadic, pairwise.dp.exact, pairwise.dp.samplers; "
        "print(sorted(m for m in sys.modules if m.startswith(('pairwise.circuits', 'pairwise.mpc', "
        "'pairwise.fss', 'pairwise.protocols'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
