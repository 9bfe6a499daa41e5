"""Parameter searches of the dyadic noise gadgets: the cheapest coins that meet delta and a variance tolerance.

What it does
    * :func:`choose_discrete_laplace` -- support 2^K and per-digit coins of
      the discrete Laplace / signed geometric gadget: ``precision="designed"``
      (default) accepts a candidate only if its ratio certificate holds, its
      exact tail meets the per-release delta and its exact variance is within
      ``variance_tolerance`` of the ideal discrete Laplace's, and returns the
      one with the fewest AND gates; ``precision="uniform"`` keeps the
      earlier one-precision rule for comparison;
    * :func:`choose_randomized_response`, :func:`choose_krr` -- the flip
      probability with the fewest significant bits that is certified eps-DP
      (and, for k-RR, within the variance tolerance);
    * :func:`simplest_dyadic` -- the dyadic m / 2^a with the smallest a in an
      interval (the cheapest coin);
    * :func:`ideal_discrete_laplace_variance`, :func:`resolve_target_delta`,
      :func:`check_variance_tolerance`.

    Floating point only *proposes* candidates; every accepted candidate's
    privacy and variance are checked in exact rational arithmetic
    (:mod:`pairwise.dp.dyadic.guarantee`).  The design rule (log-odds
    budget, fair low digits, the chain of rounded-up top digits) is derived
    in ``docs/noise.md`` ("Parameter selection").

Security model
    Pure math on public parameters (epsilon, sensitivity, delta, tolerance);
    no data and no randomness shape the result.

Follows
    Champion, shelat, Ullman, "Securely sampling biased coins with
    applications to differential privacy" (CCS 2019) for coins of few bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache

from ..errors import NoiseParameterError
from ..exact import (
    ceil_div,
    check_fraction,
    check_noise_epsilon,
    check_positive_int,
    exp_bounds,
    ln_lower,
    trailing_zeros,
)
from ..validate import no_more_keywords, with_legacy
from .guarantee import delta_bound, geometric_tail, ratio_certificate
from .params import (
    CONSTRUCTIONS,
    KRR_K,
    MAX_ACC,
    MAX_BITS,
    DiscreteLaplaceParams,
    KaryRRParams,
    RandomizedResponseParams,
    _coin_ands,
    _digit_ratio_bounds,
    discrete_laplace_params,
)

__all__ = [
    "DEFAULT_DELTA",
    "DEFAULT_VARIANCE_TOLERANCE",
    "DeltaTarget",
    "NoiseChoice",
    "resolve_target_delta",
    "check_variance_tolerance",
    "ideal_discrete_laplace_variance",
    "simplest_dyadic",
    "choose_discrete_laplace",
    "choose_randomized_response",
    "choose_krr",
]

#: Default per-release delta: 2^-40 (the customary statistical security parameter).
DEFAULT_DELTA = Fraction(1, 1 << 40)
#: Default utility tolerance: the designed noise's variance is at most (1 + 2^-12) times the ideal's.
DEFAULT_VARIANCE_TOLERANCE = Fraction(1, 1 << 12)


# ---------------------------------------------------------------------- parameter selection
def resolve_target_delta(
    lam: int, n_samples: int, target_delta: object | None, delta: object | None = None
) -> Fraction:
    """The per-release delta: ``target_delta`` or ``delta`` if given, else 2^-lam / n_samples (2^-40 by default)."""
    for value, name in ((target_delta, "target_delta"), (delta, "delta")):
        if value is not None:
            t = check_fraction(value, name)
            if not 0 < t < 1:
                raise NoiseParameterError(f"{name} must lie in (0, 1), got {value!r}")
            return t
    lam = check_positive_int(lam, "lam (statistical security, bits)", 256)
    n = check_positive_int(n_samples, "n_samples")
    return Fraction(1, (1 << lam) * n)


@dataclass(frozen=True)
class DeltaTarget:
    """The per-release delta a parameter search aims at: ``delta`` (or its older spelling ``target_delta``),
    else 2^-lam / n_samples (:func:`resolve_target_delta`); validated on construction."""

    delta: object | None = None
    lam: int = 40
    n_samples: int = 1
    target_delta: object | None = None

    def __post_init__(self) -> None:
        self.resolve()

    def resolve(self) -> Fraction:
        """The target delta, a Fraction in (0, 1)."""
        return resolve_target_delta(self.lam, self.n_samples, self.target_delta, self.delta)


@dataclass(frozen=True)
class NoiseChoice:
    """How a kernel's noise is chosen (:func:`pairwise.circuits.noise.choose_kernel_noise`): the
    ``mechanism`` (``auto``, ``discrete_laplace``, ``signed_geometric``, ``krr``), the delta target
    (``delta``, ``lam``, ``n_samples``, ``target_delta``, as in :class:`DeltaTarget`) and the
    ``variance_tolerance`` of the designed noise; validated on construction."""

    mechanism: str = "auto"
    delta: object | None = None
    variance_tolerance: object = DEFAULT_VARIANCE_TOLERANCE
    lam: int = 40
    n_samples: int = 1
    target_delta: object | None = None

    def __post_init__(self) -> None:
        self.target.resolve()
        check_variance_tolerance(self.variance_tolerance)

    @property
    def target(self) -> DeltaTarget:
        return DeltaTarget(self.delta, self.lam, self.n_samples, self.target_delta)


def check_variance_tolerance(value: object) -> Fraction:
    t = check_fraction(value, "variance_tolerance")
    if not Fraction(1, 1 << 40) <= t <= 1:
        raise NoiseParameterError(f"variance_tolerance must lie in [2^-40, 1], got {value!r}")
    return t


def ideal_discrete_laplace_variance(epsilon: object, sensitivity: int) -> tuple[Fraction, Fraction]:
    """Rational bounds lo <= 2 alpha / (1 - alpha)^2 <= hi, alpha = exp(-epsilon / S) (increasing in alpha)."""
    eps = check_noise_epsilon(epsilon)
    s = check_positive_int(sensitivity, "sensitivity")
    lo, hi = _digit_ratio_bounds(eps, s, 0)
    f = lambda a: 2 * a / (1 - a) ** 2  # noqa: E731
    return f(lo), (f(hi) if hi < 1 else Fraction(10) ** 400)


@lru_cache(maxsize=128)
def _choose_uniform(
    eps: Fraction, s: int, target: Fraction, max_acc: int, max_bits: int, construction: str
) -> DiscreteLaplaceParams:
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
    t = trailing_zeros(m)
    return m >> t, e - t


def simplest_dyadic(lo: Fraction | float, hi: Fraction | float, max_bits: int = MAX_ACC) -> tuple[int, int] | None:
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
        md: tuple[int, int] | None
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
def _choose_designed(
    eps: Fraction, s: int, target: Fraction, tau: Fraction, max_acc: int, max_bits: int, construction: str
) -> DiscreteLaplaceParams:
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
        raise NoiseParameterError(
            f"the signed construction adds 1/4 to the variance, more than {float(tau):.3g} of the ideal "
            f"{float(ideal_discrete_laplace_variance(eps, s)[0]):.4g} for epsilon={ef:.6g}, sensitivity={s}"
        )
    ln_target = math.log(float(target))
    k0 = 1
    while k0 < max_bits and ((1 << k0) <= s or -((1 << k0) - s) * ef / s + math.log(factor) > ln_target):
        k0 += 1
    a = math.exp(-ef / s)
    gain = (ef / s) * (1 + a) / max(1e-300, 1 - a)  # ~ relative variance per unit of theta (>= 2)
    tf = float(tau)
    thetas = [min(0.25, tf / gain * 2.0**-j) for j in range(1, 5)]
    lifts = [min(ef, 4.0) / 8, tf / 8]
    best: tuple[int, Fraction, DiscreteLaplaceParams] | None = None
    for k in range(max(1, k0 - 1), min(max_bits, k0 + 2) + 1):
        if (1 << k) <= s:
            continue
        for theta in thetas:
            for beta in (2.0, 4.0, 8.0, 16.0, 32.0, 64.0):
                for chain_from in range(max(0, k - 8), k + 1):
                    for lift in lifts if chain_from < k else lifts[:1]:
                        design = _design_digits(
                            ef, s, k, theta, beta, chain_from, lift / max(1, k - chain_from), max_acc
                        )
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
    target: DeltaTarget | None = None,
    construction: str = "difference",
    precision: str = "designed",
    variance_tolerance: object = DEFAULT_VARIANCE_TOLERANCE,
    max_acc: int = 192,
    max_bits: int = MAX_BITS,
    **legacy: object,
) -> DiscreteLaplaceParams:
    """Pick the gadget's support 2^K and its digits' coins (rule: module docstring, "Parameter selection").

    The per-release delta is ``target`` (a :class:`DeltaTarget`; or its
    fields ``delta``, ``target_delta``, ``lam``, ``n_samples`` as keywords):
    ``delta`` (or ``target_delta``), else 2^-lam / n_samples; the defaults
    give :data:`DEFAULT_DELTA` = 2^-40.
    ``precision="designed"`` (default): per-digit coins, certified delta <=
    target and exact noise variance within ``variance_tolerance`` (relative)
    of the ideal discrete Laplace, fewest AND gates.  ``precision="uniform"``:
    the earlier rule (one precision for all digits, rigorous bound and TV to
    the ideal both <= target), kept for comparison.
    """
    eps = check_noise_epsilon(epsilon)
    s = check_positive_int(sensitivity, "sensitivity")
    goal = with_legacy(target, DeltaTarget, legacy, "choose_discrete_laplace").resolve()
    no_more_keywords(legacy, "choose_discrete_laplace")
    if construction not in CONSTRUCTIONS:
        raise NoiseParameterError(f"construction must be one of {CONSTRUCTIONS}, got {construction!r}")
    max_acc = check_positive_int(max_acc, "max_acc", MAX_ACC)
    max_bits = check_positive_int(max_bits, "max_bits", MAX_BITS)
    if precision == "uniform":
        return _choose_uniform(eps, s, goal, max_acc, max_bits, construction)
    if precision != "designed":
        raise NoiseParameterError(f"precision must be 'designed' or 'uniform', got {precision!r}")
    return _choose_designed(eps, s, goal, check_variance_tolerance(variance_tolerance), max_acc, max_bits, construction)


def _rr_numerator(eps: Fraction, acc: int) -> int:
    # p* = 1 / (1 + e^eps) <= 1 / (1 + e_lo): rounding that bound up keeps m / 2^acc >= p*.
    phi = 1 / (1 + exp_bounds(eps)[0])
    return ceil_div(phi.numerator << acc, phi.denominator)


def choose_randomized_response(
    epsilon: object, acc: int | None = None, rel_tol: float = 2.0**-10
) -> RandomizedResponseParams:
    """Flip probability 1/(1+e^eps) rounded up to acc bits (so eps' <= eps).

    With ``acc=None`` the smallest acc in [2, 128] with eps - eps' <= rel_tol * eps
    (a utility tolerance: the privacy guarantee holds for every acc).
    """
    eps = check_noise_epsilon(epsilon)
    if acc is not None:
        acc = check_positive_int(acc, "acc", MAX_ACC)
        return RandomizedResponseParams(eps, acc, _rr_numerator(eps, acc))
    tol = check_fraction(rel_tol, "rel_tol") * eps
    for a in range(2, 129):
        m = _rr_numerator(eps, a)
        if 2 * m >= (1 << a):
            continue
        eff_lo = ln_lower(Fraction((1 << a) - m, m))
        if eps - eff_lo <= tol:
            return RandomizedResponseParams(eps, a, m)
    raise NoiseParameterError(
        f"no precision up to 128 bits reaches relative tolerance {rel_tol} for epsilon={float(eps)}"
    )


def _krr_worst_variance(phi: float, k: int) -> float:
    """max over the values 0..k-1 of Var(f^ | f) (affine maps of the values scale it uniformly)."""
    lam = 1 - k * phi / (k - 1)
    mu = phi * sum(range(k)) / (k - 1)
    q = sum(v * v for v in range(k))
    return max(
        (lam * (1 - lam) * f * f - 2 * lam * mu * f + phi * q / (k - 1) - mu * mu) / (lam * lam) for f in range(k)
    )


def choose_krr(epsilon: object, k: int = 3, variance_tolerance: object = DEFAULT_VARIANCE_TOLERANCE) -> KaryRRParams:
    """The cheapest flip probability phi = m / 2^a (fewest AND gates) that is certified eps-DP and whose
    worst-case estimator variance is within ``variance_tolerance`` (relative) of the ideal k-RR's."""
    eps = check_noise_epsilon(epsilon)
    if k not in KRR_K:
        raise NoiseParameterError(f"k-ary randomized response is built for k in {KRR_K}, got k={k!r}")
    tau = float(check_variance_tolerance(variance_tolerance))
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
