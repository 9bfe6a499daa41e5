"""What ``randomize``, ``release`` and ``simulate`` mean: the interfaces of the DP mechanisms.

What it does
    Runtime-checkable ``typing.Protocol`` classes that the mechanisms of
    :mod:`pairwise.dp.mechanisms` meet structurally (no inheritance), so code
    written against a role works with any mechanism of that role:

    ==========================  =============================================
    :class:`Mechanism`          carries ``guarantee``, the
                                :class:`~pairwise.dp.accounting.PrivacyGuarantee`
                                of one call on one data set / record
    :class:`LocalRandomizer`    local model: ``randomize_array(values)``, one
                                independent report per record (exact samplers,
                                OS CSPRNG); ``simulate(values, rng)``, the
                                same law from a seeded generator
    :class:`ValueRandomizer`    a local randomizer with ``randomize(value)``,
                                the report of one record (all but the vector
                                mechanism :class:`OneBitFlipVector`)
    :class:`CentralMechanism`   central model: ``release(value)`` and
                                ``release_array(values)``, the value plus
                                noise calibrated to the sensitivity
    :class:`Simulable`          has ``simulate(values, rng)``
    ==========================  =============================================

    The words are fixed: *randomize* is what a user runs on their own record
    (local model), *release* is what a curator runs on a query's exact value
    (central model), and *simulate* draws the same distribution from a seeded
    ``numpy.random.Generator``; it is for experiments only, never for a real
    release.

Security model
    Interfaces only.  The guarantee is a property of one call; composition is
    :mod:`pairwise.dp.accounting`'s job.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from .accounting import PrivacyGuarantee

__all__ = ["Mechanism", "LocalRandomizer", "ValueRandomizer", "CentralMechanism", "Simulable"]


@runtime_checkable
class Mechanism(Protocol):
    """A DP mechanism: ``guarantee`` is the privacy of one call (one record, or one data set)."""

    guarantee: PrivacyGuarantee


@runtime_checkable
class Simulable(Protocol):
    """SIMULATION: ``simulate(values, rng)`` draws the mechanism's outputs from a seeded generator."""

    def simulate(self, values: np.ndarray, rng: np.random.Generator, /) -> np.ndarray: ...


@runtime_checkable
class LocalRandomizer(Mechanism, Simulable, Protocol):
    """A local-model randomizer: ``randomize_array(values)`` gives one independent report per record."""

    def randomize_array(self, values: np.ndarray, /) -> np.ndarray: ...


@runtime_checkable
class ValueRandomizer(LocalRandomizer, Protocol):
    """A local randomizer of one record at a time: ``randomize(value)`` is its report."""

    def randomize(self, value: Any, /) -> int: ...


@runtime_checkable
class CentralMechanism(Mechanism, Protocol):
    """A central-model mechanism: ``release(value)`` and ``release_array(values)`` add calibrated noise."""

    def release(self, value: Any, /) -> Any: ...

    def release_array(self, values: np.ndarray, /) -> np.ndarray: ...
