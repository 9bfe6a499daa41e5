"""Parameter classes of the dyadic noise gadgets: coins m / 2^a, their costs, moments and k-RR debiasing.

What it does
    * :class:`BernoulliParams` -- one coin with P[1] = m / 2^a exactly;
    * :class:`DiscreteLaplaceParams` -- K geometric digits, digit i a coin
      m_i / 2^a_i, combined by the ``difference`` (discrete Laplace) or the
      ``signed`` (signed geometric) construction; exact mean and variance;
    * :class:`RandomizedResponseParams` and :class:`KaryRRParams` -- the flip
      probability m / 2^a, certified at construction to be at least the
      ideal 1/(1 + e^eps) (resp. (k - 1)/(e^eps + k - 1)) against a rational
      lower bound of e^eps (:func:`pairwise.dp.exact.exp_bounds`);
    * :func:`krr_estimator` -- the unbiased affine debiasing of a k-RR
      report and its exact variance (the one k-RR estimator,
      :class:`pairwise.dp.mechanisms.KRREstimator`, at phi = m / 2^a).

    Every class validates its parameters at construction and raises
    :class:`~pairwise.dp.errors.NoiseParameterError`.  ``random_bits`` and
    ``and_gates`` give the cost of the in-circuit gadget
    (:mod:`pairwise.circuits.noise`): a coin m / 2^a with m odd takes a
    random bits per party and a - 1 AND gates.

Security model
    Pure math on public parameters.  The privacy analysis is in
    :mod:`pairwise.dp.dyadic.guarantee`, the parameter searches in
    :mod:`pairwise.dp.dyadic.search`; derivations in ``docs/noise.md``.

Follows
    [DKMMN06] (geometric digits are independent coins); [BBGK20, Sec. 3,
    Eq. 9] (k-RR debiasing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ..errors import NoiseParameterError
from ..exact import (
    ceil_div,
    check_fraction,
    check_noise_epsilon,
    check_positive_int,
    exp_bounds,
    ln_upper,
    trailing_zeros,
)
from ..mechanisms import KRREstimator

__all__ = [
    "MAX_ACC",
    "MAX_BITS",
    "BernoulliParams",
    "bernoulli_params",
    "CONSTRUCTIONS",
    "CONSTRUCTION_MECHANISM",
    "DiscreteLaplaceParams",
    "discrete_laplace_params",
    "RandomizedResponseParams",
    "KRR_K",
    "KaryRRParams",
    "KRREstimator",
    "krr_estimator",
]

#: Precision limits accepted for coins and supports.
MAX_ACC = 256
MAX_BITS = 120


@lru_cache(maxsize=8192)
def _digit_ratio_bounds(eps: Fraction, sensitivity: int, i: int) -> tuple[Fraction, Fraction]:
    """Bounds on r*_i = alpha^(2^i) = exp(-2^i eps / S), clamped to [0, 1]."""
    lo, hi = exp_bounds(-Fraction(1 << i) * eps / sensitivity)
    return lo, min(hi, Fraction(1))


def _digit_prob_bounds(eps: Fraction, sensitivity: int, i: int) -> tuple[Fraction, Fraction]:
    """Bounds on p*_i = r*_i / (1 + r*_i), the ideal probability of digit i (increasing in r*)."""
    lo, hi = _digit_ratio_bounds(eps, sensitivity, i)
    return lo / (1 + lo), hi / (1 + hi)


def _coin_width(m: int, acc: int) -> int:
    """Random bits consumed by a coin m / 2^acc (trailing zeros of m need none)."""
    return acc - trailing_zeros(m)


def _coin_ands(m: int, acc: int) -> int:
    return max(0, _coin_width(m, acc) - 1)


def _check_numerator(m: int, acc: int, what: str) -> None:
    if not 0 < m < (1 << acc):
        raise NoiseParameterError(
            f"{what}: numerator {m} must lie in (0, 2^{acc}) (a coin that is never or always 1 needs no randomness)"
        )


class _CoinCost:
    """Cost of one Bernoulli(numerator / 2^acc) coin: random input bits per party and AND gates."""

    numerator: int
    acc: int

    @property
    def random_bits(self) -> int:
        return _coin_width(self.numerator, self.acc)

    @property
    def and_gates(self) -> int:
        return _coin_ands(self.numerator, self.acc)


@dataclass(frozen=True)
class BernoulliParams(_CoinCost):
    """A coin with P[1] = numerator / 2^acc exactly."""

    acc: int
    numerator: int

    def __post_init__(self) -> None:
        check_positive_int(self.acc, "acc", MAX_ACC)
        _check_numerator(self.numerator, self.acc, "Bernoulli coin")

    @property
    def probability(self) -> Fraction:
        return Fraction(self.numerator, 1 << self.acc)


def bernoulli_params(p: object, acc: int, rounding: str = "nearest") -> BernoulliParams:
    """Round p (exact rational) to m / 2^acc: ``nearest`` (ties up), ``up`` or ``down``."""
    acc = check_positive_int(acc, "acc", MAX_ACC)
    pf = check_fraction(p, "p")
    if not 0 < pf < 1:
        raise NoiseParameterError(f"p must lie in (0, 1), got {p!r}")
    scaled = pf * (1 << acc)
    if rounding == "nearest":
        m = math.floor(scaled + Fraction(1, 2))
    elif rounding == "up":
        m = math.ceil(scaled)
    elif rounding == "down":
        m = math.floor(scaled)
    else:
        raise NoiseParameterError(f"rounding must be 'nearest', 'up' or 'down', got {rounding!r}")
    if not 0 < m < (1 << acc):
        raise NoiseParameterError(f"p={p!r} rounds to {m}/2^{acc}; use a larger acc")
    return BernoulliParams(acc, m)


#: Constructions of two-sided geometric noise from independent geometric digits.
CONSTRUCTIONS = ("difference", "signed")
#: Mechanism name reported for each construction.
CONSTRUCTION_MECHANISM = {"difference": "discrete_laplace", "signed": "signed_geometric"}


@dataclass(frozen=True)
class DiscreteLaplaceParams:
    """Parameters of the geometric, discrete Laplace and signed-geometric gadgets.

    ``epsilon`` (exact rational) and ``sensitivity`` S (integer, output units)
    define the ideal alpha = exp(-epsilon / S).  Each geometric X has ``bits``
    digits K; digit i is 1 with probability ``numerators[i] / 2^accs[i]``
    (``accs`` defaults to ``acc`` for every digit; when given, ``acc`` is
    set to max(accs)).  ``construction``:

    * ``"difference"``: Z = X1 - X2 of two independent geometrics, the
      discrete Laplace (mechanism name ``discrete_laplace``);
    * ``"signed"``: one geometric X and a uniform sign bit s, Z = X if s = 0
      and Z = -(X + 1) = ~X if s = 1 (mechanism ``signed_geometric``): a
      discrete Laplace centred at -1/2, P[Z = z] ~ alpha^(|z + 1/2| - 1/2),
      mean -1/2, variance 2 alpha / (1 - alpha)^2 + 1/4 in the ideal.
    """

    epsilon: Fraction
    sensitivity: int
    bits: int
    acc: int
    numerators: tuple[int, ...]
    target_delta: Fraction | None = None
    accs: tuple[int, ...] | None = None
    construction: str = "difference"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_noise_epsilon(self.epsilon))
        check_positive_int(self.sensitivity, "sensitivity")
        check_positive_int(self.bits, "bits (support 2^bits)", MAX_BITS)
        if self.construction not in CONSTRUCTIONS:
            raise NoiseParameterError(f"construction must be one of {CONSTRUCTIONS}, got {self.construction!r}")
        if self.accs is None:
            check_positive_int(self.acc, "acc", MAX_ACC)
            accs = (int(self.acc),) * self.bits
        else:
            accs = tuple(check_positive_int(a, "digit precision", MAX_ACC) for a in self.accs)
            if len(accs) != self.bits:
                raise NoiseParameterError(f"need {self.bits} digit precisions, got {len(accs)}")
            object.__setattr__(self, "acc", max(accs))
        object.__setattr__(self, "accs", accs)
        nums = tuple(int(m) for m in self.numerators)
        if len(nums) != self.bits:
            raise NoiseParameterError(f"need {self.bits} digit numerators, got {len(nums)}")
        for i, (m, a) in enumerate(zip(nums, accs)):
            _check_numerator(m, a, f"digit {i}")
            if 2 * m > (1 << a):
                raise NoiseParameterError(
                    f"digit {i}: probability {m}/2^{a} exceeds 1/2; geometric digits are at most 1/2"
                )
        object.__setattr__(self, "numerators", nums)

    @property
    def mechanism(self) -> str:
        return CONSTRUCTION_MECHANISM[self.construction]

    @property
    def support(self) -> int:
        """Each geometric lies in [0, 2^K)."""
        return 1 << self.bits

    @property
    def noise_range(self) -> tuple[int, int]:
        """Smallest and largest noise value: +-(2^K - 1) (difference) or [-2^K, 2^K - 1] (signed)."""
        top = self.support - 1
        return (-top, top) if self.construction == "difference" else (-top - 1, top)

    @property
    def digit_accs(self) -> tuple[int, ...]:
        """The coin precision of each digit (``accs`` after ``__post_init__``, which fills it in)."""
        assert self.accs is not None
        return self.accs

    @property
    def digit_probabilities(self) -> tuple[Fraction, ...]:
        return tuple(Fraction(m, 1 << a) for m, a in zip(self.numerators, self.digit_accs))

    @property
    def coin_widths(self) -> tuple[int, ...]:
        return tuple(_coin_width(m, a) for m, a in zip(self.numerators, self.digit_accs))

    @property
    def geometric_random_bits(self) -> int:
        """Uniform bits (per party) consumed by one geometric."""
        return sum(self.coin_widths)

    @property
    def geometric_and_gates(self) -> int:
        return sum(_coin_ands(m, a) for m, a in zip(self.numerators, self.digit_accs))

    @property
    def random_bits(self) -> int:
        """Uniform bits per party for one noise sample (two geometrics, or one and a sign bit)."""
        g = self.geometric_random_bits
        return 2 * g if self.construction == "difference" else g + 1

    @property
    def and_gates(self) -> int:
        """AND gates of the noise gadget: two geometrics and a K-bit subtraction, or one geometric (signed)."""
        g = self.geometric_and_gates
        return 2 * g + self.bits if self.construction == "difference" else g

    @property
    def alpha(self) -> float:
        return math.exp(-float(self.epsilon) / self.sensitivity)

    @property
    def geometric_mean(self) -> Fraction:
        return sum((p * (1 << i) for i, p in enumerate(self.digit_probabilities)), Fraction(0))

    @property
    def geometric_variance(self) -> Fraction:
        """Var X = sum_i 4^i p_i (1 - p_i) (the digits are independent)."""
        return sum((p * (1 - p) * (1 << (2 * i)) for i, p in enumerate(self.digit_probabilities)), Fraction(0))

    @property
    def noise_mean(self) -> Fraction:
        """E Z exactly: 0 (difference) or -1/2 (signed: E[-(X + 1)] and E[X] average to -1/2)."""
        return Fraction(0) if self.construction == "difference" else Fraction(-1, 2)

    @property
    def noise_variance(self) -> Fraction:
        """Var Z exactly: 2 Var X (difference) or Var X + (E X)^2 + E X + 1/4 (signed)."""
        v = self.geometric_variance
        if self.construction == "difference":
            return 2 * v
        m = self.geometric_mean
        return v + m * m + m + Fraction(1, 4)


def discrete_laplace_params(
    epsilon: object, sensitivity: int, bits: int, acc: int, construction: str = "difference"
) -> DiscreteLaplaceParams:
    """Digits of alpha = exp(-epsilon / S) rounded *up* to acc bits each, support 2^bits (uniform precision)."""
    eps = check_noise_epsilon(epsilon)
    s = check_positive_int(sensitivity, "sensitivity")
    k = check_positive_int(bits, "bits", MAX_BITS)
    acc = check_positive_int(acc, "acc", MAX_ACC)
    nums = []
    for i in range(k):
        _, phi = _digit_prob_bounds(eps, s, i)
        nums.append(max(1, ceil_div(phi.numerator << acc, phi.denominator)))
    return DiscreteLaplaceParams(eps, s, k, acc, tuple(nums), construction=construction)


# ---------------------------------------------------------------------- randomized response
@dataclass(frozen=True)
class RandomizedResponseParams(_CoinCost):
    """Randomized response on one bit: flip with probability numerator / 2^acc >= 1 / (1 + e^epsilon)."""

    epsilon: Fraction
    acc: int
    numerator: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_noise_epsilon(self.epsilon))
        check_positive_int(self.acc, "acc", MAX_ACC)
        _check_numerator(self.numerator, self.acc, "randomized response flip")
        if 2 * self.numerator >= (1 << self.acc):
            raise NoiseParameterError(
                f"flip probability {self.numerator}/2^{self.acc} >= 1/2 carries no information; use a larger acc"
            )
        # eps-DP needs p >= 1/(1 + e^eps); (1 + e_lo) p >= 1 certifies it rigorously.
        if Fraction(self.numerator, 1 << self.acc) * (1 + exp_bounds(self.epsilon)[0]) < 1:
            raise NoiseParameterError(
                f"flip probability {self.numerator}/2^{self.acc} is not certified >= 1/(1+e^eps) for eps={float(self.epsilon)}: not eps-DP"
            )

    @property
    def flip_probability(self) -> Fraction:
        return Fraction(self.numerator, 1 << self.acc)

    def effective_epsilon(self) -> Fraction:
        """A rational upper bound of ln((2^acc - m) / m), the actual epsilon (<= epsilon)."""
        return min(self.epsilon, ln_upper(Fraction((1 << self.acc) - self.numerator, self.numerator)))


# ---------------------------------------------------------------------- k-ary randomized response
#: Numbers of values for which k-ary randomized response is built in the circuit.
KRR_K = (2, 3)


@dataclass(frozen=True)
class KaryRRParams(_CoinCost):
    """k-ary randomized response: keep the value with probability 1 - phi, else report one of the
    other k - 1 values uniformly, phi = numerator / 2^acc (k in :data:`KRR_K`).

    As additive noise on Z_k (value index i -> i + d mod k): P[d = 0] = 1 - phi,
    P[d = j] = phi / (k - 1) for j != 0, independent of the value.  Pure
    epsilon-DP against *any* change of the value iff (1 - phi)(k - 1) / phi <= e^eps,
    i.e. phi >= (k - 1) / (e^eps + k - 1); certified here with a rational
    lower bound of e^eps.
    """

    epsilon: Fraction
    k: int
    acc: int
    numerator: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_noise_epsilon(self.epsilon))
        if self.k not in KRR_K:
            raise NoiseParameterError(f"k-ary randomized response is built for k in {KRR_K}, got k={self.k!r}")
        check_positive_int(self.acc, "acc", MAX_ACC)
        _check_numerator(self.numerator, self.acc, "k-ary randomized response flip")
        phi = self.flip_probability
        if phi * self.k >= self.k - 1:
            raise NoiseParameterError(f"flip probability {phi} >= (k-1)/k carries no information; use a larger epsilon")
        if phi * (exp_bounds(self.epsilon)[0] + self.k - 1) < self.k - 1:
            raise NoiseParameterError(
                f"flip probability {self.numerator}/2^{self.acc} is not certified >= (k-1)/(e^eps+k-1) for eps={float(self.epsilon)}: not eps-DP"
            )

    @property
    def mechanism(self) -> str:
        return "krr"

    @property
    def flip_probability(self) -> Fraction:
        return Fraction(self.numerator, 1 << self.acc)

    @property
    def keep_probability(self) -> Fraction:
        return 1 - self.flip_probability

    @property
    def other_probability(self) -> Fraction:
        """Probability of each particular other value: phi / (k - 1)."""
        return self.flip_probability / (self.k - 1)

    @property
    def random_bits(self) -> int:
        """The flip coin's bits, plus one uniform bit choosing among the two other values (k = 3)."""
        return _coin_width(self.numerator, self.acc) + (1 if self.k == 3 else 0)

    @property
    def and_gates(self) -> int:
        """The flip coin, plus 4 ANDs for the two multiplexers of the Z_3 addition (k = 3)."""
        return _coin_ands(self.numerator, self.acc) + (4 if self.k == 3 else 0)

    def effective_epsilon(self) -> Fraction:
        """A rational upper bound of ln((1 - phi)(k - 1) / phi), the actual epsilon (<= epsilon)."""
        phi = self.flip_probability
        return min(self.epsilon, ln_upper((1 - phi) * (self.k - 1) / phi))


def krr_estimator(params: KaryRRParams, values: Sequence[int]) -> KRREstimator:
    """The debiasing of :class:`KaryRRParams` for the kernel values ``values`` (value of code i = values[i]).

    :meth:`KRREstimator.for_krr` with the exact flip probability m / 2^a.
    """
    vals = tuple(int(v) for v in values)
    if len(vals) != params.k or len(set(vals)) != params.k:
        raise NoiseParameterError(f"k-RR with k={params.k} needs {params.k} distinct values, got {values!r}")
    return KRREstimator.for_krr(params.k, params.flip_probability, vals)
