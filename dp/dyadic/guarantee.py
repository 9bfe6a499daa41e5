"""The privacy analysis of the dyadic noise gadgets: exact pmfs, deltas, ratio certificates, guarantees.

What it does
    Turns a parameter class of :mod:`pairwise.dp.dyadic.params` into a
    stated (epsilon, delta) guarantee, a
    :class:`~pairwise.dp.accounting.PrivacyGuarantee` whose ``method``,
    ``delta_bound`` and ``tv_to_ideal`` say how it was computed from
    the gadget's exact output distribution (a coin m / 2^a is a rational, so
    P[X = x] = N(x) / 2^(sum a_i) with integer N(x)):

    * :func:`geometric_pmf`, :func:`discrete_laplace_pmf` -- exact pmfs;
      :func:`geometric_tail` -- P[X >= 2^K - s] exactly (carry recursion);
    * :func:`delta_exact` -- the hockey-stick divergence summed over the
      exact pmf (small supports, method ``exact``);
    * :func:`ratio_certificate` -- three exact dynamic programmes over the
      digits bound every privacy-loss ratio away from the support's edge, so
      delta is the exact tail (method ``certified``);
    * :func:`delta_bound` -- a rigorous bound from the per-digit rounding
      errors (method ``bound``) and the TV distance to the ideal mechanism;
    * :func:`discrete_laplace_guarantee`,
      :func:`randomized_response_guarantee`, :func:`krr_guarantee`.

    Irrational constants enter only through the rational bounds of
    :mod:`pairwise.dp.exact`, rounded in the safe direction; the reported
    floats are rounded up.  Proofs: :func:`delta_bound` and ``docs/noise.md``
    ("Exactness of the reported guarantee").

Security model
    Pure math on public parameters; no randomness.

Follows
    [BBGK20, App. C.2] (noise in the circuit); [CKS20] for the discrete
    Laplace; delta is the
    hockey-stick divergence max_s sum_z [q(z) - e^eps q(z + s)]_+.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..accounting import PrivacyGuarantee, round_up
from ..errors import NoiseParameterError
from ..exact import exp_bounds, grid_up
from .params import (
    DiscreteLaplaceParams,
    KaryRRParams,
    RandomizedResponseParams,
    _digit_prob_bounds,
    _digit_ratio_bounds,
)

__all__ = [
    "EXACT_MAX_BITS",
    "EXACT_MAX_WORK",
    "geometric_tail",
    "RatioCertificate",
    "ratio_certificate",
    "delta_bound",
    "geometric_pmf",
    "discrete_laplace_pmf",
    "delta_exact",
    "discrete_laplace_guarantee",
    "randomized_response_guarantee",
    "krr_guarantee",
]

#: Largest K (support 2^K of each geometric) for which delta is computed exactly.
EXACT_MAX_BITS = 10
#: Largest S * 2^(K+1) (shift-by-support products) for the exact delta.
EXACT_MAX_WORK = 1 << 18


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
                    if old is None or (
                        (f[0] * old[1] > old[0] * f[1]) if want_max else (f[0] * old[1] < old[0] * f[1])
                    ):
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
    odds = [(m, (1 << a) - m) for m, a in zip(params.numerators, params.digit_accs)]
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
    for i, (m, a) in enumerate(zip(params.numerators, params.digit_accs)):
        two = 1 << a
        p = Fraction(m, two)
        r = Fraction(m, two - m)
        rlo, rhi = _digit_ratio_bounds(eps, s_, i)
        c01 = max(Fraction(0), 1 - r / rhi)
        c10 = max(Fraction(0), 1 - rlo / r) if rlo > 0 else Fraction(1)
        gamma = Fraction(1) if (1 << i) <= s_ else carry
        rounding += grid_up(gamma * (c01 * (1 - p) + c10 * p))
        carry = grid_up(1 - (1 - p) * (1 - carry)) if (s_ >> i) & 1 else grid_up(p * carry)
    return rounding


def _tv_to_ideal(params: DiscreteLaplaceParams) -> Fraction:
    tv = Fraction(0)
    for i, p in enumerate(params.digit_probabilities):
        plo, phi = _digit_prob_bounds(params.epsilon, params.sensitivity, i)
        tv += grid_up(max(abs(p - plo), abs(p - phi)))
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
    d1 = (
        tail
        if cert.rho_min >= exp_bounds(-params.epsilon)[1] and cert.rho_min > 0
        else min(Fraction(1), tail + _one_sided_rounding_bound(params))
    )
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
    for m, a in zip(params.numerators, params.digit_accs):
        arr = np.concatenate([arr * ((1 << a) - m), arr * m])
    return arr, 1 << sum(params.digit_accs)


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
def discrete_laplace_guarantee(params: DiscreteLaplaceParams, exact: str = "auto") -> PrivacyGuarantee:
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
    if d >= 1 or round_up(d) >= 1:  # a delta that rounds up to 1 is no guarantee either
        raise NoiseParameterError(
            f"the gadget gives no guarantee (delta >= 1) for K={params.bits}, S={params.sensitivity}; increase the support"
        )
    return PrivacyGuarantee(
        epsilon=float(params.epsilon),
        delta=round_up(d),
        method=method,
        delta_bound=round_up(bound),
        tv_to_ideal=round_up(tv),
        delta_rational=d,
        target_delta=None if params.target_delta is None else round_up(params.target_delta),
    )


def randomized_response_guarantee(params: RandomizedResponseParams) -> PrivacyGuarantee:
    """Pure DP with the effective epsilon ln((2^acc - m)/m) rounded up (<= requested epsilon)."""
    eff = params.effective_epsilon()
    plo = 1 / (1 + exp_bounds(params.epsilon)[1])
    phi = 1 / (1 + exp_bounds(params.epsilon)[0])
    p = params.flip_probability
    tv = max(abs(p - plo), abs(p - phi))
    return PrivacyGuarantee(
        epsilon=round_up(eff),
        delta=0.0,
        method="pure",
        delta_bound=0.0,
        tv_to_ideal=round_up(tv),
        delta_rational=Fraction(0),
    )


def krr_guarantee(params: KaryRRParams) -> PrivacyGuarantee:
    """Pure DP with the effective epsilon ln((1 - phi)(k - 1)/phi) rounded up (<= requested epsilon)."""
    e_lo, e_hi = exp_bounds(params.epsilon)
    k = params.k
    plo, phi = Fraction(k - 1) / (e_hi + k - 1), Fraction(k - 1) / (e_lo + k - 1)
    p = params.flip_probability
    return PrivacyGuarantee(
        epsilon=round_up(params.effective_epsilon()),
        delta=0.0,
        method="pure",
        delta_bound=0.0,
        tv_to_ideal=round_up(max(abs(p - plo), abs(p - phi))),
        delta_rational=Fraction(0),
    )
