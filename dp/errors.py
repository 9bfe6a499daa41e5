"""Exceptions of the :mod:`dp` package, and :class:`PairwiseError`, the base of every project exception.

What it does
    :class:`PairwiseError` is mixed into every exception class the project
    defines, in front of the stdlib base callers already catch (``ValueError``,
    ``OSError``, ``ConnectionError``, ``TimeoutError``, ``RuntimeError``), so
    ``except PairwiseError`` catches anything the framework raised on purpose
    and ``except ValueError`` keeps working.  It lives here, in the lowest
    layer and in a module with no imports, so every layer can use it without
    importing upward; :mod:`pairwise` re-exports it as ``pairwise.PairwiseError``.

    Every invalid input to a sampler, mechanism, accountant or ECDF routine
    raises one of these classes with a message that names the parameter, the
    value received and what is allowed.  The dp classes subclass ``ValueError``,
    so the ``pairwise`` command line prints them as one-line user errors.

Security model
    None (plain exceptions).  Messages never contain noise values or private
    data, only public parameters and shapes.
"""

from __future__ import annotations

__all__ = ["PairwiseError", "PrivacyParameterError", "NoiseParameterError", "EmptyDataError", "InvalidDataError"]


class PairwiseError(Exception):
    """Base class of every exception the ``pairwise`` package defines.

    Never raised itself: each subclass also derives from the stdlib class its
    callers rely on (``class ChannelError(PairwiseError, OSError)``).
    """


class PrivacyParameterError(PairwiseError, ValueError):
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


class EmptyDataError(PairwiseError, ValueError):
    """A statistic was asked of an empty data set (no records, no bins)."""


class InvalidDataError(PairwiseError, ValueError):
    """The data do not have the shape or domain a routine needs.

    Examples: negative histogram counts, labels that are not 0/1, predicted
    probabilities outside [0, 1], arrays of mismatched length.
    """
