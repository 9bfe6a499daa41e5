"""Coverage of the ECDF service's intervals by simulation: shipped, held-out and worst-case data, several epsilons.

Releases are drawn with the servers' exact node law
(:mod:`pairwise.protocols.ecdf.simulate`, seeded) and read with the
querier's own code (:class:`pairwise.protocols.ecdf.estimates.NoiseMap`,
:func:`roc_auc_interval`).  Claim: every interval misses with probability
at most alpha = 0.05.  Test: the miss count over R releases must not exceed
the binomial(R, 0.05) quantile at 1 - 1e-4 (Bonferroni over the thresholds
for the pointwise check), so an honest interval fails this file with
probability below 1e-4 per check, and an interval whose miss rate is 0.05 +
3 / sqrt(R)-ish fails it.  Data: the demo's mean radius by malignancy
(shipped), the fair survey's education by affairs > 0 (held out), and a
worst case with every record on one bin (the ECDF jumps from 0 to n).
Grids of 2^5 and 2^6 thresholds keep the file at a few seconds.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from scipy import stats

from pairwise.protocols.datasets import column_domain, load_dataset
from pairwise.protocols.ecdf.estimates import roc_auc_interval
from pairwise.protocols.ecdf.shares import quantize
from pairwise.protocols.ecdf.simulate import service_noise_map, simulate_cumulative

ALPHA = 0.05
TEST_ALPHA = 1e-4


def _scores(which: str, g: int):
    if which == "shipped":
        name, col, lab = "breast_cancer", "mean_radius", "malignant"
        d = load_dataset(name)
        y = np.asarray(d[lab]).astype(int)
    elif which == "held-out":
        name, col = "fair", "educ"
        d = load_dataset(name)
        y = (np.asarray(d["affairs"]) > 0).astype(int)
    else:
        y = np.arange(300) % 3 == 0
        return np.full(300, (1 << g) // 2, dtype=np.int64), y.astype(int)
    dom = column_domain(name, col)
    x = quantize(np.clip(d[col], dom.lower, dom.upper), dom.lower, dom.upper, g)
    return np.asarray(x, dtype=np.int64), y


def _max_misses(reps: int, tests: int = 1) -> int:
    return int(stats.binom.ppf(1 - TEST_ALPHA / tests, reps, ALPHA))


@pytest.mark.parametrize("mechanism", ["paper", "kary", "hierarchical"])
@pytest.mark.parametrize("which", ["shipped", "held-out", "worst"])
@pytest.mark.parametrize("eps", [0.5, 4.0])
def test_ecdf_pointwise_band_and_quantile_coverage(mechanism, which, eps):
    g, R = 6, 1500
    x, _ = _scores(which, g)
    N, n = 1 << g, x.size
    h = np.bincount(x, minlength=N)
    nm = service_noise_map(mechanism, g, eps)
    rng = np.random.default_rng(zlib.crc32(repr((mechanism, which, eps)).encode()))
    C = simulate_cumulative(h, nm, rng, R)
    exact = np.cumsum(h)
    r = nm.radii(np.arange(N), ALPHA)
    misses = (np.abs(C - exact) > r + 1e-6).sum(axis=0)  # a public root: error 0 up to rounding
    assert misses.max() <= _max_misses(R, N), (misses.max(), r[:3])
    b = nm.band_radii(np.arange(N), ALPHA)
    band_miss = np.any(np.abs(C - exact) > b + 1e-6, axis=1).sum()
    assert band_miss <= _max_misses(R)
    from pairwise.dp.ecdf_intervals import quantile_interval

    for q in (0.25, 0.5, 0.9):
        true = int(np.searchsorted(exact, q * n))  # first t with C(t) >= qn
        miss = sum(not (lo <= true <= hi) for lo, hi in (quantile_interval(C[i], r, q * n) for i in range(R)))
        assert miss <= _max_misses(R), (q, miss)


@pytest.mark.parametrize("mechanism,which,eps", [("paper", "shipped", 2.0), ("kary", "held-out", 8.0)])
def test_roc_auc_interval_coverage(mechanism, which, eps):
    g, R = 5, 200
    x, y = _scores(which, g)
    N, n = 1 << g, x.size
    hp, hn = np.bincount(x[y == 1], minlength=N), np.bincount(x[y == 0], minlength=N)
    cn = np.cumsum(hn)
    exact = float(np.dot(hp, np.concatenate([[0], cn[:-1]]) + hn / 2) / (hp.sum() * hn.sum()))
    nm = service_noise_map(mechanism, g, eps / 2, root_public=False)
    rng = np.random.default_rng(zlib.crc32(repr((mechanism, which, eps, "auc")).encode()))
    P, Q = simulate_cumulative(hp, nm, rng, R), simulate_cumulative(hn, nm, rng, R)
    miss, width = 0, []
    for i in range(R):
        iv = roc_auc_interval(P[i], Q[i], n, nm, nm, ALPHA)
        miss += not (iv.interval[0] <= exact <= iv.interval[1])
        width.append(iv.interval[1] - iv.interval[0])
    assert miss <= _max_misses(R)
    assert np.mean(width) < 1.0  # not vacuous at these budgets
