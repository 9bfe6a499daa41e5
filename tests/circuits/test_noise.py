"""Tests of circuits/noise.py and dp/dyadic/: exact pmfs, exact and bounded (eps, delta), gadgets, samplers.

References are independent of the module: exhaustive enumeration of every
random input through the plaintext circuit, Fraction arithmetic written out
here, Decimal at 200 digits for the ideal discrete Laplace, scipy.stats for
chi-square tests.  Statistical tests use seeded simulation bits (alpha = 1e-3)
or, for the OS-CSPRNG sampler, alpha = 1e-6.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from pairwise.circuits.builder import Builder
from pairwise.circuits.ir import GARBLER, bits_to_ints, ints_to_bits
from pairwise.circuits.kernels import kernel_reference, pack_pair
from pairwise.circuits.noise import (
    BINARY_KERNELS,
    bernoulli_gadget,
    decode_output,
    discrete_laplace_gadget,
    geometric_gadget,
    krr_gadget,
    less_than_const,
    noisy_binary_kernel,
    noisy_kernel,
    random_input_bits,
    randomized_response_gadget,
    simulate_random_input_bits,
)
from pairwise.dp.dyadic import (
    EXACT_MAX_BITS,
    DiscreteLaplaceParams,
    KaryRRParams,
    bernoulli_params,
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
    krr_estimator,
    krr_guarantee,
    ratio_certificate,
)
from pairwise.dp.errors import NoiseParameterError
from pairwise.dp.exact import exp_bounds
from pairwise.dp.samplers import sample_dyadic_laplace, sample_krr, simulate_dyadic_laplace, simulate_krr
from tests.support.chisquare import ALPHA_SEEDED, chi_square_pvalue

N_CHI = 100_000
ALPHA_CSPRNG = 1e-6


# ---------------------------------------------------------------------- helpers


def ideal_dlaplace(eps: Fraction, s: int, z: int, prec: int = 200) -> Decimal:
    """(1 - a)/(1 + a) a^|z|, a = exp(-eps/S), in Decimal at ``prec`` digits."""
    with localcontext() as ctx:
        ctx.prec = prec
        a = (-(Decimal(eps.numerator) / Decimal(eps.denominator)) / s).exp()
        return (1 - a) / (1 + a) * a ** abs(z)


def enumerate_outputs(nc, extra_inputs=()) -> dict[int, int]:
    """Run the circuit on every value of rx (ry = 0); counts of each output value."""
    w = nc.random_width
    allu = np.array(list(itertools.product([0, 1], repeat=w)), dtype=bool)[:, ::-1]
    ry = np.zeros_like(allu)
    extra = [np.repeat(e, allu.shape[0], axis=0) for e in extra_inputs]
    out = decode_output(nc, nc.circuit.evaluate_bits([*extra, allu, ry])[0])
    vals, cnt = np.unique(out, return_counts=True)
    return dict(zip(vals.tolist(), cnt.tolist()))


def hockey_stick_float(pmf: dict[int, Fraction], eps: float, s_max: int) -> float:
    """max_s sum_z max(0, q(z) - e^eps q(z+s)) in floating point (independent reference)."""
    e = math.exp(eps)
    q = {z: float(p) for z, p in pmf.items()}
    best = 0.0
    for s in range(1, s_max + 1):
        for sign in (1, -1):
            tot = sum(max(0.0, qz - e * q.get(z + sign * s, 0.0)) for z, qz in q.items())
            best = max(best, tot)
    return best


# ---------------------------------------------------------------------- rigorous constants
@pytest.mark.parametrize(
    "t",
    [
        Fraction(0),
        Fraction(1, 10),
        Fraction(-1, 10),
        Fraction(10),
        Fraction(-37, 3),
        Fraction(-1500),
        Fraction(1, 3 * 2**40),
    ],
)
def test_exp_bounds_bracket_high_precision_value(t):
    lo, hi = exp_bounds(t)
    with localcontext() as ctx:
        ctx.prec = 250
        ref = Fraction((Decimal(t.numerator) / Decimal(t.denominator)).exp())
    assert lo <= ref <= hi
    assert hi - lo <= ref * Fraction(1, 10**95) + Fraction(1, 2**600)


def test_exp_bounds_below_cap_are_zero_and_monotone():
    lo, hi = exp_bounds(Fraction(-5000))
    assert lo == 0 and 0 < hi <= exp_bounds(Fraction(-2000))[1]


# ---------------------------------------------------------------------- coins
@pytest.mark.parametrize("m", list(range(33)))
def test_less_than_const_exhaustive(m):
    b = Builder("lt")
    u = b.input("u", 5, GARBLER)
    b.output("o", type(u)(b, [less_than_const(b, u.bits, m)]))
    c = b.build()
    vals = list(range(32))
    out = c.evaluate(vals)[0]
    assert [int(v) for v in out] == [int(v < m) for v in vals]
    if 0 < m < 32:
        tz = (m & -m).bit_length() - 1
        assert c.n_and <= 5 - tz - 1 if 5 - tz >= 1 else c.n_and == 0


@pytest.mark.parametrize("m,acc", [(1, 6), (3, 6), (32, 6), (37, 6), (63, 6), (12, 8), (200, 8)])
def test_bernoulli_gadget_exact_by_enumeration(m, acc):
    params = bernoulli_params(Fraction(m, 2**acc), acc)
    assert params.numerator == m
    nc = bernoulli_gadget(params)
    counts = enumerate_outputs(nc)
    total = 2**nc.random_width
    assert Fraction(counts.get(1, 0), total) == Fraction(m, 2**acc)
    tz = (m & -m).bit_length() - 1
    assert nc.circuit.n_and == params.and_gates == max(0, acc - tz - 1)
    assert nc.random_width == acc - tz


def test_bernoulli_rounding_modes():
    assert bernoulli_params(0.3, 4, "down").numerator == 4  # 4.8 -> 4
    assert bernoulli_params(0.3, 4, "up").numerator == 5
    assert bernoulli_params(0.3, 4).numerator == 5
    with pytest.raises(NoiseParameterError):
        bernoulli_params(0.01, 3, "down")  # rounds to 0
    with pytest.raises(NoiseParameterError):
        bernoulli_params(1.5, 8)
    with pytest.raises(NoiseParameterError):
        bernoulli_params(0.5, 8, "sideways")


# ---------------------------------------------------------------------- exact pmfs
def product_pmf(params: DiscreteLaplaceParams) -> dict[int, Fraction]:
    ps = [Fraction(m, 2**params.acc) for m in params.numerators]
    out = {}
    for x in range(2**params.bits):
        p = Fraction(1)
        for i, pi in enumerate(ps):
            p *= pi if (x >> i) & 1 else 1 - pi
        out[x] = p
    return out


@pytest.mark.parametrize("eps,s,k,acc", [(1, 1, 2, 3), (Fraction(1, 2), 2, 2, 3), (3, 1, 3, 2), (1, 3, 2, 4)])
def test_geometric_and_laplace_pmfs_match_exhaustive_enumeration(eps, s, k, acc):
    params = discrete_laplace_params(eps, s, k, acc)
    # one geometric: every rx value through the circuit
    g = geometric_gadget(params)
    counts = enumerate_outputs(g)
    total = 2**g.random_width
    ref = product_pmf(params)
    num, den = geometric_pmf(params)
    for x in range(2**k):
        assert Fraction(counts.get(x, 0), total) == ref[x] == Fraction(int(num[x]), den)
    # discrete Laplace: enumeration vs the module's pmf vs a hand convolution
    if 2 * g.random_width <= 16:
        d = discrete_laplace_gadget(params)
        counts = enumerate_outputs(d)
        total = 2**d.random_width
        vals, q, den2 = discrete_laplace_pmf(params)
        for z, qz in zip(vals.tolist(), q):
            conv = sum(ref[x] * ref[x - z] for x in ref if 0 <= x - z < 2**k)
            assert Fraction(counts.get(z, 0), total) == conv == Fraction(int(qz), den2)
        assert sum(counts.values()) == total


def test_gadget_and_counts_match_parameters():
    for eps, s in [(Fraction(1, 10), 1), (1, 2), (10, 3), (1, 65535)]:
        p = choose_discrete_laplace(eps, s)
        assert discrete_laplace_gadget(p).circuit.n_and == p.and_gates
        assert geometric_gadget(p).circuit.n_and == p.geometric_and_gates
        assert p.and_gates <= 2 * p.bits * (p.acc - 1) + p.bits


# ---------------------------------------------------------------------- delta: exact and bound
@pytest.mark.parametrize(
    "eps,s,k,acc",
    [(1, 1, 3, 4), (Fraction(1, 2), 2, 4, 5), (2, 3, 4, 6), (Fraction(1, 10), 1, 5, 6), (10, 1, 2, 8), (1, 1, 5, 7)],
)
def test_delta_exact_matches_float_hockey_stick(eps, s, k, acc):
    params = discrete_laplace_params(eps, s, k, acc)
    vals, q, den = discrete_laplace_pmf(params)
    pmf = {int(z): Fraction(int(v), den) for z, v in zip(vals, q)}
    ref = hockey_stick_float(pmf, float(Fraction(eps)), s)
    got = delta_exact(params)
    assert ref > 1e-9  # these parameters are coarse on purpose: delta is visible in floating point
    assert float(got) == pytest.approx(ref, rel=1e-9)


def test_delta_bound_dominates_exact_on_a_grid():
    checked = 0
    for eps in (Fraction(1, 10), Fraction(1, 2), 1, 4, 10):
        for s in (1, 2, 5):
            for k in (1, 2, 4, 7):
                for acc in (3, 6, 10, 24):
                    try:
                        p = discrete_laplace_params(eps, s, k, acc)
                    except NoiseParameterError:
                        continue
                    b, tv = delta_bound(p)
                    e = delta_exact(p)
                    assert e <= b, (eps, s, k, acc, float(e), float(b))
                    checked += 1
    assert checked > 200


def test_delta_detects_a_mechanism_that_is_too_narrow():
    # digits of alpha for S = 1, but claimed for S = 3: the noise is 3x too small.
    narrow = discrete_laplace_params(1, 1, 6, 30)
    wrong = DiscreteLaplaceParams(narrow.epsilon, 3, narrow.bits, narrow.acc, narrow.numerators)
    g = discrete_laplace_guarantee(wrong)
    assert g.method == "exact" and g.delta > 0.1
    assert discrete_laplace_guarantee(narrow).delta < 1e-5


def ideal_dl_variance(eps, s: int, prec: int = 60) -> Decimal:
    """2 a / (1 - a)^2, a = exp(-eps/S), in Decimal (independent of the module's bounds)."""
    with localcontext() as ctx:
        ctx.prec = prec
        e = Fraction(eps)
        a = (-(Decimal(e.numerator) / Decimal(e.denominator)) / s).exp()
        return 2 * a / (1 - a) ** 2


def pmf_moments(pmf: dict[int, Fraction]) -> tuple[Fraction, Fraction]:
    mean = sum(z * p for z, p in pmf.items())
    return mean, sum((z - mean) ** 2 * p for z, p in pmf.items())


@pytest.mark.parametrize("construction", ["difference", "signed"])
@pytest.mark.parametrize(
    "eps,s", [(Fraction(1, 2), 1), (1, 1), (1, 2), (10, 1), (10, 2), (Fraction(1, 10), 1), (Fraction(1, 50), 3)]
)
def test_designed_gadget_meets_delta_and_variance_targets(eps, s, construction):
    """delta <= 2^-40 from the exact pmf, and the exact variance within 2^-12 of the ideal discrete Laplace."""
    target = Fraction(1, 2**40)
    try:
        p = choose_discrete_laplace(eps, s, construction=construction)
    except NoiseParameterError:
        # the signed shape adds 1/4 to the variance: refused only where that exceeds the tolerance
        assert construction == "signed" and Decimal(1) / 4 > ideal_dl_variance(eps, s) / 4096
        return
    g = discrete_laplace_guarantee(p)
    assert g.method == (
        "exact" if p.bits <= EXACT_MAX_BITS and p.sensitivity * 2 ** (p.bits + 1) <= 2**18 else "certified"
    )
    assert g.delta <= float(target) and g.delta <= g.delta_bound and g.target_delta == pytest.approx(float(target))
    if p.bits <= 12:
        pmf = discrete_laplace_gadget(p).noise_pmf()
        mean, var = pmf_moments(pmf)
        assert mean == p.noise_mean and var == p.noise_variance  # the closed forms are the pmf's moments
    var = p.noise_variance
    ideal = ideal_dl_variance(eps, s)
    assert Decimal(var.numerator) / Decimal(var.denominator) <= ideal * (1 + Decimal(1) / 4096)
    assert Decimal(var.numerator) / Decimal(var.denominator) >= ideal * (1 - Decimal(1) / 64)  # not a different scale


@pytest.mark.parametrize("eps,s", [(Fraction(1, 2), 1), (1, 1), (1, 2), (10, 1), (Fraction(1, 10), 1)])
def test_uniform_precision_gadget_is_within_target_of_ideal_laplace(eps, s):
    """The earlier rule (precision="uniform"): stated delta and TV to the ideal both <= 2^-40."""
    target = Fraction(1, 2**40)
    p = choose_discrete_laplace(eps, s, lam=40, precision="uniform")
    g = discrete_laplace_guarantee(p)
    assert p.bits <= EXACT_MAX_BITS and g.method == "exact" and len(set(p.accs)) == 1
    assert g.delta <= float(target) and g.delta_bound <= float(target) and g.delta <= g.delta_bound
    vals, q, den = discrete_laplace_pmf(p)
    with localcontext() as ctx:
        ctx.prec = 200
        tv = Decimal(0)
        inside = Decimal(0)
        for z, qz in zip(vals.tolist(), q):
            ideal = ideal_dlaplace(Fraction(eps), s, z)
            inside += ideal
            tv += abs(Decimal(int(qz)) / Decimal(den) - ideal)
        tv = (tv + (1 - inside)) / 2  # the ideal's mass outside the support
    assert tv <= Decimal(g.tv_to_ideal) <= Decimal(float(target))
    assert tv > 0


def test_uniform_choice_is_minimal_in_precision():
    target = Fraction(1, 2**40)
    for eps, s in [(1, 1), (Fraction(1, 10), 7), (10, 65535)]:
        p = choose_discrete_laplace(eps, s, precision="uniform")
        lower = discrete_laplace_params(eps, s, p.bits, p.acc - 1)
        d, tv = delta_bound(lower)
        assert d > target or tv > target
        d, tv = delta_bound(p)
        assert d <= target and tv <= target


def test_designed_gadget_is_much_cheaper_than_uniform_precision():
    for eps, s in [(1, 2), (1, 321), (1, 65535)]:
        new = choose_discrete_laplace(eps, s)
        old = choose_discrete_laplace(eps, s, precision="uniform")
        assert 2 * new.and_gates < old.and_gates


def test_delta_and_target_delta_tighten_the_choice():
    p1 = choose_discrete_laplace(1, 4)
    p2 = choose_discrete_laplace(1, 4, delta=Fraction(1, 2**40 * 10**6))
    p3 = choose_discrete_laplace(1, 4, target_delta=1e-6)
    assert discrete_laplace_guarantee(p2).delta <= 2.0**-40 / 10**6
    assert p2.bits > p1.bits and p2.and_gates > p1.and_gates >= p3.and_gates
    assert discrete_laplace_guarantee(p3).delta <= 1e-6
    assert choose_discrete_laplace(1, 4, lam=40, n_samples=10**6) == p2  # the earlier spelling of the same target


@pytest.mark.parametrize("construction", ["difference", "signed"])
def test_large_sensitivity_is_certified_and_meets_target(construction):
    for eps in (0.1, 1, 10):
        p = choose_discrete_laplace(eps, 2**32 - 1, construction=construction)
        g = discrete_laplace_guarantee(p)
        assert g.method == "certified" and g.delta <= 2.0**-40 and g.delta == g.delta_bound
        ps = [Fraction(m, 2**a) for m, a in zip(p.numerators, p.accs)]
        # the tail P[X >= T], T = 2^K - S, most significant digit first: X >= T iff X = T or, at the highest
        # digit j where they differ, X has 1 and T has 0 (independent of the module's carry recursion)
        t = 2**p.bits - p.sensitivity
        tail, prefix = Fraction(0), Fraction(1)
        for j in reversed(range(p.bits)):
            if not (t >> j) & 1:
                tail += prefix * ps[j]
            prefix *= ps[j] if (t >> j) & 1 else 1 - ps[j]
        tail += prefix
        assert (
            g.delta_rational
            == tail * (Fraction(1, 2) if construction == "signed" else 1)
            == (geometric_tail(p) * (Fraction(1, 2) if construction == "signed" else 1))
        )
        # variance within the tolerance, from the closed form written out here
        v = sum(q * (1 - q) * 4**i for i, q in enumerate(ps))
        mean = sum(q * 2**i for i, q in enumerate(ps))
        var = 2 * v if construction == "difference" else v + mean * mean + mean + Fraction(1, 4)
        assert float(var) <= float(ideal_dl_variance(eps, p.sensitivity)) * (1 + 2.0**-12)


# ---------------------------------------------------------------------- plaintext chi-square (10^5 instances)
def test_discrete_laplace_gadget_chi_square_plaintext():
    p = choose_discrete_laplace(1, 2)
    nc = discrete_laplace_gadget(p)
    rx, ry = nc.simulate_random_inputs(N_CHI, np.random.default_rng(20240501))
    out = decode_output(nc, nc.circuit.evaluate_bits([rx, ry])[0])
    assert chi_square_pvalue(out, nc.noise_pmf()) > ALPHA_SEEDED


def test_chi_square_helper_rejects_a_different_distribution():
    nc = discrete_laplace_gadget(choose_discrete_laplace(1, 2))
    other = discrete_laplace_gadget(choose_discrete_laplace(Fraction(6, 5), 2))
    rx, ry = other.simulate_random_inputs(N_CHI, np.random.default_rng(7))
    out = decode_output(other, other.circuit.evaluate_bits([rx, ry])[0])
    assert chi_square_pvalue(out, nc.noise_pmf()) < 1e-6


def test_geometric_gadget_chi_square_plaintext():
    p = discrete_laplace_params(Fraction(1, 2), 1, 5, 16)
    nc = geometric_gadget(p)
    rx, ry = nc.simulate_random_inputs(N_CHI, np.random.default_rng(11))
    out = decode_output(nc, nc.circuit.evaluate_bits([rx, ry])[0])
    assert chi_square_pvalue(out, nc.noise_pmf()) > ALPHA_SEEDED


def test_samplers_match_the_exact_pmf():
    p = choose_discrete_laplace(1, 3)
    pmf = discrete_laplace_gadget(p).noise_pmf()
    sim = simulate_dyadic_laplace(p, N_CHI, np.random.default_rng(5))
    assert chi_square_pvalue(sim, pmf) > ALPHA_SEEDED
    real = sample_dyadic_laplace(p, N_CHI)
    assert chi_square_pvalue(real, pmf) > ALPHA_CSPRNG
    # multi-word coins (acc > 64) take the lexicographic comparison path
    wide = discrete_laplace_params(1, 1, 4, 100)
    sim = simulate_dyadic_laplace(wide, N_CHI, np.random.default_rng(6))
    assert chi_square_pvalue(sim, discrete_laplace_gadget(wide).noise_pmf()) > ALPHA_SEEDED


def test_random_input_bits_shape_and_balance():
    r = random_input_bits(13, 4000)
    assert r.shape == (4000, 13) and r.dtype == bool
    assert abs(r.mean() - 0.5) < 0.02  # 52000 fair bits: 0.02 is > 9 sigma
    s = simulate_random_input_bits(13, 10, np.random.default_rng(1))
    assert np.array_equal(s, simulate_random_input_bits(13, 10, np.random.default_rng(1)))


# ---------------------------------------------------------------------- randomized response
@pytest.mark.parametrize("eps", [0.1, 1, 3, 10])
def test_randomized_response_rounding_is_private(eps):
    rr = choose_randomized_response(eps)
    p = rr.flip_probability
    with localcontext() as ctx:
        ctx.prec = 100
        ideal = 1 / (1 + Decimal(eps).exp())
        eff = (Decimal(1 - p.numerator / Decimal(p.denominator)) / (Decimal(p.numerator) / Decimal(p.denominator))).ln()
    assert Decimal(p.numerator) / Decimal(p.denominator) >= ideal
    g = randomized_response_gadget(rr).guarantee
    assert g.delta == 0.0 and g.method == "pure"
    assert float(eff) <= g.epsilon <= eps
    assert g.epsilon >= eps * (1 - 2.0**-10)


def test_randomized_response_gadget_exact_by_enumeration():
    rr = choose_randomized_response(1, acc=8)
    nc = randomized_response_gadget(rr)
    for bit in (0, 1):
        counts = enumerate_outputs(nc, extra_inputs=[np.array([[bool(bit)]])])
        total = 2**nc.random_width
        assert Fraction(counts.get(1 - bit, 0), total) == rr.flip_probability
    assert nc.circuit.n_and == rr.and_gates


def test_randomized_response_rejects_non_private_rounding():
    from pairwise.dp.dyadic import RandomizedResponseParams

    rr = choose_randomized_response(1, acc=12)
    with pytest.raises(NoiseParameterError):
        RandomizedResponseParams(rr.epsilon, rr.acc, rr.numerator - 1)


# ---------------------------------------------------------------------- kernels + noise
def _zero_noise(nc, batch):
    """Random bits that make the noise 0: rx = all ones, ry = 0, so every coin compares u = 2^w - 1 >= m
    and is 0 (no digit, no flip); the signed shape's sign bit (the last bit) is set to 0."""
    rx = np.ones((batch, nc.random_width), bool)
    if nc.mechanism == "signed_geometric":
        rx[:, -1] = False
    return rx, np.zeros((batch, nc.random_width), bool)


def _extreme_noise(nc, batch, sign):
    """Random bits that make the additive noise extreme: sign * (2^K - 1) (difference: one geometric's
    digits all 1, u = 0, the other's all 0), or 2^K - 1 / -2^K (signed: all digits 1, sign bit 0 / 1)."""
    rx = np.zeros((batch, nc.random_width), bool)
    if nc.mechanism == "signed_geometric":
        rx[:, -1] = sign < 0
        return rx, np.zeros_like(rx), (nc.params.support - 1 if sign > 0 else -nc.params.support)
    half = nc.random_width // 2
    if sign > 0:
        rx[:, half:] = True
    else:
        rx[:, :half] = True
    return rx, np.zeros_like(rx), sign * (nc.params.support - 1)


def _kernel_inputs(name, w, signed, n, rng):
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    if name == "kendall":
        pairs = rng.integers(lo, hi + 1, size=(4, n))
        pairs[:, :3] = [[lo, hi, 5], [lo, hi, 5], [hi, lo, 5], [hi, hi, 5]]  # -1, +1 and 0 (ties)
        xs = [pack_pair(int(a), int(b), w, signed) for a, b in zip(pairs[0], pairs[1])]
        ys = [pack_pair(int(a), int(b), w, signed) for a, b in zip(pairs[2], pairs[3])]
        ref = kernel_reference(name, (pairs[0], pairs[1]), (pairs[2], pairs[3]))
        xb, yb = ints_to_bits(xs, 2 * w), ints_to_bits(ys, 2 * w)
    else:
        x = rng.integers(lo, hi + 1, size=n)
        y = rng.integers(lo, hi + 1, size=n)
        x[:3], y[:3] = [hi, lo, 7], [lo, hi, 7]  # extremes of the kernel range, and a tie
        ref = kernel_reference(name, x, y)
        xb, yb = ints_to_bits(x.tolist(), w, signed), ints_to_bits(y.tolist(), w, signed)
    return xb, yb, np.array([int(v) for v in ref], dtype=np.int64)


@pytest.mark.parametrize("name", ["gini", "auc", "kendall", "variance", "collision"])
@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("mechanism", ["discrete_laplace", "signed_geometric"])
def test_noisy_kernel_value_and_no_overflow(name, signed, mechanism):
    w, n = 8, 200
    nc = noisy_kernel(
        name,
        w,
        signed,
        epsilon=Fraction(1, 2),
        target_delta=1e-4,
        mechanism=mechanism,
        variance_tolerance=Fraction(1, 8),
    )
    assert nc.mechanism == mechanism
    xb, yb, ref = _kernel_inputs(name, w, signed, n, np.random.default_rng(3))
    rx, ry = _zero_noise(nc, n)
    out = decode_output(nc, nc.circuit.evaluate_bits([xb, yb, rx, ry])[0])
    assert np.array_equal(out, ref)
    for sign in (1, -1):
        rx, ry, z = _extreme_noise(nc, n, sign)
        out = decode_output(nc, nc.circuit.evaluate_bits([xb, yb, rx, ry])[0])
        assert np.array_equal(out, ref + z)
    assert nc.value_range[0] == (-1 if name == "kendall" else 0) and nc.unit == 1
    assert nc.guarantee.delta <= 1e-4


@pytest.mark.parametrize("name", ["auc", "kendall", "collision"])
@pytest.mark.parametrize("signed", [False, True])
def test_noisy_kernel_krr_codes_and_forced_flips(name, signed):
    """k-RR output codes: no flip reports the value; a forced flip moves the value's index by 1 + r (mod k)."""
    w, n = 8, 200
    nc = noisy_kernel(name, w, signed, epsilon=1, mechanism="krr")
    values = {"auc": [0, 1, 2], "kendall": [0, 1, -1], "collision": [0, 1]}[name]
    assert nc.mechanism == "krr" and list(nc.codes) == values and nc.guarantee.delta == 0
    xb, yb, ref = _kernel_inputs(name, w, signed, n, np.random.default_rng(4))
    idx = np.array([values.index(v) for v in ref])
    rx, ry = _zero_noise(nc, n)
    out = decode_output(nc, nc.circuit.evaluate_bits([xb, yb, rx, ry])[0])
    assert np.array_equal(nc.reported_values(out), ref)
    k = len(values)
    for r in (0, 1) if k == 3 else (0,):
        rx = np.zeros((n, nc.random_width), bool)  # coin bits all 0: u = 0 < m, a flip
        if k == 3:
            rx[:, -1] = bool(r)  # the bit choosing between the two other values
        out = decode_output(nc, nc.circuit.evaluate_bits([xb, yb, rx, np.zeros_like(rx)])[0])
        assert np.array_equal(out, (idx + 1 + r) % k)


def test_noisy_kernel_fixed_point_units():
    nc = noisy_kernel("gini", 16, epsilon=1, fixed_point_bits=8, target_delta=1e-6)
    assert nc.unit == 2**8 and nc.value_range == (0, 255) and nc.sensitivity == 255
    x = np.array([65535, 1000, 0, 300]), np.array([0, 0, 65535, 44])
    rx, ry = _zero_noise(nc, 4)
    out = decode_output(
        nc, nc.circuit.evaluate_bits([ints_to_bits(x[0].tolist(), 16), ints_to_bits(x[1].tolist(), 16), rx, ry])[0]
    )
    assert out.tolist() == [65535 >> 8, 1000 >> 8, 65535 >> 8, 256 >> 8]
    with pytest.raises(NoiseParameterError, match="fixed point"):
        noisy_kernel("auc", 8, epsilon=1, fixed_point_bits=1, mechanism="krr")


def test_noisy_kernel_noise_distribution_plaintext():
    noise = discrete_laplace_params(1, 2, 4, 10)
    nc = noisy_kernel("auc", 8, noise=noise)
    rng = np.random.default_rng(99)
    x = np.full(N_CHI, 7)
    y = rng.integers(0, 16, size=N_CHI)
    h = kernel_reference("auc", x, y)
    rx, ry = nc.simulate_random_inputs(N_CHI, rng)
    out = decode_output(
        nc, nc.circuit.evaluate_bits([ints_to_bits(x.tolist(), 8), ints_to_bits(y.tolist(), 8), rx, ry])[0]
    )
    assert chi_square_pvalue(out - h, nc.noise_pmf()) > ALPHA_SEEDED


@pytest.mark.parametrize("name", sorted(BINARY_KERNELS))
def test_noisy_binary_kernel(name):
    nc = noisy_binary_kernel(name, 8, epsilon=2)
    rng = np.random.default_rng(4)
    x = rng.integers(0, 4, size=N_CHI)
    y = rng.integers(0, 4, size=N_CHI)
    truth = (x == y) if name == "collision" else (x > y)
    xb, yb = ints_to_bits(x.tolist(), 8), ints_to_bits(y.tolist(), 8)
    rx, ry = _zero_noise(nc, N_CHI)
    out = bits_to_ints(nc.circuit.evaluate_bits([xb, yb, rx, ry])[0]).astype(bool)
    assert np.array_equal(out, truth)
    rx, ry = nc.simulate_random_inputs(N_CHI, rng)
    out = bits_to_ints(nc.circuit.evaluate_bits([xb, yb, rx, ry])[0]).astype(bool)
    flips = int(np.count_nonzero(out != truth))
    p = float(nc.params.flip_probability)
    assert stats.binomtest(flips, N_CHI, p).pvalue > ALPHA_SEEDED
    assert nc.guarantee.epsilon <= 2 and nc.guarantee.delta == 0


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "call",
    [
        lambda: choose_discrete_laplace(0, 1),
        lambda: choose_discrete_laplace(-1, 1),
        lambda: choose_discrete_laplace(float("nan"), 1),
        lambda: choose_discrete_laplace(1, 0),
        lambda: choose_discrete_laplace(1, 1, lam=0),
        lambda: choose_discrete_laplace(1, 1, target_delta=1.5),
        lambda: discrete_laplace_params(1, 1, 0, 8),
        lambda: discrete_laplace_params(1, 1, 4, 0),
        lambda: DiscreteLaplaceParams(Fraction(1), 1, 2, 4, (3,)),
        lambda: DiscreteLaplaceParams(Fraction(1), 1, 2, 4, (3, 0)),
        lambda: DiscreteLaplaceParams(Fraction(1), 1, 2, 4, (3, 12)),
        lambda: noisy_kernel("median", 8, epsilon=1),
        lambda: noisy_kernel("gini", 8),
        lambda: noisy_binary_kernel("gini", 8, epsilon=1),
        lambda: choose_randomized_response(True),
        lambda: discrete_laplace_pmf(discrete_laplace_params(1, 1, 15, 8)),
        lambda: delta_exact(discrete_laplace_params(1, 1, 12, 8)),
    ],
)
def test_bad_parameters_raise_value_errors(call):
    with pytest.raises(NoiseParameterError):
        call()
    assert issubclass(NoiseParameterError, ValueError)


# ---------------------------------------------------------------------- certificates against the exact delta
def _random_digits(rng, eps, s, k, construction):
    """Hand-made digits near the ideal (each rounded at a random precision, sometimes down): the
    certificates must agree with the exact delta whether or not they hold."""
    nums, accs = [], []
    for i in range(k):
        a = int(rng.integers(3, 24))
        p = math.exp(-(2**i) * float(eps) / s)
        p = p / (1 + p)
        m = min(max(1, int(round(p * 2**a)) + int(rng.integers(-1, 2))), 2 ** (a - 1))
        nums.append(m)
        accs.append(a)
    return DiscreteLaplaceParams(
        Fraction(eps), s, k, max(accs), tuple(nums), accs=tuple(accs), construction=construction
    )


@pytest.mark.parametrize("construction", ["difference", "signed"])
def test_certified_delta_equals_or_bounds_the_exact_delta(construction):
    """Signed: when the ratio certificate holds, the certified delta *is* the exact hockey-stick value;
    difference: it bounds it.  Whether or not it holds, delta_bound dominates the exact value."""
    rng = np.random.default_rng(17)
    certified = 0
    for trial in range(120):
        eps = [Fraction(1, 4), Fraction(1, 2), 1, 2][trial % 4]
        s = [1, 2, 3, 5][(trial // 4) % 4]
        k = int(rng.integers(max(1, s.bit_length()), 7))
        p = _random_digits(rng, eps, s, k, construction)
        exact = delta_exact(p)
        bound, _ = delta_bound(p)
        # both use rational bounds of e^(+-eps) (within 1e-100 relative): equal up to that when the bound is tight
        assert exact <= bound * (1 + Fraction(1, 10**90))
        if ratio_certificate(p).ok:
            certified += 1
            tail = geometric_tail(p)
            if construction == "signed":
                assert exact == bound == tail / 2
            else:
                assert exact <= bound == tail
    for eps, s in [(1, 2), (Fraction(1, 2), 3), (1, 1)]:  # the designed gadgets are certified by construction
        p = choose_discrete_laplace(eps, s, construction=construction, variance_tolerance=1)
        assert ratio_certificate(p).ok
        assert (
            delta_exact(p) == geometric_tail(p) / 2 if construction == "signed" else delta_exact(p) <= geometric_tail(p)
        )
    assert certified >= 10


def test_certificate_catches_a_digit_that_is_too_likely():
    """A designed gadget with one low digit pushed far from its ideal loses its certificate, and its exact
    delta indeed jumps (the certificate is not vacuous)."""
    p = choose_discrete_laplace(1, 2)
    nums = list(p.numerators)
    accs = list(p.accs)
    # digit 1 becomes a fair coin: far more likely than alpha^2/(1+alpha^2) = 0.27 (digit 0 would not do:
    # with S = 2 the shift that has no slack never flips it)
    nums[1], accs[1] = 1, 1
    bad = DiscreteLaplaceParams(p.epsilon, p.sensitivity, p.bits, max(accs), tuple(nums), accs=tuple(accs))
    assert not ratio_certificate(bad).ok
    assert delta_exact(bad) > 1e-3 and discrete_laplace_guarantee(bad).method == "exact"


def test_signed_construction_pmf_by_enumeration():
    p = discrete_laplace_params(1, 2, 3, 4, construction="signed")
    nc = discrete_laplace_gadget(p)
    counts = enumerate_outputs(nc)
    total = 2**nc.random_width
    ref = product_pmf(p)
    for z, q in nc.noise_pmf().items():
        x = z if z >= 0 else -z - 1
        assert Fraction(counts.get(z, 0), total) == q == ref[x] / 2
    assert nc.circuit.n_and == p.and_gates == p.geometric_and_gates  # the sign costs nothing
    mean, var = pmf_moments(nc.noise_pmf())
    assert mean == -Fraction(1, 2) == p.noise_mean and var == p.noise_variance


# ---------------------------------------------------------------------- k-ary randomized response
def krr_ideal(eps: float, k: int):
    """(phi*, worst-case estimator variance) of the ideal k-RR on the values 0..k-1, written out here."""
    phi = (k - 1) / (math.exp(eps) + k - 1)
    lam = 1 - k * phi / (k - 1)
    worst = 0.0
    for f in range(k):
        ys = {y: (1 - phi if y == f else phi / (k - 1)) for y in range(k)}
        mean = sum(y * q for y, q in ys.items())
        var = sum((y - mean) ** 2 * q for y, q in ys.items())
        worst = max(worst, var / lam**2)
    return phi, worst


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("eps", [0.1, 0.5, 1, 2, 4, 10])
def test_krr_rounding_is_private_and_within_the_variance_tolerance(eps, k):
    p = choose_krr(eps, k)
    phi_star, worst_star = krr_ideal(eps, k)
    with localcontext() as ctx:
        ctx.prec = 80
        ideal = Decimal(k - 1) / (Decimal(eps).exp() + k - 1)
        phi = Decimal(p.numerator) / Decimal(2**p.acc)
        assert phi >= ideal  # at least the ideal flip probability: eps-DP
        eff = ((1 - phi) * (k - 1) / phi).ln()
    g = krr_guarantee(p)
    assert g.delta == 0 and g.method == "pure" and float(eff) <= g.epsilon <= eps
    est = krr_estimator(p, tuple(range(k)))
    assert float(est.max_variance) <= worst_star * (1 + 2.0**-12) + 1e-300
    assert p.and_gates == p.acc - 1 - ((p.numerator & -p.numerator).bit_length() - 1) + (4 if k == 3 else 0)


@pytest.mark.parametrize("values", [(0, 1, 2), (0, 1, -1), (0, 1)])
def test_krr_estimator_is_exactly_unbiased_with_the_stated_variance(values):
    p = choose_krr(1, len(values))
    est = krr_estimator(p, values)
    k = len(values)
    for i, f in enumerate(values):
        dist = {values[j]: (p.keep_probability if j == i else p.flip_probability / (k - 1)) for j in range(k)}
        e = {y: est.slope * y + est.intercept for y in dist}
        mean = sum(e[y] * q for y, q in dist.items())
        var = sum((e[y] - mean) ** 2 * q for y, q in dist.items())
        assert mean == f and var == est.variance(f)


def test_krr_gadget_exact_by_enumeration():
    p = KaryRRParams(Fraction(1), 3, 6, 29)  # phi = 29/64 >= 2/(e+2) = 0.4239
    nc = krr_gadget(p)
    assert nc.circuit.n_and == p.and_gates == 5 + 4
    for code in range(3):
        xb = np.array([[bool(code & 1), bool(code & 2)]])
        counts = enumerate_outputs(nc, extra_inputs=[xb])
        total = 2**nc.random_width
        for out in range(3):
            want = p.keep_probability if out == code else p.other_probability
            assert Fraction(counts.get(out, 0), total) == want
        assert 3 not in counts


def test_krr_rejects_non_private_or_useless_flips():
    p = choose_krr(1, 3)
    with pytest.raises(NoiseParameterError, match="not eps-DP"):
        KaryRRParams(p.epsilon, 3, p.acc, p.numerator - 1)
    with pytest.raises(NoiseParameterError, match="no information"):
        KaryRRParams(Fraction(1), 3, 2, 3)  # phi = 3/4 >= 2/3
    with pytest.raises(NoiseParameterError):
        KaryRRParams(Fraction(1), 4, 6, 40)
    with pytest.raises(NoiseParameterError, match="few values|2 or 3"):
        noisy_kernel("gini", 8, epsilon=1, mechanism="krr")


def test_auto_takes_krr_for_three_valued_kernels_and_signed_for_gini():
    for name in ("kendall", "auc"):
        nc = noisy_kernel(name, 8, epsilon=1)
        assert nc.mechanism == "krr" and nc.circuit.n_and <= 150
        assert float(nc.max_estimate_variance) < float(ideal_dl_variance(1, 2))
    nc = noisy_kernel("gini", 16, epsilon=1, sensitivity=321)
    assert nc.mechanism == "signed_geometric"
    nc = noisy_kernel("collision", 8, epsilon=1)
    assert nc.mechanism == "krr" and nc.params.k == 2


def test_samplers_match_the_exact_pmf_for_signed_and_krr():
    p = choose_discrete_laplace(1, 40, construction="signed")
    pmf = discrete_laplace_gadget(p).noise_pmf()
    assert chi_square_pvalue(simulate_dyadic_laplace(p, N_CHI, np.random.default_rng(8)), pmf) > ALPHA_SEEDED
    assert chi_square_pvalue(sample_dyadic_laplace(p, N_CHI), pmf) > ALPHA_CSPRNG
    q = choose_krr(1, 3)
    codes = np.random.default_rng(9).integers(0, 3, N_CHI)
    shift = (simulate_krr(q, codes, np.random.default_rng(10)) - codes) % 3
    assert chi_square_pvalue(shift, krr_gadget(q).noise_pmf()) > ALPHA_SEEDED
    shift = (sample_krr(q, codes) - codes) % 3
    assert chi_square_pvalue(shift, krr_gadget(q).noise_pmf()) > ALPHA_CSPRNG


# ---------------------------------------------------------------------- ownership: neither party alone sets the noise
def _noise_of(nc, rx, ry, xb=None):
    inputs = ([] if xb is None else [xb]) + [rx, ry]
    out = decode_output(nc, nc.circuit.evaluate_bits(inputs)[0])
    return out


@pytest.mark.parametrize("which", ["dl", "signed", "krr"])
def test_either_partys_bits_alone_leave_the_full_noise_distribution(which):
    """Fix one party's random bits (any constant), draw the other's uniformly: the output is still the full
    noise distribution (chi-square, alpha = 1e-3); and changing either party's bits changes the noise."""
    if which == "krr":
        nc = krr_gadget(choose_krr(1, 3))
        xb = np.zeros((N_CHI, 2), bool)  # value index 0: the output is the shift d
    else:
        nc = discrete_laplace_gadget(
            choose_discrete_laplace(
                1, 40 if which == "signed" else 2, construction="signed" if which == "signed" else "difference"
            )
        )
        xb = None
    rng = np.random.default_rng(12)
    const = rng.integers(0, 2, size=(1, nc.random_width)).astype(bool).repeat(N_CHI, axis=0)
    uniform = simulate_random_input_bits(nc.random_width, N_CHI, rng)
    pmf = nc.noise_pmf()
    for rx, ry in ((const, uniform), (uniform, const)):
        assert chi_square_pvalue(_noise_of(nc, rx, ry, xb), pmf) > ALPHA_SEEDED
    # changing only one party's bits changes the noise (for a fixed other share)
    a, b = (
        simulate_random_input_bits(nc.random_width, 2000, rng),
        simulate_random_input_bits(nc.random_width, 2000, rng),
    )
    c = simulate_random_input_bits(nc.random_width, 2000, rng)
    x2 = None if xb is None else xb[:2000]
    base = _noise_of(nc, a, b, x2)
    assert (base != _noise_of(nc, c, b, x2)).mean() > 0.2 and (base != _noise_of(nc, a, c, x2)).mean() > 0.2
