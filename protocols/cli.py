"""Deprecated alias of :mod:`pairwise.cli`, the ``pairwise`` command line (moved in 0.2.x, issue 24).

``protocols/`` holds library code only; the command line lives in
:mod:`pairwise.cli` and :mod:`pairwise.commands`.  Importing this module warns
(:class:`DeprecationWarning`) and re-exports the names of :mod:`pairwise.cli`
(``main``, ``build_parser``, ...), which are the same objects;
``python -m pairwise.protocols.cli`` still runs the command line.  It goes
in the next release.

Security model: none of its own.
"""

from __future__ import annotations

import sys
from typing import Any

from pairwise import cli as _cli
from pairwise.cli import COMMAND_MODULES, NUMERIC_FLAGS, build_parser, main, package_version

from ._moved import warn_moved

__all__ = ["COMMAND_MODULES", "NUMERIC_FLAGS", "build_parser", "main", "package_version"]

warn_moved("pairwise.protocols.cli", "pairwise.cli")


def __getattr__(name: str) -> Any:
    """Every other name of :mod:`pairwise.cli` (its private helpers included) resolves too."""
    return getattr(_cli, name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
