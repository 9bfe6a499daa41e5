"""The installed package: one top-level namespace, the small API at ``pairwise``, ``python -m pairwise``.

The wheel itself (only ``pairwise`` at top level, installed next to PyPI's
``circuits``) is checked by ``.ci/wheel_check`` in CI.
"""

from __future__ import annotations

import functools
import inspect
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pairwise


def test_version_comes_from_the_package_metadata():
    assert pairwise.__version__ == version("pairwise-mpc")


@pytest.mark.parametrize("name", [n for n in pairwise.__all__ if n != "__version__"])
def test_every_api_name_resolves(name):
    assert getattr(pairwise, name) is not None
    assert name in dir(pairwise)


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pairwise.nope  # noqa: B018


def test_api_objects_are_the_subpackages_objects():
    from pairwise.circuits.catalog import resolve_circuit
    from pairwise.fss import dcf_gen_batch
    from pairwise.mpc.twopc import GarblerSession

    assert pairwise.load_circuit is resolve_circuit
    assert pairwise.GarblerSession is GarblerSession
    assert pairwise.dcf_gen_batch is dcf_gen_batch


def test_garble_and_evaluate_through_the_api_matches_plaintext():
    c = pairwise.load_circuit("gini", 8)
    rng = np.random.default_rng(1)
    xs, ys = rng.integers(0, 256, 50), rng.integers(0, 256, 50)
    bits = [((xs[:, None] >> np.arange(8)) & 1).astype(bool), ((ys[:, None] >> np.arange(8)) & 1).astype(bool)]
    (out,) = pairwise.garble_and_evaluate(c, bits)
    got = (out.astype(np.int64) << np.arange(out.shape[1])).sum(1)
    assert got.tolist() == [abs(int(a) - int(b)) for a, b in zip(xs, ys)]


def test_fss_batch_through_the_api_reconstructs_the_count():
    alphas = np.array([3, 9, 200, 17], dtype=np.uint64)
    k0, k1 = pairwise.dcf_gen_batch(alphas, 1, n=8, l=16, comparison="ge")
    t = 17  # #{alpha <= 17} = 3
    count = pairwise.reconstruct(k0.eval_sum(t), k1.eval_sum(t), 16)
    assert int(count) == 3


def test_python_dash_m_pairwise_is_the_cli():
    out = subprocess.run(
        [sys.executable, "-m", "pairwise", "circuit", "stats", "gini", "--bits", "8", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["and"] == 15  # |x - y| on 8 bits: 2w - 1 AND gates


def test_py_typed_marker_ships_with_the_package():
    assert (Path(pairwise.__file__).parent / "py.typed").is_file()


def _api_callables() -> list[tuple[str, Any, bool]]:
    """(qualified name, function, is a constructor) for the API: every exported function, every
    exported class's constructor, and the public methods (and property getters) of those classes."""
    found: list[tuple[str, Any, bool]] = []
    for name in pairwise.__all__:
        obj = getattr(pairwise, name)
        if inspect.isclass(obj):
            if obj.__init__ is not object.__init__:
                found.append((f"{name}.__init__", obj.__init__, True))
            for attr in sorted(dir(obj)):
                if attr.startswith("_"):
                    continue
                raw = inspect.getattr_static(obj, attr)
                if isinstance(raw, property):
                    found.append((f"{name}.{attr}", raw.fget, False))
                elif isinstance(raw, functools.cached_property):
                    found.append((f"{name}.{attr}", raw.func, False))
                elif isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw):
                    found.append((f"{name}.{attr}", getattr(obj, attr), False))
        elif inspect.isfunction(obj):
            found.append((name, obj, False))
    return found


_API = _api_callables()


def test_the_api_walk_covers_the_audited_entry_points():
    names = {n for n, _, _ in _API}
    for expected in (
        "ustat",
        "load_circuit",
        "garble_and_evaluate",
        "reconstruct",
        "dcf_gen_batch",
        "dpf_gen_batch",
        "GarblerSession.__init__",
        "GarblerSession.run",
        "EvaluatorSession.run",
        "Channel.send",
        "TCPChannel.connect",
        "TCPChannel.listen",
        "Circuit.evaluate",
        "DCFKeyBatch.eval_sum",
    ):
        assert expected in names


@pytest.mark.parametrize(("name", "func", "constructor"), _API, ids=[n for n, _, _ in _API])
def test_every_api_parameter_and_return_is_annotated(name, func, constructor):
    """The API ships py.typed: keep every parameter (but self/cls/*args/**kwargs) and return annotated."""
    sig = inspect.signature(func)
    missing = [
        p.name
        for p in sig.parameters.values()
        if p.name not in ("self", "cls")
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and p.annotation is inspect.Parameter.empty
    ]
    assert not missing, f"{name}: parameters without a type hint: {missing}"
    if not constructor:
        assert sig.return_annotation is not inspect.Signature.empty, f"{name}: no return type hint"


#: The library's folders (the repository keeps one per layer) and their installed package names.
_LIBRARY = {
    "dp": "pairwise.dp",
    "circuits": "pairwise.circuits",
    "mpc": "pairwise.mpc",
    "fss": "pairwise.fss",
    "protocols": "pairwise.protocols",
}
#: The command line (``pairwise/cli.py``, ``pairwise/commands/``) and its deprecated old paths.
_CLI = ("pairwise.cli", "pairwise.commands", "pairwise.protocols.cli", "pairwise.protocols.commands")
#: The deprecated aliases of the old paths, which alone may import the command line (for one release).
_SHIMS = ("protocols/cli.py", "protocols/commands/__init__.py")


def _imports(path: Path, module: str) -> list[tuple[str, int, str | None]]:
    """(imported module, line, enclosing function) of every import statement in ``path`` (module ``module``)."""
    import ast

    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[str, int, str | None]] = []

    def visit(node: ast.AST, func: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, func) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:  # relative: resolve against this module's package
                    base = module.split(".")[: len(module.split(".")) - child.level + (path.name == "__init__.py")]
                    stem = ".".join(base + ([child.module] if child.module else []))
                else:
                    stem = child.module or ""
                found.extend((f"{stem}.{a.name}", child.lineno, func) for a in child.names)
            visit(child, func)

    visit(tree, None)
    return found


def test_the_library_never_imports_the_command_line():
    """Layers point downward: ``protocols/`` and everything below it is library code, and the command line
    (``pairwise.cli``, ``pairwise.commands``) sits above it.  A static scan, so an import inside a function
    counts too; the only exceptions are the deprecated aliases of the old CLI paths and a module's
    ``__getattr__`` that resolves a moved name on demand."""
    root = Path(__file__).resolve().parents[2]
    scanned, bad = 0, []
    for folder, package in _LIBRARY.items():
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel in _SHIMS:
                continue
            parts = path.relative_to(root / folder).with_suffix("").parts
            module = ".".join([package, *(p for p in parts if p != "__init__")])
            scanned += 1
            bad += [
                f"{rel}:{line}: {name}"
                for name, line, func in _imports(path, module)
                if func != "__getattr__" and any(name == c or name.startswith(c + ".") for c in _CLI)
            ]
    assert scanned > 50
    assert not bad, "library modules importing the command line:\n" + "\n".join(bad)
