"""circuits.ir in fresh interpreters: the content hash does not depend on PYTHONHASHSEED."""

from __future__ import annotations

import os
import subprocess
import sys

from pairwise.circuits.kernels import gini


def test_content_hash_same_in_fresh_process():
    code = "from pairwise.circuits.kernels import gini; print(gini(16, True).content_hash)"
    hashes = set()
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=True
        )
        hashes.add(res.stdout.strip())
    assert hashes == {gini(16, True).content_hash}
