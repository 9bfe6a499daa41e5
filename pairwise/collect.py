"""Running a study among real users, from Python: join a task as one user, or drive the aggregator as an analyst.

    >>> from pairwise.collect import join                                   # doctest: +SKIP
    >>> from pairwise.mpc.tls import TLSConfig                              # doctest: +SKIP
    >>> out = join("aggregator.example:9100", "study1", value=3.0, value2=2.0,
    ...            tls=TLSConfig("certs", "alice"), state_dir="alice-state")  # doctest: +SKIP

- :func:`join`: this user's part of a task, holding only this user's
  value(s); refuses a task above ``max_epsilon`` or above what the user's
  own ledger has left (:class:`CapExceeded`, nothing sent).  An app embeds
  this call.
- :class:`Collector`: create, list, show and close tasks, read results.
- :class:`Aggregator`: the service itself (``pairwise collect serve``).
- :func:`validate_task`: a task's public parameters, checked as the
  aggregator checks them.

The protocols, the trust model and a walk-through: :mod:`pairwise.protocols.collect`
and ``docs/collect.md``.
"""

from __future__ import annotations

from pairwise.protocols.collect import CapExceeded, CollectError, Collector, JoinOutcome, join, validate_task
from pairwise.protocols.collect.aggregator import Aggregator

__all__ = ["Aggregator", "CapExceeded", "CollectError", "Collector", "JoinOutcome", "join", "validate_task"]
