"""Differential-privacy noise sampled inside garbled circuits: the gadgets and their composition with kernels.

What it does
    Builds the noise gadgets of [BBGK20, Sec. 5 and
    App. C.2] as circuits and composes them with the kernels of
    :mod:`pairwise.circuits.kernels`.  Each party feeds uniform bits (``rx``,
    garbler; ``ry``, evaluator); the circuit XORs them (free) and draws:

    * a Bernoulli(m / 2^a) coin as [u < m] (:func:`less_than_const`, a - 1
      AND gates for odd m, optimal for one coin);
    * a geometric from K independent digit coins, the discrete Laplace as
      the difference of two, the signed geometric as X XOR sign (no ANDs);
    * randomized response (bit XOR flip) and k-ary randomized response for
      kernels with 2 or 3 values (:func:`krr_value`, 4 ANDs plus the coin).

    :func:`noisy_kernel` / :func:`noisy_binary_kernel` append the noise to a
    kernel (:func:`choose_kernel_noise` picks k-RR or the cheaper additive
    construction); every gadget comes back as a :class:`NoisyCircuit`: the
    circuit, its guarantee, its units and its unbiased estimator.

    The parameters, their exact privacy analysis and the parameter searches
    live in :mod:`pairwise.dp.dyadic`, the circuit-free exact samplers in
    :mod:`pairwise.dp.samplers`; this module re-exports their names for one
    release (``from pairwise.circuits.noise import choose_discrete_laplace``
    keeps working).  Derivations (exactness of the guarantee, parameter
    selection, the k-RR analogue of Theorem 5, units): ``docs/noise.md``.

Security model
    Semi-honest two-party computation.  The noise is a deterministic function
    of rx XOR ry: while one party draws its share uniformly from the OS
    CSPRNG (:func:`random_input_bits`), the noise has the stated law and is
    hidden from the other party; the garbled evaluation reveals only ``out``.
    :func:`simulate_random_input_bits` is seeded and for tests only.

Follows
    [BBGK20, Theorem 5 and App. C.1-C.2]; [DKMMN06] (biased coins from
    shared uniform bits, geometric digits); [CSU19].
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from pairwise.dp.accounting import PrivacyGuarantee
from pairwise.dp.dyadic import (
    CONSTRUCTION_MECHANISM,  # noqa: F401 - re-exported (moved to pairwise.dp.dyadic)
    CONSTRUCTIONS,
    DEFAULT_DELTA,
    DEFAULT_VARIANCE_TOLERANCE,
    EXACT_MAX_BITS,
    EXACT_MAX_WORK,
    KRR_K,
    MAX_ACC,  # noqa: F401 - re-exported (moved to pairwise.dp.dyadic)
    MAX_BITS,  # noqa: F401 - re-exported (moved to pairwise.dp.dyadic)
    BernoulliParams,
    DiscreteLaplaceParams,
    KaryRRParams,
    NoiseChoice,
    RandomizedResponseParams,
    RatioCertificate,
    bernoulli_params,
    check_variance_tolerance,
    choose_discrete_laplace,
    choose_krr,
    choose_randomized_response,
    delta_bound,
    delta_exact,
    discrete_laplace_guarantee,
    discrete_laplace_params,
    discrete_laplace_pmf,
    geometric_pmf,
    geometric_tail,
    ideal_discrete_laplace_variance,
    krr_estimator,
    krr_guarantee,
    randomized_response_guarantee,
    ratio_certificate,
    resolve_target_delta,
    simplest_dyadic,
)
from pairwise.dp.errors import NoiseParameterError
from pairwise.dp.exact import check_batch, check_noise_epsilon, check_positive_int, exp_bounds, trailing_zeros
from pairwise.dp.mechanisms import KRREstimator
from pairwise.dp.samplers import SAMPLER_MAX_BITS, sample_krr, simulate_krr  # noqa: F401 - re-exported
from pairwise.dp.samplers import sample_dyadic_laplace as sample_discrete_laplace
from pairwise.dp.samplers import simulate_dyadic_laplace as simulate_discrete_laplace
from pairwise.dp.validate import no_more_keywords, with_legacy

from .builder import FALSE, TRUE, Builder, Int
from .ir import EVALUATOR, GARBLER, Circuit, CircuitError, bits_to_ints

__all__ = [
    "NoiseParameterError",
    "NoiseGuarantee",  # noqa: F822 - the deprecated alias, served by __getattr__ below
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

# Every name above except the gadgets, NoisyCircuit, the kernel builders, random_input_bits and
# decode_output moved to pairwise.dp and is re-exported here for one release: import it from
# pairwise.dp.dyadic, pairwise.dp.exact (exp_bounds), pairwise.dp.samplers (sample_krr,
# simulate_krr; sample_discrete_laplace / simulate_discrete_laplace are sample_dyadic_laplace /
# simulate_dyadic_laplace there), pairwise.dp.mechanisms (KRREstimator) or pairwise.dp.errors
# (NoiseParameterError).  NoiseGuarantee is now pairwise.dp.accounting.PrivacyGuarantee.


def __getattr__(name: str) -> object:
    """``NoiseGuarantee``: deprecated alias of :class:`pairwise.dp.accounting.PrivacyGuarantee` (until 0.3)."""
    if name == "NoiseGuarantee":
        warnings.warn(
            "pairwise.circuits.noise.NoiseGuarantee is deprecated and goes in 0.3: a gadget's guarantee "
            "is a pairwise.dp.accounting.PrivacyGuarantee (same fields)",
            DeprecationWarning,
            stacklevel=2,
        )
        return PrivacyGuarantee
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    t = trailing_zeros(m)
    u = stream.take(acc - t)
    return less_than_const(b, u, m >> t)


def geometric_value(b: Builder, stream: _BitStream, params: DiscreteLaplaceParams) -> Int:
    """The K-digit geometric X = sum_i coin_i 2^i (unsigned, K bits)."""
    return Int(b, [bernoulli_bit(b, stream, m, a) for m, a in zip(params.numerators, params.digit_accs)], False)


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
    params: Any  # the parameter class of ``mechanism`` (BernoulliParams, KaryRRParams, ...)
    guarantee: PrivacyGuarantee | None
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
            assert self.codes is not None  # a krr gadget always carries its codes
            return krr_estimator(self.params, self.codes)
        if self.mechanism in ("discrete_laplace", "signed_geometric"):
            # additive noise: out = h + Z, so out - E Z is unbiased with the constant variance Var Z
            var = self.params.noise_variance
            return KRREstimator.additive(self.params.noise_mean, var)
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

    def estimate_variance(self, h: Fraction | int) -> Fraction:
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
        return simulate_random_input_bits(self.random_width, batch, rng), simulate_random_input_bits(
            self.random_width, batch, rng
        )


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
        bld.build(),
        "randomized_response",
        params,
        randomized_response_guarantee(params),
        params.random_bits,
        value_range=(0, 1),
        sensitivity=1,
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
    return NoisyCircuit(
        bld.build(),
        "krr",
        params,
        krr_guarantee(params),
        params.random_bits,
        value_range=(0, params.k - 1),
        sensitivity=params.k - 1,
        codes=tuple(range(params.k)),
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
    n: (lambda w, _n=n: _kernel_ranges(_n, w, False))  # type: ignore[misc]  # a default-bound lambda
    for n in ("gini", "auc", "kendall", "variance", "collision")
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
    body = {"gini": K.gini_value, "auc": K.auc_value, "variance": K.variance_value, "collision": K.collision_value}.get(
        name
    )
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
    eps = check_noise_epsilon(epsilon)
    s = max(1, check_positive_int(sensitivity, "sensitivity"))
    tau = check_variance_tolerance(variance_tolerance)
    kw: dict[str, Any] = dict(
        delta=delta, lam=lam, n_samples=n_samples, target_delta=target_delta, variance_tolerance=tau
    )
    resolve_target_delta(lam, n_samples, target_delta, delta)  # validate before any work
    if mechanism == "krr" or (mechanism == "auto" and krr_values is not None):
        if krr_values is None:
            raise NoiseParameterError(
                f"k-ary randomized response needs a kernel with {' or '.join(map(str, KRR_K))} values; {name!r} has more"
            )
        params = choose_krr(eps, len(krr_values), tau)
        if (
            mechanism == "krr"
            or krr_estimator(params, krr_values).max_variance < ideal_discrete_laplace_variance(eps, s)[0]
        ):
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
    noise: DiscreteLaplaceParams | KaryRRParams | None = None,
    choice: NoiseChoice | None = None,
    **legacy: object,
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
    define the mechanism).  ``choice``: a :class:`pairwise.dp.dyadic.NoiseChoice`
    (or its fields ``mechanism``, ``delta``, ``variance_tolerance``, ``lam``,
    ``n_samples``, ``target_delta`` as keywords).  Read the output with
    :meth:`NoisyCircuit.estimates`.
    """
    c = with_legacy(choice, NoiseChoice, legacy, "noisy_kernel")
    no_more_keywords(legacy, "noisy_kernel")
    mechanism = c.mechanism
    lo, hi = _kernel_ranges(name, bits, signed)
    span = hi - lo
    if fixed_point_bits is None:
        t = 0
    else:
        f = check_positive_int(fixed_point_bits, "fixed_point_bits", 128)
        t = max(0, span.bit_length() - f)
    lo_t, hi_t = lo >> t, hi >> t
    values = KERNEL_VALUES.get(name) if t == 0 else None
    if t and name in KERNEL_VALUES and (mechanism == "krr" or isinstance(noise, KaryRRParams)):
        raise NoiseParameterError(
            f"k-ary randomized response needs the exact values of kernel {name!r}; it does not apply in fixed point "
            f"(fixed_point_bits={fixed_point_bits} drops {t} bits)"
        )
    if noise is None:
        if epsilon is None:
            raise NoiseParameterError("noisy_kernel needs epsilon (or explicit noise parameters)")
        sens = (hi_t - lo_t) if sensitivity is None else check_positive_int(sensitivity, "sensitivity")
        noise = choose_kernel_noise(
            name,
            epsilon,
            max(1, sens),
            mechanism=mechanism,
            delta=c.delta,
            variance_tolerance=c.variance_tolerance,
            krr_values=values,
            lam=c.lam,
            n_samples=c.n_samples,
            target_delta=c.target_delta,
        )
    elif not isinstance(noise, (DiscreteLaplaceParams, KaryRRParams)):
        raise NoiseParameterError(f"noise must be DiscreteLaplaceParams or KaryRRParams, got {type(noise).__name__}")
    b = Builder(f"noisy_{name}{bits}{'s' if signed else 'u'}_{noise.mechanism}_acc{noise.acc}")
    h = _kernel_body(b, name, bits, signed)
    st = _random_groups(b, noise.random_bits)
    if isinstance(noise, KaryRRParams):
        if values is None or len(values) != noise.k:
            raise NoiseParameterError(
                f"k-ary randomized response with k={noise.k} does not apply to kernel {name!r}"
                + (" in fixed point" if t else "")
            )
        b.output("out", Int(b, krr_value(b, st, _kernel_code(b, name, h), noise), False))
        st.check_used()
        return NoisyCircuit(
            b.build(),
            "krr",
            noise,
            krr_guarantee(noise),
            noise.random_bits,
            unit=Fraction(1 << t),
            value_range=(lo_t, hi_t),
            sensitivity=hi_t - lo_t,
            kernel=name,
            codes=values,
        )
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


def noisy_spec_kernel(
    spec,
    bits: int,
    span: int,
    *,
    epsilon: object,
    mechanism: str = "auto",
    delta: object | None = None,
    variance_tolerance: object = DEFAULT_VARIANCE_TOLERANCE,
) -> NoisyCircuit:
    """A declared kernel (:class:`pairwise.circuits.kernel_spec.KernelSpec`) followed by in-circuit noise.

    The sensitivity is the declared range hi - lo for grid span ``span``
    (never the data); k-ary randomized response applies when the spec
    declares its 2 or 3 ``values`` (the code of a value is its index, found
    by comparisons with the constants).  The caller verifies the declaration
    against the circuit first (:func:`pairwise.circuits.kernel_spec.verify_kernel`).
    Output units are the kernel's circuit units (t = 0).
    """
    from . import kernels as K
    from .kernel_spec import KernelRangeError

    K._check(bits)
    lo, hi = spec.output_range(span)
    values = spec.values
    noise = choose_kernel_noise(
        spec.name,
        epsilon,
        hi - lo,
        mechanism=mechanism,
        delta=delta,
        variance_tolerance=variance_tolerance,
        krr_values=values,
    )
    b = Builder(f"noisy_{spec.name}{bits}u_{noise.mechanism}_acc{noise.acc}")
    x = b.input("x", bits, GARBLER)
    y = b.input("y", bits, EVALUATOR)
    h = spec.build(b, x, y)
    if not isinstance(h, Int):
        raise KernelRangeError(f"kernel {spec.name!r} must return a builder Int, got {type(h).__name__}")
    st = _random_groups(b, noise.random_bits)
    if isinstance(noise, KaryRRParams):
        code = [h.eq(v).bits[0] for v in values[1:]]  # one-hot of the non-zero codes: (c0, c1) = ([h = v1], [h = v2])
        b.output("out", Int(b, krr_value(b, st, code, noise), False))
        st.check_used()
        return NoisyCircuit(
            b.build(),
            "krr",
            noise,
            krr_guarantee(noise),
            noise.random_bits,
            value_range=(lo, hi),
            sensitivity=hi - lo,
            kernel=spec.name,
            codes=values,
        )
    z = discrete_laplace_value(b, st, noise)
    st.check_used()
    zlo, zhi = noise.noise_range
    width = _signed_width(min(lo, 0) + zlo, max(hi, 0) + zhi)
    if width > 64:
        raise KernelRangeError(
            f"kernel {spec.name!r}: the noisy output needs {width} bits (more than 64); "
            "narrow the domain or lower the decimals"
        )
    hw = max(width, h.width + 1)
    out = h.extend(hw).extend(hw, True) + z.extend(hw)
    b.output("out", out.extend(width, True).as_signed())
    return NoisyCircuit(
        b.build(),
        noise.mechanism,
        noise,
        discrete_laplace_guarantee(noise),
        noise.random_bits,
        value_range=(lo, hi),
        sensitivity=noise.sensitivity,
        kernel=spec.name,
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
        b.build(),
        "randomized_response",
        rr,
        randomized_response_guarantee(rr),
        rr.random_bits,
        value_range=(0, 1),
        sensitivity=1,
        kernel=name,
    )


# ---------------------------------------------------------------------- random inputs and outputs
def random_input_bits(width: int, batch: int) -> np.ndarray:
    """(batch, width) uniform bits from os.urandom: one party's random-bit share."""
    width = check_positive_int(width, "width")
    batch = check_batch(batch)
    nbytes = (width + 7) // 8
    raw = np.frombuffer(os.urandom(batch * nbytes), dtype=np.uint8).reshape(batch, nbytes)
    return np.unpackbits(raw, axis=1, bitorder="little")[:, :width].astype(bool)


def simulate_random_input_bits(width: int, batch: int, rng: np.random.Generator) -> np.ndarray:
    """Seeded stand-in for :func:`random_input_bits`: simulation and tests only."""
    if not isinstance(rng, np.random.Generator):
        raise NoiseParameterError("rng must be a numpy.random.Generator")
    width = check_positive_int(width, "width")
    batch = check_batch(batch)
    return rng.integers(0, 2, size=(batch, width), dtype=np.uint8).astype(bool)


def decode_output(nc: NoisyCircuit, bits: np.ndarray) -> np.ndarray:
    """Output bits (batch, width) of a noisy circuit -> int64 values (signed as declared)."""
    g = nc.circuit.outputs[0]
    return np.asarray(bits_to_ints(bits, g.signed))
