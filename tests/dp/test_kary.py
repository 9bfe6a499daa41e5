"""The mixed-radix (k-ary) tree of :mod:`pairwise.dp.kary` against independent references.

* consistency: equals the binary :func:`pairwise.dp.tree.consistent_tree` for
  radices (2, ..., 2), and its prefix variances equal those of an explicit
  weighted least-squares solve (numpy pinv on the design matrix);
* :class:`PrefixMap`: ``adjoint`` is the transpose of ``forward`` (dense);
* :func:`subtraction_costs`: the closed form against a brute-force search
  over all signed digit expansions;
* :func:`kary_mechanism`: replace-one sensitivity 2h of the noised levels
  (every pair of leaves), the per-node scale 2h / eps, the guarantee, and
  neighbouring datasets give node releases that differ by the exact count
  difference only (same seed): the noise does not depend on the data.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pairwise.dp.errors import InvalidDataError, PrivacyParameterError
from pairwise.dp.kary import (
    PrefixMap,
    check_radices,
    consistent_levels,
    dominates_paper,
    kary_mechanism,
    level_sizes,
    node_counts,
    subtraction_costs,
    tree_radices,
)
from pairwise.dp.samplers import conservative_scale
from pairwise.dp.tree import consistent_tree, path_adjoint, path_sums


def test_binary_radices_equal_the_binary_consistent_tree():
    rng = np.random.default_rng(0)
    L = 5
    lv = [rng.normal(size=(3, 1 << (L - l))) for l in range(L + 1)]
    var = [1.0] * L + [0.0]
    a = consistent_levels(lv, var, [2] * L)
    b = consistent_tree(lv, var)
    assert max(float(np.abs(x - y).max()) for x, y in zip(a, b)) < 1e-9


@pytest.mark.parametrize(
    "rad,var",
    [((4, 8), (1.0, 1.0, 0.0)), ((2, 4, 2), (1.0, 1.0, 1.0, 1.0)), ((8,), (1.0, 0.0)), ((4, 4), (2.0, 1.0, 0.5))],
)
def test_prefix_map_adjoint_is_the_transpose_and_gls_variances_match_least_squares(rad, var):
    pm = PrefixMap(rad, var)
    J, N = pm.nodes, pm.sizes[0]
    F = pm.forward(np.eye(J))  # J x N: response of every prefix to unit noise at node j
    A = pm.adjoint(np.eye(N))  # N x J
    assert np.abs(F.T - A).max() < 1e-12
    # explicit GLS: rows = node indicators of the noised levels, weights 1/var; a known root is a constraint
    rows, w = [], []
    for lvl, s in enumerate(level_sizes(rad)):
        if var[lvl] == 0:
            continue
        blk = N // s
        for j in range(s):
            r = np.zeros(N)
            r[j * blk : (j + 1) * blk] = 1
            rows.append(r)
            w.append(1 / var[lvl])
    H, W = np.array(rows), np.diag(w)
    if var[-1] == 0:
        Mi = np.linalg.pinv(H.T @ W @ H)
        one = np.ones(N)
        C = Mi - np.outer(Mi @ one, one @ Mi) / (one @ Mi @ one)
    else:
        C = np.linalg.inv(H.T @ W @ H)
    cum = np.tril(np.ones((N, N)))
    v_ls = np.einsum("ij,jk,ik->i", cum, C, cum)
    node_var = np.array([var[lvl] for lvl, s in enumerate(level_sizes(rad)) if var[lvl] > 0 for _ in range(s)])
    v_map = (F**2 * node_var[:, None]).sum(0)
    assert np.abs(v_ls - v_map).max() < 1e-8
    sq, mx = pm.threshold_norms()
    assert np.allclose(sq, (A**2).sum(1)) and np.allclose(mx, np.abs(A).max(1))


def test_path_adjoint_is_the_transpose_of_path_sums():
    L = 4
    nodes = (2 << L) - 1
    sizes = [1 << (L - lvl) for lvl in range(L + 1)]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    F = np.array(
        [path_sums([np.eye(nodes)[j][starts[lvl] : starts[lvl + 1]] for lvl in range(L + 1)]) for j in range(nodes)]
    )  # nodes x N
    assert np.array_equal(path_adjoint(np.eye(1 << L)), F.T)
    with pytest.raises(InvalidDataError):
        path_adjoint(np.ones(6))


def _brute_costs(rad, root_public):
    N = int(np.prod(rad))
    Ws = [int(np.prod(rad[:lvl])) for lvl in range(len(rad))]
    out = []
    for x in range(1, N + 1):
        best = 10**9
        for es in itertools.product(*[range(-(k - 1), k) for k in rad]):
            for top in (0, 1):
                if sum(e * W for e, W in zip(es, Ws)) + top * N == x:
                    best = min(best, sum(abs(e) for e in es) + top * (0 if root_public else 1))
        out.append(best)
    return np.array(out)


@pytest.mark.parametrize("rad", [(2, 2, 2), (4, 2), (4, 4), (8,), (2, 8)])
@pytest.mark.parametrize("root_public", [True, False])
def test_subtraction_costs_closed_form_against_brute_force(rad, root_public):
    assert np.array_equal(subtraction_costs(rad, root_public), _brute_costs(rad, root_public))


def test_radices_are_public_and_dominate_the_paper():
    """Every grid up to 2^16 (2^17 .. 2^20, the service's largest, take 38 s: benchmarks/RESULTS.md)."""
    assert tree_radices(10) == (32, 32)
    for g in range(1, 17):
        rad = tree_radices(g)
        assert int(np.prod(rad)) == 1 << g and dominates_paper(rad)
    with pytest.raises(PrivacyParameterError):
        check_radices([3, 2])
    with pytest.raises(PrivacyParameterError):
        tree_radices(0)


def test_kary_replace_sensitivity_is_2h():
    rad = (4, 2, 2)
    h, N = len(rad), 16
    worst = 0
    for a, b in itertools.product(range(N), repeat=2):
        ca, cb = np.zeros(N, dtype=np.int64), np.zeros(N, dtype=np.int64)
        ca[a] += 1
        cb[b] += 1
        la, lb = node_counts(ca, rad), node_counts(cb, rad)
        diff = np.concatenate([lb[lvl] - la[lvl] for lvl in range(h)])  # the root is public n
        assert np.abs(diff).max() <= 1
        worst = max(worst, int(np.abs(diff).sum()))
    assert worst == 2 * h


def test_kary_mechanism_neighbours_and_noise_scale():
    """Same seed on D and D' (one record moved across the grid): node releases differ by the exact node
    difference only, the root is n on both, the scale is 2h/eps and the guarantee eps."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 64, 300)
    x2 = x.copy()
    x2[0] = 63 if x[0] < 32 else 0
    ca, cb = np.bincount(x, minlength=64), np.bincount(x2, minlength=64)
    ra = kary_mechanism(ca, 1.0, rng=np.random.default_rng(9))
    rb = kary_mechanism(cb, 1.0, rng=np.random.default_rng(9))
    rad = tree_radices(6)
    h = len(rad)
    assert ra.scale == rb.scale == float(conservative_scale(2 * h, 1.0)) and ra.guarantee.epsilon == 1.0
    na, nb = node_counts(ca, rad), node_counts(cb, rad)
    for lvl in range(h + 1):
        assert np.array_equal(rb.node_values[lvl] - ra.node_values[lvl], (nb[lvl] - na[lvl]).astype(float))
    assert ra.node_values[-1].tolist() == [300.0]
    # noise power at a large sample: node noise variance within 5 standard errors of DL(2h/eps)
    big = kary_mechanism(np.ones(1 << 12, dtype=np.int64), 1.0, rng=np.random.default_rng(1))
    exact = node_counts(np.ones(1 << 12, dtype=np.int64), tree_radices(12))
    z = np.concatenate([np.asarray(v) - e for v, e in zip(big.node_values[:-1], exact[:-1])])
    var = big.node_variance
    a = math.exp(-1 / big.scale)
    k4 = 2 * a * (1 + 4 * a + a * a) / (1 - a) ** 4
    se = math.sqrt((k4 + 2 * var**2) / z.size)
    assert abs(z.var() - var) < 5 * se
    # consistency keeps sums: the last prefix is the public n
    assert ra.cumulative[-1] == pytest.approx(300.0)


def test_prefix_map_accepts_one_vector_and_any_batch_shape():
    """adjoint / forward on a single vector and on a (2, 3, N) batch agree with the rows of the matrix form."""
    pm = PrefixMap((4, 2), (1.0, 2.0, 0.0))
    N, J = pm.sizes[0], pm.nodes
    A = pm.adjoint(np.eye(N))
    w = np.arange(N, dtype=float) - 3.0
    assert np.allclose(pm.adjoint(w), w @ A)
    batch = np.random.default_rng(2).normal(size=(2, 3, N))
    assert pm.adjoint(batch).shape == (2, 3, J) and np.allclose(pm.adjoint(batch), batch @ A)
    z = np.random.default_rng(3).normal(size=(2, J))
    assert np.allclose(pm.forward(z), z @ A.T)
    with pytest.raises(InvalidDataError):
        pm.adjoint(np.ones((N, N + 1)))  # thresholds on the last axis, not the first
