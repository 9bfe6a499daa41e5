"""Tasks: which protocol a collect task runs, and its public parameters (the place a protocol plugs in).

What it does
    :data:`PROTOCOLS` maps a protocol name to its implementation (one
    module each, all subclasses of :mod:`.base`'s interface):

    =====================  ====================================================
    ``ustat-2pc``          :mod:`.ustat_2pc`: 2PC between sampled pairs ([BBGK20, Sec. 5])
    ``ldp-ustat``          :mod:`.ldp_ustat`: Algorithm 1, one k-RR report per user
    ``ldp-auc``            :mod:`.ldp_auc`: hierarchical-histogram AUC, one bit per level answered
    ``ldp-qmle``           :mod:`.ldp_qmle`: one-bit QMLE of quantile regression
    ``shuffle-histogram``  :mod:`.shuffle_histogram`: [BC20] through a shuffler
    =====================  ====================================================

    :func:`validate_task` turns what a collector asks for (``pairwise collect
    task create`` flags, or a dict in Python) into the task's *spec*: the
    parameters every task has (``epsilon`` with the one validator of every
    command, :func:`pairwise.dp.accounting.check_epsilon`; ``min_users``;
    the registration ``deadline``; the ``timeout`` after which a stalled user
    loses its part; an optional ``title``) and the protocol's own, each
    validated by the protocol with the same library checks as the
    one-process command.  Unknown parameters are refused by name.  A new
    protocol is one module with a :class:`~.base.TaskProtocol` subclass and
    one line in :data:`PROTOCOLS`.

Security model
    A spec holds public parameters only: it is shown to every user before it
    joins, and users refuse a task above their own epsilon cap.
"""

from __future__ import annotations

import datetime as _dt
import math
import time

from ..wire import CollectError
from .base import LocalProtocol, PairProtocol, TaskProtocol
from .ldp_auc import LDPAUC
from .ldp_qmle import LDPQMLE
from .ldp_ustat import LDPUStat
from .shuffle_histogram import ShuffleHistogram
from .ustat_2pc import UStat2PC

__all__ = [
    "DEFAULT_TIMEOUT",
    "PROTOCOLS",
    "LocalProtocol",
    "PairProtocol",
    "TaskProtocol",
    "protocol_of",
    "validate_task",
]

PROTOCOLS: dict[str, TaskProtocol] = {
    p.name: p for p in (UStat2PC(), LDPUStat(), LDPAUC(), LDPQMLE(), ShuffleHistogram())
}
#: Seconds a task waits for a stalled user (a partner that does not come, a session that stops moving).
DEFAULT_TIMEOUT = 120.0
#: Longest registration a task may ask for (a deadline further away is refused as a typo).
MAX_REGISTRATION = 366 * 86400.0


def protocol_of(name: object) -> TaskProtocol:
    if name not in PROTOCOLS:
        raise CollectError(f"unknown protocol {name!r}; choose from {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]


def _deadline(value, now: float) -> float:
    """Seconds from now (a number) or an ISO 8601 time -> an absolute time (seconds since the epoch)."""
    if value is None:
        return now
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            try:
                t = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise CollectError(f"--deadline must be seconds from now or an ISO 8601 time, got {value!r}") from None
            if t.tzinfo is None:
                t = t.replace(tzinfo=_dt.UTC)
            at = t.timestamp()
            if at > now + MAX_REGISTRATION:
                raise CollectError(f"--deadline {value} is more than a year away") from None
            return max(at, now)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise CollectError(f"--deadline must be a number of seconds >= 0 or an ISO 8601 time, got {value!r}")
    if value > MAX_REGISTRATION:
        raise CollectError(f"--deadline of {value:g} s is more than a year")
    return now + float(value)


def validate_task(protocol: str, params: dict, *, now: float | None = None) -> dict:
    """The spec of a new task: every parameter validated (see the module docstring); ``params`` is not changed.

    ``deadline``: seconds from ``now`` (default: 0, registration closes as
    soon as ``min_users`` have joined) or an ISO 8601 time; the spec keeps
    the absolute ``deadline_at``.
    """
    from pairwise.dp.accounting import check_epsilon
    from pairwise.dp.concentration import check_alpha
    from pairwise.dp.errors import PrivacyParameterError

    from .base import number, take

    proto = protocol_of(protocol)
    if not isinstance(params, dict):
        raise CollectError("task parameters must be a JSON object")
    p = dict(params)
    now = time.time() if now is None else float(now)
    try:
        epsilon = check_epsilon(take(p, "epsilon", required=True))
    except PrivacyParameterError as exc:
        raise CollectError(str(exc)) from None
    min_users = number(take(p, "min_users", 2), "--min-users", lo=2, integer=True)
    common = {
        "protocol": proto.name,
        "epsilon": epsilon,
        "min_users": min_users,
        "deadline_at": _deadline(take(p, "deadline"), now),
        "timeout": number(take(p, "timeout", DEFAULT_TIMEOUT), "--timeout", lo=0.0, open_lo=True),
        "title": str(take(p, "title", "")),
    }
    try:  # the (1 - alpha) interval published with the estimate, as today's commands' --alpha
        common["alpha"] = check_alpha(take(p, "alpha", 0.05))
    except ValueError as exc:
        raise CollectError(f"--alpha: {exc}") from None
    if len(common["title"]) > 200:
        raise CollectError("--title must be at most 200 characters")
    own = proto.validate(p, epsilon, min_users)
    if p:
        raise CollectError(f"{proto.name} has no parameter(s) {', '.join(sorted(p))}")
    spec = {**common, **own}
    spec["delta"] = proto.delta(spec)
    return spec
