"""DPF correctness: shares sum to beta * [x == alpha] mod 2^l (truth from Python ints).

Every point of small domains (n <= 10) by point evaluation and by full-domain
evaluation, random points for n = 32 and 64, histogram shares from
``full_domain_sum`` equal numpy's bincount, batched = one-by-one.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from pairwise.fss import (
    FULL_DOMAIN_MAX_BITS,
    DPFKey,
    DPFKeyBatch,
    FSSParameterError,
    KeyFormatError,
    dcf_gen,
    dpf_gen,
    dpf_gen_batch,
    reconstruct,
)


def point_truth(alpha: int, beta: int, l: int, xs: np.ndarray) -> np.ndarray:
    return np.array([beta % (1 << l) if int(x) == alpha else 0 for x in xs], dtype=np.uint64)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 10])
@pytest.mark.parametrize("l", [1, 7, 32, 64])
def test_every_point_small_domain(n, l):
    rng = random.Random(f"dpf{n},{l}")
    xs = np.arange(2**n, dtype=np.uint64)
    for alpha in sorted({0, 2**n - 1, rng.getrandbits(n)}):
        beta = rng.getrandbits(l) or 1
        k0, k1 = dpf_gen(alpha, beta, n, l)
        want = point_truth(alpha, beta, l, xs)
        assert np.array_equal(reconstruct(k0.eval_many(xs), k1.eval_many(xs), l), want)
        f0, f1 = k0.full_domain(), k1.full_domain()
        assert np.array_equal(reconstruct(f0, f1, l), want)
        assert np.array_equal(f0, k0.eval_many(xs))  # full domain = point-by-point shares
        assert k0.eval(alpha) == int(f0[alpha])


@pytest.mark.parametrize("n", [32, 64])
def test_random_points_large_domain(n):
    rng = random.Random(f"dpf-large{n}")
    K, l = 200, 64
    alphas = [rng.getrandbits(n) for _ in range(K)]
    alphas[:2] = [0, 2**n - 1]
    betas = [rng.getrandbits(l) for _ in range(K)]
    k0, k1 = dpf_gen_batch(np.array(alphas, dtype=np.uint64), np.array(betas, dtype=np.uint64), n, l)
    # at each key's alpha, next to it, and at unrelated points
    for delta in (0, 1, -1):
        xs = np.array([(a + delta) % 2**n for a in alphas], dtype=np.uint64)
        y = reconstruct(k0.eval(xs), k1.eval(xs), l)
        assert [int(v) for v in y] == [b if delta == 0 else 0 for b in betas]
    x = rng.getrandbits(n)
    y = reconstruct(k0.eval(x), k1.eval(x), l)
    assert [int(v) for v in y] == [b if a == x else 0 for a, b in zip(alphas, betas)]


def test_batched_equals_one_by_one():
    rng = random.Random(7)
    n, l, K = 20, 32, 50
    alphas = np.array([rng.getrandbits(n) for _ in range(K)], dtype=np.uint64)
    k0, _ = dpf_gen_batch(alphas, 1, n, l)
    x = int(alphas[4])
    one = np.array([k0[k].eval(x) for k in range(K)], dtype=np.uint64)
    for chunk in (None, 1, 6):
        assert np.array_equal(k0.eval(x, chunk=chunk), one)
    xs = np.array([rng.getrandbits(n) for _ in range(K)], dtype=np.uint64)
    assert np.array_equal(k0.eval(xs, chunk=8), [k0[k].eval(int(xs[k])) for k in range(K)])
    assert np.array_equal(k0[5].eval_many(xs), [k0[5].eval(int(v)) for v in xs])


@pytest.mark.parametrize("n,K", [(4, 300), (9, 40)])
def test_full_domain_sum_is_histogram_share(n, K):
    rng = random.Random(f"hist{n}")
    data = np.array([rng.getrandbits(n) for _ in range(K)], dtype=np.uint64)
    k0, k1 = dpf_gen_batch(data, 1, n, 32)
    h = reconstruct(k0.full_domain_sum(), k1.full_domain_sum(), 32)
    assert np.array_equal(h, np.bincount(data.astype(np.int64), minlength=2**n))
    rows = k0.full_domain()
    assert rows.shape == (K, 2**n)
    assert np.array_equal(rows[3], k0[3].full_domain())


def test_full_domain_16_bits():
    k0, k1 = dpf_gen(54321, 9, 16, 20)
    y = reconstruct(k0.full_domain(), k1.full_domain(), 20)
    assert int(np.count_nonzero(y)) == 1 and int(y[54321]) == 9


def test_full_domain_limit():
    k0, _ = dpf_gen(1, 1, FULL_DOMAIN_MAX_BITS + 1, 8)
    with pytest.raises(FSSParameterError, match="full-domain evaluation"):
        k0.full_domain()


def test_serialization_and_kind_check():
    k0, k1 = dpf_gen_batch([3, 9], [1, 2], 10, 12)
    blobs = k0.to_bytes_list()
    back = DPFKeyBatch.from_bytes_list(blobs)
    assert back.to_bytes_list() == blobs
    assert DPFKey.from_bytes(blobs[1]) == k0[1]
    assert len(blobs[0]) == 5 + 16 + 16 * 10 + 3 + 2
    d0, _ = dcf_gen(3, 1, 10, 12)
    with pytest.raises(KeyFormatError, match="this is a DCF key, expected a DPF key"):
        DPFKey.from_bytes(d0.to_bytes())


def test_parameter_validation():
    with pytest.raises(FSSParameterError, match="domain bits n must be in 1..64"):
        dpf_gen(0, 1, 0, 8)
    with pytest.raises(FSSParameterError, match=r"alpha must be in \[0, 2\^4\)"):
        dpf_gen(16, 1, 4, 8)
    with pytest.raises(FSSParameterError, match=r"beta = 300 is outside"):
        dpf_gen(1, 300, 4, 8)
