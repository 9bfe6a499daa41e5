"""Exceptions of the :mod:`dp` package.

What it does
    Every invalid input to a sampler, mechanism, accountant or ECDF routine
    raises one of these classes with a message that names the parameter, the
    value received and what is allowed.  All of them subclass ``ValueError``,
    so the ``pairwise`` command line prints them as one-line user errors.

Security model
    None (plain exceptions).  Messages never contain noise values or private
    data, only public parameters and shapes.
"""

from __future__ import annotations

__all__ = ["PrivacyParameterError", "NoiseParameterError", "EmptyDataError", "InvalidDataError"]


class PrivacyParameterError(ValueError):
    """A privacy or distribution parameter is out of range.

    Examples: epsilon <= 0 or not finite, delta outside [0, 1), a non-positive
    noise scale or sensitivity, a Bernoulli probability outside [0, 1].
    """


class NoiseParameterError(PrivacyParameterError):
    """A parameter of the dyadic noise gadgets is out of range.

    Epsilon, sensitivity, coin precision, support, target delta or variance
    tolerance of :mod:`pairwise.dp.dyadic`, its samplers and the circuits of
    :mod:`pairwise.circuits.noise` (which re-exports this class).  Until the
    gadgets' analysis moved into :mod:`dp` it subclassed
    ``pairwise.circuits.ir.CircuitError``; ``except ValueError`` and
    ``except NoiseParameterError`` catch it as before.
    """


class EmptyDataError(ValueError):
    """A statistic was asked of an empty data set (no records, no bins)."""


class InvalidDataError(ValueError):
    """The data do not have the shape or domain a routine needs.

    Examples: negative histogram counts, labels that are not 0/1, predicted
    probabilities outside [0, 1], arrays of mismatched length.
    """
