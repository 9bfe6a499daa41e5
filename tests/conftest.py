"""Shared pytest fixtures and hooks for the pairwise test suite (helpers live in ``tests/support``).

Tiers: the folders mirror the layers (``mpc``, ``circuits``, ``fss``, ``dp``,
``protocols/...``); every test under ``tests/system`` (processes, the command
line, real TCP between processes, README blocks, the package) is marked
``system`` and every test under ``tests/statistical`` (noise-power and
goodness-of-fit checks against exact pmfs) is marked ``statistical``, here, by
path.  ``python -m pytest -m "not system and not statistical"`` is the quick
tier; plain ``python -m pytest`` runs everything.

The Bristol Fashion tests read the standard circuit files from
``../shared/circuits/bristol_fashion`` (beside the repository).  Locally a
missing directory skips those tests, and the run ends with a line saying how
many were skipped; in CI (the ``CI`` environment variable is set, as
``.ci/run`` does) a missing directory fails them with a message instead, so
a CI run can never pass without having run them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bristol import BRISTOL_DIR, MISSING_MESSAGE

_HERE = Path(__file__).resolve().parent
#: first folder under tests/ -> the marker every test in it gets
TIER_MARKERS = {"system": "system", "statistical": "statistical"}
_skipped_bristol: list[str] = []


def pytest_collection_modifyitems(config, items):
    for item in items:
        try:
            top = Path(str(item.path)).resolve().relative_to(_HERE).parts[0]
        except ValueError:
            continue
        marker = TIER_MARKERS.get(top)
        if marker:
            item.add_marker(getattr(pytest.mark, marker))


#: compile (or load) each set of numba kernels into numba's on-disk cache, one process per set
_WARM_UP = (
    "from pairwise.mpc.garble import jit; jit.warm_up(); from pairwise.mpc import iknp; iknp._compiled_transpose()",
    "from pairwise.fss import vdpf; vdpf.compiled_kernels()",
)


def _warm_numba_cache() -> None:
    """Fill numba's on-disk cache before any test starts a process, both kernel sets at once.

    On a fresh checkout (as in CI) the first use of the compiled garbling path
    compiles it: about 30 s of CPU (the OT transpose 6 s more), and the servers' VDPF check loops about 23 s.
    Left to the tests, two server processes would compile them at once, on 2
    cores, inside a querier's 60 s timeout.  Compiled here, in two processes side
    by side, every later process loads them from the cache (0.5-1.5 s).
    ``PAIRWISE_TEST_WARMUP=0`` skips it (the mutation check sets it: the suite
    before it has filled the cache).
    """
    if os.environ.get("PAIRWISE_TEST_WARMUP") == "0":
        return
    procs = [subprocess.Popen([sys.executable, "-c", code]) for code in _WARM_UP]
    for proc, code in zip(procs, _WARM_UP):
        try:
            rc = proc.wait(timeout=900)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "timeout"
        if rc != 0:  # the tests that need the kernels will fail with the real error
            print(f"conftest: warming numba's cache failed ({rc}): {code}", file=sys.stderr)


def _xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session):
    """Under pytest-xdist: the controller warms the cache once, before the workers start tests."""
    config = session.config
    if _xdist_worker(config) or not getattr(config.option, "numprocesses", None):
        return
    if "not system" in (config.option.markexpr or ""):
        return
    _warm_numba_cache()


def pytest_collection_finish(session):
    """Without xdist: warm the cache when the session has system tests (see :func:`_warm_numba_cache`)."""
    config = session.config
    if _xdist_worker(config) or getattr(config.option, "numprocesses", None):
        return
    if any(item.get_closest_marker("system") for item in session.items):
        _warm_numba_cache()


@pytest.fixture(scope="session")
def bristol_dir() -> Path:
    """The standard Bristol Fashion circuit files (../shared/circuits/bristol_fashion)."""
    if not BRISTOL_DIR.is_dir():
        if os.environ.get("CI"):
            pytest.fail(
                f"{MISSING_MESSAGE}; CI is set, so these tests must run: check out ../shared next to the repository",
                pytrace=False,
            )
        pytest.skip(MISSING_MESSAGE)
    return BRISTOL_DIR


def pytest_runtest_logreport(report):
    if report.skipped and "Bristol Fashion circuit files not found" in str(report.longrepr):
        _skipped_bristol.append(report.nodeid)


def pytest_terminal_summary(terminalreporter):
    if _skipped_bristol:
        terminalreporter.write_line(
            f"WARNING: {len(_skipped_bristol)} Bristol Fashion tests were SKIPPED: {MISSING_MESSAGE}",
            red=True,
            bold=True,
        )
