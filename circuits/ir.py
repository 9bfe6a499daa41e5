"""Boolean circuit IR: immutable numpy arrays of XOR/AND/INV gates with a level schedule.

What it does
    A :class:`Circuit` is four parallel arrays ``op``, ``in0``, ``in1``, ``out``
    in topological order, named input groups (each owned by a party) and named
    output groups.  Wires ``0 .. n_inputs-1`` are the input wires, group by
    group in declaration order (as in Bristol Fashion); every gate writes a
    fresh wire.  Bit ``j`` of a group's value (LSB first) is the group's wire
    ``j``: this is the convention of the standard Bristol Fashion files
    (emp-tool's; wire i = bit i of the value read as a big-endian integer).

    The level schedule groups gates whose inputs are all ready, so plaintext
    evaluation and garbling run one numpy/AES call per level and per gate kind
    over all gates of the level and all instances of a batch.  AND gates get a
    dense index in schedule order: the garbled tables are laid out in that
    order, so a level's tables are one contiguous slice.

Security model
    None needed: a circuit is public.  Every private input group names its
    party (``GARBLER`` or ``EVALUATOR``); there is no default party, so an input
    cannot silently become public or change owner.

Follows
    docs/design.md, "circuits: a circuit is a few arrays" (frozen arrays in
    topological order, inputs owned by a party).
"""

from __future__ import annotations

import enum
import hashlib
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import IO, TYPE_CHECKING

import numpy as np

from pairwise.dp.errors import PairwiseError

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "XOR",
    "AND",
    "INV",
    "Party",
    "GARBLER",
    "EVALUATOR",
    "InputGroup",
    "OutputGroup",
    "Level",
    "CircuitStats",
    "Circuit",
    "CircuitError",
    "ints_to_bits",
    "bits_to_ints",
]

XOR = 0
AND = 1
INV = 2
OP_NAMES = {XOR: "XOR", AND: "AND", INV: "INV"}
IR_VERSION = 1


class CircuitError(PairwiseError, ValueError):
    """A circuit is malformed, or inputs do not fit it."""


class Party(str, enum.Enum):
    """Owner of a private input group."""

    GARBLER = "garbler"
    EVALUATOR = "evaluator"


GARBLER = Party.GARBLER
EVALUATOR = Party.EVALUATOR


def _frozen(a: Sequence[int] | np.ndarray, dtype=np.int64) -> np.ndarray:
    a = np.array(a, dtype=dtype, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class InputGroup:
    """A named input of ``width`` bits owned by ``party``; ``signed`` is two's complement."""

    name: str
    party: Party
    wires: np.ndarray
    signed: bool = False

    @property
    def width(self) -> int:
        return int(self.wires.shape[0])


@dataclass(frozen=True)
class OutputGroup:
    """A named output; ``wires[j]`` carries bit ``j`` (LSB first)."""

    name: str
    wires: np.ndarray
    signed: bool = False

    @property
    def width(self) -> int:
        return int(self.wires.shape[0])


@dataclass(frozen=True)
class Level:
    """Gates that can run as one vectorized step, split by kind.

    For AND gates, ``and_index`` is the dense AND ordinal in schedule order
    (the position of the gate's two ciphertexts in the garbled tables).
    """

    xor_in0: np.ndarray
    xor_in1: np.ndarray
    xor_out: np.ndarray
    and_in0: np.ndarray
    and_in1: np.ndarray
    and_out: np.ndarray
    and_index: np.ndarray
    inv_in: np.ndarray
    inv_out: np.ndarray

    @property
    def n_and(self) -> int:
        return int(self.and_out.shape[0])


@dataclass(frozen=True)
class CircuitStats:
    """Gate counts and sizes; ``bytes`` is the half-gates garbled size (32 per AND)."""

    and_gates: int
    xor_gates: int
    inv_gates: int
    depth: int
    and_depth: int
    wires: int
    input_bits: int
    output_bits: int

    @property
    def bytes(self) -> int:
        return 32 * self.and_gates

    def as_dict(self) -> dict:
        return {
            "and": self.and_gates,
            "xor": self.xor_gates,
            "inv": self.inv_gates,
            "depth": self.depth,
            "and_depth": self.and_depth,
            "bytes": self.bytes,
            "wires": self.wires,
            "input_bits": self.input_bits,
            "output_bits": self.output_bits,
        }


class Circuit:
    """An immutable boolean circuit over XOR, AND and INV gates.

    Construct through :class:`pairwise.circuits.builder.Builder` or
    :func:`pairwise.circuits.bristol.read_bristol_fashion`; the constructor validates
    the structure (every gate input defined before use, every wire written
    once, input wires numbered first) and raises :class:`CircuitError`.
    """

    def __init__(
        self,
        n_wires: int,
        op: Sequence[int] | np.ndarray,
        in0: Sequence[int] | np.ndarray,
        in1: Sequence[int] | np.ndarray,
        out: Sequence[int] | np.ndarray,
        inputs: Iterable[InputGroup],
        outputs: Iterable[OutputGroup],
        name: str = "circuit",
    ) -> None:
        self.name = name
        self.n_wires = int(n_wires)
        self.op = _frozen(op, np.uint8)
        self.in0 = _frozen(in0)
        self.in1 = _frozen(in1)
        self.out = _frozen(out)
        self.inputs: tuple[InputGroup, ...] = tuple(
            InputGroup(g.name, Party(g.party), _frozen(g.wires), bool(g.signed)) for g in inputs
        )
        self.outputs: tuple[OutputGroup, ...] = tuple(
            OutputGroup(g.name, _frozen(g.wires), bool(g.signed)) for g in outputs
        )
        self._validate()

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        n = self.op.shape[0]
        if not (self.in0.shape == self.in1.shape == self.out.shape == (n,)):
            raise CircuitError("gate arrays op/in0/in1/out must have the same length")
        if n and not np.isin(self.op, (XOR, AND, INV)).all():
            bad = int(np.flatnonzero(~np.isin(self.op, (XOR, AND, INV)))[0])
            raise CircuitError(f"gate {bad}: unknown gate kind {int(self.op[bad])}")
        names = [g.name for g in self.inputs]
        if len(set(names)) != len(names):
            raise CircuitError(f"duplicate input group names: {names}")
        onames = [g.name for g in self.outputs]
        if len(set(onames)) != len(onames):
            raise CircuitError(f"duplicate output group names: {onames}")
        expect = 0
        for g in self.inputs:
            if g.width == 0:
                raise CircuitError(f"input group {g.name!r} has no wires")
            if not np.array_equal(g.wires, np.arange(expect, expect + g.width)):
                raise CircuitError(
                    f"input group {g.name!r} must use wires {expect}..{expect + g.width - 1} "
                    "(input wires are numbered first, group by group)"
                )
            expect += g.width
        n_in = expect
        if self.n_wires < n_in + n:
            raise CircuitError(f"{self.n_wires} wires cannot hold {n_in} inputs and {n} gate outputs")
        # Topological order and single assignment, vectorized:
        # the time a wire becomes ready is its writer's gate index (+1), inputs at 0.
        ready = np.full(self.n_wires, -1, dtype=np.int64)
        ready[:n_in] = 0
        if n:
            if self.out.min() < n_in or self.out.max() >= self.n_wires:
                bad = int(np.flatnonzero((self.out < n_in) | (self.out >= self.n_wires))[0])
                raise CircuitError(f"gate {bad}: output wire {int(self.out[bad])} is out of range or an input wire")
            if np.unique(self.out).shape[0] != n:
                uniq, counts = np.unique(self.out, return_counts=True)
                w = int(uniq[counts > 1][0])
                raise CircuitError(f"wire {w} is written by more than one gate")
            ready[self.out] = np.arange(1, n + 1)
            unary = self.op == INV
            for arr, label in ((self.in0, "first"), (self.in1, "second")):
                check = np.ones(n, dtype=bool) if label == "first" else ~unary
                a = np.where(check, arr, 0)
                oob = check & ((a < 0) | (a >= self.n_wires))
                if oob.any():
                    gi = int(np.flatnonzero(oob)[0])
                    raise CircuitError(f"gate {gi}: {label} input wire {int(arr[gi])} out of range")
                late = check & ((ready[a] < 0) | (ready[a] > np.arange(n)))
                if late.any():
                    gi = int(np.flatnonzero(late)[0])
                    raise CircuitError(f"gate {gi}: {label} input wire {int(arr[gi])} is used before it is set")
        defined = ready >= 0
        for og in self.outputs:
            if og.width == 0:
                raise CircuitError(f"output group {og.name!r} has no wires")
            if (og.wires < 0).any() or (og.wires >= self.n_wires).any() or not defined[og.wires].all():
                raise CircuitError(f"output group {og.name!r} refers to an undefined wire")

    # ------------------------------------------------------------------ properties
    @property
    def n_gates(self) -> int:
        return int(self.op.shape[0])

    @property
    def n_inputs(self) -> int:
        return sum(g.width for g in self.inputs)

    @cached_property
    def n_and(self) -> int:
        return int(np.count_nonzero(self.op == AND))

    def input_group(self, name: str) -> InputGroup:
        for g in self.inputs:
            if g.name == name:
                return g
        raise KeyError(f"no input group {name!r} (have {[g.name for g in self.inputs]})")

    def groups_of(self, party: Party | str) -> tuple[InputGroup, ...]:
        party = Party(party)
        return tuple(g for g in self.inputs if g.party == party)

    # ------------------------------------------------------------------ schedule
    @cached_property
    def _depths(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-gate depth (every gate counts 1) and AND-depth; one pass in topological order."""
        n = self.n_gates
        wdepth = [0] * self.n_wires
        wand = [0] * self.n_wires
        gdepth = [0] * n
        gand = [0] * n
        op = self.op.tolist()
        i0 = self.in0.tolist()
        i1 = self.in1.tolist()
        out = self.out.tolist()
        for g in range(n):
            a = i0[g]
            b = a if op[g] == INV else i1[g]
            da, db = wdepth[a], wdepth[b]
            aa, ab = wand[a], wand[b]
            o = out[g]
            wdepth[o] = gdepth[g] = (da if da > db else db) + 1
            wand[o] = gand[g] = (aa if aa > ab else ab) + (op[g] == AND)
        return np.array(gdepth, dtype=np.int64), np.array(gand, dtype=np.int64)

    @cached_property
    def _gate_levels(self) -> np.ndarray:
        """Schedule level of every gate (see :attr:`levels` for the rules); once per circuit.

        AND stages are filled in order s = 1 .. AND-depth.  An AND gate may go
        to any stage from its AND-depth up to its latest stage (AND-depth of
        the circuit minus the ANDs on its longest path to a sink, plus one);
        it becomes *ready* once its inputs are scheduled, at level (latest
        input level) + 1.  Stage s gets the smallest level that is after
        stage s-1 and admits every ready AND whose latest stage is s; every
        other ready AND that fits there joins it (greedy, as early as
        possible).  XOR/INV gates go as soon as their inputs are there:
        at the level of an AND input (after the level's ANDs), one level
        after a XOR/INV input.  So stages overlap: the linear gates of one
        stage share levels with other stages' ANDs and linear gates instead
        of getting levels of their own.
        """
        n = self.n_gates
        nw = self.n_wires
        n_in = self.n_inputs
        if not n:
            return np.zeros(0, np.int64)
        opa = self.op
        op = opa.tolist()
        i0 = self.in0.tolist()
        i1 = self.in1.tolist()
        out = self.out.tolist()
        is_and = [o == AND for o in op]
        depth = int(self._depths[1].max())
        # latest stage of each AND: depth - (ANDs on its longest path to a sink) + 1
        wtail = [0] * nw
        latest = [0] * n
        for g in range(n - 1, -1, -1):
            t = wtail[out[g]]
            if is_and[g]:
                t += 1
                latest[g] = depth - t + 1
            a = i0[g]
            if t > wtail[a]:
                wtail[a] = t
            if op[g] != INV:
                b = i1[g]
                if t > wtail[b]:
                    wtail[b] = t
        # readers of each wire (CSR: rd[rs[w]:rs[w + 1]]) and each gate's number of unscheduled inputs
        second = (opa != INV) & (self.in1 != self.in0)
        wires = np.concatenate([self.in0, self.in1[second]])
        gates = np.concatenate([np.arange(n), np.flatnonzero(second)])
        keep = wires >= n_in
        wires, gates = wires[keep], gates[keep]
        missing = np.bincount(gates, minlength=n).tolist()
        order = np.argsort(wires, kind="stable")
        rd = gates[order].tolist()
        rs = np.searchsorted(wires[order], np.arange(nw + 1)).tolist()
        # wready[w]: first level at which a XOR/INV gate may read w (inputs: 0);
        # wlevel[w]: level that writes w (inputs: -1); an AND reads from earlier levels.
        wready = [0] * nw
        wlevel = [-1] * nw
        lev = [0] * n
        bucket: list[list[int]] = []  # ready level -> ready, unscheduled ANDs
        due = [-1] * (depth + 2)  # latest stage -> highest ready level of its ready ANDs
        stack = [g for g in range(n - 1, -1, -1) if not missing[g]]
        level = -1  # level of the last stage
        placed = 0  # buckets below this are empty
        s = 0
        while True:
            # schedule every XOR/INV gate whose inputs are scheduled; file the ready ANDs
            while stack:
                g = stack.pop()
                a = i0[g]
                if is_and[g]:
                    la, lb = wlevel[a], wlevel[i1[g]]
                    r = (la if la > lb else lb) + 1
                    while len(bucket) <= r:
                        bucket.append([])
                    bucket[r].append(g)
                    if r > due[latest[g]]:
                        due[latest[g]] = r
                    continue
                lv = wready[a]
                if op[g] != INV:
                    lb = wready[i1[g]]
                    if lb > lv:
                        lv = lb
                o = out[g]
                lev[g] = wlevel[o] = lv
                wready[o] = lv + 1
                for r in rd[rs[o] : rs[o + 1]]:
                    missing[r] -= 1
                    if not missing[r]:
                        stack.append(r)
            s += 1
            if s > depth:
                break
            # stage s: after stage s-1, late enough for its due ANDs; it takes every ready AND that fits
            level = max(level + 1, due[s])
            for lvl in range(placed, min(level + 1, len(bucket))):
                for g in bucket[lvl]:
                    o = out[g]
                    lev[g] = wlevel[o] = wready[o] = level
                    for r in rd[rs[o] : rs[o + 1]]:
                        missing[r] -= 1
                        if not missing[r]:
                            stack.append(r)
            placed = max(placed, level + 1)
        if sum(missing) or sum(len(b) for b in bucket[placed:]):  # pragma: no cover - validated DAG
            raise CircuitError("internal error: the level schedule did not place every gate")
        return np.array(lev, dtype=np.int64)

    @cached_property
    def levels(self) -> tuple[Level, ...]:
        """The vectorized schedule: levels of gates that run as one step each.

        Contract for engines: within a level run the AND gates first, then
        XOR and INV, which read only wires of earlier levels and the level's
        AND outputs (never each other's outputs within a level); AND gates
        read only wires of earlier levels.  The number of levels holding AND
        gates equals the AND-depth (one hash call per AND layer), and
        ``and_index`` numbers the AND gates densely in schedule order.

        Within those rules the schedule is short: AND gates of a stage share
        one level, and XOR/INV gates are placed as early as their inputs
        allow, so the linear layers of different stages overlap (see
        :attr:`_gate_levels`).  AES-128: 264 levels for depth 308 and
        AND-depth 60.  Gates of a level keep their circuit order.
        """
        if self.n_gates == 0:
            return ()
        lev = self._gate_levels
        kind = np.select([self.op == AND, self.op == XOR], [0, 1], 2)  # within a level: AND, XOR, INV
        key = lev * 3 + kind
        order = np.argsort(key, kind="stable")  # circuit order within each (level, kind)
        in0, in1, out = _frozen(self.in0[order]), _frozen(self.in1[order]), _frozen(self.out[order])
        ends = np.cumsum(np.bincount(key, minlength=3 * (int(lev.max()) + 1))).tolist()
        and_index = np.arange(self.n_and, dtype=np.int64)
        and_index.setflags(write=False)
        levels = []
        p = and_base = 0
        for li in range(len(ends) // 3):
            pa, px, pv = ends[3 * li : 3 * li + 3]
            if pv == p:  # pragma: no cover - the schedule leaves no level empty
                continue
            levels.append(
                Level(
                    xor_in0=in0[pa:px],
                    xor_in1=in1[pa:px],
                    xor_out=out[pa:px],
                    and_in0=in0[p:pa],
                    and_in1=in1[p:pa],
                    and_out=out[p:pa],
                    and_index=and_index[and_base : and_base + pa - p],
                    inv_in=in0[px:pv],
                    inv_out=out[px:pv],
                )
            )
            and_base += pa - p
            p = pv
        return tuple(levels)

    # ------------------------------------------------------------------ identity
    @cached_property
    def content_hash(self) -> str:
        """SHA-256 (hex) of a canonical encoding of gates, groups and parties.

        Two parties holding circuits with equal hashes hold the same function
        with the same input and output layout; the name is not hashed.
        """
        h = hashlib.sha256()
        h.update(b"pairwise-circuit-v%d\0" % IR_VERSION)
        h.update(struct.pack("<QQ", self.n_wires, self.n_gates))
        for arr in (self.op.astype("<u1"), self.in0.astype("<i8"), self.in1.astype("<i8"), self.out.astype("<i8")):
            h.update(arr.tobytes())
        for g in self.inputs:
            h.update(b"I" + g.name.encode() + b"\0" + g.party.value.encode() + b"\0" + bytes([g.signed]))
            h.update(g.wires.astype("<i8").tobytes())
        for og in self.outputs:
            h.update(b"O" + og.name.encode() + b"\0" + bytes([og.signed]))
            h.update(og.wires.astype("<i8").tobytes())
        return h.hexdigest()

    def stats(self) -> CircuitStats:
        gdepth, gand = self._depths
        return CircuitStats(
            and_gates=self.n_and,
            xor_gates=int(np.count_nonzero(self.op == XOR)),
            inv_gates=int(np.count_nonzero(self.op == INV)),
            depth=int(gdepth.max()) if self.n_gates else 0,
            and_depth=int(gand.max()) if self.n_gates else 0,
            wires=self.n_wires,
            input_bits=self.n_inputs,
            output_bits=sum(g.width for g in self.outputs),
        )

    def __repr__(self) -> str:
        s = self.stats()
        ins = ", ".join(f"{g.name}:{g.party.value}[{g.width}]" for g in self.inputs)
        outs = ", ".join(f"{g.name}[{g.width}]" for g in self.outputs)
        return f"Circuit({self.name!r}, and={s.and_gates}, xor={s.xor_gates}, inv={s.inv_gates}, inputs=({ins}), outputs=({outs}))"

    # ------------------------------------------------------------------ plaintext evaluation
    def evaluate_bits(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Evaluate a batch in plaintext.

        ``inputs[k]`` is a bool array of shape (B, width_k) for input group k
        (bit j in column j).  Returns one bool array (B, width) per output
        group.  Instances are bit-packed 64 to a word, and each level costs a
        handful of numpy calls for all gates and all instances.
        """
        bits = self._check_bit_inputs(inputs)
        batch = bits[0].shape[0] if bits else 0
        nwords = max(1, (batch + 63) // 64)
        vals = np.zeros((self.n_wires, nwords), dtype=np.uint64)
        for g, b in zip(self.inputs, bits):
            vals[g.wires] = _pack_columns(b, nwords)
        ones = np.uint64(0xFFFFFFFFFFFFFFFF)
        for lv in self.levels:
            if lv.and_out.size:
                vals[lv.and_out] = vals[lv.and_in0] & vals[lv.and_in1]
            if lv.xor_out.size:
                vals[lv.xor_out] = vals[lv.xor_in0] ^ vals[lv.xor_in1]
            if lv.inv_out.size:
                vals[lv.inv_out] = vals[lv.inv_in] ^ ones
        return [_unpack_columns(vals[g.wires], batch) for g in self.outputs]

    def _check_bit_inputs(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if len(inputs) != len(self.inputs):
            raise CircuitError(f"circuit has {len(self.inputs)} input groups, got {len(inputs)} inputs")
        bits = [np.asarray(b, dtype=bool) for b in inputs]
        batch = None
        for g, b in zip(self.inputs, bits):
            if b.ndim != 2 or b.shape[1] != g.width:
                raise CircuitError(f"input {g.name!r} must have shape (batch, {g.width}), got {b.shape}")
            if batch is None:
                batch = b.shape[0]
            elif b.shape[0] != batch:
                raise CircuitError("all inputs must have the same batch size")
        return bits

    def evaluate(self, *values: int | np.integer | Sequence[int] | np.ndarray) -> list:
        """Evaluate on integer inputs, one argument per input group.

        Each argument is an int or a sequence of ints (a batch).  Values are
        checked against the group's width and signedness.  Returns one entry per
        output group: a Python int for scalar inputs, else a list of ints
        (numpy int64/uint64 arrays for outputs of at most 64 bits).
        """
        scalar = all(isinstance(v, (int, np.integer)) for v in values)
        batches = []
        for g, v in zip(self.inputs, values):
            arr = [int(v)] if isinstance(v, (int, np.integer)) else [int(x) for x in v]
            batches.append(ints_to_bits(arr, g.width, g.signed, name=g.name))
        if len(values) != len(self.inputs):
            raise CircuitError(f"circuit has {len(self.inputs)} input groups, got {len(values)} values")
        outs = self.evaluate_bits(batches)
        res = []
        for og, b in zip(self.outputs, outs):
            ints = bits_to_ints(b, og.signed)
            res.append(int(ints[0]) if scalar else ints)
        return res

    # ------------------------------------------------------------------ analysis
    def to_networkx(self) -> nx.DiGraph:
        """A ``networkx.DiGraph``: nodes are input wires and gates, edges carry wires.

        Nodes: ``("in", w)`` for input wire w (attribute ``group``, ``party``),
        ``("g", i)`` for gate i (attribute ``op``), ``("out", name, j)`` for output
        bits.  For analysis and export only, never on a hot path.
        """
        import networkx as nx

        gr = nx.DiGraph(name=self.name)
        writer: dict[int, tuple] = {}
        node: tuple
        for g in self.inputs:
            for j, w in enumerate(g.wires.tolist()):
                node = ("in", w)
                gr.add_node(node, kind="input", group=g.name, party=g.party.value, bit=j)
                writer[w] = node
        op = self.op.tolist()
        i0, i1, out = self.in0.tolist(), self.in1.tolist(), self.out.tolist()
        for i in range(self.n_gates):
            node = ("g", i)
            gr.add_node(node, kind="gate", op=OP_NAMES[op[i]])
            gr.add_edge(writer[i0[i]], node, wire=i0[i])
            if op[i] != INV:
                gr.add_edge(writer[i1[i]], node, wire=i1[i])
            writer[out[i]] = node
        for og in self.outputs:
            for j, w in enumerate(og.wires.tolist()):
                node = ("out", og.name, j)
                gr.add_node(node, kind="output", group=og.name, bit=j)
                gr.add_edge(writer[w], node, wire=w)
        return gr

    def to_dot(self) -> str:
        """Graphviz DOT text of the circuit graph."""
        lines = [f'digraph "{self.name}" {{', "  rankdir=LR;"]
        gr = self.to_networkx()
        ids = {n: f"n{k}" for k, n in enumerate(gr.nodes)}
        for n, data in gr.nodes(data=True):
            if data["kind"] == "gate":
                label, shape = data["op"], "box"
            elif data["kind"] == "input":
                label, shape = f"{data['group']}[{data['bit']}]", "ellipse"
            else:
                label, shape = f"{data['group']}[{data['bit']}]", "doubleoctagon"
            lines.append(f'  {ids[n]} [label="{label}", shape={shape}];')
        for a, b in gr.edges:
            lines.append(f"  {ids[a]} -> {ids[b]};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def write_graphml(self, path: str | os.PathLike[str] | IO[bytes]) -> None:
        """Write the circuit graph as GraphML (node ids stringified)."""
        import networkx as nx

        gr = self.to_networkx()
        mapping = {n: "_".join(str(p) for p in n) for n in gr.nodes}
        nx.write_graphml(nx.relabel_nodes(gr, mapping), path)


# ---------------------------------------------------------------------- bit helpers
def _pack_columns(bits: np.ndarray, nwords: int) -> np.ndarray:
    """(B, w) bools -> (w, nwords) uint64, instance i at bit i%64 of word i//64."""
    batch, width = bits.shape
    padded = np.zeros((width, nwords * 64), dtype=bool)
    padded[:, :batch] = bits.T
    packed = np.packbits(padded, axis=1, bitorder="little")  # (w, nwords*8) uint8
    return packed.view("<u8").astype(np.uint64, copy=False)


def _unpack_columns(words: np.ndarray, batch: int) -> np.ndarray:
    """(w, nwords) uint64 -> (B, w) bools."""
    as_bytes = np.ascontiguousarray(words.astype("<u8", copy=False)).view(np.uint8)
    bits = np.unpackbits(as_bytes, axis=1, bitorder="little")[:, :batch]
    return bits.T.astype(bool)


def ints_to_bits(
    values: Sequence[int] | np.ndarray, width: int, signed: bool = False, name: str = "input"
) -> np.ndarray:
    """Python ints -> (B, width) bools, LSB first, after a range check."""
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    if width <= 62:  # integer arrays (or lists that numpy reads as one): checked and split without a Python loop
        fast = _int_array_bits(values, width, lo, hi, signed, name)
        if fast is not None:
            return fast
    vals = [int(v) for v in values]
    for i, v in enumerate(vals):
        if not lo <= v <= hi:
            kind = "signed" if signed else "unsigned"
            raise CircuitError(f"{name}: value {v} (item {i}) is out of range for {width}-bit {kind} [{lo}, {hi}]")
    if width <= 63 or (width == 64 and not signed):
        arr = np.array([v & ((1 << width) - 1) for v in vals], dtype=np.uint64)
        shifts = np.arange(width, dtype=np.uint64)
        return ((arr[:, None] >> shifts[None, :]) & np.uint64(1)).astype(bool)
    nbytes = (width + 7) // 8
    raw = b"".join((v & ((1 << width) - 1)).to_bytes(nbytes, "little") for v in vals)
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(len(vals), nbytes), axis=1, bitorder="little")
    return bits[:, :width].astype(bool)


def _int_array_bits(values, width: int, lo: int, hi: int, signed: bool, name: str) -> np.ndarray | None:
    """:func:`ints_to_bits` for values numpy reads as a 1-D integer array (width <= 62); None otherwise."""
    try:
        arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    except (ValueError, TypeError, OverflowError):
        return None
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or arr.dtype.itemsize > 8:
        return None
    bad = (arr > hi) | (arr < lo) if arr.dtype.kind == "i" else arr > hi
    if bad.any():
        i = int(np.argmax(bad))
        kind = "signed" if signed else "unsigned"
        raise CircuitError(
            f"{name}: value {int(arr[i])} (item {i}) is out of range for {width}-bit {kind} [{lo}, {hi}]"
        )
    u = arr.astype(np.int64).view(np.uint64) & np.uint64((1 << width) - 1)
    shifts = np.arange(width, dtype=np.uint64)
    return ((u[:, None] >> shifts[None, :]) & np.uint64(1)).astype(bool)


def bits_to_ints(bits: np.ndarray, signed: bool = False):
    """(B, width) bools -> ints (numpy int64/uint64 array for width <= 64, else list of ints)."""
    bits = np.asarray(bits, dtype=bool)
    batch, width = bits.shape
    if width <= 64:
        weights = np.uint64(1) << np.arange(width, dtype=np.uint64)
        u = (bits.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64) if width else np.zeros(batch, np.uint64)
        if not signed:
            return u
        if width == 64:
            return u.view(np.int64)
        s = u.astype(np.int64)
        # sign-extend with the mask -(2^width), which fits in int64 for width <= 63
        return np.where(bits[:, -1], s | np.int64(-(1 << width)), s)
    packed = np.packbits(bits, axis=1, bitorder="little")
    out = []
    for row in packed:
        v = int.from_bytes(row.tobytes(), "little")
        if signed and v >> (width - 1):
            v -= 1 << width
        out.append(v)
    return out
