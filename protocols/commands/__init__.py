"""Deprecated alias of :mod:`pairwise.commands`, the ``pairwise`` command modules (moved in 0.2.x, issue 24).

``protocols/`` holds library code only; the command modules live in
:mod:`pairwise.commands`.  Importing this package warns
(:class:`DeprecationWarning`) and makes every old module path an alias of the
new module (the same module object): ``pairwise.protocols.commands.ecdf`` is
:mod:`pairwise.commands.ecdf`, and so on for each command module, except
``pairwise.protocols.commands.transport``, which is
:mod:`pairwise.protocols.transport` (the worker processes read those options
too).  It goes in the next release.

Security model: none of its own.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import pairwise.commands as _commands

from .._moved import warn_moved

warn_moved("pairwise.protocols.commands", "pairwise.commands")

#: old submodule name -> the module it now is
_MOVED = {info.name: f"pairwise.commands.{info.name}" for info in pkgutil.iter_modules(_commands.__path__)}
_MOVED["transport"] = "pairwise.protocols.transport"

for _name, _target in sorted(_MOVED.items()):
    _module = importlib.import_module(_target)
    sys.modules[f"{__name__}.{_name}"] = _module
    globals()[_name] = _module
del _name, _target, _module
