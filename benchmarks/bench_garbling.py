"""pytest-benchmark suite for the half-gates engine (mpc.garble).

Run::

    .venv/bin/pytest benchmarks/bench_garbling.py --benchmark-only
    .venv/bin/pytest benchmarks/bench_garbling.py --benchmark-only -k "aes and 1024"

Each benchmark times one garble() (tables into a buffer reused across rounds,
so page faults of fresh memory are not counted) or one evaluate(), and
stores ``mands`` (millions of AND gates per second of the mean round) in
``extra_info``.  Correctness is asserted after the timed rounds.  Cases follow
the garbling issue: AES-128 with B = 1, 64, 1024; gini 32-bit with B = 10^5;
a layer of 2^20 independent AND gates; one AES-128 garble + evaluate (B = 1).
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from garbling import and_layer_circuit  # noqa: E402

from pairwise.circuits.catalog import resolve_circuit  # noqa: E402
from pairwise.mpc.garble import Evaluator, Garbler, decode, garble_and_evaluate, split_outputs, table_bytes  # noqa: E402


@functools.cache
def _record(benchmark, key, from_mean) -> None:
    """Derived rate in extra_info; skipped under --benchmark-disable (no stats are collected)."""
    if benchmark.stats is not None:
        benchmark.extra_info[key] = from_mean(benchmark.stats.stats.mean)


def circuit(name: str):
    if name == "aes128":
        return resolve_circuit("aes128")
    if name == "gini32":
        return resolve_circuit("gini", 32)
    if name == "layer":
        return and_layer_circuit(1 << 20)
    raise KeyError(name)


CASES = [("aes128", 1), ("aes128", 64), ("aes128", 1024), ("gini32", 100_000), ("layer", 1)]


def _inputs(c, batch):
    rng = np.random.default_rng(0)
    return [rng.integers(0, 2, size=(batch, g.width)).astype(bool) for g in c.inputs]


def _check(c, bits, out, decode_bits):
    got = split_outputs(c, decode(out, decode_bits))
    want = c.evaluate_bits(bits)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("name,batch", CASES)
def test_garble(benchmark, name, batch):
    c = circuit(name)
    bits = _inputs(c, batch)
    buf = bytearray(table_bytes(c, batch))
    state = {}

    def setup():
        g = Garbler(c, batch)
        state["g"] = g
        return (g,), {}

    benchmark.pedantic(lambda g: g.garble(out=buf), setup=setup, rounds=3 if batch > 1 else 20, iterations=1)
    _record(benchmark, "mands", lambda mean: c.n_and * batch / mean / 1e6)
    g = state["g"]
    out = Evaluator(c, batch).evaluate(g.encode_all(bits), buf)
    _check(c, bits, out, g.decode_bits)


@pytest.mark.parametrize("name,batch", CASES)
def test_evaluate(benchmark, name, batch):
    c = circuit(name)
    bits = _inputs(c, batch)
    g = Garbler(c, batch)
    active = g.encode_all(bits)
    gc = g.garble()
    ev = Evaluator(c, batch)
    out = benchmark.pedantic(ev.evaluate, args=(active, gc), rounds=3 if batch > 1 else 20, iterations=1)
    _record(benchmark, "mands", lambda mean: c.n_and * batch / mean / 1e6)
    _check(c, bits, out, g.decode_bits)


def test_aes128_garble_and_evaluate_latency(benchmark):
    c = circuit("aes128")
    bits = _inputs(c, 1)
    out = benchmark.pedantic(garble_and_evaluate, args=(c, bits), rounds=30, iterations=1)
    assert np.array_equal(out[0], c.evaluate_bits(bits)[0])
    _record(benchmark, "ms", lambda mean: mean * 1e3)
