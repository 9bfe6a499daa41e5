"""Validation of integer parameters, shared by every layer.

What it does
    :func:`check_int` is the one integer check of the package: it refuses
    ``bool`` (and ``numpy.bool_``), which Python counts as an integer, and
    anything without ``__index__`` (floats, strings, ``None``), checks an
    optional closed range and returns a plain ``int``.  Each caller passes the
    exception class of its own layer (``GarbleError``, ``FSSParameterError``,
    ``QueryRefused``, ...), so the types callers catch do not change.
    :func:`is_int` is the same test as a predicate, for loops over elements.
    :func:`with_legacy` and :func:`no_more_keywords` let a function that now
    takes a frozen options dataclass keep accepting the loose keywords it
    took before (``f(..., options=None, **legacy)``).

    Messages name the parameter, the allowed range and the value received::

        batch must be an integer >= 1, got 0
        L must be an integer in [1, 24], got a bool (True)

Security model
    None (pure checks).  Only public parameters pass through here; a message
    repeats the value received, so do not pass secrets.

It lives in the lowest layer (:mod:`pairwise.dp`) and imports nothing from
the project, so every layer can use it without importing upward.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

import numpy as np

__all__ = ["is_int", "check_int", "with_legacy", "no_more_keywords"]


def is_int(value: object) -> bool:
    """True for Python and numpy integers (anything with ``__index__``), False for bools and everything else."""
    if isinstance(value, (bool, np.bool_)):
        return False
    try:
        operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def check_int(
    value: object,
    name: str,
    *,
    lo: int | None = None,
    hi: int | None = None,
    error: type[Exception] = ValueError,
) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) in ``[lo, hi]``; else ``error`` naming ``name``.

    ``lo`` and ``hi`` are inclusive and optional.  The message reads
    "``name`` must be an integer in [lo, hi] / >= lo / <= hi, got ``value!r``".
    """
    if lo is not None and hi is not None:
        allowed = f"an integer in [{lo}, {hi}]"
    elif lo is not None:
        allowed = f"an integer >= {lo}"
    elif hi is not None:
        allowed = f"an integer <= {hi}"
    else:
        allowed = "an integer"
    if isinstance(value, (bool, np.bool_)):
        raise error(f"{name} must be {allowed}, got a bool ({value!r})")
    if not is_int(value):
        raise error(f"{name} must be {allowed}, got {value!r}")
    n = operator.index(value)  # type: ignore[arg-type]
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise error(f"{name} must be {allowed}, got {value!r}")
    return n


def with_legacy(options: Any, cls: type, legacy: dict[str, Any], func: str, **defaults: Any) -> Any:
    """``options`` (an instance of the frozen dataclass ``cls``, or ``cls(**defaults)`` when None) with the
    loose keywords of ``legacy`` that name a field of ``cls`` applied; those keywords are removed from
    ``legacy``.  The dataclass validates the result (``dataclasses.replace`` runs ``__post_init__``).

    Giving both ``options`` and one of its fields as a keyword is a ``TypeError`` naming ``func``.
    """
    names = {f.name for f in dataclasses.fields(cls)}
    mine = {k: legacy.pop(k) for k in list(legacy) if k in names}
    if options is None:
        return cls(**{**defaults, **mine})
    if not isinstance(options, cls):
        raise TypeError(f"{func}() options must be a {cls.__name__}, got {type(options).__name__}")
    if mine:
        raise TypeError(f"{func}() got both options= and {', '.join(sorted(mine))}: give one of them")
    return options


def no_more_keywords(legacy: dict[str, Any], func: str) -> None:
    """The ``TypeError`` Python raises for an unexpected keyword, when ``legacy`` still holds one."""
    for k in legacy:
        raise TypeError(f"{func}() got an unexpected keyword argument {k!r}")
