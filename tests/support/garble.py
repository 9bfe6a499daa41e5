"""Random circuits and input bits for the garbling tests (seeded simulation helpers, public data only)."""

from __future__ import annotations

import random

import numpy as np

from pairwise.circuits.ir import AND, EVALUATOR, GARBLER, INV, XOR, Circuit, InputGroup, OutputGroup


def random_bits(rng, circuit: Circuit, batch: int) -> list[np.ndarray]:
    return [rng.integers(0, 2, size=(batch, g.width)).astype(bool) for g in circuit.inputs]


def random_circuit(seed: int, n_a: int = 5, n_b: int = 4, n_gates: int = 60) -> Circuit:
    """A random well-formed circuit (simulation helper: seeded, public data only)."""
    rng = random.Random(seed)
    n_in = n_a + n_b
    op, in0, in1, out = [], [], [], []
    for g in range(n_gates):
        w = n_in + g
        kind = rng.choice([XOR, AND, AND, INV])
        a = rng.randrange(w)
        b = rng.randrange(w) if kind != INV else 0
        op.append(kind)
        in0.append(a)
        in1.append(b)
        out.append(w)
    n_w = n_in + n_gates
    outs = sorted(rng.sample(range(n_w), 7))  # may include input wires and dead gates
    return Circuit(
        n_w,
        op,
        in0,
        in1,
        out,
        [InputGroup("a", GARBLER, np.arange(n_a)), InputGroup("b", EVALUATOR, np.arange(n_a, n_in))],
        [OutputGroup("o1", np.array(outs[:3])), OutputGroup("o2", np.array(outs[3:]))],
        name=f"random{seed}",
    )
