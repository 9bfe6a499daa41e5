"""U-statistic kernels as minimal boolean circuits.

What it does
    Each kernel h(x, y) of the U-statistics of [BBGK20, Sec. 2
    and 5] becomes a :class:`~pairwise.circuits.ir.Circuit` with one input group
    per party: ``x`` owned by the garbler, ``y`` by the evaluator (for
    ``kendall`` each group packs the party's pair, see :func:`pack_pair`), and
    one output group ``out``.

    =========  ==========================================  ===============  ====================
    kernel     output                                      output type      AND gates (budget)
    =========  ==========================================  ===============  ====================
    gini       |x - y|  (Gini mean difference, Eq. 4)       unsigned, w      2w      (<= 2w + 2)
    auc        2[x > y] + [x == y] (AUC x2, Eq. 7)          unsigned, 2      2w - 1  (<= 2w + 2)
    kendall    sign(x1 - x2) sign(y1 - y2) (tau-a, Eq. 6)   signed, 2        4w + 2  (<= 4w + 8)
    variance   floor((x - y)^2 / 2)                         unsigned, 2w+1   w^2 + w (<= w^2 + 3w)
    collision  [x == y]  (Renyi-2 entropy)                  unsigned, 1      w - 1   (<= w)
    =========  ==========================================  ===============  ====================

    Differences are taken on w + 1 bits, so no kernel overflows for any pair
    of w-bit inputs, signed or unsigned.

Security model
    Circuits are public; the inputs are private to the party named on each
    input group.

Follows
    [BBGK20, Eq. (4), (6), (7) and Sec. 5] (kernels evaluated pairwise in
    2PC); docs/design.md, "circuits".
"""

from __future__ import annotations

from collections.abc import Callable

from .builder import Builder, Int
from .ir import EVALUATOR, GARBLER, Circuit, CircuitError

__all__ = [
    "KERNELS",
    "build_kernel",
    "gini",
    "auc",
    "kendall",
    "variance",
    "collision",
    "pack_pair",
    "kernel_reference",
]

MIN_BITS, MAX_BITS = 8, 64


def _check(bits: int) -> None:
    if not isinstance(bits, int) or not MIN_BITS <= bits <= MAX_BITS:
        raise CircuitError(f"kernel width must be an integer in [{MIN_BITS}, {MAX_BITS}], got {bits!r}")


def _diff(x: Int, y: Int) -> Int:
    w = max(x.width, y.width) + 1
    return x.extend(w, True) - y.extend(w, True)


def gini_value(b: Builder, x: Int, y: Int) -> Int:
    """|x - y| as an unsigned value of the inputs' width (2w ANDs)."""
    d = _diff(x, y)
    return abs(d)[: x.width]


def auc_value(b: Builder, x: Int, y: Int) -> Int:
    """2[x > y] + [x == y] on 2 unsigned bits (2w - 1 ANDs)."""
    gt = x > y
    eq = x.eq(y)
    return b.concat(eq, gt)


def kendall_value(b: Builder, x1: Int, y1: Int, x2: Int, y2: Int) -> Int:
    """sign(x1 - x2) * sign(y1 - y2) in {-1, 0, 1}, 2-bit signed (4w + 2 ANDs)."""
    sx = _diff(x1, x2).sign()
    sy = _diff(y1, y2).sign()
    nz = b.and_(sx.bits[0], sy.bits[0])
    neg = b.and_(b.xor(sx.bits[1], sy.bits[1]), nz)
    return Int(b, [nz, neg], True)


def variance_value(b: Builder, x: Int, y: Int) -> Int:
    """floor((x - y)^2 / 2) on 2w + 1 unsigned bits (w^2 + w ANDs)."""
    w = x.width
    a = abs(_diff(x, y))[:w]  # |x - y| <= 2^w - 1 fits in w bits
    sq = a.square()  # 2w bits
    return (sq >> 1).extend(2 * w + 1)


def collision_value(b: Builder, x: Int, y: Int) -> Int:
    """[x == y] (w - 1 ANDs)."""
    return x.eq(y)


def _two_party(name: str, bits: int, signed: bool, body) -> Circuit:
    _check(bits)
    b = Builder(f"{name}{bits}{'s' if signed else 'u'}")
    x = b.input("x", bits, GARBLER, signed)
    y = b.input("y", bits, EVALUATOR, signed)
    b.output("out", body(b, x, y))
    return b.build()


def gini(bits: int = 32, signed: bool = False) -> Circuit:
    """Circuit of |x - y| (Gini mean difference kernel, Eq. 4)."""
    return _two_party("gini", bits, signed, gini_value)


def auc(bits: int = 32, signed: bool = False) -> Circuit:
    """Circuit of 2[x > y] + [x == y]: the AUC kernel of Eq. (7) scaled by 2 (ties count 1/2).

    ``x`` is the score of a positive example (garbler), ``y`` of a negative one (evaluator).
    """
    return _two_party("auc", bits, signed, auc_value)


def variance(bits: int = 32, signed: bool = False) -> Circuit:
    """Circuit of floor((x - y)^2 / 2), the variance kernel, on 2w + 1 bits."""
    return _two_party("variance", bits, signed, variance_value)


def collision(bits: int = 32, signed: bool = False) -> Circuit:
    """Circuit of [x == y] (collision probability / Renyi-2 entropy kernel)."""
    return _two_party("collision", bits, signed, collision_value)


def kendall(bits: int = 32, signed: bool = False) -> Circuit:
    """Circuit of sign(x1 - x2) sign(y1 - y2) (Kendall's tau-a kernel, Eq. 6).

    Each party's input group packs its pair: bits 0..w-1 hold x_i and bits
    w..2w-1 hold y_i, each as a w-bit (two's complement if ``signed``) field;
    see :func:`pack_pair`.
    """
    _check(bits)
    b = Builder(f"kendall{bits}{'s' if signed else 'u'}")
    p1 = b.input("x", 2 * bits, GARBLER)
    p2 = b.input("y", 2 * bits, EVALUATOR)

    def field(v: Int, k: int) -> Int:
        f = v[k * bits : (k + 1) * bits]
        return f.as_signed() if signed else f

    b.output("out", kendall_value(b, field(p1, 0), field(p1, 1), field(p2, 0), field(p2, 1)))
    return b.build()


def pack_pair(x: int, y: int, bits: int, signed: bool = False) -> int:
    """Pack a (x, y) pair into one ``kendall`` input value (x low, y high)."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    for v, n in ((x, "x"), (y, "y")):
        if not lo <= v <= hi:
            raise CircuitError(f"{n}={v} out of range for {bits}-bit {'signed' if signed else 'unsigned'} [{lo}, {hi}]")
    m = (1 << bits) - 1
    return (x & m) | ((y & m) << bits)


KERNELS: dict[str, Callable[..., Circuit]] = {
    "gini": gini,
    "auc": auc,
    "kendall": kendall,
    "variance": variance,
    "collision": collision,
}


def build_kernel(name: str, bits: int = 32, signed: bool = False) -> Circuit:
    """Build kernel ``name`` (one of :data:`KERNELS`) at ``bits`` width."""
    try:
        f = KERNELS[name]
    except KeyError:
        raise CircuitError(f"unknown kernel {name!r}; choose from {sorted(KERNELS)}") from None
    return f(bits, signed)


def kernel_reference(name: str, x, y):
    """Plain numpy/int reference of each kernel (for tests and plaintext baselines).

    For ``kendall``, ``x`` and ``y`` are (x_i, y_i) pairs (or pairs of arrays).
    """
    import numpy as np

    if name == "gini":
        return np.abs(np.asarray(x, dtype=object) - np.asarray(y, dtype=object))
    if name == "auc":
        x, y = np.asarray(x, dtype=object), np.asarray(y, dtype=object)
        return (2 * (x > y) + (x == y)).astype(np.int64)
    if name == "kendall":
        (x1, y1), (x2, y2) = x, y
        sign = np.frompyfunc(lambda v: (v > 0) - (v < 0), 1, 1)
        dx = np.asarray(x1, dtype=object) - np.asarray(x2, dtype=object)
        dy = np.asarray(y1, dtype=object) - np.asarray(y2, dtype=object)
        return sign(dx) * sign(dy)
    if name == "variance":
        d = np.asarray(x, dtype=object) - np.asarray(y, dtype=object)
        return d * d // 2
    if name == "collision":
        return (np.asarray(x, dtype=object) == np.asarray(y, dtype=object)).astype(np.int64)
    raise CircuitError(f"unknown kernel {name!r}")
