"""The 2PC subsampling U-statistic protocol (ustats paper, Sec. 5): design, estimator, Theorem 5, modes, CLI.

Tests that start processes are in tests/system/test_ustat_processes.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pairwise.dp.accounting import advanced_composition
from pairwise.protocols.datasets import load_dataset
from pairwise.protocols.ustat.driver import UStatError, per_pair_epsilon, run_ustat
from pairwise.protocols.ustat.stats import (
    all_pairs,
    incomplete_variance,
    kernel_matrix,
    sample_pairs,
    sample_two_sample_pairs,
    theorem5_mse,
    u_statistic,
    zetas,
)


# ----------------------------------------------------------------------------- design
@pytest.mark.parametrize("n,P", [(10, 1), (11, 3), (200, 5)])
def test_permutation_design_uses_each_user_at_most_P_times(n, P):
    rng = np.random.default_rng(1)
    pairs = sample_pairs(n, P, rng)
    assert pairs.shape == (P * (n // 2), 2)
    assert (pairs[:, 0] != pairs[:, 1]).all()
    counts = np.bincount(pairs.ravel(), minlength=n)
    assert counts.max() <= P
    if n % 2 == 0:
        assert (counts == P).all()
    # within one permutation the pairs are disjoint
    first = pairs[: n // 2].ravel()
    assert np.unique(first).size == first.size


def test_two_sample_design_matches_positives_with_negatives():
    pairs = sample_two_sample_pairs(7, 4, 3, np.random.default_rng(2))
    assert pairs.shape == (12, 2)
    assert pairs[:, 0].max() < 7 and pairs[:, 1].max() < 4
    assert np.bincount(pairs[:, 0], minlength=7).max() <= 3
    assert (np.bincount(pairs[:, 1], minlength=4) == 3).all()


def test_design_parameter_errors():
    with pytest.raises(ValueError):
        sample_pairs(1, 1, np.random.default_rng(0))
    with pytest.raises(ValueError):
        sample_pairs(10, 0, np.random.default_rng(0))
    assert all_pairs(5).shape == (10, 2)


# ----------------------------------------------------------------------------- statistics
def test_u_statistics_match_scipy():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, 60).astype(float)
    y = rng.integers(0, 4, 60).astype(float)
    # Kendall's tau-a = (concordant - discordant) / (n(n-1)/2); scipy's 'b' differs only with ties
    n = x.size
    conc = sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i in range(n) for j in range(i + 1, n))
    assert u_statistic("kendall", x, y) == pytest.approx(conc / (n * (n - 1) / 2))
    xs, ys = x[:25], y[:30]
    mw = stats.mannwhitneyu(xs, ys).statistic  # counts ties 1/2
    assert u_statistic("auc", xs, ys) == pytest.approx(mw / (xs.size * ys.size))
    gmd = np.abs(x[:, None] - x[None, :]).sum() / (n * (n - 1))
    assert u_statistic("gini", x) == pytest.approx(gmd)


def test_incomplete_variance_matches_monte_carlo():
    """Blom's variance for the P-permutation design (App. C.1), seeded, bootstrap population.

    Standard error of an MSE estimated from T = 6000 trials is about sqrt(2/T) = 1.8%
    relative; a tolerance of 8% is over 4 standard errors.
    """
    rng = np.random.default_rng(4)
    pop = rng.integers(0, 40, size=300).astype(float) / 40
    z = zetas("gini", pop)
    k = kernel_matrix("gini", pop)
    for n, P in [(40, 1), (40, 3)]:
        T = 6000
        est = np.empty(T)
        for t in range(T):
            idx = rng.integers(0, pop.size, size=n)
            pr = sample_pairs(n, P, rng)
            est[t] = k[idx[pr[:, 0]], idx[pr[:, 1]]].mean()
        emp = float(((est - z.mean) ** 2).mean())
        assert emp == pytest.approx(incomplete_variance(n, P, z.zeta1, z.zeta2), rel=0.08)


def test_theorem5_adds_the_averaged_noise_variance():
    assert theorem5_mse(100, 2, 0.1, 0.2, 8.0) == pytest.approx(incomplete_variance(100, 2, 0.1, 0.2) + 2 * 8.0 / 200)
    # with Var(Lap(P/eps)) = 2 P^2/eps^2 the noise term is 4P/(n eps^2)
    P, n, eps = 3, 500, 0.5
    assert theorem5_mse(n, P, 0, 0, 2 * P**2 / eps**2) == pytest.approx(4 * P / (n * eps**2))


def test_all_pairs_budget_composes_to_epsilon():
    eps0, k = per_pair_epsilon(2.0, "all", 1, 101, 1e-8)
    assert k == 100
    assert advanced_composition(float(eps0), 0.0, k, 1e-8).epsilon <= 2.0
    assert advanced_composition(float(eps0) * 1.01, 0.0, k, 1e-8).epsilon > 2.0
    eps1, k1 = per_pair_epsilon(2.0, "subsample", 4, 101, 1e-8)
    assert (float(eps1), k1) == (0.5, 4)


# ----------------------------------------------------------------------------- protocol runs


def test_reported_noise_variance_per_pair_is_the_closed_form():
    """What a realistic run (gini, eps = 2, P = 1, public grid span R = 400) reports about its noise.

    The per-pair noise is the default signed geometric (R / eps_pair = 200): Z = X or -(X + 1),
    Var Z = 2a/(1-a)^2 + 1/4 with a = exp(-eps_pair / R), computed here; the reported
    ``noise_variance_per_pair`` must equal it within the gadgets' public relative variance
    tolerance 2^-12 (both directions), with eps_pair = eps / P = 2.  Also a positive Theorem 5
    MSE and a negligible delta.  The noise itself (its full per-pair law, every statistic, mode
    and design, two-sided with power >= 0.99 against scale x2 and x1/2) is tested in
    tests/statistical/test_noise_power_ustat.py; a single run cannot measure it.
    """
    x = load_dataset("diabetes")["progression"][:200]
    eps, R = 2.0, 400
    res = run_ustat("gini", x, epsilon=eps, rng=np.random.default_rng(5), lower=0, upper=R, decimals=0)
    assert res.extra["noise"] == "signed_geometric" and res.extra["design"] == "subsample" and res.pairs == 100
    a = np.exp(-eps / R)
    closed = 2 * a / (1 - a) ** 2 + 0.25
    assert res.extra["noise_variance_per_pair"] == pytest.approx(closed, rel=2.0**-12)
    assert res.theorem5_mse > 0 and res.delta < 1e-9


def test_parameter_errors():
    x = np.arange(10.0)
    B = dict(lower=0, upper=10)
    with pytest.raises(UStatError, match="epsilon"):
        run_ustat("gini", x, epsilon=0, **B)
    with pytest.raises(UStatError, match="pairs per user"):
        run_ustat("gini", x, epsilon=1, pairs_per_user=0, **B)
    with pytest.raises(UStatError, match="mode"):
        run_ustat("gini", x, epsilon=1, mode="carrier-pigeon", **B)
    with pytest.raises(UStatError, match="kendall needs two columns"):
        run_ustat("kendall", x, epsilon=1, lower=[0, 0], upper=[10, 10])
    with pytest.raises(UStatError, match="0/1"):
        run_ustat("auc", x, labels=np.arange(10), epsilon=1, **B)
    with pytest.raises(UStatError, match="bits"):
        run_ustat("gini", np.array([0, 1000.0]), epsilon=1, bits=8, lower=0, upper=1000, decimals=0)


@pytest.mark.parametrize("name", ["gini", "kendall", "auc"])
def test_fast_exact_u_statistics_equal_the_kernel_matrix(name):
    from pairwise.protocols.ustat.stats import _u_statistic_fast

    rng = np.random.default_rng(9)
    x = rng.integers(0, 6, 700).astype(float)  # many ties on purpose
    y = rng.integers(0, 4, 700 if name != "auc" else 450).astype(float)
    assert _u_statistic_fast(name, x, None if name == "gini" else y) == pytest.approx(
        u_statistic(name, x, None if name == "gini" else y), abs=1e-12
    )
