"""DCF correctness: shares sum to beta * [x CMP alpha] (truth computed with Python ints).

Every point of small domains (n <= 10), random and boundary points for n = 32
and 64, all four comparison conventions, l from 1 to 64, negative and per-key
payloads; batched evaluation (many keys at one point, one point per key, one
key at many points, any chunk size) equals one-by-one evaluation.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairwise.fss import (
    COMPARISONS,
    DCFKey,
    DCFKeyBatch,
    FSSParameterError,
    dcf_gen,
    dcf_gen_batch,
    reconstruct,
)


def truth(cmp: str, alpha: int, beta: int, l: int, x: int) -> int:
    hit = {"lt": x < alpha, "le": x <= alpha, "gt": x > alpha, "ge": x >= alpha}[cmp]
    return beta % (1 << l) if hit else 0


def truth_array(cmp, alpha, beta, l, xs: np.ndarray) -> np.ndarray:
    return np.array([truth(cmp, alpha, beta, l, int(x)) for x in xs], dtype=np.uint64)


SMALL = [(n, l) for n in (1, 2, 3, 4, 5, 7, 8, 9, 10) for l in (1, 8, 13, 64)]


@pytest.mark.parametrize("n,l", SMALL)
@pytest.mark.parametrize("cmp", COMPARISONS)
def test_every_point_small_domain(n, l, cmp):
    rng = random.Random(f"{n},{l},{cmp}")
    alphas = sorted({0, 2**n - 1, rng.getrandbits(n), rng.getrandbits(n)})
    xs = np.arange(2**n, dtype=np.uint64)
    for alpha in alphas:
        beta = rng.getrandbits(l) or 1
        k0, k1 = dcf_gen(alpha, beta, n, l, comparison=cmp)
        y = reconstruct(k0.eval_many(xs), k1.eval_many(xs), l)
        assert np.array_equal(y, truth_array(cmp, alpha, beta, l, xs))


@pytest.mark.parametrize("n", [6, 10])
def test_every_point_batch_of_keys(n):
    """Many keys (every alpha of the domain) evaluated as a batch at every point."""
    l = 16
    alphas = np.arange(2**n, dtype=np.uint64)
    k0, k1 = dcf_gen_batch(alphas, 1, n, l)
    for x in range(2**n):
        y = reconstruct(k0.eval(x), k1.eval(x), l)
        assert np.array_equal(y, (x < alphas).astype(np.uint64))
        if x % 97 == 0:
            assert reconstruct(k0.eval_sum(x), k1.eval_sum(x), l) == int(np.count_nonzero(x < alphas))


@pytest.mark.parametrize("n", [32, 64])
@pytest.mark.parametrize("cmp", COMPARISONS)
def test_random_points_large_domain(n, cmp):
    rng = random.Random(f"large{n}{cmp}")
    K, l = 300, 32 if n == 32 else 64
    alphas = [rng.getrandbits(n) for _ in range(K)]
    alphas[:4] = [0, 1, 2**n - 1, 2**n - 2]
    betas = [rng.getrandbits(l) for _ in range(K)]
    k0, k1 = dcf_gen_batch(np.array(alphas, dtype=np.uint64), np.array(betas, dtype=np.uint64), n, l, comparison=cmp)
    points = [0, 2**n - 1] + [rng.getrandbits(n) for _ in range(6)]
    for x in points:
        y = reconstruct(k0.eval(x), k1.eval(x), l)
        assert [int(v) for v in y] == [truth(cmp, a, b, l, x) for a, b in zip(alphas, betas)]
    # near each key's own alpha: x = alpha - 1, alpha, alpha + 1 (one point per key)
    for delta in (-1, 0, 1):
        xs = [min(max(a + delta, 0), 2**n - 1) for a in alphas]
        y = reconstruct(k0.eval(np.array(xs, dtype=np.uint64)), k1.eval(np.array(xs, dtype=np.uint64)), l)
        assert [int(v) for v in y] == [truth(cmp, a, b, l, x) for a, b, x in zip(alphas, betas, xs)]


def test_batched_equals_one_by_one():
    rng = random.Random(5)
    n, l, K = 24, 20, 60
    alphas = np.array([rng.getrandbits(n) for _ in range(K)], dtype=np.uint64)
    k0, _ = dcf_gen_batch(alphas, 3, n, l)
    x = rng.getrandbits(n)
    one_by_one = np.array([k0[k].eval(x) for k in range(K)], dtype=np.uint64)
    for chunk in (None, 1, 7, 64):
        assert np.array_equal(k0.eval(x, chunk=chunk), one_by_one)
    xs = np.array([rng.getrandbits(n) for _ in range(K)], dtype=np.uint64)
    per_key = np.array([k0[k].eval(int(xs[k])) for k in range(K)], dtype=np.uint64)
    for chunk in (None, 5):
        assert np.array_equal(k0.eval(xs, chunk=chunk), per_key)
    # one key at many points
    key = k0[3]
    many = key.eval_many(xs, chunk=9)
    assert np.array_equal(many, [key.eval(int(v)) for v in xs])
    # sums
    assert k0.eval_sum(x) == int(one_by_one.sum()) % (1 << l)
    assert np.array_equal(k0.eval_sums(xs[:5]), [k0.eval_sum(int(v)) for v in xs[:5]])


def test_parsed_batch_equals_generated_batch():
    alphas = np.array([5, 1000, 77777, 0], dtype=np.uint64)
    k0, k1 = dcf_gen_batch(alphas, 1, 17, 9)
    s0 = DCFKeyBatch.from_bytes_list(k0.to_bytes_list(), n=17, l=9, party=0)
    s1 = DCFKeyBatch.from_bytes_list(k1.to_bytes_list())
    for x in (0, 4, 5, 999, 1000, 77776, 2**17 - 1):
        assert np.array_equal(s0.eval(x), k0.eval(x))
        assert np.array_equal(reconstruct(s0.eval(x), s1.eval(x), 9), (x < alphas).astype(np.uint64))


def test_ecdf_counts_with_ge_and_lt():
    """dp-ecdf Sec. 4.2: with alpha = x_i, 'ge' gives #{x_i <= t}; 'lt' gives n - that."""
    rng = random.Random(6)
    data = np.array([rng.getrandbits(12) for _ in range(200)], dtype=np.uint64)
    g0, g1 = dcf_gen_batch(data, 1, 12, 32, comparison="ge")
    l0, l1 = dcf_gen_batch(data, 1, 12, 32, comparison="lt")
    for t in (0, 100, 2048, 4095, int(data[0])):
        count = int(np.count_nonzero(data <= t))
        assert reconstruct(g0.eval_sum(t), g1.eval_sum(t), 32) == count
        assert len(data) - reconstruct(l0.eval_sum(t), l1.eval_sum(t), 32) == count


def test_negative_and_per_key_beta():
    k0, k1 = dcf_gen_batch([10, 20, 30], [-1, 5, -(2**15) + 1], 8, 16)
    y = reconstruct(k0.eval(0), k1.eval(0), 16)
    assert [int(v) for v in y] == [2**16 - 1, 5, 2**15 + 1]
    a0, a1 = dcf_gen(3, -7, 4, 64)
    assert reconstruct(a0.eval(2), a1.eval(2), 64) == 2**64 - 7
    assert reconstruct(a0.eval(3), a1.eval(3), 64) == 0


def test_shares_in_range_and_key_indexing():
    k0, k1 = dcf_gen_batch(np.arange(10, dtype=np.uint64), 1, 10, 5)
    assert len(k0) == 10 and k0.party == 0 and k1.party == 1
    y = k0.eval(3)
    assert y.dtype == np.uint64 and int(y.max()) < 32
    assert isinstance(k0[2], DCFKey) and k0[-1] == k0[9]
    sub = k0[2:5]
    assert len(sub) == 3 and np.array_equal(sub.eval(3), y[2:5])
    sel = k0[np.array([9, 0])]
    assert np.array_equal(sel.eval(3), y[[9, 0]])
    joined = DCFKeyBatch.concat([k0[:4], k0[4:]])
    assert joined.to_bytes_list() == k0.to_bytes_list()
    assert DCFKeyBatch.from_keys([k0[1], k0[7]]).to_bytes_list() == [k0[1].to_bytes(), k0[7].to_bytes()]
    with pytest.raises(IndexError):
        k0[10]
    assert "seed" not in repr(k0) and "party=0" in repr(k0[0])
    # a party's batch holds its own root seeds only (no view into the other party's)
    assert k0.seeds.base is None and k1.seeds.base is None


def test_empty_batch():
    k0, k1 = dcf_gen_batch(np.zeros(0, dtype=np.uint64), 1, 8, 8)
    assert len(k0) == 0 and k0.eval(3).shape == (0,) and k0.eval_sum(3) == 0
    assert k0.to_bytes_list() == []
    assert len(DCFKeyBatch.from_bytes_list([], n=8, l=8, party=0)) == 0


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_hypothesis_single_point(data):
    n = data.draw(st.integers(1, 64))
    l = data.draw(st.integers(1, 64))
    alpha = data.draw(st.integers(0, 2**n - 1))
    beta = data.draw(st.integers(-(2**l) + 1, 2**l - 1))
    x = data.draw(st.one_of(st.integers(0, 2**n - 1), st.sampled_from([alpha, max(0, alpha - 1)])))
    cmp = data.draw(st.sampled_from(COMPARISONS))
    k0, k1 = dcf_gen(alpha, beta, n, l, comparison=cmp)
    assert reconstruct(k0.eval(x), k1.eval(x), l) == truth(cmp, alpha, beta, l, x)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(alpha=0, beta=1, n=0, l=8), "domain bits n must be in 1..64"),
        (dict(alpha=0, beta=1, n=65, l=8), "domain bits n must be in 1..64"),
        (dict(alpha=0, beta=1, n=8, l=0), "output bits l must be in 1..64"),
        (dict(alpha=0, beta=1, n=8, l=65), "output bits l must be in 1..64"),
        (dict(alpha=256, beta=1, n=8, l=8), r"alpha must be in \[0, 2\^8\)"),
        (dict(alpha=-1, beta=1, n=8, l=8), r"alpha must be in \[0, 2\^8\)"),
        (dict(alpha=3, beta=256, n=8, l=8), r"beta = 256 is outside \(-2\^8, 2\^8\)"),
        (dict(alpha=3, beta=-256, n=8, l=8), r"outside \(-2\^8, 2\^8\)"),
        (dict(alpha=3.0, beta=1, n=8, l=8), "alpha must be an integer"),
        (dict(alpha=3, beta=1.5, n=8, l=8), "beta must be an integer"),
        (dict(alpha=3, beta=True, n=8, l=8), "beta must be an integer, got a bool"),
        (dict(alpha=3, beta=1, n="8", l=8), "domain bits n must be an integer"),
    ],
)
def test_parameter_validation(kwargs, match):
    with pytest.raises(FSSParameterError, match=match):
        dcf_gen(**kwargs)


def test_parameter_validation_batch_and_eval():
    with pytest.raises(FSSParameterError, match="comparison must be one of"):
        dcf_gen(1, 1, 8, 8, comparison="<=")
    with pytest.raises(FSSParameterError, match=r"alpha\[1\] = 300 is outside"):
        dcf_gen_batch([1, 300], 1, 8, 8)
    with pytest.raises(FSSParameterError, match="non-negative"):
        dcf_gen_batch(np.array([1, -3]), 1, 8, 8)
    with pytest.raises(FSSParameterError, match=r"beta\[1\] = 256 is outside"):
        dcf_gen_batch([1, 2], [3, 256], 8, 8)
    with pytest.raises(FSSParameterError, match="one entry per alpha"):
        dcf_gen_batch([1, 2], [3, 4, 5], 8, 8)
    with pytest.raises(FSSParameterError, match="integer array"):
        dcf_gen_batch(np.array([1.0, 2.0]), 1, 8, 8)
    with pytest.raises(FSSParameterError, match="one-dimensional"):
        dcf_gen_batch(np.zeros((2, 2), dtype=np.uint64), 1, 8, 8)
    k0, _ = dcf_gen_batch([1, 2, 3], 1, 8, 8)
    with pytest.raises(FSSParameterError, match=r"evaluation point x must be in \[0, 2\^8\)"):
        k0.eval(256)
    with pytest.raises(FSSParameterError, match="one point per key"):
        k0.eval(np.array([1, 2], dtype=np.uint64))
    with pytest.raises(FSSParameterError, match=r"evaluation points\[1\] = 999"):
        k0[0].eval_many([3, 999])
    with pytest.raises(FSSParameterError, match="evaluation point x must be an integer"):
        k0[0].eval(2.5)


@pytest.mark.parametrize("party", [0, 1])
@pytest.mark.parametrize("n,l", [(1, 8), (6, 32), (9, 64)])
def test_full_domain_sum_equals_pointwise_sum(n, l, party):
    """DCFKeyBatch.full_domain_sum (breadth-first) equals eval_sum at every point, and the two
    parties' vectors reconstruct the count of keys with x CMP alpha."""
    import numpy as np

    from pairwise.fss import dcf_gen_batch, reconstruct

    rng = np.random.default_rng(n * 100 + l)
    alphas = rng.integers(0, 1 << n, size=37).astype(np.uint64)
    k0, k1 = dcf_gen_batch(alphas, 1, n=n, l=l, comparison="ge")
    mine = (k0, k1)[party]
    full = mine.full_domain_sum()
    assert full.shape == (1 << n,)
    assert [int(v) for v in full] == [int(mine.eval_sum(x)) for x in range(1 << n)]
    total = reconstruct(k0.full_domain_sum(), k1.full_domain_sum(), l)
    assert [int(v) for v in total] == [int((alphas <= x).sum()) for x in range(1 << n)]
