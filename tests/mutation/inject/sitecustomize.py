"""Installs one fault of ``tests/mutation/faults.py`` in this interpreter (mutation check only).

``tests/mutation/run.py`` puts this directory first on PYTHONPATH and names
the fault in PAIRWISE_FAULT, so every Python process of the test run -- the
pytest process and the servers, workers and commands it starts -- imports
this module at start-up.  Outside the mutation check PAIRWISE_FAULT is unset
and this file is never on the path.

The fault's target ``module:attr`` (or ``module:Class.attr``) is patched the
moment its module has been executed (an import hook wraps that module's
loader), before any other module can bind the original by ``from module
import attr``; if the module is already loaded it is patched at once.  With
scope "everywhere", loaded ``pairwise`` modules that hold the original under
any name are updated as well.  A target that does not exist is reported as
BROKEN in PAIRWISE_FAULT_LOG and ends the process (exit 97), so a refactor
that renames it cannot make the check pass silently.
"""

import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path

_EXIT_BROKEN = 97


def _load_table():
    spec = importlib.util.spec_from_file_location("_pairwise_faults", Path(__file__).resolve().parents[1] / "faults.py")
    faults = importlib.util.module_from_spec(spec)
    sys.modules["_pairwise_faults"] = faults
    spec.loader.exec_module(faults)
    return faults


def _apply(faults, fault, module) -> None:
    attr_path = fault.target.partition(":")[2]
    try:
        owner, parts = module, attr_path.split(".")
        for p in parts[:-1]:
            owner = getattr(owner, p)
        orig = getattr(owner, parts[-1])
    except AttributeError as exc:
        faults.log(f"BROKEN patch target missing: {fault.target} ({exc})")
        sys.stderr.write(f"mutation check: patch target missing: {fault.target} ({exc})\n")
        os._exit(_EXIT_BROKEN)
    raw = owner.__dict__.get(parts[-1], orig) if isinstance(owner, type) else orig
    new = fault.wrap(raw)
    if isinstance(raw, (staticmethod, classmethod)):
        new = type(raw)(new)
    setattr(owner, parts[-1], new)
    if fault.scope == "everywhere" and owner is module:
        for m in list(sys.modules.values()):
            if m is None or m is module or not getattr(m, "__name__", "").startswith("pairwise"):
                continue
            for k, v in list(vars(m).items()):
                if v is orig:
                    setattr(m, k, new)
    faults.log(f"APPLIED {fault.name} {fault.target}")


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds the target module with the other finders and patches it right after it executes."""

    def __init__(self, faults, fault, name: str) -> None:
        self.faults, self.fault, self.name = faults, fault, name

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            self.faults.log(f"BROKEN patch target missing: no module {fullname!r}")
            sys.stderr.write(f"mutation check: patch target missing: no module {fullname!r}\n")
            os._exit(_EXIT_BROKEN)
        run = spec.loader.exec_module

        def exec_module(module, _run=run):
            _run(module)
            _apply(self.faults, self.fault, module)

        spec.loader.exec_module = exec_module
        return spec


def _install() -> None:
    name = os.environ.get("PAIRWISE_FAULT")
    if not name:
        return
    faults = _load_table()
    fault = faults.BY_NAME.get(name)
    if fault is None:
        faults.log(f"BROKEN unknown fault {name!r}")
        sys.stderr.write(f"mutation check: unknown fault {name!r}\n")
        os._exit(_EXIT_BROKEN)
    mod_name = fault.target.partition(":")[0]
    if mod_name in sys.modules:
        _apply(faults, fault, sys.modules[mod_name])
    else:
        sys.meta_path.insert(0, _PatchOnImport(faults, fault, mod_name))


_install()
