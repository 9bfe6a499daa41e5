"""What one run of the 2PC U-statistic protocol returns, in typed groups by privacy status.

What it does
    :class:`UStatResult` holds four frozen groups:

    * :class:`PublicParameters`: functions of public inputs only (the budget,
      the design, the domain, the noise and its guarantee);
    * :class:`Costs`: AND gates, bytes and executions (public: functions of
      the public pair design and circuit);
    * :class:`Release`: the DP outputs (the noisy estimate and what is
      computed from it alone);
    * :class:`NotPrivate`: diagnostics computed from the data without noise
      (the exact values, predicted errors, clamping counts) and wall times,
      for evaluation only, never to be published with a release.

    ``as_dict()`` flattens them into the ``pairwise ustat --json`` keys, and
    :func:`release_keys` / :func:`not_private_keys` give the key lists the
    privacy audit (``tests/protocols/test_privacy_audit.py``) checks, from the types.
    The flat attributes of earlier releases (``estimate``, ``exact``,
    ``pairs``, ..., and the ``extra`` dict) stay as read-only properties.

Security model
    None of its own; it sorts what is public from what is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

__all__ = [
    "UStatResult",
    "PublicParameters",
    "Costs",
    "Release",
    "NotPrivate",
    "release_keys",
    "not_private_keys",
    "public_keys",
]


@dataclass(frozen=True)
class PublicParameters:
    """Functions of public inputs only: identical on neighbouring datasets."""

    statistic: str
    epsilon: float
    delta: float
    n: int
    pairs: int
    pairs_per_user: int
    mode: str
    design: str
    bits: int
    domain: list
    natural_range: list
    epsilon_per_pair: float
    noise: str
    noise_epsilon_per_pair: float
    noise_delta_per_pair: float
    noise_delta_method: str
    noise_variance_per_pair: float
    pair_delta: float
    alpha: float
    interval_method: str
    interval_width: float
    kernel_check: str | None = None
    pairs_per_user_rule: str | None = None


@dataclass(frozen=True)
class Costs:
    """Public costs of the run (the pair design and the circuit are public)."""

    and_gates: int
    and_gates_per_pair: int
    noise_and_gates_per_pair: int
    random_bits_per_pair: int
    bytes: int
    bytes_per_pair: float
    executions: int
    cluster: str | None = None
    cluster_workers: int | None = None
    cluster_tasks: int | None = None


@dataclass(frozen=True)
class Release:
    """The DP outputs: the raw (unbiased) estimate, its (1 - alpha) interval, and both clamped to the natural range.

    The interval's width is public (``PublicParameters.interval_width``); its
    position follows the noisy estimate.
    """

    estimate: float
    estimate_clamped: float
    interval: list
    interval_clamped: list


@dataclass(frozen=True)
class NotPrivate:
    """Computed from the data without noise, or wall time: for evaluation only, never published with a release."""

    exact: float
    exact_quantized: float
    sample_mse: float | None
    theorem5_mse: float | None
    clamped: int
    seconds: float
    cluster_task_seconds: float | None = None


#: Keys of the groups that appear only in a cluster run (absent otherwise, as before).
_CLUSTER_ONLY = ("cluster_workers", "cluster_tasks", "cluster_task_seconds")
#: The JSON order of earlier releases (kept so that diffs of saved outputs stay readable).
_ORDER = (
    "statistic",
    "estimate",
    "exact",
    "epsilon",
    "delta",
    "n",
    "pairs",
    "pairs_per_user",
    "and_gates",
    "bytes",
    "seconds",
    "mode",
    "executions",
    "theorem5_mse",
    "estimate_clamped",
    "natural_range",
    "exact_quantized",
    "clamped",
    "domain",
    "and_gates_per_pair",
    "bits",
    "noise_delta_per_pair",
    "epsilon_per_pair",
    "design",
    "noise_variance_per_pair",
    "noise",
    "bytes_per_pair",
    "noise_and_gates_per_pair",
    "random_bits_per_pair",
    "noise_epsilon_per_pair",
    "noise_delta_method",
    "pair_delta",
    "sample_mse",
    "cluster",
    "interval",
    "interval_clamped",
    "interval_method",
    "interval_width",
    "alpha",
    "kernel_check",
    "pairs_per_user_rule",
)


def _names(cls) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def release_keys() -> tuple[str, ...]:
    """JSON keys that hold DP outputs (:class:`Release`)."""
    return _names(Release)


def not_private_keys() -> tuple[str, ...]:
    """JSON keys that are not private (:class:`NotPrivate`)."""
    return _names(NotPrivate)


def public_keys() -> tuple[str, ...]:
    """JSON keys that are functions of public inputs (:class:`PublicParameters` and :class:`Costs`)."""
    return _names(PublicParameters) + _names(Costs)


@dataclass(frozen=True)
class UStatResult:
    """One run's result: ``public``, ``costs``, ``release`` and ``not_private`` (see the module docstring).

    ``outputs``: the noisy per-pair values the aggregator received (int64,
    circuit units, pair order): exactly what the protocol reveals to the
    aggregator; None when a cluster run returned only sums; not part of
    :meth:`as_dict`.
    """

    public: PublicParameters
    costs: Costs
    release: Release
    not_private: NotPrivate
    outputs: np.ndarray | None = field(default=None, repr=False)

    # ---- the flat attributes of earlier releases (read-only)
    @property
    def statistic(self) -> str:
        return self.public.statistic

    @property
    def estimate(self) -> float:
        return self.release.estimate

    @property
    def exact(self) -> float:
        return self.not_private.exact

    @property
    def epsilon(self) -> float:
        return self.public.epsilon

    @property
    def delta(self) -> float:
        return self.public.delta

    @property
    def n(self) -> int:
        return self.public.n

    @property
    def pairs(self) -> int:
        return self.public.pairs

    @property
    def pairs_per_user(self) -> int:
        return self.public.pairs_per_user

    @property
    def and_gates(self) -> int:
        return self.costs.and_gates

    @property
    def bytes(self) -> int:
        return self.costs.bytes

    @property
    def seconds(self) -> float:
        return self.not_private.seconds

    @property
    def mode(self) -> str:
        return self.public.mode

    @property
    def executions(self) -> int:
        return self.costs.executions

    @property
    def theorem5_mse(self) -> float | None:
        return self.not_private.theorem5_mse

    def as_dict(self) -> dict:
        """The ``pairwise ustat --json`` keys of this run (cluster keys only for a cluster run)."""
        flat: dict = {}
        for group in (self.public, self.costs, self.release, self.not_private):
            for f in fields(group):
                v = getattr(group, f.name)
                if f.name in _CLUSTER_ONLY and v is None:
                    continue
                flat[f.name] = v
        ordered = {k: flat.pop(k) for k in _ORDER if k in flat}
        ordered.update(flat)
        return ordered

    @property
    def extra(self) -> dict:
        """Every key of :meth:`as_dict` beyond the flat attributes (the ``extra`` dict of earlier releases)."""
        flat = {
            "statistic",
            "estimate",
            "exact",
            "epsilon",
            "delta",
            "n",
            "pairs",
            "pairs_per_user",
            "and_gates",
            "bytes",
            "seconds",
            "mode",
            "executions",
            "theorem5_mse",
        }
        return {k: v for k, v in self.as_dict().items() if k not in flat}
