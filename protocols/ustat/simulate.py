"""Seeded simulation of the 2PC U-statistic release: many draws of the estimate without garbling (experiments only).

What it does
    :func:`simulate_releases` draws the protocol's estimate ``reps`` times for
    fixed data and public parameters, with the exact law of its randomness:
    the aggregator's pair design (P uniform permutations, or the two-sample
    matchings; every pair for ``design="all"``) and each pair's noise from the
    gadget's exact distribution (:func:`pairwise.dp.samplers.simulate_krr`,
    :func:`pairwise.dp.samplers.simulate_dyadic_laplace`), read with the
    protocol's own estimator (:meth:`pairwise.circuits.noise.NoisyCircuit.estimates`).
    The garbled circuit outputs exactly this law (``tests/statistical/test_noise_garbled.py``,
    the noise-power tests), so the interval-coverage tests and
    ``benchmarks/interval_coverage.py`` use it instead of garbling every draw.

Security model
    Simulation only: seeded generators, both parties' data in one process.
"""

from __future__ import annotations

import numpy as np

from pairwise.dp.samplers import simulate_dyadic_laplace, simulate_krr

from .config import UStatConfig
from .data import PreparedData
from .driver import _noisy_circuit, natural_units, release_interval

__all__ = ["simulate_releases", "kernel_values", "simulate_pair_design"]


def kernel_values(pd: PreparedData, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Kernel values in circuit units (gini: grid steps; auc: 2[x > y] + [x = y]; a declared kernel such as
    variance or collision: its circuit's value, read from its table on the public grid) of pairs (i, j)."""
    if pd.kernel is not None:
        if pd.table is None:
            raise ValueError(f"kernel {pd.statistic!r}: simulation needs its table on the grid (a smaller grid)")
        return pd.table[pd.x[i], pd.x[j]]
    if pd.statistic == "auc":
        return 2 * (pd.x[i] > pd.y[j]).astype(np.int64) + (pd.x[i] == pd.y[j])
    if pd.statistic == "kendall":
        return np.sign(pd.x[i] - pd.x[j]) * np.sign(pd.y[i] - pd.y[j])
    return np.abs(pd.x[i] - pd.x[j])


def simulate_pair_design(pd: PreparedData, design: str, P: int, reps: int, rng: np.random.Generator):
    """(reps, M) garbler and evaluator indices of ``reps`` independent draws of the pair design."""
    if design == "all":
        i, j = np.triu_indices(pd.x.size, 1)
        return np.broadcast_to(i, (reps, i.size)), np.broadcast_to(j, (reps, j.size))
    if pd.statistic == "auc":
        m = min(pd.x.size, pd.y.size)
        gi = rng.random((reps * P, pd.x.size)).argsort(1)[:, :m].reshape(reps, P * m)
        ej = rng.random((reps * P, pd.y.size)).argsort(1)[:, :m].reshape(reps, P * m)
        return gi, ej
    n = pd.x.size
    m = n // 2
    perm = rng.random((reps * P, n)).argsort(1)[:, : 2 * m].reshape(reps, P * m, 2)
    return perm[..., 0], perm[..., 1]


def simulate_releases(config: UStatConfig, pd: PreparedData, reps: int, rng: np.random.Generator):
    """``reps`` draws of run_ustat's estimate (natural units) and the interval width it publishes."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator (simulation only)")
    gi, ej = simulate_pair_design(pd, config.design, int(config.pairs_per_user), reps, rng)
    m = gi.shape[1]
    n = pd.x.size + (pd.y.size if pd.statistic == "auc" else 0)
    nc, *_ = _noisy_circuit(config, pd, n, m)
    h = kernel_values(pd, gi, ej).astype(np.int64).ravel()
    if nc.mechanism == "krr" and pd.kernel is not None:  # a declared kernel's code is its value's index
        codes = np.asarray(nc.codes, dtype=np.int64)
        hit = h[:, None] == codes[None, :]
        if not hit.any(axis=1).all():
            raise ValueError(f"kernel {pd.statistic!r}: a value outside its declared values {tuple(codes)}")
        out = simulate_krr(nc.params, hit.argmax(axis=1), rng)
    elif nc.mechanism == "krr":
        out = simulate_krr(nc.params, np.mod(h, len(nc.codes)), rng)
    else:
        out = h + simulate_dyadic_laplace(nc.params, h.size, rng)
    est = nc.estimates(out).reshape(reps, m).mean(axis=1) * natural_units(pd, nc)
    return est, release_interval(config, pd, nc, m)
