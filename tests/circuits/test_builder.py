"""Tests of circuits.builder: every operator against Python integers, folding, sharing, AND budgets.

Each (operator, width, signedness) circuit is built once (cached) and then
evaluated on a batch: the hypothesis-drawn values plus every pair of edge
values (min, min+1, -1, 0, 1, max-1, max), so overflow and sign corner cases
are checked in every example.  The reference is Python's unbounded integers,
reduced modulo 2^w where the operator wraps.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pairwise.circuits.builder import Builder, Int
from pairwise.circuits.ir import EVALUATOR, GARBLER, CircuitError

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# multiplication circuits are ~w^2 gates: fewer examples keep the file fast (each still checks 49 edge pairs)
HEAVY = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MULS = ("mul", "mul_full")
WIDTH = st.integers(1, 64)


# ---------------------------------------------------------------------- references
def lohi(w: int, signed: bool) -> tuple[int, int]:
    return (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)


def wrap(v: int, w: int, signed: bool) -> int:
    """v modulo 2^w, read as a w-bit two's complement or unsigned integer."""
    v &= (1 << w) - 1
    return v - (1 << w) if signed and v >> (w - 1) else v


def edges(w: int, signed: bool) -> list[int]:
    lo, hi = lohi(w, signed)
    return sorted({v for v in (lo, lo + 1, -1, 0, 1, hi - 1, hi) if lo <= v <= hi})


def sgn(v: int) -> int:
    return (v > 0) - (v < 0)


def values(w: int, signed: bool, max_size: int = 12):
    lo, hi = lohi(w, signed)
    return st.lists(st.one_of(st.sampled_from(edges(w, signed)), st.integers(lo, hi)), min_size=1, max_size=max_size)


BINARY = {
    "add": (lambda a, b: a + b, lambda x, y, w, s: wrap(x + y, w, s)),
    "sub": (lambda a, b: a - b, lambda x, y, w, s: wrap(x - y, w, s)),
    "mul": (lambda a, b: a * b, lambda x, y, w, s: wrap(x * y, w, s)),
    "xor": (lambda a, b: a ^ b, lambda x, y, w, s: wrap(x ^ y, w, s)),
    "and": (lambda a, b: a & b, lambda x, y, w, s: wrap(x & y, w, s)),
    "or": (lambda a, b: a | b, lambda x, y, w, s: wrap(x | y, w, s)),
    "lt": (lambda a, b: a < b, lambda x, y, w, s: int(x < y)),
    "le": (lambda a, b: a <= b, lambda x, y, w, s: int(x <= y)),
    "gt": (lambda a, b: a > b, lambda x, y, w, s: int(x > y)),
    "ge": (lambda a, b: a >= b, lambda x, y, w, s: int(x >= y)),
    "eq": (lambda a, b: a.eq(b), lambda x, y, w, s: int(x == y)),
    "ne": (lambda a, b: a.ne(b), lambda x, y, w, s: int(x != y)),
    "mul_full": (lambda a, b: a.mul_full(b), lambda x, y, w, s: x * y),
}

UNARY = {
    "neg": (lambda a: -a, lambda x, w, s: wrap(-x, w, s)),
    "abs": (lambda a: abs(a), lambda x, w, s: abs(x)),
    "sign": (lambda a: a.sign(), lambda x, w, s: sgn(x)),
    "invert": (lambda a: ~a, lambda x, w, s: wrap(~x, w, s)),
    "is_zero": (lambda a: a.is_zero(), lambda x, w, s: int(x == 0)),
    "nonzero": (lambda a: a.nonzero(), lambda x, w, s: int(x != 0)),
    "square": (lambda a: a.square(), lambda x, w, s: x * x),
}


@functools.cache
def binary_circuit(op: str, wa: int, sa: bool, wb: int, sb: bool):
    b = Builder(f"{op}")
    x = b.input("x", wa, GARBLER, sa)
    y = b.input("y", wb, EVALUATOR, sb)
    r = BINARY[op][0](x, y)
    b.output("r", r)
    return b.build(), r.width, r.signed


@functools.cache
def unary_circuit(op: str, w: int, s: bool):
    b = Builder(op)
    x = b.input("x", w, GARBLER, s)
    r = UNARY[op][0](x)
    b.output("r", r)
    return b.build(), r.width, r.signed


def run(c, *cols) -> list[int]:
    return [int(v) for v in c.evaluate(*[list(col) for col in cols])[0]]


# ---------------------------------------------------------------------- binary operators
def _binary_examples(f):
    for w, signed in ((1, True), (1, False), (2, True), (63, True), (64, True), (64, False)):
        f = example(data=None, w=w, signed=signed)(f)
    return f


@pytest.mark.parametrize("op", sorted(set(BINARY) - set(MULS)))
@SETTINGS
@given(data=st.data(), w=WIDTH, signed=st.booleans())
@_binary_examples
def test_binary_operator(op, data, w, signed):
    check_binary(op, data, w, signed)


@pytest.mark.parametrize("op", MULS)
@HEAVY
@given(data=st.data(), w=WIDTH, signed=st.booleans())
@_binary_examples
def test_binary_multiplication(op, data, w, signed):
    check_binary(op, data, w, signed)


def check_binary(op, data, w, signed):
    c, rw, rs = binary_circuit(op, w, signed, w, signed)
    ref = BINARY[op][1]
    if op == "mul_full":
        assert (rw, rs) == (2 * w, signed)
    elif op in ("lt", "le", "gt", "ge", "eq", "ne"):
        assert (rw, rs) == (1, False)
    else:
        assert (rw, rs) == (w, signed)
    pairs = list(itertools.product(edges(w, signed), repeat=2))
    if data is not None:
        xs = data.draw(values(w, signed))
        ys = data.draw(st.lists(st.integers(*lohi(w, signed)), min_size=len(xs), max_size=len(xs)))
        pairs += list(zip(xs, ys))
    xs, ys = zip(*pairs)
    got = run(c, xs, ys)
    want = [ref(x, y, rw, rs) for x, y in pairs]
    assert got == want


def _mixed_examples(f):
    for wa, wb, sa, sb in (
        (64, 64, True, False),
        (64, 1, False, True),
        (1, 64, True, True),
        (8, 8, False, True),
        (63, 5, True, False),
    ):
        f = example(data=None, wa=wa, wb=wb, sa=sa, sb=sb)(f)
    return f


@pytest.mark.parametrize("op", ["add", "sub", "lt", "le", "gt", "ge", "eq", "ne"])
@SETTINGS
@given(data=st.data(), wa=WIDTH, wb=WIDTH, sa=st.booleans(), sb=st.booleans())
@_mixed_examples
def test_mixed_width_and_signedness(op, data, wa, wb, sa, sb):
    """Comparisons are exact for any mix; arithmetic wraps at the wider width (signed if either is)."""
    check_mixed(op, data, wa, wb, sa, sb)


@pytest.mark.parametrize("op", MULS)
@HEAVY
@given(data=st.data(), wa=WIDTH, wb=WIDTH, sa=st.booleans(), sb=st.booleans())
@_mixed_examples
def test_mixed_width_multiplication(op, data, wa, wb, sa, sb):
    check_mixed(op, data, wa, wb, sa, sb)


def check_mixed(op, data, wa, wb, sa, sb):
    if op == "mul_full":
        wa, wb = min(wa, 40), min(wb, 40)  # keep the build small; the property is width-independent
    c, rw, rs = binary_circuit(op, wa, sa, wb, sb)
    pairs = list(itertools.product(edges(wa, sa), edges(wb, sb)))
    if data is not None:
        xs = data.draw(values(wa, sa))
        ys = data.draw(st.lists(st.integers(*lohi(wb, sb)), min_size=len(xs), max_size=len(xs)))
        pairs += list(zip(xs, ys))
    xs, ys = zip(*pairs)
    got = run(c, xs, ys)
    if op == "mul_full":
        assert rw == wa + wb and rs == (sa or sb)
        assert got == [x * y for x, y in pairs]  # exact product
    elif op in ("lt", "le", "gt", "ge", "eq", "ne"):
        assert got == [BINARY[op][1](x, y, 1, False) for x, y in pairs]
    else:
        assert (rw, rs) == (max(wa, wb), sa or sb)
        assert got == [BINARY[op][1](x, y, rw, rs) for x, y in pairs]


# ---------------------------------------------------------------------- unary operators
@pytest.mark.parametrize("op", sorted(UNARY))
@SETTINGS
@given(data=st.data(), w=WIDTH, signed=st.booleans())
@example(data=None, w=1, signed=True)
@example(data=None, w=2, signed=True)
@example(data=None, w=63, signed=True)
@example(data=None, w=64, signed=True)
@example(data=None, w=64, signed=False)
def test_unary_operator(op, data, w, signed):
    if op == "square" and signed:
        signed = False
    c, rw, rs = unary_circuit(op, w, signed)
    xs = edges(w, signed) + (data.draw(values(w, signed)) if data is not None else [])
    got = run(c, xs)
    assert got == [UNARY[op][1](x, rw, rs) for x in xs]
    if op == "abs":
        assert (rw, rs) == (w, False)  # |MIN| = 2^(w-1) fits unsigned
    if op == "sign":
        assert (rw, rs) == (2, True)
    if op == "square":
        assert (rw, rs) == (2 * w, False)


@pytest.mark.parametrize("lo_bits, hi_bits", [(1, 0), (0, 1), (3, 1), (2, 2), (5, 3), (7, 0)])
def test_square_with_constant_bits(lo_bits, hi_bits):
    """Constant bits fold into the squaring columns (the constant path of sum_columns)."""
    for w in (1, 2, 5, 9):
        b = Builder()
        x = b.input("x", w, GARBLER)
        lo = b.const(lo_bits, 3)
        hi = b.const(hi_bits, 2)
        v = b.concat(lo, x, hi)  # value = lo + x * 8 + hi * 2^(w+3)
        b.output("sq", v.square())
        b.output("sq_sum", (v | 1).square())
        c = b.build()
        xs = list(range(1 << w))
        sq, sq1 = c.evaluate(xs)
        vals = [lo_bits + xv * 8 + hi_bits * (1 << (w + 3)) for xv in xs]
        assert [int(q) for q in sq] == [v_ * v_ for v_ in vals]
        assert [int(q) for q in sq1] == [(v_ | 1) ** 2 for v_ in vals]


def test_square_of_signed_rejected():
    b = Builder()
    x = b.input("x", 8, GARBLER, signed=True)
    with pytest.raises(CircuitError):
        x.square()


# ---------------------------------------------------------------------- mux
@functools.cache
def mux_circuit(w: int, sx: bool, wb: int, sy: bool):
    b = Builder("mux")
    c = b.input("c", 1, GARBLER)
    x = b.input("x", w, GARBLER, sx)
    y = b.input("y", wb, EVALUATOR, sy)
    r = c.mux(x, y)
    r2 = b.mux(c, y, x)  # Builder.mux is the same operator
    b.output("r", r)
    b.output("r2", r2)
    return b.build(), r.width, r.signed


@SETTINGS
@given(data=st.data(), w=WIDTH, wb=WIDTH, sx=st.booleans(), sy=st.booleans())
@example(data=None, w=64, wb=64, sx=True, sy=True)
@example(data=None, w=1, wb=1, sx=False, sy=False)
@example(data=None, w=64, wb=3, sx=True, sy=True)
@example(data=None, w=64, wb=64, sx=False, sy=True)
@example(data=None, w=1, wb=1, sx=False, sy=True)
def test_mux(data, w, wb, sx, sy):
    """where(c, x, y) returns x or y exactly, for any widths and signedness."""
    circ, rw, rs = mux_circuit(w, sx, wb, sy)
    if sx == sy:
        assert (rw, rs) == (max(w, wb), sx)  # no widening when the types agree: w ANDs
    pairs = list(itertools.product(edges(w, sx), edges(wb, sy)))
    if data is not None:
        xs = data.draw(values(w, sx))
        ys = data.draw(st.lists(st.integers(*lohi(wb, sy)), min_size=len(xs), max_size=len(xs)))
        pairs += list(zip(xs, ys))
    for cbit in (0, 1):
        xs, ys = zip(*pairs)
        r, r2 = circ.evaluate([cbit] * len(pairs), list(xs), list(ys))
        assert [int(v) for v in r] == [x if cbit else y for x, y in pairs]
        assert [int(v) for v in r2] == [y if cbit else x for x, y in pairs]


@SETTINGS
@given(data=st.data(), w=WIDTH, signed=st.booleans(), k=st.integers(-(1 << 70), 1 << 70))
@example(data=None, w=8, signed=False, k=-1)
@example(data=None, w=8, signed=True, k=255)
@example(data=None, w=1, signed=False, k=-(1 << 70))
def test_mux_with_a_constant(data, w, signed, k):
    b = Builder()
    c = b.input("c", 1, GARBLER)
    x = b.input("x", w, EVALUATOR, signed)
    b.output("kx", c.mux(k, x))
    b.output("xk", c.mux(x, k))
    circ = b.build()
    xs = edges(w, signed) + (data.draw(values(w, signed)) if data is not None else [])
    for cbit in (0, 1):
        kx, xk = circ.evaluate([cbit] * len(xs), xs)
        assert [int(v) for v in kx] == [k if cbit else xv for xv in xs]
        assert [int(v) for v in xk] == [xv if cbit else k for xv in xs]


def test_mux_condition_must_be_one_bit():
    b = Builder()
    c = b.input("c", 2, GARBLER)
    x = b.input("x", 4, EVALUATOR)
    with pytest.raises(CircuitError, match="1 bit"):
        c.mux(x, x)


def test_where_with_constants():
    b = Builder()
    x = b.input("x", 8, GARBLER, signed=True)
    b.output("r", (x < 0).mux(-1, 1))  # sign without zero, via constants
    c = b.build()
    xs = edges(8, True) + [-5, 17]
    assert run(c, xs) == [-1 if v < 0 else 1 for v in xs]


def test_mux_with_mixed_signedness_returns_an_operand():
    """where(c, a, b) must return a or b exactly, whatever the operands' signedness."""
    b = Builder()
    c = b.input("c", 1, GARBLER)
    x = b.input("x", 8, GARBLER)  # unsigned: 200 does not fit a signed byte
    y = b.input("y", 8, EVALUATOR, signed=True)
    b.output("r", c.mux(x, y))
    circ = b.build()
    pairs = list(itertools.product(edges(8, False) + [200], edges(8, True)))
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    for cbit in (0, 1):
        got = run(circ, [cbit] * len(pairs), xs, ys)
        assert got == [xv if cbit else yv for xv, yv in pairs]


# ---------------------------------------------------------------------- shifts, slices, concatenation, extension
@functools.cache
def bitops_circuit(w: int, s: bool, k: int, i: int, j: int, ext: int):
    b = Builder("bits")
    x = b.input("x", w, GARBLER, s)
    y = b.input("y", 5, EVALUATOR, s)
    b.output("shl", x << k)
    b.output("shr", x >> k)
    b.output("slice", x[i:j])
    b.output("bit", x[i])
    b.output("cat", b.concat(x, y))
    b.output("cat_s", b.concat(y, x, signed=True))
    b.output("ext", x.extend(ext))
    return b.build()


@SETTINGS
@given(data=st.data(), w=WIDTH, signed=st.booleans())
@example(data=None, w=64, signed=True)
@example(data=None, w=1, signed=True)
def test_shifts_slices_concat_extend(data, w, signed):
    if data is None:
        k, i, j, ext = w, 0, w, 2 * w
    else:
        k = data.draw(st.integers(0, w + 2), label="k")
        i = data.draw(st.integers(0, w - 1), label="i")
        j = data.draw(st.integers(i + 1, w), label="j")
        ext = data.draw(st.integers(1, 80), label="ext")
    c = bitops_circuit(w, signed, k, i, j, ext)
    assert c.stats().and_gates == 0  # all of these are free
    xs = edges(w, signed) + (data.draw(values(w, signed)) if data is not None else [])
    ys = [(-3 if signed else 3) + 2 * (n % 3) for n in range(len(xs))]
    outs = c.evaluate(xs, ys)
    res = [[int(v) for v in o] for o in outs]
    m = (1 << w) - 1
    for n, (x, y) in enumerate(zip(xs, ys)):
        assert res[0][n] == wrap(x << k, w, signed)
        assert res[1][n] == x >> k  # arithmetic for signed, logical for unsigned
        assert res[2][n] == ((x & m) >> i) & ((1 << (j - i)) - 1)
        assert res[3][n] == ((x & m) >> i) & 1
        assert res[4][n] == (x & m) | ((y & 31) << w)
        assert res[5][n] == wrap((y & 31) | ((x & m) << 5), w + 5, True)
        assert res[6][n] == wrap(x, ext, signed)


def test_shift_amount_must_be_non_negative():
    b = Builder()
    x = b.input("x", 8, GARBLER)
    with pytest.raises(CircuitError):
        x << -1
    with pytest.raises(CircuitError):
        x >> -1


def test_empty_slice_rejected():
    b = Builder()
    x = b.input("x", 8, GARBLER)
    with pytest.raises(CircuitError):
        x[3:3]


# ---------------------------------------------------------------------- constants
CONST_OPS = {
    "add": (lambda a, k: a + k, lambda x, k: x + k),
    "radd": (lambda a, k: k + a, lambda x, k: k + x),
    "sub": (lambda a, k: a - k, lambda x, k: x - k),
    "rsub": (lambda a, k: k - a, lambda x, k: k - x),
    "mul": (lambda a, k: a * k, lambda x, k: x * k),
    "rmul": (lambda a, k: k * a, lambda x, k: k * x),
    "lt": (lambda a, k: a < k, lambda x, k: int(x < k)),
    "ge": (lambda a, k: a >= k, lambda x, k: int(x >= k)),
    "gt": (lambda a, k: a > k, lambda x, k: int(x > k)),
    "le": (lambda a, k: a <= k, lambda x, k: int(x <= k)),
    "eq": (lambda a, k: a.eq(k), lambda x, k: int(x == k)),
    "ne": (lambda a, k: a.ne(k), lambda x, k: int(x != k)),
}


@pytest.mark.parametrize("op", sorted(CONST_OPS))
@settings(max_examples=40, deadline=None)
@given(data=st.data(), w=st.integers(1, 40), signed=st.booleans(), k=st.integers(-(1 << 42), 1 << 42))
@example(data=None, w=8, signed=False, k=-1)
@example(data=None, w=8, signed=True, k=-128)
@example(data=None, w=8, signed=True, k=128)
@example(data=None, w=8, signed=False, k=0)
@example(data=None, w=4, signed=False, k=1000)
def test_operations_with_python_constants(op, data, w, signed, k):
    """Constants fold into the gates; results wrap at the result's width, comparisons are exact."""
    b = Builder()
    x = b.input("x", w, GARBLER, signed)
    r = CONST_OPS[op][0](x, k)
    b.output("r", r)
    c = b.build()
    xs = edges(w, signed) + (data.draw(values(w, signed)) if data is not None else [])
    got = run(c, xs)
    if op in ("lt", "ge", "gt", "le", "eq", "ne"):
        assert got == [CONST_OPS[op][1](x, k) for x in xs]
    else:
        assert got == [wrap(CONST_OPS[op][1](x, k), r.width, r.signed) for x in xs]
        if (lohi(w, signed)[0] <= k <= lohi(w, signed)[1]) and not (k < 0 and not signed):
            assert r.width == w  # a constant that fits does not widen the result


def test_constants_fold_to_no_gates():
    b = Builder()
    x = b.input("x", 16, GARBLER)
    k = b.const(1234, 16) + b.const(4321, 16)
    b.output("k", k)
    b.output("k2", b.const(-7, 8, signed=True) * b.const(3, 8, signed=True))
    b.output("ltc", b.const(3, 8) < b.const(4, 8))
    b.output("x0", x + 0)
    b.output("x1", x * 1)
    b.output("z", x * 0)
    b.output("xx", x ^ x)
    b.output("eqxx", x.eq(x))
    b.output("ltxx", x < x)
    b.output("andx", x & x)
    b.output("inv2", ~~x)
    c = b.build()
    assert c.stats().and_gates == 0
    outs = c.evaluate([0, 0xBEEF])
    for n, xv in enumerate((0, 0xBEEF)):
        got = [int(o[n]) for o in outs]
        assert got == [1234 + 4321, -21, 1, xv, xv, 0, 0, 1, 0, xv, xv]


def test_constant_multiplication_is_cheaper():
    b = Builder()
    x = b.input("x", 16, GARBLER)
    b.output("r", x * 5)  # 5 = 0b101: one shifted add
    c = b.build()
    assert c.stats().and_gates <= 16
    assert run(c, [0, 1, 65535, 1000]) == [0, 5, (65535 * 5) % 65536, 5000]


def test_const_range_checked():
    b = Builder()
    with pytest.raises(CircuitError):
        b.const(256, 8)
    with pytest.raises(CircuitError):
        b.const(-1, 8)
    with pytest.raises(CircuitError):
        b.const(128, 8, signed=True)
    assert b.const(-128, 8, signed=True).bits == (0,) * 7 + (1,)


def test_identical_gates_are_shared():
    w = 16
    b = Builder()
    x = b.input("x", w, GARBLER)
    y = b.input("y", w, EVALUATOR)
    b.output("a", x + y)
    b.output("b", x + y)
    b.output("c", y + x)  # operand order does not matter for XOR/AND
    c = b.build()
    assert c.stats().and_gates == w - 1
    assert b.and_count() == w - 1


def test_dead_gates_removed():
    b = Builder()
    x = b.input("x", 16, GARBLER)
    y = b.input("y", 16, EVALUATOR)
    _ = x * y  # never output
    b.output("lt", x < y)
    c = b.build()
    assert b.and_count() > 100
    assert c.stats().and_gates == 16


# ---------------------------------------------------------------------- builder API errors and layout
def test_input_requires_a_party():
    b = Builder()
    with pytest.raises(TypeError):
        b.input("x", 8)  # no default party
    with pytest.raises(CircuitError, match="party"):
        b.input("x", 8, None)
    with pytest.raises(ValueError):
        b.input("x", 8, "alice")


def test_builder_errors():
    b = Builder()
    with pytest.raises(CircuitError):
        b.build()  # no outputs (and no inputs)
    x = b.input("x", 8, GARBLER)
    with pytest.raises(CircuitError):
        b.input("x", 4, EVALUATOR)  # duplicate name
    with pytest.raises(CircuitError):
        b.input("z", 0, EVALUATOR)
    b.output("o", x)
    with pytest.raises(CircuitError):
        b.output("o", x)  # duplicate output
    other = Builder()
    y = other.input("y", 8, EVALUATOR)
    with pytest.raises(CircuitError):
        x + y
    with pytest.raises(CircuitError):
        b.output("p", y)
    with pytest.raises(TypeError):
        x + 1.5
    with pytest.raises(CircuitError):
        Int(b, [])


def test_builder_circuit_layout_and_special_outputs():
    b = Builder("layout")
    x = b.input("x", 4, GARBLER, signed=True)
    y = b.input("y", 4, EVALUATOR)
    b.output("x_itself", x)  # an input wire as output
    b.output("twice", b.concat(y[0], y[0], x[3]))  # one wire appearing twice
    b.output("k", b.const(-3, 4, signed=True))
    b.output("s", (x + y)[0:4])
    c = b.build()
    n_out = sum(g.width for g in c.outputs)
    assert c.n_wires == c.n_inputs + c.n_gates  # Bristol Fashion layout
    assert np.array_equal(np.concatenate([g.wires for g in c.outputs]), np.arange(c.n_wires - n_out, c.n_wires))
    assert [g.signed for g in c.outputs] == [True, False, True, False]
    for xv in edges(4, True):
        for yv in (0, 5, 15):
            o = c.evaluate(xv, yv)
            assert o[0] == xv
            assert o[1] == (yv & 1) * 3 + ((xv & 15) >> 3) * 4
            assert o[2] == -3
            assert o[3] == (xv + yv) & 15


# ---------------------------------------------------------------------- AND budgets (issue 2)
def _count(w: int, s: bool, f) -> int:
    b = Builder()
    x = b.input("x", w, GARBLER, s)
    y = b.input("y", w, EVALUATOR, s)
    c = b.input("c", 1, GARBLER)
    b.output("r", f(x, y, c))
    return b.build().stats().and_gates


BUDGETS = {
    "add": (lambda x, y, c: x + y, lambda w: w),
    "sub": (lambda x, y, c: x - y, lambda w: w),
    "neg": (lambda x, y, c: -x, lambda w: w),
    "lt": (lambda x, y, c: x < y, lambda w: w),
    "le": (lambda x, y, c: x <= y, lambda w: w),
    "gt": (lambda x, y, c: x > y, lambda w: w),
    "ge": (lambda x, y, c: x >= y, lambda w: w),
    "eq": (lambda x, y, c: x.eq(y), lambda w: w - 1),
    "ne": (lambda x, y, c: x.ne(y), lambda w: w - 1),
    "mux": (lambda x, y, c: c.mux(x, y), lambda w: w),
    "abs": (lambda x, y, c: abs(x), lambda w: w),
    "sign": (lambda x, y, c: x.sign(), lambda w: w),
}


@pytest.mark.parametrize("op", sorted(BUDGETS))
def test_and_budget_sweep(op):
    f, budget = BUDGETS[op]
    for w in range(1, 65):
        for s in (False, True):
            n = _count(w, s, f)
            assert n <= budget(w), (op, w, s, n)
            if op in ("lt", "mux") or (op in ("add", "sub") and w > 1):
                assert n > 0  # the count is real, not folded away by mistake


@pytest.mark.parametrize("w", list(range(1, 17)) + [24, 31, 32, 33, 48, 63, 64])
def test_and_budget_multiplication(w):
    for s in (False, True):
        n = _count(w, s, lambda x, y, c: x * y)
        assert 0 < n <= w * w, (w, s, n)
    b = Builder()
    x = b.input("x", w, GARBLER)
    b.output("sq", x.square())
    assert b.build().stats().and_gates <= w * w
