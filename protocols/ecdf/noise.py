"""Noise that no single ECDF server knows: in-circuit discrete Laplace (m = 2) and Polya shares (m > 2).

What it does
    The ECDF servers release counts with independent discrete Laplace noise
    Z, P[Z = z] ~ a^|z|, a = exp(-eps_v / S) ([BMR25, Theorem 3.1]:
    eps_v = eps / (L + 1), S = 1 for the paper's tree), made so that no single
    server knows it:

    * two servers: one garbled circuit per release (:func:`noisy_sum_circuit`,
      :func:`gc_noisy_sum`, :func:`gc_noise_shares`), out = x + y + Z mod 2^l
      with Z drawn from both servers' random bits by the discrete Laplace
      gadget of :mod:`pairwise.circuits.noise`; "open" mode reveals the noisy
      count, "masked" mode leaves the servers additive shares of Z;
    * m servers: Polya shares (:func:`polya_table`, :func:`sample_polya`,
      :func:`noise_share`): server j adds G_j - G'_j, G_j, G'_j ~ NB(1/m, a),
      and the m shares sum to exactly discrete Laplace(a).  NB(r, a) is
      sampled from a rigorously bounded CDF table rounded to 2^-124; the
      rounding's total variation enters the reported delta
      (:func:`polya_guarantee`).

Security model
    Semi-honest servers.  m = 2: the noise is a function of both servers'
    random bits, so neither server alone (even with the querier) learns it.
    m > 2: with ``tolerate = t`` each server draws NB(1/(m - t), a), and the
    release is DP against the querier colluding with up to t servers.  The
    derivations (the masked mode, the table's error bound, the trust models
    for every coalition): docs/ecdf.md, "Noise between the servers".

Follows
    [BMR25, Theorem 3.1 and Sec. 4.2]; [BBGK20, App. C.2] ([CSU19] coins);
    distributed noise by infinite divisibility of the geometric law
    (Goryczka, Xiong, Sunderam 2013; Balle et al.'s distributed discrete
    Laplace).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from pairwise.circuits.builder import Builder
from pairwise.circuits.ir import EVALUATOR, GARBLER, Circuit
from pairwise.circuits.noise import discrete_laplace_value
from pairwise.dp.accounting import PrivacyGuarantee
from pairwise.dp.dyadic import (
    DiscreteLaplaceParams,
    choose_discrete_laplace,
    discrete_laplace_guarantee,
)
from pairwise.dp.errors import PairwiseError
from pairwise.dp.exact import exp_bounds

from .shares import reduce_mod, uniform_words

__all__ = [
    "NoiseSetupError",
    "MAX_VALUE_EPSILON",
    "value_epsilon",
    "NoisySumCircuit",
    "noisy_sum_circuit",
    "words_to_bits",
    "gc_noisy_sum",
    "gc_noise_shares",
    "PolyaTable",
    "polya_table",
    "polya_shape",
    "sample_polya",
    "locate",
    "noise_share",
    "polya_guarantee",
    "discrete_laplace_alpha",
    "noise_variance",
    "POLYA_PRECISION_BITS",
    "MAX_POLYA_SUPPORT",
]

#: Per-value epsilon cap: larger budgets use eps_v = 32 (more noise than needed, still within the
#: requested budget; P[noise != 0] ~ 2 e^-32 per value then).  Keeps (1 + e^eps_v) times the Polya
#: table's rounding error negligible (delta ~ e^32 2^-120).
MAX_VALUE_EPSILON = Fraction(32)
#: The Polya CDF is rounded to multiples of 2^-POLYA_PRECISION_BITS (two 62-bit words).
POLYA_PRECISION_BITS = 124
#: Largest Polya table (support points); beyond, the noise scale is too large for this sampler.
MAX_POLYA_SUPPORT = 1 << 21
_WORD = 62
_FIXED = 192  # fixed-point bits of the pmf bounds
_TAIL_BITS = 122  # the table's tail mass is below 2^-122


class NoiseSetupError(PairwiseError, ValueError):
    """The requested noise cannot be produced (output width too small, scale too large)."""


def value_epsilon(epsilon: Fraction, changed: int) -> Fraction:
    """Per-value epsilon eps / changed, capped at :data:`MAX_VALUE_EPSILON`."""
    eps = Fraction(epsilon) / int(changed)
    return min(eps, MAX_VALUE_EPSILON)


def discrete_laplace_alpha(epsilon: Fraction, sensitivity: int) -> float:
    """a = exp(-eps_v / S) as a float (for variances and reports only)."""
    return math.exp(-float(epsilon) / int(sensitivity))


def noise_variance(epsilon: Fraction, sensitivity: int, total_shape: Fraction | int = 1) -> float:
    """Variance of NB(r, a) - NB(r, a), r = ``total_shape`` (1: discrete Laplace, 2a/(1-a)^2)."""
    a = discrete_laplace_alpha(epsilon, sensitivity)
    return 2.0 * float(total_shape) * a / (1.0 - a) ** 2


# ----------------------------------------------------------------------------- garbled circuit (m = 2)
class _Stream:
    """Uniform wires rx[j] XOR ry[j], handed out in order to the noise gadgets."""

    def __init__(self, b: Builder, rx, ry) -> None:
        self.b, self.rx, self.ry, self.pos = b, rx.bits, ry.bits, 0

    def take(self, n: int) -> list[int]:
        if self.pos + n > len(self.rx):
            raise NoiseSetupError(f"random bit stream exhausted: need {self.pos + n}, have {len(self.rx)}")
        out = [self.b.xor(self.rx[j], self.ry[j]) for j in range(self.pos, self.pos + n)]
        self.pos += n
        return out


@dataclass(frozen=True)
class NoisySumCircuit:
    """out = x + y + Z mod 2^l with Z the discrete Laplace gadget; its parameters and guarantee."""

    circuit: Circuit
    l: int
    params: DiscreteLaplaceParams
    guarantee: PrivacyGuarantee
    random_width: int

    @property
    def and_gates(self) -> int:
        return self.circuit.n_and


@lru_cache(maxsize=64)
def noisy_sum_circuit(l: int, epsilon: Fraction, sensitivity: int, changed: int = 1, lam: int = 40) -> NoisySumCircuit:
    """The two-server noisy-sum circuit for per-value budget ``epsilon`` and ``sensitivity``.

    Inputs: x (garbler, l bits), y (evaluator, l bits), rx (garbler), ry
    (evaluator) of ``random_width`` bits each.  Output ``out`` (l bits,
    unsigned) = x + y + Z mod 2^l.  Noise parameters: the cheapest gadget
    whose delta is <= 2^-lam / changed (so ``changed`` values composed cost
    at most 2^-lam of delta), :func:`pairwise.dp.dyadic.choose_discrete_laplace`.
    """
    params = choose_discrete_laplace(Fraction(epsilon), int(sensitivity), lam=lam, n_samples=max(1, int(changed)))
    if params.bits + 2 > l:
        raise NoiseSetupError(
            f"the noise support 2^{params.bits} does not fit {l}-bit outputs with room for the count; "
            f"use more output bits or a larger epsilon"
        )
    b = Builder(f"ecdf_noisy_sum_l{l}_K{params.bits}_acc{params.acc}")
    x = b.input("x", l, GARBLER)
    y = b.input("y", l, EVALUATOR)
    rx = b.input("rx", params.random_bits, GARBLER)
    ry = b.input("ry", params.random_bits, EVALUATOR)
    st = _Stream(b, rx, ry)
    z = discrete_laplace_value(b, st, params)  # signed, K + 1 bits
    if st.pos != params.random_bits:
        raise NoiseSetupError("noise gadget left random bits unused")
    total = (x + y) + z.extend(l, True).as_unsigned()
    b.output("out", total[:l].as_unsigned())
    return NoisySumCircuit(b.build(), l, params, discrete_laplace_guarantee(params), params.random_bits)


def words_to_bits(values: np.ndarray, l: int) -> np.ndarray:
    """uint64 words -> (B, l) bool bits, least significant first (circuit input order)."""
    v = np.asarray(values, dtype=np.uint64).reshape(-1)
    shifts = np.arange(l, dtype=np.uint64)
    return ((v[:, None] >> shifts[None, :]) & np.uint64(1)).astype(bool)


def gc_noisy_sum(session, nsc: NoisySumCircuit, values: np.ndarray):
    """Run the noisy-sum circuit on this server's l-bit ``values`` (one SIMD execution).

    ``session`` is a :class:`pairwise.mpc.twopc.GarblerSession` (feeds x) or
    :class:`pairwise.mpc.twopc.EvaluatorSession` (feeds y); rx and ry are random
    input groups of the runtime (``random=``): each server's noise bits are
    drawn by its own side (os.urandom / random COT choice bits) and cost no
    label bytes.  Both learn ``out``.  Returns (out uint64 array,
    ExecutionResult).
    """
    from pairwise.mpc.twopc import GarblerSession

    vals = reduce_mod(np.asarray(values, dtype=np.uint64), nsc.l)
    B = vals.size
    if B == 0:
        return np.zeros(0, dtype=np.uint64), None
    bits = words_to_bits(vals, nsc.l)
    if isinstance(session, GarblerSession):
        res = session.run(nsc.circuit, {"x": bits}, output="both", random=("rx", "ry"))
    else:
        res = session.run(nsc.circuit, {"y": bits}, output="both", random=("rx", "ry"))
    out = reduce_mod(np.asarray(res.outputs[0], dtype=np.uint64), nsc.l)
    return out, res


def gc_noise_shares(session, nsc: NoisySumCircuit, count: int):
    """Additive shares (mod 2^l) of ``count`` fresh noise values Z, neither server knowing Z.

    Masked mode: each server inputs a uniform mask r_b; the circuit reveals
    Z + r0 + r1 to both; the garbler's share is out - r0, the evaluator's
    -r1.  Returns (shares uint64, ExecutionResult).
    """
    from pairwise.mpc.twopc import GarblerSession

    r = uniform_words((int(count),), nsc.l)
    out, res = gc_noisy_sum(session, nsc, r)
    if isinstance(session, GarblerSession):
        return reduce_mod(out - r, nsc.l), res
    return reduce_mod(np.uint64(0) - r, nsc.l), res


# ----------------------------------------------------------------------------- Polya shares (m > 2)
@dataclass(frozen=True)
class PolyaTable:
    """Rounded CDF of NB(shape, a), a = exp(-epsilon / sensitivity), with its TV bound.

    cdf[k] = round(P[X <= k] 2^124) (last entry 2^124), stored as two
    62-bit words ``cdf_hi``, ``cdf_lo``; a draw is the first k with
    u < cdf[k] for u uniform in [0, 2^124).
    """

    shape: Fraction
    epsilon: Fraction
    sensitivity: int
    cdf_hi: np.ndarray
    cdf_lo: np.ndarray
    tv_bound: float

    @property
    def support(self) -> int:
        return int(self.cdf_hi.size)

    @property
    def alpha(self) -> float:
        return discrete_laplace_alpha(self.epsilon, self.sensitivity)

    def cdf_int(self) -> list[int]:
        """The CDF as exact integers in units of 2^-POLYA_PRECISION_BITS."""
        return [(int(h) << _WORD) | int(lo) for h, lo in zip(self.cdf_hi, self.cdf_lo)]

    def pmf(self) -> np.ndarray:
        """The sampled (rounded) pmf as floats."""
        c = self.cdf_int()
        den = float(1 << POLYA_PRECISION_BITS)
        return np.array([(b - a) / den for a, b in zip([0] + c[:-1], c)])


def polya_shape(m: int, tolerate: int = 0) -> Fraction:
    """Shape 1/(m - t) of each server's Polya draws (t = servers the noise must tolerate colluding)."""
    m, t = int(m), int(tolerate)
    if m < 2 or not 0 <= t < m:
        raise NoiseSetupError(f"need m >= 2 servers and 0 <= tolerate < m, got m={m}, tolerate={t}")
    return Fraction(1, m - t)


def _iroot(x: int, q: int) -> int:
    """floor(x^(1/q)) for an integer x >= 0 (Newton's method on Python ints)."""
    if x < 2 or q == 1:
        return x
    r = 1 << ((x.bit_length() + q - 1) // q)
    while True:
        s = ((q - 1) * r + x // r ** (q - 1)) // q
        if s >= r:
            break
        r = s
    while r**q > x:
        r -= 1
    while (r + 1) ** q <= x:
        r += 1
    return r


def _floor(x: Fraction) -> int:
    return x.numerator // x.denominator


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


@lru_cache(maxsize=64)
def polya_table(shape: Fraction, epsilon: Fraction, sensitivity: int) -> PolyaTable:
    """Rounded, rigorously bounded CDF table of NB(shape, exp(-epsilon / sensitivity)) (module docstring)."""
    r = Fraction(shape)
    if not 0 < r <= 1:
        raise NoiseSetupError(f"Polya shape must lie in (0, 1], got {r}")
    eps = Fraction(epsilon)
    if not 0 < eps <= MAX_VALUE_EPSILON:
        raise NoiseSetupError(f"per-value epsilon must lie in (0, {MAX_VALUE_EPSILON}], got {float(eps)}")
    S = int(sensitivity)
    if S < 1:
        raise NoiseSetupError(f"sensitivity must be >= 1, got {sensitivity}")
    if float(eps) / S * MAX_POLYA_SUPPORT < _TAIL_BITS * math.log(2) * 0.5:
        # the tail decays like a^K: fail fast instead of building a table that cannot end in time
        raise NoiseSetupError(
            f"the Polya noise for per-value epsilon {float(eps):.3g} and sensitivity {S} needs more than "
            f"{MAX_POLYA_SUPPORT} support points; use a larger epsilon or a coarser weight grid"
        )
    p, q = r.numerator, r.denominator
    F = _FIXED
    one = 1 << F
    a_lo, a_hi = exp_bounds(-eps / S)
    a_hi = min(a_hi, Fraction(1))
    A_lo, A_hi = _floor(a_lo * one), min(one, _ceil(a_hi * one))
    # (1 - a)^(p/q): bounds by integer q-th roots of (1 - a)^p scaled by 2^(F q)
    X_lo = _floor((1 - a_hi) ** p * (1 << (F * q)))
    X_hi = _ceil((1 - a_lo) ** p * (1 << (F * q)))
    lo = _iroot(X_lo, q)
    hi = _iroot(X_hi, q)
    if hi**q < X_hi:
        hi += 1
    scale_den = one * q
    lows, highs = [lo], [hi]
    cum = lo
    tail_target = one >> _TAIL_BITS
    k = 0
    while one - cum > tail_target:
        if k + 1 >= MAX_POLYA_SUPPORT:
            raise NoiseSetupError(
                f"the Polya noise for per-value epsilon {float(eps):.3g} and sensitivity {S} needs more than "
                f"{MAX_POLYA_SUPPORT} support points; use a larger epsilon or a coarser weight grid"
            )
        num = q * k + p
        den = scale_den * (k + 1)
        lo = (lo * A_lo * num) // den
        hi = -((-hi * A_hi * num) // den)
        lows.append(lo)
        highs.append(hi)
        cum += lo
        k += 1
    # CDF rounded to 2^-P: cumulative lower bounds, rounded to nearest; the last entry takes the tail
    shift = F - POLYA_PRECISION_BITS
    half = 1 << (shift - 1)
    top = 1 << POLYA_PRECISION_BITS
    cdf_int = []
    c = 0
    for v in lows:
        c += v
        cdf_int.append(min((c + half) >> shift, top))
    cdf_int[-1] = top
    # TV bound: 1/2 (sum_k max|q_k - [lo_k, hi_k]| + tail), all in units of 2^-F
    dev = 0
    prev = 0
    for v_lo, v_hi, cval in zip(lows, highs, cdf_int):
        qk = (cval - prev) << shift
        prev = cval
        dev += max(abs(qk - v_lo), abs(v_hi - qk))
    tail = one - cum
    tv = Fraction(dev + tail, 2 * one)
    tv_f = float(tv)
    if Fraction(tv_f) < tv:
        tv_f = math.nextafter(tv_f, math.inf)
    word = (1 << _WORD) - 1
    hi_words = np.array([v >> _WORD for v in cdf_int], dtype=np.uint64)
    lo_words = np.array([v & word for v in cdf_int], dtype=np.uint64)
    return PolyaTable(r, eps, S, hi_words, lo_words, tv_f)


def sample_polya(table: PolyaTable, size: int) -> np.ndarray:
    """``size`` draws (int64) from the rounded table, u from os.urandom (integer comparisons only).

    u = (u_hi, u_lo) is uniform on 124 bits; the draw is #{k : cdf[k] <= u}
    in lexicographic (hi, lo) order.  Almost always u_hi differs from every
    cdf_hi and one ``searchsorted`` decides; ties on the high word (probability
    about support * 2^-62 per draw) are resolved on the low word.
    """
    size = int(size)
    if size < 0:
        raise NoiseSetupError(f"size must be >= 0, got {size}")
    raw = np.frombuffer(os.urandom(16 * size), dtype="<u8").astype(np.uint64).reshape(size, 2)
    drop = np.uint64(64 - _WORD)
    return locate(table, raw[:, 0] >> drop, raw[:, 1] >> drop)


def locate(table: PolyaTable, u_hi: np.ndarray, u_lo: np.ndarray) -> np.ndarray:
    """#{k : cdf[k] <= u} for u = u_hi 2^62 + u_lo (62-bit words): the inverse-CDF step of :func:`sample_polya`."""
    left = np.searchsorted(table.cdf_hi, u_hi, side="left")
    right = np.searchsorted(table.cdf_hi, u_hi, side="right")
    out = left.astype(np.int64)
    for i in np.flatnonzero(right > left):
        a, b = int(left[i]), int(right[i])
        out[i] = a + int(np.count_nonzero(table.cdf_lo[a:b] <= u_lo[i]))
    return out


def noise_share(table: PolyaTable, size: int) -> np.ndarray:
    """One server's share G - G' of ``size`` distributed discrete Laplace values (int64)."""
    return sample_polya(table, size) - sample_polya(table, size)


def polya_guarantee(table: PolyaTable, m: int) -> float:
    """Per-value delta: (1 + e^eps_v) * 2m * tv_bound (the sum of 2m rounded draws vs the ideal law)."""
    e = math.exp(float(table.epsilon))
    d = (1.0 + e) * 2 * int(m) * table.tv_bound
    return math.nextafter(d, math.inf)
