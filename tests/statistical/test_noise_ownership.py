"""Who owns the noise: neither party alone knows it, and both parties' random bits drive it.

In-circuit noise (ustats paper App. C.2; circuits.noise) is a function of
rx XOR ry, rx the garbler's and ry the evaluator's uniform bits.  The privacy
argument needs exactly this: *fixing either party's bits, the noise is still
the full noise law when the other party's bits are uniform*, so a party that
knows its own bits learns nothing about the noise.  Earlier tests fixed the
evaluator's bits at 0 in every enumeration, which cannot tell "rx XOR ry" from
"rx alone".  Here:

* exact enumeration (small gadget, 2^16 bit strings): for several fixed rx,
  the histogram of the noise over *all* ry equals 2^16 times the exact pmf,
  computed here from the digit probabilities m_i / 2^acc; and the same with
  the roles swapped;
* the same exact enumeration for the signed geometric gadget (Z = X or
  -(X + 1)) and the k-ary randomized response gadget (k = 3);
* production gadgets (ustat kernels with discrete Laplace and with their
  default noise -- k-RR for kendall and auc, the signed geometric for gini --,
  randomized response, the ECDF noisy-sum circuit): one party's bits fixed to
  a random string, the other's uniform over a SIMD batch; chi-square goodness
  of fit against the ideal law (alpha 1e-5), in both directions;
* every single random bit of each party changes the output for some inputs
  (discrete Laplace, signed geometric and k-RR gadgets), and the output is
  invariant under (rx, ry) -> (rx ^ d, ry ^ d);
* the ECDF servers' noise: in the masked garbled mode each server's share of
  the noise alone is uniform on Z_2^l (both the top and the low 4 bits, chi
  square, alpha 1e-5) while the two shares sum to discrete Laplace; with
  Polya shares (m > 2) one server's share is NB(1/m) - NB(1/m), a 1/m part of
  the noise, not the noise.

A fault that builds the noise from one party's bits (the other ignored) makes
the fixed-bits distribution a point mass and fails every test here.
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from pairwise.circuits.ir import bits_to_ints, ints_to_bits
from pairwise.circuits.noise import (
    decode_output,
    discrete_laplace_gadget,
    krr_gadget,
    noisy_binary_kernel,
    noisy_kernel,
    random_input_bits,
)
from pairwise.dp.dyadic import KaryRRParams, discrete_laplace_params
from pairwise.mpc.channel import MemoryChannel
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession
from pairwise.protocols.ecdf.noise import (
    gc_noise_shares,
    noise_share,
    noisy_sum_circuit,
    polya_shape,
    polya_table,
    words_to_bits,
)
from pairwise.protocols.ecdf.shares import reduce_mod, to_signed
from tests.support.noise_power import (
    GofTest,
    bernoulli,
    categorical,
    discrete_laplace,
    from_atoms,
    kary_rr,
    signed_geometric,
)


def _inputs(circuit, **groups):
    """Input arrays in the circuit's group order, by name."""
    return [groups[g.name] for g in circuit.inputs]


def _fixed(bits: np.ndarray, batch: int) -> np.ndarray:
    return np.broadcast_to(bits, (batch, bits.size)).copy()


# --------------------------------------------------------------------------- exact enumeration
def _exact_gadget_counts(params, width: int) -> dict[int, int]:
    """2^width * P[Z = z] from the digit probabilities m_i / 2^acc (independent of the library's pmf).

    Difference construction Z = X1 - X2, signed construction Z = X or -(X + 1).
    """
    two = 1 << params.acc
    geo = {0: Fraction(1)}
    for i, m in enumerate(params.numerators):
        p = Fraction(m, two)
        nxt: dict[int, Fraction] = {}
        for x, w in geo.items():
            nxt[x] = nxt.get(x, 0) + w * (1 - p)
            nxt[x + (1 << i)] = nxt.get(x + (1 << i), 0) + w * p
        geo = nxt
    out: dict[int, Fraction] = {}
    if params.construction == "signed":  # Z = X or -(X + 1), one fair sign bit
        for x, w in geo.items():
            out[x] = out.get(x, 0) + w / 2
            out[-x - 1] = out.get(-x - 1, 0) + w / 2
    else:  # Z = X1 - X2
        for x1, w1 in geo.items():
            for x2, w2 in geo.items():
                out[x1 - x2] = out.get(x1 - x2, 0) + w1 * w2
    counts = {z: w * (1 << width) for z, w in out.items()}
    assert all(c.denominator == 1 for c in counts.values())
    return {z: int(c) for z, c in counts.items() if c}


def _all_bit_strings(width: int) -> np.ndarray:
    return ((np.arange(1 << width)[:, None] >> np.arange(width)[None, :]) & 1).astype(bool)


def _fixed_values(w: int) -> tuple[np.ndarray, ...]:
    """The fixed party's bits: zeros, ones and two random strings."""
    rng = np.random.default_rng(0)
    return (np.zeros(w, bool), np.ones(w, bool), rng.integers(0, 2, w).astype(bool), rng.integers(0, 2, w).astype(bool))


def _enumerate(nc, fixed_party: str, fixed: np.ndarray, **other) -> dict[int, int]:
    """Output histogram with one party's bits fixed and the other's running over all 2^w strings."""
    every = _all_bit_strings(nc.random_width)
    f = _fixed(fixed, every.shape[0])
    rx, ry = (f, every) if fixed_party == "garbler" else (every, f)
    z = decode_output(nc, nc.circuit.evaluate_bits(_inputs(nc.circuit, rx=rx, ry=ry, **other))[0])
    vals, counts = np.unique(z, return_counts=True)
    return dict(zip(vals.tolist(), counts.tolist()))


@pytest.mark.parametrize("fixed_party", ["garbler", "evaluator"])
def test_enumeration_each_party_alone_leaves_the_full_noise_law(fixed_party):
    """Small discrete Laplace gadget (K = 2, acc = 4, 16 random bits per party): exact, no statistics.

    For 4 values of the fixed party's bits (zeros, ones, two random), the noise
    over all 2^16 strings of the other party has exactly the gadget's pmf.
    """
    params = discrete_laplace_params(Fraction(1), 1, 2, 4)
    nc = discrete_laplace_gadget(params)
    w = nc.random_width
    assert w <= 16
    expect = _exact_gadget_counts(params, w)
    for fixed in _fixed_values(w):
        assert _enumerate(nc, fixed_party, fixed) == expect, f"{fixed_party} bits fixed to {fixed.astype(int)}"


@pytest.mark.parametrize("fixed_party", ["garbler", "evaluator"])
def test_signed_geometric_enumeration_each_party_alone_leaves_the_full_law(fixed_party):
    """Small signed geometric gadget (K = 2, acc = 4, one sign bit; at most 9 random bits per party): exact.

    Z = X or -(X + 1): for 4 values of the fixed party's bits, the noise over
    all strings of the other party has exactly the pmf of the digit coins and
    a fair sign.
    """
    params = discrete_laplace_params(Fraction(1), 1, 2, 4, construction="signed")
    nc = discrete_laplace_gadget(params)
    w = nc.random_width
    assert w <= 9 and nc.mechanism == "signed_geometric"
    expect = _exact_gadget_counts(params, w)
    for fixed in _fixed_values(w):
        assert _enumerate(nc, fixed_party, fixed) == expect, f"{fixed_party} bits fixed to {fixed.astype(int)}"


#: k-RR gadget of the enumeration: k = 3, flip probability phi = 29/64 >= 2/(e + 2) (eps = 1)
KRR_SMALL = KaryRRParams(Fraction(1), 3, 6, 29)


def _code_bits(code: int, batch: int) -> np.ndarray:
    """The k-RR gadget's value input: code bits ([i = 1], [i = 2]) of value index i, LSB first."""
    return _fixed(np.array([code == 1, code == 2]), batch)


@pytest.mark.parametrize("fixed_party", ["garbler", "evaluator"])
def test_krr_enumeration_each_party_alone_leaves_the_full_law(fixed_party):
    """Small k-RR gadget (k = 3, phi = 29/64; 6 coin bits + 1 choice bit per party): exact, no statistics.

    For every true index i and 4 values of the fixed party's bits, over all
    2^7 strings of the other party the report is i exactly 2^7 (1 - 29/64) =
    70 times and each other index 2^7 (29/64)/2 = 29 times.
    """
    nc = krr_gadget(KRR_SMALL)
    w = nc.random_width
    assert w == 7
    for code in range(3):
        expect = {c: (70 if c == code else 29) for c in range(3)}
        for fixed in _fixed_values(w):
            got = _enumerate(nc, fixed_party, fixed, x=_code_bits(code, 1 << w))
            assert got == expect, f"index {code}, {fixed_party} bits fixed to {fixed.astype(int)}"


def _small_gadget(kind: str):
    """(circuit, extra inputs for a batch) of the small gadgets of the enumerations."""
    if kind == "krr":
        return krr_gadget(KRR_SMALL), lambda batch: {"x": _code_bits(0, batch)}
    construction = "signed" if kind == "signed_geometric" else "difference"
    return discrete_laplace_gadget(
        discrete_laplace_params(Fraction(1), 1, 2, 4, construction=construction)
    ), lambda batch: {}


@pytest.mark.parametrize("kind", ["discrete_laplace", "signed_geometric", "krr"])
def test_every_random_bit_of_each_party_moves_the_noise(kind):
    """Small gadget, exhaustive: for each bit j of rx (and of ry), flipping it changes the noise for some ry."""
    nc, extra = _small_gadget(kind)
    w = nc.random_width
    every = _all_bit_strings(w)
    zero = np.zeros_like(every)
    more = extra(every.shape[0])
    out = lambda a, b: decode_output(nc, nc.circuit.evaluate_bits(_inputs(nc.circuit, rx=a, ry=b, **more))[0])  # noqa: E731
    base = out(zero, every)
    for j in range(w):
        flip = np.zeros(w, bool)
        flip[j] = True
        assert (out(zero ^ flip, every) != base).any(), f"garbler bit {j} never changes the noise"
        assert (out(zero, every ^ flip) != base).any(), f"evaluator bit {j} never changes the noise"


def test_only_the_xor_of_the_parties_bits_matters():
    """Production-size gadget: (rx ^ d, ry ^ d) gives the same noise as (rx, ry) for random d."""
    nc = discrete_laplace_gadget(discrete_laplace_params(Fraction(1, 2), 1, 6, 40))
    w, B = nc.random_width, 2048
    rx, ry, d = (random_input_bits(w, B) for _ in range(3))
    out = lambda a, b: decode_output(nc, nc.circuit.evaluate_bits(_inputs(nc.circuit, rx=a, ry=b))[0])  # noqa: E731
    assert np.array_equal(out(rx ^ d, ry ^ d), out(rx, ry))


# --------------------------------------------------------------------------- production gadgets
B_OWN = 6000


def _one_party_fixed(nc, fixed_party: str, **other_inputs):
    """Noise outputs with one party's random bits fixed (a random string) and the other's uniform."""
    w = nc.random_width
    fixed = _fixed(random_input_bits(w, 1)[0], B_OWN)
    free = random_input_bits(w, B_OWN)
    rx, ry = (fixed, free) if fixed_party == "garbler" else (free, fixed)
    return nc.circuit.evaluate_bits(_inputs(nc.circuit, rx=rx, ry=ry, **other_inputs))[0]


@pytest.mark.parametrize("fixed_party", ["garbler", "evaluator"])
@pytest.mark.parametrize("kernel,bits,sens", [("gini", 8, None), ("kendall", 8, 2), ("auc", 16, 2)])
def test_ustat_kernel_noise_needs_both_parties(kernel, bits, sens, fixed_party):
    """noisy_kernel(eps = 1): with one party's bits fixed the output is still h + DL(exp(-1/S)).

    Inputs x = y = 0 (gini: h = 0, S = 255; kendall: h = 0, S = 2; auc: h = 1,
    S = 2).  6000 SIMD instances, goodness of fit, alpha 1e-5; power >= 0.99
    against scale x2 and x1/2 (and a point mass, the one-party fault, has power 1).
    """
    nc = noisy_kernel(kernel, bits, epsilon=1, sensitivity=sens, mechanism="discrete_laplace")
    S = nc.sensitivity
    h = {"gini": 0, "kendall": 0, "auc": 1}[kernel]
    law = lambda f=1.0: discrete_laplace(alpha=math.exp(-1.0 / (S * f))).shift(h)  # noqa: E731
    test = GofTest([(law(), B_OWN)])
    test.require_power({"scale x2": [law(2.0)], "scale x1/2": [law(0.5)]})
    xw = 2 * bits if kernel == "kendall" else bits
    zeros = np.zeros((B_OWN, xw), bool)
    out = _one_party_fixed(nc, fixed_party, x=zeros, y=zeros)
    test.check([bits_to_ints(out, True)], f"{kernel} noise with the {fixed_party}'s bits fixed")


#: kernel values in circuit units of the three-valued kernels; the k-RR circuit reports value mod 3
KRR_VALUES = {"kendall": (-1, 0, 1), "auc": (0, 1, 2)}


@pytest.mark.parametrize("fixed_party", ["garbler", "evaluator"])
@pytest.mark.parametrize(
    "kernel,bits,sens,mech", [("gini", 8, None, "signed_geometric"), ("kendall", 8, 2, "krr"), ("auc", 16, 2, "krr")]
)
def test_ustat_default_kernel_noise_needs_both_parties(kernel, bits, sens, mech, fixed_party):
    """noisy_kernel(eps = 1) with its default mechanism: one party's bits fixed, the other's uniform.

    Inputs x = y = 0.  gini (h = 0, public range S = 2^8 - 1): the signed
    geometric h + Z, Z = X or -(X + 1), P[X = x] ~ exp(-1/S)^x; kendall (h = 0)
    and auc (h = 1, a tie): k-RR, the report is h with probability e/(e + 2),
    each other value 1/(e + 2).  6000 SIMD instances, goodness of fit, alpha
    1e-5; power >= 0.99 against scale x2 and x1/2 (eps / 2, 2 eps), and the
    one-party fault (a point mass) has power 1.
    """
    nc = noisy_kernel(kernel, bits, epsilon=1, sensitivity=sens)
    assert nc.mechanism == mech
    h = {"gini": 0, "kendall": 0, "auc": 1}[kernel]
    if mech == "krr":
        law = lambda f=1.0: kary_rr(KRR_VALUES[kernel], h, 1.0 / f)  # noqa: E731
        lut = np.zeros(3, np.int64)
        for v in KRR_VALUES[kernel]:
            lut[v % 3] = v
        read = lambda out: lut[bits_to_ints(out, False)]  # noqa: E731
    else:
        S = (1 << bits) - 1
        law = lambda f=1.0: signed_geometric(alpha=math.exp(-1.0 / (S * f))).shift(h)  # noqa: E731
        read = lambda out: bits_to_ints(out, True)  # noqa: E731
    test = GofTest([(law(), B_OWN)])
    test.require_power({"scale x2": [law(2.0)], "scale x1/2": [law(0.5)]})
    xw = 2 * bits if kernel == "kendall" else bits
    zeros = np.zeros((B_OWN, xw), bool)
    out = _one_party_fixed(nc, fixed_party, x=zeros, y=zeros)
    test.check([read(out)], f"{kernel} default ({mech}) noise with the {fixed_party}'s bits fixed")


@pytest.mark.parametrize("fixed_party", ["garbler", "evaluator"])
def test_randomized_response_gadget_needs_both_parties(fixed_party):
    """noisy_binary_kernel("greater", eps = 1): [x > y] XOR flip, flip ~ Bernoulli(1/(1+e)) with one party fixed."""
    nc = noisy_binary_kernel("greater", 8, epsilon=1)
    q = lambda f=1.0: 1 / (1 + math.exp(1.0 / f))  # noqa: E731
    test = GofTest([(bernoulli(q()), B_OWN)])
    test.require_power({"scale x2": [bernoulli(q(2.0))], "scale x1/2": [bernoulli(q(0.5))]})
    x = ints_to_bits([9] * B_OWN, 8)
    y = ints_to_bits([3] * B_OWN, 8)  # [x > y] = 1: the output is 1 - flip
    out = bits_to_ints(_one_party_fixed(nc, fixed_party, x=x, y=y), False)
    test.check([1 - out], f"randomized response flips with the {fixed_party}'s bits fixed")


@pytest.mark.parametrize("fixed_party", ["garbler", "evaluator"])
def test_ecdf_noisy_sum_circuit_needs_both_servers(fixed_party):
    """ECDF two-server circuit (eps_v = 1/3, S = 1): out - x - y = DL(exp(-1/3)) with one server's bits fixed."""
    l = 32
    nsc = noisy_sum_circuit(l, Fraction(1, 3), 1, 1)
    law = lambda f=1.0: discrete_laplace(alpha=math.exp(-1 / 3 / f))  # noqa: E731
    test = GofTest([(law(), B_OWN)])
    test.require_power({"scale x2": [law(2.0)], "scale x1/2": [law(0.5)]})
    x = np.full(B_OWN, 1000, np.uint64)
    y = np.full(B_OWN, 2**32 - 10, np.uint64)
    out = _one_party_fixed(nsc, fixed_party, x=words_to_bits(x, l), y=words_to_bits(y, l))
    vals = bits_to_ints(out, False).astype(np.uint64)
    test.check([to_signed(reduce_mod(vals - x - y, l), l)], f"ECDF noise with server {fixed_party}'s bits fixed")


# --------------------------------------------------------------------------- ECDF servers' shares
def _run_pair(fn_garbler, fn_evaluator):
    a, b = MemoryChannel.pair(timeout=120)
    res: dict = {}

    def ev():
        try:
            with EvaluatorSession(b, session_id=b"test-ownership") as s:
                res["e"] = fn_evaluator(s)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            res["err"] = exc

    th = threading.Thread(target=ev, daemon=True)
    th.start()
    with GarblerSession(a, session_id=b"test-ownership") as s:
        res["g"] = fn_garbler(s)
    th.join(timeout=120)
    assert not th.is_alive(), "evaluator thread did not finish"
    if "err" in res:
        raise res["err"]
    return res["g"], res["e"]


def test_masked_noise_shares_are_uniform_alone_and_discrete_laplace_together():
    """gc_noise_shares (l = 32, eps_v = 1/2): each server's share alone is uniform mod 2^32.

    Top 4 and low 4 bits of each share: uniform on 16 values (goodness of fit,
    alpha 1e-5 per share); their sum: DL(exp(-1/2)) (alpha 1e-5, power >= 0.99
    against scale x2 and x1/2).
    """
    l, B = 32, 4000
    nsc = noisy_sum_circuit(l, Fraction(1, 2), 1, 1)
    s0, s1 = _run_pair(lambda s: gc_noise_shares(s, nsc, B)[0], lambda s: gc_noise_shares(s, nsc, B)[0])
    uniform = GofTest([(categorical(np.full(16, 1 / 16)), B)] * 2)
    for name, share in (("garbler", s0), ("evaluator", s1)):
        share = np.asarray(share, np.uint64)
        uniform.check(
            [(share >> np.uint64(l - 4)).astype(np.int64), (share & np.uint64(15)).astype(np.int64)],
            f"{name} server's noise share alone",
        )
    law = lambda f=1.0: discrete_laplace(alpha=math.exp(-0.5 / f))  # noqa: E731
    total = GofTest([(law(), B)])
    total.require_power({"scale x2": [law(2.0)], "scale x1/2": [law(0.5)]})
    total.check(
        [to_signed(reduce_mod(np.asarray(s0, np.uint64) + np.asarray(s1, np.uint64), l), l)],
        "sum of the two servers' noise shares",
    )


def _nb_difference(r: float, a: float) -> object:
    k = np.arange(int(80 / (1 - a)) + 80)
    pmf = stats.nbinom.pmf(k, r, 1 - a)
    return from_atoms(np.arange(-k[-1], k[-1] + 1), np.convolve(pmf, pmf[::-1]), f"NB({r:g})-NB({r:g}), a={a:.4g}")


def test_one_polya_share_is_a_part_of_the_noise_not_all_of_it():
    """m = 3 servers, eps_v = 1/2: one server's share ~ NB(1/3) - NB(1/3); three shares sum to DL(exp(-1/2)).

    Both goodness of fit, alpha 1e-5; the single-share test has power >= 0.99
    against a share carrying the whole noise (DL) or none (0), and the sum test
    against scale x2 and x1/2.
    """
    m, B = 3, 3000
    eps = Fraction(1, 2)
    a = math.exp(-0.5)
    table = polya_table(polya_shape(m), eps, 1)
    part = GofTest([(_nb_difference(1 / m, a), B)])
    part.require_power(
        {"whole noise in one share": [discrete_laplace(alpha=a)], "scale x2": [_nb_difference(1 / m, math.exp(-0.25))]}
    )
    part.check([noise_share(table, B)], "one server's Polya noise share")
    law = lambda f=1.0: discrete_laplace(alpha=math.exp(-0.5 / f))  # noqa: E731
    total = GofTest([(law(), B)])
    total.require_power({"scale x2": [law(2.0)], "scale x1/2": [law(0.5)]})
    total.check([sum(noise_share(table, B) for _ in range(m))], "sum of three Polya shares")
