"""The public side of the 2PC subsampling U-statistic ([BBGK20, Sec. 5]): parameters, circuit, estimate.

What it does
    Everything of the protocol that is a function of *public* inputs only,
    shared by the one-process driver (:func:`pairwise.protocols.ustat.driver.run_ustat`)
    and the deployment among real users (:mod:`pairwise.protocols.collect`):

    * :func:`check_parameters`: epsilon, pairs per user P, the noise
      mechanism and the delta of one pair's release, validated before any
      noise is drawn (the checks ``pairwise ustat`` runs);
    * :func:`public_params`: the public domain [lower, upper] and decimals of
      each private column (:class:`pairwise.dp.bounds.PublicDomain`), the
      circuit width, the fixed-point scale and the kernel's public range R
      (:class:`PublicParams`);
    * :func:`encode_input`: what one owner feeds the circuit (its value
      clamped into the domain, rounded to the grid lower + k 10^-D, and for
      kendall its two coordinates packed in one word);
    * :func:`per_pair_epsilon` and :func:`build_noisy_kernel`: the budget of
      one pair's release (Theorem 5: eps / P with sensitivity R) and the
      kernel-plus-noise circuit both users of a pair run
      (:func:`pairwise.circuits.noise.noisy_kernel`);
    * :func:`estimate_from_sum`: step 3, the aggregator's average of the
      noisy per-pair values, from their exact integer sum and count;
    * :func:`valid_output`: whether a value an evaluator reports can be an
      output of that circuit (the aggregator refuses anything else).

Security model
    Pure functions of public parameters; no randomness, no data (except
    :func:`encode_input`, which runs on the owner's side with its own value).
    The width, scale, sensitivity and noise are the same on neighbouring
    datasets by construction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .config import DEFAULT_PAIR_DELTA, NOISE_MECHANISMS, STATISTICS, UStatError

__all__ = [
    "DEFAULT_PAIR_DELTA",
    "MAX_PAIR_EPSILON",
    "NOISE_MECHANISMS",
    "STATISTICS",
    "PublicParams",
    "UStatError",
    "build_noisy_kernel",
    "check_parameters",
    "encode_input",
    "estimate_from_sum",
    "natural_range",
    "per_pair_epsilon",
    "public_params",
    "valid_output",
]

#: Largest per-pair epsilon: the discrete Laplace gadget's limit (circuits.noise); at 64 the
#: noise is nonzero with probability below 1e-27 per unit of sensitivity anyway.
MAX_PAIR_EPSILON = Fraction(64)


def check_parameters(
    statistic: str,
    epsilon: float,
    pairs_per_user: int,
    *,
    noise: str = "auto",
    pair_delta: float = DEFAULT_PAIR_DELTA,
    lam: int | None = None,
) -> None:
    """Refuse (:class:`UStatError`) a bad statistic, epsilon, P, noise mechanism or pair delta, before any noise."""
    if statistic not in STATISTICS:
        raise UStatError(f"unknown statistic {statistic!r}; choose from {STATISTICS}")
    if not (
        isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool) and math.isfinite(epsilon) and epsilon > 0
    ):
        raise UStatError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if isinstance(pairs_per_user, bool) or int(pairs_per_user) != pairs_per_user or pairs_per_user < 1:
        raise UStatError(f"pairs per user must be a positive integer, got {pairs_per_user!r}")
    if noise not in NOISE_MECHANISMS:
        raise UStatError(f"noise must be one of {NOISE_MECHANISMS}, got {noise!r}")
    if noise == "krr" and statistic == "gini":
        raise UStatError(
            "k-ary randomized response needs a kernel with few values (kendall, auc); gini takes a continuum"
        )
    if lam is not None:
        if isinstance(lam, bool) or not isinstance(lam, int) or not 1 <= lam <= 256:
            raise UStatError(f"lam must be an integer in 1..256, got {lam!r}")
    elif not (
        isinstance(pair_delta, (int, float, Fraction)) and not isinstance(pair_delta, bool) and 0 < pair_delta < 1
    ):
        raise UStatError(f"pair_delta must lie in (0, 1), got {pair_delta!r}")


@dataclass(frozen=True)
class PublicParams:
    """The public shape of the protocol for one statistic: every field is a function of public inputs."""

    statistic: str
    domains: tuple  # PublicDomain per private column (kendall: 2)
    bits: int  # circuit word
    scale: float  # natural units per integer step (gini)
    range_: int  # public range R of the kernel in circuit units

    @property
    def conv(self) -> float:
        """Natural units per circuit output unit: gini the grid step, kendall 1, auc 1/2 (2[x > y] + [x = y])."""
        return {"gini": self.scale, "kendall": 1.0, "auc": 0.5}[self.statistic]


def domains_of(statistic: str, lower, upper, decimals) -> tuple:
    """One :class:`pairwise.dp.bounds.PublicDomain` per private column, from public inputs."""
    from pairwise.dp.bounds import PublicDomain
    from pairwise.dp.errors import PrivacyParameterError

    k = 2 if statistic == "kendall" else 1
    if lower is None or upper is None:
        raise UStatError(
            f"{statistic} needs the public domain of its private column(s): lower= and upper= "
            f"({'one value per column' if k == 2 else 'one value'}), fixed in advance, never the data's min/max"
        )

    def per_column(v, name):
        vals = list(v) if isinstance(v, (list, tuple, np.ndarray)) else [v]
        if len(vals) != k:
            raise UStatError(f"{statistic} needs {k} {name} value(s) (one per private column), got {len(vals)}")
        return vals

    lo, hi = per_column(lower, "lower"), per_column(upper, "upper")
    dec = [None] * k if decimals is None else per_column(decimals, "decimals")
    names = ("x", "y") if k == 2 else ("scores" if statistic == "auc" else "x",)
    try:
        doms = tuple(PublicDomain(a, b, d, f"column {nm}") for a, b, d, nm in zip(lo, hi, dec, names))
        for d in doms:
            d.span  # noqa: B018 - validates the grid (at least 1 step, fewer than 2^62)
    except PrivacyParameterError as exc:
        raise UStatError(str(exc)) from None
    return doms


def word_width(span: int) -> int:
    """Circuit word (8/16/32/64 bits) holding the public grid span."""
    need = max(1, int(span).bit_length())
    for w in (8, 16, 32, 64):
        if need <= w:
            return w
    raise UStatError(f"the public grid span {span} does not fit in 64 bits")


def circuit_width(doms, bits: int | None) -> int:
    """The circuit word for the public domains ``doms``: the narrowest that holds them, or ``bits`` if given
    (8..64, and wide enough for the domain; :class:`UStatError` otherwise)."""
    span = max(d.span for d in doms)
    if bits is None:
        return word_width(span)
    if isinstance(bits, bool) or int(bits) != bits or not 8 <= int(bits) <= 64:
        raise UStatError(f"bits must be an integer in 8..64, got {bits!r}")
    need = span.bit_length()
    if need > int(bits):
        raise UStatError(
            f"the public domain needs {need} bits ({span} grid steps); "
            f"--bits {bits} is too narrow: widen it or lower the decimals"
        )
    return int(bits)


def public_params(statistic: str, *, lower, upper, decimals=None, bits: int | None = None) -> PublicParams:
    """The :class:`PublicParams` of ``statistic`` on the public domain (``bits``: the circuit word, optional)."""
    if statistic not in STATISTICS:
        raise UStatError(f"unknown statistic {statistic!r}; choose from {STATISTICS}")
    doms = domains_of(statistic, lower, upper, decimals)
    width = circuit_width(doms, bits)
    if statistic == "gini":
        return PublicParams("gini", doms, width, doms[0].step, doms[0].span)
    return PublicParams(statistic, doms, width, 1.0, 2)


def natural_range(pp) -> tuple[float, float]:
    """The statistic's natural range: gini [0, upper - lower], kendall's tau-a [-1, 1], AUC [0, 1]."""
    if pp.statistic == "gini":
        return 0.0, pp.domains[0].upper - pp.domains[0].lower
    return (-1.0, 1.0) if pp.statistic == "kendall" else (0.0, 1.0)


def encode_input(pp: PublicParams, value: float, value2: float | None = None) -> tuple[int, int]:
    """One owner's circuit input: its value(s) clamped into the public domain and put on the grid.

    Returns (circuit word, number of coordinates clamped).  kendall packs
    (x, y) as x | y << bits (:func:`pairwise.circuits.kernels.pack_pair`);
    gini and auc take the one coordinate.
    """
    from pairwise.circuits.kernels import pack_pair
    from pairwise.dp.bounds import to_fixed_point

    vals = [value] if pp.statistic != "kendall" else [value, value2]
    if pp.statistic == "kendall" and value2 is None:
        raise UStatError("kendall needs two values per user (x and y)")
    if pp.statistic != "kendall" and value2 is not None:
        raise UStatError(f"{pp.statistic} takes one value per user, got a second one")
    ks, moved = [], 0
    for v, d in zip(vals, pp.domains):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise UStatError(f"a value must be a number, got {v!r}") from None
        if not math.isfinite(f):
            raise UStatError(f"a value must be a finite number, got {v!r}")
        k, m = to_fixed_point([f], d)
        ks.append(int(k[0]))
        moved += m
    word = pack_pair(ks[0], ks[1], pp.bits) if pp.statistic == "kendall" else ks[0]
    return word, moved


def per_pair_epsilon(epsilon: float, design: str, P: int, n: int, delta_slack: float) -> tuple[Fraction, int]:
    """Budget of one pair's release and the number of releases per user.

    ``subsample``: each user is in at most P pairs, basic composition, eps/P
    (Theorem 5).  ``all``: each user is in n - 1 pairs; the largest eps0 whose
    advanced composition (Dwork-Rothblum-Vadhan, via
    :func:`pairwise.dp.accounting.advanced_composition`, rounded up) over k = n - 1
    releases stays within eps, found by bisection.  Either is capped at
    :data:`MAX_PAIR_EPSILON`, the noise gadget's largest epsilon (a smaller
    per-pair budget only adds noise, so the guarantee still holds).
    """
    from pairwise.dp.accounting import advanced_composition

    if design == "subsample":
        eps = Fraction(repr(float(epsilon))) / P  # the decimal the user typed, exactly
        return min(eps, MAX_PAIR_EPSILON), P
    k = n - 1
    lo, hi = 0.0, float(epsilon)
    for _ in range(80):
        mid = (lo + hi) / 2
        if mid > 0 and advanced_composition(mid, 0.0, k, delta_slack).epsilon <= epsilon:
            lo = mid
        else:
            hi = mid
    if lo <= 0:
        raise UStatError(f"no per-pair budget satisfies eps={epsilon} over {k} pairs")
    return min(Fraction(lo).limit_denominator(10**12), MAX_PAIR_EPSILON), k


def build_noisy_kernel(pp: PublicParams, eps_pair: Fraction, pair_delta: Fraction, noise: str = "auto"):
    """The kernel-plus-noise circuit of one pair (:class:`pairwise.circuits.noise.NoisyCircuit`)."""
    from pairwise.circuits.noise import noisy_kernel
    from pairwise.dp.errors import NoiseParameterError

    try:
        return noisy_kernel(
            pp.statistic, pp.bits, False, epsilon=eps_pair, sensitivity=pp.range_, mechanism=noise, delta=pair_delta
        )
    except NoiseParameterError as exc:
        raise UStatError(f"no {noise} noise for this statistic and budget: {exc}") from None


def estimate_from_sum(nc, pp, total: int, count: int) -> float:
    """Step 3: the mean of the per-pair unbiased estimates, in natural units, from the exact integer sum
    ``total`` of the reported values (:meth:`NoisyCircuit.reported_values`) of ``count`` pairs.  ``pp``:
    :class:`PublicParams` (or the driver's ``PreparedData``, which carries the same public fields)."""
    if count < 1:
        raise UStatError("no pair completed: there is nothing to average")
    slope, intercept = nc.debias
    conv = {"gini": pp.scale, "kendall": 1.0, "auc": 0.5}[pp.statistic]
    return (float(slope) * (total / count) + float(intercept)) * float(nc.unit) * conv


def valid_output(nc, value: object) -> bool:
    """Whether ``value`` can be a decoded output of ``nc`` (a k-RR code, or value + noise in range)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    if nc.codes is not None:
        return 0 <= value < len(nc.codes)
    lo, hi = nc.value_range
    zlo, zhi = nc.params.noise_range
    return lo + zlo <= value <= hi + zhi
