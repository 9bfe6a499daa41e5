"""Installs one fault of ``tests/mutation/faults.py`` at interpreter start-up (mutation check only).

``tests/mutation/run.py`` puts this directory first on PYTHONPATH and names
the fault in PAIRWISE_FAULT, so every Python process of the test run -- the
pytest process and the servers, workers and commands it starts -- imports
this module before anything else and patches the same target.  Outside the
mutation check PAIRWISE_FAULT is unset and this file is never on the path.

The target ``module:attr`` (or ``module:Class.attr``) is resolved, wrapped,
and replaced in its module; with scope "everywhere" also in every loaded
``pairwise`` module that imported the same object by name (``from x import
f``), so callers bound before the patch see it too.  A missing target is
reported as BROKEN in PAIRWISE_FAULT_LOG and aborts the process.
"""

import importlib
import importlib.util
import os
import sys
from pathlib import Path


def _install() -> None:
    name = os.environ.get("PAIRWISE_FAULT")
    if not name:
        return
    spec = importlib.util.spec_from_file_location("_pairwise_faults", Path(__file__).resolve().parents[1] / "faults.py")
    faults = importlib.util.module_from_spec(spec)
    sys.modules["_pairwise_faults"] = faults
    spec.loader.exec_module(faults)
    fault = faults.BY_NAME.get(name)
    if fault is None:
        faults.log(f"BROKEN unknown fault {name!r}")
        sys.stderr.write(f"mutation check: unknown fault {name!r}\n")
        os._exit(97)
    mod_name, _, attr_path = fault.target.partition(":")
    try:
        module = importlib.import_module(mod_name)
        owner, parts = module, attr_path.split(".")
        for p in parts[:-1]:
            owner = getattr(owner, p)
        orig = getattr(owner, parts[-1])
    except (ImportError, AttributeError) as exc:
        faults.log(f"BROKEN patch target missing: {fault.target} ({exc})")
        sys.stderr.write(f"mutation check: patch target missing: {fault.target} ({exc})\n")
        os._exit(97)
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


_install()
