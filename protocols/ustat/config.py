"""The validated settings of one run of the 2PC U-statistic protocol (:class:`UStatConfig`).

What it does
    :class:`UStatConfig` is a frozen dataclass holding every public parameter
    of :func:`pairwise.protocols.ustat.driver.run_ustat` except the data: the
    statistic, the budget, the public domain, the pair design, the noise, the
    execution mode and its :class:`pairwise.protocols.transport.Transport`.
    It validates them all on construction, so a bad value is refused before
    any data is read, any pair is sampled or any noise is drawn.  The checks
    that need the data (P against the number of users, the domain against the
    values) stay in the driver and run before any noise too.

Security model
    None of its own: everything here is public.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import Any

from pairwise.dp.errors import PairwiseError

from ..transport import Transport

__all__ = ["UStatConfig", "UStatError", "STATISTICS", "NOISE_MECHANISMS", "DEFAULT_PAIR_DELTA", "MODES", "DESIGNS"]

STATISTICS = ("gini", "kendall", "auc")
#: ``noise`` choices of :func:`run_ustat` (see :func:`pairwise.circuits.noise.choose_kernel_noise`).
NOISE_MECHANISMS = ("auto", "krr", "discrete_laplace", "signed_geometric")
#: Default delta of one pair's release (each user's delta is P times this, or n - 1 times for ``all``).
DEFAULT_PAIR_DELTA = 2.0**-40
MODES = ("simulate", "network")
DESIGNS = ("subsample", "all")
#: The transport keywords :func:`run_ustat` accepts loose, for compatibility (they fill ``transport``).
TRANSPORT_KEYS = ("tls", "tls_dir", "timeout", "connect_timeout")


class UStatError(PairwiseError, ValueError):
    """Invalid data or parameters for the U-statistic protocol."""


@dataclass(frozen=True)
class UStatConfig:
    """Every public setting of one protocol run, validated on construction (see the module docstring).

    ``lower``/``upper``/``decimals``: the public domain of the private
    column(s), one value per column for kendall (checked against the
    statistic when the data is prepared).  ``transport`` bounds every wait
    (``timeout``) and sets TLS for network mode; ``cluster`` runs simulate
    mode's batches on Dask.  ``lam`` is deprecated (see :func:`run_ustat`).
    """

    statistic: str
    epsilon: float
    lower: Any = None
    upper: Any = None
    decimals: Any = None
    pairs_per_user: int | str = 1
    mode: str = "simulate"
    design: str = "subsample"
    delta_slack: float = 1e-8
    bits: int | None = None
    batch: int = 4096
    workers: int = 4
    cluster: Any = None
    noise: str = "auto"
    pair_delta: float = DEFAULT_PAIR_DELTA
    lam: int | None = None
    compute_theorem5: bool = True
    alpha: float = 0.05
    kernel: Any = None
    transport: Transport = field(default_factory=Transport)

    def __post_init__(self) -> None:
        from pairwise.circuits.kernel_spec import BUILTIN_SPECS, KernelSpec

        if self.kernel is None and self.statistic in BUILTIN_SPECS:
            object.__setattr__(self, "kernel", BUILTIN_SPECS[self.statistic])
        if self.kernel is not None:
            if not isinstance(self.kernel, KernelSpec):
                raise UStatError(
                    f"kernel must be a pairwise.circuits.kernel_spec.KernelSpec (@kernel(range=..., "
                    f"symmetric=...)), got {type(self.kernel).__name__}"
                )
            if self.statistic != self.kernel.name:
                raise UStatError(f"statistic {self.statistic!r} and kernel {self.kernel.name!r} disagree")
            if self.design == "all" and not self.kernel.symmetric:
                raise UStatError(
                    f"kernel {self.kernel.name!r} is not symmetric: the all-pairs design would fix each "
                    "pair's orientation; use the subsample design (random orientation)"
                )
            if self.noise == "krr" and self.kernel.values is None:
                raise UStatError(
                    f"k-ary randomized response needs a kernel that declares its 2 or 3 values; "
                    f"{self.kernel.name!r} does not"
                )
            if self.mode == "network":
                from pairwise.circuits.kernel_spec import KernelRangeError, check_kernel_path

                if self.kernel.path is None:
                    raise UStatError(
                        f"network mode rebuilds kernel {self.kernel.name!r} in each worker process: define "
                        "it at module level in an importable module (module:function)"
                    )
                try:
                    check_kernel_path(self.kernel)
                except KernelRangeError as exc:
                    raise UStatError(
                        f"network mode rebuilds the kernel in each worker process from its path: {exc}; "
                        "load it with pairwise.circuits.kernel_spec.load_kernel('module:name')"
                    ) from None
        elif self.statistic not in STATISTICS:
            raise UStatError(
                f"unknown statistic {self.statistic!r}; choose from "
                f"{STATISTICS + tuple(sorted(BUILTIN_SPECS))} or pass kernel="
            )
        eps = self.epsilon
        if not (isinstance(eps, (int, float)) and not isinstance(eps, bool) and math.isfinite(eps) and eps > 0):
            raise UStatError(f"epsilon must be a positive finite number, got {eps!r}")
        if self.pairs_per_user == "auto":
            if self.design != "subsample":
                raise UStatError("pairs_per_user='auto' chooses P for the subsample design; the all design has none")
        elif (
            isinstance(self.pairs_per_user, (bool, str))
            or int(self.pairs_per_user) != self.pairs_per_user
            or self.pairs_per_user < 1
        ):
            raise UStatError(f"pairs per user must be a positive integer or 'auto', got {self.pairs_per_user!r}")
        if self.mode not in MODES:
            raise UStatError(f"mode must be 'simulate' or 'network', got {self.mode!r}")
        if self.design not in DESIGNS:
            raise UStatError(f"design must be 'subsample' or 'all', got {self.design!r}")
        if self.design == "all" and self.statistic == "auc":
            raise UStatError("the all-pairs design is implemented for one-sample statistics (gini, kendall)")
        if self.cluster is not None and self.mode != "simulate":
            raise UStatError(
                "cluster= runs simulate mode's batches; network mode hosts users on its own worker processes"
            )
        if self.cluster is not None and isinstance(self.cluster, str):
            from ..cluster import ClusterError, parse_cluster

            try:
                parse_cluster(self.cluster)
            except ClusterError as exc:
                raise UStatError(str(exc)) from exc
        if self.mode == "network" and not 1 <= int(self.workers) <= 64:
            raise UStatError(f"workers must be in 1..64, got {self.workers!r}")
        if isinstance(self.batch, bool) or int(self.batch) != self.batch or self.batch < 1:
            raise UStatError(f"batch must be a positive integer, got {self.batch!r}")
        if not isinstance(self.transport, Transport):
            raise UStatError(f"transport must be a pairwise.protocols.transport.Transport, got {self.transport!r}")
        if self.design == "all" and not (isinstance(self.delta_slack, (int, float)) and 0 < self.delta_slack < 1):
            raise UStatError(f"delta_slack must lie in (0, 1), got {self.delta_slack!r}")
        if self.noise not in NOISE_MECHANISMS:
            raise UStatError(f"noise must be one of {NOISE_MECHANISMS}, got {self.noise!r}")
        if self.noise == "krr" and self.statistic == "gini":
            raise UStatError(
                "k-ary randomized response needs a kernel with few values (kendall, auc); gini takes a continuum"
            )
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not 0 < self.alpha <= 0.5:
            raise UStatError(f"alpha (the interval's miss probability) must lie in (0, 0.5], got {self.alpha!r}")
        lam = self.lam
        if lam is not None:
            if isinstance(lam, bool) or not isinstance(lam, int) or not 1 <= lam <= 256:
                raise UStatError(f"lam must be an integer in 1..256, got {lam!r}")
        elif not (isinstance(self.pair_delta, (int, float, Fraction)) and 0 < self.pair_delta < 1):
            raise UStatError(f"pair_delta must lie in (0, 1), got {self.pair_delta!r}")

    @classmethod
    def from_options(cls, statistic: str, options: dict) -> UStatConfig:
        """A config from :func:`run_ustat`'s keywords: the loose transport keywords (``tls``, ``tls_dir``,
        ``timeout``, ``connect_timeout``) fill ``transport``; an unknown keyword is a ``TypeError``."""
        opts = dict(options)
        loose = {k: opts.pop(k) for k in TRANSPORT_KEYS if k in opts}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(opts) - known)
        if unknown:
            raise TypeError(f"run_ustat() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
        if loose:
            if "transport" in opts:
                raise UStatError(f"give either transport= or {', '.join(sorted(loose))}, not both")
            t = loose.get("timeout", 120.0)
            if isinstance(t, bool) or not (isinstance(t, (int, float)) and math.isfinite(t) and t > 0):
                raise UStatError(f"timeout must be a positive number of seconds, got {t!r}")
            try:
                opts["transport"] = Transport(**loose)
            except ValueError as exc:
                raise UStatError(str(exc)) from None
        return cls(statistic=statistic, **opts)

    @property
    def per_pair_delta(self) -> Fraction | None:
        """The delta one pair's release is built for (None with the deprecated ``lam``: it depends on #pairs)."""
        return None if self.lam is not None else Fraction(self.pair_delta)
