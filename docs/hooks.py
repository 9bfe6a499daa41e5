"""MkDocs hooks: let mkdocstrings find the layers of the installed package ``pairwise``.

The repository keeps one folder per layer at its root (``mpc/``, ``circuits/``,
...), which the build maps to ``pairwise.mpc``, ``pairwise.circuits``, ...
(``[tool.setuptools.package-dir]`` in ``pyproject.toml``).  griffe, which
reads the sources for mkdocstrings, looks for ``pairwise/mpc/`` and does not
follow that mapping.  So before the build this hook lays out the package as
it is installed, in a temporary directory (a copy of ``pairwise/`` and links
to the layers; nothing in the checkout changes), and points the Python handler at it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("mpc", "circuits", "fss", "dp", "protocols")
_staged: list[Path] = []


def _stage() -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="pairwise-docs-"))
    pkg = tmp / "pairwise"
    # A copy of the top level (griffe resolves links, so a linked __init__.py would lead it
    # back to the checkout), with links to the layers.
    shutil.copytree(ROOT / "pairwise", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for layer in LAYERS:
        (pkg / layer).symlink_to(ROOT / layer)
    _staged.append(tmp)
    return tmp


@event_priority(100)  # before mkdocstrings' own on_config, which creates the handler
def on_config(config):
    handler = config.plugins["mkdocstrings"].config.handlers.setdefault("python", {})
    handler["paths"] = [str(_stage())]
    return config


def on_shutdown():
    while _staged:
        shutil.rmtree(_staged.pop(), ignore_errors=True)
