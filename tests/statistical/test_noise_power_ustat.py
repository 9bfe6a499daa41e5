"""Noise power of the 2PC U-statistic protocol: run_ustat adds exactly the stated noise, in every path.

Every statistic (gini, kendall, auc), both modes (``simulate``: one process,
in-memory channel; ``network``: worker processes over loopback TCP) and both
designs (``subsample``: P permutations, eps / P per pair; ``all``: every pair,
the per-pair epsilon of advanced composition over n - 1 releases) run the real
protocol on data whose kernel value h is the same for every pair (constant
data for gini, h = 0; a strictly increasing diagonal for kendall, h = 1;
positives above negatives for auc, h = 2 in the circuit's 2[x > y] + [x = y]
units).  The aggregator's per-pair values (:attr:`UStatResult.outputs`, what
the protocol reveals to it) are then i.i.d. reports of h, compared with a
closed form computed here from public parameters only: the per-pair budget

    eps_pair = eps / P (subsample), or the largest eps0 with
    min(k eps0, sqrt(2 k ln(1/delta')) eps0 + k eps0 (e^eps0 - 1)) <= eps, k = n - 1
    (all; Dwork-Rothblum-Vadhan, solved here with scipy's brentq),

and the public kernel range R in circuit units (gini: the public grid span
upper - lower; kendall, auc: 2).  Nothing the code reports about its own noise
(``noise_variance_per_pair``, ``epsilon_per_pair``, the gadget's parameters,
``theorem5_mse``) is used.  The in-circuit mechanisms (:data:`NOISE_LAWS`):

* ``discrete_laplace`` (on request): out = h + Z, P[Z = z] ~ a^|z|,
  a = exp(-eps_pair / R);
* ``signed_geometric`` (the default for gini): out = h + Z, Z = X or
  -(X + 1) with probability 1/2 each, P[X = x] = (1 - a) a^x, same a: the
  discrete Laplace centred at -1/2 (:func:`noise_power.signed_geometric`);
* ``krr`` (the default for kendall and auc, whose kernels take 3 values):
  the output is the index in Z_3 of the reported value (value = index mod 3
  read in {-1, 0, 1} for kendall, {0, 1, 2} for auc), P[report = h] =
  e^eps_pair / (e^eps_pair + 2), each other value 1 / (e^eps_pair + 2)
  (:func:`noise_power.kary_rr`).

Debiasing: the estimate must be the mean of the per-pair unbiased readings,
in natural units (auc: circuit units / 2).  Additive noise: (mean(out) - E Z),
E Z = 0 (discrete Laplace) or -1/2 (signed geometric), exactly (1e-9).  k-RR
(ustats Sec. 3, Eq. 9): f^ = (y - mu) / lam with lam = 1 - 3 phi / 2,
mu = phi sum(values) / 2, phi the flip probability.  The gadget's phi is a
dyadic certified >= phi0 = 2 / (e^eps_pair + 2) (eps-DP) whose worst-case
estimator variance is within the public tolerance 2^-12 of the ideal's; that
variance grows at least linearly in phi (Var(y | f = middle value) = phi,
divided by lam^2, which falls), so phi <= phi0 (1 + 2^-12), and the
estimate must lie between the readings with phi0 and phi0 (1 + 2^-11).

Test: Pearson chi-square goodness of fit of the whole per-pair report
distribution (:class:`noise_power.GofTest`), alpha = 1e-5 per test; before the
protocol runs, each test asserts power >= 0.99 against the same mechanism
with the noise scale x2 and x1/2 (eps_pair / 2 and 2 eps_pair).  Computed
powers (noncentral chi-square, scale x2 / scale x1/2):

======================================  =====  =====  ========  ==========
test (mechanism)                        eps    pairs  scale x2  scale x1/2
======================================  =====  =====  ========  ==========
discrete_laplace gini-subsample         1      400    1.0       1.0
discrete_laplace kendall/auc-subsample  1      300    1.0       0.99995
discrete_laplace gini/kendall-all       1      496    1.0       1.0
default gini-subsample (signed)         1      400    1.0       1.0
default kendall/auc-subsample (krr)     1      5000   0.99996   1.0
default gini-all (signed)               1      496    1.0       1.0
default kendall-all (krr)               48     496    0.99998   1.0
======================================  =====  =====  ========  ==========

("1.0": > 0.999995.)  gini takes 400 pairs, not 300: at 300 its power against
scale x1/2 is 0.9993, and the mutation check needs every expected test to fail.
k-RR needs more pairs than the discrete Laplace for the same power: its
report has three values, and eps / 2 moves the keep probability at eps_pair =
0.5 from 0.452 to 0.391 only.  The all-pairs kendall case spends eps = 48 over
k = 31 releases per user (basic composition binds: eps_pair = 48/31 = 1.55, as
noisy per release as the subsample design with P = 2 at eps = 3.1): at eps = 1
the per-pair budget 1/31 leaves k-RR nearly uniform, and no feasible number of
pairs tells eps0 from eps0 / 2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from pairwise.protocols.ustat.driver import run_ustat
from tests.support.noise_power import ALPHA, GofTest, discrete_laplace, kary_rr, scale_alternatives, signed_geometric

DELTA_SLACK = 1e-8


def _data(statistic: str, n: int, gini_upper: float = 10.0):
    """(x, y, labels, h, R, bounds): data with the same kernel value h (circuit units) on every pair.

    R is the public kernel range in circuit units and ``bounds`` the public
    domain arguments of run_ustat.
    """
    if statistic == "gini":
        return (
            np.full(n, 7.0),
            None,
            None,
            0,
            int(gini_upper),
            {"lower": 0.0, "upper": float(gini_upper), "decimals": 0},
        )
    if statistic == "kendall":
        v = np.arange(n, dtype=float)  # every pair concordant
        return v, v.copy(), None, 1, 2, {"lower": [0.0, 0.0], "upper": [float(n), float(n)], "decimals": [0, 0]}
    labels = np.repeat([1, 0], n // 2)
    scores = np.where(labels == 1, 50.0, 10.0) + np.arange(n) % 3  # every positive above every negative
    return scores, None, labels, 2, 2, {"lower": 0.0, "upper": 60.0, "decimals": 0}


def reference_pair_epsilon(epsilon: float, design: str, P: int, n: int, delta_slack: float) -> float:
    """Per-release budget: eps / P, or the DRV advanced-composition inverse over k = n - 1 releases."""
    if design == "subsample":
        return epsilon / P
    k = n - 1

    def total(e0: float) -> float:
        adv = math.sqrt(2 * k * math.log(1 / delta_slack)) * e0 + k * e0 * math.expm1(e0)
        return min(k * e0, adv) - epsilon

    return brentq(total, 1e-12, epsilon, xtol=1e-15)


#: kernel values in circuit units of the statistics with few values (k-RR); the circuit reports value mod 3
KRR_VALUES = {"kendall": (-1, 0, 1), "auc": (0, 1, 2)}
#: natural units per circuit unit of the estimate
CONVERSION = {"gini": 1.0, "kendall": 1.0, "auc": 0.5}


def _dl_law(statistic: str, eps_pair: float, R: int, h: int, factor: float = 1.0):
    return discrete_laplace(alpha=math.exp(-eps_pair / (R * factor))).shift(h)


def _signed_law(statistic: str, eps_pair: float, R: int, h: int, factor: float = 1.0):
    return signed_geometric(alpha=math.exp(-eps_pair / (R * factor))).shift(h)


def _krr_law(statistic: str, eps_pair: float, R: int, h: int, factor: float = 1.0):
    return kary_rr(KRR_VALUES[statistic], h, eps_pair / factor)


#: closed-form law of the per-pair reported value by mechanism: (statistic, eps_pair, R, h, scale factor) -> Law
NOISE_LAWS = {"discrete_laplace": _dl_law, "signed_geometric": _signed_law, "krr": _krr_law}


def _reported(mech: str, statistic: str, out: np.ndarray) -> np.ndarray:
    """The reported values (circuit units) from the circuit outputs: the value itself, or k-RR's index mod 3."""
    if mech != "krr":
        return out
    assert out.size == 0 or (out.min() >= 0 and out.max() <= 2), "k-RR outputs must be indices in Z_3"
    lut = np.zeros(3, dtype=np.int64)
    for v in KRR_VALUES[statistic]:
        lut[v % 3] = v
    return lut[out]


def _estimate_bounds(mech: str, statistic: str, eps_pair: float, reported: np.ndarray) -> tuple[float, float]:
    """The debiased mean of the reports in natural units (module docstring): exact, or k-RR's phi bracket."""
    ybar = float(np.mean(reported))
    if mech in ("discrete_laplace", "signed_geometric"):
        v = (ybar - (0.0 if mech == "discrete_laplace" else -0.5)) * CONVERSION[statistic]
        return v, v
    vals = KRR_VALUES[statistic]
    k = len(vals)
    phi0 = (k - 1) / (math.exp(eps_pair) + k - 1)
    ests = []
    for phi in (phi0 * (1 - 1e-9), phi0 * (1 + 2.0**-11)):
        lam = 1 - k * phi / (k - 1)
        mu = phi * sum(vals) / (k - 1)
        ests.append((ybar - mu) / lam * CONVERSION[statistic])
    return min(ests), max(ests)


def _pairs(design: str, n: int, P: int | None) -> int:
    if design == "all":
        return n * (n - 1) // 2
    return P * (n // 2)


def _run_and_check(mode, statistic, design, n, P, eps, mech, noise, gini_upper):
    """Power first, then the protocol, then the report law and the debiased estimate."""
    x, y, labels, h, R, bounds = _data(statistic, n, gini_upper)
    eps_pair = reference_pair_epsilon(eps, design, P or 1, n, DELTA_SLACK)
    m = _pairs(design, n, P)
    law = NOISE_LAWS[mech]
    test = GofTest([(law(statistic, eps_pair, R, h), m)], ALPHA)
    test.require_power({k: [v] for k, v in scale_alternatives(lambda f: law(statistic, eps_pair, R, h, f)).items()})

    res = run_ustat(
        statistic,
        x,
        y,
        labels,
        epsilon=eps,
        pairs_per_user=P or 1,
        mode=mode,
        design=design,
        delta_slack=DELTA_SLACK,
        workers=2,
        compute_theorem5=False,
        **noise,
        **bounds,
    )
    assert res.as_dict()["noise"] == mech, f"run_ustat used {res.as_dict()['noise']!r} noise, expected {mech!r}"
    out = np.asarray(res.outputs)
    assert out.shape == (m,)
    reported = _reported(mech, statistic, out)
    test.check([reported], f"run_ustat {statistic}/{design}/{mode} per-pair {mech} reports")
    lo, hi = _estimate_bounds(mech, statistic, eps_pair, reported)
    tol = 1e-9 * max(1.0, abs(lo), abs(hi))
    assert lo - tol <= res.estimate <= hi + tol, (
        f"estimate {res.estimate!r} is not the debiased mean of the {mech} reports (expected in [{lo!r}, {hi!r}])"
    )


CASES = [
    # statistic, design, n, P
    ("gini", "subsample", 400, 2),
    ("kendall", "subsample", 300, 2),
    ("auc", "subsample", 300, 2),
    ("gini", "all", 32, None),
    ("kendall", "all", 32, None),
]


@pytest.mark.parametrize("mode", ["simulate", "network"])
@pytest.mark.parametrize("statistic,design,n,P", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_ustat_pair_noise_is_the_theorem5_discrete_laplace(mode, statistic, design, n, P):
    """noise="discrete_laplace": per-pair noise DL(exp(-eps_pair / R)) at eps = 1; alpha 1e-5, power >= 0.99."""
    _run_and_check(mode, statistic, design, n, P, 1.0, "discrete_laplace", {"noise": "discrete_laplace"}, 10.0)


#: gini's public domain [0, 100] for the default: R / eps_pair >= 200, where the signed geometric's extra
#: variance 1/4 is within the 2^-12 variance tolerance, so ``auto`` takes it (with R = 10 it takes the DL)
DEFAULT_GINI_UPPER = 100.0
DEFAULT_CASES = [
    # statistic, design, n, P, eps, mechanism that noise="auto" must pick
    ("gini", "subsample", 400, 2, 1.0, "signed_geometric"),
    ("kendall", "subsample", 5000, 2, 1.0, "krr"),
    ("auc", "subsample", 5000, 2, 1.0, "krr"),
    ("gini", "all", 32, None, 1.0, "signed_geometric"),
    ("kendall", "all", 32, None, 48.0, "krr"),
]


@pytest.mark.parametrize("mode", ["simulate", "network"])
@pytest.mark.parametrize("statistic,design,n,P,eps,mech", DEFAULT_CASES, ids=[f"{c[0]}-{c[1]}" for c in DEFAULT_CASES])
def test_ustat_default_pair_noise_is_the_closed_form(mode, statistic, design, n, P, eps, mech):
    """Default noise (k-RR for kendall / auc, signed geometric for gini): closed-form report law and debiasing.

    alpha 1e-5, power >= 0.99 against eps_pair / 2 and 2 eps_pair (table in the module docstring).
    """
    _run_and_check(mode, statistic, design, n, P, eps, mech, {}, DEFAULT_GINI_UPPER)


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
