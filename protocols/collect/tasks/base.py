"""The interface a task's protocol implements, and the checks every task shares.

What it does
    A task is one run of one protocol among real users.  Its *spec* is a
    JSON object of public parameters only, fixed and validated when the task
    is created (:func:`pairwise.protocols.collect.tasks.validate_task`) and
    shown to every user before it joins.  A protocol plugs in as a subclass of

    * :class:`LocalProtocol` (the local model: each user randomizes on its own
      device and uploads one report): :meth:`~LocalProtocol.assign` (public
      randomness the aggregator gives a joining user, e.g. the AUC's level and
      Hadamard index), :meth:`~LocalProtocol.randomize` (the user's side, OS
      CSPRNG), :meth:`~LocalProtocol.check_report` (the aggregator refuses
      anything outside the randomizer's output range),
      :meth:`~LocalProtocol.finish` (the analyzer, over the stored reports);
    * :class:`PairProtocol` (2PC between paired users, [BBGK20, Sec. 5]):
      :meth:`~PairProtocol.pair` (the sampled pairs), :meth:`~PairProtocol.circuit`,
      :meth:`~PairProtocol.encode` (a user's circuit input),
      :meth:`~PairProtocol.check_value` and :meth:`~PairProtocol.finish`;
    * or a shuffle-model protocol (``model = "shuffle"``: messages go through
      a shuffler process, :mod:`pairwise.protocols.collect.tasks.shuffle_histogram`).

    Each of these methods is a pure function of the spec (and, on the
    user's side, the user's own value); the aggregator
    (:mod:`pairwise.protocols.collect.aggregator`) and the user client
    (:mod:`pairwise.protocols.collect.user`) do the I/O.

Security model
    Everything in a spec is public and identical on neighbouring datasets.
    Parameters are validated with the same library constructors and checks
    the one-process commands (``pairwise ustat``, ``pairwise ldp``) use, before
    any user randomizes anything.  Randomness on the user's side comes from
    the OS CSPRNG; the aggregator's public randomness (assignments, pairs) too.
"""

from __future__ import annotations

import math
from typing import Any

from ..wire import BadReport, CollectError

__all__ = [
    "BadReport",
    "CollectError",
    "LocalProtocol",
    "PairProtocol",
    "TaskProtocol",
    "bounds_lists",
    "domains",
    "number",
    "one_of",
    "optional_number",
    "take",
]


class TaskProtocol:
    """A protocol a task can run (see the module docstring); subclasses set ``name``, ``model``, ``label``."""

    name: str = ""
    model: str = ""
    #: the one-line description ``task list`` shows
    summary: str = ""

    def validate(self, params: dict, epsilon: float, min_users: int) -> dict:
        """This protocol's public parameters from ``params`` (consumed), normalized; :class:`CollectError` if bad."""
        raise NotImplementedError

    def delta(self, spec: dict) -> float:
        """The delta of one user's participation (its epsilon is ``spec["epsilon"]``)."""
        return 0.0

    def needs_label(self, spec: dict) -> bool:
        """Whether a user gives a public 0/1 label (two-sample statistics: AUC)."""
        return False

    def values(self, spec: dict) -> int:
        """How many values a user gives (1, or 2: kendall's (x, y), the QMLE's (response, covariate))."""
        return 1

    def check_user(self, spec: dict, value, value2, label) -> None:
        """Refuse (:class:`CollectError`) a user's input of the wrong shape, before anything is sent."""
        need = self.values(spec)
        for name, v in (("value", value), ("value2", value2)):
            if name == "value2" and need < 2:
                if v is not None:
                    raise CollectError(f"{self.name} takes one value per user; drop --value2")
                continue
            if v is None:
                raise CollectError(f"{self.name} needs --{name} (this task takes {need} value(s) per user)")
            try:
                f = float(v)
            except (TypeError, ValueError):
                raise CollectError(f"--{name} must be a number, got {v!r}") from None
            if not math.isfinite(f):
                raise CollectError(f"--{name} must be a finite number, got {v!r}")
        if self.needs_label(spec):
            if label not in (0, 1) or isinstance(label, bool):
                raise CollectError(f"{self.name} needs the public 0/1 --label of this user, got {label!r}")
        elif label is not None:
            raise CollectError(f"{self.name} takes no label; drop --label")

    def describe(self, spec: dict) -> str:
        """One line of the public parameters, for people (``join`` prints it before anything is sent)."""
        return self.summary


class LocalProtocol(TaskProtocol):
    """The local model: one randomized report per user (see the module docstring)."""

    model = "local"

    def assign(self, spec: dict, label: int | None, previous: list[dict]) -> dict:
        """Public randomness for a joining user of class ``label`` (``previous``: that class's earlier assignments)."""
        return {}

    def randomize(self, spec: dict, assignment: dict, value, value2, label) -> dict:
        """The user's report (OS CSPRNG), after clamping its value into the public domain."""
        raise NotImplementedError

    def check_report(self, spec: dict, assignment: dict, label, report: Any) -> dict:
        """The report, normalized, or :class:`BadReport` when it is outside the randomizer's output range."""
        raise NotImplementedError

    def finish(self, spec: dict, rows: list[tuple[int | None, dict, dict]]) -> dict:
        """The release from the stored (label, assignment, report) rows, with the one-process command's JSON keys."""
        raise NotImplementedError


class PairProtocol(TaskProtocol):
    """2PC between sampled pairs of users ([BBGK20, Sec. 5]; see the module docstring)."""

    model = "2pc"

    def pair(self, spec: dict, users: list[tuple[str, int | None]], rng) -> list[tuple[str, str, int]]:
        """(garbler, evaluator, round) of every sampled pair among ``users`` = [(name, label)]."""
        raise NotImplementedError

    def circuit(self, spec: dict):
        """The :class:`pairwise.circuits.noise.NoisyCircuit` every pair runs."""
        raise NotImplementedError

    def encode(self, spec: dict, value, value2, label) -> int:
        """The user's circuit input (clamped into the public domain, on its grid)."""
        raise NotImplementedError

    def check_value(self, spec: dict, value: Any) -> int:
        """The evaluator's reported output, or :class:`BadReport` when the circuit cannot output it."""
        raise NotImplementedError

    def finish(self, spec: dict, values: list[int], stats: dict) -> dict:
        """The release from the completed pairs' outputs; ``stats``: counts and bytes of the run."""
        raise NotImplementedError


# ------------------------------------------------------------------------------ parameter helpers


def take(params: dict, key: str, default: Any = None, *, required: bool = False) -> Any:
    """Pop ``key`` from ``params`` (a missing required one is a :class:`CollectError` naming the flag)."""
    if key not in params or params[key] is None:
        params.pop(key, None)
        if required:
            raise CollectError(f"this protocol needs --{key.replace('_', '-')}")
        return default
    return params.pop(key)


def one_of(value: Any, choices: tuple, what: str) -> Any:
    if value not in choices:
        raise CollectError(f"{what} must be one of {', '.join(map(str, choices))}; got {value!r}")
    return value


def number(
    value: Any,
    what: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    integer: bool = False,
    open_lo: bool = False,
) -> float | int:
    """A finite number (an integer with ``integer``) in [lo, hi] ((lo, hi] with ``open_lo``)."""
    if isinstance(value, bool):
        raise CollectError(f"{what} must be a number, got {value!r}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise CollectError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(f):
        raise CollectError(f"{what} must be finite, got {value!r}")
    if integer:
        if f != int(f):
            raise CollectError(f"{what} must be an integer, got {value!r}")
        f = int(f)
    if lo is not None and (f < lo or (open_lo and f == lo)):
        raise CollectError(f"{what} must be {'>' if open_lo else '>='} {lo:g}, got {value!r}")
    if hi is not None and f > hi:
        raise CollectError(f"{what} must be <= {hi:g}, got {value!r}")
    return f


def optional_number(value: Any, what: str, **kw) -> float | None:
    return None if value is None else number(value, what, **kw)


def bounds_lists(params: dict, k: int, *, decimals: bool = True, integer: bool = False) -> tuple:
    """``lower``, ``upper`` (and ``decimals``) from ``params``: lists of ``k`` numbers (a scalar when k = 1)."""

    def as_list(v, key):
        vals = list(v) if isinstance(v, (list, tuple)) else [v]
        if len(vals) != k:
            raise CollectError(f"--{key} needs one value per private column ({k}), got {len(vals)}")
        return [number(x, f"--{key}", integer=integer) for x in vals]

    lower = as_list(take(params, "lower", required=True), "lower")
    upper = as_list(take(params, "upper", required=True), "upper")
    decs = take(params, "decimals") if decimals else None
    if decs is not None:
        decs = as_list(decs, "decimals")
        decs = [int(d) for d in decs]
    return lower, upper, decs


def domains(lower: list, upper: list, decimals: list | None, names: tuple[str, ...]):
    """:class:`pairwise.dp.bounds.PublicDomain` per column (the validator every command uses)."""
    from pairwise.dp.bounds import PublicDomain
    from pairwise.dp.errors import PrivacyParameterError

    try:
        doms = tuple(
            PublicDomain(lo, hi, None if decimals is None else decimals[j], f"column {names[j]!r}")
            for j, (lo, hi) in enumerate(zip(lower, upper))
        )
        for d in doms:
            d.span  # noqa: B018 - validates the grid
    except PrivacyParameterError as exc:
        raise CollectError(str(exc)) from None
    return doms
