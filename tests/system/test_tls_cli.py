"""``pairwise certs create`` / ``list`` as subprocesses (``python -m pairwise``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CLI = [sys.executable, "-m", "pairwise"]


def test_cli_certs_create_and_list(tmp_path):
    d = tmp_path / "certs"
    r = subprocess.run(
        CLI + ["certs", "create", "--dir", str(d), "--name", "s0", "--role", "server", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["created_ca"] and out["role"] == "server" and os.path.exists(out["key"])
    again = subprocess.run(
        CLI + ["certs", "create", "--dir", str(d), "--name", "s0", "--role", "client"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 2 and "refusing to overwrite" in again.stderr
    ls = subprocess.run(CLI + ["certs", "list", "--dir", str(d), "--json"], capture_output=True, text=True, timeout=60)
    assert [c["name"] for c in json.loads(ls.stdout)] == ["s0"]
