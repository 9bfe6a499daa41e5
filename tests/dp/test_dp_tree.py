"""Tests of dp.tree: layouts against the paper's definitions, privacy structure,
Theorem 3.1's MSE, and least-squares consistency against dense GLS."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from pairwise.dp.errors import EmptyDataError, InvalidDataError, PrivacyParameterError
from pairwise.dp.samplers import discrete_laplace_array, discrete_laplace_variance
from pairwise.dp.tree import (
    consistent_prefix_sums,
    consistent_tree,
    dyadic_node_counts,
    dyadic_prefix_sums,
    hierarchical_mechanism,
    paper_layout_replace_sensitivity,
    path_node_values,
    path_sums,
    theorem31_mse,
    tree_depth,
    tree_mechanism,
    tree_node_noise,
    tree_noise_scale,
)


def paper_z(L: int) -> np.ndarray:
    """Z_{L,0} from the paper's definition: entry (i, (j,l)) = 1 iff (j-1)2^l+1 <= i <= j 2^l
    (1-indexed thresholds i and node indices j), nodes ordered level by level."""
    cols = []
    for l in range(L + 1):
        for j in range(1, 2 ** (L - l) + 1):
            cols.append([1 if (j - 1) * 2**l + 1 <= i <= j * 2**l else 0 for i in range(1, 2**L + 1)])
    return np.array(cols).T


def flatten(levels):
    return np.concatenate([np.asarray(v) for v in levels], axis=-1)


def split(flat, L):
    out, start = [], 0
    for l in range(L + 1):
        out.append(flat[..., start : start + 2 ** (L - l)])
        start += 2 ** (L - l)
    return out


counts_strategy = hs.lists(hs.integers(0, 50), min_size=1, max_size=70)


@settings(max_examples=60, deadline=None)
@given(counts_strategy)
def test_path_and_dyadic_layouts_reproduce_cumulative_counts(counts):
    c = np.array(counts, dtype=np.int64)
    cum = np.cumsum(c)
    assert np.array_equal(path_sums(path_node_values(c))[: c.size], cum)
    assert np.array_equal(dyadic_prefix_sums(dyadic_node_counts(c))[: c.size], cum)


@pytest.mark.parametrize("L", [0, 1, 3, 5])
def test_path_sums_is_the_papers_z(L):
    rng = np.random.default_rng(L)
    v = rng.integers(-100, 100, 2 ** (L + 1) - 1)
    assert np.array_equal(path_sums(split(v, L)), paper_z(L) @ v)
    # batched
    vb = rng.integers(-100, 100, (4, 2 ** (L + 1) - 1))
    assert np.array_equal(path_sums(split(vb, L)), vb @ paper_z(L).T)


def test_path_sums_on_additive_shares_mod_2_64():
    L = 6
    rng = np.random.default_rng(0)
    secret = rng.integers(-1000, 1000, 2 ** (L + 1) - 1).astype(np.int64).astype(np.uint64)
    share0 = rng.integers(0, 2**63, secret.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    share1 = secret - share0  # wraps mod 2^64
    with np.errstate(over="ignore"):
        total = path_sums(split(share0, L)) + path_sums(split(share1, L))
    assert np.array_equal(total, path_sums(split(secret, L)))


def test_dyadic_prefix_uses_at_most_L_plus_1_nodes():
    L = 5
    size = 2**L
    for k in range(size):
        # unit noise on every node: the prefix sum counts the nodes used
        ones = [np.ones(2 ** (L - l), dtype=np.int64) for l in range(L + 1)]
        used = dyadic_prefix_sums(ones)[k]
        assert used == bin(k + 1).count("1") <= L + 1


def _interval_shifts_representable(L: int, max_support: int) -> bool:
    """Is every 1_[t1+1, t2] equal to Z chi with chi in {-1,0,1}^nodes, |chi|_0 <= max_support?"""
    z = paper_z(L)
    m = z.shape[1]
    reachable = set()
    for support in range(max_support + 1):
        for cols in itertools.combinations(range(m), support):
            for signs in itertools.product((-1, 1), repeat=support):
                vec = np.zeros(z.shape[0], dtype=np.int64)
                for c, s in zip(cols, signs):
                    vec += s * z[:, c]
                reachable.add(vec.tobytes())
    size = 2**L
    for t1 in range(size):
        for t2 in range(t1 + 1, size + 1):
            target = np.zeros(size, dtype=np.int64)
            target[t1:t2] = 1
            if target.tobytes() not in reachable:
                return False
    return True


@pytest.mark.parametrize("L", [1, 2, 3])
def test_theorem31_sparse_representation_of_shifts(L):
    """The step of Theorem 3.1's proof (Eq. 9): L+1 signed nodes explain any replaced record,
    so node noise of scale (L+1)/eps gives eps-DP; L-1 nodes would not suffice."""
    assert _interval_shifts_representable(L, L + 1)
    if L >= 2:
        assert not _interval_shifts_representable(L, L - 1)


def test_paper_layout_node_value_sensitivity_is_2L_plus_1():
    """Opening the node values d + eta would cost 2L+1 nodes per replaced record (L >= 2)."""
    for L in range(2, 6):
        size = 2**L
        worst = 0
        for a in range(size):
            for b in range(size):
                ca = np.zeros(size, dtype=np.int64)
                cb = np.zeros(size, dtype=np.int64)
                ca[a] += 1
                cb[b] += 1
                diff = flatten(path_node_values(cb)) - flatten(path_node_values(ca))
                assert np.abs(diff).max() <= 1
                worst = max(worst, int(np.abs(diff).sum()))
        assert worst == paper_layout_replace_sensitivity(L)


def test_hierarchical_replace_sensitivity_is_2L():
    L = 4
    size = 2**L
    worst = 0
    for a, b in itertools.product(range(size), repeat=2):
        ca = np.zeros(size, dtype=np.int64)
        cb = np.zeros(size, dtype=np.int64)
        ca[a] += 1
        cb[b] += 1
        diff = flatten(dyadic_node_counts(cb)[:-1]) - flatten(dyadic_node_counts(ca)[:-1])
        worst = max(worst, int(np.abs(diff).sum()))
    assert worst == 2 * L


# ---------------------------------------------------------------- Theorem 3.1 MSE


@pytest.mark.parametrize("noise", ["laplace", "discrete_laplace"])
def test_theorem31_per_threshold_mse_small_tree(noise):
    """Per-threshold empirical MSE within 10% of 2(L+1)^3/eps^2 (4000 seeded trials, L = 4).

    The relative standard error of one threshold's MSE is about 2.4% here, so
    10% is more than 4 standard errors for each of the 16 thresholds.
    """
    L, eps, trials = 4, 0.5, 4000
    rng = np.random.default_rng(31)
    scale = tree_noise_scale(L, eps)
    eta = tree_node_noise(L, scale, noise=noise, rng=rng, trials=trials)
    err = path_sums(eta)  # noisy minus exact cumulative counts
    mse = np.mean(err.astype(float) ** 2, axis=0)
    theory = theorem31_mse(L, eps)
    assert np.all(np.abs(mse / theory - 1) < 0.10), mse / theory
    if noise == "discrete_laplace":
        exact_theory = (L + 1) * discrete_laplace_variance(scale)
        assert np.all(np.abs(mse / exact_theory - 1) < 0.10)


def test_theorem31_mse_through_tree_mechanism_large_tree():
    """tree_mechanism on the Pois(3) data, L = 10, 2000 seeded trials: MSE within 10%
    at every threshold (averaged over thresholds it is within 1-2%)."""
    rng = np.random.default_rng(310)
    counts = rng.poisson(3, 2**10)
    exact = np.cumsum(counts)
    eps = 1.0
    sq = np.zeros(counts.size)
    trials = 2000
    for _ in range(trials):
        rel = tree_mechanism(counts, eps, noise="laplace", rng=rng)
        sq += (rel.cumulative - exact) ** 2
    mse = sq / trials
    theory = theorem31_mse(10, eps)
    assert rel.theoretical_mse == pytest.approx(theory)
    assert abs(mse.mean() / theory - 1) < 0.03
    assert np.all(np.abs(mse / theory - 1) < 0.15)  # 1024 thresholds, each ~3.4% s.e.
    assert np.mean(np.abs(mse / theory - 1) < 0.10) > 0.99


def test_tree_mechanism_exact_csprng_noise_mse():
    """The OS-CSPRNG path: exact discrete Laplace noise, 2000 trees of L = 4 via the
    vectorized sampler, per-threshold MSE within 10% (unseeded; > 4 s.e. margin)."""
    L, eps, trials = 4, 1.0, 2000
    scale = tree_noise_scale(L, eps)
    flat = discrete_laplace_array(scale, trials * (2 ** (L + 1) - 1)).reshape(trials, -1)
    mse = np.mean(path_sums(split(flat, L)).astype(float) ** 2, axis=0)
    theory = (L + 1) * discrete_laplace_variance(scale)
    assert abs(mse.mean() / theory - 1) < 0.10
    # and the full mechanism on real counts (a few hundred runs, looser band)
    counts = np.arange(16) % 5
    errs = np.array([tree_mechanism(counts, eps).cumulative - np.cumsum(counts) for _ in range(400)])
    assert errs.dtype == np.int64
    assert abs(np.mean(errs.astype(float) ** 2) / theory - 1) < 0.25


def test_tree_release_fields():
    counts = np.array([3, 0, 2, 5, 1])  # N = 5 -> padded to 8 bins, L = 3
    rel = tree_mechanism(counts, 0.8, rng=np.random.default_rng(0))
    assert rel.L == 3 and rel.n == 11 and rel.cumulative.shape == (5,)
    assert rel.layout == "paper" and rel.simulated and rel.node_values is None
    assert rel.scale == pytest.approx(4 / 0.8) and rel.guarantee.epsilon == 0.8
    assert rel.ecdf == pytest.approx(rel.cumulative / 11)
    exact = tree_mechanism(counts, 0.8)
    assert not exact.simulated and exact.cumulative.dtype == np.int64


def test_snapped_laplace_tree_accounts_for_2L_plus_1_nodes():
    counts = np.random.default_rng(1).poisson(4, 64)
    rel = tree_mechanism(counts, 1.0, noise="laplace")
    L = 6
    assert rel.guarantee.epsilon <= 1.0
    assert rel.scale == pytest.approx((2 * L + 1) / 1.0, rel=1e-6)
    assert not rel.simulated and rel.cumulative.shape == (64,)
    h = hierarchical_mechanism(counts, 1.0, noise="laplace")
    assert h.guarantee.epsilon <= 1.0 and h.scale == pytest.approx(2 * L, rel=1e-6)


# ---------------------------------------------------------------- consistency


def _design(L):
    rows = []
    for l in range(L + 1):
        for j in range(2 ** (L - l)):
            r = np.zeros(2**L)
            r[j * 2**l : (j + 1) * 2**l] = 1
            rows.append(r)
    return np.array(rows)


@pytest.mark.parametrize("L", [1, 3, 4])
def test_consistency_equals_dense_gls(L):
    rng = np.random.default_rng(L)
    a = _design(L)
    truth = rng.integers(0, 20, 2**L).astype(float)
    # equal variances everywhere (Hay et al.): ordinary least squares
    y = a @ truth + rng.normal(0, 3, a.shape[0])
    ols = np.linalg.lstsq(a, y, rcond=None)[0]
    got = consistent_tree(split(y, L), [9.0] * (L + 1))
    assert np.allclose(got[0], ols, atol=1e-9)
    # per-level variances with an exactly known root: constrained weighted LS via KKT
    var = rng.uniform(1, 5, L + 1)
    var[-1] = 0.0
    y2 = a @ truth + rng.normal(0, 1, a.shape[0])
    y2[-1] = truth.sum()
    lv = np.concatenate([np.full(2 ** (L - l), var[l]) for l in range(L + 1)])
    w = np.where(lv > 0, 1 / np.where(lv > 0, lv, 1), 0.0)
    aw = a[:-1] * w[:-1, None]
    kkt = np.block([[a[:-1].T @ aw, np.ones((2**L, 1))], [np.ones((1, 2**L)), np.zeros((1, 1))]])
    rhs = np.concatenate([aw.T @ y2[:-1], [y2[-1]]])
    ref = np.linalg.solve(kkt, rhs)[: 2**L]
    got2 = consistent_tree(split(y2, L), var)
    assert np.allclose(got2[0], ref, atol=1e-8)
    for l in range(1, L + 1):  # consistent: parent = sum of children
        assert np.allclose(got2[l], got2[l - 1][0::2] + got2[l - 1][1::2])
    assert got2[L][0] == pytest.approx(truth.sum())


def test_hierarchical_consistent_beats_theorem31():
    """Least-squares consistency: per-threshold MSE well below 2(L+1)^3/eps^2 (seeded)."""
    rng = np.random.default_rng(8)
    counts = rng.poisson(3, 2**8)
    exact = np.cumsum(counts)
    eps, trials = 1.0, 300
    sq_cons = np.zeros(counts.size)
    sq_raw = np.zeros(counts.size)
    for _ in range(trials):
        h = hierarchical_mechanism(counts, eps, rng=rng)
        sq_cons += (h.cumulative - exact) ** 2
        sq_raw += (dyadic_prefix_sums(h.node_values) - exact) ** 2
        assert h.cumulative[-1] == pytest.approx(counts.sum())
    theory = theorem31_mse(8, eps)
    assert sq_cons.mean() / trials < 0.5 * theory
    assert sq_cons.mean() < sq_raw.mean()
    assert np.allclose(consistent_prefix_sums(h.node_values, [h.node_variance] * 8 + [0.0]), h.cumulative)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "counts,exc",
    [
        ([], EmptyDataError),
        ([0, 0, 0], EmptyDataError),
        ([1, -1], InvalidDataError),
        ([[1, 2]], InvalidDataError),
        ([0.5, 1], InvalidDataError),
        (["a"], InvalidDataError),
    ],
)
def test_bad_counts(counts, exc):
    with pytest.raises(exc):
        tree_mechanism(counts, 1.0)


def test_bad_parameters():
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        tree_mechanism([1, 2], 0.0)
    with pytest.raises(PrivacyParameterError, match="noise"):
        tree_mechanism([1, 2], 1.0, noise="gaussian")
    with pytest.raises(PrivacyParameterError, match="Mironov"):
        tree_node_noise(3, 2.0, noise="laplace")
    with pytest.raises(InvalidDataError, match="level 1"):
        path_sums([np.zeros(4), np.zeros(3), np.zeros(1)])
    with pytest.raises(InvalidDataError):
        consistent_tree([np.zeros(2), np.zeros(1)], [1.0])
    with pytest.raises(EmptyDataError):
        tree_depth(0)
    assert tree_depth(1) == 0 and tree_depth(2) == 1 and tree_depth(5) == 3 and math.log2(8) == tree_depth(8)
