"""Garbled execution of the noise gadgets (half-gates, SIMD over 10^5 instances) against exact pmfs.

Each gadget is garbled and evaluated by :func:`pairwise.mpc.garble.garble_and_evaluate`
for 10^5 independent instances with seeded simulation random bits (both
parties' shares), the decoded outputs are compared bit for bit with plaintext
evaluation, and a chi-square test (bins merged to expected counts >= 5,
alpha = 1e-3, fixed seed) checks them against the gadget's exact pmf.
Parameters are small (acc <= 10) so 10^5 garbled instances stay fast; the
chi-square is against the exact pmf of exactly these parameters.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from pairwise.circuits.ir import bits_to_ints, ints_to_bits
from pairwise.circuits.kernels import kernel_reference, pack_pair
from pairwise.circuits.noise import (
    bernoulli_gadget,
    decode_output,
    discrete_laplace_gadget,
    geometric_gadget,
    krr_gadget,
    noisy_binary_kernel,
    noisy_kernel,
    randomized_response_gadget,
)
from pairwise.dp.dyadic import (
    bernoulli_params,
    choose_discrete_laplace,
    choose_krr,
    choose_randomized_response,
    discrete_laplace_params,
)
from pairwise.mpc.garble import garble_and_evaluate as garble
from tests.support.chisquare import ALPHA_SEEDED, chi_square_pvalue

N = 100_000
pytestmark = pytest.mark.slow


def _run(nc, inputs):
    garbled = garble(nc.circuit, inputs)[0]
    plain = nc.circuit.evaluate_bits(inputs)[0]
    assert np.array_equal(garbled, plain)
    return garbled


def test_garbled_bernoulli_coin():
    params = bernoulli_params(Fraction(300, 1024), 10)
    nc = bernoulli_gadget(params)
    rx, ry = nc.simulate_random_inputs(N, np.random.default_rng(101))
    out = bits_to_ints(_run(nc, [rx, ry])).astype(np.int64)
    assert chi_square_pvalue(out, nc.noise_pmf()) > ALPHA_SEEDED


def test_garbled_geometric():
    nc = geometric_gadget(discrete_laplace_params(Fraction(1, 2), 1, 4, 9))
    rx, ry = nc.simulate_random_inputs(N, np.random.default_rng(102))
    out = decode_output(nc, _run(nc, [rx, ry]))
    assert chi_square_pvalue(out, nc.noise_pmf()) > ALPHA_SEEDED


def test_garbled_discrete_laplace():
    nc = discrete_laplace_gadget(discrete_laplace_params(1, 2, 3, 8))
    rx, ry = nc.simulate_random_inputs(N, np.random.default_rng(103))
    out = decode_output(nc, _run(nc, [rx, ry]))
    assert chi_square_pvalue(out, nc.noise_pmf()) > ALPHA_SEEDED
    assert nc.guarantee.method == "exact"


def test_garbled_randomized_response():
    nc = randomized_response_gadget(choose_randomized_response(1, acc=10))
    rng = np.random.default_rng(104)
    b = rng.integers(0, 2, size=(N, 1)).astype(bool)
    rx, ry = nc.simulate_random_inputs(N, rng)
    out = _run(nc, [b, rx, ry])
    flips = (out[:, 0] != b[:, 0]).astype(np.int64)
    assert chi_square_pvalue(flips, nc.noise_pmf()) > ALPHA_SEEDED


def test_garbled_kernel_plus_noise():
    nc = noisy_kernel("gini", 8, fixed_point_bits=2, noise=discrete_laplace_params(1, 3, 3, 8))
    assert nc.unit == 64 and nc.value_range == (0, 3)
    rng = np.random.default_rng(105)
    x = rng.integers(0, 256, size=N)
    y = rng.integers(0, 256, size=N)
    rx, ry = nc.simulate_random_inputs(N, rng)
    out = decode_output(nc, _run(nc, [ints_to_bits(x.tolist(), 8), ints_to_bits(y.tolist(), 8), rx, ry]))
    h = np.array(kernel_reference("gini", x, y), dtype=np.int64) >> 6
    assert chi_square_pvalue(out - h, nc.noise_pmf()) > ALPHA_SEEDED


def test_garbled_binary_kernel_rr():
    nc = noisy_binary_kernel("greater", 8, rr=choose_randomized_response(Fraction(1, 2), acc=9))
    rng = np.random.default_rng(106)
    x = rng.integers(0, 256, size=N)
    y = rng.integers(0, 256, size=N)
    rx, ry = nc.simulate_random_inputs(N, rng)
    out = _run(nc, [ints_to_bits(x.tolist(), 8), ints_to_bits(y.tolist(), 8), rx, ry])[:, 0]
    flips = (out != (x > y)).astype(np.int64)
    assert chi_square_pvalue(flips, nc.noise_pmf()) > ALPHA_SEEDED


# ---------------------------------------------------------------------- the designed gadgets and k-RR
def test_garbled_designed_discrete_laplace():
    nc = discrete_laplace_gadget(choose_discrete_laplace(2, 1, target_delta=1e-3, variance_tolerance=Fraction(1, 256)))
    assert len(set(nc.params.accs)) > 1  # per-digit precision
    rx, ry = nc.simulate_random_inputs(N, np.random.default_rng(107))
    out = decode_output(nc, _run(nc, [rx, ry]))
    assert chi_square_pvalue(out, nc.noise_pmf()) > ALPHA_SEEDED


def test_garbled_signed_geometric():
    nc = discrete_laplace_gadget(
        choose_discrete_laplace(
            Fraction(1, 2), 12, construction="signed", target_delta=1e-3, variance_tolerance=Fraction(1, 256)
        )
    )
    assert nc.mechanism == "signed_geometric" and nc.guarantee.method == "exact"
    rx, ry = nc.simulate_random_inputs(N, np.random.default_rng(108))
    out = decode_output(nc, _run(nc, [rx, ry]))
    assert chi_square_pvalue(out, nc.noise_pmf()) > ALPHA_SEEDED


@pytest.mark.parametrize("k", [2, 3])
def test_garbled_krr(k):
    nc = krr_gadget(choose_krr(1, k))
    rng = np.random.default_rng(109 + k)
    codes = rng.integers(0, k, size=N)
    xb = ints_to_bits(codes.tolist(), 1 if k == 2 else 2)
    rx, ry = nc.simulate_random_inputs(N, rng)
    out = bits_to_ints(_run(nc, [xb, rx, ry])).astype(np.int64)
    assert chi_square_pvalue((out - codes) % k, nc.noise_pmf()) > ALPHA_SEEDED


# ---------------------------------------------------------------------- kendall + k-RR: unbiased, and the right noise power
EPS_KRR = 1.0


def _kendall_inputs(rng, n):
    """Pairs whose Kendall kernel is +1 (50%), 0 (30%) or -1 (20%): packed inputs and the kernel values."""
    f = rng.choice([1, 0, -1], size=n, p=[0.5, 0.3, 0.2])
    x1 = rng.integers(0, 100, size=n)
    y1 = rng.integers(0, 100, size=n)
    x2 = x1 + rng.integers(1, 100, size=n)  # x2 > x1
    y2 = np.where(
        f == 1, y1 + 1 + rng.integers(0, 100, size=n), np.where(f == -1, y1 - 1 - rng.integers(0, y1 + 1), y1)
    )
    y2 = np.clip(y2, 0, 255)
    truth = np.sign(x1 - x2) * np.sign(y1 - y2)
    xs = [pack_pair(int(a), int(b), 8) for a, b in zip(x1, y1)]
    ys = [pack_pair(int(a), int(b), 8) for a, b in zip(x2, y2)]
    return ints_to_bits(xs, 16), ints_to_bits(ys, 16), truth.astype(np.int64)


def _krr_closed_form(eps: float):
    """Ideal 3-ary RR on (-1, 0, 1), written out independently of the module: phi, the debiasing slope
    1/lambda (mu = 0 because the values sum to 0), and per value the variance and 4th central moment
    of the debiased report."""
    phi = 2 / (math.exp(eps) + 2)
    lam = 1 - 1.5 * phi
    moments = {}
    for f in (-1, 0, 1):
        dist = {y: (1 - phi if y == f else phi / 2) for y in (-1, 0, 1)}
        m2 = sum((y / lam - f) ** 2 * q for y, q in dist.items())
        m4 = sum((y / lam - f) ** 4 * q for y, q in dist.items())
        moments[f] = (m2, m4)
    return phi, 1 / lam, moments


def test_garbled_kendall_krr_is_unbiased_and_has_the_right_noise_power():
    """Garbled kendall + k-RR at eps = 1 on 10^5 SIMD instances, read with an independently written debiasing.

    Unbiased: z-test of mean(f^ - f), two-sided, alpha = 1e-3.  Noise power: T = S^2 / V0 with V0 the closed
    form's mean variance; under H0 T ~ N(1, sd^2), sd^2 = (E(m4) - V0^2)/(N V0^2) from the exact 4th moments,
    and |T - 1| > z_(1 - alpha/2) sd + 2^-9 (the gadget's rounding may move the variance by up to 2^-12)
    rejects, two-sided, alpha = 1e-3.  Power (normal approximation, computed here): >= 0.99 against a
    variance 2x too large or too small, so a 2x error of the noise scale (4x in variance) either way, no
    noise, or the wrong epsilon are caught.
    """
    nc = noisy_kernel("kendall", 8, epsilon=EPS_KRR)
    assert nc.mechanism == "krr" and nc.circuit.n_and <= 150
    rng = np.random.default_rng(110)
    xb, yb, f = _kendall_inputs(rng, N)
    rx, ry = nc.simulate_random_inputs(N, rng)
    codes = bits_to_ints(_run(nc, [xb, yb, rx, ry])).astype(np.int64)
    assert set(np.unique(codes).tolist()) <= {0, 1, 2}
    assert chi_square_pvalue((codes - f) % 3, nc.noise_pmf()) > ALPHA_SEEDED  # the shift d on Z_3 (code = f mod 3)
    y = np.array([0, 1, -1])[codes]  # code 2 is the value -1
    _, slope, moments = _krr_closed_form(EPS_KRR)
    err = slope * y - f
    v = np.array([moments[int(t)][0] for t in f])
    m4 = np.array([moments[int(t)][1] for t in f])
    z = err.mean() / math.sqrt(v.mean() / N)
    assert abs(z) < stats.norm.ppf(1 - 0.5e-3)
    v0 = v.mean()
    sd = math.sqrt((m4.mean() - (v**2).mean()) / N) / v0  # the err_i^2 are independent with variances m4_i - v_i^2
    crit = stats.norm.ppf(1 - 0.5e-3) * sd + 2.0**-9
    t = float(np.mean(err**2)) / v0  # the mean is known to be 0: no degree of freedom lost
    assert abs(t - 1) < crit
    for ratio in (2.0, 0.5):
        power = stats.norm.sf((1 + crit - ratio) / (ratio * sd)) + stats.norm.cdf((1 - crit - ratio) / (ratio * sd))
        assert power >= 0.99
    # and the module's own reading agrees with the independent one
    assert np.allclose(nc.estimates(codes), slope * y, rtol=1e-3)
