"""Circuit builder: fixed-width integers compiled to the fewest AND gates.

What it does
    :class:`Builder` records XOR/AND/INV gates and returns an immutable
    :class:`~pairwise.circuits.ir.Circuit`.  Constants fold at build time, identical
    gates are shared (hash-consing), double inversions cancel, and gates that
    no output depends on are dropped.  :class:`Int` is a fixed-width integer
    (unsigned, or signed two's complement) of wires with Python operators.

    Because XOR and INV are free under free-XOR garbling ([ZRE15] cost
    model), every operator is written for the fewest AND gates (the adders
    and comparators of Kolesnikov-Sadeghi-Schneider 2009, one AND per bit:
    ``a + b`` costs w - 1, ``a < b`` w, ``a * b`` w^2 - w + 1; shifts and
    slices are free).  The AND count of every operator: ``docs/circuits.md``,
    "What each operator costs".

    Results of ``+ - * neg`` wrap modulo 2^w like machine integers; widths of
    the two operands are first brought to the larger one (sign- or zero-
    extending each by its own signedness).  Comparisons between a signed and an
    unsigned operand are exact (both are extended by one bit and compared as
    signed).

Security model
    None: building is public.  Every input names its party; there is no
    default.

Follows
    docs/design.md, "circuits" (operators written for the fewest AND
    gates; the result is a frozen Circuit).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .ir import AND, INV, XOR, Circuit, CircuitError, InputGroup, OutputGroup, Party

__all__ = ["Builder", "Int", "FALSE", "TRUE"]

FALSE = 0
TRUE = 1


class Builder:
    """Records gates; produces a :class:`Circuit` with :meth:`build`."""

    def __init__(self, name: str = "circuit") -> None:
        self.name = name
        self._op: list[int] = []
        self._a: list[int] = []
        self._b: list[int] = []
        self._gate_of: dict[int, int] = {}  # wire id -> gate index
        self._gate_wire: list[int] = []  # gate index -> wire id
        self._cache: dict[tuple[int, int, int], int] = {}
        self._inv_of: dict[int, int] = {}
        self._next = 2  # 0 = FALSE, 1 = TRUE
        self._inputs: list[tuple[str, Party, list[int], bool]] = []
        self._outputs: list[tuple[str, list[int], bool]] = []
        self._input_wires: set[int] = set()

    # ------------------------------------------------------------------ inputs / outputs
    def input(self, name: str, width: int, party: Party | str, signed: bool = False) -> Int:
        """A private input of ``width`` bits owned by ``party`` (required: no default party)."""
        if party is None:
            raise CircuitError(f"input {name!r} must name its party (garbler or evaluator)")
        party = Party(party)
        if width <= 0:
            raise CircuitError(f"input {name!r}: width must be positive, got {width}")
        if any(n == name for n, *_ in self._inputs):
            raise CircuitError(f"duplicate input name {name!r}")
        wires = list(range(self._next, self._next + width))
        self._next += width
        self._input_wires.update(wires)
        self._inputs.append((name, party, wires, bool(signed)))
        return Int(self, wires, signed)

    def output(self, name: str, value: Int) -> None:
        """Declare ``value`` as the output group ``name`` (keeps its signedness)."""
        if any(n == name for n, *_ in self._outputs):
            raise CircuitError(f"duplicate output name {name!r}")
        if value.builder is not self:
            raise CircuitError("value belongs to another builder")
        self._outputs.append((name, list(value.bits), value.signed))

    def const(self, value: int, width: int, signed: bool = False) -> Int:
        """A constant; it costs nothing and folds into the gates that use it."""
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
        if not lo <= value <= hi:
            raise CircuitError(f"constant {value} does not fit in {width} {'signed' if signed else 'unsigned'} bits")
        v = value & ((1 << width) - 1)
        return Int(self, [(v >> i) & 1 for i in range(width)], signed)

    # ------------------------------------------------------------------ gates
    def _gate(self, op: int, a: int, b: int) -> int:
        key = (op, a, b)
        w = self._cache.get(key)
        if w is not None:
            return w
        w = self._next
        self._next += 1
        self._gate_of[w] = len(self._op)
        self._gate_wire.append(w)
        self._op.append(op)
        self._a.append(a)
        self._b.append(b)
        self._cache[key] = w
        return w

    def xor(self, a: int, b: int) -> int:
        if a > b:
            a, b = b, a
        if a == FALSE:
            return b
        if a == TRUE:
            return self.inv(b)
        if a == b:
            return FALSE
        ia, ib = self._inv_of.get(a), self._inv_of.get(b)
        if ia is not None or ib is not None:
            # push inversions outward: INV(x) ^ y = INV(x ^ y)
            x = ia if ia is not None else a
            y = ib if ib is not None else b
            r = self.xor(x, y)
            return r if (ia is not None) == (ib is not None) else self.inv(r)
        return self._gate(XOR, a, b)

    def and_(self, a: int, b: int) -> int:
        if a > b:
            a, b = b, a
        if a == FALSE:
            return FALSE
        if a == TRUE:
            return b
        if a == b:
            return a
        if self._inv_of.get(a) == b or self._inv_of.get(b) == a:
            return FALSE
        return self._gate(AND, a, b)

    def inv(self, a: int) -> int:
        if a <= TRUE:
            return 1 - a
        x = self._inv_of.get(a)
        if x is not None:
            return x
        w = self._gate(INV, a, a)
        self._inv_of[w] = a
        return w

    def or_(self, a: int, b: int) -> int:
        return self.inv(self.and_(self.inv(a), self.inv(b)))

    def mux_bit(self, c: int, a: int, b: int) -> int:
        """c ? a : b with one AND."""
        return self.xor(b, self.and_(c, self.xor(a, b)))

    def and_tree(self, bits: Sequence[int]) -> int:
        """AND of all bits as a balanced tree (len-1 ANDs, log depth)."""
        bits = list(bits)
        if not bits:
            return TRUE
        while len(bits) > 1:
            nxt = [self.and_(bits[i], bits[i + 1]) for i in range(0, len(bits) - 1, 2)]
            if len(bits) % 2:
                nxt.append(bits[-1])
            bits = nxt
        return bits[0]

    def or_tree(self, bits: Sequence[int]) -> int:
        return self.inv(self.and_tree([self.inv(b) for b in bits]))

    def full_adder(self, a: int, b: int, c: int) -> tuple[int, int]:
        """(sum, carry) with one AND: carry = ((a ^ c) & (b ^ c)) ^ c."""
        ac = self.xor(a, c)
        s = self.xor(ac, b)
        carry = self.xor(self.and_(ac, self.xor(b, c)), c)
        return s, carry

    def add_bits(self, a: Sequence[int], b: Sequence[int], cin: int = FALSE, carry_out: bool = False):
        """Ripple-carry a + b + cin over len(a) bits; one AND per bit that needs a carry."""
        n = len(a)
        out = []
        c = cin
        for i in range(n):
            ai, bi = a[i], b[i]
            out.append(self.xor(self.xor(ai, bi), c))
            if i < n - 1 or carry_out:
                c = self.xor(self.and_(self.xor(ai, c), self.xor(bi, c)), c)
        return (out, c) if carry_out else out

    def sum_columns(self, columns: list[list[int]]) -> list[int]:
        """Sum weighted bits (column k has weight 2^k) modulo 2^len(columns).

        Column compression with full adders (one AND each) and half adders;
        carries out of the top column are dropped, so the top column costs no
        AND at all.  Used by multiplication and squaring.
        """
        cols = [list(c) for c in columns]
        width = len(cols)
        out = []
        for k in range(width):
            col = [b for b in cols[k] if b != FALSE]
            ones = sum(1 for b in col if b == TRUE)
            col = [b for b in col if b != TRUE]
            # constant ones: fold pairs into the next column
            if ones:
                if ones % 2:
                    col.append(TRUE)
                if ones // 2 and k + 1 < width:
                    v = ones // 2
                    j = k + 1
                    while v and j < width:
                        if v & 1:
                            cols[j].append(TRUE)
                        v >>= 1
                        j += 1
            top = k == width - 1
            if top:
                r = FALSE
                for b in col:
                    r = self.xor(r, b)
                out.append(r)
                break
            while len(col) >= 3:
                a, b, c = col.pop(0), col.pop(0), col.pop(0)
                s, carry = self.full_adder(a, b, c)
                col.append(s)
                cols[k + 1].append(carry)
            if len(col) == 2:
                a, b = col
                cols[k + 1].append(self.and_(a, b))
                col = [self.xor(a, b)]
            out.append(col[0] if col else FALSE)
        return out

    # ------------------------------------------------------------------ build
    def build(self, name: str | None = None) -> Circuit:
        """Freeze into a :class:`Circuit`: dead gates removed, wires renumbered.

        Layout: input wires first, then gates in creation (topological) order;
        the circuit is then put in Bristol Fashion layout (outputs last), so it
        round-trips through :mod:`pairwise.circuits.bristol` unchanged.
        """
        from .bristol import bristol_layout

        if not self._outputs:
            raise CircuitError("circuit has no outputs")
        if not self._inputs:
            raise CircuitError("circuit has no inputs")
        # liveness, walking gates backwards
        live = np.zeros(len(self._op), dtype=bool)
        stack = [w for _, bits, _ in self._outputs for w in bits if w in self._gate_of]
        while stack:
            g = self._gate_of[stack.pop()]
            if live[g]:
                continue
            live[g] = True
            for w in (self._a[g], self._b[g]):
                if w in self._gate_of and not live[self._gate_of[w]]:
                    stack.append(w)
        new: dict[int, int] = {}
        nxt = 0
        inputs = []
        for name_, party, wires, signed in self._inputs:
            start = nxt
            for w in wires:
                new[w] = nxt
                nxt += 1
            inputs.append(InputGroup(name_, party, np.arange(start, nxt), signed))
        first_input = 0
        op, a0, a1, out = [], [], [], []
        consts_needed = {b for _, bits, _ in self._outputs for b in bits if b <= TRUE}
        if consts_needed:
            zero = nxt
            op.append(XOR)
            a0.append(first_input)
            a1.append(first_input)
            out.append(zero)
            nxt += 1
            new[FALSE] = zero
            if TRUE in consts_needed:
                op.append(INV)
                a0.append(zero)
                a1.append(zero)
                out.append(nxt)
                new[TRUE] = nxt
                nxt += 1
        for g in np.flatnonzero(live).tolist():
            o = self._op[g]
            a = new[self._a[g]]
            b = new[self._b[g]]
            op.append(o)
            a0.append(a)
            a1.append(b)
            out.append(nxt)
            new[self._gate_wire[g]] = nxt
            nxt += 1
        outputs = [OutputGroup(n, np.array([new[b] for b in bits], dtype=np.int64), s) for n, bits, s in self._outputs]
        c = Circuit(nxt, op, a0, a1, out, inputs, outputs, name=name or self.name)
        return bristol_layout(c)

    def and_count(self) -> int:
        """AND gates recorded so far (before dead-gate removal)."""
        return sum(1 for o in self._op if o == AND)

    # ------------------------------------------------------------------ helpers
    def concat(self, *values: Int, signed: bool = False) -> Int:
        """Concatenate values, first = least significant."""
        bits: list[int] = []
        for v in values:
            bits.extend(v.bits)
        return Int(self, bits, signed)

    def mux(self, c: Int, a: Int, b: Int) -> Int:
        """``c ? a : b`` for a 1-bit ``c``; w AND gates."""
        return c.mux(a, b)


def _as_int(b: Builder, v, like: Int) -> Int:
    if isinstance(v, Int):
        if v.builder is not b:
            raise CircuitError("operands belong to different builders")
        return v
    if isinstance(v, (int, np.integer)):
        v = int(v)
        signed = like.signed or v < 0
        width = like.width
        lo = -(1 << (width - 1)) if signed else 0
        hi = (1 << (width - 1)) - 1 if signed else (1 << width) - 1
        if not lo <= v <= hi:
            width = max(width, v.bit_length() + 1 if signed else v.bit_length())
        return b.const(v, width, signed)
    raise TypeError(f"cannot use {type(v).__name__} as a circuit integer")


class Int:
    """A fixed-width integer of wires (bit 0 first); ``signed`` means two's complement."""

    __slots__ = ("builder", "bits", "signed")

    def __init__(self, builder: Builder, bits: Iterable[int], signed: bool = False) -> None:
        self.builder = builder
        self.bits = tuple(bits)
        self.signed = bool(signed)
        if not self.bits:
            raise CircuitError("an integer needs at least one bit")

    @property
    def width(self) -> int:
        return len(self.bits)

    def __repr__(self) -> str:
        return f"Int(width={self.width}, signed={self.signed})"

    # ------------------------------------------------------------------ width
    def extend(self, width: int, signed: bool | None = None) -> Int:
        """Sign- or zero-extend (by this value's signedness) or truncate to ``width``."""
        fill = self.bits[-1] if self.signed else FALSE
        bits = list(self.bits[:width]) + [fill] * max(0, width - self.width)
        return Int(self.builder, bits, self.signed if signed is None else signed)

    def as_signed(self) -> Int:
        return Int(self.builder, self.bits, True)

    def as_unsigned(self) -> Int:
        return Int(self.builder, self.bits, False)

    def _pair(self, other) -> tuple[Int, Int]:
        o = _as_int(self.builder, other, self)
        w = max(self.width, o.width)
        return self.extend(w), o.extend(w)

    # ------------------------------------------------------------------ bits
    def __getitem__(self, idx) -> Int:
        if isinstance(idx, slice):
            bits = self.bits[idx]
        else:
            bits = (self.bits[idx],)
        return Int(self.builder, bits, False)

    def __xor__(self, other) -> Int:
        a, b = self._pair(other)
        return Int(self.builder, [self.builder.xor(x, y) for x, y in zip(a.bits, b.bits)], a.signed)

    def __and__(self, other) -> Int:
        a, b = self._pair(other)
        return Int(self.builder, [self.builder.and_(x, y) for x, y in zip(a.bits, b.bits)], a.signed)

    def __or__(self, other) -> Int:
        a, b = self._pair(other)
        return Int(self.builder, [self.builder.or_(x, y) for x, y in zip(a.bits, b.bits)], a.signed)

    def __invert__(self) -> Int:
        return Int(self.builder, [self.builder.inv(x) for x in self.bits], self.signed)

    __rxor__ = __xor__
    __rand__ = __and__
    __ror__ = __or__

    def __lshift__(self, k: int) -> Int:
        k = int(k)
        if k < 0:
            raise CircuitError("shift amount must be non-negative")
        bits = [FALSE] * min(k, self.width) + list(self.bits[: max(0, self.width - k)])
        return Int(self.builder, bits, self.signed)

    def __rshift__(self, k: int) -> Int:
        """Arithmetic shift for signed values, logical for unsigned."""
        k = int(k)
        if k < 0:
            raise CircuitError("shift amount must be non-negative")
        fill = self.bits[-1] if self.signed else FALSE
        bits = list(self.bits[k:]) + [fill] * min(k, self.width)
        return Int(self.builder, bits, self.signed)

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other) -> Int:
        a, b = self._pair(other)
        return Int(self.builder, self.builder.add_bits(a.bits, b.bits), a.signed or b.signed)

    __radd__ = __add__

    def __sub__(self, other) -> Int:
        a, b = self._pair(other)
        nb = [self.builder.inv(x) for x in b.bits]
        return Int(self.builder, self.builder.add_bits(a.bits, nb, TRUE), a.signed or b.signed)

    def __rsub__(self, other) -> Int:
        o = _as_int(self.builder, other, self)
        return o - self

    def __neg__(self) -> Int:
        zero = self.builder.const(0, self.width)
        return Int(self.builder, (zero - self).bits, self.signed)

    def __abs__(self) -> Int:
        """|x| as an unsigned value of the same width (|MIN| = 2^(w-1) fits); w - 1 ANDs."""
        if not self.signed:
            return self
        bld = self.builder
        s = self.bits[-1]
        flipped = [bld.xor(x, s) for x in self.bits]
        zero = [FALSE] * self.width
        return Int(bld, bld.add_bits(flipped, zero, s), False)

    def __mul__(self, other) -> Int:
        """Product truncated to the operands' width (schoolbook, w^2 - w + 1 ANDs)."""
        a, b = self._pair(other)
        bld = self.builder
        w = a.width
        acc = [bld.and_(x, b.bits[0]) for x in a.bits]
        for i in range(1, w):
            row = [bld.and_(x, b.bits[i]) for x in a.bits[: w - i]]
            acc = acc[:i] + bld.add_bits(acc[i:], row)
        return Int(bld, acc, a.signed or b.signed)

    __rmul__ = __mul__

    def mul_full(self, other) -> Int:
        """Exact product on width(a) + width(b) bits (signed if either is)."""
        o = _as_int(self.builder, other, self)
        signed = self.signed or o.signed
        w = self.width + o.width
        return Int(self.builder, (self.extend(w) * o.extend(w)).bits, signed)

    def square(self) -> Int:
        """x^2 exactly on 2w bits, for unsigned x: w(w-1)/2 partial products plus compression."""
        if self.signed:
            raise CircuitError("square() takes an unsigned value; use abs() first")
        bld = self.builder
        w = self.width
        cols: list[list[int]] = [[] for _ in range(2 * w)]
        for i in range(w):
            cols[2 * i].append(self.bits[i])
            for j in range(i + 1, w):
                if i + j + 1 < 2 * w:
                    cols[i + j + 1].append(bld.and_(self.bits[i], self.bits[j]))
        return Int(bld, bld.sum_columns(cols), False)

    # ------------------------------------------------------------------ comparisons
    def _cmp_operands(self, other) -> tuple[Int, Int, bool]:
        o = _as_int(self.builder, other, self)
        if self.signed != o.signed:
            w = max(self.width, o.width) + 1
            return self.extend(w, True).extend(w), o.extend(w).as_signed(), True
        w = max(self.width, o.width)
        return self.extend(w), o.extend(w), self.signed

    def _lt(self, a: Int, b: Int, signed: bool) -> int:
        """[a < b]: borrow of a - b through the carry chain of a + ~b + 1; w ANDs."""
        bld = self.builder
        ab, bb = list(a.bits), list(b.bits)
        if signed:  # flip the sign bits: signed order becomes unsigned order
            ab[-1] = bld.inv(ab[-1])
            bb[-1] = bld.inv(bb[-1])
        c = TRUE
        for x, y in zip(ab, bb):
            ny = bld.inv(y)
            c = bld.xor(bld.and_(bld.xor(x, c), bld.xor(ny, c)), c)
        return bld.inv(c)  # carry = [a >= b]

    def __lt__(self, other) -> Int:
        a, b, s = self._cmp_operands(other)
        return Int(self.builder, [self._lt(a, b, s)])

    def __gt__(self, other) -> Int:
        a, b, s = self._cmp_operands(other)
        return Int(self.builder, [self._lt(b, a, s)])

    def __le__(self, other) -> Int:
        a, b, s = self._cmp_operands(other)
        return Int(self.builder, [self.builder.inv(self._lt(b, a, s))])

    def __ge__(self, other) -> Int:
        a, b, s = self._cmp_operands(other)
        return Int(self.builder, [self.builder.inv(self._lt(a, b, s))])

    def eq(self, other) -> Int:
        """[self == other] with w - 1 ANDs (balanced tree)."""
        a, b, _ = self._cmp_operands(other)
        bld = self.builder
        return Int(bld, [bld.and_tree([bld.inv(bld.xor(x, y)) for x, y in zip(a.bits, b.bits)])])

    def ne(self, other) -> Int:
        return ~self.eq(other)

    def is_zero(self) -> Int:
        bld = self.builder
        return Int(bld, [bld.and_tree([bld.inv(x) for x in self.bits])])

    def nonzero(self) -> Int:
        return ~self.is_zero()

    def sign(self) -> Int:
        """sign(x) in {-1, 0, 1} as a 2-bit signed value; w - 1 ANDs."""
        nz = self.nonzero().bits[0]
        neg = self.bits[-1] if self.signed else FALSE
        return Int(self.builder, [nz, neg], True)

    def mux(self, a, b) -> Int:
        """``self ? a : b`` where self is 1 bit wide; width(a) ANDs."""
        if self.width != 1:
            raise CircuitError("mux condition must be 1 bit wide")
        bld = self.builder
        # size a constant operand by the other operand (or by the condition if both are constants)
        x = _as_int(bld, a, b if isinstance(b, Int) else self)
        y = _as_int(bld, b, x)
        if x.signed != y.signed:
            # exact for both: the unsigned one gains a zero bit, then both are signed
            w = max(x.width + (not x.signed), y.width + (not y.signed))
            x, y = x.extend(w).as_signed(), y.extend(w).as_signed()
        else:
            w = max(x.width, y.width)
            x, y = x.extend(w), y.extend(w)
        c = self.bits[0]
        return Int(bld, [bld.mux_bit(c, p, q) for p, q in zip(x.bits, y.bits)], x.signed)

    # Python's == must stay usable for identity in containers; use eq()/ne() for circuits.
    __hash__ = object.__hash__
