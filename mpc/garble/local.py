"""Garble, evaluate and decode in one process: a correctness tool, not a secure computation.

What it does
    :func:`garble_and_evaluate` runs a :class:`~pairwise.mpc.garble.garbler.Garbler`
    and an :class:`~pairwise.mpc.garble.evaluator.Evaluator` on plaintext
    inputs in this process (for checks, the command line's circuit and noise
    commands, and :func:`pairwise.garble_and_evaluate`), drawing the random
    input groups from ``os.urandom`` as the two-party runtime does.

Security model
    None between parties: both roles run here and see every input.  Labels
    and Delta still come from the OS CSPRNG, so the tables are real ones.

Follows
    docs/garbling.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from pairwise.circuits.ir import Circuit, CircuitError

from .evaluator import Evaluator
from .format import _U64, GarbleError, decode, split_outputs, urandom_bits
from .garbler import Garbler


def garble_and_evaluate(
    circuit: Circuit,
    inputs: Sequence[np.ndarray],
    *,
    chunk: int | None = None,
    instance_offset: int = 0,
    random: str | Iterable[str] = (),
    batch: int | None = None,
) -> list[np.ndarray]:
    """Garble, evaluate and decode in one process (for checks and the CLI).

    ``inputs``: one (batch, width) bool array per input group, as for
    :meth:`Circuit.evaluate_bits`, leaving out the groups named in
    ``random``, whose bits are drawn here from ``os.urandom`` (as the
    two-party runtime's random inputs; ``batch`` gives the batch when no
    group is left to feed).  Returns one (batch, width) bool array per
    output group.  Both roles run here, so this is a correctness tool, not a
    secure computation.
    """
    names = {random} if isinstance(random, str) else set(random)
    if names:
        unknown = names - {g.name for g in circuit.inputs}
        if unknown:
            raise GarbleError(f"random input group(s) {sorted(unknown)} are not inputs of {circuit.name!r}")
        fed = [g for g in circuit.inputs if g.name not in names]
        given = list(inputs)
        if len(given) != len(fed):
            raise GarbleError(f"{len(fed)} input group(s) to feed besides the random ones, got {len(given)} inputs")
        if given:
            batch = np.asarray(given[0]).shape[0]
        elif batch is None or batch < 1:
            raise GarbleError("no input group to feed: give batch=")
        it = iter(given)
        inputs = [urandom_bits(batch, g.width) if g.name in names else next(it) for g in circuit.inputs]
    try:
        bits = circuit._check_bit_inputs(inputs)
    except CircuitError as exc:
        raise GarbleError(str(exc)) from None
    batch = bits[0].shape[0] if bits else 1
    g = Garbler(circuit, batch, chunk=chunk, instance_offset=instance_offset)
    active = g.encode_all(bits) if bits else np.zeros((0, batch, 2), _U64)
    gc = g.garble()
    ev = Evaluator(circuit, batch, chunk=g.chunk, instance_offset=instance_offset)
    out = ev.evaluate(active, gc)
    assert g.decode_bits is not None  # set by garble()
    return split_outputs(circuit, decode(out, g.decode_bits))
