"""Chi-square goodness of fit of integer samples against an exact pmf (scipy.stats), for the noise tests."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from scipy import stats

ALPHA_SEEDED = 1e-3


def chi_square_pvalue(samples: np.ndarray, pmf: dict[int, Fraction], min_expected: float = 5.0) -> float:
    """Chi-square p-value of integer samples against an exact pmf, adjacent bins merged to expected >= 5.

    Samples outside the pmf's support fail immediately (p = 0).
    """
    samples = np.asarray(samples, dtype=np.int64)
    n = samples.shape[0]
    support = sorted(v for v, p in pmf.items() if p > 0)
    vals, counts = np.unique(samples, return_counts=True)
    observed = dict(zip(vals.tolist(), counts.tolist()))
    if set(observed) - set(support):
        return 0.0
    obs_bins, exp_bins = [], []
    o_acc, e_acc = 0, 0.0
    for v in support:
        o_acc += observed.get(v, 0)
        e_acc += float(pmf[v]) * n
        if e_acc >= min_expected:
            obs_bins.append(o_acc)
            exp_bins.append(e_acc)
            o_acc, e_acc = 0, 0.0
    if e_acc > 0 or o_acc:
        if exp_bins:
            obs_bins[-1] += o_acc
            exp_bins[-1] += e_acc
        else:
            obs_bins.append(o_acc)
            exp_bins.append(e_acc)
    if len(obs_bins) < 2:
        return 1.0
    exp_arr = np.array(exp_bins)
    exp_arr *= n / exp_arr.sum()
    return float(stats.chisquare(np.array(obs_bins), exp_arr).pvalue)
