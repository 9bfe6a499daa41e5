"""Exact noise samplers from the OS CSPRNG, their vectorized forms, and simulations.

What it does
    Scalar exact samplers from :mod:`secrets` (the OS CSPRNG) with rational
    parameters: :func:`sample_bernoulli_rational`, :func:`sample_bernoulli_exp`
    ([CKS20, Algorithm 1]), :func:`sample_geometric`,
    :func:`sample_discrete_laplace` ([CKS20, Algorithm 2]) and
    :func:`sample_discrete_gaussian` ([CKS20, Algorithm 3]).  Vectorized exact
    versions (``*_array``) run the same algorithms on numpy arrays of
    :func:`os.urandom` words; only integer comparisons decide outcomes, so the
    output law is exactly the stated one.  :func:`sample_dyadic_laplace` and
    :func:`sample_krr` reproduce the in-circuit gadgets' laws
    (:mod:`pairwise.dp.dyadic`) without a circuit.  ``simulate_*`` functions
    take a seeded :class:`numpy.random.Generator` and use floating point: for
    experiments and tests only.

Continuous Laplace: snapping only
    A textbook floating-point Laplace leaks through the doubles it can reach
    ([Mir12]); the only continuous Laplace for real use is
    :func:`snapping_laplace`, Mironov's snapping mechanism ([Mir12, Sec. 5.2]),
    whose epsilon (with the snapping overhead) :func:`snapping_epsilon`
    returns rounded up.  The construction, the correctly rounded logarithm
    and the guarantee: docs/dp.md, "Exact samplers and the snapping
    mechanism".

Security model
    Exact samplers: the noise is a secret; it comes from the OS CSPRNG only
    (``secrets.randbelow``/``randbits``, ``os.urandom``) and is exactly
    distributed as specified.  Timing is not constant (rejection loops), as in
    [CKS20]; callers that need timing-side-channel resistance must not use
    these where the adversary times the sampler.  Simulation functions are not
    for protocol paths.
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Callable, Iterable
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from .accounting import round_up, validate_epsilon
from .errors import NoiseParameterError, PrivacyParameterError
from .exact import as_fraction, check_batch, trailing_zeros
from .validate import check_int

if TYPE_CHECKING:
    from .dyadic import DiscreteLaplaceParams, KaryRRParams

__all__ = [
    "as_fraction",
    "conservative_scale",
    "exact_epsilon",
    "sample_uniform_int",
    "sample_bernoulli_rational",
    "sample_bernoulli_exp",
    "sample_geometric",
    "sample_discrete_laplace",
    "sample_discrete_gaussian",
    "uniform_int_array",
    "bernoulli_rational_array",
    "bernoulli_exp_array",
    "geometric_array",
    "discrete_laplace_array",
    "simulate_bernoulli",
    "simulate_geometric",
    "simulate_discrete_laplace",
    "simulate_laplace",
    "discrete_laplace_pmf",
    "discrete_laplace_variance",
    "snapping_laplace",
    "snapping_laplace_array",
    "snapping_epsilon",
    "SNAPPING_ETA",
    "SAMPLER_MAX_BITS",
    "sample_dyadic_laplace",
    "simulate_dyadic_laplace",
    "sample_krr",
    "simulate_krr",
]

#: Largest integer bound handled by the vectorized uint64 code paths.
_MAX_VECTOR_BOUND = 1 << 62
_POW2 = np.array([1 << i for i in range(64)], dtype=np.uint64)


# --------------------------------------------------------------------------
# Parameter handling
# --------------------------------------------------------------------------


def _positive_fraction(value: object, name: str) -> Fraction:
    frac = as_fraction(value, name)
    if frac <= 0:
        raise PrivacyParameterError(f"{name} must be > 0, got {value!r}")
    return frac


def _check_size(size: object) -> int:
    return check_int(size, "size", lo=0, error=PrivacyParameterError)


def conservative_scale(sensitivity: object, epsilon: object, grid_bits: int = 20) -> Fraction:
    """The smallest multiple of 2**-grid_bits that is >= sensitivity / epsilon.

    Noise of this scale gives an epsilon-DP mechanism exactly (the effective
    epsilon sensitivity/scale is <= epsilon) while keeping the numerator and
    denominator small, so the vectorized exact samplers stay in uint64
    arithmetic.  ``epsilon`` and ``sensitivity`` are converted exactly.
    """
    validate_epsilon(epsilon)
    eps = as_fraction(epsilon, "epsilon")
    sens = _positive_fraction(sensitivity, "sensitivity")
    exact = sens / eps
    q = 1 << grid_bits
    return Fraction(-((-exact.numerator * q) // exact.denominator), q)


def exact_epsilon(epsilon: object, grid_bits: int = 40) -> Fraction:
    """The largest multiple of 2**-grid_bits that is <= epsilon, as a Fraction.

    Mechanisms sample with this slightly smaller (never larger) epsilon so the
    exact Bernoulli(exp(-epsilon)) draws use small integers; the mechanism is
    then epsilon'-DP with epsilon' <= epsilon.
    """
    validate_epsilon(epsilon)
    eps = as_fraction(epsilon, "epsilon")
    q = 1 << grid_bits
    down = Fraction((eps.numerator * q) // eps.denominator, q)
    if down <= 0:
        raise PrivacyParameterError(
            f"epsilon={epsilon!r} is below 2^-{grid_bits}; such a small epsilon is not supported"
        )
    return down


# --------------------------------------------------------------------------
# Scalar exact samplers (secrets)
# --------------------------------------------------------------------------


def sample_uniform_int(n: int) -> int:
    """Uniform integer in {0, ..., n-1} from the OS CSPRNG."""
    return secrets.randbelow(check_int(n, "n", lo=1, error=PrivacyParameterError))


def sample_bernoulli_rational(num: int, den: int) -> int:
    """Exact Bernoulli(num/den) for integers 0 <= num <= den, den >= 1; returns 0 or 1."""
    num = check_int(num, "num", error=PrivacyParameterError)
    den = check_int(den, "den", error=PrivacyParameterError)
    if den < 1 or num < 0 or num > den:
        raise PrivacyParameterError(f"Bernoulli(num/den) needs 0 <= num <= den and den >= 1, got {num}/{den}")
    return 1 if secrets.randbelow(den) < num else 0


def _bern_exp_unit(num: int, den: int) -> int:
    """Bernoulli(exp(-num/den)) for integers 0 <= num <= den (CKS20 Algorithm 1, first part)."""
    k = 1
    while secrets.randbelow(den * k) < num:  # Bernoulli(num / (den k))
        k += 1
    return k & 1


def _bern_exp_ints(num: int, den: int) -> int:
    """Bernoulli(exp(-num/den)) for integers num >= 0, den >= 1 (CKS20 Algorithm 1)."""
    whole, rest = divmod(num, den)
    for _ in range(whole):
        if not _bern_exp_unit(1, 1):
            return 0
    return _bern_exp_unit(rest, den)


def sample_bernoulli_exp(x: object) -> int:
    """Exact Bernoulli(exp(-x)) for rational x >= 0 (CKS20 Algorithm 1)."""
    gamma = as_fraction(x, "x")
    if gamma < 0:
        raise PrivacyParameterError(f"Bernoulli(exp(-x)) needs x >= 0, got {x!r}")
    return _bern_exp_ints(gamma.numerator, gamma.denominator)


def _geometric_scalar(s: int, t: int) -> int:
    """P[Y = y] proportional to exp(-y s / t), y >= 0 (CKS20 Alg. 2, lines 2-8)."""
    while True:
        u = secrets.randbelow(t)
        if not _bern_exp_unit(u, t):
            continue
        v = 0
        while _bern_exp_unit(1, 1):
            v += 1
        return (u + t * v) // s


def sample_geometric(rate: object) -> int:
    """Exact geometric variable: P[V = v] = (1 - e^-rate) e^(-rate v) for v = 0, 1, ...

    ``rate`` is a rational > 0 (the success probability is 1 - e^-rate).
    """
    r = _positive_fraction(rate, "rate")
    return _geometric_scalar(r.numerator, r.denominator)


def sample_discrete_laplace(scale: object) -> int:
    """Exact discrete Laplace: P[X = x] proportional to exp(-|x| / scale), x in Z (CKS20 Alg. 2)."""
    sc = _positive_fraction(scale, "scale")
    return _discrete_laplace_scalar(sc.denominator, sc.numerator)  # rate 1/scale = s/t


def _discrete_laplace_scalar(s: int, t: int) -> int:
    while True:
        y = _geometric_scalar(s, t)
        if secrets.randbits(1):
            if y == 0:
                continue
            return -y
        return y


def sample_discrete_gaussian(sigma2: object) -> int:
    """Exact discrete Gaussian: P[X = x] proportional to exp(-x^2 / (2 sigma2)) (CKS20 Alg. 3)."""
    var = _positive_fraction(sigma2, "sigma2")
    a, b = var.numerator, var.denominator  # sigma2 = a/b
    t = math.isqrt(a * b) // b + 1  # floor(sigma) + 1
    den = 2 * a * b * t * t
    while True:
        y = _discrete_laplace_scalar(1, t)
        # (|y| - sigma2/t)^2 / (2 sigma2) = (|y| b t - a)^2 / (2 a b t^2)
        if _bern_exp_ints((abs(y) * b * t - a) ** 2, den):
            return y


# --------------------------------------------------------------------------
# Vectorized exact samplers (os.urandom)
# --------------------------------------------------------------------------


def _random_words(n: int) -> np.ndarray:
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64) if n else np.zeros(0, np.uint64)


def _uniform_below(bounds: np.ndarray) -> np.ndarray:
    """One uniform integer in [0, b) per entry b of the int64 array ``bounds`` (1 <= b < 2^62)."""
    b = bounds.astype(np.uint64)
    bits = np.searchsorted(_POW2, b - np.uint64(1), side="right").astype(np.uint64)
    mask = (np.uint64(1) << bits) - np.uint64(1)
    out = np.empty(b.shape, dtype=np.uint64)
    pending = np.arange(b.size)
    while pending.size:
        r = _random_words(pending.size) & mask[pending]
        ok = r < b[pending]
        out[pending[ok]] = r[ok]
        pending = pending[~ok]
    return out.astype(np.int64)


def uniform_int_array(bound: int, size: int) -> np.ndarray:
    """``size`` independent uniform integers in {0, ..., bound-1} (int64), from os.urandom."""
    bound = check_int(bound, "bound", lo=1, error=PrivacyParameterError)
    size = _check_size(size)
    if bound >= _MAX_VECTOR_BOUND:
        return np.array([secrets.randbelow(bound) for _ in range(size)], dtype=object)
    return _uniform_below(np.full(size, bound, dtype=np.int64))


def _bern_exp_unit_array(num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(-num[i]/den)) for int64 0 <= num[i] <= den, exactly (CKS20 Alg. 1)."""
    n = num.size
    result = np.empty(n, dtype=bool)
    k = np.ones(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        kmax = int(k[active].max())
        if den * kmax >= _MAX_VECTOR_BOUND:  # astronomically rare unless den is huge
            for i in active:
                kk = int(k[i])
                nn = int(num[i])
                while secrets.randbelow(den * kk) < nn:
                    kk += 1
                result[i] = bool(kk & 1)
            break
        r = _uniform_below(den * k[active])
        success = r < num[active]
        stopped = active[~success]
        result[stopped] = (k[stopped] & 1).astype(bool)
        active = active[success]
        k[active] += 1
    return result


def _count_exp1_successes(n: int) -> np.ndarray:
    """V with P[V = v] = (1 - e^-1) e^-v: Bernoulli(exp(-1)) successes before the first failure."""
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    one = np.ones(n, dtype=np.int64)
    while active.size:
        hit = _bern_exp_unit_array(one[: active.size], 1)
        active = active[hit]
        v[active] += 1
    return v


def _geometric_batch(s: int, t: int, m: int) -> np.ndarray:
    """About m * acceptance samples with P[Y = y] proportional to exp(-y s/t); int64 or object."""
    u = _uniform_below(np.full(m, t, dtype=np.int64))
    u = u[_bern_exp_unit_array(u, t)]
    v = _count_exp1_successes(u.size)
    if v.size and t * (int(v.max()) + 1) >= (1 << 63):
        x = [int(a) + t * int(b) for a, b in zip(u, v)]
        return np.array([xi // s for xi in x], dtype=object)
    return (u + t * v) // s


def _vector_ok(*ints: int) -> bool:
    return all(0 < i < _MAX_VECTOR_BOUND >> 8 for i in ints)


def bernoulli_rational_array(num: int, den: int, size: int) -> np.ndarray:
    """``size`` exact Bernoulli(num/den) draws (uint8 array of 0/1) from os.urandom."""
    num = check_int(num, "num", error=PrivacyParameterError)
    den = check_int(den, "den", error=PrivacyParameterError)
    if den < 1 or num < 0 or num > den:
        raise PrivacyParameterError(f"Bernoulli(num/den) needs 0 <= num <= den and den >= 1, got {num}/{den}")
    size = _check_size(size)
    if den >= _MAX_VECTOR_BOUND:
        return np.array([secrets.randbelow(den) < num for _ in range(size)], dtype=np.uint8)
    return (_uniform_below(np.full(size, den, dtype=np.int64)) < num).astype(np.uint8)


def bernoulli_exp_array(x: object, size: int) -> np.ndarray:
    """``size`` exact Bernoulli(exp(-x)) draws (uint8 0/1) for rational x >= 0, from os.urandom."""
    gamma = as_fraction(x, "x")
    if gamma < 0:
        raise PrivacyParameterError(f"Bernoulli(exp(-x)) needs x >= 0, got {x!r}")
    size = _check_size(size)
    if not _vector_ok(gamma.denominator):
        return np.array([sample_bernoulli_exp(gamma) for _ in range(size)], dtype=np.uint8)
    whole = gamma.numerator // gamma.denominator
    frac = gamma - whole
    alive = np.arange(size)
    for _ in range(whole):
        if not alive.size:
            break
        alive = alive[_bern_exp_unit_array(np.ones(alive.size, dtype=np.int64), 1)]
    if alive.size:
        num = np.full(alive.size, frac.numerator, dtype=np.int64)
        alive = alive[_bern_exp_unit_array(num, frac.denominator)]
    out = np.zeros(size, dtype=np.uint8)
    out[alive] = 1
    return out


def geometric_array(rate: object, size: int) -> np.ndarray:
    """``size`` exact geometric draws, P[V = v] = (1 - e^-rate) e^(-rate v), from os.urandom."""
    r = _positive_fraction(rate, "rate")
    size = _check_size(size)
    s, t = r.numerator, r.denominator
    if not _vector_ok(s, t):
        return np.array([_geometric_scalar(s, t) for _ in range(size)], dtype=np.int64)
    parts: list[np.ndarray] = []
    have = 0
    while have < size:
        need = size - have
        batch = _geometric_batch(s, t, int(need / 0.6) + 64)
        parts.append(batch)
        have += batch.size
    return np.concatenate(parts)[:size].astype(np.int64) if parts else np.zeros(0, np.int64)


def discrete_laplace_array(scale: object, size: int) -> np.ndarray:
    """``size`` exact discrete Laplace draws, P[X = x] ~ exp(-|x|/scale), int64, from os.urandom.

    The same algorithm as :func:`sample_discrete_laplace` (CKS20 Alg. 2), run on
    arrays: every accept/reject decision is an integer comparison on uniform
    integers, so the output is exactly distributed.  Use
    :func:`conservative_scale` to turn (sensitivity, epsilon) into a scale with
    small numerator and denominator.
    """
    sc = _positive_fraction(scale, "scale")
    size = _check_size(size)
    s, t = sc.denominator, sc.numerator
    if not _vector_ok(s, t):
        return np.array([sample_discrete_laplace(sc) for _ in range(size)], dtype=np.int64)
    parts: list[np.ndarray] = []
    have = 0
    while have < size:
        need = size - have
        y = _geometric_batch(s, t, int(need / 0.3) + 64)
        neg = (_random_words(y.size) & np.uint64(1)).astype(bool)
        keep = ~(neg & (y == 0))
        z = np.where(neg, -y, y)[keep]
        parts.append(z)
        have += z.size
    return np.concatenate(parts)[:size].astype(np.int64) if parts else np.zeros(0, np.int64)


# --------------------------------------------------------------------------
# Exact probability mass functions (for tests, accounting and consistency)
# --------------------------------------------------------------------------


def discrete_laplace_pmf(x: np.ndarray | int, scale: float) -> np.ndarray:
    """P[X = x] = (1 - a)/(1 + a) a^|x| with a = exp(-1/scale) (float evaluation)."""
    a = math.exp(-1.0 / float(scale))
    return (1 - a) / (1 + a) * np.power(a, np.abs(np.asarray(x, dtype=float)))


def discrete_laplace_variance(scale: object) -> float:
    """Var X = 2a / (1 - a)^2 with a = exp(-1/scale)."""
    a = math.exp(-1.0 / float(as_fraction(scale, "scale")))
    return 2.0 * a / (1.0 - a) ** 2


# --------------------------------------------------------------------------
# Seeded simulations (NOT for protocol paths)
# --------------------------------------------------------------------------


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator (simulation only), got {type(rng).__name__}")
    return rng


def simulate_bernoulli(p: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """SIMULATION: Bernoulli(p) draws (uint8) from a seeded numpy generator, float arithmetic."""
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise PrivacyParameterError(f"p must lie in [0, 1], got {p!r}")
    return (_check_rng(rng).random(_check_size(size)) < p).astype(np.uint8)


def simulate_geometric(rate: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """SIMULATION: P[V = v] = (1 - e^-rate) e^(-rate v), via numpy's float geometric sampler."""
    r = float(_positive_fraction(rate, "rate"))
    return _check_rng(rng).geometric(-math.expm1(-r), _check_size(size)).astype(np.int64) - 1


def simulate_discrete_laplace(
    scale: float | Fraction, size: int | tuple[int, ...], rng: np.random.Generator
) -> np.ndarray:
    """SIMULATION: discrete Laplace(scale) as the difference of two float geometric draws.

    Seeded and fast, for experiments (e.g. thousands of tree-mechanism trials);
    the protocol path is :func:`discrete_laplace_array`.
    """
    sc = float(_positive_fraction(scale, "scale"))
    p = -math.expm1(-1.0 / sc)
    g = _check_rng(rng)
    if isinstance(size, tuple):
        shape = tuple(_check_size(s) for s in size)
    else:
        shape = (_check_size(size),)
    return g.geometric(p, shape).astype(np.int64) - g.geometric(p, shape).astype(np.int64)


def simulate_laplace(scale: float, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """SIMULATION: continuous Laplace(0, scale) in floating point (vulnerable to Mironov 2012).

    Only for reproducing the paper's experiments; never release its output.
    """
    sc = float(_positive_fraction(scale, "scale"))
    if isinstance(size, tuple):
        shape = tuple(_check_size(s) for s in size)
    else:
        shape = (_check_size(size),)
    return _check_rng(rng).laplace(0.0, sc, shape)


# --------------------------------------------------------------------------
# Snapping mechanism (Mironov 2012)
# --------------------------------------------------------------------------

#: Unit roundoff of binary64, the eta of Mironov's snapping theorem.
SNAPPING_ETA = 2.0**-53


def _u_star() -> float:
    """Uniform over the doubles of (0, 1), each with probability proportional to its spacing."""
    while True:
        zeros = 0
        while True:
            w = secrets.randbits(64)
            if w:
                zeros += 64 - w.bit_length()
                break
            zeros += 64
            if zeros > 1021:
                break
        if zeros <= 1021:  # stay out of the subnormal range (probability < 2^-1021)
            return math.ldexp((1 << 52) | secrets.randbits(52), -52 - zeros - 1)


def _u_star_array(size: int) -> np.ndarray:
    """``size`` independent draws of :func:`_u_star`, vectorized over os.urandom words."""
    words = _random_words(size)
    zeros = (64 - np.searchsorted(_POW2, words, side="right")).astype(np.int64)
    mantissa = (_random_words(size) >> np.uint64(12)).astype(np.int64)  # 52 uniform bits
    out = np.ldexp((mantissa | (1 << 52)).astype(float), -52 - zeros - 1)
    for i in np.flatnonzero(words == 0):  # a zero word (probability 2^-64): keep scanning
        out[i] = _u_star()
    return out


def _ln_correctly_rounded(u: float) -> float:
    with localcontext() as ctx:
        ctx.prec = 50
        return float(Decimal(u).ln())


_LD_EPS = float(np.finfo(np.longdouble).eps)


def _ln_correctly_rounded_array(u: np.ndarray) -> np.ndarray:
    """Correctly rounded ln of every entry of the double array u (0 < u < 1).

    Fast path: ln in long double (64-bit significand on x86), rounded to double;
    the rounding is certain when the long-double value is more than 64 of its
    own ulps away from both rounding midpoints around the result (libm's logl
    errs by about one ulp).  The rare undecided entries (about 1 in 30), and
    every entry on platforms without extended precision, use the decimal
    logarithm.
    """
    u = np.asarray(u, dtype=float)
    if _LD_EPS >= 2.0**-60:
        return np.array([_ln_correctly_rounded(float(v)) for v in u.ravel()]).reshape(u.shape)
    ld = np.log(u.astype(np.longdouble))
    y = ld.astype(float)
    lo = (y.astype(np.longdouble) + np.nextafter(y, -np.inf).astype(np.longdouble)) / 2
    hi = (y.astype(np.longdouble) + np.nextafter(y, np.inf).astype(np.longdouble)) / 2
    margin = np.abs(ld) * np.longdouble(64 * _LD_EPS)
    unsure = (np.abs(ld - lo) <= margin) | (np.abs(hi - ld) <= margin)
    for i in np.flatnonzero(unsure):
        y[i] = _ln_correctly_rounded(float(u[i]))
    return y


def _snapping_params(scale: object, lower: object, upper: object, sensitivity: object):
    lam_f = as_fraction(scale, "scale")
    sens = _positive_fraction(sensitivity, "sensitivity")
    if lam_f <= 0:
        raise PrivacyParameterError(f"scale must be > 0, got {scale!r}")
    lo = as_fraction(lower, "lower")
    hi = as_fraction(upper, "upper")
    if not lo < hi:
        raise PrivacyParameterError(f"need lower < upper, got [{lower!r}, {upper!r}]")
    lam = lam_f / sens
    half = (hi - lo) / 2 / sens
    if not lam < half < lam * 2**46:
        raise PrivacyParameterError(
            "the snapping mechanism needs scale < (upper - lower)/2 < 2^46 * scale "
            f"(in units of the sensitivity); got scale/sensitivity={float(lam):.6g}, "
            f"(upper-lower)/(2*sensitivity)={float(half):.6g}: widen or narrow [lower, upper]"
        )
    return lam, half, sens, (lo + hi) / 2


def snapping_epsilon(scale: object, lower: object, upper: object, sensitivity: object = 1) -> float:
    """Privacy of :func:`snapping_laplace`: (1 + 12 B eta)/lambda + 2 eta, rounded up.

    lambda = scale / sensitivity and B = (upper - lower) / (2 sensitivity).
    """
    lam, half, _, _ = _snapping_params(scale, lower, upper, sensitivity)
    eta = Fraction(SNAPPING_ETA)
    return round_up((1 + 12 * half * eta) / lam + 2 * eta)


def _snap(x: np.ndarray, lam: float, big_lambda: float, bound: float) -> np.ndarray:
    """Mironov's snapping on already centred, sensitivity-scaled values x (float64 array)."""
    x = np.clip(np.asarray(x, dtype=float), -bound, bound)
    sign = np.where((_random_words(x.size) & np.uint64(1)).astype(bool), -1.0, 1.0)
    noise = (sign * lam) * _ln_correctly_rounded_array(_u_star_array(x.size))
    z = x + noise.reshape(x.shape)
    z = np.rint(z / big_lambda) * big_lambda
    return np.clip(z, -bound, bound)


def _snap_setup(scale, lower, upper, sensitivity):
    lam, half, sens, center = _snapping_params(scale, lower, upper, sensitivity)
    lam_f = float(lam)
    mant, expo = math.frexp(lam_f)
    big_lambda = math.ldexp(1.0, expo - 1 if mant == 0.5 else expo)
    return lam_f, big_lambda, float(half), float(sens), float(center)


def snapping_laplace(value: float, scale: object, lower: object, upper: object, sensitivity: object = 1) -> float:
    """Mironov's snapping mechanism: a Laplace(scale) release of ``value`` that resists
    the floating-point attack of Mironov 2012.

    The value is clamped to [lower, upper], noise of scale ``scale`` is added in
    units of ``sensitivity``, the result is rounded to a multiple of the power of
    two Lambda >= scale/sensitivity and clamped again.  Its guarantee for a query
    of the given sensitivity is :func:`snapping_epsilon` (about
    sensitivity/scale).  Requires scale < (upper-lower)/2 < 2^46 scale (in
    sensitivity units).
    """
    return float(snapping_laplace_array(np.array([float(value)]), scale, lower, upper, sensitivity)[0])


def snapping_laplace_array(
    values: np.ndarray, scale: object, lower: object, upper: object, sensitivity: object = 1
) -> np.ndarray:
    """:func:`snapping_laplace` applied independently to every entry of ``values`` (vectorized)."""
    lam, big_lambda, bound, sens, center = _snap_setup(scale, lower, upper, sensitivity)
    vals = np.asarray(values, dtype=float)
    if np.isnan(vals).any():
        raise PrivacyParameterError("values contain NaN")
    return _snap((vals - center) / sens, lam, big_lambda, bound) * sens + center


# --------------------------------------------------------------------------
# Dyadic gadget noise (the distributions of pairwise.dp.dyadic, without a circuit)
# --------------------------------------------------------------------------

#: Sampler limit (values must fit numpy int64).
SAMPLER_MAX_BITS = 62


def _coins(numerators: Iterable[int], accs: Iterable[int], n: int, randbytes: Callable[[int], bytes]) -> np.ndarray:
    """(n, k) bool: column i is 1 with probability numerators[i] / 2^accs[i] exactly (integer comparisons)."""
    cols = []
    for m, acc in zip(numerators, accs):
        t = trailing_zeros(m)
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


def _dl_from(params: DiscreteLaplaceParams, n: int, randbytes: Callable[[int], bytes]) -> np.ndarray:
    if params.bits > SAMPLER_MAX_BITS:
        raise NoiseParameterError(f"the sampler supports K <= {SAMPLER_MAX_BITS} digits, got {params.bits}")
    n = check_batch(n)
    weights = np.array([1 << i for i in range(params.bits)], dtype=np.int64)
    x1 = _coins(params.numerators, params.digit_accs, n, randbytes).astype(np.int64) @ weights
    if params.construction == "signed":
        sign = np.frombuffer(randbytes(n), dtype=np.uint8) & 1 if n else np.zeros(0, np.uint8)
        return np.where(sign.astype(bool), -x1 - 1, x1)
    x2 = _coins(params.numerators, params.digit_accs, n, randbytes).astype(np.int64) @ weights
    return x1 - x2


def sample_dyadic_laplace(params: DiscreteLaplaceParams, n: int) -> np.ndarray:
    """n draws (int64) from a :class:`~pairwise.dp.dyadic.DiscreteLaplaceParams` gadget's exact distribution.

    Either construction (difference or signed), from os.urandom, no circuit:
    the same digits as the in-circuit gadget, each an exact integer
    comparison of uniform bits with the coin's numerator.
    (``pairwise.circuits.noise.sample_discrete_laplace`` is this function.)
    """
    return _dl_from(params, n, os.urandom)


def simulate_dyadic_laplace(params: DiscreteLaplaceParams, n: int, rng: np.random.Generator) -> np.ndarray:
    """Seeded version of :func:`sample_dyadic_laplace`: simulation and tests only."""
    if not isinstance(rng, np.random.Generator):
        raise NoiseParameterError("rng must be a numpy.random.Generator")
    return _dl_from(params, n, rng.bytes)


def _krr_from(params: KaryRRParams, codes: np.ndarray, randbytes: Callable[[int], bytes]) -> np.ndarray:
    codes = np.asarray(codes, dtype=np.int64)
    if codes.size and (codes.min() < 0 or codes.max() >= params.k):
        raise NoiseParameterError(f"k-RR codes must lie in 0..{params.k - 1}")
    n = codes.shape[0]
    flip = _coins([params.numerator], [params.acc], n, randbytes)[:, 0]
    other = (
        (np.frombuffer(randbytes(n), dtype=np.uint8) % 2).astype(np.int64)
        if (n and params.k == 3)
        else np.zeros(n, np.int64)
    )
    return (codes + flip * (1 + other)) % params.k


def sample_krr(params: KaryRRParams, codes: np.ndarray) -> np.ndarray:
    """k-RR reports (codes) of the true codes for :class:`~pairwise.dp.dyadic.KaryRRParams`, exactly the
    gadget's distribution, from os.urandom (no circuit)."""
    return _krr_from(params, codes, os.urandom)


def simulate_krr(params: KaryRRParams, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Seeded version of :func:`sample_krr`: simulation and tests only."""
    if not isinstance(rng, np.random.Generator):
        raise NoiseParameterError("rng must be a numpy.random.Generator")
    return _krr_from(params, codes, rng.bytes)
