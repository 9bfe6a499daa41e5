"""The ustat protocol's noise: mechanism choice and reporting, unbiased k-RR estimates, and the error predictions.

References are written out here: the ideal k-RR closed form (phi = (k-1)/(e^eps+k-1)), the kernel values of the
sampled pairs computed with numpy, and Monte Carlo over the pair sampling for the error formulas.  Statistical
tests state their alpha; seeded generators drive the public pair sampling only (the noise comes from os.urandom,
so the protocol-level tests use alpha = 1e-4).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from pairwise.protocols.datasets import column_domain, load_dataset
from pairwise.protocols.ustat.driver import UStatError, prepare_data, run_ustat
from pairwise.protocols.ustat.stats import (
    fixed_sample_mse,
    kernel_matrix,
    kernel_sums,
    sample_pairs,
    sample_two_sample_pairs,
    two_sample_mse,
    two_sample_zetas,
)

ALPHA = 1e-4


def _bounds(dataset: str, *columns: str) -> dict:
    """The public domains the shipped dataset declares (lower / upper / decimals per column)."""
    doms = [column_domain(dataset, c) for c in columns]
    return {
        "lower": [d.lower for d in doms],
        "upper": [d.upper for d in doms],
        "decimals": [d.scale_decimals for d in doms],
    }


KENDALL_BOUNDS = lambda: _bounds("fair", "rate_marriage", "religious")  # noqa: E731
AUC_BOUNDS = lambda: _bounds("breast_cancer", "mean_radius")  # noqa: E731
GINI_BOUNDS = lambda: _bounds("diabetes", "progression")  # noqa: E731


def _krr_variance(eps: float, values: tuple[int, ...], f: np.ndarray) -> np.ndarray:
    """Var of the debiased k-RR report given the true value f (ideal flip probability), by enumeration."""
    k = len(values)
    phi = (k - 1) / (math.exp(eps) + k - 1)
    lam = 1 - k * phi / (k - 1)
    mu = phi * sum(values) / (k - 1)
    out = {}
    for v in values:
        dist = {y: (1 - phi if y == v else phi / (k - 1)) for y in values}
        est = {y: (y - mu) / lam for y in values}
        mean = sum(est[y] * q for y, q in dist.items())
        out[v] = sum((est[y] - mean) ** 2 * q for y, q in dist.items())
    return np.array([out[int(t)] for t in f])


# ----------------------------------------------------------------------------- reporting
@pytest.mark.parametrize("statistic,bits", [("kendall", 8), ("auc", 16)])
def test_three_valued_kernels_use_krr_under_150_and_gates(statistic, bits):
    fair, bc = load_dataset("fair"), load_dataset("breast_cancer")
    if statistic == "kendall":
        x, y, lab, b = fair["rate_marriage"][:300], fair["religious"][:300], None, KENDALL_BOUNDS()
    else:
        x, y, lab, b = bc["mean_radius"][:300], None, bc["malignant"][:300], AUC_BOUNDS()
    res = run_ustat(statistic, x, y, lab, epsilon=1.0, bits=bits, rng=np.random.default_rng(1), **b)
    d = res.as_dict()
    assert d["noise"] == "krr" and d["and_gates_per_pair"] <= 150 and d["noise_and_gates_per_pair"] <= 20
    assert d["delta"] == 0.0 and d["noise_delta_method"] == "pure" and d["noise_epsilon_per_pair"] <= 1.0
    assert d["bytes_per_pair"] == pytest.approx(d["bytes"] / d["pairs"])
    phi = 2 / (math.e + 2)
    worst = (1 - phi / 2) / (1 - 1.5 * phi) ** 2 - 1  # |f| = 1 on (-1, 0, 1), in kendall units
    assert d["noise_variance_per_pair"] == pytest.approx(worst * (0.25 if statistic == "auc" else 1.0), rel=2e-3)
    for key in ("sample_mse", "theorem5_mse"):
        assert d[key] is not None and d[key] > 0


def test_mechanism_can_be_chosen_and_is_validated():
    x = load_dataset("diabetes")["progression"][:60]
    b = GINI_BOUNDS()
    res = run_ustat("gini", x, epsilon=1.0, noise="discrete_laplace", rng=np.random.default_rng(2), **b)
    assert res.extra["noise"] == "discrete_laplace" and res.extra["noise_delta_method"] in ("exact", "certified")
    res = run_ustat("gini", x, epsilon=1.0, rng=np.random.default_rng(2), **b)
    assert res.extra["noise"] == "signed_geometric" and 0 < res.delta <= 2.0**-40
    with pytest.raises(UStatError, match="noise must be one of"):
        run_ustat("gini", x, epsilon=1.0, noise="gaussian", **b)
    with pytest.raises(UStatError, match="few values"):
        run_ustat("gini", x, epsilon=1.0, noise="krr", **b)
    with pytest.raises(UStatError, match="pair_delta"):
        run_ustat("gini", x, epsilon=1.0, pair_delta=0.0, **b)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = run_ustat("gini", x, epsilon=1.0, lam=40, rng=np.random.default_rng(2), **b)
    assert any(issubclass(i.category, DeprecationWarning) for i in w)
    assert res.extra["pair_delta"] == pytest.approx(2.0**-40 / res.pairs)


# ----------------------------------------------------------------------------- unbiased k-RR estimates
@pytest.mark.parametrize("statistic", ["kendall", "auc"])
def test_krr_protocol_estimate_is_unbiased(statistic):
    """estimate - (noiseless mean over the same sampled pairs) is an average of independent debiased k-RR
    errors: a two-sided z-test (alpha = 1e-4) with the variance from the ideal closed form."""
    fair, bc = load_dataset("fair"), load_dataset("breast_cancer")
    seed, eps = 7, 1.0
    if statistic == "kendall":
        x, y, lab, b = fair["rate_marriage"][:3000], fair["religious"][:3000], None, KENDALL_BOUNDS()
    else:
        x, y, lab, b = bc["mean_radius"], None, bc["malignant"], AUC_BOUNDS()
    res = run_ustat(statistic, x, y, lab, epsilon=eps, pairs_per_user=2, rng=np.random.default_rng(seed), **b)
    pd = prepare_data(statistic, x, y, lab, **b)
    rng = np.random.default_rng(seed)
    if statistic == "kendall":
        pairs = sample_pairs(pd.x.size, 2, rng)
        f = np.sign(pd.x[pairs[:, 0]] - pd.x[pairs[:, 1]]) * np.sign(pd.y[pairs[:, 0]] - pd.y[pairs[:, 1]])
        values, conv = (-1, 0, 1), 1.0
    else:
        pairs = sample_two_sample_pairs(pd.x.size, pd.y.size, 2, rng)
        f = 2 * (pd.x[pairs[:, 0]] > pd.y[pairs[:, 1]]) + (pd.x[pairs[:, 0]] == pd.y[pairs[:, 1]])
        values, conv = (0, 1, 2), 0.5
    var = _krr_variance(eps / 2, values, f)  # P = 2: eps / 2 per pair
    sd = conv * math.sqrt(var.sum()) / f.size
    z = (res.estimate - conv * f.mean()) / sd
    assert abs(z) < stats.norm.ppf(1 - ALPHA / 2)


# ----------------------------------------------------------------------------- error predictions
def test_fixed_sample_mse_matches_monte_carlo_one_sample():
    """Around the sample's own U-statistic, over the permutation design (n even and odd) and the noise:
    20000 trials give the MSE within about 2% (1 s.e.); tolerance 8%."""
    rng = np.random.default_rng(3)
    for n, P in [(41, 2), (60, 1)]:
        x = rng.integers(0, 6, n).astype(float)
        y = rng.integers(0, 4, n).astype(float)
        k = kernel_matrix("kendall", x, y)
        u = (k.sum() - np.trace(k)) / (n * (n - 1))
        coeffs = (0.5, 0.2, 0.3)  # per-pair noise variance 0.5 + 0.2 h + 0.3 h^2
        T = 20000
        est = np.empty(T)
        for t in range(T):
            pr = sample_pairs(n, P, rng)
            h = k[pr[:, 0], pr[:, 1]]
            est[t] = (h + rng.standard_normal(h.size) * np.sqrt(0.5 + 0.2 * h + 0.3 * h * h)).mean()
        emp = float(np.mean((est - u) ** 2))
        assert fixed_sample_mse(kernel_sums("kendall", x, y), "subsample", P, coeffs) == pytest.approx(emp, rel=0.08)


def test_two_sample_predictions_match_monte_carlo():
    """The AUC design: fixed-sample MSE (Hoeffding's permutation variance) and the population MSE (the
    two-sample analogue of Theorem 5), against Monte Carlo; tolerance 8% (about 4 s.e.)."""
    rng = np.random.default_rng(4)
    pos, neg = rng.integers(0, 10, 23).astype(float), rng.integers(0, 8, 14).astype(float)
    k = kernel_matrix("auc", pos, neg)
    T = 20000
    for P in (1, 3):
        est = np.empty(T)
        for t in range(T):
            pr = sample_two_sample_pairs(pos.size, neg.size, P, rng)
            est[t] = (k[pr[:, 0], pr[:, 1]] + rng.normal(0, 0.4, pr.shape[0])).mean()
        emp = float(np.mean((est - k.mean()) ** 2))
        assert fixed_sample_mse(kernel_sums("auc", pos, neg), "subsample", P, (0.16, 0, 0)) == pytest.approx(
            emp, rel=0.08
        )
    z = two_sample_zetas(kernel_sums("auc", pos, neg))
    for n1, n0, P in [(12, 20, 1), (25, 10, 3)]:
        est = np.empty(T)
        for t in range(T):
            ia, ib = rng.integers(0, pos.size, n1), rng.integers(0, neg.size, n0)
            pr = sample_two_sample_pairs(n1, n0, P, rng)
            est[t] = (k[ia[pr[:, 0]], ib[pr[:, 1]]] + rng.normal(0, 0.4, pr.shape[0])).mean()
        emp = float(np.mean((est - z.mean) ** 2))
        assert two_sample_mse(n1, n0, P, z.zeta10, z.zeta01, z.zeta11, 0.16) == pytest.approx(emp, rel=0.08)
