"""Bristol Fashion circuit files: reader, writer, and a reader for the older Bristol format.

What it does
    Bristol Fashion (Archer et al., "Bristol Fashion" MPC circuits, 2019):
    line 1 ``ngates nwires``, line 2 ``niv n_1 .. n_niv``, line 3
    ``nov m_1 .. m_nov``, then one gate per line ``nin nout in.. out.. KIND``
    with KIND in XOR, AND, INV, EQW (wire copy), EQ (constant), MAND
    (several ANDs at once).  Input wires come first, group by group, output
    wires are the last ``sum(m)`` wires.  Wire i of a group is bit i of the
    group's value read as a big-endian integer (as in emp-tool's standard
    files, e.g. AES-128 from FIPS-197), which is our IR's LSB-first convention.

    The old Bristol format has line 2 ``n1 n2 nout`` and the same gate lines.

    Every parse error raises :class:`BristolFormatError` naming the line.
    Memory is bounded by the file, not by its header: a wire count that the
    gate lines cannot fill is refused before any per-wire table is made.

Security model
    None: circuit files are public.  A circuit read from a file gets its input
    groups' parties from ``parties`` (default: group 1 the garbler, the others
    the evaluator), never implicitly from the file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .ir import AND, EVALUATOR, GARBLER, INV, XOR, Circuit, CircuitError, InputGroup, OutputGroup, Party

__all__ = [
    "BristolFormatError",
    "read_bristol_fashion",
    "parse_bristol_fashion",
    "write_bristol_fashion",
    "format_bristol_fashion",
    "read_bristol_old",
    "parse_bristol_old",
    "bristol_layout",
]


class BristolFormatError(CircuitError):
    """A Bristol file is malformed; ``line`` is the 1-based line number (0 if not line-specific)."""

    #: the longest message: a quoted token of a hostile file (20 MB on one line) is cut, not repeated whole
    MAX_MESSAGE = 400

    def __init__(self, message: str, line: int = 0, source: str = "<string>") -> None:
        self.line = line
        self.source = source
        where = f"{source}, line {line}: " if line else f"{source}: "
        if len(message) > self.MAX_MESSAGE:
            message = f"{message[: self.MAX_MESSAGE]}... ({len(message)} characters in all)"
        super().__init__(where + message)


def _quote(text: str, limit: int = 60) -> str:
    """``repr`` of a piece of the file for a message, cut to about ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def _default_parties(n: int, parties: Sequence[Party | str] | None) -> list[Party]:
    if parties is None:
        return [GARBLER] + [EVALUATOR] * (n - 1)
    if len(parties) != n:
        raise CircuitError(f"the file has {n} input groups but {len(parties)} parties were given")
    return [Party(p) for p in parties]


def _ints(tokens: list[str], lineno: int, src: str) -> list[int]:
    try:
        return [int(t) for t in tokens]
    except ValueError:
        raise BristolFormatError(f"expected integers, got {_quote(' '.join(tokens))}", lineno, src) from None


def _check_wire_count(lines: list[str], first: int, nwires: int, n_in: int, src: str) -> None:
    """Refuse a header whose wire count the gate lines cannot fill, before allocating per wire.

    Every wire is an input or the output of a gate line, and a gate line
    ``nin nout in.. out.. KIND`` has at most ``len(tokens) - 3`` outputs, so
    ``nwires <= n_in + sum(len(tokens) - 3)``: the per-wire tables below are
    then bounded by the file's own size, whatever its header claims.
    """
    room = n_in
    for raw in lines[first - 1 :]:
        room += max(0, len(raw.split()) - 3)
        if room >= nwires:
            return
    raise BristolFormatError(
        f"the header announces {nwires} wires, but the {n_in} inputs and the gate lines can set at most {room}; "
        "the wire count is wrong (or the file is truncated)",
        1,
        src,
    )


class _Gates(NamedTuple):
    """The parsed gate lines after EQW/EQ/MAND lowering: the gate arrays, each wire's alias, which wires are
    set, and the EQ constants' temporaries (numbered -1, -2, ... until :func:`_finish` places them)."""

    op: list[int]
    in0: list[int]
    in1: list[int]
    out: list[int]
    alias: list[int]
    defined: bytearray
    zero_wire: list[int]


def _parse_gates(lines: list[str], first: int, ngates: int, nwires: int, n_in: int, src: str) -> _Gates:
    """Parse gate lines; returns op, in0, in1, out lists after EQW/EQ/MAND lowering."""
    _check_wire_count(lines, first, nwires, n_in, src)
    op: list[int] = []
    in0: list[int] = []
    in1: list[int] = []
    out: list[int] = []
    alias = list(range(nwires))  # EQW makes a wire an alias of another
    defined = bytearray(nwires)
    defined[:n_in] = b"\x01" * n_in
    const_wires: dict[int, int] = {}  # EQ constants: resolved lazily
    lineno = first
    count = 0
    total = len(lines)
    li = first - 1
    zero_wire: list[int] = []

    def use(w: int, ln: int) -> int:
        if w < 0 or w >= nwires:
            raise BristolFormatError(f"wire {w} out of range [0, {nwires})", ln, src)
        if not defined[w]:
            raise BristolFormatError(f"wire {w} is used before it is set", ln, src)
        return alias[w]

    def setw(w: int, ln: int) -> None:
        if w < 0 or w >= nwires:
            raise BristolFormatError(f"wire {w} out of range [0, {nwires})", ln, src)
        if defined[w]:
            raise BristolFormatError(f"wire {w} is set twice", ln, src)
        defined[w] = 1

    while count < ngates:
        if li >= total:
            raise BristolFormatError(f"truncated file: header announces {ngates} gates, found {count}", li, src)
        raw = lines[li]
        li += 1
        lineno = li
        toks = raw.split()
        if not toks:
            continue
        kind = toks[-1]
        nums = _ints(toks[:-1], lineno, src)
        if len(nums) < 2:
            raise BristolFormatError(f"gate line too short: {_quote(raw.strip())}", lineno, src)
        nin, nout = nums[0], nums[1]
        if len(nums) != 2 + nin + nout:
            raise BristolFormatError(
                f"gate line announces {nin} inputs and {nout} outputs but has {len(nums) - 2} wires", lineno, src
            )
        ins, outs = nums[2 : 2 + nin], nums[2 + nin :]
        if kind in ("XOR", "AND"):
            if (nin, nout) != (2, 1):
                raise BristolFormatError(f"{kind} takes 2 inputs and 1 output, got {nin} and {nout}", lineno, src)
            a, b = use(ins[0], lineno), use(ins[1], lineno)
            setw(outs[0], lineno)
            op.append(XOR if kind == "XOR" else AND)
            in0.append(a)
            in1.append(b)
            out.append(outs[0])
        elif kind in ("INV", "NOT"):
            if (nin, nout) != (1, 1):
                raise BristolFormatError(f"INV takes 1 input and 1 output, got {nin} and {nout}", lineno, src)
            a = use(ins[0], lineno)
            setw(outs[0], lineno)
            op.append(INV)
            in0.append(a)
            in1.append(a)
            out.append(outs[0])
        elif kind == "EQW":
            if (nin, nout) != (1, 1):
                raise BristolFormatError(f"EQW takes 1 input and 1 output, got {nin} and {nout}", lineno, src)
            a = use(ins[0], lineno)
            setw(outs[0], lineno)
            alias[outs[0]] = a
        elif kind == "EQ":
            if (nin, nout) != (1, 1) or ins[0] not in (0, 1):
                raise BristolFormatError("EQ takes one constant input (0 or 1) and 1 output", lineno, src)
            if n_in == 0:
                raise BristolFormatError("EQ needs at least one input wire to build a constant from", lineno, src)
            setw(outs[0], lineno)
            # constant c on wire w: XOR(x, x) = 0, then INV for 1.
            op.append(XOR)
            in0.append(0)
            in1.append(0)
            if ins[0] == 0:
                out.append(outs[0])
            else:
                tmp = len(zero_wire)
                zero_wire.append(outs[0])
                out.append(-1 - tmp)  # placeholder fixed below
                op.append(INV)
                in0.append(-1 - tmp)
                in1.append(-1 - tmp)
                out.append(outs[0])
            const_wires[outs[0]] = ins[0]
        elif kind == "MAND":
            if nin != 2 * nout:
                raise BristolFormatError(f"MAND takes 2k inputs and k outputs, got {nin} and {nout}", lineno, src)
            k = nout
            a_s = [use(w, lineno) for w in ins[:k]]
            b_s = [use(w, lineno) for w in ins[k:]]
            for a, b, o in zip(a_s, b_s, outs):
                setw(o, lineno)
                op.append(AND)
                in0.append(a)
                in1.append(b)
                out.append(o)
        else:
            raise BristolFormatError(f"unknown gate kind {_quote(kind)}", lineno, src)
        count += 1
    for rest in lines[li:]:
        li += 1
        if rest.strip():
            raise BristolFormatError(f"extra content after {ngates} gates: {_quote(rest.strip())}", li, src)
    return _Gates(op, in0, in1, out, alias, defined, zero_wire)


def _finish(gates: _Gates, nwires, groups_in, groups_out, parties, name, src):
    op, in0, in1, out, alias, defined, zero_wire = gates
    # EQ-1 temporaries get fresh wire numbers past nwires.
    extra = len(zero_wire)
    if extra:
        remap = {-1 - t: nwires + t for t in range(extra)}
        in0 = [remap.get(w, w) for w in in0]
        in1 = [remap.get(w, w) for w in in1]
        out = [remap.get(w, w) for w in out]
    n_in = sum(groups_in)
    n_out = sum(groups_out)
    if n_in + n_out > nwires:
        raise BristolFormatError(f"{n_in} input and {n_out} output wires do not fit in {nwires} wires", 1, src)
    inputs = []
    base = 0
    for k, (w, p) in enumerate(zip(groups_in, _default_parties(len(groups_in), parties))):
        inputs.append(InputGroup(f"in{k}", p, np.arange(base, base + w)))
        base += w
    outputs = []
    obase = nwires - n_out
    for k, w in enumerate(groups_out):
        wires = np.arange(obase, obase + w)
        for x in wires.tolist():
            if not defined[x]:
                raise BristolFormatError(
                    f"output wire {x} is never set (the header's wire count leaves it unused)", 1, src
                )
        outputs.append(OutputGroup(f"out{k}", np.array([alias[x] for x in wires.tolist()])))
        obase += w
    try:
        return Circuit(nwires + extra, op, in0, in1, out, inputs, outputs, name=name)
    except BristolFormatError:
        raise
    except CircuitError as exc:
        raise BristolFormatError(str(exc), 0, src) from None


def _header(lines: list[str], src: str, old: bool):
    body = [(i + 1, ln) for i, ln in enumerate(lines)]
    hdr = [(i, ln) for i, ln in body if ln.strip()][:3]
    if len(hdr) < 3:
        raise BristolFormatError("truncated header (need 3 non-empty lines)", len(lines), src)
    (l1, t1), (l2, t2), (l3, t3) = hdr
    a = _ints(t1.split(), l1, src)
    if len(a) != 2:
        raise BristolFormatError("line 1 must be 'ngates nwires'", l1, src)
    ngates, nwires = a
    if ngates < 0 or nwires <= 0:
        raise BristolFormatError(f"invalid counts ngates={ngates} nwires={nwires}", l1, src)
    b = _ints(t2.split(), l2, src)
    if old:
        if len(b) != 3:
            raise BristolFormatError("line 2 of the old Bristol format must be 'n1 n2 nout'", l2, src)
        groups_in = [x for x in b[:2] if x > 0]
        groups_out = [b[2]]
        return ngates, nwires, groups_in, groups_out, l2 + 1
    if not b or b[0] != len(b) - 1 or b[0] < 1 or min(b[1:]) <= 0:
        raise BristolFormatError("line 2 must be 'niv n_1 .. n_niv' with positive widths", l2, src)
    c = _ints(t3.split(), l3, src)
    if not c or c[0] != len(c) - 1 or c[0] < 1 or min(c[1:]) <= 0:
        raise BristolFormatError("line 3 must be 'nov m_1 .. m_nov' with positive widths", l3, src)
    return ngates, nwires, b[1:], c[1:], l3 + 1


def _old_format_header(lines: list[str]) -> str | None:
    """Line 2 if the header reads as the old Bristol format (``n1 n2 nout`` fitting the wire count)."""
    hdr = [ln for ln in lines if ln.strip()][:3]
    if len(hdr) < 3:
        return None
    try:
        ngates, nwires = map(int, hdr[0].split())
        n1, n2, nout = map(int, hdr[1].split())
    except ValueError:
        return None
    third = hdr[2].split()
    fashion_line3 = third and all(t.isdigit() for t in third) and int(third[0]) == len(third) - 1
    if min(n1, n2) >= 0 and nout > 0 and n1 + n2 + nout <= nwires and ngates >= 0 and not fashion_line3:
        return hdr[1].strip()
    return None


def parse_bristol_fashion(text: str, parties=None, name: str = "bristol", source: str = "<string>") -> Circuit:
    """Parse Bristol Fashion text into a :class:`Circuit` (see module docstring).

    A file in the old Bristol format is refused with a message that says so
    and how to convert it.
    """
    lines = text.splitlines()
    try:
        ngates, nwires, gin, gout, first = _header(lines, source, old=False)
    except BristolFormatError as exc:
        line2 = _old_format_header(lines)
        if line2 is None:
            raise
        raise BristolFormatError(
            f"this is the old Bristol format (line 2 'n1 n2 nout' = {_quote(line2)}), not Bristol Fashion; "
            f"read it with pairwise.circuits.bristol.read_bristol_old, or convert it with "
            f"'pairwise circuit export {source} --old-bristol --format bristol -o NEW.txt'",
            exc.line,
            source,
        ) from None
    n_in = sum(gin)
    if n_in > nwires:
        raise BristolFormatError(f"{n_in} input wires do not fit in {nwires} wires", 2, source)
    parts = _parse_gates(lines, first, ngates, nwires, n_in, source)
    return _finish(parts, nwires, gin, gout, parties, name, source)


def parse_bristol_old(text: str, parties=None, name: str = "bristol-old", source: str = "<string>") -> Circuit:
    """Parse the older Bristol format (line 2 ``n1 n2 nout``)."""
    lines = text.splitlines()
    ngates, nwires, gin, gout, first = _header(lines, source, old=True)
    n_in = sum(gin)
    parts = _parse_gates(lines, first, ngates, nwires, n_in, source)
    return _finish(parts, nwires, gin, gout, parties, name, source)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read()
    except UnicodeDecodeError as exc:
        raise BristolFormatError(f"not a text file ({exc})", 0, path) from None


def read_bristol_fashion(path: str | os.PathLike, parties=None) -> Circuit:
    """Read a Bristol Fashion file; group 1 belongs to the garbler unless ``parties`` says otherwise."""
    path = os.fspath(path)
    name = os.path.splitext(os.path.basename(path))[0]
    return parse_bristol_fashion(_read_text(path), parties=parties, name=name, source=path)


def read_bristol_old(path: str | os.PathLike, parties=None) -> Circuit:
    """Read a file in the older Bristol format."""
    path = os.fspath(path)
    name = os.path.splitext(os.path.basename(path))[0]
    return parse_bristol_old(_read_text(path), parties=parties, name=name, source=path)


def bristol_layout(c: Circuit) -> Circuit:
    """An equivalent circuit in Bristol Fashion layout.

    Wires: inputs first, then gate outputs in gate order, with the output bits
    being the last wires in output order.  Gates writing output bits move to
    the end when nothing reads them; otherwise (an output that is an input
    wire, feeds other gates, or appears twice) a free XOR copy with a zero
    wire is appended.  Circuits already in that layout come back unchanged.
    """
    n_in = c.n_inputs
    n_out = sum(g.width for g in c.outputs)
    out_bits = np.concatenate([g.wires for g in c.outputs]) if c.outputs else np.zeros(0, np.int64)
    n = c.n_gates
    if c.n_wires == n_in + n and n_out and np.array_equal(out_bits, np.arange(c.n_wires - n_out, c.n_wires)):
        return c
    read_by_gate = np.zeros(c.n_wires, dtype=bool)
    if n:
        read_by_gate[c.in0] = True
        read_by_gate[c.in1[c.op != INV]] = True
    writer = np.full(c.n_wires, -1, dtype=np.int64)
    writer[c.out] = np.arange(n)
    uses = np.bincount(out_bits, minlength=c.n_wires) if n_out else np.zeros(c.n_wires, np.int64)
    movable: list[int] = []  # gate index for each output bit, or -1 when a copy is needed
    for w in out_bits.tolist():
        ok = uses[w] == 1 and w >= n_in and writer[w] >= 0 and not read_by_gate[w]
        movable.append(int(writer[w]) if ok else -1)
    moved = {g for g in movable if g >= 0}
    body = [g for g in range(n) if g not in moved]
    ops, a0, a1 = c.op.tolist(), c.in0.tolist(), c.in1.tolist()
    new_wire = {w: w for w in range(n_in)}
    nop: list[int] = []
    n0: list[int] = []
    n1: list[int] = []
    nxt = n_in
    for g in body:
        nop.append(ops[g])
        n0.append(new_wire[a0[g]])
        n1.append(new_wire[a1[g]])
        new_wire[int(c.out[g])] = nxt
        nxt += 1
    zero = -1  # the constant-zero wire, made below when a moved output needs it
    if any(g < 0 for g in movable):
        nop.append(XOR)
        n0.append(0)
        n1.append(0)
        zero = nxt
        nxt += 1
    for g, w in zip(movable, out_bits.tolist()):
        if g >= 0:
            nop.append(ops[g])
            n0.append(new_wire[a0[g]])
            n1.append(new_wire[a1[g]])
        else:
            nop.append(XOR)
            n0.append(new_wire[w])
            n1.append(zero)
        nxt += 1
    total = nxt
    nout = np.arange(n_in, total)
    outputs = []
    base = total - n_out
    for og in c.outputs:
        outputs.append(OutputGroup(og.name, np.arange(base, base + og.width), og.signed))
        base += og.width
    return Circuit(total, nop, n0, n1, nout, c.inputs, outputs, name=c.name)


def format_bristol_fashion(c: Circuit) -> str:
    """Bristol Fashion text of ``c`` (after :func:`bristol_layout`)."""
    c = bristol_layout(c)
    lines = [
        f"{c.n_gates} {c.n_wires}",
        " ".join(str(x) for x in [len(c.inputs)] + [g.width for g in c.inputs]) + " ",
        " ".join(str(x) for x in [len(c.outputs)] + [g.width for g in c.outputs]) + " ",
        "",
    ]
    names = {XOR: "XOR", AND: "AND", INV: "INV"}
    for o, a, b, w in zip(c.op.tolist(), c.in0.tolist(), c.in1.tolist(), c.out.tolist()):
        if o == INV:
            lines.append(f"1 1 {a} {w} INV")
        else:
            lines.append(f"2 1 {a} {b} {w} {names[o]}")
    return "\n".join(lines) + "\n"


def write_bristol_fashion(c: Circuit, path: str | os.PathLike) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(format_bristol_fashion(c))
