"""docs/collect.md ("Running a study with real users") works when pasted in order on a fresh clone.

Its fenced ``bash`` blocks run as one bash script (``set -euo pipefail``)
in a scratch directory laid out like a fresh clone (symlinks to the
repository's folders and ``.venv`` to the environment running the tests), so
the aggregator (and the shuffler) started in the background by one block
serve the blocks after it until the last block stops them.  The example
ports (9100, 9200) become free ports; nothing else is changed.  Its ``python fragment`` blocks are
compiled (they need a running aggregator and certificates).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "collect.md"


def blocks(text: str, kind: str) -> list[tuple[int, str]]:
    out, body, start = [], None, 0
    for i, line in enumerate(text.splitlines(), 1):
        if body is None and line.strip().split(" ")[0] == f"```{kind}":
            body, start = [], i
        elif body is not None and line.strip() == "```":
            out.append((start, "\n".join(body)))
            body = None
        elif body is not None:
            body.append(line)
    assert body is None, f"docs/collect.md: unterminated block at line {start}"
    return out


def test_the_python_blocks_compile():
    found = blocks(DOC.read_text(), "python")
    assert found
    for line, body in found:
        compile(body, f"docs/collect.md line {line}", "exec")


@pytest.mark.slow
def test_the_walkthrough_runs_in_order(tmp_path):
    text = DOC.read_text()
    script = "\n".join(b for _, b in blocks(text, "bash"))
    for needed in (
        "pairwise certs create",
        "pairwise collect serve",
        "pairwise collect task create",
        "pairwise collect join",
        "pairwise collect result",
    ):
        assert needed in script, needed
    for example in sorted(set(re.findall(r"127\.0\.0\.1:(9\d{3})\b", script))):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        script = re.sub(rf"127\.0\.0\.1:{example}\b", f"127.0.0.1:{port}", script)
    for entry in ROOT.iterdir():
        if not entry.name.startswith("."):
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    p = subprocess.Popen(
        ["bash", "-c", "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    where = f"--- stdout:\n{out[-4000:]}\n--- stderr:\n{err[-4000:]}"
    assert p.returncode == 0, where
    assert "Traceback" not in err and "warning:" not in err, where
    assert "pairs      1 planned" in out and "refusing task 'greedy'" in err, where
    assert "submitted to the shuffler" in out + err, where
    assert (tmp_path / "aggregator-state" / "collect-aggregator.db").is_file()
