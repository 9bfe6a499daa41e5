"""Any degree-2 kernel for the 2PC protocol: a circuit-building function with a declared public range.

What it does
    A :class:`KernelSpec` wraps a function ``build(b, x, y) -> Int`` that
    computes h(x, y) with the circuit builder (:mod:`pairwise.circuits.builder`)
    from two grid indices (unsigned, ``w`` bits, 0 <= x, y <= S, where S is
    the public grid span (upper - lower) 10^decimals), and declares, from
    public knowledge only:

    * ``range``: (lo, hi) of h in circuit units, a pair or a function of the
      span S; the sensitivity, the noise scale and the interval come from it,
      never from the data;
    * ``symmetric``: whether h(x, y) = h(y, x);
    * the natural units: h_natural = h * ``scale`` * step^``power`` (step =
      10^-decimals; ``power`` 0 for indicators and signs, 1 for differences,
      2 for squares);
    * optionally ``values``: the 2 or 3 values h takes (k-ary randomized
      response then applies).

    :func:`kernel` is the decorator that makes one; :func:`load_kernel`
    resolves ``module:function`` (and :func:`check_kernel_path` that a
    spec's path imports back to it, as worker processes need).  :func:`verify_kernel` refuses a kernel whose
    circuit can leave its declared range (or its declared values, or is not
    symmetric as declared): exhaustively over the whole grid [0, S]^2 when
    (S + 1)^2 <= :data:`EXHAUSTIVE_LIMIT`, otherwise by the sound bound of the
    output word (every value the word can hold must be in the declared
    range).  The shipped :data:`VARIANCE` ((x - y)^2 / 2) and
    :data:`COLLISION` ([x = y]) are specs like any other.

Security model
    The kernel's circuit and declaration are public; the inputs are the two
    users' private grid values.  A kernel whose circuit could exceed its
    declared range would make the noise too small: that is what the check
    prevents.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from .builder import Builder, Int
from .ir import EVALUATOR, GARBLER, Circuit, CircuitError

__all__ = [
    "KernelSpec",
    "kernel",
    "load_kernel",
    "check_kernel_path",
    "verify_kernel",
    "kernel_circuit",
    "kernel_table",
    "VARIANCE",
    "COLLISION",
    "BUILTIN_SPECS",
    "EXHAUSTIVE_LIMIT",
    "KernelRangeError",
]

#: Largest number of grid pairs (S + 1)^2 checked exhaustively (plaintext, bit-sliced, in chunks).
EXHAUSTIVE_LIMIT = 1 << 22
_CHUNK = 1 << 16

RangeDecl = tuple[int, int] | Callable[[int], tuple[int, int]]


class KernelRangeError(CircuitError):
    """A kernel's circuit can produce a value its declaration does not allow (or its declaration is invalid)."""


@dataclass(frozen=True)
class KernelSpec:
    """A degree-2 kernel for ``pairwise.ustat(kernel=...)`` (see the module docstring)."""

    name: str
    build: Callable[[Builder, Int, Int], Int]
    range: RangeDecl
    symmetric: bool
    scale: Fraction = Fraction(1)
    power: int = 0
    values: tuple[int, ...] | None = None
    #: ``module:attribute`` a worker process imports the spec from (network mode); None: not importable
    path: str | None = None
    #: shipped kernels whose range holds by construction: beyond the exhaustive size the word bound is not required
    proven: bool = False

    def __post_init__(self) -> None:
        if not callable(self.build):
            raise KernelRangeError(f"kernel {self.name!r}: build must be a function (b, x, y) -> Int")
        if not isinstance(self.symmetric, bool):
            raise KernelRangeError(f"kernel {self.name!r}: declare symmetric=True or False")
        if self.power not in (0, 1, 2):
            raise KernelRangeError(f"kernel {self.name!r}: power must be 0, 1 or 2 (units step^power)")
        try:
            object.__setattr__(self, "scale", Fraction(self.scale))
        except (TypeError, ValueError):
            raise KernelRangeError(f"kernel {self.name!r}: scale must be a rational number") from None
        if self.scale <= 0:
            raise KernelRangeError(f"kernel {self.name!r}: scale must be positive")
        if self.values is not None:
            vals = tuple(int(v) for v in self.values)
            if len(vals) not in (2, 3) or len(set(vals)) != len(vals):
                raise KernelRangeError(
                    f"kernel {self.name!r}: values must be 2 or 3 distinct integers, got {self.values!r}"
                )
            object.__setattr__(self, "values", vals)

    def output_range(self, span: int) -> tuple[int, int]:
        """The declared (lo, hi) in circuit units for grid span ``span`` (validated: integers, lo < hi)."""
        r = self.range(span) if callable(self.range) else self.range
        try:
            lo, hi = (int(v) for v in r)
        except (TypeError, ValueError):
            raise KernelRangeError(f"kernel {self.name!r}: range must be two integers (lo, hi), got {r!r}") from None
        if (lo, hi) != tuple(r) or not lo < hi:
            raise KernelRangeError(f"kernel {self.name!r}: range must be integers lo < hi, got {r!r}")
        if self.values is not None and not (min(self.values) == lo and max(self.values) == hi):
            raise KernelRangeError(f"kernel {self.name!r}: values {self.values} do not span the range ({lo}, {hi})")
        return lo, hi

    def natural_factor(self, step: float) -> float:
        """Natural units per circuit unit: scale * step^power."""
        return float(self.scale) * float(step) ** self.power


def kernel(
    *,
    range: RangeDecl,
    symmetric: bool,
    scale: Fraction | int | float | str = 1,
    power: int = 0,
    values: Sequence[int] | None = None,
    name: str | None = None,
) -> Callable[[Callable], KernelSpec]:
    """Decorator: ``@kernel(range=(0, 1), symmetric=True)`` over ``def h(b, x, y): return ...``.

    The function gets the builder and the two grid indices (unsigned
    :class:`pairwise.circuits.builder.Int` of the circuit width) and returns
    h(x, y) as an ``Int``.  See :class:`KernelSpec` for the declaration.
    """

    def wrap(fn: Callable) -> KernelSpec:
        mod = getattr(fn, "__module__", None)
        qual = getattr(fn, "__qualname__", "")
        path = f"{mod}:{qual}" if mod and mod != "__main__" and "<" not in qual else None
        return KernelSpec(
            name or fn.__name__,
            fn,
            range,
            symmetric,
            Fraction(scale),
            power,
            None if values is None else tuple(values),
            path,
        )

    return wrap


def load_kernel(path: str) -> KernelSpec:
    """``module:attribute`` -> the :class:`KernelSpec` it names (for ``pairwise ustat --kernel``)."""
    mod, sep, attr = str(path).partition(":")
    if not sep or not mod or not attr:
        raise KernelRangeError(
            f"--kernel wants module:function (a @pairwise.circuits.kernel_spec.kernel function), got {path!r}"
        )
    try:
        obj = importlib.import_module(mod)
    except ImportError as exc:
        raise KernelRangeError(f"cannot import kernel module {mod!r}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise KernelRangeError(f"module {mod!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, KernelSpec):
        raise KernelRangeError(
            f"{path} is not a kernel: decorate it with @kernel(range=..., symmetric=...) "
            "(pairwise.circuits.kernel_spec)"
        )
    # the path it was loaded by names it; the decorator's guess (module:function) may name the plain function
    return obj if obj.path == path else replace(obj, path=path)


def check_kernel_path(spec: KernelSpec) -> None:
    """Refuse a spec whose ``path`` does not import back to the same kernel (worker processes import it)."""
    if spec.path is None:
        raise KernelRangeError(f"kernel {spec.name!r} has no module:function path")
    try:
        other = load_kernel(spec.path)
    except KernelRangeError as exc:
        raise KernelRangeError(f"{spec.path} does not name kernel {spec.name!r} ({exc})") from None
    same = (other.build, other.range, other.symmetric, other.scale, other.power, other.values)
    if same != (spec.build, spec.range, spec.symmetric, spec.scale, spec.power, spec.values):
        raise KernelRangeError(f"{spec.path} does not name kernel {spec.name!r}: it imports another kernel")


def kernel_circuit(spec: KernelSpec, bits: int) -> tuple[Circuit, Int]:
    """The kernel alone as a circuit (inputs ``x`` garbler, ``y`` evaluator, output ``out``)."""
    b = Builder(f"{spec.name}{bits}u")
    x = b.input("x", bits, GARBLER)
    y = b.input("y", bits, EVALUATOR)
    h = spec.build(b, x, y)
    if not isinstance(h, Int):
        raise KernelRangeError(f"kernel {spec.name!r} must return a builder Int, got {type(h).__name__}")
    b.output("out", h)
    return b.build(), h


def _bits_of(v: np.ndarray, width: int) -> np.ndarray:
    return ((v[:, None].astype(np.uint64) >> np.arange(width, dtype=np.uint64)) & np.uint64(1)).astype(bool)


def kernel_table(spec: KernelSpec, bits: int, span: int) -> np.ndarray:
    """h(x, y) for every x, y in 0..span ((span + 1)^2 <= EXHAUSTIVE_LIMIT), plaintext and bit-sliced: int64."""
    from .ir import bits_to_ints

    k = span + 1
    if k * k > EXHAUSTIVE_LIMIT:
        raise KernelRangeError(
            f"a grid of {k} points has {k * k} pairs, more than the {EXHAUSTIVE_LIMIT} checked exhaustively"
        )
    circuit, _ = kernel_circuit(spec, bits)
    g = circuit.outputs[0]
    if g.width > 63:
        raise KernelRangeError(
            f"kernel {spec.name!r}: a {g.width}-bit output is too wide to tabulate (at most 63 bits)"
        )
    xs = np.repeat(np.arange(k, dtype=np.int64), k)
    ys = np.tile(np.arange(k, dtype=np.int64), k)
    out = np.empty(k * k, dtype=np.int64)
    for s0 in range(0, k * k, _CHUNK):
        s1 = min(k * k, s0 + _CHUNK)
        res = circuit.evaluate_bits([_bits_of(xs[s0:s1], bits), _bits_of(ys[s0:s1], bits)])[0]
        out[s0:s1] = np.asarray(bits_to_ints(res, g.signed), dtype=np.int64)
    return out.reshape(k, k)


def verify_kernel(spec: KernelSpec, bits: int, span: int) -> tuple[tuple[int, int], np.ndarray | None, str]:
    """Check the declaration against the circuit; returns ((lo, hi), the table or None, how it was checked).

    Raises :class:`KernelRangeError` when the circuit can leave the declared
    range or values, or is not symmetric as declared.
    """
    lo, hi = spec.output_range(span)
    if (span + 1) ** 2 <= EXHAUSTIVE_LIMIT:
        t = kernel_table(spec, bits, span)
        tlo, thi = int(t.min()), int(t.max())
        if tlo < lo or thi > hi:
            raise KernelRangeError(
                f"kernel {spec.name!r} declares the range [{lo}, {hi}] but its circuit outputs values "
                f"in [{tlo}, {thi}] on the public grid 0..{span}: declare a range that contains them"
            )
        if spec.values is not None and not np.isin(t, spec.values).all():
            bad = sorted(set(np.unique(t).tolist()) - set(spec.values))[:5]
            raise KernelRangeError(f"kernel {spec.name!r} declares the values {spec.values} but outputs {bad}")
        if spec.symmetric and not np.array_equal(t, t.T):
            i, j = np.argwhere(t != t.T)[0]
            raise KernelRangeError(
                f"kernel {spec.name!r} is declared symmetric but h({i}, {j}) = {t[i, j]} and h({j}, {i}) = {t[j, i]}"
            )
        return (lo, hi), t, f"exhaustive over the {(span + 1) ** 2} grid pairs"
    if spec.proven:
        return (lo, hi), None, "by construction (a shipped kernel, also checked exhaustively on small grids)"
    circuit, h = kernel_circuit(spec, bits)
    w = h.width
    wlo, whi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if h.signed else (0, (1 << w) - 1)
    if spec.values is not None:
        raise KernelRangeError(
            f"kernel {spec.name!r}: its values cannot be checked on a grid of {span + 1} points "
            f"(more than {EXHAUSTIVE_LIMIT} pairs); lower the decimals or narrow the domain"
        )
    if not (lo <= wlo and whi <= hi):
        raise KernelRangeError(
            f"kernel {spec.name!r}: a grid of {span + 1} points is too large to check exhaustively, and its "
            f"{w}-bit {'signed' if h.signed else 'unsigned'} output word can hold [{wlo}, {whi}], beyond the declared "
            f"[{lo}, {hi}]: lower the decimals or narrow the domain (at most {int(EXHAUSTIVE_LIMIT**0.5)} grid "
            f"points), or declare the word's range"
        )
    return (lo, hi), None, f"sound bound: the {w}-bit output word"


# ----------------------------------------------------------------------------- shipped kernels


def _variance(b: Builder, x: Int, y: Int) -> Int:
    """(x - y)^2 exactly on 2w bits (the natural kernel (x - y)^2 / 2 is this times scale 1/2)."""
    w = max(x.width, y.width) + 1
    d = x.extend(w, True) - y.extend(w, True)
    return abs(d)[: x.width].square()


def _collision(b: Builder, x: Int, y: Int) -> Int:
    return x.eq(y)


#: (x - y)^2 / 2: its U-statistic is the sample variance (n - 1 denominator); circuit (x - y)^2, scale 1/2.
VARIANCE = KernelSpec(
    "variance",
    _variance,
    lambda span: (0, span * span),
    True,
    Fraction(1, 2),
    2,
    None,
    "pairwise.circuits.kernel_spec:VARIANCE",
    proven=True,
)
#: [x = y]: its U-statistic is the collision probability (Renyi-2 entropy = -log of it).
COLLISION = KernelSpec(
    "collision",
    _collision,
    (0, 1),
    True,
    Fraction(1),
    0,
    (0, 1),
    "pairwise.circuits.kernel_spec:COLLISION",
    proven=True,
)
BUILTIN_SPECS = {"variance": VARIANCE, "collision": COLLISION}
