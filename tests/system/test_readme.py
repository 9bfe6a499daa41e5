"""The commands of README.md and of every page of docs/ work when pasted in order on a fresh clone (issues 14, 24).

Every fenced ``bash`` block of a page runs as one bash script (``set -euo
pipefail``), in page order, in a scratch directory laid out like a fresh
clone: symlinks to the repository's folders (so ``protocols/data/...`` paths
resolve) and ``.venv`` pointing at the environment running the tests.  Each
page (README.md, then ``docs/**/*.md``) gets its own scratch directory, so a
page's blocks may build on each other but never on another page's.  Files the
commands write (``kendall.dot``, ``ecdf.png``) land in the scratch directory.
What is adapted, and why:

* the set-up and test commands of the quick start (``python3 -m venv``,
  ``pip install``, ``pytest``) are dropped from their ``&&`` chains: CI runs
  exactly those (``.ci/run``), and running the suite from inside the suite
  would recurse; the chain's ``pairwise`` command still runs;
* the fixed example ports (9000, 7000, 7001) become free ports, so the test
  can run beside other tests; the background-and-``kill`` blocks run as
  written (two-party 2PC, two ECDF servers and a querier);
* the commands a page marks as taking a while get shorter parameters
  (:data:`SHORTER`);
* docs/collect.md is one terminal session over several blocks (a background
  aggregator serves the blocks after it): its own test,
  ``tests/system/test_docs_collect.py``, runs them as one script, so this one
  only compiles its Python (:data:`SESSION_PAGES`);
* a block of a docs page that is the same, character for character, as a
  block of README.md (the quick start on the site's home page, the main job's
  commands) is run once, with the README.

Every fenced ``python`` block runs too, each as its own script in the same
kind of scratch directory (:func:`test_every_python_block_runs`); blocks that
need something a page cannot give them (certificates, a peer on another
machine, a variable of the surrounding prose) are fenced
```` ```{.python .fragment} ```` (README.md may also say ```` ```python fragment ````)
and only compiled.

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
#: Every page whose blocks are tested: the README first, then the manual.
PAGES = [README] + sorted((ROOT / "docs").rglob("*.md"))
BOUND = 900.0  # seconds per block; the longest block takes well under a minute on an idle machine

#: Long runs a page labels (``~20 s``) and the shorter parameters the test gives them.
SHORTER = {
    "--count 100000 --garbled": "--count 4000 --garbled",
}

#: ``&&`` segments that set up or test the environment (CI runs them), dropped from their chains.
SETUP = re.compile(r"^(python3 -m venv|\.venv/bin/pip |\.venv/bin/python -m pytest)")

#: Files a page's commands write, checked after its blocks ran.
WRITES = {
    "docs/circuits.md": ("kendall.dot",),
    "docs/ecdf.md": ("ecdf.png",),
}

#: Pages whose bash blocks form one session that another test runs as one script.
SESSION_PAGES = {"docs/collect.md": "tests/system/test_docs_collect.py"}

#: Openings of a fenced Python block: run, or only compiled.
PYTHON_RUN = "```python"
PYTHON_FRAGMENT = ("```{.python .fragment}", "```python fragment")


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def bash_blocks(text: str, name: str = "README.md") -> list[tuple[int, str]]:
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
    assert body is None, f"{name}: unterminated ```bash block at line {start}"
    return blocks


def python_blocks(text: str, name: str = "README.md") -> list[tuple[int, str, bool]]:
    """(line number, body, runnable) of every fenced Python block; fragments are not runnable."""
    blocks, body, start, runnable = [], None, 0, False
    for i, line in enumerate(text.splitlines(), 1):
        info = line.strip()
        if body is None and (info == PYTHON_RUN or info in PYTHON_FRAGMENT):
            body, start, runnable = [], i, info == PYTHON_RUN
        elif body is None and info.startswith("```python"):
            raise AssertionError(
                f"{name} line {i}: a Python block opens with {PYTHON_RUN!r} or one of {PYTHON_FRAGMENT}"
            )
        elif body is not None and info == "```":
            blocks.append((start, "\n".join(body), runnable))
            body = None
        elif body is not None:
            body.append(line)
    assert body is None, f"{name}: unterminated ```python block at line {start}"
    return blocks


def _readme_bodies() -> set[str]:
    text = README.read_text()
    return {b for _, b in bash_blocks(text)} | {b for _, b, _ in python_blocks(text)}


def page_bash_blocks(page: Path) -> list[tuple[int, str]]:
    """The bash blocks this page's test runs: a docs block the README has too runs with the README."""
    blocks = bash_blocks(page.read_text(), _name(page))
    if page == README:
        return blocks
    seen = _readme_bodies()
    return [(line, b) for line, b in blocks if b not in seen]


def page_python_blocks(page: Path) -> list[tuple[int, str, bool]]:
    blocks = python_blocks(page.read_text(), _name(page))
    if page == README:
        return blocks
    seen = _readme_bodies()
    return [(line, b, run) for line, b, run in blocks if b not in seen]


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
    p = subprocess.Popen(
        ["bash", "-c", "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
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


def _scratch_clone(tmp_path: Path) -> None:
    for entry in ROOT.iterdir():
        if not entry.name.startswith(".") and entry.name != "README.md":
            (tmp_path / entry.name).symlink_to(entry)


def test_the_pages_have_the_command_sections():
    text = "\n".join(b for page in PAGES for _, b in bash_blocks(page.read_text(), _name(page)))
    for needed in (
        "pairwise ustat",
        "pairwise demo 2pc",
        "pairwise 2pc garbler",
        "pairwise circuit table",
        "pairwise noise sample",
        "pairwise ecdf run",
        "pairwise ecdf demo",
        "pairwise ldp auc",
        "pairwise bench garble",
    ):
        assert needed in text, needed
    assert len(bash_blocks(README.read_text())) >= 3  # the quick start's two commands and the main job


def test_the_main_jobs_first_example_is_one_release_with_its_interval_and_p_is_explained():
    """Issue 25: the main job's first example prints one DP release and its interval (no exact value, no
    baseline), and the README explains when P > 1 pays, with the Figure 4 numbers."""
    section = README.read_text().split("## The main job", 1)[1].split("\n## ", 1)[0]
    first = bash_blocks(section)[0][1]
    assert "pairwise ustat" in first and "--compare" not in first, first
    shown = section.split("```text", 1)[1].split("```", 1)[0]
    assert re.search(r"95% interval +\[", shown), shown
    assert "\n  exact " not in shown and "baseline" not in shown and "(not private)" not in shown, shown
    assert "interval method" in shown, shown
    for needed in ("--pairs-per-user auto", "Figure 4", "Theorem 5", "0.0014", "0.0095"):
        assert needed in section, needed


PAGES_WITH_BASH = [p for p in PAGES if page_bash_blocks(p) and _name(p) not in SESSION_PAGES]
PAGES_WITH_PYTHON = [p for p in PAGES if any(run for _, _, run in page_python_blocks(p))]


@pytest.mark.slow  # every command of one page, one block at a time
@pytest.mark.parametrize("page", PAGES_WITH_BASH, ids=_name)
def test_every_bash_block_runs_in_order(page, tmp_path):
    _scratch_clone(tmp_path)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    assert (tmp_path / ".venv" / "bin" / "pairwise").exists(), "the test environment has no pairwise script"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    ports: dict[str, str] = {}
    for line, block in page_bash_blocks(page):
        script = adapt(block, ports)
        if not script.strip():
            continue
        r = run_block(script, tmp_path, env)
        where = (
            f"{_name(page)} line {line}:\n{script}\n--- stdout:\n{r.stdout[-3000:]}\n--- stderr:\n{r.stderr[-3000:]}"
        )
        assert r.returncode == 0, where
        assert "Traceback" not in r.stderr and "error:" not in r.stderr, where
        assert "warning:" not in r.stderr, where  # the pages use no deprecated spelling
    for written in WRITES.get(_name(page), ()):
        assert (tmp_path / written).is_file(), f"{_name(page)}: no {written}"


def test_every_python_block_compiles():
    blocks = [(page, *b) for page in PAGES for b in python_blocks(page.read_text(), _name(page))]
    assert sum(run for *_, run in blocks) >= 8  # most blocks are whole scripts
    for page, line, body, _ in blocks:
        compile(body, f"{_name(page)} line {line}", "exec")  # a SyntaxError names the block


@pytest.mark.slow  # every runnable Python block of one page, each as its own script
@pytest.mark.parametrize("page", PAGES_WITH_PYTHON, ids=_name)
def test_every_python_block_runs(page, tmp_path):
    _scratch_clone(tmp_path)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for line, body, runnable in page_python_blocks(page):
        if not runnable:
            continue
        script = tmp_path / f"block_{line}.py"
        script.write_text(body + "\n")
        r = run_block(f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}", tmp_path, env)
        assert r.returncode == 0, (
            f"{_name(page)} line {line}:\n{body}\n--- stdout:\n{r.stdout[-3000:]}\n--- stderr:\n{r.stderr[-3000:]}"
        )


def test_docs_pages_are_all_in_the_site_nav():
    """Every page of docs/ is reachable from mkdocs.yml's nav (a page outside it is easy to miss)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in PAGES[1:]:
        rel = page.relative_to(ROOT / "docs").as_posix()
        assert rel in nav, f"docs/{rel} is not in the nav of mkdocs.yml"


def test_install_hints_work_from_a_checkout():
    """An error's install hint names an extra that exists, spelled for a source checkout: the
    distribution is not on the package index, so ``pip install 'pairwise-mpc[...]'`` would fail."""
    import tomllib

    from pairwise.commands.ecdf.demo import PLOT_HINT
    from pairwise.protocols.cluster import INSTALL_HINT

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for hint, extra in ((INSTALL_HINT, "cluster"), (PLOT_HINT, "plot")):
        assert f"pip install -e '.[{extra}]'" in hint and extra in extras, hint
    for layer in ("pairwise", "protocols", "mpc", "circuits", "fss", "dp", "benchmarks"):
        for path in (ROOT / layer).rglob("*.py"):
            assert "pip install 'pairwise-mpc[" not in path.read_text(), path
