"""`pairwise 2pc`: circuits from builder functions, inputs per named group, outputs per named group.

No processes here (those are in tests/test_twopc_processes.py and tests/system/test_examples.py):
the parsing functions of pairwise.commands.twopc against the circuit's own groups, and one run of
the parsed inputs through a real garbler/evaluator pair in one process, checked against Python ints.
"""

from __future__ import annotations

import textwrap
import threading

import pytest

from pairwise.circuits.ir import EVALUATOR, GARBLER, CircuitError
from pairwise.commands.twopc import builder_spec, load_circuit, parse_party_input
from pairwise.mpc.channel import MemoryChannel
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession

DOT = textwrap.dedent(
    """
    from pairwise.circuits.builder import Builder
    from pairwise.circuits.ir import EVALUATOR, GARBLER

    def dot_product():
        b = Builder("dot3x8")
        xs = [b.input(f"x{i}", 8, GARBLER, signed=True) for i in range(3)]
        ys = [b.input(f"y[{i}]", 8, EVALUATOR, signed=True) for i in range(3)]
        acc = None
        for x, y in zip(xs, ys):
            p = x.extend(18) * y.extend(18)
            acc = p if acc is None else acc + p
        b.output("dot", acc)
        b.output("neg", -(acc.extend(19)))
        return b.build()

    def as_builder():
        b = Builder("plain")
        b.output("s", b.input("a", 4, GARBLER) + b.input("b", 4, EVALUATOR))
        return b

    def not_a_circuit():
        return 42
    """
)


@pytest.fixture
def dot_file(tmp_path):
    path = tmp_path / "dot.py"
    path.write_text(DOT)
    return str(path)


def test_builder_spec_detection(dot_file):
    assert builder_spec(f"{dot_file}:dot_product") == (dot_file, "dot_product")
    assert builder_spec("my.module:fn") == ("my.module", "fn")
    assert builder_spec("gini") is None and builder_spec("aes128") is None
    assert builder_spec(dot_file) is None  # a file without a function


def test_load_circuit_from_a_file_and_a_builder(dot_file):
    c = load_circuit(f"{dot_file}:dot_product")
    assert c.name == "dot3x8" and [g.name for g in c.groups_of(GARBLER)] == ["x0", "x1", "x2"]
    assert all(g.signed for g in c.inputs) and c.outputs[0].signed
    assert load_circuit(f"{dot_file}:as_builder").name == "plain"  # a Builder is built for the user


@pytest.mark.parametrize(
    "spec, message",
    [
        ("{f}:missing", "has no function 'missing'"),
        ("{f}:not_a_circuit", "returned int"),
        ("/nonexistent/x.py:f", "no such file"),
        ("no_such_module_pw:f", "no module"),
    ],
)
def test_load_circuit_errors_name_the_problem(dot_file, spec, message):
    with pytest.raises(CircuitError, match=message):
        load_circuit(spec.format(f=dot_file))


def test_named_inputs_vectors_batches_and_old_forms(dot_file):
    c = load_circuit(f"{dot_file}:dot_product")
    spec = f"{dot_file}:dot_product"
    assert parse_party_input(c, spec, GARBLER, ["x=-3,5,-128"], 0, False) == {"x0": -3, "x1": 5, "x2": -128}
    assert parse_party_input(c, spec, EVALUATOR, ["y=1,2,127"], 0, False) == {"y[0]": 1, "y[1]": 2, "y[2]": 127}
    assert parse_party_input(c, spec, GARBLER, ["x0=1,2", "x1=3,4", "x2=0x10,-1"], 0, False) == {
        "x0": [1, 2],
        "x1": [3, 4],
        "x2": [16, -1],
    }  # one group per --input, a SIMD batch of 2
    gini = load_circuit("gini", 16)
    assert parse_party_input(gini, "gini", GARBLER, ["7"], 16, False) == {"x": 7}  # the older forms
    assert parse_party_input(gini, "gini", GARBLER, ["x=7,8"], 16, False) == {"x": [7, 8]}
    aes = load_circuit("aes128")
    assert parse_party_input(aes, "aes128", GARBLER, ["00" * 15 + "ff"], 0, False) == {aes.inputs[0].name: 255}


@pytest.mark.parametrize(
    "texts, message",
    [
        (["x=1,2"], "stands for the 3 groups x0 .. x2, got 2"),
        (["z=1"], "no input group 'z'; its groups: x0 (8-bit signed)"),
        (["x=1,2,128"], "out of range for 8-bit signed"),
        (["x=1,2,a"], "expected NAME=v1,v2"),
        (["x0=1", "x1=2"], "missing --input for the garbler's input group(s): x2 (8-bit signed)"),
        (["x0=1,2", "x1=2", "x2=3"], "same number of values"),
        (["x=1,2,3", "x1=4"], "given twice"),
    ],
)
def test_named_input_errors(dot_file, texts, message):
    c = load_circuit(f"{dot_file}:dot_product")
    with pytest.raises(CircuitError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_party_input(c, f"{dot_file}:dot_product", GARBLER, texts, 0, False)


def test_parsed_inputs_run_and_outputs_decode_signed(dot_file):
    """The parsed values through a real session pair: outputs per group, negative where declared signed."""
    c = load_circuit(f"{dot_file}:dot_product")
    spec = f"{dot_file}:dot_product"
    xs, ys = [-3, 5, -128], [1, -2, 127]
    g_in = parse_party_input(c, spec, GARBLER, ["x=" + ",".join(map(str, xs))], 0, False)
    e_in = parse_party_input(c, spec, EVALUATOR, ["y=" + ",".join(map(str, ys))], 0, False)
    a, b = MemoryChannel.pair(timeout=30)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("e", EvaluatorSession(b).run(c, e_in)), daemon=True)
    t.start()
    rg = GarblerSession(a).run(c, g_in)
    t.join(60)
    want = sum(x * y for x, y in zip(xs, ys))
    assert want < 0
    for r in (rg, out["e"]):
        assert r.named_outputs(c) == {"dot": want, "neg": -want}
