"""Seeded simulation of the ECDF service's releases, without servers (experiments and coverage tests only).

What it does
    :func:`service_noise_map` is the public noise structure of one series'
    release exactly as :func:`pairwise.protocols.ecdf.release.run_release`
    draws it: per-node epsilon ``value_epsilon(eps, changed)`` (changed =
    L + 1 for the paper mechanism, 2h for a tree of h levels below the root),
    discrete Laplace nodes with a = exp(-eps_v / S).  :func:`simulate_cumulative`
    draws ``reps`` releases of given exact counts through that map: the
    paper's path sums, or the querier's least-squares consistent tree
    (which is linear and reproduces exact counts, so the release is the exact
    prefix plus the consistent map of the node noise).  The garbled-circuit
    and Polya noise of the service are within total variation ``tv`` of this
    law per value (``tests/statistical/test_noise_power_ecdf.py``).

Security model
    SIMULATION: a seeded numpy Generator, never used for a release.  Used by
    ``benchmarks/ecdf_auc_bias.py`` and the interval-coverage tests.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from pairwise.dp.ecdf_intervals import NoiseLaw

from .estimates import NoiseMap
from .noise import discrete_laplace_alpha, value_epsilon
from .release import mechanism_radices

__all__ = ["service_noise_map", "simulate_cumulative"]


def service_noise_map(
    mechanism: str, grid_bits: int, epsilon_series, *, root_public: bool = True, weight: int = 1
) -> NoiseMap:
    """The :class:`NoiseMap` of one series released with ``epsilon_series`` (what the servers state)."""
    rad = mechanism_radices(mechanism, int(grid_bits))
    changed = int(grid_bits) + 1 if rad is None else 2 * len(rad)
    eps_v = value_epsilon(Fraction(epsilon_series), changed)
    law = NoiseLaw(discrete_laplace_alpha(eps_v, weight))
    return NoiseMap(mechanism, int(grid_bits), law, rad, root_public if rad is not None else True)


def _dl(rng: np.random.Generator, a: float, shape) -> np.ndarray:
    """Discrete Laplace P(z) ~ a^|z| as the difference of two geometrics (SIMULATION)."""
    return (rng.geometric(1.0 - a, shape) - rng.geometric(1.0 - a, shape)).astype(float)


def simulate_cumulative(counts, nm: NoiseMap, rng: np.random.Generator, reps: int) -> np.ndarray:
    """``reps`` simulated releases (reps x N cumulative counts) of the histogram ``counts`` through ``nm``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("simulate_cumulative needs a seeded numpy Generator (SIMULATION only)")
    h = np.asarray(counts, dtype=float)
    N = 1 << nm.grid_bits
    if h.size != N:
        raise ValueError(f"counts must have 2^{nm.grid_bits} = {N} bins, got {h.size}")
    exact = np.cumsum(h)
    a = nm.law.a
    if nm.radices is None:
        err = np.zeros((reps, N))
        for lv in range(nm.grid_bits + 1):
            err += np.repeat(_dl(rng, a, (reps, N >> lv)), 1 << lv, axis=1)
        return exact[None, :] + err
    pm = nm.prefix_map
    return exact[None, :] + pm.forward(_dl(rng, a, (reps, pm.nodes)))
