"""Noise power of the 2PC U-statistic protocol: run_ustat adds exactly the Theorem 5 noise, in every path.

Every statistic (gini, kendall, auc), both modes (``simulate``: one process,
in-memory channel; ``network``: worker processes over loopback TCP) and both
designs (``subsample``: P permutations, eps / P per pair; ``all``: every pair,
the per-pair epsilon of advanced composition over n - 1 releases) run the real
protocol at a realistic epsilon = 1 on data whose kernel value h is the same
for every pair (constant data for gini, h = 0; a strictly increasing diagonal
for kendall, h = 1; positives above negatives for auc, h = 2 in the circuit's
2[x > y] + [x = y] units).  The aggregator's per-pair values
(:attr:`UStatResult.outputs`, what the protocol reveals to it) are then
h + Z_i with Z_i i.i.d., and are compared with the closed form computed here
from public parameters only:

    Z ~ discrete Laplace, P[Z = z] ~ a^|z|, a = exp(-eps_pair / R),

R the public kernel range in circuit units (gini: the public domain's grid
span where run_ustat takes ``lower``/``upper``, else max(1, data span);
kendall, auc: 2) and eps_pair = eps / P (subsample) or the largest eps0 with
min(k eps0, sqrt(2 k ln(1/delta')) eps0 + k eps0 (e^eps0 - 1)) <= eps, k = n - 1
(all; Dwork-Rothblum-Vadhan, solved here with scipy's brentq).  Nothing the
code reports about its own noise (``noise_variance_per_pair``,
``epsilon_per_pair``, ``theorem5_mse``) is used.

Test: Pearson chi-square goodness of fit of the whole per-pair noise
distribution (:class:`noise_power.GofTest`), alpha = 1e-5 per test; before the
protocol runs, each test asserts power >= 0.99 against the same mechanism with
the noise scale x2 and x1/2 (a = exp(-eps_pair / (2R)) and exp(-2 eps_pair / R)).
Computed powers (noncentral chi-square): >= 0.9999 for every case below (the
smallest, kendall and auc with P = 2 against scale x1/2, is 0.99995).  The estimate is checked to be the
average of those outputs in natural units, so the noise that was tested is the
noise that was published.

Mechanisms: the closed form is looked up by the result's ``noise`` key
(default ``discrete_laplace``) in :data:`NOISE_LAWS`; a new in-circuit
mechanism (e.g. k-ary randomized response for kendall / auc) adds its law
there, and its faults to ``tests/mutation/faults.py``.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from scipy.optimize import brentq

from noise_power import ALPHA, GofTest, discrete_laplace, scale_alternatives
from pairwise.protocols.ustat.driver import run_ustat

EPS = 1.0
DELTA_SLACK = 1e-8


#: run_ustat takes the public domain of the private columns (lower=, upper=, decimals=) where it supports it;
#: the kernel range R is then the public grid span (gini) and 2 (kendall, auc), else the data span (gini)
PUBLIC_BOUNDS = "lower" in inspect.signature(run_ustat).parameters


def _data(statistic: str, n: int):
    """(x, y, labels, h, R, bounds): data with the same kernel value h (circuit units) on every pair.

    R is the public kernel range in circuit units and ``bounds`` the public
    domain arguments (empty where run_ustat has none).
    """
    if statistic == "gini":
        if PUBLIC_BOUNDS:
            return np.full(n, 7.0), None, None, 0, 10, {"lower": 0.0, "upper": 10.0, "decimals": 0}
        return np.full(n, 7.0), None, None, 0, 1, {}  # span 0: public range max(1, 0) = 1
    if statistic == "kendall":
        v = np.arange(n, dtype=float)  # every pair concordant
        b = {"lower": [0.0, 0.0], "upper": [float(n), float(n)], "decimals": [0, 0]} if PUBLIC_BOUNDS else {}
        return v, v.copy(), None, 1, 2, b
    labels = np.repeat([1, 0], n // 2)
    scores = np.where(labels == 1, 50.0, 10.0) + np.arange(n) % 3  # every positive above every negative
    return scores, None, labels, 2, 2, ({"lower": 0.0, "upper": 60.0, "decimals": 0} if PUBLIC_BOUNDS else {})


def reference_pair_epsilon(epsilon: float, design: str, P: int, n: int, delta_slack: float) -> float:
    """Per-release budget: eps / P, or the DRV advanced-composition inverse over k = n - 1 releases."""
    if design == "subsample":
        return epsilon / P
    k = n - 1

    def total(e0: float) -> float:
        adv = math.sqrt(2 * k * math.log(1 / delta_slack)) * e0 + k * e0 * math.expm1(e0)
        return min(k * e0, adv) - epsilon

    return brentq(total, 1e-12, epsilon, xtol=1e-15)


def _dl_law(eps_pair: float, R: int, h: int, factor: float = 1.0):
    return discrete_laplace(alpha=math.exp(-eps_pair / (R * factor))).shift(h)


#: closed-form per-pair output law by mechanism name: (eps_pair, R, h, scale factor) -> Law
NOISE_LAWS = {"discrete_laplace": _dl_law}
#: where run_ustat lets the caller choose the in-circuit mechanism, these tests ask for discrete Laplace on
#: every statistic; other mechanisms add their closed form above and their own cases
FORCE = {"noise": "discrete_laplace"} if "noise" in inspect.signature(run_ustat).parameters else {}

#: natural units per circuit unit of the estimate
CONVERSION = {"gini": 1.0, "kendall": 1.0, "auc": 0.5}

CASES = [
    # statistic, design, n, P
    ("gini", "subsample", 300, 2),
    ("kendall", "subsample", 300, 2),
    ("auc", "subsample", 300, 2),
    ("gini", "all", 32, None),
    ("kendall", "all", 32, None),
]


def _pairs(statistic: str, design: str, n: int, P: int | None) -> int:
    if design == "all":
        return n * (n - 1) // 2
    return P * (n // 2)


@pytest.mark.parametrize("mode", ["simulate", "network"])
@pytest.mark.parametrize("statistic,design,n,P", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_ustat_pair_noise_is_the_theorem5_discrete_laplace(mode, statistic, design, n, P):
    """Per-pair noise of run_ustat = DL(exp(-eps_pair / R)) (module docstring): alpha 1e-5, power >= 0.99."""
    x, y, labels, h, R, bounds = _data(statistic, n)
    eps_pair = reference_pair_epsilon(EPS, design, P or 1, n, DELTA_SLACK)
    m = _pairs(statistic, design, n, P)
    law = NOISE_LAWS["discrete_laplace"]
    test = GofTest([(law(eps_pair, R, h), m)], ALPHA)
    test.require_power({k: [v] for k, v in scale_alternatives(lambda f: law(eps_pair, R, h, f)).items()})

    res = run_ustat(statistic, x, y, labels, epsilon=EPS, pairs_per_user=P or 1, mode=mode, design=design,
                    delta_slack=DELTA_SLACK, workers=2, compute_theorem5=False, **FORCE, **bounds)
    mech = res.as_dict().get("noise", "discrete_laplace")
    if mech not in NOISE_LAWS:
        pytest.fail(f"run_ustat used noise mechanism {mech!r}: add its closed form to NOISE_LAWS")
    if mech != "discrete_laplace":
        test = GofTest([(NOISE_LAWS[mech](eps_pair, R, h), m)], ALPHA)
    out = np.asarray(res.outputs)
    assert out.shape == (m,)
    test.check([out], f"run_ustat {statistic}/{design}/{mode} per-pair noise")
    assert res.estimate == pytest.approx(out.mean() * CONVERSION[statistic], rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("n", [32, 2000])
def test_reference_pair_epsilon_is_the_composition_inverse(n):
    """The reference eps0 spends exactly eps (1e-12) under min(basic, DRV advanced) composition.

    n = 32: basic composition binds (eps0 = 1/31); n = 2000: advanced composition binds.
    """
    e0 = reference_pair_epsilon(1.0, "all", 1, n, DELTA_SLACK)
    k = n - 1
    adv = math.sqrt(2 * k * math.log(1 / DELTA_SLACK)) * e0 + k * e0 * math.expm1(e0)
    assert min(k * e0, adv) == pytest.approx(1.0, abs=1e-12)
    assert (k * e0 < adv) == (n == 32)
