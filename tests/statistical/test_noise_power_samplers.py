"""Noise power of the in-circuit gadgets' exact samplers (no circuit): the right law, not 2x off.

:mod:`pairwise.dp.samplers` reproduces each gadget's distribution without a
circuit (``sample_*`` from os.urandom, ``simulate_*`` seeded; the figure-4
benchmark and ``pairwise noise sample`` use them).  Each path is compared with
the ideal law of its mechanism, computed here from epsilon and the
sensitivity only (the gadgets are within the 2^-12 variance tolerance of it;
the parameters' own pmf and variance are not used):

* discrete Laplace (difference of geometrics), eps = 1, S = 40:
  P[Z = z] ~ a^|z|, a = exp(-1/40);
* signed geometric (X or -(X + 1)), eps = 1, S = 40: same a, centred at -1/2;
* k-ary randomized response (k = 3), eps = 1: each true index i in 0..2
  reported as i with probability e/(e + 2), as each other index with 1/(e + 2).

Pearson chi-square goodness of fit, alpha = 1e-5; power >= 0.99 against the
noise scale x2 and x1/2 (eps / 2 and 2 eps) asserted before sampling
(computed: > 0.99999 for every test and both alternatives; DL and signed
2000 draws, k-RR 3 x 1000 draws).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pairwise.dp.dyadic import choose_discrete_laplace, choose_krr
from pairwise.dp.samplers import sample_dyadic_laplace, sample_krr, simulate_dyadic_laplace, simulate_krr
from tests.support.noise_power import GofTest, discrete_laplace, kary_rr, signed_geometric

EPS, S, N_DL, N_KRR = 1.0, 40, 2000, 1000


def _additive_law(construction: str, f: float = 1.0):
    a = math.exp(-EPS / (S * f))
    return discrete_laplace(alpha=a) if construction == "difference" else signed_geometric(alpha=a)


@pytest.mark.parametrize("path", ["sample", "simulate"])
@pytest.mark.parametrize("construction", ["difference", "signed"])
def test_discrete_laplace_sampler_law(construction, path):
    """sample_/simulate_dyadic_laplace(choose_discrete_laplace(1, 40, construction)); alpha 1e-5, power >= 0.99."""
    test = GofTest([(_additive_law(construction), N_DL)])
    test.require_power({k: [_additive_law(construction, f)] for k, f in (("scale x2", 2.0), ("scale x1/2", 0.5))})
    params = choose_discrete_laplace(EPS, S, construction=construction)
    if path == "sample":
        z = sample_dyadic_laplace(params, N_DL)
    else:
        z = simulate_dyadic_laplace(params, N_DL, np.random.default_rng())
    test.check([z], f"{path}_discrete_laplace ({construction})")


def _krr_laws(eps: float):
    return [kary_rr(range(3), i, eps) for i in range(3)]


@pytest.mark.parametrize("path", ["sample", "simulate"])
def test_krr_sampler_law(path):
    """sample_/simulate_krr(choose_krr(1, 3)) on each true index; alpha 1e-5, power >= 0.99."""
    test = GofTest([(law, N_KRR) for law in _krr_laws(EPS)])
    test.require_power({k: _krr_laws(EPS / f) for k, f in (("scale x2", 2.0), ("scale x1/2", 0.5))})
    params = choose_krr(EPS, 3)
    codes = np.repeat(np.arange(3), N_KRR)
    out = sample_krr(params, codes) if path == "sample" else simulate_krr(params, codes, np.random.default_rng())
    out = np.asarray(out)
    test.check([out[codes == i] for i in range(3)], f"{path}_krr")
