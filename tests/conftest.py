"""Shared pytest fixtures for the pairwise test suite.

The Bristol Fashion tests read the standard circuit files from
``../shared/circuits/bristol_fashion`` (beside the repository).  Locally a
missing directory skips those tests, and the run ends with a line saying how
many were skipped; in CI (the ``CI`` environment variable is set, as
``.ci/run`` does) a missing directory fails them with a message instead, so
a CI run can never pass without having run them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

BRISTOL_DIR = Path(__file__).resolve().parents[2] / "shared" / "circuits" / "bristol_fashion"
_MISSING = (f"Bristol Fashion circuit files not found at {BRISTOL_DIR} "
            "(expected in ../shared/circuits/bristol_fashion beside the repository)")
_skipped_bristol: list[str] = []


@pytest.fixture(scope="session")
def bristol_dir() -> Path:
    """The standard Bristol Fashion circuit files (../shared/circuits/bristol_fashion)."""
    if not BRISTOL_DIR.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{_MISSING}; CI is set, so these tests must run: check out ../shared next to the "
                        "repository", pytrace=False)
        pytest.skip(_MISSING)
    return BRISTOL_DIR


#: parameter used in place of the file names when the directory is missing (its tests then fail or skip)
MISSING_FILES = "bristol-files-missing"


def bristol_names(sub: str = "") -> list[str]:
    """``*.txt`` names in BRISTOL_DIR / sub for parametrizing, or [MISSING_FILES] when the directory is absent.

    A test parametrized with these must also request the ``bristol_dir``
    fixture, which skips (locally) or fails (in CI) on the missing directory,
    instead of silently collecting no test at all.
    """
    d = BRISTOL_DIR / sub
    return sorted(p.name for p in d.glob("*.txt")) if d.is_dir() else [MISSING_FILES]


def pytest_runtest_logreport(report):
    if report.skipped and "Bristol Fashion circuit files not found" in str(report.longrepr):
        _skipped_bristol.append(report.nodeid)


def pytest_terminal_summary(terminalreporter):
    if _skipped_bristol:
        terminalreporter.write_line(
            f"WARNING: {len(_skipped_bristol)} Bristol Fashion tests were SKIPPED: {_MISSING}", red=True, bold=True)
