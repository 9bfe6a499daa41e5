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

from fractions import Fraction

import numpy as np
import pytest

from pairwise.circuits.ir import bits_to_ints, ints_to_bits
from pairwise.circuits.kernels import kernel_reference
from pairwise.circuits.noise import (
    bernoulli_gadget,
    bernoulli_params,
    choose_randomized_response,
    decode_output,
    discrete_laplace_gadget,
    discrete_laplace_params,
    geometric_gadget,
    noisy_binary_kernel,
    noisy_kernel,
    randomized_response_gadget,
)
from test_noise import ALPHA_SEEDED, chi_square_pvalue

from pairwise.mpc.garble import garble_and_evaluate as garble

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
