"""Every exception class the package defines derives from :class:`pairwise.PairwiseError` and keeps its stdlib base."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings
from types import ModuleType

import pytest

import pairwise
from pairwise import PairwiseError

#: The installed subpackages; ``pairwise.__path__`` holds only ``pairwise/`` itself (the layers are mapped
#: in by ``package-dir``), so each one is walked on its own.
_ROOTS = ("pairwise", "pairwise.dp", "pairwise.circuits", "pairwise.mpc", "pairwise.fss", "pairwise.protocols")


def _modules() -> list[ModuleType]:
    found: dict[str, ModuleType] = {}

    def walk(name: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the deprecated aliases of moved modules
            module = importlib.import_module(name)
        found[name] = module
        for info in pkgutil.iter_modules(getattr(module, "__path__", []), name + "."):
            if info.name not in found:
                walk(info.name)

    for root in _ROOTS:
        walk(root)
    return list(found.values())


def _defined_exceptions() -> list[type[BaseException]]:
    classes = {}
    for module in _modules():
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                classes[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [classes[k] for k in sorted(classes)]


def test_every_project_exception_derives_from_pairwise_error():
    """Imports every module of the package (119 today) and checks each exception class defined there."""
    exceptions = _defined_exceptions()
    assert len(exceptions) >= 38, [e.__name__ for e in exceptions]  # the walk really reached every layer
    # ``protocols.processes.Terminated`` is a KeyboardInterrupt (SIGTERM unwinds like Ctrl-C): it must stay
    # outside ``except Exception``, so it cannot take an Exception base.
    bad = [
        f"{e.__module__}.{e.__qualname__}"
        for e in exceptions
        if issubclass(e, Exception) and not issubclass(e, PairwiseError)
    ]
    assert not bad, "exception classes without the PairwiseError base:\n" + "\n".join(bad)
    assert not any(issubclass(e, PairwiseError) for e in exceptions if not issubclass(e, Exception))


@pytest.mark.parametrize(
    ("name", "stdlib"),
    [
        ("pairwise.dp.errors.PrivacyParameterError", ValueError),
        ("pairwise.circuits.ir.CircuitError", ValueError),
        ("pairwise.fss.keys.KeyFormatError", ValueError),
        ("pairwise.mpc.garble.format.GarbleError", ValueError),
        ("pairwise.mpc.errors.ChannelError", OSError),
        ("pairwise.mpc.errors.ChannelTimeout", TimeoutError),
        ("pairwise.mpc.errors.PeerClosed", ConnectionError),
        ("pairwise.mpc.errors.ConnectError", ConnectionError),
        ("pairwise.protocols.ecdf.wire.BudgetExceeded", ValueError),
        ("pairwise.protocols.ecdf.wire.ServerUnavailable", ConnectionError),
        ("pairwise.protocols.cluster.ClusterError", RuntimeError),
        ("pairwise.protocols.service.storage.StorageError", OSError),
        ("pairwise.protocols.service.processes.ServiceUnavailable", ConnectionError),
    ],
)
def test_the_stdlib_bases_callers_catch_are_kept(name, stdlib):
    module, _, attr = name.rpartition(".")
    cls = getattr(importlib.import_module(module), attr)
    assert issubclass(cls, PairwiseError) and issubclass(cls, stdlib)
    with pytest.raises(stdlib):
        raise cls("x")


def test_pairwise_error_is_exported_from_the_top_and_lives_in_the_lowest_layer():
    assert "PairwiseError" in pairwise.__all__
    assert PairwiseError.__module__ == "pairwise.dp.errors"
    assert PairwiseError.__mro__[1:] == (Exception, BaseException, object)
