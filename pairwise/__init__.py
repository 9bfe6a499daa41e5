"""pairwise: secure two-party and multi-server computation of private statistics.

The repository's top-level folders are installed as subpackages of this one
(``pyproject.toml`` maps them with setuptools ``package-dir``):
:mod:`pairwise.dp`, :mod:`pairwise.circuits`, :mod:`pairwise.mpc`,
:mod:`pairwise.fss`, :mod:`pairwise.protocols`.
"""
