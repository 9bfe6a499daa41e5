"""Shared pytest fixtures for the pairwise test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

BRISTOL_DIR = Path(__file__).resolve().parents[2] / "shared" / "circuits" / "bristol_fashion"


@pytest.fixture(scope="session")
def bristol_dir() -> Path:
    """The standard Bristol Fashion circuit files (../shared/circuits/bristol_fashion)."""
    if not BRISTOL_DIR.is_dir():
        pytest.skip(f"Bristol Fashion circuit files not found at {BRISTOL_DIR} (expected beside the repository)")
    return BRISTOL_DIR
