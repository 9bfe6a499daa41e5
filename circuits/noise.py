"""Differential-privacy noise sampled inside garbled circuits, with exact (epsilon, delta) reports.

What it does
    Builds the noise gadgets of ustats-local-model-and-beyond, Sec. 5 and
    App. C.2 ("circuits for local randomizers"), and composes them with the
    kernels of :mod:`pairwise.circuits.kernels`:

    * **Bernoulli coin.**  Each party feeds uniform bits (input groups ``rx``,
      garbler, and ``ry``, evaluator); the circuit XORs them (free) into a
      uniform ``u`` and outputs ``[u < m]``, so P[coin = 1] = m / 2^acc
      exactly.  The comparison with the constant ``m`` is a ripple of one AND
      per bit; trailing zero bits of ``m`` are dropped first (only
      ``acc - tz(m)`` random bits are consumed, ``acc - tz(m) - 1`` ANDs).
    * **Geometric** (one-sided, P[X = x] ~ alpha^x): the binary digits of a
      geometric variable are independent, digit i being
      Bernoulli(alpha^(2^i) / (1 + alpha^(2^i))); the gadget samples digits
      0..K-1 with one coin each (support 0..2^K - 1).
    * **Discrete Laplace** (two-sided geometric, P[Z = z] ~ alpha^|z|): the
      difference X1 - X2 of two independent geometrics, K ANDs for the
      subtraction.  For an integer query of sensitivity S and budget eps,
      alpha = exp(-eps / S).
    * **Randomized response** for a 1-bit kernel: output ``bit XOR flip``
      with flip ~ Bernoulli(m / 2^acc), m / 2^acc >= 1 / (1 + e^eps).
    * **Composition** (:func:`noisy_kernel`, :func:`noisy_binary_kernel`):
      kernel circuit, then noise; the output ``out`` is the kernel value in
      fixed point plus the noise, wide enough never to overflow.  Neither
      party alone knows the noise: it is a function of ``rx XOR ry``.

    Every gadget is returned as a :class:`NoisyCircuit`: the immutable
    :class:`~pairwise.circuits.ir.Circuit` plus its :class:`NoiseGuarantee`, its
    parameters and the units of its output.

Exactness of the reported guarantee
    The coin probabilities are rationals m_i / 2^acc, so the gadget's output
    distribution is known exactly: P[X = x] = N(x) / 2^(acc K) with integer
    N(x) = prod_i (m_i if bit i of x else 2^acc - m_i), and the discrete
    Laplace pmf is q(z) = sum_x P(x) P(x + z).  The ideal reference is the
    untruncated discrete Laplace with alpha = exp(-eps/S) exactly.

    * Irrational constants (e^eps, alpha^(2^i)) enter only through rational
      lower and upper bounds (:func:`exp_bounds`: :mod:`decimal` at 110
      significant digits, whose ``exp`` is correctly rounded, widened by a
      proven relative margin, then rounded outward to multiples of 2^-640).
    * ``method == "exact"`` (support 2^K <= 2^EXACT_MAX_BITS and
      S * 2^(K+1) <= EXACT_MAX_WORK): delta is computed from the exact
      pmf with integer arithmetic,
          delta = max_{1 <= s <= S} sum_z max(0, q(z) - e^eps q(z + s)),
      with e^eps replaced by a rational lower bound within 1e-100 relative,
      so the value is an upper bound that is tight to ~100 digits (shifts
      -s give the same value because q is symmetric).
    * ``method == "bound"`` (larger supports): a rigorous upper bound,
      derived as follows (proof in the docstring of :func:`delta_bound`):
      by data processing through the independent X1, the hockey-stick
      divergence of Z against Z + s is at most that of X against X + s
      (the one-sided geometric moved towards its truncated tail); for
      x + s < 2^K the ratio P(x + s) / P(x) equals alpha^s (the ideal) times a
      product of per-bit factors u_i^(+-1), u_i = r_i / alpha^(2^i),
      r_i = p_i / (1 - p_i), over the bits that flip, so
          delta <= P[X + S >= 2^K]
                 + sum_i g_i ((1 - p_i) [1 - u_i]_+ + p_i [1 - 1/u_i]_+),
      where g_i = 1 when 2^i <= S and otherwise the probability that adding
      S to X carries into bit i (all terms are exact rationals computed by a
      carry-chain recursion, rounded up).  The bound is first-order tight;
      the tests check it against the exact delta on small supports.
    * ``tv_to_ideal`` always is the coupling bound
          TV(Z, Z*) <= 2 (sum_i |p_i - p*_i| + alpha^(2^K)),
      Z* the ideal (untruncated, unrounded) discrete Laplace.
    * Randomized response: flip probability rounded *up*, so the actual
      eps' = ln((2^acc - m) / m) <= eps; the report states eps' rounded up
      (delta = 0, pure DP).

Parameter selection (:func:`choose_discrete_laplace`)
    Target delta = 2^-lam / n_samples (n_samples releases then spend at most
    2^-lam of delta in total under basic composition), unless
    ``target_delta`` is given.  Coin probabilities are rounded *up* (ceil) to
    acc bits, which makes the rounding error of rare digits almost harmless:
    a digit that is too likely only hurts when it flips from 1 to 0.  Among
    K = K0 .. K0+3 (K0 the smallest support that can hold the tail) and, for
    each K, the smallest acc (bisection) whose *bound* satisfies both
    delta <= target and tv_to_ideal <= target, the pair with the fewest AND
    gates wins.  The reported delta is the exact one when computable (it is
    never larger than the bound).

Units
    A kernel value h in its natural units (see :data:`KERNEL_RANGES`) is
    put into fixed point by ``h >> t`` with t = max(0, bitlen(hi - lo) -
    fixed_point_bits) (floor division by 2^t); one output unit is 2^t natural
    units (:attr:`NoisyCircuit.unit`).  ``sensitivity`` is in output units
    and defaults to the full range of the scaled kernel, i.e. each release is
    eps-DP against any change of one pair's kernel value.  The 2PC
    subsampling protocol of Theorem 5 (kernel in [0, 1], each user in P
    pairs, Lap(P/eps)) calls this with ``epsilon = eps / P`` and the default
    sensitivity (the kernel's range); the estimate divides ``out * unit`` by
    the kernel's normalizer.

Security model
    Semi-honest two-party computation (garbled circuits).  The noise is a
    deterministic function of rx XOR ry; as long as one party draws its share
    uniformly from the OS CSPRNG (:func:`random_input_bits`), the noise is
    distributed as stated and hidden from the other party, and the garbled
    evaluation reveals only ``out``.  :func:`simulate_random_input_bits`
    and the ``simulate_*`` samplers use a seeded numpy generator and are for
    tests only.  The exact samplers (:func:`sample_discrete_laplace`) draw
    from ``os.urandom`` and reproduce the gadget's distribution exactly
    (integer comparisons only, Mironov 2012's floating-point pitfalls do not
    apply).

Follows
    ustats-local-model-and-beyond, Theorem 5 and App. C.2 (noise in the
    circuit, XOR of both parties' random bits); Dwork, Kenthapadi, McSherry,
    Mironov, Naor, "Our data, ourselves" (EUROCRYPT 2006: biased coins from
    shared uniform bits, geometric digits); Champion, shelat, Ullman,
    "Securely sampling biased coins with applications to differential
    privacy" (CCS 2019); DESIGN.md "dp: exact where it matters".
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import numpy as np

from pairwise.dp.errors import PrivacyParameterError
from pairwise.dp.samplers import as_fraction

from .builder import FALSE, TRUE, Builder, Int
from .ir import EVALUATOR, GARBLER, Circuit, CircuitError, bits_to_ints

__all__ = [
    "NoiseParameterError",
    "NoiseGuarantee",
    "NoisyCircuit",
    "BernoulliParams",
    "DiscreteLaplaceParams",
    "RandomizedResponseParams",
    "KERNEL_RANGES",
    "BINARY_KERNELS",
    "exp_bounds",
    "bernoulli_params",
    "discrete_laplace_params",
    "choose_discrete_laplace",
    "choose_randomized_response",
    "delta_bound",
    "delta_exact",
    "discrete_laplace_guarantee",
    "randomized_response_guarantee",
    "geometric_pmf",
    "discrete_laplace_pmf",
    "less_than_const",
    "bernoulli_bit",
    "geometric_value",
    "discrete_laplace_value",
    "bernoulli_gadget",
    "geometric_gadget",
    "discrete_laplace_gadget",
    "randomized_response_gadget",
    "noisy_kernel",
    "noisy_binary_kernel",
    "random_input_bits",
    "simulate_random_input_bits",
    "sample_discrete_laplace",
    "simulate_discrete_laplace",
    "decode_output",
    "EXACT_MAX_BITS",
    "EXACT_MAX_WORK",
]

#: Largest K (support 2^K of each geometric) for which delta is computed exactly.
EXACT_MAX_BITS = 10
#: Largest S * 2^(K+1) (shift-by-support products) for the exact delta.
EXACT_MAX_WORK = 1 << 18
#: Precision limits accepted for coins and supports.
MAX_ACC = 256
MAX_BITS = 120
#: Sampler limit (values must fit numpy int64).
SAMPLER_MAX_BITS = 62

_DEC_PREC = 110  # significant digits of the decimal exp/ln evaluations
_GRID = 640  # outward rounding of irrational bounds to multiples of 2^-_GRID
_EXP_CAP = 2000  # exp(-t) for t > _EXP_CAP is bounded by [0, exp(-_EXP_CAP)]


class NoiseParameterError(CircuitError):
    """A noise parameter (epsilon, sensitivity, precision, support, target delta) is out of range."""


# ---------------------------------------------------------------------- exact helpers
def _fraction(value: object, name: str) -> Fraction:
    """An int, Fraction or finite float, converted exactly (:func:`pairwise.dp.samplers.as_fraction`)."""
    try:
        return as_fraction(value, name)
    except PrivacyParameterError as exc:
        raise NoiseParameterError(str(exc)) from None


def _epsilon(value: object) -> Fraction:
    eps = _fraction(value, "epsilon")
    if not 0 < eps <= 64:
        raise NoiseParameterError(f"epsilon must lie in (0, 64], got {value!r}")
    if eps < Fraction(1, 1 << 40):
        raise NoiseParameterError(f"epsilon={value!r} is below 2^-40; such a small epsilon is not supported")
    return eps


def _positive_int(value: object, name: str, upper: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise NoiseParameterError(f"{name} must be a positive integer, got {value!r}")
    if upper is not None and value > upper:
        raise NoiseParameterError(f"{name} must be at most {upper}, got {value!r}")
    return int(value)


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _up(x: Fraction) -> Fraction:
    """Smallest multiple of 2^-_GRID that is >= x."""
    return Fraction(_ceil_div(x.numerator << _GRID, x.denominator), 1 << _GRID)


def _down(x: Fraction) -> Fraction:
    """Largest multiple of 2^-_GRID that is <= x."""
    return Fraction((x.numerator << _GRID) // x.denominator, 1 << _GRID)


def _to_float_up(x: Fraction) -> float:
    """The smallest double >= x (x >= 0)."""
    f = float(x)
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


@lru_cache(maxsize=4096)
def exp_bounds(t: Fraction) -> tuple[Fraction, Fraction]:
    """Rational bounds lo <= exp(t) <= hi, dyadic with denominators 2^640.

    Evaluated with :mod:`decimal` at 110 significant digits.  ``Decimal.exp``
    is correctly rounded (half an ulp, relative error <= 10^-109); the decimal
    conversion of t has relative error <= 10^-109, hence absolute error
    <= |t| 10^-109, which changes exp by a relative factor <= 2 |t| 10^-109 for
    |t| <= 10^6.  The bounds widen the decimal value by the relative margin
    (2 |t| + 2) 10^-109, then round outward to multiples of 2^-640.  For
    t < -2000 the bounds are [0, exp(-2000)] (monotonicity).
    """
    t = Fraction(t)
    if t < -_EXP_CAP:
        return Fraction(0), exp_bounds(Fraction(-_EXP_CAP))[1]
    if t > _EXP_CAP:
        raise NoiseParameterError(f"exp({float(t):.4g}) is outside the supported range")
    with localcontext() as ctx:
        ctx.prec = _DEC_PREC
        ctx.Emin = -(10**8)
        ctx.Emax = 10**8
        v = (Decimal(t.numerator) / Decimal(t.denominator)).exp()
    vf = Fraction(v)
    margin = Fraction(2 * math.ceil(abs(t)) + 2, 10 ** (_DEC_PREC - 1))
    lo, hi = _down(vf * (1 - margin)), _up(vf * (1 + margin))
    return max(lo, Fraction(0)), hi


def _ln_upper(x: Fraction) -> Fraction:
    """A rational upper bound of ln(x) for x >= 1 (decimal ln, correctly rounded, widened)."""
    with localcontext() as ctx:
        ctx.prec = _DEC_PREC
        v = (Decimal(x.numerator) / Decimal(x.denominator)).ln()
    # the argument's relative error 10^-109 moves ln by <= 2 * 10^-109; ln rounds by half an ulp.
    vf = Fraction(v)
    return vf + (abs(vf) + 4) * Fraction(1, 10 ** (_DEC_PREC - 1))


def _ln_lower(x: Fraction) -> Fraction:
    with localcontext() as ctx:
        ctx.prec = _DEC_PREC
        v = (Decimal(x.numerator) / Decimal(x.denominator)).ln()
    vf = Fraction(v)
    return vf - (abs(vf) + 4) * Fraction(1, 10 ** (_DEC_PREC - 1))


@lru_cache(maxsize=8192)
def _digit_ratio_bounds(eps: Fraction, sensitivity: int, i: int) -> tuple[Fraction, Fraction]:
    """Bounds on r*_i = alpha^(2^i) = exp(-2^i eps / S), clamped to [0, 1]."""
    lo, hi = exp_bounds(-Fraction(1 << i) * eps / sensitivity)
    return lo, min(hi, Fraction(1))


def _digit_prob_bounds(eps: Fraction, sensitivity: int, i: int) -> tuple[Fraction, Fraction]:
    """Bounds on p*_i = r*_i / (1 + r*_i), the ideal probability of digit i (increasing in r*)."""
    lo, hi = _digit_ratio_bounds(eps, sensitivity, i)
    return lo / (1 + lo), hi / (1 + hi)


# ---------------------------------------------------------------------- guarantee & params
@dataclass(frozen=True)
class NoiseGuarantee:
    """The privacy guarantee of a noise gadget, computed from its exact distribution.

    ``epsilon`` and ``delta`` are doubles rounded *up* from exact rationals
    (``delta_rational``).  ``method`` says how delta was obtained:
    ``"exact"`` (from the exact pmf), ``"bound"`` (rigorous upper bound, see
    :func:`delta_bound`) or ``"pure"`` (delta = 0).  ``delta_bound`` is the
    rigorous bound, always computed (``>= delta``).  ``tv_to_ideal`` bounds
    the total variation distance between the gadget's noise and the ideal
    mechanism's noise (untruncated discrete Laplace with alpha = e^(-eps/S),
    or the ideal flip probability).  ``target_delta`` is the delta the
    parameters were chosen for (None if chosen by hand).
    """

    epsilon: float
    delta: float
    method: str
    delta_bound: float
    tv_to_ideal: float
    delta_rational: Fraction = field(repr=False, default=Fraction(0))
    target_delta: float | None = None

    @property
    def is_pure(self) -> bool:
        return self.delta == 0.0

    def privacy(self):
        """As a :class:`pairwise.dp.accounting.PrivacyGuarantee` (for composition)."""
        from pairwise.dp.accounting import PrivacyGuarantee

        return PrivacyGuarantee(self.epsilon, self.delta)

    def as_dict(self) -> dict:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "method": self.method,
            "delta_bound": self.delta_bound,
            "tv_to_ideal": self.tv_to_ideal,
            "target_delta": self.target_delta,
        }

    def __str__(self) -> str:
        if self.is_pure:
            return f"{self.epsilon:.6g}-DP (pure)"
        return f"({self.epsilon:.6g}, {self.delta:.3g})-DP [{self.method}]"


def _tz(m: int) -> int:
    return (m & -m).bit_length() - 1


def _coin_width(m: int, acc: int) -> int:
    """Random bits consumed by a coin m / 2^acc (trailing zeros of m need none)."""
    return acc - _tz(m)


def _coin_ands(m: int, acc: int) -> int:
    return max(0, _coin_width(m, acc) - 1)


def _check_numerator(m: int, acc: int, what: str) -> None:
    if not 0 < m < (1 << acc):
        raise NoiseParameterError(f"{what}: numerator {m} must lie in (0, 2^{acc}) (a coin that is never or always 1 needs no randomness)")


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
        _positive_int(self.acc, "acc", MAX_ACC)
        _check_numerator(self.numerator, self.acc, "Bernoulli coin")

    @property
    def probability(self) -> Fraction:
        return Fraction(self.numerator, 1 << self.acc)



def bernoulli_params(p: object, acc: int, rounding: str = "nearest") -> BernoulliParams:
    """Round p (exact rational) to m / 2^acc: ``nearest`` (ties up), ``up`` or ``down``."""
    acc = _positive_int(acc, "acc", MAX_ACC)
    pf = _fraction(p, "p")
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


@dataclass(frozen=True)
class DiscreteLaplaceParams:
    """Parameters of the geometric / discrete Laplace gadgets.

    ``epsilon`` (exact rational) and ``sensitivity`` S (integer, output units)
    define the ideal alpha = exp(-epsilon / S).  Each geometric has ``bits``
    digits K; digit i is 1 with probability ``numerators[i] / 2^acc``.  The
    discrete Laplace gadget uses two independent geometrics.
    """

    epsilon: Fraction
    sensitivity: int
    bits: int
    acc: int
    numerators: tuple[int, ...]
    target_delta: Fraction | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _epsilon(self.epsilon))
        _positive_int(self.sensitivity, "sensitivity")
        _positive_int(self.bits, "bits (support 2^bits)", MAX_BITS)
        _positive_int(self.acc, "acc", MAX_ACC)
        nums = tuple(int(m) for m in self.numerators)
        if len(nums) != self.bits:
            raise NoiseParameterError(f"need {self.bits} digit numerators, got {len(nums)}")
        for i, m in enumerate(nums):
            _check_numerator(m, self.acc, f"digit {i}")
            if 2 * m > (1 << self.acc):
                raise NoiseParameterError(f"digit {i}: probability {m}/2^{self.acc} exceeds 1/2; geometric digits are below 1/2")
        object.__setattr__(self, "numerators", nums)

    @property
    def support(self) -> int:
        """Each geometric lies in [0, 2^K); the discrete Laplace in [-(2^K - 1), 2^K - 1]."""
        return 1 << self.bits

    @property
    def digit_probabilities(self) -> tuple[Fraction, ...]:
        return tuple(Fraction(m, 1 << self.acc) for m in self.numerators)

    @property
    def coin_widths(self) -> tuple[int, ...]:
        return tuple(_coin_width(m, self.acc) for m in self.numerators)

    @property
    def geometric_random_bits(self) -> int:
        """Uniform bits (per party) consumed by one geometric."""
        return sum(self.coin_widths)

    @property
    def geometric_and_gates(self) -> int:
        return sum(_coin_ands(m, self.acc) for m in self.numerators)

    @property
    def random_bits(self) -> int:
        """Uniform bits per party for one discrete Laplace sample."""
        return 2 * self.geometric_random_bits

    @property
    def and_gates(self) -> int:
        """AND gates of the discrete Laplace gadget (two geometrics and a K-bit subtraction)."""
        return 2 * self.geometric_and_gates + self.bits

    @property
    def alpha(self) -> float:
        return math.exp(-float(self.epsilon) / self.sensitivity)


def discrete_laplace_params(epsilon: object, sensitivity: int, bits: int, acc: int) -> DiscreteLaplaceParams:
    """Digits of alpha = exp(-epsilon / S) rounded *up* to acc bits, support 2^bits."""
    eps = _epsilon(epsilon)
    s = _positive_int(sensitivity, "sensitivity")
    k = _positive_int(bits, "bits", MAX_BITS)
    acc = _positive_int(acc, "acc", MAX_ACC)
    nums = []
    for i in range(k):
        _, phi = _digit_prob_bounds(eps, s, i)
        nums.append(max(1, _ceil_div(phi.numerator << acc, phi.denominator)))
    return DiscreteLaplaceParams(eps, s, k, acc, tuple(nums))


def delta_bound(params: DiscreteLaplaceParams) -> tuple[Fraction, Fraction]:
    """Rigorous upper bounds (delta(eps), TV to the ideal discrete Laplace) for the gadget.

    Proof of the delta bound.  Let X be one geometric (digits p_i), Z = X1 - X2,
    h and h + s the query values of neighbours, 1 <= s <= S (negative s is
    symmetric: swap the roles of X1 and X2).  h + Z = (h + X1) - X2 and
    h + s + Z = (h + X1) - (X2 - s): both are the same randomized map applied
    to X2 and to X2 - s, so by data processing

        D_{e^eps}(h + Z || h + s + Z) <= sum_x [P(x) - e^eps P(x + s)]_+ .

    Terms with x + s >= 2^K contribute P[X + s >= 2^K] <= P[X + S >= 2^K] (the
    carry out of digit K-1 when S is added; 1 if S >= 2^K).  For x + s < 2^K,
    P(x + s) / P(x) = alpha^s prod_{i flips 0->1} u_i prod_{i flips 1->0} 1/u_i
    with u_i = r_i / alpha^(2^i), r_i = p_i / (1 - p_i), because the ideal
    digit ratios alpha^(2^i) multiply to alpha^((x+s) - x).  Since
    e^eps alpha^s >= 1 and 1 - prod v_i <= sum_i [1 - v_i]_+,

        [P(x) - e^eps P(x+s)]_+ <= P(x) sum_{i flips} c_i(direction),
        c_i(0->1) = [1 - u_i]_+,   c_i(1->0) = [1 - 1/u_i]_+ .

    Digit i flips iff s_i XOR carry_i(x, s).  If 2^i > S then s_i = 0 and the
    carry into digit i for s is at most the one for S, which is independent of
    digit i; so P[x_i = b, i flips] <= P[x_i = b] P[carry_i(S)].  Otherwise the
    flip probability is bounded by 1.  Every quantity is an exact rational
    (carries by the recursion c_{i+1} = 1 - (1-p_i)(1-c_i) if S_i else p_i c_i)
    or a bound of an irrational rounded in the safe direction.

    TV bound: couple digit i of X with digit i of the ideal geometric G
    (P[G = g] = (1 - alpha) alpha^g, independent digits with p*_i) maximally;
    they differ with probability |p_i - p*_i|, and G has a digit >= K with
    probability alpha^(2^K); Z* = G1 - G2 is the ideal discrete Laplace.
    """
    eps, s_ = params.epsilon, params.sensitivity
    two = 1 << params.acc
    carry = Fraction(0)
    rounding = Fraction(0)
    tv = Fraction(0)
    for i, m in enumerate(params.numerators):
        p = Fraction(m, two)
        r = Fraction(m, two - m)
        rlo, rhi = _digit_ratio_bounds(eps, s_, i)
        c01 = max(Fraction(0), 1 - r / rhi)
        c10 = max(Fraction(0), 1 - rlo / r)
        gamma = Fraction(1) if (1 << i) <= s_ else carry
        rounding += _up(gamma * (c01 * (1 - p) + c10 * p))
        plo, phi = rlo / (1 + rlo), rhi / (1 + rhi)
        tv += _up(max(abs(p - plo), abs(p - phi)))
        if (s_ >> i) & 1:
            carry = _up(1 - (1 - p) * (1 - carry))
        else:
            carry = _up(p * carry)
    tail = Fraction(1) if s_ >> params.bits else carry
    tv += _digit_ratio_bounds(eps, s_, params.bits)[1]  # alpha^(2^K) = P[G >= 2^K]
    return min(Fraction(1), rounding + tail), min(Fraction(1), 2 * tv)


# ---------------------------------------------------------------------- exact pmfs
def geometric_pmf(params: DiscreteLaplaceParams) -> tuple[np.ndarray, int]:
    """Exact pmf of one geometric: (numerators N(x) for x = 0..2^K-1 as Python ints, denominator 2^(acc K))."""
    if params.bits > 20:
        raise NoiseParameterError(f"the exact pmf has 2^{params.bits} points; at most 2^20 are supported")
    two = 1 << params.acc
    arr = np.array([1], dtype=object)
    for m in params.numerators:
        arr = np.concatenate([arr * (two - m), arr * m])
    return arr, two**params.bits


def discrete_laplace_pmf(params: DiscreteLaplaceParams) -> tuple[np.ndarray, np.ndarray, int]:
    """Exact pmf of X1 - X2: (values -(2^K-1)..2^K-1 as int64, integer numerators, denominator 2^(2 acc K))."""
    if params.bits > 14:
        raise NoiseParameterError(f"the exact discrete Laplace pmf is computed for K <= 14 digits, got {params.bits}")
    n, den = geometric_pmf(params)
    size = n.shape[0]
    half = np.empty(size, dtype=object)
    for z in range(size):
        half[z] = int(np.dot(n[z:], n[: size - z]))
    q = np.concatenate([half[:0:-1], half])
    values = np.arange(-(size - 1), size, dtype=np.int64)
    return values, q, den * den


def delta_exact(params: DiscreteLaplaceParams) -> Fraction:
    """max_{1<=s<=S} sum_z [q(z) - e^eps q(z+s)]_+ from the exact pmf (e^eps by a rational lower bound).

    Raises :class:`NoiseParameterError` if the support or S * support exceeds
    :data:`EXACT_MAX_BITS` / :data:`EXACT_MAX_WORK`.
    """
    if params.bits > EXACT_MAX_BITS or params.sensitivity * (2 << params.bits) > EXACT_MAX_WORK:
        raise NoiseParameterError(
            f"exact delta needs K <= {EXACT_MAX_BITS} and S * 2^(K+1) <= {EXACT_MAX_WORK}; got K={params.bits}, S={params.sensitivity}"
        )
    _, q, den = discrete_laplace_pmf(params)
    elo = exp_bounds(params.epsilon)[0]
    a, b = elo.numerator, elo.denominator
    bq = q * b
    n = q.shape[0]
    best = 0
    for s in range(1, min(params.sensitivity, n) + 1):
        d = bq[: n - s] - a * q[s:]
        tot = sum(int(v) for v in d if v > 0) + int(bq[n - s :].sum())
        best = max(best, tot)
    if params.sensitivity >= n:
        return Fraction(1)
    return Fraction(best, b * den)


def _exact_feasible(params: DiscreteLaplaceParams) -> bool:
    return params.bits <= EXACT_MAX_BITS and params.sensitivity * (2 << params.bits) <= EXACT_MAX_WORK


@lru_cache(maxsize=256)
def discrete_laplace_guarantee(params: DiscreteLaplaceParams, exact: str = "auto") -> NoiseGuarantee:
    """The (epsilon, delta) of the discrete Laplace gadget; ``exact`` in {"auto", "always", "never"}."""
    if exact not in ("auto", "always", "never"):
        raise NoiseParameterError(f"exact must be 'auto', 'always' or 'never', got {exact!r}")
    bound, tv = delta_bound(params)
    if exact == "always" or (exact == "auto" and _exact_feasible(params)):
        d, method = delta_exact(params), "exact"
    else:
        d, method = bound, "bound"
    if d >= 1:
        raise NoiseParameterError(f"the gadget gives no guarantee (delta >= 1) for K={params.bits}, S={params.sensitivity}; increase the support")
    return NoiseGuarantee(
        epsilon=float(params.epsilon),
        delta=_to_float_up(d),
        method=method,
        delta_bound=_to_float_up(bound),
        tv_to_ideal=_to_float_up(tv),
        delta_rational=d,
        target_delta=None if params.target_delta is None else _to_float_up(params.target_delta),
    )


def _target(lam: int, n_samples: int, target_delta: object | None) -> Fraction:
    if target_delta is not None:
        t = _fraction(target_delta, "target_delta")
        if not 0 < t < 1:
            raise NoiseParameterError(f"target_delta must lie in (0, 1), got {target_delta!r}")
        return t
    lam = _positive_int(lam, "lam (statistical security, bits)", 256)
    n = _positive_int(n_samples, "n_samples")
    return Fraction(1, (1 << lam) * n)


@lru_cache(maxsize=128)
def _choose_dl(eps: Fraction, s: int, target: Fraction, max_acc: int, max_bits: int) -> DiscreteLaplaceParams:
    def ok(k: int, acc: int) -> DiscreteLaplaceParams | None:
        p = discrete_laplace_params(eps, s, k, acc)
        d, tv = delta_bound(p)
        return p if d <= target and tv <= target else None

    # smallest support that can hold the tail: alpha^(2^K - S) <= target (ideal tail, a necessary-ish start)
    ln_t = -math.log(float(target)) if target > 0 else 0.0
    need = s + s * ln_t / float(eps)
    k0 = max(1, math.ceil(math.log2(max(need, 2.0))) - 1)
    best: DiscreteLaplaceParams | None = None
    first_feasible = None
    for k in range(k0, max_bits + 1):
        if first_feasible is not None and k > first_feasible + 3:
            break
        if ok(k, max_acc) is None:
            continue
        if first_feasible is None:
            first_feasible = k
        lo, hi = 1, max_acc  # invariant: hi feasible
        probe = 8
        while probe < hi and ok(k, probe) is None:
            lo = probe + 1
            probe *= 2
        if probe < hi:
            hi = probe
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(k, mid) is not None:
                hi = mid
            else:
                lo = mid + 1
        cand = discrete_laplace_params(eps, s, k, hi)
        if best is None or cand.and_gates < best.and_gates:
            best = cand
    if best is None:
        raise NoiseParameterError(
            f"no support up to 2^{max_bits} and precision up to {max_acc} bits reaches delta <= {float(target):.3g} "
            f"for epsilon={float(eps):.6g}, sensitivity={s}"
        )
    return DiscreteLaplaceParams(best.epsilon, best.sensitivity, best.bits, best.acc, best.numerators, target)


def choose_discrete_laplace(
    epsilon: object,
    sensitivity: int,
    *,
    lam: int = 40,
    n_samples: int = 1,
    target_delta: object | None = None,
    max_acc: int = 192,
    max_bits: int = MAX_BITS,
) -> DiscreteLaplaceParams:
    """Pick support 2^K and precision acc for the discrete Laplace gadget (rule: module docstring).

    The target is delta <= 2^-lam / n_samples (or ``target_delta``) for both
    the DP delta bound and the TV distance to the ideal discrete Laplace; the
    cheapest (fewest AND gates) feasible (K, acc) is returned.
    """
    eps = _epsilon(epsilon)
    s = _positive_int(sensitivity, "sensitivity")
    target = _target(lam, n_samples, target_delta)
    max_acc = _positive_int(max_acc, "max_acc", MAX_ACC)
    max_bits = _positive_int(max_bits, "max_bits", MAX_BITS)
    return _choose_dl(eps, s, target, max_acc, max_bits)


# ---------------------------------------------------------------------- randomized response
@dataclass(frozen=True)
class RandomizedResponseParams(_CoinCost):
    """Randomized response on one bit: flip with probability numerator / 2^acc >= 1 / (1 + e^epsilon)."""

    epsilon: Fraction
    acc: int
    numerator: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _epsilon(self.epsilon))
        _positive_int(self.acc, "acc", MAX_ACC)
        _check_numerator(self.numerator, self.acc, "randomized response flip")
        if 2 * self.numerator >= (1 << self.acc):
            raise NoiseParameterError(f"flip probability {self.numerator}/2^{self.acc} >= 1/2 carries no information; use a larger acc")
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
        return min(self.epsilon, _ln_upper(Fraction((1 << self.acc) - self.numerator, self.numerator)))


def _rr_numerator(eps: Fraction, acc: int) -> int:
    # p* = 1 / (1 + e^eps) <= 1 / (1 + e_lo): rounding that bound up keeps m / 2^acc >= p*.
    phi = 1 / (1 + exp_bounds(eps)[0])
    return _ceil_div(phi.numerator << acc, phi.denominator)


def choose_randomized_response(epsilon: object, acc: int | None = None, rel_tol: float = 2.0**-10) -> RandomizedResponseParams:
    """Flip probability 1/(1+e^eps) rounded up to acc bits (so eps' <= eps).

    With ``acc=None`` the smallest acc in [2, 128] with eps - eps' <= rel_tol * eps
    (a utility tolerance: the privacy guarantee holds for every acc).
    """
    eps = _epsilon(epsilon)
    if acc is not None:
        acc = _positive_int(acc, "acc", MAX_ACC)
        return RandomizedResponseParams(eps, acc, _rr_numerator(eps, acc))
    tol = _fraction(rel_tol, "rel_tol") * eps
    for a in range(2, 129):
        m = _rr_numerator(eps, a)
        if 2 * m >= (1 << a):
            continue
        eff_lo = _ln_lower(Fraction((1 << a) - m, m))
        if eps - eff_lo <= tol:
            return RandomizedResponseParams(eps, a, m)
    raise NoiseParameterError(f"no precision up to 128 bits reaches relative tolerance {rel_tol} for epsilon={float(eps)}")


def randomized_response_guarantee(params: RandomizedResponseParams) -> NoiseGuarantee:
    """Pure DP with the effective epsilon ln((2^acc - m)/m) rounded up (<= requested epsilon)."""
    eff = params.effective_epsilon()
    plo = 1 / (1 + exp_bounds(params.epsilon)[1])
    phi = 1 / (1 + exp_bounds(params.epsilon)[0])
    p = params.flip_probability
    tv = max(abs(p - plo), abs(p - phi))
    return NoiseGuarantee(
        epsilon=_to_float_up(eff),
        delta=0.0,
        method="pure",
        delta_bound=0.0,
        tv_to_ideal=_to_float_up(tv),
        delta_rational=Fraction(0),
    )


# ---------------------------------------------------------------------- circuit gadgets
class _BitStream:
    """Hands out the uniform wires rx[j] XOR ry[j] in order."""

    def __init__(self, b: Builder, rx: Int, ry: Int) -> None:
        self.b = b
        self.rx = rx.bits
        self.ry = ry.bits
        self.pos = 0

    def take(self, n: int) -> list[int]:
        if self.pos + n > len(self.rx):
            raise CircuitError(f"random bit stream exhausted: need {self.pos + n} bits, have {len(self.rx)}")
        out = [self.b.xor(self.rx[j], self.ry[j]) for j in range(self.pos, self.pos + n)]
        self.pos += n
        return out

    def check_used(self) -> None:
        if self.pos != len(self.rx):
            raise CircuitError(f"random bit stream: {len(self.rx) - self.pos} bits left unused")


def less_than_const(b: Builder, u: Sequence[int], m: int) -> int:
    """[u < m] for unsigned bits u (LSB first) and a constant 0 <= m <= 2^len(u).

    LSB-first ripple: lt_i = (~u_i OR lt) if m_i else (~u_i AND lt), one AND
    per bit after the lowest set bit of m (free below it); with m odd,
    len(u) - 1 ANDs.
    """
    n = len(u)
    if m <= 0:
        return FALSE
    if m >= (1 << n):
        return TRUE
    lt = FALSE
    for i, ui in enumerate(u):
        nu = b.inv(ui)
        lt = b.or_(nu, lt) if (m >> i) & 1 else b.and_(nu, lt)
    return lt


def bernoulli_bit(b: Builder, stream: _BitStream, m: int, acc: int) -> int:
    """A coin with P[1] = m / 2^acc exactly, from acc - tz(m) uniform wires."""
    t = _tz(m)
    u = stream.take(acc - t)
    return less_than_const(b, u, m >> t)


def geometric_value(b: Builder, stream: _BitStream, params: DiscreteLaplaceParams) -> Int:
    """The K-digit geometric X = sum_i coin_i 2^i (unsigned, K bits)."""
    return Int(b, [bernoulli_bit(b, stream, m, params.acc) for m in params.numerators], False)


def discrete_laplace_value(b: Builder, stream: _BitStream, params: DiscreteLaplaceParams) -> Int:
    """X1 - X2 as a signed (K+1)-bit value (K ANDs for the subtraction)."""
    x1 = geometric_value(b, stream, params)
    x2 = geometric_value(b, stream, params)
    k = params.bits + 1
    return x1.extend(k, True) - x2.extend(k, True)


def _random_groups(b: Builder, width: int) -> _BitStream:
    rx = b.input("rx", width, GARBLER)
    ry = b.input("ry", width, EVALUATOR)
    return _BitStream(b, rx, ry)


def _signed_width(lo: int, hi: int) -> int:
    w = 1
    while not (-(1 << (w - 1)) <= lo and hi <= (1 << (w - 1)) - 1):
        w += 1
    return w


@dataclass(frozen=True)
class NoisyCircuit:
    """A circuit with noise inside, and what it guarantees.

    ``circuit`` has the kernel inputs (if any) first, then the random-bit
    groups ``rx`` (garbler) and ``ry`` (evaluator) of ``random_width`` bits
    each; the circuit uses rx XOR ry.  ``out`` is ``value + noise`` in output
    units; one output unit is ``unit`` natural kernel units; the noiseless
    value lies in ``value_range`` (output units) and neighbouring inputs move
    it by at most ``sensitivity``.  ``guarantee`` is None for the raw coin
    and geometric gadgets (they are building blocks, not mechanisms).
    """

    circuit: Circuit
    mechanism: str
    params: object
    guarantee: NoiseGuarantee | None
    random_width: int
    unit: Fraction = Fraction(1)
    value_range: tuple[int, int] = (0, 0)
    sensitivity: int = 0
    kernel: str | None = None

    @property
    def and_gates(self) -> int:
        return self.circuit.n_and

    def noise_pmf(self) -> dict[int, Fraction]:
        """Exact pmf of the noise (small supports only; see :func:`discrete_laplace_pmf`)."""
        p = self.params
        if self.mechanism == "bernoulli":
            return {0: 1 - p.probability, 1: p.probability}
        if self.mechanism == "randomized_response":
            return {0: 1 - p.flip_probability, 1: p.flip_probability}
        if self.mechanism == "geometric":
            n, den = geometric_pmf(p)
            return {x: Fraction(int(v), den) for x, v in enumerate(n)}
        vals, q, den = discrete_laplace_pmf(p)
        return {int(z): Fraction(int(v), den) for z, v in zip(vals, q)}

    def random_inputs(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """Fresh (rx, ry) bit arrays (batch, random_width) from the OS CSPRNG (both parties' shares)."""
        return random_input_bits(self.random_width, batch), random_input_bits(self.random_width, batch)

    def simulate_random_inputs(self, batch: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Seeded (rx, ry) for tests and simulations only."""
        return simulate_random_input_bits(self.random_width, batch, rng), simulate_random_input_bits(self.random_width, batch, rng)


def bernoulli_gadget(params: BernoulliParams) -> NoisyCircuit:
    """Circuit: inputs rx, ry; output ``coin`` (1 bit), P[1] = m / 2^acc."""
    b = Builder(f"bernoulli_{params.numerator}_{params.acc}")
    st = _random_groups(b, params.random_bits)
    b.output("coin", Int(b, [bernoulli_bit(b, st, params.numerator, params.acc)]))
    st.check_used()
    return NoisyCircuit(b.build(), "bernoulli", params, None, params.random_bits, value_range=(0, 1))


def geometric_gadget(params: DiscreteLaplaceParams) -> NoisyCircuit:
    """Circuit: inputs rx, ry; output ``out`` = X (unsigned, K bits), P[X = x] ~ prod of digit probabilities."""
    b = Builder(f"geometric_K{params.bits}_acc{params.acc}")
    st = _random_groups(b, params.geometric_random_bits)
    b.output("out", geometric_value(b, st, params))
    st.check_used()
    return NoisyCircuit(b.build(), "geometric", params, None, params.geometric_random_bits, value_range=(0, 0))


def discrete_laplace_gadget(params: DiscreteLaplaceParams) -> NoisyCircuit:
    """Circuit: inputs rx, ry; output ``out`` = X1 - X2 (signed, K+1 bits), with its guarantee."""
    b = Builder(f"dlaplace_K{params.bits}_acc{params.acc}")
    st = _random_groups(b, params.random_bits)
    b.output("out", discrete_laplace_value(b, st, params))
    st.check_used()
    return NoisyCircuit(
        b.build(),
        "discrete_laplace",
        params,
        discrete_laplace_guarantee(params),
        params.random_bits,
        value_range=(0, 0),
        sensitivity=params.sensitivity,
    )


def randomized_response_gadget(params: RandomizedResponseParams) -> NoisyCircuit:
    """Circuit: inputs ``b`` (garbler, 1 bit), rx, ry; output ``out`` = b XOR flip."""
    bld = Builder(f"rr_{params.numerator}_{params.acc}")
    bit = bld.input("b", 1, GARBLER)
    st = _random_groups(bld, params.random_bits)
    flip = bernoulli_bit(bld, st, params.numerator, params.acc)
    bld.output("out", Int(bld, [bld.xor(bit.bits[0], flip)]))
    st.check_used()
    return NoisyCircuit(
        bld.build(), "randomized_response", params, randomized_response_guarantee(params), params.random_bits, value_range=(0, 1), sensitivity=1
    )


# ---------------------------------------------------------------------- kernels + noise
def _kernel_ranges(name: str, bits: int, signed: bool) -> tuple[int, int]:
    top = (1 << bits) - 1  # largest |x - y| for w-bit inputs (signed or unsigned)
    if name == "gini":
        return 0, top
    if name == "auc":
        return 0, 2
    if name == "kendall":
        return -1, 1
    if name == "variance":
        return 0, top * top // 2
    if name == "collision":
        return 0, 1
    raise NoiseParameterError(f"unknown kernel {name!r}; choose from {sorted(KERNEL_RANGES)}")


#: Natural value range of each kernel for w-bit inputs: name -> f(bits) -> (lo, hi).
KERNEL_RANGES: dict[str, Callable[[int], tuple[int, int]]] = {
    n: (lambda w, _n=n: _kernel_ranges(_n, w, False)) for n in ("gini", "auc", "kendall", "variance", "collision")
}


def _kernel_body(b: Builder, name: str, bits: int, signed: bool) -> Int:
    from . import kernels as K

    K._check(bits)
    if name == "kendall":
        p1 = b.input("x", 2 * bits, GARBLER)
        p2 = b.input("y", 2 * bits, EVALUATOR)

        def fld(v: Int, k: int) -> Int:
            f = v[k * bits : (k + 1) * bits]
            return f.as_signed() if signed else f

        return K.kendall_value(b, fld(p1, 0), fld(p1, 1), fld(p2, 0), fld(p2, 1))
    x = b.input("x", bits, GARBLER, signed)
    y = b.input("y", bits, EVALUATOR, signed)
    body = {"gini": K.gini_value, "auc": K.auc_value, "variance": K.variance_value, "collision": K.collision_value}.get(name)
    if body is None:
        raise NoiseParameterError(f"unknown kernel {name!r}; choose from {sorted(KERNEL_RANGES)}")
    return body(b, x, y)


def noisy_kernel(
    name: str,
    bits: int = 32,
    signed: bool = False,
    *,
    epsilon: object | None = None,
    sensitivity: int | None = None,
    fixed_point_bits: int | None = None,
    lam: int = 40,
    n_samples: int = 1,
    target_delta: object | None = None,
    noise: DiscreteLaplaceParams | None = None,
) -> NoisyCircuit:
    """Kernel ``name`` followed by discrete Laplace noise: ``out = (h >> t) + Z`` (signed).

    Units: h is the kernel's natural value (range :data:`KERNEL_RANGES`);
    t = max(0, bitlen(hi - lo) - fixed_point_bits) (t = 0 if
    ``fixed_point_bits`` is None), so one output unit is 2^t natural units
    (``result.unit``).  ``sensitivity`` is in output units (default: the
    scaled kernel's full range (hi >> t) - (lo >> t)); epsilon is the budget of
    this one release.  Noise parameters are chosen by
    :func:`choose_discrete_laplace` from (epsilon, sensitivity, lam,
    n_samples / target_delta) unless ``noise`` is given (then its epsilon and
    sensitivity define the mechanism).
    """
    lo, hi = _kernel_ranges(name, bits, signed)
    span = hi - lo
    if fixed_point_bits is None:
        t = 0
    else:
        f = _positive_int(fixed_point_bits, "fixed_point_bits", 128)
        t = max(0, span.bit_length() - f)
    lo_t, hi_t = lo >> t, hi >> t
    if noise is None:
        if epsilon is None:
            raise NoiseParameterError("noisy_kernel needs epsilon (or explicit noise parameters)")
        sens = (hi_t - lo_t) if sensitivity is None else _positive_int(sensitivity, "sensitivity")
        sens = max(1, sens)
        noise = choose_discrete_laplace(epsilon, sens, lam=lam, n_samples=n_samples, target_delta=target_delta)
    elif not isinstance(noise, DiscreteLaplaceParams):
        raise NoiseParameterError(f"noise must be DiscreteLaplaceParams, got {type(noise).__name__}")
    L = noise.support
    width = _signed_width(lo_t - (L - 1), hi_t + (L - 1))
    b = Builder(f"noisy_{name}{bits}{'s' if signed else 'u'}_K{noise.bits}_acc{noise.acc}")
    h = _kernel_body(b, name, bits, signed)
    st = _random_groups(b, noise.random_bits)
    z = discrete_laplace_value(b, st, noise)
    st.check_used()
    ht = (h >> t) if t else h
    out = ht.extend(width, True) + z.extend(width)
    b.output("out", out.as_signed())
    return NoisyCircuit(
        b.build(),
        "discrete_laplace",
        noise,
        discrete_laplace_guarantee(noise),
        noise.random_bits,
        unit=Fraction(1 << t),
        value_range=(lo_t, hi_t),
        sensitivity=noise.sensitivity,
        kernel=name,
    )


def _greater_value(b: Builder, x: Int, y: Int) -> Int:
    return x > y


#: Binary kernels for randomized response: name -> body(builder, x, y) -> 1-bit Int.
BINARY_KERNELS: dict[str, Callable[[Builder, Int, Int], Int]] = {
    "collision": lambda b, x, y: x.eq(y),
    "greater": _greater_value,
}


def noisy_binary_kernel(
    name: str,
    bits: int = 32,
    signed: bool = False,
    *,
    epsilon: object | None = None,
    acc: int | None = None,
    rr: RandomizedResponseParams | None = None,
) -> NoisyCircuit:
    """Binary kernel (``collision`` [x == y] or ``greater`` [x > y]) followed by randomized response."""
    from . import kernels as K

    body = BINARY_KERNELS.get(name)
    if body is None:
        raise NoiseParameterError(f"unknown binary kernel {name!r}; choose from {sorted(BINARY_KERNELS)}")
    K._check(bits)
    if rr is None:
        if epsilon is None:
            raise NoiseParameterError("noisy_binary_kernel needs epsilon (or explicit rr parameters)")
        rr = choose_randomized_response(epsilon, acc)
    b = Builder(f"rr_{name}{bits}{'s' if signed else 'u'}_acc{rr.acc}")
    x = b.input("x", bits, GARBLER, signed)
    y = b.input("y", bits, EVALUATOR, signed)
    v = body(b, x, y)
    st = _random_groups(b, rr.random_bits)
    flip = bernoulli_bit(b, st, rr.numerator, rr.acc)
    st.check_used()
    b.output("out", Int(b, [b.xor(v.bits[0], flip)]))
    return NoisyCircuit(
        b.build(), "randomized_response", rr, randomized_response_guarantee(rr), rr.random_bits, value_range=(0, 1), sensitivity=1, kernel=name
    )


# ---------------------------------------------------------------------- random inputs and samplers
def _check_batch(batch: object) -> int:
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or batch < 0:
        raise NoiseParameterError(f"batch must be an integer >= 0, got {batch!r}")
    return int(batch)


def random_input_bits(width: int, batch: int) -> np.ndarray:
    """(batch, width) uniform bits from os.urandom: one party's random-bit share."""
    width = _positive_int(width, "width")
    batch = _check_batch(batch)
    nbytes = (width + 7) // 8
    raw = np.frombuffer(os.urandom(batch * nbytes), dtype=np.uint8).reshape(batch, nbytes)
    return np.unpackbits(raw, axis=1, bitorder="little")[:, :width].astype(bool)


def simulate_random_input_bits(width: int, batch: int, rng: np.random.Generator) -> np.ndarray:
    """Seeded stand-in for :func:`random_input_bits`: simulation and tests only."""
    if not isinstance(rng, np.random.Generator):
        raise NoiseParameterError("rng must be a numpy.random.Generator")
    width = _positive_int(width, "width")
    batch = _check_batch(batch)
    return rng.integers(0, 2, size=(batch, width), dtype=np.uint8).astype(bool)


def _coins(numerators: Iterable[int], acc: int, n: int, randbytes: Callable[[int], bytes]) -> np.ndarray:
    """(n, k) bool: column i is 1 with probability numerators[i] / 2^acc exactly (integer comparisons)."""
    cols = []
    for m in numerators:
        t = _tz(m)
        w, mm = acc - t, m >> t
        nw = (w + 63) // 64
        words = np.frombuffer(randbytes(8 * n * nw), dtype="<u8").reshape(n, nw).astype(np.uint64)
        top_bits = w - 64 * (nw - 1)
        if top_bits < 64:
            words[:, 0] &= np.uint64((1 << top_bits) - 1)
        lt = np.zeros(n, dtype=bool)
        eq = np.ones(n, dtype=bool)
        for k in range(nw):
            mk = np.uint64((mm >> (64 * (nw - 1 - k))) & 0xFFFFFFFFFFFFFFFF)
            lt |= eq & (words[:, k] < mk)
            eq &= words[:, k] == mk
        cols.append(lt)
    return np.stack(cols, axis=1) if cols else np.zeros((n, 0), dtype=bool)


def _dl_from(params: DiscreteLaplaceParams, n: int, randbytes) -> np.ndarray:
    if params.bits > SAMPLER_MAX_BITS:
        raise NoiseParameterError(f"the sampler supports K <= {SAMPLER_MAX_BITS} digits, got {params.bits}")
    n = _check_batch(n)
    weights = np.array([1 << i for i in range(params.bits)], dtype=np.int64)
    x1 = _coins(params.numerators, params.acc, n, randbytes).astype(np.int64) @ weights
    x2 = _coins(params.numerators, params.acc, n, randbytes).astype(np.int64) @ weights
    return x1 - x2


def sample_discrete_laplace(params: DiscreteLaplaceParams, n: int) -> np.ndarray:
    """n draws (int64) from the gadget's exact distribution, from os.urandom (no circuit)."""
    return _dl_from(params, n, os.urandom)


def simulate_discrete_laplace(params: DiscreteLaplaceParams, n: int, rng: np.random.Generator) -> np.ndarray:
    """Seeded version of :func:`sample_discrete_laplace`: simulation and tests only."""
    if not isinstance(rng, np.random.Generator):
        raise NoiseParameterError("rng must be a numpy.random.Generator")
    return _dl_from(params, n, rng.bytes)


def decode_output(nc: NoisyCircuit, bits: np.ndarray) -> np.ndarray:
    """Output bits (batch, width) of a noisy circuit -> int64 values (signed as declared)."""
    g = nc.circuit.outputs[0]
    return np.asarray(bits_to_ints(bits, g.signed))
