"""pytest-benchmark suite for the FSS library (benchmarks, not tests: run explicitly).

    .venv/bin/pytest benchmarks/bench_fss.py --benchmark-only
    .venv/bin/pytest benchmarks/bench_fss.py --benchmark-only --benchmark-json out.json

Batched DCF Gen and Eval at a 32-bit domain (n = l = 32) over 10^5 keys,
key parsing, DPF Gen/Eval, and DPF full-domain evaluation for n = 16 and 20.
Each benchmark also asserts the result is correct, so a fast wrong answer
cannot pass; ``extra_info`` records per-key rates and key sizes.
"""

from __future__ import annotations

import secrets

import numpy as np
import pytest

from pairwise.fss import (
    DCFKeyBatch,
    dcf_gen_batch,
    dcf_key_bytes,
    dpf_gen,
    dpf_gen_batch,
    reconstruct,
)

K = 100_000
N = L = 32


@pytest.fixture(scope="module")
def alphas():
    return np.frombuffer(secrets.token_bytes(8 * K), dtype=np.uint64) >> np.uint64(64 - N)


@pytest.fixture(scope="module")
def dcf_keys(alphas):
    return dcf_gen_batch(alphas, 1, N, L)


def _rate(benchmark, count):
    benchmark.extra_info["items"] = count
    if benchmark.stats is not None:  # None under --benchmark-disable
        benchmark.extra_info["items_per_s"] = count / benchmark.stats.stats.min


def test_dcf_gen_batch_32(benchmark, alphas):
    k0, k1 = benchmark.pedantic(dcf_gen_batch, args=(alphas, 1, N, L), rounds=3, iterations=1)
    assert len(k0) == K
    benchmark.extra_info["dcf_key_bytes"] = dcf_key_bytes(N, L)
    _rate(benchmark, K)


def test_dcf_serialize_32(benchmark, dcf_keys):
    blobs = benchmark.pedantic(dcf_keys[0].to_bytes_list, rounds=3, iterations=1)
    assert len(blobs) == K and len(blobs[0]) == dcf_key_bytes(N, L)
    _rate(benchmark, K)


def test_dcf_parse_32(benchmark, dcf_keys):
    blobs = dcf_keys[0].to_bytes_list()
    batch = benchmark.pedantic(
        DCFKeyBatch.from_bytes_list, args=(blobs,), kwargs=dict(n=N, l=L, party=0), rounds=3, iterations=1
    )
    assert len(batch) == K
    _rate(benchmark, K)


def test_dcf_eval_sum_32(benchmark, dcf_keys, alphas):
    k0, k1 = dcf_keys
    t = secrets.randbits(N)
    y0 = benchmark.pedantic(k0.eval_sum, args=(t,), rounds=5, iterations=1)
    assert reconstruct(y0, k1.eval_sum(t), L) == int(np.count_nonzero(np.uint64(t) < alphas))
    _rate(benchmark, K)


def test_dpf_gen_batch_32(benchmark, alphas):
    k0, _ = benchmark.pedantic(dpf_gen_batch, args=(alphas, 1, N, L), rounds=3, iterations=1)
    assert len(k0) == K
    _rate(benchmark, K)


def test_dpf_eval_sum_32(benchmark, alphas):
    k0, k1 = dpf_gen_batch(alphas, 1, N, L)
    x = int(alphas[0])
    y0 = benchmark.pedantic(k0.eval_sum, args=(x,), rounds=5, iterations=1)
    assert reconstruct(y0, k1.eval_sum(x), L) == int(np.count_nonzero(alphas == x))
    _rate(benchmark, K)


@pytest.mark.parametrize("n", [16, 20])
def test_dpf_full_domain(benchmark, n):
    alpha = secrets.randbits(n)
    k0, k1 = dpf_gen(alpha, 1, n, L)
    y0 = benchmark.pedantic(k0.full_domain, rounds=5, iterations=1)
    y = reconstruct(y0, k1.full_domain(), L)
    assert int(y[alpha]) == 1 and int(np.count_nonzero(y)) == 1
    _rate(benchmark, 1 << n)
