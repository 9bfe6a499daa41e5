"""Deprecation warnings for names that moved out of :mod:`pairwise.protocols` (one release of grace).

The command line moved to :mod:`pairwise.cli` and :mod:`pairwise.commands`
(``protocols/`` is library code only); the old module paths still import,
through the shims :mod:`pairwise.protocols.cli` and
:mod:`pairwise.protocols.commands`, and warn with :func:`warn_moved`.

Security model: none of its own.
"""

from __future__ import annotations

import warnings

__all__ = ["warn_moved"]


def warn_moved(old: str, new: str) -> None:
    """A :class:`DeprecationWarning` that ``old`` moved to ``new``, attributed to the line that imported ``old``.

    Called from a shim's module body; :func:`warnings.warn` skips the frames of
    ``importlib`` between the shim and the importing line, so the warning names
    the user's code (and Python's default filters show it when that is ``__main__``).
    """
    warnings.warn(
        f"{old} moved to {new}; the old name will be removed in the next release", DeprecationWarning, stacklevel=3
    )
