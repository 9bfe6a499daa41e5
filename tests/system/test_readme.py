"""The README's commands work when pasted in order on a fresh clone (issue 14).

Every fenced ``bash`` block of README.md runs as one bash script (``set -euo
pipefail``), in README order, in a scratch directory laid out like a fresh
clone: symlinks to the repository's folders (so ``protocols/data/...`` paths
resolve) and ``.venv`` pointing at the environment running the tests.  Files
the commands write (``kendall.dot``, ``ecdf.png``) land in the scratch
directory.  What is adapted, and why:

* the set-up and test commands of the quick start (``python3 -m venv``,
  ``pip install``, ``pytest``) are dropped from their ``&&`` chains: CI runs
  exactly those (``.ci/run``), and running the suite from inside the suite
  would recurse; the chain's ``pairwise`` command still runs;
* the fixed example ports (9000, 7000, 7001) become free ports, so the test
  can run beside other tests; the background-and-``kill`` blocks run as
  written (two-party 2PC, two ECDF servers and a querier);
* the commands the README marks as taking a while get shorter parameters
  (:data:`SHORTER`).

Every fenced ``python`` block runs too, each as its own script in the same
kind of scratch directory (:func:`test_every_readme_python_block_runs`);
blocks that need something the README cannot give them (certificates, a peer
on another machine, a variable of the surrounding prose) are fenced
```` ```python fragment ```` and only compiled.

Benchmark scripts are in plain (not ``bash``) blocks: they take minutes and
write results files, so they are not run here.  The test only bounds each
block's run (a hang fails it); it does not time anything.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BOUND = 900.0  # seconds per block; the longest block takes well under a minute on an idle machine

#: Long runs the README labels (``~20 s``) and the shorter parameters the test gives them.
SHORTER = {
    "--count 100000 --garbled": "--count 4000 --garbled",
}

#: ``&&`` segments that set up or test the environment (CI runs them), dropped from their chains.
SETUP = re.compile(r"^(python3 -m venv|\.venv/bin/pip |\.venv/bin/python -m pytest)")


def bash_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, body) of every fenced ``bash`` block, in order."""
    blocks, body, start = [], None, 0
    for i, line in enumerate(text.splitlines(), 1):
        if body is None and line.strip() == "```bash":
            body, start = [], i
        elif body is not None and line.strip() == "```":
            blocks.append((start, "\n".join(body)))
            body = None
        elif body is not None:
            body.append(line)
    assert body is None, f"README.md: unterminated ```bash block at line {start}"
    return blocks


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(line number, body, runnable) of every fenced ``python`` block; ``python fragment`` ones are not runnable."""
    blocks, body, start, info = [], None, 0, ""
    for i, line in enumerate(text.splitlines(), 1):
        if body is None and line.strip().split(" ")[0] == "```python":
            body, start, info = [], i, line.strip()
        elif body is not None and line.strip() == "```":
            blocks.append((start, "\n".join(body), info == "```python"))
            body = None
        elif body is not None:
            body.append(line)
    assert body is None, f"README.md: unterminated ```python block at line {start}"
    return blocks


def adapt(block: str, ports: dict[str, str]) -> str:
    lines = []
    for line in block.splitlines():
        if "&&" in line:
            kept = [seg.strip() for seg in line.split("&&") if not SETUP.match(seg.strip())]
            if not kept:
                continue
            line = " && ".join(kept)
        elif SETUP.match(line.strip()):
            continue
        for long, short in SHORTER.items():
            line = line.replace(long, short)
        lines.append(line)
    script = "\n".join(lines)
    found = set(re.findall(r"127\.0\.0\.1:(\d{4,5})\b", script)) | set(re.findall(r"--port (\d{4,5})\b", script))
    for port in sorted(found):
        ports.setdefault(port, str(_free_port()))
        script = re.sub(rf"127\.0\.0\.1:{port}\b", f"127.0.0.1:{ports[port]}", script)
        script = re.sub(rf"--port {port}\b", f"--port {ports[port]}", script)
    return script


def run_block(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """Run one block in its own process group; whatever it leaves behind (a failed block's background
    servers) is killed, so a failure is reported instead of holding the pipes open until the bound."""
    p = subprocess.Popen(["bash", "-c", "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script],
                         cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        err += f"\n[test_readme: killed after {BOUND} s]"
        return subprocess.CompletedProcess(p.args, -9, out, err)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_readme_has_the_command_sections():
    blocks = bash_blocks(README.read_text())
    text = "\n".join(b for _, b in blocks)
    for needed in ("pairwise ustat", "pairwise demo 2pc", "pairwise 2pc garbler", "pairwise circuit table",
                   "pairwise noise sample", "pairwise ecdf run", "pairwise ecdf demo", "pairwise ldp auc",
                   "pairwise bench garble"):
        assert needed in text, needed
    assert len(blocks) >= 8


@pytest.mark.slow  # every README command, one block at a time
def test_every_readme_bash_block_runs_in_order(tmp_path):
    for entry in ROOT.iterdir():
        if not entry.name.startswith(".") and entry.name != "README.md":
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    assert (tmp_path / ".venv" / "bin" / "pairwise").exists(), "the test environment has no pairwise script"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    ports: dict[str, str] = {}
    for line, block in bash_blocks(README.read_text()):
        script = adapt(block, ports)
        if not script.strip():
            continue
        r = run_block(script, tmp_path, env)
        where = f"README.md line {line}:\n{script}\n--- stdout:\n{r.stdout[-3000:]}\n--- stderr:\n{r.stderr[-3000:]}"
        assert r.returncode == 0, where
        assert "Traceback" not in r.stderr and "error:" not in r.stderr, where
        assert "warning:" not in r.stderr, where  # the README uses no deprecated spelling
    assert (tmp_path / "kendall.dot").is_file() and (tmp_path / "ecdf.png").is_file()


def _scratch_clone(tmp_path: Path) -> None:
    for entry in ROOT.iterdir():
        if not entry.name.startswith(".") and entry.name != "README.md":
            (tmp_path / entry.name).symlink_to(entry)


def test_readme_python_fragments_compile():
    blocks = python_blocks(README.read_text())
    assert sum(run for _, _, run in blocks) >= 8  # most blocks are whole scripts
    for line, body, _ in blocks:
        compile(body, f"README.md line {line}", "exec")  # a SyntaxError names the block


@pytest.mark.slow  # every runnable README Python block, each as its own script
def test_every_readme_python_block_runs(tmp_path):
    _scratch_clone(tmp_path)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for line, body, runnable in python_blocks(README.read_text()):
        if not runnable:
            continue
        script = tmp_path / f"readme_{line}.py"
        script.write_text(body + "\n")
        r = run_block(f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}", tmp_path, env)
        assert r.returncode == 0, f"README.md line {line}:\n{body}\n--- stdout:\n{r.stdout[-3000:]}\n--- stderr:\n{r.stderr[-3000:]}"
