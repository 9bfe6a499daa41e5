"""Exceptions of the local and shuffle-model protocols (:mod:`pairwise.protocols.ldp`).

What it does
    Every invalid input of an LDP or shuffle protocol raises one of these
    classes.  All subclass ``ValueError`` (as the bare ``ValueError`` they
    replace did) and :class:`pairwise.PairwiseError`, so existing
    ``except ValueError`` handlers keep working and the ``pairwise`` command
    line prints them as one-line user errors.

    ======================  ====================================================
    LDPError                base class of this package's errors
    LDPParameterError       a public protocol parameter is invalid: bounds,
                            number of bins, quantile level, failure
                            probability, splitting, composition, a kernel
                            choice, a size limit
    UnknownKernel           a kernel or synthetic data set name is not known
    LDPDataError            the users' data do not fit the protocol: shape,
                            domain, non-finite values, too few users, labels
                            (also a :class:`pairwise.dp.InvalidDataError`)
    ReportError             submitted reports (bits, cells, messages) are
                            malformed: the curator's input from the users
    ======================  ====================================================

Security model
    None (plain exceptions).  Messages name public parameters, shapes and row
    numbers; a value is repeated only where the caller passed it as public
    (a domain bound, a parameter) or to point at the offending row of the
    caller's own data.
"""

from __future__ import annotations

from pairwise.dp.errors import InvalidDataError, PairwiseError

__all__ = ["LDPError", "LDPParameterError", "UnknownKernel", "LDPDataError", "ReportError"]


class LDPError(PairwiseError, ValueError):
    """Base class of the errors of :mod:`pairwise.protocols.ldp`."""


class LDPParameterError(LDPError):
    """A public parameter of a local or shuffle-model protocol is out of range or inconsistent."""


class UnknownKernel(LDPParameterError):
    """A kernel (or synthetic data set) is named that the protocol does not know; the message lists the names."""


class LDPDataError(LDPError, InvalidDataError):
    """The users' data do not have the shape, domain or size the protocol needs."""


class ReportError(LDPDataError):
    """Reports submitted by users are malformed (not bits, cells outside the grid, wrong shape)."""
