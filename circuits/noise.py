"""Differential-privacy noise sampled inside garbled circuits, with exact (epsilon, delta) reports.

What it does
    Builds the noise gadgets of ustats-local-model-and-beyond, Sec. 5 and
    App. C.2 ("circuits for local randomizers"), and composes them with the
    kernels of :mod:`pairwise.circuits.kernels`:

    * **Bernoulli coin.**  Each party feeds uniform bits (input groups ``rx``,
      garbler, and ``ry``, evaluator); the circuit XORs them (free) into a
      uniform ``u`` and outputs ``[u < m]``, so P[coin = 1] = m / 2^a
      exactly.  The comparison with the constant ``m`` is a ripple of one AND
      per bit; trailing zero bits of ``m`` are dropped first (``a - tz(m)``
      random bits, ``a - tz(m) - 1`` ANDs).  That is optimal for one coin:
      [u < m] with m odd has degree a, hence at least a - 1 ANDs.  So a
      coin's cost is the number of significant bits of its probability, and
      the parameter selection below looks for probabilities with few.
    * **Geometric** (one-sided, P[X = x] ~ alpha^x): the binary digits of a
      geometric variable are independent, digit i being
      Bernoulli(alpha^(2^i) / (1 + alpha^(2^i))); the gadget samples digits
      0..K-1 with one coin each (support 0..2^K - 1), each digit at its own
      precision a_i.
    * **Discrete Laplace** (``discrete_laplace``, two-sided geometric,
      P[Z = z] ~ alpha^|z|): the difference X1 - X2 of two independent
      geometrics, K ANDs for the subtraction.  For an integer query of
      sensitivity S and budget eps, alpha = exp(-eps / S).
    * **Signed geometric** (``signed_geometric``): one geometric X and one
      uniform bit s, Z = X if s = 0 and Z = ~X = -(X + 1) if s = 1, which is
      X XOR s in two's complement: *no* AND gates beyond X's coins, so half
      the cost of the difference.  Z is a discrete Laplace centred at -1/2:
      P[Z = z] = (1 - alpha)/2 alpha^(|z + 1/2| - 1/2), eps-DP for
      sensitivity S with the same alpha (|z + 1/2| - 1/2 is 1-Lipschitz),
      E Z = -1/2 (removed exactly by the estimator) and
      Var Z = 2 alpha / (1 - alpha)^2 + 1/4, i.e. 1/4 more than the discrete
      Laplace: negligible for large S (gini), so it is used only where that
      1/4 is within the variance tolerance.
    * **Randomized response** for a 1-bit kernel: output ``bit XOR flip``
      with flip ~ Bernoulli(m / 2^a), m / 2^a >= 1 / (1 + e^eps).
    * **k-ary randomized response** (``krr``, k = 2 or 3) for kernels with
      few values (kendall: -1, 0, 1; auc: 0, 1, 2 in circuit units): as noise
      on Z_k, the reported value index is i + d mod k with P[d = 0] =
      1 - phi, P[d = j] = phi / (k - 1), phi = m / 2^a >= (k - 1) /
      (e^eps + k - 1) (pure eps-DP against any change of the value).  For
      k = 3 the value's code (c0, c1) = ([i = 1], [i = 2]) is free to
      compute from the kernel's output bits, t = [i = 0] = NOT(c0 XOR c1)
      is free, i + 1 and i + 2 have the free codes (t, c0) and (c1, t); one
      uniform bit picks one of them (2 ANDs) and the flip coin picks it or i
      (2 ANDs): 4 ANDs plus the coin (16 ANDs at eps = 1).  Unbiased
      debiasing and its variance: :class:`KRREstimator`.
    * **Composition** (:func:`noisy_kernel`, :func:`noisy_binary_kernel`):
      kernel circuit, then noise; for the additive mechanisms the output
      ``out`` is the kernel value in fixed point plus the noise, wide enough
      never to overflow; for k-RR it is the reported value's code.  Neither
      party alone knows the noise: it is a function of ``rx XOR ry``.
      :meth:`NoisyCircuit.estimates` turns outputs into unbiased estimates.

    Every gadget is returned as a :class:`NoisyCircuit`: the immutable
    :class:`~pairwise.circuits.ir.Circuit` plus its :class:`NoiseGuarantee`, its
    parameters, the units of its output and its estimator.

Exactness of the reported guarantee
    The coin probabilities are rationals m_i / 2^a_i, so the gadget's output
    distribution is known exactly: P[X = x] = N(x) / 2^(sum a_i) with integer
    N(x) = prod_i (m_i if bit i of x else 2^a_i - m_i).  Irrational constants
    (e^eps, alpha^(2^i)) enter only through rational lower and upper bounds
    (:func:`exp_bounds`: :mod:`decimal` at 110 significant digits, whose
    ``exp`` is correctly rounded, widened by a proven relative margin, then
    rounded outward to multiples of 2^-640).  ``NoiseGuarantee.method``:

    * ``exact`` (support 2^K <= 2^EXACT_MAX_BITS and S * 2^(K+1) <=
      EXACT_MAX_WORK): delta is computed from the exact pmf q of Z with
      integer arithmetic,
          delta = max_{1 <= |s| <= S} sum_z max(0, q(z) - e^eps q(z + s)),
      with e^eps replaced by a rational lower bound within 1e-100 relative.
    * ``certified`` (any support): three exact dynamic programmes over the
      digits (:func:`ratio_certificate`) find the extreme privacy-loss
      ratios away from the support's edge: min and max of P(x + s) / P(x)
      over 1 <= s <= S, x + s < 2^K, and (signed) max of P(m1) / P(m2) over
      m1 + m2 <= S - 1.  Each ratio is a product of per-digit odds r_i =
      p_i / (1 - p_i) over the digits that flip, so a digit-serial programme
      with state (carry, comparison of s with S) finds the extremes exactly.
      When they lie within [e^-eps, e^eps], every term of the hockey-stick
      sum vanishes except the support's edge, and delta is the exact tail
      P[X >= 2^K - S] (:func:`geometric_tail`) for the difference (an upper
      bound, by data processing through X1) and exactly half of it for the
      signed construction (the exact divergence).  Proofs: :func:`delta_bound`.
    * ``bound`` (certificates fail, e.g. parameters chosen by hand): a
      rigorous upper bound from the per-digit rounding errors, weighted by
      the probability that each digit flips (:func:`delta_bound`).
    * ``pure`` (randomized response, k-RR): the flip probability is
      certified >= its ideal, the effective eps' = ln((1 - phi)(k - 1)/phi)
      <= eps is reported rounded up, delta = 0.

    ``tv_to_ideal`` bounds the total variation distance to the ideal
    mechanism at the requested eps (a utility figure, not a privacy one).

Parameter selection (:func:`choose_discrete_laplace`, ``precision="designed"``)
    The per-release delta is a parameter: ``delta`` (default
    :data:`DEFAULT_DELTA` = 2^-40; the earlier spelling 2^-lam / n_samples is
    still accepted).  Precision is not a fixed number of bits: each digit gets
    the cheapest coin (fewest significant bits, :func:`simplest_dyadic`) whose
    probability lies in an interval, and a candidate is accepted only if

    1. its ratio certificate holds (so the guarantee is ``exact`` or
       ``certified``) and its exact tail meets delta;
    2. its exact noise variance (a rational: Var X = sum 4^i p_i (1 - p_i))
       is at most (1 + tau) times the ideal discrete Laplace's
       2 alpha / (1 - alpha)^2, tau = ``variance_tolerance`` (default
       :data:`DEFAULT_VARIANCE_TOLERANCE` = 2^-12): the same error as the
       ideal mechanism up to 0.025%.  (The earlier gadgets were within
       1e-12 of the ideal; no eps-DP noise of this kind does better than the
       ideal, so some tolerance is unavoidable: 2^-10 saves another ~15% of
       the gates, 2^-16 costs ~30% more.)

    The intervals (:func:`_design_digits`): digits are centred on the ideal
    at eps_d = eps (1 - theta), which leaves a slack theta eps in the
    certificate; a log-odds budget B = beta theta eps is spent on rounding:
    low digits whose ideal probability is within B/2 of 1/2 (in total)
    become fair coins (free), the next digits share the rest of B, and the
    rare top digits are rounded *up* by at least the sum of all lower
    distortions (a chain: when s is added, the highest digit that flips goes
    0 -> 1 and outweighs every lower flip), which needs no precision at all.
    The cheapest accepted candidate over a small grid of (K, theta, beta,
    first chain digit, chain lift) wins; the search takes about a second and
    is cached.  theta is scaled by d ln Var / d eps = (1 + alpha)/(S (1 - alpha)),
    so the calibration's own variance cost stays below tau.
    ``precision="uniform"`` keeps the earlier rule (one precision for every
    digit, rounded up, rigorous bound and TV to the ideal both <= delta) for
    comparison; ``benchmarks/noise_gadgets.py`` prints both.

Choosing the mechanism (:func:`choose_kernel_noise`)
    ``auto``: k-RR for kernels with 2 or 3 values when its worst-case
    per-pair variance is below the ideal discrete Laplace's (always, for
    equally spaced values: with s = e^(eps/2) and S = 2, k-RR's worst case
    (5 s^2 + 1)/(s^2 - 1)^2 over the DL's 2 s/(s - 1)^2 is
    (5 s^2 + 1)/(2 s (s + 1)^2) < 1 since (2s - 1)(s^2 + 1) > 0; for k = 2
    randomized response has exactly half the DL's variance); otherwise the
    cheaper of the two additive constructions within the tolerance.

k-ary randomized response: the analogue of Theorem 5
    Setting (Sec. 5): n users, P permutations, P n / 2 pairs, each user in
    at most P pairs; every pair releases y_ij = k-RR(f(x_i, x_j)) with
    budget eps / P; the estimate is U^ = 2/(P n) sum f^_ij with
    f^ = (y - mu) / lambda, lambda = 1 - k phi / (k - 1),
    mu = phi sum(v) / (k - 1) over the k values v.

    * Privacy: k-RR is eps/P-DP against any change of the kernel value, so
      each user's P releases compose to eps-DP (pure; computational DP
      through the 2PC, as in the paper).
    * Unbiased: E[y | f] = (1 - phi) f + phi (sum(v) - f)/(k - 1) =
      lambda f + mu, so E[f^ | f] = f and E U^ = U_f.
    * Variance: E[y^2 | f] = lambda f^2 + phi Q / (k - 1), Q = sum(v^2), so
      Var(f^ | f) = v(f) = [lambda (1 - lambda) f^2 - 2 lambda mu f
      + phi Q / (k - 1) - mu^2] / lambda^2.  Given the data and the pairs the
      f^_ij are independent with means f_ij, so (App. C.1's decomposition)

          MSE(U^) = 2/(P n) [ 2 (P-1)(1 - 1/(n-1)) zeta_1 + (1 + (P-1)/(n-1)) zeta_2 ]
                    + 2/(P n) E v(f(X1, X2)),
          E v(f) = [lambda (1 - lambda)(zeta_2 + U_f^2) - 2 lambda mu U_f
                    + phi Q / (k - 1) - mu^2] / lambda^2
                 <= max_v v(v),

      the first line being Blom's variance exactly as in Theorem 5 (the
      noise term replaces Var(Lap(P/eps)) = 2 P^2/eps^2).  For kendall
      (values 0, 1, -1: mu = 0, Q = 2) at eps/P = 1: v(0) = 3.20 and
      v(+-1) = 4.94, against 7.84 for the discrete Laplace with S = 2.
      ``benchmarks/ustat_figure4.py`` checks this formula against simulation.

Units
    A kernel value h in its natural units (see :data:`KERNEL_RANGES`) is
    put into fixed point by ``h >> t`` with t = max(0, bitlen(hi - lo) -
    fixed_point_bits) (floor division by 2^t); one output unit is 2^t natural
    units (:attr:`NoisyCircuit.unit`).  ``sensitivity`` is in output units and
    defaults to the full range of the scaled kernel, i.e. each release is
    eps-DP against any change of one pair's kernel value.  The 2PC
    subsampling protocol of Theorem 5 (kernel in [0, 1], each user in P
    pairs, Lap(P/eps)) calls this with ``epsilon = eps / P`` and the default
    sensitivity (the kernel's range); the estimate divides ``out * unit`` by
    the kernel's normalizer.  k-RR needs the exact values (t = 0).

Security model
    Semi-honest two-party computation (garbled circuits).  The noise is a
    deterministic function of rx XOR ry; as long as one party draws its share
    uniformly from the OS CSPRNG (:func:`random_input_bits`), the noise is
    distributed as stated and hidden from the other party, and the garbled
    evaluation reveals only ``out``.  :func:`simulate_random_input_bits`
    and the ``simulate_*`` samplers use a seeded numpy generator and are for
    tests only.  The exact samplers (:func:`sample_discrete_laplace`,
    :func:`sample_krr`) draw from ``os.urandom`` and reproduce the gadget's
    distribution exactly (integer comparisons only, Mironov 2012's
    floating-point pitfalls do not apply).  Parameter selection uses floating
    point only to *propose* candidates; every accepted candidate's privacy
    and variance are checked in exact rational arithmetic.

Follows
    ustats-local-model-and-beyond, Theorem 5, Sec. 3 (k-RR debiasing, Eq. 9)
    and App. C.1-C.2 (noise in the circuit, XOR of both parties' random bits);
    Dwork, Kenthapadi, McSherry, Mironov, Naor, "Our data, ourselves"
    (EUROCRYPT 2006: biased coins from shared uniform bits, geometric
    digits); Champion, shelat, Ullman, "Securely sampling biased coins with
    applications to differential privacy" (CCS 2019); Canonne, Kamath,
    Steinke (2020) for the discrete Laplace; DESIGN.md "dp: exact where it
    matters".
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass, field, replace
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
    "DEFAULT_DELTA",
    "DEFAULT_VARIANCE_TOLERANCE",
    "CONSTRUCTIONS",
    "MECHANISMS",
    "KERNEL_VALUES",
    "KRR_K",
    "KaryRRParams",
    "KRREstimator",
    "RatioCertificate",
    "ratio_certificate",
    "geometric_tail",
    "ideal_discrete_laplace_variance",
    "simplest_dyadic",
    "choose_krr",
    "choose_kernel_noise",
    "krr_estimator",
    "krr_guarantee",
    "krr_value",
    "krr_gadget",
    "sample_krr",
    "simulate_krr",
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

#: Default per-release delta: 2^-40 (the customary statistical security parameter).
DEFAULT_DELTA = Fraction(1, 1 << 40)
#: Default utility tolerance: the designed noise's variance is at most (1 + 2^-12) times the ideal's.
DEFAULT_VARIANCE_TOLERANCE = Fraction(1, 1 << 12)

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
        object.__setattr__(self, "epsilon", _epsilon(self.epsilon))
        _positive_int(self.sensitivity, "sensitivity")
        _positive_int(self.bits, "bits (support 2^bits)", MAX_BITS)
        if self.construction not in CONSTRUCTIONS:
            raise NoiseParameterError(f"construction must be one of {CONSTRUCTIONS}, got {self.construction!r}")
        if self.accs is None:
            _positive_int(self.acc, "acc", MAX_ACC)
            accs = (int(self.acc),) * self.bits
        else:
            accs = tuple(_positive_int(a, "digit precision", MAX_ACC) for a in self.accs)
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
                raise NoiseParameterError(f"digit {i}: probability {m}/2^{a} exceeds 1/2; geometric digits are at most 1/2")
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
    def digit_probabilities(self) -> tuple[Fraction, ...]:
        return tuple(Fraction(m, 1 << a) for m, a in zip(self.numerators, self.accs))

    @property
    def coin_widths(self) -> tuple[int, ...]:
        return tuple(_coin_width(m, a) for m, a in zip(self.numerators, self.accs))

    @property
    def geometric_random_bits(self) -> int:
        """Uniform bits (per party) consumed by one geometric."""
        return sum(self.coin_widths)

    @property
    def geometric_and_gates(self) -> int:
        return sum(_coin_ands(m, a) for m, a in zip(self.numerators, self.accs))

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


def discrete_laplace_params(epsilon: object, sensitivity: int, bits: int, acc: int, construction: str = "difference") -> DiscreteLaplaceParams:
    """Digits of alpha = exp(-epsilon / S) rounded *up* to acc bits each, support 2^bits (uniform precision)."""
    eps = _epsilon(epsilon)
    s = _positive_int(sensitivity, "sensitivity")
    k = _positive_int(bits, "bits", MAX_BITS)
    acc = _positive_int(acc, "acc", MAX_ACC)
    nums = []
    for i in range(k):
        _, phi = _digit_prob_bounds(eps, s, i)
        nums.append(max(1, _ceil_div(phi.numerator << acc, phi.denominator)))
    return DiscreteLaplaceParams(eps, s, k, acc, tuple(nums), construction=construction)


# ---------------------------------------------------------------------- exact certificates
def geometric_tail(params: DiscreteLaplaceParams, shift: int | None = None) -> Fraction:
    """P[X + shift >= 2^K] = P[X >= 2^K - shift] exactly (shift defaults to S), by the carry recursion.

    Adding the constant s to X carries into digit i+1 with probability
    c_{i+1} = 1 - (1 - p_i)(1 - c_i) if bit i of s is set, else p_i c_i
    (digit i is independent of the carry from the digits below it).
    """
    s = params.sensitivity if shift is None else int(shift)
    if s >> params.bits:
        return Fraction(1)
    carry = Fraction(0)
    for i, p in enumerate(params.digit_probabilities):
        carry = 1 - (1 - p) * (1 - carry) if (s >> i) & 1 else p * carry
    return carry


def _extreme_shift_ratio(odds: Sequence[tuple[int, int]], s_max: int, k: int, want_max: bool) -> Fraction:
    """min (or max) over 0 <= s <= s_max and 0 <= x with x + s < 2^k of P(x + s) / P(x).

    P(x + s) / P(x) is the product over the digits that flip of r_i (0 -> 1)
    or 1 / r_i (1 -> 0), r_i = odds[i] = (numerator, denominator).  A dynamic
    programme over the digits, least significant first, with state (carry,
    [s's low digits > s_max's]), keeps the extreme product of every state;
    products are exact integer ratios.
    """
    states: dict[tuple[int, int], tuple[int, int]] = {(0, 0): (1, 1)}
    for i in range(k):
        si = (s_max >> i) & 1
        rn, rd = odds[i]
        nxt: dict[tuple[int, int], tuple[int, int]] = {}
        for (c, gt), (vn, vd) in states.items():
            for xb in (0, 1):
                for sb in (0, 1):
                    t = xb + sb + c
                    yb = t & 1
                    if xb == yb:
                        f = (vn, vd)
                    elif yb:
                        f = (vn * rn, vd * rd)
                    else:
                        f = (vn * rd, vd * rn)
                    key = (t >> 1, 1 if sb > si else (0 if sb < si else gt))
                    old = nxt.get(key)
                    if old is None or ((f[0] * old[1] > old[0] * f[1]) if want_max else (f[0] * old[1] < old[0] * f[1])):
                        nxt[key] = f
        states = nxt
    ok = [Fraction(*v) for (c, gt), v in states.items() if c == 0 and (gt == 0 or (s_max >> k))]
    return max(ok) if want_max else min(ok)


def _extreme_straddle_ratio(odds: Sequence[tuple[int, int]], t_max: int, k: int) -> Fraction:
    """max over m1, m2 >= 0 with m1 + m2 <= t_max of P(m1) / P(m2) = prod_{i in m1} r_i / prod_{i in m2} r_i."""
    states: dict[tuple[int, int], tuple[int, int]] = {(0, 0): (1, 1)}
    for i in range(k):
        ti = (t_max >> i) & 1
        rn, rd = odds[i]
        nxt: dict[tuple[int, int], tuple[int, int]] = {}
        for (c, gt), (vn, vd) in states.items():
            for ab in (0, 1):
                for bb in (0, 1):
                    t = ab + bb + c
                    if ab == bb:
                        f = (vn, vd)
                    elif ab:
                        f = (vn * rn, vd * rd)
                    else:
                        f = (vn * rd, vd * rn)
                    tb = t & 1
                    key = (t >> 1, 1 if tb > ti else (0 if tb < ti else gt))
                    old = nxt.get(key)
                    if old is None or f[0] * old[1] > old[0] * f[1]:
                        nxt[key] = f
        states = nxt
    return max(Fraction(*v) for (c, gt), v in states.items() if c == 0 and gt == 0)


@dataclass(frozen=True)
class RatioCertificate:
    """Exact extreme privacy-loss ratios of a gadget away from its support's edge.

    ``rho_min`` / ``rho_max``: min / max of P(x + s) / P(x) over 1 <= s <= S
    and x + s < 2^K (one geometric); ``rho_straddle``: max of P(m1) / P(m2)
    over m1 + m2 <= S - 1 (used by the signed construction only).
    ``ok``: rho_min >= e^-eps, and for the signed construction also
    rho_max <= e^eps and rho_straddle <= e^eps, all against rigorous
    rational bounds of e^(+-eps).
    """

    rho_min: Fraction
    rho_max: Fraction
    rho_straddle: Fraction
    ok: bool


@lru_cache(maxsize=512)
def ratio_certificate(params: DiscreteLaplaceParams) -> RatioCertificate:
    """Compute :class:`RatioCertificate` (three exact dynamic programmes over the digits)."""
    s, k = params.sensitivity, params.bits
    if s >> k:  # the support does not even hold one shift: nothing to certify
        return RatioCertificate(Fraction(0), Fraction(0), Fraction(0), False)
    odds = [(m, (1 << a) - m) for m, a in zip(params.numerators, params.accs)]
    rmin = _extreme_shift_ratio(odds, s, k, want_max=False)
    rmax = _extreme_shift_ratio(odds, s, k, want_max=True)
    rst = _extreme_straddle_ratio(odds, s - 1, k) if params.construction == "signed" else Fraction(1)
    e_neg_hi = exp_bounds(-params.epsilon)[1]
    e_lo = exp_bounds(params.epsilon)[0]
    ok = rmin >= e_neg_hi
    if params.construction == "signed":
        ok = ok and rmax <= e_lo and rst <= e_lo
    return RatioCertificate(rmin, rmax, rst, ok)


def _one_sided_rounding_bound(params: DiscreteLaplaceParams) -> Fraction:
    """Rigorous bound of sum_{x + S < 2^K} [P(x) - e^eps P(x + s)]_+ from per-digit rounding (see delta_bound)."""
    eps, s_ = params.epsilon, params.sensitivity
    carry = Fraction(0)
    rounding = Fraction(0)
    for i, (m, a) in enumerate(zip(params.numerators, params.accs)):
        two = 1 << a
        p = Fraction(m, two)
        r = Fraction(m, two - m)
        rlo, rhi = _digit_ratio_bounds(eps, s_, i)
        c01 = max(Fraction(0), 1 - r / rhi)
        c10 = max(Fraction(0), 1 - rlo / r) if rlo > 0 else Fraction(1)
        gamma = Fraction(1) if (1 << i) <= s_ else carry
        rounding += _up(gamma * (c01 * (1 - p) + c10 * p))
        carry = _up(1 - (1 - p) * (1 - carry)) if (s_ >> i) & 1 else _up(p * carry)
    return rounding


def _tv_to_ideal(params: DiscreteLaplaceParams) -> Fraction:
    tv = Fraction(0)
    for i, p in enumerate(params.digit_probabilities):
        plo, phi = _digit_prob_bounds(params.epsilon, params.sensitivity, i)
        tv += _up(max(abs(p - plo), abs(p - phi)))
    tv += _digit_ratio_bounds(params.epsilon, params.sensitivity, params.bits)[1]  # alpha^(2^K) = P[G >= 2^K]
    return min(Fraction(1), (2 if params.construction == "difference" else 1) * tv)


def delta_bound(params: DiscreteLaplaceParams) -> tuple[Fraction, Fraction]:
    """Rigorous upper bounds (delta(eps), TV to the ideal mechanism) for the gadget.

    One geometric X (digits p_i), neighbours' values h and h + s, 1 <= s <= S.

    Difference construction.  h + Z = (h + X1) - X2 and h + s + Z =
    (h + X1) - (X2 - s): both are the same randomized map applied to X2 and
    to X2 - s, so by data processing (negative s: swap X1 and X2)

        D_{e^eps}(h + Z || h + s + Z) <= D1(s) := sum_x [P(x) - e^eps P(x + s)]_+ .

    Signed construction (Z = X or -(X + 1), each with probability 1/2).  The
    hockey-stick sum over z splits into z >= 0 (both points on the X side),
    z + s < 0 (both on the -(X + 1) side) and the straddling z in [-s, -1]:

        delta(s) = D1(s) / 2 + sum_x [P(x + s) - e^eps P(x)]_+ / 2
                   + sum_{m1 + m2 = s - 1} [P(m1) - e^eps P(m2)]_+ / 2,

    and Z is symmetric about -1/2, so shifts -s give the same value.

    Certified value (:func:`ratio_certificate`).  D1(s) = P[X >= 2^K - s]
    (the terms with x + s >= 2^K) plus terms that vanish when
    P(x + s) / P(x) >= e^-eps for every x + s < 2^K, s <= S; the other two
    sums vanish when P(x + s) / P(x) <= e^eps and P(m1) / P(m2) <= e^eps.
    The three extremes are computed exactly, so when they pass the bound is
    P[X >= 2^K - S] (difference) or exactly delta = P[X >= 2^K - S] / 2
    (signed), the tail being exact (:func:`geometric_tail`).

    Otherwise (rounding bound).  For x + s < 2^K, P(x + s) / P(x) equals
    alpha^s (the ideal) times a product of per-digit factors u_i^(+-1),
    u_i = r_i / alpha^(2^i), r_i = p_i / (1 - p_i), over the digits that
    flip, so with e^eps alpha^s >= 1 and 1 - prod v_i <= sum_i [1 - v_i]_+,

        [P(x) - e^eps P(x+s)]_+ <= P(x) sum_{i flips} c_i(direction),
        c_i(0->1) = [1 - u_i]_+,   c_i(1->0) = [1 - 1/u_i]_+ .

    Digit i flips iff s_i XOR carry_i(x, s).  If 2^i > S then s_i = 0 and the
    carry into digit i for s is at most the one for S, which is independent
    of digit i; so P[x_i = b, i flips] <= P[x_i = b] P[carry_i(S)]; otherwise
    the flip probability is bounded by 1.  The signed construction adds
    [rho_max - e^eps]_+ / 2 and [1 - e^eps / rho_straddle]_+ / 2 (each sum has
    total weight at most 1).  Every quantity is an exact rational or a bound
    of an irrational rounded in the safe direction.

    TV bound: couple digit i of X with digit i of the ideal geometric G
    (P[G = g] = (1 - alpha) alpha^g, independent digits with p*_i) maximally;
    they differ with probability |p_i - p*_i|, and G has a digit >= K with
    probability alpha^(2^K); twice that for the two geometrics of the
    difference construction.
    """
    cert = ratio_certificate(params)
    tail = geometric_tail(params)
    tv = _tv_to_ideal(params)
    d1 = tail if cert.rho_min >= exp_bounds(-params.epsilon)[1] and cert.rho_min > 0 else min(Fraction(1), tail + _one_sided_rounding_bound(params))
    if params.construction == "difference":
        return min(Fraction(1), d1), tv
    e_lo = exp_bounds(params.epsilon)[0]
    neg = min(Fraction(1), max(Fraction(0), cert.rho_max - e_lo)) if cert.rho_max > 0 else Fraction(1)
    straddle = max(Fraction(0), 1 - e_lo / cert.rho_straddle) if cert.rho_straddle > 0 else Fraction(1)
    return min(Fraction(1), (d1 + neg + straddle) / 2), tv


# ---------------------------------------------------------------------- exact pmfs
def geometric_pmf(params: DiscreteLaplaceParams) -> tuple[np.ndarray, int]:
    """Exact pmf of one geometric: (numerators N(x) for x = 0..2^K-1 as Python ints, denominator 2^(sum of accs))."""
    if params.bits > 20:
        raise NoiseParameterError(f"the exact pmf has 2^{params.bits} points; at most 2^20 are supported")
    arr = np.array([1], dtype=object)
    for m, a in zip(params.numerators, params.accs):
        arr = np.concatenate([arr * ((1 << a) - m), arr * m])
    return arr, 1 << sum(params.accs)


def discrete_laplace_pmf(params: DiscreteLaplaceParams) -> tuple[np.ndarray, np.ndarray, int]:
    """Exact pmf of the noise Z: (values as int64, integer numerators, common denominator).

    Difference: Z = X1 - X2 on -(2^K-1)..2^K-1, denominator den^2.  Signed:
    Z on -2^K..2^K-1 with q(z) = N(z) for z >= 0 and N(-z-1) for z < 0, over 2 den.
    """
    if params.bits > 14:
        raise NoiseParameterError(f"the exact noise pmf is computed for K <= 14 digits, got {params.bits}")
    n, den = geometric_pmf(params)
    size = n.shape[0]
    if params.construction == "signed":
        return np.arange(-size, size, dtype=np.int64), np.concatenate([n[::-1], n]), 2 * den
    half = np.empty(size, dtype=object)
    for z in range(size):
        half[z] = int(np.dot(n[z:], n[: size - z]))
    q = np.concatenate([half[:0:-1], half])
    values = np.arange(-(size - 1), size, dtype=np.int64)
    return values, q, den * den


def delta_exact(params: DiscreteLaplaceParams) -> Fraction:
    """max over 1 <= |s| <= S of sum_z [q(z) - e^eps q(z + s)]_+ from the exact pmf (e^eps by a rational lower bound).

    Raises :class:`NoiseParameterError` if the support or S * support exceeds
    :data:`EXACT_MAX_BITS` / :data:`EXACT_MAX_WORK`.
    """
    if not _exact_feasible(params):
        raise NoiseParameterError(
            f"exact delta needs K <= {EXACT_MAX_BITS} and S * 2^(K+1) <= {EXACT_MAX_WORK}; got K={params.bits}, S={params.sensitivity}"
        )
    _, q, den = discrete_laplace_pmf(params)
    n = q.shape[0]
    if params.sensitivity >= n:
        return Fraction(1)
    elo = exp_bounds(params.epsilon)[0]
    a, b = elo.numerator, elo.denominator
    bq = q * b
    best = 0
    for s in range(1, params.sensitivity + 1):
        # shift +s: q(z) vs q(z + s); shift -s: q(z + s) vs q(z) (z + s runs over the same grid)
        for d in (bq[: n - s] - a * q[s:], bq[s:] - a * q[: n - s]):
            tot = sum(int(v) for v in d if v > 0) + int(bq[n - s :].sum())
            best = max(best, tot)
    return Fraction(best, b * den)


def _exact_feasible(params: DiscreteLaplaceParams) -> bool:
    return params.bits <= EXACT_MAX_BITS and params.sensitivity * (2 << params.bits) <= EXACT_MAX_WORK


@lru_cache(maxsize=256)
def discrete_laplace_guarantee(params: DiscreteLaplaceParams, exact: str = "auto") -> NoiseGuarantee:
    """The (epsilon, delta) of the gadget; ``exact`` in {"auto", "always", "never"}.

    ``method``: ``exact`` (hockey-stick divergence summed over the exact pmf;
    ``auto`` uses it when :func:`_exact_feasible`), ``certified`` (the exact
    ratio certificates of :func:`ratio_certificate` hold: delta is the exact
    tail P[X >= 2^K - S], halved for the signed construction, where it is
    the exact divergence), or ``bound`` (:func:`delta_bound`).
    """
    if exact not in ("auto", "always", "never"):
        raise NoiseParameterError(f"exact must be 'auto', 'always' or 'never', got {exact!r}")
    bound, tv = delta_bound(params)
    if exact == "always" or (exact == "auto" and _exact_feasible(params)):
        d, method = delta_exact(params), "exact"
    elif ratio_certificate(params).ok:
        d, method = bound, "certified"
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


# ---------------------------------------------------------------------- parameter selection
def _target(lam: int, n_samples: int, target_delta: object | None, delta: object | None = None) -> Fraction:
    """The per-release delta: ``target_delta`` or ``delta`` if given, else 2^-lam / n_samples (2^-40 by default)."""
    for value, name in ((target_delta, "target_delta"), (delta, "delta")):
        if value is not None:
            t = _fraction(value, name)
            if not 0 < t < 1:
                raise NoiseParameterError(f"{name} must lie in (0, 1), got {value!r}")
            return t
    lam = _positive_int(lam, "lam (statistical security, bits)", 256)
    n = _positive_int(n_samples, "n_samples")
    return Fraction(1, (1 << lam) * n)


def _variance_tolerance(value: object) -> Fraction:
    t = _fraction(value, "variance_tolerance")
    if not Fraction(1, 1 << 40) <= t <= 1:
        raise NoiseParameterError(f"variance_tolerance must lie in [2^-40, 1], got {value!r}")
    return t


def ideal_discrete_laplace_variance(epsilon: object, sensitivity: int) -> tuple[Fraction, Fraction]:
    """Rational bounds lo <= 2 alpha / (1 - alpha)^2 <= hi, alpha = exp(-epsilon / S) (increasing in alpha)."""
    eps = _epsilon(epsilon)
    s = _positive_int(sensitivity, "sensitivity")
    lo, hi = _digit_ratio_bounds(eps, s, 0)
    f = lambda a: 2 * a / (1 - a) ** 2  # noqa: E731
    return f(lo), (f(hi) if hi < 1 else Fraction(10) ** 400)


@lru_cache(maxsize=128)
def _choose_uniform(eps: Fraction, s: int, target: Fraction, max_acc: int, max_bits: int, construction: str) -> DiscreteLaplaceParams:
    """The PR-1 rule: one precision acc for every digit (rounded up), the rigorous bound and TV both <= target."""
    def ok(k: int, acc: int) -> DiscreteLaplaceParams | None:
        p = discrete_laplace_params(eps, s, k, acc, construction)
        d, tv = delta_bound(p)
        return p if d <= target and tv <= target else None

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
        cand = discrete_laplace_params(eps, s, k, hi, construction)
        if best is None or cand.and_gates < best.and_gates:
            best = cand
    if best is None:
        raise NoiseParameterError(
            f"no support up to 2^{max_bits} and precision up to {max_acc} bits reaches delta <= {float(target):.3g} "
            f"for epsilon={float(eps):.6g}, sensitivity={s}"
        )
    return replace(best, target_delta=target)


def _simplest_dyadic_ratio(ln: int, ld: int, hn: int, hd: int, e: int) -> tuple[int, int] | None:
    """:func:`simplest_dyadic` of [ln/ld, hn/hd] (positive ints), on the grid 2^-e."""
    low = -((-ln << e) // ld)
    high = (hn << e) // hd
    if low > high or low <= 0:
        return None
    if low == high:
        m = low
    else:
        j = (low ^ high).bit_length() - 1
        m = (high >> j) << j
        if low & ((1 << (j + 1)) - 1) == 0:
            m = low
    t = _tz(m)
    return m >> t, e - t


def simplest_dyadic(lo: object, hi: object, max_bits: int = MAX_ACC) -> tuple[int, int] | None:
    """The dyadic m / 2^a in [lo, hi] with the smallest a >= 1 (then m is odd or a = 1), or None.

    A coin m / 2^a with m odd costs a - 1 AND gates (:func:`less_than_const`),
    so this is the cheapest coin whose probability lies in [lo, hi].  Method:
    the number of [lo, hi] with the most trailing zeros in binary is lo's
    and hi's common prefix followed by a 1 and zeros (or lo itself).
    ``lo`` and ``hi`` are Fractions or floats (converted exactly).
    """
    lo, hi = Fraction(lo), Fraction(hi)
    if lo <= 0 or hi < lo or lo >= 1:
        return None
    if lo <= Fraction(1, 2) <= hi:
        return 1, 1
    return _simplest_dyadic_ratio(lo.numerator, lo.denominator, hi.numerator, hi.denominator, max_bits)


def _logistic(t: float) -> float:
    """1 / (1 + e^-t) without overflow."""
    if t >= 0:
        return 1.0 / (1.0 + math.exp(-t))
    e = math.exp(t)
    return e / (1.0 + e)


def _design_digits(eps: float, s: int, k: int, theta: float, beta: float, chain_from: int, lift: float, max_acc: int):
    """Per-digit coins (numerators, precisions) for one point of the design search, or None.

    The digits are designed around the ideal at eps_d = eps (1 - theta), so
    that the certificate rho_min >= e^-eps has slack theta eps; the design
    spends a log-odds budget B = beta theta eps (beta > 1 bets that the
    signed rounding errors do not all line up; the exact certificate decides):
    the lowest digits whose ideal probability is within B/2 of 1/2 in total
    become fair coins (free); digits below ``chain_from`` get the rest of B
    in equal two-sided log-odds intervals; higher (rare) digits are rounded
    *up* by at least the sum of all lower distortions (a chain: the highest
    digit that flips 0 -> 1 when s is added outweighs every lower flip) and
    at most ``lift`` more.  Each digit takes the cheapest dyadic probability
    in its interval (:func:`simplest_dyadic`).
    """
    eps_d = eps * (1.0 - theta)
    budget = beta * theta * eps
    free, used = 0, 0.0
    while free < k and used + (2.0**free) * eps_d / s <= budget / 2:
        used += (2.0**free) * eps_d / s
        free += 1
    width = (budget - used) / max(1, chain_from - free)
    nums, accs = [], []
    dsum = used
    for i in range(k):
        ell = -(2.0**i) * eps_d / s  # ideal log-odds of digit i
        if i < free:
            nums.append(1)
            accs.append(1)
            continue
        if i < chain_from:
            lo, hi, d = ell - width, ell + width, width
        else:
            lo, hi, d = ell + dsum, ell + dsum + lift, dsum + lift
        plo, phi = _logistic(lo), min(_logistic(hi), 0.5)
        if not 0 < plo <= phi:
            return None
        if phi >= 0.5:
            md = (1, 1)
        else:
            md = _simplest_dyadic_ratio(*plo.as_integer_ratio(), *phi.as_integer_ratio(), max_acc)
            if md is None:
                return None
        nums.append(md[0])
        accs.append(md[1])
        dsum += d
    return tuple(nums), tuple(accs)


def _float_variance(nums, accs, construction: str) -> float:
    ps = [m / 2.0**a for m, a in zip(nums, accs)]
    v = sum(4.0**i * p * (1 - p) for i, p in enumerate(ps))
    if construction == "difference":
        return 2 * v
    mean = sum(2.0**i * p for i, p in enumerate(ps))
    return v + mean * mean + mean + 0.25


@lru_cache(maxsize=128)
def _choose_designed(eps: Fraction, s: int, target: Fraction, tau: Fraction, max_acc: int, max_bits: int,
                     construction: str) -> DiscreteLaplaceParams:
    """Cheapest gadget with certified delta <= target and exact Var(Z) <= (1 + tau) Var(ideal discrete Laplace).

    Searched: support K (from the smallest whose ideal tail meets the
    target, minus one, plus two), the calibration slack theta (scaled by the
    variance's sensitivity to epsilon, d ln Var / d eps = (1 + alpha) /
    (S (1 - alpha)), so that theta costs about tau / 2^j of variance), the
    budget factor beta, the first chain digit and the chain's lift.  Every
    candidate that is cheaper than the best so far is checked exactly: its
    variance (exact rational), its ratio certificate and its exact tail.
    """
    ef = float(eps)
    limit = (1 + tau) * ideal_discrete_laplace_variance(eps, s)[0]
    flimit = float(limit)
    factor = 0.5 if construction == "signed" else 1.0
    if construction == "signed" and Fraction(1, 4) > tau * ideal_discrete_laplace_variance(eps, s)[1]:
        raise NoiseParameterError(f"the signed construction adds 1/4 to the variance, more than {float(tau):.3g} of the ideal "
                                  f"{float(ideal_discrete_laplace_variance(eps, s)[0]):.4g} for epsilon={ef:.6g}, sensitivity={s}")
    ln_target = math.log(float(target))
    k0 = 1
    while k0 < max_bits and ((1 << k0) <= s or -((1 << k0) - s) * ef / s + math.log(factor) > ln_target):
        k0 += 1
    a = math.exp(-ef / s)
    gain = (ef / s) * (1 + a) / max(1e-300, 1 - a)  # ~ relative variance per unit of theta (>= 2)
    tf = float(tau)
    thetas = [min(0.25, tf / gain * 2.0 ** -j) for j in range(1, 5)]
    lifts = [min(ef, 4.0) / 8, tf / 8]
    best: tuple[int, Fraction, DiscreteLaplaceParams] | None = None
    for k in range(max(1, k0 - 1), min(max_bits, k0 + 2) + 1):
        if (1 << k) <= s:
            continue
        for theta in thetas:
            for beta in (2.0, 4.0, 8.0, 16.0, 32.0, 64.0):
                for chain_from in range(max(0, k - 8), k + 1):
                    for lift in lifts if chain_from < k else lifts[:1]:
                        design = _design_digits(ef, s, k, theta, beta, chain_from, lift / max(1, k - chain_from), max_acc)
                        if design is None:
                            continue
                        nums, accs = design
                        cost = sum(_coin_ands(m, ac) for m, ac in zip(nums, accs))
                        cost = 2 * cost + k if construction == "difference" else cost
                        if best is not None and cost > best[0]:
                            continue
                        if _float_variance(nums, accs, construction) > flimit * (1 + 1e-9):
                            continue
                        p = DiscreteLaplaceParams(eps, s, k, max(accs), nums, target, accs, construction)
                        var = p.noise_variance
                        if var > limit or (best is not None and (cost, var) >= best[:2]):
                            continue
                        if not ratio_certificate(p).ok or geometric_tail(p) * Fraction(factor) > target:
                            continue
                        best = (cost, var, p)
    if best is None:
        raise NoiseParameterError(
            f"no {construction} gadget with support up to 2^{max_bits} and precision up to {max_acc} bits reaches "
            f"delta <= {float(target):.3g} and variance within {float(tau):.3g} of the ideal for epsilon={ef:.6g}, sensitivity={s}"
        )
    return best[2]


def choose_discrete_laplace(
    epsilon: object,
    sensitivity: int,
    *,
    delta: object | None = None,
    lam: int = 40,
    n_samples: int = 1,
    target_delta: object | None = None,
    construction: str = "difference",
    precision: str = "designed",
    variance_tolerance: object = DEFAULT_VARIANCE_TOLERANCE,
    max_acc: int = 192,
    max_bits: int = MAX_BITS,
) -> DiscreteLaplaceParams:
    """Pick the gadget's support 2^K and its digits' coins (rule: module docstring, "Parameter selection").

    The per-release delta is ``delta`` (or ``target_delta``), else 2^-lam /
    n_samples; the defaults give :data:`DEFAULT_DELTA` = 2^-40.
    ``precision="designed"`` (default): per-digit coins, certified delta <=
    target and exact noise variance within ``variance_tolerance`` (relative)
    of the ideal discrete Laplace, fewest AND gates.  ``precision="uniform"``:
    the earlier rule (one precision for all digits, rigorous bound and TV to
    the ideal both <= target), kept for comparison.
    """
    eps = _epsilon(epsilon)
    s = _positive_int(sensitivity, "sensitivity")
    target = _target(lam, n_samples, target_delta, delta)
    if construction not in CONSTRUCTIONS:
        raise NoiseParameterError(f"construction must be one of {CONSTRUCTIONS}, got {construction!r}")
    max_acc = _positive_int(max_acc, "max_acc", MAX_ACC)
    max_bits = _positive_int(max_bits, "max_bits", MAX_BITS)
    if precision == "uniform":
        return _choose_uniform(eps, s, target, max_acc, max_bits, construction)
    if precision != "designed":
        raise NoiseParameterError(f"precision must be 'designed' or 'uniform', got {precision!r}")
    return _choose_designed(eps, s, target, _variance_tolerance(variance_tolerance), max_acc, max_bits, construction)


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
        object.__setattr__(self, "epsilon", _epsilon(self.epsilon))
        if self.k not in KRR_K:
            raise NoiseParameterError(f"k-ary randomized response is built for k in {KRR_K}, got k={self.k!r}")
        _positive_int(self.acc, "acc", MAX_ACC)
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
        return min(self.epsilon, _ln_upper((1 - phi) * (self.k - 1) / phi))


@dataclass(frozen=True)
class KRREstimator:
    """Unbiased per-pair estimate of a k-valued kernel from its k-RR report, and its exact variance.

    The report y of a true value f has E[y | f] = lam f + mu, lam = 1 - k phi / (k - 1),
    mu = phi sum(v) / (k - 1), so f^ = (y - mu) / lam = ``slope`` y + ``intercept`` is
    unbiased, and Var(f^ | f) = c0 + c1 f + c2 f^2 (``variance_coefficients``) with

        c2 = (1 - lam) / lam,   c1 = -2 mu / lam,   c0 = (phi Q / (k - 1) - mu^2) / lam^2,

    Q = sum(v^2) (derivation: E[y^2 | f] = lam f^2 + phi Q / (k - 1)).  The additive
    mechanisms use the same record with no ``values``, slope 1, intercept -E Z and
    the constant variance Var Z.
    """

    values: tuple[int, ...]
    slope: Fraction
    intercept: Fraction
    variance_coefficients: tuple[Fraction, Fraction, Fraction]

    def variance(self, f: object) -> Fraction:
        c0, c1, c2 = self.variance_coefficients
        f = Fraction(f)
        return c0 + c1 * f + c2 * f * f

    @property
    def max_variance(self) -> Fraction:
        if not self.values:
            return self.variance_coefficients[0]  # additive noise: constant variance
        return max(self.variance(v) for v in self.values)


def krr_estimator(params: KaryRRParams, values: Sequence[int]) -> KRREstimator:
    """The debiasing of :class:`KaryRRParams` for the kernel values ``values`` (value of code i = values[i])."""
    vals = tuple(int(v) for v in values)
    if len(vals) != params.k or len(set(vals)) != params.k:
        raise NoiseParameterError(f"k-RR with k={params.k} needs {params.k} distinct values, got {values!r}")
    k, phi = params.k, params.flip_probability
    lam = 1 - k * phi / (k - 1)
    mu = phi * sum(vals) / (k - 1)
    q = Fraction(sum(v * v for v in vals))
    coeffs = ((phi * q / (k - 1) - mu * mu) / (lam * lam), -2 * mu / lam, (1 - lam) / lam)
    return KRREstimator(vals, 1 / lam, -mu / lam, coeffs)


def _krr_worst_variance(phi: float, k: int) -> float:
    """max over the values 0..k-1 of Var(f^ | f) (affine maps of the values scale it uniformly)."""
    lam = 1 - k * phi / (k - 1)
    mu = phi * sum(range(k)) / (k - 1)
    q = sum(v * v for v in range(k))
    return max((lam * (1 - lam) * f * f - 2 * lam * mu * f + phi * q / (k - 1) - mu * mu) / (lam * lam) for f in range(k))


def choose_krr(epsilon: object, k: int = 3, variance_tolerance: object = DEFAULT_VARIANCE_TOLERANCE) -> KaryRRParams:
    """The cheapest flip probability phi = m / 2^a (fewest AND gates) that is certified eps-DP and whose
    worst-case estimator variance is within ``variance_tolerance`` (relative) of the ideal k-RR's."""
    eps = _epsilon(epsilon)
    if k not in KRR_K:
        raise NoiseParameterError(f"k-ary randomized response is built for k in {KRR_K}, got k={k!r}")
    tau = float(_variance_tolerance(variance_tolerance))
    phi_min = Fraction(k - 1) / (exp_bounds(eps)[0] + k - 1)  # >= the ideal (k-1)/(e^eps+k-1)
    ideal = float(k - 1) / (math.exp(min(float(eps), 700.0)) + k - 1)
    limit = (1 + tau) * _krr_worst_variance(ideal, k)
    lo, hi = ideal, (k - 1) / k * (1 - 1e-12)  # the variance increases with phi
    for _ in range(200):
        mid = (lo + hi) / 2
        if _krr_worst_variance(mid, k) <= limit:
            lo = mid
        else:
            hi = mid
    md = simplest_dyadic(phi_min, max(phi_min, Fraction(lo)))
    if md is None:
        raise NoiseParameterError(f"no flip probability up to {MAX_ACC} bits for epsilon={float(eps):.6g}")
    return KaryRRParams(eps, k, md[1], md[0])


def krr_guarantee(params: KaryRRParams) -> NoiseGuarantee:
    """Pure DP with the effective epsilon ln((1 - phi)(k - 1)/phi) rounded up (<= requested epsilon)."""
    e_lo, e_hi = exp_bounds(params.epsilon)
    k = params.k
    plo, phi = Fraction(k - 1) / (e_hi + k - 1), Fraction(k - 1) / (e_lo + k - 1)
    p = params.flip_probability
    return NoiseGuarantee(
        epsilon=_to_float_up(params.effective_epsilon()),
        delta=0.0,
        method="pure",
        delta_bound=0.0,
        tv_to_ideal=_to_float_up(max(abs(p - plo), abs(p - phi))),
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
    return Int(b, [bernoulli_bit(b, stream, m, a) for m, a in zip(params.numerators, params.accs)], False)


def discrete_laplace_value(b: Builder, stream: _BitStream, params: DiscreteLaplaceParams) -> Int:
    """The noise Z as a signed (K+1)-bit value.

    Difference: X1 - X2 (K ANDs for the subtraction).  Signed: one geometric
    X and one uniform bit s; Z = X XOR (s, ..., s) with sign bit s, which is X
    when s = 0 and ~X = -(X + 1) in two's complement when s = 1 (free).
    """
    x1 = geometric_value(b, stream, params)
    k = params.bits + 1
    if params.construction == "signed":
        s = stream.take(1)[0]
        return Int(b, [b.xor(v, s) for v in x1.bits] + [s], True)
    x2 = geometric_value(b, stream, params)
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
    """A circuit with noise inside, what it guarantees, and how to read its output.

    ``circuit`` has the kernel inputs (if any) first, then the random-bit
    groups ``rx`` (garbler) and ``ry`` (evaluator) of ``random_width`` bits
    each; the circuit uses rx XOR ry.  One output unit is ``unit`` natural
    kernel units; the noiseless value lies in ``value_range`` (output units)
    and neighbouring inputs move it by at most ``sensitivity``.  ``guarantee``
    is None for the raw coin and geometric gadgets (building blocks, not
    mechanisms).

    Reading the output ``out`` (:meth:`estimates`): for the additive
    mechanisms (``discrete_laplace``, ``signed_geometric``) out = value +
    noise; for ``krr`` out is a code and the reported value is
    ``codes[out]``.  Either way ``slope * reported + intercept`` is an
    unbiased estimate of the value, whose variance given the value h is
    c0 + c1 h + c2 h^2 (``variance_coefficients``, exact rationals).
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
    codes: tuple[int, ...] | None = None

    @property
    def and_gates(self) -> int:
        return self.circuit.n_and

    @property
    def noise_and_gates(self) -> int:
        """AND gates of the noise gadget alone (the rest is the kernel and the output adder)."""
        return self.params.and_gates

    def noise_pmf(self) -> dict[int, Fraction]:
        """Exact pmf of the noise (small supports only; see :func:`discrete_laplace_pmf`).

        For ``krr`` (and ``randomized_response``) it is the pmf of the shift
        d = (reported code - true code) mod k.
        """
        p = self.params
        if self.mechanism == "bernoulli":
            return {0: 1 - p.probability, 1: p.probability}
        if self.mechanism == "randomized_response":
            return {0: 1 - p.flip_probability, 1: p.flip_probability}
        if self.mechanism == "krr":
            return {0: p.keep_probability, **{d: p.other_probability for d in range(1, p.k)}}
        if self.mechanism == "geometric":
            n, den = geometric_pmf(p)
            return {x: Fraction(int(v), den) for x, v in enumerate(n)}
        vals, q, den = discrete_laplace_pmf(p)
        return {int(z): Fraction(int(v), den) for z, v in zip(vals, q)}

    def _estimator(self) -> KRREstimator:
        if self.mechanism == "krr":
            return krr_estimator(self.params, self.codes)
        if self.mechanism in ("discrete_laplace", "signed_geometric"):
            # additive noise: out = h + Z, so out - E Z is unbiased with the constant variance Var Z
            var = self.params.noise_variance
            return KRREstimator((), Fraction(1), -self.params.noise_mean, (var, Fraction(0), Fraction(0)))
        raise NoiseParameterError(f"the {self.mechanism} gadget is a building block without an estimator")

    @property
    def debias(self) -> tuple[Fraction, Fraction]:
        """(slope, intercept): slope * reported + intercept is unbiased for the value (output units)."""
        e = self._estimator()
        return e.slope, e.intercept

    @property
    def variance_coefficients(self) -> tuple[Fraction, Fraction, Fraction]:
        """(c0, c1, c2): Var(unbiased estimate | value h) = c0 + c1 h + c2 h^2 (output units, exact)."""
        return self._estimator().variance_coefficients

    def estimate_variance(self, h: object) -> Fraction:
        """Var of the per-pair unbiased estimate when the kernel value is h (output units)."""
        return self._estimator().variance(h)

    @property
    def max_estimate_variance(self) -> Fraction:
        """The largest per-pair estimate variance over the kernel's values (public: no data involved)."""
        c0, c1, c2 = self.variance_coefficients
        if c1 == 0 and c2 == 0:
            return c0
        if self.codes is not None:
            return max(self.estimate_variance(v) for v in self.codes)
        lo, hi = self.value_range
        return max(self.estimate_variance(lo), self.estimate_variance(hi))  # a convex quadratic: the ends

    def reported_values(self, out: np.ndarray) -> np.ndarray:
        """Decoded outputs (:func:`decode_output`) -> reported values in output units (int64)."""
        out = np.asarray(out, dtype=np.int64)
        if self.codes is None:
            return out
        if out.size and (out.min() < 0 or out.max() >= len(self.codes)):
            raise NoiseParameterError(f"k-RR output code outside 0..{len(self.codes) - 1}")
        return np.asarray(self.codes, dtype=np.int64)[out]

    def estimates(self, out: np.ndarray) -> np.ndarray:
        """Unbiased per-pair estimates (float64, output units) from decoded outputs."""
        slope, intercept = self.debias
        return float(slope) * self.reported_values(out).astype(np.float64) + float(intercept)

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
    """Circuit: inputs rx, ry; output ``out`` = Z (signed, K+1 bits; either construction), with its guarantee."""
    b = Builder(f"{params.mechanism}_K{params.bits}_acc{params.acc}")
    st = _random_groups(b, params.random_bits)
    b.output("out", discrete_laplace_value(b, st, params))
    st.check_used()
    return NoisyCircuit(
        b.build(),
        params.mechanism,
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


def krr_value(b: Builder, stream: _BitStream, code: Sequence[int], params: KaryRRParams) -> list[int]:
    """k-RR of a value given by its code bits; returns the reported code bits.

    k = 2: one bit, reported = bit XOR flip.  k = 3: code (c0, c1) =
    ([i = 1], [i = 2]) of the value index i in Z_3 (code 3 never occurs), and
    t = [i = 0] = NOT(c0 XOR c1) is free.  i + 1 has code (t, c0), i + 2 has
    code (c1, t), both free; a uniform bit r picks one of them (o = r ? i+2 :
    i+1, 2 ANDs) and the flip coin f picks o or i (2 ANDs): the reported
    index is i + d mod 3 with P[d = 0] = 1 - phi, P[d = 1] = P[d = 2] = phi/2.
    """
    f = bernoulli_bit(b, stream, params.numerator, params.acc)
    if params.k == 2:
        return [b.xor(code[0], f)]
    c0, c1 = code
    r = stream.take(1)[0]
    t = b.inv(b.xor(c0, c1))
    o0 = b.mux_bit(r, c1, t)
    o1 = b.mux_bit(r, t, c0)
    return [b.mux_bit(f, o0, c0), b.mux_bit(f, o1, c1)]


def krr_gadget(params: KaryRRParams) -> NoisyCircuit:
    """Circuit: inputs ``x`` (garbler: the value's code, 1 bit for k = 2, 2 bits for k = 3), rx, ry;
    output ``out``: the reported code."""
    bld = Builder(f"krr{params.k}_{params.numerator}_{params.acc}")
    width = 1 if params.k == 2 else 2
    x = bld.input("x", width, GARBLER)
    st = _random_groups(bld, params.random_bits)
    bld.output("out", Int(bld, krr_value(bld, st, x.bits, params), False))
    st.check_used()
    return NoisyCircuit(bld.build(), "krr", params, krr_guarantee(params), params.random_bits,
                        value_range=(0, params.k - 1), sensitivity=params.k - 1, codes=tuple(range(params.k)))


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

#: Kernels with few values, for k-ary randomized response: name -> values in code order.
#: The code of a value is its index mod k: kendall's -1 is index 2 (= -1 mod 3).
KERNEL_VALUES: dict[str, tuple[int, ...]] = {"auc": (0, 1, 2), "kendall": (0, 1, -1), "collision": (0, 1)}

#: Names accepted by :func:`noisy_kernel`'s ``mechanism``.
MECHANISMS = ("auto", "krr", "discrete_laplace", "signed_geometric")


def _kernel_code(b: Builder, name: str, h: Int) -> list[int]:
    """Code bits of a kernel value for :func:`krr_value` (all free: XORs of the kernel's output bits)."""
    if name == "kendall":  # bits (nonzero, negative): 1 = (1, 0), -1 = (1, 1)
        nz, neg = h.bits
        return [b.xor(nz, neg), neg]
    if name == "auc":  # 2[x > y] + [x == y] on bits ([x == y], [x > y])
        return list(h.bits[:2])
    return [h.bits[0]]


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


def choose_kernel_noise(
    name: str,
    epsilon: object,
    sensitivity: int,
    *,
    mechanism: str = "auto",
    delta: object | None = None,
    variance_tolerance: object = DEFAULT_VARIANCE_TOLERANCE,
    krr_values: Sequence[int] | None = None,
    lam: int = 40,
    n_samples: int = 1,
    target_delta: object | None = None,
) -> DiscreteLaplaceParams | KaryRRParams:
    """Noise parameters for one release of a kernel value (rule in the module docstring, "Choosing the mechanism").

    ``krr_values``: the kernel's values (output units) when it takes k in
    :data:`KRR_K` values, else None (k-RR then does not apply).
    ``auto``: k-RR when it applies and its worst-case per-pair variance is
    below the ideal discrete Laplace's 2 alpha / (1 - alpha)^2 (for two and
    three equally spaced values this holds at every epsilon); otherwise the
    cheaper (fewer AND gates) of the two additive constructions whose
    variance is within ``variance_tolerance`` of that ideal.
    """
    if mechanism not in MECHANISMS:
        raise NoiseParameterError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    eps = _epsilon(epsilon)
    s = max(1, _positive_int(sensitivity, "sensitivity"))
    tau = _variance_tolerance(variance_tolerance)
    kw = dict(delta=delta, lam=lam, n_samples=n_samples, target_delta=target_delta, variance_tolerance=tau)
    _target(lam, n_samples, target_delta, delta)  # validate before any work
    if mechanism == "krr" or (mechanism == "auto" and krr_values is not None):
        if krr_values is None:
            raise NoiseParameterError(f"k-ary randomized response needs a kernel with {' or '.join(map(str, KRR_K))} values; {name!r} has more")
        params = choose_krr(eps, len(krr_values), tau)
        if mechanism == "krr" or krr_estimator(params, krr_values).max_variance < ideal_discrete_laplace_variance(eps, s)[0]:
            return params
    if mechanism == "discrete_laplace":
        return choose_discrete_laplace(eps, s, construction="difference", **kw)
    if mechanism == "signed_geometric":
        return choose_discrete_laplace(eps, s, construction="signed", **kw)
    cands = [choose_discrete_laplace(eps, s, construction="difference", **kw)]
    if Fraction(1, 4) <= tau * ideal_discrete_laplace_variance(eps, s)[0]:  # the signed shape's extra 1/4 fits
        try:
            cands.append(choose_discrete_laplace(eps, s, construction="signed", **kw))
        except NoiseParameterError:
            pass
    return min(cands, key=lambda p: (p.and_gates, p.noise_variance))


def noisy_kernel(
    name: str,
    bits: int = 32,
    signed: bool = False,
    *,
    epsilon: object | None = None,
    sensitivity: int | None = None,
    fixed_point_bits: int | None = None,
    mechanism: str = "auto",
    delta: object | None = None,
    variance_tolerance: object = DEFAULT_VARIANCE_TOLERANCE,
    lam: int = 40,
    n_samples: int = 1,
    target_delta: object | None = None,
    noise: DiscreteLaplaceParams | KaryRRParams | None = None,
) -> NoisyCircuit:
    """Kernel ``name`` followed by in-circuit noise for one eps-DP release of its value.

    Units: h is the kernel's natural value (range :data:`KERNEL_RANGES`);
    t = max(0, bitlen(hi - lo) - fixed_point_bits) (t = 0 if
    ``fixed_point_bits`` is None), so one output unit is 2^t natural units
    (``result.unit``).  ``sensitivity`` is in output units (default: the
    scaled kernel's full range (hi >> t) - (lo >> t)); epsilon is the budget
    of this one release; ``delta`` its delta (default 2^-40, or 2^-lam /
    n_samples, or ``target_delta``).  ``mechanism`` (:func:`choose_kernel_noise`):

    * ``discrete_laplace`` / ``signed_geometric``: ``out = (h >> t) + Z``
      (signed, never overflows);
    * ``krr`` (kernels with 2 or 3 values, t = 0): ``out`` is the code of the
      reported value (``result.codes``);
    * ``auto``: k-RR where it has the lower worst-case variance, else the
      cheaper additive construction.

    ``noise`` fixes the parameters instead (its epsilon and sensitivity then
    define the mechanism).  Read the output with :meth:`NoisyCircuit.estimates`.
    """
    lo, hi = _kernel_ranges(name, bits, signed)
    span = hi - lo
    if fixed_point_bits is None:
        t = 0
    else:
        f = _positive_int(fixed_point_bits, "fixed_point_bits", 128)
        t = max(0, span.bit_length() - f)
    lo_t, hi_t = lo >> t, hi >> t
    values = KERNEL_VALUES.get(name) if t == 0 else None
    if t and name in KERNEL_VALUES and (mechanism == "krr" or isinstance(noise, KaryRRParams)):
        raise NoiseParameterError(f"k-ary randomized response needs the exact values of kernel {name!r}; it does not apply in fixed point "
                                  f"(fixed_point_bits={fixed_point_bits} drops {t} bits)")
    if noise is None:
        if epsilon is None:
            raise NoiseParameterError("noisy_kernel needs epsilon (or explicit noise parameters)")
        sens = (hi_t - lo_t) if sensitivity is None else _positive_int(sensitivity, "sensitivity")
        noise = choose_kernel_noise(name, epsilon, max(1, sens), mechanism=mechanism, delta=delta, variance_tolerance=variance_tolerance,
                                    krr_values=values, lam=lam, n_samples=n_samples, target_delta=target_delta)
    elif not isinstance(noise, (DiscreteLaplaceParams, KaryRRParams)):
        raise NoiseParameterError(f"noise must be DiscreteLaplaceParams or KaryRRParams, got {type(noise).__name__}")
    b = Builder(f"noisy_{name}{bits}{'s' if signed else 'u'}_{noise.mechanism}_acc{noise.acc}")
    h = _kernel_body(b, name, bits, signed)
    st = _random_groups(b, noise.random_bits)
    if isinstance(noise, KaryRRParams):
        if values is None or len(values) != noise.k:
            raise NoiseParameterError(f"k-ary randomized response with k={noise.k} does not apply to kernel {name!r}"
                                      + (" in fixed point" if t else ""))
        b.output("out", Int(b, krr_value(b, st, _kernel_code(b, name, h), noise), False))
        st.check_used()
        return NoisyCircuit(b.build(), "krr", noise, krr_guarantee(noise), noise.random_bits, unit=Fraction(1 << t),
                            value_range=(lo_t, hi_t), sensitivity=hi_t - lo_t, kernel=name, codes=values)
    z = discrete_laplace_value(b, st, noise)
    st.check_used()
    zlo, zhi = noise.noise_range
    width = _signed_width(lo_t + zlo, hi_t + zhi)
    ht = (h >> t) if t else h
    out = ht.extend(width, True) + z.extend(width)
    b.output("out", out.as_signed())
    return NoisyCircuit(
        b.build(),
        noise.mechanism,
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


def _coins(numerators: Iterable[int], accs: Iterable[int], n: int, randbytes: Callable[[int], bytes]) -> np.ndarray:
    """(n, k) bool: column i is 1 with probability numerators[i] / 2^accs[i] exactly (integer comparisons)."""
    cols = []
    for m, acc in zip(numerators, accs):
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
    x1 = _coins(params.numerators, params.accs, n, randbytes).astype(np.int64) @ weights
    if params.construction == "signed":
        sign = np.frombuffer(randbytes(n), dtype=np.uint8) & 1 if n else np.zeros(0, np.uint8)
        return np.where(sign.astype(bool), -x1 - 1, x1)
    x2 = _coins(params.numerators, params.accs, n, randbytes).astype(np.int64) @ weights
    return x1 - x2


def sample_discrete_laplace(params: DiscreteLaplaceParams, n: int) -> np.ndarray:
    """n draws (int64) from the gadget's exact distribution (either construction), from os.urandom (no circuit)."""
    return _dl_from(params, n, os.urandom)


def simulate_discrete_laplace(params: DiscreteLaplaceParams, n: int, rng: np.random.Generator) -> np.ndarray:
    """Seeded version of :func:`sample_discrete_laplace`: simulation and tests only."""
    if not isinstance(rng, np.random.Generator):
        raise NoiseParameterError("rng must be a numpy.random.Generator")
    return _dl_from(params, n, rng.bytes)


def _krr_from(params: KaryRRParams, codes: np.ndarray, randbytes) -> np.ndarray:
    codes = np.asarray(codes, dtype=np.int64)
    if codes.size and (codes.min() < 0 or codes.max() >= params.k):
        raise NoiseParameterError(f"k-RR codes must lie in 0..{params.k - 1}")
    n = codes.shape[0]
    flip = _coins([params.numerator], [params.acc], n, randbytes)[:, 0]
    other = (np.frombuffer(randbytes(n), dtype=np.uint8) % 2).astype(np.int64) if (n and params.k == 3) else np.zeros(n, np.int64)
    return (codes + flip * (1 + other)) % params.k


def sample_krr(params: KaryRRParams, codes: np.ndarray) -> np.ndarray:
    """k-RR reports (codes) of the true codes, from the gadget's exact distribution, from os.urandom (no circuit)."""
    return _krr_from(params, codes, os.urandom)


def simulate_krr(params: KaryRRParams, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Seeded version of :func:`sample_krr`: simulation and tests only."""
    if not isinstance(rng, np.random.Generator):
        raise NoiseParameterError("rng must be a numpy.random.Generator")
    return _krr_from(params, codes, rng.bytes)


def decode_output(nc: NoisyCircuit, bits: np.ndarray) -> np.ndarray:
    """Output bits (batch, width) of a noisy circuit -> int64 values (signed as declared)."""
    g = nc.circuit.outputs[0]
    return np.asarray(bits_to_ints(bits, g.signed))
