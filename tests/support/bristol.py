"""Where the standard Bristol Fashion circuit files are (``../shared/circuits/bristol_fashion``), and their names.

The ``bristol_dir`` fixture (tests/conftest.py) skips the tests that need the
files when the directory is missing locally, and fails them in CI.
"""

from __future__ import annotations

from pathlib import Path

BRISTOL_DIR = Path(__file__).resolve().parents[3] / "shared" / "circuits" / "bristol_fashion"
MISSING_MESSAGE = (
    f"Bristol Fashion circuit files not found at {BRISTOL_DIR} "
    "(expected in ../shared/circuits/bristol_fashion beside the repository)"
)

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
