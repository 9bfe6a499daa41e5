"""Tests of circuits.ir: validation, evaluation, level schedule, stats, hashing, export.

References are independent of the code under test: a gate-by-gate Python
evaluator that walks the gate arrays in file order (bit-sliced over the batch
with Python ints), a straightforward depth / AND-depth recursion, and the
truth tables of small hand-written circuits.  Random circuits come from
hypothesis, so the level scheduler is exercised on shapes nobody wrote by hand.

Tests that start processes are in tests/system/test_circuit_ir_processes.py.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pairwise.circuits.bristol import read_bristol_fashion
from pairwise.circuits.builder import Builder
from pairwise.circuits.ir import (
    AND,
    EVALUATOR,
    GARBLER,
    INV,
    XOR,
    Circuit,
    CircuitError,
    InputGroup,
    OutputGroup,
    Party,
    bits_to_ints,
    ints_to_bits,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------- independent references
def reference_eval(c: Circuit, bits: list[np.ndarray]) -> list[np.ndarray]:
    """Gate-by-gate evaluation in array order; a wire's value is a Python int, bit i = instance i."""
    batch = bits[0].shape[0]
    full = (1 << batch) - 1
    val: dict[int, int] = {}
    for g, b in zip(c.inputs, bits):
        for j, w in enumerate(g.wires.tolist()):
            col = b[:, j]
            val[w] = sum(1 << i for i in range(batch) if col[i])
    for o, a, bb, w in zip(c.op.tolist(), c.in0.tolist(), c.in1.tolist(), c.out.tolist()):
        if o == XOR:
            val[w] = val[a] ^ val[bb]
        elif o == AND:
            val[w] = val[a] & val[bb]
        elif o == INV:
            val[w] = val[a] ^ full
        else:  # pragma: no cover - the constructor rejects this
            raise AssertionError(o)
    outs = []
    for g in c.outputs:
        cols = [[(val[w] >> i) & 1 for i in range(batch)] for w in g.wires.tolist()]
        outs.append(np.array(cols, dtype=bool).T.reshape(batch, g.width))
    return outs


def reference_depths(c: Circuit) -> tuple[int, int]:
    """(depth, AND-depth) by the textbook recursion over wires."""
    d = [0] * c.n_wires
    ad = [0] * c.n_wires
    depth = and_depth = 0
    for o, a, b, w in zip(c.op.tolist(), c.in0.tolist(), c.in1.tolist(), c.out.tolist()):
        srcs = (a,) if o == INV else (a, b)
        d[w] = 1 + max(d[s] for s in srcs)
        ad[w] = max(ad[s] for s in srcs) + (1 if o == AND else 0)
        depth = max(depth, d[w])
        and_depth = max(and_depth, ad[w])
    return depth, and_depth


def check_levels_contract(c: Circuit) -> None:
    """The schedule contract engines rely on (see Circuit.levels)."""
    n_in = c.n_inputs
    ready = np.zeros(c.n_wires, dtype=bool)
    ready[:n_in] = True
    seen = []  # (op, in0, in1, out) of scheduled gates
    and_levels = 0
    next_and = 0
    for lv in c.levels:
        # AND gates read only wires from earlier levels.
        assert ready[lv.and_in0].all() and ready[lv.and_in1].all()
        assert np.array_equal(lv.and_index, np.arange(next_and, next_and + lv.n_and))
        next_and += lv.n_and
        if lv.n_and:
            and_levels += 1
        ready[lv.and_out] = True
        # XOR/INV run after the level's ANDs and never read each other's outputs.
        assert ready[lv.xor_in0].all() and ready[lv.xor_in1].all()
        assert ready[lv.inv_in].all()
        ready[lv.xor_out] = True
        ready[lv.inv_out] = True
        seen += [(AND, a, b, w) for a, b, w in zip(lv.and_in0.tolist(), lv.and_in1.tolist(), lv.and_out.tolist())]
        seen += [(XOR, a, b, w) for a, b, w in zip(lv.xor_in0.tolist(), lv.xor_in1.tolist(), lv.xor_out.tolist())]
        seen += [(INV, a, w) for a, w in zip(lv.inv_in.tolist(), lv.inv_out.tolist())]
    gates = []
    for o, a, b, w in zip(c.op.tolist(), c.in0.tolist(), c.in1.tolist(), c.out.tolist()):
        gates.append((INV, a, w) if o == INV else (o, a, b, w))
    # Every gate exactly once (outputs are unique, so sorting compares multisets).
    assert sorted(seen) == sorted(gates)
    assert len(seen) == c.n_gates
    assert next_and == c.stats().and_gates
    assert and_levels == c.stats().and_depth


# ---------------------------------------------------------------------- a hand-written circuit
def full_adder() -> Circuit:
    """sum, carry and NOT carry of a + b + cin (one AND)."""
    op = [XOR, XOR, XOR, AND, XOR, INV]
    in0 = [0, 1, 3, 3, 6, 7]
    in1 = [2, 2, 1, 4, 2, 7]
    out = [3, 4, 5, 6, 7, 8]
    inputs = [
        InputGroup("a", GARBLER, np.array([0])),
        InputGroup("b", EVALUATOR, np.array([1])),
        InputGroup("cin", EVALUATOR, np.array([2])),
    ]
    outputs = [
        OutputGroup("sum", np.array([5])),
        OutputGroup("carry", np.array([7])),
        OutputGroup("ncarry", np.array([8])),
    ]
    return Circuit(9, op, in0, in1, out, inputs, outputs, name="fa")


def test_full_adder_truth_table():
    c = full_adder()
    for a in (0, 1):
        for b in (0, 1):
            for ci in (0, 1):
                s, carry, ncarry = c.evaluate(a, b, ci)
                assert s == (a + b + ci) & 1
                assert carry == (a + b + ci) >> 1
                assert ncarry == 1 - carry


def test_full_adder_batched_and_types():
    c = full_adder()
    a, b, ci = [0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 0, 0, 1, 1], [0, 1, 0, 1, 0, 1, 0, 1]
    s, carry, _ = c.evaluate(a, b, ci)
    assert [int(v) for v in s] == [(x + y + z) & 1 for x, y, z in zip(a, b, ci)]
    assert [int(v) for v in carry] == [(x + y + z) >> 1 for x, y, z in zip(a, b, ci)]
    scalar = c.evaluate(1, 1, 1)
    assert all(type(v) is int for v in scalar)


def test_full_adder_stats():
    st_ = full_adder().stats()
    assert (st_.and_gates, st_.xor_gates, st_.inv_gates) == (1, 4, 1)
    assert st_.depth == 4  # a^c -> (a^c)&(b^c) -> ^c -> INV
    assert st_.and_depth == 1
    assert st_.bytes == 32
    assert st_.wires == 9 and st_.input_bits == 3 and st_.output_bits == 3
    d = st_.as_dict()
    assert d["and"] == 1 and d["xor"] == 4 and d["inv"] == 1 and d["bytes"] == 32 and d["and_depth"] == 1


def test_groups_and_parties():
    c = full_adder()
    assert [g.name for g in c.groups_of(GARBLER)] == ["a"]
    assert [g.name for g in c.groups_of("evaluator")] == ["b", "cin"]
    assert c.input_group("cin").party is Party.EVALUATOR
    with pytest.raises(KeyError):
        c.input_group("nope")


def test_arrays_are_read_only_copies():
    op = [XOR]
    c = Circuit(3, op, [0], [1], [2], [InputGroup("x", GARBLER, np.array([0, 1]))], [OutputGroup("o", np.array([2]))])
    op[0] = AND  # mutating the caller's list does not reach the circuit
    assert c.op.tolist() == [XOR]
    for arr in (c.op, c.in0, c.in1, c.out, c.inputs[0].wires, c.outputs[0].wires):
        with pytest.raises(ValueError):
            arr[0] = 1


# ---------------------------------------------------------------------- validation
def _circ(n_wires, op, in0, in1, out, inputs=None, outputs=None):
    inputs = inputs if inputs is not None else [InputGroup("x", GARBLER, np.array([0, 1]))]
    outputs = outputs if outputs is not None else [OutputGroup("o", np.array([out[-1]]))]
    return Circuit(n_wires, op, in0, in1, out, inputs, outputs)


def test_valid_minimal():
    assert _circ(3, [AND], [0], [1], [2]).evaluate(3) == [1]


@pytest.mark.parametrize(
    "args, match",
    [
        ((4, [XOR], [0], [3], [2]), "used before it is set"),  # reads a wire nobody writes
        ((4, [XOR, AND], [0, 3], [1, 0], [2, 3]), "used before it is set"),  # gate 0 reads gate 1's output
        ((5, [XOR, AND, XOR], [3, 0, 0], [1, 1, 1], [2, 3, 4]), "used before it is set"),
        ((4, [XOR, AND], [0, 0], [1, 1], [2, 2]), "more than one gate"),  # wire 2 written twice
        ((3, [XOR], [0], [1], [1]), "input wire"),  # a gate overwrites an input wire
        ((3, [XOR], [0], [7], [2]), "out of range"),
        ((3, [XOR], [0], [-1], [2]), "out of range"),
        ((3, [XOR], [0], [1], [5]), "out of range"),
        ((3, [3], [0], [1], [2]), "unknown gate"),
        ((3, [XOR], [0, 1], [1], [2]), "same length"),
        ((2, [XOR], [0], [1], [2]), "wires cannot hold"),
    ],
)
def test_constructor_rejects(args, match):
    with pytest.raises(CircuitError, match=match):
        _circ(*args)


def test_inv_second_operand_is_ignored():
    # INV reads only in0; whatever sits in in1 must not be range-checked or scheduled.
    c = _circ(3, [INV], [0], [99], [2])
    assert c.evaluate(0) == [1] and c.evaluate(1) == [0]


def test_inputs_must_come_first():
    g = [InputGroup("x", GARBLER, np.array([1, 2]))]  # wire 0 is not an input
    with pytest.raises(CircuitError, match="numbered first"):
        Circuit(4, [XOR], [1], [2], [3], g, [OutputGroup("o", np.array([3]))])
    g = [InputGroup("x", GARBLER, np.array([0])), InputGroup("y", EVALUATOR, np.array([2]))]  # gap
    with pytest.raises(CircuitError, match="numbered first"):
        Circuit(4, [XOR], [0], [2], [3], g, [OutputGroup("o", np.array([3]))])
    g = [InputGroup("x", GARBLER, np.array([0, 1]))]
    with pytest.raises(CircuitError):  # a gate output between the inputs: wire 1 is an input
        Circuit(3, [INV], [0], [0], [1], g, [OutputGroup("o", np.array([1]))])


def test_group_errors():
    x = InputGroup("x", GARBLER, np.array([0]))
    with pytest.raises(CircuitError, match="duplicate input"):
        Circuit(
            3, [XOR], [0], [1], [2], [x, InputGroup("x", EVALUATOR, np.array([1]))], [OutputGroup("o", np.array([2]))]
        )
    two = [x, InputGroup("y", EVALUATOR, np.array([1]))]
    with pytest.raises(CircuitError, match="duplicate output"):
        Circuit(3, [XOR], [0], [1], [2], two, [OutputGroup("o", np.array([2])), OutputGroup("o", np.array([2]))])
    with pytest.raises(CircuitError, match="undefined wire"):
        Circuit(4, [XOR], [0], [1], [2], two, [OutputGroup("o", np.array([3]))])
    with pytest.raises(CircuitError, match="no wires"):
        Circuit(3, [XOR], [0], [1], [2], two, [OutputGroup("o", np.array([], dtype=np.int64))])
    with pytest.raises(ValueError):  # a private input always names a real party
        Circuit(3, [XOR], [0], [1], [2], [InputGroup("x", None, np.array([0, 1]))], [OutputGroup("o", np.array([2]))])
    with pytest.raises(ValueError):
        Circuit(
            3, [XOR], [0], [1], [2], [InputGroup("x", "alice", np.array([0, 1]))], [OutputGroup("o", np.array([2]))]
        )


def test_evaluate_rejects_bad_inputs():
    b = Builder()
    x = b.input("x", 8, GARBLER)
    y = b.input("y", 8, EVALUATOR, signed=True)
    b.output("o", x.extend(9) + y)
    c = b.build()
    assert c.evaluate(255, -128) == [127]
    for xv, yv in [(256, 0), (-1, 0), (0, 128), (0, -129), ([1, 2, 300], [0, 0, 0])]:
        with pytest.raises(CircuitError, match="out of range"):
            c.evaluate(xv, yv)
    with pytest.raises(CircuitError):
        c.evaluate(1)
    with pytest.raises(CircuitError):
        c.evaluate(1, 2, 3)
    with pytest.raises(CircuitError, match="shape"):
        c.evaluate_bits([np.zeros((4, 8), bool), np.zeros((4, 7), bool)])
    with pytest.raises(CircuitError, match="batch"):
        c.evaluate_bits([np.zeros((4, 8), bool), np.zeros((5, 8), bool)])
    with pytest.raises(CircuitError):
        c.evaluate_bits([np.zeros((4, 8), bool)])


# ---------------------------------------------------------------------- random circuits (hypothesis)
@st.composite
def random_circuits(draw):
    widths = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    n_in = sum(widths)
    n_gates = draw(st.integers(0, 60))
    ops, in0, in1 = [], [], []
    for g in range(n_gates):
        avail = n_in + g
        ops.append(draw(st.sampled_from([XOR, AND, INV, AND])))
        # bias towards recent wires so deep chains appear
        pick = st.one_of(st.integers(0, avail - 1), st.integers(max(0, avail - 4), avail - 1))
        in0.append(draw(pick))
        in1.append(draw(pick))
    n_wires = n_in + n_gates
    outs = draw(st.lists(st.integers(0, n_wires - 1), min_size=1, max_size=6))
    inputs, base = [], 0
    for k, w in enumerate(widths):
        inputs.append(InputGroup(f"i{k}", draw(st.sampled_from([GARBLER, EVALUATOR])), np.arange(base, base + w)))
        base += w
    out = list(range(n_in, n_wires))
    return Circuit(n_wires, ops, in0, in1, out, inputs, [OutputGroup("o", np.array(outs))])


@SETTINGS
@given(c=random_circuits(), seed=st.integers(0, 2**32 - 1), batch=st.sampled_from([1, 2, 63, 64, 65, 130]))
def test_random_circuit_evaluation_schedule_and_depths(c, seed, batch):
    check_levels_contract(c)
    depth, and_depth = reference_depths(c)
    s = c.stats()
    assert (s.depth, s.and_depth) == (depth, and_depth)
    assert s.and_gates == int(np.sum(c.op == AND)) and s.bytes == 32 * s.and_gates
    rng = np.random.default_rng(seed)
    bits = [rng.integers(0, 2, size=(batch, g.width)).astype(bool) for g in c.inputs]
    got = c.evaluate_bits(bits)
    want = reference_eval(c, bits)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == bool and g.shape == w.shape
        assert np.array_equal(g, w)


def test_empty_batch():
    c = full_adder()
    outs = c.evaluate_bits([np.zeros((0, 1), bool)] * 3)
    assert [o.shape for o in outs] == [(0, 1)] * 3


# ---------------------------------------------------------------------- batch == singles
def test_batch_of_1000_equals_1000_single_evaluations():
    b = Builder("mix")
    x = b.input("x", 12, GARBLER, signed=True)
    y = b.input("y", 12, EVALUATOR)
    b.output("p", x * y)
    b.output("lt", x < y)
    b.output("m", (x < 0).mux(-x, x + y))
    c = b.build()
    rng = np.random.default_rng(12345)
    bits = [rng.integers(0, 2, size=(1000, 12)).astype(bool) for _ in range(2)]
    batch = c.evaluate_bits(bits)
    for i in range(1000):
        single = c.evaluate_bits([bits[0][i : i + 1], bits[1][i : i + 1]])
        for bo, so in zip(batch, single):
            assert np.array_equal(bo[i : i + 1], so), i
    # and the integer front end agrees with python ints
    xs = bits_to_ints(bits[0], signed=True).tolist()
    ys = bits_to_ints(bits[1]).tolist()
    p, lt, m = c.evaluate(xs, ys)
    for i in range(1000):
        assert int(p[i]) == _wrap(xs[i] * ys[i], 12, True)  # both operands 12 bits: truncated, signed
        assert int(lt[i]) == int(xs[i] < ys[i])  # mixed signedness compares exactly
        assert int(m[i]) == _wrap(-xs[i] if xs[i] < 0 else xs[i] + ys[i], 12, True)


def _wrap(v: int, w: int, signed: bool) -> int:
    v &= (1 << w) - 1
    return v - (1 << w) if signed and v >> (w - 1) else v


# ---------------------------------------------------------------------- int <-> bits helpers
@SETTINGS
@given(data=st.data(), width=st.integers(1, 130), signed=st.booleans())
@example(data=None, width=63, signed=True)
@example(data=None, width=64, signed=True)
@example(data=None, width=64, signed=False)
@example(data=None, width=1, signed=True)
@example(data=None, width=65, signed=True)
def test_ints_bits_roundtrip(data, width, signed):
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    edges = sorted({lo, hi, 0, min(hi, 1), max(lo, -1), lo + 1 if lo + 1 <= hi else lo, hi - 1 if hi - 1 >= lo else hi})
    drawn = data.draw(st.lists(st.integers(lo, hi), max_size=20)) if data is not None else []
    vals = edges + drawn
    bits = ints_to_bits(vals, width, signed)
    assert bits.shape == (len(vals), width) and bits.dtype == bool
    for row, v in zip(bits, vals):  # bit j = bit j of the two's complement value
        assert [bool((v >> j) & 1) for j in range(width)] == row.tolist()
    back = bits_to_ints(bits, signed)
    assert [int(v) for v in back] == vals


def test_ints_to_bits_range_errors():
    with pytest.raises(CircuitError, match="out of range"):
        ints_to_bits([256], 8)
    with pytest.raises(CircuitError, match="out of range"):
        ints_to_bits([-1], 8)
    with pytest.raises(CircuitError, match="out of range"):
        ints_to_bits([128], 8, signed=True)
    with pytest.raises(CircuitError, match="out of range"):
        ints_to_bits([-(1 << 63) - 1], 64, signed=True)


# ---------------------------------------------------------------------- content hash
def _small(party_x=GARBLER, signed_x=False, signed_out=None, name="c", use_and=True):
    b = Builder(name)
    x = b.input("x", 8, party_x, signed_x)
    y = b.input("y", 8, EVALUATOR, signed_x)
    r = x + y if use_and else x ^ y
    if signed_out is not None:
        r = r.as_signed() if signed_out else r.as_unsigned()
    b.output("o", r)
    return b.build()


def test_content_hash_stable_and_sensitive():
    h = _small().content_hash
    assert len(h) == 64 and int(h, 16) >= 0
    assert _small().content_hash == h  # same circuit built twice
    assert _small(name="other").content_hash == h  # the name is not part of the function
    assert _small(party_x=EVALUATOR).content_hash != h
    assert _small(signed_x=True).content_hash != h
    assert _small(signed_out=True).content_hash != h
    assert _small(use_and=False).content_hash != h


# ---------------------------------------------------------------------- levels on real circuits
def test_levels_contract_builder_circuits():
    b = Builder()
    x = b.input("x", 16, GARBLER, signed=True)
    y = b.input("y", 16, EVALUATOR, signed=True)
    b.output("a", (x * y) + abs(x - y))
    b.output("b", (x < y).mux(x, y))
    b.output("c", x.eq(y))
    c = b.build()
    check_levels_contract(c)
    assert c.stats().and_depth == reference_depths(c)[1]


@pytest.mark.parametrize("fname", ["aes_128.txt", "sha256.txt"])
def test_levels_contract_bristol_files(bristol_dir, fname):
    c = read_bristol_fashion(bristol_dir / fname)
    check_levels_contract(c)
    depth, and_depth = reference_depths(c)
    s = c.stats()
    assert (s.depth, s.and_depth) == (depth, and_depth)


def test_aes_evaluate_matches_reference_evaluator(bristol_dir):
    c = read_bristol_fashion(bristol_dir / "aes_128.txt")
    rng = np.random.default_rng(7)
    bits = [rng.integers(0, 2, size=(70, 128)).astype(bool) for _ in range(2)]
    assert np.array_equal(c.evaluate_bits(bits)[0], reference_eval(c, bits)[0])


# ---------------------------------------------------------------------- networkx export
def _expected_edges(c: Circuit) -> int:
    n = 0
    for o, a, b in zip(c.op.tolist(), c.in0.tolist(), c.in1.tolist()):
        n += 1 if o == INV else len({a, b})
    return n + sum(g.width for g in c.outputs)


def _export_circuit() -> Circuit:
    b = Builder("export")
    x = b.input("x", 6, GARBLER)
    y = b.input("y", 6, EVALUATOR)
    b.output("s", x + y)
    b.output("lt", x < y)
    b.output("k", b.const(5, 3))  # constant outputs use a XOR(w, w) gate: one edge, not two
    return b.build()


@pytest.mark.parametrize("which", ["builder", "full_adder"])
def test_networkx_graph(which):
    c = _export_circuit() if which == "builder" else full_adder()
    g = c.to_networkx()
    assert isinstance(g, nx.DiGraph)
    n_out = sum(o.width for o in c.outputs)
    assert g.number_of_nodes() == c.n_inputs + c.n_gates + n_out
    assert g.number_of_edges() == _expected_edges(c)
    assert nx.is_directed_acyclic_graph(g)
    ops = [d["op"] for _, d in g.nodes(data=True) if d["kind"] == "gate"]
    s = c.stats()
    assert (ops.count("AND"), ops.count("XOR"), ops.count("INV")) == (s.and_gates, s.xor_gates, s.inv_gates)
    parties = {d["party"] for _, d in g.nodes(data=True) if d["kind"] == "input"}
    assert parties == {"garbler", "evaluator"}
    # longest path counts every gate once, plus the output node
    assert nx.dag_longest_path_length(g) == s.depth + 1


def test_dot_export():
    c = _export_circuit()
    dot = c.to_dot()
    assert dot.lstrip().startswith("digraph")
    assert dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}") == 1
    body = [ln.strip() for ln in dot.splitlines()[1:-1]]
    edges = [ln for ln in body if "->" in ln]
    nodes = [ln for ln in body if "[label=" in ln and "->" not in ln]
    assert len(edges) == _expected_edges(c)
    assert len(nodes) == c.n_inputs + c.n_gates + sum(o.width for o in c.outputs)
    assert sum('label="AND"' in ln for ln in nodes) == c.stats().and_gates


def test_graphml_roundtrip(tmp_path):
    c = _export_circuit()
    path = tmp_path / "c.graphml"
    c.write_graphml(path)
    g = nx.read_graphml(path)
    assert g.is_directed()
    assert g.number_of_nodes() == c.to_networkx().number_of_nodes()
    assert g.number_of_edges() == _expected_edges(c)
    ops = [d.get("op") for _, d in g.nodes(data=True) if d.get("kind") == "gate"]
    assert ops.count("AND") == c.stats().and_gates
    assert nx.is_directed_acyclic_graph(g)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 62), st.booleans(), st.data())
def test_ints_to_bits_array_path_matches_python_ints(width, signed, data):
    """The vectorised path (integer arrays and int lists, width <= 62) against bits read off Python ints."""
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    vals = data.draw(st.lists(st.integers(lo, hi), min_size=1, max_size=20))
    want = np.array([[((v & ((1 << width) - 1)) >> i) & 1 for i in range(width)] for v in vals], dtype=bool)
    assert np.array_equal(ints_to_bits(vals, width, signed), want)
    assert np.array_equal(ints_to_bits(np.array(vals, dtype=np.int64), width, signed), want)
    bad = data.draw(st.sampled_from([hi + 1, lo - 1]))
    at = data.draw(st.integers(0, len(vals)))
    with pytest.raises(CircuitError, match=rf"value {bad} \(item {at}\) is out of range"):
        ints_to_bits(np.array(vals[:at] + [bad] + vals[at:], dtype=np.int64), width, signed, name="g")
