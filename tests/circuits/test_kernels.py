"""Tests of circuits.kernels against direct numpy formulas and scipy U-statistics.

Kernels of ustats-local-model-and-beyond (Eq. 4, 6, 7, Sec. 2): each circuit
is evaluated on a batch of hypothesis-drawn pairs plus every pair of edge
values (min, min+1, -1, 0, 1, max-1, max), and compared with formulas
written here on exact integers (numpy object arrays).  Summed over all pairs
of a small sample, the circuit outputs must reproduce the U-statistics that
scipy / exact fractions compute directly: Mann-Whitney U (AUC), Kendall's
tau-a, Gini mean difference, sample variance and collision probability.
"""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction
from math import comb

import numpy as np
import pytest
import scipy.stats
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pairwise.circuits.ir import EVALUATOR, GARBLER, CircuitError
from pairwise.circuits.kernels import (
    KERNELS,
    auc,
    build_kernel,
    collision,
    gini,
    kendall,
    kernel_reference,
    pack_pair,
    variance,
)

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WIDTH = st.integers(8, 64)


def lohi(w: int, signed: bool) -> tuple[int, int]:
    return (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)


def edges(w: int, signed: bool) -> list[int]:
    lo, hi = lohi(w, signed)
    return sorted({v for v in (lo, lo + 1, -1, 0, 1, hi - 1, hi) if lo <= v <= hi})


def values(w: int, signed: bool, n: int):
    lo, hi = lohi(w, signed)
    return st.lists(st.one_of(st.sampled_from(edges(w, signed)), st.integers(lo, hi)), min_size=n, max_size=n)


def obj(v) -> np.ndarray:
    return np.array([int(a) for a in v], dtype=object)


# Our own formulas, on exact integers.
def f_gini(x, y):
    return np.abs(obj(x) - obj(y))


def f_auc(x, y):
    x, y = obj(x), obj(y)
    return 2 * (x > y).astype(np.int64) + (x == y).astype(np.int64)


def f_variance(x, y):
    d = obj(x) - obj(y)
    return (d * d) // 2


def f_collision(x, y):
    return (obj(x) == obj(y)).astype(np.int64)


def f_sign(d):
    return (d > 0).astype(np.int64) - (d < 0).astype(np.int64)


def f_kendall(x1, y1, x2, y2):
    return f_sign(obj(x1) - obj(x2)) * f_sign(obj(y1) - obj(y2))


FORMULAS = {"gini": f_gini, "auc": f_auc, "variance": f_variance, "collision": f_collision}
# (output width, output signed) as documented in circuits.kernels
OUT_TYPE = {
    "gini": lambda w: (w, False),
    "auc": lambda w: (2, False),
    "kendall": lambda w: (2, True),
    "variance": lambda w: (2 * w + 1, False),
    "collision": lambda w: (1, False),
}
BUDGET = {
    "gini": lambda w: 2 * w + 2,
    "auc": lambda w: 2 * w + 2,
    "kendall": lambda w: 4 * w + 8,
    "variance": lambda w: w * w + 3 * w,
    "collision": lambda w: w,
}


@functools.cache
def kernel(name: str, w: int, signed: bool):
    return build_kernel(name, w, signed)


def ints(col) -> list[int]:
    return [int(v) for v in col]


# ---------------------------------------------------------------------- two-input kernels
@pytest.mark.parametrize("name", sorted(FORMULAS))
@SETTINGS
@given(data=st.data(), w=WIDTH, signed=st.booleans())
@example(data=None, w=8, signed=False)
@example(data=None, w=8, signed=True)
@example(data=None, w=63, signed=True)
@example(data=None, w=64, signed=True)
@example(data=None, w=64, signed=False)
def test_two_input_kernel(name, data, w, signed):
    c = kernel(name, w, signed)
    pairs = list(itertools.product(edges(w, signed), repeat=2))
    if data is not None:
        xs = data.draw(values(w, signed, 16))
        ys = data.draw(values(w, signed, 16))
        pairs += list(zip(xs, ys)) + [(v, v) for v in xs[:4]]  # ties matter for auc and collision
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    got = ints(c.evaluate(xs, ys)[0])
    assert got == FORMULAS[name](xs, ys).tolist()


@pytest.mark.parametrize("name", sorted(FORMULAS))
@SETTINGS
@given(data=st.data(), w=WIDTH, signed=st.booleans())
@example(data=None, w=64, signed=False)
@example(data=None, w=64, signed=True)
def test_kernel_reference_is_exact(name, data, w, signed):
    """kernel_reference (the plaintext baseline) agrees with the formulas here, also near 2^64."""
    pairs = list(itertools.product(edges(w, signed), repeat=2))
    if data is not None:
        pairs += list(zip(data.draw(values(w, signed, 8)), data.draw(values(w, signed, 8))))
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    ref = [int(v) for v in np.asarray(kernel_reference(name, xs, ys)).tolist()]
    assert ref == FORMULAS[name](xs, ys).tolist()


@SETTINGS
@given(data=st.data(), w=WIDTH, signed=st.booleans())
@example(data=None, w=8, signed=True)
@example(data=None, w=64, signed=True)
@example(data=None, w=64, signed=False)
def test_kendall_kernel(data, w, signed):
    kendall_edges_ok(w, signed)  # all (x1, y1, x2, y2) in edges^4, once per width and signedness
    if data is None:
        return
    c = kernel("kendall", w, signed)
    cols = [data.draw(values(w, signed, 24)) for _ in range(4)]
    cols[2][:3] = cols[0][:3]  # ties on x
    cols[3][3:6] = cols[1][3:6]  # ties on y
    check_kendall(c, w, signed, list(zip(*cols)))


@functools.cache
def kendall_edges_ok(w: int, signed: bool) -> bool:
    check_kendall(kernel("kendall", w, signed), w, signed, list(itertools.product(edges(w, signed), repeat=4)))
    return True


def check_kendall(c, w, signed, quads):
    x1, y1, x2, y2 = (list(t) for t in zip(*quads))
    p1 = [pack_pair(a, b, w, signed) for a, b in zip(x1, y1)]
    p2 = [pack_pair(a, b, w, signed) for a, b in zip(x2, y2)]
    got = ints(c.evaluate(p1, p2)[0])
    assert got == f_kendall(x1, y1, x2, y2).tolist()
    ref = kernel_reference("kendall", (x1, y1), (x2, y2))
    assert got == [int(v) for v in ref]


# ---------------------------------------------------------------------- circuit shape and budgets
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_interface_and_and_budget_every_width(name):
    for w in range(8, 65):
        for signed in (False, True):
            if name == "variance" and w % 3 and w not in (63, 64):
                continue  # ~w^2 gates: every third width (plus 63, 64) keeps the sweep fast
            c = kernel(name, w, signed) if w in (8, 63, 64) else build_kernel(name, w, signed)
            s = c.stats()
            assert s.and_gates <= BUDGET[name](w), (name, w, signed, s.and_gates)
            assert s.and_gates > 0
            assert s.bytes == 32 * s.and_gates
            x, y = c.inputs
            assert (x.name, x.party, y.name, y.party) == ("x", GARBLER, "y", EVALUATOR)
            in_w = 2 * w if name == "kendall" else w
            assert x.width == y.width == in_w
            if name != "kendall":
                assert x.signed == y.signed == signed
            (out,) = c.outputs
            assert out.name == "out"
            assert (out.width, out.signed) == OUT_TYPE[name](w)


def test_kernel_functions_match_build_kernel():
    for f, name in (
        (gini, "gini"),
        (auc, "auc"),
        (kendall, "kendall"),
        (variance, "variance"),
        (collision, "collision"),
    ):
        assert f(16, True).content_hash == build_kernel(name, 16, True).content_hash
        assert f(16, True).content_hash != f(16, False).content_hash
    assert gini().inputs[0].width == 32 and gini().inputs[0].signed is False  # defaults: 32-bit unsigned


@pytest.mark.parametrize("bad", [7, 65, 0, -8, 8.0, "8", None])
def test_bad_widths_rejected(bad):
    with pytest.raises(CircuitError):
        build_kernel("gini", bad)


def test_unknown_kernel_rejected():
    with pytest.raises(CircuitError, match="unknown kernel"):
        build_kernel("median", 16)
    with pytest.raises(CircuitError):
        kernel_reference("median", [1], [2])


@SETTINGS
@given(data=st.data(), w=WIDTH, signed=st.booleans())
def test_pack_pair(data, w, signed):
    lo, hi = lohi(w, signed)
    x = data.draw(st.integers(lo, hi))
    y = data.draw(st.integers(lo, hi))
    p = pack_pair(x, y, w, signed)
    assert p == (x % (1 << w)) + (y % (1 << w)) * (1 << w)
    assert 0 <= p < 1 << (2 * w)
    with pytest.raises(CircuitError):
        pack_pair(hi + 1, y, w, signed)
    with pytest.raises(CircuitError):
        pack_pair(x, lo - 1, w, signed)


# ---------------------------------------------------------------------- U-statistics over a sample
def all_pairs(n: int) -> tuple[list[int], list[int]]:
    i, j = zip(*itertools.combinations(range(n), 2))
    return list(i), list(j)


@pytest.mark.parametrize("signed", [False, True])
def test_auc_sums_to_mann_whitney_u(signed):
    w = 12
    rng = np.random.default_rng(2024)
    lo, hi = lohi(w, signed)
    pos = rng.integers(lo // 8, hi // 8, size=23).tolist()  # narrow range: ties happen
    neg = rng.integers(lo // 8, hi // 8, size=19).tolist()
    pos += [neg[0], neg[1]]  # certain ties
    xs, ys = zip(*itertools.product(pos, neg))
    k = ints(kernel("auc", w, signed).evaluate(list(xs), list(ys))[0])
    u = scipy.stats.mannwhitneyu(pos, neg, alternative="two-sided").statistic  # #(x>y) + ties/2
    assert Fraction(sum(k), 2) == Fraction(u).limit_denominator(4)
    assert sum(k) / (2 * len(pos) * len(neg)) == pytest.approx(u / (len(pos) * len(neg)), abs=1e-12)


@pytest.mark.parametrize("signed", [False, True])
def test_kendall_sums_to_tau_a(signed):
    w = 16
    n = 30
    rng = np.random.default_rng(77)
    lo, hi = lohi(w, signed)
    xs = rng.choice(np.arange(lo, hi + 1), size=n, replace=False).tolist()  # no ties: tau-a == tau-b
    ys = (np.array(xs) // 3 + rng.choice(np.arange(lo // 2, hi // 2), size=n, replace=False)).tolist()
    ys = [min(max(v, lo), hi) for v in ys]
    assert len(set(ys)) == n
    i, j = all_pairs(n)
    p1 = [pack_pair(xs[a], ys[a], w, signed) for a in i]
    p2 = [pack_pair(xs[b], ys[b], w, signed) for b in j]
    k = ints(kernel("kendall", w, signed).evaluate(p1, p2)[0])
    tau_a = sum(k) / comb(n, 2)
    assert tau_a == pytest.approx(scipy.stats.kendalltau(xs, ys).statistic, abs=1e-12)


@pytest.mark.parametrize("signed", [False, True])
def test_gini_variance_collision_u_statistics(signed):
    w = 20
    n = 40
    rng = np.random.default_rng(5)
    lo, hi = lohi(w, signed)
    xs = rng.integers(lo, hi + 1, size=n).tolist()
    xs[5] = xs[7] = xs[11]  # collisions
    xs[0], xs[1] = lo, hi  # extremes
    i, j = all_pairs(n)
    a, b = [xs[t] for t in i], [xs[t] for t in j]
    npairs = comb(n, 2)

    g = ints(kernel("gini", w, signed).evaluate(a, b)[0])
    gmd = Fraction(int(np.abs(np.subtract.outer(obj(xs), obj(xs))).sum()), n * (n - 1))
    assert Fraction(sum(g), npairs) == gmd

    # floor((x - y)^2 / 2) drops 1/2 exactly when x - y is odd, i.e. when the low bits differ.
    v = ints(kernel("variance", w, signed).evaluate(a, b)[0])
    parity = [(p ^ q) & 1 for p, q in zip(a, b)]
    mean = Fraction(sum(xs), n)
    sample_var = sum((Fraction(x) - mean) ** 2 for x in xs) / (n - 1)
    assert Fraction(2 * sum(v) + sum(parity), 2 * npairs) == sample_var
    assert float(sample_var) == pytest.approx(np.var(np.array(xs, dtype=np.float64), ddof=1), rel=1e-9)

    col = ints(kernel("collision", w, signed).evaluate(a, b)[0])
    _, counts = np.unique(xs, return_counts=True)
    assert Fraction(sum(col), npairs) == Fraction(int((counts * (counts - 1)).sum()), n * (n - 1))
    assert sum(col) == 3  # the three equal values form three pairs
