"""Inputs and outputs of an execution: conversion, range checks, random groups, decoding.

What it does
    :func:`prepare_inputs` turns a party's values (per named group: an int, a
    sequence of ints for a batch, or (batch, width) bits) into bit arrays,
    range-checked against the group's width and signedness before anything
    is sent; :func:`outputs_from_bits` decodes output bits per named output
    group, signed where the group is declared signed.  Random groups (drawn
    by the runtime, never passed in) are resolved here too.

Security model
    No secrets are created here; a value out of range raises
    :class:`~pairwise.circuits.ir.CircuitError` before any message moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np

from pairwise.circuits.ir import Circuit, CircuitError, InputGroup, Party, bits_to_ints, ints_to_bits
from pairwise.dp.validate import check_int

from ..garble import split_outputs

__all__ = ["GroupValue", "PartyInputs", "RandomGroups", "OUTPUT_MODES", "prepare_inputs", "outputs_from_bits"]

OUTPUT_MODES = ("both", "evaluator", "garbler")
#: One input group's value: an int, a sequence of ints (a batch), or (batch, width) bool bits.
GroupValue: TypeAlias = int | np.integer | Sequence[int] | np.ndarray
#: A party's ``inputs`` to ``run`` (see :func:`prepare_inputs`): a mapping group name -> value,
#: one value per group of the party, or the bare value of its only group; ``None`` when it feeds none.
PartyInputs: TypeAlias = Mapping[str, GroupValue] | Sequence[GroupValue] | GroupValue | None
#: The random input groups of an execution: one group name or several (``None``/empty: none).
RandomGroups: TypeAlias = str | Iterable[str] | None


def _scalar_bits(v: int, g: InputGroup) -> np.ndarray:
    """(1, width) bits of one int of group ``g`` (the common batch-1 case, without the general path)."""
    w = g.width
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if g.signed else (0, (1 << w) - 1)
    if not lo <= v <= hi:
        kind = "signed" if g.signed else "unsigned"
        raise CircuitError(f"{g.name}: value {v} (item 0) is out of range for {w}-bit {kind} [{lo}, {hi}]")
    raw = np.frombuffer((v & ((1 << w) - 1)).to_bytes((w + 7) // 8, "little"), np.uint8)
    return np.unpackbits(raw, count=w, bitorder="little").view(np.bool_).reshape(1, w)


def prepare_inputs(
    circuit: Circuit, party: Party | str, values: PartyInputs, *, skip: Iterable[str] = ()
) -> tuple[list[np.ndarray], int, bool]:
    """Convert a party's inputs to bit arrays, with range checks, before any secret moves.

    ``values``: a mapping group name -> int or sequence of ints, or a sequence
    with one entry per group of that party (in circuit order), or, if the party
    owns exactly one group, a bare int / sequence of ints.  Bool arrays of
    shape (batch, width) are taken as bits.  Groups named in ``skip`` (random
    groups, drawn by the runtime) are not inputs.  Returns (bits per group,
    batch, scalar) where ``scalar`` says every value was a single int; batch
    is 0 when the party has no group to feed.
    """
    party = Party(party)
    skip = set(skip)
    groups = tuple(g for g in circuit.groups_of(party) if g.name not in skip)
    if not groups:
        if values is not None and not (isinstance(values, (Mapping, list, tuple)) and len(values) == 0):
            given = sorted(values) if isinstance(values, Mapping) else values
            raise CircuitError(
                f"{party.value} feeds no input group here (its groups: "
                f"{[g.name for g in circuit.groups_of(party)]}, random: {sorted(skip)}), got {given!r}"
            )
        return [], 0, False
    seq: list[Any]
    if isinstance(values, Mapping):
        passed_random = sorted(set(values) & skip)
        if passed_random:
            raise CircuitError(
                f"{passed_random} are random input groups: the runtime draws their bits; do not pass them"
            )
        unknown = set(values) - {g.name for g in groups}
        if unknown:
            raise CircuitError(
                f"{party.value} has no input group(s) {sorted(unknown)}; its groups: {[g.name for g in groups]}"
            )
        missing = [g.name for g in groups if g.name not in values]
        if missing:
            raise CircuitError(f"missing {party.value} input group(s) {missing}")
        seq = [values[g.name] for g in groups]
    elif len(groups) == 1 and not (
        isinstance(values, (list, tuple)) and len(values) == 1 and not isinstance(values[0], (int, np.integer))
    ):
        seq = [values]
    else:
        seq = list(values)  # type: ignore[arg-type]  # (several groups: values must be a sequence)
    if len(seq) != len(groups):
        raise CircuitError(
            f"{party.value} owns {len(groups)} input group(s) {[g.name for g in groups]}, got {len(seq)} value(s)"
        )
    bits = []
    batch = None
    scalar = True
    for g, v in zip(groups, seq):
        if isinstance(v, np.ndarray) and v.dtype == np.bool_:
            b = v
            if b.ndim != 2 or b.shape[1] != g.width:
                raise CircuitError(f"bits for {g.name!r} must have shape (batch, {g.width}), got {b.shape}")
            scalar = False
        elif isinstance(v, (int, np.integer)):
            b = _scalar_bits(int(v), g)
        else:
            b = ints_to_bits(list(v), g.width, g.signed, name=g.name)
            scalar = False
        if batch is None:
            batch = b.shape[0]
        elif b.shape[0] != batch:
            raise CircuitError(
                f"all input groups must have the same batch size ({batch} vs {b.shape[0]} for {g.name!r})"
            )
        bits.append(b)
    if batch is None:
        batch = 0
    return bits, batch, scalar


def random_groups(circuit: Circuit, random: RandomGroups) -> tuple[InputGroup, ...]:
    """The input groups named in ``random`` (a name or an iterable of names), in circuit order."""
    names = [random] if isinstance(random, str) else list(random or ())
    known = {g.name for g in circuit.inputs}
    bad = [n for n in names if n not in known]
    if bad:
        raise CircuitError(
            f"random input group(s) {bad} are not inputs of {circuit.name!r}; its groups: {sorted(known)}"
        )
    if len(set(names)) != len(names):
        raise CircuitError(f"random input groups named twice: {names}")
    return tuple(g for g in circuit.inputs if g.name in set(names))


def resolve_batch(from_inputs: int, fed: bool, batch: int | None, party: str) -> int:
    """The execution's batch: from the party's inputs, or ``batch=`` when it feeds none (they must agree)."""
    if batch is not None:
        batch = check_int(batch, "batch", lo=1, error=CircuitError)
        if fed and from_inputs != batch:
            raise CircuitError(f"batch={batch} but the {party}'s inputs have batch {from_inputs}")
        return int(batch)
    if not fed:
        raise CircuitError(f"the {party} feeds no input group here, so batch= must give the batch size")
    return from_inputs


def outputs_from_bits(circuit: Circuit, bits: np.ndarray, scalar: bool) -> tuple[list, list[np.ndarray]]:
    """(n_out, batch) output bits -> (one int or array of ints per output group, signed where declared;
    the (batch, width) bits per group)."""
    per_group = split_outputs(circuit, bits)
    outs = []
    for g, b in zip(circuit.outputs, per_group):
        if scalar and b.shape[0] == 1:  # one instance: the bits' bytes as one Python int
            v = int.from_bytes(np.packbits(b[0], bitorder="little").tobytes(), "little")
            outs.append(v - (1 << g.width) if g.signed and g.width and v >> (g.width - 1) else v)
            continue
        ints = bits_to_ints(b, g.signed)
        outs.append(int(ints[0]) if scalar else ints)
    return outs, per_group
